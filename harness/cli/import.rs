//! `parlab import nccl-tests|osu FILE`: another tool's collective benchmarks as a manifest
//! marked as imported, beside parlab's own runs.

use super::Error;
use crate::import::{import, ImportOptions};
use crate::manifest::lock::StoreLock;
use crate::manifest::provenance::{ImportTool, Provenance};
use crate::manifest::Manifest;
use std::path::{Path, PathBuf};

/// The tool whose output a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ToolArg {
    /// nccl-tests: its `-J` JSON file or its printed table.
    NcclTests,
    /// OSU micro-benchmarks: its printed table.
    Osu,
}

impl ToolArg {
    fn tool(self) -> ImportTool {
        match self {
            ToolArg::NcclTests => ImportTool::NcclTests,
            ToolArg::Osu => ImportTool::Osu,
        }
    }
}

/// `parlab import`'s arguments.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The tool that wrote FILE.
    #[arg(value_enum)]
    pub tool: ToolArg,
    /// Its output file.
    pub file: PathBuf,
    /// Manifests folder (default: $PARLAB_MANIFESTS or manifests/).
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,
    /// Ranks the tool ran with, where its output does not say (OSU's collectives); must agree
    /// with the output where it does.
    #[arg(long, value_name = "N")]
    pub world: Option<u32>,
    /// The command line the tool ran with, recorded where the file does not hold it.
    #[arg(long, value_name = "TEXT")]
    pub command: Option<String>,
    /// If another controller holds the manifests folder, wait for it instead of exiting 2.
    #[arg(long)]
    pub wait: bool,
}

/// Reads the file, then writes its manifest (replacing the one an earlier import of the same
/// file wrote) while holding the manifests folder's lock; bad input exits 2 with nothing written.
pub fn run(args: &ImportArgs) -> super::Result<i32> {
    let store = super::folder::Folder::manifests(args.manifests.clone());
    store.not_a_file(super::folder::MANIFESTS_HOLD)?;
    store.not_a_register()?;
    store.not_inside_a_store()?;
    let dir = store.path;
    let options = ImportOptions { world: args.world, command: args.command.clone() };
    let mut manifest = import(args.tool.tool(), &args.file, &options).map_err(|e| Error::Usage(e.to_string()))?;
    let recorded = manifest.provenance.imported().and_then(|i| i.command.as_deref());
    if let Some((given, recorded)) = args.command.as_deref().zip(recorded).filter(|(given, recorded)| given != recorded) {
        crate::say!("warning: --command {given:?} not recorded: {} holds the command it ran with ({recorded})", args.file.display());
    }
    let _lock = StoreLock::acquire(&dir, args.wait).map_err(|e| super::lock_refusal(e, ""))?;
    let earlier = Manifest::path_for(&dir, &manifest.run_id);
    // Read once: for a newer parlab's schema (never replaced) and for the command it recorded.
    let earlier_read = earlier.is_file().then(|| crate::manifest::read_one(&earlier));
    if let Some(Err(crate::manifest::ReadError::ForeignSchema(schema))) = &earlier_read {
        return Err(Error::Usage(format!(
            "{}: this file's import was written by another parlab (manifest schema `{schema}`); it is not replaced: import with the parlab that wrote it, or move the file away",
            earlier.display()
        )));
    }
    let replaced = earlier.exists();
    // The same file imported before at another world (a corrected `--world` replaces it below).
    let other_worlds = same_file_elsewhere(&dir, &manifest);
    let earlier_ones = earlier_read.iter().filter_map(|r| r.as_ref().ok()).chain(&other_worlds);
    let kept = earlier_ones.filter(|_| args.command.is_none()).find_map(|read| earlier_command(&manifest, read));
    if let Provenance::Imported(i) = &mut manifest.provenance {
        if let Some(command) = kept {
            crate::say!("parlab: kept the command the earlier import of this file recorded ({command}); --command replaces it");
            i.command = Some(command);
        }
        if let Some(other) = i.command.as_deref().and_then(|c| other_benchmark(c, &i.benchmark)) {
            crate::say!(
                "warning: the command {:?} not recorded: it runs {other}, but {} is {}'s output",
                i.command.as_deref().unwrap_or(""),
                args.file.display(),
                i.benchmark
            );
            i.command = None;
        }
    }
    let path = manifest.write(&dir)?;
    crate::say!("parlab: {}", describe(&manifest, &path, replaced));
    remove_other_worlds(&dir, &manifest, &other_worlds);
    Ok(crate::exitcode::OK)
}

/// The earlier imports in `dir` of the file `manifest` imports (same tool, same bytes) at
/// another world.
fn same_file_elsewhere(dir: &Path, manifest: &Manifest) -> Vec<Manifest> {
    let Some(ours) = manifest.provenance.imported() else { return Vec::new() };
    let same_file = |m: &Manifest| m.provenance.imported().is_some_and(|i| i.tool == ours.tool && i.sha256 == ours.sha256);
    crate::manifest::read_all(dir).0.into_iter().filter(|m| m.run_id != manifest.run_id && same_file(m)).collect()
}

/// Removes `others`, the earlier imports of the same file at another world: one file is one
/// run, so an import with a corrected `--world` replaces the one it corrects instead of
/// standing beside it as a second run (its world is in the run identity).
fn remove_other_worlds(dir: &Path, manifest: &Manifest, others: &[Manifest]) {
    for other in others {
        let path = Manifest::path_for(dir, &other.run_id);
        match std::fs::remove_file(&path) {
            Ok(()) => crate::say!(
                "parlab: removed the earlier import of this file at world {} ({}): one file is one run, now at world {}",
                other.layout.world,
                path.display(),
                manifest.layout.world
            ),
            Err(e) => crate::say!(
                "warning: the earlier import of this file at world {} stays: cannot remove {}: {e}",
                other.layout.world,
                path.display()
            ),
        }
    }
}

/// The benchmark binary `command` runs where it names one (`.../all_gather_perf`,
/// `osu_bcast`) and that is not `benchmark`.
fn other_benchmark<'a>(command: &'a str, benchmark: &str) -> Option<&'a str> {
    let binaries: Vec<&str> = command
        .split_whitespace()
        // `\`which osu_bcast\``, `"./all_gather_perf"`, `$(...)`: the name without its shell quoting.
        .map(|w| w.trim_matches(|c: char| !(c.is_ascii_alphanumeric() || "_./-".contains(c))))
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .filter(|w| crate::import::is_benchmark_binary(w))
        .collect();
    binaries.iter().all(|b| *b != benchmark).then(|| binaries.first().copied()).flatten()
}

/// The command the earlier import of the same file recorded (`earlier`), where this import has
/// none (the same file, so the same run: its command is still the one it ran with).
fn earlier_command(manifest: &Manifest, earlier: &Manifest) -> Option<String> {
    if manifest.provenance.imported()?.command.is_some() {
        return None;
    }
    earlier.provenance.imported()?.command.clone()
}

/// `imported all_reduce_perf (nccl-tests 2.19.6, NCCL 2.28.9): all-reduce, 27 sizes, world 8, link nccl -> PATH`.
fn describe(m: &Manifest, path: &Path, replaced: bool) -> String {
    let Some(i) = m.provenance.imported() else { return path.display().to_string() };
    let collectives = m.summary().and_then(|s| s.collectives());
    let rows = collectives.map_or(0, |c| c.rows.len());
    let wrong = collectives.map_or(0, |c| c.rows.iter().filter(|r| r.wrong > 0).count());
    let op = collectives.and_then(|c| c.rows.first()).map_or("-", |r| r.op.name());
    let wrong = match wrong {
        0 => String::new(),
        w => format!(" ({w} of them wrong by {}'s own check: kept with their counts, not fitted)", i.tool.name()),
    };
    format!(
        "imported {} ({}): {op}, {rows} sizes{wrong}, world {}, link {} -> {}{}; `parlab report` shows it under \"Imported collectives\"",
        i.benchmark,
        i.tool_line(),
        m.layout.world,
        m.plan.link,
        path.display(),
        if replaced { " (replaced the earlier import of the same file)" } else { "" }
    )
}
