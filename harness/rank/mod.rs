//! Code inside a rank: the communicator, the records it writes, and the workloads.

pub mod collectives;
pub mod comm;
pub mod context;
pub mod decode;
pub mod decode_engine;
pub mod device;
pub mod device_ops;
pub mod dispatch;
pub mod expert;
pub mod fault;
pub mod figure;
pub mod membw;
pub mod nccl_ops;
pub mod records;
pub mod replay;
pub mod watchdog;

use crate::spec::{Kind, RunPlan};
use mpi::traits::Communicator as _;
use std::path::Path;

/// Work done once, before launching, in the `parlab run` process (e.g. making a seeded checkpoint).
pub fn prepare(plan: &RunPlan) -> anyhow::Result<()> {
    match plan.kind() {
        Kind::Decode => decode::prepare(plan),
        _ => Ok(()),
    }
}

/// Runs this rank's part of `plan` (MPI is initialised here), writing records under `out`.
///
/// On success the process exits here (status 0) right after MPI_Finalize, without returning.
/// Before MPI starts the rank writes `out/pids/<pid>` (its rank inside) so the supervisor can
/// kill it, and under srun `out/slurm-step` so that it can cancel the step on every node. A workload error (e.g. a wrong collective result) is written to
/// `out/error-rank<N>.txt` and printed, then the rank calls MPI_Abort so no rank waits forever.
pub fn run(plan: &RunPlan, out: &Path) -> anyhow::Result<()> {
    write_pid_file(out);
    crate::launch::slurm::write_step(out);
    watchdog::start(plan.timeout_s);
    let universe = mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI was already initialised"))?;
    let mut comm = comm::Communicator::new(universe.world());
    if comm.size() != plan.layout.world {
        anyhow::bail!("plan wants {} ranks but mpirun started {}", plan.layout.world, comm.size());
    }
    if let Some(why) = plan.layout.unrunnable(comm.size()) {
        anyhow::bail!("{why}");
    }
    crate::manifest::placement::write(out, comm.rank());
    let fault = fault::from_env(comm.rank(), &plan.experiment);
    fault::strike(fault);
    fault::arm(fault);
    let result = join_nccl(plan, &mut comm, out).and_then(|()| match plan.kind() {
        Kind::Collectives => collectives::run(plan, &mut comm, out),
        Kind::Membw => membw::run(plan, &mut comm, out),
        Kind::Decode => decode::run(plan, &mut comm, out),
        Kind::Dispatch => dispatch::run(plan, &mut comm, out),
        Kind::Model | Kind::Advise => Err(anyhow::anyhow!("model and advise runs are arithmetic and launch no ranks")),
    });
    if let Err(e) = result {
        let message = format!("{e:#}");
        let _ = std::fs::write(out.join(format!("error-rank{}.txt", comm.rank())), &message);
        eprintln!("parlab rank {}: {message}", comm.rank());
        comm.abort_nccl();
        comm.raw().abort(1);
    }
    if let Some(nccl) = comm.nccl() {
        crate::nccl::write_record(out, &crate::nccl::record(nccl, out));
    }
    comm.close_nccl();
    finish(comm, universe, out)
}

/// On an NCCL link: sets NCCL's environment, joins every rank into one NCCL communicator on
/// this rank's GPU, and records what NCCL chose (`nccl-rank<N>.json`). Nothing on MPI links.
fn join_nccl(plan: &RunPlan, comm: &mut comm::Communicator, out: &Path) -> anyhow::Result<()> {
    let Some(setting) = plan.link.nccl() else { return Ok(()) };
    crate::nccl::prepare_environment(setting, out, comm.rank());
    let gpu = device::gpu_ordinal(plan)?;
    let nccl =
        crate::nccl::comm::Comm::join(comm.raw(), gpu).map_err(|e| anyhow::anyhow!("{}: joining NCCL on GPU {gpu}: {e}", plan.label()))?;
    crate::nccl::write_record(out, &crate::nccl::record(&nccl, out));
    comm.attach_nccl(nccl);
    Ok(())
}

/// MPI_Finalize, then leave at once with status 0: `_exit` skips the static destructors of
/// libtorch and Open MPI, which cost about 0.25 s per run here (measured with `ci/bench.sh`).
fn finish(comm: comm::Communicator, universe: mpi::environment::Universe, out: &Path) -> anyhow::Result<()> {
    use std::io::Write;
    let rank = comm.rank();
    drop(comm);
    drop(universe);
    records::mark(out, rank, "rank_finalized_unix");
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: every file this rank wrote is closed or flushed; _exit only ends the process.
    unsafe { libc::_exit(0) }
}

/// The rank number the launcher gave this process, before MPI is initialised.
fn launcher_rank() -> Option<String> {
    ["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID"].iter().find_map(|v| std::env::var(v).ok())
}

fn write_pid_file(out: &Path) {
    let dir = out.join(crate::launch::supervise::PID_DIR);
    if std::fs::create_dir_all(&dir).is_ok() {
        let _ = std::fs::write(dir.join(std::process::id().to_string()), launcher_rank().unwrap_or_default());
    }
}
