//! What the decode engine drives, whatever the model family: a share of a decoder-only model
//! that embeds tokens, runs the layers it holds over a KV cache, and produces logits.

use super::fixed_step::FixedShape;
use super::gpt2::{Chunk, KvCache, KvRing, Reduce};
use super::placement::Placement;
use super::weights::WeightsError;
use tch::Tensor;

/// Errors of a model part outside loading.
#[derive(Debug, thiserror::Error)]
pub enum PartError {
    /// Reading weights failed.
    #[error(transparent)]
    Weights(#[from] WeightsError),
}

/// A share of one model family's decoder (immutable; its KV cache is a separate [`KvCache`]);
/// a whole dense one also runs the fixed-shape step a CUDA graph captures.
pub trait DecoderPart: FixedShape {
    /// Width of the residual stream.
    fn hidden(&self) -> usize;
    /// Transformer layers this part holds.
    fn layers_held(&self) -> usize;
    /// Key/value heads this part's cache holds per layer.
    fn kv_heads_held(&self) -> usize;
    /// Width of one attention head.
    fn head_dim(&self) -> usize;
    /// Vocabulary size of the whole model.
    fn vocab(&self) -> usize;
    /// Where its weights, cache and activations live.
    fn placement(&self) -> &Placement;
    /// True when this part embeds tokens (it holds layer 0).
    fn embeds(&self) -> bool;
    /// True when this part produces logits (it holds a vocabulary shard).
    fn has_head(&self) -> bool;
    /// An empty KV cache for up to `max_len` positions.
    fn new_cache(&self, max_len: usize) -> KvCache;
    /// The input rows `[T, d]` of `tokens` at positions `pos..`.
    fn embed(&self, tokens: &[u32], pos: usize) -> Result<Tensor, WeightsError>;
    /// Runs the layers held on `h` (`[T, d]`, positions `cache.len..`), filling the cache.
    fn forward(&self, h: Tensor, cache: &mut KvCache, comm: &mut dyn Reduce) -> Tensor;
    /// Logits of the last row of `h` over the whole vocabulary (gathered across shards by `comm`).
    fn logits(&self, h: &Tensor, comm: &mut dyn Reduce) -> Tensor;
    /// Weight bytes one decode step of one sequence reads from this part.
    fn streamed_bytes(&self) -> u64;
    /// Prefills this rank's block of `prompt` (a context split), the attention a ring over the
    /// other ranks' blocks; fills the block's cache rows and returns its hidden states.
    fn prefill_block(&self, prompt: &[u32], chunks: &[Chunk], cache: &mut KvCache, ring: &mut dyn KvRing) -> Result<Tensor, PartError>;

    /// Bytes of keys and values this part's cache stores per token of one sequence, read off
    /// the tensors of a cache it allocates (one position), not computed from its shape.
    fn kv_cache_bytes_per_token(&self) -> u64 {
        self.new_cache(1).bytes_per_position()
    }
}
