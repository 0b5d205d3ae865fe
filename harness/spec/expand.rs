//! Expands an experiment's list-valued axes into runs (cartesian product, minus
//! `exclude:` rules), computes each run's layout and identities, and checks each
//! run against its model (heads a tensor split must divide, layers a pipeline needs).

use super::layout::layout_for;
use super::link::Link;
use super::plan::*;
use super::problem::Problem;
use super::schema::*;
use super::validate::Checker;
use crate::identity::{self, IdentityInput};
use crate::model::ModelConfig;
use serde_yaml::Value;
use std::collections::BTreeMap;

/// The canonical text of an axis value, used to match `exclude:` rules.
pub fn axis_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => serde_yaml::to_string(other).unwrap_or_default().trim().to_string(),
    }
}

/// One point of the matrix: a value for each axis.
#[derive(Debug, Clone)]
struct Point {
    model: Option<String>,
    strategy: Strategy,
    world: u32,
    link: Link,
    threads: Threads,
    sequences: u32,
    head: HeadPlacement,
    dtype: Dtype,
    new_tokens: u32,
    overlap: u32,
    routing_skew: f64,
    decode_strategy: DecodeLayout,
    context_blocks: ContextBlocks,
    device: Device,
    step: StepMode,
    buffer: u64,
}

impl Point {
    /// The point's value on `axis`, in the canonical text `exclude:` rules hold.
    fn axis_value(&self, axis: Axis) -> String {
        match axis {
            Axis::Model => self.model.clone().unwrap_or_default(),
            Axis::Strategy => self.strategy.name().to_string(),
            Axis::World => self.world.to_string(),
            Axis::Link => self.link.name().to_string(),
            Axis::Threads => match self.threads {
                Threads::Count(n) => n.to_string(),
                Threads::Auto => "auto".into(),
                Threads::All => "all".into(),
            },
            Axis::Sequences => self.sequences.to_string(),
            Axis::Head => self.head.name().to_string(),
            Axis::Dtype => self.dtype.name().to_string(),
            Axis::NewTokens => self.new_tokens.to_string(),
            Axis::Overlap => self.overlap.to_string(),
            Axis::RoutingSkew => self.routing_skew.to_string(),
            Axis::DecodeStrategy => self.decode_strategy.name().to_string(),
            Axis::ContextBlocks => self.context_blocks.name().to_string(),
            Axis::Device => self.device.name().to_string(),
            Axis::Step => self.step.name().to_string(),
            Axis::Buffer => self.buffer.to_string(),
        }
    }

    fn excluded(&self, rules: &[ExcludeRule]) -> bool {
        rules.iter().any(|rule| rule.matches(|axis| self.axis_value(axis)))
    }
}

/// How many runs an experiment's matrix holds before exclusions, counted without expanding it.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSize {
    /// The product of the axes' lengths (saturating).
    pub runs: u64,
    /// The spec key of the longest axis, where a problem about the size is reported.
    pub largest_axis: &'static str,
    /// `world 4 x link 2 x ...`, the axes longer than one.
    pub factors: String,
}

impl MatrixSize {
    /// The problem text, at the experiment whose matrix passed `limit`, for a suite whose
    /// matrices hold `total` points: runs before `exclude:` and the layouts a matrix skips, so
    /// `--max-runs {total}` passes whatever those leave.
    pub fn too_many(&self, total: u64, limit: usize) -> String {
        format!(
            "the suite's matrices hold {total} runs before exclusions, more than the limit of {limit}, which this experiment's {} ({}) passes; shrink the axes or pass --max-runs {total}",
            self.runs, self.factors
        )
    }
}

/// Counts `e`'s matrix (exclusions can only shrink it) without building a point.
pub fn matrix_size(e: &Experiment) -> MatrixSize {
    let axes: [(&'static str, usize); 16] = [
        ("model", e.models.len().max(1)),
        ("strategy", e.strategies.len()),
        ("world", e.worlds.len()),
        ("link", e.links.len()),
        ("threads", e.threads.len()),
        ("sequences", e.sequences.len()),
        ("head", e.heads.len()),
        ("dtype", e.dtypes.len()),
        ("new_tokens", e.new_tokens.len()),
        ("overlap", e.overlap.len()),
        ("routing_skew", e.routing_skew.len()),
        ("decode_strategy", e.decode_strategies.len()),
        ("context_blocks", e.context_blocks.len()),
        ("device", e.devices.len()),
        ("step", e.steps.len()),
        ("buffer", e.buffers.len()),
    ];
    let runs = if matches!(e.kind(), Kind::Model | Kind::Advise) {
        1
    } else {
        axes.iter().fold(1u64, |n, (_, len)| n.saturating_mul(*len as u64))
    };
    // The spec's longest list (the first of equals), or its name where no axis is a list.
    let largest_axis = axes.iter().filter(|(_, len)| *len > 1).rev().max_by_key(|(_, len)| *len).map_or("name", |(k, _)| *k);
    let factors: Vec<String> = axes.iter().filter(|(_, len)| *len > 1).map(|(k, len)| format!("{k} {len}")).collect();
    MatrixSize { runs, largest_axis, factors: if factors.is_empty() { "one point".into() } else { factors.join(" x ") } }
}

/// The matrix's points in a fixed order: model, strategy, world, link, threads,
/// sequences, head, dtype, new_tokens, overlap, routing_skew, decode_strategy, context_blocks,
/// device, step, buffer (the first varies slowest).
fn points(e: &Experiment) -> Vec<Point> {
    let models: Vec<Option<String>> = if e.models.is_empty() { vec![None] } else { e.models.iter().cloned().map(Some).collect() };
    let mut out = Vec::new();
    for model in &models {
        for &strategy in &e.strategies {
            for &world in &e.worlds {
                for link in e.links.measured() {
                    for &threads in &e.threads {
                        for &sequences in &e.sequences {
                            for &head in &e.heads {
                                for &dtype in &e.dtypes {
                                    for &new_tokens in &e.new_tokens {
                                        for &overlap in &e.overlap {
                                            for &routing_skew in &e.routing_skew {
                                                for &decode_strategy in &e.decode_strategies {
                                                    for (&context_blocks, (&device, (&step, &buffer))) in
                                                        e.context_blocks.iter().flat_map(|c| {
                                                            e.devices.iter().flat_map(move |d| {
                                                                e.steps
                                                                    .iter()
                                                                    .flat_map(move |s| e.buffers.iter().map(move |b| (c, (d, (s, b)))))
                                                            })
                                                        })
                                                    {
                                                        let (link, model) = (link.clone(), model.clone());
                                                        out.push(Point {
                                                            model,
                                                            strategy,
                                                            world,
                                                            link,
                                                            threads,
                                                            sequences,
                                                            head,
                                                            dtype,
                                                            new_tokens,
                                                            overlap,
                                                            routing_skew,
                                                            decode_strategy,
                                                            context_blocks,
                                                            device,
                                                            step,
                                                            buffer,
                                                        });
                                                    }
                                                }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

/// Expands `e` into runs; `text` is the spec's text, for locating problems.
pub fn expand(e: &Experiment, text: &str, cores: u32) -> Result<Vec<RunPlan>, Vec<Problem>> {
    let mut c = Checker::new(&e.path, text);
    match &e.params {
        KindParams::Model(params) => {
            let mut folder_configs = Vec::new();
            for m in &e.models {
                match crate::costmodel::tables::load_shape(m) {
                    // A model named under models/ is in the catalogue's digest already.
                    Ok(shape) if crate::model::resolve::is_path(m) => folder_configs.push(shape.config_digest),
                    Ok(_) => {}
                    Err(err) => c.report("model", err.to_string()),
                }
            }
            return if c.problems.is_empty() { Ok(vec![model_run(e, params, &folder_configs)]) } else { Err(c.problems) };
        }
        KindParams::Advise(params) => {
            return match advise_run(e, params.as_ref(), &mut c) {
                Some(run) if c.problems.is_empty() => Ok(vec![run]),
                _ => Err(c.problems),
            };
        }
        _ => {}
    }
    let mut models: BTreeMap<String, Option<(ModelSource, ModelConfig)>> = BTreeMap::new();
    for name in &e.models {
        let source = super::weights::model_source(name, e.weights_seed).map_err(|m| c.report("model", m.to_string())).ok();
        // Named as the register shows it: a folder by its path from the spec, the same in any
        // checkout (the identity holds the config's and weights' digests, never the name).
        let source = source.map(|(mut s, cfg)| {
            s.name = crate::model::resolve::shown(name, &e.path);
            (s, cfg)
        });
        models.insert(name.clone(), source);
    }
    let all = points(e);
    let pts: Vec<Point> = all.iter().filter(|p| !p.excluded(&e.exclude)).cloned().collect();
    if pts.is_empty() && !all.is_empty() {
        c.report("exclude", "every combination of the axes is excluded; this experiment would run nothing");
    }
    let mut runs = Vec::new();
    let mut planned = std::collections::BTreeSet::new();
    let limit = super::resources::Limit::current();
    for p in pts {
        let model = p.model.as_ref().and_then(|m| models.get(m).cloned().flatten());
        if p.model.is_some() && model.is_none() {
            continue;
        }
        let cfg = model.as_ref().map(|(_, cfg)| cfg);
        // Every independent problem of the point at once; the memory and the disk are judged on
        // a layout that can run. An overlap the layout refuses is not also held against the
        // device or the dtype (their advice, "overlap needs device: cpu", would fix nothing).
        let layout = layout_for(e.kind(), &p_layout_input(e, &p), cfg);
        let refused: Vec<(String, String)> =
            layout.as_ref().err().into_iter().flatten().map(|r| (r.key().to_string(), r.to_string())).collect();
        let judged = if refused.iter().any(|(key, _)| key == "overlap") { Point { overlap: 0, ..p.clone() } } else { p.clone() };
        let problems: Vec<(String, String)> = [device_problem(&judged, cfg), step_problem(&p), nccl_problem(e, &p)]
            .into_iter()
            .flatten()
            .map(|(key, message)| (key.to_string(), message))
            .chain(cfg.and_then(|cfg| sequence_problem(e, &p, cfg)))
            .chain(refused)
            .collect();
        problems.iter().for_each(|(key, message)| c.report(key, message.as_str()));
        let Ok(layout) = layout else { continue };
        if !problems.is_empty() {
            continue;
        }
        if let Some((key, message)) = memory_problem(e, &model, &layout, p.buffer, limit) {
            c.report(key, message);
            continue;
        }
        if let Some(message) = model.as_ref().and_then(|(m, cfg)| disk_problem(cfg, &m.weights)) {
            c.report("model", message);
            continue;
        }
        let run = make_run(e, &p, model.map(|(m, _)| m), layout, cores, runs.len());
        // Points that differ only on an axis the strategy ignores (the head of a split that
        // places none) are the same run: it is planned once.
        if planned.insert(run.run_id.clone()) {
            runs.push(run);
        }
    }
    if c.problems.is_empty() {
        Ok(runs)
    } else {
        c.problems.dedup();
        Err(c.problems)
    }
}

/// What a point cannot run in half precision (the splits whose exchanges read host memory as
/// float32 in place: context's ring, expert dispatch, overlapped all-reduces; a mixture model),
/// and on CUDA the same splits in any precision.
fn device_problem(p: &Point, cfg: Option<&ModelConfig>) -> Option<(&'static str, String)> {
    match p.device {
        Device::Cpu if p.dtype != Dtype::Float32 => {
            float32_only(p, cfg).map(|why| ("dtype", format!("{} {why}; use dtype: float32", p.dtype.name())))
        }
        Device::Cpu => None,
        Device::Cuda if matches!(p.strategy, Strategy::Context | Strategy::Expert) => {
            Some(("device", format!("cuda runs data, tensor and pipeline splits in this version; {} stays on the CPU", p.strategy.name())))
        }
        Device::Cuda if p.overlap > 0 => {
            Some(("device", "cuda runs blocking all-reduces in this version; overlap needs device: cpu".to_string()))
        }
        Device::Cuda if cfg.is_some_and(ModelConfig::is_mixture) => {
            Some(("device", "a mixture model decodes on the CPU only in this version".to_string()))
        }
        Device::Cuda => None,
    }
}

/// Why a point's layout computes in float32 only, if it does.
fn float32_only(p: &Point, cfg: Option<&ModelConfig>) -> Option<&'static str> {
    if matches!(p.strategy, Strategy::Context | Strategy::Expert) {
        Some("is not offered for context and expert splits (their exchanges read host float32 in place)")
    } else if p.overlap > 0 {
        Some("is not offered with overlapped all-reduces (they sum host float32 in place)")
    } else if cfg.is_some_and(ModelConfig::is_mixture) {
        Some("is not offered for a mixture model (it computes in float32 on the host)")
    } else {
        None
    }
}

/// Why a point would need more memory than the machine has (`spec::resources`), checked
/// before anything is allocated (`buffer`: a membw point's); nothing where the limit is unknown.
fn memory_problem(
    e: &Experiment,
    model: &Option<(ModelSource, ModelConfig)>,
    layout: &Layout,
    buffer: u64,
    limit: Option<super::resources::Limit>,
) -> Option<(&'static str, String)> {
    use super::resources::{collectives_need, decode_need, dispatch_need, membw_need, refusal};
    let limit = limit?;
    let need = match &e.params {
        KindParams::Decode(_) => model.as_ref().and_then(|(m, cfg)| decode_need(cfg, &m.weights, layout))?,
        // Copies and reads on a rank's GPU keep their large buffers in the GPU's memory.
        KindParams::Collectives(c) if c.has_device_ops() => return None,
        KindParams::Collectives(c) => collectives_need(c, layout.world),
        KindParams::Membw => membw_need(&MembwParams { buffer_bytes: buffer }, layout.world),
        // One past MPI's count is refused for that (`tokens`), not again for its memory.
        KindParams::Dispatch(d) if d.largest_elements() > super::schema::DispatchParams::MAX_ELEMENTS => return None,
        KindParams::Dispatch(d) => dispatch_need(d, layout.world),
        KindParams::Model(_) | KindParams::Advise(_) => return None,
    };
    refusal(e.kind(), &need, &limit)
}

/// Why a decode point's seeded checkpoint would not fit on its filesystem (`spec::disk`),
/// checked before anything is written; nothing where the free space is unknown.
fn disk_problem(cfg: &ModelConfig, weights: &super::plan::Weights) -> Option<String> {
    let need = super::disk::checkpoint_need(cfg, weights)?;
    super::disk::refusal(&need, &super::disk::DiskLimit::for_folder(&need.folder)?)
}

/// What a point on an NCCL link cannot run: NCCL moves GPU buffers, so a decode over it
/// computes on CUDA, and this version passes the all-reduces and the logits gather of a tensor
/// split over it (a data split has no exchange); pipeline sends, expert dispatch and context
/// rings stay on MPI and are refused rather than mislabelled. Only collectives and decode run.
fn nccl_problem(e: &Experiment, p: &Point) -> Option<(&'static str, String)> {
    let setting = p.link.nccl()?;
    let link = setting.name();
    match e.kind() {
        Kind::Collectives if e.collectives().is_some_and(CollectiveParams::has_device_ops) => Some((
            "ops",
            format!(
                "host-device copies and device reads run on one rank's GPU without a link; `link: {link}` is for collectives between GPUs"
            ),
        )),
        Kind::Collectives => None,
        Kind::Decode if p.device != Device::Cuda => {
            Some(("link", format!("`link: {link}` moves GPU buffers: a decode over it needs `device: cuda`")))
        }
        Kind::Decode if !matches!(p.strategy, Strategy::Tensor | Strategy::Data) => Some((
            "link",
            format!(
                "`link: {link}` carries tensor splits' all-reduces in this version; {} exchanges stay on MPI (use link: mpi-shm)",
                p.strategy.name()
            ),
        )),
        Kind::Decode => None,
        other => Some(("link", format!("`link: {link}` runs collectives and decode; {} runs use an MPI link", other.name()))),
    }
}

/// What a decode point asks of its model that the model cannot give: a prompt token outside
/// its vocabulary, or a prompt and generation longer than its position table.
fn sequence_problem(e: &Experiment, p: &Point, cfg: &ModelConfig) -> Option<(String, String)> {
    let KindParams::Decode(decode) = &e.params else { return None };
    let prompt = &decode.prompt;
    if let Prompt::Tokens(ids) = prompt {
        if let Some((i, id)) = ids.iter().enumerate().find(|(_, id)| **id >= cfg.vocab) {
            let message = format!("token {id} is outside the model's vocabulary of {} ids (0 to {})", cfg.vocab, cfg.vocab - 1);
            return Some((decode.token_key(i), message));
        }
    }
    let needed = u64::from(prompt.len()) + u64::from(p.new_tokens);
    if needed <= u64::from(cfg.max_positions) {
        return None;
    }
    let key = if prompt.len() >= cfg.max_positions { "prompt" } else { "new_tokens" };
    let holds = match cfg.max_positions {
        0 => "none (its config.json gives no n_positions or max_position_embeddings)".to_string(),
        n => format!("{n} (n_positions in its config.json)"),
    };
    let message =
        format!("a prompt of {} tokens and {} new tokens need {needed} positions; the model holds {holds}", prompt.len(), p.new_tokens);
    Some((key.to_string(), message))
}

/// Why a `step: graph` point cannot run: a captured step is a CUDA device's, the whole model's
/// on one rank (no communication inside the graph), and one sequence's. (A mixture, whose
/// routing would change the step's shapes, stays on the CPU: `device_problem` says so first.)
fn step_problem(p: &Point) -> Option<(&'static str, String)> {
    if p.step == StepMode::Eager {
        return None;
    }
    let why = if p.device != Device::Cuda {
        "is a CUDA graph: it needs `device: cuda`".to_string()
    } else if p.strategy != Strategy::Data || p.world != 1 {
        format!(
            "captures the whole model's step on one rank (a data split of world 1; no communication inside the graph) in this version; {} over world {} stays eager",
            p.strategy.name(),
            p.world
        )
    } else if p.sequences != 1 {
        "captures one sequence's step in this version; sequences must be 1".to_string()
    } else {
        return None;
    };
    Some(("step", format!("`step: graph` {why}")))
}

fn p_layout_input(e: &Experiment, p: &Point) -> super::layout::LayoutInput {
    let prompt_tokens = e.prompt().map_or(0, Prompt::len);
    super::layout::LayoutInput {
        strategy: p.strategy,
        world: p.world,
        head: p.head,
        sequences: p.sequences,
        overlap: p.overlap,
        routing_skew: p.routing_skew,
        decode_strategy: p.decode_strategy,
        context_blocks: p.context_blocks,
        prompt_tokens,
    }
}

fn threads_for(threads: Threads, world: u32, cores: u32) -> u32 {
    match threads {
        Threads::Count(n) => n,
        Threads::Auto => (cores / world.max(1)).max(1),
        Threads::All => cores.max(1),
    }
}

fn workload_for(e: &Experiment, p: &Point) -> Workload {
    match &e.params {
        KindParams::Collectives(c) => Workload::Collectives(c.clone()),
        KindParams::Membw => Workload::Membw(MembwParams { buffer_bytes: p.buffer }),
        KindParams::Decode(d) => {
            Workload::Decode { prompt: d.prompt.clone(), new_tokens: p.new_tokens, dtype: p.dtype, routing_skew: p.routing_skew }
        }
        KindParams::Dispatch(d) => Workload::Dispatch(d.clone()),
        KindParams::Model(_) | KindParams::Advise(_) => unreachable!("runs of arithmetic are built by arithmetic_run"),
    }
}

/// The digest of what the experiment's hostfile tells mpirun ([`identity::hostfile_digest`];
/// validation refused one it cannot read).
fn hostfile_digest(e: &Experiment) -> Option<String> {
    e.hostfile.as_ref().and_then(|h| crate::files::read_text(h, crate::files::TEXT_LIMIT).ok()).map(|t| identity::hostfile_digest(&t))
}

fn placement(e: &Experiment, hostfile_sha256: Option<&str>) -> serde_json::Value {
    let mut placement = serde_json::json!({ "launcher": e.launcher, "hostfile_sha256": hostfile_sha256 });
    if let Some(interface) = &e.interface {
        placement["interface"] = interface.clone().into();
    }
    placement
}

fn make_run(e: &Experiment, p: &Point, model: Option<ModelSource>, layout: Layout, cores: u32, index: usize) -> RunPlan {
    let workload = workload_for(e, p);
    let threads_per_rank = threads_for(p.threads, p.world, cores);
    let hostfile_sha256 = hostfile_digest(e);
    let input = IdentityInput {
        kind: e.kind(),
        model: model.as_ref(),
        workload: &workload,
        layout: &layout,
        backend: p.link.backend(),
        link: &p.link,
        threads_per_rank,
        repetitions: e.repetitions,
        warmup: e.warmup,
        placement: placement(e, hostfile_sha256.as_deref()),
        device: p.device,
        step: p.step,
    };
    RunPlan {
        experiment: e.name.clone(),
        index,
        spec_path: e.path.clone(),
        spec_sha256: e.spec_digest.clone(),
        run_id: identity::run_id(&input),
        answer_id: identity::answer_id(&input),
        model,
        link: p.link.clone(),
        backend: p.link.backend(),
        threads_per_rank,
        repetitions: e.repetitions,
        warmup: e.warmup,
        launches: e.launches,
        timeout_s: e.timeout_s,
        requires: requires_for(e, p),
        device: p.device,
        step: p.step,
        launcher: e.launcher,
        hostfile: e.hostfile.clone(),
        hostfile_sha256,
        interface: e.interface.clone(),
        workload,
        layout,
    }
}

/// The spec's requirements, plus a CUDA device visible to parlab's libtorch for a `device: cuda`
/// run or a sweep of operations on a rank's GPU, one GPU per rank for those over several ranks
/// (two ranks on one GPU would split its link and memory and record half of each under its
/// name) and for NCCL, and CUDA graph capture in this binary for `step: graph`.
fn requires_for(e: &Experiment, p: &Point) -> Requires {
    let copies = e.collectives().is_some_and(CollectiveParams::has_device_ops);
    let nccl = p.link.nccl().is_some();
    let gpu_each = nccl || (copies && p.world > 1);
    let gpus = if gpu_each { Some(e.requires.gpus.unwrap_or(0).max(p.world)) } else { e.requires.gpus };
    Requires {
        cuda: e.requires.cuda || p.device == Device::Cuda || copies || nccl,
        nccl: e.requires.nccl || nccl,
        cuda_graph: p.step == StepMode::Graph,
        gpus,
        ..e.requires.clone()
    }
}

/// A `kind: model` experiment is one run whose axes are the rows of its tables; `folder_configs` are the config digests of its models
/// given as folders, so an edited config.json outside models/ is a new run.
fn model_run(e: &Experiment, params: &ModelParams, folder_configs: &[String]) -> RunPlan {
    // A value listed twice asks nothing more (its rows would print twice): kept once, in order.
    let workload = Workload::Model {
        params: ModelParams { devices: once(&params.devices), ..params.clone() },
        models: once(&e.models),
        strategies: once(&e.strategies),
        worlds: once(&e.worlds),
        links: once(e.links.catalogue()),
        sequences: once(&e.sequences),
        dtypes: once(&e.dtypes),
    };
    let configs = (!folder_configs.is_empty()).then(|| identity::digest(&folder_configs));
    arithmetic_run(e, workload, configs.as_deref())
}

/// `workload` as an arithmetic run's identity reads it: a model given as a folder stands for
/// its config.json (whose digest the identity holds), not for where the folder lies, as a
/// launched run's model is its config and weights, not its folder.
fn without_folders(workload: &Workload) -> Workload {
    let placeless = |m: &String| if crate::model::resolve::is_path(m) { "(a folder: its config.json)".to_string() } else { m.clone() };
    let mut w = workload.clone();
    match &mut w {
        Workload::Advise { model, .. } => *model = placeless(model),
        Workload::Model { models, .. } => *models = models.iter().map(placeless).collect(),
        _ => {}
    }
    w
}

/// `values` with each value's repeats after its first left out.
fn once<T: PartialEq + Clone>(values: &[T]) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(values.len());
    for v in values {
        if !out.contains(v) {
            out.push(v.clone());
        }
    }
    out
}

/// A `kind: advise` experiment is one run: the question, answered by `advise` when it runs;
/// a question `parlab advise` would refuse (an unknown model, a topology that does not add
/// up) is a problem of the spec.
fn advise_run(e: &Experiment, asked: Option<&AskedAdvice>, c: &mut Checker) -> Option<RunPlan> {
    // No parameters: validation has said what they lack.
    let (model, asked) = (e.models.first()?.clone(), asked?);
    let params = asked.params.clone();
    let catalogue = crate::costmodel::catalogue::Catalogue::load_default().map_err(|err| c.report("machine", err.to_string())).ok()?;
    let request = match crate::advise::request::Asked::of_spec(&model, &params).resolve(&catalogue) {
        Ok(request) => request,
        // In the spec's words: its keys (`machine.domains`, `prompt_tokens`), not the flags
        // `parlab advise` words the same problem with.
        Err(err) => {
            let (key, message) = err.in_spec();
            c.report(&key, message);
            return None;
        }
    };
    let before = c.problems.len();
    super::advise::expected_layouts(c, asked, &request);
    // The advice is the model's shape's: a config.json changed since is another question.
    let shape = Some(request.model.config_digest.as_str());
    (c.problems.len() == before).then(|| arithmetic_run(e, Workload::Advise { model, params }, shape))
}

/// The one run of an experiment of arithmetic (nothing launched): its identity is the
/// workload's and the catalogue's (and the model config's digest, `model_config`, where given).
fn arithmetic_run(e: &Experiment, workload: Workload, model_config: Option<&str>) -> RunPlan {
    let placeless = without_folders(&workload);
    let layout = Layout { strategy: Strategy::Data, world: 1, head: None, sequences: None, overlap: None, decode: None, ranks: vec![] };
    let input = IdentityInput {
        kind: e.kind(),
        model: None,
        workload: &placeless,
        layout: &layout,
        backend: Link::Absent.backend(),
        link: &Link::Absent,
        threads_per_rank: 1,
        repetitions: 1,
        warmup: 0,
        placement: serde_json::Value::Null,
        device: Device::Cpu,
        step: StepMode::Eager,
    };
    let catalogue = crate::costmodel::catalogue::catalogue_digest();
    let mut of = serde_json::json!({ "answer": identity::answer_id(&input), "catalogue": catalogue });
    if let Some(config) = model_config {
        of["model_config"] = config.into();
    }
    let answer_id = identity::digest(&of);
    RunPlan {
        experiment: e.name.clone(),
        index: 0,
        spec_path: e.path.clone(),
        spec_sha256: e.spec_digest.clone(),
        run_id: identity::RunId::new(answer_id.clone()),
        answer_id: identity::AnswerId::new(answer_id),
        model: None,
        link: Link::Absent,
        backend: Link::Absent.backend(),
        threads_per_rank: 1,
        repetitions: 1,
        warmup: 0,
        launches: 1,
        timeout_s: e.timeout_s,
        device: Device::Cpu,
        step: StepMode::Eager,
        requires: Requires::default(),
        launcher: Launcher::Mpirun,
        hostfile: None,
        hostfile_sha256: None,
        interface: None,
        workload,
        layout,
    }
}
