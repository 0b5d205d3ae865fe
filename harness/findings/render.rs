//! Findings for people (the register's Findings section) and for machines (`findings.json`).

use super::{Finding, Number, SCHEMA, TOLERANCE};
use crate::units::{format_bytes, format_gbps, format_seconds, sig3};
use serde::Serialize;

/// The document `findings.json` holds (fields in this order).
#[derive(Serialize)]
struct Doc<'a> {
    schema: &'a str,
    tolerance: f64,
    fragile_factor: f64,
    findings: &'a [Finding],
}

/// How many run identities a markdown line lists before "and N more".
const RUNS_SHOWN: usize = 6;

/// `findings.json`: the schema, the declared tolerance and every finding, pretty-printed with a final newline.
pub fn to_json(findings: &[Finding]) -> String {
    let doc = Doc { schema: SCHEMA, tolerance: TOLERANCE, fragile_factor: crate::audit::FRAGILE_FACTOR, findings };
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    text.push('\n');
    text
}

/// A finding as the register's template prints it: every figure already in words.
#[derive(Debug, Clone, Serialize)]
pub struct FindingView {
    /// Identifier.
    pub id: String,
    /// HOLDS, FAILS or INCONCLUSIVE.
    pub verdict: String,
    /// The claim.
    pub claim: String,
    /// The rule.
    pub rule: String,
    /// Figures read, joined.
    pub figures: String,
    /// Runs read, abbreviated.
    pub runs: String,
    /// One line per number.
    pub numbers: Vec<String>,
    /// The reason (with "missing runs:" or "noise:" when inconclusive).
    pub reason: String,
    /// Notes.
    pub notes: Vec<String>,
}

/// The views of `findings`, in order.
pub fn views(findings: &[Finding]) -> Vec<FindingView> {
    findings.iter().map(view).collect()
}

fn view(f: &Finding) -> FindingView {
    FindingView {
        id: f.id.clone(),
        verdict: f.verdict.name().into(),
        claim: f.claim.clone(),
        rule: f.test.rule.clone(),
        figures: f.test.figures.join(", "),
        runs: runs(&f.test.runs),
        numbers: f.numbers.iter().map(number).collect(),
        reason: f.reason.clone(),
        notes: f.notes.clone(),
    }
}

fn runs(list: &[String]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    let shown: Vec<&str> = list.iter().take(RUNS_SHOWN).map(String::as_str).collect();
    let more = list.len().saturating_sub(RUNS_SHOWN);
    if more == 0 {
        shown.join(", ")
    } else {
        format!("{} and {more} more (all in findings.json)", shown.join(", "))
    }
}

/// A number in words with its unit and runs.
pub fn number(n: &Number) -> String {
    let value = format_value(n.value, &n.unit);
    if n.runs.is_empty() {
        format!("{}: {value} (arithmetic)", n.name)
    } else {
        format!("{}: {value} (run {})", n.name, runs(&n.runs))
    }
}

/// A value formatted for its unit.
pub fn format_value(v: f64, unit: &str) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    match unit {
        "s" => format_seconds(v),
        "B" => format_bytes(v),
        "B/s" => format_gbps(v),
        "tokens/s" => format!("{} tokens/s", sig3(v)),
        "ratio" => format!("{}×", sig3(v)),
        "fraction" => crate::report::fmt::percent(v, true),
        "count" => format!("{v:.0}"),
        "logit" if v == 0.0 => "0 (bit-identical)".into(),
        "logit" => crate::report::fmt::small(v),
        _ => sig3(v),
    }
}
