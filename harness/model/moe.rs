//! Mixture-of-experts blocks: the feed-forward block of every layer replaced by
//! `num_local_experts` experts and a softmax router that sends each token to its
//! `num_experts_per_tok` best experts, their outputs weighted by the router's probabilities
//! renormalised over the chosen ones (Mixtral's routing, as transformers'
//! `MixtralTopKRouter`: softmax in float32, top-k, divided by the top-k sum).
//!
//! Two expert layouts, by [`ExpertKind`]:
//! * GPT-2 MLPs (parlab's GPT-2 mixture; GPT-2's Conv1D `[in, out]` layout):
//!   `transformer.h.{l}.mlp.gate.weight` `[experts, d]` (a Linear, `[out, in]`), and per expert
//!   `transformer.h.{l}.mlp.experts.{e}.c_fc.{weight,bias}` `[d, f]`, `[f]` and
//!   `...c_proj.{weight,bias}` `[f, d]`, `[d]`, with `f` = `moe_intermediate_size`;
//! * SwiGLU experts (Mixtral, Hugging Face's names): `model.layers.{l}.block_sparse_moe.gate.weight`
//!   `[experts, d]` and per expert `...experts.{e}.w1.weight` (gate) and `w3.weight` (up) `[f, d]`,
//!   `w2.weight` (down) `[d, f]`: `w2(silu(w1 x) * w3 x)`, with `f` = `intermediate_size`.

use super::gpt2::linear;
use super::row::f32s;
use super::weights::{Checkpoint, WeightsError};
use crate::model::defaults::{self, ExpertWidth, MixtureRule};
use crate::model::ConfigError;
use crate::spec::plan::Span;
use tch::{Kind, Tensor};

/// The mixture options of a config: experts, experts per token, expert width, routing skew.
#[derive(Debug, Clone, PartialEq)]
pub struct MoeDims {
    /// Experts per layer (`num_local_experts`).
    pub experts: usize,
    /// Experts each token is sent to (`num_experts_per_tok`).
    pub top_k: usize,
    /// Width of one expert's hidden layer (`moe_intermediate_size`, else the dense width).
    pub width: usize,
    /// A run's routing skew (spec `routing_skew`): expert e's router logit gets
    /// `skew · (1 − 2e/(experts − 1))`, so a positive skew crowds the first experts.
    pub skew: f64,
}

impl MoeDims {
    /// The mixture a config describes, as transformers' config class of its type reads it
    /// ([`defaults::MixtureRule`]: a Mixtral without `num_local_experts` has 8), or None for a dense
    /// model; an error names a bad key, or expert keys on a dense type.
    pub fn of(cfg: &crate::model::ModelConfig) -> Result<Option<Self>, ConfigError> {
        Self::read(&cfg.raw, &cfg.model_type, cfg.intermediate as usize)
    }

    /// [`MoeDims::of`] from a config.json's keys, its type and its dense feed-forward width.
    pub fn read(raw: &serde_json::Value, model_type: &str, dense_width: usize) -> Result<Option<Self>, ConfigError> {
        let rule = defaults::of(model_type).mixture;
        // A null is absent for a dense type and parlab's GPT-2 mixture; a mixture type's config
        // class types these keys as integers, and transformers refuses a null.
        let null_absent = !matches!(rule, MixtureRule::Always { .. });
        let given = |key: &'static str| raw.get(key).filter(|v| !(null_absent && v.is_null())).map(|v| (key, v));
        let count = |key: &'static str| -> Result<Option<usize>, ConfigError> {
            let Some((key, v)) = given(key) else { return Ok(None) };
            let not_positive = || ConfigError::NotPositive { key: key.into(), found: v.clone() };
            v.as_u64().filter(|&n| n > 0).map(|n| Some(n as usize)).ok_or_else(not_positive)
        };
        // Mixtral's config class maps `num_experts` onto its `num_local_experts`, so one given
        // beside the other overwrites it (Qwen3-MoE the other way round).
        let order = if model_type == "mixtral" { ["num_experts", "num_local_experts"] } else { ["num_local_experts", "num_experts"] };
        let named = given(order[0]).or_else(|| given(order[1])).map(|(key, _)| key);
        let experts = match named {
            Some(key) => count(key)?,
            None => None,
        };
        let (experts, top_k, width) = match rule {
            MixtureRule::NotRead => return Ok(None),
            MixtureRule::Dense => {
                return match named {
                    Some(key) => Err(ConfigError::ExpertsOfDenseType { model_type: model_type.into(), key }),
                    None => Ok(None),
                }
            }
            MixtureRule::WhenGiven { top_k } => {
                let Some(experts) = experts else { return Ok(None) };
                (experts, top_k, count("moe_intermediate_size")?.unwrap_or(dense_width))
            }
            MixtureRule::Always { count: n, top_k, width } => {
                let width = match width {
                    ExpertWidth::Dense => dense_width,
                    ExpertWidth::Named(w) => count("moe_intermediate_size")?.unwrap_or(w as usize),
                };
                (experts.unwrap_or(n as usize), top_k, width)
            }
        };
        let top_k = count("num_experts_per_tok")?.unwrap_or(top_k as usize);
        if top_k > experts {
            return Err(ConfigError::TopKAboveExperts { top_k, experts });
        }
        Ok(Some(MoeDims { experts, top_k, width, skew: 0.0 }))
    }

    /// The routing bias of expert `e` at this skew.
    fn bias(&self, e: usize) -> f64 {
        if self.experts < 2 {
            return 0.0;
        }
        self.skew * (1.0 - 2.0 * e as f64 / (self.experts - 1) as f64)
    }
}

/// How a mixture's experts compute, and so which tensors each one has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpertKind {
    /// A GPT-2 MLP with biases, `c_fc` then `c_proj`, with the config's GELU.
    Gpt2Mlp {
        /// The GELU the config asks for.
        gelu: super::gpt2::Gelu,
    },
    /// Mixtral's SwiGLU expert without biases, `w2(silu(w1 x) * w3 x)`, holding the columns
    /// `columns` of its width (a tensor split's share; each rank's output is then a partial sum).
    SwiGlu {
        /// The columns of the expert width held.
        columns: Span,
    },
}

impl ExpertKind {
    /// The name of each tensor of one expert (after `experts.{e}.`) and its shape as stored,
    /// for residual width `d` and expert width `f`.
    fn tensors(self, d: usize, f: usize) -> Vec<(&'static str, Vec<usize>)> {
        match self {
            ExpertKind::Gpt2Mlp { .. } => {
                vec![("c_fc.weight", vec![d, f]), ("c_fc.bias", vec![f]), ("c_proj.weight", vec![f, d]), ("c_proj.bias", vec![d])]
            }
            ExpertKind::SwiGlu { .. } => vec![("w1.weight", vec![f, d]), ("w3.weight", vec![f, d]), ("w2.weight", vec![d, f])],
        }
    }
}

/// Checks the router's and every expert's shapes of the mixture whose tensors are named
/// `{prefix}.gate.weight` and `{prefix}.experts.{e}.*`, for residual width `d`.
pub fn check_shapes(ckpt: &Checkpoint, m: &MoeDims, prefix: &str, kind: ExpertKind, d: usize) -> Result<(), WeightsError> {
    ckpt.expect_shape(&format!("{prefix}.gate.weight"), &[m.experts, d])?;
    for e in 0..m.experts {
        for (name, shape) in kind.tensors(d, m.width) {
            ckpt.expect_shape(&format!("{prefix}.experts.{e}.{name}"), &shape)?;
        }
    }
    Ok(())
}

/// One expert's matrices `[out, in]`.
enum Expert {
    /// A GPT-2 MLP and tch's GELU approximation.
    Gpt2Mlp { w_fc: Tensor, b_fc: Tensor, w_proj: Tensor, b_proj: Tensor, gelu: super::gpt2::Gelu },
    /// A SwiGLU expert: gate rows then up rows `[2 f, d]`, and down `[d, f]`.
    SwiGlu { w_gate_up: Tensor, w_down: Tensor },
}

impl Expert {
    fn load(ckpt: &Checkpoint, at: &str, kind: ExpertKind) -> Result<Self, WeightsError> {
        let t = |n: &str| ckpt.full(&format!("{at}.{n}"));
        let out_in = |t: Tensor| t.tr().contiguous();
        Ok(match kind {
            ExpertKind::Gpt2Mlp { gelu } => Expert::Gpt2Mlp {
                w_fc: out_in(t("c_fc.weight")?),
                b_fc: t("c_fc.bias")?,
                w_proj: out_in(t("c_proj.weight")?),
                b_proj: t("c_proj.bias")?,
                gelu,
            },
            ExpertKind::SwiGlu { columns } => {
                let (f0, f1) = (columns.start as usize, columns.end as usize);
                let rows = |n: &str| ckpt.rows(&format!("{at}.{n}"), f0, f1);
                Expert::SwiGlu {
                    w_gate_up: Tensor::cat(&[rows("w1.weight")?, rows("w3.weight")?], 0),
                    w_down: ckpt.columns(&format!("{at}.w2.weight"), &[(f0, f1)])?,
                }
            }
        })
    }

    /// The expert's output for `rows` `[R, d]`.
    fn forward(&self, rows: &Tensor) -> Tensor {
        match self {
            Expert::Gpt2Mlp { w_fc, b_fc, w_proj, b_proj, gelu } => {
                linear(&linear(rows, w_fc, Some(b_fc)).gelu(gelu.tch_approximate()), w_proj, Some(b_proj))
            }
            Expert::SwiGlu { w_gate_up, w_down } => {
                let gu = linear(rows, w_gate_up, None);
                let f = w_down.size()[1];
                linear(&(gu.narrow(1, 0, f).silu() * gu.narrow(1, f, f)), w_down, None)
            }
        }
    }

    fn numel(&self) -> u64 {
        let n = |t: &Tensor| t.numel() as u64;
        match self {
            Expert::Gpt2Mlp { w_fc, b_fc, w_proj, b_proj, .. } => n(w_fc) + n(b_fc) + n(w_proj) + n(b_proj),
            Expert::SwiGlu { w_gate_up, w_down } => n(w_gate_up) + n(w_down),
        }
    }
}

/// A token's place in a mixture: the row it is, and the expert it goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    /// Row of the token in the rows routed.
    pub row: usize,
    /// The expert (index in the layer).
    pub expert: usize,
}

/// The router's choice for one token: experts in order of preference, with their weights.
pub type Choice = Vec<(usize, f32)>;

/// One layer's mixture: the router (always whole) and the experts this part holds.
pub struct Mixture {
    dims: MoeDims,
    gate: Tensor,
    bias: Tensor,
    held: Span,
    experts: Vec<Expert>,
}

impl Mixture {
    /// Loads the router `{prefix}.gate.weight` and the experts in `held` (`{prefix}.experts.{e}.*`).
    pub fn load(ckpt: &Checkpoint, dims: &MoeDims, prefix: &str, held: Span, kind: ExpertKind) -> Result<Self, WeightsError> {
        let experts = (held.start as usize..held.end as usize)
            .map(|e| Expert::load(ckpt, &format!("{prefix}.experts.{e}"), kind))
            .collect::<Result<Vec<_>, WeightsError>>()?;
        let bias: Vec<f32> = (0..dims.experts).map(|e| dims.bias(e) as f32).collect();
        let gate = ckpt.full(&format!("{prefix}.gate.weight"))?;
        Ok(Mixture { dims: dims.clone(), gate, bias: Tensor::from_slice(&bias), held, experts })
    }

    /// The mixture's options.
    pub fn dims(&self) -> &MoeDims {
        &self.dims
    }

    /// The experts this part holds.
    pub fn held(&self) -> Span {
        self.held
    }

    /// Routes rows `x` (`[T, d]`, normed): per row, its top-k experts, most preferred first, with
    /// softmax probabilities over every expert renormalised over the chosen ones.
    pub fn route(&self, x: &Tensor) -> Vec<Choice> {
        let logits = linear(x, &self.gate, None) + &self.bias;
        let probs = logits.softmax(-1, Kind::Float);
        let (weights, experts) = probs.topk(self.dims.top_k as i64, -1, true, true);
        let weights = &weights / weights.sum_dim_intlist([-1i64].as_slice(), true, Kind::Float);
        let (w, e) = (weights.contiguous(), experts.contiguous());
        let w = f32s(&w);
        let e = Vec::<i64>::try_from(&e.view([-1])).expect("int64 expert indices");
        let k = self.dims.top_k;
        (0..x.size()[0] as usize).map(|t| (0..k).map(|j| (e[t * k + j] as usize, w[t * k + j])).collect()).collect()
    }

    /// Every (row, expert) pair of `choices`, row by row, in order of preference.
    pub fn assignments(choices: &[Choice]) -> Vec<Assignment> {
        choices.iter().enumerate().flat_map(|(row, c)| c.iter().map(move |&(expert, _)| Assignment { row, expert })).collect()
    }

    /// The outputs of the held experts for `assigned` rows of `x` (`[R, d]`): `[assigned, d]` in
    /// the order given. Each expert computes its rows together, in the order they are given.
    pub fn compute(&self, x: &Tensor, assigned: &[Assignment]) -> Vec<f32> {
        let d = x.size()[1] as usize;
        let mut out = vec![0f32; assigned.len() * d];
        for (i, expert) in self.experts.iter().enumerate() {
            let e = self.held.start as usize + i;
            let at: Vec<usize> = (0..assigned.len()).filter(|&a| assigned[a].expert == e).collect();
            if at.is_empty() {
                continue;
            }
            let rows: Vec<i64> = at.iter().map(|&a| assigned[a].row as i64).collect();
            let y = expert.forward(&x.index_select(0, &Tensor::from_slice(&rows))).contiguous();
            for (j, &a) in at.iter().enumerate() {
                out[a * d..(a + 1) * d].copy_from_slice(&f32s(&y)[j * d..(j + 1) * d]);
            }
        }
        out
    }

    /// The mixture's output per row (`[T, d]`): Σ weight · expert output over each row's choices,
    /// in order of preference; `outputs` holds one row per choice, as [`Mixture::assignments`] orders them.
    pub fn combine(choices: &[Choice], outputs: &[f32], d: usize) -> Tensor {
        let mut out = vec![0f32; choices.len() * d];
        let mut at = 0;
        for (t, choice) in choices.iter().enumerate() {
            let row = &mut out[t * d..(t + 1) * d];
            for &(_, weight) in choice {
                row.iter_mut().zip(&outputs[at * d..(at + 1) * d]).for_each(|(o, y)| *o += weight * y);
                at += 1;
            }
        }
        Tensor::from_slice(&out).view([choices.len() as i64, d as i64])
    }

    /// The whole mixture on one part holding every expert.
    pub fn local(&self, x: &Tensor) -> Tensor {
        let choices = self.route(x);
        let outputs = self.compute(x, &Self::assignments(&choices));
        Self::combine(&choices, &outputs, x.size()[1] as usize)
    }

    /// Parameters of the router and the held experts (what a step may read).
    pub fn numel(&self) -> (u64, u64) {
        (self.gate.numel() as u64, self.experts.iter().map(Expert::numel).sum())
    }

    /// Parameters one decode step of one token reads: the router and at most top-k of the
    /// experts held (the experts the token is routed to).
    pub fn streamed_numel(&self) -> u64 {
        let (router, experts) = self.numel();
        let held = self.held.len().max(1) as u64;
        router + experts / held * held.min(self.dims.top_k as u64)
    }
}
