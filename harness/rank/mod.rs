//! Code inside a rank: the communicator, the records it writes, and the workloads.

pub mod collectives;
pub mod comm;
pub mod decode;
pub mod dispatch;
pub mod membw;
pub mod records;

use crate::spec::{Kind, RunPlan};
use std::path::Path;

/// Whether this version can launch runs of `kind`.
pub fn implemented(kind: Kind) -> bool {
    match kind {
        Kind::Collectives => collectives::IMPLEMENTED,
        Kind::Membw => membw::IMPLEMENTED,
        Kind::Decode => decode::IMPLEMENTED,
        Kind::Dispatch => dispatch::IMPLEMENTED,
        Kind::Model => false,
    }
}

/// Work done once, before launching, in the `parlab run` process (e.g. making a seeded checkpoint).
pub fn prepare(plan: &RunPlan) -> anyhow::Result<()> {
    match plan.kind {
        Kind::Decode => decode::prepare(plan),
        _ => Ok(()),
    }
}

/// Runs this rank's part of `plan` (MPI is initialised here), writing records under `out`.
pub fn run(plan: &RunPlan, out: &Path) -> anyhow::Result<()> {
    let universe = mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI was already initialised"))?;
    let mut comm = comm::Communicator::new(universe.world());
    if comm.size() != plan.layout.world {
        anyhow::bail!("plan wants {} ranks but mpirun started {}", plan.layout.world, comm.size());
    }
    match plan.kind {
        Kind::Collectives => collectives::run(plan, &mut comm, out),
        Kind::Membw => membw::run(plan, &mut comm, out),
        Kind::Decode => decode::run(plan, &mut comm, out),
        Kind::Dispatch => dispatch::run(plan, &mut comm, out),
        Kind::Model => anyhow::bail!("model runs are arithmetic and launch no ranks"),
    }
}
