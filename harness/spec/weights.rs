//! Decides where a run's weights come from: a checkpoint file, or a seeded one parlab makes.

use super::plan::{ModelSource, Weights};
use crate::model::config::Family;
use crate::model::{resolve_model, ModelConfig};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The version of parlab's seeded GPT-2 initialisation; part of a seeded checkpoint's identity.
pub const SEEDED_GENERATOR: &str = "parlab-gpt2-init/1";

/// The version of parlab's seeded Llama-family initialisation (`model::init`).
pub const SEEDED_LLAMA_GENERATOR: &str = "parlab-llama-init/1";

/// The seeded generator of a family's checkpoints.
pub fn seeded_generator(family: Family) -> &'static str {
    match family {
        Family::Gpt2 => SEEDED_GENERATOR,
        Family::Llama => SEEDED_LLAMA_GENERATOR,
    }
}

/// Where parlab keeps generated checkpoints and caches (not committed).
pub fn state_dir() -> PathBuf {
    std::env::var_os("PARLAB_STATE").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".parlab"))
}

/// The folder of the seeded checkpoint for `name` and `seed`.
pub fn seeded_dir(name: &str, seed: u64) -> PathBuf {
    let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    state_dir().join("checkpoints").join(format!("{safe}-seed{seed}"))
}

/// Resolves `name`, reads its config, and picks its weights.
pub fn model_source(name: &str, seed: u64) -> Result<(ModelSource, ModelConfig), String> {
    let loc = resolve_model(name);
    let config = ModelConfig::read(&loc.dir).map_err(|e| {
        let known = crate::model::resolve::known_models();
        format!("{e}{}", if known.is_empty() { String::new() } else { format!(" ({})", known.join(", ")) })
    })?;
    let family = config.family().ok_or_else(|| {
        format!("{name} is a {} model; the decode workload runs model_type {}", config.model_type, Family::runnable_types())
    })?;
    if family == Family::Llama {
        crate::model::llama::LlamaDims::from_config(&config).map_err(|e| format!("{name}: {e}"))?;
    }
    let file = loc.dir.join("model.safetensors");
    let weights = if file.is_file() {
        let sha256 = cached_file_digest(&file).map_err(|e| format!("{}: cannot read: {e}", file.display()))?;
        Weights::Checkpoint { path: file, sha256 }
    } else {
        Weights::Seeded { seed, generator: seeded_generator(family).into(), path: seeded_dir(name, seed) }
    };
    let source = ModelSource { name: name.to_string(), dir: loc.dir, config_sha256: config.digest.clone(), weights };
    Ok((source, config))
}

/// Whether this process may write the digest cache (only `parlab run` does; `validate`, `plan`
/// and `shape` read it and write nothing).
static CACHE_WRITES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets this process write `.parlab/digests.json` (called by `parlab run`).
pub fn allow_cache_writes() {
    CACHE_WRITES.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// sha256 of a file, cached in `.parlab/digests.json` by path, size and modification time.
pub fn cached_file_digest(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
    let key = format!("{}|{}|{}", std::fs::canonicalize(path)?.display(), meta.len(), mtime);
    let cache_path = state_dir().join("digests.json");
    let mut cache: BTreeMap<String, String> =
        std::fs::read_to_string(&cache_path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    if let Some(d) = cache.get(&key) {
        return Ok(d.clone());
    }
    let digest = file_digest(path)?;
    cache.insert(key, digest.clone());
    if CACHE_WRITES.load(std::sync::atomic::Ordering::SeqCst) && std::fs::create_dir_all(state_dir()).is_ok() {
        let _ = crate::manifest::write_atomic(&cache_path, serde_json::to_string_pretty(&cache).unwrap_or_default().as_bytes());
    }
    Ok(digest)
}

/// sha256 of a file's bytes, streamed.
pub fn file_digest(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
