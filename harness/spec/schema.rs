//! The typed form of an experiment spec, after validation.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// What an experiment measures or computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Collective operations timed alone over a sweep of message sizes.
    Collectives,
    /// Memory bandwidth: N processes stream their own buffers at once.
    Membw,
    /// Split GPT-2 decoding under a parallel strategy, checked for exactness.
    Decode,
    /// Expert-parallel token dispatch: the all-to-all of a mixture layer.
    Dispatch,
    /// The cost model's arithmetic: no processes are launched.
    Model,
    /// `parlab advise`'s ranking of the layouts of one model on one machine (arithmetic).
    Advise,
}

crate::named!(Kind {
    Collectives => "collectives",
    Membw => "membw",
    Decode => "decode",
    Dispatch => "dispatch",
    Model => "model",
    Advise => "advise",
});

impl Kind {
    /// True for a kind whose runs launch rank processes; false for arithmetic (model, advise).
    pub fn launches_ranks(self) -> bool {
        !matches!(self, Kind::Model | Kind::Advise)
    }

    /// The strategies that make sense for this kind.
    pub fn strategies(self) -> &'static [Strategy] {
        match self {
            Kind::Collectives | Kind::Membw => &[Strategy::Data],
            Kind::Decode => &[Strategy::Data, Strategy::Tensor, Strategy::Pipeline, Strategy::Expert, Strategy::Context],
            Kind::Dispatch => &[Strategy::Expert],
            Kind::Model => &[Strategy::Data, Strategy::Tensor, Strategy::Pipeline, Strategy::Expert],
            Kind::Advise => &[],
        }
    }
}

/// How a model's work is split across ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Strategy {
    /// Whole replicas, each serving its own sequences.
    Data,
    /// Each layer split by heads and feed-forward width (Megatron).
    Tensor,
    /// Layers split into stages.
    Pipeline,
    /// Experts of a mixture layer placed on different ranks.
    Expert,
    /// The prompt's tokens split over the ranks for prefill (ring attention); decode goes on as
    /// `decode_strategy` names (rank 0 alone, or a tensor split).
    Context,
}

crate::named!(Strategy { Data => "data", Tensor => "tensor", Pipeline => "pipeline", Expert => "expert", Context => "context" });

impl Prompt {
    /// Number of prompt tokens.
    pub fn len(&self) -> u32 {
        match self {
            Prompt::Tokens(ids) => ids.len() as u32,
            Prompt::Seeded { length, .. } => *length,
        }
    }

    /// True for a prompt of no tokens (validation refuses those).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Where the output head (the vocabulary projection) lives under tensor parallelism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HeadPlacement {
    /// Split along the vocabulary; logits are all-gathered.
    Split,
    /// A full copy on every rank.
    Replicated,
}

crate::named!(HeadPlacement { Split => "split", Replicated => "replicated" });

/// The layout a context split decodes on after its ring prefill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DecodeLayout {
    /// Every block's cache rows gathered to rank 0, which decodes alone with the whole model.
    Rank0,
    /// Each rank keeps its tensor split's heads of every block (an all-to-all of the cache)
    /// and all ranks decode as a tensor split.
    Tensor,
}

crate::named!(DecodeLayout { Rank0 => "rank0", Tensor => "tensor" });

/// How a context split cuts the prompt into the ranks' blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContextBlocks {
    /// One contiguous block per rank, in rank order (the last rank's queries see every key).
    Contiguous,
    /// The prompt in 2p chunks; rank r holds chunks r and 2p − 1 − r, so every rank has as much
    /// causal attention work as the others.
    Zigzag,
}

crate::named!(ContextBlocks { Contiguous => "contiguous", Zigzag => "zigzag" });

/// Collective operations the `collectives` workload can time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Sum across ranks, result on every rank.
    AllReduce,
    /// Concatenate every rank's shard on every rank.
    AllGather,
    /// Sum across ranks, each rank keeps one shard.
    ReduceScatter,
    /// Every rank sends a distinct chunk to every other.
    AllToAll,
    /// Rank 0's buffer copied to every rank.
    Broadcast,
    /// A message from rank 0 to rank 1 and back (half the round trip is reported).
    PingPong,
    /// Each rank copies a pinned host buffer to its GPU (the host-device link; no MPI).
    HostToDevice,
    /// Each rank copies from its GPU into a pinned host buffer.
    DeviceToHost,
    /// [`Op::HostToDevice`] from pageable (ordinary) host memory, staged by the driver.
    HostToDevicePageable,
    /// [`Op::DeviceToHost`] into pageable host memory.
    DeviceToHostPageable,
    /// Each rank reads a buffer in its GPU's memory (a sum): the device memory roofline; its
    /// fit's α is the launch-and-synchronise floor.
    DeviceRead,
    /// Each rank copies a buffer to another in its GPU's memory (bus bytes: read + write).
    DeviceCopy,
}

crate::named!(Op {
    AllReduce => "all-reduce", AllGather => "all-gather", ReduceScatter => "reduce-scatter", AllToAll => "all-to-all",
    Broadcast => "broadcast", PingPong => "ping-pong", HostToDevice => "host-to-device", DeviceToHost => "device-to-host",
    HostToDevicePageable => "host-to-device-pageable", DeviceToHostPageable => "device-to-host-pageable",
    DeviceRead => "device-read", DeviceCopy => "device-copy",
});

/// The operations between ranks over MPI (the default `ops` of a collectives experiment).
pub const MPI_OPS: [Op; 6] = [Op::AllReduce, Op::AllGather, Op::ReduceScatter, Op::AllToAll, Op::Broadcast, Op::PingPong];

impl Op {
    /// nccl-tests' bus bandwidth factor for `world` ranks (DESIGN.md's measurement rules).
    pub fn busbw_factor(self, world: u32) -> f64 {
        let p = world as f64;
        match self {
            Op::AllReduce => 2.0 * (p - 1.0) / p,
            Op::AllGather | Op::ReduceScatter | Op::AllToAll => (p - 1.0) / p,
            Op::Broadcast | Op::PingPong => 1.0,
            Op::DeviceCopy => 2.0,
            Op::HostToDevice | Op::DeviceToHost | Op::HostToDevicePageable | Op::DeviceToHostPageable | Op::DeviceRead => 1.0,
        }
    }

    /// True for an operation on a rank's own GPU (a host-device copy, a device read or copy):
    /// it needs CUDA, not MPI.
    pub fn on_device(self) -> bool {
        matches!(
            self,
            Op::HostToDevice | Op::DeviceToHost | Op::HostToDevicePageable | Op::DeviceToHostPageable | Op::DeviceRead | Op::DeviceCopy
        )
    }
}

/// The floating-point type of weights and activations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dtype {
    /// 32-bit IEEE float.
    Float32,
    /// 16-bit IEEE float.
    Float16,
    /// bfloat16.
    Bfloat16,
}

crate::named!(Dtype { Float32 => "float32", Float16 => "float16", Bfloat16 => "bfloat16" });

impl Dtype {
    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            Dtype::Float32 => 4,
            Dtype::Float16 | Dtype::Bfloat16 => 2,
        }
    }
}

/// A key whose list value the matrix expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Axis {
    /// The model (a catalogue name or a checkpoint path).
    Model,
    /// The parallel strategy.
    Strategy,
    /// Ranks.
    World,
    /// The link between ranks.
    Link,
    /// Threads per rank.
    Threads,
    /// Sequences decoded in flight.
    Sequences,
    /// Where the output head lives under tensor parallelism.
    Head,
    /// Weight and activation type.
    Dtype,
    /// Tokens generated per sequence.
    NewTokens,
    /// Pieces a tensor split's all-reduces are cut into and started non-blocking (0: blocking).
    Overlap,
    /// A mixture model's router bias crowding the first experts (0: the router as drawn).
    RoutingSkew,
    /// The layout a context split decodes on.
    DecodeStrategy,
    /// How a context split cuts the prompt into blocks.
    ContextBlocks,
    /// Where each rank computes (CPU or a CUDA device).
    Device,
    /// How a CUDA decode step is issued (operator by operator, or a captured graph).
    Step,
    /// Bytes each membw process reads (a size within a cache measures the cache).
    Buffer,
}

crate::named!(Axis {
    Model => "model", Strategy => "strategy", World => "world", Link => "link", Threads => "threads",
    Sequences => "sequences", Head => "head", Dtype => "dtype", NewTokens => "new_tokens",
    Overlap => "overlap", RoutingSkew => "routing_skew", DecodeStrategy => "decode_strategy",
    ContextBlocks => "context_blocks", Device => "device", Step => "step", Buffer => "buffer",
});

/// Where a rank computes: the CPU (parlab's row kernels for one row, libtorch for more) or a
/// CUDA device (libtorch throughout; local rank r uses GPU r mod the GPUs it sees).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Device {
    /// The host's cores.
    #[default]
    Cpu,
    /// A CUDA GPU.
    Cuda,
}

crate::named!(Device { Cpu => "cpu", Cuda => "cuda" });

/// How a decode step reaches the device: the host issues each operator (eager), or the step,
/// its shapes fixed, is captured once as a CUDA graph and replayed each round (graph).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum StepMode {
    /// Every operator launched by the host, every step.
    #[default]
    Eager,
    /// One CUDA graph per run, replayed each round (one rank, one sequence, a dense model).
    Graph,
}

crate::named!(StepMode { Eager => "eager", Graph => "graph" });

/// One `exclude:` rule: a point of the matrix is left out when every axis the rule names
/// takes one of the rule's values there (values in their canonical text: `2`, `mpi-tcp`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExcludeRule {
    /// Each axis the rule names, with the values it matches.
    pub axes: Vec<(Axis, Vec<String>)>,
}

impl ExcludeRule {
    /// Whether the point whose axis values `value_of` gives is excluded (an empty rule excludes nothing).
    pub fn matches(&self, value_of: impl Fn(Axis) -> String) -> bool {
        !self.axes.is_empty() && self.axes.iter().all(|(axis, wanted)| wanted.contains(&value_of(*axis)))
    }
}

/// The prompt of a decode run: explicit token ids, or seeded ids of a length.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Prompt {
    /// Token ids given in the spec.
    Tokens(Vec<u32>),
    /// `length` ids drawn from a seeded generator over the vocabulary.
    Seeded {
        /// Number of prompt tokens.
        length: u32,
        /// Generator seed.
        seed: u64,
    },
}

/// Threads per rank: a number, or all the machine's cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Threads {
    /// A fixed count.
    Count(u32),
    /// Cores divided by ranks (at least 1): ranks don't fight over cores.
    Auto,
    /// Every core, whatever the number of ranks.
    All,
}

/// What an experiment needs from the machine; checked against the gates before launch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, Hash)]
pub struct Requires {
    /// Number of GPUs that must be visible (`nvidia-smi -L`).
    pub gpus: Option<u32>,
    /// NCCL must be available.
    pub nccl: bool,
    /// A host-device link (a GPU reachable over PCIe) must exist.
    pub host_device_link: bool,
    /// A CUDA device visible to parlab's own libtorch (set by `device: cuda`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cuda: bool,
    /// CUDA graph capture in this parlab (set by `step: graph`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cuda_graph: bool,
    /// At least this many CPU cores.
    pub cores: Option<u32>,
}

/// How ranks are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Hash, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Launcher {
    /// Open MPI's mpirun (optionally with a hostfile).
    #[default]
    Mpirun,
    /// Slurm's srun; ranks come from the Slurm environment.
    Srun,
}

/// Parameters of the `collectives` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveParams {
    /// Operations to time.
    pub ops: Vec<Op>,
    /// Message sizes in bytes, ascending.
    pub sizes: Vec<u64>,
    /// Timed iterations per size (after `warmup`).
    pub iterations: u32,
}

impl CollectiveParams {
    /// True when an operation runs on each rank's own GPU (host-device copies, device reads).
    pub fn has_device_ops(&self) -> bool {
        self.ops.iter().any(|op| op.on_device())
    }
}

/// Parameters of the `membw` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MembwParams {
    /// Bytes each process streams per repetition.
    pub buffer_bytes: u64,
}

/// Parameters of the `decode` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodeParams {
    /// The prompt.
    pub prompt: Prompt,
    /// Where each id of a `{tokens: [...]}` prompt stands in the spec's list: an id refused
    /// there is left out of the prompt, so the ids after it are not at their own index.
    #[serde(skip)]
    pub token_places: Vec<usize>,
}

impl DecodeParams {
    /// The key path of the prompt's `i`-th id, at its own place in the spec's list.
    pub fn token_key(&self, i: usize) -> String {
        format!("prompt.tokens[{}]", self.token_places.get(i).copied().unwrap_or(i))
    }
}

/// Parameters of the `dispatch` workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DispatchParams {
    /// Tokens per dispatch (a decode batch or a prefill chunk), one measurement each.
    pub tokens: Vec<u32>,
    /// Experts each token is routed to.
    pub top_k: u32,
    /// Width of a token's activation.
    pub hidden: u32,
    /// Timed iterations per token count.
    pub iterations: u32,
}

impl DispatchParams {
    /// The most f32s a rank may send in one all-to-all (MPI counts them in a C int).
    pub const MAX_ELEMENTS: u128 = i32::MAX as u128;

    /// The f32s a rank sends for `tokens` tokens: tokens × top_k rows of `hidden`, counted in
    /// 128 bits (three 32-bit factors never wrap there).
    pub fn elements(&self, tokens: u32) -> u128 {
        u128::from(tokens) * u128::from(self.top_k) * u128::from(self.hidden)
    }

    /// The largest [`DispatchParams::elements`] of its token counts.
    pub fn largest_elements(&self) -> u128 {
        self.tokens.iter().map(|&t| self.elements(t)).max().unwrap_or(0)
    }
}

/// Parameters of a `model` (cost model) experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelParams {
    /// Device names from `models/devices.yaml`.
    pub devices: Vec<String>,
    /// Context length (tokens) whose KV cache a decode step reads.
    pub context: u64,
    /// Expert routing imbalance of expert plans: the busiest device's routed tokens over the
    /// mean (1: even; absent from the identity when 1).
    #[serde(default = "even_routing", skip_serializing_if = "is_even_routing")]
    pub imbalance: f64,
}

/// What the layouts of `parlab advise` are ranked by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Objective {
    /// The whole of one request: its prefill and every decode step of its answer.
    Latency,
    /// Time to first token: the prefill of one prompt.
    Ttft,
    /// Tokens per second over every sequence in flight.
    Throughput,
}

crate::named!(Objective { Latency => "latency", Ttft => "ttft", Throughput => "throughput" });

/// `kind: advise` parameters: the machine and the traffic of one `parlab advise` question,
/// and what its answer is expected to be (a source's advice, checked as a finding).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdviseParams {
    /// A device of `models/devices.yaml`.
    pub device: String,
    /// Nodes.
    pub nodes: u32,
    /// Devices in each node.
    pub devices_per_node: u32,
    /// `SIZE:LINK` domains, innermost first, links of `models/links.yaml`.
    pub domains: Vec<String>,
    /// Prompt tokens of one request.
    pub prompt_tokens: u64,
    /// Tokens of one answer.
    pub new_tokens: u64,
    /// Sequences in flight over the machine.
    pub sequences: u32,
    /// What the layouts are ranked by.
    pub objective: Objective,
    /// Bytes per value of weights, activations and cache.
    pub dtype: Dtype,
    /// The answer a source gives, if the spec states it.
    #[serde(default, skip_serializing_if = "Expectation::is_empty")]
    pub expect: Expectation,
}

/// The advice a source gives (`expect:` of a `kind: advise` spec): layout labels as
/// `parlab advise` prints them (`TP=2 x DP=2`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expectation {
    /// The layout ranked first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// Layouts refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rejected: Vec<String>,
}

impl Expectation {
    /// True when the spec states no expected answer.
    pub fn is_empty(&self) -> bool {
        self.leader.is_none() && self.rejected.is_empty()
    }
}

fn even_routing() -> f64 {
    1.0
}

fn is_even_routing(x: &f64) -> bool {
    *x == 1.0
}

/// The `link` axis: the links launched runs measure over, or, for `kind: model`, the names of
/// the catalogue links (`models/links.yaml`, data) its tables compare.
#[derive(Debug, Clone, PartialEq)]
pub enum LinkAxis {
    /// Links runs measure over.
    Measured(Vec<super::link::Link>),
    /// Names of `models/links.yaml` links.
    Catalogue(Vec<String>),
}

impl LinkAxis {
    /// How many links the axis holds.
    pub fn len(&self) -> usize {
        match self {
            LinkAxis::Measured(links) => links.len(),
            LinkAxis::Catalogue(names) => names.len(),
        }
    }

    /// True when the axis holds no link.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The links runs measure over (none on a catalogue axis).
    pub fn measured(&self) -> &[super::link::Link] {
        match self {
            LinkAxis::Measured(links) => links,
            LinkAxis::Catalogue(_) => &[],
        }
    }

    /// The catalogue links' names (none on a measured axis).
    pub fn catalogue(&self) -> &[String] {
        match self {
            LinkAxis::Catalogue(names) => names,
            LinkAxis::Measured(_) => &[],
        }
    }
}

/// A validated experiment: scalars and the list-valued axes the matrix expands.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// The experiment's name (unique across the suite).
    pub name: String,
    /// The spec file it came from.
    pub path: PathBuf,
    /// sha256 of the spec file's bytes.
    pub spec_digest: String,
    /// Axis: model names or checkpoint folders.
    pub models: Vec<String>,
    /// Seed of the generated checkpoint used when a model folder holds no weights.
    pub weights_seed: u64,
    /// Axis: strategies.
    pub strategies: Vec<Strategy>,
    /// Axis: world sizes.
    pub worlds: Vec<u32>,
    /// Axis: links.
    pub links: LinkAxis,
    /// Axis: threads per rank.
    pub threads: Vec<Threads>,
    /// Axis: sequences in flight (pipeline) or per replica.
    pub sequences: Vec<u32>,
    /// Axis: output head placement.
    pub heads: Vec<HeadPlacement>,
    /// Axis: dtypes.
    pub dtypes: Vec<Dtype>,
    /// Axis: tokens to generate.
    pub new_tokens: Vec<u32>,
    /// Axis: pieces each all-reduce of a tensor split is cut into, each started non-blocking
    /// while the next piece computes (0: one blocking all-reduce).
    pub overlap: Vec<u32>,
    /// Axis: a mixture model's routing skew (expert e's router logit gets
    /// `skew · (1 − 2e/(experts − 1))`; 0 leaves the router as the checkpoint has it).
    pub routing_skew: Vec<f64>,
    /// Axis: the layout a context split decodes on after its prefill.
    pub decode_strategies: Vec<DecodeLayout>,
    /// Axis: how a context split cuts the prompt into blocks.
    pub context_blocks: Vec<ContextBlocks>,
    /// Axis: where each rank computes.
    pub devices: Vec<Device>,
    /// Axis: how a CUDA decode step is issued.
    pub steps: Vec<StepMode>,
    /// Axis: bytes each membw process reads (512 MiB unless given; other kinds ignore it).
    pub buffers: Vec<u64>,
    /// Timed repetitions of the whole workload.
    pub repetitions: u32,
    /// Untimed warm-up repetitions (or iterations, for sweeps).
    pub warmup: u32,
    /// Independent launches of each run (the nightly's unit of replication; 1 when absent).
    pub launches: u32,
    /// Wall-clock limit of one run, in seconds.
    pub timeout_s: f64,
    /// What the machine must have.
    pub requires: Requires,
    /// How ranks start.
    pub launcher: Launcher,
    /// An mpirun hostfile, for multi-node runs.
    pub hostfile: Option<PathBuf>,
    /// The network (interface name or IPv4 CIDR) TCP between ranks uses.
    pub interface: Option<String>,
    /// Combinations of axis values to leave out.
    pub exclude: Vec<ExcludeRule>,
    /// The kind's own parameters.
    pub params: KindParams,
}

/// An advice's question as its spec asks it.
#[derive(Debug, Clone, PartialEq)]
pub struct AskedAdvice {
    /// The question, with the answer `expect:` states.
    pub params: AdviseParams,
    /// Where each layout of `params.expect.rejected` stands in the spec's `expect.rejected`
    /// list: a malformed item is refused and left out, so those after it are not at their index.
    pub rejected_places: Vec<usize>,
}

impl AskedAdvice {
    /// The key path of the `i`-th layout of `expect.rejected`, at its own place in the spec's list.
    pub fn rejected_key(&self, i: usize) -> String {
        format!("expect.rejected[{}]", self.rejected_places.get(i).copied().unwrap_or(i))
    }
}

/// What an experiment measures or computes, with that kind's own parameters.
#[derive(Debug, Clone)]
pub enum KindParams {
    /// Collective sweeps.
    Collectives(CollectiveParams),
    /// Memory streaming (its buffer sizes are the `buffer` axis).
    Membw,
    /// Split decoding.
    Decode(DecodeParams),
    /// Expert dispatch.
    Dispatch(DispatchParams),
    /// The cost model's tables.
    Model(ModelParams),
    /// One `parlab advise` question; None where its keys had problems (validation reported them).
    Advise(Option<AskedAdvice>),
}

impl KindParams {
    /// The kind these parameters belong to.
    pub fn kind(&self) -> Kind {
        match self {
            KindParams::Collectives(_) => Kind::Collectives,
            KindParams::Membw => Kind::Membw,
            KindParams::Decode(_) => Kind::Decode,
            KindParams::Dispatch(_) => Kind::Dispatch,
            KindParams::Model(_) => Kind::Model,
            KindParams::Advise(_) => Kind::Advise,
        }
    }
}

impl Experiment {
    /// What it measures or computes.
    pub fn kind(&self) -> Kind {
        self.params.kind()
    }

    /// The sweep of a collectives experiment.
    pub fn collectives(&self) -> Option<&CollectiveParams> {
        match &self.params {
            KindParams::Collectives(c) => Some(c),
            _ => None,
        }
    }

    /// The prompt of a decode experiment.
    pub fn prompt(&self) -> Option<&Prompt> {
        match &self.params {
            KindParams::Decode(d) => Some(&d.prompt),
            _ => None,
        }
    }
}
