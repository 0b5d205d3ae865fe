//! `parlab rank`: the code mpirun starts in each rank.

use std::path::Path;

/// Reads the plan and runs this rank's part of the workload.
pub fn run(plan: &Path, out: &Path) -> super::Result<i32> {
    use anyhow::Context;
    let text = crate::files::read_text(plan, crate::files::MANIFEST_LIMIT).map_err(anyhow::Error::from)?;
    let plan: crate::spec::RunPlan =
        serde_json::from_str(&text).with_context(|| format!("{}: not a run plan written by `parlab run`", plan.display()))?;
    crate::rank::run(&plan, out)?;
    Ok(crate::exitcode::OK)
}
