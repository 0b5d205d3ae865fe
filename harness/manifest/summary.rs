//! A run's summary, typed: one variant per kind, written by `collect` (or the cost model)
//! and read as these values by the register, the findings, the predictions and nightly.
//!
//! In the manifest's JSON the variant is the one key of `summary` (`{"decode": {...}}`);
//! field names carry their SI unit (`_s`, `_bytes`, `_Bps`).

use super::fit::LinkFit;
use crate::manifest::stats::Stats;
use crate::spec::schema::{ContextBlocks, DecodeLayout, HeadPlacement, Op, Strategy};
use crate::table::Table;
use serde::{Deserialize, Serialize};

/// What a run measured (or, for `kind: model`, computed), by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Summary {
    /// Collective times per op and size, and the α–β fit of each op.
    Collectives(Collectives),
    /// Memory bandwidth of both read kernels and the roofline they give.
    Membw(Membw),
    /// Decode step, communication, compute, prefill and rate.
    Decode(Decode),
    /// The expert all-to-all there and back, per token count.
    Dispatch(Dispatch),
    /// The cost model's tables.
    Model(ModelTables),
    /// `parlab advise`'s answer to a `kind: advise` question.
    Advice(Advised),
}

impl Summary {
    /// The collectives summary, if this is one.
    pub fn collectives(&self) -> Option<&Collectives> {
        match self {
            Summary::Collectives(c) => Some(c),
            _ => None,
        }
    }

    /// The memory-bandwidth summary, if this is one.
    pub fn membw(&self) -> Option<&Membw> {
        match self {
            Summary::Membw(m) => Some(m),
            _ => None,
        }
    }

    /// The decode summary, if this is one.
    pub fn decode(&self) -> Option<&Decode> {
        match self {
            Summary::Decode(d) => Some(d),
            _ => None,
        }
    }

    /// The dispatch summary, if this is one.
    pub fn dispatch(&self) -> Option<&Dispatch> {
        match self {
            Summary::Dispatch(d) => Some(d),
            _ => None,
        }
    }

    /// The cost model's tables, if this is a model run's summary.
    pub fn model(&self) -> Option<&ModelTables> {
        match self {
            Summary::Model(m) => Some(m),
            _ => None,
        }
    }

    /// The advice, if this is an advise run's summary.
    pub fn advice(&self) -> Option<&Advised> {
        match self {
            Summary::Advice(a) => Some(a),
            _ => None,
        }
    }
}

/// A collectives run: one row per op and size, in the order they ran, and one fit per op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collectives {
    /// Per op and size.
    pub rows: Vec<CollectiveRow>,
    /// The α–β fit of each op (`costmodel::link::fit_collective`), where it could be fitted.
    pub fits: Vec<LinkFit>,
    /// How the times were taken.
    pub timing: String,
    /// What the fits were fitted on.
    pub fit_method: String,
}

impl Collectives {
    /// The fit of `op`, if there is one.
    pub fn fit(&self, op: Op) -> Option<&LinkFit> {
        self.fits.iter().find(|f| f.op == op)
    }
}

/// One op at one size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveRow {
    /// The op.
    pub op: Op,
    /// Bytes (nccl-tests' size convention).
    pub size_bytes: u64,
    /// Ranks.
    pub world: u32,
    /// Link (any name an older manifest or an import holds is kept).
    pub link: crate::spec::link::Link,
    /// Per iteration (barrier before each call), the slowest rank's time, waiting included.
    #[serde(rename = "time_s")]
    pub time: Stats,
    /// Per iteration, the slowest rank's time minus the fastest's.
    #[serde(rename = "rank_spread_s")]
    pub spread: Stats,
    /// The op's own time: blocks of calls back to back, block / calls, mean over ranks.
    #[serde(rename = "op_time_s", default, skip_serializing_if = "Option::is_none")]
    pub op_time: Option<Stats>,
    /// The same op in place (the result written over the input; NCCL and nccl-tests time
    /// both), as `op_time`: blocks of calls back to back. None where only out of place ran.
    #[serde(rename = "in_place_op_time_s", default, skip_serializing_if = "Option::is_none")]
    pub in_place_op_time: Option<Stats>,
    /// Wrong results seen by the check.
    pub wrong: u64,
}

impl CollectiveRow {
    /// The time α and β are fitted on: the op's own time where measured, else the slowest rank's.
    pub fn fit_time(&self) -> f64 {
        self.op_time.map_or(self.time.median, |s| s.median)
    }

    /// Median slowest-rank time minus the median own time: the waiting a step pays.
    pub fn skew_s(&self) -> Option<f64> {
        self.op_time.map(|o| self.time.median - o.median)
    }

    /// nccl-tests' bus bandwidth factor of the op at this world.
    pub fn busbw_factor(&self) -> f64 {
        self.op.busbw_factor(self.world)
    }

    /// Algorithm bandwidth of the slowest-rank median, bytes/s.
    pub fn algbw_bps(&self) -> f64 {
        self.size_bytes as f64 / self.time.median
    }

    /// Bus bandwidth of the slowest-rank median, bytes/s.
    pub fn busbw_bps(&self) -> f64 {
        self.algbw_bps() * self.busbw_factor()
    }
}

/// A memory-bandwidth run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Membw {
    /// Processes streaming at once.
    pub processes: u32,
    /// Threads per process.
    pub threads: u32,
    /// Buffer bytes per process.
    pub buffer_bytes: u64,
    /// libtorch's sum: all buffers over the slowest rank's time, per repetition.
    #[serde(rename = "aggregate_Bps")]
    pub aggregate: Stats,
    /// libtorch's sum: each rank's bytes/s.
    #[serde(rename = "per_process_Bps")]
    pub per_process: Stats,
    /// How the libtorch sum was timed.
    pub method: String,
    /// parlab's STREAM-class read, where it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<StreamRead>,
    /// The higher of the two kernels: the bandwidth a decode step is judged against.
    pub roofline: Roofline,
}

/// parlab's STREAM-class read of the same buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamRead {
    /// All buffers over the slowest rank's time, per repetition.
    #[serde(rename = "aggregate_Bps")]
    pub aggregate: Stats,
    /// Each rank's bytes/s.
    #[serde(rename = "per_process_Bps")]
    pub per_process: Stats,
    /// The kernel that read, as rank 0 of each launch recorded it (`model::matvec::Kernel::name`;
    /// several launches' distinct names joined by `, `; `unrecorded` where none was written).
    pub kernel: String,
    /// How it was timed.
    pub method: String,
}

/// Which read kernel a roofline comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RooflineSource {
    /// parlab's STREAM-class read.
    Stream,
    /// libtorch's sum.
    TorchSum,
}

crate::named!(RooflineSource { Stream => "stream", TorchSum => "torch-sum" });

/// The bandwidth a decode step is judged against, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Roofline {
    /// The kernel with the higher per-process median.
    pub source: RooflineSource,
    /// Its per-process median, bytes/s.
    #[serde(rename = "per_process_Bps")]
    pub per_process_bps: f64,
    /// Its aggregate median, bytes/s.
    #[serde(rename = "aggregate_Bps")]
    pub aggregate_bps: f64,
    /// The other kernel's per-process median, where it ran.
    #[serde(rename = "other_per_process_Bps")]
    pub other_per_process_bps: Option<f64>,
}

/// A decode run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decode {
    /// The split.
    pub strategy: Strategy,
    /// Ranks.
    pub world: u32,
    /// Sequences in flight.
    pub sequences: u32,
    /// Where the output head lives (tensor split).
    pub head: Option<HeadPlacement>,
    /// Tokens generated per sequence.
    pub new_tokens: u32,
    /// Prompt tokens.
    pub prompt_tokens: u32,
    /// Threads per rank.
    pub threads_per_rank: u32,
    /// One decode round, slowest rank.
    pub step_s: Stats,
    /// Communication per round, slowest rank.
    pub comm_s: Stats,
    /// Compute per round (step minus communication), slowest rank.
    pub compute_s: Stats,
    /// Prefill of the prompt.
    pub prefill_s: Stats,
    /// Generated tokens per second of wall time, per repetition.
    pub tokens_per_s: Stats,
    /// Collectives each step issues.
    pub collectives_per_step: Option<u64>,
    /// Weight bytes read to advance one sequence by one token.
    pub streamed_bytes: u64,
    /// Bytes of keys and values each rank's cache stores per token of one sequence, in rank
    /// order (empty in manifests written before it was recorded).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kv_cache_bytes_per_token: Vec<u64>,
    /// The matvec kernel that ran (absent where libtorch computed every step: a GPU).
    pub matvec_kernel: Option<crate::model::matvec::Kernel>,
    /// The GPU the ranks computed on and its element type (`cuda:0 bfloat16`), with how many
    /// ranks shared one GPU; absent for a run on the CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
    /// What the captured CUDA graph of a `step: graph` run holds (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_nodes: Option<crate::cuda_graph::GraphNodes>,
    /// The CPU features rank 0 saw where it computed on the host (empty on a GPU).
    pub cpu_features: Vec<String>,
    /// What a step is.
    pub step_definition: String,
    /// What `streamed_bytes` counts.
    pub streamed_bytes_definition: String,
    /// A context split's prefill: the ring and the gather (absent for other strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Box<ContextPrefill>>,
    /// An expert split's prefill: routing, imbalance and each rank's time (absent for other strategies).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experts: Option<Box<ExpertPrefill>>,
    /// Pieces each all-reduce was cut into and started non-blocking (absent: blocking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<u32>,
    /// The all-reduces per phase (tensor split over several ranks; empty otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub all_reduces: Vec<PhaseAllReduce>,
}

/// A context-parallel prefill: the prompt's blocks, the key/value ring and the hand-off of the
/// cache to the decode layout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextPrefill {
    /// Prompt tokens of each rank's block, in rank order.
    pub blocks: Vec<u32>,
    /// How the prompt was cut into the blocks (absent in older manifests: contiguous).
    #[serde(default = "contiguous")]
    pub cut: ContextBlocks,
    /// The causal attention work (query-key pairs a causal mask keeps) of the busiest rank's
    /// block over the mean, from the layout (1: even).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub causal_imbalance: Option<f64>,
    /// Key/value bytes the rank that sent most sent around the ring in a repetition.
    pub ring_bytes: u64,
    /// What the ring algorithm must send, from config.json and the layout: keys and values
    /// (2 · layers · key/value heads · head width · 4 bytes per token: the width only without
    /// grouped-query attention) of every block but the next rank's, per sequence.
    pub ring_bytes_modelled: u64,
    /// Seconds inside the ring in a repetition (waiting for neighbours included), slowest rank.
    #[serde(rename = "ring_s")]
    pub ring: Stats,
    /// The layout the run decodes on after the ring (absent in older manifests: rank 0).
    #[serde(default = "rank0")]
    pub decodes_on: DecodeLayout,
    /// Key/value bytes all ranks sent to hand the cache to that layout after the ring, in a
    /// repetition: the gather to rank 0, or the all-to-all that leaves each rank its heads.
    pub gather_bytes: u64,
    /// What that hand-off must send, from config.json and the layout (2 · layers · head_dim · 4
    /// bytes per token and key/value head): rank 0 alone, every other block with all key/value
    /// heads; a tensor decode, every block with the key/value heads every other rank holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gather_bytes_modelled: Option<u64>,
    /// Seconds of that hand-off in a repetition, slowest rank.
    #[serde(rename = "gather_s")]
    pub gather: Stats,
}

fn rank0() -> DecodeLayout {
    DecodeLayout::Rank0
}

fn contiguous() -> ContextBlocks {
    ContextBlocks::Contiguous
}

/// An expert-parallel prefill: where the router sent the prompt's tokens and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpertPrefill {
    /// Experts of each mixture layer on each rank, in rank order.
    pub experts: Vec<u32>,
    /// Experts each token is sent to.
    pub top_k: u32,
    /// The run's routing skew.
    pub routing_skew: f64,
    /// Per mixture layer: the (token, expert) pairs each rank's experts computed in prefill.
    pub assigned: Vec<Vec<u64>>,
    /// Per mixture layer: the busiest rank's pairs over the mean (1: even).
    pub imbalance: Vec<f64>,
    /// Per rank: seconds computing its experts in a prefill (median over repetitions).
    #[serde(rename = "compute_s")]
    pub compute: Vec<f64>,
    /// Per rank: seconds inside the dispatch and combine all-to-alls in a prefill (median),
    /// waiting for the busiest rank included.
    #[serde(rename = "exchange_s")]
    pub exchange: Vec<f64>,
    /// Bytes the rank that sent most sent to other ranks in a prefill's all-to-alls.
    pub sent_bytes: u64,
    /// What even routing would send from each rank: tokens · top_k · (p − 1)/p² pairs per layer,
    /// each a row out (width + 1 values, the expert's index first) and a row back, 4 bytes a value.
    pub sent_bytes_even: u64,
}

/// The busiest rank's (token, expert) pairs over the mean (1 when even; 0 without pairs).
pub fn imbalance(per_rank: &[u64]) -> f64 {
    // Summed wide: a manifest's counts (each at most 2^60) could overflow a u64 together.
    let total: u128 = per_rank.iter().map(|&n| u128::from(n)).sum();
    if total == 0 {
        return 0.0;
    }
    let mean = total as f64 / per_rank.len() as f64;
    per_rank.iter().copied().max().unwrap_or(0) as f64 / mean
}

impl ExpertPrefill {
    /// Per rank: the pairs its experts computed, every layer together.
    pub fn pairs_per_rank(&self) -> Vec<u64> {
        (0..self.experts.len())
            .map(|rank| self.assigned.iter().map(|l| l.get(rank).copied().unwrap_or(0)).fold(0u64, u64::saturating_add))
            .collect()
    }

    /// The busiest rank's pairs over the mean, every layer together.
    pub fn overall_imbalance(&self) -> f64 {
        imbalance(&self.pairs_per_rank())
    }

    /// The ranks' mean expert seconds times the imbalance: the busiest rank's time if time
    /// goes with pairs.
    pub fn predicted_busiest_compute(&self) -> f64 {
        self.compute.iter().sum::<f64>() / self.compute.len().max(1) as f64 * self.overall_imbalance()
    }

    /// The busiest rank's expert seconds.
    pub fn busiest_compute(&self) -> f64 {
        self.compute.iter().copied().fold(0.0, f64::max)
    }
}

/// Where in a generation a collective ran: over the prompt's rows, or in a one-row decode step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// The prompt, all its rows at once: messages of prompt length × width.
    Prefill,
    /// One token per sequence: messages of one row.
    Decode,
}

crate::named!(Phase { Prefill => "prefill", Decode => "decode" });

/// A tensor split's all-reduces in one phase: message size and the time of one call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseAllReduce {
    /// Prefill or decode.
    pub phase: Phase,
    /// Bytes of one all-reduce's message.
    pub size_bytes: u64,
    /// All-reduces the phase makes in one repetition.
    pub calls: u64,
    /// One call on average over a repetition (waiting for the other ranks included), slowest
    /// rank; one sample per repetition.
    #[serde(rename = "time_s")]
    pub time: Stats,
    /// The same on the fastest rank: the rank that arrives last waits least, so this is the
    /// closest a running split gets to the call alone.
    #[serde(rename = "fastest_rank_time_s")]
    pub fastest_rank: Stats,
    /// Seconds inside all of the phase's all-reduces in a repetition, slowest rank: with
    /// `overlap`, only what the computation did not hide (absent in older manifests).
    #[serde(rename = "total_s", default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Stats>,
}

/// A dispatch run: the expert all-to-all per token count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dispatch {
    /// Per token count.
    pub rows: Vec<DispatchRow>,
    /// How the times were taken.
    pub timing: String,
}

/// One token count of a dispatch run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchRow {
    /// Tokens each rank dispatches.
    pub tokens: u64,
    /// Bytes each rank sends.
    pub bytes: u64,
    /// Ranks.
    pub world: u32,
    /// Experts per token.
    pub top_k: u32,
    /// Hidden width.
    pub hidden: u32,
    /// Slowest rank per iteration.
    #[serde(rename = "time_s")]
    pub time: Stats,
    /// Slowest minus fastest rank per iteration.
    #[serde(rename = "rank_spread_s")]
    pub spread: Stats,
}

/// The cost model's tables of a `kind: model` run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelTables {
    /// The tables, typed cells.
    pub tables: Vec<Table>,
}

/// The answer of a `kind: advise` run: the layouts by label, best first, those refused, and
/// both as tables of typed cells for the register.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Advised {
    /// Labels of the layouts that can run (`TP=2 x DP=2`), best first.
    pub ranked: Vec<String>,
    /// The layouts refused, with why.
    pub rejected: Vec<RefusedLayout>,
    /// The ranking and the refusals as the register shows them.
    pub tables: Vec<Table>,
}

/// A layout the advice refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefusedLayout {
    /// Its label.
    pub label: String,
    /// Why, in words.
    pub why: String,
}

#[cfg(test)]
mod tests {
    use super::imbalance;

    #[test]
    fn imbalance_is_the_busiest_rank_over_the_mean() {
        assert_eq!(imbalance(&[4, 4]), 1.0);
        assert_eq!(imbalance(&[6, 2]), 1.5);
        assert_eq!(imbalance(&[8, 0, 0, 0]), 4.0);
        assert_eq!(imbalance(&[0, 0]), 0.0);
        // Counts a manifest may hold (2^60 each) that a u64 sum would wrap.
        assert_eq!(imbalance(&[1 << 60; 32]), 1.0);
    }
}
