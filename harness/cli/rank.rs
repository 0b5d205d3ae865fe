//! `parlab rank`: the code mpirun starts in each rank.

use std::path::Path;

/// Reads the plan and runs this rank's part of the workload.
pub fn run(plan: &Path, out: &Path) -> super::Result<i32> {
    let text = std::fs::read_to_string(plan)?;
    let plan: crate::spec::RunPlan = serde_json::from_str(&text)?;
    crate::rank::run(&plan, out)?;
    Ok(crate::exitcode::OK)
}
