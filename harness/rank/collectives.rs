//! The `collectives` workload inside a rank: each op over each message size, timed and checked.
//!
//! Each op at each size is timed two ways, one after the other:
//!
//! - **Per iteration, slowest rank** (figure `<op>`, e.g. `all-reduce`): for every iteration
//!   (warm-up and timed) all ranks meet in MPI_Barrier, then each rank times its own call with
//!   MPI_Wtime. The collector takes the slowest rank of each iteration: what a decode step pays,
//!   including the wait for the last rank to leave the barrier (barrier-exit skew). Before each
//!   iteration the receive buffer is poisoned with NaN; after it the result is compared exactly
//!   with the expected values (all small integers, exact in f32). A wrong value fails the run,
//!   naming op, size, rank and how many values were wrong.
//! - **Back to back, per rank** (figure `<op>@block`; nccl-tests' convention for the
//!   operation's own time): about `iterations` calls in blocks of at most [`BLOCK_CALLS`] (at
//!   least [`BLOCKS`] blocks; [`blocks_of`]). Per block all ranks meet in MPI_Barrier, then each
//!   rank runs the block's calls back to back, untimed, and times the block as one with
//!   MPI_Wtime (nccl-tests' method; a clock read around each call would add two reads per
//!   call, ~50 ns, to a 300 ns call); its sample is block time / calls. The barrier's exit
//!   skew enters once per block instead of once per call, so it is divided by the block's
//!   calls. The collector averages the ranks' samples of a block (as nccl-tests and
//!   osu_allreduce average their ranks' latencies) and takes the median over blocks, so a burst
//!   of noise spoils one block, not the figure. The buffer is poisoned before each
//!   block and the last call's result checked after it, as above.
//!
//! Sizes follow nccl-tests: for all-gather, reduce-scatter and all-to-all the size is the whole
//! buffer (each rank's chunk is size / world, rounded down to whole f32s, at least one), so the
//! recorded `size_bytes` is the size actually moved. Ping-pong times rank 0's round trip to
//! rank 1 and records half of it (only rank 0 records it; other ranks wait at the barrier).

use super::comm::Communicator;
use super::fault::{self, Fault};
use super::figure::Figure;
use super::records::{mark, RecordSink};
use crate::launch::Moment;
use crate::spec::{CollectiveParams, Op, RunPlan, Workload};
use mpi::collective::SystemOperation;
use mpi::topology::SimpleCommunicator;
use mpi::traits::{Communicator as _, CommunicatorCollectives as _, Destination as _, Root as _, Source as _};
use std::path::Path;

/// Timed blocks of back-to-back calls per op, size and repetition, at least.
pub const BLOCKS: u32 = 3;

/// Calls per block, at most: enough to divide the barrier's exit skew by 50, few enough that a
/// burst of noise (another process taking the core) spoils one block of many, not the figure.
pub const BLOCK_CALLS: u32 = 50;

/// (blocks, calls per block) for `iterations`: about `iterations` calls in all, in blocks of at
/// most [`BLOCK_CALLS`], and at least [`BLOCKS`] blocks.
pub fn blocks_of(iterations: u32) -> (u32, u32) {
    let calls = iterations.clamp(1, BLOCK_CALLS);
    ((iterations / calls).max(BLOCKS), calls)
}

/// The value rank `r` contributes at position `i` (small integers, exact in f32 sums).
pub fn value(r: u32, i: usize) -> f32 {
    (r + 1) as f32 + (i % 251) as f32
}

/// The value rank `src` sends to rank `dst` of `world` at position `i` of its all-to-all chunk:
/// one per (src, dst) pair and, up to 256 ranks, per position modulo 251, every one an integer
/// below 2^24 (exact in f32). Past 256 ranks the position is left out; past 4096 pairs repeat.
pub fn a2a_value(src: u32, dst: u32, world: u32, i: usize) -> f32 {
    let pair = u64::from(src) * u64::from(world) + u64::from(dst);
    let value = if world <= 256 { pair + (i % 251) as u64 * 65_536 } else { pair % (1 << 24) };
    value as f32
}

/// Buffers of one op at one size on one rank, with what the result must be.
pub struct Case {
    op: Op,
    rank: u32,
    world: u32,
    /// f32s per chunk (the whole message for all-reduce, broadcast, ping-pong).
    chunk: usize,
    send: Vec<f32>,
    recv: Vec<f32>,
    /// The exact result (empty where this rank expects nothing: ping-pong on ranks above 1).
    expect: Vec<f32>,
}

/// Whether `op`'s message is cut into one chunk per rank (nccl-tests' count is the whole buffer).
fn chunked(op: Op) -> bool {
    matches!(op, Op::AllGather | Op::ReduceScatter | Op::AllToAll)
}

/// f32s per chunk of `op` with a message of about `size` bytes over `world` ranks (at least one).
fn chunk_of(op: Op, size: u64, world: u32) -> usize {
    let count = ((size / 4) as usize).max(1);
    if chunked(op) {
        (count / world as usize).max(1)
    } else {
        count
    }
}

/// Bytes a message of `op` moves as nccl-tests counts them (the whole buffer for chunked ops).
fn moved_bytes(op: Op, chunk: usize, world: u32) -> u64 {
    let floats = if chunked(op) { chunk * world as usize } else { chunk };
    (floats * 4) as u64
}

/// The sizes of `sizes` that move distinct bytes for `op` over `world` ranks, in their order:
/// below 4 bytes a rank every size of a chunked operation moves one f32 per rank, and a second
/// sweep of the same bytes would be recorded under the first's size and merged with it.
pub fn distinct_sizes(op: Op, sizes: &[u64], world: u32) -> Vec<u64> {
    let mut seen = std::collections::BTreeSet::new();
    sizes.iter().copied().filter(|&size| seen.insert(moved_bytes(op, chunk_of(op, size, world), world))).collect()
}

impl Case {
    /// Buffers for `op` with a message of about `size` bytes.
    pub fn new(op: Op, size: u64, rank: u32, world: u32) -> Self {
        let p = world as usize;
        let chunk = chunk_of(op, size, world);
        let (send_len, recv_len) = match op {
            Op::AllGather => (chunk, chunk * p),
            Op::ReduceScatter => (chunk * p, chunk),
            Op::AllToAll => (chunk * p, chunk * p),
            // Operations on a rank's GPU run in `rank::device_ops`, never through a Case.
            _ => (chunk, chunk),
        };
        let send = (0..send_len)
            .map(|i| match op {
                Op::AllToAll => a2a_value(rank, (i / chunk) as u32, world, i % chunk),
                Op::Broadcast | Op::PingPong => value(0, i),
                _ => value(rank, i),
            })
            .collect();
        let mut case = Case { op, rank, world, chunk, send, recv: vec![0.0; recv_len], expect: Vec::new() };
        case.expect = (0..recv_len).map_while(|i| case.expected(i)).collect();
        case
    }

    /// Bytes of the message as nccl-tests counts it (the whole buffer for chunked ops).
    pub fn bytes(&self) -> u64 {
        moved_bytes(self.op, self.chunk, self.world)
    }

    /// The op.
    pub fn op(&self) -> Op {
        self.op
    }

    /// Values per chunk (the whole message for all-reduce, broadcast, ping-pong).
    pub fn chunk(&self) -> usize {
        self.chunk
    }

    /// What this rank sends.
    pub fn send_values(&self) -> &[f32] {
        &self.send
    }

    /// The exact result this rank must receive (empty where it expects nothing).
    pub fn expected_values(&self) -> &[f32] {
        &self.expect
    }

    /// Number of values compared by `wrong`.
    pub fn len(&self) -> usize {
        self.recv.len()
    }

    /// True when the result buffer is empty (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.recv.is_empty()
    }

    /// Fills the result buffer with NaN so a call that writes nothing cannot pass the check.
    pub fn poison(&mut self) {
        self.recv.fill(f32::NAN);
        if self.op == Op::Broadcast && self.rank == 0 {
            self.recv.copy_from_slice(&self.send);
        }
    }

    /// Runs the op once; returns seconds this rank spent in it (half the round trip for ping-pong).
    pub fn exec(&mut self, world: &SimpleCommunicator) -> f64 {
        let start = mpi::time();
        self.call(world);
        fault::stretch(std::time::Duration::from_secs_f64((mpi::time() - start).max(0.0)));
        let elapsed = mpi::time() - start;
        if self.op == Op::PingPong {
            elapsed / 2.0
        } else {
            elapsed
        }
    }

    /// Runs the op once, untimed (the calls of a back-to-back block, timed as one).
    pub fn call(&mut self, world: &SimpleCommunicator) {
        match self.op {
            Op::AllReduce => world.all_reduce_into(&self.send[..], &mut self.recv[..], SystemOperation::sum()),
            Op::AllGather => world.all_gather_into(&self.send[..], &mut self.recv[..]),
            Op::ReduceScatter => world.reduce_scatter_block_into(&self.send[..], &mut self.recv[..], SystemOperation::sum()),
            Op::AllToAll => world.all_to_all_into(&self.send[..], &mut self.recv[..]),
            Op::Broadcast => world.process_at_rank(0).broadcast_into(&mut self.recv[..]),
            Op::PingPong => self.ping_pong(world),
            Op::HostToDevice | Op::DeviceToHost | Op::HostToDevicePageable | Op::DeviceToHostPageable | Op::DeviceRead | Op::DeviceCopy => {
            }
        }
    }

    fn ping_pong(&mut self, world: &SimpleCommunicator) {
        match self.rank {
            0 => {
                world.process_at_rank(1).send(&self.send[..]);
                world.process_at_rank(1).receive_into(&mut self.recv[..]);
            }
            1 => {
                world.process_at_rank(0).receive_into(&mut self.recv[..]);
                world.process_at_rank(0).send(&self.recv[..]);
            }
            _ => self.recv.fill(f32::NAN),
        }
    }

    /// Whether this rank times the op (ping-pong: rank 0 only).
    pub fn timed_here(&self) -> bool {
        self.op != Op::PingPong || self.rank == 0
    }

    /// The exact value position `i` of the result must hold, or None where nothing is expected.
    pub fn expected(&self, i: usize) -> Option<f32> {
        let p = self.world;
        let sum_at = |j: usize| (0..p).map(|r| value(r, j)).sum::<f32>();
        match self.op {
            Op::AllReduce => Some(sum_at(i)),
            Op::AllGather => Some(value((i / self.chunk) as u32, i % self.chunk)),
            Op::ReduceScatter => Some(sum_at(self.rank as usize * self.chunk + i)),
            Op::AllToAll => Some(a2a_value((i / self.chunk) as u32, self.rank, self.world, i % self.chunk)),
            Op::Broadcast => Some(value(0, i)),
            Op::PingPong => (self.rank < 2).then(|| value(0, i)),
            Op::HostToDevice | Op::DeviceToHost | Op::HostToDevicePageable | Op::DeviceToHostPageable | Op::DeviceRead | Op::DeviceCopy => {
                None
            }
        }
    }

    /// How many result values differ (bitwise) from the expected ones.
    pub fn wrong(&self) -> usize {
        self.expect.iter().zip(&self.recv).filter(|(e, v)| e.to_bits() != v.to_bits()).count()
    }

    /// Corrupts one result value (the `wrong` injected fault).
    pub fn corrupt(&mut self) {
        if let Some(v) = self.recv.first_mut() {
            *v += 1.0;
        }
    }
}

/// Runs this rank's part of a `collectives` plan.
pub fn run(plan: &RunPlan, comm: &mut Communicator, out: &Path) -> anyhow::Result<()> {
    let Workload::Collectives(params) = &plan.workload else {
        anyhow::bail!("a collectives run needs collectives parameters");
    };
    let mut s = Sweeps {
        plan,
        params,
        repetition: 0,
        wrong_fault: fault::from_env(comm.rank(), &plan.experiment) == Some(Fault::Wrong),
        out,
        sink: RecordSink::open(out, comm.rank())?,
        marked: false,
    };
    for repetition in 0..plan.repetitions {
        s.repetition = repetition;
        for &op in &params.ops {
            if op == Op::PingPong && comm.size() < 2 {
                continue;
            }
            if comm.nccl().is_some() {
                for size in distinct_sizes(op, &params.sizes, comm.size()) {
                    let case = Case::new(op, size, comm.rank(), comm.size());
                    super::nccl_ops::sweep(&mut s, comm, case)?;
                }
                continue;
            }
            if op.on_device() {
                let rank = comm.rank();
                super::device_ops::sweep(&mut s, op, comm.raw(), rank)?;
                continue;
            }
            for size in distinct_sizes(op, &params.sizes, comm.size()) {
                let mut case = Case::new(op, size, comm.rank(), comm.size());
                per_iteration(&mut s, comm.raw(), &mut case)?;
                back_to_back(&mut s, comm.raw(), &mut case)?;
            }
        }
    }
    mark(out, comm.rank(), Moment::LastTimedEnd);
    s.sink.flush()?;
    comm.raw().barrier();
    Ok(())
}

/// What every sweep of a run shares (over MPI, NCCL or on a rank's GPU): its plan and
/// parameters, the repetition under way, the injected wrong-result fault, the launch's folder,
/// this rank's records, and whether the first timed call is on the timeline yet.
pub struct Sweeps<'a> {
    /// The run's plan (warm-up, device).
    pub plan: &'a RunPlan,
    /// Its operations, sizes and iterations.
    pub params: &'a CollectiveParams,
    /// The repetition under way.
    pub repetition: u32,
    /// Whether this rank corrupts its results (`PARLAB_FAULT=wrong:rankN`).
    pub wrong_fault: bool,
    /// The launch's folder.
    pub out: &'a Path,
    /// This rank's records.
    pub sink: RecordSink,
    /// Whether the run's first timed call has been marked.
    pub marked: bool,
}

impl Sweeps<'_> {
    /// Marks the run's first timed call on rank 0's timeline, once.
    pub fn mark_first_timed(&mut self, rank: u32) {
        if !self.marked {
            mark(self.out, rank, Moment::FirstTimedStart);
            self.marked = true;
        }
    }

    /// Fails the run when the result of the last call is wrong (after the injected fault, if any).
    fn check(&self, world: &SimpleCommunicator, case: &mut Case, when: &str) -> anyhow::Result<()> {
        if self.wrong_fault {
            case.corrupt();
        }
        let wrong = case.wrong();
        if wrong > 0 {
            anyhow::bail!(
                "wrong result: {} of {} B ({when}): rank {}: {wrong} of {} values wrong",
                case.op.name(),
                case.bytes(),
                world.rank(),
                case.len()
            );
        }
        Ok(())
    }
}

/// Warm-up, then per iteration: poison, barrier, one timed call, check; records every rank's time.
fn per_iteration(s: &mut Sweeps, world: &SimpleCommunicator, case: &mut Case) -> anyhow::Result<()> {
    let rank = world.rank() as u32;
    for _ in 0..s.plan.warmup {
        world.barrier();
        case.exec(world);
    }
    for iteration in 0..s.params.iterations {
        case.poison();
        world.barrier();
        s.mark_first_timed(rank);
        let seconds = case.exec(world);
        s.check(world, case, &format!("iteration {iteration}"))?;
        if case.timed_here() {
            s.sink.push(Figure::Op(case.op), case.bytes(), s.repetition, iteration, seconds)?;
        }
    }
    Ok(())
}

/// [`blocks_of`] times: poison, barrier, a block of calls back to back timed as one, check the
/// last result; records block / iterations per rank (figure `<op>@block`, iteration = block).
fn back_to_back(s: &mut Sweeps, world: &SimpleCommunicator, case: &mut Case) -> anyhow::Result<()> {
    let (blocks, calls) = blocks_of(s.params.iterations);
    for block in 0..blocks {
        case.poison();
        world.barrier();
        let start = mpi::time();
        for _ in 0..calls {
            case.call(world);
        }
        fault::stretch(std::time::Duration::from_secs_f64((mpi::time() - start).max(0.0)));
        let elapsed = mpi::time() - start;
        s.check(world, case, &format!("back-to-back block {block}"))?;
        // Ping-pong's own time is half the round trip (osu_latency's convention).
        let seconds = if case.op == Op::PingPong { elapsed / 2.0 } else { elapsed };
        if case.timed_here() {
            s.sink.push(Figure::OpBlock(case.op), case.bytes(), s.repetition, block, seconds / f64::from(calls))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_hold_about_the_iterations_in_blocks_of_at_most_fifty_calls() {
        assert_eq!(blocks_of(1000), (20, 50));
        assert_eq!(blocks_of(20), (3, 20));
        assert_eq!(blocks_of(120), (3, 50));
        assert_eq!(blocks_of(0), (3, 1));
    }

    #[test]
    fn chunked_sizes_follow_nccl_tests() {
        assert_eq!(Case::new(Op::AllGather, 4096, 0, 4).bytes(), 4096);
        assert_eq!(Case::new(Op::AllGather, 4, 0, 4).bytes(), 16, "one f32 per rank at least");
        assert_eq!(Case::new(Op::AllReduce, 3000, 0, 4).bytes(), 3000);
        assert_eq!(Case::new(Op::ReduceScatter, 4096, 0, 3).bytes(), 4092);
    }

    #[test]
    fn all_to_all_values_tell_every_pair_apart_and_stay_exact_in_f32() {
        for world in [2, 64, 65, 128, 256, 300, 4096] {
            let sample: Vec<u32> = [0, 1, world / 2, world - 2, world - 1].into_iter().collect();
            let mut seen = std::collections::BTreeMap::new();
            for &src in &sample {
                for &dst in &sample {
                    for i in [0, 1, 250, 251] {
                        let v = a2a_value(src, dst, world, i);
                        assert!(v < 16_777_216.0 && v.fract() == 0.0, "world {world}: {v}");
                        // A value names its pair: no other pair sends it.
                        let owner = seen.entry(v.to_bits()).or_insert((src, dst));
                        assert_eq!(*owner, (src, dst), "world {world}: {v} sent by two pairs");
                    }
                }
            }
        }
        assert_ne!(a2a_value(0, 1, 128, 0), a2a_value(0, 1, 128, 1), "positions differ up to 256 ranks");
    }

    #[test]
    fn sizes_that_would_move_the_same_bytes_are_swept_once() {
        let sizes = [4, 16, 64, 256];
        // At 4 ranks, 4 B and 16 B both move one f32 per rank (16 B): one sweep, not two merged.
        assert_eq!(distinct_sizes(Op::AllGather, &sizes, 4), vec![4, 64, 256]);
        assert_eq!(distinct_sizes(Op::AllToAll, &sizes, 8), vec![4, 64, 256], "4 and 16 B both move 32 B");
        assert_eq!(distinct_sizes(Op::AllReduce, &sizes, 8), sizes.to_vec(), "a whole message per rank");
        assert_eq!(distinct_sizes(Op::ReduceScatter, &[16, 4, 64], 4), vec![16, 64], "the first of equal sizes stays");
    }

    #[test]
    fn poisoned_buffers_are_wrong_and_expected_values_are_exact() {
        let mut case = Case::new(Op::AllReduce, 64, 0, 2);
        case.poison();
        assert_eq!(case.wrong(), 16);
        let sums: Vec<f32> = (0..16).map(|i| value(0, i) + value(1, i)).collect();
        case.recv.copy_from_slice(&sums);
        assert_eq!(case.wrong(), 0);
        case.corrupt();
        assert_eq!(case.wrong(), 1);
    }
}
