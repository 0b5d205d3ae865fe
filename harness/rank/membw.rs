//! The `membw` workload inside a rank: every rank sums its own f32 tensor at the same moment.
//!
//! Each rank holds a tch (libtorch) f32 tensor of `buffer_bytes`, filled with ones, and uses
//! `threads_per_rank` intra-op threads (`tch::set_num_threads`). Per repetition: MPI barrier,
//! then each rank times `tensor.sum()` (one full read of its buffer). Records: figure `membw`,
//! size_bytes = buffer bytes, one sample per repetition per rank. The sum is checked against
//! the element count (ones), so a short read cannot pass.

use super::comm::Communicator;
use super::records::{mark, RecordSink};
use crate::spec::{RunPlan, Workload};
use std::path::Path;
use std::time::Instant;
use tch::{Device, Kind, Tensor};

/// Whether this version runs the workload.
pub const IMPLEMENTED: bool = true;

/// Sums `tensor` once; returns (seconds, sum).
fn stream(tensor: &Tensor) -> (f64, f64) {
    let start = Instant::now();
    let sum = tensor.sum(Kind::Float).double_value(&[]);
    (start.elapsed().as_secs_f64(), sum)
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
        comm.barrier();
        stream(&tensor);
    }
    for repetition in 0..plan.repetitions {
        comm.barrier();
        if repetition == 0 {
            mark(out, comm.rank(), "first_timed_start_unix");
        }
        let (seconds, sum) = stream(&tensor);
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
