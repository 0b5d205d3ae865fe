//! A rerun's earlier results folder, set aside as `.<run id>.previous` until the new manifest
//! replaces the one naming it: a rerun cut short (a signal, an error that stops the suite, a
//! controller killed outright) puts it back, so stopping a `--force` rerun loses no measurement.
//! The folder is marked with the start time of the manifest it belongs to, so a later
//! controller can tell whether that manifest is still the stored one.

use crate::manifest::{self, Manifest};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The file inside a set-aside folder that names the manifest it belongs to (its `started_at`).
const MARK: &str = ".set-aside-for";

/// Where the results folder `out` is set aside.
fn aside_of(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!(".{name}.previous"))
}

/// The stored manifest's start time (empty where there is none or it does not read).
fn started_at(manifest: &Path) -> String {
    manifest::read_one(manifest).map(|m| m.started_at).unwrap_or_default()
}

/// Moves the results folder `out` of the manifest file `manifest` aside (first settling one an
/// earlier controller left, see [`settle`]); returns where it went, or None where there was none.
pub(super) fn set_aside(out: &Path, manifest: &Path) -> anyhow::Result<Option<PathBuf>> {
    let aside = aside_of(out);
    if aside.exists() {
        settle(&aside, out, manifest)?;
    }
    if !out.exists() {
        return Ok(None);
    }
    // Marked before it moves: a controller killed between the two leaves a marked folder either way.
    std::fs::write(out.join(MARK), started_at(manifest)).with_context(|| format!("cannot mark {}", out.display()))?;
    std::fs::rename(out, &aside).with_context(|| format!("cannot set the earlier results folder {} aside", out.display()))?;
    Ok(Some(aside))
}

/// Puts the folder set aside at `aside` back as `out`, removing the partial `out`.
pub(super) fn restore(aside: &Path, out: &Path) -> anyhow::Result<()> {
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("cannot remove the partial results folder {}", out.display()))?;
    }
    std::fs::rename(aside, out).with_context(|| format!("cannot move {} back to {}", aside.display(), out.display()))?;
    let _ = std::fs::remove_file(out.join(MARK));
    Ok(())
}

/// Removes a folder set aside once the manifest naming it has been replaced.
pub(super) fn discard(aside: Option<PathBuf>) -> anyhow::Result<()> {
    match aside.filter(|p| p.exists()) {
        Some(p) => std::fs::remove_dir_all(&p).with_context(|| format!("cannot remove the earlier results folder {}", p.display())),
        None => Ok(()),
    }
}

/// Settles a folder an earlier controller set aside and never settled: where the stored manifest
/// is still the one it belongs to, it goes back in place of that run's partial results; where a
/// newer manifest was written (the controller stopped between writing it and removing the
/// folder), it is removed. Returns whether it was put back.
fn settle(aside: &Path, out: &Path, manifest: &Path) -> anyhow::Result<bool> {
    let belongs_to = std::fs::read_to_string(aside.join(MARK)).unwrap_or_default();
    if manifest.exists() && belongs_to == started_at(manifest) {
        restore(aside, out)?;
        Ok(true)
    } else {
        discard(Some(aside.to_path_buf()))?;
        Ok(false)
    }
}

/// Settles every folder set aside in the manifests folder `dir` (called with its lock held,
/// before any run); returns the run identities whose earlier results were put back.
pub(super) fn settle_all(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut restored = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".previous")) else { continue };
        if settle(&entry.path(), &Manifest::results_dir(dir, run_id), &Manifest::path_for(dir, run_id))? {
            restored.push(run_id.to_string());
        }
    }
    restored.sort();
    Ok(restored)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifests folder holding run `id`'s manifest started at `when` and its results.
    fn store(when: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (out, manifest) = (dir.path().join("abc"), dir.path().join("abc.json"));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("samples.parquet"), "earlier").unwrap();
        std::fs::write(&manifest, when).unwrap();
        (dir, out, manifest)
    }

    /// A rerun of `out` begun: its earlier folder set aside, `written` in its new one.
    fn rerun_begun(out: &Path, manifest: &Path, written: &str) -> PathBuf {
        let aside = set_aside(out, manifest).unwrap().expect("set aside");
        std::fs::create_dir_all(out).unwrap();
        std::fs::write(out.join("samples.parquet"), written).unwrap();
        aside
    }

    #[test]
    fn a_folder_left_set_aside_goes_back_while_its_manifest_is_the_stored_one() {
        let (dir, out, manifest) = store("not a manifest");
        let aside = rerun_begun(&out, &manifest, "partial");
        // The controller died here; the next one settles it.
        assert_eq!(settle_all(dir.path()).unwrap(), vec!["abc".to_string()]);
        assert_eq!(std::fs::read_to_string(out.join("samples.parquet")).unwrap(), "earlier");
        assert!(!aside.exists() && !out.join(MARK).exists());
    }

    #[test]
    fn a_folder_left_set_aside_after_a_newer_manifest_was_written_is_removed() {
        let (dir, out, manifest) = store("not a manifest");
        let aside = rerun_begun(&out, &manifest, "new");
        // The new manifest was written (another start time), then the controller died.
        std::fs::write(aside.join(MARK), "2026-12-05T00:00:00Z").unwrap();
        assert!(settle_all(dir.path()).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(out.join("samples.parquet")).unwrap(), "new");
        assert!(!aside.exists());
    }
}
