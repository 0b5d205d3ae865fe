//! Context parallelism: each rank holds the keys and values of its own slice of the prompt, and
//! ring attention passes the blocks around so every query meets every earlier key (the
//! chapter's "attention becomes a communication pattern"). Checked on what the runs moved and
//! answered: the ring and the cache's hand-off sent exactly what the algorithm must, and the
//! answer is the unsplit one.

use super::{Finding, Inconclusive, Inputs};
use crate::report::facts::DecodeRow;

/// The context splits over more than one rank, in a fixed order.
fn context_splits(rows: &[DecodeRow]) -> Vec<&DecodeRow> {
    let mut runs: Vec<&DecodeRow> = rows.iter().filter(|r| r.world > 1 && r.context.is_some()).collect();
    runs.sort_by(|a, b| (&a.experiment, a.world, &a.run).cmp(&(&b.experiment, b.world, &b.run)));
    runs
}

/// The context-parallel traffic finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "context-ring-moves-what-it-must",
        "Split by tokens, each rank holds only its slice's keys and values; the ring passes them so every query sees every earlier key, and the answer stays the unsplit one.",
        &["decode.context.ring_bytes", "decode.context.gather_bytes", "answer.exactness.tokens_equal"],
        "per context split over 2 or more ranks: the busiest ring sender's bytes against what the algorithm must send (every block but the next rank's), the hand-off's bytes against what the decode layout needs, and the tokens against the unsplit model's; HOLDS when every run moved exactly the modelled bytes and kept the tokens, FAILS when one did not; each rank's share of the prompt's cache, reported",
    );
    let runs = context_splits(&inp.facts.decode);
    if runs.is_empty() {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no context split over 2 or more ranks".into());
    }
    // Whether the audit graded a run's divergence a real change (None: it graded no such run).
    let real_change = |run: &str| inp.audit.iter().flat_map(|g| &g.layouts).find(|l| l.run == run).map(|l| l.real_change);
    let (mut wrong, mut explained, mut unrecorded, mut half) = (Vec::new(), Vec::new(), Vec::new(), 0);
    // Runs whose manifest records no modelled hand-off (written before it was): not checked.
    let mut handoff_unrecorded = Vec::new();
    for r in &runs {
        let Some(c) = r.context.as_ref() else { continue };
        // Half precision rounds differently as well: `precision-audit` grades its tokens.
        if r.dtype.is_some_and(|d| d != crate::spec::schema::Dtype::Float32) {
            half += 1;
            continue;
        }
        let label = format!("world {} {}, decoding on {}", r.world, c.cut.name(), c.decodes_on.name());
        let prompt: u32 = c.blocks.iter().sum();
        let largest = c.blocks.iter().copied().max().unwrap_or(0);
        f.number(
            &format!("{label}: largest block / prompt (cache share)"),
            f64::from(largest) / f64::from(prompt.max(1)),
            "ratio",
            &[&r.run],
        );
        f.number(&format!("{label}: ring bytes / modelled"), c.ring_bytes as f64 / c.ring_bytes_modelled.max(1) as f64, "ratio", &[&r.run]);
        let handoff_ok = c.gather_bytes_modelled.map(|m| m == c.gather_bytes);
        let bytes_ok = c.ring_bytes == c.ring_bytes_modelled && handoff_ok != Some(false);
        f.notes.push(format!(
            "{label} ({}): blocks {}; ring sent {} B (modelled {} B); hand-off {} B (modelled {}); tokens equal: {}",
            r.experiment,
            c.blocks.iter().map(u32::to_string).collect::<Vec<_>>().join(" + "),
            c.ring_bytes,
            c.ring_bytes_modelled,
            c.gather_bytes,
            c.gather_bytes_modelled.map_or("not recorded".into(), |m| format!("{m} B")),
            r.tokens_equal.map_or("not recorded", |t| if t { "yes" } else { "NO" })
        ));
        match (bytes_ok, r.tokens_equal) {
            (false, _) => wrong.push(label),
            (true, Some(true)) if handoff_ok.is_none() => handoff_unrecorded.push(label),
            (true, Some(true)) => {}
            // A divergence the audit explains (a near-tie, a noisy reference) is not a change.
            (true, Some(false)) if real_change(&r.run) == Some(false) => explained.push(label),
            (true, Some(false)) => wrong.push(label),
            (true, None) => unrecorded.push(label),
        }
    }
    if half > 0 {
        f.notes.push(format!("{half} context splits in half precision not graded here: `precision-audit` grades their tokens"));
    }
    let graded = runs.len() - half;
    if graded == 0 {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no float32 context split over 2 or more ranks".into());
    }
    if !wrong.is_empty() {
        return f.decide(
            false,
            format!("{} of {graded} context splits moved other bytes or changed the tokens: {}", wrong.len(), wrong.join(", ")),
        );
    }
    if !explained.is_empty() {
        return f.inconclusive(
            Inconclusive::Noise,
            format!(
                "noise: the tokens of {} left the unsplit ones where the audit finds a near-tie or a noisy reference",
                explained.join(", ")
            ),
        );
    }
    if !unrecorded.is_empty() || !handoff_unrecorded.is_empty() {
        let mut missing = Vec::new();
        if !unrecorded.is_empty() {
            missing.push(format!("{} recorded no tokens to compare", unrecorded.join(", ")));
        }
        if !handoff_unrecorded.is_empty() {
            missing.push(format!("{} recorded no modelled hand-off to check its bytes against", handoff_unrecorded.join(", ")));
        }
        return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: {}", missing.join("; ")));
    }
    f.decide(true, format!("all {graded} context splits moved exactly the modelled bytes and kept the unsplit tokens"))
}
