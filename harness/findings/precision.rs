//! Half precision against float32: how far bfloat16 or float16 moved each answer, apart from
//! what its layout did (the precision audit, `crate::precision`).

use super::{Finding, Inconclusive, Inputs};
use crate::precision::{PrecisionGrade, PrecisionRow};

/// The precision-audit finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "precision-audit",
        "A half-precision answer keeps its float32 twin's tokens, or leaves them only at a step whose float32 top-2 margin its rounding drift could close.",
        &["answer.tokens", "answer.exactness.steps (drift, margin)"],
        &format!(
            "per half-precision run and its float32 twin (the same run but for its dtype): k = the first step whose tokens differ; HOLDS when every run has all tokens equal or the twin's top-2 margin at k below {}× the half-precision run's drift before k (a near-tie), FAILS when one moved a wider margin",
            crate::audit::FRAGILE_FACTOR
        ),
    );
    let rows = crate::precision::audit(inp.list);
    let graded: Vec<&PrecisionRow> = rows.iter().filter(|r| r.grade.is_graded()).collect();
    for r in &rows {
        f.notes.push(crate::precision::line(r));
    }
    if graded.is_empty() {
        let why = if rows.is_empty() {
            "no half-precision run"
        } else if rows.iter().any(|r| r.grade == PrecisionGrade::Incomplete) {
            "no half-precision run has a float32 twin and complete answers on both sides"
        } else {
            "no half-precision run has a float32 twin"
        };
        return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: {why}"));
    }
    for r in &graded {
        let runs: Vec<&str> = std::iter::once(r.run.as_str()).chain(r.twin.as_deref()).collect();
        let at = format!("{} {}", r.dtype, r.layout);
        let equal = r.equal_steps.unwrap_or_default();
        f.number(&format!("{at}: tokens equal to the float32 twin's, of {}", r.steps), equal as f64, "count", &runs);
        f.number(&format!("{at}: logit drift from the float32 reference"), r.drift, "logit", &runs[..1]);
        if let Some(m) = r.twin_margin {
            f.number(&format!("{at}: float32 top-2 margin at step {equal}"), m, "logit", &runs);
        }
    }
    let moved: Vec<String> =
        graded.iter().filter(|r| r.grade == PrecisionGrade::Moved).map(|r| format!("{} {}", r.dtype, r.layout)).collect();
    let equal = graded.iter().filter(|r| r.grade == PrecisionGrade::TokensEqual).count();
    if moved.is_empty() {
        f.decide(
            true,
            format!("{equal} of {} half-precision answers kept every float32 token; the others left them at near-ties", graded.len()),
        )
    } else {
        f.decide(false, format!("half precision moved a robust float32 step in {}", moved.join(", ")))
    }
}
