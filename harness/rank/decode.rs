//! The `decode` workload inside a rank: GPT-2 split by heads and width (tensor), by
//! layers (pipeline), or replicated (data), decoding greedily with every step timed and
//! the answer checked against the unsplit model's.

use super::comm::Communicator;
use super::decode_engine::{Engine, Link, RepResult};
use super::figure::{ExpertPart, Figure};
use super::records::RecordSink;
use super::replay::ReplayedStep;
use crate::manifest::answer::Exactness;
use crate::manifest::summary::Phase;
use crate::model::matvec::Kernel;
use crate::model::part::DecoderPart;
use crate::model::placement::Placement;
use crate::model::source;
use crate::spec::schema::{Dtype, StepMode};
use crate::spec::RunPlan;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What one rank reports about its answer, in `answer-rank<N>.json`. Read only by the
/// controller of the same run; a field it does not know fails the read (a controller older
/// than its ranks' binary), instead of being dropped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RankAnswer {
    /// The rank.
    pub rank: u32,
    /// What this rank generated, when it produced logits (a rank without the output head's
    /// last stage produces none).
    pub generated: Option<Generated>,
    /// Collectives (all-reduce + all-gather) per decode step of one sequence, checked on every step (tensor).
    pub collectives_per_step: Option<u64>,
    /// Weight bytes this rank reads per decode step of one sequence.
    pub streamed_bytes: u64,
    /// Bytes of keys and values this rank's cache stores per token of one sequence.
    pub kv_cache_bytes_per_token: u64,
    /// Sequences this rank decoded in flight.
    pub sequences: u32,
    /// Tokens generated per sequence.
    pub new_tokens: u32,
    /// Prompt length.
    pub prompt_tokens: u32,
    /// Where this rank computed, and what ran there.
    pub computed_on: ComputedOn,
}

/// Where a rank computed: the host's cores or a CUDA device, with what only that place has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum ComputedOn {
    /// The host's cores.
    Host {
        /// The element type of weights, cache and activations.
        dtype: Dtype,
        /// parlab's row kernel, where one float32 row took it (None: libtorch's operations
        /// computed every step).
        row_kernel: Option<Kernel>,
        /// The SIMD features this rank's CPU reports (`model::matvec::cpu_features`).
        cpu_features: Vec<String>,
    },
    /// A CUDA device.
    Cuda {
        /// The device's ordinal among those this rank sees.
        ordinal: u32,
        /// The element type of weights, cache and activations.
        dtype: Dtype,
        /// Ranks of this host that shared the GPU (1: a GPU to itself).
        shared_by: u32,
        /// What the step's captured CUDA graph holds (a `step: graph` run; None when eager).
        graph_nodes: Option<crate::cuda_graph::GraphNodes>,
    },
}

impl ComputedOn {
    /// The GPU in words (`cuda:0 bfloat16`), None on the host.
    pub fn gpu(&self) -> Option<String> {
        match self {
            ComputedOn::Host { .. } => None,
            ComputedOn::Cuda { ordinal, dtype, .. } => Some(format!("cuda:{ordinal} {}", dtype.name())),
        }
    }

    /// Ranks that shared this rank's GPU (1 on the host).
    pub fn shared_by(&self) -> u32 {
        match self {
            ComputedOn::Host { .. } => 1,
            ComputedOn::Cuda { shared_by, .. } => *shared_by,
        }
    }

    /// parlab's row kernel, where the rank computed float32 rows on the host with one.
    pub fn row_kernel(&self) -> Option<Kernel> {
        match self {
            ComputedOn::Host { row_kernel, .. } => *row_kernel,
            ComputedOn::Cuda { .. } => None,
        }
    }

    /// The SIMD features of the rank's CPU, where it computed on the host (none on a GPU).
    pub fn cpu_features(&self) -> &[String] {
        match self {
            ComputedOn::Host { cpu_features, .. } => cpu_features,
            ComputedOn::Cuda { .. } => &[],
        }
    }

    /// What the rank's captured CUDA graph held (None for an eager step or the host).
    pub fn graph_nodes(&self) -> Option<crate::cuda_graph::GraphNodes> {
        match self {
            ComputedOn::Cuda { graph_nodes, .. } => *graph_nodes,
            ComputedOn::Host { .. } => None,
        }
    }
}

/// The tokens and exactness of a rank that produced logits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generated {
    /// Generated tokens per sequence (last repetition).
    pub tokens: Vec<Vec<u32>>,
    /// Exactness over every sequence and repetition.
    pub exactness: Exactness,
}

/// The answer file of `rank` in `out`.
pub fn answer_path(out: &Path, rank: u32) -> PathBuf {
    out.join(format!("answer-rank{rank}.json"))
}

/// Makes what a decode run needs before launch: the seeded checkpoint and the unsplit reference answer.
pub fn prepare(plan: &RunPlan) -> anyhow::Result<()> {
    crate::model::matvec::configured()?;
    source::reference_for(plan).map(|_| ())
}

/// Runs this rank's part of a `decode` plan.
pub fn run(plan: &RunPlan, comm: &mut Communicator, out: &Path) -> anyhow::Result<()> {
    tch::set_num_threads(plan.threads_per_rank.max(1) as i32);
    crate::model::matvec::set_threads(plan.threads_per_rank.max(1) as usize);
    let kernel = crate::model::matvec::configured()?;
    let model = source::model_of(plan)?;
    let cfg = source::weights_config(model)?;
    let (prompt, new_tokens) = source::decode_params(plan)?;
    let prompt = source::prompt_ids(prompt, cfg.vocab)?;
    let rank = comm.rank();
    let share = plan.layout.ranks.get(rank as usize).ok_or_else(|| anyhow::anyhow!("the layout has no rank {rank}"))?;
    let placement = super::device::placement(plan)?;
    let skew = source::routing_skew(plan);
    let part = source::load_part_on(model, &cfg, Some(share), skew, placement)?;
    let decode_part = match plan.layout.decode.as_ref().map(|d| d.ranks.get(rank as usize)) {
        Some(Some(s)) => Some(source::load_part_on(model, &cfg, Some(s), skew, placement)?),
        Some(None) => anyhow::bail!("the decode split has no rank {rank}"),
        None => None,
    };
    let rounds_part = decode_part.as_deref().unwrap_or(part.as_ref());
    let reference = if rounds_part.has_head() { Some(source::reference_for(plan)?) } else { None };
    let engine = Engine::new(plan, part.as_ref(), decode_part.as_deref(), prompt, new_tokens, reference.as_ref());
    let mut replayed = replayed_step(plan, part.as_ref(), engine.prompt.len() + new_tokens)?;
    let mut link = Link::new(plan, comm);
    let mut sink = RecordSink::open(out, rank)?;
    let mut last: Option<RepResult> = None;
    let mut exact: Option<Exactness> = None;
    let mut collectives = None;
    for rep in 0..plan.warmup + plan.repetitions {
        link.comm.barrier();
        let result = match replayed.as_mut() {
            Some(step) => step
                .decode(&engine.prompt, new_tokens, reference.as_ref())
                .with_context(|| format!("{}: replaying the captured step (repetition {rep})", plan.label()))?,
            None => engine.run_once(&mut link)?,
        };
        match (&mut exact, &result.exactness) {
            (None, Some(e)) => exact = Some(e.clone()),
            (Some(x), Some(e)) => x.merge(e),
            _ => {}
        }
        collectives = collectives.or(result.collectives_per_step);
        if rep >= plan.warmup {
            record(&mut sink, rep - plan.warmup, &result)?;
        }
        last = Some(result);
    }
    sink.flush()?;
    let answer = RankAnswer {
        rank,
        generated: exact.zip(last.filter(|r| r.exactness.is_some())).map(|(exactness, r)| Generated { tokens: r.tokens, exactness }),
        collectives_per_step: collectives,
        streamed_bytes: rounds_part.streamed_bytes(),
        kv_cache_bytes_per_token: rounds_part.kv_cache_bytes_per_token(),
        sequences: engine.sequences as u32,
        new_tokens: new_tokens as u32,
        prompt_tokens: engine.prompt.len() as u32,
        computed_on: computed_on(plan, &placement, kernel, link.comm, replayed.as_ref())?,
    };
    crate::manifest::write_atomic(&answer_path(out, rank), serde_json::to_string_pretty(&answer)?.as_bytes())?;
    Ok(())
}

/// Where this rank computed, for its answer. On a GPU every rank must call it (the ranks of a
/// host tell which of them shared a GPU).
fn computed_on(
    plan: &RunPlan,
    placement: &Placement,
    kernel: Kernel,
    comm: &Communicator,
    replayed: Option<&ReplayedStep>,
) -> anyhow::Result<ComputedOn> {
    let dtype = source::dtype(plan);
    Ok(match placement.device {
        tch::Device::Cuda(ordinal) => ComputedOn::Cuda {
            ordinal: ordinal as u32,
            dtype,
            shared_by: super::device::sharing(placement, comm),
            graph_nodes: replayed
                .map(ReplayedStep::nodes)
                .transpose()
                .with_context(|| format!("{}: counting the captured graph's nodes", plan.label()))?
                .flatten(),
        },
        _ => ComputedOn::Host {
            dtype,
            row_kernel: placement.rows_on_host().then_some(kernel),
            cpu_features: crate::model::matvec::cpu_features().into_iter().map(String::from).collect(),
        },
    })
}

/// A `step: graph` run's step, captured on this rank's GPU (None for an eager run).
fn replayed_step<'a>(plan: &RunPlan, part: &'a dyn DecoderPart, max_len: usize) -> anyhow::Result<Option<ReplayedStep<'a>>> {
    match (plan.step, part.placement().device) {
        (StepMode::Eager, _) => Ok(None),
        (StepMode::Graph, tch::Device::Cuda(ordinal)) => ReplayedStep::captured(part, max_len, ordinal)
            .map(Some)
            .with_context(|| format!("{}: capturing the fixed-shape step as a CUDA graph on cuda:{ordinal}", plan.label())),
        (StepMode::Graph, _) => anyhow::bail!("{}: `step: graph` captures a CUDA graph, but this rank computes on the CPU", plan.label()),
    }
}

fn record(sink: &mut RecordSink, rep: u32, r: &RepResult) -> std::io::Result<()> {
    sink.push(Figure::Prefill, 0, rep, 0, r.prefill_s)?;
    sink.push(Figure::PrefillComm, 0, rep, 0, r.prefill_comm_s)?;
    for (phase, tally) in [(Phase::Prefill, r.prefill_reduces), (Phase::Decode, r.step_reduces)] {
        if let Some((bytes, seconds)) = tally.per_call() {
            sink.push(Figure::AllReduce(phase), bytes, rep, 0, seconds)?;
            sink.push(Figure::AllReduceCalls(phase), bytes, rep, 0, tally.calls as f64)?;
            sink.push(Figure::AllReduceTotal(phase), bytes, rep, 0, tally.seconds)?;
        }
    }
    if let Some(c) = &r.context {
        sink.push(Figure::ContextRing, 0, rep, 0, c.ring.seconds)?;
        sink.push(Figure::ContextRingBytes, 0, rep, 0, c.ring.bytes as f64)?;
        sink.push(Figure::ContextGather, 0, rep, 0, c.gather_s)?;
        sink.push(Figure::ContextGatherBytes, 0, rep, 0, c.gather_bytes as f64)?;
    }
    if let Some((prefill, decode)) = &r.experts {
        for (layer, &n) in prefill.assigned.iter().enumerate() {
            sink.push(Figure::ExpertAssigned, 0, rep, layer as u32, n as f64)?;
        }
        for (phase, t) in [(Phase::Prefill, prefill), (Phase::Decode, decode)] {
            let parts = [
                (ExpertPart::Compute, t.compute_s),
                (ExpertPart::Exchange, t.exchange_s),
                (ExpertPart::Gather, t.gather_s),
                (ExpertPart::SentBytes, t.sent_bytes as f64),
            ];
            for (part, value) in parts {
                sink.push(Figure::Expert(phase, part), 0, rep, 0, value)?;
            }
        }
    }
    for (i, (step, comm)) in r.steps.iter().enumerate() {
        sink.push(Figure::DecodeStep, 0, rep, i as u32, *step)?;
        sink.push(Figure::DecodeComm, 0, rep, i as u32, *comm)?;
    }
    sink.push(Figure::Run, 0, rep, 0, r.run_s)
}
