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
use crate::collect::stats::Stats;
use crate::manifest::provenance::{ImportFormat, ImportTool, Imported, ImportedDevice, Provenance};
use crate::manifest::summary::{CollectiveRow, Collectives, Summary};
use crate::manifest::{machine::Fingerprint, Manifest, Origin, Status, SCHEMA};
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
    /// The ranks it listed.
    pub devices: Vec<ImportedDevice>,
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
    /// Every size in file order (a size repeats where the tool ran several cycles).
    pub sizes: Vec<SizeResult>,
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
        ImportTool::NcclTests => nccl_tests::read(&text),
        ImportTool::Osu => osu::read(&text),
    }
    .map_err(|p| p.in_file(file))?;
    let world = world_of(&run, options).map_err(|p| p.in_file(file))?;
    check_bus_factor(&run, world).map_err(|p| p.in_file(file))?;
    Ok(manifest_of(run, world, file, &sha256_hex(text.as_bytes()), options.command.clone()))
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
        (Some(w), _) | (None, Some(w)) => Ok(w),
        (None, None) => Err(Problem::file(format!(
            "{}'s output does not say how many ranks ran; pass --world N (the -np it ran with)",
            run.benchmark
        ))),
    }
}

/// Refuses a file whose busbw / algbw is not the op's bus factor at `world` (a wrong world, or
/// a table of another op): checked where both bandwidths are at least 1 GB/s, within 2 %
/// (the text format rounds to two decimals).
fn check_bus_factor(run: &ToolRun, world: u32) -> Result<(), Problem> {
    let factor = run.op.busbw_factor(world);
    for s in &run.sizes {
        let Some((alg, bus)) = s.bandwidths.filter(|(a, b)| *a >= 1.0 && *b >= 1.0) else { continue };
        if ((bus / alg) - factor).abs() > 0.02 * factor {
            return Err(Problem::file(format!(
                "at {} bytes busbw / algbw = {bus} / {alg} = {:.3}, but {} over {world} ranks has bus factor {factor:.3}: the ranks are not {world}",
                s.size_bytes,
                bus / alg,
                run.op.name()
            )));
        }
    }
    Ok(())
}

/// The sizes in nccl-tests' convention, each with its out-of-place and in-place samples
/// (seconds) and wrong count, in first-seen order.
fn per_size(run: &ToolRun, world: u32) -> Vec<(u64, Vec<f64>, Vec<f64>, u64)> {
    let mut out: Vec<(u64, Vec<f64>, Vec<f64>, u64)> = Vec::new();
    for s in &run.sizes {
        let size = match run.sizes_as {
            SizeConvention::NcclTests => s.size_bytes,
            SizeConvention::PerPeer => s.size_bytes * u64::from(world),
        };
        let at = match out.iter().position(|e| e.0 == size) {
            Some(i) => i,
            None => {
                out.push((size, Vec::new(), Vec::new(), 0));
                out.len() - 1
            }
        };
        out[at].1.push(s.out_of_place_us * 1e-6);
        out[at].2.extend(s.in_place_us.map(|t| t * 1e-6));
        out[at].3 += s.wrong;
    }
    out
}

/// The imported rows: `op_time` and `time` are both the tool's out-of-place time (one sample
/// per cycle the tool ran: its mean over timed iterations, averaged over ranks), `spread` has
/// no samples (n = 0: the tools do not report it), `in_place_op_time` the in-place time.
pub fn rows_of(run: &ToolRun, world: u32, link: &str) -> Vec<CollectiveRow> {
    per_size(run, world)
        .into_iter()
        .filter_map(|(size, out_of_place, in_place, wrong)| {
            let time = Stats::of(&out_of_place)?;
            Some(CollectiveRow {
                op: run.op,
                size_bytes: size,
                world,
                link: link.to_string(),
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
pub fn link_of(tool: ImportTool) -> &'static str {
    match tool {
        ImportTool::NcclTests => "nccl",
        ImportTool::Osu => "mpi",
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
    let rows = rows_of(&run, world, link);
    let run_id = run_id_of(run.tool, sha256, world);
    let plan = plan_of(&run, world, sha256, &run_id, &rows);
    let fits = fit_of(run.op, world, &rows).into_iter().collect();
    let summary = Summary::Collectives(Collectives {
        rows,
        fits,
        timing: timing(run.tool),
        fit_method: "costmodel::link::fit_collective on the imported out-of-place time per size".into(),
    });
    let mut hosts: Vec<String> = Vec::new();
    for d in &run.devices {
        if !hosts.contains(&d.host) {
            hosts.push(d.host.clone());
        }
    }
    let imported = Imported {
        tool: run.tool,
        version: run.version,
        library: run.library,
        benchmark: run.benchmark,
        command: run.command.or(command),
        devices: run.devices,
        hosts,
        warmup: run.warmup,
        iterations: run.iterations,
        checked: run.checked,
        ran_at: run.ran_at,
        file: file.to_path_buf(),
        format: run.format,
        sha256: sha256.to_string(),
    };
    let now = crate::manifest::now();
    let mut m = Manifest::for_plan(&plan, Fingerprint::default(), &now);
    m.schema = SCHEMA.into();
    m.origins = vec![Origin::of(&plan)];
    m.status = Status::Ok;
    m.summary = Some(summary);
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
        ranks: (0..world).map(|rank| RankShare { rank, heads: None, ffn: None, layers: None, vocab: None, experts: None, tokens: None, tokens_late: None }).collect(),
    };
    RunPlan {
        experiment: format!("import-{}-{}", run.tool.name(), &sha256[..12]),
        index: 0,
        // No spec: the file read is the provenance's (a spec path would be read for claims).
        spec_path: PathBuf::new(),
        spec_sha256: sha256.to_string(),
        run_id: run_id.to_string(),
        answer_id: run_id.to_string(),
        model: None,
        link: link_of(run.tool).to_string(),
        backend: link_of(run.tool).to_string(),
        threads_per_rank: 1,
        repetitions: 1,
        warmup: run.warmup.unwrap_or(0),
        launches: 1,
        timeout_s: 0.0,
        requires: Requires::default(),
        device: if run.tool == ImportTool::NcclTests { Device::Cuda } else { Device::Cpu },
        launcher: Launcher::Mpirun,
        hostfile: None,
        interface: None,
        workload: Workload::Collectives(CollectiveParams {
            ops: vec![run.op],
            sizes: rows.iter().map(|r| r.size_bytes).collect(),
            iterations: run.iterations.unwrap_or(0),
        }),
        layout,
    }
}
