//! Turns one spec file's YAML into an `Experiment`, collecting every problem on the way.

use super::locate::KeyIndex;
use super::problem::Problem;
use super::schema::*;
use serde_yaml::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Keys any experiment may have.
pub const COMMON_KEYS: &[&str] = &[
    "name",
    "kind",
    "description",
    "strategy",
    "world",
    "link",
    "threads",
    "repetitions",
    "warmup",
    "timeout",
    "requires",
    "launcher",
    "hostfile",
    "interface",
    "exclude",
    "claims",
];

/// Keys every kind may have that `kind: model` uses; the others (`threads`, `repetitions`,
/// `exclude`, `timeout`, …) it has no use for: its tables are arithmetic, nothing is launched.
const COMMON_FOR_MODEL: &[&str] = &["name", "kind", "description", "strategy", "world", "link", "claims"];

/// Keys that belong to one kind, with that kind.
const KIND_KEYS: &[(&str, &[Kind])] = &[
    ("model", &[Kind::Decode, Kind::Model, Kind::Advise]),
    ("weights_seed", &[Kind::Decode]),
    ("prompt", &[Kind::Decode]),
    ("new_tokens", &[Kind::Decode, Kind::Advise]),
    ("sequences", &[Kind::Decode, Kind::Model, Kind::Advise]),
    ("head", &[Kind::Decode]),
    ("overlap", &[Kind::Decode]),
    ("routing_skew", &[Kind::Decode]),
    ("decode_strategy", &[Kind::Decode]),
    ("context_blocks", &[Kind::Decode]),
    ("device", &[Kind::Decode]),
    ("step", &[Kind::Decode]),
    ("dtype", &[Kind::Decode, Kind::Model, Kind::Advise]),
    ("ops", &[Kind::Collectives]),
    ("sizes", &[Kind::Collectives]),
    ("iterations", &[Kind::Collectives, Kind::Dispatch]),
    ("buffer", &[Kind::Membw]),
    ("tokens", &[Kind::Dispatch]),
    ("top_k", &[Kind::Dispatch]),
    ("hidden", &[Kind::Dispatch]),
    ("devices", &[Kind::Model]),
    ("context", &[Kind::Model]),
    ("imbalance", &[Kind::Model]),
    ("machine", &[Kind::Advise]),
    ("prompt_tokens", &[Kind::Advise]),
    ("objective", &[Kind::Advise]),
    ("expect", &[Kind::Advise]),
    ("launches", &[Kind::Collectives, Kind::Membw, Kind::Decode, Kind::Dispatch]),
];

/// The most launches a spec may ask of one run.
pub const MAX_LAUNCHES: u32 = 100;

/// The keys whose list values the matrix expands ([`Axis`]'s names).
pub const AXES: &[&str] = &Axis::names();

/// The largest routing skew accepted either way (a logit bias of 20 sends every token to the
/// same experts; more only loses float precision).
pub const MAX_ROUTING_SKEW: f64 = 20.0;

/// Collects problems for one file, each located by key path.
pub struct Checker<'a> {
    file: &'a Path,
    index: KeyIndex,
    /// Problems found so far.
    pub problems: Vec<Problem>,
}

impl<'a> Checker<'a> {
    /// A checker for `file` whose text is `text`.
    pub fn new(file: &'a Path, text: &str) -> Self {
        Checker { file, index: KeyIndex::new(text), problems: Vec::new() }
    }

    /// Records a problem at `key`; a control character of the spec's in the key path or the
    /// message is written escaped (`\u{7}`), so a problem stays one printable line.
    pub fn report(&mut self, key: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            file: self.file.to_path_buf(),
            position: self.index.find(key),
            key: escape_controls(key),
            message: escape_controls(&message.into()),
        });
    }
}

/// `text` with each control character escaped as Rust writes it (`\t`, `\u{7}`), the rest as is.
fn escape_controls(text: &str) -> String {
    text.chars().map(|ch| if ch.is_control() { ch.escape_debug().to_string() } else { ch.to_string() }).collect()
}

/// Parses and validates one spec file's text.
pub fn validate(path: &Path, text: &str) -> Result<Experiment, Vec<Problem>> {
    match validate_partial(path, text) {
        (Some(exp), problems) if problems.is_empty() => Ok(exp),
        (_, problems) => Err(problems),
    }
}

/// Validates as far as possible: the experiment (defaults standing in for bad values)
/// whenever the kind is known, and every problem found.
pub fn validate_partial(path: &Path, text: &str) -> (Option<Experiment>, Vec<Problem>) {
    let (root, too_large) = match parse_past_large_numbers(path, text) {
        Ok(parsed) => parsed,
        Err(problems) => return (None, problems),
    };
    let (exp, mut problems) = validate_value(path, text, &root);
    // A number too large to read stood in as null; what was said of the null is not said.
    problems.retain(|p| !too_large.iter().any(|(key, _)| is_at_or_under(&p.key, key)));
    problems.extend(too_large.into_iter().map(|(_, problem)| problem));
    (exp, problems)
}

/// Whether the key path `key` is `at` or a key under it (`prompt.length` under `prompt`,
/// `world[1]` under `world`).
fn is_at_or_under(key: &str, at: &str) -> bool {
    key.strip_prefix(at).is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// Numbers too large to read, each with its key path and its problem.
type TooLarge = Vec<(String, Problem)>;

/// The spec's YAML, with each whole number too large to read (past 64 bits, which the reader
/// refuses for the whole file) replaced by null and reported with its key path, so the rest of
/// the file is still checked (a null is refused at its own key, never judged as a value by the
/// checks of a list); any other syntax error refuses the file, with the numbers found before.
fn parse_past_large_numbers(path: &Path, text: &str) -> Result<(Value, TooLarge), Vec<Problem>> {
    let mut text = text.to_string();
    let mut too_large: TooLarge = Vec::new();
    loop {
        let e = match serde_yaml::from_str(&text) {
            Ok(v) => return Ok((v, too_large)),
            Err(e) => e,
        };
        let problem = yaml_syntax_problem(path, &text, &e);
        let message = e.to_string();
        let key = number_too_large(&message).and_then(|_| message.split_once(": invalid type: integer `")).map(|(key, _)| key.to_string());
        let room = too_large.len() < MAX_LARGE_NUMBERS;
        let nulled = key.as_ref().filter(|_| room).and(problem.position).and_then(|at| null_scalar_at(&text, at));
        match (key, nulled) {
            (Some(key), Some(nulled)) => {
                text = nulled;
                too_large.push((key, problem));
            }
            _ => return Err(too_large.into_iter().map(|(_, p)| p).chain([problem]).collect()),
        }
    }
}

/// Most numbers too large to read that one file is checked past (each costs a parse).
const MAX_LARGE_NUMBERS: usize = 64;

/// `text` with the plain scalar starting at `at` (a number as the reader saw it: sign, base
/// prefix, digits) replaced by `null`, padded with spaces to the number's width so the columns
/// after it stay true; None where there is none, or it is `null` already.
fn null_scalar_at(text: &str, at: super::locate::Position) -> Option<String> {
    let mut lines: Vec<&str> = text.split('\n').collect();
    let line = lines.get(at.line.checked_sub(1)?)?;
    let start = line.char_indices().nth(at.column.checked_sub(1)?).map(|(i, _)| i)?;
    let len = line[start..].find(|ch: char| ch.is_whitespace() || ",]}#".contains(ch)).unwrap_or(line.len() - start);
    if len == 0 || &line[start..start + len] == "null" {
        return None;
    }
    let nulled = format!("{}{:<len$}{}", &line[..start], "null", &line[start + len..]);
    lines[at.line - 1] = &nulled;
    Some(lines.join("\n"))
}

/// [`validate_partial`] of a parsed spec.
fn validate_value(path: &Path, text: &str, root: &Value) -> (Option<Experiment>, Vec<Problem>) {
    let mut c = Checker::new(path, text);
    let merged = refuse_merge_keys(&mut c, root);
    let root = merged.as_ref().unwrap_or(root);
    let Value::Mapping(map) = &root else {
        c.report("", "a spec is a YAML mapping of keys (name:, kind:, ...); see the README's spec format");
        return (None, c.problems);
    };
    let kind = read_kind(&mut c, map);
    check_keys(&mut c, map, kind);
    if kind == Some(Kind::Model) {
        let why = "kind: model (its tables are arithmetic: nothing is launched, repeated, timed or excluded)";
        refuse_unused_keys(&mut c, map, COMMON_FOR_MODEL, why);
    }
    let exp = read_experiment(&mut c, path, text, map, kind.unwrap_or(Kind::Collectives));
    super::claims::read(&mut c, map, kind, &exp.name);
    (kind.map(|_| exp), c.problems)
}

/// YAML's merge key (`<<: *anchor`).
const MERGE_KEY: &str = "<<";

/// Reports every merge key of `root` (not supported: a spec says its keys where they apply);
/// with one, `root` merged, so what it merged in is not also called missing.
fn refuse_merge_keys(c: &mut Checker, root: &Value) -> Option<Value> {
    let mut paths = Vec::new();
    merge_key_paths(root, "", &mut paths);
    for path in &paths {
        c.report(path, "YAML merge keys (`<<: *anchor`) are not supported in specs; write the keys out where they apply");
    }
    let mut merged = root.clone();
    (!paths.is_empty() && merged.apply_merge().is_ok()).then_some(merged)
}

/// The key paths of the merge keys in `v` (under `at`), outermost first.
fn merge_key_paths(v: &Value, at: &str, out: &mut Vec<String>) {
    let join = |key: &str| if at.is_empty() { key.to_string() } else { format!("{at}.{key}") };
    match v {
        Value::Mapping(m) => {
            for (k, v) in m {
                let Some(key) = k.as_str() else { continue };
                if key == MERGE_KEY {
                    out.push(join(key));
                } else {
                    merge_key_paths(v, &join(key), out);
                }
            }
        }
        Value::Sequence(items) => items.iter().enumerate().for_each(|(i, v)| merge_key_paths(v, &format!("{at}[{i}]"), out)),
        Value::Tagged(t) => merge_key_paths(&t.value, at, out),
        _ => {}
    }
}

fn yaml_syntax_problem(path: &Path, text: &str, e: &serde_yaml::Error) -> Problem {
    let position = e.location().map(|l| super::locate::Position { line: l.line(), column: l.column() });
    let message = e.to_string();
    let message = message.split(" at line ").next().unwrap_or(&message).to_string();
    // The reader places a duplicate key at the start of its mapping: point at the second one.
    let position = position.and_then(|at| duplicate_key_position(text, &message, at)).or(position);
    if let Some(message) = number_too_large(&message) {
        return Problem { file: path.to_path_buf(), position, key: String::new(), message };
    }
    Problem { file: path.to_path_buf(), position, key: String::new(), message: format!("not valid YAML: {message}") }
}

/// Where the second `key:` of a "duplicate entry with key" message stands: the reader gives
/// the start of the mapping (`at`); its keys are the lines from there at that indentation,
/// until a line indented less ends it.
fn duplicate_key_position(text: &str, message: &str, at: super::locate::Position) -> Option<super::locate::Position> {
    let key = message.split_once("duplicate entry with key \"")?.1.split_once('"')?.0;
    let indent = at.column.checked_sub(1)?;
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    let is_key = |l: &str| l.trim_start().strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(':'));
    let content = |l: &&str| !l.trim().is_empty() && !l.trim_start().starts_with('#');
    let mapping = text.lines().enumerate().skip(at.line.checked_sub(1)?);
    let mut keys = mapping
        .filter(|(_, l)| content(l))
        .take_while(|(_, l)| indent_of(l) >= indent)
        .filter(|(_, l)| indent_of(l) == indent && is_key(l));
    let (line, _) = keys.nth(1)?;
    Some(super::locate::Position { line: line + 1, column: indent + 1 })
}

/// The YAML reader's wording for a whole number beyond 64 bits, said plainly:
/// `key: invalid type: integer `N` as u128, ...` becomes `key: N is too large ...`, and
/// `... as i128, ...` (a negative one) `key: N is too small ...`.
fn number_too_large(message: &str) -> Option<String> {
    let (key, rest) = message.split_once(": invalid type: integer `")?;
    let (number, tail) = rest.split_once('`')?;
    let bound = if tail.starts_with(" as u128") {
        format!("too large to read (at most {})", u64::MAX)
    } else if tail.starts_with(" as i128") {
        format!("too small to read (at least -2^63, {})", i64::MIN)
    } else {
        return None;
    };
    Some(format!("{key}: the whole number {number} is {bound}; see the key's allowed range in the README"))
}

fn read_kind(c: &mut Checker, map: &serde_yaml::Mapping) -> Option<Kind> {
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.name()).collect();
    match map.get("kind") {
        None => {
            c.report("kind", format!("missing; add `kind:` with one of {}", names.join(", ")));
            None
        }
        Some(Value::String(s)) => match Kind::ALL.iter().find(|k| k.name() == s) {
            Some(k) => Some(*k),
            None => {
                c.report("kind", unknown_choice(s, &names));
                None
            }
        },
        Some(v) => {
            c.report("kind", format!("expected one of {}, found {}", names.join(", "), describe(v)));
            None
        }
    }
}

/// Refuses a membw hostfile that names another host: each read is timed from the earliest
/// rank's clock reading, and two hosts' clocks are not one clock (its ranks would fail the run
/// at launch saying so; under srun, whose hosts are known only then, they still do).
fn membw_on_one_host(c: &mut Checker, hostfile: Option<&Path>) {
    let Some(text) = hostfile.and_then(|h| crate::files::read_text(h, crate::files::TEXT_LIMIT).ok()) else { return };
    let remote = crate::launch::hosts::remote_hosts(&text);
    if !remote.is_empty() {
        c.report(
            "hostfile",
            format!(
                "membw times every process's read against one clock, so its processes must share one host; this hostfile names {}: run membw on one host",
                remote.join(", ")
            ),
        );
    }
}

/// Reports each key every kind may have (`COMMON_KEYS`) that `map` sets and a kind of
/// arithmetic does not use (`used` lists those it does): "does not apply to {kind_and_why}".
pub fn refuse_unused_keys(c: &mut Checker, map: &serde_yaml::Mapping, used: &[&str], kind_and_why: &str) {
    for key in COMMON_KEYS.iter().filter(|k| !used.contains(k) && map.contains_key(**k)) {
        c.report(key, format!("does not apply to {kind_and_why}"));
    }
}

fn check_keys(c: &mut Checker, map: &serde_yaml::Mapping, kind: Option<Kind>) {
    let all: Vec<&str> = COMMON_KEYS.iter().copied().chain(KIND_KEYS.iter().map(|(k, _)| *k)).collect();
    for key in map.keys() {
        let Some(key) = key.as_str() else {
            c.report("", format!("keys are names, found {}", describe(key)));
            continue;
        };
        // Reported by `refuse_merge_keys`.
        if key == MERGE_KEY {
            continue;
        }
        if COMMON_KEYS.contains(&key) {
            continue;
        }
        match KIND_KEYS.iter().find(|(k, _)| *k == key) {
            Some((_, kinds)) => {
                if let Some(kind) = kind.filter(|k| !kinds.contains(k)) {
                    let owners: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                    c.report(key, format!("does not apply to kind {} (it belongs to {})", kind.name(), owners.join(", ")));
                }
            }
            None => c.report(key, unknown_key(key, &all)),
        }
    }
}

/// "unknown key" with the nearest valid key as the fix.
pub fn unknown_key(key: &str, valid: &[&str]) -> String {
    match nearest(key, valid) {
        Some(n) => format!("unknown key; did you mean `{n}`?"),
        None => format!("unknown key; valid keys are {}", valid.join(", ")),
    }
}

/// "unknown value" with the nearest valid value as the fix.
pub fn unknown_choice(value: &str, valid: &[&str]) -> String {
    unknown_choice_near(value, valid, nearest(value, valid))
}

/// The message for an unknown value, suggesting `near` (a valid name) when there is one.
pub fn unknown_choice_near(value: &str, valid: &[&str], near: Option<&str>) -> String {
    match near {
        Some(n) => format!("unknown value `{value}`; did you mean `{n}`? (one of {})", valid.join(", ")),
        None => format!("unknown value `{value}`; expected one of {}", valid.join(", ")),
    }
}

/// The valid name within a small edit distance of `word`, if any.
pub fn nearest<'v>(word: &str, valid: &[&'v str]) -> Option<&'v str> {
    valid
        .iter()
        .map(|v| (strsim::damerau_levenshtein(&word.to_ascii_lowercase(), v), *v))
        .filter(|(d, v)| *d <= 2.max(v.len() / 3))
        .min()
        .map(|(_, v)| v)
}

/// A short description of a YAML value for messages.
pub fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing (null)".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({})", super::fields::printable(s)),
        Value::Sequence(_) => "a list".into(),
        Value::Mapping(_) => "a mapping".into(),
        Value::Tagged(_) => "a tagged value".into(),
    }
}

fn read_experiment(c: &mut Checker, path: &Path, text: &str, map: &serde_yaml::Mapping, kind: Kind) -> Experiment {
    let fields = super::fields::Fields { map };
    let name = fields.name(c);
    let strategies = if kind == Kind::Advise { Vec::new() } else { fields.strategies(c, kind, default_strategies(kind)) };
    let models = fields.models(c, kind, path);
    let links = fields.links(c, kind);
    let launcher = fields.launcher(c);
    let mut e = Experiment {
        name,
        path: PathBuf::from(path),
        spec_digest: hex::encode(Sha256::digest(text.as_bytes())),
        models,
        weights_seed: fields.uint(c, "weights_seed", 0, super::fields::SEED),
        strategies,
        worlds: fields.uint_axis(c, "world", vec![default_world(kind)], super::fields::WORLD),
        links,
        threads: fields.threads(c),
        sequences: fields.uint_axis(c, "sequences", vec![1], super::fields::SEQUENCES),
        heads: fields.choice_axis(
            c,
            "head",
            &[("split", HeadPlacement::Split), ("replicated", HeadPlacement::Replicated)],
            HeadPlacement::Split,
        ),
        dtypes: fields.dtypes(c, kind),
        new_tokens: fields.new_tokens(c, kind),
        overlap: fields.uint_axis(c, "overlap", vec![0], super::fields::OVERLAP),
        routing_skew: fields.number_axis(c, "routing_skew", MAX_ROUTING_SKEW),
        decode_strategies: fields.choice_axis(
            c,
            "decode_strategy",
            &[("rank0", DecodeLayout::Rank0), ("tensor", DecodeLayout::Tensor)],
            DecodeLayout::Rank0,
        ),
        context_blocks: fields.choice_axis(
            c,
            "context_blocks",
            &[("contiguous", ContextBlocks::Contiguous), ("zigzag", ContextBlocks::Zigzag)],
            ContextBlocks::Contiguous,
        ),
        devices: fields.choice_axis(c, "device", &[("cpu", Device::Cpu), ("cuda", Device::Cuda)], Device::Cpu),
        steps: fields.choice_axis(c, "step", &[("eager", StepMode::Eager), ("graph", StepMode::Graph)], StepMode::Eager),
        buffers: fields.buffers(c),
        repetitions: fields.uint(c, "repetitions", default_repetitions(kind), super::fields::REPEATS),
        warmup: fields.uint(c, "warmup", default_warmup(kind), super::fields::WARMUP),
        launches: fields.uint(c, "launches", 1, super::fields::LAUNCHES),
        timeout_s: fields.timeout(c),
        requires: fields.requires(c),
        launcher,
        hostfile: fields.hostfile(c, path, launcher),
        interface: fields.interface(c),
        // A run of arithmetic has no matrix to leave points out of (`exclude:` is refused).
        exclude: if matches!(kind, Kind::Model | Kind::Advise) { Vec::new() } else { fields.exclude(c) },
        params: kind_params(c, &fields, kind),
    };
    if kind == Kind::Membw {
        membw_on_one_host(c, e.hostfile.as_deref());
    }
    if kind == Kind::Advise {
        // A question with a problem is left out, so expansion asks no half-read question (one
        // whose only problems are in `expect:` is still asked, its layouts checked).
        let (params, question_whole) = super::advise::params(c, map, &e);
        e.params = KindParams::Advise(question_whole.then_some(params));
    }
    e
}

/// The kind's own keys (an advice's are read once the axes it shares are: `advise::params`).
fn kind_params(c: &mut Checker, fields: &super::fields::Fields, kind: Kind) -> KindParams {
    match kind {
        Kind::Collectives => KindParams::Collectives(fields.collective_params(c)),
        Kind::Membw => KindParams::Membw,
        Kind::Decode => KindParams::Decode(fields.decode_params(c)),
        Kind::Dispatch => KindParams::Dispatch(fields.dispatch_params(c)),
        Kind::Model => KindParams::Model(fields.model_params(c)),
        Kind::Advise => KindParams::Advise(None),
    }
}

/// The strategies of a spec of `kind` that sets no `strategy:` (a decode spec must set one).
pub(super) fn default_strategies(kind: Kind) -> Vec<Strategy> {
    match kind {
        Kind::Dispatch => vec![Strategy::Expert],
        Kind::Model => Kind::Model.strategies().to_vec(),
        _ => vec![Strategy::Data],
    }
}

/// The world of a spec of `kind` that sets no `world:`.
pub(super) fn default_world(kind: Kind) -> u32 {
    match kind {
        Kind::Collectives | Kind::Dispatch => 2,
        _ => 1,
    }
}

fn default_repetitions(kind: Kind) -> u32 {
    match kind {
        Kind::Collectives | Kind::Dispatch | Kind::Model | Kind::Advise => 1,
        Kind::Membw => 5,
        Kind::Decode => 3,
    }
}

fn default_warmup(kind: Kind) -> u32 {
    match kind {
        Kind::Collectives | Kind::Dispatch => 5,
        Kind::Model | Kind::Advise => 0,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<Problem> {
        validate_partial(Path::new("spec.yaml"), text).1
    }

    #[test]
    fn control_characters_of_the_spec_are_printed_escaped() {
        let found = problems("name: x\nkind: membw\n\"a\\x07b\": 1\nworld: \"x\\ty\"\n");
        let lines: Vec<String> = found.iter().map(Problem::to_string).collect();
        assert!(lines.iter().all(|l| !l.chars().any(char::is_control)), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("a\\u{7}b: unknown key")), "{lines:?}");
        assert!(lines.iter().any(|l| l.contains("found a string (\"x\\ty\")")), "{lines:?}");
    }

    #[test]
    fn a_number_below_64_bits_is_said_plainly_and_the_rest_still_checked() {
        let found: Vec<String> =
            problems("name: x\nkind: membw\nwarmup: -99999999999999999999999\nrepetitons: 2\n").iter().map(Problem::to_string).collect();
        assert_eq!(found.len(), 2, "{found:?}");
        let small = "3:9: warmup: the whole number -99999999999999999999999 is too small to read (at least -2^63";
        assert!(found.iter().any(|p| p.contains(small)), "{found:?}");
        assert!(found.iter().any(|p| p.contains("4:1: repetitons: unknown key")), "{found:?}");
    }

    #[test]
    fn numbers_too_large_on_one_line_keep_their_own_columns() {
        let huge = "99999999999999999999999";
        let found = problems(&format!("name: x\nkind: membw\nworld: [{huge}, 2, {huge}]\n"));
        let columns: Vec<usize> = found.iter().filter_map(|p| p.position).map(|p| p.column).collect();
        assert_eq!(columns, [9, 9 + huge.len() + 5], "{found:?}");
    }

    #[test]
    fn a_merge_key_is_refused_as_such_and_what_it_merges_is_not_called_missing() {
        let found = problems("base: &b\n  kind: membw\n  name: x\n<<: *b\n");
        let lines: Vec<String> = found.iter().map(Problem::to_string).collect();
        assert!(lines.iter().any(|l| l.contains("4:1: <<: YAML merge keys (`<<: *anchor`) are not supported")), "{lines:?}");
        assert!(!lines.iter().any(|l| l.contains("missing")), "{lines:?}");
        let nested = problems("name: x\nkind: membw\nworld: [1, 2]\nexclude:\n  - <<: {world: 2}\n");
        assert!(nested.iter().any(|p| p.key == "exclude[0].<<"), "{nested:?}");
    }
}
