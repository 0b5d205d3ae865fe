//! `parlab report`: the evidence register from manifests.

use super::UserError;
use crate::manifest::lock::StoreLock;
use std::path::Path;

/// Renders `out/evidence.md` (and figures and tables) from `manifests`. It only reads the
/// manifests (each written atomically), so it may run beside a `parlab run`; two renders into
/// one output folder are kept apart by the output folder's lock.
pub fn run(manifests: &Path, out: &Path, wait: bool) -> anyhow::Result<i32> {
    if !manifests.is_dir() {
        return Err(UserError(format!("{}: no such manifests folder (run `parlab run` first, or pass --manifests DIR)", manifests.display())).into());
    }
    render(manifests, out, wait)
}

/// Renders the register while holding the lock of the output folder `out`.
pub fn render(manifests: &Path, out: &Path, wait: bool) -> anyhow::Result<i32> {
    let _lock = StoreLock::acquire(out, wait).map_err(|e| UserError(e.to_string()))?;
    let written = crate::report::render_all(manifests, out)?;
    eprintln!("parlab: wrote {}", written.display());
    Ok(crate::exitcode::OK)
}
