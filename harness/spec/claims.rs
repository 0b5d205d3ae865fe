//! `claims:` in a spec: a figure of a selection of runs, optionally against a reference
//! selection, under a rule with a tolerance. Validated like every other key (unknown
//! figures, rules and axes are problems with their line and the nearest valid name) and
//! evaluated into findings by `findings::claims`.

use super::schema::{Kind, Op};
use super::validate::{describe, nearest, unknown_choice_near, unknown_key, Checker};
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;

/// Keys a claim may have.
pub const CLAIM_KEYS: &[&str] = &["id", "claim", "figure", "select", "reference", "rule", "tolerance", "value"];

/// The ids of parlab's built-in findings that take no suffix; a claim may not take one.
pub const BUILT_IN_FINDING_IDS: &[&str] = &[
    "exactness",
    "shared-memory-bandwidth",
    "alpha-beta",
    "regimes",
    "pipeline",
    "overlap-hides-communication",
    "expert-imbalance-sets-the-pace",
    "context-ring-moves-what-it-must",
    "kv-head-cap",
    "precision-audit",
    "break-even",
    "cost-model-predicts-splits",
];

/// The families of built-in finding ids named `<family><link, strategy or experiment>` (and the
/// stand-in of an invalid claim, `claims-<spec>`); a claim's id may not start with one.
pub const BUILT_IN_FINDING_FAMILIES: &[&str] = &["exactness-", "alpha-beta-", "regimes-", "break-even-", "advice-", "claims-"];

/// Whether `id` is, or could be, a built-in finding's id.
pub fn is_built_in_finding_id(id: &str) -> bool {
    BUILT_IN_FINDING_IDS.contains(&id) || BUILT_IN_FINDING_FAMILIES.iter().any(|family| id.starts_with(family))
}

/// Axes a selection may name.
pub const SELECT_AXES: &[&str] = &["world", "strategy", "head", "sequences", "link", "threads", "op", "size", "buffer"];

/// How a claim compares its selection with the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// The selection's median is below the reference's (within the tolerance).
    Less,
    /// The selection's median is above the reference's (within the tolerance).
    Greater,
    /// The ratio of the medians is within the tolerance of 1.
    RatioWithin,
    /// The selected runs generate the reference's tokens.
    EqualTokens,
}

crate::named!(Rule { Less => "less", Greater => "greater", RatioWithin => "ratio_within", EqualTokens => "equal_tokens" });

/// Rules a claim may use.
pub const RULES: &[&str] = &Rule::names();

/// Figures, with the kinds whose manifests carry them.
pub const FIGURES: &[(&str, &[Kind])] = &[
    ("step", &[Kind::Decode]),
    ("comm", &[Kind::Decode]),
    ("compute", &[Kind::Decode]),
    ("prefill", &[Kind::Decode]),
    ("tokens_per_s", &[Kind::Decode]),
    ("tokens", &[Kind::Decode]),
    ("aggregate_bandwidth", &[Kind::Membw]),
    ("per_process_bandwidth", &[Kind::Membw]),
    ("stream_aggregate_bandwidth", &[Kind::Membw]),
    ("time", &[Kind::Collectives, Kind::Dispatch]),
    ("busbw", &[Kind::Collectives]),
    ("algbw", &[Kind::Collectives]),
];

/// One declared claim.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    /// Identifier (default `<experiment>-claim-<n>`).
    pub id: String,
    /// The claim in one sentence (default: the rule in words).
    pub text: Option<String>,
    /// The figure compared.
    pub figure: String,
    /// Axis values selecting the runs (and rows) measured.
    pub select: BTreeMap<String, String>,
    /// What the selection is compared with.
    pub against: Baseline,
    /// How the selection is compared.
    pub rule: Rule,
    /// Relative tolerance (default 0).
    pub tolerance: f64,
}

/// What a claim's selection is compared with: other runs, or a fixed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Baseline {
    /// Axis values selecting the reference runs (`reference:`).
    Runs(BTreeMap<String, String>),
    /// A fixed value in SI units (`value:`; rules less and greater only).
    Value(f64),
}

impl Baseline {
    /// The reference selection, where the baseline is runs.
    pub fn runs(&self) -> Option<&BTreeMap<String, String>> {
        match self {
            Baseline::Runs(axes) => Some(axes),
            Baseline::Value(_) => None,
        }
    }
}

/// Reads and checks `claims:` of a spec's top-level mapping (absent: none).
pub fn read(c: &mut Checker, map: &Mapping, kind: Option<Kind>, experiment: &str) -> Vec<Claim> {
    match map.get("claims") {
        None => Vec::new(),
        Some(Value::Sequence(items)) => {
            let claims: Vec<(usize, Claim)> = items
                .iter()
                .enumerate()
                .filter_map(|(i, v)| Some((i, one(c, &format!("claims[{i}]"), v, kind, experiment, i, map)?)))
                .collect();
            unique_ids(c, &claims);
            if !claims.is_empty() {
                unselectable_axes(c, map);
            }
            claims.into_iter().map(|(_, claim)| claim).collect()
        }
        Some(v) => {
            c.report("claims", format!("expected a list of claims (figure:, select:, rule:, ...), found {}", describe(v)));
            Vec::new()
        }
    }
}

/// Reports an axis a claim cannot select that the spec gives several values (`dtype: [float32,
/// bfloat16]`, two models, `overlap: [0, 4]`): a claim's sides pool every run they match, so
/// its median would mix the values' runs and its tokens compare one dtype's with another's.
fn unselectable_axes(c: &mut Checker, spec: &Mapping) {
    for axis in super::schema::Axis::ALL.iter().map(|a| a.name()).filter(|a| !SELECT_AXES.contains(a)) {
        let Some(Value::Sequence(values)) = spec.get(axis) else { continue };
        let distinct: std::collections::BTreeSet<String> = values.iter().map(super::expand::axis_text).collect();
        if distinct.len() > 1 {
            c.report(
                axis,
                format!(
                    "takes {} values, and a claim cannot select by `{axis}` (it selects by {}): each claim's sides would pool the runs of every value; give `{axis}` one value here, or move the claims to an experiment of each",
                    distinct.len(),
                    SELECT_AXES.join(", ")
                ),
            );
        }
    }
}

/// Reports a claim id used twice in one spec (the register would show two findings of one name).
fn unique_ids(c: &mut Checker, claims: &[(usize, Claim)]) {
    let mut seen = BTreeMap::new();
    for (i, claim) in claims {
        if let Some(first) = seen.insert(claim.id.as_str(), *i) {
            c.report(
                &format!("claims[{i}].id"),
                format!("`{}` is already the id of claims[{first}]; give each claim its own id", claim.id),
            );
        }
    }
}

/// Reports a selected value the experiment does not hold (`world: 3` of worlds 1, 2, 4;
/// `strategy: pipeline` in a tensor spec; `world: 4` of a spec that sets no world, whose runs
/// have the kind's default; an `op` or `size` the sweep does not measure): the selection would
/// match no run.
fn off_axis(c: &mut Checker, key: &str, axes: &BTreeMap<String, String>, spec: &Mapping, kind: Option<Kind>) {
    for (axis, want) in axes {
        let Some(held) = held_values(axis, axes, spec, kind) else { continue };
        // A size as the rows record it, in bytes however the claim writes it.
        let wanted = if axis == "size" { crate::units::parse_bytes(want).map_or(want.clone(), |b| b.to_string()) } else { want.clone() };
        if !held.values.contains(&wanted) {
            let default = if held.declared { String::new() } else { format!(", the default: the spec sets no `{}:`", held.key) };
            c.report(
                &format!("{key}.{axis}"),
                format!(
                    "`{want}` is not among this spec's {axis} values ({}{default}{}): it selects no run",
                    held.values.join(", "),
                    held.recorded
                ),
            );
        }
    }
}

/// The values an experiment's runs hold on a selectable axis, as they record them.
struct Held {
    /// The spec key that sets them (`ops` for `op`, `sizes` for `size`).
    key: &'static str,
    /// Whether the spec sets them (else they are the kind's default).
    declared: bool,
    /// The values.
    values: Vec<String>,
    /// How the runs record them where that is not as the spec writes them (empty otherwise).
    recorded: String,
}

/// The values the expanded experiment holds on `axis`: the spec's own, or the kind's default
/// where it sets none. None where they are not judged: `threads: auto` or `all` (resolved per
/// run), an axis whose default the kind lacks (a decode spec must set `strategy:`), a `head:`
/// the spec does not set (a layout that places no head matches any), `op` and `size` of a kind
/// whose rows have none, or a kind that is not known.
fn held_values(axis: &str, selected: &BTreeMap<String, String>, spec: &Mapping, kind: Option<Kind>) -> Option<Held> {
    match axis {
        "op" | "size" => swept(axis, selected, spec, kind?),
        // A membw buffer off the axis is left to the findings (no run matches it).
        "buffer" => None,
        _ => on_layout_axis(super::schema::Axis::from_name(axis)?, spec, kind),
    }
}

/// The ops or the row sizes (`size`, in bytes) a collectives sweep or a dispatch measures; a
/// collectives row's size as the runs record it, for the ops and worlds the claim's side
/// `selected` can match.
fn swept(axis: &str, selected: &BTreeMap<String, String>, spec: &Mapping, kind: Kind) -> Option<Held> {
    let read = super::fields::Fields { map: spec };
    // Problems of these keys are the spec's own, reported where it is validated.
    let mut scratch = Checker::new(std::path::Path::new(""), "");
    let (key, values): (&'static str, Vec<String>) = match (axis, kind) {
        ("op", Kind::Collectives) => ("ops", read.collective_params(&mut scratch).ops.iter().map(|o| o.name().to_string()).collect()),
        ("size", Kind::Collectives) => {
            let ops = read.collective_params(&mut scratch).ops;
            let ops: Vec<Op> = match selected.get("op").and_then(|o| Op::from_name(o)) {
                Some(op) => vec![op],
                None => ops,
            };
            // The selected world where the spec holds it (one it does not is refused as such),
            // else every world of the spec.
            let held: Vec<u32> =
                on_layout_axis(super::schema::Axis::World, spec, Some(kind))?.values.iter().filter_map(|w| w.parse().ok()).collect();
            let worlds: Vec<u32> = match selected.get("world").and_then(|w| w.parse().ok()).filter(|w| held.contains(w)) {
                Some(w) => vec![w],
                None => held,
            };
            if worlds.is_empty() {
                return None;
            }
            let mut recorded = Vec::new();
            for size in read.sizes(&mut scratch) {
                for &op in &ops {
                    recorded.extend(worlds.iter().map(|&w| recorded_bytes(op, size, w)));
                }
            }
            recorded.sort_unstable();
            recorded.dedup();
            let names: Vec<&str> = ops.iter().map(|o| o.name()).collect();
            let worlds: Vec<String> = worlds.iter().map(u32::to_string).collect();
            let recorded_as = format!(
                ", in bytes as {} records them at world {}: whole f32s, and for all-gather, reduce-scatter and all-to-all whole chunks per rank times the world",
                names.join(", "),
                worlds.join(", ")
            );
            let values = recorded.iter().map(u64::to_string).collect();
            return Some(Held { key: "sizes", declared: spec.contains_key("sizes"), values, recorded: recorded_as });
        }
        ("size", Kind::Dispatch) => {
            let d = read.dispatch_params(&mut scratch);
            ("tokens", d.tokens.iter().map(|&t| (d.elements(t) * 4).to_string()).collect())
        }
        _ => return None,
    };
    Some(Held { key, declared: spec.contains_key(key), values, recorded: String::new() })
}

/// A collectives row's size as the runs record it (`rank::collectives::Case::bytes`): `size`
/// rounded down to whole f32s (at least one), and for the chunked ops (all-gather,
/// reduce-scatter, all-to-all) each rank's chunk of it, rounded down the same way, times `world`.
fn recorded_bytes(op: Op, size: u64, world: u32) -> u64 {
    let count = (size / 4).max(1);
    let floats = match op {
        Op::AllGather | Op::ReduceScatter | Op::AllToAll => (count / u64::from(world.max(1))).max(1) * u64::from(world.max(1)),
        _ => count,
    };
    floats * 4
}

/// The values of a layout axis (`world`, `strategy`, `head`, `sequences`, `link`, `threads`):
/// as the spec sets them, else the kind's default.
fn on_layout_axis(axis: super::schema::Axis, spec: &Mapping, kind: Option<Kind>) -> Option<Held> {
    use super::schema::Axis;
    let key = axis.name();
    if let Some(declared) = spec.get(key) {
        // A count axis's values as runs record them (`02` is 2); `threads: auto` resolves per run.
        let values: Vec<String> = super::fields::axis_values(axis, declared).into_iter().map(|v| count(&v, key).unwrap_or(v)).collect();
        if axis == Axis::Threads && values.iter().any(|v| v.parse::<u32>().is_err()) {
            return None;
        }
        return Some(Held { key, declared: true, values, recorded: String::new() });
    }
    let kind = kind?;
    let values = match axis {
        Axis::World => vec![super::validate::default_world(kind).to_string()],
        Axis::Strategy if matches!(kind, Kind::Decode | Kind::Advise) => return None,
        Axis::Strategy => super::validate::default_strategies(kind).iter().map(|s| s.name().to_string()).collect(),
        Axis::Sequences => vec!["1".to_string()],
        Axis::Link if matches!(kind, Kind::Model | Kind::Advise) => return None,
        Axis::Link => vec![super::link::Link::MpiShm.name().to_string()],
        _ => return None,
    };
    Some(Held { key, declared: false, values, recorded: String::new() })
}

fn one(c: &mut Checker, key: &str, v: &Value, kind: Option<Kind>, experiment: &str, i: usize, spec: &Mapping) -> Option<Claim> {
    let Value::Mapping(m) = v else {
        c.report(key, format!("a claim is a mapping (figure:, select:, rule:, ...), found {}", describe(v)));
        return None;
    };
    let before = c.problems.len();
    for k in m.keys() {
        match k.as_str() {
            Some(k) if CLAIM_KEYS.contains(&k) => {}
            Some(k) => c.report(&format!("{key}.{k}"), unknown_key(k, CLAIM_KEYS)),
            None => c.report(key, format!("keys are names, found {}", describe(k))),
        }
    }
    let figure = figure(c, key, m, kind);
    let rule = word(c, &format!("{key}.rule"), m.get("rule"), RULES).and_then(|w| Rule::from_name(&w));
    let select = selection(c, &format!("{key}.select"), m.get("select")).unwrap_or_default();
    let reference = m.get("reference").and_then(|r| selection(c, &format!("{key}.reference"), Some(r)));
    let value = m.get("value").and_then(|v| number(c, &format!("{key}.value"), v));
    let tolerance = m.get("tolerance").and_then(|v| number(c, &format!("{key}.tolerance"), v)).unwrap_or(0.0);
    let missing = match rule {
        Some(Rule::Less | Rule::Greater) => reference.is_none() && value.is_none(),
        Some(Rule::RatioWithin | Rule::EqualTokens) => reference.is_none(),
        None => false,
    };
    if missing {
        c.report(
            &format!("{key}.rule"),
            "this rule compares with a reference; add `reference:` (axis values) or, for less/greater, `value:`",
        );
    }
    if rule == Some(Rule::EqualTokens) && figure.as_deref().is_some_and(|f| f != "tokens") {
        c.report(&format!("{key}.figure"), "rule equal_tokens compares `tokens`; set `figure: tokens`");
    }
    if rule.is_some_and(|r| r != Rule::EqualTokens) && figure.as_deref() == Some("tokens") {
        c.report(&format!("{key}.rule"), "`tokens` are compared by rule equal_tokens only (token ids have no ratio)");
    }
    comparable(c, key, rule, &Against { select: &select, reference: reference.as_ref(), value, tolerance });
    for (side, axes) in [("select", Some(&select)), ("reference", reference.as_ref())] {
        axes.into_iter().for_each(|axes| off_axis(c, &format!("{key}.{side}"), axes, spec, kind));
    }
    let id = claim_id(c, key, m.get("id"));
    if c.problems.len() > before {
        return None;
    }
    let against = reference.map(Baseline::Runs).or(value.map(Baseline::Value))?;
    Some(Claim {
        id: id.unwrap_or_else(|| format!("{experiment}-claim-{}", i + 1)),
        text: m.get("claim").and_then(Value::as_str).map(str::to_string),
        figure: figure?,
        select,
        against,
        rule: rule?,
        tolerance,
    })
}

/// What a claim compares its selection with, and how loosely.
struct Against<'a> {
    select: &'a BTreeMap<String, String>,
    reference: Option<&'a BTreeMap<String, String>>,
    value: Option<f64>,
    tolerance: f64,
}

/// Reports a comparison that cannot decide anything: a reference equal to the selection, both
/// a reference and a value, a value of 0 (no ratio), or a `greater` tolerance of 1 or more
/// (every positive ratio would hold).
fn comparable(c: &mut Checker, key: &str, rule: Option<Rule>, a: &Against) {
    if a.reference.is_some_and(|r| r == a.select) {
        c.report(
            &format!("{key}.reference"),
            "the reference selects the same runs as `select`: the claim would compare them with themselves",
        );
    }
    if a.reference.is_some() && a.value.is_some() {
        c.report(&format!("{key}.value"), "give `reference:` (axis values) or `value:`, not both");
    }
    if a.value == Some(0.0) {
        c.report(&format!("{key}.value"), "a value of 0 cannot be a ratio's base; compare with a positive value");
    }
    if rule == Some(Rule::Greater) && a.tolerance >= 1.0 {
        c.report(
            &format!("{key}.tolerance"),
            format!(
                "tolerance {} makes `greater` hold for any positive ratio (it asks ratio > 1 − tolerance); use a tolerance below 1",
                a.tolerance
            ),
        );
    }
}

/// A claim's `id:` (None where absent, the default then applies), reporting one that is not a
/// non-empty name.
fn claim_id(c: &mut Checker, key: &str, v: Option<&Value>) -> Option<String> {
    let is_name = |s: &str| !s.is_empty() && s.chars().all(|ch| ch.is_ascii_alphanumeric() || "-_.".contains(ch));
    match v? {
        Value::String(s) if is_built_in_finding_id(s) => {
            c.report(&format!("{key}.id"), format!("`{s}` is a built-in finding's id (or of its family); give the claim its own"));
            None
        }
        Value::String(s) if is_name(s) => Some(s.clone()),
        other => {
            c.report(&format!("{key}.id"), format!("expected a name of letters, digits, `-`, `_` and `.`, found {}", describe(other)));
            None
        }
    }
}

fn figure(c: &mut Checker, key: &str, m: &Mapping, kind: Option<Kind>) -> Option<String> {
    let names: Vec<&str> = FIGURES.iter().map(|(f, _)| *f).collect();
    let f = word(c, &format!("{key}.figure"), m.get("figure"), &names)?;
    let kinds = FIGURES.iter().find(|(n, _)| *n == f).map(|(_, k)| *k).unwrap_or(&[]);
    if let Some(k) = kind.filter(|k| !kinds.contains(k)) {
        let owners: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        c.report(
            &format!("{key}.figure"),
            format!("figure `{f}` is not measured by kind {} (it belongs to {})", k.name(), owners.join(", ")),
        );
        return None;
    }
    Some(f)
}

fn word(c: &mut Checker, key: &str, v: Option<&Value>, valid: &[&str]) -> Option<String> {
    match v {
        None => {
            c.report(key, format!("missing; one of {}", valid.join(", ")));
            None
        }
        Some(Value::String(s)) if valid.contains(&s.as_str()) => Some(s.clone()),
        Some(Value::String(s)) => {
            c.report(key, suggest(s, valid));
            None
        }
        Some(v) => {
            c.report(key, format!("expected one of {}, found {}", valid.join(", "), describe(v)));
            None
        }
    }
}

/// "unknown value" with the nearest valid name, or one the value starts (or is the start of).
fn suggest(value: &str, valid: &[&str]) -> String {
    let prefix = valid.iter().copied().find(|v| value.starts_with(*v) || v.starts_with(value));
    unknown_choice_near(value, valid, nearest(value, valid).or(prefix))
}

fn number(c: &mut Checker, key: &str, v: &Value) -> Option<f64> {
    match v.as_f64() {
        Some(x) if x.is_finite() && x >= 0.0 => Some(x),
        _ => {
            c.report(key, format!("expected a number ≥ 0, found {}", describe(v)));
            None
        }
    }
}

fn selection(c: &mut Checker, key: &str, v: Option<&Value>) -> Option<BTreeMap<String, String>> {
    let Some(v) = v else {
        return Some(BTreeMap::new());
    };
    let Value::Mapping(m) = v else {
        c.report(key, format!("expected axis values (e.g. {{world: 4, head: split}}), found {}", describe(v)));
        return None;
    };
    let mut out = BTreeMap::new();
    for (k, val) in m {
        let Some(k) = k.as_str() else {
            c.report(key, format!("axis names are words ({}), found {}", SELECT_AXES.join(", "), describe(k)));
            continue;
        };
        if !SELECT_AXES.contains(&k) {
            c.report(&format!("{key}.{k}"), unknown_key(k, SELECT_AXES));
            continue;
        }
        let text = match val {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                c.report(&format!("{key}.{k}"), format!("expected one value, found {}", describe(other)));
                continue;
            }
        };
        if k == "buffer" && crate::units::parse_bytes(&text).is_none() {
            c.report(&format!("{key}.{k}"), format!("expected a byte size like 16MiB (a membw buffer), found {text}"));
            continue;
        }
        let text = match COUNT_AXES.contains(&k) {
            true => match count(&text, k) {
                Ok(n) => n,
                Err(why) => {
                    c.report(&format!("{key}.{k}"), why);
                    continue;
                }
            },
            false => text,
        };
        out.insert(k.to_string(), text);
    }
    Some(out)
}

/// Axes whose values are counts, matched as the number a run recorded.
const COUNT_AXES: &[&str] = &["world", "sequences", "threads"];

/// A count axis's value in the one spelling runs record (`02` is 2), or why it is none.
fn count(text: &str, axis: &str) -> Result<String, String> {
    match text.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n.to_string()),
        _ if axis == "threads" && (text == "auto" || text == "all") => Err(format!(
            "`threads: {text}` is resolved per run; select the count of threads per rank the runs used (`parlab plan` shows it)"
        )),
        _ => Err(format!("expected a whole number ≥ 1, found {text}")),
    }
}

/// A spec's experiment name and its declared claims.
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    /// The experiment's `name:` (`spec` where it has none).
    pub name: String,
    /// Its claims, in order.
    pub claims: Vec<Claim>,
}

/// The claims of a spec file's text, or the problems that refuse them.
pub fn parse(path: &std::path::Path, text: &str) -> Result<Declared, Vec<super::Problem>> {
    let root: Value = serde_yaml::from_str(text).map_err(|_| Vec::new())?;
    let Value::Mapping(map) = &root else {
        return Ok(Declared { name: "spec".into(), claims: Vec::new() });
    };
    let kind = map.get("kind").and_then(Value::as_str).and_then(|k| Kind::ALL.iter().copied().find(|x| x.name() == k));
    let name = map.get("name").and_then(Value::as_str).unwrap_or("spec").to_string();
    let mut c = Checker::new(path, text);
    let claims = read(&mut c, map, kind, &name);
    if c.problems.is_empty() {
        Ok(Declared { name, claims })
    } else {
        Err(c.problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(text: &str) -> Result<Vec<Claim>, Vec<crate::spec::Problem>> {
        parse(std::path::Path::new("spec.yaml"), text).map(|d| d.claims)
    }

    #[test]
    fn a_rule_is_read_into_its_variant_and_a_near_miss_is_suggested() {
        let spec = "name: x\nkind: decode\nworld: [1, 2]\nclaims:\n  - figure: tokens\n    rule: equal_tokens\n    select: {world: 2}\n    reference: {world: 1}\n";
        let read = claims(spec).unwrap();
        assert_eq!(read[0].rule, Rule::EqualTokens);
        let typo = claims(&spec.replace("equal_tokens", "equal_token")).unwrap_err();
        assert!(typo[0].message.contains("did you mean `equal_tokens`?"), "{}", typo[0].message);
        // A value that is only the start of a rule is suggested too (by prefix, beyond the edit distance).
        let prefix = claims(&spec.replace("equal_tokens", "ratio")).unwrap_err();
        assert!(prefix[0].message.contains("did you mean `ratio_within`?"), "{}", prefix[0].message);
        let far = claims(&spec.replace("equal_tokens", "zzz")).unwrap_err();
        assert!(far[0].message.contains("expected one of less, greater, ratio_within, equal_tokens"), "{}", far[0].message);
    }

    /// The one problem a claim's body (indented under `- `) gives, as `key: message`.
    fn problem(body: &str) -> String {
        let spec = format!("name: x\nkind: decode\nworld: [1, 2]\nclaims:\n  - {}\n", body.replace('\n', "\n    "));
        let problems = claims(&spec).expect_err(body);
        assert_eq!(problems.len(), 1, "{problems:?}");
        format!("{}: {}", problems[0].key, problems[0].message)
    }

    #[test]
    fn a_claim_that_could_not_decide_anything_is_refused() {
        let ok = "figure: step\nrule: greater\nselect: {world: 2}\nreference: {world: 1}";
        assert!(claims(&format!("name: x\nkind: decode\nworld: [1, 2]\nclaims:\n  - {}\n", ok.replace('\n', "\n    "))).is_ok());
        let greater = problem(&format!("{ok}\ntolerance: 1"));
        assert!(greater.starts_with("claims[0].tolerance: tolerance 1 makes `greater` hold for any positive ratio"), "{greater}");
        let itself = problem("figure: step\nrule: less\nselect: {world: 2}\nreference: {world: 2}");
        assert!(itself.starts_with("claims[0].reference: the reference selects the same runs"), "{itself}");
        let tokens = problem("figure: tokens\nrule: less\nselect: {world: 2}\nreference: {world: 1}");
        assert!(tokens.starts_with("claims[0].rule: `tokens` are compared by rule equal_tokens only"), "{tokens}");
        assert!(problem("figure: step\nrule: less\nselect: {world: 2}\nvalue: 0").contains("a value of 0 cannot be a ratio's base"));
        assert!(problem(&format!("{ok}\nvalue: 0.5")).starts_with("claims[0].value: give `reference:`"));
        assert!(problem(&format!("{ok}\nid: ''")).starts_with("claims[0].id: expected a name"));
        assert!(problem(&format!("{ok}\nid: 7")).starts_with("claims[0].id: expected a name"));
        assert!(problem(&format!("{ok}\nid: two words/and slash")).starts_with("claims[0].id: expected a name"));
    }

    #[test]
    fn a_selection_is_read_in_the_spelling_runs_record_or_refused() {
        let read = |select: &str| {
            let spec = format!(
                "name: x\nkind: decode\nworld: [1, 2]\nclaims:\n  - figure: step\n    rule: less\n    select: {select}\n    value: 1\n"
            );
            claims(&spec).map(|c| c[0].select.clone()).map_err(|p| format!("{}: {}", p[0].key, p[0].message))
        };
        assert_eq!(
            read("{world: '02', threads: 1}").unwrap(),
            BTreeMap::from([("world".into(), "2".into()), ("threads".into(), "1".into())])
        );
        assert!(read("{world: 1.0}").unwrap_err().contains("claims[0].select.world: expected a whole number ≥ 1, found 1.0"));
        assert!(read("{threads: all}").unwrap_err().contains("`threads: all` is resolved per run"));
        assert!(read("{2: split}").unwrap_err().contains("claims[0].select: axis names are words"));
    }

    #[test]
    fn a_selection_off_the_specs_own_axes_is_refused() {
        let spec = |select: &str| {
            format!("name: x\nkind: decode\nstrategy: tensor\nworld: [1, 2, 4]\nthreads: auto\nclaims:\n  - figure: step\n    rule: less\n    select: {select}\n    reference: {{world: 1}}\n")
        };
        assert!(claims(&spec("{world: '04', threads: 3}")).is_ok(), "4 is a world; threads: auto resolves per run");
        let off = claims(&spec("{world: 3}")).unwrap_err();
        assert_eq!(off[0].key, "claims[0].select.world");
        assert!(off[0].message.contains("`3` is not among this spec's world values (1, 2, 4): it selects no run"), "{}", off[0].message);
        let strategy = claims(&spec("{world: 2, strategy: pipeline}")).unwrap_err();
        assert!(strategy[0].message.contains("`pipeline` is not among this spec's strategy values (tensor)"), "{}", strategy[0].message);
    }

    #[test]
    fn a_claim_may_not_take_a_built_in_finding_id() {
        let ok = "figure: step\nrule: greater\nselect: {world: 2}\nreference: {world: 1}";
        for id in ["kv-head-cap", "alpha-beta-mpi-tcp", "exactness-tensor", "advice-x", "claims-x"] {
            let refused = problem(&format!("{ok}\nid: {id}"));
            assert!(refused.starts_with(&format!("claims[0].id: `{id}` is a built-in finding's id")), "{refused}");
        }
        let own = format!(
            "name: x\nkind: decode\nworld: [1, 2]\nclaims:\n  - {}\n",
            format!("{ok}\nid: kv-head-cap-holds").replace('\n', "\n    ")
        );
        assert_eq!(claims(&own).unwrap()[0].id, "kv-head-cap-holds");
    }

    #[test]
    fn two_claims_of_one_id_are_refused_at_the_second() {
        let one = "- id: same\n    figure: step\n    rule: less\n    select: {world: 2}\n    value: 1\n";
        let spec = format!("name: x\nkind: decode\nworld: [1, 2]\nclaims:\n  {one}  {one}");
        let problems = claims(&spec).unwrap_err();
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].key, "claims[1].id");
        assert!(problems[0].message.contains("`same` is already the id of claims[0]"), "{}", problems[0].message);
    }

    #[test]
    fn a_selection_is_judged_against_the_axis_default_where_the_spec_sets_none() {
        let membw =
            "name: x\nkind: membw\nclaims:\n  - figure: aggregate_bandwidth\n    rule: less\n    select: {world: 1}\n    value: 1\n";
        assert!(claims(membw).is_ok(), "world 1 is membw's default");
        let off = claims(&membw.replace("world: 1", "world: 4")).unwrap_err();
        assert_eq!(off[0].key, "claims[0].select.world");
        assert!(
            off[0].message.contains("`4` is not among this spec's world values (1, the default: the spec sets no `world:`)"),
            "{}",
            off[0].message
        );
        // A layout that places no head matches any head (`findings::claims`): not judged unset.
        assert!(claims(&membw.replace("world: 1", "head: replicated")).is_ok());
        let seq = claims(&membw.replace("world: 1", "sequences: 2")).unwrap_err();
        assert!(seq[0].message.contains("`2` is not among this spec's sequences values (1, the default"), "{}", seq[0].message);
        let dispatch =
            "name: x\nkind: dispatch\nclaims:\n  - figure: time\n    rule: less\n    select: {world: 2, strategy: expert}\n    value: 1\n";
        assert!(claims(dispatch).is_ok(), "world 2 and the expert split are dispatch's defaults");
        let strategy = claims(&dispatch.replace("strategy: expert", "strategy: data")).unwrap_err();
        assert!(
            strategy[0].message.contains("`data` is not among this spec's strategy values (expert, the default"),
            "{}",
            strategy[0].message
        );
    }

    #[test]
    fn an_op_or_size_is_judged_against_the_sweep_the_runs_measure() {
        let spec = |select: &str, sweep: &str| {
            format!("name: x\nkind: collectives\n{sweep}claims:\n  - figure: time\n    rule: less\n    select: {select}\n    value: 1\n")
        };
        let sweep = "ops: [all-reduce, broadcast]\nsizes: [4KiB, 1MiB]\n";
        assert!(claims(&spec("{op: broadcast, size: 1048576}", sweep)).is_ok(), "a size matches however it is written");
        assert!(claims(&spec("{op: all-gather, size: 4MiB}", "")).is_ok(), "the default ops and sizes");
        let op = claims(&spec("{op: all-gather}", sweep)).unwrap_err();
        assert_eq!(op[0].key, "claims[0].select.op");
        assert!(
            op[0].message.contains("`all-gather` is not among this spec's op values (all-reduce, broadcast): it selects no run"),
            "{}",
            op[0].message
        );
        let size = claims(&spec("{size: 8KiB}", sweep)).unwrap_err();
        assert!(
            size[0].message.contains(
                "`8KiB` is not among this spec's size values (4096, 1048576, in bytes as all-reduce, broadcast records them at world 2: "
            ),
            "{}",
            size[0].message
        );
        let default = claims(&spec("{size: 8KiB}", "")).unwrap_err();
        assert!(default[0].message.contains("16777216, the default: the spec sets no `sizes:`"), "{}", default[0].message);
        // A dispatch row's size is tokens × top_k × hidden × 4 bytes.
        // A chunked op's row is recorded at whole chunks per rank: all-gather of 4 B over the
        // default 2 ranks is recorded as 8 B.
        let chunked = "ops: [all-gather]\nsizes: [4, 4KiB]\n";
        assert!(claims(&spec("{size: 8}", chunked)).is_ok(), "the row all-gather records");
        assert!(claims(&spec("{size: 4}", chunked)).is_err(), "no row is recorded at 4 B");
        let three = claims(&spec("{op: all-gather, world: 3, size: 4KiB}", &format!("world: [3]\n{chunked}"))).unwrap_err();
        assert!(three[0].message.contains("(12, 4092, in bytes as all-gather records them at world 3"), "{}", three[0].message);
        // A world the spec does not hold is refused as such; the sizes are then judged at the
        // spec's worlds, not at that world.
        let elsewhere = claims(&spec("{world: 5, size: 12}", &format!("world: [2, 3]\n{chunked}"))).unwrap_err();
        assert_eq!(elsewhere.len(), 1, "{elsewhere:?}");
        assert_eq!(elsewhere[0].key, "claims[0].select.world");
        for (op, size, world) in
            [(Op::AllGather, 4, 2), (Op::AllToAll, 4096, 3), (Op::ReduceScatter, 100, 8), (Op::AllReduce, 6, 4), (Op::Broadcast, 2, 2)]
        {
            let case = crate::rank::collectives::Case::new(op, size, 0, world);
            assert_eq!(recorded_bytes(op, size, world), case.bytes(), "{op:?} {size} B over {world}");
        }
        let dispatch = |size: &str| {
            format!("name: x\nkind: dispatch\ntokens: [1, 8]\ntop_k: 2\nhidden: 4\nclaims:\n  - figure: time\n    rule: less\n    select: {{size: {size}}}\n    value: 1\n")
        };
        assert!(claims(&dispatch("256")).is_ok(), "8 tokens × 2 × 4 × 4 bytes");
        let off = claims(&dispatch("128")).unwrap_err();
        assert!(off[0].message.contains("`128` is not among this spec's size values (32, 256)"), "{}", off[0].message);
    }
}
