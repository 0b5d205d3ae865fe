//! A decode step whose every shape is fixed, so that it can be captured once as a CUDA graph and
//! replayed: the token and its position are device tensors the step reads (not numbers the host
//! bakes into each launch), the token table is on the device, each layer's new key and value go
//! to their row of the whole cache, and attention reads the whole cache with the positions after
//! the query masked. The same kernels with the same shapes run at every position.

use super::gpt2::KvCache;
use super::placement::Placement;
use super::weights::Checkpoint;
use tch::{Device, Kind, Tensor};

/// The inputs a fixed-shape step reads, on its device.
pub struct StepInputs {
    /// `[2]` int64: the token, then its position.
    token_and_position: Tensor,
    /// `[max_len]` int64: every position the cache holds, in order.
    key_positions: Tensor,
}

impl StepInputs {
    /// Inputs on `device` for a cache of `max_len` positions (token 0 at position 0 until set).
    pub fn new(device: Device, max_len: usize) -> Self {
        StepInputs {
            token_and_position: Tensor::zeros([2], (Kind::Int64, device)),
            key_positions: Tensor::arange(max_len as i64, (Kind::Int64, device)),
        }
    }

    /// Sets the next step's token and position (a copy from the host into the same device memory,
    /// which a captured step reads).
    pub fn set(&mut self, token: u32, position: usize) {
        let host = Tensor::from_slice(&[i64::from(token), position as i64]);
        self.token_and_position.copy_(&host);
    }

    /// `[1]`: the token.
    pub fn token(&self) -> Tensor {
        self.token_and_position.narrow(0, 0, 1)
    }

    /// `[1]`: the token's position.
    pub fn position(&self) -> Tensor {
        self.token_and_position.narrow(0, 1, 1)
    }

    /// `[1, 1, max_len]`: true for the keys the query sees (positions up to its own).
    pub fn visible(&self) -> Tensor {
        self.key_positions.le_tensor(&self.position()).view([1, 1, -1])
    }
}

/// Attention of one query row over a layer's whole cache: stores the new key and value
/// (`k`, `v`: `[kv_heads, 1, head_dim]`) at the inputs' position, then attends with queries `q`
/// (`[heads, 1, head_dim]`, each reading key/value head `h / (heads / kv_heads)`) over every
/// position, the later ones masked. Returns `[1, heads · head_dim]`.
pub fn attend_whole_cache(
    q: &Tensor,
    (k, v): (&Tensor, &Tensor),
    cache: (&mut Tensor, &mut Tensor),
    inputs: &StepInputs,
    scale: f64,
) -> Tensor {
    let position = inputs.position();
    let _ = cache.0.index_copy_(1, &position, k);
    let _ = cache.1.index_copy_(1, &position, v);
    let grouped = q.size()[0] != k.size()[0];
    let ctx = Tensor::scaled_dot_product_attention(q, &*cache.0, &*cache.1, Some(inputs.visible()), 0.0, false, scale, grouped);
    ctx.transpose(0, 1).contiguous().view([1, -1])
}

/// Errors of the fixed-shape step.
#[derive(Debug, thiserror::Error)]
pub enum FixedStepError {
    /// The part is not a whole model (it lacks the embedding or the output head).
    #[error("a fixed-shape step needs the whole model on one rank; this part {0}")]
    NotWhole(&'static str),
    /// A mixture-of-experts layer routes by data (its shapes depend on the token).
    #[error("a mixture-of-experts layer's shapes depend on its routing; the fixed-shape step runs dense models")]
    Mixture,
    /// Reading the token table failed.
    #[error(transparent)]
    Weights(#[from] super::weights::WeightsError),
}

/// What a fixed-shape step needs besides its part: the token table on the part's device and the
/// inputs it reads.
pub struct FixedStep {
    /// The token embedding table `[vocab, d]` on the part's placement.
    pub table: Tensor,
    /// The token and position the next step reads.
    pub inputs: StepInputs,
}

/// A whole dense model that runs [`FixedStep`]s (GPT-2 and the Llama family).
pub trait FixedShape {
    /// Ok where this part can run the fixed-shape step (the whole model, dense), else why not.
    fn can_fix(&self) -> Result<(), FixedStepError>;
    /// The token embedding table `[vocab, d]` on this part's placement.
    fn token_table(&self) -> Result<Tensor, FixedStepError>;
    /// One decode step with every shape fixed: the token `step.inputs` holds at its position,
    /// through every layer over the whole of `cache` (`cache.len` is left to the caller), to the
    /// logits `[vocab]`.
    fn fixed_step(&self, step: &FixedStep, cache: &mut KvCache) -> Result<Tensor, FixedStepError>;
}

/// Whether a part can take the fixed-shape step: it holds the `whole` model (every layer, every
/// head, the embedding) and no layer routes a `mixture` of experts.
pub fn fixable(whole: bool, mixture: bool) -> Result<(), FixedStepError> {
    if !whole {
        return Err(FixedStepError::NotWhole("holds a share of the model"));
    }
    if mixture {
        return Err(FixedStepError::Mixture);
    }
    Ok(())
}

/// The token table `name` of `ckpt` on `placement`, for a part that `embeds` (holds layer 0).
pub fn token_table(ckpt: &Checkpoint, name: &str, embeds: bool, placement: &Placement) -> Result<Tensor, FixedStepError> {
    if !embeds {
        return Err(FixedStepError::NotWhole("does not hold layer 0"));
    }
    Ok(placement.place(ckpt.full(name)?))
}

impl FixedStep {
    /// The table of `part` and inputs for a cache of `max_len` positions on `device`.
    pub fn new(part: &dyn FixedShape, device: Device, max_len: usize) -> Result<Self, FixedStepError> {
        part.can_fix()?;
        Ok(FixedStep { table: part.token_table()?, inputs: StepInputs::new(device, max_len) })
    }
}
