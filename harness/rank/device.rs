//! Where this rank computes: the plan's device resolved in this process (local rank r uses GPU
//! r mod the GPUs libtorch sees), and what it resolved to, for the record (which ranks shared
//! its GPU included).

use super::comm::Communicator;
use crate::model::placement::Placement;
use crate::model::source;
use crate::spec::schema::Device;
use crate::spec::RunPlan;
use mpi::topology::Communicator as _;
use mpi::traits::CommunicatorCollectives;

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

/// How many ranks share this rank's GPU (1 on the CPU or with a GPU to itself), told apart by
/// the GPU's PCI address, exchanged among the ranks of its host (those MPI finds sharing its
/// memory, whatever the hosts are named): a launcher that gives each rank its own
/// `CUDA_VISIBLE_DEVICES` (Slurm's `--gpus-per-task`) shows every rank its GPU as `cuda:0`.
/// Every rank of the run must call it (a split and an all-gather).
pub fn sharing(placement: &Placement, comm: &Communicator) -> u32 {
    let tch::Device::Cuda(ordinal) = placement.device else {
        return 1;
    };
    let host = comm.raw().split_shared(0);
    let mine = gpu_key(&gpu_address(ordinal));
    let mut keys = vec![0u64; host.size().max(1) as usize];
    host.all_gather_into(&mine, &mut keys[..]);
    keys.iter().filter(|&&k| k == mine).count() as u32
}

/// The PCI address of visible GPU `ordinal`, or, where the runtime cannot say, the ordinal
/// (local rank r uses GPU r mod the GPUs it sees, the same GPUs on every rank of its host).
fn gpu_address(ordinal: usize) -> String {
    crate::cuda::pci_bus_id(ordinal).unwrap_or_else(|_| format!("visible GPU {ordinal}"))
}

/// A GPU's identity among the ranks of its host: its address there, hashed.
fn gpu_key(address: &str) -> u64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(address.to_ascii_lowercase().as_bytes());
    u64::from_le_bytes(digest[..8].try_into().unwrap_or_default())
}

fn env_number(names: &[&str]) -> Option<u32> {
    names.iter().find_map(|n| std::env::var(n).ok()?.trim().parse().ok())
}

/// This process's rank among the ranks on its host (Open MPI, Slurm; 0 when neither says).
fn local_rank() -> usize {
    env_number(&["OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"]).unwrap_or(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_is_one_physical_gpu_of_one_host_whatever_its_number_in_a_process() {
        // Slurm's --gpus-per-task: each rank sees its own GPU as cuda:0; the addresses differ.
        assert_ne!(gpu_key("0000:19:00.0"), gpu_key("0000:3B:00.0"));
        assert_eq!(gpu_key("0000:3B:00.0"), gpu_key("0000:3b:00.0"), "case of the hex digits");
        assert_ne!(gpu_key("0000:19:00.0"), gpu_key("visible GPU 0"), "an address is not an ordinal");
        if tch::Cuda::device_count() == 0 {
            assert_eq!(gpu_address(0), "visible GPU 0", "no GPU here: the visible ordinal stands in");
        }
    }
}
