//! One NCCL communicator per rank, one rank per GPU: rank 0 makes the unique id, MPI carries
//! it to every rank (nccl-tests' MPI mode), each rank joins on its own GPU. Calls take tch
//! tensors on that GPU and run on the legacy default stream, the stream libtorch's kernels use,
//! so a collective is ordered after the kernel that wrote its input without an event.

use super::library::{self, dtype, Library, RawComm, UniqueId, SUM};
use super::NcclError;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, Root as _};
use std::ffi::{c_int, c_void};
use tch::{Device, Kind, Tensor};

/// A joined NCCL communicator; destroyed when dropped (aborted by [`Comm::abort`]).
pub struct Comm {
    library: &'static Library,
    raw: RawComm,
    rank: u32,
    ranks: u32,
    gpu: usize,
}

impl Comm {
    /// Joins every rank of `world` into one NCCL communicator on GPU `gpu` of each rank.
    pub fn join(world: &SimpleCommunicator, gpu: usize) -> Result<Self, NcclError> {
        let library = library::get()?;
        crate::cuda::set_device(gpu).map_err(|e| NcclError::Cuda(e.to_string()))?;
        let mut id = if world.rank() == 0 { library.unique_id()? } else { UniqueId { internal: [0; 128] } };
        let mut bytes: Vec<u8> = id.internal.iter().map(|&b| b as u8).collect();
        world.process_at_rank(0).broadcast_into(&mut bytes[..]);
        for (slot, byte) in id.internal.iter_mut().zip(&bytes) {
            *slot = *byte as _;
        }
        let (rank, ranks) = (world.rank() as u32, world.size() as u32);
        let raw = library.init_rank(ranks, id, rank)?;
        Ok(Comm { library, raw, rank, ranks, gpu })
    }

    /// This rank in the communicator.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the communicator.
    pub fn ranks(&self) -> u32 {
        self.ranks
    }

    /// The GPU this rank's calls use.
    pub fn device(&self) -> Device {
        Device::Cuda(self.gpu)
    }

    /// The NCCL library the communicator came from.
    pub fn library(&self) -> &'static Library {
        self.library
    }

    /// Sums `send` across ranks into `recv` (the same tensor for in place).
    pub fn all_reduce(&self, send: &Tensor, recv: &Tensor) -> Result<(), NcclError> {
        let count = self.same_count(send, recv)?;
        // SAFETY: both buffers hold `count` float32s on this communicator's GPU (checked).
        self.check("ncclAllReduce", unsafe {
            (self.library.all_reduce)(send.data_ptr(), recv.data_ptr(), count, dtype::FLOAT32, SUM, self.raw, std::ptr::null_mut())
        })
    }

    /// Copies rank `root`'s `send` into every rank's `recv`.
    pub fn broadcast(&self, send: &Tensor, recv: &Tensor, root: u32) -> Result<(), NcclError> {
        let count = self.same_count(send, recv)?;
        // SAFETY: as in all_reduce.
        self.check("ncclBroadcast", unsafe {
            (self.library.broadcast)(send.data_ptr(), recv.data_ptr(), count, dtype::FLOAT32, root as c_int, self.raw, std::ptr::null_mut())
        })
    }

    /// Gathers every rank's `send` (`n` values) into `recv` (`n × ranks`, rank order).
    pub fn all_gather(&self, send: &Tensor, recv: &Tensor) -> Result<(), NcclError> {
        let count = self.scaled_count(send, recv)?;
        // SAFETY: send holds `count` float32s, recv `count × ranks`, both on this GPU (checked).
        self.check("ncclAllGather", unsafe {
            (self.library.all_gather)(send.data_ptr(), recv.data_ptr(), count, dtype::FLOAT32, self.raw, std::ptr::null_mut())
        })
    }

    /// Sums `send` (`n × ranks`) across ranks and leaves block `rank` (`n` values) in `recv`.
    pub fn reduce_scatter(&self, send: &Tensor, recv: &Tensor) -> Result<(), NcclError> {
        let count = self.scaled_count(recv, send)?;
        // SAFETY: recv holds `count` float32s, send `count × ranks`, both on this GPU (checked).
        self.check("ncclReduceScatter", unsafe {
            (self.library.reduce_scatter)(send.data_ptr(), recv.data_ptr(), count, dtype::FLOAT32, SUM, self.raw, std::ptr::null_mut())
        })
    }

    /// Sends block j of `send` (`n × ranks`) to rank j and receives rank i's block into block i
    /// of `recv`: grouped sends and receives, as nccl-tests' alltoall.
    pub fn all_to_all(&self, send: &Tensor, recv: &Tensor) -> Result<(), NcclError> {
        let total = self.same_count(send, recv)?;
        let chunk = total / self.ranks as usize;
        let bytes = chunk * 4;
        self.group(|| {
            for peer in 0..self.ranks {
                let offset = peer as usize * bytes;
                // SAFETY: block `peer` lies inside both buffers (chunk × ranks ≤ total).
                unsafe {
                    self.send_raw(byte_offset(send, offset), chunk, peer)?;
                    self.recv_raw(byte_offset(recv, offset), chunk, peer)?;
                }
            }
            Ok(())
        })
    }

    /// Sends `buf` to rank `peer` (pairs with the peer's [`Comm::recv`]).
    pub fn send(&self, buf: &Tensor, peer: u32) -> Result<(), NcclError> {
        let count = self.count(buf)?;
        // SAFETY: `buf` holds `count` float32s on this GPU (checked).
        unsafe { self.send_raw(buf.data_ptr(), count, peer) }
    }

    /// Receives `buf` from rank `peer`.
    pub fn recv(&self, buf: &Tensor, peer: u32) -> Result<(), NcclError> {
        let count = self.count(buf)?;
        // SAFETY: as in send.
        unsafe { self.recv_raw(buf.data_ptr(), count, peer) }
    }

    unsafe fn send_raw(&self, buf: *mut c_void, count: usize, peer: u32) -> Result<(), NcclError> {
        self.check("ncclSend", (self.library.send)(buf, count, dtype::FLOAT32, peer as c_int, self.raw, std::ptr::null_mut()))
    }

    unsafe fn recv_raw(&self, buf: *mut c_void, count: usize, peer: u32) -> Result<(), NcclError> {
        self.check("ncclRecv", (self.library.recv)(buf, count, dtype::FLOAT32, peer as c_int, self.raw, std::ptr::null_mut()))
    }

    /// Runs `calls` between ncclGroupStart and ncclGroupEnd (the group is ended on every path).
    fn group(&self, calls: impl FnOnce() -> Result<(), NcclError>) -> Result<(), NcclError> {
        // SAFETY: group calls take no arguments.
        self.check("ncclGroupStart", unsafe { (self.library.group_start)() })?;
        let inside = calls();
        // SAFETY: as above.
        let end = self.check("ncclGroupEnd", unsafe { (self.library.group_end)() });
        inside.and(end)
    }

    fn check(&self, call: &'static str, code: library::NcclResult) -> Result<(), NcclError> {
        self.library.check(call, code)
    }

    /// Float32 values of a contiguous tensor on this communicator's GPU.
    fn count(&self, t: &Tensor) -> Result<usize, NcclError> {
        if t.device() != self.device() || t.kind() != Kind::Float || !t.is_contiguous() {
            return Err(NcclError::Buffer(format!(
                "NCCL buffers must be contiguous float32 tensors on {:?}; found {:?} {:?}{}",
                self.device(),
                t.kind(),
                t.device(),
                if t.is_contiguous() { "" } else { " (not contiguous)" }
            )));
        }
        Ok(t.numel())
    }

    fn same_count(&self, a: &Tensor, b: &Tensor) -> Result<usize, NcclError> {
        let (n, m) = (self.count(a)?, self.count(b)?);
        if n != m {
            return Err(NcclError::Buffer(format!("send has {n} values, receive {m}: they must match")));
        }
        Ok(n)
    }

    /// `part`'s count, checking that `whole` holds `ranks` times as many.
    fn scaled_count(&self, part: &Tensor, whole: &Tensor) -> Result<usize, NcclError> {
        let (n, m) = (self.count(part)?, self.count(whole)?);
        if n * self.ranks as usize != m {
            return Err(NcclError::Buffer(format!("{m} values must be {n} per rank × {} ranks", self.ranks)));
        }
        Ok(n)
    }

    /// Ends the communicator without waiting for calls in flight (a failed or hung rank).
    pub fn abort(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: the communicator is valid and is not used after this.
        unsafe { (this.library.comm_abort)(this.raw) };
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // SAFETY: the communicator is valid and is not used after this.
        unsafe { (self.library.comm_destroy)(self.raw) };
    }
}

/// `t`'s data pointer advanced by `bytes`.
fn byte_offset(t: &Tensor, bytes: usize) -> *mut c_void {
    // SAFETY: callers keep the offset inside the tensor's storage.
    unsafe { (t.data_ptr() as *mut u8).add(bytes) as *mut c_void }
}

/// NCCL on the rank's GPU: nothing staged through the host. Each call is waited for (the
/// device synchronised after it), so its time is counted as the host-staged path's is.
impl crate::rank::comm::TensorCollectives for &Comm {
    fn all_reduce(&mut self, partial: &Tensor) -> anyhow::Result<Tensor> {
        let send = partial.to_device(self.device()).to_kind(Kind::Float).contiguous();
        let sum = send.empty_like();
        Comm::all_reduce(self, &send, &sum)?;
        crate::model::placement::synchronize(self.device());
        Ok(sum.to_kind(partial.kind()))
    }

    /// Each part padded to the longest (NCCL gathers equal blocks), the padding dropped after.
    fn all_gather(&mut self, part: &Tensor, counts: &[i32]) -> anyhow::Result<Tensor> {
        let longest = i64::from(counts.iter().copied().max().unwrap_or(0).max(1));
        let flat = part.to_device(self.device()).to_kind(Kind::Float).reshape([-1]);
        let send = flat.constant_pad_nd([0, longest - flat.size()[0]]).contiguous();
        let gathered = Tensor::zeros([longest * counts.len() as i64], (Kind::Float, self.device()));
        Comm::all_gather(self, &send, &gathered)?;
        let pieces: Vec<Tensor> = counts.iter().enumerate().map(|(r, &c)| gathered.narrow(0, r as i64 * longest, i64::from(c))).collect();
        let out = Tensor::cat(&pieces, 0).to_kind(part.kind());
        crate::model::placement::synchronize(self.device());
        Ok(out)
    }
}
