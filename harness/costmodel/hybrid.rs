//! One replica split tensor × pipeline over links that may differ hop by hop: what each
//! device holds, a decode step and round, and the prefill of one prompt. With one stage it
//! is `plan`'s tensor plan, with a tensor degree of one its pipeline plan (tests hold both).
//!
//! The same roofline as `plan`: a decode step streams its weights and KV share over memory
//! bandwidth and pays its collectives; a prefill is the larger of its arithmetic over the
//! device's peak and its weight read over memory bandwidth, per stage, plus its collectives.
//! Overlap of communication with compute and batching are not modelled.

use super::link::{allgather_time, allreduce_time, alltoall_time, p2p_time, Link};
use super::plan::{cache_bytes, streamed_block, Device};
use super::shape::ModelShape;
use crate::spec::layout::even_spans;
use serde::Serialize;

/// Everything one replica's plan depends on.
#[derive(Debug, Clone)]
pub struct ReplicaInput<'a> {
    /// The model.
    pub shape: &'a ModelShape,
    /// Bytes per weight, activation and KV value.
    pub dtype_bytes: u64,
    /// Every device of the replica.
    pub device: Device,
    /// The device's peak arithmetic rate (FLOP/s) at this dtype; None: prefill is memory time only.
    pub peak_flops: Option<f64>,
    /// Tensor degree inside each stage.
    pub tensor: u32,
    /// Pipeline stages.
    pub stages: u32,
    /// The link a tensor group's ring runs over (its slowest).
    pub tensor_link: Link,
    /// The link of each stage boundary, in order (`stages - 1` of them).
    pub hop_links: Vec<Link>,
    /// The link from the last stage back to the first (the sampled token).
    pub token_link: Link,
    /// Prompt tokens of one prefill.
    pub prompt: u64,
    /// Tokens of context a decode step reads.
    pub decode_context: u64,
    /// Tokens of context each sequence's cache holds at its longest.
    pub kv_context: u64,
    /// Sequences in flight on this replica.
    pub sequences: u32,
}

/// A replica's modelled decode and prefill.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplicaPlan {
    /// Weight bytes the most loaded device holds.
    pub stored_bytes_per_device: u64,
    /// KV cache bytes the most loaded device holds (all its sequences at `kv_context`).
    pub kv_bytes_per_device: u64,
    /// Weights and cache fit the device's memory.
    pub fits: bool,
    /// Memory time of one token of one sequence, summed over the stages (seconds).
    pub compute_s: f64,
    /// Communication of one token of one sequence (seconds).
    pub comm_s: f64,
    /// One decode step of one sequence (seconds).
    pub step_s: f64,
    /// Time in which every sequence in flight advances one token (seconds).
    pub round_s: f64,
    /// Prefill of one prompt, communication included (seconds).
    pub prefill_s: f64,
    /// The prefill's communication (seconds).
    pub prefill_comm_s: f64,
    /// True when some stage's prefill is bound by arithmetic rather than memory.
    pub prefill_compute_bound: bool,
}

/// What one stage of a tensor × pipeline replica holds and reads, per device.
struct Stage {
    layers: u64,
    stored: u64,
    streamed: u64,
    flops_per_prompt_token: u64,
    kv_per_token: u64,
    last: bool,
}

fn stages(s: &ModelShape, tensor: u32, count: u32, sb: u64) -> Vec<Stage> {
    let (b, t) = (&s.breakdown, tensor as u64);
    let spans = even_spans(s.layers as u32, count);
    let last = spans.len() - 1;
    let kv_layer = s.kv_share(t, sb).bytes_per_token_per_device / s.layers;
    let rows = s.hidden * if b.position > 0 { 2 } else { 1 };
    let head_here = if count > 1 { s.head_params() } else { b.head };
    spans
        .iter()
        .enumerate()
        .map(|(i, span)| {
            let n = span.len() as u64;
            let excess = n * s.kv_projection_excess(t);
            let mut stored = n * (b.attention_per_layer + b.mlp_per_layer) / t + excess + n * b.norms_per_layer;
            let mut streamed = n * streamed_block(s) / t + excess + n * b.norms_per_layer;
            if i == 0 {
                stored += b.embedding / t + b.position;
                streamed += rows;
            }
            if i == last {
                stored += b.final_norm + head_here / t;
                streamed += b.final_norm + s.head_params() / t;
            }
            // The key/value projections a rank computes whole past the KV heads count as its own.
            let flops_per_prompt_token = 2 * (n * streamed_block(s) / t + excess);
            Stage { layers: n, stored, streamed, flops_per_prompt_token, kv_per_token: n * kv_layer, last: i == last }
        })
        .collect()
}

/// Decode time of one stage for one token: its memory read and its tensor collectives.
fn decode_stage_s(input: &ReplicaInput, g: &Stage) -> (f64, f64) {
    let (s, sb) = (input.shape, input.dtype_bytes);
    let memory = ((g.streamed * sb) as f64 + input.decode_context as f64 * g.kv_per_token as f64) / input.device.bandwidth_bps;
    let mut comm = 2.0 * g.layers as f64 * allreduce_time(input.tensor_link, (s.hidden * sb) as f64, input.tensor);
    if g.last {
        comm += allgather_time(input.tensor_link, (s.vocab * sb) as f64, input.tensor);
    }
    (memory, comm)
}

/// Prefill of one prompt on one stage: (time, communication, bound by arithmetic).
fn prefill_stage_s(input: &ReplicaInput, g: &Stage) -> (f64, f64, bool) {
    // In floating point: a long prompt's attention (quadratic in it) passes 64 bits.
    let (s, sb, p, t) = (input.shape, input.dtype_bytes, input.prompt as f64, input.tensor as u64);
    let attention = 2.0 * (g.layers * s.heads * s.head_dim) as f64 * p * p / t as f64;
    let logits = if g.last { (2 * s.head_params() / t) as f64 } else { 0.0 };
    let flops = g.flops_per_prompt_token as f64 * p + attention + logits;
    let memory = ((g.stored * sb) as f64 + p * g.kv_per_token as f64) / input.device.bandwidth_bps;
    let arithmetic = input.peak_flops.map_or(0.0, |peak| flops / peak);
    let activation = p * (s.hidden * sb) as f64;
    let mut comm = 2.0 * g.layers as f64 * allreduce_time(input.tensor_link, activation, input.tensor);
    if g.last {
        comm += allgather_time(input.tensor_link, (s.vocab * sb) as f64, input.tensor);
    }
    (arithmetic.max(memory) + comm, comm, arithmetic > memory)
}

/// The plan of one tensor × pipeline replica.
pub fn replica_plan(input: &ReplicaInput) -> ReplicaPlan {
    let (s, sb, m) = (input.shape, input.dtype_bytes, input.sequences.max(1) as u64);
    let st = stages(s, input.tensor.max(1), input.stages.max(1), sb);
    let hop_bytes = (s.hidden * sb) as f64;
    let hops: Vec<f64> = input.hop_links.iter().map(|l| p2p_time(*l, hop_bytes)).collect();
    let token_back = if st.len() > 1 { p2p_time(input.token_link, 4.0) } else { 0.0 };
    let decode: Vec<(f64, f64)> = st.iter().map(|g| decode_stage_s(input, g)).collect();
    let compute_s: f64 = decode.iter().map(|d| d.0).sum();
    let comm_s = decode.iter().map(|d| d.1).sum::<f64>() + hops.iter().sum::<f64>() + token_back;
    let step_s = compute_s + comm_s;
    let busiest =
        decode.iter().enumerate().map(|(i, (mem, comm))| mem + comm + hops.get(i).copied().unwrap_or(token_back)).fold(0.0, f64::max);
    let round_s = if st.len() > 1 { step_s.max(m as f64 * busiest) } else { m as f64 * step_s };
    let prefill: Vec<(f64, f64, bool)> = st.iter().map(|g| prefill_stage_s(input, g)).collect();
    let prompt_hops: f64 = input.hop_links.iter().map(|l| p2p_time(*l, input.prompt as f64 * (s.hidden * sb) as f64)).sum();
    let stored = st.iter().map(|g| g.stored).max().unwrap_or(0) * sb;
    let kv = cache_bytes(m, input.kv_context, st.iter().map(|g| g.kv_per_token).max().unwrap_or(0));
    ReplicaPlan {
        stored_bytes_per_device: stored,
        kv_bytes_per_device: kv,
        fits: stored.saturating_add(kv) <= input.device.memory_bytes,
        compute_s,
        comm_s,
        step_s,
        round_s,
        prefill_s: prefill.iter().map(|p| p.0).sum::<f64>() + prompt_hops + token_back,
        prefill_comm_s: prefill.iter().map(|p| p.1).sum::<f64>() + prompt_hops + token_back,
        prefill_compute_bound: prefill.iter().any(|p| p.2),
    }
}

/// Prefill of one prompt on an expert split over `ranks` devices, attention replicated:
/// (time, communication, bound by arithmetic). Each device runs every token's attention and its
/// even share of the routed experts; two all-to-alls of the routed rows per layer.
pub fn expert_prefill(input: &ReplicaInput, ranks: u32) -> (f64, f64, bool) {
    let (s, sb, p) = (input.shape, input.dtype_bytes, input.prompt as f64);
    let (b, r) = (&s.breakdown, ranks.max(1) as u64);
    let active = s.experts.map_or(1, |e| e.active as u64);
    let flops = 2.0 * p * (s.layers * (b.attention_per_layer + active * b.expert_mlp / r)) as f64
        + 2.0 * (s.layers * s.heads * s.head_dim) as f64 * p * p
        + (2 * s.head_params()) as f64;
    let all_experts = s.experts.map_or(0, |e| e.count as u64) * b.expert_mlp * s.layers;
    let stored = s.params - all_experts + all_experts / r;
    let memory = ((stored * sb) as f64 + p * s.kv_bytes_per_token(sb) as f64) / input.device.bandwidth_bps;
    let arithmetic = input.peak_flops.map_or(0.0, |peak| flops / peak);
    let rows = p * (active * s.hidden * sb) as f64;
    let comm = 2.0 * s.layers as f64 * alltoall_time(input.tensor_link, rows, ranks);
    (arithmetic.max(memory) + comm, comm, arithmetic > memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::plan::{plan, PlanInput};
    use crate::costmodel::shape::shape_from_config;
    use crate::model::ModelConfig;
    use crate::spec::schema::Strategy;
    use serde_json::json;

    const LINK: Link = Link { alpha_s: 1e-5, beta_bps: 1e9 };
    const DEVICE: Device = Device { memory_bytes: 1 << 30, bandwidth_bps: 1e9 };

    fn llama(layers: u64, tied: bool) -> ModelShape {
        let v = json!({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": layers,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100, "tie_word_embeddings": tied});
        shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap()
    }

    fn replica(s: &ModelShape, tensor: u32, stages: u32, sequences: u32) -> ReplicaInput<'_> {
        ReplicaInput {
            shape: s,
            dtype_bytes: 2,
            device: DEVICE,
            peak_flops: None,
            tensor,
            stages,
            tensor_link: LINK,
            hop_links: vec![LINK; stages as usize - 1],
            token_link: LINK,
            prompt: 8,
            decode_context: 16,
            kv_context: 16,
            sequences,
        }
    }

    fn reference(s: &ModelShape, strategy: Strategy, world: u32, sequences: u32) -> crate::costmodel::plan::Plan {
        plan(&PlanInput { shape: s, dtype_bytes: 2, device: DEVICE, link: LINK, strategy, world, context: 16, sequences, imbalance: 1.0 })
            .unwrap()
    }

    fn same(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
    }

    #[test]
    fn one_stage_is_the_tensor_plan_and_one_way_tensor_the_pipeline_plan() {
        for tied in [false, true] {
            let s = llama(8, tied);
            for (t, pp, strategy, m) in
                [(2, 1, Strategy::Tensor, 1), (4, 1, Strategy::Tensor, 3), (1, 4, Strategy::Pipeline, 1), (1, 2, Strategy::Pipeline, 4)]
            {
                let got = replica_plan(&replica(&s, t, pp, m));
                let want = reference(&s, strategy, t * pp, m);
                assert_eq!(
                    (got.stored_bytes_per_device, got.kv_bytes_per_device),
                    (want.stored_bytes_per_device, want.kv_bytes_per_device)
                );
                for (g, w) in [(got.step_s, want.step_s), (got.round_s, want.round_s), (got.comm_s, want.comm_s)] {
                    assert!(same(g, w), "tied {tied} t{t} pp{pp}: {g} against {w}");
                }
            }
        }
    }

    #[test]
    fn a_slow_hop_costs_the_pipeline_and_not_the_tensor_groups() {
        let s = llama(8, false);
        let fast = replica_plan(&replica(&s, 2, 2, 1));
        let slow_hop = Link { alpha_s: 1e-3, beta_bps: 1e8 };
        let slow = replica_plan(&ReplicaInput { hop_links: vec![slow_hop], ..replica(&s, 2, 2, 1) });
        let extra = p2p_time(slow_hop, 128.0) - p2p_time(LINK, 128.0);
        assert!(same(slow.step_s - fast.step_s, extra), "{} {}", slow.step_s - fast.step_s, extra);
        assert_eq!(slow.compute_s, fast.compute_s);
    }

    #[test]
    fn prefill_is_arithmetic_bound_with_a_peak_and_splits_it_over_the_tensor_group() {
        let s = llama(4, false);
        let flops = Some(1e9);
        let one = replica_plan(&ReplicaInput { peak_flops: flops, prompt: 64, ..replica(&s, 1, 1, 1) });
        let two = replica_plan(&ReplicaInput { peak_flops: flops, prompt: 64, ..replica(&s, 2, 1, 1) });
        assert!(one.prefill_compute_bound && two.prefill_compute_bound);
        assert_eq!(one.prefill_comm_s, 0.0);
        let arithmetic = |p: &ReplicaPlan| p.prefill_s - p.prefill_comm_s;
        assert!(same(arithmetic(&two) * 2.0, arithmetic(&one)), "{} {}", arithmetic(&two), arithmetic(&one));
        // Without a peak the prefill is its weight and cache traffic only.
        let bare = replica_plan(&ReplicaInput { prompt: 64, ..replica(&s, 1, 1, 1) });
        assert!(!bare.prefill_compute_bound);
        assert!(same(bare.prefill_s, ((s.stored_bytes(2) + 64 * s.kv_bytes_per_token(2)) as f64) / 1e9));
    }
}
