//! The evidence register: MEASURED, MODELLED and NOT_RUN from manifests.

use std::path::{Path, PathBuf};

/// Renders `out/evidence.md` from `manifests`; returns its path.
pub fn render_all(manifests: &Path, out: &Path) -> anyhow::Result<PathBuf> {
    let (list, skipped) = crate::manifest::read_all(manifests);
    for s in &skipped {
        eprintln!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    std::fs::create_dir_all(out)?;
    let path = out.join("evidence.md");
    let mut text = String::from("# Evidence register\n\n");
    for m in &list {
        text.push_str(&format!("- {} {} {:?}\n", m.experiment, &m.run_id[..12], m.status));
    }
    crate::manifest::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}
