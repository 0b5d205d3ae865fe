//! Models: where they live, their configuration, GPT-2 and the Llama family split by shares, and weights.

pub mod config;
pub mod defaults;
pub mod fixed_step;
pub mod gpt2;
pub mod init;
pub mod llama;
pub mod matvec;
pub mod moe;
pub mod part;
pub mod placement;
pub mod reference;
pub mod resolve;
pub mod rng;
pub mod row;
pub mod source;
pub mod weights;

pub use config::{ConfigError, ModelConfig, ModelError};
pub use resolve::{resolve_model, ModelLocation};
