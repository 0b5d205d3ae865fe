//! A rerun's earlier results folder, set aside as `.<run id>.previous` until the new manifest
//! replaces the one naming it: a rerun cut short (a signal, an error that stops the suite, a
//! controller killed outright) puts it back, so stopping a `--force` rerun loses no measurement;
//! a rerun that fails moves it into `superseded/` beside a copy of the ok manifest it replaced.
//! The folder is marked with the start time of the manifest it belongs to (the digest of a
//! file that does not read as one), so a later
//! controller can tell whether that manifest is still the stored one, or the one kept in
//! `superseded/`.

use crate::manifest::{self, retire, Manifest};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// The file inside a set-aside folder that names the manifest it belongs to (its `started_at`).
const MARK: &str = ".set-aside-for";

/// Where the results folder `out` is set aside.
fn aside_of(out: &Path) -> PathBuf {
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    out.with_file_name(format!(".{name}.previous"))
}

/// What tells the stored manifest apart: its start time, or for a file that does not read as
/// a manifest (cut off, implausible: kept in `superseded/` when its rerun fails) the SHA-256
/// of its bytes; empty where there is no file.
fn started_at(manifest: &Path) -> String {
    use sha2::{Digest, Sha256};
    match manifest::read_one(manifest) {
        Ok(m) => m.started_at,
        Err(_) => std::fs::read(manifest).map(|bytes| format!("sha256:{}", hex::encode(Sha256::digest(&bytes)))).unwrap_or_default(),
    }
}

/// Moves the results folder of run `run_id` in the manifests folder `dir` aside (first settling
/// one an earlier controller left, see [`settle`]); returns where it went, or None where there
/// was none.
pub(super) fn set_aside(dir: &Path, run_id: &str) -> anyhow::Result<Option<PathBuf>> {
    let out = Manifest::results_dir(dir, run_id);
    let aside = aside_of(&out);
    if aside.exists() {
        settle(&aside, dir, run_id)?;
    }
    if !out.exists() {
        return Ok(None);
    }
    // Marked before it moves: a controller killed between the two leaves a marked folder either way.
    std::fs::write(out.join(MARK), started_at(&Manifest::path_for(dir, run_id)))
        .with_context(|| format!("cannot mark {}", out.display()))?;
    std::fs::rename(&out, &aside).with_context(|| format!("cannot set the earlier results folder {} aside", out.display()))?;
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

/// `e`, after putting the results folder set aside at `aside` (where it still is one) back as
/// `out`: a manifest that could not be written leaves the earlier one stored, and its results
/// go back beside it; where that fails too, the error says so.
pub(super) fn put_back(e: anyhow::Error, aside: Option<&Path>, out: &Path) -> anyhow::Error {
    match aside.filter(|p| p.is_dir()).map(|p| restore(p, out)) {
        Some(Err(back)) => anyhow::anyhow!("{e:#}; and its earlier results could not be put back: {back:#}"),
        _ => e,
    }
}

/// Removes a folder set aside once the manifest naming it has been replaced.
pub(super) fn discard(aside: Option<PathBuf>) -> anyhow::Result<()> {
    match aside.filter(|p| p.exists()) {
        Some(p) => std::fs::remove_dir_all(&p).with_context(|| format!("cannot remove the earlier results folder {}", p.display())),
        None => Ok(()),
    }
}

/// Moves the folder set aside at `aside` into `superseded/` as the results of run `run_id`,
/// beside the copy of the manifest it belongs to ([`retire::keep_replaced`]).
pub(super) fn supersede(aside: &Path, dir: &Path, run_id: &str) -> anyhow::Result<()> {
    let (_, into) = kept_copy(dir, run_id);
    std::fs::rename(aside, &into).with_context(|| format!("cannot move {} to {}", aside.display(), into.display()))?;
    let _ = std::fs::remove_file(into.join(MARK));
    Ok(())
}

/// How a folder an earlier controller set aside was settled.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Settled {
    /// The stored manifest is still the one it belongs to: it went back in place of the run's
    /// partial results.
    PutBack,
    /// A failed rerun's manifest replaced the one it belongs to, kept in `superseded/`: it went there.
    Superseded,
    /// A newer manifest replaced the one it belongs to (an ok rerun): it was removed.
    Removed,
}

/// Settles a folder an earlier controller set aside and never settled: where the stored manifest
/// of run `run_id` in `dir` is still the one it belongs to, it goes back in place of that run's
/// partial results (and a copy of that manifest a failed rerun had begun to keep in
/// `superseded/`, without results, is removed); where the copy in `superseded/` is the one it
/// belongs to (a failed rerun replaced it, and the controller stopped before moving the folder),
/// it goes there, and an error names both where that copy has a results folder already;
/// otherwise (a newer manifest was written, and the controller stopped before removing the
/// folder) it is removed.
fn settle(aside: &Path, dir: &Path, run_id: &str) -> anyhow::Result<Settled> {
    let belongs_to = std::fs::read_to_string(aside.join(MARK)).unwrap_or_default();
    let stored = Manifest::path_for(dir, run_id);
    let (kept, kept_results) = kept_copy(dir, run_id);
    if stored.exists() && belongs_to == started_at(&stored) {
        restore(aside, &Manifest::results_dir(dir, run_id))?;
        if kept.exists() && !kept_results.exists() && started_at(&kept) == belongs_to {
            let _ = std::fs::remove_file(&kept);
        }
        return Ok(Settled::PutBack);
    }
    if belongs_to.is_empty() || belongs_to != started_at(&kept) {
        discard(Some(aside.to_path_buf()))?;
        return Ok(Settled::Removed);
    }
    if kept_results.exists() {
        anyhow::bail!(
            "{} holds the results of the manifest kept in {}, whose results folder {} exists already; move one of them away",
            aside.display(),
            kept.display(),
            kept_results.display()
        );
    }
    supersede(aside, dir, run_id)?;
    Ok(Settled::Superseded)
}

/// Where run `run_id`'s manifest and results are kept in `dir`'s `superseded/`.
fn kept_copy(dir: &Path, run_id: &str) -> (PathBuf, PathBuf) {
    let into = retire::superseded_dir(dir);
    (Manifest::path_for(&into, run_id), Manifest::results_dir(&into, run_id))
}

/// Settles every folder set aside in the manifests folder `dir` (called with its lock held,
/// before any run); returns the run identities settled other than by removal, with how.
pub(super) fn settle_all(dir: &Path) -> anyhow::Result<Vec<(String, Settled)>> {
    let mut settled = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(run_id) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".previous")) else { continue };
        match settle(&entry.path(), dir, run_id)? {
            Settled::Removed => {}
            how => settled.push((run_id.to_string(), how)),
        }
    }
    settled.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(settled)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A manifests folder holding run `abc`'s manifest, `when`, and its results.
    fn store(when: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        store_as("abc", when)
    }

    /// A manifests folder holding run `id`'s manifest, `when`, and its results.
    fn store_as(id: &str, when: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let (out, manifest) = (dir.path().join(id), dir.path().join(format!("{id}.json")));
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(out.join("samples.parquet"), "earlier").unwrap();
        std::fs::write(&manifest, when).unwrap();
        (dir, out, manifest)
    }

    /// A real manifest (the fixture store's collectives run): its run identity and path, for a
    /// start time that reads back.
    fn fixture_manifest() -> (&'static str, PathBuf) {
        let id = "88732e52bba7e6caa7be6b3260d9edda9b9796cedde2083e30d2cce3d61a26f2";
        (id, Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/manifests/{id}.json")))
    }

    /// A rerun of `out` begun: its earlier folder set aside, `written` in its new one.
    fn rerun_begun(out: &Path, written: &str) -> PathBuf {
        let id = out.file_name().unwrap().to_str().unwrap();
        let aside = set_aside(out.parent().unwrap(), id).unwrap().expect("set aside");
        std::fs::create_dir_all(out).unwrap();
        std::fs::write(out.join("samples.parquet"), written).unwrap();
        aside
    }

    #[test]
    fn a_folder_left_set_aside_goes_back_while_its_manifest_is_the_stored_one() {
        let (dir, out, _) = store("not a manifest");
        let aside = rerun_begun(&out, "partial");
        // The controller died here; the next one settles it.
        assert_eq!(settle_all(dir.path()).unwrap(), vec![("abc".to_string(), Settled::PutBack)]);
        assert_eq!(std::fs::read_to_string(out.join("samples.parquet")).unwrap(), "earlier");
        assert!(!aside.exists() && !out.join(MARK).exists());
    }

    #[test]
    fn a_folder_left_set_aside_after_a_newer_manifest_was_written_is_removed() {
        let (dir, out, _) = store("not a manifest");
        let aside = rerun_begun(&out, "new");
        // The new manifest was written (another start time), then the controller died.
        std::fs::write(aside.join(MARK), "2026-12-05T00:00:00Z").unwrap();
        assert!(settle_all(dir.path()).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(out.join("samples.parquet")).unwrap(), "new");
        assert!(!aside.exists());
    }

    #[test]
    fn a_folder_left_set_aside_after_a_failed_rerun_replaced_its_manifest_goes_into_superseded() {
        let (id, fixture) = fixture_manifest();
        let (dir, out, _) = store_as(id, "the failed rerun's manifest");
        let aside = rerun_begun(&out, "failed");
        // The failed rerun's manifest was written, its predecessor kept in superseded/ (a copy
        // with the start time the folder is marked with), then the controller died.
        let kept = retire::superseded_dir(dir.path());
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::copy(&fixture, Manifest::path_for(&kept, id)).unwrap();
        let when = started_at(&Manifest::path_for(&kept, id));
        assert!(!when.is_empty(), "the fixture reads as a manifest");
        std::fs::write(aside.join(MARK), &when).unwrap();
        assert_eq!(settle_all(dir.path()).unwrap(), vec![(id.to_string(), Settled::Superseded)], "the stored manifest is the failed one");
        assert_eq!(std::fs::read_to_string(out.join("samples.parquet")).unwrap(), "failed");
        let results = Manifest::results_dir(&kept, id);
        assert_eq!(std::fs::read_to_string(results.join("samples.parquet")).unwrap(), "earlier");
        assert!(!aside.exists() && !results.join(MARK).exists());
    }

    #[test]
    fn the_results_of_a_manifest_that_does_not_read_follow_its_copy_into_superseded() {
        let (dir, out, stored) = store("{ cut off");
        let aside = rerun_begun(&out, "failed");
        // Its failed rerun's manifest was written, the cut-off one kept in superseded/, then the
        // controller died: the folder is marked with the cut-off file's digest, not left blank
        // (a blank mark is removed).
        let kept = retire::superseded_dir(dir.path());
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::copy(&stored, Manifest::path_for(&kept, "abc")).unwrap();
        std::fs::write(&stored, "the failed rerun's manifest").unwrap();
        assert!(std::fs::read_to_string(aside.join(MARK)).unwrap().starts_with("sha256:"));
        assert_eq!(settle_all(dir.path()).unwrap(), vec![("abc".to_string(), Settled::Superseded)]);
        assert_eq!(std::fs::read_to_string(Manifest::results_dir(&kept, "abc").join("samples.parquet")).unwrap(), "earlier");
    }

    #[test]
    fn a_folder_left_set_aside_before_a_failed_reruns_manifest_was_written_goes_back_and_the_copy_kept_of_its_manifest_goes() {
        let (id, fixture) = fixture_manifest();
        let (dir, out, stored) = store_as(id, "");
        std::fs::copy(&fixture, &stored).unwrap();
        let aside = rerun_begun(&out, "partial");
        // The rerun failed and its manifest's predecessor was copied into superseded/; the
        // controller died before writing the new manifest.
        let kept = retire::superseded_dir(dir.path());
        std::fs::create_dir_all(&kept).unwrap();
        std::fs::copy(&fixture, Manifest::path_for(&kept, id)).unwrap();
        assert_eq!(settle_all(dir.path()).unwrap(), vec![(id.to_string(), Settled::PutBack)]);
        assert_eq!(std::fs::read_to_string(out.join("samples.parquet")).unwrap(), "earlier");
        assert!(!Manifest::path_for(&kept, id).exists(), "the copy repeated the stored manifest");
        assert!(!aside.exists());
    }
}
