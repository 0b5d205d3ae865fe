//! `parlab audit`: did any layout change an answer?

use serde_json::json;
use std::path::Path;

/// Grades every layout against the unsplit reference; exit 3 on a real change, 0 otherwise.
/// `named_by` is what named the folder, for messages (`--manifests`, `PARLAB_MANIFESTS`, or "").
pub fn run(manifests: &Path, named_by: &str, as_json: bool) -> super::Result<i32> {
    super::existing_folder(manifests, named_by, super::MANIFESTS_HOLD, "manifests folder", "")?;
    let (list, skipped) = crate::manifest::read_all(manifests);
    for s in &skipped {
        crate::say!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let groups = crate::audit::audit(&list);
    let precision = crate::precision::audit(&list);
    if as_json {
        // Files that could not be read as manifests: a run among them is not graded, and a
        // reader of the JSON alone must see that.
        let unread: Vec<_> = skipped.iter().map(|s| json!({ "path": s.path, "reason": s.reason.to_string() })).collect();
        let doc = json!({
            "fragile_factor": crate::audit::FRAGILE_FACTOR,
            "changed": groups.iter().any(|g| g.changed),
            "groups": groups,
            "precision": precision,
            "skipped": unread,
        });
        super::output::print_json(&doc)?;
    } else {
        super::output::print(&(crate::audit::render_text(&groups) + &crate::precision::render_text(&precision)))?;
    }
    Ok(if groups.iter().any(|g| g.changed) { crate::exitcode::AUDIT_ANSWER_CHANGED } else { crate::exitcode::OK })
}
