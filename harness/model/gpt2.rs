//! GPT-2 by shares: any range of layers, any share of the attention heads and of the
//! feed-forward width, and any vocabulary shard of the output head (Megatron-LM's layout).
//!
//! The model is immutable; the KV cache of its heads is a separate [`KvCache`] value, so a
//! benchmark makes a fresh one per repetition. Row-parallel partial sums go through a
//! [`Reduce`]: two all-reduces per layer, the output bias added once, after the reduction.

use super::config::ModelConfig;
use super::fixed_step::{attend_whole_cache, fixable, token_table, FixedShape, FixedStep, FixedStepError};
use super::matvec::{matvec, matvec_row};
use super::placement::Placement;
use super::row::{self, f32s, f32s_mut};
use super::weights::{Checkpoint, RowReader, WeightsError};
use crate::spec::plan::{RankShare, Span};
use std::sync::Arc;
use tch::{Kind, Tensor};

mod context;
pub use super::moe::{Assignment, Choice, ExpertKind, Mixture, MoeDims};
pub use context::{chunk_rows, ring_context, Chunk, KvRing, QueryHeads, RingAttention};

/// The sums and gathers a split model needs; [`Alone`] for a model that is not split.
pub trait Reduce {
    /// Sums a partial `[T, d]` activation across the ranks that share a layer.
    fn all_reduce(&mut self, partial: &Tensor) -> Tensor;
    /// Sums a partial activation row across the ranks that share a layer, in place.
    fn all_reduce_row(&mut self, partial: &mut [f32]) {
        let sum = self.all_reduce(&Tensor::from_slice(partial)).contiguous();
        partial.copy_from_slice(f32s(&sum));
    }
    /// Concatenates the ranks' vocabulary shards of a `[vocab_shard]` logits row.
    fn gather_vocab(&mut self, part: &Tensor) -> Tensor;
    /// A row-parallel layer's output for one row: `W x` (`w` `[out, in]`) summed across the
    /// ranks. A split may compute it in pieces and sum each while the next computes.
    fn reduced_matvec(&mut self, w: &Tensor, x: &[f32]) -> Vec<f32> {
        let mut y = matvec_row(w, x, None);
        self.all_reduce_row(&mut y);
        y
    }
    /// A row-parallel layer's output for rows `x` `[T, in]`: `x Wᵀ` summed across the ranks
    /// (`[T, out]`). A split may compute it in pieces of rows, as [`linear_rows_into`] does.
    fn reduced_linear(&mut self, x: &Tensor, w: &Tensor) -> Tensor {
        self.all_reduce(&linear(x, w, None))
    }
    /// True when partial sums are summed across ranks (false where nothing is split, so a
    /// row-parallel layer's bias may be added inside its product).
    fn sums_partials(&self) -> bool {
        true
    }
    /// A mixture layer's output `[T, d]` for the normed rows `x` `[T, d]`: computed here, or
    /// with the tokens sent to the ranks that hold their experts and the outputs sent back.
    fn mixture(&mut self, m: &Mixture, x: &Tensor) -> Tensor {
        m.local(x)
    }
}

/// Rows `first..` of `x Wᵀ` (`x` `[T, in]`, `w` `[out, in]`) into `out` (whole rows of `out`
/// values): a piece of a row-parallel product in prefill.
pub fn linear_rows_into(x: &Tensor, w: &Tensor, first: usize, out: &mut [f32]) {
    let width = w.size()[0] as usize;
    let rows = x.narrow(0, first as i64, (out.len() / width) as i64);
    out.copy_from_slice(f32s(&linear(&rows, w, None).contiguous()));
}

/// No communication: the unsplit model, a pipeline stage, a data-parallel replica.
pub struct Alone;

impl Reduce for Alone {
    fn all_reduce(&mut self, partial: &Tensor) -> Tensor {
        partial.shallow_clone()
    }
    fn sums_partials(&self) -> bool {
        false
    }
    fn all_reduce_row(&mut self, _partial: &mut [f32]) {}
    fn gather_vocab(&mut self, part: &Tensor) -> Tensor {
        part.shallow_clone()
    }
}

/// The dimensions and options of a GPT-2-family config.
#[derive(Debug, Clone)]
pub struct Dims {
    /// Residual width.
    pub hidden: usize,
    /// Attention heads.
    pub heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Transformer blocks.
    pub layers: usize,
    /// Feed-forward width.
    pub ffn: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Length of the position table.
    pub positions: usize,
    /// Layer-norm epsilon.
    pub eps: f64,
    /// The GELU the config asks for: `gelu_new` (tanh approximation) or exact `gelu`.
    pub gelu: Gelu,
    /// `scale_attn_weights`.
    pub scale_attn: bool,
    /// `scale_attn_by_inverse_layer_idx`.
    pub scale_by_layer: bool,
    /// The mixture of experts that replaces every feed-forward block, if the config has one.
    pub moe: Option<MoeDims>,
}

/// GPT-2's activation: `activation_function` in its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gelu {
    /// `gelu_new`: the tanh approximation (GPT-2's own).
    Tanh,
    /// `gelu`: the exact error-function form.
    Exact,
}

impl Gelu {
    /// libtorch's `approximate` argument of `gelu` for it.
    pub fn tch_approximate(self) -> &'static str {
        match self {
            Gelu::Tanh => "tanh",
            Gelu::Exact => "none",
        }
    }
}

impl Dims {
    /// Reads the dimensions and options from a config.
    pub fn from_config(cfg: &ModelConfig) -> Self {
        let flag = |k: &str, d: bool| cfg.raw.get(k).and_then(|v| v.as_bool()).unwrap_or(d);
        let act = cfg.raw.get("activation_function").and_then(|v| v.as_str()).unwrap_or("gelu_new");
        Dims {
            hidden: cfg.hidden as usize,
            heads: cfg.heads as usize,
            head_dim: (cfg.hidden / cfg.heads) as usize,
            layers: cfg.layers as usize,
            ffn: cfg.intermediate as usize,
            vocab: cfg.vocab as usize,
            positions: cfg.max_positions as usize,
            eps: cfg.raw.get("layer_norm_epsilon").and_then(|v| v.as_f64()).unwrap_or(1e-5),
            gelu: if act == "gelu" { Gelu::Exact } else { Gelu::Tanh },
            scale_attn: flag("scale_attn_weights", true),
            scale_by_layer: flag("scale_attn_by_inverse_layer_idx", false),
            moe: MoeDims::of(cfg).ok().flatten(),
        }
    }

    /// The same dimensions with a run's routing skew (ignored by a dense model).
    pub fn with_routing_skew(self, skew: f64) -> Self {
        Self { moe: self.moe.map(|m| MoeDims { skew, ..m }), ..self }
    }
}

/// Checks every GPT-2 tensor's shape against the config (Conv1D weights are `[in, out]`), so a
/// checkpoint that disagrees with its config.json fails with the tensor's name and both shapes.
pub fn check_shapes(ckpt: &Checkpoint, d: &Dims) -> Result<(), WeightsError> {
    let (w, f) = (d.hidden, d.ffn);
    ckpt.expect_shape("wte.weight", &[d.vocab, w])?;
    if d.positions > 0 {
        ckpt.expect_shape("wpe.weight", &[d.positions, w])?;
    }
    if ckpt.has("lm_head.weight") {
        ckpt.expect_shape("lm_head.weight", &[d.vocab, w])?;
    }
    for l in 0..d.layers {
        let t = |n: &str| format!("h.{l}.{n}");
        for norm in ["ln_1", "ln_2"] {
            ckpt.expect_shape(&t(&format!("{norm}.weight")), &[w])?;
            ckpt.expect_shape(&t(&format!("{norm}.bias")), &[w])?;
        }
        ckpt.expect_shape(&t("attn.c_attn.weight"), &[w, 3 * w])?;
        ckpt.expect_shape(&t("attn.c_attn.bias"), &[3 * w])?;
        ckpt.expect_shape(&t("attn.c_proj.weight"), &[w, w])?;
        ckpt.expect_shape(&t("attn.c_proj.bias"), &[w])?;
        if let Some(m) = &d.moe {
            super::moe::check_shapes(ckpt, m, &t("mlp"), ExpertKind::Gpt2Mlp { gelu: d.gelu }, w)?;
            continue;
        }
        ckpt.expect_shape(&t("mlp.c_fc.weight"), &[w, f])?;
        ckpt.expect_shape(&t("mlp.c_fc.bias"), &[f])?;
        ckpt.expect_shape(&t("mlp.c_proj.weight"), &[f, w])?;
        ckpt.expect_shape(&t("mlp.c_proj.bias"), &[w])?;
    }
    ckpt.expect_shape("ln_f.weight", &[w])?;
    ckpt.expect_shape("ln_f.bias", &[w])
}

/// What one part holds: head, width, layer and vocabulary spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartShare {
    /// Attention heads in every layer held.
    pub heads: Span,
    /// Feed-forward columns in every layer held.
    pub ffn: Span,
    /// Layers held.
    pub layers: Span,
    /// Rows of the output head, if this part produces logits.
    pub vocab: Option<Span>,
    /// Experts held in every mixture layer (an empty span for a dense model).
    pub experts: Span,
}

impl PartShare {
    /// The whole model.
    pub fn whole(d: &Dims) -> Self {
        let all = |n: usize| Span::new(0, n as u32);
        let experts = all(d.moe.as_ref().map_or(0, |m| m.experts));
        PartShare { heads: all(d.heads), ffn: all(d.ffn), layers: all(d.layers), vocab: Some(all(d.vocab)), experts }
    }

    /// A rank's share from the plan's layout (absent spans mean everything, except the vocabulary).
    pub fn from_rank(share: &RankShare, d: &Dims) -> Self {
        let w = Self::whole(d);
        PartShare {
            heads: share.heads.unwrap_or(w.heads),
            ffn: share.ffn.unwrap_or(w.ffn),
            layers: share.layers.unwrap_or(w.layers),
            vocab: share.vocab,
            experts: share.experts.unwrap_or(w.experts),
        }
    }
}

/// One block's parameters; matrices stored `[out, in]` (transposed from Conv1D's `[in, out]` at load).
struct Layer {
    index: usize,
    ln1: (Tensor, Tensor),
    w_qkv: Tensor,
    b_qkv: Tensor,
    w_o: Tensor,
    b_o: Tensor,
    ln2: (Tensor, Tensor),
    mlp: Mlp,
}

impl Layer {
    /// The layer's tensors on `p` (a dense layer; a mixture stays on the host, refused on CUDA by the spec).
    fn placed(self, p: &Placement) -> Layer {
        let pair = |(w, b): (Tensor, Tensor)| (p.place(w), p.place(b));
        let mlp = match self.mlp {
            Mlp::Dense { w_fc, b_fc, w_proj, b_proj } => {
                Mlp::Dense { w_fc: p.place(w_fc), b_fc: p.place(b_fc), w_proj: p.place(w_proj), b_proj: p.place(b_proj) }
            }
            mixture => mixture,
        };
        Layer {
            index: self.index,
            ln1: pair(self.ln1),
            w_qkv: p.place(self.w_qkv),
            b_qkv: p.place(self.b_qkv),
            w_o: p.place(self.w_o),
            b_o: p.place(self.b_o),
            ln2: pair(self.ln2),
            mlp,
        }
    }
}

/// A block's feed-forward part: GPT-2's MLP (columns `ffn` of it) or a mixture of experts.
enum Mlp {
    Dense { w_fc: Tensor, b_fc: Tensor, w_proj: Tensor, b_proj: Tensor },
    Mixture(Mixture),
}

struct Embedding {
    wte: RowReader,
    wpe: Tensor,
}

struct Head {
    ln_f: (Tensor, Tensor),
    /// `[vocab_shard, d]`.
    weight: Tensor,
}

/// The KV cache of one sequence for the heads and layers a part holds.
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    /// Positions filled.
    pub len: usize,
}

impl KvCache {
    /// An empty cache of the given per-layer key and value tensors (`[heads, max_len, head_dim]` each).
    pub fn from_layers(k: Vec<Tensor>, v: Vec<Tensor>) -> Self {
        KvCache { k, v, len: 0 }
    }

    /// Layer `i`'s key and value caches.
    pub fn layer_mut(&mut self, i: usize) -> (&mut Tensor, &mut Tensor) {
        (&mut self.k[i], &mut self.v[i])
    }

    /// Bytes the allocated key and value tensors hold per position, every layer together
    /// (`[heads, max_len, head_dim]` each: heads × head_dim values of its dtype per position).
    pub fn bytes_per_position(&self) -> u64 {
        let per_position = |t: &Tensor| {
            let size = t.size();
            let positions = size.get(1).copied().unwrap_or(1).max(1);
            (size.iter().product::<i64>() / positions) as u64 * t.kind().elt_size_in_bytes() as u64
        };
        self.k.iter().chain(&self.v).map(per_position).sum()
    }

    /// Every layer's key cache, then every layer's value cache: `[heads, max_len, head_dim]` each.
    pub fn tensors_mut(&mut self) -> impl Iterator<Item = &mut Tensor> {
        self.k.iter_mut().chain(self.v.iter_mut())
    }
}

/// Writes keys `k` and values `v` (`[heads, T, head_dim]`) into the caches' positions `pos..pos + T`.
pub(crate) fn store_kv(k_cache: &mut Tensor, v_cache: &mut Tensor, pos: usize, k: &Tensor, v: &Tensor) {
    let t = k.size()[1];
    k_cache.narrow(1, pos as i64, t).copy_(k);
    v_cache.narrow(1, pos as i64, t).copy_(v);
}

/// Attention `scores` `[heads, Tq, Tk]` of queries at positions `first_query..` over keys at
/// `first_key..`, every key after its query set to −∞ (the causal mask).
pub(crate) fn causal(scores: Tensor, first_query: usize, first_key: usize) -> Tensor {
    let (tq, tk) = (scores.size()[1], scores.size()[2]);
    let opts = (Kind::Int64, scores.device());
    let key_pos = Tensor::arange(tk, opts).view([1, tk]) + first_key as i64;
    let query_pos = Tensor::arange(tq, opts).view([tq, 1]) + first_query as i64;
    scores.masked_fill(&key_pos.gt_tensor(&query_pos), f64::NEG_INFINITY)
}

/// GPT-2 holding a share of the model (immutable; see [`KvCache`]).
pub struct Gpt2Part {
    /// The dimensions of the whole model.
    pub dims: Dims,
    /// What this part holds.
    pub share: PartShare,
    /// Where its weights, cache and activations live.
    pub placement: Placement,
    ckpt: Arc<Checkpoint>,
    embed: Option<Embedding>,
    layers: Vec<Layer>,
    head: Option<Head>,
}

fn load_layer(ck: &Checkpoint, d: &Dims, s: &PartShare, l: usize) -> Result<Layer, WeightsError> {
    let p = |n: &str| format!("h.{l}.{n}");
    let (h0, h1) = (s.heads.start as usize * d.head_dim, s.heads.end as usize * d.head_dim);
    let qkv: Vec<(usize, usize)> = (0..3).map(|i| (i * d.hidden + h0, i * d.hidden + h1)).collect();
    let (f0, f1) = (s.ffn.start as usize, s.ffn.end as usize);
    let ln = |n: &str| -> Result<(Tensor, Tensor), WeightsError> {
        Ok((ck.full(&p(&format!("{n}.weight")))?, ck.full(&p(&format!("{n}.bias")))?))
    };
    let out_in = |t: Tensor| t.tr().contiguous();
    Ok(Layer {
        index: l,
        ln1: ln("ln_1")?,
        w_qkv: out_in(ck.columns(&p("attn.c_attn.weight"), &qkv)?),
        b_qkv: ck.elements(&p("attn.c_attn.bias"), &qkv)?,
        w_o: out_in(ck.rows(&p("attn.c_proj.weight"), h0, h1)?),
        b_o: ck.full(&p("attn.c_proj.bias"))?,
        ln2: ln("ln_2")?,
        mlp: match &d.moe {
            Some(m) => Mlp::Mixture(Mixture::load(ck, m, &p("mlp"), s.experts, ExpertKind::Gpt2Mlp { gelu: d.gelu })?),
            None => Mlp::Dense {
                w_fc: out_in(ck.columns(&p("mlp.c_fc.weight"), &[(f0, f1)])?),
                b_fc: ck.elements(&p("mlp.c_fc.bias"), &[(f0, f1)])?,
                w_proj: out_in(ck.rows(&p("mlp.c_proj.weight"), f0, f1)?),
                b_proj: ck.full(&p("mlp.c_proj.bias"))?,
            },
        },
    })
}

fn load_head(ck: &Checkpoint, vocab: Span) -> Result<Head, WeightsError> {
    // `lm_head.weight` when the checkpoint has one (untied); otherwise the head is tied to `wte`.
    let name = if ck.has("lm_head.weight") { "lm_head.weight" } else { "wte.weight" };
    Ok(Head { ln_f: (ck.full("ln_f.weight")?, ck.full("ln_f.bias")?), weight: ck.rows(name, vocab.start as usize, vocab.end as usize)? })
}

/// `x Wᵀ + b` for `w` `[out, in]`: parlab's streaming matvec for one host float32 row,
/// libtorch's matmul for more rows, libtorch's fused linear on a GPU.
pub fn linear(x: &Tensor, w: &Tensor, b: Option<&Tensor>) -> Tensor {
    if w.device() != tch::Device::Cpu {
        // One fused kernel (addmm) where a step is bound by kernel launches, not bytes.
        return x.linear(w, b);
    }
    if x.size()[0] == 1 && w.kind() == Kind::Float {
        return matvec(x, w, b);
    }
    let y = x.matmul(&w.tr());
    match b {
        Some(b) => y + b,
        None => y,
    }
}

impl Gpt2Part {
    /// Loads the share `share` of the checkpoint (only the rows and columns it holds are copied).
    pub fn load(ckpt: Arc<Checkpoint>, dims: Dims, share: PartShare) -> Result<Self, WeightsError> {
        Self::load_on(ckpt, dims, share, Placement::cpu())
    }

    /// [`Gpt2Part::load`] onto `placement`: read on the host, then every tensor moved and cast
    /// once (the token table stays a memory-mapped reader; its rows move per lookup).
    pub fn load_on(ckpt: Arc<Checkpoint>, dims: Dims, share: PartShare, placement: Placement) -> Result<Self, WeightsError> {
        check_shapes(&ckpt, &dims)?;
        let _guard = tch::no_grad_guard();
        let embed = if share.layers.start == 0 {
            Some(Embedding { wte: ckpt.row_reader("wte.weight")?, wpe: placement.place(ckpt.full("wpe.weight")?) })
        } else {
            None
        };
        let layers = (share.layers.start as usize..share.layers.end as usize)
            .map(|l| load_layer(&ckpt, &dims, &share, l).map(|layer| layer.placed(&placement)))
            .collect::<Result<Vec<_>, _>>()?;
        let head = share.vocab.map(|v| load_head(&ckpt, v)).transpose()?;
        let head = head.map(|h| Head { ln_f: (placement.place(h.ln_f.0), placement.place(h.ln_f.1)), weight: placement.place(h.weight) });
        Ok(Gpt2Part { dims, share, placement, ckpt, embed, layers, head })
    }

    /// True when this part embeds tokens (it holds layer 0).
    pub fn embeds(&self) -> bool {
        self.embed.is_some()
    }

    /// True when this part produces logits (it holds a vocabulary shard).
    pub fn has_head(&self) -> bool {
        self.head.is_some()
    }

    /// An empty KV cache for up to `max_len` positions.
    pub fn new_cache(&self, max_len: usize) -> KvCache {
        let heads = self.share.heads.len() as i64;
        let shape = [heads, max_len as i64, self.dims.head_dim as i64];
        let opts = (self.placement.kind, self.placement.device);
        let make = || self.layers.iter().map(|_| Tensor::zeros(shape, opts)).collect();
        KvCache { k: make(), v: make(), len: 0 }
    }

    /// Token and position embeddings of `tokens` at positions `pos..`: `[T, d]`.
    pub fn embed(&self, tokens: &[u32], pos: usize) -> Result<Tensor, WeightsError> {
        let e = self.embed.as_ref().expect("embed called on a part that does not hold layer 0");
        let wte = self.placement.place(self.ckpt.read_rows(&e.wte, tokens)?);
        Ok(wte + e.wpe.narrow(0, pos as i64, tokens.len() as i64))
    }

    /// Runs the layers held on `h` (`[T, d]`, positions `cache.len..`), filling the cache.
    /// One row (a decode step) on the host in float32 takes [`row`]'s slice path; several
    /// (prefill), or any on a GPU, take libtorch's.
    pub fn forward(&self, h: Tensor, cache: &mut KvCache, comm: &mut dyn Reduce) -> Tensor {
        let _guard = tch::no_grad_guard();
        let mut h = self.placement.place(h);
        if h.size()[0] == 1 && self.placement.rows_on_host() {
            return self.forward_row(&h, cache, comm);
        }
        let pos = cache.len;
        for (i, layer) in self.layers.iter().enumerate() {
            h = self.block(layer, h, &mut cache.k[i], &mut cache.v[i], pos, comm);
        }
        cache.len += h.size()[0] as usize;
        h
    }

    /// [`Gpt2Part::forward`] of one row `[1, d]` at position `cache.len`, on slices.
    fn forward_row(&self, h: &Tensor, cache: &mut KvCache, comm: &mut dyn Reduce) -> Tensor {
        let mut x = f32s(&h.contiguous()).to_vec();
        let pos = cache.len;
        for (i, layer) in self.layers.iter().enumerate() {
            self.block_row(layer, &mut x, &mut cache.k[i], &mut cache.v[i], pos, comm);
        }
        cache.len += 1;
        Tensor::from_slice(&x).view([1, x.len() as i64])
    }

    /// One block on the row `h` (updated in place): [`Gpt2Part::block`]'s computation on slices,
    /// equal to it within float32 reordering (a test feeds a prompt both ways).
    fn block_row(&self, l: &Layer, h: &mut [f32], k_cache: &mut Tensor, v_cache: &mut Tensor, pos: usize, comm: &mut dyn Reduce) {
        let mut a = vec![0f32; h.len()];
        row::layer_norm(h, f32s(&l.ln1.0), f32s(&l.ln1.1), self.dims.eps, &mut a);
        let max_len = k_cache.size()[1] as usize;
        let mut cache = row::Cache { k: f32s_mut(k_cache), v: f32s_mut(v_cache), max_len };
        let qkv = matvec_row(&l.w_qkv, &a, Some(f32s(&l.b_qkv)));
        let mut ctx = vec![0f32; qkv.len() / 3];
        row::attend(&qkv, &mut cache, pos, self.dims.head_dim, self.attention_scale(l) as f32, &mut ctx);
        let o = comm.reduced_matvec(&l.w_o, &ctx);
        row::add_residual(h, &o, f32s(&l.b_o));
        row::layer_norm(h, f32s(&l.ln2.0), f32s(&l.ln2.1), self.dims.eps, &mut a);
        match &l.mlp {
            Mlp::Dense { w_fc, b_fc, w_proj, b_proj } => {
                let mut f = matvec_row(w_fc, &a, Some(f32s(b_fc)));
                self.gelu_row(&mut f);
                let p = comm.reduced_matvec(w_proj, &f);
                row::add_residual(h, &p, f32s(b_proj));
            }
            Mlp::Mixture(m) => {
                let y = comm.mixture(m, &Tensor::from_slice(&a).view([1, -1])).contiguous();
                h.iter_mut().zip(f32s(&y)).for_each(|(h, y)| *h += y);
            }
        }
    }

    /// The block's activation in place: the tanh form on slices; exact GELU (erf) through libtorch.
    fn gelu_row(&self, f: &mut [f32]) {
        if self.dims.gelu == Gelu::Tanh {
            return row::gelu_tanh(f);
        }
        let exact = Tensor::from_slice(f).gelu(self.dims.gelu.tch_approximate());
        f.copy_from_slice(f32s(&exact));
    }

    /// The factor attention scores are multiplied by in layer `l`.
    fn attention_scale(&self, l: &Layer) -> f64 {
        let mut scale = if self.dims.scale_attn { 1.0 / (self.dims.head_dim as f64).sqrt() } else { 1.0 };
        if self.dims.scale_by_layer {
            scale /= (l.index + 1) as f64;
        }
        scale
    }

    fn block(&self, l: &Layer, h: Tensor, k_cache: &mut Tensor, v_cache: &mut Tensor, pos: usize, comm: &mut dyn Reduce) -> Tensor {
        self.block_with(l, h, comm, |part, a| part.attention(l, a, k_cache, v_cache, pos))
    }

    /// One block on rows `h`, the attention context of the normed rows computed by `attend`.
    fn block_with(&self, l: &Layer, h: Tensor, comm: &mut dyn Reduce, attend: impl FnOnce(&Self, &Tensor) -> Tensor) -> Tensor {
        let d = self.dims.hidden as i64;
        let a = h.layer_norm([d], Some(&l.ln1.0), Some(&l.ln1.1), self.dims.eps, false);
        let ctx = attend(self, &a);
        let h = h + self.reduced_linear_bias(comm, &ctx, &l.w_o, &l.b_o);
        let m = h.layer_norm([d], Some(&l.ln2.0), Some(&l.ln2.1), self.dims.eps, false);
        match &l.mlp {
            Mlp::Dense { w_fc, b_fc, w_proj, b_proj } => {
                let f = linear(&m, w_fc, Some(b_fc)).gelu(self.dims.gelu.tch_approximate());
                h + self.reduced_linear_bias(comm, &f, w_proj, b_proj)
            }
            Mlp::Mixture(mix) => h + comm.mixture(mix, &m),
        }
    }

    /// A row-parallel layer's output `x Wᵀ` summed across the ranks, its bias `b` added once
    /// after the sum; where libtorch computes every step (a GPU) and nothing is summed, one
    /// fused kernel.
    fn reduced_linear_bias(&self, comm: &mut dyn Reduce, x: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
        if !self.placement.rows_on_host() && !comm.sums_partials() {
            return linear(x, w, Some(b));
        }
        comm.reduced_linear(x, w) + b
    }

    /// The queries, keys and values of the heads held for rows `a`: each `[heads, T, head_dim]`.
    fn qkv_heads(&self, l: &Layer, a: &Tensor) -> (Tensor, Tensor, Tensor) {
        let (t, hs, hd) = (a.size()[0], self.share.heads.len() as i64, self.dims.head_dim as i64);
        let qkv = linear(a, &l.w_qkv, Some(&l.b_qkv));
        let split = |i: i64| qkv.narrow(1, i * hs * hd, hs * hd).reshape([t, hs, hd]).transpose(0, 1);
        (split(0), split(1), split(2))
    }

    fn attention(&self, l: &Layer, a: &Tensor, k_cache: &mut Tensor, v_cache: &mut Tensor, pos: usize) -> Tensor {
        let (q, k, v) = self.qkv_heads(l, a);
        let (t, hs, hd) = (a.size()[0], self.share.heads.len() as i64, self.dims.head_dim as i64);
        store_kv(k_cache, v_cache, pos, &k, &v);
        let total = pos as i64 + t;
        let (keys, values) = (k_cache.narrow(1, 0, total), v_cache.narrow(1, 0, total));
        if !self.placement.rows_on_host() && (t == 1 || pos == 0) {
            // One fused kernel where libtorch computes every step (a GPU, bound by launches):
            // every key for one query row, or the plain causal mask when the queries are all
            // the positions so far.
            let ctx = Tensor::scaled_dot_product_attention(&q, &keys, &values, None::<Tensor>, 0.0, t > 1, self.attention_scale(l), false);
            return ctx.transpose(0, 1).contiguous().view([t, hs * hd]);
        }
        let mut scores = q.matmul(&keys.transpose(1, 2)) * self.attention_scale(l);
        if t > 1 {
            scores = causal(scores, pos, 0);
        }
        // Softmax in float32 whatever the element type (as transformers' eager attention), then back.
        let probs = scores.softmax(-1, Kind::Float).to_kind(values.kind());
        probs.matmul(&values).transpose(0, 1).contiguous().view([t, hs * hd])
    }

    /// Logits of the last row of `h` over the whole vocabulary (gathered across shards by `comm`).
    pub fn logits(&self, h: &Tensor, comm: &mut dyn Reduce) -> Tensor {
        let _guard = tch::no_grad_guard();
        let head = self.head.as_ref().expect("logits called on a part without an output head");
        let d = self.dims.hidden as i64;
        let last = h.narrow(0, h.size()[0] - 1, 1);
        let x = last.layer_norm([d], Some(&head.ln_f.0), Some(&head.ln_f.1), self.dims.eps, false);
        let part = linear(&x, &head.weight, None).view([-1]);
        comm.gather_vocab(&part)
    }

    /// Feed-forward parameters a decode step reads: the dense block, or the router and at
    /// most top-k of the experts held (the experts a token is routed to).
    fn mlp_streamed(mlp: &Mlp) -> u64 {
        match mlp {
            Mlp::Dense { w_fc, b_fc, w_proj, b_proj } => [w_fc, b_fc, w_proj, b_proj].iter().map(|t| t.numel() as u64).sum(),
            Mlp::Mixture(m) => m.streamed_numel(),
        }
    }

    /// Weight bytes one decode step of one sequence reads from this part (one embedding row, not the table).
    pub fn streamed_bytes(&self) -> u64 {
        let numel = |t: &Tensor| t.numel() as u64;
        let layer: u64 = self
            .layers
            .iter()
            .map(|l| {
                let attention: u64 =
                    [&l.ln1.0, &l.ln1.1, &l.w_qkv, &l.b_qkv, &l.w_o, &l.b_o, &l.ln2.0, &l.ln2.1].iter().map(|t| numel(t)).sum();
                attention + Self::mlp_streamed(&l.mlp)
            })
            .sum();
        let head = self.head.as_ref().map_or(0, |h| numel(&h.weight) + numel(&h.ln_f.0) + numel(&h.ln_f.1));
        let embed = if self.embeds() { 2 * self.dims.hidden as u64 } else { 0 };
        self.placement.element_bytes() * (layer + head + embed)
    }
}

impl FixedShape for Gpt2Part {
    fn can_fix(&self) -> Result<(), FixedStepError> {
        let whole = self.embed.is_some() && self.share == PartShare::whole(&self.dims);
        fixable(whole, self.layers.iter().any(|l| matches!(l.mlp, Mlp::Mixture(_))))
    }

    fn token_table(&self) -> Result<Tensor, FixedStepError> {
        token_table(&self.ckpt, "wte.weight", self.embeds(), &self.placement)
    }

    fn fixed_step(&self, step: &FixedStep, cache: &mut KvCache) -> Result<Tensor, FixedStepError> {
        let _guard = tch::no_grad_guard();
        self.can_fix()?;
        let Some(e) = self.embed.as_ref() else {
            return Err(FixedStepError::NotWhole("does not hold layer 0"));
        };
        let inputs = &step.inputs;
        let mut h = step.table.index_select(0, &inputs.token()) + e.wpe.index_select(0, &inputs.position());
        for (layer, (k_cache, v_cache)) in self.layers.iter().zip(cache.k.iter_mut().zip(cache.v.iter_mut())) {
            h = self.block_with(layer, h, &mut Alone, |part, a| {
                let (q, k, v) = part.qkv_heads(layer, a);
                attend_whole_cache(&q, (&k, &v), (k_cache, v_cache), inputs, part.attention_scale(layer))
            });
        }
        Ok(self.logits(&h, &mut Alone))
    }
}

impl super::part::DecoderPart for Gpt2Part {
    fn hidden(&self) -> usize {
        self.dims.hidden
    }
    fn layers_held(&self) -> usize {
        self.share.layers.len() as usize
    }
    fn kv_heads_held(&self) -> usize {
        self.share.heads.len() as usize
    }
    fn head_dim(&self) -> usize {
        self.dims.head_dim
    }
    fn vocab(&self) -> usize {
        self.dims.vocab
    }
    fn placement(&self) -> &Placement {
        &self.placement
    }
    fn embeds(&self) -> bool {
        Gpt2Part::embeds(self)
    }
    fn has_head(&self) -> bool {
        Gpt2Part::has_head(self)
    }
    fn new_cache(&self, max_len: usize) -> KvCache {
        Gpt2Part::new_cache(self, max_len)
    }
    fn embed(&self, tokens: &[u32], pos: usize) -> Result<Tensor, WeightsError> {
        Gpt2Part::embed(self, tokens, pos)
    }
    fn forward(&self, h: Tensor, cache: &mut KvCache, comm: &mut dyn Reduce) -> Tensor {
        Gpt2Part::forward(self, h, cache, comm)
    }
    fn logits(&self, h: &Tensor, comm: &mut dyn Reduce) -> Tensor {
        Gpt2Part::logits(self, h, comm)
    }
    fn streamed_bytes(&self) -> u64 {
        Gpt2Part::streamed_bytes(self)
    }
    fn prefill_block(
        &self,
        prompt: &[u32],
        chunks: &[Chunk],
        cache: &mut KvCache,
        ring: &mut dyn KvRing,
    ) -> Result<Tensor, super::part::PartError> {
        Ok(Gpt2Part::prefill_block(self, prompt, chunks, cache, ring)?)
    }
}
