//! The communicator ranks use: MPI collectives on f32 buffers that count calls,
//! bytes and time spent inside them, and, on an NCCL link, NCCL's collectives on the rank's
//! GPU tensors (MPI then only carries NCCL's unique id and the barriers).

use mpi::collective::SystemOperation;
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Destination as _, Root as _, Source as _};
use std::time::Instant;
use tch::Tensor;

/// Counts of collective calls, bytes and seconds, since the last reset.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CommStats {
    /// Collective or point-to-point calls.
    pub calls: u64,
    /// All-reduce calls.
    pub all_reduces: u64,
    /// All-gather calls.
    pub all_gathers: u64,
    /// Payload bytes passed in (this rank's contribution).
    pub bytes: u64,
    /// Seconds spent inside communication calls (including waiting for other ranks).
    pub seconds: f64,
    /// Payload bytes of the all-reduce calls.
    pub all_reduce_bytes: u64,
    /// Seconds inside the all-reduce calls (including waiting for other ranks).
    pub all_reduce_seconds: f64,
}

/// MPI_COMM_WORLD with counters, and the NCCL communicator of an NCCL link.
pub struct Communicator {
    world: SimpleCommunicator,
    stats: CommStats,
    /// The all-reduce's send buffer, kept between calls: a fresh megabyte-sized one per
    /// prefill call would be new pages, faulted in and zeroed each time.
    send: Vec<f32>,
    nccl: Option<crate::nccl::comm::Comm>,
}

impl Communicator {
    /// Wraps the world communicator of an initialised MPI universe.
    pub fn new(world: SimpleCommunicator) -> Self {
        Communicator { world, stats: CommStats::default(), send: Vec::new(), nccl: None }
    }

    /// Carries tensor collectives over `nccl` from now on.
    pub fn attach_nccl(&mut self, nccl: crate::nccl::comm::Comm) {
        self.nccl = Some(nccl);
    }

    /// The NCCL communicator, on an NCCL link.
    pub fn nccl(&self) -> Option<&crate::nccl::comm::Comm> {
        self.nccl.as_ref()
    }

    /// Aborts the NCCL communicator (a failing rank: calls in flight are not waited for).
    pub fn abort_nccl(&mut self) {
        if let Some(nccl) = self.nccl.take() {
            nccl.abort();
        }
    }

    /// Destroys the NCCL communicator (a rank that finished).
    pub fn close_nccl(&mut self) {
        self.nccl = None;
    }

    /// Sums a tensor across ranks with the link's [`TensorCollectives`] (NCCL on the GPU on an
    /// NCCL link, else staged through host memory for MPI), counted as one all-reduce.
    pub fn all_reduce_tensor(&mut self, partial: &Tensor) -> anyhow::Result<Tensor> {
        // The GPU's queue drained first: the clock counts the collective, not the kernels
        // that made `partial` (a collective waits for them, on either path).
        crate::model::placement::synchronize(partial.device());
        let start = Instant::now();
        let sum = self.tensors().all_reduce(partial)?;
        let bytes = (partial.numel() * self.value_bytes(partial)) as u64;
        self.stats.all_reduces += 1;
        self.stats.all_reduce_bytes += bytes;
        self.stats.all_reduce_seconds += start.elapsed().as_secs_f64();
        self.account(bytes as usize, start);
        Ok(sum)
    }

    /// Concatenates the ranks' `part`s (`counts[r]` values from rank r, in rank order) on every
    /// rank with the link's [`TensorCollectives`], counted as one all-gather.
    pub fn all_gather_tensor(&mut self, part: &Tensor, counts: &[i32]) -> anyhow::Result<Tensor> {
        crate::model::placement::synchronize(part.device());
        let start = Instant::now();
        let all = self.tensors().all_gather(part, counts)?;
        self.stats.all_gathers += 1;
        self.account(part.numel() * self.value_bytes(part), start);
        Ok(all)
    }

    /// Bytes a value of `t` takes on this rank's link: its own size over NCCL, a float32's staged
    /// through host memory for MPI.
    fn value_bytes(&self, t: &Tensor) -> usize {
        match self.nccl {
            Some(_) => t.kind().elt_size_in_bytes(),
            None => 4,
        }
    }

    /// The collectives on tensors this rank's link carries them with.
    fn tensors(&mut self) -> Box<dyn TensorCollectives + '_> {
        match &self.nccl {
            Some(nccl) => Box::new(nccl),
            None => Box::new(HostStaged { world: &self.world, send: &mut self.send }),
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.world.rank() as u32
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.world.size() as u32
    }

    /// The underlying MPI communicator (for workloads that time raw operations).
    pub fn raw(&self) -> &SimpleCommunicator {
        &self.world
    }

    /// The counters.
    pub fn stats(&self) -> CommStats {
        self.stats
    }

    /// Zeroes the counters.
    pub fn reset_stats(&mut self) {
        self.stats = CommStats::default();
    }

    fn account(&mut self, bytes: usize, start: Instant) {
        self.stats.calls += 1;
        self.stats.bytes += bytes as u64;
        self.stats.seconds += start.elapsed().as_secs_f64();
    }

    /// Waits for every rank.
    pub fn barrier(&mut self) {
        let start = Instant::now();
        self.world.barrier();
        self.account(0, start);
    }

    /// Sums `buf` across ranks in place.
    pub fn all_reduce_sum(&mut self, buf: &mut [f32]) {
        let start = Instant::now();
        sum_in_place(&self.world, &mut self.send, buf);
        self.stats.all_reduces += 1;
        self.stats.all_reduce_bytes += std::mem::size_of_val(buf) as u64;
        self.stats.all_reduce_seconds += start.elapsed().as_secs_f64();
        self.account(std::mem::size_of_val(buf), start);
    }

    /// Sums `buf` across ranks in place as consecutive pieces of the lengths `pieces`: `fill`
    /// writes a piece (its offset in `buf` and its values), which is then started non-blocking
    /// (`MPI_Iallreduce`) while the next piece is filled. After each start every pending piece
    /// is tested, so the library progresses them (Open MPI moves a non-blocking collective
    /// only inside MPI calls); all are waited for at the end. Seconds inside MPI calls (the
    /// exposed communication) are counted, the fills not; each piece counts as an all-reduce.
    pub fn all_reduce_sum_overlapped(&mut self, buf: &mut [f32], pieces: &[usize], mut fill: impl FnMut(usize, &mut [f32])) {
        assert_eq!(pieces.iter().sum::<usize>(), buf.len(), "all-reduce pieces must cover the buffer");
        let (world, send) = (&self.world, &mut self.send);
        send.resize(buf.len(), 0.0);
        let mut exposed = 0.0;
        mpi::request::scope(|scope| {
            let (mut send_rest, mut recv_rest) = (&mut send[..], &mut buf[..]);
            let mut pending = Vec::with_capacity(pieces.len());
            let mut offset = 0;
            for &len in pieces {
                let (piece, s_rest) = std::mem::take(&mut send_rest).split_at_mut(len);
                let (out, r_rest) = std::mem::take(&mut recv_rest).split_at_mut(len);
                (send_rest, recv_rest) = (s_rest, r_rest);
                fill(offset, piece);
                offset += len;
                let start = Instant::now();
                pending.push(world.immediate_all_reduce_into(scope, &*piece, out, SystemOperation::sum()));
                pending = pending.into_iter().filter_map(|request| request.test().err()).collect();
                exposed += start.elapsed().as_secs_f64();
            }
            let start = Instant::now();
            pending.into_iter().for_each(|request| {
                request.wait();
            });
            exposed += start.elapsed().as_secs_f64();
        });
        let bytes = std::mem::size_of_val(buf) as u64;
        self.stats.all_reduces += pieces.len() as u64;
        self.stats.all_reduce_bytes += bytes;
        self.stats.all_reduce_seconds += exposed;
        self.stats.calls += pieces.len() as u64;
        self.stats.bytes += bytes;
        self.stats.seconds += exposed;
    }

    /// Gathers each rank's `part` (lengths may differ) into `out` on every rank, in rank order.
    pub fn all_gather_varcount(&mut self, part: &[f32], counts: &[i32], out: &mut [f32]) {
        let start = Instant::now();
        let displs = displacements(counts);
        let mut partition = PartitionMut::new(out, counts, &displs[..]);
        self.world.all_gather_varcount_into(part, &mut partition);
        self.stats.all_gathers += 1;
        self.account(std::mem::size_of_val(part), start);
    }

    /// Sends `buf` to `dest`.
    pub fn send(&mut self, dest: u32, buf: &[f32]) {
        let start = Instant::now();
        self.world.process_at_rank(dest as i32).send(buf);
        self.account(std::mem::size_of_val(buf), start);
    }

    /// Receives into `buf` from `src`.
    pub fn recv(&mut self, src: u32, buf: &mut [f32]) {
        let start = Instant::now();
        self.world.process_at_rank(src as i32).receive_into(buf);
        self.account(std::mem::size_of_val(buf), start);
    }

    /// Sends `buf` to `dest` while receiving `into` from `src` (MPI_Sendrecv: a ring step
    /// cannot deadlock on the order of sends).
    pub fn send_recv(&mut self, dest: u32, buf: &[f32], src: u32, into: &mut [f32]) {
        let start = Instant::now();
        let (to, from) = (self.world.process_at_rank(dest as i32), self.world.process_at_rank(src as i32));
        mpi::point_to_point::send_receive_into(buf, &to, into, &from);
        self.account(std::mem::size_of_val(buf), start);
    }

    /// Gathers each rank's `part` (`counts[r]` values from rank r) into `out` on `root`, in rank
    /// order; `out` is not touched on the other ranks.
    pub fn gather_varcount(&mut self, root: u32, part: &[f32], counts: &[i32], out: &mut [f32]) {
        let start = Instant::now();
        let process = self.world.process_at_rank(root as i32);
        if self.rank() == root {
            let displs = displacements(counts);
            let mut partition = PartitionMut::new(out, counts, &displs[..]);
            process.gather_varcount_into_root(part, &mut partition);
        } else {
            process.gather_varcount_into(part);
        }
        self.account(std::mem::size_of_val(part), start);
    }

    /// Copies `buf` from `root` to every rank.
    pub fn broadcast(&mut self, root: u32, buf: &mut [f32]) {
        let start = Instant::now();
        self.world.process_at_rank(root as i32).broadcast_into(buf);
        self.account(std::mem::size_of_val(buf), start);
    }

    /// Sends `send_counts[j]` f32s of `send` to each rank j and receives `recv_counts[i]` from each rank i
    /// (MPI_Alltoallv; both buffers packed in rank order).
    pub fn all_to_all_varcount(&mut self, send: &[f32], send_counts: &[i32], recv: &mut [f32], recv_counts: &[i32]) {
        let start = Instant::now();
        let send_displs = displacements(send_counts);
        let recv_displs = displacements(recv_counts);
        let partition = Partition::new(send, send_counts, &send_displs[..]);
        let mut received = PartitionMut::new(recv, recv_counts, &recv_displs[..]);
        self.world.all_to_all_varcount_into(&partition, &mut received);
        self.account(std::mem::size_of_val(send), start);
    }
}

/// Collectives on a rank's tensors, wherever they live: the seam between a split model's
/// exchanges and the library that carries them (MPI through host memory, or NCCL on the GPU).
/// Implementations move data only; [`Communicator`] counts the calls, bytes and seconds.
pub trait TensorCollectives {
    /// Sums `partial` across ranks; the sum has its shape, kind and device.
    fn all_reduce(&mut self, partial: &Tensor) -> anyhow::Result<Tensor>;
    /// Concatenates the ranks' flat `part`s (`counts[r]` values from rank r) in rank order: on
    /// the host in float32 over MPI, on `part`'s device in its kind over NCCL (callers read it
    /// with `to_vec`; moving it back to the GPU would add a copy to every step it serves).
    fn all_gather(&mut self, part: &Tensor, counts: &[i32]) -> anyhow::Result<Tensor>;
}

/// MPI on host float32 buffers: a tensor on a GPU is copied off it, summed or gathered, and
/// the result copied back ("a transfer through the host").
struct HostStaged<'c> {
    world: &'c SimpleCommunicator,
    send: &'c mut Vec<f32>,
}

impl TensorCollectives for HostStaged<'_> {
    fn all_reduce(&mut self, partial: &Tensor) -> anyhow::Result<Tensor> {
        let mut buf = crate::model::reference::to_vec(partial);
        sum_in_place(self.world, self.send, &mut buf);
        let sum = Tensor::from_slice(&buf).view(partial.size().as_slice());
        Ok(crate::model::placement::like(sum, partial))
    }

    fn all_gather(&mut self, part: &Tensor, counts: &[i32]) -> anyhow::Result<Tensor> {
        let mut out = vec![0f32; counts.iter().map(|&c| c as usize).sum()];
        let displs = displacements(counts);
        let mut partition = PartitionMut::new(&mut out[..], counts, &displs[..]);
        self.world.all_gather_varcount_into(&crate::model::reference::to_vec(part)[..], &mut partition);
        Ok(Tensor::from_slice(&out))
    }
}

/// Sums `buf` across ranks in place (MPI_Allreduce), through `send`, a buffer kept between calls.
fn sum_in_place(world: &SimpleCommunicator, send: &mut Vec<f32>, buf: &mut [f32]) {
    send.clear();
    send.extend_from_slice(buf);
    world.all_reduce_into(&send[..], buf, SystemOperation::sum());
}

/// Offsets of consecutive blocks of `counts` elements.
pub fn displacements(counts: &[i32]) -> Vec<i32> {
    counts
        .iter()
        .scan(0, |acc, &c| {
            let d = *acc;
            *acc += c;
            Some(d)
        })
        .collect()
}
