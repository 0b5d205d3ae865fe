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
    /// Tokens per second of the whole workload: each replica serves its share of the
    /// sequences in turn (every prompt's prefill, then a round per further token), the replicas
    /// at once; a replica holding one sequence fewer than the busiest rounds faster.
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

fn replica_input<'a>(layout: &Layout, shape: &'a ModelShape, w: &Workload, m: &Machine, sequences: u32) -> ReplicaInput<'a> {
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
        sequences,
    }
}

/// How `sequences` fall on `data` replicas: (sequences a replica holds, replicas holding that
/// many), the busiest first; replicas left without a sequence are not listed.
pub fn shares(sequences: u32, data: u32) -> Vec<(u32, u32)> {
    let (each, extra) = (sequences / data, sequences % data);
    [(each + 1, extra), (each, data - extra)].into_iter().filter(|&(held, replicas)| held > 0 && replicas > 0).collect()
}

/// Tokens per second of a replica holding `held` sequences served in turn: each prompt's
/// prefill (`ttft_s`), then `new_tokens - 1` rounds of `round_s`, `held × new_tokens` tokens.
fn replica_rate(held: u32, new_tokens: u64, ttft_s: f64, round_s: f64) -> f64 {
    let tokens = held as f64 * new_tokens as f64;
    let time = held as f64 * ttft_s + (new_tokens - 1) as f64 * round_s;
    if time > 0.0 && time.is_finite() {
        tokens / time
    } else {
        0.0
    }
}

/// The prediction of `layout`: its busiest replica's, with the workload's tokens per second
/// over every replica's share.
pub fn predict(layout: &Layout, shape: &ModelShape, w: &Workload, m: &Machine) -> Prediction {
    let shares = shares(w.sequences, layout.data);
    let busiest = on_replica(layout, shape, w, m, shares.first().map_or(1, |s| s.0));
    let tokens_per_s: f64 = shares
        .iter()
        .map(|&(held, replicas)| {
            let round_s = if held == shares[0].0 { busiest.round_s } else { on_replica(layout, shape, w, m, held).round_s };
            replicas as f64 * replica_rate(held, w.new_tokens, busiest.ttft_s, round_s)
        })
        .sum();
    Prediction {
        request_s: busiest.ttft_s + (w.new_tokens - 1) as f64 * busiest.round_s,
        tokens_per_s,
        tokens_per_s_per_device: tokens_per_s / m.devices() as f64,
        ..busiest
    }
}

/// The prediction of one replica of `layout` holding `per_replica` sequences (its tokens per
/// second and request left for [`predict`]).
fn on_replica(layout: &Layout, shape: &ModelShape, w: &Workload, m: &Machine, per_replica: u32) -> Prediction {
    let input = replica_input(layout, shape, w, m, per_replica);
    if layout.expert > 1 {
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
            tokens_per_s: 0.0,
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
            tokens_per_s: 0.0,
            tokens_per_s_per_device: 0.0,
            weights_bytes_per_device: r.stored_bytes_per_device,
            kv_bytes_per_device: r.kv_bytes_per_device,
            fits: r.fits,
            prefill_compute_bound: r.prefill_compute_bound,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_fall_on_replicas_busiest_first_and_idle_replicas_are_not_listed() {
        assert_eq!(shares(5, 4), vec![(2, 1), (1, 3)]);
        assert_eq!(shares(8, 4), vec![(2, 4)]);
        assert_eq!(shares(1, 4), vec![(1, 1)]);
        assert_eq!(shares(3, 1), vec![(3, 1)]);
        assert_eq!(replica_rate(2, 1, 0.5, 9.0), 2.0, "one token each: the prefills alone");
        assert_eq!(replica_rate(1, 3, 1.0, 0.5), 1.5, "3 tokens in 1 + 2 x 0.5 s");
        assert_eq!(replica_rate(1, 3, 1.0, f64::INFINITY), 0.0, "an unpredictable round");
    }
}
