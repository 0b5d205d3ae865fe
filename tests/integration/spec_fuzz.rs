//! Property tests of the spec parser: no input makes it panic.

use parlab::spec::validate::validate_partial;
use proptest::prelude::*;
use std::path::Path;

const VALID: &str = "name: fuzz\nkind: decode\nmodel: gpt2\nstrategy: [tensor, pipeline]\nworld: [1, 2]\nprompt: {length: 4, seed: 1}\nnew_tokens: 3\nexclude:\n  - {strategy: pipeline, world: 1}\nrequires: {gpus: 1}\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, .. ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = validate_partial(Path::new("fuzz.yaml"), &text);
    }

    #[test]
    fn yaml_shaped_text_never_panics(text in "([a-z_]{1,8}: ?(\\[[0-9a-z, -]{0,12}\\]|\\{[a-z0-9:, ]{0,16}\\}|[0-9a-zA-Z.-]{0,8})\n( {2}- [a-z]{1,5}: [0-9a-z]{1,4}\n)?){0,8}") {
        let _ = validate_partial(Path::new("fuzz.yaml"), &text);
    }

    #[test]
    fn mutated_valid_specs_never_panic(cut in 0usize..VALID.len(), insert in "[\\[\\]{}:,\\- a-z0-9\n]{0,6}") {
        let mut text = VALID.to_string();
        let cut = (0..=cut).rev().find(|i| text.is_char_boundary(*i)).unwrap_or(0);
        text.insert_str(cut, &insert);
        let _ = validate_partial(Path::new("fuzz.yaml"), &text);
        let _ = parlab::spec::locate::KeyIndex::new(&text).find("exclude[0].world");
    }
}
