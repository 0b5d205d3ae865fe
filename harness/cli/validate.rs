//! `parlab validate`: every problem in the specs, one line each.

use crate::spec::load_suite_limited;
use std::path::PathBuf;

/// Validates and expands the specs; prints a summary or returns the problems.
pub fn run(paths: &[PathBuf], max_runs: usize) -> super::Result<i32> {
    let runs = load_suite_limited(paths, max_runs)?;
    super::output::print_line(&summary(&runs))?;
    Ok(crate::exitcode::OK)
}

/// `ok: E experiments, R runs`, and where experiments of the same content share run
/// identities, how many distinct runs `parlab run` will launch.
fn summary(runs: &[crate::spec::RunPlan]) -> String {
    let experiments: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.experiment.as_str()).collect();
    let distinct: std::collections::BTreeSet<&crate::identity::RunId> = runs.iter().map(|r| &r.run_id).collect();
    let mut line = format!("ok: {} experiments, {} runs", experiments.len(), runs.len());
    if distinct.len() < runs.len() {
        line.push_str(&format!(" ({} distinct: experiments of the same content share a run identity, run once)", distinct.len()));
    }
    line
}
