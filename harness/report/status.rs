//! Runs that did not produce figures: NOT_RUN (a probe said no) and failed runs.

use crate::manifest::{Manifest, Status};
use crate::spec::schema::Requires;
use crate::table::{Cell, Table};

/// What a spec's `requires` asks for, in words (`–` when nothing).
pub fn requires_text(r: &Requires) -> String {
    let parts = requirements(r);
    if parts.is_empty() {
        "–".into()
    } else {
        parts.join(", ")
    }
}

/// Each requirement a spec declares, as the register words it (empty: none).
pub fn requirements(r: &Requires) -> Vec<String> {
    let mut parts = Vec::new();
    if let Some(g) = r.gpus {
        parts.push(format!("gpus ≥ {g}"));
    }
    if r.nccl {
        parts.push("nccl".to_string());
    }
    if r.host_device_link {
        parts.push("host-device link".to_string());
    }
    if r.cuda {
        parts.push("cuda".to_string());
    }
    if r.cuda_graph {
        parts.push("cuda graph capture".to_string());
    }
    if let Some(c) = r.cores {
        parts.push(format!("cores ≥ {c}"));
    }
    parts
}

/// A run as the NOT_RUN table names it: its position and layout, with its device and step
/// mode where they are not the CPU's eager step ([`crate::audit::layout_words`]).
fn row_label(m: &Manifest) -> String {
    format!("#{} {}", m.plan.index, crate::audit::layout_words(m))
}

/// The NOT_RUN table: experiment, run, requirement, and the probe and its result; `None` when empty.
pub fn not_run(list: &[Manifest]) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = list
        .iter()
        .filter(|m| m.status() == Status::NotRun)
        .map(|m| {
            vec![
                Cell::text(&m.experiment),
                Cell::text(row_label(m)),
                Cell::text(m.run_id.short().to_string()),
                Cell::text(requires_text(&m.plan.requires)),
                Cell::text(m.reason().unwrap_or("no reason recorded")),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "not-run".into(),
        title: "Runs not launched".into(),
        caption: "Each was decided before launch by a probe that ran on this machine; the reason quotes the probe's command and result."
            .into(),
        columns: ["experiment", "run", "run id", "requires", "reason (probe → result)"].iter().map(|s| s.to_string()).collect(),
        rows,
        provenance: Vec::new(),
    })
}

/// The failed-runs table: experiment, run, launch exit and the reason; `None` when none failed.
pub fn failed(list: &[Manifest]) -> Option<Table> {
    let rows: Vec<Vec<Cell>> = list
        .iter()
        .filter(|m| m.status() == Status::Failed)
        .map(|m| {
            let exit =
                m.launch().map_or("not launched".to_string(), |l| l.exit_code.map_or("no exit code".into(), |c| format!("exit {c}")));
            vec![
                Cell::text(&m.experiment),
                Cell::text(row_label(m)),
                Cell::text(m.run_id.short().to_string()),
                Cell::text(exit),
                Cell::text(m.reason().unwrap_or("no reason recorded")),
            ]
        })
        .collect();
    (!rows.is_empty()).then(|| Table {
        id: "failed".into(),
        title: "Runs that failed, with their reasons".into(),
        caption: "Launched (or modelled) and failed; their figures are not in the tables above.".into(),
        columns: ["experiment", "run", "run id", "launcher", "reason"].iter().map(|s| s.to_string()).collect(),
        rows,
        provenance: Vec::new(),
    })
}
