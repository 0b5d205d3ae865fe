//! Models: where they live, their configuration, GPT-2 split by shares, and weights.

pub mod config;
pub mod gpt2;
pub mod init;
pub mod matvec;
pub mod reference;
pub mod resolve;
pub mod rng;
pub mod source;
pub mod weights;

pub use config::{ModelConfig, ModelError};
pub use resolve::{resolve_model, ModelLocation};

use std::path::Path;

/// `parlab model init`: writes a seeded checkpoint for `model` into `out`.
pub fn init_command(model: &str, seed: u64, out: &Path) -> anyhow::Result<i32> {
    let loc = resolve_model(model);
    let cfg = ModelConfig::read(&loc.dir).map_err(|e| crate::cli::UserError(e.to_string()))?;
    if cfg.model_type != "gpt2" {
        return Err(crate::cli::UserError(format!(
            "{model} is a {} model; `model init` makes GPT-2-family checkpoints (model_type gpt2)",
            cfg.model_type
        ))
        .into());
    }
    init::replace_checkpoint(&cfg, seed, out)?;
    eprintln!("parlab: wrote {} ({} recipe, seed {seed})", out.display(), crate::spec::weights::SEEDED_GENERATOR);
    Ok(crate::exitcode::OK)
}
