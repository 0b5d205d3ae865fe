//! The rows of the register: each typed summary of a measured manifest joined with its
//! experiment and run, so tables, figures and caveats read one set of rows.

use crate::costmodel::link::LinkFit;
use crate::manifest::summary::{CollectiveRow, Summary};
use crate::manifest::Manifest;
use crate::spec::link::Link;
use crate::spec::schema::{Dtype, HeadPlacement, Op, Strategy};

pub use crate::manifest::stats::Stats;

/// One collective measurement: an op at a size, world and link.
#[derive(Debug, Clone, PartialEq)]
pub struct CollRow {
    /// Experiment.
    pub experiment: String,
    /// Operation.
    pub op: Op,
    /// Ranks.
    pub world: u32,
    /// Link.
    pub link: Link,
    /// Message size in bytes.
    pub size: u64,
    /// Time per iteration (slowest rank).
    pub time: Stats,
    /// Spread between ranks.
    pub spread: Stats,
    /// The op's own time (back to back, mean over ranks), where measured.
    pub op_time: Option<Stats>,
    /// The same in place (NCCL runs), where measured.
    pub in_place_op_time: Option<Stats>,
    /// Slowest rank's median minus the op's own median: the waiting a step pays.
    pub skew: Option<f64>,
    /// Algorithm bandwidth, bytes/s.
    pub algbw: f64,
    /// Bus bandwidth, bytes/s.
    pub busbw: f64,
    /// Bus bandwidth factor.
    pub factor: f64,
    /// Wrong results.
    pub wrong: u64,
    /// The op's own time launch by launch (none where it was not measured back to back, or
    /// the manifest predates it).
    pub op_rounds: OpRounds,
    /// Run identity (12 hex).
    pub run: String,
}

/// A collective's own time at one size launch by launch, as the α–β finding fits each round.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpRounds {
    /// Each launch's median, in launch order.
    pub values: Vec<f64>,
    /// When its run's first launch started and its last one ended (RFC 3339, UTC).
    pub span: (String, String),
}

impl OpRounds {
    /// The values as [`crate::manifest::rounds::in_rounds`] pairs them.
    pub fn launched(&self) -> crate::manifest::rounds::Launched<'_> {
        crate::manifest::rounds::Launched { values: &self.values, span: (&self.span.0, &self.span.1) }
    }
}

/// A collectives run's fit of one op, with the experiment, link and run it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    /// Experiment.
    pub experiment: String,
    /// Link.
    pub link: Link,
    /// The fit as collect stored it.
    pub fit: LinkFit,
    /// Run identity (12 hex).
    pub run: String,
}

/// One memory-bandwidth run.
#[derive(Debug, Clone, PartialEq)]
pub struct MembwRow {
    /// Experiment.
    pub experiment: String,
    /// Processes streaming at once.
    pub processes: u64,
    /// Threads each.
    pub threads: u64,
    /// Buffer bytes per process.
    pub buffer: u64,
    /// Aggregate bandwidth, bytes/s.
    pub aggregate: Stats,
    /// Per-process bandwidth, bytes/s.
    pub per_process: Stats,
    /// parlab's STREAM-class read: per-process bandwidth, bytes/s, where measured.
    pub stream_per_process: Option<Stats>,
    /// parlab's STREAM-class read: aggregate bandwidth, bytes/s, where measured.
    pub stream_aggregate: Option<Stats>,
    /// The roofline's source.
    pub roofline: crate::manifest::summary::RooflineSource,
    /// The roofline's per-process median, bytes/s (the higher of the two kernels').
    pub roofline_per_process: f64,
    /// Run identity (12 hex).
    pub run: String,
}

/// One decode layout.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodeRow {
    /// The prompt and the tokens generated after it (None where the workload has none).
    pub generation: Option<(crate::spec::schema::Prompt, u32)>,
    /// Experiment.
    pub experiment: String,
    /// Model name.
    pub model: String,
    /// Dtype (None: not a decode workload).
    pub dtype: Option<Dtype>,
    /// Strategy.
    pub strategy: Strategy,
    /// Ranks.
    pub world: u32,
    /// Threads per rank.
    pub threads: u32,
    /// Head placement (None: the split places none).
    pub head: Option<HeadPlacement>,
    /// Sequences in flight.
    pub sequences: u64,
    /// Link.
    pub link: Link,
    /// Step time.
    pub step: Stats,
    /// Communication time per step.
    pub comm: Stats,
    /// Compute time per step.
    pub compute: Stats,
    /// Prefill time.
    pub prefill: Stats,
    /// Tokens per second.
    pub tokens_per_s: Stats,
    /// Collectives per step.
    pub collectives: Option<u64>,
    /// The all-reduces per phase (tensor split).
    pub all_reduces: Vec<crate::manifest::summary::PhaseAllReduce>,
    /// Pieces per all-reduce started non-blocking (None: blocking).
    pub overlap: Option<u32>,
    /// How each step was issued (eager, or a replayed CUDA graph).
    pub step_mode: crate::spec::schema::StepMode,
    /// Where its ranks computed.
    pub device: crate::spec::schema::Device,
    /// A context split's prefill figures.
    pub context: Option<crate::manifest::summary::ContextPrefill>,
    /// An expert split's prefill figures.
    pub experts: Option<crate::manifest::summary::ExpertPrefill>,
    /// Exactness: tokens equal.
    pub tokens_equal: Option<bool>,
    /// Exactness: largest logit difference.
    pub max_logit_diff: Option<f64>,
    /// Exactness: smallest top-2 margin.
    pub min_top2_margin: Option<f64>,
    /// Timed repetitions.
    pub repetitions: u32,
    /// Its launches, as findings pair them round by round.
    pub rounds: Rounds,
    /// Run identity (12 hex).
    pub run: String,
}

/// A run's launches as findings pair two runs round by round.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rounds {
    /// Each launch's prefill median, in launch order (one value for one launch; none for a
    /// manifest written before prefill was recorded launch by launch).
    pub prefill: Vec<f64>,
    /// Each launch's median non-communication time of a step, likewise.
    pub compute: Vec<f64>,
    /// When its first launch started and its last one ended (RFC 3339, UTC).
    pub span: (String, String),
}

impl DecodeRow {
    /// The head placement as the register shows it (`-` where the split places none).
    pub fn head_name(&self) -> &'static str {
        self.head.map_or("-", HeadPlacement::name)
    }

    /// The dtype as the register shows it (empty where the workload has none).
    pub fn dtype_name(&self) -> &'static str {
        self.dtype.map_or("", Dtype::name)
    }

    /// Whether `other` ran the same model the same way: experiment, model, dtype, prompt and
    /// tokens generated, threads per rank, device, step mode and link (what two runs compared as
    /// a pair must share; the layout and the routing skew are the pair's to differ in).
    pub fn same_kind(&self, other: &DecodeRow) -> bool {
        (self.experiment.as_str(), self.model.as_str(), self.dtype, &self.generation, self.threads, self.device, self.step_mode, &self.link)
            == (
                other.experiment.as_str(),
                other.model.as_str(),
                other.dtype,
                &other.generation,
                other.threads,
                other.device,
                other.step_mode,
                &other.link,
            )
    }

    /// Seconds inside the all-reduces of `phase` in a repetition (slowest rank, median).
    pub fn all_reduce_total(&self, phase: crate::manifest::summary::Phase) -> Option<f64> {
        self.all_reduces.iter().find(|a| a.phase == phase).and_then(|a| a.total.map(|t| t.median))
    }

    /// The phase's time: the prompt's prefill, or one decode step.
    pub fn phase_time(&self, phase: crate::manifest::summary::Phase) -> Stats {
        match phase {
            crate::manifest::summary::Phase::Prefill => self.prefill,
            crate::manifest::summary::Phase::Decode => self.step,
        }
    }
}

/// Each overlapped tensor run with the blocking run of the same split (experiment, model,
/// dtype, strategy, world, threads, head, sequences, link, device, step mode: all but the
/// overlap), in a fixed order: (blocking, overlapped).
pub fn overlap_pairs<'r>(rows: &'r [DecodeRow]) -> Vec<(&'r DecodeRow, &'r DecodeRow)> {
    let same_split = |a: &DecodeRow, b: &DecodeRow| {
        a.same_kind(b) && (a.strategy, a.world, a.head, a.sequences) == (b.strategy, b.world, b.head, b.sequences)
    };
    let mut overlapped: Vec<&DecodeRow> = rows.iter().filter(|r| r.overlap.is_some()).collect();
    let order = |r: &&'r DecodeRow| (r.experiment.as_str(), r.world, &r.link, r.overlap, r.run.as_str());
    overlapped.sort_by(|a, b| order(a).cmp(&order(b)));
    // The first blocking run of the same split in row order.
    overlapped.into_iter().filter_map(|on| Some((rows.iter().find(|r| r.overlap.is_none() && same_split(r, on))?, on))).collect()
}

/// One dispatch measurement.
#[derive(Debug, Clone, PartialEq)]
pub struct DispatchRow {
    /// Experiment.
    pub experiment: String,
    /// Ranks.
    pub world: u32,
    /// Tokens dispatched.
    pub tokens: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time.
    pub time: Stats,
    /// Run identity (12 hex).
    pub run: String,
}

/// Every typed row of the measured (status ok) manifests, and the ok runs whose summary could not be read.
#[derive(Debug, Default)]
pub struct Facts {
    /// Collective rows.
    pub collectives: Vec<CollRow>,
    /// Fits.
    pub fits: Vec<Fit>,
    /// Memory bandwidth rows.
    pub membw: Vec<MembwRow>,
    /// Decode rows.
    pub decode: Vec<DecodeRow>,
    /// Dispatch rows.
    pub dispatch: Vec<DispatchRow>,
    /// Labels of ok runs that carried no summary the register can read.
    pub unreadable: Vec<String>,
    /// Collectives read in from other tools by `parlab import`: kept apart from the measured
    /// rows above, so no table, figure or finding of parlab's own runs mixes them in.
    pub imported: Vec<super::imported::ImportedRun>,
}

impl Facts {
    /// Reads the rows of every ok, launched manifest.
    pub fn read(list: &[Manifest]) -> Facts {
        let mut f = Facts::default();
        for (m, s) in list.iter().filter(|m| m.kind.launches_ranks()).filter_map(|m| Some((m, m.summary()?))) {
            if m.provenance.is_measured() {
                f.read_one(m, s);
            } else {
                f.imported.extend(super::imported::ImportedRun::of(m, s));
            }
        }
        f
    }

    fn read_one(&mut self, m: &Manifest, summary: &Summary) {
        let run = m.run_id.short().to_string();
        let experiment = m.experiment.clone();
        match summary {
            Summary::Collectives(c) => {
                self.collectives.extend(c.rows.iter().map(|r| coll_row(m, r)));
                let fit = |f: &LinkFit| Fit { experiment: experiment.clone(), link: m.plan.link.clone(), fit: f.clone(), run: run.clone() };
                self.fits.extend(c.fits.iter().map(fit));
            }
            Summary::Membw(b) => self.membw.push(MembwRow {
                experiment,
                processes: u64::from(b.processes),
                threads: u64::from(b.threads),
                buffer: b.buffer_bytes,
                aggregate: b.aggregate,
                per_process: b.per_process,
                stream_per_process: b.stream.as_ref().map(|s| s.per_process),
                stream_aggregate: b.stream.as_ref().map(|s| s.aggregate),
                roofline: b.roofline.source,
                roofline_per_process: b.roofline.per_process_bps,
                run,
            }),
            Summary::Decode(d) => self.decode.push(decode_row(m, d)),
            Summary::Dispatch(d) => self.dispatch.extend(d.rows.iter().map(|r| DispatchRow {
                experiment: experiment.clone(),
                world: r.world,
                tokens: r.tokens,
                bytes: r.bytes,
                time: r.time,
                run: run.clone(),
            })),
            Summary::Model(_) | Summary::Advice(_) => self.unreadable.push(format!("{} ({}): a model summary", m.plan.label(), run)),
        }
    }
}

/// The register's row of one collective row of `m`.
pub fn coll_row(m: &Manifest, r: &CollectiveRow) -> CollRow {
    CollRow {
        experiment: m.experiment.clone(),
        op: r.op,
        world: r.world,
        link: r.link.clone(),
        size: r.size_bytes,
        time: r.time,
        spread: r.spread,
        op_time: r.op_time,
        in_place_op_time: r.in_place_op_time,
        skew: r.skew_s(),
        algbw: r.algbw_bps(),
        busbw: r.busbw_bps(),
        factor: r.busbw_factor(),
        wrong: r.wrong,
        op_rounds: OpRounds {
            values: per_launch(m, &crate::nightly::figures::op_time_median(r.op, r.size_bytes)),
            span: (m.started_at.clone(), m.finished_at.clone()),
        },
        run: m.run_id.short().to_string(),
    }
}

/// `m`'s values of `figure` launch by launch (none where it recorded none, or not one for every
/// launch: their rounds would misalign).
fn per_launch(m: &Manifest, figure: &str) -> Vec<f64> {
    m.launches().and_then(|l| l.in_launch_order(figure)).map(<[f64]>::to_vec).unwrap_or_default()
}

fn decode_row(m: &Manifest, d: &crate::manifest::summary::Decode) -> DecodeRow {
    let exact = m.answer().map(|a| &a.exactness);
    let (dtype, generation) = match &m.plan.workload {
        crate::spec::plan::Workload::Decode { dtype, prompt, new_tokens, .. } => (Some(*dtype), Some((prompt.clone(), *new_tokens))),
        _ => (None, None),
    };
    DecodeRow {
        experiment: m.experiment.clone(),
        generation,
        model: m.plan.model.as_ref().map(|s| s.name.clone()).unwrap_or_default(),
        dtype,
        strategy: d.strategy,
        world: d.world,
        threads: m.plan.threads_per_rank,
        head: d.head,
        sequences: u64::from(d.sequences),
        link: m.plan.link.clone(),
        step: d.step_s,
        comm: d.comm_s,
        compute: d.compute_s,
        prefill: d.prefill_s,
        tokens_per_s: d.tokens_per_s,
        collectives: d.collectives_per_step,
        all_reduces: d.all_reduces.clone(),
        overlap: d.overlap,
        step_mode: m.plan.step,
        device: m.plan.device,
        context: d.context.as_deref().cloned(),
        experts: d.experts.as_deref().cloned(),
        tokens_equal: exact.map(|e| e.tokens_equal),
        max_logit_diff: exact.map(|e| e.max_logit_diff),
        min_top2_margin: exact.and_then(|e| e.min_top2_margin),
        repetitions: m.plan.repetitions,
        rounds: Rounds {
            prefill: per_launch(m, crate::nightly::figures::PREFILL_MEDIAN),
            compute: per_launch(m, crate::nightly::figures::COMPUTE_MEDIAN),
            span: (m.started_at.clone(), m.finished_at.clone()),
        },
        run: m.run_id.short().to_string(),
    }
}

/// The position of an op in the sweep order.
pub fn op_order(op: Op) -> usize {
    Op::ALL.iter().position(|o| *o == op).unwrap_or(usize::MAX)
}
