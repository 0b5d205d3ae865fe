//! `parlab import`: another tool's collective benchmarks (nccl-tests, OSU micro-benchmarks)
//! read into a manifest of kind collectives, marked as imported.
//!
//! The readers (`nccl_tests`, `osu`) turn a file's text into a [`ToolRun`]: what the tool
//! printed, in its own units and size convention. [`manifest_of`] turns that into rows in
//! parlab's units (seconds, bytes in nccl-tests' size convention), the α–β fits of
//! `collect::collectives::fit_of`, and a manifest whose run identity is a digest of the
//! tool, the file's bytes and the world: the same file imports to the same manifest.

pub mod nccl_tests;
pub mod osu;

use crate::collect::collectives::fit_of;
use crate::manifest::plausible::MAX_SECONDS;
use crate::manifest::provenance::{ImportFormat, ImportTool, Imported, ImportedDevice, Provenance};
use crate::manifest::stats::Stats;
use crate::manifest::summary::{CollectiveRow, Collectives, Summary};
use crate::manifest::{machine::Fingerprint, Manifest, Origin, Outcome, SCHEMA};
use crate::spec::fields::MAX_WORLD;
use crate::spec::link::Link;
use crate::spec::plan::{Layout, RankShare, RunPlan, Workload};
use crate::spec::schema::{CollectiveParams, Device, Launcher, Op, Requires, Strategy};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Why a file could not be imported: a user error (exit 2); nothing is written.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The file could not be read.
    #[error("{0}")]
    Read(#[from] crate::files::FileError),
    /// A line of the file is not what the format says.
    #[error("{file}:{line}: {message}")]
    Line {
        /// The file.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong and what was expected.
        message: String,
    },
    /// The file as a whole is not usable (no rows, an unknown benchmark, a missing world).
    #[error("{file}: {message}")]
    File {
        /// The file.
        file: PathBuf,
        /// What is wrong and what was expected.
        message: String,
    },
}

/// What a reader found wrong, before the file's name is attached.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The 1-based line, where one line is at fault.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl Problem {
    /// A problem at `line`.
    pub fn at(line: usize, message: impl Into<String>) -> Self {
        Problem { line: Some(line), message: message.into() }
    }

    /// A problem of the whole file.
    pub fn file(message: impl Into<String>) -> Self {
        Problem { line: None, message: message.into() }
    }

    fn in_file(self, file: &Path) -> ImportError {
        match self.line {
            Some(line) => ImportError::Line { file: file.to_path_buf(), line, message: self.message },
            None => ImportError::File { file: file.to_path_buf(), message: self.message },
        }
    }
}

/// How a tool counts a message's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeConvention {
    /// nccl-tests': the larger of a rank's send and receive buffers.
    NcclTests,
    /// Each rank's message to one peer (OSU's all-gather and all-to-all): world × it in
    /// nccl-tests' convention.
    PerPeer,
}

/// One message size as the tool reported it, in its units.
#[derive(Debug, Clone, PartialEq)]
pub struct SizeResult {
    /// Bytes, in the tool's [`SizeConvention`].
    pub size_bytes: u64,
    /// The out-of-place time (OSU: the one time), microseconds.
    pub out_of_place_us: f64,
    /// The in-place time, microseconds, where the tool timed one.
    pub in_place_us: Option<f64>,
    /// Wrong elements (nccl-tests' #wrong, out of place plus in place), or sizes OSU's
    /// validation failed; 0 where unchecked.
    pub wrong: u64,
    /// The algorithm and bus bandwidths the tool printed for the out-of-place time, GB/s.
    pub bandwidths: Option<(f64, f64)>,
    /// Where in the file it was read from.
    pub from: RowSource,
}

/// Where in a tool's output one size's result was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowSource {
    /// A text table's 1-based line.
    Line(usize),
    /// A JSON file's `results[i]`.
    Entry(usize),
}

impl SizeResult {
    /// A problem of this size: at its line, or of the file naming its `results[i]`.
    fn problem(&self, message: String) -> Problem {
        match self.from {
            RowSource::Line(line) => Problem::at(line, message),
            RowSource::Entry(i) => Problem::file(format!("results[{i}]: {message}")),
        }
    }
}

/// A rank's device as the output listed it, and where.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    /// The device.
    pub device: ImportedDevice,
    /// Where the output lists it.
    pub at: ListedAt,
}

/// Where an output lists a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedAt {
    /// A text output's 1-based line.
    Line(usize),
    /// A JSON output's `config.devices[i]`.
    JsonDevice(usize),
}

impl ListedAt {
    /// A problem of the rank listed here: at its line, or naming its JSON entry.
    fn problem(self, message: String) -> Problem {
        match self {
            ListedAt::Line(n) => Problem::at(n, message),
            ListedAt::JsonDevice(i) => Problem::file(format!("config.devices[{i}]: {message}")),
        }
    }

    /// Where, in words: `line 7`, `config.devices[1]`.
    fn words(self) -> String {
        match self {
            ListedAt::Line(n) => format!("line {n}"),
            ListedAt::JsonDevice(i) => format!("config.devices[{i}]"),
        }
    }
}

/// The ranks an output listed so far, each with where: refuses a rank listed twice, and a rank
/// past the most a run has (before a huge list is built, or searched rank by rank).
#[derive(Default)]
pub struct ListedRanks {
    first_at: std::collections::HashMap<u32, ListedAt>,
}

impl ListedRanks {
    /// Takes `listed`, or refuses it where an earlier entry lists its rank (a rank is one
    /// process) or it would be the run's rank number `MAX_WORLD + 1`.
    pub fn take(&mut self, listed: &Listed) -> Result<(), Problem> {
        let rank = listed.device.rank;
        if let Some(first) = self.first_at.get(&rank) {
            return Err(listed.at.problem(format!("rank {rank} is listed twice (first at {}): a rank is one process", first.words())));
        }
        if self.first_at.len() >= MAX_WORLD as usize {
            return Err(listed.at.problem(format!("more than {MAX_WORLD} ranks listed: a run has at most {MAX_WORLD} ranks")));
        }
        self.first_at.insert(rank, listed.at);
        Ok(())
    }
}

/// A tool's run as its output states it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolRun {
    /// The tool.
    pub tool: ImportTool,
    /// Which of its formats.
    pub format: ImportFormat,
    /// The tool's version, where stated.
    pub version: Option<String>,
    /// The library's version, where stated.
    pub library: Option<String>,
    /// The benchmark binary.
    pub benchmark: String,
    /// The op it times.
    pub op: Op,
    /// How it counts bytes.
    pub sizes_as: SizeConvention,
    /// The command line, where the file holds it.
    pub command: Option<String>,
    /// The ranks it listed, with where.
    pub devices: Vec<Listed>,
    /// Ranks, where the output implies them (nccl-tests: its device lines; osu_latency: 2).
    pub world: Option<u32>,
    /// Warm-up iterations, where stated.
    pub warmup: Option<u32>,
    /// Timed iterations, where stated.
    pub iterations: Option<u32>,
    /// Whether the tool checked its results.
    pub checked: bool,
    /// When it ran, where stated.
    pub ran_at: Option<String>,
    /// The data type and reduction op, where stated ([`Imported::data_type`], [`Imported::reduction`]).
    pub data: DataKind,
    /// Every size in file order (a size repeats where the tool ran several cycles).
    pub sizes: Vec<SizeResult>,
}

/// The data type and reduction op a tool's run used, where its output states them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataKind {
    /// The data type (`float`, `bfloat16`, `MPI_CHAR`).
    pub data_type: Option<String>,
    /// The reduction op (`sum`, `max`); None for a collective that reduces nothing.
    pub reduction: Option<String>,
}

impl DataKind {
    /// nccl-tests' `type` and `redop` columns (`none`, or an empty one, reduce nothing).
    pub fn of_nccl_tests(data_type: &str, redop: &str) -> Self {
        let named = |w: &str| Some(w.trim()).filter(|w| !w.is_empty() && *w != "none").map(str::to_string);
        DataKind { data_type: named(data_type), reduction: named(redop) }
    }
}

/// What the user adds on the command line to what the file says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImportOptions {
    /// Ranks (`--world`): required where the output does not say (OSU collectives); must agree
    /// where it does.
    pub world: Option<u32>,
    /// The command line the tool ran with (`--command`), where the file does not hold it.
    pub command: Option<String>,
}

/// Reads `file` as `tool`'s output and returns its manifest (nothing is written).
pub fn import(tool: ImportTool, file: &Path, options: &ImportOptions) -> Result<Manifest, ImportError> {
    let text = crate::files::read_text(file, crate::files::MANIFEST_LIMIT)?;
    let run = match tool {
        ImportTool::NcclTests => nccl_tests::read(&text, options.command.as_deref()),
        ImportTool::Osu => osu::read(&text),
    }
    .map_err(|p| p.in_file(file))?;
    let world = world_of(&run, options).map_err(|p| p.in_file(file))?;
    check_ranks(&run, world).map_err(|p| p.in_file(file))?;
    check_bus_factor(&run, world).map_err(|p| p.in_file(file))?;
    check_sizes(&run, world).map_err(|p| p.in_file(file))?;
    // The file's own sha256 (a byte-order mark the reading dropped included), as `sha256sum` says.
    let raw = std::fs::read(file).map_err(|cause| crate::files::FileError::Io { path: file.into(), action: "read", cause })?;
    let manifest = manifest_of(run, world, file, &sha256_hex(&raw), options.command.clone());
    check_manifest(&manifest).map_err(|p| p.in_file(file))?;
    Ok(manifest)
}

/// nccl-tests' binaries parlab does not read (their ops are not collectives a row holds).
const OTHER_NCCL_TESTS: [&str; 5] = ["reduce_perf", "gather_perf", "scatter_perf", "hypercube_perf", "alltoallv_perf"];

/// Whether `name` is a benchmark binary of nccl-tests or OSU (read or not by parlab).
pub fn is_benchmark_binary(name: &str) -> bool {
    nccl_tests::BENCHMARKS.iter().any(|(b, _)| *b == name)
        || OTHER_NCCL_TESTS.contains(&name)
        || osu::BENCHMARKS.iter().any(|(_, b, ..)| *b == name)
}

/// The shortest time an imported row may hold, µs: no collective completes in under a
/// nanosecond (their tables print µs with two decimals, nccl-tests' JSON with six), and a time near the smallest
/// float would be written as 0 s and break the fit.
pub const MIN_US: f64 = 1e-3;

/// Why `us` microseconds is no time a row may hold (below [`MIN_US`], or past [`MAX_SECONDS`],
/// which makes every reader of manifests skip the manifest), in words that follow the number;
/// None where it is one.
pub fn implausible_us(us: f64) -> Option<&'static str> {
    if us < MIN_US {
        Some("is below 1 ns: not a time a collective takes")
    } else if us * 1e-6 > MAX_SECONDS {
        Some("is more than 1e15 s: not a time a benchmark measured")
    } else {
        None
    }
}

/// Refuses a manifest every reader would skip: a fit whose numbers are not finite (times so
/// short that 1/t² overflows; JSON has no NaN, so it would be written with nulls no reader can
/// read back), or a number the readers' plausibility check refuses (a sum of wrong counts past
/// 2^60; the readers above refuse single numbers at their line), or a manifest larger than
/// the readers read.
fn check_manifest(m: &Manifest) -> Result<(), Problem> {
    check_fits(m)?;
    // As `Manifest::write` writes it.
    let text = serde_json::to_string_pretty(m).map_err(|e| Problem::file(format!("cannot be written as a manifest: {e}")))?;
    if text.len() as u64 + 1 > crate::files::MANIFEST_LIMIT {
        return Err(Problem::file(format!(
            "its manifest would be {} bytes, more than the {} bytes every reader of manifests reads: split the output into several files",
            text.len(),
            crate::files::MANIFEST_LIMIT
        )));
    }
    match crate::manifest::plausible::check_text(&text) {
        Err(crate::manifest::plausible::TextProblem::Implausible(found)) => {
            Err(Problem::file(format!("{found}: every reader of manifests would skip it, so it is not written")))
        }
        _ => Ok(()),
    }
}

fn check_fits(m: &Manifest) -> Result<(), Problem> {
    let Some(c) = m.summary().and_then(Summary::collectives) else { return Ok(()) };
    for f in &c.fits {
        let numbers = [f.line.intercept_s, f.line.slope_s_per_byte, f.alpha_per_step_s, f.beta_bps.unwrap_or(0.0)];
        if numbers.iter().all(|x| x.is_finite()) {
            continue;
        }
        let times: Vec<f64> = c.rows.iter().map(CollectiveRow::fit_time).collect();
        let (shortest, longest) = times.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), t| (lo.min(*t), hi.max(*t)));
        return Err(Problem::file(format!(
            "the α–β fit of {} through these times is not a finite number (times from {shortest:e} s to {longest:e} s): not times a benchmark measured",
            f.op.name()
        )));
    }
    Ok(())
}

/// sha256 of `bytes`, 64 hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The run's ranks: the output's, `--world`'s, and refused where they disagree or neither says.
fn world_of(run: &ToolRun, options: &ImportOptions) -> Result<u32, Problem> {
    match (run.world, options.world) {
        (Some(a), Some(b)) if a != b => Err(Problem::file(format!(
            "the output says {a} ranks ran {}, but --world says {b}; leave --world out or make it {a}",
            run.benchmark
        ))),
        (_, Some(0)) => Err(Problem::file("--world 0: a run has at least 1 rank")),
        (_, Some(1)) if run.tool == ImportTool::Osu => Err(Problem::file(format!(
            "--world 1: {} needs at least 2 processes (the OSU benchmarks refuse to run on 1); make it the -np it ran with",
            run.benchmark
        ))),
        (_, Some(w)) if w > MAX_WORLD => Err(Problem::file(format!("--world {w}: a run has at most {MAX_WORLD} ranks"))),
        (Some(w), _) if w > MAX_WORLD => Err(Problem::file(format!("the output lists {w} ranks: a run has at most {MAX_WORLD} ranks"))),
        (Some(w), _) | (None, Some(w)) => Ok(w),
        (None, None) => {
            Err(Problem::file(format!("{}'s output does not say how many ranks ran; pass --world N (the -np it ran with)", run.benchmark)))
        }
    }
}

/// Refuses a device listed for a rank the run did not have (ranks are 0 to world − 1).
fn check_ranks(run: &ToolRun, world: u32) -> Result<(), Problem> {
    match run.devices.iter().find(|d| d.device.rank >= world) {
        Some(d) => Err(d.at.problem(format!("rank {} is listed, but the run had {world} ranks (0 to {})", d.device.rank, world - 1))),
        None => Ok(()),
    }
}

/// Half the last printed digit of nccl-tests' bandwidths (`%6.2f`): the most a printed one is
/// off its computed value.
const BANDWIDTH_ROUNDING: f64 = 0.005;

/// Whether `bus` can be `factor` × `alg` as printed: within 2 %, or some algbw inside `alg`'s
/// rounding gives a busbw inside `bus`'s (nccl-tests computes busbw as algbw × the factor and
/// prints both to two decimals, so a slow row's ratio is loose, but not arbitrary).
fn bus_factor_holds(alg: f64, bus: f64, factor: f64) -> bool {
    // A hair past the rounding, so a value exactly at its edge is not refused by float error.
    let h = BANDWIDTH_ROUNDING + 1e-9;
    let within = alg > 0.0 && ((bus / alg) - factor).abs() <= 0.02 * factor;
    within || (factor * (alg - h) <= bus + h && factor * (alg + h) >= bus - h)
}

/// Refuses a file whose busbw / algbw is not the op's bus factor at `world` (a wrong world, or
/// a table of another op), at every row: [`bus_factor_holds`].
fn check_bus_factor(run: &ToolRun, world: u32) -> Result<(), Problem> {
    let factor = run.op.busbw_factor(world);
    for s in &run.sizes {
        let Some((alg, bus)) = s.bandwidths else { continue };
        if !bus_factor_holds(alg, bus, factor) {
            return Err(s.problem(format!(
                "at {} bytes busbw / algbw = {bus} / {alg} = {:.3}, but {} over {world} ranks has bus factor {factor:.3}: the ranks are not {world}",
                s.size_bytes,
                bus / alg,
                run.op.name()
            )));
        }
    }
    Ok(())
}

/// Refuses a per-peer size (OSU's all-gather, all-to-all) whose bytes over `world` ranks do
/// not fit in 64 bits, and a size (in nccl-tests' convention) past 2^60 bytes, which every
/// reader of manifests would skip.
fn check_sizes(run: &ToolRun, world: u32) -> Result<(), Problem> {
    let per_peer = run.sizes_as == SizeConvention::PerPeer;
    if per_peer {
        if let Some(s) = run.sizes.iter().find(|s| s.size_bytes.checked_mul(u64::from(world)).is_none()) {
            return Err(s.problem(format!(
                "size {} bytes per peer × {world} ranks passes 2^64 bytes: not a message size parlab counts",
                s.size_bytes
            )));
        }
    }
    let bytes = |s: &SizeResult| if per_peer { s.size_bytes * u64::from(world) } else { s.size_bytes };
    // Compared as integers: 2^60 + 1 is 2^60 as a float.
    match run.sizes.iter().find(|s| bytes(s) > 1 << 60) {
        Some(s) if per_peer => Err(s.problem(format!(
            "size {} bytes per peer × {world} ranks is more than 2^60 bytes: not a message size parlab counts",
            s.size_bytes
        ))),
        Some(s) => Err(s.problem(format!("size {} bytes is more than 2^60 bytes: not a message size parlab counts", s.size_bytes))),
        None => Ok(()),
    }
}

/// The sizes in nccl-tests' convention, each with its out-of-place and in-place samples
/// (seconds) and wrong count, in first-seen order.
fn per_size(run: &ToolRun, world: u32) -> Vec<(u64, Vec<f64>, Vec<f64>, u64)> {
    let mut out: Vec<(u64, Vec<f64>, Vec<f64>, u64)> = Vec::new();
    let mut index: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    for s in &run.sizes {
        let size = match run.sizes_as {
            SizeConvention::NcclTests => s.size_bytes,
            SizeConvention::PerPeer => s.size_bytes * u64::from(world),
        };
        let at = *index.entry(size).or_insert_with(|| {
            out.push((size, Vec::new(), Vec::new(), 0));
            out.len() - 1
        });
        out[at].1.push(s.out_of_place_us * 1e-6);
        out[at].2.extend(s.in_place_us.map(|t| t * 1e-6));
        out[at].3 = out[at].3.saturating_add(s.wrong);
    }
    out
}

/// The imported rows: `op_time` and `time` are both the tool's out-of-place time (one sample
/// per cycle the tool ran: its mean over timed iterations, averaged over ranks), `spread` has
/// no samples (n = 0: the tools do not report it), `in_place_op_time` the in-place time.
pub fn rows_of(run: &ToolRun, world: u32, link: &Link) -> Vec<CollectiveRow> {
    per_size(run, world)
        .into_iter()
        .filter_map(|(size, out_of_place, in_place, wrong)| {
            let time = Stats::of(&out_of_place)?;
            Some(CollectiveRow {
                op: run.op,
                size_bytes: size,
                world,
                link: link.clone(),
                time,
                spread: Stats::default(),
                op_time: Some(time),
                in_place_op_time: Stats::of(&in_place),
                wrong,
            })
        })
        .collect()
}

/// The link name an imported run is shown under: `nccl` for nccl-tests, `mpi` for OSU.
pub fn link_of(tool: ImportTool) -> Link {
    match tool {
        ImportTool::NcclTests => Link::Nccl(crate::nccl::Setting::Default),
        ImportTool::Osu => Link::Named("mpi".into()),
    }
}

/// How an imported run's times were taken, as the summary says it.
fn timing(tool: ImportTool) -> String {
    match tool {
        ImportTool::NcclTests => "imported from nccl-tests: per size, the tool's time (µs in its output) of `iters` calls back to back after warm-up, divided by the calls and averaged over ranks; op_time_s and time_s are both that out-of-place time, one sample per cycle the tool ran (not a distribution of iterations); in_place_op_time_s the in-place time; rank_spread_s not reported by the tool (n = 0); wrong = #wrong out of place plus in place",
        ImportTool::Osu => "imported from OSU micro-benchmarks: per size, the tool's average latency (µs in its output) over its timed iterations, averaged over ranks (osu_latency: half the round trip); op_time_s and time_s are both that time, one sample; rank_spread_s not reported by the tool (n = 0); no in-place time",
    }
    .into()
}

/// The run identity of an import: the tool, the file's bytes and the world, under a tag no
/// measured run's identity material has.
pub fn run_id_of(tool: ImportTool, sha256: &str, world: u32) -> String {
    crate::identity::digest(&json!({ "imported": { "tool": tool.name(), "file_sha256": sha256, "world": world } }))
}

/// The manifest of an imported run (status ok, kind collectives, provenance imported).
pub fn manifest_of(run: ToolRun, world: u32, file: &Path, sha256: &str, command: Option<String>) -> Manifest {
    let link = link_of(run.tool);
    let rows = rows_of(&run, world, &link);
    let run_id = run_id_of(run.tool, sha256, world);
    let plan = plan_of(&run, world, sha256, &run_id, &rows);
    // A size the tool found a wrong result at is a failure, not a time to fit (as a wrong
    // collective fails parlab's own run): its row is kept, with its count, and left out of the fit.
    let checked: Vec<_> = rows.iter().filter(|r| r.wrong == 0).cloned().collect();
    let fits = fit_of(run.op, world, &checked).into_iter().collect();
    let summary = Summary::Collectives(Collectives {
        rows,
        fits,
        timing: timing(run.tool),
        fit_method:
            "costmodel::link::fit_collective on the imported out-of-place time per size whose result the tool found right (wrong 0)".into(),
    });
    let mut seen = std::collections::HashSet::new();
    let hosts: Vec<String> = run.devices.iter().map(|d| &d.device.host).filter(|h| seen.insert(*h)).cloned().collect();
    let imported = Imported {
        tool: run.tool,
        version: run.version,
        library: run.library,
        benchmark: run.benchmark,
        command: run.command.or(command),
        devices: run.devices.into_iter().map(|d| d.device).collect(),
        hosts,
        warmup: run.warmup,
        iterations: run.iterations,
        checked: run.checked,
        ran_at: run.ran_at,
        data_type: run.data.data_type,
        // nccl-tests prints its `-o` op for sendrecv too, which reduces nothing.
        reduction: run.data.reduction.filter(|_| matches!(run.op, Op::AllReduce | Op::ReduceScatter)),
        // Where the file lay, whatever folder the import ran from.
        file: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
        format: run.format,
        sha256: sha256.to_string(),
    };
    let now = crate::manifest::now();
    let mut m = Manifest::for_plan(&plan, Fingerprint::default(), &now, Outcome::computed(summary));
    m.schema = SCHEMA.into();
    m.origins = vec![Origin::of(&plan)];
    m.provenance = Provenance::Imported(Box::new(imported));
    m
}

/// The plan an imported run is filed under: what ran as far as the output says (its ops,
/// sizes and iterations; 0 iterations where it does not say), its link and world; no spec file.
fn plan_of(run: &ToolRun, world: u32, sha256: &str, run_id: &str, rows: &[CollectiveRow]) -> RunPlan {
    let layout = Layout {
        strategy: Strategy::Data,
        world,
        head: None,
        sequences: None,
        overlap: None,
        decode: None,
        ranks: (0..world)
            .map(|rank| RankShare {
                rank,
                heads: None,
                ffn: None,
                layers: None,
                vocab: None,
                experts: None,
                tokens: None,
                tokens_late: None,
                kv_heads: None,
            })
            .collect(),
    };
    RunPlan {
        experiment: format!("import-{}-{}", run.tool.name(), crate::identity::short(sha256)),
        index: 0,
        // No spec: the file read is the provenance's (a spec path would be read for claims).
        spec_path: PathBuf::new(),
        spec_sha256: sha256.to_string(),
        run_id: crate::identity::RunId::new(run_id),
        answer_id: crate::identity::AnswerId::new(run_id),
        model: None,
        link: link_of(run.tool),
        backend: link_of(run.tool).backend(),
        threads_per_rank: 1,
        repetitions: 1,
        warmup: run.warmup.unwrap_or(0),
        launches: 1,
        timeout_s: 0.0,
        requires: Requires::default(),
        device: if run.tool == ImportTool::NcclTests { Device::Cuda } else { Device::Cpu },
        step: crate::spec::schema::StepMode::Eager,
        launcher: Launcher::Mpirun,
        hostfile: None,
        hostfile_sha256: None,
        interface: None,
        workload: Workload::Collectives(CollectiveParams {
            ops: vec![run.op],
            sizes: rows.iter().map(|r| r.size_bytes).collect(),
            iterations: run.iterations.unwrap_or(0),
        }),
        layout,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/import").join(name)
    }

    fn rows(m: &Manifest) -> &[CollectiveRow] {
        &m.summary().and_then(Summary::collectives).expect("a collectives summary").rows
    }

    #[test]
    fn a_size_with_wrong_results_is_kept_as_a_row_and_left_out_of_the_fit() {
        let rows: String = [(1024u64, 9.0, 0), (4096, 10.0, 0), (16384, 14.0, 0), (65536, 30.0, 5), (262144, 90.0, 0)]
            .iter()
            .map(|(size, us, wrong)| format!("{size:>12} {:>12} float sum -1 {us} 0.1 0.1 {wrong} {us} 0.1 0.1 0\n", size / 4))
            .collect();
        let text = format!("{NCCL_HEAD}{rows}{NCCL_TAIL}");
        let run = nccl_tests::read_text(&text).unwrap();
        let m = manifest_of(run, 2, Path::new("out.txt"), &"0".repeat(64), None);
        let c = m.summary().and_then(Summary::collectives).unwrap();
        assert_eq!(c.rows.iter().map(|r| r.wrong).collect::<Vec<_>>(), vec![0, 0, 0, 5, 0], "every size is a row");
        let fit = c.fit(Op::AllReduce).expect("a fit of the right sizes");
        assert_eq!(fit.fitted_points, 4, "all five sizes are within the fit's 1 MiB; the wrong one is left out: {fit:?}");
    }

    #[test]
    fn nccl_tests_json_becomes_rows_in_seconds_with_devices_hosts_and_a_fit() {
        let m = import(ImportTool::NcclTests, &data("nccl_all_reduce_8gpu.json"), &ImportOptions::default()).unwrap();
        let i = m.provenance.imported().unwrap();
        assert_eq!((i.benchmark.as_str(), i.library.as_deref(), i.version.as_deref()), ("all_reduce_perf", Some("NCCL 2.28.9"), None));
        assert_eq!(i.command.as_deref(), Some("./build/all_reduce_perf -b 8 -e 512M -f 4 -g 1 -c 1 -J ar.json"));
        assert_eq!(
            (i.devices.len(), i.hosts.clone(), i.warmup, i.iterations, i.checked),
            (8, vec!["node-a".to_string(), "node-b".into()], Some(5), Some(20), true)
        );
        assert_eq!(i.devices[5].name, "NVIDIA H200 [0000:1a:00]");
        let r = rows(&m);
        assert_eq!((r.len(), r[0].size_bytes, r[13].size_bytes, m.layout.world, m.plan.link.name()), (14, 8, 512 << 20, 8, "nccl"));
        // 22 µs out of place and 22.4 µs in place at 8 bytes, one sample each.
        assert!((r[0].op_time.unwrap().median - 22.0e-6).abs() < 1e-12 && r[0].op_time.unwrap().n == 1);
        assert!((r[0].in_place_op_time.unwrap().median - 22.4e-6).abs() < 1e-12);
        assert_eq!((r[0].spread.n, r[0].wrong), (0, 0));
        let fit = m.summary().and_then(Summary::collectives).unwrap().fit(Op::AllReduce).expect("an all-reduce fit");
        // The fixture's times are 22 µs + bytes / 180 GB/s: the intercept is 22 µs, and β the bus
        // bandwidth 1.75 × 180 GB/s.
        assert!((fit.line.intercept_s - 22.0e-6).abs() < 0.05e-6, "{fit:?}");
        assert!((fit.beta_bps.unwrap() / 315e9 - 1.0).abs() < 0.01, "{fit:?}");
    }

    #[test]
    fn nccl_tests_text_reads_the_header_the_rank_lines_and_both_timings() {
        let m = import(ImportTool::NcclTests, &data("nccl_all_gather_2gpu.txt"), &ImportOptions::default()).unwrap();
        let i = m.provenance.imported().unwrap();
        assert_eq!(
            (i.version.as_deref(), i.library.as_deref(), i.benchmark.as_str()),
            (Some("2.19.6"), Some("NCCL 2.28.9"), "all_gather_perf")
        );
        assert_eq!((i.warmup, i.iterations, i.checked, i.format), (Some(5), Some(20), true, ImportFormat::Text));
        assert_eq!(i.devices[1], ImportedDevice { rank: 1, host: "gpu-01".into(), device: 1, name: "NVIDIA H200 [0000:3b:00]".into() });
        let r = rows(&m);
        assert_eq!((r.len(), r[0].op, r[0].size_bytes, r[8].size_bytes), (9, Op::AllGather, 1024, 64 << 20));
        assert!((r[8].op_time.unwrap().median - 232.70e-6).abs() < 1e-12);
        assert!((r[8].in_place_op_time.unwrap().median - 233.00e-6).abs() < 1e-12);
    }

    #[test]
    fn the_same_file_gives_the_same_identity_and_another_world_another() {
        let a = import(ImportTool::NcclTests, &data("nccl_all_gather_2gpu.txt"), &ImportOptions::default()).unwrap();
        let b = import(ImportTool::NcclTests, &data("nccl_all_gather_2gpu.txt"), &ImportOptions { world: Some(2), command: None }).unwrap();
        assert_eq!(a.run_id, b.run_id);
        let osu =
            |w| import(ImportTool::Osu, &data("osu_allreduce_4rank.txt"), &ImportOptions { world: Some(w), command: None }).unwrap().run_id;
        assert_ne!(osu(4), osu(8));
        assert_eq!(
            a.run_id.as_str(),
            run_id_of(ImportTool::NcclTests, &sha256_hex(&std::fs::read(data("nccl_all_gather_2gpu.txt")).unwrap()), 2)
        );
    }

    #[test]
    fn osu_reads_the_test_from_its_header_and_counts_all_gather_bytes_as_nccl_tests_does() {
        let ar = import(
            ImportTool::Osu,
            &data("osu_allreduce_4rank.txt"),
            &ImportOptions { world: Some(4), command: Some("mpirun -np 4 osu_allreduce -f".into()) },
        )
        .unwrap();
        let i = ar.provenance.imported().unwrap();
        assert_eq!(
            (i.benchmark.as_str(), i.version.as_deref(), i.command.as_deref()),
            ("osu_allreduce", Some("v7.3"), Some("mpirun -np 4 osu_allreduce -f"))
        );
        let r = rows(&ar);
        assert_eq!((r[0].op, r[0].size_bytes, r[0].link.name(), r[0].in_place_op_time), (Op::AllReduce, 4, "mpi", None));
        assert!((r[0].fit_time() - 3.0e-6).abs() < 1e-12);
        let ag = import(ImportTool::Osu, &data("osu_allgather_4rank.txt"), &ImportOptions { world: Some(4), command: None }).unwrap();
        // OSU's 1-byte all-gather is 4 bytes gathered on each of 4 ranks.
        assert_eq!(rows(&ag).iter().map(|r| r.size_bytes).take(3).collect::<Vec<_>>(), vec![4, 8, 16]);
        let lat = import(ImportTool::Osu, &data("osu_latency.txt"), &ImportOptions::default()).unwrap();
        assert_eq!((rows(&lat)[0].op, lat.layout.world, rows(&lat)[0].size_bytes), (Op::PingPong, 2, 0));
    }

    fn text_problem(tool: ImportTool, text: &str, world: Option<u32>) -> String {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.txt");
        std::fs::write(&file, text).unwrap();
        import(tool, &file, &ImportOptions { world, command: None }).unwrap_err().to_string()
    }

    /// The closing lines nccl-tests prints after its last size.
    const NCCL_TAIL: &str = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.11\n";

    const NCCL_HEAD: &str = "# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809\n# Collective test starting: all_reduce_perf\n#  Rank  0 Group  0 Pid  1 on h device  0 [0000:19:00] NVIDIA H200\n#  Rank  1 Group  0 Pid  2 on h device  1 [0000:3b:00] NVIDIA H200\n#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong\n";

    #[test]
    fn bad_input_names_the_file_and_the_line() {
        let e = text_problem(ImportTool::NcclTests, "{\"version\": 3, \"args\": [\n", None);
        assert!(e.contains("out.txt:2: not JSON"), "{e}");
        let e = text_problem(ImportTool::NcclTests, "{\"version\": 4, \"results\": []}", None);
        assert!(e.contains("not nccl-tests' JSON format 1 to 3 (`version` 4)"), "{e}");
        // Formats 1 and 2 are read as 3 is: what is missing is refused by name.
        let e = text_problem(ImportTool::NcclTests, "{\"version\": 2, \"results\": []}", None);
        assert!(!e.contains("JSON format") && e.contains("`args` are empty"), "{e}");
        let e = text_problem(ImportTool::NcclTests, "{\"version\": \"three\", \"results\": []}", None);
        assert!(e.contains("not nccl-tests' JSON format 1 to 3 (`version` \"three\")"), "a key that is there is not `no version key`: {e}");
        let e = text_problem(ImportTool::NcclTests, "hello\nworld\n", None);
        assert!(e.contains("out.txt: not nccl-tests' output"), "{e}");
        let e = text_problem(ImportTool::NcclTests, NCCL_HEAD, None);
        assert!(e.contains("no rows"), "{e}");
        let e = text_problem(
            ImportTool::NcclTests,
            &format!("{NCCL_HEAD}        1024   256   float   sum   -1   9.0   0.11\n{NCCL_TAIL}"),
            None,
        );
        assert!(e.contains("out.txt:6: expected `size count type redop root`"), "{e}");
        let e = text_problem(
            ImportTool::NcclTests,
            &format!("{NCCL_HEAD}        1024   256   float   sum   -1   abc 0.11 0.11 0 9.0 0.11 0.11 0\n{NCCL_TAIL}"),
            None,
        );
        assert!(e.contains("out.txt:6: out-of-place time (µs) `abc` is not a number"), "{e}");
        let e = text_problem(
            ImportTool::NcclTests,
            &format!("{NCCL_HEAD}        1024   256   float   sum   -1   -9.0 0.11 0.11 0 9.0 0.11 0.11 0\n{NCCL_TAIL}"),
            None,
        );
        assert!(e.contains("out.txt:6: out-of-place time (µs) `-9.0` is negative"), "a number, said so: {e}");
        let e = text_problem(ImportTool::NcclTests, "[]\n", None);
        assert!(e.contains("out.txt: a JSON array, where nccl-tests' JSON output (`-J`) is one object"), "{e}");
        let e = text_problem(ImportTool::Osu, "# OSU MPI Gather Latency Test v7.3\n", Some(2));
        assert_eq!(e.matches("osu_alltoall").count(), 1, "each binary named once: {e}");
        let e = text_problem(ImportTool::NcclTests, &NCCL_HEAD.replace("all_reduce_perf", "hypercube_perf"), None);
        assert!(e.contains("out.txt:2: unknown op: benchmark `hypercube_perf`"), "{e}");
        let e = text_problem(
            ImportTool::NcclTests,
            &format!("{NCCL_HEAD}        1024   256   float   sum   -1   9.0 0.11 0.11 0 9.0 0.11 0.11 0\n{NCCL_TAIL}"),
            Some(4),
        );
        assert!(e.contains("the output says 2 ranks ran all_reduce_perf, but --world says 4"), "{e}");
        let e = text_problem(ImportTool::Osu, "# OSU MPI Barrier Latency Test v7.3\n# Avg Latency(us)\n", None);
        assert!(e.contains("out.txt:1: unknown op: `Barrier Latency Test`"), "{e}");
        let e = text_problem(ImportTool::Osu, "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n4  1.5\n", None);
        assert!(e.contains("does not say how many ranks ran; pass --world N"), "{e}");
        let e = text_problem(ImportTool::Osu, "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n4  -1.5\n", Some(2));
        assert!(e.contains("out.txt:3: latency `-1.5` is not a positive number"), "{e}");
        let e = text_problem(ImportTool::Osu, "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n-8  1.5\n", Some(2));
        assert!(e.contains("out.txt:3: size `-8` is not a byte count"), "a negative size is not skipped as noise: {e}");
    }

    #[test]
    fn a_bus_bandwidth_that_disagrees_with_the_world_is_refused() {
        // busbw = algbw × 2(p−1)/p: 1.5 at 4 ranks, not 1.0 (2 ranks).
        let row = "     1048576   262144   float   sum   -1   100.0  10.49  15.73  0  100.0  10.49  15.73  0\n";
        let e = text_problem(ImportTool::NcclTests, &format!("{NCCL_HEAD}{row}{NCCL_TAIL}"), None);
        assert!(e.contains("all-reduce over 2 ranks has bus factor 1.000"), "{e}");
        // A slow row is checked too, to the rounding of its two decimals: 0.10 and 0.2 cannot both
        // round a busbw equal to its algbw (2 ranks), where 0.10 and 0.11 can.
        for (alg, bus, refused) in [("0.10", "0.2", true), ("0.19", "0.99", true), ("0.10", "0.11", false), ("0.00", "0.00", false)] {
            let row = format!("        1024   256   float   sum   -1   10.00  {alg}  {bus}  0  10.00  {alg}  {bus}  0\n");
            let text = format!("{NCCL_HEAD}{row}{NCCL_TAIL}");
            match refused {
                true => assert!(text_problem(ImportTool::NcclTests, &text, None).contains("has bus factor 1.000"), "{alg} {bus}"),
                false => {
                    let dir = tempfile::tempdir().unwrap();
                    std::fs::write(dir.path().join("out.txt"), &text).unwrap();
                    let read = import(ImportTool::NcclTests, &dir.path().join("out.txt"), &ImportOptions { world: None, command: None });
                    assert!(read.is_ok(), "{alg} {bus}: {:?}", read.err());
                }
            }
        }
        assert!(bus_factor_holds(10.49, 15.73, 1.5) && !bus_factor_holds(10.49, 15.73, 1.0));
        let several = format!("{NCCL_HEAD}        1024   256   float   sum   -1   9.0 0.11 0.11 0 9.0 0.11 0.11 0\n        1024   512   half   sum   -1   9.0 0.11 0.11 0 9.0 0.11 0.11 0\n{NCCL_TAIL}");
        let e = text_problem(ImportTool::NcclTests, &several, None);
        assert!(e.contains("out.txt:7: results of 2 data type / reduction pairs (float sum, half sum)"), "{e}");
    }

    #[test]
    fn a_size_or_a_count_one_past_2_to_the_60_is_refused_and_2_to_the_60_kept_exact() {
        let osu = |size: u64| format!("# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n{size}  3.0\n");
        let e = text_problem(ImportTool::Osu, &osu((1 << 60) + 1), Some(2));
        assert!(e.contains("out.txt:3: size 1152921504606846977 bytes is more than 2^60 bytes"), "{e}");
        let row =
            |wrong: &str| format!("{NCCL_HEAD}        1024   256   float   sum   -1   9.0 0.11 0.11 {wrong} 9.0 0.11 0.11 0\n{NCCL_TAIL}");
        let e = text_problem(ImportTool::NcclTests, &row("1152921504606846977"), None);
        assert!(e.contains("out.txt:6: out-of-place #wrong `1152921504606846977` is more than 2^60"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("out.txt");
        std::fs::write(&file, row("1152921504606846976")).unwrap();
        let m = import(ImportTool::NcclTests, &file, &ImportOptions::default()).unwrap();
        assert_eq!(rows(&m)[0].wrong, 1 << 60, "kept exact");
        let both =
            format!("{NCCL_HEAD}        1024   256   float   sum   -1   9.0 0.11 0.11 1152921504606846976 9.0 0.11 0.11 1\n{NCCL_TAIL}");
        let e = text_problem(ImportTool::NcclTests, &both, None);
        assert!(e.contains("out.txt:6: #wrong 1152921504606846976 out of place + 1 in place is more than 2^60"), "{e}");
    }

    #[test]
    fn a_rank_twice_in_the_json_devices_is_refused() {
        let text = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
        let e = text_problem(ImportTool::NcclTests, &text.replacen("\"rank\": 1,", "\"rank\": 0,", 1), None);
        assert!(e.contains("out.txt: config.devices[1]: rank 0 is listed twice (first at config.devices[0])"), "{e}");
    }

    #[test]
    fn a_run_past_the_most_ranks_is_refused_before_its_ranks_are_listed() {
        let text = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
        let huge = text.replacen("\"nthreads\": 1,", "\"nthreads\": 4294967295,", 1);
        let e = text_problem(ImportTool::NcclTests, &huge, None);
        assert!(
            e.contains("8 devices[] × 4294967295 ranks per process (nthreads × ngpus) is 34359738360 ranks: a run has at most 65536"),
            "{e}"
        );
    }

    #[test]
    fn a_fractional_nwrong_in_json_is_refused_not_truncated() {
        let text = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
        assert!(text.contains("\"nwrong\": 0.0"), "the fixture counts wrong elements, written as a float");
        let e = text_problem(ImportTool::NcclTests, &text.replacen("\"nwrong\": 0.0", "\"nwrong\": 1.5", 1), None);
        assert!(e.contains("results[0]: out_of_place: `nwrong` 1.5 is not a count of wrong elements"), "{e}");
    }

    #[test]
    fn a_json_bus_bandwidth_that_disagrees_with_the_world_names_its_result() {
        let text = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
        let e = text_problem(ImportTool::NcclTests, &text.replacen("\"bus_bw\": 312.693567", "\"bus_bw\": 178.682039", 1), None);
        assert!(e.contains("out.txt: results[13]: at 536870912 bytes") && e.contains("over 8 ranks has bus factor 1.750"), "{e}");
    }

    #[test]
    fn a_fractional_iteration_count_is_refused_not_dropped() {
        let options =
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 64 step: 2(factor) warmup iters: 5 iters: 20.5 agg iters: 1 validation: 1 graph: 0\n";
        let row = "        1024   256   float   sum   -1   9.0 0.11 0.11 0 9.0 0.11 0.11 0\n";
        let e = text_problem(ImportTool::NcclTests, &format!("{options}{NCCL_HEAD}{row}{NCCL_TAIL}"), None);
        assert!(e.contains("out.txt:1: `iters:` 20.5 is not a whole number"), "{e}");
        let text = std::fs::read_to_string(data("nccl_all_reduce_8gpu.json")).unwrap();
        let e = text_problem(ImportTool::NcclTests, &text.replacen("\"warmup_iters\": 5", "\"warmup_iters\": 5.5", 1), None);
        assert!(e.contains("out.txt: config.warmup_iters 5.5 is not a whole number"), "{e}");
    }

    #[test]
    fn nccl_version_codes_read_as_versions() {
        assert_eq!(nccl_tests::nccl_version(22809), "NCCL 2.28.9");
        assert_eq!(nccl_tests::nccl_version(2804), "NCCL 2.8.4");
    }
}
