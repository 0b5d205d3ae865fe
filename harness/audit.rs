//! Answers compared across layouts: runs that share an answer identity must agree.

use crate::manifest::{Manifest, Status};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// One answer identity's runs and whether their answers agree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerGroup {
    /// The shared answer identity.
    pub answer_id: String,
    /// The experiments involved.
    pub experiments: Vec<String>,
    /// Short run identities of the runs compared (status ok, with an answer).
    pub runs: Vec<String>,
    /// True when some run's generated tokens differ from the first run's.
    pub changed: bool,
    /// Largest |difference| of logits any run reported against the unsplit model.
    pub max_logit_diff: Option<f64>,
    /// Smallest top-2 margin any run saw.
    pub min_top2_margin: Option<f64>,
}

/// Groups ok runs with answers by answer identity and compares their tokens.
pub fn audit(manifests: &[Manifest]) -> Vec<AnswerGroup> {
    let mut groups: BTreeMap<&str, Vec<&Manifest>> = BTreeMap::new();
    for m in manifests.iter().filter(|m| m.status == Status::Ok && m.answer.get("tokens").is_some()) {
        groups.entry(m.answer_id.as_str()).or_default().push(m);
    }
    groups.into_iter().map(|(id, runs)| group(id, &runs)).collect()
}

fn group(answer_id: &str, runs: &[&Manifest]) -> AnswerGroup {
    let tokens: Vec<&Value> = runs.iter().filter_map(|m| m.answer.get("tokens")).collect();
    let changed = tokens.windows(2).any(|w| w[0] != w[1]);
    let figure = |key: &'static str| runs.iter().filter_map(move |m| m.answer.get("exactness")?.get(key)?.as_f64());
    let mut experiments: Vec<String> = runs.iter().map(|m| m.experiment.clone()).collect();
    experiments.dedup();
    AnswerGroup {
        answer_id: answer_id.to_string(),
        experiments,
        runs: runs.iter().map(|m| m.run_id[..12].to_string()).collect(),
        changed,
        max_logit_diff: figure("max_logit_diff").reduce(f64::max),
        min_top2_margin: figure("min_top2_margin").reduce(f64::min),
    }
}

/// A plain-text account of the groups, one paragraph each.
pub fn render_text(groups: &[AnswerGroup]) -> String {
    let mut out = String::new();
    if groups.is_empty() {
        out.push_str("audit: no runs with answers to compare\n");
    }
    for g in groups {
        let verdict = if g.changed { "ANSWER CHANGED" } else { "same tokens" };
        out.push_str(&format!(
            "{} ({}): {} runs: {verdict}; largest logit difference {}; smallest top-2 margin {}\n",
            &g.answer_id[..12],
            g.experiments.join(", "),
            g.runs.len(),
            g.max_logit_diff.map_or("n/a".into(), |v| format!("{v:.2e}")),
            g.min_top2_margin.map_or("n/a".into(), |v| format!("{v:.3}")),
        ));
    }
    out
}
