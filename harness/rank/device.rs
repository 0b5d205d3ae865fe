//! Where this rank computes: the plan's device resolved in this process (local rank r uses GPU
//! r mod the GPUs libtorch sees), and what it resolved to, for the record.

use crate::model::placement::Placement;
use crate::model::source;
use crate::spec::schema::Device;
use crate::spec::RunPlan;

/// The placement of this rank's part: the host (float32 on parlab's row kernels; half precision
/// through libtorch's operations), or its CUDA device in the plan's dtype.
pub fn placement(plan: &RunPlan) -> anyhow::Result<Placement> {
    match plan.device {
        Device::Cpu => Ok(Placement::cpu_in(source::torch_kind(source::dtype(plan)))),
        Device::Cuda => Ok(Placement::cuda(gpu_ordinal(plan)?, source::torch_kind(source::dtype(plan)))),
    }
}

/// The CUDA device this rank uses (local rank mod the GPUs libtorch sees), or an error naming the plan.
pub fn gpu_ordinal(plan: &RunPlan) -> anyhow::Result<usize> {
    let gpus = tch::Cuda::device_count().max(0) as usize;
    if gpus == 0 {
        anyhow::bail!(
            "{}: this run needs a CUDA device, but parlab's libtorch sees none here \
             (a CPU-only torch, libtorch_cuda not linked, or CUDA_VISIBLE_DEVICES empty)",
            plan.label()
        );
    }
    Ok(local_rank() % gpus)
}

/// How many ranks of this host share this rank's GPU (1 on the CPU or with a GPU to itself).
pub fn sharing(placement: &Placement) -> u32 {
    if !placement.is_cuda() {
        return 1;
    }
    let gpus = tch::Cuda::device_count().max(1) as u32;
    local_size().div_ceil(gpus).max(1)
}

fn env_number(names: &[&str]) -> Option<u32> {
    names.iter().find_map(|n| std::env::var(n).ok()?.trim().parse().ok())
}

/// This process's rank among the ranks on its host (Open MPI, Slurm; 0 when neither says).
fn local_rank() -> usize {
    env_number(&["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"]).unwrap_or(0) as usize
}

/// The number of ranks on this host (1 when the launcher does not say).
fn local_size() -> u32 {
    env_number(&["OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"]).unwrap_or(1).max(1)
}
