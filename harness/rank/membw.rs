//! The `membw` workload inside a rank: every rank reads its own f32 buffer at the same moment,
//! with two kernels in turn.
//!
//! Each rank holds a tch (libtorch) f32 tensor of `buffer_bytes`, filled with ones, and uses
//! `threads_per_rank` threads. Per repetition it reads the buffer twice, each read timed on its
//! own: (1) `tensor.sum()`, libtorch's kernel (`threads_per_rank` intra-op threads), figure
//! `membw`; (2) parlab's STREAM-class read (`model::matvec::read_threaded` with
//! `Kernel::best()`: the CPU's widest SIMD, several accumulators and four streams per thread,
//! whatever kernel `PARLAB_MATVEC_KERNEL` forces on decode; `threads_per_rank` threads, this
//! one and the matvec pool's, take 16 KiB rows in chunks as they come free, as a decode
//! step's matvec reads its weights), figure `membw_stream`. The order alternates between
//! repetitions so neither kernel always reads a buffer the other left in cache.
//!
//! Every read: MPI barrier, then the rank's time runs from a common start (the earliest rank's
//! clock reading after the barrier, agreed with an MPI min-reduction; ranks share one system
//! clock) to the end of its own read. Timing from a common start keeps oversubscribed ranks
//! honest: a rank that waits for a core is charged the wait, so ranks that take turns cannot
//! add up to more than the machine streams. size_bytes = buffer bytes, one sample per
//! repetition per rank and kernel. Each sum is checked against the element count (ones), so a
//! short read cannot pass.

use super::comm::Communicator;
use super::figure::Figure;
use super::records::{mark, RecordSink};
use crate::launch::{unix_now, Moment};
use crate::model::matvec::{self, Kernel};
use crate::spec::{RunPlan, Workload};
use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// The file in a launch's folder where rank 0 names the STREAM-class read's kernel (the
/// collector reads it: it may run on another host, with other SIMD).
pub const KERNEL_FILE: &str = "membw-kernel.txt";

/// After a barrier, runs `read` once; returns (seconds from the common start, its sum).
fn timed(comm: &mut Communicator, read: impl FnOnce() -> f64) -> (f64, f64) {
    comm.barrier();
    let local_start = unix_now();
    let mut start = 0.0f64;
    comm.raw().all_reduce_into(&local_start, &mut start, SystemOperation::min());
    let sum = read();
    (unix_now() - start, sum)
}

/// Fails on every rank unless all ranks run on one host: each read is timed from the earliest
/// rank's clock reading, and two hosts' clocks are not one clock (milliseconds apart against
/// reads of some 100 ms, a rank's time could even come out negative).
fn on_one_host(comm: &Communicator) -> anyhow::Result<()> {
    use std::hash::{Hash, Hasher};
    let host = crate::host::this_host();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    host.hash(&mut hasher);
    let here = hasher.finish();
    let (mut lowest, mut highest) = (0u64, 0u64);
    comm.raw().all_reduce_into(&here, &mut lowest, SystemOperation::min());
    comm.raw().all_reduce_into(&here, &mut highest, SystemOperation::max());
    if lowest != highest {
        anyhow::bail!(
            "membw times every rank's reads against one clock, but its ranks ran on more than one host ({host} among them): run membw on one host"
        );
    }
    Ok(())
}

/// The f32 values of a contiguous f32 CPU tensor.
fn values(t: &Tensor) -> &[f32] {
    // SAFETY: `t` is a contiguous f32 CPU tensor made in `run`; it holds numel f32 values at
    // data_ptr and outlives the slice.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const f32, t.numel()) }
}

/// Fails when a sum of `count` ones is off.
fn check(what: &str, rank: u32, count: i64, sum: f64) -> anyhow::Result<()> {
    let relative = (sum - count as f64).abs() / count as f64;
    if relative.is_nan() || relative > 1e-3 {
        anyhow::bail!("wrong result: membw ({what}): rank {rank}: sum of {count} ones gave {sum}");
    }
    Ok(())
}

/// Runs this rank's part of a `membw` plan.
pub fn run(plan: &RunPlan, comm: &mut Communicator, out: &Path) -> anyhow::Result<()> {
    let Workload::Membw(params) = &plan.workload else {
        anyhow::bail!("a membw run needs membw parameters");
    };
    on_one_host(comm)?;
    let threads = plan.threads_per_rank.max(1) as usize;
    tch::set_num_threads(threads as i32);
    // The roofline is the best read this machine delivers: the widest kernel, whatever
    // PARLAB_MATVEC_KERNEL forces on the decode step.
    let kernel = Kernel::best();
    if comm.rank() == 0 {
        std::fs::write(out.join(KERNEL_FILE), kernel.name())?;
    }
    let count = (params.buffer_bytes / 4).max(1) as i64;
    let tensor = Tensor::ones([count], (Kind::Float, Device::Cpu));
    let buffer = values(&tensor);
    let torch = |c: &mut Communicator| timed(c, || tensor.sum(Kind::Float).double_value(&[]));
    let stream = |c: &mut Communicator| timed(c, || matvec::read_threaded(kernel, threads, buffer));
    let mut sink = RecordSink::open(out, comm.rank())?;
    for _ in 0..plan.warmup {
        torch(comm);
        stream(comm);
    }
    for repetition in 0..plan.repetitions {
        if repetition == 0 {
            mark(out, comm.rank(), Moment::FirstTimedStart);
        }
        let (t, s) = if repetition % 2 == 0 {
            let t = torch(comm);
            (t, stream(comm))
        } else {
            let s = stream(comm);
            (torch(comm), s)
        };
        check("libtorch sum", comm.rank(), count, t.1)?;
        check(&format!("parlab {} read", kernel.name()), comm.rank(), count, s.1)?;
        sink.push(Figure::Membw, (count * 4) as u64, repetition, 0, t.0)?;
        sink.push(Figure::MembwStream, (count * 4) as u64, repetition, 0, s.0)?;
    }
    mark(out, comm.rank(), Moment::LastTimedEnd);
    sink.flush()?;
    comm.barrier();
    Ok(())
}
