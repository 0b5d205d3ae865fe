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
    crate::files::env_path("PARLAB_STATE").unwrap_or_else(|| PathBuf::from(".parlab"))
}

/// The folder of the seeded checkpoint for `name` and `seed`, made by `generator` from the
/// config whose digest is `config_sha256`: an edited config (or another generator, or a name
/// that differs only in characters a folder name cannot keep) gets a folder of its own.
pub fn seeded_dir(name: &str, seed: u64, generator: &str, config_sha256: &str) -> PathBuf {
    let safe: String = name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    let what = hex::encode(Sha256::digest(format!("{name}\n{generator}\n{config_sha256}")));
    state_dir().join("checkpoints").join(format!("{safe}-seed{seed}-{}", &what[..12]))
}

/// The seeded checkpoint folders beside `dir` (one of [`seeded_dir`]'s) that it supersedes:
/// those of the same model name and seed made from another config or generator, and the one
/// named before folders carried that hash (`<model>-seed<S>`).
pub fn superseded(dir: &Path) -> Vec<PathBuf> {
    let (Some(parent), Some(name)) = (dir.parent(), dir.file_name().and_then(|n| n.to_str())) else { return Vec::new() };
    let Some((stem, _)) = name.rsplit_once('-').filter(|(_, h)| is_folder_hash(h)) else { return Vec::new() };
    let older = |other: &str| {
        other != name && (other == stem || other.strip_prefix(stem).and_then(|r| r.strip_prefix('-')).is_some_and(is_folder_hash))
    };
    std::fs::read_dir(parent)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_str().is_some_and(older) && e.path().is_dir())
        .map(|e| e.path())
        .collect()
}

/// Whether `text` is the 12 hex digits [`seeded_dir`] ends a folder name with.
fn is_folder_hash(text: &str) -> bool {
    text.len() == 12 && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// Why a spec's model cannot be run: its folder, its config or its checkpoint.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The model's config.json could not be read (a missing folder names the models there are).
    #[error("{cause}")]
    Config {
        /// Why the config could not be read.
        cause: crate::model::ModelError,
    },
    /// The model's family is not one parlab decodes.
    #[error("{name} is a {model_type} model; the decode workload runs model_type {}", Family::runnable_types())]
    NotRunnable {
        /// The model as the spec names it.
        name: String,
        /// Its `model_type`.
        model_type: String,
    },
    /// A Llama-family config parlab cannot compute exactly.
    #[error("{name}: {cause}")]
    Llama {
        /// The model as the spec names it.
        name: String,
        /// What is wrong in its config.
        cause: crate::model::ConfigError,
    },
    /// A config whose shape parlab does not count (a size key that is not a positive integer,
    /// parameters past 2^50).
    #[error("{name}: {cause}")]
    Shape {
        /// The model as the spec names it.
        name: String,
        /// What is wrong in its shape.
        cause: crate::costmodel::shape::ShapeError,
    },
    /// The folder holds a checkpoint in shards (transformers' `model-0000K-of-0000N.safetensors`
    /// beside `model.safetensors.index.json`) and no `model.safetensors`: decoding it as a
    /// seeded model would measure another model under its name.
    #[error("{}: a checkpoint in shards ({first}), which parlab does not read: merge them into one model.safetensors (the README's \"Two commands\" says how), or name a folder holding config.json alone for seeded weights", dir.display())]
    Sharded {
        /// The model's folder.
        dir: PathBuf,
        /// The first shard or index file found there.
        first: String,
    },
    /// The checkpoint could not be read for its digest.
    #[error("{}: cannot read: {cause}", path.display())]
    Checkpoint {
        /// The checkpoint file.
        path: PathBuf,
        /// The I/O error.
        cause: std::io::Error,
    },
}

/// Resolves `name`, reads its config, and picks its weights.
pub fn model_source(name: &str, seed: u64) -> Result<(ModelSource, ModelConfig), SourceError> {
    let loc = resolve_model(name);
    let config = ModelConfig::read(&loc.dir).map_err(|cause| SourceError::Config { cause })?;
    let family =
        config.family().ok_or_else(|| SourceError::NotRunnable { name: name.to_string(), model_type: config.model_type.clone() })?;
    if family == Family::Llama {
        crate::model::llama::LlamaDims::from_config(&config).map_err(|cause| SourceError::Llama { name: name.to_string(), cause })?;
    }
    crate::costmodel::shape::shape_from_config(&config).map_err(|cause| SourceError::Shape { name: name.to_string(), cause })?;
    let file = loc.dir.join("model.safetensors");
    if !file.is_file() {
        if let Some(first) = shard_in(&loc.dir) {
            return Err(SourceError::Sharded { dir: loc.dir, first });
        }
    }
    let weights = if file.is_file() {
        let sha256 = cached_file_digest(&file).map_err(|cause| SourceError::Checkpoint { path: file.clone(), cause })?;
        Weights::Checkpoint { path: file, sha256 }
    } else {
        let generator = seeded_generator(family);
        Weights::Seeded { seed, generator: generator.into(), path: seeded_dir(name, seed, generator, &config.digest) }
    };
    let source = ModelSource { name: name.to_string(), dir: loc.dir, config_sha256: config.digest.clone(), weights };
    Ok((source, config))
}

/// The first (by name) file of a sharded checkpoint in `dir`: an index, or a `.safetensors` file
/// other than `model.safetensors`.
fn shard_in(dir: &Path) -> Option<String> {
    let names = std::fs::read_dir(dir).ok()?.flatten().filter_map(|e| e.file_name().into_string().ok());
    names.filter(|n| n.ends_with(".safetensors") || n.ends_with(".safetensors.index.json")).min()
}

/// Whether this process may write the digest cache (only `parlab run` does; `validate`, `plan`
/// and `shape` read it and write nothing).
static CACHE_WRITES: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets this process write `.parlab/digests.json` (called by `parlab run`).
pub fn allow_cache_writes() {
    CACHE_WRITES.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The key a file's digest is cached under: its path, then what changes whenever its bytes may
/// have (size, modification and change times, device and inode). The change time is the
/// kernel's: a copy that keeps the modification time (`cp -p`, `rsync -a`, `tar x`) still
/// moves it.
fn digest_key(path: &Path, meta: &std::fs::Metadata) -> std::io::Result<(String, String)> {
    use std::os::unix::fs::MetadataExt;
    let path = std::fs::canonicalize(path)?.display().to_string();
    let stat = format!(
        "{}|{}.{:09}|{}.{:09}|{}:{}",
        meta.len(),
        meta.mtime(),
        meta.mtime_nsec(),
        meta.ctime(),
        meta.ctime_nsec(),
        meta.dev(),
        meta.ino()
    );
    Ok((format!("{path}|{stat}"), format!("{path}|")))
}

/// sha256 of a file, cached in `.parlab/digests.json` by path and its stat (see `digest_key`).
pub fn cached_file_digest(path: &Path) -> std::io::Result<String> {
    let meta = std::fs::metadata(path)?;
    let (key, path_prefix) = digest_key(path, &meta)?;
    let cache_path = state_dir().join("digests.json");
    let mut cache: BTreeMap<String, String> =
        std::fs::read_to_string(&cache_path).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default();
    if let Some(d) = cache.get(&key) {
        return Ok(d.clone());
    }
    let digest = file_digest(path)?;
    // The file's earlier entries describe bytes it no longer holds.
    cache.retain(|k, _| !k.starts_with(&path_prefix));
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
        // Ctrl-C ends the hashing of a large checkpoint within one MiB, not after it.
        if let Some(sig) = crate::launch::signals::received() {
            let why = format!("interrupted by {} while hashing {}", crate::launch::signals::name(sig), path.display());
            return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, why));
        }
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_holding_a_checkpoint_in_shards_is_refused_not_decoded_with_seeded_weights() {
        let dir = tempfile::tempdir().unwrap();
        let gpt2 = resolve_model("gpt2").dir.join("config.json");
        std::fs::copy(gpt2, dir.path().join("config.json")).unwrap();
        let name = dir.path().to_str().unwrap();
        assert!(matches!(model_source(name, 0), Ok((ModelSource { weights: Weights::Seeded { .. }, .. }, _))), "config alone: seeded");
        for shard in ["model.safetensors.index.json", "model-00001-of-00002.safetensors"] {
            std::fs::write(dir.path().join(shard), b"{}").unwrap();
        }
        let refused = model_source(name, 0).map(|_| ()).unwrap_err();
        assert!(matches!(&refused, SourceError::Sharded { first, .. } if first == "model-00001-of-00002.safetensors"), "{refused}");
        assert!(refused.to_string().contains("merge them into one model.safetensors"), "{refused}");
    }

    #[test]
    fn rewritten_bytes_with_the_old_size_and_modification_time_get_a_new_digest_key() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("model.safetensors");
        std::fs::write(&file, b"weights A").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let (before, prefix) = digest_key(&file, &meta).unwrap();
        assert_eq!(digest_key(&file, &std::fs::metadata(&file).unwrap()).unwrap().0, before, "an untouched file keeps its key");
        std::thread::sleep(std::time::Duration::from_millis(20));
        // What `cp -p` over it does: other bytes of the same size, the old modification time.
        std::fs::write(&file, b"weights B").unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(meta.modified().unwrap()).unwrap();
        let after = std::fs::metadata(&file).unwrap();
        assert_eq!((after.len(), after.modified().unwrap()), (meta.len(), meta.modified().unwrap()));
        let (key, same_prefix) = digest_key(&file, &after).unwrap();
        assert_ne!(key, before, "the change time moved");
        assert_eq!(same_prefix, prefix);
    }

    #[test]
    fn a_new_seeded_checkpoint_supersedes_its_models_older_ones_of_the_same_seed_only() {
        let root = tempfile::tempdir().unwrap();
        let folder = |name: &str| {
            let p = root.path().join(name);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let now = folder("gpt2-seed0-0123456789ab");
        let (old_format, old_config) = (folder("gpt2-seed0"), folder("gpt2-seed0-ba9876543210"));
        let others = [folder("gpt2-seed1-0123456789ab"), folder("gpt2-seed0x"), folder("gpt2-moe-seed0-0123456789ab")];
        let mut found = superseded(&now);
        found.sort();
        assert_eq!(found, vec![old_format, old_config]);
        assert!(others.iter().all(|o| !found.contains(o)));
        assert!(superseded(&root.path().join("not-a-seeded-folder")).is_empty());
    }

    #[test]
    fn a_seeded_checkpoint_folder_is_its_configs_and_generators() {
        let here = seeded_dir("./my model", 0, "g1", "c1");
        let name = here.file_name().unwrap().to_str().unwrap().to_string();
        assert!(name.starts_with("__my_model-seed0-") && name.len() == "__my_model-seed0-".len() + 12, "{name}");
        assert_eq!(seeded_dir("./my model", 0, "g1", "c1"), here);
        for other in
            [seeded_dir("./my model", 0, "g1", "c2"), seeded_dir("./my model", 0, "g2", "c1"), seeded_dir("./my_model", 0, "g1", "c1")]
        {
            assert_ne!(other, here);
        }
    }
}
