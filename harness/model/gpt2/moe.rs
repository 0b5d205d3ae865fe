//! Mixture-of-experts blocks in a GPT-2-family checkpoint: the feed-forward block of every
//! layer replaced by `num_local_experts` GPT-2 MLPs and a softmax router that sends each token
//! to its `num_experts_per_tok` best experts, their outputs weighted by the router's
//! probabilities renormalised over the chosen ones (Mixtral's routing).
//!
//! Tensors (Hugging Face names, GPT-2's Conv1D `[in, out]` layout for the experts):
//! `transformer.h.{l}.mlp.gate.weight` `[experts, d]` (a Linear, `[out, in]`), and per expert
//! `transformer.h.{l}.mlp.experts.{e}.c_fc.{weight,bias}` `[d, f]`, `[f]` and
//! `...c_proj.{weight,bias}` `[f, d]`, `[d]`, with `f` = `moe_intermediate_size`.

use super::linear;
use crate::model::row::f32s;
use crate::model::weights::{Checkpoint, WeightsError};
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
    /// The mixture keys of a config.json, or None for a dense model; an error names a bad key.
    pub fn from_raw(raw: &serde_json::Value, dense_width: usize) -> Result<Option<Self>, String> {
        let Some(experts) = raw.get("num_local_experts") else { return Ok(None) };
        let count = |key: &str, v: &serde_json::Value| {
            v.as_u64().filter(|&n| n > 0).map(|n| n as usize).ok_or_else(|| format!("`{key}` must be a positive integer, found {v}"))
        };
        let experts = count("num_local_experts", experts)?;
        let top_k = raw.get("num_experts_per_tok").map_or(Ok(1), |v| count("num_experts_per_tok", v))?;
        if top_k > experts {
            return Err(format!("`num_experts_per_tok` {top_k} is more than the {experts} experts (`num_local_experts`)"));
        }
        let width = raw.get("moe_intermediate_size").map_or(Ok(dense_width), |v| count("moe_intermediate_size", v))?;
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

/// Checks the router's and every expert's shapes in layer `l`.
pub fn check_shapes(ckpt: &Checkpoint, m: &MoeDims, l: usize, d: usize) -> Result<(), WeightsError> {
    let p = |n: &str| format!("h.{l}.mlp.{n}");
    ckpt.expect_shape(&p("gate.weight"), &[m.experts, d])?;
    for e in 0..m.experts {
        ckpt.expect_shape(&p(&format!("experts.{e}.c_fc.weight")), &[d, m.width])?;
        ckpt.expect_shape(&p(&format!("experts.{e}.c_fc.bias")), &[m.width])?;
        ckpt.expect_shape(&p(&format!("experts.{e}.c_proj.weight")), &[m.width, d])?;
        ckpt.expect_shape(&p(&format!("experts.{e}.c_proj.bias")), &[d])?;
    }
    Ok(())
}

/// One expert: a GPT-2 MLP, matrices `[out, in]`.
struct Expert {
    w_fc: Tensor,
    b_fc: Tensor,
    w_proj: Tensor,
    b_proj: Tensor,
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
    gelu: &'static str,
}

impl Mixture {
    /// Loads layer `l`'s router and the experts in `held`.
    pub fn load(ckpt: &Checkpoint, dims: &MoeDims, l: usize, held: Span, gelu: &'static str) -> Result<Self, WeightsError> {
        let p = |n: String| format!("h.{l}.mlp.{n}");
        let out_in = |t: Tensor| t.tr().contiguous();
        let experts = (held.start as usize..held.end as usize)
            .map(|e| {
                let t = |n: &str| p(format!("experts.{e}.{n}"));
                Ok(Expert {
                    w_fc: out_in(ckpt.full(&t("c_fc.weight"))?),
                    b_fc: ckpt.full(&t("c_fc.bias"))?,
                    w_proj: out_in(ckpt.full(&t("c_proj.weight"))?),
                    b_proj: ckpt.full(&t("c_proj.bias"))?,
                })
            })
            .collect::<Result<Vec<_>, WeightsError>>()?;
        let bias: Vec<f32> = (0..dims.experts).map(|e| dims.bias(e) as f32).collect();
        Ok(Mixture { dims: dims.clone(), gate: ckpt.full(&p("gate.weight".into()))?, bias: Tensor::from_slice(&bias), held, experts, gelu })
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
            let y = self.expert_forward(expert, &x.index_select(0, &Tensor::from_slice(&rows))).contiguous();
            for (j, &a) in at.iter().enumerate() {
                out[a * d..(a + 1) * d].copy_from_slice(&f32s(&y)[j * d..(j + 1) * d]);
            }
        }
        out
    }

    fn expert_forward(&self, e: &Expert, rows: &Tensor) -> Tensor {
        linear(&linear(rows, &e.w_fc, Some(&e.b_fc)).gelu(self.gelu), &e.w_proj, Some(&e.b_proj))
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
        let n = |t: &Tensor| t.numel() as u64;
        let experts = self.experts.iter().map(|e| n(&e.w_fc) + n(&e.b_fc) + n(&e.w_proj) + n(&e.b_proj)).sum();
        (n(&self.gate), experts)
    }
}
