//! `parlab report`: the evidence register from manifests.

use super::UserError;
use crate::manifest::lock::StoreLock;
use std::path::Path;

/// Renders `out/evidence.md` (and figures and tables) from `manifests`, holding the store's lock.
pub fn run(manifests: &Path, out: &Path, wait: bool) -> anyhow::Result<i32> {
    if !manifests.is_dir() {
        return Err(UserError(format!("{}: no such manifests folder (run `parlab run` first, or pass --manifests DIR)", manifests.display())).into());
    }
    let _lock = StoreLock::acquire(manifests, wait).map_err(|e| UserError(e.to_string()))?;
    render(manifests, out)
}

/// Renders the register; the caller holds the store's lock.
pub fn render(manifests: &Path, out: &Path) -> anyhow::Result<i32> {
    let written = crate::report::render_all(manifests, out)?;
    eprintln!("parlab: wrote {}", written.display());
    Ok(crate::exitcode::OK)
}
