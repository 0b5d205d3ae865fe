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

use crate::launch::Moment;
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
/// kill it, and under srun `out/slurm-step` so that it can cancel the step on every node. A
/// workload error (a wrong collective result, say) or panic is written to
/// `out/error-rank<N>.txt` and printed, then the rank calls MPI_Abort so no rank waits forever.
pub fn run(plan: &RunPlan, out: &Path) -> anyhow::Result<()> {
    write_pid_file(out);
    crate::launch::slurm::write_step(out);
    if let Some(setting) = plan.link.nccl() {
        // Before any other thread exists (the watchdog's, MPI's): setenv beside a getenv in
        // another thread is undefined behaviour in glibc.
        crate::nccl::prepare_environment(setting, out, launcher_rank().and_then(|r| r.parse().ok()));
    }
    watchdog::start(plan.timeout_s);
    let universe = mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI was already initialised"))?;
    let mut comm = comm::Communicator::new(universe.world());
    let result = caught(|| {
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
        join_nccl(plan, &mut comm, out)?;
        workload(plan, &mut comm, out)
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

/// The workload of `plan`'s kind.
fn workload(plan: &RunPlan, comm: &mut comm::Communicator, out: &Path) -> anyhow::Result<()> {
    match plan.kind() {
        Kind::Collectives => collectives::run(plan, comm, out),
        Kind::Membw => membw::run(plan, comm, out),
        Kind::Decode => decode::run(plan, comm, out),
        Kind::Dispatch => dispatch::run(plan, comm, out),
        Kind::Model | Kind::Advise => Err(anyhow::anyhow!("model and advise runs are arithmetic and launch no ranks")),
    }
}

/// Runs `work`, a panic (a libtorch error raised through tch, an index out of range) made an
/// error: the rank then writes its error file and aborts the job like any error, instead of
/// unwinding through MPI_Finalize while its peers wait in a collective until the timeout.
fn caught(work: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or_else(|payload| {
        let text = payload.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| payload.downcast_ref::<String>().cloned());
        Err(anyhow::anyhow!("panicked: {}", text.as_deref().unwrap_or("(no message)")))
    })
}

/// On an NCCL link (its environment set at the rank's start): joins every rank into one NCCL
/// communicator on this rank's GPU, and records what NCCL chose (`nccl-rank<N>.json`). Nothing
/// on MPI links.
fn join_nccl(plan: &RunPlan, comm: &mut comm::Communicator, out: &Path) -> anyhow::Result<()> {
    if plan.link.nccl().is_none() {
        return Ok(());
    }
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
    records::mark(out, rank, Moment::RankFinalized);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_in_rank_code_becomes_the_error_the_rank_reports_and_aborts_on() {
        assert!(caught(|| Ok(())).is_ok());
        let text = format!("{:#}", caught(|| anyhow::bail!("wrong result")).unwrap_err());
        assert_eq!(text, "wrong result");
        let index = 7;
        let text = format!("{:#}", caught(|| panic!("index {index} out of range")).unwrap_err());
        assert_eq!(text, "panicked: index 7 out of range");
        let text = format!("{:#}", caught(|| std::panic::panic_any(3)).unwrap_err());
        assert_eq!(text, "panicked: (no message)");
    }
}
