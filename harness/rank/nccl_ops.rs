//! The `collectives` workload over NCCL, nccl-tests' way: buffers on the rank's GPU, warm-up
//! calls, then each op at each size timed three ways (figures as the MPI sweep's, so the
//! collector and the register read both alike):
//!
//! - **Per call** (`<op>`): MPI barrier, one NCCL call, the device synchronised; each rank's
//!   own time (what a step that waits for its collective pays).
//! - **Back to back, out of place** (`<op>@block`): barrier, a block of calls queued on the
//!   stream, one synchronisation, block / calls: nccl-tests' own timing (`-n` iterations
//!   after a barrier, one `cudaStreamSynchronize`; host clock, not CUDA events).
//! - **Back to back, in place** (`<op>@inplace@block`): the same with the result written over
//!   the input (nccl-tests' in-place columns): all-reduce and broadcast on one buffer, all-gather
//!   and reduce-scatter with this rank's block inside the whole buffer. All-to-all and
//!   ping-pong have no in-place form.
//!
//! Every result is checked exactly against the values the MPI sweep expects (`#wrong`): after
//! each per-call iteration, after each out-of-place block, and before each in-place block on a
//! freshly filled buffer (repeated in-place reductions grow the values, so the timed block's
//! own result is not compared). A wrong value fails the run, naming op, size and rank.

use super::collectives::{blocks_of, Case, Sweeps};
use super::comm::Communicator;
use super::figure::Figure;
use crate::nccl::comm::Comm;
use crate::spec::Op;
use mpi::traits::CommunicatorCollectives as _;
use std::time::Instant;
use tch::{Kind, Tensor};

/// One op's device buffers at one size.
struct Buffers {
    case: Case,
    send: Tensor,
    recv: Tensor,
    /// The in-place buffer (the whole receive size), refilled before each checked call.
    whole: Tensor,
    /// The expected result on the GPU, compared there ([`wrong`]).
    want: Tensor,
}

impl Buffers {
    fn new(case: Case, nccl: &Comm) -> Self {
        let device = nccl.device();
        let send = Tensor::from_slice(case.send_values()).to_device(device);
        let recv = Tensor::full([case.len() as i64], f64::NAN, (Kind::Float, device));
        // Reduce-scatter works in place inside its input; the others inside their output.
        let whole = if case.op() == Op::ReduceScatter { send.zeros_like() } else { recv.zeros_like() };
        let want = Tensor::from_slice(case.expected_values()).to_device(device);
        Buffers { case, send, recv, whole, want }
    }

    /// One out-of-place call.
    fn call(&self, nccl: &Comm) -> anyhow::Result<()> {
        let rank = nccl.rank();
        match self.case.op() {
            Op::AllReduce => nccl.all_reduce(&self.send, &self.recv)?,
            Op::AllGather => nccl.all_gather(&self.send, &self.recv)?,
            Op::ReduceScatter => nccl.reduce_scatter(&self.send, &self.recv)?,
            Op::AllToAll => nccl.all_to_all(&self.send, &self.recv)?,
            Op::Broadcast => nccl.broadcast(&self.send, &self.recv, 0)?,
            Op::PingPong => match rank {
                0 => {
                    nccl.send(&self.send, 1)?;
                    nccl.recv(&self.recv, 1)?;
                }
                1 => {
                    nccl.recv(&self.recv, 0)?;
                    nccl.send(&self.recv, 0)?;
                }
                _ => {}
            },
            other => anyhow::bail!("{} runs on one rank's GPU, not over NCCL", other.name()),
        }
        Ok(())
    }

    /// Whether the op has an in-place form.
    fn has_in_place(&self) -> bool {
        matches!(self.case.op(), Op::AllReduce | Op::Broadcast | Op::AllGather | Op::ReduceScatter)
    }

    /// Refills the in-place buffer: this rank's input where NCCL reads it, NaN elsewhere.
    fn refill(&self, rank: u32) {
        let mut whole = self.whole.shallow_clone();
        match self.case.op() {
            Op::AllGather => {
                let _ = whole.fill_(f64::NAN);
                self.mine(rank).copy_(&self.send);
            }
            Op::Broadcast if rank != 0 => {
                let _ = whole.fill_(f64::NAN);
            }
            // All-reduce, broadcast's root, reduce-scatter (the whole input is the buffer).
            _ => whole.copy_(&self.send),
        }
    }

    /// This rank's block of the in-place buffer (all-gather's input, reduce-scatter's output).
    fn mine(&self, rank: u32) -> Tensor {
        let chunk = self.case.chunk() as i64;
        self.whole.narrow(0, i64::from(rank) * chunk, chunk)
    }

    /// One in-place call on the in-place buffer.
    fn call_in_place(&self, nccl: &Comm) -> anyhow::Result<()> {
        match self.case.op() {
            Op::AllReduce => nccl.all_reduce(&self.whole, &self.whole)?,
            Op::Broadcast => nccl.broadcast(&self.whole, &self.whole, 0)?,
            Op::AllGather => nccl.all_gather(&self.mine(nccl.rank()), &self.whole)?,
            Op::ReduceScatter => nccl.reduce_scatter(&self.whole, &self.mine(nccl.rank()))?,
            other => anyhow::bail!("{} has no in-place form", other.name()),
        }
        Ok(())
    }

    /// The in-place result as the out-of-place one would hold it.
    fn in_place_result(&self, rank: u32) -> Tensor {
        match self.case.op() {
            Op::ReduceScatter => self.mine(rank),
            _ => self.whole.shallow_clone(),
        }
    }
}

/// Values of `got` that differ bitwise from `want` (float32 tensors on one device), counted
/// where they are: on the GPU only the count comes back, not a copy of a result up to 512 MiB
/// per call. With `corrupt`, `got`'s first value is taken one higher (the fault that proves
/// the check bites).
fn wrong(got: &Tensor, want: &Tensor, corrupt: bool) -> usize {
    let n = want.numel() as i64;
    if n == 0 {
        return 0;
    }
    let got = got.contiguous().view([-1]);
    let shared = n.min(got.numel() as i64);
    let got = got.narrow(0, 0, shared).copy();
    if corrupt && shared > 0 {
        let _ = got.narrow(0, 0, 1).g_add_scalar_(1.0);
    }
    let bits = |t: &Tensor| t.view_dtype(Kind::Int);
    let differing = bits(&got).ne_tensor(&bits(&want.narrow(0, 0, shared))).sum(Kind::Int64).int64_value(&[]);
    usize::try_from(differing + (n - shared)).unwrap_or(usize::MAX)
}

/// Sweeps one op at one size over NCCL (warm-up, per call, back to back, in place), checking
/// every result; records this rank's samples.
pub fn sweep(s: &mut Sweeps, comm: &mut Communicator, case: Case) -> anyhow::Result<()> {
    if case.op() == Op::PingPong && comm.size() < 2 {
        return Ok(());
    }
    let nccl = comm.nccl().ok_or_else(|| anyhow::anyhow!("an NCCL sweep without an NCCL communicator"))?;
    let mut b = Buffers::new(case, nccl);
    let world = comm.raw();
    let iterations = s.params.iterations;
    for _ in 0..s.plan.warmup {
        world.barrier();
        b.call(nccl)?;
    }
    synchronize(nccl);
    let timed_here = b.case.timed_here();
    for iteration in 0..iterations {
        // The fill is queued on the GPU: waited for, so the timed call does not include it.
        let _ = b.recv.fill_(f64::NAN);
        synchronize(nccl);
        world.barrier();
        s.mark_first_timed(nccl.rank());
        let seconds = timed(nccl, || b.call(nccl))?;
        check(s, &b, &b.recv, nccl, &format!("iteration {iteration}"))?;
        if timed_here {
            s.sink.push(Figure::Op(b.case.op()), b.case.bytes(), s.repetition, iteration, own_time(&b, seconds))?;
        }
    }
    let (blocks, calls) = blocks_of(iterations);
    for block in 0..blocks {
        let _ = b.recv.fill_(f64::NAN);
        synchronize(nccl);
        world.barrier();
        let seconds = timed(nccl, || (0..calls).try_for_each(|_| b.call(nccl)))?;
        check(s, &b, &b.recv, nccl, &format!("back-to-back block {block}"))?;
        if timed_here {
            s.sink.push(Figure::OpBlock(b.case.op()), b.case.bytes(), s.repetition, block, own_time(&b, seconds) / f64::from(calls))?;
        }
    }
    if !b.has_in_place() {
        return Ok(());
    }
    for block in 0..blocks {
        b.refill(nccl.rank());
        world.barrier();
        b.call_in_place(nccl)?;
        check(s, &b, &b.in_place_result(nccl.rank()), nccl, &format!("in place, before block {block}"))?;
        world.barrier();
        let seconds = timed(nccl, || (0..calls).try_for_each(|_| b.call_in_place(nccl)))?;
        s.sink.push(Figure::OpInPlaceBlock(b.case.op()), b.case.bytes(), s.repetition, block, seconds / f64::from(calls))?;
    }
    Ok(())
}

/// Seconds from the first call queued until the device has finished them.
fn timed(nccl: &Comm, calls: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<f64> {
    let start = Instant::now();
    calls()?;
    synchronize(nccl);
    super::fault::stretch(start.elapsed());
    Ok(start.elapsed().as_secs_f64())
}

fn synchronize(nccl: &Comm) {
    crate::model::placement::synchronize(nccl.device());
}

/// Ping-pong's own time is half the round trip (osu_latency's convention).
fn own_time(b: &Buffers, seconds: f64) -> f64 {
    if b.case.op() == Op::PingPong {
        seconds / 2.0
    } else {
        seconds
    }
}

fn check(s: &Sweeps, b: &Buffers, got: &Tensor, nccl: &Comm, when: &str) -> anyhow::Result<()> {
    let n = wrong(got, &b.want, s.wrong_fault);
    if n > 0 {
        anyhow::bail!(
            "wrong result: {} of {} B over NCCL ({when}): rank {}: {n} of {} values wrong",
            b.case.op().name(),
            b.case.bytes(),
            nccl.rank(),
            b.case.expected_values().len()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::wrong;
    use tch::Tensor;

    #[test]
    fn wrong_counts_values_that_differ_bitwise_and_the_missing_ones() {
        let want = Tensor::from_slice(&[1.0f32, 0.0, 3.5, -2.0]);
        assert_eq!(wrong(&want.copy(), &want, false), 0);
        assert_eq!(wrong(&want.copy(), &want, true), 1, "the fault's value is caught");
        assert_eq!(wrong(&Tensor::from_slice(&[1.0f32, -0.0, 3.5, f32::NAN]), &want, false), 2, "-0 and NaN differ bitwise");
        assert_eq!(wrong(&Tensor::from_slice(&[1.0f32, 0.0]), &want, false), 2, "values never written count");
        assert_eq!(wrong(&Tensor::from_slice(&[1.0f32, 0.0, 3.5, -2.0]).view([2, 2]), &want, false), 0, "compared flat");
        assert_eq!(wrong(&want, &Tensor::from_slice::<f32>(&[]), false), 0);
    }
}
