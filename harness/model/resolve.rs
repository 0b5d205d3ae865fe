//! Resolves a spec's `model:` (a name under `models/` or a folder path) to a folder.

use std::path::{Path, PathBuf};

/// Where a model lives and how the spec named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelLocation {
    /// The spec's text (`gpt2`, `./ckpt/gpt2-medium`).
    pub name: String,
    /// The folder holding config.json (and maybe model.safetensors).
    pub dir: PathBuf,
}

/// The folder of known model configurations: `$PARLAB_MODELS`, or `models/` in the working directory.
pub fn models_root() -> PathBuf {
    std::env::var_os("PARLAB_MODELS").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("models"))
}

/// A name without a slash is looked up under `models_root()`; anything else is a path.
pub fn resolve_model(name: &str) -> ModelLocation {
    let dir = if name.contains('/') || name.starts_with('.') || Path::new(name).is_absolute() {
        PathBuf::from(name)
    } else {
        models_root().join(name)
    };
    ModelLocation { name: name.to_string(), dir }
}

/// The names of the folders under `models_root()` that hold a config.json.
pub fn known_models() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(models_root())
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("config.json").is_file())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}
