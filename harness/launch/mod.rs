//! Launching ranks: mpirun/srun command lines, supervision, timeouts, process-group kill.

pub mod progress;

use crate::spec::RunPlan;
use std::path::Path;

/// How a launch ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchOutcome {
    /// The exact command line run.
    pub command: String,
    /// More ranks than cores.
    pub oversubscribed: bool,
    /// Seconds from start to exit.
    pub wall_s: f64,
    /// The launcher's exit code, when it exited by itself.
    pub exit_code: Option<i32>,
    /// Why the run failed (which rank, status or signal, last stderr lines), if it did.
    pub failure: Option<String>,
}

/// Starts the plan's ranks and supervises them until they exit or time out.
pub fn launch(plan: &RunPlan, _plan_path: &Path, _out: &Path, cores: u32) -> LaunchOutcome {
    LaunchOutcome {
        command: String::new(),
        oversubscribed: plan.layout.world > cores,
        wall_s: 0.0,
        exit_code: None,
        failure: Some("launching is not implemented in this version".into()),
    }
}

/// Caveats the machine imposes on a run's figures.
pub fn caveats(plan: &RunPlan, cores: u32) -> Vec<String> {
    let mut out = Vec::new();
    if plan.layout.world * plan.threads_per_rank > cores {
        out.push(format!("oversubscribed: {} ranks x {} threads on {cores} cores", plan.layout.world, plan.threads_per_rank));
    }
    if plan.layout.world > 1 {
        out.push("one shared memory system: every rank streams from the same DRAM".into());
    }
    if plan.link == "mpi-tcp" {
        out.push("loopback TCP, not an interconnect".into());
    }
    out
}
