//! The `membw` workload inside a rank.

use super::comm::Communicator;
use crate::spec::RunPlan;
use std::path::Path;

/// Whether this version runs the workload.
pub const IMPLEMENTED: bool = false;

/// Runs this rank's part of a `membw` plan.
pub fn run(_plan: &RunPlan, _comm: &mut Communicator, _out: &Path) -> anyhow::Result<()> {
    anyhow::bail!("workload `membw` is not implemented in this version")
}
