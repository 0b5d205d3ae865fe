//! Models: where they live, their configuration, GPT-2 split by shares, and weights.

pub mod config;
pub mod resolve;

pub use config::{ModelConfig, ModelError};
pub use resolve::{resolve_model, ModelLocation};

use std::path::Path;

/// `parlab model init`: writes a seeded checkpoint for `model` into `out`.
pub fn init_command(model: &str, _seed: u64, _out: &Path) -> anyhow::Result<i32> {
    Err(crate::cli::UserError(format!("{model}: seeded checkpoints are not implemented in this version")).into())
}
