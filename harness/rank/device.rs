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
    sharers(local_rank() as u32, local_size(), gpus)
}

/// The ranks of a host of `local_size` that use the GPU of local rank `local_rank` (local rank r
/// uses GPU r mod `gpus`), this one included.
fn sharers(local_rank: u32, local_size: u32, gpus: u32) -> u32 {
    let gpu = local_rank % gpus.max(1);
    (0..local_size.max(local_rank + 1)).filter(|r| r % gpus.max(1) == gpu).count() as u32
}

fn env_number(names: &[&str]) -> Option<u32> {
    names.iter().find_map(|n| std::env::var(n).ok()?.trim().parse().ok())
}

/// This process's rank among the ranks on its host (Open MPI, Slurm; 0 when neither says).
fn local_rank() -> usize {
    env_number(&["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"]).unwrap_or(0) as usize
}

/// The number of ranks on this host (1 when the launcher does not say): Open MPI's local size,
/// else Slurm's tasks of this step on this node.
fn local_size() -> u32 {
    env_number(&["OMPI_COMM_WORLD_LOCAL_SIZE"])
        .or_else(slurm_tasks_here)
        .or_else(|| env_number(&["SLURM_NTASKS_PER_NODE"]))
        .unwrap_or(1)
        .max(1)
}

/// This node's entry of `SLURM_STEP_TASKS_PER_NODE` (set by srun whether or not
/// `--ntasks-per-node` was given), at `SLURM_NODEID`.
fn slurm_tasks_here() -> Option<u32> {
    let list = std::env::var("SLURM_STEP_TASKS_PER_NODE").ok()?;
    let node = env_number(&["SLURM_NODEID"]).unwrap_or(0) as usize;
    tasks_per_node(&list)?.get(node).copied()
}

/// Slurm's compressed tasks-per-node list expanded (`2(x3),1`: 2, 2, 2, 1); None when malformed.
fn tasks_per_node(list: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for item in list.split(',') {
        let (tasks, repeat) = match item.trim().split_once("(x") {
            Some((tasks, rest)) => (tasks, rest.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (item.trim(), 1),
        };
        out.extend(std::iter::repeat_n(tasks.parse::<u32>().ok()?, repeat.min(1 << 16)));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_is_shared_by_the_local_ranks_mapped_to_it() {
        // 3 ranks on 2 GPUs: ranks 0 and 2 share GPU 0, rank 1 has GPU 1 to itself.
        assert_eq!([0, 1, 2].map(|r| sharers(r, 3, 2)), [2, 1, 2]);
        assert_eq!(sharers(0, 1, 1), 1);
        assert_eq!([0, 1].map(|r| sharers(r, 2, 1)), [2, 2], "two ranks on one GPU");
        assert_eq!(sharers(3, 4, 8), 1, "more GPUs than ranks");
    }

    #[test]
    fn slurms_tasks_per_node_list_is_expanded() {
        assert_eq!(tasks_per_node("2(x3),1"), Some(vec![2, 2, 2, 1]));
        assert_eq!(tasks_per_node("4"), Some(vec![4]));
        assert_eq!(tasks_per_node("4,3"), Some(vec![4, 3]));
        assert_eq!(tasks_per_node("2(x"), None);
        assert_eq!(tasks_per_node(""), None);
    }
}
