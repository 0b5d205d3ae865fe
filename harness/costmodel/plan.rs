//! Per-strategy decode plans: does the model fit, how long is a step (streamed bytes over
//! memory bandwidth, plus the KV share, plus communication), tokens per second with m
//! sequences in flight, traffic and collectives per token; and the break-even latency of
//! an all-reduce, the pipeline round and the bubble.
//!
//! The model is a roofline of memory-bound decode. It ignores overlap of communication
//! with compute, batching (sequences in flight are served in turn), activations and
//! workspace memory, and the sampling step.

use super::link::{allgather_time, allreduce_time, allreduce_wire_bytes, alltoall_time, p2p_time, wire_bytes_per_rank, Link};
use super::shape::ModelShape;
use crate::spec::layout::even_spans;
use crate::spec::schema::{Op, Strategy};
use serde::Serialize;

/// A device: memory capacity and memory bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Device {
    /// Capacity in bytes.
    pub memory_bytes: u64,
    /// Memory bandwidth in bytes per second.
    pub bandwidth_bps: f64,
}

/// Everything one plan depends on.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    /// The model.
    pub shape: &'a ModelShape,
    /// Bytes per weight, activation and KV value.
    pub dtype_bytes: u64,
    /// The device (every rank has one).
    pub device: Device,
    /// The link between devices.
    pub link: Link,
    /// The strategy.
    pub strategy: Strategy,
    /// Devices.
    pub world: u32,
    /// Tokens of context whose KV cache a step reads.
    pub context: u64,
    /// Sequences in flight.
    pub sequences: u32,
    /// Expert routing imbalance: the busiest device's routed tokens over the mean (1: even).
    pub imbalance: f64,
}

/// The modelled decode of one model under one strategy.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Weight bytes the most loaded device holds.
    pub stored_bytes_per_device: u64,
    /// KV cache bytes the most loaded device holds (all its sequences at full context).
    pub kv_bytes_per_device: u64,
    /// Weights and cache fit the device's memory.
    pub fits: bool,
    /// Memory time of one token of one sequence, summed along its path (seconds).
    pub compute_s: f64,
    /// Communication of one token of one sequence (seconds).
    pub comm_s: f64,
    /// Time of one token of one sequence: compute plus communication.
    pub step_s: f64,
    /// Time in which every sequence in flight advances one token.
    pub round_s: f64,
    /// Tokens per second over all sequences.
    pub tokens_per_s: f64,
    /// Collectives (or messages, for the pipeline) per token.
    pub collectives_per_token: u64,
    /// Bytes one rank puts on the wire per token.
    pub wire_bytes_per_token: f64,
}

/// Time per token of one sequence on one device holding the whole model.
pub fn single_device_step_s(shape: &ModelShape, dtype_bytes: u64, context: u64, bandwidth_bps: f64) -> f64 {
    (shape.streamed_bytes(dtype_bytes) as f64 + context as f64 * shape.kv_bytes_per_token(dtype_bytes) as f64) / bandwidth_bps
}

/// The largest all-reduce time at which tensor parallelism over `world` devices still
/// beats one device: T1 (1 - 1/p) / (2L), ignoring the final gather.
pub fn tp_break_even_allreduce_s(t1_s: f64, world: u32, layers: u64) -> f64 {
    t1_s * (1.0 - 1.0 / world as f64) / (2.0 * layers as f64)
}

/// Equation 1.4.7: α* = M_w / (4 L B_mem), the break-even of TP=2 from the weight bytes.
pub fn alpha_star_tp2(weight_bytes: f64, layers: u64, bandwidth_bps: f64) -> f64 {
    weight_bytes / (4.0 * layers as f64 * bandwidth_bps)
}

/// A decode round of `sequences` over `stages` equal stages: max(m, p) stage-times.
pub fn pipeline_round_time(sequences: u32, stages: u32, stage_s: f64) -> f64 {
    sequences.max(stages) as f64 * stage_s
}

/// GPipe's bubble: (P - 1) / (M + P - 1) for P stages and M micro-batches.
pub fn bubble_fraction(stages: u32, microbatches: u32) -> f64 {
    (stages as f64 - 1.0) / (microbatches as f64 + stages as f64 - 1.0)
}

/// Tensor parallelism's all-reduce wire bytes per rank per token: 2 per layer, each 2(p-1)/p · d·s.
pub fn tp_wire_bytes_per_token(hidden: u64, layers: u64, world: u32, dtype_bytes: u64) -> f64 {
    2.0 * layers as f64 * allreduce_wire_bytes((hidden * dtype_bytes) as f64, world)
}

/// Pipeline parallelism's activation bytes per token: one d·s vector per stage boundary.
pub fn pp_bytes_per_token(hidden: u64, stages: u32, dtype_bytes: u64) -> u64 {
    stages.saturating_sub(1) as u64 * hidden * dtype_bytes
}

/// Why a strategy over a number of devices cannot run a model in the decode cost model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanProblem {
    /// No devices or no sequences.
    #[error("world and sequences must be at least 1")]
    Empty,
    /// The model's heads or widths do not split over the devices (the shape's reason).
    #[error("{0}")]
    TensorSplit(String),
    /// Fewer layers than pipeline stages.
    #[error("{layers} layers do not fill {stages} stages")]
    TooFewLayers {
        /// The model's layers.
        layers: u64,
        /// The stages asked for.
        stages: u64,
    },
    /// Context parallelism splits a prefill, not a decode step.
    #[error("context parallelism splits a prompt's prefill; a decode step has one token to split")]
    ContextIsPrefill,
    /// An expert split of a model without experts.
    #[error("dense model: no experts to place")]
    DenseModel,
    /// The experts do not divide among the devices.
    #[error("{experts} experts do not split over {devices} devices")]
    ExpertsDoNotSplit {
        /// Experts per layer.
        experts: u32,
        /// Devices.
        devices: u64,
    },
}

/// Why `strategy` over `world` devices cannot run this model, if it cannot.
pub fn plan_problem(input: &PlanInput) -> Option<PlanProblem> {
    let (s, p) = (input.shape, input.world as u64);
    if input.world == 0 || input.sequences == 0 {
        return Some(PlanProblem::Empty);
    }
    if input.world == 1 {
        return None;
    }
    match input.strategy {
        Strategy::Data => None,
        Strategy::Tensor => s.tensor_split_problem(p).map(PlanProblem::TensorSplit),
        Strategy::Pipeline => (p > s.layers).then_some(PlanProblem::TooFewLayers { layers: s.layers, stages: p }),
        Strategy::Context => Some(PlanProblem::ContextIsPrefill),
        Strategy::Expert => match s.experts {
            None => Some(PlanProblem::DenseModel),
            Some(e) if !(e.count as u64).is_multiple_of(p) => Some(PlanProblem::ExpertsDoNotSplit { experts: e.count, devices: p }),
            Some(_) => None,
        },
    }
}

/// The plan of `input`, or why it cannot run.
pub fn plan(input: &PlanInput) -> Result<Plan, PlanProblem> {
    if let Some(problem) = plan_problem(input) {
        return Err(problem);
    }
    Ok(match (input.world, input.strategy) {
        (1, _) | (_, Strategy::Data) => data_plan(input),
        (_, Strategy::Tensor) => tensor_plan(input),
        (_, Strategy::Pipeline) => pipeline_plan(input),
        (_, Strategy::Expert) => expert_plan(input),
        (_, Strategy::Context) => return Err(PlanProblem::ContextIsPrefill),
    })
}

struct Parts {
    stored: u64,
    kv: u64,
    compute_s: f64,
    comm_s: f64,
    round_s: f64,
    collectives: u64,
    wire: f64,
}

/// The KV cache of `sequences` at `context` tokens of `per_token` bytes each, saturating at
/// `u64::MAX`: a cache past the largest byte count fits no device (it must not wrap to one that does).
pub(crate) fn cache_bytes(sequences: u64, context: u64, per_token: u64) -> u64 {
    sequences.saturating_mul(context).saturating_mul(per_token)
}

fn finish(input: &PlanInput, p: Parts) -> Plan {
    let step_s = p.compute_s + p.comm_s;
    Plan {
        stored_bytes_per_device: p.stored,
        kv_bytes_per_device: p.kv,
        fits: p.stored.saturating_add(p.kv) <= input.device.memory_bytes,
        compute_s: p.compute_s,
        comm_s: p.comm_s,
        step_s,
        round_s: p.round_s,
        tokens_per_s: input.sequences as f64 / p.round_s,
        collectives_per_token: p.collectives,
        wire_bytes_per_token: p.wire,
    }
}

fn data_plan(input: &PlanInput) -> Plan {
    let s = input.shape;
    let per_replica = input.sequences.div_ceil(input.world) as u64;
    let t1 = single_device_step_s(s, input.dtype_bytes, input.context, input.device.bandwidth_bps);
    finish(
        input,
        Parts {
            stored: s.stored_bytes(input.dtype_bytes),
            kv: cache_bytes(per_replica, input.context, s.kv_bytes_per_token(input.dtype_bytes)),
            compute_s: t1,
            comm_s: 0.0,
            round_s: per_replica as f64 * t1,
            collectives: 0,
            wire: 0.0,
        },
    )
}

/// Streamed values of one block for one token (only the routed experts of a mixture).
pub(crate) fn streamed_block(s: &ModelShape) -> u64 {
    let b = &s.breakdown;
    let idle = s.experts.map_or(0, |e| (e.count - e.active) as u64 * b.expert_mlp);
    b.attention_per_layer + b.mlp_per_layer - idle
}

/// Per device, a split whose devices all work on every token (tensor, expert): values held and
/// streamed per token (not bytes), KV bytes per token of context, and its communication per token.
struct Lockstep {
    stored: u64,
    streamed: u64,
    kv_per_token: u64,
    comm_s: f64,
    collectives: u64,
    wire: f64,
}

/// The plan of a lockstep split: a step is its memory time plus its communication, the
/// sequences in flight take their steps in turn, and every device holds every sequence's cache.
fn lockstep_plan(input: &PlanInput, l: Lockstep) -> Plan {
    let sb = input.dtype_bytes;
    let compute_s = ((l.streamed * sb) as f64 + input.context as f64 * l.kv_per_token as f64) / input.device.bandwidth_bps;
    finish(
        input,
        Parts {
            stored: l.stored * sb,
            kv: cache_bytes(input.sequences as u64, input.context, l.kv_per_token),
            compute_s,
            comm_s: l.comm_s,
            round_s: input.sequences as f64 * (compute_s + l.comm_s),
            collectives: l.collectives,
            wire: l.wire,
        },
    )
}

fn tensor_plan(input: &PlanInput) -> Plan {
    let (s, sb, p) = (input.shape, input.dtype_bytes, input.world as u64);
    let b = &s.breakdown;
    let split_blocks = s.layers * ((b.attention_per_layer + b.mlp_per_layer) / p + s.kv_projection_excess(p));
    let replicated = s.layers * b.norms_per_layer + b.final_norm + b.position;
    let stored = split_blocks + replicated + b.embedding / p + b.head / p;
    let rows = s.hidden * if b.position > 0 { 2 } else { 1 };
    let streamed = s.layers * (streamed_block(s) / p + s.kv_projection_excess(p))
        + s.layers * b.norms_per_layer
        + b.final_norm
        + s.head_params() / p
        + rows;
    let activation = (s.hidden * sb) as f64;
    let logits = (s.vocab * sb) as f64;
    let comm_s =
        2.0 * s.layers as f64 * allreduce_time(input.link, activation, input.world) + allgather_time(input.link, logits, input.world);
    let wire = tp_wire_bytes_per_token(s.hidden, s.layers, input.world, sb) + wire_bytes_per_rank(Op::AllGather, logits, input.world);
    lockstep_plan(
        input,
        Lockstep {
            stored,
            streamed,
            kv_per_token: s.kv_share(p, sb).bytes_per_token_per_device,
            comm_s,
            collectives: s.tensor_all_reduces_per_token() + 1,
            wire,
        },
    )
}

/// One pipeline stage: values it holds and streams, and KV bytes per token of context.
struct Stage {
    stored: u64,
    streamed: u64,
    kv_per_token: u64,
}

fn stages(s: &ModelShape, world: u32, sb: u64) -> Vec<Stage> {
    let b = &s.breakdown;
    let spans = even_spans(s.layers as u32, world);
    let last = spans.len() - 1;
    let kv_layer = s.kv_bytes_per_token(sb) / s.layers;
    let rows = s.hidden * if b.position > 0 { 2 } else { 1 };
    spans
        .iter()
        .enumerate()
        .map(|(i, span)| {
            let n = span.len() as u64;
            let mut stored = n * s.per_layer();
            let mut streamed = n * (streamed_block(s) + b.norms_per_layer);
            if i == 0 {
                stored += b.embedding + b.position;
                streamed += rows;
            }
            if i == last {
                stored += b.final_norm + s.head_params();
                streamed += b.final_norm + s.head_params();
            }
            Stage { stored, streamed, kv_per_token: n * kv_layer }
        })
        .collect()
}

fn pipeline_plan(input: &PlanInput) -> Plan {
    let (s, sb, m) = (input.shape, input.dtype_bytes, input.sequences as u64);
    let st = stages(s, input.world, sb);
    let bw = input.device.bandwidth_bps;
    let times: Vec<f64> = st.iter().map(|g| ((g.streamed * sb) as f64 + input.context as f64 * g.kv_per_token as f64) / bw).collect();
    let hop = p2p_time(input.link, (s.hidden * sb) as f64);
    let token_back = p2p_time(input.link, 4.0);
    let boundaries = (input.world - 1) as f64;
    let compute_s: f64 = times.iter().sum();
    let comm_s = boundaries * hop + token_back;
    let busiest = times.iter().enumerate().map(|(i, t)| t + if i + 1 < times.len() { hop } else { token_back }).fold(0.0, f64::max);
    let stored = st.iter().map(|g| g.stored).max().unwrap_or(0) * sb;
    let kv = cache_bytes(m, input.context, st.iter().map(|g| g.kv_per_token).max().unwrap_or(0));
    finish(
        input,
        Parts {
            stored,
            kv,
            compute_s,
            comm_s,
            round_s: (compute_s + comm_s).max(m as f64 * busiest),
            collectives: input.world as u64,
            wire: (pp_bytes_per_token(s.hidden, input.world, sb) + 4) as f64,
        },
    )
}

fn expert_plan(input: &PlanInput) -> Plan {
    let (s, sb, p) = (input.shape, input.dtype_bytes, input.world as u64);
    let b = &s.breakdown;
    let e = s.experts.expect("expert plans need experts");
    let all_experts = e.count as u64 * b.expert_mlp;
    let stored = s.params - s.layers * all_experts + s.layers * all_experts / p;
    // The busiest device streams `imbalance` times its even share of the routed experts (at
    // least one, at most the token's k and the experts it holds) and receives as many rows.
    let even_share = e.active as f64 / p as f64;
    let routed_here = ((even_share * input.imbalance).ceil() as u64).clamp(1, (e.active as u64).min(e.count as u64 / p));
    let streamed = s.streamed_params() - s.layers * (e.active as u64 - routed_here) * b.expert_mlp;
    let dispatch = (e.active as u64 * s.hidden * sb) as f64 * input.imbalance;
    lockstep_plan(
        input,
        Lockstep {
            stored,
            streamed,
            kv_per_token: s.kv_bytes_per_token(sb),
            comm_s: 2.0 * s.layers as f64 * alltoall_time(input.link, dispatch, input.world),
            collectives: 2 * s.layers,
            wire: 2.0 * s.layers as f64 * wire_bytes_per_rank(Op::AllToAll, dispatch, input.world),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::costmodel::shape::shape_from_config;
    use crate::model::ModelConfig;
    use serde_json::json;

    fn llama(layers: u64) -> ModelShape {
        let v = json!({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": layers,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100});
        shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap()
    }

    fn input(shape: &ModelShape, strategy: Strategy, world: u32, sequences: u32) -> PlanInput<'_> {
        PlanInput {
            shape,
            dtype_bytes: 2,
            device: Device { memory_bytes: 1 << 30, bandwidth_bps: 1e9 },
            link: Link { alpha_s: 1e-5, beta_bps: 1e9 },
            strategy,
            world,
            context: 16,
            sequences,
            imbalance: 1.0,
        }
    }

    #[test]
    fn a_cache_past_64_bits_saturates_and_does_not_fit_instead_of_wrapping() {
        // Llama-3.1-8B's cache: 128 KiB per token; 2^32 - 1 tokens × 65,536 sequences pass 2^64 bytes.
        let v = json!({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256});
        let s = shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap();
        for strategy in [Strategy::Data, Strategy::Tensor, Strategy::Pipeline] {
            let p = plan(&PlanInput { context: u64::from(u32::MAX), ..input(&s, strategy, 1, 65_536) }).unwrap();
            assert_eq!((p.kv_bytes_per_device, p.fits), (u64::MAX, false), "{strategy:?}");
            assert!(p.step_s.is_finite() && p.step_s > 100.0, "{strategy:?}: {}", p.step_s);
        }
    }

    #[test]
    fn bubbles_of_four_stages() {
        let got: Vec<String> = [1, 4, 16, 64].iter().map(|&m| format!("{:.1}", 100.0 * bubble_fraction(4, m))).collect();
        assert_eq!(got, ["75.0", "42.9", "15.8", "4.5"]);
    }

    #[test]
    fn pipeline_round_is_max_of_sequences_and_stages() {
        assert_eq!(pipeline_round_time(1, 4, 1.0), 4.0);
        assert_eq!(pipeline_round_time(8, 4, 1.0), 8.0);
    }

    #[test]
    fn seventy_b_traffic_per_token() {
        // The parallelism page's table: d=8192, L=80, bf16.
        let tp: Vec<String> = [2, 4, 8].iter().map(|&p| format!("{:.1}", tp_wire_bytes_per_token(8192, 80, p, 2) / 1e6)).collect();
        assert_eq!(tp, ["2.6", "3.9", "4.6"]);
        let pp: Vec<String> = [2, 4].iter().map(|&p| format!("{:.1}", pp_bytes_per_token(8192, p, 2) as f64 / 1e3)).collect();
        assert_eq!(pp, ["16.4", "49.2"]);
    }

    #[test]
    fn single_device_is_the_same_under_every_strategy() {
        let s = llama(4);
        let base = plan(&input(&s, Strategy::Data, 1, 1)).unwrap();
        for st in [Strategy::Tensor, Strategy::Pipeline] {
            assert_eq!(plan(&input(&s, st, 1, 1)).unwrap(), base);
        }
        assert_eq!(base.comm_s, 0.0);
        let expected = (s.streamed_bytes(2) + 16 * s.kv_bytes_per_token(2)) as f64 / 1e9;
        assert!((base.step_s - expected).abs() < 1e-15);
    }

    #[test]
    fn tensor_split_halves_the_streamed_blocks_and_pays_collectives() {
        let s = llama(4);
        let one = plan(&input(&s, Strategy::Data, 1, 1)).unwrap();
        let two = plan(&input(&s, Strategy::Tensor, 2, 1)).unwrap();
        assert!(two.compute_s < one.compute_s * 0.51 + 1e-9);
        assert_eq!(two.collectives_per_token, 2 * 4 + 1);
        let expected_comm = 8.0 * allreduce_time(Link { alpha_s: 1e-5, beta_bps: 1e9 }, 128.0, 2)
            + allgather_time(Link { alpha_s: 1e-5, beta_bps: 1e9 }, 200.0, 2);
        assert!((two.comm_s - expected_comm).abs() < 1e-15);
        assert!(matches!(plan(&input(&s, Strategy::Tensor, 3, 1)), Err(PlanProblem::TensorSplit(why)) if why.contains("heads")));
    }

    #[test]
    fn pipeline_needs_sequences_to_gain_throughput() {
        let s = llama(8);
        let one = plan(&input(&s, Strategy::Data, 1, 1)).unwrap();
        let pp1 = plan(&input(&s, Strategy::Pipeline, 4, 1)).unwrap();
        let pp4 = plan(&input(&s, Strategy::Pipeline, 4, 4)).unwrap();
        assert!(pp1.tokens_per_s <= one.tokens_per_s);
        assert!(pp4.tokens_per_s > 1.5 * pp1.tokens_per_s);
        assert!(pp1.stored_bytes_per_device < one.stored_bytes_per_device);
        assert_eq!(plan(&input(&s, Strategy::Pipeline, 16, 1)).unwrap_err(), PlanProblem::TooFewLayers { layers: s.layers, stages: 16 });
    }

    #[test]
    fn expert_strategy_refuses_dense_models() {
        let s = llama(2);
        assert_eq!(plan(&input(&s, Strategy::Expert, 2, 1)).unwrap_err(), PlanProblem::DenseModel);
        assert_eq!(PlanProblem::DenseModel.to_string(), "dense model: no experts to place");
    }

    #[test]
    fn routing_imbalance_slows_the_busiest_expert_device() {
        let v = json!({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100, "num_local_experts": 8, "num_experts_per_tok": 2});
        let s = shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap();
        let even = plan(&input(&s, Strategy::Expert, 4, 1)).unwrap();
        let skewed = plan(&PlanInput { imbalance: 4.0, ..input(&s, Strategy::Expert, 4, 1) }).unwrap();
        // Top-2 over 4 devices: half an expert each when even (one streamed), two on the busiest at 4x.
        let expert_bytes = (2 * s.breakdown.expert_mlp * s.layers) as f64;
        assert!((skewed.compute_s - even.compute_s - expert_bytes / 1e9).abs() < 1e-12, "{} {}", skewed.compute_s, even.compute_s);
        assert!(skewed.comm_s > even.comm_s);
        // No device gets more than the token's k experts, whatever the imbalance.
        let extreme = plan(&PlanInput { imbalance: 64.0, ..input(&s, Strategy::Expert, 4, 1) }).unwrap();
        assert_eq!(extreme.compute_s, skewed.compute_s);
    }

    #[test]
    fn break_even_matches_equation_1_4_7_at_two_devices() {
        let t1 = 16.06e9 / 1.5e12;
        let a = tp_break_even_allreduce_s(t1, 2, 32);
        let b = alpha_star_tp2(16.06e9, 32, 1.5e12);
        assert!((a - b).abs() < 1e-15);
        assert_eq!((b * 1e6).round(), 84.0);
    }
}
