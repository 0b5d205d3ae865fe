//! `claims:` in a spec: a figure of a selection of runs, optionally against a reference
//! selection, under a rule with a tolerance. Validated like every other key (unknown
//! figures, rules and axes are problems with their line and the nearest valid name) and
//! evaluated into findings by `findings::claims`.

use super::schema::Kind;
use super::validate::{describe, nearest, unknown_choice_near, unknown_key, Checker};
use serde_yaml::{Mapping, Value};
use std::collections::BTreeMap;

/// Keys a claim may have.
pub const CLAIM_KEYS: &[&str] = &["id", "claim", "figure", "select", "reference", "rule", "tolerance", "value"];

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
    /// Axis values selecting the reference runs, if any.
    pub reference: Option<BTreeMap<String, String>>,
    /// A fixed reference value in SI units, when there is no reference selection.
    pub value: Option<f64>,
    /// How the selection is compared.
    pub rule: Rule,
    /// Relative tolerance (default 0).
    pub tolerance: f64,
}

/// Reads and checks `claims:` of a spec's top-level mapping (absent: none).
pub fn read(c: &mut Checker, map: &Mapping, kind: Option<Kind>, experiment: &str) -> Vec<Claim> {
    match map.get("claims") {
        None => Vec::new(),
        Some(Value::Sequence(items)) => {
            items.iter().enumerate().filter_map(|(i, v)| one(c, &format!("claims[{i}]"), v, kind, experiment, i)).collect()
        }
        Some(v) => {
            c.report("claims", format!("expected a list of claims (figure:, select:, rule:, ...), found {}", describe(v)));
            Vec::new()
        }
    }
}

fn one(c: &mut Checker, key: &str, v: &Value, kind: Option<Kind>, experiment: &str, i: usize) -> Option<Claim> {
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
    if c.problems.len() > before {
        return None;
    }
    Some(Claim {
        id: m.get("id").and_then(Value::as_str).map_or_else(|| format!("{experiment}-claim-{}", i + 1), str::to_string),
        text: m.get("claim").and_then(Value::as_str).map(str::to_string),
        figure: figure?,
        select,
        reference,
        value,
        rule: rule?,
        tolerance,
    })
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
        let Some(k) = k.as_str() else { continue };
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
        out.insert(k.to_string(), text);
    }
    Some(out)
}

/// The claims of a spec file's text, or the problems that refuse them.
pub fn parse(path: &std::path::Path, text: &str) -> Result<Vec<Claim>, Vec<super::Problem>> {
    let root: Value = serde_yaml::from_str(text).map_err(|_| Vec::new())?;
    let Value::Mapping(map) = &root else {
        return Ok(Vec::new());
    };
    let kind = map.get("kind").and_then(Value::as_str).and_then(|k| Kind::ALL.iter().copied().find(|x| x.name() == k));
    let name = map.get("name").and_then(Value::as_str).unwrap_or("spec");
    let mut c = Checker::new(path, text);
    let claims = read(&mut c, map, kind, name);
    if c.problems.is_empty() {
        Ok(claims)
    } else {
        Err(c.problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(text: &str) -> Result<Vec<Claim>, Vec<crate::spec::Problem>> {
        parse(std::path::Path::new("spec.yaml"), text)
    }

    #[test]
    fn a_rule_is_read_into_its_variant_and_a_near_miss_is_suggested() {
        let spec = "name: x\nkind: decode\nclaims:\n  - figure: tokens\n    rule: equal_tokens\n    select: {world: 2}\n    reference: {world: 1}\n";
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
}
