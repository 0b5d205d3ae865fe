//! The command line: one file per command, errors mapped to documented exit codes.

mod advise;
mod audit;
mod folder;
mod gates;
mod import;
mod model;
mod nightly;
mod output;
mod plan;
mod rank;
mod report;
mod run;
mod select;
mod shape;
mod validate;

use crate::exitcode;
use clap::{Parser, Subcommand};
use std::path::PathBuf;

/// Why a command stopped; each kind has its documented exit code.
#[derive(Debug)]
pub enum Error {
    /// A mistake in the user's input (a flag, a path, a store another controller holds): exit 2.
    Usage(String),
    /// Specs with problems, each as file:line:col: key: message: exit 2.
    Spec(crate::spec::Problems),
    /// Anything else that stopped the command (a launch, a write, a render): exit 1.
    Failed(anyhow::Error),
}

/// A command's result: its exit code, or why it stopped.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The exit code this error ends parlab with.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) | Error::Spec(_) => exitcode::USER_ERROR,
            Error::Failed(_) => exitcode::RUN_FAILED,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Usage(message) => write!(f, "{message}"),
            Error::Spec(problems) => write!(f, "{problems}"),
            Error::Failed(e) => write!(f, "error: {e:#}"),
        }
    }
}

impl From<crate::spec::Problems> for Error {
    fn from(problems: crate::spec::Problems) -> Self {
        Error::Spec(problems)
    }
}

impl From<anyhow::Error> for Error {
    fn from(e: anyhow::Error) -> Self {
        Error::Failed(e)
    }
}

impl From<crate::report::origin::OriginError> for Error {
    fn from(e: crate::report::origin::OriginError) -> Self {
        match e {
            crate::report::origin::OriginError::OtherStore { .. }
            | crate::report::origin::OriginError::IsTheStore { .. }
            | crate::report::origin::OriginError::IsAStore { .. }
            | crate::report::origin::OriginError::OtherFiles { .. }
            | crate::report::origin::OriginError::WrongKind { .. } => Error::Usage(e.to_string()),
            crate::report::origin::OriginError::Write { .. } => Error::Failed(e.into()),
        }
    }
}

/// A folder's lock not taken, exit 2 naming the folder: another process holds it (wait, or
/// pass `--wait`), or the folder cannot be made or locked (a read-only folder, a path through
/// a file), the user's to fix. `named` prefixes the message (`--out DIR: `, or nothing).
pub fn lock_refusal(e: crate::manifest::lock::LockError, named: &str) -> Error {
    Error::Usage(format!("{named}{e}"))
}

/// Errors of the parts below the CLI that stop a command with exit 1.
macro_rules! failed_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                Error::Failed(e.into())
            }
        }
    )*};
}

failed_from!(std::io::Error, serde_json::Error);

impl From<crate::costmodel::safetensors_header::HeaderError> for Error {
    fn from(e: crate::costmodel::safetensors_header::HeaderError) -> Self {
        match e {
            crate::costmodel::safetensors_header::HeaderError::Format { .. }
            | crate::costmodel::safetensors_header::HeaderError::NotAFile { .. } => Error::Usage(format!("error: {e}")),
            crate::costmodel::safetensors_header::HeaderError::Io { .. } => Error::Failed(e.into()),
        }
    }
}

/// parlab: declarative benchmarks and an evidence register for distributed LLM inference.
#[derive(Debug, Parser)]
#[command(name = "parlab", version, about, long_about = None)]
pub struct Cli {
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// parlab's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Check specs and print every problem (file:line:col: key: message); exit 2 if any.
    Validate {
        /// Spec files or folders (default: experiments/).
        paths: Vec<PathBuf>,
        /// Refuse a suite that expands to more runs than this.
        #[arg(long, default_value_t = crate::spec::DEFAULT_MAX_RUNS)]
        max_runs: usize,
    },
    /// Print the runs the specs expand to, in run order, with their identities.
    Plan {
        /// Spec files or folders (default: experiments/).
        paths: Vec<PathBuf>,
        /// Print a JSON array, one object per run.
        #[arg(long)]
        json: bool,
        /// Refuse a suite that expands to more runs than this.
        #[arg(long, default_value_t = crate::spec::DEFAULT_MAX_RUNS)]
        max_runs: usize,
    },
    /// Run the specs: launch ranks, collect results, write manifests; then render the register.
    Run {
        /// Spec files or folders (default: experiments/).
        paths: Vec<PathBuf>,
        /// Rerun runs whose manifests already say ok.
        #[arg(long)]
        force: bool,
        /// Do not render reports/evidence.md afterwards.
        #[arg(long)]
        no_report: bool,
        /// If another controller holds the manifests folder, wait for it instead of exiting 2.
        #[arg(long)]
        wait: bool,
        /// Refuse a suite that expands to more runs than this.
        #[arg(long, default_value_t = crate::spec::DEFAULT_MAX_RUNS)]
        max_runs: usize,
        /// Run only runs whose experiment name, label, `experiment#index` or run identity matches
        /// NAME|GLOB (`*`, `?`); repeatable; a pattern that matches nothing exits 2.
        #[arg(long, value_name = "NAME|GLOB")]
        only: Vec<String>,
        /// Render the register into DIR (default: beside the manifests folder: `reports` for
        /// `manifests`, else `<name>-reports`); a DIR holding another store's register exits 2.
        #[arg(long, value_name = "DIR", conflicts_with = "no_report")]
        out: Option<PathBuf>,
        /// Launch every run K times (overrides the specs' `launches`; nightly use: 7).
        #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=100))]
        launches: Option<u32>,
        /// Probe the machine again instead of using the gates cached for this machine and boot.
        #[arg(long)]
        reprobe: bool,
    },
    /// Render reports/evidence.md (and figures, CSV tables) from manifests/.
    Report {
        /// Manifests folder (default: $PARLAB_MANIFESTS or manifests/).
        #[arg(long)]
        manifests: Option<PathBuf>,
        /// Output folder (default: beside the manifests folder: `reports` for `manifests`, else
        /// `<name>-reports`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// If another render holds the output folder, wait for it instead of exiting 2.
        #[arg(long)]
        wait: bool,
        /// Also draw the nightly history in DIR (`parlab nightly --history DIR`) as OUT/trends.md.
        #[arg(long, value_name = "DIR")]
        history: Option<PathBuf>,
    },
    /// Compare answers of runs that share an answer identity; exit 3 if a layout changed one.
    Audit {
        /// Manifests folder (default: $PARLAB_MANIFESTS or manifests/).
        #[arg(long)]
        manifests: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Compare manifests with a baseline folder; exit 3 if an answer changed, 4 if a figure regressed.
    Nightly {
        /// The previous night's manifests folder.
        #[arg(long)]
        baseline: PathBuf,
        /// Tonight's manifests folder (default: $PARLAB_MANIFESTS or manifests/).
        #[arg(long)]
        manifests: Option<PathBuf>,
        /// The smallest relative change of medians that counts as REGRESSED or IMPROVED.
        #[arg(long, default_value_t = 0.10)]
        min_effect: f64,
        /// The false-discovery rate controlled across the night's figures (Benjamini-Hochberg).
        #[arg(long, default_value_t = 0.05)]
        fdr: f64,
        /// Write the verdicts as JUnit XML to this file.
        #[arg(long)]
        junit: Option<PathBuf>,
        /// Write a markdown summary (for a CI job page) to this file.
        #[arg(long)]
        summary: Option<PathBuf>,
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
        /// History folder: append tonight's figures and redraw the trends (trends.md, trends/*.svg).
        #[arg(long)]
        history: Option<PathBuf>,
    },
    /// Print what this machine can do: each probe's command and output (cached for this machine and boot).
    Gates {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Probe the machine again instead of using the gates cached for this machine and boot.
        #[arg(long)]
        reprobe: bool,
    },
    /// Print a model's shape: parameters, stored and streamed bytes, KV cache per token.
    Shape {
        /// A model name under models/ or a folder holding config.json.
        model: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Bytes per value for the byte figures.
        #[arg(long, default_value = "float16")]
        dtype: String,
    },
    /// Advise a split: rank data x tensor x pipeline (x expert) layouts of a model on a machine (MODELLED).
    Advise(advise::AdviseArgs),
    /// Read another tool's collective benchmarks (nccl-tests, OSU) into a manifest marked as imported.
    Import(import::ImportArgs),
    /// Cost-model tables (`parlab model`), or `parlab model init` to make a seeded checkpoint.
    Model(model::ModelArgs),
    /// Inside a rank: run the plan's workload (started by mpirun, not by people).
    #[command(hide = true)]
    Rank {
        /// The run plan (JSON) written by `parlab run`.
        #[arg(long)]
        plan: PathBuf,
        /// Folder for this rank's records.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Parses arguments, runs the command, and returns the exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { exitcode::USER_ERROR } else { exitcode::OK };
        }
    };
    if !matches!(cli.command, Command::Run { .. } | Command::Rank { .. }) {
        restore_broken_pipe_default();
    }
    match size_variables().and_then(|()| dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            crate::say!("{e}");
            e.exit_code()
        }
    }
}

/// Refuses a memory or disk limit variable that is set but is not a size: ignored, it would let
/// a run past the limit its user meant to set.
fn size_variables() -> Result<()> {
    for name in [crate::spec::resources::MAX_MEMORY_ENV, crate::spec::disk::MAX_DISK_ENV] {
        // Set but empty counts as unset (how a shell clears one for a command).
        let Some(value) = std::env::var_os(name).filter(|v| !v.is_empty()) else { continue };
        let text = value.to_string_lossy();
        if value.to_str().and_then(crate::units::parse_bytes).is_none() {
            return Err(Error::Usage(format!(
                "{name}={}: not a size; give bytes (a whole number below 2^64) or a number with B, KB, MB, GB, TB, KiB, MiB, GiB or TiB, e.g. {name}=64GiB",
                text.escape_debug()
            )));
        }
    }
    Ok(())
}

/// Lets a closed stdout end the process as it ends other Unix tools (`parlab plan | head`),
/// instead of a panic at the next print (Rust ignores SIGPIPE by default). Not for `run`,
/// which must end its ranks and keep its manifests: it writes its lines with [`crate::say!`].
fn restore_broken_pipe_default() {
    // SAFETY: sets a signal's disposition to its default before any thread is started.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn dispatch(command: Command) -> Result<i32> {
    match command {
        Command::Validate { paths, max_runs } => validate::run(&paths, max_runs),
        Command::Plan { paths, json, max_runs } => plan::run(&paths, json, max_runs),
        Command::Run { paths, force, no_report, wait, max_runs, only, out, launches, reprobe } => {
            run::run(&paths, &run::RunOptions { force, no_report, wait, max_runs, only, out, launches, reprobe })
        }
        Command::Report { manifests, out, wait, history } => {
            let mut manifests = folder::Folder::manifests(manifests);
            let mut out = out.unwrap_or_else(|| crate::report::origin::default_out(&manifests.path));
            let mut history = history;
            report::into_runs_folder(&mut manifests.path, [Some(&mut out), history.as_mut()]);
            report::run_with_history(&manifests, &out, wait, history.as_deref())
        }
        Command::Audit { manifests, json } => audit::run(&folder::Folder::manifests(manifests), json),
        Command::Nightly { baseline, manifests, min_effect, fdr, junit, summary, json, history } => {
            let policy = crate::nightly::Policy { min_effect, fdr };
            let manifests = folder::Folder::manifests(manifests);
            nightly::run(&baseline, &manifests, &policy, &nightly::Outputs { junit, summary, json, history })
        }
        Command::Gates { json, reprobe } => gates::run(json, reprobe),
        Command::Shape { model, json, dtype } => shape::run(&model, json, &dtype),
        Command::Advise(args) => advise::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Model(args) => model::run(args),
        Command::Rank { plan, out } => rank::run(&plan, &out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_error_has_its_documented_exit_code_and_message() {
        let usage = Error::Usage("--fdr 2: expected a rate between 0 and 1".into());
        assert_eq!((usage.exit_code(), usage.to_string()), (exitcode::USER_ERROR, "--fdr 2: expected a rate between 0 and 1".into()));
        let spec = Error::from(crate::spec::Problems(Vec::new()));
        assert_eq!(spec.exit_code(), exitcode::USER_ERROR);
        let failed = Error::from(anyhow::anyhow!("mpirun exited 1").context("launching run 1"));
        assert_eq!(failed.exit_code(), exitcode::RUN_FAILED);
        assert_eq!(failed.to_string(), "error: launching run 1: mpirun exited 1");
        let io = Error::from(std::io::Error::other("disk full"));
        assert!(matches!(io, Error::Failed(_)) && io.to_string() == "error: disk full", "{io}");
    }
}
