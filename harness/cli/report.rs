//! `parlab report`: the evidence register from manifests.

use std::path::Path;

/// Renders `out/evidence.md` (and figures and tables) from the manifests in `manifests`.
pub fn run(manifests: &Path, out: &Path) -> anyhow::Result<i32> {
    let written = crate::report::render_all(manifests, out)?;
    eprintln!("parlab: wrote {}", written.display());
    Ok(crate::exitcode::OK)
}
