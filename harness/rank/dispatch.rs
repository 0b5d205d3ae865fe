//! The `dispatch` workload inside a rank: the expert all-to-all of a mixture layer, there and back.
//!
//! Each rank holds `tokens` tokens; each token goes to `top_k` experts chosen round robin
//! (slot s = token * top_k + k goes to expert (rank + s) mod experts; expert e lives on the rank
//! whose `experts` span holds it, else on rank e mod world). A row is `hidden` f32s. One
//! iteration: barrier, then MPI_Alltoallv of the rows to the experts' ranks and MPI_Alltoallv
//! back (the experts return the rows unchanged); the rank times both together. Both directions
//! are checked exactly. Records: figure `dispatch`, size_bytes = tokens x top_k x hidden x 4.

use super::comm::Communicator;
use super::figure::Figure;
use super::records::{mark, RecordSink};
use crate::launch::Moment;
use crate::spec::{DispatchParams, RunPlan, Workload};
use std::path::Path;

/// The routing of one token count: who owns which expert and where each slot goes.
pub struct Routing {
    world: u32,
    experts: u32,
    owners: Vec<u32>,
    slots: u32,
}

impl Routing {
    /// Routing for `plan` with `tokens` tokens per rank.
    pub fn new(plan: &RunPlan, params: &DispatchParams, tokens: u32) -> Self {
        let world = plan.layout.world;
        let spans: Vec<_> = plan.layout.ranks.iter().filter_map(|r| r.experts.map(|s| (r.rank, s))).collect();
        let experts = spans.iter().map(|(_, s)| s.end).max().unwrap_or(world).max(1);
        let owners =
            (0..experts).map(|e| spans.iter().find(|(_, s)| e >= s.start && e < s.end).map(|(r, _)| *r).unwrap_or(e % world)).collect();
        Routing { world, experts, owners, slots: tokens * params.top_k }
    }

    /// The rank that receives slot `s` of rank `src`.
    pub fn dest(&self, src: u32, s: u32) -> u32 {
        self.owners[((src + s) % self.experts) as usize]
    }

    /// Slots of `src` that go to `dst`, in slot order.
    pub fn slots_to(&self, src: u32, dst: u32) -> Vec<u32> {
        (0..self.slots).filter(|s| self.dest(src, *s) == dst).collect()
    }
}

/// The value of element `h` of slot `s`'s row sent by rank `src` (small integers, exact in f32).
pub fn row_value(src: u32, s: u32, h: u32) -> f32 {
    ((src as u64 * 131 + s as u64 * 7 + h as u64) % 65_521) as f32
}

/// Send rows packed by destination rank, and the per-rank counts in f32s.
fn pack(routing: &Routing, rank: u32, hidden: u32) -> (Vec<f32>, Vec<i32>) {
    let mut rows = Vec::new();
    let mut counts = Vec::new();
    for dst in 0..routing.world {
        let slots = routing.slots_to(rank, dst);
        counts.push((slots.len() as u32 * hidden) as i32);
        rows.extend(slots.iter().flat_map(|&s| (0..hidden).map(move |h| row_value(rank, s, h))));
    }
    (rows, counts)
}

/// What rank `rank` must receive, packed by source rank, and the counts.
fn expected_arrivals(routing: &Routing, rank: u32, hidden: u32) -> (Vec<f32>, Vec<i32>) {
    let mut rows = Vec::new();
    let mut counts = Vec::new();
    for src in 0..routing.world {
        let slots = routing.slots_to(src, rank);
        counts.push((slots.len() as u32 * hidden) as i32);
        rows.extend(slots.iter().flat_map(|&s| (0..hidden).map(move |h| row_value(src, s, h))));
    }
    (rows, counts)
}

fn count_wrong(got: &[f32], want: &[f32]) -> usize {
    got.iter().zip(want).filter(|(g, w)| g.to_bits() != w.to_bits()).count() + got.len().abs_diff(want.len())
}

/// Runs this rank's part of a `dispatch` plan.
pub fn run(plan: &RunPlan, comm: &mut Communicator, out: &Path) -> anyhow::Result<()> {
    let Workload::Dispatch(params) = &plan.workload else {
        anyhow::bail!("a dispatch run needs dispatch parameters");
    };
    let mut sink = RecordSink::open(out, comm.rank())?;
    let mut first = true;
    for repetition in 0..plan.repetitions {
        for &tokens in &params.tokens {
            if params.elements(tokens) > DispatchParams::MAX_ELEMENTS {
                anyhow::bail!("dispatch of {tokens} tokens: {} values a rank sends, past MPI's count of a C int", params.elements(tokens));
            }
            let routing = Routing::new(plan, params, tokens);
            let bytes = tokens as u64 * params.top_k as u64 * params.hidden as u64 * 4;
            let (send, send_counts) = pack(&routing, comm.rank(), params.hidden);
            let (want, recv_counts) = expected_arrivals(&routing, comm.rank(), params.hidden);
            let mut arrived = vec![0.0f32; want.len()];
            let mut back = vec![0.0f32; send.len()];
            let total = plan.warmup + params.iterations;
            for i in 0..total {
                arrived.fill(f32::NAN);
                back.fill(f32::NAN);
                comm.barrier();
                if first && i == plan.warmup {
                    mark(out, comm.rank(), Moment::FirstTimedStart);
                    first = false;
                }
                let start = mpi::time();
                comm.all_to_all_varcount(&send, &send_counts, &mut arrived, &recv_counts);
                comm.all_to_all_varcount(&arrived, &recv_counts, &mut back, &send_counts);
                let seconds = mpi::time() - start;
                let wrong = count_wrong(&arrived, &want) + count_wrong(&back, &send);
                if wrong > 0 {
                    anyhow::bail!("wrong result: dispatch of {tokens} tokens ({bytes} B): rank {}: {wrong} values wrong", comm.rank());
                }
                if i >= plan.warmup {
                    sink.push(Figure::Dispatch, bytes, repetition, i - plan.warmup, seconds)?;
                }
            }
        }
    }
    mark(out, comm.rank(), Moment::LastTimedEnd);
    sink.flush()?;
    comm.barrier();
    Ok(())
}
