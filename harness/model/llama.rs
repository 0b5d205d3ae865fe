//! The Llama family by shares (llama, qwen2, qwen3, mixtral): RMSNorm, rotary position
//! embeddings, grouped-query attention, SwiGLU (or Mixtral's mixture of SwiGLU experts, see
//! [`crate::model::moe`]), read from Hugging Face's tensor names.
//!
//! A tensor split divides the query heads and the feed-forward width by ranks as GPT-2's does.
//! Query head `h` reads key/value head `h / (heads / kv_heads)`, so a rank holds the key/value
//! heads its query heads need: a share of them while the world divides them, one replicated
//! head beyond. Row-parallel outputs (`o_proj`, `down_proj`) go through the same [`Reduce`] as
//! GPT-2's: two all-reduces per layer. Mixtral's experts are split by columns as the SwiGLU is
//! (every rank routes its rows the same way with the whole router, computes its columns of the
//! chosen experts, and the weighted partial outputs are summed by the layer's second
//! all-reduce); in an expert split the ranks holding the experts compute them (`rank::expert`,
//! through [`Reduce::mixture`]). One row on the host in float32 (a decode step) runs on
//! slices with parlab's matvec kernels; several rows (prefill), or any on a GPU, on libtorch.

use super::fixed_step::{attend_whole_cache, fixable, token_table, FixedShape, FixedStep, FixedStepError};
use super::gpt2::{causal, chunk_rows, linear, ring_context, store_kv, Alone, Chunk, KvCache, KvRing, QueryHeads, Reduce};
use super::matvec::matvec_row;
use super::moe::{self, ExpertKind, Mixture};
use super::part::{DecoderPart, PartError};
use super::placement::Placement;
use super::row::{f32s, f32s_mut, Cache};
use super::weights::{Checkpoint, RowReader, WeightsError};
use crate::spec::plan::{RankShare, Span};
use std::sync::Arc;
use tch::{Kind, Tensor};

pub mod dims;
mod rope;
mod row;
pub use dims::{LlamaDims, LlamaVariant, Rope, LLAMA_TYPES};

/// What one part holds: query heads, key/value heads, feed-forward columns, layers, vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlamaShare {
    /// Query heads in every layer held.
    pub heads: Span,
    /// Key/value heads in every layer held (those the query heads read).
    pub kv_heads: Span,
    /// Feed-forward columns in every layer held.
    pub ffn: Span,
    /// Layers held.
    pub layers: Span,
    /// Rows of the output head, if this part produces logits.
    pub vocab: Option<Span>,
    /// Experts held in every mixture layer (an empty span for a dense model).
    pub experts: Span,
}

/// The key/value heads query heads `heads` read: `[first / group, ceil(end / group))`.
pub fn kv_heads_for(heads: Span, group: usize) -> Span {
    let g = group.max(1) as u32;
    Span::new(heads.start / g, heads.end.div_ceil(g))
}

impl LlamaShare {
    /// The whole model.
    pub fn whole(d: &LlamaDims) -> Self {
        let all = |n: usize| Span::new(0, n as u32);
        let experts = all(d.moe.as_ref().map_or(0, |m| m.experts));
        LlamaShare {
            heads: all(d.heads),
            kv_heads: all(d.kv_heads),
            ffn: all(d.ffn),
            layers: all(d.layers),
            vocab: Some(all(d.vocab)),
            experts,
        }
    }

    /// A rank's share from the plan's layout (absent spans mean everything, except the vocabulary).
    pub fn from_rank(share: &RankShare, d: &LlamaDims) -> Self {
        let w = Self::whole(d);
        let heads = share.heads.unwrap_or(w.heads);
        LlamaShare {
            heads,
            kv_heads: share.kv_heads.unwrap_or(kv_heads_for(heads, d.group())),
            ffn: share.ffn.unwrap_or(w.ffn),
            layers: share.layers.unwrap_or(w.layers),
            vocab: share.vocab,
            experts: share.experts.unwrap_or(w.experts),
        }
    }
}

/// The prefix of layer `l`'s mixture tensors (Mixtral's names).
fn mixture_prefix(l: usize) -> String {
    at(l, "block_sparse_moe")
}

/// The name of layer `l`'s tensor `name`.
fn at(l: usize, name: &str) -> String {
    format!("model.layers.{l}.{name}")
}

/// Checks every tensor's shape against the config, so a checkpoint that disagrees with its
/// config.json fails with the tensor's name and both shapes.
pub fn check_shapes(ck: &Checkpoint, d: &LlamaDims) -> Result<(), WeightsError> {
    let (w, f, hd) = (d.hidden, d.ffn, d.head_dim);
    let (q, kv) = (d.heads * hd, d.kv_heads * hd);
    ck.expect_shape("model.embed_tokens.weight", &[d.vocab, w])?;
    if !d.tied {
        ck.expect_shape("lm_head.weight", &[d.vocab, w])?;
    }
    ck.expect_shape("model.norm.weight", &[w])?;
    for l in 0..d.layers {
        for (name, shape) in [
            ("input_layernorm.weight", vec![w]),
            ("post_attention_layernorm.weight", vec![w]),
            ("self_attn.q_proj.weight", vec![q, w]),
            ("self_attn.k_proj.weight", vec![kv, w]),
            ("self_attn.v_proj.weight", vec![kv, w]),
            ("self_attn.o_proj.weight", vec![w, q]),
        ] {
            ck.expect_shape(&at(l, name), &shape)?;
        }
        match &d.moe {
            Some(m) => moe::check_shapes(ck, m, &mixture_prefix(l), ExpertKind::SwiGlu { columns: Span::new(0, f as u32) }, w)?,
            None => {
                for (name, shape) in
                    [("mlp.gate_proj.weight", vec![f, w]), ("mlp.up_proj.weight", vec![f, w]), ("mlp.down_proj.weight", vec![w, f])]
                {
                    ck.expect_shape(&at(l, name), &shape)?;
                }
            }
        }
        let optional = [
            (d.qkv_bias, "self_attn.q_proj.bias", q),
            (d.qkv_bias, "self_attn.k_proj.bias", kv),
            (d.qkv_bias, "self_attn.v_proj.bias", kv),
            (d.o_bias, "self_attn.o_proj.bias", w),
            (d.qk_norm, "self_attn.q_norm.weight", hd),
            (d.qk_norm, "self_attn.k_norm.weight", hd),
            (d.mlp_bias && d.moe.is_none(), "mlp.gate_proj.bias", f),
            (d.mlp_bias && d.moe.is_none(), "mlp.up_proj.bias", f),
            (d.mlp_bias && d.moe.is_none(), "mlp.down_proj.bias", w),
        ];
        for (_, name, n) in optional.iter().filter(|o| o.0) {
            ck.expect_shape(&at(l, name), &[*n])?;
        }
    }
    Ok(())
}

/// One block's parameters held by a part; matrices `[out, in]` as Hugging Face stores them.
struct Layer {
    input_norm: Tensor,
    /// The held query rows, then key rows, then value rows: `[(heads + 2 kv_heads) head_dim, d]`.
    w_qkv: Tensor,
    b_qkv: Option<Tensor>,
    q_norm: Option<Tensor>,
    k_norm: Option<Tensor>,
    /// Columns of the held query heads: `[d, heads head_dim]`.
    w_o: Tensor,
    b_o: Option<Tensor>,
    post_norm: Tensor,
    ffn: Ffn,
}

/// A block's feed-forward part: the held columns of a SwiGLU, or Mixtral's mixture of experts.
enum Ffn {
    SwiGlu {
        /// The held gate rows, then up rows: `[2 ffn, d]`.
        w_gate_up: Tensor,
        b_gate_up: Option<Tensor>,
        /// Columns of the held feed-forward width: `[d, ffn]`.
        w_down: Tensor,
        b_down: Option<Tensor>,
    },
    Mixture(Mixture),
}

impl Ffn {
    /// Parameters one decode step of one token reads.
    fn streamed_numel(&self) -> u64 {
        match self {
            Ffn::SwiGlu { w_gate_up, b_gate_up, w_down, b_down } => {
                [Some(w_gate_up), b_gate_up.as_ref(), Some(w_down), b_down.as_ref()].into_iter().flatten().map(|t| t.numel() as u64).sum()
            }
            Ffn::Mixture(m) => m.streamed_numel(),
        }
    }

    /// The tensors on `p` (a mixture stays on the host, refused on CUDA by the spec).
    fn placed(self, p: &Placement) -> Ffn {
        match self {
            Ffn::SwiGlu { w_gate_up, b_gate_up, w_down, b_down } => Ffn::SwiGlu {
                w_gate_up: p.place(w_gate_up),
                b_gate_up: b_gate_up.map(|t| p.place(t)),
                w_down: p.place(w_down),
                b_down: b_down.map(|t| p.place(t)),
            },
            mixture => mixture,
        }
    }
}

impl Layer {
    /// Parameters one decode step of one token reads.
    fn streamed_numel(&self) -> u64 {
        let attention: u64 = [&self.input_norm, &self.w_qkv, &self.w_o, &self.post_norm]
            .into_iter()
            .chain([&self.b_qkv, &self.q_norm, &self.k_norm, &self.b_o].into_iter().flatten())
            .map(|t| t.numel() as u64)
            .sum();
        attention + self.ffn.streamed_numel()
    }

    fn placed(self, p: &Placement) -> Layer {
        let opt = |t: Option<Tensor>| t.map(|t| p.place(t));
        Layer {
            input_norm: p.place(self.input_norm),
            w_qkv: p.place(self.w_qkv),
            b_qkv: opt(self.b_qkv),
            q_norm: opt(self.q_norm),
            k_norm: opt(self.k_norm),
            w_o: p.place(self.w_o),
            b_o: opt(self.b_o),
            post_norm: p.place(self.post_norm),
            ffn: self.ffn.placed(p),
        }
    }
}

fn load_layer(ck: &Checkpoint, d: &LlamaDims, s: &LlamaShare, l: usize) -> Result<Layer, WeightsError> {
    let hd = d.head_dim;
    let (q0, q1) = (s.heads.start as usize * hd, s.heads.end as usize * hd);
    let (k0, k1) = (s.kv_heads.start as usize * hd, s.kv_heads.end as usize * hd);
    let rows = |name: &str, a: usize, b: usize| ck.rows(&at(l, name), a, b);
    let qkv = |suffix: &str| -> Result<Tensor, WeightsError> {
        let parts = [
            rows(&format!("self_attn.q_proj.{suffix}"), q0, q1)?,
            rows(&format!("self_attn.k_proj.{suffix}"), k0, k1)?,
            rows(&format!("self_attn.v_proj.{suffix}"), k0, k1)?,
        ];
        Ok(Tensor::cat(&parts, 0))
    };
    let full = |name: &str| ck.full(&at(l, name));
    Ok(Layer {
        input_norm: full("input_layernorm.weight")?,
        w_qkv: qkv("weight")?,
        b_qkv: d.qkv_bias.then(|| qkv("bias")).transpose()?,
        q_norm: d.qk_norm.then(|| full("self_attn.q_norm.weight")).transpose()?,
        k_norm: d.qk_norm.then(|| full("self_attn.k_norm.weight")).transpose()?,
        w_o: ck.columns(&at(l, "self_attn.o_proj.weight"), &[(q0, q1)])?,
        b_o: d.o_bias.then(|| full("self_attn.o_proj.bias")).transpose()?,
        post_norm: full("post_attention_layernorm.weight")?,
        ffn: match &d.moe {
            Some(m) => Ffn::Mixture(Mixture::load(ck, m, &mixture_prefix(l), s.experts, ExpertKind::SwiGlu { columns: s.ffn })?),
            None => load_swiglu(ck, d, s, l)?,
        },
    })
}

/// Layer `l`'s SwiGLU feed-forward columns `s.ffn`.
fn load_swiglu(ck: &Checkpoint, d: &LlamaDims, s: &LlamaShare, l: usize) -> Result<Ffn, WeightsError> {
    let (f0, f1) = (s.ffn.start as usize, s.ffn.end as usize);
    let gate_up = |suffix: &str| -> Result<Tensor, WeightsError> {
        let rows = |name: &str| ck.rows(&at(l, &format!("mlp.{name}.{suffix}")), f0, f1);
        Ok(Tensor::cat(&[rows("gate_proj")?, rows("up_proj")?], 0))
    };
    Ok(Ffn::SwiGlu {
        w_gate_up: gate_up("weight")?,
        b_gate_up: d.mlp_bias.then(|| gate_up("bias")).transpose()?,
        w_down: ck.columns(&at(l, "mlp.down_proj.weight"), &[(f0, f1)])?,
        b_down: d.mlp_bias.then(|| ck.full(&at(l, "mlp.down_proj.bias"))).transpose()?,
    })
}

struct Head {
    norm: Tensor,
    /// `[vocab_shard, d]`.
    weight: Tensor,
}

/// RMSNorm over the last dimension (`x / sqrt(mean(x²) + eps) * w`), in float32 as transformers'.
fn rms_norm(x: &Tensor, w: &Tensor, eps: f64) -> Tensor {
    let xf = x.to_kind(Kind::Float);
    let var = xf.pow_tensor_scalar(2).mean_dim(Some([-1i64].as_slice()), true, Kind::Float);
    w * (xf * (var + eps).rsqrt()).to_kind(x.kind())
}

/// A Llama-family model holding a share (immutable; see [`KvCache`]).
pub struct LlamaPart {
    /// The dimensions of the whole model.
    pub dims: LlamaDims,
    /// What this part holds.
    pub share: LlamaShare,
    /// Where its weights, cache and activations live.
    pub placement: Placement,
    ckpt: Arc<Checkpoint>,
    embed: Option<RowReader>,
    layers: Vec<Layer>,
    head: Option<Head>,
    /// Rotary inverse frequencies (`head_dim / 2`), on the host and on the placement.
    inv_freq: (Vec<f32>, Tensor),
    /// For each query head held, the index of its key/value head among those held.
    kv_of: Vec<usize>,
    /// The same as an index tensor on the placement (made once: a copy to a GPU each layer of
    /// each step would wait for the device).
    kv_index: Tensor,
}

impl LlamaPart {
    /// Loads `share` of the checkpoint onto `placement` (only the rows and columns it holds are
    /// copied; the token table stays a memory-mapped reader).
    pub fn load_on(ckpt: Arc<Checkpoint>, dims: LlamaDims, share: LlamaShare, placement: Placement) -> Result<Self, WeightsError> {
        check_shapes(&ckpt, &dims)?;
        let needed = kv_heads_for(share.heads, dims.group());
        if share.kv_heads.start > needed.start || share.kv_heads.end < needed.end || share.kv_heads.end as usize > dims.kv_heads {
            return Err(WeightsError::Shape {
                path: ckpt.path().to_path_buf(),
                name: "layout".into(),
                message: format!(
                    "key/value heads {:?} do not cover the {:?} that query heads {:?} read",
                    share.kv_heads, needed, share.heads
                ),
            });
        }
        let _guard = tch::no_grad_guard();
        let embed = (share.layers.start == 0).then(|| ckpt.row_reader("model.embed_tokens.weight")).transpose()?;
        let layers = (share.layers.start as usize..share.layers.end as usize)
            .map(|l| load_layer(&ckpt, &dims, &share, l).map(|layer| layer.placed(&placement)))
            .collect::<Result<Vec<_>, _>>()?;
        let head_name = if dims.tied { "model.embed_tokens.weight" } else { "lm_head.weight" };
        let head = share
            .vocab
            .map(|v| -> Result<Head, WeightsError> {
                Ok(Head {
                    norm: placement.place(ckpt.full("model.norm.weight")?),
                    weight: placement.place(ckpt.rows(head_name, v.start as usize, v.end as usize)?),
                })
            })
            .transpose()?;
        let inv = dims.rope.inv_freq(dims.head_dim);
        let inv_t = Tensor::from_slice(&inv).to_device(placement.device);
        let g = dims.group();
        let kv_of: Vec<usize> =
            (share.heads.start as usize..share.heads.end as usize).map(|h| h / g - share.kv_heads.start as usize).collect();
        let kv_index = Tensor::from_slice(&kv_of.iter().map(|&j| j as i64).collect::<Vec<_>>()).to_device(placement.device);
        Ok(LlamaPart { dims, share, placement, ckpt, embed, layers, head, inv_freq: (inv, inv_t), kv_of, kv_index })
    }

    fn scale(&self) -> f64 {
        1.0 / (self.dims.head_dim as f64).sqrt()
    }

    /// [`DecoderPart::forward`] of one row at position `cache.len`, on slices.
    fn forward_row(&self, h: &Tensor, cache: &mut KvCache, comm: &mut dyn Reduce) -> Tensor {
        let mut x = f32s(&h.contiguous()).to_vec();
        let pos = cache.len;
        let (cos, sin) = rope::angles_at(&self.inv_freq.0, pos);
        for (i, layer) in self.layers.iter().enumerate() {
            let (k, v) = cache.layer_mut(i);
            let max_len = k.size()[1] as usize;
            let mut c = Cache { k: f32s_mut(k), v: f32s_mut(v), max_len };
            self.block_row(layer, &mut x, &mut c, pos, (&cos, &sin), comm);
        }
        cache.len += 1;
        Tensor::from_slice(&x).view([1, x.len() as i64])
    }

    /// One block on the row `h` (updated in place): [`LlamaPart::block`] on slices.
    fn block_row(&self, l: &Layer, h: &mut [f32], cache: &mut Cache, pos: usize, angles: (&[f32], &[f32]), comm: &mut dyn Reduce) {
        let eps = self.dims.eps;
        let mut a = vec![0f32; h.len()];
        row::rms_norm(h, f32s(&l.input_norm), eps, &mut a);
        let mut qkv = matvec_row(&l.w_qkv, &a, l.b_qkv.as_ref().map(f32s));
        let (q_len, kv_len) =
            (self.share.heads.len() as usize * self.dims.head_dim, self.share.kv_heads.len() as usize * self.dims.head_dim);
        let (q, kv) = qkv.split_at_mut(q_len);
        let (k, v) = kv.split_at_mut(kv_len);
        if let (Some(qn), Some(kn)) = (&l.q_norm, &l.k_norm) {
            row::rms_norm_heads(q, f32s(qn), eps);
            row::rms_norm_heads(k, f32s(kn), eps);
        }
        rope::rotate_row(q, angles.0, angles.1);
        rope::rotate_row(k, angles.0, angles.1);
        let mut ctx = vec![0f32; q_len];
        row::attend_grouped(&row::Position { pos, q, k, v }, &self.kv_of, cache, self.scale() as f32, &mut ctx);
        let o = comm.reduced_matvec(&l.w_o, &ctx);
        add_into(h, &o, l.b_o.as_ref());
        row::rms_norm(h, f32s(&l.post_norm), eps, &mut a);
        match &l.ffn {
            Ffn::SwiGlu { w_gate_up, b_gate_up, w_down, b_down } => {
                let mut gu = matvec_row(w_gate_up, &a, b_gate_up.as_ref().map(f32s));
                let (gate, up) = gu.split_at_mut(self.share.ffn.len() as usize);
                row::silu_mul(gate, up);
                let down = comm.reduced_matvec(w_down, gate);
                add_into(h, &down, b_down.as_ref());
            }
            Ffn::Mixture(m) => {
                let mut y = f32s(&comm.mixture(m, &Tensor::from_slice(&a).view([1, -1])).contiguous()).to_vec();
                comm.all_reduce_row(&mut y);
                add_into(h, &y, None);
            }
        }
    }

    fn block(&self, l: &Layer, h: Tensor, k_cache: &mut Tensor, v_cache: &mut Tensor, pos: usize, comm: &mut dyn Reduce) -> Tensor {
        self.block_with(l, h, comm, |part, a| part.attention(l, a, k_cache, v_cache, pos))
    }

    /// One block on rows `h`, the attention context of the normed rows computed by `attend`.
    fn block_with(&self, l: &Layer, h: Tensor, comm: &mut dyn Reduce, attend: impl FnOnce(&Self, &Tensor) -> Tensor) -> Tensor {
        let a = rms_norm(&h, &l.input_norm, self.dims.eps);
        let ctx = attend(self, &a);
        let h = h + with_bias(comm.reduced_linear(&ctx, &l.w_o), l.b_o.as_ref());
        let m = rms_norm(&h, &l.post_norm, self.dims.eps);
        match &l.ffn {
            Ffn::SwiGlu { w_gate_up, b_gate_up, w_down, b_down } => {
                let gu = linear(&m, w_gate_up, b_gate_up.as_ref());
                let f = self.share.ffn.len() as i64;
                let act = gu.narrow(1, 0, f).silu() * gu.narrow(1, f, f);
                h + with_bias(comm.reduced_linear(&act, w_down), b_down.as_ref())
            }
            Ffn::Mixture(mix) => {
                let partial = comm.mixture(mix, &m);
                h + comm.all_reduce(&partial)
            }
        }
    }

    /// Queries `[heads, T, hd]` and keys, values `[kv_heads, T, hd]` of rows `a` at positions
    /// `pos..`, normed (Qwen3) and rotated.
    fn qkv_heads(&self, l: &Layer, a: &Tensor, pos: usize) -> (Tensor, Tensor, Tensor) {
        let (q, k, v) = self.qkv_unrotated(l, a);
        (rope::rotate(&q, &self.inv_freq.1, pos), rope::rotate(&k, &self.inv_freq.1, pos), v)
    }

    /// [`LlamaPart::qkv_heads`] of a block whose rows are the prompt positions `chunks`, one chunk
    /// after another (each chunk rotated from its own first position).
    fn qkv_chunks(&self, l: &Layer, a: &Tensor, chunks: &[Chunk]) -> (Tensor, Tensor, Tensor) {
        let (q, k, v) = self.qkv_unrotated(l, a);
        let rotated = |x: &Tensor| {
            let parts: Vec<Tensor> = chunks
                .iter()
                .zip(chunk_rows(chunks))
                .map(|(c, (at, len))| rope::rotate(&x.narrow(1, at, len), &self.inv_freq.1, c.start))
                .collect();
            Tensor::cat(&parts, 1)
        };
        (rotated(&q), rotated(&k), v)
    }

    /// Queries `[heads, T, hd]` and keys, values `[kv_heads, T, hd]` of rows `a`, normed (Qwen3).
    fn qkv_unrotated(&self, l: &Layer, a: &Tensor) -> (Tensor, Tensor, Tensor) {
        let (t, hd) = (a.size()[0], self.dims.head_dim as i64);
        let (hs, ks) = (self.share.heads.len() as i64, self.share.kv_heads.len() as i64);
        let qkv = linear(a, &l.w_qkv, l.b_qkv.as_ref());
        let heads = |from: i64, n: i64| qkv.narrow(1, from * hd, n * hd).reshape([t, n, hd]).transpose(0, 1);
        let (mut q, mut k, v) = (heads(0, hs), heads(hs, ks), heads(hs + ks, ks));
        if let (Some(qn), Some(kn)) = (&l.q_norm, &l.k_norm) {
            q = rms_norm(&q, qn, self.dims.eps);
            k = rms_norm(&k, kn, self.dims.eps);
        }
        (q, k, v.contiguous())
    }

    /// The key/value head (among those held) of each query head held, as an index tensor on
    /// the placement.
    fn kv_index(&self) -> Tensor {
        self.kv_index.shallow_clone()
    }

    fn attention(&self, l: &Layer, a: &Tensor, k_cache: &mut Tensor, v_cache: &mut Tensor, pos: usize) -> Tensor {
        let (q, k, v) = self.qkv_heads(l, a, pos);
        let t = a.size()[0];
        store_kv(k_cache, v_cache, pos, &k, &v);
        let total = pos as i64 + t;
        let index = self.kv_index();
        let keys = k_cache.narrow(1, 0, total).index_select(0, &index);
        let values = v_cache.narrow(1, 0, total).index_select(0, &index);
        let mut scores = q.matmul(&keys.transpose(1, 2)) * self.scale();
        if t > 1 {
            scores = causal(scores, pos, 0);
        }
        let probs = scores.softmax(-1, Kind::Float).to_kind(values.kind());
        probs.matmul(&values).transpose(0, 1).contiguous().view([t, -1])
    }
}

/// `h += y (+ b)`, element by element.
fn add_into(h: &mut [f32], y: &[f32], b: Option<&Tensor>) {
    h.iter_mut().zip(y).for_each(|(h, y)| *h += y);
    if let Some(b) = b {
        h.iter_mut().zip(f32s(b)).for_each(|(h, b)| *h += b);
    }
}

fn with_bias(y: Tensor, b: Option<&Tensor>) -> Tensor {
    match b {
        Some(b) => y + b,
        None => y,
    }
}

impl FixedShape for LlamaPart {
    fn can_fix(&self) -> Result<(), FixedStepError> {
        let whole = self.embed.is_some() && self.share == LlamaShare::whole(&self.dims);
        fixable(whole, self.layers.iter().any(|l| matches!(l.ffn, Ffn::Mixture(_))))
    }

    fn token_table(&self) -> Result<Tensor, FixedStepError> {
        token_table(&self.ckpt, "model.embed_tokens.weight", self.embed.is_some(), &self.placement)
    }

    fn fixed_step(&self, step: &FixedStep, cache: &mut KvCache) -> Result<Tensor, FixedStepError> {
        let _guard = tch::no_grad_guard();
        self.can_fix()?;
        let inputs = &step.inputs;
        let positions = inputs.position().to_kind(Kind::Float);
        let mut h = step.table.index_select(0, &inputs.token());
        for (i, layer) in self.layers.iter().enumerate() {
            let (k_cache, v_cache) = cache.layer_mut(i);
            h = self.block_with(layer, h, &mut Alone, |part, a| {
                let (q, k, v) = part.qkv_unrotated(layer, a);
                let (q, k) = (rope::rotate_at(&q, &part.inv_freq.1, &positions), rope::rotate_at(&k, &part.inv_freq.1, &positions));
                attend_whole_cache(&q, (&k, &v), (k_cache, v_cache), inputs, part.scale())
            });
        }
        Ok(self.logits(&h, &mut Alone))
    }
}

impl DecoderPart for LlamaPart {
    fn hidden(&self) -> usize {
        self.dims.hidden
    }
    fn layers_held(&self) -> usize {
        self.layers.len()
    }
    fn kv_heads_held(&self) -> usize {
        self.share.kv_heads.len() as usize
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
        self.embed.is_some()
    }
    fn has_head(&self) -> bool {
        self.head.is_some()
    }

    fn new_cache(&self, max_len: usize) -> KvCache {
        let shape = [self.share.kv_heads.len() as i64, max_len as i64, self.dims.head_dim as i64];
        let opts = (self.placement.kind, self.placement.device);
        let make = || self.layers.iter().map(|_| Tensor::zeros(shape, opts)).collect();
        KvCache::from_layers(make(), make())
    }

    fn embed(&self, tokens: &[u32], _pos: usize) -> Result<Tensor, WeightsError> {
        let reader = self.embed.as_ref().expect("embed called on a part that does not hold layer 0");
        Ok(self.placement.place(self.ckpt.read_rows(reader, tokens)?))
    }

    fn forward(&self, h: Tensor, cache: &mut KvCache, comm: &mut dyn Reduce) -> Tensor {
        let _guard = tch::no_grad_guard();
        let mut h = self.placement.place(h);
        if h.size()[0] == 1 && self.placement.rows_on_host() {
            return self.forward_row(&h, cache, comm);
        }
        let pos = cache.len;
        for (i, layer) in self.layers.iter().enumerate() {
            let (k, v) = cache.layer_mut(i);
            h = self.block(layer, h, k, v, pos, comm);
        }
        cache.len += h.size()[0] as usize;
        h
    }

    fn logits(&self, h: &Tensor, comm: &mut dyn Reduce) -> Tensor {
        let _guard = tch::no_grad_guard();
        let head = self.head.as_ref().expect("logits called on a part without an output head");
        let last = h.narrow(0, h.size()[0] - 1, 1);
        let x = rms_norm(&last, &head.norm, self.dims.eps);
        comm.gather_vocab(&linear(&x, &head.weight, None).view([-1]))
    }

    fn streamed_bytes(&self) -> u64 {
        let numel = |t: &Tensor| t.numel() as u64;
        let layers: u64 = self.layers.iter().map(Layer::streamed_numel).sum();
        let head = self.head.as_ref().map_or(0, |h| numel(&h.weight) + numel(&h.norm));
        let embed = if self.embeds() { self.dims.hidden as u64 } else { 0 };
        self.placement.element_bytes() * (layers + head + embed)
    }

    fn prefill_block(&self, prompt: &[u32], chunks: &[Chunk], cache: &mut KvCache, ring: &mut dyn KvRing) -> Result<Tensor, PartError> {
        let _guard = tch::no_grad_guard();
        let embedded: Vec<Tensor> = chunks.iter().map(|c| self.embed(&prompt[c.clone()], c.start)).collect::<Result<_, _>>()?;
        let mut h = Tensor::cat(&embedded, 0);
        for (i, layer) in self.layers.iter().enumerate() {
            let (k_cache, v_cache) = cache.layer_mut(i);
            h = self.block_with(layer, h, &mut Alone, |part, a| {
                let (q, k, v) = part.qkv_chunks(layer, a, chunks);
                let heads = QueryHeads { scale: part.scale(), kv_index: Some(part.kv_index()) };
                ring_context(&q, (k, v), (k_cache, v_cache), chunks, ring, &heads)
            });
        }
        Ok(h)
    }
}
