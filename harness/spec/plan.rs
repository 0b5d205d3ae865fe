//! A RunPlan: one expanded run, everything a rank needs, and its two identities.

use super::link::{Backend, Link};
use super::schema::*;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A half-open range `[start, end)` of heads, layers, columns, vocabulary rows or experts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Span {
    /// First index held.
    pub start: u32,
    /// One past the last index held.
    pub end: u32,
}

impl Span {
    /// `[start, end)`.
    pub fn new(start: u32, end: u32) -> Self {
        Span { start, end }
    }

    /// How many indices the span holds.
    pub fn len(&self) -> u32 {
        self.end - self.start
    }

    /// True when the span holds nothing.
    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// What one rank holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct RankShare {
    /// The rank.
    pub rank: u32,
    /// Attention heads, in every layer it holds.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub heads: Option<Span>,
    /// Key/value heads, in every layer it holds, where the model has fewer than its query heads
    /// (grouped-query attention): the ones its query heads read, replicated across ranks once
    /// the world exceeds them.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub kv_heads: Option<Span>,
    /// Columns of the feed-forward width.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ffn: Option<Span>,
    /// Transformer layers.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub layers: Option<Span>,
    /// Rows of the output head (vocabulary shard).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vocab: Option<Span>,
    /// Experts of each mixture layer.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub experts: Option<Span>,
    /// Prompt positions whose prefill this rank computes (context parallelism).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tokens: Option<Span>,
    /// A zig-zag context split's second chunk of prompt positions (after `tokens`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tokens_late: Option<Span>,
}

impl RankShare {
    /// The prompt positions this rank prefills, chunk by chunk in position order (context).
    pub fn prompt_chunks(&self) -> Vec<Span> {
        self.tokens.into_iter().chain(self.tokens_late).collect()
    }
}

/// The parallel layout of a run: strategy, world size and what each rank holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Layout {
    /// The strategy.
    pub strategy: Strategy,
    /// Number of ranks.
    pub world: u32,
    /// Output head placement (decode runs).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub head: Option<HeadPlacement>,
    /// Sequences in flight (pipeline) or per replica (data).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sequences: Option<u32>,
    /// Pieces each all-reduce of a tensor split is cut into, each started non-blocking
    /// (`MPI_Iallreduce`) while the next piece computes; absent: one blocking all-reduce.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub overlap: Option<u32>,
    /// The layout a context split decodes on, where it is not rank 0 alone (`decode_strategy`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub decode: Option<DecodeSplit>,
    /// One entry per rank, in rank order.
    pub ranks: Vec<RankShare>,
}

/// What a layout holds beyond its strategy and world, as `parlab plan` and `parlab audit` name
/// it (each in its own words: [`LayoutDetail::key_value`], [`LayoutDetail::words`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutDetail {
    /// The output head's placement (a tensor split of 2 ranks or more).
    Head(HeadPlacement),
    /// A context split's prompt cut into zig-zag blocks.
    ZigzagBlocks,
    /// The split a context split decodes on, and its head.
    Decode(Strategy, HeadPlacement),
    /// Pieces each all-reduce is cut into and overlapped.
    Overlap(u32),
    /// Sequences in flight or per replica.
    Sequences(u32),
}

impl LayoutDetail {
    /// As `parlab plan` prints it: `head=split`, `blocks=zigzag`, `overlap=4`, `seqs=2`.
    pub fn key_value(&self) -> String {
        match self {
            LayoutDetail::Head(h) => format!("head={}", h.name()),
            LayoutDetail::ZigzagBlocks => "blocks=zigzag".into(),
            LayoutDetail::Decode(s, h) => format!("decode={} head={}", s.name(), h.name()),
            LayoutDetail::Overlap(pieces) => format!("overlap={pieces}"),
            LayoutDetail::Sequences(n) => format!("seqs={n}"),
        }
    }

    /// As the audit says it, or nothing where it is one sequence: `head split`, `zigzag
    /// blocks`, `decoding tensor head split`, `overlap 4`, `2 sequences`.
    pub fn words(&self) -> Option<String> {
        match self {
            LayoutDetail::Head(h) => Some(format!("head {}", h.name())),
            LayoutDetail::ZigzagBlocks => Some("zigzag blocks".into()),
            LayoutDetail::Decode(s, h) => Some(format!("decoding {} head {}", s.name(), h.name())),
            LayoutDetail::Overlap(pieces) => Some(format!("overlap {pieces}")),
            LayoutDetail::Sequences(1) => None,
            LayoutDetail::Sequences(n) => Some(format!("{n} sequences")),
        }
    }
}

impl Layout {
    /// What the layout holds beyond its strategy and world, in that order: the head placement
    /// (of a split over 2 ranks or more: a manifest written before may name one at world 1),
    /// zig-zag blocks, the decode split, overlap pieces, sequences.
    pub fn details(&self) -> Vec<LayoutDetail> {
        let mut details: Vec<LayoutDetail> = self.head.filter(|_| self.world > 1).map(LayoutDetail::Head).into_iter().collect();
        if self.ranks.iter().any(|s| s.tokens_late.is_some()) {
            details.push(LayoutDetail::ZigzagBlocks);
        }
        details.extend(self.decode.as_ref().map(|d| LayoutDetail::Decode(d.strategy, d.head)));
        details.extend(self.overlap.map(LayoutDetail::Overlap));
        details.extend(self.sequences.map(LayoutDetail::Sequences));
        details
    }

    /// Why this layout cannot be run by `world` ranks, if it cannot: one share per rank, in rank
    /// order, and an expert split's experts handed out in order without a gap (a plan file edited
    /// by hand is refused at a rank's start rather than failing inside a step).
    pub fn unrunnable(&self, world: u32) -> Option<String> {
        let shares = std::iter::once(("layout", &self.ranks)).chain(self.decode.as_ref().map(|d| ("decode layout", &d.ranks)));
        for (what, ranks) in shares {
            let ranked = ranks.iter().enumerate().all(|(i, r)| r.rank as usize == i);
            if ranks.len() != world as usize || !ranked {
                return Some(format!(
                    "the plan's {what} lists ranks {:?}, not 0..{world} in order",
                    ranks.iter().map(|r| r.rank).collect::<Vec<_>>()
                ));
            }
        }
        if self.strategy == Strategy::Expert {
            let spans: Vec<Option<Span>> = self.ranks.iter().map(|r| r.experts).collect();
            let tiled = spans.iter().try_fold(0, |next, s| s.filter(|s| s.start == next).map(|s| s.end));
            if tiled.is_none() {
                return Some(format!("the plan's expert split {spans:?} does not hand out the experts in order from 0 without a gap"));
            }
        }
        None
    }
}

/// The split a run decodes on when it differs from its prefill's (a context split's tensor decode).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct DecodeSplit {
    /// The decode strategy.
    pub strategy: Strategy,
    /// Output head placement of the decode split.
    pub head: HeadPlacement,
    /// What each rank holds while decoding, in rank order.
    pub ranks: Vec<RankShare>,
}

/// Where a run's weights come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
#[serde(rename_all = "snake_case")]
pub enum Weights {
    /// A `model.safetensors` file, identified by its sha256.
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// sha256 of its bytes.
        sha256: String,
    },
    /// A checkpoint parlab generates from a seed (`parlab model init`).
    Seeded {
        /// The generator's seed.
        seed: u64,
        /// The generator's version: a change of recipe changes the identity.
        generator: String,
        /// Where the generated checkpoint lives once made.
        path: PathBuf,
    },
}

/// The model a run uses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct ModelSource {
    /// The spec's name for it.
    pub name: String,
    /// The folder holding config.json.
    pub dir: PathBuf,
    /// sha256 of the canonical config.json.
    pub config_sha256: String,
    /// The weights.
    pub weights: Weights,
}

/// The workload's own parameters, by kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Workload {
    /// Collective sweeps.
    Collectives(CollectiveParams),
    /// Memory streaming.
    Membw(MembwParams),
    /// Split GPT-2 decoding.
    Decode {
        /// The prompt.
        prompt: Prompt,
        /// Tokens to generate.
        new_tokens: u32,
        /// The dtype.
        dtype: Dtype,
        /// A mixture model's routing skew (absent: 0, the router as the checkpoint has it).
        #[serde(default, skip_serializing_if = "is_zero")]
        routing_skew: f64,
    },
    /// Expert dispatch all-to-all.
    Dispatch(DispatchParams),
    /// Cost model tables (one run per spec; axes are the table's rows).
    Model {
        /// The cost model's inputs.
        params: ModelParams,
        /// Models (names or folders).
        models: Vec<String>,
        /// Strategies.
        strategies: Vec<Strategy>,
        /// World sizes.
        worlds: Vec<u32>,
        /// Links from the catalogue.
        links: Vec<String>,
        /// Sequences in flight.
        sequences: Vec<u32>,
        /// Dtypes.
        dtypes: Vec<Dtype>,
    },
    /// One `parlab advise` question (one run per spec; the advice enumerates the layouts).
    Advise {
        /// The model (a name or a folder).
        model: String,
        /// The machine, the traffic and the expected answer.
        params: AdviseParams,
    },
}

impl Workload {
    /// The kind of experiment this workload belongs to.
    pub fn kind(&self) -> Kind {
        match self {
            Workload::Collectives(_) => Kind::Collectives,
            Workload::Membw(_) => Kind::Membw,
            Workload::Decode { .. } => Kind::Decode,
            Workload::Dispatch(_) => Kind::Dispatch,
            Workload::Model { .. } => Kind::Model,
            Workload::Advise { .. } => Kind::Advise,
        }
    }
}

fn one_launch() -> u32 {
    1
}

fn is_one_launch(n: &u32) -> bool {
    *n == 1
}

fn is_eager(s: &StepMode) -> bool {
    *s == StepMode::Eager
}

fn is_cpu(d: &Device) -> bool {
    *d == Device::Cpu
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// One expanded run: what to launch, where its results go, and its identities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunPlan {
    /// The experiment's name.
    pub experiment: String,
    /// Position of this run in the experiment's expansion (0-based).
    pub index: usize,
    /// The spec file.
    pub spec_path: PathBuf,
    /// sha256 of the spec file.
    pub spec_sha256: String,
    /// sha256 of everything that can change what is computed or measured.
    pub run_id: crate::identity::RunId,
    /// sha256 of the same without layout, link, backend and repetitions.
    pub answer_id: crate::identity::AnswerId,
    /// The model, for decode and model runs.
    pub model: Option<ModelSource>,
    /// The link (`mpi-shm`, `mpi-tcp`, an NCCL setting; none for a `kind: model` run).
    pub link: Link,
    /// The communication backend.
    pub backend: Backend,
    /// Threads each rank may use.
    pub threads_per_rank: u32,
    /// Timed repetitions.
    pub repetitions: u32,
    /// Warm-up repetitions or iterations.
    pub warmup: u32,
    /// Independent launches of the run, each a fresh `mpirun` (absent in plans before launches: 1).
    ///
    /// Not in the run identity: it says how many times the same thing is measured, not what is
    /// measured (repetitions and warm-up are inside one launch and change what that launch's
    /// process state has seen, so they are). A baseline night measured with k launches and a night
    /// with another k share their run identities and are compared figure by figure; the run
    /// cache re-measures a cached run that has fewer launches than asked.
    #[serde(default = "one_launch", skip_serializing_if = "is_one_launch")]
    pub launches: u32,
    /// Wall-clock limit in seconds.
    pub timeout_s: f64,
    /// What the machine must have.
    pub requires: Requires,
    /// Where each rank computes (absent in plans written before devices: the CPU).
    #[serde(default, skip_serializing_if = "is_cpu")]
    pub device: Device,
    /// How a CUDA decode step is issued (absent in plans written before graphs: eager).
    #[serde(default, skip_serializing_if = "is_eager")]
    pub step: StepMode,
    /// mpirun or srun.
    pub launcher: Launcher,
    /// mpirun hostfile.
    pub hostfile: Option<PathBuf>,
    /// sha256 of the hostfile's text when the suite was planned (in the run identity); a launch
    /// refuses a hostfile that changed since (absent without a hostfile, and in plans written
    /// before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostfile_sha256: Option<String>,
    /// The network TCP between ranks uses (`btl_tcp_if_include`), if the spec names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// The workload.
    pub workload: Workload,
    /// The parallel layout.
    pub layout: Layout,
}

impl RunPlan {
    /// What it measures: its workload's kind.
    pub fn kind(&self) -> Kind {
        self.workload.kind()
    }

    /// The first 12 hex digits of the run identity, as the register shows it.
    pub fn short_id(&self) -> &str {
        self.run_id.short()
    }

    /// A one-line description: `decode-tensor #3 tensor world=3 mpi-shm` (` cuda` appended
    /// for a run on GPUs); a run of arithmetic names its kind: `modelled #0 model`.
    pub fn label(&self) -> String {
        if !self.kind().launches_ranks() {
            return format!("{} #{} {}", self.experiment, self.index, self.kind().name());
        }
        let mut device = if self.device == Device::Cpu { String::new() } else { format!(" {}", self.device.name()) };
        if self.step != StepMode::Eager {
            device.push_str(&format!(" step={}", self.step.name()));
        }
        format!("{} #{} {} world={} {}{device}", self.experiment, self.index, self.layout.strategy.name(), self.layout.world, self.link)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(world: u32, head: Option<HeadPlacement>, sequences: Option<u32>, overlap: Option<u32>) -> Layout {
        let ranks = super::super::layout::bare(world);
        Layout { strategy: Strategy::Tensor, world, head, sequences, overlap, decode: None, ranks }
    }

    #[test]
    fn a_layouts_details_name_what_plan_and_audit_show_in_one_order() {
        let l = layout(2, Some(HeadPlacement::Split), Some(1), Some(4));
        assert_eq!(l.details(), [LayoutDetail::Head(HeadPlacement::Split), LayoutDetail::Overlap(4), LayoutDetail::Sequences(1)]);
        let plan: Vec<String> = l.details().iter().map(LayoutDetail::key_value).collect();
        assert_eq!(plan, ["head=split", "overlap=4", "seqs=1"]);
        let words: Vec<String> = l.details().iter().filter_map(LayoutDetail::words).collect();
        assert_eq!(words, ["head split", "overlap 4"], "one sequence goes without saying");
        // A manifest written before the head left world 1's identity names one: nothing to place.
        assert_eq!(layout(1, Some(HeadPlacement::Split), None, None).details(), []);
        assert_eq!(LayoutDetail::Sequences(4).words().as_deref(), Some("4 sequences"));
    }
}
