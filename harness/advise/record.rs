//! The advice as a run's summary (`kind: advise`): the ranking and the refusals as tables of
//! typed cells for the register's MODELLED section, and the labels a finding checks.

use super::rank::Ranked;
use super::render::{assumptions, flip_words, provenance, rejection_message};
use super::Advice;
use crate::manifest::summary::{Advised, RefusedLayout};
use crate::table::{Cell, Table};

/// The summary of `advice`, its tables named after `experiment`.
pub fn advised(advice: &Advice, experiment: &str) -> Advised {
    Advised {
        ranked: advice.ranked.iter().map(|r| r.label.clone()).collect(),
        rejected: advice.rejected.iter().map(|r| RefusedLayout { label: r.label.clone(), why: rejection_message(&r.reason) }).collect(),
        tables: vec![ranked_table(advice, experiment), rejected_table(advice, experiment)],
    }
}

/// One sentence: the question asked.
fn question(advice: &Advice) -> String {
    let (req, m) = (&advice.request, &advice.request.machine);
    let w = &req.workload;
    let domains: Vec<String> = m.domains.iter().map(|d| format!("{} at a time over {}", d.size, d.link.name)).collect();
    let joined = if domains.is_empty() { String::new() } else { format!(", joined {}", domains.join(", then ")) };
    format!(
        "{} on {} × {} ({} node(s){joined}); {} prompt tokens, {} new, {} sequence(s) in flight, {}, ranked by {}",
        req.model.name,
        m.devices(),
        m.device.name,
        m.nodes,
        w.prompt,
        w.new_tokens,
        w.sequences,
        w.dtype.name(),
        w.objective.name()
    )
}

fn ranked_row(i: usize, r: &Ranked) -> Vec<Cell> {
    let p = &r.predicted;
    vec![
        Cell::Count(i as u64 + 1),
        Cell::text(&r.label),
        Cell::Seconds(p.step_s),
        Cell::Seconds(p.ttft_s),
        Cell::Seconds(p.request_s),
        Cell::Number(p.tokens_per_s),
        Cell::Bytes(p.weights_bytes_per_device as f64),
        Cell::Bytes(p.kv_bytes_per_device as f64),
        flip_words(r).map_or(Cell::Missing, Cell::Text),
    ]
}

/// The id and title of an advice's table `index` (0: the ranking, 1: the refusals) for `experiment`.
fn names(index: usize, experiment: &str) -> (String, String) {
    if index == 0 {
        (format!("advice-{experiment}"), format!("Advice `{experiment}`: the layouts to benchmark"))
    } else {
        (format!("advice-{experiment}-rejected"), format!("Advice `{experiment}`: layouts refused"))
    }
}

/// An advice's stored tables named after `experiment`: a run's cached manifest takes the name
/// of the experiment that last expanded to it, and its tables follow.
pub fn named(tables: &[Table], experiment: &str) -> Vec<Table> {
    tables
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (id, title) = names(i, experiment);
            Table { id, title, ..t.clone() }
        })
        .collect()
}

fn ranked_table(advice: &Advice, experiment: &str) -> Table {
    let mut lines = provenance(advice);
    lines.extend(assumptions(advice).into_iter().map(|a| format!("assumed: {a}")));
    let (id, title) = names(0, experiment);
    Table {
        id,
        title,
        caption: format!("{}. Arithmetic (`parlab advise`), best first; what would flip the top three.", question(advice)),
        columns: ["rank", "layout", "step", "TTFT", "request", "tokens/s", "weights/device", "KV/device", "what would flip it"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        rows: advice.ranked.iter().enumerate().map(|(i, r)| ranked_row(i, r)).collect(),
        provenance: lines,
    }
}

fn rejected_table(advice: &Advice, experiment: &str) -> Table {
    let (id, title) = names(1, experiment);
    Table {
        id,
        title,
        caption: "Each refused layout and the rule it breaks (typed reasons of `parlab advise`).".into(),
        columns: vec!["layout".into(), "why".into()],
        rows: advice.rejected.iter().map(|r| vec![Cell::text(&r.label), Cell::text(rejection_message(&r.reason))]).collect(),
        provenance: Vec::new(),
    }
}
