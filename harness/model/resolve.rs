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
    crate::files::env_path("PARLAB_MODELS").unwrap_or_else(|| PathBuf::from("models"))
}

/// True when a spec's `model:` is a folder path (a slash, a leading `.`, or absolute), not a
/// name under `models_root()`.
pub fn is_path(name: &str) -> bool {
    name.contains('/') || name.starts_with('.') || Path::new(name).is_absolute()
}

/// A relative `model:` path found only relative to the working folder (where parlab read model
/// paths before they followed the spec, as `hostfile:` does).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{name}` is read relative to the spec's folder, where {} does not exist; it exists relative to the working folder (where parlab read model paths before they followed the spec, as `hostfile:` does), as {}: write the path relative to the spec's folder, or the absolute path", .from_spec.display(), .from_working_folder.display())]
pub struct OnlyFromWorkingFolder {
    /// The spec's text.
    pub name: String,
    /// Where it is read now: joined to the spec's folder.
    pub from_spec: PathBuf,
    /// Where it exists: from the working folder, made absolute.
    pub from_working_folder: PathBuf,
}

/// A spec's `model:` as the model is then known: a name unchanged, an absolute path unchanged,
/// a relative path joined to the spec's folder `spec_dir` (as `hostfile:` is). A relative path
/// that exists only relative to the working folder (where parlab read model paths before) is
/// refused naming both candidates, never picked silently.
pub fn in_spec(name: &str, spec_dir: &Path) -> Result<String, OnlyFromWorkingFolder> {
    if !is_path(name) || Path::new(name).is_absolute() {
        return Ok(name.to_string());
    }
    let joined: PathBuf = spec_dir.join(name).components().filter(|c| *c != std::path::Component::CurDir).collect();
    if joined.exists() || !Path::new(name).exists() {
        return Ok(as_path(&joined.display().to_string()));
    }
    let from_working_folder = std::fs::canonicalize(name).unwrap_or_else(|_| PathBuf::from(name));
    Err(OnlyFromWorkingFolder { name: name.to_string(), from_spec: joined, from_working_folder })
}

/// `path` as a folder path `is_path` recognises: `tiny` (a spec in the working folder
/// naming `./tiny`) becomes `./tiny`, never a name looked up under `models_root()`.
fn as_path(path: &str) -> String {
    if is_path(path) {
        path.to_string()
    } else {
        format!("./{path}")
    }
}

/// How the register shows a spec's model (`spec` is the spec file; `model` is as `in_spec`
/// made it): a name as it is, a folder by its path from the spec's folder (`./tiny`,
/// `sub/tiny`, `../models/tiny`), and a folder elsewhere as the spec wrote it (an absolute
/// path). The same spec and folder give the same text wherever the checkout lies; the folder
/// itself is `model` (and a run's identity holds its config's digest, never either text).
pub fn shown(model: &str, spec: &Path) -> String {
    if !is_path(model) {
        return model.to_string();
    }
    let plain = |p: &Path| -> PathBuf { p.components().filter(|c| *c != std::path::Component::CurDir).collect() };
    let spec_dir = plain(spec.parent().unwrap_or(Path::new("")));
    match plain(Path::new(model)).strip_prefix(&spec_dir) {
        Ok(relative) if !relative.as_os_str().is_empty() => as_path(&relative.display().to_string()),
        _ => model.to_string(),
    }
}

/// A name without a slash is looked up under `models_root()`; anything else is a path.
pub fn resolve_model(name: &str) -> ModelLocation {
    let dir = if is_path(name) { PathBuf::from(name) } else { models_root().join(name) };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_model_path_is_read_from_the_spec_folder_and_a_working_folder_one_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let specs = root.path().join("specs");
        std::fs::create_dir_all(specs.join("beside")).unwrap();
        std::fs::create_dir_all(root.path().join("elsewhere")).unwrap();
        assert_eq!(in_spec("gpt2", &specs).unwrap(), "gpt2", "a name stays a name");
        assert_eq!(in_spec("/abs/model", &specs).unwrap(), "/abs/model");
        assert_eq!(in_spec("./beside", &specs).unwrap(), specs.join("beside").display().to_string());
        assert_eq!(in_spec("./missing", &specs).unwrap(), specs.join("missing").display().to_string(), "the reader names it");
        let cwd = std::env::current_dir().unwrap();
        let here = tempfile::tempdir_in(&cwd).unwrap();
        let name = format!("./{}", here.path().file_name().unwrap().to_string_lossy());
        let err = in_spec(&name, &specs).unwrap_err();
        assert_eq!(
            (err.from_spec.clone(), err.from_working_folder.clone()),
            (specs.join(name.trim_start_matches("./")), here.path().canonicalize().unwrap())
        );
        let err = err.to_string();
        assert!(err.contains(&specs.join(name.trim_start_matches("./")).display().to_string()), "the spec-relative candidate: {err}");
        assert!(err.contains(&here.path().canonicalize().unwrap().display().to_string()), "the working-folder candidate: {err}");
    }

    #[test]
    fn a_folder_beside_a_spec_in_the_working_folder_stays_a_folder() {
        // `a.yaml` naming `./tiny`: its folder is `` (or `.`), and `tiny` alone would be a
        // catalogue name under models/.
        for spec_dir in ["", "."] {
            let model = in_spec("./tiny", Path::new(spec_dir)).unwrap();
            assert_eq!(model, "./tiny");
            assert!(is_path(&model));
        }
    }

    #[test]
    fn a_folder_model_is_shown_by_its_path_from_the_spec_wherever_the_spec_lies() {
        let shown_in = |root: &str, written: &str| {
            let spec = Path::new(root).join("specs/advice.yaml");
            shown(&in_spec(written, spec.parent().unwrap()).unwrap(), &spec)
        };
        for written in ["./tiny", "tiny/", "sub/tiny", "../models/tiny"] {
            let a = shown_in("/checkouts/one", written);
            assert_eq!(a, shown_in("/elsewhere/two", written), "{written}");
            assert_eq!(a, shown_in("relative/three", written), "{written}");
            assert_eq!(a, shown_in("", written), "{written}");
            assert!(!a.contains("checkouts") && is_path(&a), "{a}");
        }
        assert_eq!(shown_in("/checkouts/one", "./tiny"), "./tiny");
        assert_eq!(shown_in("/checkouts/one", "sub/tiny"), "sub/tiny");
        assert_eq!(shown_in("/checkouts/one", "../models/tiny"), "../models/tiny");
        assert_eq!(shown(&in_spec("./tiny", Path::new(".")).unwrap(), Path::new("./a.yaml")), "./tiny");
        assert_eq!(shown("gpt2", Path::new("/x/specs/a.yaml")), "gpt2", "a name is itself");
        assert_eq!(shown("/data/tiny", Path::new("/x/specs/a.yaml")), "/data/tiny", "elsewhere: as written");
    }
}
