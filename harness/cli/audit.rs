//! `parlab audit`: did any layout change an answer?

use std::path::Path;

/// Groups runs by answer identity and compares their answers.
pub fn run(manifests: &Path, as_json: bool) -> anyhow::Result<i32> {
    let (list, skipped) = crate::manifest::read_all(manifests);
    for s in &skipped {
        eprintln!("warning: skipped {}: {}", s.path.display(), s.reason);
    }
    let findings = crate::audit::audit(&list);
    if as_json {
        println!("{}", serde_json::to_string_pretty(&findings)?);
    } else {
        print!("{}", crate::audit::render_text(&findings));
    }
    Ok(if findings.iter().any(|g| g.changed) { crate::exitcode::AUDIT_ANSWER_CHANGED } else { crate::exitcode::OK })
}
