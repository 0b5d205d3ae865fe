//! `parlab model`: cost-model tables, or `parlab model init` for a seeded checkpoint.

use super::Error;
use crate::costmodel::{catalogue::Catalogue, tables};
use crate::model::config::Family;
use crate::model::llama::LlamaDims;
use crate::model::{init, resolve_model, ModelConfig};
use crate::spec::{load_suite, Kind, RunPlan};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

/// Arguments of `parlab model`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ModelArgs {
    /// `init` makes a seeded checkpoint; without it, print the cost-model tables.
    #[command(subcommand)]
    pub action: Option<ModelAction>,
    /// `kind: model` specs to tabulate (default: those in experiments/).
    pub paths: Vec<PathBuf>,
}

/// `parlab model` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelAction {
    /// Write a seeded checkpoint (GPT-2 or the Llama family: llama, qwen2, qwen3, mixtral) in Hugging Face's format
    /// (config.json + model.safetensors), at the model's real shape or cut to its first `--layers N` blocks.
    Init {
        /// A model name under models/ or a folder holding config.json.
        model: String,
        /// Seed of the initialisation.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
        /// Keep only the first N transformer blocks (1 to the model's count), at the real width;
        /// config.json records N.
        #[arg(long, value_name = "N")]
        layers: Option<u32>,
    },
}

/// Runs `parlab model`.
pub fn run(args: ModelArgs) -> super::Result<i32> {
    match args.action {
        Some(ModelAction::Init { model, seed, out, layers }) => init_checkpoint(&model, seed, &out, layers),
        None => print_tables(&args.paths),
    }
}

/// `parlab model init`: writes a seeded checkpoint for `model` (cut to `layers` if given) into `out`.
fn init_checkpoint(model: &str, seed: u64, out: &Path, layers: Option<u32>) -> super::Result<i32> {
    let loc = resolve_model(model);
    init::check_not_model(out, &loc.dir).map_err(|e| Error::Usage(e.to_string()))?;
    init::check_out(out).map_err(|e| Error::Usage(e.to_string()))?;
    let whole = ModelConfig::read(&loc.dir).map_err(|e| Error::Usage(e.to_string()))?;
    let cfg = match layers {
        Some(n) => init::with_layers(&whole, n).map_err(|e| Error::Usage(format!("{model}: {e}")))?,
        None => whole,
    };
    let Some(family) = cfg.family() else {
        return Err(Error::Usage(format!(
            "{model} is a {} model; `model init` makes checkpoints of model_type {}",
            cfg.model_type,
            Family::runnable_types()
        )));
    };
    if family == Family::Llama {
        LlamaDims::from_config(&cfg).map_err(|e| Error::Usage(format!("{model}: {e}")))?;
    }
    check_room(model, &cfg, out)?;
    init::replace_checkpoint(&cfg, seed, out)?;
    crate::say!(
        "parlab: wrote {} ({} recipe, seed {seed}, {} layers)",
        out.display(),
        crate::spec::weights::seeded_generator(family),
        cfg.layers
    );
    Ok(crate::exitcode::OK)
}

/// Refuses a checkpoint that would not fit: generated whole in memory (every parameter in
/// float32) and then written into `out`'s filesystem; checked before anything is allocated.
fn check_room(model: &str, cfg: &ModelConfig, out: &Path) -> super::Result<()> {
    use crate::spec::{disk, resources};
    crate::costmodel::shape::shape_from_config(cfg).map_err(|e| Error::Usage(format!("{model}: {e}")))?;
    let params = crate::model::init::seeded_params(cfg).ok_or_else(|| {
        Error::Usage(format!(
            "{model}: parlab makes seeded checkpoints of model_type {} only",
            crate::model::config::Family::runnable_types()
        ))
    })?;
    let bytes = params.saturating_mul(4);
    let what = format!("a seeded checkpoint of {params} float32 parameters generated in memory");
    let memory = resources::Limit::current()
        .and_then(|limit| resources::refusal(Kind::Decode, &resources::Need { bytes: u128::from(bytes), what }, &limit));
    if let Some((_, message)) = memory {
        return Err(Error::Usage(format!("{model}: {message}")));
    }
    let need = disk::DiskNeed { bytes, params, folder: out.to_path_buf() };
    match disk::DiskLimit::for_folder(out).and_then(|limit| disk::refusal(&need, &limit)) {
        Some(message) => Err(Error::Usage(format!("{model}: {message}"))),
        None => Ok(()),
    }
}

/// The `kind: model` runs of the specs under `paths` (default: experiments/), read by the one spec loader.
pub fn model_plans(paths: &[PathBuf]) -> Result<Vec<RunPlan>, crate::spec::Problems> {
    Ok(load_suite(paths)?.into_iter().filter(|r| r.kind() == Kind::Model).collect())
}

/// `parlab model` without a subcommand: prints the modelled tables of the `kind: model` specs.
fn print_tables(paths: &[PathBuf]) -> super::Result<i32> {
    let runs = model_plans(paths)?;
    if runs.is_empty() {
        return Err(Error::Usage("no `kind: model` spec found (looked in the given paths, or experiments/)".into()));
    }
    let catalogue = Catalogue::load_default().map_err(|e| Error::Usage(e.to_string()))?;
    for run in &runs {
        let model_run = tables::ModelRun::from_workload(&run.workload, &catalogue).map_err(|e| Error::Usage(e.to_string()))?;
        let mut text = format!("## {} (MODELLED, run {})\n\n", run.experiment, run.short_id());
        for t in model_run.tables() {
            text.push_str(&crate::report::markdown::table(&t, &[]));
        }
        super::output::print(&text)?;
    }
    Ok(crate::exitcode::OK)
}
