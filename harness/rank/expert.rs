//! Expert parallelism inside a rank: each rank holds one share of every mixture layer's
//! experts and the rest of the model whole. At a mixture layer every rank has the same normed
//! rows; rank r routes its own contiguous block of them, sends each (row, expert) pair to the
//! rank holding the expert (`MPI_Alltoallv`, the dispatch), computes the pairs it received,
//! sends the outputs back (the combine), weights and sums its rows' outputs, and the blocks
//! are all-gathered so every rank goes on with every row.
//!
//! Each expert computes its rows in the order the unsplit model does (source blocks in rank
//! order, rows in order within them), so the split changes no operation, only where it runs.

use super::comm::Communicator;
use crate::model::gpt2::{Assignment, Mixture};
use crate::model::row::f32s;
use crate::spec::layout::even_spans;
use crate::spec::plan::Span;
use std::time::Instant;
use tch::Tensor;

/// What one rank's share of an expert split did over a span of a repetition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpertTally {
    /// Per mixture layer: the (row, expert) pairs this rank's experts computed.
    pub assigned: Vec<u64>,
    /// Seconds computing the experts held.
    pub compute_s: f64,
    /// Seconds inside the dispatch and combine all-to-alls, waiting for other ranks included.
    pub exchange_s: f64,
    /// Seconds inside the all-gather of the mixture's output blocks.
    pub gather_s: f64,
    /// Bytes this rank sent to other ranks in the dispatch and the combine.
    pub sent_bytes: u64,
}

/// An expert split: the experts each rank holds, and what this rank's share did so far.
pub struct ExpertSplit {
    experts: Vec<Span>,
    layers: usize,
    calls: usize,
    /// What this rank did since the last [`ExpertSplit::take`].
    pub tally: ExpertTally,
}

impl ExpertTally {
    /// Nothing done yet, over `layers` mixture layers.
    pub fn zero(layers: usize) -> Self {
        ExpertTally { assigned: vec![0; layers], ..ExpertTally::default() }
    }
}

impl ExpertSplit {
    /// The split of a model with `layers` mixture layers whose experts rank r holds `experts[r]`.
    pub fn new(experts: Vec<Span>, layers: usize) -> Self {
        ExpertSplit { experts, layers, calls: 0, tally: ExpertTally::zero(layers) }
    }

    /// The tally so far, leaving a zero one.
    pub fn take(&mut self) -> ExpertTally {
        std::mem::replace(&mut self.tally, ExpertTally::zero(self.layers))
    }

    fn owner(&self, expert: usize) -> usize {
        self.experts.iter().position(|s| (s.start as usize..s.end as usize).contains(&expert)).expect("every expert has a rank")
    }

    /// The mixture layer's output for the normed rows `x` `[T, d]` (the same on every rank).
    pub fn mixture(&mut self, comm: &mut Communicator, m: &Mixture, x: &Tensor) -> Tensor {
        let (rows, d) = (x.size()[0] as usize, x.size()[1] as usize);
        let blocks = even_spans(rows as u32, self.experts.len() as u32);
        let rank = comm.rank() as usize;
        let mine = blocks[rank];
        let block = x.narrow(0, mine.start as i64, mine.len() as i64).contiguous();
        let choices = if mine.is_empty() { Vec::new() } else { m.route(&block) };
        let pairs = Mixture::assignments(&choices);
        let mut to: Vec<Vec<usize>> = vec![Vec::new(); self.experts.len()];
        pairs.iter().enumerate().for_each(|(i, a)| to[self.owner(a.expert)].push(i));
        let (received, from) = self.dispatch(comm, f32s(&block), d, &pairs, &to);
        let start = Instant::now();
        let outputs = m.compute(&Tensor::from_slice(&received.rows).view([-1, d as i64]), &received.pairs);
        self.tally.compute_s += start.elapsed().as_secs_f64();
        let back = self.combine(comm, &outputs, d, &from, &to);
        let mut ordered = vec![0f32; pairs.len() * d];
        for (slot, &i) in to.iter().flatten().enumerate() {
            ordered[i * d..(i + 1) * d].copy_from_slice(&back[slot * d..(slot + 1) * d]);
        }
        let out = Mixture::combine(&choices, &ordered, d).contiguous();
        self.tally.assigned[self.calls % self.layers] += received.pairs.len() as u64;
        self.calls += 1;
        self.gather(comm, f32s(&out), &blocks, d)
    }

    /// Sends each pair's row (with its expert's index first) to the expert's rank; returns the
    /// pairs received, in rank order, and how many came from each rank.
    fn dispatch(
        &mut self,
        comm: &mut Communicator,
        block: &[f32],
        d: usize,
        pairs: &[Assignment],
        to: &[Vec<usize>],
    ) -> (Received, Vec<usize>) {
        let world = to.len();
        let counts: Vec<f32> = to.iter().map(|t| t.len() as f32).collect();
        let mut from = vec![0f32; world];
        let ones = vec![1i32; world];
        let start = Instant::now();
        comm.all_to_all_varcount(&counts, &ones, &mut from, &ones);
        let from: Vec<usize> = from.iter().map(|&n| n as usize).collect();
        let mut send = Vec::with_capacity(pairs.len() * (d + 1));
        for &i in to.iter().flatten() {
            send.push(pairs[i].expert as f32);
            send.extend_from_slice(&block[pairs[i].row * d..(pairs[i].row + 1) * d]);
        }
        let send_counts: Vec<i32> = to.iter().map(|t| (t.len() * (d + 1)) as i32).collect();
        let recv_counts: Vec<i32> = from.iter().map(|&n| (n * (d + 1)) as i32).collect();
        let mut recv = vec![0f32; from.iter().sum::<usize>() * (d + 1)];
        comm.all_to_all_varcount(&send, &send_counts, &mut recv, &recv_counts);
        self.tally.exchange_s += start.elapsed().as_secs_f64();
        let rank = comm.rank() as usize;
        self.tally.sent_bytes += 4 * (send.len() - to[rank].len() * (d + 1)) as u64;
        let mut received = Received { rows: Vec::with_capacity(recv.len()), pairs: Vec::new() };
        for (row, chunk) in recv.chunks_exact(d + 1).enumerate() {
            received.pairs.push(Assignment { row, expert: chunk[0] as usize });
            received.rows.extend_from_slice(&chunk[1..]);
        }
        (received, from)
    }

    /// Sends the outputs of the pairs received back to the ranks they came from; returns this
    /// rank's pairs' outputs, in the order [`ExpertSplit::dispatch`] sent them.
    fn combine(&mut self, comm: &mut Communicator, outputs: &[f32], d: usize, from: &[usize], to: &[Vec<usize>]) -> Vec<f32> {
        let send_counts: Vec<i32> = from.iter().map(|&n| (n * d) as i32).collect();
        let recv_counts: Vec<i32> = to.iter().map(|t| (t.len() * d) as i32).collect();
        let mut back = vec![0f32; to.iter().map(Vec::len).sum::<usize>() * d];
        let start = Instant::now();
        comm.all_to_all_varcount(outputs, &send_counts, &mut back, &recv_counts);
        self.tally.exchange_s += start.elapsed().as_secs_f64();
        let rank = comm.rank() as usize;
        self.tally.sent_bytes += 4 * (outputs.len() - from[rank] * d) as u64;
        back
    }

    /// Every rank's output block, gathered into `[T, d]` on every rank.
    fn gather(&mut self, comm: &mut Communicator, out: &[f32], blocks: &[Span], d: usize) -> Tensor {
        let counts: Vec<i32> = blocks.iter().map(|b| (b.len() as usize * d) as i32).collect();
        let mut all = vec![0f32; counts.iter().map(|&c| c as usize).sum()];
        let start = Instant::now();
        comm.all_gather_varcount(out, &counts, &mut all);
        self.tally.gather_s += start.elapsed().as_secs_f64();
        Tensor::from_slice(&all).view([-1, d as i64])
    }
}

/// The rows an expert rank received, and the (row, expert) pair each one is.
struct Received {
    rows: Vec<f32>,
    pairs: Vec<Assignment>,
}
