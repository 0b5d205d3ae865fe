//! The cost model's prediction of one layout for one workload on one machine: the decode
//! step, the time to first token, a whole request, and tokens per second per device.

use super::layouts::Layout;
use super::request::{Machine, Objective, Workload};
use crate::costmodel::hybrid::{expert_prefill, replica_plan, ReplicaInput};
use crate::costmodel::plan::{plan, PlanInput};
use crate::costmodel::shape::ModelShape;
use crate::spec::schema::Strategy;
use serde::Serialize;

/// What the cost model predicts for one layout (SI units in the names).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// One decode step of one sequence at the answer's mean context.
    pub step_s: f64,
    /// The step's communication.
    pub step_comm_s: f64,
    /// One decode round: every sequence a replica holds advances a token (they are served in
    /// turn, so this is how long each of them waits per token).
    pub round_s: f64,
    /// Prefill of one prompt: the first token.
    pub ttft_s: f64,
    /// One request among the workload's: its prefill alone, then a decode round per further
    /// token of its answer (a step where it is the replica's only sequence).
    pub request_s: f64,
    /// Tokens per second over every sequence in flight.
    pub tokens_per_s: f64,
    /// The same over the machine's devices.
    pub tokens_per_s_per_device: f64,
    /// Weight bytes on the most loaded device.
    pub weights_bytes_per_device: u64,
    /// KV cache bytes on the most loaded device at the end of the answers.
    pub kv_bytes_per_device: u64,
    /// Weights and cache fit the device.
    pub fits: bool,
    /// The prefill is bound by the device's arithmetic (false: by memory, or no peak is known).
    pub prefill_compute_bound: bool,
}

impl Prediction {
    /// The figure `objective` ranks by, smaller is better.
    pub fn cost(&self, objective: Objective) -> f64 {
        match objective {
            Objective::Latency => self.request_s,
            Objective::Ttft => self.ttft_s,
            Objective::Throughput => 1.0 / self.tokens_per_s,
        }
    }
}

fn replica_input<'a>(layout: &Layout, shape: &'a ModelShape, w: &Workload, m: &Machine) -> ReplicaInput<'a> {
    let (t, stages) = (layout.tensor.max(layout.expert), layout.pipeline);
    let hop = |k: u32| m.link(m.domain_between(k * t, (k + 1) * t));
    ReplicaInput {
        shape,
        dtype_bytes: w.dtype.bytes(),
        device: m.cost_device(),
        peak_flops: m.device.peak_flops(w.dtype),
        tensor: layout.tensor,
        stages,
        tensor_link: m.group_link(t),
        hop_links: (0..stages - 1).map(hop).collect(),
        token_link: m.link(m.domain_between(0, (stages - 1) * t)),
        prompt: w.prompt,
        decode_context: w.mean_decode_context(),
        kv_context: w.final_context(),
        sequences: w.sequences.div_ceil(layout.data),
    }
}

fn finish(w: &Workload, m: &Machine, p: Prediction) -> Prediction {
    Prediction {
        request_s: p.ttft_s + (w.new_tokens - 1) as f64 * p.round_s,
        tokens_per_s_per_device: p.tokens_per_s / m.devices() as f64,
        ..p
    }
}

/// The prediction of `layout`.
pub fn predict(layout: &Layout, shape: &ModelShape, w: &Workload, m: &Machine) -> Prediction {
    let input = replica_input(layout, shape, w, m);
    let per_replica = input.sequences;
    let sequences = w.sequences as f64;
    let p = if layout.expert > 1 {
        let at = |context| {
            let pi = PlanInput {
                shape,
                dtype_bytes: input.dtype_bytes,
                device: input.device,
                link: input.tensor_link,
                strategy: Strategy::Expert,
                world: layout.expert,
                context,
                sequences: per_replica,
                imbalance: 1.0,
            };
            plan(&pi).ok()
        };
        let (Some(step), Some(end)) = (at(input.decode_context), at(input.kv_context)) else {
            return unpredictable();
        };
        let (ttft_s, _, bound) = expert_prefill(&input, layout.expert);
        Prediction {
            step_s: step.step_s,
            step_comm_s: step.comm_s,
            round_s: step.round_s,
            ttft_s,
            request_s: 0.0,
            tokens_per_s: sequences / step.round_s,
            tokens_per_s_per_device: 0.0,
            weights_bytes_per_device: end.stored_bytes_per_device,
            kv_bytes_per_device: end.kv_bytes_per_device,
            fits: end.fits,
            prefill_compute_bound: bound,
        }
    } else {
        let r = replica_plan(&input);
        Prediction {
            step_s: r.step_s,
            step_comm_s: r.comm_s,
            round_s: r.round_s,
            ttft_s: r.prefill_s,
            request_s: 0.0,
            tokens_per_s: sequences / r.round_s,
            tokens_per_s_per_device: 0.0,
            weights_bytes_per_device: r.stored_bytes_per_device,
            kv_bytes_per_device: r.kv_bytes_per_device,
            fits: r.fits,
            prefill_compute_bound: r.prefill_compute_bound,
        }
    };
    finish(w, m, p)
}

fn unpredictable() -> Prediction {
    Prediction {
        step_s: f64::INFINITY,
        step_comm_s: f64::INFINITY,
        round_s: f64::INFINITY,
        ttft_s: f64::INFINITY,
        request_s: f64::INFINITY,
        tokens_per_s: 0.0,
        tokens_per_s_per_device: 0.0,
        weights_bytes_per_device: 0,
        kv_bytes_per_device: 0,
        fits: false,
        prefill_compute_bound: false,
    }
}
