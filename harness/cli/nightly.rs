//! `parlab nightly`: tonight's manifests against a baseline, and answers across layouts.

use crate::manifest::read_all;
use super::UserError;
use crate::nightly::{compare, compared, render_text, Finding};
use std::path::Path;

/// Compares `manifests` with `baseline`; exit 3 on a changed answer, 4 on a regression or new failure.
pub fn run(baseline: &Path, manifests: &Path, tolerance: f64) -> anyhow::Result<i32> {
    if !(tolerance.is_finite() && tolerance > 0.0) {
        return Err(UserError(format!("--tolerance {tolerance}: expected a finite fraction above 0 (e.g. 0.25)")).into());
    }
    for (dir, what) in [(baseline, "baseline"), (manifests, "tonight's")] {
        if !dir.is_dir() {
            return Err(UserError(format!("{}: no such {what} manifests folder", dir.display())).into());
        }
    }
    let (before, skipped_before) = read_all(baseline);
    let (after, skipped_after) = read_all(manifests);
    for s in skipped_before.iter().chain(&skipped_after) {
        eprintln!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let overlap = compared(&before, &after);
    if overlap == 0 {
        return Err(UserError(format!(
            "nothing to compare: none of the {} baseline manifests in {} shares a run identity with the {} manifests in {} (another suite, or an empty folder?)",
            before.len(),
            baseline.display(),
            after.len(),
            manifests.display()
        ))
        .into());
    }
    let findings = compare(&before, &after, tolerance);
    let layouts = crate::audit::audit(&after);
    print!("{}", render_text(&findings));
    for g in layouts.iter().filter(|g| g.changed) {
        println!("ANSWER CHANGED across layouts: answer {} ({})", &g.answer_id[..12], g.experiments.join(", "));
    }
    let answer_changed = layouts.iter().any(|g| g.changed) || findings.iter().any(|f| matches!(f, Finding::AnswerChanged { .. }));
    println!("nightly: {overlap} runs compared with {}, {} findings (tolerance {:.0}%)", baseline.display(), findings.len(), tolerance * 100.0);
    Ok(if answer_changed {
        crate::exitcode::AUDIT_ANSWER_CHANGED
    } else if findings.is_empty() {
        crate::exitcode::OK
    } else {
        crate::exitcode::NIGHTLY_REGRESSION
    })
}
