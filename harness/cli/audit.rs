//! `parlab audit`: did any layout change an answer?

use serde_json::json;

/// Grades every layout against the unsplit reference; exit 3 on a real change, 0 otherwise.
pub fn run(folder: &super::folder::Folder, as_json: bool) -> super::Result<i32> {
    folder.existing(super::folder::MANIFESTS_HOLD, "manifests folder", "")?;
    let manifests = folder.path.as_path();
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
