//! The `membw` workload inside a rank: every rank sums its own f32 tensor at the same moment.
//!
//! Each rank holds a tch (libtorch) f32 tensor of `buffer_bytes`, filled with ones, and uses
//! `threads_per_rank` intra-op threads (`tch::set_num_threads`). Per repetition: MPI barrier,
//! then every rank's time runs from a common start (the earliest rank's clock reading after
//! the barrier, agreed with an MPI min-reduction; ranks share one system clock) to the end of
//! its own `tensor.sum()` (one full read of its buffer). Timing from a common start keeps
//! oversubscribed ranks honest: a rank that waits for a core is charged the wait, so ranks
//! that take turns cannot add up to more than the machine streams. Records: figure `membw`,
//! size_bytes = buffer bytes, one sample per repetition per rank. The sum is checked against
//! the element count (ones), so a short read cannot pass.

use super::comm::Communicator;
use super::records::{mark, RecordSink};
use crate::spec::{RunPlan, Workload};
use std::path::Path;
use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;
use std::time::{SystemTime, UNIX_EPOCH};
use tch::{Device, Kind, Tensor};

/// Whether this version runs the workload.
pub const IMPLEMENTED: bool = true;

fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// After a barrier, sums `tensor` once; returns (seconds from the common start, sum).
fn stream(comm: &mut Communicator, tensor: &Tensor) -> (f64, f64) {
    comm.barrier();
    let local_start = unix_now();
    let mut start = 0.0f64;
    comm.raw().all_reduce_into(&local_start, &mut start, SystemOperation::min());
    let sum = tensor.sum(Kind::Float).double_value(&[]);
    (unix_now() - start, sum)
}

/// Runs this rank's part of a `membw` plan.
pub fn run(plan: &RunPlan, comm: &mut Communicator, out: &Path) -> anyhow::Result<()> {
    let Workload::Membw(params) = &plan.workload else {
        anyhow::bail!("a membw run needs membw parameters");
    };
    tch::set_num_threads(plan.threads_per_rank.max(1) as i32);
    let count = (params.buffer_bytes / 4).max(1) as i64;
    let tensor = Tensor::ones([count], (Kind::Float, Device::Cpu));
    let mut sink = RecordSink::open(out, comm.rank())?;
    for _ in 0..plan.warmup {
        stream(comm, &tensor);
    }
    for repetition in 0..plan.repetitions {
        if repetition == 0 {
            mark(out, comm.rank(), "first_timed_start_unix");
        }
        let (seconds, sum) = stream(comm, &tensor);
        let relative = (sum - count as f64).abs() / count as f64;
        if relative > 1e-3 {
            anyhow::bail!("wrong result: membw: rank {}: sum of {count} ones gave {sum}", comm.rank());
        }
        sink.push("membw", (count * 4) as u64, repetition, 0, seconds)?;
    }
    mark(out, comm.rank(), "last_timed_end_unix");
    sink.flush()?;
    comm.barrier();
    Ok(())
}
