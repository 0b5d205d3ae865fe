//! The `decode` workload inside a rank.

use super::comm::Communicator;
use crate::spec::RunPlan;
use std::path::Path;

/// Whether this version runs the workload.
pub const IMPLEMENTED: bool = false;

/// Runs this rank's part of a `decode` plan.
pub fn run(_plan: &RunPlan, _comm: &mut Communicator, _out: &Path) -> anyhow::Result<()> {
    anyhow::bail!("workload `decode` is not implemented in this version")
}

/// Makes what a decode run needs before launch (the seeded checkpoint).
pub fn prepare(_plan: &RunPlan) -> anyhow::Result<()> {
    Ok(())
}
