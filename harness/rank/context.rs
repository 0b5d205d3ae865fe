//! Context-parallel prefill inside a rank: the ring that passes key/value blocks to the next
//! rank, then the hand-off of the cache to the decode layout: the gather of every block's rows
//! to rank 0, which decodes alone, or the all-to-all that leaves each rank its tensor split's
//! heads of every block.

use super::comm::Communicator;
use crate::model::gpt2::{Chunk, KvCache, KvRing};
use crate::model::row::f32s;
use crate::spec::plan::Span;
use std::time::Instant;
use tch::Tensor;

/// What one rank's ring moved in a prefill.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RingTally {
    /// Ring steps made (world − 1 per layer).
    pub steps: u64,
    /// Key/value bytes this rank sent.
    pub bytes: u64,
    /// Seconds inside the ring's send-receives, waiting for the neighbours included.
    pub seconds: f64,
}

impl std::ops::AddAssign for RingTally {
    fn add_assign(&mut self, other: RingTally) {
        self.steps += other.steps;
        self.bytes += other.bytes;
        self.seconds += other.seconds;
    }
}

/// Each rank's block as prompt chunks, from the layout's spans.
pub fn chunks_of(blocks: &[Vec<Span>]) -> Vec<Vec<Chunk>> {
    blocks.iter().map(|b| b.iter().map(|s| s.start as usize..s.end as usize).collect()).collect()
}

/// Prompt positions in a block.
fn block_len(block: &[Chunk]) -> usize {
    block.iter().map(|c| c.len()).sum()
}

/// The ring of a context split over MPI: rank r sends to r + 1 and receives from r − 1.
pub struct ContextRing<'c> {
    comm: &'c mut Communicator,
    blocks: &'c [Vec<Chunk>],
    heads: usize,
    head_dim: usize,
    /// What the ring moved so far.
    pub tally: RingTally,
}

impl<'c> ContextRing<'c> {
    /// The ring over `blocks` (one prompt block per rank, in rank order) for heads of `head_dim`.
    pub fn new(comm: &'c mut Communicator, blocks: &'c [Vec<Chunk>], heads: usize, head_dim: usize) -> Self {
        ContextRing { comm, blocks, heads, head_dim, tally: RingTally::default() }
    }
}

/// The rank whose block a rank holds after `step` passes of a ring of `world`.
pub fn owner_after(rank: usize, step: usize, world: usize) -> usize {
    (rank + world - step % world) % world
}

impl KvRing for ContextRing<'_> {
    fn steps(&self) -> usize {
        self.blocks.len() - 1
    }

    fn pass(&mut self, kv: &Tensor, step: usize) -> (Tensor, Vec<Chunk>) {
        let (rank, world) = (self.comm.rank() as usize, self.blocks.len());
        let block = &self.blocks[owner_after(rank, step, world)];
        let len = block_len(block);
        let mut into = vec![0f32; 2 * self.heads * len * self.head_dim];
        let send = kv.contiguous();
        let start = Instant::now();
        self.comm.send_recv(((rank + 1) % world) as u32, f32s(&send), ((rank + world - 1) % world) as u32, &mut into);
        self.tally.seconds += start.elapsed().as_secs_f64();
        self.tally.bytes += 4 * send.numel() as u64;
        self.tally.steps += 1;
        let shape = [2, self.heads as i64, len as i64, self.head_dim as i64];
        (Tensor::from_slice(&into).view(shape), block.clone())
    }
}

/// A block's rows of a cache layer (`[heads, max_len, head_dim]`), its chunks one after another.
fn block_rows(layer: &Tensor, block: &[Chunk]) -> Tensor {
    let parts: Vec<Tensor> = block.iter().map(|c| layer.narrow(1, c.start as i64, c.len() as i64)).collect();
    Tensor::cat(&parts, 1)
}

/// Writes `rows` (`[heads, block length, head_dim]`, chunks one after another) into `layer`.
fn place_rows(layer: &mut Tensor, block: &[Chunk], rows: &Tensor) {
    for (c, (at, len)) in block.iter().zip(crate::model::gpt2::chunk_rows(block)) {
        layer.narrow(1, c.start as i64, len).copy_(&rows.narrow(1, at, len));
    }
}

/// Gathers every rank's block rows of every layer's keys and values into rank 0's `cache`;
/// returns the bytes this rank sent (none from rank 0, whose rows are in place).
pub fn gather_cache(comm: &mut Communicator, blocks: &[Vec<Chunk>], cache: &mut KvCache) -> u64 {
    if blocks.len() < 2 {
        return 0;
    }
    let mut sent = 0;
    for layer in cache.tensors_mut() {
        let (heads, head_dim) = (layer.size()[0], layer.size()[2]);
        let mine = block_rows(layer, &blocks[comm.rank() as usize]).contiguous();
        let counts: Vec<i32> = blocks.iter().map(|b| (heads * block_len(b) as i64 * head_dim) as i32).collect();
        let mut all = vec![0f32; if comm.rank() == 0 { counts.iter().map(|&c| c as usize).sum() } else { 0 }];
        comm.gather_varcount(0, f32s(&mine), &counts, &mut all);
        if comm.rank() != 0 {
            sent += 4 * mine.numel() as u64;
        } else {
            let mut at = 0;
            for (b, &count) in blocks.iter().zip(&counts) {
                let rows = Tensor::from_slice(&all[at..at + count as usize]).view([heads, block_len(b) as i64, head_dim]);
                place_rows(layer, b, &rows);
                at += count as usize;
            }
        }
    }
    sent
}

/// Hands a context split's cache to a tensor decode: rank r keeps the heads `heads[r]` of every
/// block. Per layer's keys and values one all-to-all: each rank sends every other rank that
/// rank's heads of its own block's rows and receives its heads of the others' blocks into
/// `into` (`[heads[r], max_len, head_dim]` per layer). Returns the bytes this rank sent to
/// other ranks.
pub fn redistribute_cache(comm: &mut Communicator, blocks: &[Vec<Chunk>], heads: &[Span], cache: &mut KvCache, into: &mut KvCache) -> u64 {
    let me = comm.rank() as usize;
    let mut sent = 0;
    for (layer, target) in cache.tensors_mut().zip(into.tensors_mut()) {
        let head_dim = layer.size()[2];
        let rows = block_rows(layer, &blocks[me]);
        let parts: Vec<Tensor> = heads.iter().map(|h| rows.narrow(0, h.start as i64, h.len() as i64).contiguous()).collect();
        let send = Tensor::cat(&parts, 0).contiguous();
        let send_counts: Vec<i32> = parts.iter().map(|t| t.numel() as i32).collect();
        let recv_counts: Vec<i32> = blocks.iter().map(|b| (heads[me].len() as i64 * block_len(b) as i64 * head_dim) as i32).collect();
        let mut received = vec![0f32; recv_counts.iter().map(|&c| c as usize).sum()];
        comm.all_to_all_varcount(f32s(&send), &send_counts, &mut received, &recv_counts);
        sent += 4 * send_counts.iter().enumerate().filter(|&(r, _)| r != me).map(|(_, &c)| c as u64).sum::<u64>();
        let mut at = 0;
        for (b, &count) in blocks.iter().zip(&recv_counts) {
            let block =
                Tensor::from_slice(&received[at..at + count as usize]).view([heads[me].len() as i64, block_len(b) as i64, head_dim]);
            place_rows(target, b, &block);
            at += count as usize;
        }
    }
    sent
}
