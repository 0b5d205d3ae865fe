//! Manifests an experiment no longer expands to (its spec changed) are moved out of the
//! register's way into `superseded/`, with their results folders, so a changed spec does not
//! leave its old runs beside the new ones in the register; nothing is deleted. An ok manifest a
//! failed rerun replaces is kept there too.

use super::{read_all, Manifest};
use crate::spec::RunPlan;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The folder superseded manifests are moved to.
pub fn superseded_dir(dir: &Path) -> PathBuf {
    dir.join("superseded")
}

/// Moves every manifest in `dir` of an experiment in `suite` whose run identity the suite no
/// longer holds (and its results folder) into [`superseded_dir`]; returns `experiment run`
/// labels of those moved.
pub fn retire_superseded(dir: &Path, suite: &[RunPlan]) -> std::io::Result<Vec<String>> {
    let experiments: BTreeSet<&str> = suite.iter().map(|r| r.experiment.as_str()).collect();
    let current: BTreeSet<&str> = suite.iter().map(|r| r.run_id.as_str()).collect();
    let (manifests, _) = read_all(dir);
    let stale: Vec<&Manifest> =
        manifests.iter().filter(|m| experiments.contains(m.experiment.as_str()) && !current.contains(m.run_id.as_str())).collect();
    if stale.is_empty() {
        return Ok(Vec::new());
    }
    let into = superseded_dir(dir);
    std::fs::create_dir_all(&into)?;
    let mut moved = Vec::new();
    for m in stale {
        keep_earlier_copy(&into, &m.run_id)?;
        let results = Manifest::results_dir(dir, &m.run_id);
        if results.is_dir() {
            std::fs::rename(&results, Manifest::results_dir(&into, &m.run_id))?;
        }
        std::fs::rename(Manifest::path_for(dir, &m.run_id), Manifest::path_for(&into, &m.run_id))?;
        moved.push(format!("{} {}", m.experiment, m.run_id.short()));
    }
    Ok(moved)
}

/// Keeps the stored manifest of `run_id` in `dir` that a failed rerun's manifest is about to
/// replace: a copy goes into [`superseded_dir`] (a copy of that identity already there moves into
/// `superseded/<its start time>/` first); its results folder, set aside while the rerun ran,
/// follows once the new manifest stands. Returns where the copy went.
pub fn keep_replaced(dir: &Path, run_id: &str) -> std::io::Result<PathBuf> {
    let into = superseded_dir(dir);
    std::fs::create_dir_all(&into)?;
    keep_earlier_copy(&into, run_id)?;
    let kept = Manifest::path_for(&into, run_id);
    super::write_atomic(&kept, &std::fs::read(Manifest::path_for(dir, run_id))?)?;
    Ok(kept)
}

/// Moves a copy of `run_id` superseded before (the identity was planned again, measured, and
/// superseded once more) into `into/<its start time>/`, so the newer copy takes its place
/// and neither is lost.
fn keep_earlier_copy(into: &Path, run_id: &str) -> std::io::Result<()> {
    let (manifest, results) = (Manifest::path_for(into, run_id), Manifest::results_dir(into, run_id));
    if !manifest.exists() && !results.exists() {
        return Ok(());
    }
    let stamp = super::read_one(&manifest).map_or_else(|_| "earlier".to_string(), |m| folder_name(&m.started_at));
    let mut folder = into.join(&stamp);
    for n in 2.. {
        if !Manifest::path_for(&folder, run_id).exists() && !Manifest::results_dir(&folder, run_id).exists() {
            break;
        }
        folder = into.join(format!("{stamp}-{n}"));
    }
    std::fs::create_dir_all(&folder)?;
    if results.exists() {
        std::fs::rename(&results, Manifest::results_dir(&folder, run_id))?;
    }
    if manifest.exists() {
        std::fs::rename(&manifest, Manifest::path_for(&folder, run_id))?;
    }
    Ok(())
}

/// A manifest's start time as a folder name: every character but ASCII letters, digits and `-`
/// becomes `-` (`2026-12-06T10-00-00Z`), so a hand-edited `../x` names no folder outside
/// `superseded/`; `earlier` where nothing is left.
fn folder_name(started_at: &str) -> String {
    let name: String = started_at.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    if name.trim_matches('-').is_empty() {
        "earlier".into()
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_time_becomes_a_folder_name_inside_superseded() {
        assert_eq!(folder_name("2026-12-06T10:00:00.5Z"), "2026-12-06T10-00-00-5Z");
        assert_eq!(folder_name("../../x"), "------x");
        assert_eq!(folder_name("/"), "earlier");
        assert_eq!(folder_name(""), "earlier");
    }
}
