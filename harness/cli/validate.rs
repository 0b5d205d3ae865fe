//! `parlab validate`: every problem in the specs, one line each.

use crate::spec::load_suite_limited;
use std::path::PathBuf;

/// Validates and expands the specs; prints a summary or returns the problems.
pub fn run(paths: &[PathBuf], max_runs: usize) -> super::Result<i32> {
    let runs = load_suite_limited(paths, max_runs)?;
    let experiments: std::collections::BTreeSet<&str> = runs.iter().map(|r| r.experiment.as_str()).collect();
    super::output::print_line(&format!("ok: {} experiments, {} runs", experiments.len(), runs.len()))?;
    Ok(crate::exitcode::OK)
}
