//! Break-even: the all-reduce time a 2-way tensor split can afford, T1 (1 - 1/2) / 2L, for
//! each modelled model on its modelled device, against tonight's measured small-message
//! all-reduce: larger models afford more, so on a given link a split pays for the largest
//! modelled model and not for the smallest.

use super::{Finding, Inconclusive, Inputs};
use crate::costmodel::catalogue::Catalogue;
use crate::costmodel::plan::{single_device_step_s, tp_break_even_allreduce_s};
use crate::costmodel::tables::{ModelRun, TablesError};
use crate::manifest::Status;
use crate::report::facts::CollRow;
use crate::spec::schema::Kind;
use crate::spec::schema::Op;
use crate::units::{format_bytes, format_seconds};
use std::collections::BTreeMap;

/// One modelled model's break-even.
#[derive(Debug, Clone, PartialEq)]
pub struct BreakEven {
    /// Model name.
    pub model: String,
    /// Parameters (for ordering by size).
    pub params: u64,
    /// The modelled device.
    pub device: String,
    /// A decode step's all-reduce size d·s in the modelled dtype.
    pub message_bytes: f64,
    /// The largest all-reduce time at which the split still pays.
    pub affordable_s: f64,
    /// The model run (12 hex).
    pub run: String,
}

/// The break-even of the models of the ok `kind: model` runs on one device (the one most of them
/// are modelled on), each at its run's first dtype; and the models left out (modelled only on
/// other devices).
pub fn break_evens(inp: &Inputs) -> Result<(Vec<BreakEven>, Vec<String>), TablesError> {
    let runs: Vec<_> = inp.list.iter().filter(|m| m.kind == Kind::Model && m.status() == Status::Ok).collect();
    if runs.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let catalogue = Catalogue::load_default()?;
    // Every (device, model) the runs model, at each run's first dtype.
    let mut by_device: BTreeMap<String, BTreeMap<String, BreakEven>> = BTreeMap::new();
    for m in runs {
        let run = ModelRun::of_plan(&m.plan, &catalogue)?;
        let Some(dtype) = run.dtypes.first() else {
            continue;
        };
        for (device, named) in run.devices.iter().flat_map(|d| run.models.iter().map(move |n| (d, n))) {
            let s = &named.shape;
            let t1 = single_device_step_s(s, dtype.bytes(), named.context_at(run.context), device.bandwidth_bps());
            by_device.entry(device.name.clone()).or_default().entry(named.name.clone()).or_insert(BreakEven {
                model: named.name.clone(),
                params: s.params,
                device: device.name.clone(),
                message_bytes: (s.hidden * dtype.bytes()) as f64,
                affordable_s: tp_break_even_allreduce_s(t1, 2, s.layers),
                run: m.run_id.short().to_string(),
            });
        }
    }
    // Models are compared on one device: the one most of them are modelled on (ties: by name).
    let most = by_device.values().map(BTreeMap::len).max().unwrap_or(0);
    let every: std::collections::BTreeSet<String> = by_device.values().flat_map(|models| models.keys().cloned()).collect();
    let mut list: Vec<BreakEven> = by_device.into_values().find(|models| models.len() == most).unwrap_or_default().into_values().collect();
    list.sort_by(|a, b| (a.params, &a.model).cmp(&(b.params, &b.model)));
    let left_out = every.into_iter().filter(|name| list.iter().all(|b| &b.model != name)).collect();
    Ok((list, left_out))
}

/// One finding per link with a measured 2-rank all-reduce.
pub fn findings(inp: &Inputs) -> Vec<Finding> {
    let (models, left_out) = match break_evens(inp) {
        Ok(m) => m,
        Err(e) => {
            return vec![claim("break-even", "2-rank")
                .inconclusive(Inconclusive::MissingRuns, format!("missing runs: the modelled run could not be read ({e})"))]
        }
    };
    let mut links: BTreeMap<&str, Vec<&CollRow>> = BTreeMap::new();
    for r in inp.facts.collectives.iter().filter(|r| r.op == Op::AllReduce && r.world == 2) {
        links.entry(r.link.name()).or_default().push(r);
    }
    if links.is_empty() {
        return vec![
            claim("break-even", "2-rank").inconclusive(Inconclusive::MissingRuns, "missing runs: no 2-rank all-reduce was measured".into())
        ];
    }
    let mut out: Vec<Finding> = links.into_iter().map(|(link, rows)| link_finding(link, &rows, &models)).collect();
    if let (false, Some(device)) = (left_out.is_empty(), models.first().map(|b| b.device.as_str())) {
        let note = format!("left out, modelled only on other devices than {device}: {}", left_out.join(", "));
        out.iter_mut().for_each(|f| f.notes.push(note.clone()));
    }
    out
}

fn claim(id: &str, link: &str) -> Finding {
    Finding::new(
        id,
        &format!("A 2-way tensor split affords a longer all-reduce the larger the model: with tonight's measured {link} all-reduce it would pay for the largest modelled model and not for the smallest."),
        &["collectives.rows.time_s (all-reduce, 2 ranks)", "modelled shapes, device bandwidth, context and dtype"],
        "affordable all-reduce = T1 (1 - 1/2) / 2L with T1 = (streamed weights + KV at the context) / device bandwidth, every model on one device (the one most are modelled on); measured = the 2-rank all-reduce median (slowest rank, waiting included: what a decode step pays) at the smallest measured size >= d·s; a split pays when measured < affordable. HOLDS when it pays for the largest model and not for the smallest, FAILS when it pays for the smallest and not for the largest, INCONCLUSIVE (not decisive) when it pays for both or for neither: the link lies outside the span the claim contrasts",
    )
}

/// The measured row for a message of `bytes`: the smallest measured size at or above it, else the largest.
fn measured_for<'a>(rows: &[&'a CollRow], bytes: f64) -> Option<&'a CollRow> {
    let above = rows.iter().filter(|r| r.size as f64 >= bytes).min_by_key(|r| r.size);
    above.or_else(|| rows.iter().max_by_key(|r| r.size)).copied()
}

fn link_finding(link: &str, rows: &[&CollRow], models: &[BreakEven]) -> Finding {
    let mut f = claim(&format!("break-even-{link}"), link);
    if models.len() < 2 {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: the claim compares models; fewer than two were modelled".into());
    }
    let mut pays = Vec::new();
    for b in models {
        let Some(r) = measured_for(rows, b.message_bytes) else {
            continue;
        };
        f.number(&format!("{} on {}: affordable all-reduce", b.model, b.device), b.affordable_s, "s", &[b.run.as_str()]);
        let name = format!("{link} all-reduce at {} (median, 2 ranks)", format_bytes(r.size as f64));
        if !f.numbers.iter().any(|n| n.name == name) {
            f.number(&name, r.time.median, "s", &[r.run.as_str()]);
        }
        let p = r.time.median < b.affordable_s;
        f.notes.push(format!(
            "{} ({} parameters, d·s {}): affords {}, {link} measured {} at {}: a split {}",
            b.model,
            crate::report::fmt::thousands(b.params),
            format_bytes(b.message_bytes),
            format_seconds(b.affordable_s),
            format_seconds(r.time.median),
            format_bytes(r.size as f64),
            if p { "pays" } else { "does not pay" }
        ));
        pays.push((b, p));
    }
    let (Some(small), Some(large)) = (pays.first(), pays.last()) else {
        return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: no {link} all-reduce to compare"));
    };
    let word = |p: bool| if p { "pays" } else { "does not pay" };
    let reason = format!(
        "on {link} a 2-way split {} for {}, the smallest, and {} for {}, the largest",
        word(small.1),
        small.0.model,
        word(large.1),
        large.0.model
    );
    match (small.1, large.1) {
        // The same outcome at both ends: the link lies outside the span the claim contrasts.
        (true, true) | (false, false) => f.inconclusive(
            Inconclusive::NotDecisive,
            format!(
                "not decisive: {reason}: the link is {} than every modelled model's threshold",
                if small.1 { "faster" } else { "slower" }
            ),
        ),
        (small_pays, _) => f.decide(!small_pays, reason),
    }
}
