//! Which manifests folder a register was rendered from: `OUT/.parlab-store` names it, and a
//! render refuses to replace a register of another store.

use std::path::{Path, PathBuf};

/// The file in an output folder naming the manifests folder its register was rendered from
/// (relative to the output folder when the two are siblings, else absolute).
pub const STAMP: &str = ".parlab-store";

/// Why a register could not be rendered into a folder, or its store not recorded.
#[derive(Debug, thiserror::Error)]
pub enum OriginError {
    /// The output folder holds the register of another manifests folder.
    #[error(
        "{out}: holds the register rendered from {theirs}, not from {ours}; pass --out DIR to render {ours}'s register elsewhere, or remove {out} to replace it"
    )]
    OtherStore {
        /// The output folder.
        out: PathBuf,
        /// The manifests folder its stamp names.
        theirs: PathBuf,
        /// The manifests folder this render reads.
        ours: PathBuf,
    },
    /// The output folder is another manifests folder (it holds run manifests).
    #[error("{out}: is a manifests folder (it holds {example}); the register's files would be read back as foreign manifests there; pass --out DIR beside it")]
    IsAStore {
        /// The output folder.
        out: PathBuf,
        /// One manifest in it.
        example: PathBuf,
    },
    /// The output folder is the manifests folder itself.
    #[error("{out}: is the manifests folder itself; the register's files (findings.json, ...) would be read back as foreign manifests; pass --out DIR beside it")]
    IsTheStore {
        /// The output folder.
        out: PathBuf,
    },
    /// The output folder, never rendered into (no stamp, no register), holds files a render
    /// would replace or remove.
    #[error(
        "{out}: holds files a render would replace or remove ({}) and no register (no {STAMP}); pass --out DIR to render elsewhere, or move them",
        list(.files)
    )]
    OtherFiles {
        /// The output folder.
        out: PathBuf,
        /// Those files, relative to it, sorted.
        files: Vec<String>,
    },
    /// A path the render writes is of the wrong kind (`tables` a file, `evidence.md` a folder).
    #[error("{path}: {what}; a render writes {writes} there: pass --out DIR to render elsewhere, or move it")]
    WrongKind {
        /// The path.
        path: PathBuf,
        /// What it is (`not a folder`, `a folder`).
        what: &'static str,
        /// What the render writes there.
        writes: &'static str,
    },
    /// The stamp could not be written.
    #[error("cannot write {path}: {cause}")]
    Write {
        /// The stamp file.
        path: PathBuf,
        /// The I/O error (not a `source`, so a chain printer shows it once).
        cause: std::io::Error,
    },
}

/// At most five names, then how many more.
fn list(files: &[String]) -> String {
    let shown = files.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    match files.len() {
        n @ 6.. => format!("{shown} and {} more", n - 5),
        _ => shown,
    }
}

/// The files of `out` a render replaces or removes (`evidence.md`, `findings.json`, and the
/// `.svg` of `figures/` and `.csv` and `.parquet` of `tables/`, which it clears), relative to
/// `out` and sorted; none where `out` holds a register rendered before stamps existed (its
/// `evidence.md` opens with the register's heading, or its `findings.json` is parlab's).
fn at_risk(out: &Path) -> Vec<String> {
    let read = |name: &str| std::fs::read_to_string(out.join(name)).unwrap_or_default();
    if read("evidence.md").starts_with("# Evidence register") || read("findings.json").contains("\"parlab.findings/") {
        return Vec::new();
    }
    let mut files: Vec<String> =
        ["evidence.md", "findings.json"].into_iter().filter(|f| out.join(f).exists()).map(str::to_string).collect();
    for (sub, exts) in super::REPLACED {
        for entry in std::fs::read_dir(out.join(sub)).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_file() && p.extension().and_then(|x| x.to_str()).is_some_and(|x| exts.contains(&x)) {
                files.push(format!("{sub}/{}", entry.file_name().to_string_lossy()));
            }
        }
    }
    files.sort();
    files
}

/// The register's folder beside the manifests folder `store`: `reports` beside a folder named
/// `manifests` (so `manifests` gives `reports`), else `<name>-reports` beside it.
pub fn default_out(store: &Path) -> PathBuf {
    let named = match store.file_name() {
        Some(_) => store.to_path_buf(),
        // `.`, `..` or `x/..`: the folder it leads to (a path ending in `..` has no name).
        None => std::fs::canonicalize(store).or_else(|_| std::path::absolute(store)).unwrap_or_else(|_| store.to_path_buf()),
    };
    let Some(name) = named.file_name().map(|n| n.to_string_lossy().into_owned()) else { return named.join("reports") };
    let sibling = if name == "manifests" { "reports".to_string() } else { format!("{name}-reports") };
    named.with_file_name(sibling)
}

/// A folder's identity for comparison: its canonical path, or its absolute path if it is gone.
fn identity(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).or_else(|_| std::path::absolute(path)).unwrap_or_else(|_| path.to_path_buf())
}

/// Whether `a` and `b` name one folder (by [`identity`]: links and `..` resolved).
pub fn same_folder(a: &Path, b: &Path) -> bool {
    identity(a) == identity(b)
}

/// The manifests folder `out`'s register was rendered from, if its stamp says.
pub fn rendered_from(out: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(out.join(STAMP)).ok()?;
    let line = text.lines().next().map(str::trim).filter(|l| !l.is_empty())?;
    Some(out.join(line))
}

/// Refuses when `out` holds a register rendered from a manifests folder other than `store`, or,
/// without a stamp, files a render would replace or remove that are not a register's (a folder
/// without a stamp, from before stamps or never rendered, may be written when nothing is lost).
pub fn check(out: &Path, store: &Path) -> Result<(), OriginError> {
    if same_folder(out, store) {
        return Err(OriginError::IsTheStore { out: out.to_path_buf() });
    }
    if let Some(example) = a_manifest_in(out) {
        return Err(OriginError::IsAStore { out: out.to_path_buf(), example });
    }
    for (name, folder, writes) in [
        ("figures", true, "its figures"),
        ("tables", true, "its tables"),
        ("evidence.md", false, "the register"),
        ("findings.json", false, "the findings"),
    ] {
        let path = out.join(name);
        let Ok(meta) = std::fs::metadata(&path) else { continue };
        if meta.is_dir() != folder {
            return Err(OriginError::WrongKind { path, what: if folder { "not a folder" } else { "a folder" }, writes });
        }
    }
    match rendered_from(out).map(|p| identity(&p)) {
        Some(theirs) if theirs != identity(store) => {
            Err(OriginError::OtherStore { out: out.to_path_buf(), theirs, ours: store.to_path_buf() })
        }
        Some(_) => Ok(()),
        None => match at_risk(out) {
            files if files.is_empty() => Ok(()),
            files => Err(OriginError::OtherFiles { out: out.to_path_buf(), files }),
        },
    }
}

/// A run manifest (`*.json` of schema `parlab.manifest/…`) directly in `out`, if any.
pub fn a_manifest_in(out: &Path) -> Option<PathBuf> {
    let entries = std::fs::read_dir(out).ok()?;
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .find(|p| crate::manifest::file_schema(p).is_some_and(|schema| schema.starts_with("parlab.manifest/")))
}

/// Writes `out`'s stamp naming `store` (`../manifests` when they are siblings).
pub fn record(out: &Path, store: &Path) -> Result<(), OriginError> {
    let (out_id, store_id) = (identity(out), identity(store));
    let text = match (out_id.parent(), store_id.parent(), store_id.file_name()) {
        (Some(a), Some(b), Some(name)) if a == b => Path::new("..").join(name),
        _ => store_id.clone(),
    };
    let path = out.join(STAMP);
    crate::manifest::write_atomic(&path, format!("{}\n", text.display()).as_bytes()).map_err(|cause| OriginError::Write { path, cause })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_register_sits_beside_its_store() {
        assert_eq!(default_out(Path::new("manifests")), PathBuf::from("reports"));
        assert_eq!(default_out(Path::new("/tmp/x")), PathBuf::from("/tmp/x-reports"));
        assert_eq!(default_out(Path::new("/srv/run/manifests")), PathBuf::from("/srv/run/reports"));
        // A path ending in `..` names the folder it leads to: never a register inside the store.
        let tmp = tempfile::tempdir().unwrap();
        let store = tmp.path().join("manifests");
        std::fs::create_dir_all(store.join("_gates")).unwrap();
        let out = default_out(&store.join("_gates").join(".."));
        assert_eq!(out, std::fs::canonicalize(tmp.path()).unwrap().join("reports"));
    }

    #[test]
    fn a_register_of_another_store_is_refused_and_its_own_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b, out) = (dir.path().join("a"), dir.path().join("b"), dir.path().join("reports"));
        for d in [&a, &b, &out] {
            std::fs::create_dir_all(d).unwrap();
        }
        check(&out, &a).unwrap();
        record(&out, &a).unwrap();
        assert_eq!(std::fs::read_to_string(out.join(STAMP)).unwrap(), "../a\n");
        check(&out, &a).unwrap();
        let err = check(&out, &b).unwrap_err().to_string();
        assert!(err.contains(&identity(&a).display().to_string()) && err.contains(&b.display().to_string()), "{err}");
    }
}
