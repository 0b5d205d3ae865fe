//! `parlab report`: the evidence register from manifests.

use super::folder::{Folder, HISTORY_HOLDS, MANIFESTS_HOLD};
use super::Error;
use crate::manifest::lock::StoreLock;
use crate::report::origin;
use std::path::{Path, PathBuf};

/// Takes the lock of the output folder `out` (creating it): another render holding it exits 2,
/// or is waited for with `wait`; an `out` that cannot be a folder (a file) exits 2.
pub fn lock_output(out: &Path, wait: bool) -> super::Result<StoreLock> {
    folder_or_nothing(out)?;
    StoreLock::acquire(out, wait).map_err(|e| super::lock_refusal(e, &format!("--out {}: ", out.display())))
}

/// Refuses an output folder `out` that is a file, or a folder parlab keeps inside a manifests
/// folder ([`Folder::not_inside_a_store`]), exit 2.
pub fn folder_or_nothing(out: &Path) -> super::Result<()> {
    let folder = Folder::flag(out, "--out");
    folder.not_a_file("the register is written into")?;
    folder.not_inside_a_store()
}

/// Renders the register with the output folder's lock already held; refuses (exit 2) an `out`
/// holding the register of another manifests folder, and records `manifests` in `out`.
pub fn render_held(manifests: &Path, out: &Path, _lock: &StoreLock) -> super::Result<i32> {
    origin::check(out, manifests)?;
    let written = crate::report::render_all(manifests, out)?;
    origin::record(out, manifests)?;
    crate::say!("parlab: wrote {}", written.display());
    Ok(crate::exitcode::OK)
}

/// The folder the runs were made in, where the manifests folder's parent holds every file the
/// runs name (their specs, model configs, relative to the folder they were made in) that this
/// working folder holds, and more: rendered from there, the findings that read them decide as
/// they did when the runs were made (from here they could not). None where this folder holds
/// as many.
fn runs_folder(manifests: &Path) -> Option<PathBuf> {
    let root = std::fs::canonicalize(manifests).ok()?.parent()?.to_path_buf();
    let here = std::fs::canonicalize(std::env::current_dir().ok()?).ok()?;
    if here == root {
        // Rendered where the runs were made (the usual case): nothing to read to know it.
        return None;
    }
    let wanted = crate::report::sources(&crate::manifest::read_all(manifests).0);
    let held_in = |dir: &Path| -> std::collections::BTreeSet<&PathBuf> {
        wanted.iter().filter(|p| p.is_relative() && dir.join(p).is_file()).collect()
    };
    let (here_holds, there_holds) = (held_in(&here), held_in(&root));
    (there_holds.len() > here_holds.len() && there_holds.is_superset(&here_holds)).then_some(root)
}

/// Where `manifests` lies in the folder the runs were made in ([`runs_folder`]), makes it and
/// the other paths given (`--out`, `--history`) absolute and moves there ([`move_to`]).
pub fn into_runs_folder(manifests: &mut PathBuf, others: [Option<&mut PathBuf>; 2]) {
    let Some(root) = runs_folder(manifests) else {
        return;
    };
    for path in std::iter::once(manifests).chain(others.into_iter().flatten()) {
        *path = std::path::absolute(&*path).unwrap_or_else(|_| path.clone());
    }
    move_to(&root);
}

/// Moves the working folder to `root` ([`runs_folder`]), saying so on stderr (where it cannot,
/// the render goes on here, with the warning that names what it lacks). The relative paths in
/// parlab's folder variables (`PARLAB_MODELS`, `PARLAB_STATE`, `PARLAB_MANIFESTS`) are made
/// absolute first: they name folders from where the command was given.
fn move_to(root: &Path) {
    for name in ["PARLAB_MODELS", "PARLAB_STATE", "PARLAB_MANIFESTS"] {
        if let Some(path) = crate::files::env_path(name).filter(|p| p.is_relative()) {
            if let Ok(absolute) = std::path::absolute(&path) {
                // Still one thread: nothing reads the environment while it is written.
                std::env::set_var(name, absolute);
            }
        }
    }
    match std::env::set_current_dir(root) {
        Ok(()) => crate::say!(
            "parlab: reading the runs' specs, model configs and templates in {} (the manifests folder's parent; this working folder lacks them)",
            root.display()
        ),
        Err(e) => crate::say!("warning: cannot work in {}, where the runs' specs and model configs are: {e}", root.display()),
    }
}

/// Renders `out/evidence.md` (and figures and tables) from `manifests`, then (with `history`)
/// the nightly history as `out/trends.md` and `out/trends/N.svg` (a trend figure per run and
/// figure, change points marked), all under one hold of the output folder's lock. It only reads
/// the manifests (each written atomically), so it may run beside a `parlab run`. A missing
/// history folder, or trends files parlab did not write, exit 2 before anything is written.
pub fn run_with_history(manifests: &Folder, out: &Path, wait: bool, history: Option<&Path>) -> super::Result<i32> {
    if let Some(h) = history {
        Folder::flag(h, "--history").existing(HISTORY_HOLDS, "nightly history folder", "")?;
        if crate::report::origin::same_folder(h, out) {
            return Err(Error::Usage(format!(
                "--history {}: is the --out folder; the register's findings.json would be read back as a night: render it elsewhere",
                h.display()
            )));
        }
        if let Some(example) = crate::report::origin::a_manifest_in(h) {
            return Err(Error::Usage(format!(
                "--history {}: a manifests folder (it holds {}), not a nightly history; --history names the folder `parlab nightly --history` keeps",
                h.display(),
                example.display()
            )));
        }
    }
    manifests.existing(MANIFESTS_HOLD, "manifests folder", " (run `parlab run` first, or pass --manifests DIR)")?;
    folder_or_nothing(out)?;
    // A register's folder read as manifests would render an empty register of nothing.
    manifests.not_a_register()?;
    origin::check(out, &manifests.path)?;
    if history.is_some() {
        refuse_foreign_trends(out)?;
    }
    // One hold of the output folder for the register and the trends beside it.
    let lock = lock_output(out, wait)?;
    let code = render_held(&manifests.path, out, &lock)?;
    if let Some(h) = history {
        let nights = crate::nightly::history::read_warning(h);
        let changed = crate::nightly::history::write_trends_of(&nights, out, &crate::nightly::Policy::default())?;
        crate::say!("parlab: wrote {} ({} figures with change points)", out.join("trends.md").display(), changed.len());
    }
    Ok(code)
}

/// Refuses (exit 2) an output folder whose `trends.md` or `trends/<i>.svg` the trends would
/// replace or remove and that parlab did not draw, or where a file or folder stands in their way.
fn refuse_foreign_trends(out: &Path) -> super::Result<()> {
    let (figures, register) = (out.join("trends"), out.join("trends.md"));
    let misplaced = match () {
        _ if figures.exists() && !figures.is_dir() => Some("`trends` is a file, not the folder the trend figures are drawn into"),
        _ if register.is_dir() => Some("`trends.md` is a folder, not the file the trends are written to"),
        _ => None,
    };
    if let Some(what) = misplaced {
        return Err(Error::Usage(format!("--out {}: its {what}; move it away or render elsewhere", out.display())));
    }
    let foreign = crate::nightly::history::foreign_trends(out);
    if foreign.is_empty() {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "--out {}: holds {}, which the trends would replace or remove and which parlab's trends did not write; remove them or render elsewhere",
        out.display(),
        foreign.join(", ")
    )))
}
