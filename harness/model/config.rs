//! Reads a Hugging Face `config.json` into the dimensions the harness needs.

use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Errors reading a model folder.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The folder or its config.json is missing.
    #[error("{path}: no such model folder (expected a config.json there); known models are the folders under models/")]
    Missing {
        /// The path that was looked up.
        path: PathBuf,
    },
    /// config.json could not be read or parsed.
    #[error("{path}: {message}")]
    BadConfig {
        /// The config file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
}

/// The dimensions of a transformer, read from config.json, with the file's digest.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelConfig {
    /// `model_type` (gpt2, llama, mistral, gemma2, phi3, qwen3, ...).
    pub model_type: String,
    /// Transformer blocks.
    pub layers: u32,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads (equal to `heads` without grouped-query attention).
    pub kv_heads: u32,
    /// Width of the residual stream.
    pub hidden: u32,
    /// Width of the feed-forward block.
    pub intermediate: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Longest sequence the position table holds.
    pub max_positions: u32,
    /// The parsed file, for fields only some families have.
    pub raw: Value,
    /// sha256 of the file's canonical JSON (key order and spacing do not matter).
    pub digest: String,
}

impl ModelConfig {
    /// Reads `dir/config.json`.
    pub fn read(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("config.json");
        let text = std::fs::read_to_string(&path).map_err(|_| ModelError::Missing { path: dir.to_path_buf() })?;
        let raw: Value = serde_json::from_str(&text)
            .map_err(|e| ModelError::BadConfig { path: path.clone(), message: format!("not valid JSON: {e}") })?;
        Self::from_value(raw).map_err(|message| ModelError::BadConfig { path, message })
    }

    /// Builds the dimensions from a parsed config.json.
    pub fn from_value(raw: Value) -> Result<Self, String> {
        let get = |names: &[&str]| names.iter().find_map(|n| raw.get(*n).and_then(Value::as_u64));
        let need = |names: &[&str]| get(names).ok_or_else(|| format!("config.json has none of {names:?}"));
        let model_type = raw.get("model_type").and_then(Value::as_str).unwrap_or("gpt2").to_string();
        let layers = need(&["n_layer", "num_hidden_layers"])? as u32;
        let heads = need(&["n_head", "num_attention_heads"])? as u32;
        let hidden = need(&["n_embd", "hidden_size"])? as u32;
        let kv_heads = get(&["num_key_value_heads"]).map(|v| v as u32).unwrap_or(heads);
        let intermediate = get(&["n_inner", "intermediate_size"]).map(|v| v as u32).unwrap_or(4 * hidden);
        let vocab = need(&["vocab_size"])? as u32;
        let max_positions = get(&["n_positions", "max_position_embeddings"]).unwrap_or(0) as u32;
        if layers == 0 || heads == 0 || hidden == 0 || vocab == 0 {
            return Err("config.json has a zero dimension".into());
        }
        let digest = hex::encode(Sha256::digest(raw.to_string().as_bytes()));
        Ok(ModelConfig { model_type, layers, heads, kv_heads, hidden, intermediate, vocab, max_positions, raw, digest })
    }

    /// The head counts world sizes must divide, as a sorted list of divisors of `heads`.
    pub fn head_divisors(&self) -> Vec<u32> {
        (1..=self.heads).filter(|w| self.heads % w == 0).collect()
    }
}
