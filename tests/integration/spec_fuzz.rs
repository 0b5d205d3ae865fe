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

/// What a numeric key accepts: whole numbers from `min` to `max` (`step`: multiples of it), or
/// seconds in (0, max].
#[derive(Debug, Clone, Copy)]
enum Accepts {
    Whole { min: i128, max: i128, step: i128 },
    Seconds { max: f64 },
}

const fn whole(min: i128, max: i128) -> Accepts {
    Accepts::Whole { min, max, step: 1 }
}

const U32: i128 = u32::MAX as i128;

/// Each numeric key in a spec that is otherwise valid (`{v}` is the value), with what it accepts
/// there (its documented range, narrowed by the model: GPT-2 holds 1024 positions and 50257 ids).
const KEYS: &[(&str, &str, Accepts)] = &[
    ("world", "kind: collectives\nworld: {v}\n", whole(1, 65_536)),
    ("iterations", "kind: collectives\niterations: {v}\n", whole(1, 1_000_000)),
    ("warmup", "kind: collectives\nwarmup: {v}\n", whole(0, 1_000_000)),
    ("repetitions", "kind: membw\nrepetitions: {v}\n", whole(1, 1_000_000)),
    ("threads", "kind: membw\nthreads: {v}\n", whole(1, 1_024)),
    ("timeout", "kind: membw\ntimeout: {v}\n", Accepts::Seconds { max: 604_800.0 }),
    ("buffer", "kind: membw\nbuffer: {v}\n", Accepts::Whole { min: 4, max: u64::MAX as i128, step: 4 }),
    ("requires.cores", "kind: membw\nrequires: {cores: {v}}\n", whole(1, U32)),
    ("new_tokens", "kind: decode\nmodel: gpt2\nstrategy: data\nprompt: {length: 4, seed: 1}\nnew_tokens: {v}\n", whole(2, 1_020)),
    ("sequences", "kind: decode\nmodel: gpt2\nstrategy: data\nprompt: {length: 4, seed: 1}\nsequences: {v}\n", whole(1, 65_536)),
    ("overlap", "kind: decode\nmodel: gpt2\nstrategy: tensor\nworld: 2\nprompt: {length: 4, seed: 1}\noverlap: {v}\n", whole(0, 64)),
    ("prompt.length", "kind: decode\nmodel: gpt2\nstrategy: data\nnew_tokens: 4\nprompt: {length: {v}}\n", whole(1, 1_020)),
    ("prompt.tokens", "kind: decode\nmodel: gpt2\nstrategy: data\nnew_tokens: 4\nprompt: {tokens: [{v}]}\n", whole(0, 50_256)),
    (
        "prompt.seed",
        "kind: decode\nmodel: gpt2\nstrategy: data\nnew_tokens: 4\nprompt: {length: 4, seed: {v}}\n",
        whole(0, u64::MAX as i128),
    ),
    (
        "weights_seed",
        "kind: decode\nmodel: gpt2\nstrategy: data\nnew_tokens: 4\nprompt: {length: 4}\nweights_seed: {v}\n",
        whole(0, u64::MAX as i128),
    ),
    // Each up to 2^32 - 1 alone, but tokens x top_k x hidden at most 2^31 - 1 (MPI's count of an
    // all-to-all); the others at their defaults: tokens up to 512, top_k 2, hidden 768.
    ("tokens", "kind: dispatch\ntokens: {v}\n", whole(1, (i32::MAX / (2 * 768)) as i128)),
    ("top_k", "kind: dispatch\ntop_k: {v}\n", whole(1, (i32::MAX / (512 * 768)) as i128)),
    ("hidden", "kind: dispatch\nhidden: {v}\n", whole(1, (i32::MAX / (512 * 2)) as i128)),
];

/// The edge values of the issue: 0, 1, 2^31, 2^32, 2^63, 2^64, 1e300, negative, NaN, infinity.
const EDGES: &[&str] =
    &["0", "1", "2", "2147483648", "4294967296", "9223372036854775808", "18446744073709551616", "1e300", "-1", ".nan", ".inf", "-.inf"];

/// Whether `text`, as YAML, is a value `accepts` takes.
fn honourable(text: &str, accepts: Accepts) -> bool {
    match accepts {
        Accepts::Whole { min, max, step } => text.parse::<i128>().is_ok_and(|n| n >= min && n <= max && n % step == 0),
        Accepts::Seconds { max } => text.parse::<f64>().is_ok_and(|s| s > 0.0 && s <= max),
    }
}

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::sample::select(EDGES).prop_map(str::to_string),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
        (0u32..70_000).prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|x| format!("{x:?}")),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, .. ProptestConfig::default() })]

    /// Validation never panics, and never plans a value it cannot honour: whatever it accepts is
    /// in the key's range and reaches the plan unchanged (not dropped, wrapped or truncated).
    #[test]
    fn numeric_keys_are_refused_or_planned_exactly(key in 0..KEYS.len(), v in value()) {
        let (name, template, accepts) = KEYS[key];
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("edge.yaml");
        std::fs::write(&file, format!("name: edge\n{}", template.replace("{v}", &v))).unwrap();
        match parlab::spec::load_suite(&[file]) {
            Ok(runs) => {
                prop_assert!(honourable(&v, accepts), "{name}: {v} was accepted, outside {accepts:?}");
                prop_assert!(!runs.is_empty(), "{name}: {v} planned no run");
                if let Accepts::Whole { .. } = accepts {
                    let plan = serde_json::to_string(&runs).unwrap();
                    prop_assert!(plan.contains(&v), "{name}: {v} is not in the plan: {plan}");
                }
            }
            Err(problems) => prop_assert!(!problems.0.is_empty()),
        }
    }
}

#[test]
fn every_edge_value_of_every_numeric_key_is_refused_or_planned_exactly() {
    for (name, template, accepts) in KEYS {
        for v in EDGES {
            let dir = tempfile::tempdir().unwrap();
            let file = dir.path().join("edge.yaml");
            std::fs::write(&file, format!("name: edge\n{}", template.replace("{v}", v))).unwrap();
            let planned = parlab::spec::load_suite(&[file]);
            // A value the spec honours may still need more memory than this machine has: that
            // refusal alone (`spec::resources`) counts as planned exactly, elsewhere it would be.
            let for_memory_only = planned.as_ref().err().is_some_and(|p| p.0.iter().all(|x| x.message.contains("of memory (")));
            assert_eq!(
                planned.is_ok() || for_memory_only,
                honourable(v, *accepts),
                "{name}: {v}: {:?}",
                planned.err().map(|p| p.to_string())
            );
        }
    }
}
