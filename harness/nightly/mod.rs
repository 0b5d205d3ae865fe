//! Night-to-night comparison: the same run identities measured again, checked for
//! changed answers and for figures that regressed past a tolerance.

use crate::manifest::{Manifest, Status};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// Which direction of a figure is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Times: lower is better.
    Lower,
    /// Rates and bandwidths: higher is better.
    Higher,
}

/// One comparable figure of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// What it is (`all-reduce 4096 B median`, `decode step median`).
    pub name: String,
    /// Its value (seconds, bytes/s or tokens/s).
    pub value: f64,
    /// Which way is better.
    pub better: Better,
}

/// A finding of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "finding")]
pub enum Finding {
    /// Generated tokens differ from the baseline's for the same run identity.
    AnswerChanged {
        /// Short run identity and experiment.
        run: String,
    },
    /// A run that was ok in the baseline failed now.
    NowFailing {
        /// Short run identity and experiment.
        run: String,
        /// Why it failed.
        reason: String,
    },
    /// A run that was ok in the baseline has no manifest tonight.
    Missing {
        /// Short run identity and experiment (as in the baseline).
        run: String,
    },
    /// A figure got worse by more than the tolerance.
    Regressed {
        /// Short run identity and experiment.
        run: String,
        /// The figure.
        figure: String,
        /// Baseline value.
        before: f64,
        /// Current value.
        after: f64,
        /// How much worse, as a fraction (0.3 = 30 % worse).
        worse_by: f64,
    },
}

fn stat_median(v: &Value, key: &str) -> Option<f64> {
    crate::report::facts::Stat::read(v.get(key)).map(|s| s.median)
}

/// The comparable figures in a manifest's summary (medians only: ranges are noise).
pub fn figures(m: &Manifest) -> Vec<Figure> {
    let s = &m.summary;
    let mut out = Vec::new();
    let mut push = |name: String, value: Option<f64>, better| {
        if let Some(value) = value.filter(|v| v.is_finite() && *v > 0.0) {
            out.push(Figure { name, value, better });
        }
    };
    for c in s.get("collectives").and_then(Value::as_array).into_iter().flatten() {
        let name = format!("{} {} B median", c["op"].as_str().unwrap_or("?"), c["size_bytes"]);
        push(name, stat_median(c, "time_s"), Better::Lower);
    }
    if let Some(b) = s.get("membw") {
        push("aggregate bandwidth median".into(), stat_median(b, "aggregate_Bps"), Better::Higher);
    }
    if let Some(d) = s.get("decode") {
        push("decode step median".into(), stat_median(d, "step_s"), Better::Lower);
        push("tokens per second median".into(), stat_median(d, "tokens_per_s"), Better::Higher);
    }
    for d in s.get("dispatch").and_then(Value::as_array).into_iter().flatten() {
        push(format!("dispatch {} tokens median", d["tokens"]), stat_median(d, "time_s"), Better::Lower);
    }
    out
}

fn label(m: &Manifest) -> String {
    format!("{} {}", &m.run_id[..12], m.experiment)
}

/// How many run identities of `baseline` have a manifest in `current` too.
pub fn compared(baseline: &[Manifest], current: &[Manifest]) -> usize {
    let now: std::collections::BTreeSet<&str> = current.iter().map(|m| m.run_id.as_str()).collect();
    baseline.iter().filter(|m| now.contains(m.run_id.as_str())).count()
}

/// Compares `current` with `baseline` run by run; `tolerance` is the fraction a figure may worsen.
pub fn compare(baseline: &[Manifest], current: &[Manifest], tolerance: f64) -> Vec<Finding> {
    let now: BTreeMap<&str, &Manifest> = current.iter().map(|m| (m.run_id.as_str(), m)).collect();
    let mut findings = Vec::new();
    for before in baseline.iter().filter(|m| m.status == Status::Ok) {
        let Some(after) = now.get(before.run_id.as_str()) else {
            findings.push(Finding::Missing { run: label(before) });
            continue;
        };
        if after.status != Status::Ok {
            let reason = after.reason.clone().unwrap_or_else(|| format!("{:?}", after.status));
            findings.push(Finding::NowFailing { run: label(after), reason });
            continue;
        }
        if before.answer.get("tokens").is_some() && before.answer.get("tokens") != after.answer.get("tokens") {
            findings.push(Finding::AnswerChanged { run: label(after) });
        }
        findings.extend(regressions(before, after, tolerance));
    }
    findings
}

fn regressions(before: &Manifest, after: &Manifest, tolerance: f64) -> Vec<Finding> {
    let now: BTreeMap<String, Figure> = figures(after).into_iter().map(|f| (f.name.clone(), f)).collect();
    figures(before)
        .into_iter()
        .filter_map(|b| {
            let a = now.get(&b.name)?;
            let worse_by = match b.better {
                Better::Lower => a.value / b.value - 1.0,
                Better::Higher => b.value / a.value - 1.0,
            };
            (worse_by > tolerance).then(|| Finding::Regressed {
                run: label(after),
                figure: b.name.clone(),
                before: b.value,
                after: a.value,
                worse_by,
            })
        })
        .collect()
}

/// One line per finding.
pub fn render_text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for f in findings {
        let line = match f {
            Finding::AnswerChanged { run } => format!("ANSWER CHANGED {run}: generated tokens differ from the baseline"),
            Finding::NowFailing { run, reason } => format!("NOW FAILING {run}: {reason}"),
            Finding::Missing { run } => format!("MISSING {run}: ok in the baseline, no manifest tonight"),
            Finding::Regressed { run, figure, before, after, worse_by } => {
                format!("REGRESSED {run}: {figure} {before:.4e} -> {after:.4e} ({:.0}% worse)", worse_by * 100.0)
            }
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}
