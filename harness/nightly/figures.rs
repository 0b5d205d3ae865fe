//! The comparable figures of a summary, named once: each with its median, which way is
//! better, and how its raw samples are read back from the run's records.

use super::Better;
use crate::collect::collectives::block_means;
use crate::collect::decode::{compute_times, tokens_per_repetition, tokens_per_s};
use crate::collect::frames::per_iteration;
use crate::collect::membw::bandwidths;
use crate::manifest::summary::Summary;
use crate::rank::figure::Figure;
use crate::rank::records::Record;
use crate::spec::schema::Op;

/// Where a figure's raw samples come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Samples {
    /// The slowest rank per iteration of a record figure at a size.
    PerIteration {
        /// The records' figure.
        figure: Figure,
        /// The records' size.
        size_bytes: u64,
    },
    /// The aggregate bandwidth per repetition of libtorch's sum.
    Bandwidth,
    /// Tokens of a repetition over its slowest rank's wall time.
    TokensPerSecond {
        /// Tokens the whole run generates per repetition.
        tokens: f64,
    },
    /// A decode step's non-communication time per iteration (slowest rank).
    Compute,
    /// A collective's own time per block of back-to-back calls (mean over ranks) at a size.
    OpBlocks {
        /// The op's block figure ([`Figure::OpBlock`]).
        figure: Figure,
        /// The records' size.
        size_bytes: u64,
    },
}

/// What a comparable figure measures, where the comparison treats kinds differently (decode
/// figures are scaled by the night's memory-bandwidth ratio).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FigureKind {
    /// A collective's time at one size.
    Collective,
    /// The aggregate memory bandwidth.
    Bandwidth,
    /// A decode step or the tokens per second of a decode run.
    Decode,
    /// An expert dispatch's time at one token count.
    Dispatch,
}

/// One comparable figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparable {
    /// What it measures.
    pub kind: FigureKind,
    /// Its name (`all-reduce 4096 B median`, `decode step median`).
    pub name: String,
    /// The summary's median.
    pub median: f64,
    /// Which way is better.
    pub better: Better,
    /// Where its samples come from.
    pub samples: Samples,
}

impl Samples {
    /// The samples from `recs`, reduced exactly as `collect` reduced them for the median.
    pub fn read(&self, recs: &[Record]) -> Vec<f64> {
        match self {
            Samples::PerIteration { figure, size_bytes } => per_iteration(recs, *figure, *size_bytes).0,
            Samples::Bandwidth => bandwidths(recs, Figure::Membw).iter().map(|b| b.1).collect(),
            // As `collect` computes them; a repetition without wall time or tokens gives no sample.
            Samples::TokensPerSecond { tokens } => tokens_per_s(recs, *tokens).into_iter().filter(|v| v.is_finite() && *v > 0.0).collect(),
            Samples::Compute => compute_times(recs),
            Samples::OpBlocks { figure, size_bytes } => block_means(recs, *figure, *size_bytes),
        }
    }
}

/// Every comparable figure of `summary` (medians only: ranges are noise).
pub fn comparable(summary: &Summary) -> Vec<Comparable> {
    let figure = |kind, name: String, median: f64, better, samples| Comparable { kind, name, median, better, samples };
    let per_iteration = |figure, size_bytes| Samples::PerIteration { figure, size_bytes };
    match summary {
        Summary::Collectives(c) => c
            .rows
            .iter()
            .map(|r| {
                let name = format!("{} {} B median", r.op.name(), r.size_bytes);
                figure(FigureKind::Collective, name, r.time.median, Better::Lower, per_iteration(Figure::Op(r.op), r.size_bytes))
            })
            .collect(),
        Summary::Membw(b) => {
            vec![figure(FigureKind::Bandwidth, AGGREGATE_BANDWIDTH_MEDIAN.into(), b.aggregate.median, Better::Higher, Samples::Bandwidth)]
        }
        Summary::Decode(d) => vec![
            figure(FigureKind::Decode, STEP_MEDIAN.into(), d.step_s.median, Better::Lower, per_iteration(Figure::DecodeStep, 0)),
            figure(
                FigureKind::Decode,
                TOKENS_PER_S_MEDIAN.into(),
                d.tokens_per_s.median,
                Better::Higher,
                Samples::TokensPerSecond { tokens: tokens_per_repetition(d.strategy, d.world, d.sequences, d.new_tokens) },
            ),
        ],
        Summary::Dispatch(d) => d
            .rows
            .iter()
            .map(|r| {
                figure(
                    FigureKind::Dispatch,
                    format!("dispatch {} tokens median", r.tokens),
                    r.time.median,
                    Better::Lower,
                    per_iteration(Figure::Dispatch, r.bytes),
                )
            })
            .collect(),
        Summary::Model(_) | Summary::Advice(_) => Vec::new(),
    }
}

/// The name of a decode run's step median (a comparable figure).
pub const STEP_MEDIAN: &str = "decode step median";

/// The name of a decode run's tokens-per-second median (a comparable figure).
pub const TOKENS_PER_S_MEDIAN: &str = "tokens per second median";

/// The name of a membw run's aggregate bandwidth median (a comparable figure).
pub const AGGREGATE_BANDWIDTH_MEDIAN: &str = "aggregate bandwidth median";

/// The name of a decode run's prefill median, recorded launch by launch for the findings that
/// pair two runs round by round (not a nightly figure: the nightly compares [`comparable`]).
pub const PREFILL_MEDIAN: &str = "prefill median";

/// The name of a decode run's step non-communication time median, recorded launch by launch
/// like [`PREFILL_MEDIAN`].
pub const COMPUTE_MEDIAN: &str = "compute median";

/// The name of a collective's own time (back to back) at `size_bytes`, recorded launch by launch
/// like [`PREFILL_MEDIAN`] (the α–β finding fits each round's launch apart).
pub fn op_time_median(op: Op, size_bytes: u64) -> String {
    format!("{} {size_bytes} B op median", op.name())
}

/// The figures recorded launch by launch besides [`comparable`] ones, for findings that pair
/// two runs' launches by round: a decode run's prefill and its step's non-communication time,
/// a collective's own time at each size where it was measured back to back.
pub fn paired(summary: &Summary) -> Vec<(String, Samples)> {
    match summary {
        Summary::Decode(_) => vec![
            (PREFILL_MEDIAN.into(), Samples::PerIteration { figure: Figure::Prefill, size_bytes: 0 }),
            (COMPUTE_MEDIAN.into(), Samples::Compute),
        ],
        Summary::Collectives(c) => c
            .rows
            .iter()
            .filter(|r| r.op_time.is_some())
            .map(|r| (op_time_median(r.op, r.size_bytes), Samples::OpBlocks { figure: Figure::OpBlock(r.op), size_bytes: r.size_bytes }))
            .collect(),
        _ => Vec::new(),
    }
}
