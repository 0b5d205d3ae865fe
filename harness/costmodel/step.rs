//! Every measured decode run predicted by the cost model: its step under both bandwidth
//! hypotheses (each rank its own memory bandwidth; one memory system all ranks share), its
//! communication as the α–β time plus the arrival skew measured at its world and link, the
//! hypothesis the measurement matches, and, where the error passes [`TOLERANCE`], the
//! assumption of the model known not to hold for the run. Typed values only: the register
//! words them (`report::predicted`).

use super::cache::{CacheRates, FootprintRate, MIN_CACHE_GAIN};
use super::link::{allgather_time, allreduce_time, p2p_time, Link, LinkFit};
use super::plan::{plan, single_device_step_s, streamed_block, Device, PlanInput};
use super::predict::{all_membw, device_fits, gpu_read_bandwidth, membw_runs, single_process_bandwidth, two_rank_fits};
use super::shape::{shape_from_config, ModelShape};
use crate::identity::RunId;
use crate::manifest::summary::{CollectiveRow, Collectives, Decode, Phase};
use crate::manifest::{Manifest, Status};
use crate::model::ModelConfig;
use crate::spec::link::Link as LinkName;
use crate::spec::plan::Workload;
use crate::spec::schema::{ContextBlocks, DecodeLayout, Device as RankDevice, Dtype, HeadPlacement, Kind, Op, Prompt, Strategy};
use std::collections::BTreeMap;

/// The relative error past which a row names the assumption that failed.
pub const TOLERANCE: f64 = 0.25;

/// Where the bytes of a step come from when several ranks stream at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hypothesis {
    /// Each rank streams at the bandwidth one process measured alone.
    OwnBandwidth,
    /// The ranks streaming at once share the highest aggregate a membw run measured with its
    /// processes on cores of their own (not oversubscribed).
    SharedMemory,
}

/// Which hypothesis the measured step is nearer to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Matches {
    /// One hypothesis predicts the step more closely (ratio nearer 1).
    One(Hypothesis),
    /// Both predict the same step: one rank streams, or the share is not below a rank's own.
    Both,
}

/// An assumption of the model that is known not to hold for a run, with what shows it.
#[derive(Debug, Clone, PartialEq)]
pub enum FailedAssumption {
    /// The model gives every rank its cores; here ranks × threads exceed the cores, so ranks
    /// wait for a core, which no bandwidth or link term contains.
    Oversubscribed {
        /// Ranks.
        ranks: u32,
        /// Threads per rank.
        threads: u32,
        /// Cores of the machine.
        cores: u32,
    },
    /// The model hides every piece of an overlapped all-reduce but the last behind compute;
    /// Open MPI has no progress thread, so a non-blocking all-reduce advances only inside MPI calls.
    NoProgressThread {
        /// Pieces each all-reduce was cut into.
        pieces: u32,
    },
    /// The model takes a collective inside a step to cost what it cost in the collectives runs
    /// (α–β plus their arrival skew, ranks released together by a barrier); the run's own
    /// all-reduces took longer per call: on the rank that arrived last (the call itself) and
    /// on the slowest (the call and the wait for the last rank).
    CallsAsInIsolation {
        /// Predicted seconds of one call (α–β plus skew).
        predicted_per_call_s: f64,
        /// The run's median per call on the rank that waited least.
        fastest_rank_per_call_s: f64,
        /// The run's median per call on the slowest rank.
        slowest_rank_per_call_s: f64,
    },
    /// The model shares a context split's prefill evenly among the ranks; the cut gave the
    /// busiest rank more causal attention work than the mean.
    EvenPrefillWork {
        /// The busiest rank's query-key pairs over the mean.
        causal_imbalance: f64,
    },
    /// The calibration takes a split's ranks to read their weights at the rate its unsplit
    /// peer read the whole model's; the busiest rank's weights and cache are few enough bytes
    /// to read faster (membw read that footprint, with as many processes at once, at least
    /// [`MIN_CACHE_GAIN`] times faster than the whole model's alone: the cores' caches hold
    /// them), and the step's memory time at that ratio is within tolerance.
    WeightsInCache {
        /// Bytes the busiest rank holds (weights and KV cache).
        rank_bytes: u64,
        /// What membw read a buffer of that size at, per process, with the split's ranks at once.
        rank_bps: f64,
        /// Bytes the unsplit peer holds.
        unsplit_bytes: u64,
        /// What membw read a buffer of that size at, one process alone.
        unsplit_bps: f64,
        /// Processes reading at once (the split's ranks).
        processes: u32,
        /// The membw runs the two rates were read from.
        runs: Vec<RunId>,
    },
    /// The calibration takes the unsplit peer's whole step to be its bytes at its kernel's rate,
    /// so each rank of a split takes its share of it; the peer streamed well below the memory's
    /// roofline (its roofline prediction short by more than [`TOLERANCE`]: bound by compute or
    /// per-call time), and the split's compute took longer than its share as if a part of the
    /// peer's step were fixed per step, paid whole by every rank: a part no larger than the
    /// peer's step beyond its bytes at the roofline.
    UndividedStepTime {
        /// The peer's bytes per step over its measured step.
        peer_bps: f64,
        /// The memory roofline the peer was predicted with.
        roofline_bps: f64,
        /// The part of the peer's step that, fixed per step, accounts for the split's measured
        /// compute: (measured compute − its share) / (the peer's step − its share), above 0 and
        /// at most 1 − `peer_bps` / `roofline_bps`.
        undivided: f64,
        /// The unsplit peer.
        run: String,
    },
    /// The model takes a step to be its bytes over the memory roofline; the unsplit run of the
    /// same model streamed well below it, so the time per token is not the weight stream alone.
    NotStreamBound {
        /// The unsplit run's bytes per step over its measured step.
        achieved_bps: f64,
        /// The roofline it was predicted with.
        roofline_bps: f64,
        /// The unsplit run.
        run: String,
    },
}

/// How a prediction compares with its measurement.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Within [`TOLERANCE`].
    Within,
    /// Outside it, where an assumption is known not to hold.
    AssumptionFailed(FailedAssumption),
    /// Outside it with no assumption known to fail: an error of the model.
    ModelError,
}

/// A predicted decode round, split as the measurement is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// Memory time of the round (the busiest rank's bytes over its bandwidth).
    pub compute_s: f64,
    /// Communication of the round.
    pub comm_s: f64,
    /// One decode round: every sequence in flight advances one token.
    pub step_s: f64,
}

/// Waiting for the last rank to arrive, measured by a collectives run.
#[derive(Debug, Clone, PartialEq)]
pub struct Skew {
    /// Slowest-rank median minus the op's own median, per call (at least 0).
    pub skew_s: f64,
    /// The collective it was measured on.
    pub op: Op,
    /// The world it was measured at (the run's own where measured, else the nearest).
    pub world: u32,
    /// The message size it was measured at (the nearest to the run's message).
    pub size_bytes: u64,
    /// The collectives run.
    pub run: String,
}

/// A run's communication per round: the α–β time of its collectives and their waiting.
#[derive(Debug, Clone, PartialEq)]
pub struct Comm {
    /// Collectives (or messages) per round.
    pub calls: u64,
    /// Their α–β time, fitted at 2 ranks and predicted at the run's world.
    pub alpha_beta_s: f64,
    /// Their arrival skew (calls × the measured skew of one call); 0 where none was measured.
    pub skew_s: f64,
    /// Waiting for other ranks' compute the round's structure implies (a pipeline stage
    /// waiting for the others, with the matching hypothesis); 0 for collectives.
    pub wait_s: f64,
    /// The skew measurement used (None: no collectives run timed the op's own time).
    pub skew: Option<Skew>,
}

impl Comm {
    /// α–β plus skew plus the implied waiting.
    pub fn total_s(&self) -> f64 {
        self.alpha_beta_s + self.skew_s + self.wait_s
    }

    /// α–β plus skew of one call.
    pub fn per_call_s(&self) -> f64 {
        (self.alpha_beta_s + self.skew_s) / self.calls.max(1) as f64
    }
}

/// One measured decode run and what the cost model predicts for it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPrediction {
    /// The measured run.
    pub run_id: RunId,
    /// Model name.
    pub model: String,
    /// Weights, activations and cache dtype.
    pub dtype: Dtype,
    /// Computed on a GPU.
    pub cuda: bool,
    /// How its step was issued (a replayed CUDA graph skips the host's launches).
    pub step_mode: crate::spec::schema::StepMode,
    /// A mixture model's router skew (0: as drawn): which experts a token reaches, so which
    /// weights a step reads.
    pub routing_skew: f64,
    /// The split.
    pub strategy: Strategy,
    /// Ranks.
    pub world: u32,
    /// Sequences in flight (per replica for data).
    pub sequences: u32,
    /// Threads per rank.
    pub threads: u32,
    /// Output head placement of the split that decodes.
    pub head: Option<HeadPlacement>,
    /// Pieces of an overlapped all-reduce.
    pub overlap: Option<u32>,
    /// The layout a context split decodes on.
    pub decodes_on: Option<DecodeLayout>,
    /// An expert split's measured routing imbalance (busiest rank's pairs over the mean).
    pub imbalance: Option<f64>,
    /// Ranks streaming at once in a round.
    pub active_ranks: u32,
    /// Bandwidth per rank under each hypothesis: (own, shared), bytes per second.
    pub bandwidth_bps: (f64, f64),
    /// Measured round (median).
    pub measured_step_s: f64,
    /// Measured communication per round (median).
    pub measured_comm_s: f64,
    /// Predicted with each rank's own bandwidth.
    pub own: Step,
    /// Predicted with one shared memory system.
    pub shared: Step,
    /// The predicted communication (None: a round has none).
    pub comm: Option<Comm>,
    /// The hypothesis the measurement matches.
    pub matches: Matches,
    /// (predicted − measured) / measured of the matching prediction.
    pub error: f64,
    /// Within tolerance, or which assumption failed.
    pub outcome: Outcome,
    /// The same for the communication (Within where none is predicted).
    pub comm_outcome: Outcome,
    /// The run's own decode all-reduces per call: (slowest rank, fastest rank) medians.
    pub measured_per_call_s: Option<(f64, f64)>,
    /// The matching hypothesis again, no rank streaming faster than the decode kernel of its
    /// unsplit peer (None: no other unsplit run of its model, dtype, device and threads with a
    /// measured step, or its round could not be computed).
    pub calibrated: Option<Calibrated>,
}

/// A run predicted from its unsplit peer: the round of the hypothesis the run matches, each
/// rank's bytes taking the longer of their time at its [`Ceiling`] (the memory's, or a cache's
/// that holds them) and their time at the rate the unsplit run's decode kernel moved its own
/// bytes (the roofline's compute ceiling, measured).
#[derive(Debug, Clone, PartialEq)]
pub struct Calibrated {
    /// The unsplit run's bytes per step over its measured step: its kernel's rate.
    pub kernel_bps: f64,
    /// The fastest a rank can read its bytes: the memory's, or a cache's that holds them.
    pub ceiling: Ceiling,
    /// What each rank streams at: the lower of the ceiling and the kernel's rate.
    pub bandwidth_bps: f64,
    /// The unsplit run it was read from.
    pub unsplit_run: RunId,
    /// The predicted round.
    pub step: Step,
    /// (predicted − measured) / measured: of the medians, or the median of the rounds' errors
    /// where the run and its peer were launched in rounds together.
    pub error: f64,
    /// How the measured step was set against the peer's.
    pub moments: Moments,
    /// Within tolerance, or which assumption failed.
    pub outcome: Outcome,
}

/// How a calibrated prediction set the run's measured step against its peer's.
#[derive(Debug, Clone, PartialEq)]
pub enum Moments {
    /// Each the median over all its launches: two moments apart (one launch each, launches
    /// not in rounds of one `parlab run`, a peer of another experiment, or a round that could
    /// not be predicted), which a machine changing speed can decide.
    Medians,
    /// Round by round: launch r of the run predicted from launch r of its peer, of its
    /// experiment, launched beside it in round r (at least
    /// [`crate::manifest::rounds::MIN_ROUNDS`] rounds).
    Rounds {
        /// (predicted − measured) / measured in each round, in launch order.
        errors: Vec<f64>,
    },
}

/// The fastest a rank of a calibrated prediction reads its bytes at.
#[derive(Debug, Clone, PartialEq)]
pub enum Ceiling {
    /// The matching hypothesis' bandwidth (membw's largest buffers: the memory's).
    Memory {
        /// Bytes per second per rank.
        bps: f64,
    },
    /// membw read a buffer of the busiest rank's footprint (weights and KV cache), with as many
    /// processes and threads each at once, faster than that: a cache holds it between steps.
    Cache {
        /// Bytes per second per rank (interpolated between the buffers around the footprint).
        bps: f64,
        /// The footprint.
        bytes: u64,
        /// The membw runs read.
        runs: Vec<RunId>,
    },
    /// The unsplit peer read its own bytes from memory faster than membw's memory rate (taken
    /// at another moment), as one process of the threads each of the run's ranks has, and the
    /// run streams one rank at a time: the memory delivered the peer's rate to that very
    /// configuration, so it bounds nothing below the peer's kernel.
    Peer {
        /// Bytes per second per rank: the peer's median rate.
        bps: f64,
        /// membw's memory rate for the hypothesis, which the peer outran.
        memory_bps: f64,
        /// The peer.
        run: RunId,
    },
}

impl Ceiling {
    /// Its rate, bytes per second per rank.
    pub fn bps(&self) -> f64 {
        match self {
            Ceiling::Memory { bps } | Ceiling::Cache { bps, .. } | Ceiling::Peer { bps, .. } => *bps,
        }
    }

    /// The rate a rank reads at where its kernel moves bytes at `kernel_bps`: the lower of the
    /// two, except under the peer's own rate, which is no bound on the peer at another moment.
    pub fn cap(&self, kernel_bps: f64) -> f64 {
        match self {
            Ceiling::Peer { .. } => kernel_bps,
            Ceiling::Memory { bps } | Ceiling::Cache { bps, .. } => bps.min(kernel_bps),
        }
    }
}

impl StepPrediction {
    /// The prediction of the matching hypothesis.
    pub fn matched(&self) -> &Step {
        match self.matches {
            Matches::One(Hypothesis::SharedMemory) => &self.shared,
            _ => &self.own,
        }
    }

    /// The bandwidth per rank of the matching hypothesis.
    pub fn matched_bandwidth_bps(&self) -> f64 {
        match self.matches {
            Matches::One(Hypothesis::SharedMemory) => self.bandwidth_bps.1,
            _ => self.bandwidth_bps.0,
        }
    }

    /// Whether a step of `step_s` (predicted another way) is within [`TOLERANCE`] of the
    /// measured step.
    pub fn within_tolerance(&self, step_s: f64) -> bool {
        (step_s - self.measured_step_s).abs() <= TOLERANCE * self.measured_step_s
    }

    /// Whether `other` computes what this run computes, on whatever layout: the same model,
    /// dtype, device, step issue and routing (a run and its peers or baselines must).
    pub fn same_computation(&self, other: &StepPrediction) -> bool {
        self.model == other.model
            && self.dtype == other.dtype
            && self.cuda == other.cuda
            && self.step_mode == other.step_mode
            && self.routing_skew == other.routing_skew
    }

    /// Whether this is another run of `p`'s computation at `p`'s threads per rank: a run whose
    /// kernel rate may calibrate `p` (its peer, or another moment of the peer's computation).
    pub fn is_kin_of(&self, p: &StepPrediction) -> bool {
        self.run_id != p.run_id && self.same_computation(p) && self.threads == p.threads
    }

    /// Whether this run is the unsplit computation: one rank decoding one sequence (else a
    /// split, or sequences served in turn, which a prediction from an unsplit run tests).
    pub fn is_unsplit(&self) -> bool {
        self.world == 1 && self.sequences == 1
    }

    /// This run's bytes per step over its measured step, when it is one unsplit rank: the rate
    /// its decode kernel moved them (None: a split, or no positive finite rate).
    pub fn achieved_bps(&self) -> Option<f64> {
        let rate = self.bandwidth_bps.0 * self.own.step_s / self.measured_step_s;
        (self.is_unsplit() && rate.is_finite() && rate > 0.0).then_some(rate)
    }

    /// (predicted − measured) / measured of the communication, where some is predicted (a
    /// prediction below zero is an error of the model, not nothing predicted).
    pub fn comm_error(&self) -> Option<f64> {
        let c = self.comm.as_ref().filter(|c| c.total_s() != 0.0)?;
        (self.measured_comm_s > 0.0).then(|| (c.total_s() - self.measured_comm_s) / self.measured_comm_s)
    }
}

/// The bandwidths a decode prediction draws on, with their runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Bandwidths {
    /// One process streaming alone, by threads (the roofline, median).
    pub own_by_threads: BTreeMap<u32, (f64, RunId)>,
    /// The highest aggregate a membw run drew with a core for every thread, of the runs that
    /// read from memory (each launch shape's largest buffer): what one memory system gives all
    /// ranks streaming at once.
    pub shared_total: Option<(f64, RunId)>,
    /// A GPU's memory roofline (device-read).
    pub gpu: Option<(f64, RunId)>,
}

/// Everything measured that the predictions draw on.
pub struct Inputs<'a> {
    /// Bandwidths.
    pub bandwidths: Bandwidths,
    fits: BTreeMap<(Op, LinkName), (LinkFit, RunId)>,
    device_fits: BTreeMap<Op, (LinkFit, RunId)>,
    /// Every collective row measured at several ranks with the op's own time, with its run,
    /// by op and link (in manifest order within each).
    rows: SkewRows<'a>,
    /// The membw runs' read rates by buffer size (caches included).
    cache: CacheRates,
}

/// Collective rows with their runs, by (op, link).
type SkewRows<'a> = BTreeMap<(Op, &'a LinkName), Vec<(&'a str, &'a CollectiveRow)>>;

/// The rows a skew can be read from (several ranks, the op's own time measured), grouped by
/// (op, link) so a prediction looks up its own instead of scanning every row.
fn skew_rows<'a>(rows: impl Iterator<Item = (&'a str, &'a CollectiveRow)>) -> SkewRows<'a> {
    let mut by_op_link = SkewRows::new();
    for (run, r) in rows.filter(|(_, r)| r.world > 1 && r.op_time.is_some()) {
        by_op_link.entry((r.op, &r.link)).or_default().push((run, r));
    }
    by_op_link
}

fn ok_of_kind(manifests: &[Manifest], kind: Kind) -> impl Iterator<Item = &Manifest> + '_ {
    manifests.iter().filter(move |m| m.kind == kind && m.status() == Status::Ok)
}

impl<'a> Inputs<'a> {
    /// Gathers the measured constants from `manifests`.
    pub fn of(manifests: &'a [Manifest]) -> Self {
        let threads: std::collections::BTreeSet<u32> = ok_of_kind(manifests, Kind::Decode).map(|m| m.plan.threads_per_rank).collect();
        let own_by_threads = threads.into_iter().filter_map(|t| Some((t, single_process_bandwidth(manifests, Some(t))?))).collect();
        let cache = CacheRates::of(all_membw(manifests).into_iter());
        // An oversubscribed membw run's processes take turns on the cores: the sum of their
        // rates counts bandwidth no ranks streaming at once ever get.
        let shared_total = membw_runs(manifests)
            .iter()
            .filter(|(m, _)| oversubscribed(m).is_none())
            .map(|(m, b)| (b.roofline.aggregate_bps, m.run_id.clone()))
            .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(&a.1)));
        let collectives: Vec<(&Manifest, &Collectives)> =
            ok_of_kind(manifests, Kind::Collectives).filter_map(|m| Some((m, m.summary()?.collectives()?))).collect();
        let rows = skew_rows(collectives.iter().flat_map(|(m, c)| c.rows.iter().map(move |r| (m.run_id.as_str(), r))));
        Inputs {
            bandwidths: Bandwidths { own_by_threads, shared_total, gpu: gpu_read_bandwidth(manifests) },
            fits: two_rank_fits(manifests),
            device_fits: device_fits(manifests),
            rows,
            cache,
        }
    }

    /// The fitted link of `op` over `link` (2 ranks).
    fn link(&self, op: Op, link: &LinkName) -> Option<Link> {
        self.fits.get(&(op, link.clone())).map(|(f, _)| f.link())
    }

    /// The skew of one `op` call of `bytes` at `world` over `link`: the run's world where a
    /// collectives run timed it, else the nearest world; the size nearest `bytes`.
    pub fn skew(&self, op: Op, world: u32, link: &LinkName, bytes: f64) -> Option<Skew> {
        let rows = self.rows.get(&(op, link))?;
        let nearest_world = rows.iter().map(|(_, r)| r.world).min_by_key(|w| (w.abs_diff(world), u32::MAX - w))?;
        let distance = |size: u64| (size.max(1) as f64 / bytes.max(1.0)).ln().abs();
        let (run, r) = rows
            .iter()
            .copied()
            .filter(|(_, r)| r.world == nearest_world)
            .min_by(|a, b| distance(a.1.size_bytes).total_cmp(&distance(b.1.size_bytes)).then_with(|| a.0.cmp(b.0)))?;
        Some(Skew { skew_s: r.skew_s()?.max(0.0), op, world: r.world, size_bytes: r.size_bytes, run: run.to_string() })
    }
}

/// What one run's prediction is computed from.
struct RunShape<'s> {
    shape: &'s ModelShape,
    dtype_bytes: u64,
    context: u64,
    world: u32,
    sequences: u32,
    link: LinkName,
}

/// Values one tensor rank streams per token: its share of every block, the norms, its share of
/// the head (all of it when replicated) and one row of each lookup table.
pub fn tensor_rank_params(s: &ModelShape, world: u32, head: HeadPlacement) -> u64 {
    let (b, p) = (&s.breakdown, world as u64);
    let rows = s.hidden * if b.position > 0 { 2 } else { 1 };
    let head_share = match head {
        HeadPlacement::Split => s.head_params() / p,
        HeadPlacement::Replicated => s.head_params(),
    };
    s.layers * (streamed_block(s) / p + s.kv_projection_excess(p)) + s.layers * b.norms_per_layer + b.final_norm + head_share + rows
}

/// A tensor rank's memory time per token at `bandwidth_bps`: its weights and its KV heads.
pub fn tensor_compute_s(s: &ModelShape, world: u32, head: HeadPlacement, dtype_bytes: u64, context: u64, bandwidth_bps: f64) -> f64 {
    let kv = s.kv_share(world as u64, dtype_bytes).bytes_per_token_per_device;
    (tensor_rank_params(s, world, head) * dtype_bytes + context * kv) as f64 / bandwidth_bps
}

/// A tensor split's collectives per token: 2L all-reduces of one row (each cut into `pieces`,
/// of which only the last is exposed when overlapped), and the logits' all-gather when the
/// head is split; each call pays the measured skew.
fn tensor_comm(inp: &Inputs, r: &RunShape, head: HeadPlacement, pieces: Option<u32>) -> Option<Comm> {
    let ar = inp.link(Op::AllReduce, &r.link)?;
    let ag = inp.link(Op::AllGather, &r.link).unwrap_or(ar);
    let row = (r.shape.hidden * r.dtype_bytes) as f64;
    let all_reduces = 2 * r.shape.layers;
    let exposed = row / f64::from(pieces.unwrap_or(1).max(1));
    let mut alpha_beta_s = all_reduces as f64 * allreduce_time(ar, exposed, r.world);
    let skew = inp.skew(Op::AllReduce, r.world, &r.link, row);
    let mut skew_s = all_reduces as f64 * skew.as_ref().map_or(0.0, |k| k.skew_s);
    let mut calls = all_reduces;
    if head == HeadPlacement::Split {
        let logits = (r.shape.vocab * r.dtype_bytes) as f64;
        alpha_beta_s += allgather_time(ag, logits, r.world);
        skew_s += inp.skew(Op::AllGather, r.world, &r.link, logits).map_or(0.0, |k| k.skew_s);
        calls += 1;
    }
    Some(Comm { calls, alpha_beta_s, skew_s, wait_s: 0.0, skew })
}

/// A GPU rank's extra copies per token: each all-reduce's partial off the device and the sum
/// back on, and the logits' shard off (the pageable copy fits).
fn staging_s(inp: &Inputs, r: &RunShape) -> Option<f64> {
    let copy = |op: Op, bytes: f64| Some(p2p_time(inp.device_fits.get(&op)?.0.link(), bytes));
    let row = (r.shape.hidden * r.dtype_bytes) as f64;
    let logits = (r.shape.vocab * r.dtype_bytes) as f64;
    let per_all_reduce = copy(Op::DeviceToHostPageable, row)? + copy(Op::HostToDevicePageable, row)?;
    Some(2.0 * r.shape.layers as f64 * per_all_reduce + copy(Op::DeviceToHostPageable, logits / r.world as f64)?)
}

/// The cost model's plan of `strategy` for this run at `bandwidth_bps` per rank over `link`.
fn planned(r: &RunShape, strategy: Strategy, world: u32, sequences: u32, bandwidth_bps: f64, link: Link, imbalance: f64) -> Option<Step> {
    let p = plan(&plan_input(r, strategy, world, sequences, bandwidth_bps, link, imbalance)).ok()?;
    // A pipeline's compute is one pass through its stages (sequences overlap in them); an
    // expert split serves its sequences in turn.
    Some(match strategy {
        Strategy::Pipeline => Step { compute_s: p.compute_s, comm_s: p.comm_s, step_s: p.round_s },
        _ => Step { compute_s: p.round_s - f64::from(sequences) * p.comm_s, comm_s: f64::from(sequences) * p.comm_s, step_s: p.round_s },
    })
}

/// How a run's strategy decodes, for the prediction.
enum Decoder {
    /// `replicas` ranks streaming the whole model at once, `passes` passes each per round
    /// (data replicas; one rank; a context split's rank 0 decoding alone).
    Whole { passes: u32, replicas: u32 },
    /// A tensor split with this head and these overlap pieces.
    Tensor { head: HeadPlacement, pieces: Option<u32> },
    /// Layer stages with sequences in flight.
    Pipeline,
    /// Experts split, with the measured imbalance.
    Expert { imbalance: f64 },
}

fn decoder(m: &Manifest, d: &Decode) -> Decoder {
    let seqs = m.layout.sequences.unwrap_or(1).max(1);
    match (m.layout.strategy, m.layout.world) {
        (_, 1) | (Strategy::Data, _) => Decoder::Whole { passes: seqs, replicas: m.layout.world },
        (Strategy::Tensor, _) => Decoder::Tensor { head: m.layout.head.unwrap_or(HeadPlacement::Split), pieces: m.layout.overlap },
        (Strategy::Pipeline, _) => Decoder::Pipeline,
        (Strategy::Expert, _) => Decoder::Expert { imbalance: d.experts.as_ref().map_or(1.0, |e| e.overall_imbalance().max(1.0)) },
        (Strategy::Context, _) => match &m.layout.decode {
            Some(split) => Decoder::Tensor { head: split.head, pieces: None },
            None => Decoder::Whole { passes: seqs, replicas: 1 },
        },
    }
}

/// Ranks that stream at once in a round of this decoder.
fn active_ranks(dec: &Decoder, world: u32, sequences: u32) -> u32 {
    match dec {
        Decoder::Whole { replicas, .. } => *replicas,
        Decoder::Pipeline => world.min(sequences.max(1)),
        _ => world,
    }
}

/// The round of `dec` with `bandwidth_bps` per rank.
fn round(inp: &Inputs, r: &RunShape, dec: &Decoder, bandwidth_bps: f64, comm: Option<&Comm>) -> Option<Step> {
    let comm_s = comm.map_or(0.0, Comm::total_s);
    match dec {
        Decoder::Whole { passes, .. } => {
            let t1 = single_device_step_s(r.shape, r.dtype_bytes, r.context, bandwidth_bps);
            Some(Step { compute_s: *passes as f64 * t1, comm_s: 0.0, step_s: *passes as f64 * t1 })
        }
        Decoder::Tensor { head, .. } => {
            let compute_s = f64::from(r.sequences) * tensor_compute_s(r.shape, r.world, *head, r.dtype_bytes, r.context, bandwidth_bps);
            let comm_s = f64::from(r.sequences) * comm_s;
            Some(Step { compute_s, comm_s, step_s: compute_s + comm_s })
        }
        Decoder::Pipeline => {
            let link = inp.link(Op::PingPong, &r.link).or_else(|| inp.link(Op::AllReduce, &r.link))?;
            planned(r, Strategy::Pipeline, r.world, r.sequences, bandwidth_bps, link, 1.0)
        }
        Decoder::Expert { imbalance } => {
            let link = inp.link(Op::AllToAll, &r.link)?;
            let step = planned(r, Strategy::Expert, r.world, r.sequences, bandwidth_bps, link, *imbalance)?;
            let skew = comm.map_or(0.0, |c| c.skew_s) * f64::from(r.sequences);
            Some(Step { comm_s: step.comm_s + skew, step_s: step.step_s + skew, ..step })
        }
    }
}

/// The communication a round of `dec` pays, where it has collectives.
fn comm_of(inp: &Inputs, r: &RunShape, dec: &Decoder, staged: bool) -> Option<Comm> {
    match dec {
        Decoder::Tensor { head, pieces } => {
            let mut comm = tensor_comm(inp, r, *head, *pieces)?;
            if staged {
                comm.alpha_beta_s += staging_s(inp, r)?;
            }
            Some(comm)
        }
        Decoder::Expert { imbalance } => {
            let link = inp.link(Op::AllToAll, &r.link)?;
            let e = r.shape.experts?;
            let dispatch = (e.active as u64 * r.shape.hidden * r.dtype_bytes) as f64 * imbalance;
            let calls = 2 * r.shape.layers;
            let skew = inp.skew(Op::AllToAll, r.world, &r.link, dispatch);
            Some(Comm {
                calls,
                alpha_beta_s: calls as f64 * super::link::alltoall_time(link, dispatch, r.world),
                skew_s: calls as f64 * skew.as_ref().map_or(0.0, |k| k.skew_s),
                wait_s: 0.0,
                skew,
            })
        }
        Decoder::Pipeline => {
            let link = inp.link(Op::PingPong, &r.link).or_else(|| inp.link(Op::AllReduce, &r.link))?;
            let hops = (r.world - 1) as f64 * p2p_time(link, (r.shape.hidden * r.dtype_bytes) as f64) + p2p_time(link, 4.0);
            Some(Comm { calls: r.world as u64, alpha_beta_s: hops, skew_s: 0.0, wait_s: 0.0, skew: None })
        }
        Decoder::Whole { .. } => None,
    }
}

/// Tokens of context a step reads on average: the prompt and half the new tokens.
fn mean_context(prompt: &Prompt, new_tokens: u32) -> u64 {
    let prompt_len = match prompt {
        Prompt::Tokens(t) => t.len() as u64,
        Prompt::Seeded { length, .. } => *length as u64,
    };
    prompt_len + new_tokens as u64 / 2
}

/// The nearer of the two predictions to `measured` (by ratio), or both when they coincide.
pub fn matching(own: f64, shared: f64, measured: f64) -> Matches {
    if (own - shared).abs() <= 1e-9 * own.abs().max(shared.abs()) {
        return Matches::Both;
    }
    let off = |p: f64| (p / measured).ln().abs();
    if off(shared) < off(own) {
        Matches::One(Hypothesis::SharedMemory)
    } else {
        Matches::One(Hypothesis::OwnBandwidth)
    }
}

/// A run's bandwidth per rank under each hypothesis: (own, shared).
fn bandwidths(inp: &Inputs, m: &Manifest, active: u32) -> Option<(f64, f64)> {
    let b = &inp.bandwidths;
    if m.plan.device == RankDevice::Cuda {
        let gpu = b.gpu.as_ref()?.0;
        return Some((gpu, gpu / f64::from(active.max(1))));
    }
    let own = b.own_by_threads.get(&m.plan.threads_per_rank)?.0;
    let total = b.shared_total.as_ref().map_or(own, |(t, _)| *t);
    Some((own, own.min(total / f64::from(active.max(1)))))
}

/// The head placement and the decode layout that tell a run's split apart.
fn layout_details(m: &Manifest) -> (Option<HeadPlacement>, Option<DecodeLayout>) {
    match (&m.layout.decode, m.layout.strategy) {
        (Some(split), _) => (Some(split.head), Some(DecodeLayout::Tensor)),
        (None, Strategy::Context) => (None, Some(DecodeLayout::Rank0)),
        (None, s) => (m.layout.head.filter(|_| s == Strategy::Tensor && m.layout.world > 1), None),
    }
}

/// What a decode run's prediction is computed from (None: not a decode workload).
fn run_shape<'s>(m: &Manifest, shape: &'s ModelShape) -> Option<RunShape<'s>> {
    let Workload::Decode { prompt, new_tokens, dtype, .. } = &m.plan.workload else {
        return None;
    };
    Some(RunShape {
        shape,
        dtype_bytes: dtype.bytes(),
        context: mean_context(prompt, *new_tokens),
        world: m.layout.world,
        sequences: m.layout.sequences.unwrap_or(1).max(1),
        link: m.plan.link.clone(),
    })
}

/// The prediction of one decode run, before its outcome is judged (None: its model or a
/// constant it needs is missing).
fn predict_run<'m>(inp: &Inputs, m: &'m Manifest) -> Option<Predicted<'m>> {
    let d = m.summary()?.decode()?;
    let source = m.plan.model.as_ref()?;
    let Workload::Decode { dtype, routing_skew, .. } = &m.plan.workload else {
        return None;
    };
    let shape = shape_from_config(&config_as_run(source)?).ok()?;
    let r = run_shape(m, &shape)?;
    // Host staging: a GPU rank's tensors cross over MPI through host memory; over NCCL they
    // stay on the device.
    let staged = m.plan.device == RankDevice::Cuda && m.plan.link.nccl().is_none();
    let dec = decoder(m, d);
    let active = active_ranks(&dec, r.world, r.sequences);
    let comm = comm_of(inp, &r, &dec, staged);
    let (own_bw, shared_bw) = bandwidths(inp, m, active)?;
    let own = round(inp, &r, &dec, own_bw, comm.as_ref())?;
    let shared = round(inp, &r, &dec, shared_bw, comm.as_ref())?;
    let (head, decodes_on) = layout_details(m);
    let mut p = StepPrediction {
        run_id: m.run_id.clone(),
        model: source.name.clone(),
        dtype: *dtype,
        cuda: m.plan.device == RankDevice::Cuda,
        step_mode: m.plan.step,
        routing_skew: *routing_skew,
        strategy: m.layout.strategy,
        world: r.world,
        sequences: r.sequences,
        threads: m.plan.threads_per_rank,
        head,
        overlap: m.layout.overlap,
        decodes_on,
        imbalance: if let Decoder::Expert { imbalance } = dec { Some(imbalance) } else { None },
        active_ranks: active,
        bandwidth_bps: (own_bw, shared_bw),
        measured_step_s: d.step_s.median,
        measured_comm_s: d.comm_s.median,
        own,
        shared,
        comm,
        matches: matching(own.step_s, shared.step_s, d.step_s.median),
        error: 0.0,
        outcome: Outcome::Within,
        comm_outcome: Outcome::Within,
        measured_per_call_s: d.all_reduces.iter().find(|a| a.phase == Phase::Decode).map(|a| (a.time.median, a.fastest_rank.median)),
        calibrated: None,
    };
    p.error = (p.matched().step_s - p.measured_step_s) / p.measured_step_s;
    if let Decoder::Pipeline = dec {
        add_stage_wait(&mut p);
    }
    Some(Predicted { m, p, shape, dec })
}

/// One decode run's roofline prediction with the shape and decoder it was computed from, which
/// the calibrated prediction computes its round with again.
struct Predicted<'m> {
    m: &'m Manifest,
    p: StepPrediction,
    shape: ModelShape,
    dec: Decoder,
}

/// A pipeline stage computes m stage-times a round and waits the rest of it for the other
/// stages (with the matching hypothesis): that waiting joins its predicted communication.
fn add_stage_wait(p: &mut StepPrediction) {
    let matched = *p.matched();
    let (m, world) = (f64::from(p.sequences), f64::from(p.world));
    if let Some(c) = p.comm.as_mut() {
        c.wait_s = (matched.step_s - c.alpha_beta_s - m * matched.compute_s / world).max(0.0);
    }
}

/// The launch's oversubscription, if its manifest records one.
fn oversubscribed(m: &Manifest) -> Option<FailedAssumption> {
    let o = crate::manifest::caveat::oversubscribed(&m.caveats)?;
    Some(FailedAssumption::Oversubscribed { ranks: o.ranks, threads: o.threads, cores: o.cores })
}

/// The unsplit run's evidence that a step is not its bytes over the roofline, when it missed
/// in the direction of `error` too.
fn not_stream_bound(unsplit: Option<&Unsplit>, error: f64) -> Option<FailedAssumption> {
    let u = unsplit?;
    (u.error.abs() > TOLERANCE && u.error.signum() == error.signum()).then(|| FailedAssumption::NotStreamBound {
        achieved_bps: u.achieved_bps,
        roofline_bps: u.roofline_bps,
        run: u.run.clone(),
    })
}

/// Why a step outside tolerance is not a model error, if an assumption is known to fail: an
/// oversubscribed launch first, then overlapped pieces that did not hide (measured slower),
/// then the communication's failed assumption where the measured communication in place of
/// the predicted brings the step within tolerance, then an unsplit run of the same model that
/// streamed well below its roofline.
fn step_assumption(m: &Manifest, p: &StepPrediction, unsplit: Option<&Unsplit>) -> Option<FailedAssumption> {
    launch_assumption(m, p, p.matched(), p.error).or_else(|| not_stream_bound(unsplit, p.error))
}

/// The failed assumptions of the launch that a predicted `step` with `error` can meet, in
/// order: an oversubscribed launch, overlapped pieces that did not hide (measured slower),
/// the communication's own where the measured communication in its place brings `step`
/// within tolerance.
fn launch_assumption(m: &Manifest, p: &StepPrediction, step: &Step, error: f64) -> Option<FailedAssumption> {
    // Oversubscription explains a miss either way: the prediction shares the memory among all
    // the ranks at once, where ranks taking turns on the cores stream fewer at a time (a
    // pipeline of 4 stages on 2 cores ran faster than predicted); overlapped pieces without a
    // progress thread explain only a slower step.
    oversubscribed(m)
        .or_else(|| p.overlap.filter(|_| error < 0.0).map(|pieces| FailedAssumption::NoProgressThread { pieces }))
        .or_else(|| communication_explains(p, step))
}

/// The communication's failed assumption, when `step` predicted with the measured
/// communication in place of the predicted one is within tolerance.
fn communication_explains(p: &StepPrediction, step: &Step) -> Option<FailedAssumption> {
    let Outcome::AssumptionFailed(a) = &p.comm_outcome else {
        return None;
    };
    let predicted_comm = p.comm.as_ref().map_or(0.0, Comm::total_s) * f64::from(p.sequences);
    let with_measured = step.step_s - predicted_comm + p.measured_comm_s;
    p.within_tolerance(with_measured).then(|| a.clone())
}

/// Why communication outside tolerance is not a model error: an oversubscribed launch, then
/// the run's own all-reduces slower per call than the collectives runs (measured slower),
/// then (a pipeline's waiting, an expert split's exchange) the compute it waits for not
/// streaming at the roofline.
fn comm_assumption(m: &Manifest, p: &StepPrediction, error: f64, unsplit: Option<&Unsplit>) -> Option<FailedAssumption> {
    let per_call = p.comm.as_ref().map(Comm::per_call_s);
    let calls = match (per_call, p.measured_per_call_s) {
        (Some(predicted), Some((slowest, fastest))) if error < 0.0 => Some(FailedAssumption::CallsAsInIsolation {
            predicted_per_call_s: predicted,
            fastest_rank_per_call_s: fastest,
            slowest_rank_per_call_s: slowest,
        }),
        _ => None,
    };
    oversubscribed(m).or(calls).or_else(|| not_stream_bound(unsplit, error).filter(|_| p.strategy != Strategy::Tensor))
}

/// The outcome of an error against the tolerance, with the assumption that explains it.
fn judge(error: Option<f64>, assumption: impl FnOnce(f64) -> Option<FailedAssumption>) -> Outcome {
    match error.filter(|e| e.abs() > TOLERANCE) {
        None => Outcome::Within,
        Some(e) => assumption(e).map_or(Outcome::ModelError, Outcome::AssumptionFailed),
    }
}

/// An unsplit run: its bytes per step over the measured step, the roofline, the run, its error.
struct Unsplit {
    achieved_bps: f64,
    roofline_bps: f64,
    run: String,
    error: f64,
}

/// The unsplit one-sequence run a prediction is checked against: of the same model, dtype,
/// device, step issue and routing; with the rank's threads where one ran (a kernel's reach depends on them); the same
/// experiment's where there is one, else the one predicted best (the most favourable evidence
/// that a step is its bytes over the roofline).
fn unsplit_for<'p>(p: &StepPrediction, experiment: &str, all: &'p [Predicted]) -> Option<Unsplit> {
    let unsplit: Vec<(&Manifest, &'p StepPrediction)> =
        all.iter().map(|x| (x.m, &x.p)).filter(|(_, u)| u.is_unsplit() && u.same_computation(p)).collect();
    let same_threads: Vec<(&Manifest, &'p StepPrediction)> = unsplit.iter().copied().filter(|(_, u)| u.threads == p.threads).collect();
    let candidates = if same_threads.is_empty() { unsplit } else { same_threads };
    let same = candidates.iter().filter(|(m, _)| m.experiment == experiment).min_by(|a, b| a.1.run_id.cmp(&b.1.run_id));
    let best = || candidates.iter().min_by(|a, b| a.1.error.abs().total_cmp(&b.1.error.abs()).then_with(|| a.1.run_id.cmp(&b.1.run_id)));
    let (_, u) = same.or_else(best)?;
    Some(Unsplit { achieved_bps: u.achieved_bps()?, roofline_bps: u.bandwidth_bps.0, run: u.run_id.to_string(), error: u.error })
}

/// Every ok decode run of `manifests` with the cost model's prediction, in manifest order.
pub fn predict_steps(manifests: &[Manifest]) -> Vec<StepPrediction> {
    let inp = Inputs::of(manifests);
    let runs: Vec<Predicted> = ok_of_kind(manifests, Kind::Decode).filter_map(|m| predict_run(&inp, m)).collect();
    runs.iter()
        .map(|run| {
            let m = run.m;
            let unsplit = unsplit_for(&run.p, &m.experiment, &runs);
            let mut p = run.p.clone();
            p.comm_outcome = judge(p.comm_error(), |e| comm_assumption(m, &p, e, unsplit.as_ref()));
            p.outcome = judge(Some(p.error), |_| step_assumption(m, &p, unsplit.as_ref()));
            p.calibrated = calibrate(&inp, run, &p, &runs);
            p
        })
        .collect()
}

/// `p` predicted again on the bandwidth of the hypothesis its roofline prediction matches,
/// capped at the kernel rate of its unsplit peer ([`peer_of`]); its error round by round where
/// it and its peer were launched in rounds together ([`paired_rounds`]). The assumptions that
/// explain a miss are checked on the medians (the step predicted at the peer's median rate
/// against the measured median): whether a launch was oversubscribed, or its calls or caches
/// account for the difference, is the run's, not one moment's.
fn calibrate(inp: &Inputs, run: &Predicted, p: &StepPrediction, all: &[Predicted]) -> Option<Calibrated> {
    let peer = peer_of(p, &run.m.experiment, all)?;
    let kernel_bps = peer.p.achieved_bps()?;
    let r = run_shape(run.m, &run.shape)?;
    let ceiling = ceiling(inp, &r, p, peer);
    let bandwidth_bps = ceiling.cap(kernel_bps);
    let step = round(inp, &r, &run.dec, bandwidth_bps, p.comm.as_ref())?;
    let predicted_at = |rate_bps: f64| round(inp, &r, &run.dec, ceiling.cap(rate_bps), p.comm.as_ref()).map(|s| s.step_s);
    let medians = (step.step_s - p.measured_step_s) / p.measured_step_s;
    let (moments, error) = match paired_rounds(run.m, peer, predicted_at) {
        Some((errors, median)) => (Moments::Rounds { errors }, median),
        None => (Moments::Medians, medians),
    };
    let unsplit_run = peer.p.run_id.clone();
    // A cache's ceiling that binds is that cache's rate already: no second speed-up from it.
    let cache_bound = matches!(ceiling, Ceiling::Cache { .. }) && kernel_bps >= ceiling.bps();
    let cache = || cache_explains(inp, run, p, &step).filter(|_| !cache_bound);
    let kernel = KernelStep { kernel_bps, bandwidth_bps, step };
    let undivided = |e| undivided_explains(p, peer, &kernel, e);
    let outcome = judge(Some(error), |e| launch_assumption(run.m, p, &step, e).or_else(cache).or_else(|| undivided(e)));
    Some(Calibrated { kernel_bps, ceiling, bandwidth_bps, unsplit_run, step, error, moments, outcome })
}

/// A part of the peer's step that the split's ranks did not divide, for a split measured slower
/// than predicted (`error` below 0) whose peer streamed well below its roofline (the peer's
/// roofline error below −[`TOLERANCE`]) and whose ranks were given the peer's kernel rate
/// (`step`'s compute is then the peer's step in proportion to the bytes: its share). If the
/// peer's step is a fixed part F and a part proportional to its bytes, the split's compute is F
/// and its share of the rest, and F over the peer's step is the split's measured compute (its
/// step less the predicted communication) beyond its share, over the peer's step beyond that
/// share (both positive: a share above the peer's step, as more sequences' KV cache can give,
/// has no such reading). It explains the miss where it is at most the part of the peer's step
/// beyond its bytes at the roofline (1 − the peer's rate over the roofline: the proportional
/// part is never faster than the memory): [`FailedAssumption::UndividedStepTime`].
fn undivided_explains(p: &StepPrediction, peer: &Predicted, c: &KernelStep, error: f64) -> Option<FailedAssumption> {
    let (step, share) = (&c.step, c.step.compute_s);
    if error >= 0.0 || peer.p.error >= -TOLERANCE || c.bandwidth_bps < c.kernel_bps {
        return None;
    }
    let (peer_bps, roofline_bps) = (peer.p.achieved_bps()?, peer.p.matched_bandwidth_bps());
    let beyond = p.measured_step_s - (step.step_s - share) - share;
    let whole = peer.p.measured_step_s - share;
    if !(beyond > 0.0 && whole > 0.0) {
        return None;
    }
    let undivided = beyond / whole;
    (undivided <= 1.0 - peer_bps / roofline_bps).then(|| FailedAssumption::UndividedStepTime {
        peer_bps,
        roofline_bps,
        undivided,
        run: peer.p.run_id.to_string(),
    })
}

/// A step predicted at the lower of a ceiling and a peer's kernel rate, with both rates.
struct KernelStep {
    /// The peer's kernel rate.
    kernel_bps: f64,
    /// The rate the ranks were given.
    bandwidth_bps: f64,
    /// The step predicted at it.
    step: Step,
}

/// The run's step against its peer's round by round where both were launched in rounds of one
/// `parlab run` and the peer is of the run's experiment (the experiment's runs go one after
/// another in each round; another experiment's may be minutes away): in round r the peer's
/// kernel moved its bytes in its step of that round, and the run is predicted at that rate
/// (`predicted_at`) against its own step of that round. The rounds' errors, and their median.
fn paired_rounds(run: &Manifest, peer: &Predicted, predicted_at: impl Fn(f64) -> Option<f64>) -> Option<(Vec<f64>, f64)> {
    use crate::manifest::rounds::{in_rounds, Launched};
    if peer.m.experiment != run.experiment {
        return None;
    }
    let step = crate::nightly::figures::STEP_MEDIAN;
    let rounds = in_rounds(Launched::of(peer.m, step)?, Launched::of(run, step)?)?;
    let bytes_per_step = peer.p.achieved_bps()? * peer.p.measured_step_s;
    let errors: Vec<f64> =
        rounds.iter().map(|&(peer_s, run_s)| Some((predicted_at(bytes_per_step / peer_s)? - run_s) / run_s)).collect::<Option<_>>()?;
    let median = crate::manifest::stats::Stats::of(&errors)?.median;
    Some((errors, median))
}

/// The fastest `p`'s busiest rank reads its bytes at: the matching hypothesis' bandwidth (the
/// memory's), unless membw read a buffer of the rank's footprint with as many processes of as
/// many threads at once, inside its sweep, at least [`MIN_CACHE_GAIN`] times faster: then a
/// cache holds the bytes between steps, and the memory's rate would cap a kernel that outruns it
/// (a model that fits a large last-level cache, unsplit or split). A run that matched the
/// shared-memory hypothesis (its ranks measured contending for the memory) and a GPU run (membw
/// reads host memory) keep their hypothesis' bandwidth. A memory ceiling the unsplit peer
/// outran in the run's own configuration is the peer's rate ([`memory_shown_by_peer`]).
fn ceiling(inp: &Inputs, r: &RunShape, p: &StepPrediction, peer: &Predicted) -> Ceiling {
    let memory = p.matched_bandwidth_bps();
    // Ranks measured sharing the memory's bandwidth do not hold their bytes in caches of their own.
    let contended = p.matches == Matches::One(Hypothesis::SharedMemory);
    if let Some((bytes, f)) = cached_rate(inp, r, p).filter(|(_, f)| !contended && f.bps >= MIN_CACHE_GAIN * memory) {
        return Ceiling::Cache { bps: f.bps, bytes, runs: f.runs };
    }
    match memory_shown_by_peer(inp, p, peer, memory).filter(|&bps| bps > memory) {
        Some(bps) => Ceiling::Peer { bps, memory_bps: memory, run: peer.p.run_id.clone() },
        None => Ceiling::Memory { bps: memory },
    }
}

/// The rate the unsplit peer read its own bytes at, where that is the memory's rate for `p`'s
/// busiest rank at the peer's moment: a host run (a GPU's caches are not swept) that streams
/// one rank at a time, each of the peer's threads (the peer's one process), whose peer's
/// footprint membw shows read from memory: past its sweep, or inside it no faster than
/// [`MIN_CACHE_GAIN`] × the memory's rate `memory` (a cache's rate says nothing of the memory's, and a
/// footprint membw never read, below its smallest buffer or with no read of one process of
/// those threads, is no evidence either way). membw ran at another moment; where the peer
/// outran it, the memory was faster then than membw found it.
fn memory_shown_by_peer(inp: &Inputs, p: &StepPrediction, peer: &Predicted, memory: f64) -> Option<f64> {
    if p.cuda || p.active_ranks != 1 || peer.p.threads != p.threads {
        return None;
    }
    let bytes = footprint(&run_shape(peer.m, &peer.shape)?, Strategy::Data, 1, 1, 1.0)?;
    let read = inp.cache.at(1, p.threads, bytes)?;
    let from_memory = read.past_sweep || read.bps < MIN_CACHE_GAIN * memory;
    peer.p.achieved_bps().filter(|_| from_memory)
}

/// The busiest rank's footprint and the rate membw read it at inside its sweep, with `p`'s
/// processes and threads at once; None for a GPU run (membw reads host memory).
fn cached_rate(inp: &Inputs, r: &RunShape, p: &StepPrediction) -> Option<(u64, FootprintRate)> {
    if p.cuda {
        return None;
    }
    let bytes = footprint(r, p.strategy, p.world, p.sequences, p.imbalance.unwrap_or(1.0))?;
    Some((bytes, inp.cache.at(p.world, p.threads, bytes).filter(|f| !f.past_sweep)?))
}

/// The caches' part in a split predicted slower than measured (the ratio only speeds a
/// prediction up, so it never brings one that was too fast within tolerance): the rate membw
/// read the busiest rank's footprint at, with as many processes at once as the split has ranks
/// (they hold their caches at once, whether or not they read at once), over the rate it read
/// the unsplit peer's alone. Where the rank's footprint is inside the sweep (below the largest
/// buffer), the ratio is at least [`MIN_CACHE_GAIN`], and the step's memory time divided by it
/// is within tolerance, [`FailedAssumption::WeightsInCache`]. That division assumes the decode
/// kernel's rate, below the memory's, scales with the read rate of where its bytes are.
fn cache_explains(inp: &Inputs, run: &Predicted, p: &StepPrediction, step: &Step) -> Option<FailedAssumption> {
    let r = run_shape(run.m, &run.shape)?;
    let (rank_bytes, rank) = cached_rate(inp, &r, p)?;
    let unsplit_bytes = footprint(&r, Strategy::Data, 1, 1, 1.0)?;
    let unsplit = inp.cache.at(1, p.threads, unsplit_bytes)?;
    let ratio = rank.bps / unsplit.bps;
    let with_cache = (step.step_s - step.comm_s) / ratio + step.comm_s;
    (ratio >= MIN_CACHE_GAIN && p.within_tolerance(with_cache)).then(|| FailedAssumption::WeightsInCache {
        rank_bytes,
        rank_bps: rank.bps,
        unsplit_bytes,
        unsplit_bps: unsplit.bps,
        processes: p.world,
        runs: rank.runs.into_iter().chain(unsplit.runs).collect(),
    })
}

/// Bytes the busiest rank of `strategy` over `world` holds, weights and the KV cache of
/// `sequences`: what its caches keep between steps where they are large enough (None where the
/// cost model has no plan of the split).
fn footprint(r: &RunShape, strategy: Strategy, world: u32, sequences: u32, imbalance: f64) -> Option<u64> {
    let p = plan(&plan_input(r, strategy, world, sequences, 1.0, Link { alpha_s: 0.0, beta_bps: 1.0 }, imbalance)).ok()?;
    Some(p.stored_bytes_per_device.saturating_add(p.kv_bytes_per_device))
}

/// The cost model's question for this run's model, dtype and context under `strategy`, each
/// device of unbounded memory reading `bandwidth_bps`.
fn plan_input<'s>(
    r: &RunShape<'s>,
    strategy: Strategy,
    world: u32,
    sequences: u32,
    bandwidth_bps: f64,
    link: Link,
    imbalance: f64,
) -> PlanInput<'s> {
    PlanInput {
        shape: r.shape,
        dtype_bytes: r.dtype_bytes,
        device: Device { memory_bytes: u64::MAX, bandwidth_bps },
        link,
        strategy,
        world,
        context: r.context,
        sequences,
        imbalance,
    }
}

/// `p`'s unsplit peer, whose decode kernel's rate calibrates it: of the unsplit one-sequence
/// runs of the same model, dtype, device, step issue, routing and threads per rank with a positive finite rate
/// ([`StepPrediction::achieved_bps`]), other than `p` itself, the same experiment's where
/// there is one (launched beside it; the first by run identity), else the one of median rate
/// (the slower of the two middle ones when their number is even).
fn peer_of<'a, 'm>(p: &StepPrediction, experiment: &str, all: &'a [Predicted<'m>]) -> Option<&'a Predicted<'m>> {
    let mut peers: Vec<(&Predicted, f64)> =
        all.iter().filter(|x| x.p.is_kin_of(p)).filter_map(|x| Some((x, x.p.achieved_bps()?))).collect();
    if let Some((peer, _)) = peers.iter().filter(|(x, _)| x.m.experiment == experiment).min_by(|a, b| a.0.p.run_id.cmp(&b.0.p.run_id)) {
        return Some(peer);
    }
    peers.sort_by(|a, b| a.1.total_cmp(&b.1).then_with(|| a.0.p.run_id.cmp(&b.0.p.run_id)));
    peers.get(peers.len().checked_sub(1)? / 2).map(|(peer, _)| *peer)
}

/// A context split's prefill, predicted: the unsplit prefill's time shared evenly by the ranks,
/// plus the ring's and the cache hand-off's α–β time.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillPrediction {
    /// The measured run.
    pub run_id: RunId,
    /// Model name.
    pub model: String,
    /// Ranks.
    pub world: u32,
    /// How the prompt was cut.
    pub cut: ContextBlocks,
    /// The layout the cache was handed to.
    pub decodes_on: DecodeLayout,
    /// Measured prefill (median).
    pub measured_s: f64,
    /// Measured ring seconds (median, waiting included).
    pub measured_ring_s: f64,
    /// Measured hand-off seconds (median).
    pub measured_handoff_s: f64,
    /// The unsplit prefill over the world.
    pub compute_s: f64,
    /// The ring: L(p − 1) messages, the busiest sender's modelled bytes.
    pub ring_s: f64,
    /// The hand-off of the cache to the decode layout.
    pub handoff_s: f64,
    /// The unsplit run whose prefill is shared.
    pub unsplit_run: RunId,
    /// (predicted − measured) / measured.
    pub error: f64,
    /// Within tolerance, or which assumption failed.
    pub outcome: Outcome,
}

impl PrefillPrediction {
    /// Compute plus ring plus hand-off.
    pub fn predicted_s(&self) -> f64 {
        self.compute_s + self.ring_s + self.handoff_s
    }
}

/// The ring's seconds: L(p − 1) point-to-point messages carrying `bytes` in all.
pub fn ring_s(link: Link, layers: u64, world: u32, bytes: f64) -> f64 {
    (layers * u64::from(world.saturating_sub(1))) as f64 * link.alpha_s + bytes / link.beta_bps
}

/// The hand-off's seconds of `bytes` (every rank's together): to rank 0, p − 1 messages it
/// receives all of; to a tensor split, 2L all-to-alls (keys and values of each layer), each
/// rank sending its p-th (`bytes` counts only what leaves a rank: its own heads' rows stay).
pub fn handoff_s(on: DecodeLayout, p2p: Link, all_to_all: Link, layers: u64, world: u32, bytes: f64) -> f64 {
    let others = f64::from(world.saturating_sub(1));
    match on {
        DecodeLayout::Rank0 => others * p2p.alpha_s + bytes / p2p.beta_bps,
        DecodeLayout::Tensor => 2.0 * layers as f64 * others * all_to_all.alpha_s + bytes / f64::from(world.max(1)) / all_to_all.beta_bps,
    }
}

/// Every ok context split over several ranks with a prefill prediction, in manifest order
/// (None for one without an unsplit context run of its model and prompt, or a link fit).
pub fn predict_prefills(manifests: &[Manifest]) -> Vec<PrefillPrediction> {
    let inp = Inputs::of(manifests);
    let context: Vec<&Manifest> = ok_of_kind(manifests, Kind::Decode).filter(|m| m.layout.strategy == Strategy::Context).collect();
    context.iter().filter(|m| m.layout.world > 1).filter_map(|m| predict_prefill(&inp, m, &context)).collect()
}

fn prompt_tokens(m: &Manifest) -> Option<u32> {
    Some(m.summary()?.decode()?.prompt_tokens)
}

/// The unsplit prefill a context split is predicted from, of `unsplit` (world-1 context runs
/// of its model and prompt), shared by its ranks: the one nearest the split's threads per
/// rank in ratio (its own where it ran: no scaling assumed; ties to more threads), the same
/// experiment's first, then the first by run identity. Two threads prefill 1.7× as fast as
/// one here, not 2×: the whole machine's run shared by one-thread ranks credits each with
/// more than its thread.
fn prefill_peer<'m>(m: &Manifest, unsplit: Vec<&'m Manifest>) -> Option<&'m Manifest> {
    let threads = f64::from(m.plan.threads_per_rank.max(1));
    let rank = |u: &&Manifest| {
        let t = u.plan.threads_per_rank.max(1);
        ((f64::from(t) / threads).ln().abs(), std::cmp::Reverse(t), u.experiment != m.experiment)
    };
    unsplit.into_iter().min_by(|a, b| {
        let (x, y) = (rank(a), rank(b));
        x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)).then(x.2.cmp(&y.2)).then_with(|| a.run_id.cmp(&b.run_id))
    })
}

/// The model's config.json as the run read it: None where the folder is gone or its config
/// was edited since (its digest is not the run's), so no run is predicted from another shape.
fn config_as_run(source: &crate::spec::plan::ModelSource) -> Option<ModelConfig> {
    ModelConfig::read(&source.dir).ok().filter(|cfg| cfg.digest == source.config_sha256)
}

fn predict_prefill(inp: &Inputs, m: &Manifest, context: &[&Manifest]) -> Option<PrefillPrediction> {
    let d = m.summary()?.decode()?;
    let c = d.context.as_ref()?;
    let source = m.plan.model.as_ref()?;
    // The unsplit prefill of the same computation: model, dtype, device and step issue.
    let same_model = |u: &&&Manifest| {
        u.layout.world == 1
            && u.plan.model.as_ref().map(|s| &s.name) == Some(&source.name)
            && prompt_tokens(u) == Some(d.prompt_tokens)
            && crate::model::source::dtype(&u.plan) == crate::model::source::dtype(&m.plan)
            && (u.plan.device, u.plan.step) == (m.plan.device, m.plan.step)
    };
    let unsplit = prefill_peer(m, context.iter().filter(same_model).copied().collect())?;
    let unsplit_prefill = unsplit.summary()?.decode()?.prefill_s.median;
    let layers = config_as_run(source)?.layers as u64;
    let link = &m.plan.link;
    let p2p = inp.link(Op::PingPong, link).or_else(|| inp.link(Op::AllReduce, link))?;
    let all_to_all = inp.link(Op::AllToAll, link).unwrap_or(p2p);
    let handoff_bytes = c.gather_bytes_modelled.unwrap_or(c.gather_bytes) as f64;
    let mut p = PrefillPrediction {
        run_id: m.run_id.clone(),
        model: source.name.clone(),
        world: m.layout.world,
        cut: c.cut,
        decodes_on: c.decodes_on,
        measured_s: d.prefill_s.median,
        measured_ring_s: c.ring.median,
        measured_handoff_s: c.gather.median,
        compute_s: unsplit_prefill / f64::from(m.layout.world),
        ring_s: ring_s(p2p, layers, m.layout.world, c.ring_bytes_modelled as f64),
        handoff_s: handoff_s(c.decodes_on, p2p, all_to_all, layers, m.layout.world, handoff_bytes),
        unsplit_run: unsplit.run_id.clone(),
        error: 0.0,
        outcome: Outcome::Within,
    };
    p.error = (p.predicted_s() - p.measured_s) / p.measured_s;
    let uneven = c.causal_imbalance.filter(|i| *i > 1.0 + 1e-9 && p.error < 0.0);
    p.outcome = judge(Some(p.error), |_| {
        oversubscribed(m).or_else(|| uneven.map(|causal_imbalance| FailedAssumption::EvenPrefillWork { causal_imbalance }))
    });
    Some(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::stats::Stats;
    use serde_json::json;

    #[test]
    fn a_run_is_predicted_only_from_the_config_it_ran_with() {
        let (source, cfg) = crate::spec::weights::model_source("gpt2", 0).unwrap();
        assert_eq!(config_as_run(&source).map(|c| c.digest), Some(cfg.digest.clone()));
        let edited = crate::spec::plan::ModelSource { config_sha256: "0".repeat(64), ..source.clone() };
        assert!(config_as_run(&edited).is_none(), "a config edited since the run");
        let gone = crate::spec::plan::ModelSource { dir: std::path::PathBuf::from("/nonexistent/parlab-model"), ..source };
        assert!(config_as_run(&gone).is_none());
    }

    /// 4 layers, width 64, 8 heads (2 KV heads of 8), feed-forward 128, vocabulary 100:
    /// attention 10 240, MLP 24 576 and norms 128 values a layer; head 6 400; 152 640 in all.
    fn llama() -> ModelShape {
        let v = json!({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 4,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100});
        shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap()
    }

    fn fit(op: Op, alpha: f64, beta: f64) -> LinkFit {
        LinkFit {
            op,
            world: 2,
            line: crate::costmodel::link::Line { intercept_s: 0.0, slope_s_per_byte: 0.0 },
            alpha_per_step_s: alpha,
            beta_bps: Some(beta),
            fit_max_bytes: 1 << 20,
            fitted_points: 5,
            heldout: Vec::new(),
        }
    }

    fn stats(median: f64) -> Stats {
        Stats { median, min: median, max: median, p99: median, n: 20 }
    }

    /// A collective row whose slowest rank waits `skew` seconds more than the op's own time.
    fn row(op: Op, world: u32, size_bytes: u64, own: f64, skew: f64) -> CollectiveRow {
        CollectiveRow {
            op,
            size_bytes,
            world,
            link: LinkName::MpiShm,
            time: stats(own + skew),
            spread: stats(0.0),
            op_time: Some(stats(own)),
            in_place_op_time: None,
            wrong: 0,
        }
    }

    /// α = 10 µs, β = 1 GB/s for every op over mpi-shm; an all-reduce skew of 1 µs at 2 and 4 ranks.
    fn inputs(rows: &[CollectiveRow]) -> Inputs<'_> {
        let fits = [Op::AllReduce, Op::AllGather, Op::AllToAll, Op::PingPong]
            .into_iter()
            .map(|op| ((op, LinkName::MpiShm), (fit(op, 1e-5, 1e9), RunId::new("fits"))))
            .collect();
        Inputs {
            bandwidths: Bandwidths { own_by_threads: BTreeMap::new(), shared_total: None, gpu: None },
            fits,
            device_fits: BTreeMap::new(),
            rows: skew_rows(rows.iter().map(|r| ("coll", r))),
            cache: CacheRates::default(),
        }
    }

    fn run(shape: &ModelShape, world: u32, sequences: u32) -> RunShape<'_> {
        RunShape { shape, dtype_bytes: 2, context: 16, world, sequences, link: LinkName::MpiShm }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-12 * b.abs().max(1e-300)
    }

    #[test]
    fn tensor_rank_streams_its_share_and_the_head_by_placement() {
        let s = llama();
        // 4 × 34 816 / 2 block values + 4 × 128 norms + 64 final norm + 64 lookup row, and the head:
        assert_eq!(tensor_rank_params(&s, 2, HeadPlacement::Split), 69_632 + 512 + 64 + 3_200 + 64);
        assert_eq!(tensor_rank_params(&s, 2, HeadPlacement::Replicated), 69_632 + 512 + 64 + 6_400 + 64);
        // One KV head of 8 per rank: 2 × 4 layers × 8 × 2 bytes = 128 bytes a token, 16 tokens.
        let t = tensor_compute_s(&s, 2, HeadPlacement::Split, 2, 16, 1e9);
        assert!(close(t, (73_472.0 * 2.0 + 2_048.0) / 1e9), "{t}");
    }

    #[test]
    fn tensor_communication_is_alpha_beta_plus_the_measured_skew() {
        let s = llama();
        let rows = [row(Op::AllReduce, 2, 128, 3e-6, 1e-6), row(Op::AllReduce, 4, 128, 5e-6, 4e-6)];
        let inp = inputs(&rows);
        let comm = tensor_comm(&inp, &run(&s, 2, 1), HeadPlacement::Split, None).unwrap();
        // 8 all-reduces of 128 bytes: 2α + 128/β each; the logits' all-gather of 200 bytes: α + 100/β.
        assert!(close(comm.alpha_beta_s, 8.0 * (2e-5 + 128e-9) + (1e-5 + 100e-9)), "{}", comm.alpha_beta_s);
        assert!(close(comm.skew_s, 8.0 * 1e-6));
        assert_eq!((comm.calls, comm.skew.as_ref().unwrap().world), (9, 2));
        // Replicated head: no all-gather. World 3 has no run: the nearest world (4, the larger at a tie) gives the skew.
        let three = tensor_comm(&inp, &run(&s, 3, 1), HeadPlacement::Replicated, None).unwrap();
        assert_eq!((three.calls, three.skew.as_ref().unwrap().world), (8, 4));
        assert!(close(three.alpha_beta_s, 8.0 * (4e-5 + 4.0 / 3.0 * 128e-9)));
        assert!(close(three.skew_s, 8.0 * 4e-6));
        // Four overlapped pieces: only the last piece (32 bytes) is exposed.
        let overlapped = tensor_comm(&inp, &run(&s, 2, 1), HeadPlacement::Replicated, Some(4)).unwrap();
        assert!(close(overlapped.alpha_beta_s, 8.0 * (2e-5 + 32e-9)));
    }

    #[test]
    fn data_replicas_under_both_hypotheses() {
        let s = llama();
        let inp = inputs(&[]);
        // 146 304 streamed values (152 640 − the untied embedding + one row) × 2 bytes + 16 tokens × 256 KV bytes.
        let bytes = 146_304.0 * 2.0 + 16.0 * 256.0;
        let own = round(&inp, &run(&s, 2, 1), &Decoder::Whole { passes: 1, replicas: 2 }, 1e9, None).unwrap();
        assert!(close(own.step_s, bytes / 1e9));
        // One memory system of 1.5 GB/s for two replicas: 0.75 GB/s each.
        let shared = round(&inp, &run(&s, 2, 1), &Decoder::Whole { passes: 1, replicas: 2 }, 0.75e9, None).unwrap();
        assert!(close(shared.step_s, bytes / 0.75e9));
        assert_eq!(matching(own.step_s, shared.step_s, 3.9e-4), Matches::One(Hypothesis::SharedMemory));
        assert_eq!(matching(own.step_s, shared.step_s, 3.0e-4), Matches::One(Hypothesis::OwnBandwidth));
        assert_eq!(matching(own.step_s, own.step_s, 1.0), Matches::Both);
        // Three sequences on one rank: three passes.
        let three = round(&inp, &run(&s, 1, 3), &Decoder::Whole { passes: 3, replicas: 1 }, 1e9, None).unwrap();
        assert_eq!(active_ranks(&Decoder::Whole { passes: 1, replicas: 2 }, 2, 1), 2);
        assert!(close(three.step_s, 3.0 * bytes / 1e9));
    }

    #[test]
    fn pipeline_round_with_sequences_in_flight() {
        let s = llama();
        let inp = inputs(&[]);
        // Two stages of two layers: (2 × 34 944 + 64) and (2 × 34 944 + 64 + 6 400) values, 2 × 64 KV bytes a token each.
        let (first, last) = ((69_952.0 * 2.0 + 2_048.0) / 1e9, (76_352.0 * 2.0 + 2_048.0) / 1e9);
        let (hop, back) = (1e-5 + 128e-9, 1e-5 + 4e-9);
        let one = round(&inp, &run(&s, 2, 1), &Decoder::Pipeline, 1e9, None).unwrap();
        assert!(close(one.step_s, first + last + hop + back), "{}", one.step_s);
        // Four sequences: four times the busiest stage with its send.
        let four = round(&inp, &run(&s, 2, 4), &Decoder::Pipeline, 1e9, None).unwrap();
        assert!(close(four.step_s, 4.0 * (last + back)), "{}", four.step_s);
        assert_eq!(active_ranks(&Decoder::Pipeline, 4, 2), 2);
        assert_eq!(active_ranks(&Decoder::Pipeline, 2, 8), 2);
    }

    #[test]
    fn expert_exchange_grows_with_the_measured_imbalance() {
        let v = json!({"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
            "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100, "num_local_experts": 8, "num_experts_per_tok": 2});
        let s = shape_from_config(&ModelConfig::from_value(v).unwrap()).unwrap();
        let rows = [row(Op::AllToAll, 4, 512, 3e-5, 2e-6)];
        let inp = inputs(&rows);
        let comm = comm_of(&inp, &run(&s, 4, 1), &Decoder::Expert { imbalance: 1.5 }, false).unwrap();
        // 2 × 64 × 2 bytes routed, × 1.5: 384 bytes; all-to-all over 4: 3α + 3/4 × 384/β; 2L = 4 of them.
        assert!(close(comm.alpha_beta_s, 4.0 * (3e-5 + 288e-9)), "{}", comm.alpha_beta_s);
        assert!(close(comm.skew_s, 4.0 * 2e-6));
        let step = round(&inp, &run(&s, 4, 1), &Decoder::Expert { imbalance: 1.5 }, 1e9, Some(&comm)).unwrap();
        assert!(close(step.comm_s, comm.total_s()), "{} {}", step.comm_s, comm.total_s());
        assert!(close(step.step_s, step.compute_s + comm.total_s()));
    }

    #[test]
    fn tolerance_decides_between_within_an_assumption_and_a_model_error() {
        assert_eq!(judge(Some(-0.2), |_| None), Outcome::Within);
        assert_eq!(judge(None, |_| None), Outcome::Within);
        assert_eq!(judge(Some(0.3), |_| None), Outcome::ModelError);
        let over = FailedAssumption::Oversubscribed { ranks: 4, threads: 1, cores: 2 };
        assert_eq!(judge(Some(-0.6), |_| Some(over.clone())), Outcome::AssumptionFailed(over));
        let u = Unsplit { achieved_bps: 5e9, roofline_bps: 20e9, run: "r".into(), error: -0.75 };
        assert!(not_stream_bound(Some(&u), -0.5).is_some());
        assert!(not_stream_bound(Some(&u), 0.5).is_none(), "an unsplit run too slow does not explain one too fast");
    }

    #[test]
    fn ring_and_hand_off_from_the_link() {
        let link = Link { alpha_s: 1e-5, beta_bps: 1e9 };
        let a2a = Link { alpha_s: 2e-5, beta_bps: 2e9 };
        // 12 layers over 4 ranks: 36 messages and 1 MB: 360 µs + 1 ms.
        assert!(close(ring_s(link, 12, 4, 1e6), 36.0 * 1e-5 + 1e-3));
        assert_eq!(ring_s(link, 12, 1, 0.0), 0.0);
        // To rank 0: 3 messages, all 3 MB received there.
        assert!(close(handoff_s(DecodeLayout::Rank0, link, a2a, 12, 4, 3e6), 3.0 * 1e-5 + 3e-3));
        // To a tensor split: 24 all-to-alls of 3 steps, each rank sending a quarter of the 3 MB
        // that leave the ranks (what stays on a rank is not counted in them).
        assert!(close(handoff_s(DecodeLayout::Tensor, link, a2a, 12, 4, 3e6), 72.0 * 2e-5 + 0.75e6 / 2e9));
    }
}
