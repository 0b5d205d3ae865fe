//! `parlab model`: cost-model tables, or `parlab model init` for a seeded checkpoint.

use clap::{Args, Subcommand};
use std::path::PathBuf;

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
    /// Write a seeded GPT-2-family checkpoint in Hugging Face's format (config.json + model.safetensors).
    Init {
        /// A model name under models/ or a folder holding config.json.
        model: String,
        /// Seed of the initialisation.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Runs `parlab model`.
pub fn run(args: ModelArgs) -> anyhow::Result<i32> {
    match args.action {
        Some(ModelAction::Init { model, seed, out }) => crate::model::init_command(&model, seed, &out),
        None => crate::costmodel::model_command(&args.paths),
    }
}
