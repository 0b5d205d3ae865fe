//! Context parallelism: each rank prefills its block of the prompt (one contiguous chunk, or
//! two for a zig-zag split) through every layer; attention is a ring. A rank starts with its
//! own block's keys and values, then passes the block it holds to the next rank and receives
//! the previous rank's, world − 1 times, so every query meets every key block; a causal mask
//! drops the keys after each query, and chunks wholly after a query chunk are passed on without
//! being computed for it. Softmax is merged across blocks online (running maximum and sum), as
//! ring attention and flash attention do.

use super::{causal, store_kv, Gpt2Part, KvCache, Layer};
use crate::model::weights::WeightsError;
use tch::{Kind, Tensor};

/// Prompt positions, one chunk of a rank's block.
pub type Chunk = std::ops::Range<usize>;

/// Passes key/value blocks around the ring of ranks that share a prompt.
pub trait KvRing {
    /// Ring steps after a rank's own block: world − 1.
    fn steps(&self) -> usize;
    /// At `step` (1..=steps) of a layer: sends `kv`, the block held (`[2, heads, len, head_dim]`:
    /// keys, then values, its chunks one after another), to the next rank and returns the
    /// previous rank's, with the prompt positions of its chunks.
    fn pass(&mut self, kv: &Tensor, step: usize) -> (Tensor, Vec<Chunk>);
}

/// The attention of a block of queries over the key blocks added so far.
pub struct RingAttention {
    q: Tensor,
    first_query: usize,
    scale: f64,
    /// Per head and query: the largest score seen, the sum of exp(score − max), and the
    /// exp-weighted sum of values.
    state: Option<(Tensor, Tensor, Tensor)>,
}

impl RingAttention {
    /// Queries `q` (`[heads, Tq, head_dim]`) at prompt positions `first_query..`.
    pub fn new(q: Tensor, first_query: usize, scale: f64) -> Self {
        RingAttention { q, first_query, scale, state: None }
    }

    /// Adds the keys and values `[heads, Tk, head_dim]` at positions `first_key..`; keys after a
    /// query are masked for it, and a block after every query changes nothing.
    pub fn add(&mut self, k: &Tensor, v: &Tensor, first_key: usize) {
        let (tq, tk) = (self.q.size()[1], k.size()[1]);
        let last_query = self.first_query + tq as usize - 1;
        if first_key > last_query {
            return;
        }
        let mut scores = self.q.matmul(&k.transpose(1, 2)) * self.scale;
        if first_key + tk as usize - 1 > self.first_query {
            scores = causal(scores, self.first_query, first_key);
        }
        let block_max = scores.amax([-1], true);
        self.state = Some(match self.state.take() {
            None => {
                let p = (&scores - &block_max).exp();
                (block_max, p.sum_dim_intlist([-1i64].as_slice(), true, Kind::Float), p.matmul(v))
            }
            Some((max, sum, acc)) => {
                let new_max = max.maximum(&block_max);
                let (old, p) = ((&max - &new_max).exp(), (&scores - &new_max).exp());
                (new_max, sum * &old + p.sum_dim_intlist([-1i64].as_slice(), true, Kind::Float), acc * &old + p.matmul(v))
            }
        });
    }

    /// softmax(q kᵀ · scale) v over every key added: `[heads, Tq, head_dim]`. The first block
    /// added (and not skipped) must leave no query without a key: it holds each query's own
    /// position, or only earlier ones.
    pub fn finish(self) -> Tensor {
        let (_, sum, acc) = self.state.expect("ring attention finished before its own block was added");
        acc / sum
    }
}

impl Gpt2Part {
    /// Prefills this rank's block of `prompt`, the positions `chunks` (in order), through every
    /// layer held, the attention a ring over the other ranks' blocks; fills the block's rows of
    /// `cache` (the other rows stay as they were) and returns its hidden states `[T, d]`, the
    /// chunks' rows one after another.
    pub fn prefill_block(
        &self,
        prompt: &[u32],
        chunks: &[Chunk],
        cache: &mut KvCache,
        ring: &mut dyn KvRing,
    ) -> Result<Tensor, WeightsError> {
        let _guard = tch::no_grad_guard();
        let embedded: Vec<Tensor> = chunks.iter().map(|c| self.embed(&prompt[c.clone()], c.start)).collect::<Result<_, _>>()?;
        let mut h = Tensor::cat(&embedded, 0);
        for (i, layer) in self.layers.iter().enumerate() {
            let (k_cache, v_cache) = (&mut cache.k[i], &mut cache.v[i]);
            h = self.block_with(layer, h, &mut super::Alone, |part, a| part.ring_attention(layer, a, k_cache, v_cache, chunks, ring));
        }
        Ok(h)
    }

    fn ring_attention(
        &self,
        l: &Layer,
        a: &Tensor,
        k_cache: &mut Tensor,
        v_cache: &mut Tensor,
        chunks: &[Chunk],
        ring: &mut dyn KvRing,
    ) -> Tensor {
        let (q, k, v) = self.qkv_heads(l, a);
        let heads = QueryHeads { scale: self.attention_scale(l), kv_index: None };
        ring_context(&q, (k, v), (k_cache, v_cache), chunks, ring, &heads)
    }
}

/// How a block's query heads read the keys: the score scale, and for grouped-query attention
/// the key/value head (among those held) of each query head.
pub struct QueryHeads {
    /// The factor scores are multiplied by.
    pub scale: f64,
    /// Per query head, the index of its key/value head (None: one each, in order).
    pub kv_index: Option<Tensor>,
}

impl QueryHeads {
    /// Keys or values `[kv_heads, T, head_dim]` laid out per query head.
    fn expand(&self, kv: &Tensor) -> Tensor {
        self.kv_index.as_ref().map_or_else(|| kv.shallow_clone(), |i| kv.index_select(0, i))
    }
}

/// Ring attention of a block's queries `q` (`[heads, T, head_dim]`, rows of `chunks` one after
/// another) with its keys and values `kv` (`[kv_heads, T, head_dim]` each), which are stored into
/// `cache` at the chunks' positions and passed round the ring: `[T, heads · head_dim]`.
pub fn ring_context(
    q: &Tensor,
    kv: (Tensor, Tensor),
    cache: (&mut Tensor, &mut Tensor),
    chunks: &[Chunk],
    ring: &mut dyn KvRing,
    heads: &QueryHeads,
) -> Tensor {
    let ((k, v), t) = (kv, q.size()[1]);
    let rows = chunk_rows(chunks);
    for (c, (at, len)) in chunks.iter().zip(&rows) {
        store_kv(cache.0, cache.1, c.start, &k.narrow(1, *at, *len), &v.narrow(1, *at, *len));
    }
    let mut attention: Vec<RingAttention> =
        chunks.iter().zip(&rows).map(|(c, (at, len))| RingAttention::new(q.narrow(1, *at, *len), c.start, heads.scale)).collect();
    // Each query chunk meets its own block's chunks first, the earliest first: its own
    // positions (the diagonal) or wholly earlier keys, so no query starts without a key.
    add_block(&mut attention, &heads.expand(&k), &heads.expand(&v), chunks);
    let mut held = Tensor::stack(&[k, v], 0);
    for step in 1..=ring.steps() {
        let (block, key_chunks) = ring.pass(&held, step);
        add_block(&mut attention, &heads.expand(&block.get(0)), &heads.expand(&block.get(1)), &key_chunks);
        held = block;
    }
    let ctx: Vec<Tensor> = attention.into_iter().map(RingAttention::finish).collect();
    Tensor::cat(&ctx, 1).transpose(0, 1).contiguous().view([t, -1])
}

/// Per chunk: (first row, rows) within a block whose chunks lie one after another.
pub fn chunk_rows(chunks: &[Chunk]) -> Vec<(i64, i64)> {
    let mut at = 0;
    chunks
        .iter()
        .map(|c| {
            let row = (at, c.len() as i64);
            at += c.len() as i64;
            row
        })
        .collect()
}

/// Adds every chunk of a key/value block (`[heads, len, head_dim]`, chunks one after another)
/// to every query chunk's attention.
fn add_block(attention: &mut [RingAttention], k: &Tensor, v: &Tensor, chunks: &[Chunk]) {
    for (c, (at, len)) in chunks.iter().zip(chunk_rows(chunks)) {
        let (kc, vc) = (k.narrow(1, at, len), v.narrow(1, at, len));
        for a in attention.iter_mut() {
            a.add(&kc, &vc, c.start);
        }
    }
}
