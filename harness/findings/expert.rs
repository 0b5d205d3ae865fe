//! Expert imbalance: when the router crowds some experts, the rank holding them computes
//! more pairs than the others, and the prefill waits for it (the chapter's "the slowest
//! expert sets the pace").

use super::rounds::{self, agreed, note, side_of, MIN_ROUNDS};
use super::{all_left_out, every, left_out, side, Finding, Inconclusive, Inputs, Side};
use crate::report::facts::DecodeRow;
use crate::report::fmt::seconds_range;
use crate::units::format_seconds;

/// Per world ≥ 2, sequences and kind of run ([`DecodeRow::same_kind`]: experiment, model, dtype,
/// generation, threads, device, step mode, link): the evenly routed run and each skewed run
/// beside it.
fn skew_pairs(rows: &[DecodeRow]) -> Vec<(&DecodeRow, &DecodeRow)> {
    let skew = |r: &DecodeRow| r.experts.as_ref().map(|e| e.routing_skew);
    let even: Vec<&DecodeRow> = rows.iter().filter(|r| r.world > 1 && skew(r) == Some(0.0)).collect();
    let mut pairs: Vec<(&DecodeRow, &DecodeRow)> = rows
        .iter()
        .filter(|r| skew(r).is_some_and(|s| s != 0.0))
        .filter_map(|r| even.iter().find(|e| (e.world, e.sequences) == (r.world, r.sequences) && e.same_kind(r)).map(|e| (*e, r)))
        .collect();
    pairs.sort_by(|a, b| (&a.1.experiment, a.1.world, &a.1.run).cmp(&(&b.1.experiment, b.1.world, &b.1.run)));
    pairs
}

/// The expert imbalance finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "expert-imbalance-sets-the-pace",
        "Under skewed routing the rank holding the crowded experts computes more of the pairs, and the prefill slows with it.",
        &["decode.experts.assigned", "decode.experts.compute_s", "decode.prefill_s"],
        &format!("per skewed expert split and the evenly routed run of the same world: the skewed prefill's median above the even prefill's max is slower, below its min faster, else noise; where both ran at least {MIN_ROUNDS} launches in the same rounds, slower or faster also needs every round's even / skewed prefill on that side of 1 (below: slower); HOLDS when every skewed run has the larger imbalance and is slower, FAILS when a run with the larger imbalance is faster (a pair with more ranks × threads than cores is stated, not counted); the busiest rank's expert time over the mean time × imbalance, reported"),
    );
    let pairs = skew_pairs(&inp.facts.decode);
    if pairs.is_empty() {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no expert split run both with and without routing skew".into());
    }
    let (mut slower, mut faster, mut untested, mut flat) = (0, 0, 0, 0);
    for (even, skewed) in &pairs {
        let (Some(ee), Some(se)) = (even.experts.as_ref(), skewed.experts.as_ref()) else { continue };
        let runs = [even.run.as_str(), skewed.run.as_str()];
        let label = format!("world {} skew {}", skewed.world, se.routing_skew);
        f.number(&format!("{label}: imbalance (busiest rank's pairs / mean)"), se.overall_imbalance(), "ratio", &runs);
        f.number(
            &format!("{label}: prefill / evenly routed prefill (medians)"),
            skewed.prefill.median / even.prefill.median,
            "ratio",
            &runs,
        );
        if se.predicted_busiest_compute() > 0.0 {
            f.number(
                &format!("{label}: busiest rank's expert time / predicted"),
                se.busiest_compute() / se.predicted_busiest_compute(),
                "ratio",
                &runs,
            );
        }
        let more = se.overall_imbalance() > ee.overall_imbalance();
        let ratios = rounds::ratios(skewed, even, rounds::prefill);
        f.notes.push(note(&format!("{label} prefill, even / skewed"), ratios.as_deref()));
        let range = side(&even.prefill, skewed.prefill.median);
        let against_even = agreed(range, ratios.as_deref().map(|r| side_of(r, 1.0)));
        let over = inp.oversubscribed(&skewed.run).or(inp.oversubscribed(&even.run));
        // Ranks taking turns on the cores pay for all ranks' pairs, not the busiest rank's.
        let outcome = rounds::outcome(
            over,
            "the ranks take turns on the cores: the prefill pays for every rank's pairs, not the busiest's",
            against_even,
            range,
            ["FASTER", "slower", "within the even run's range", "outside the even run's range, but not on that side in every round"],
        );
        let tested = over.is_none();
        untested += usize::from(!tested);
        flat += usize::from(tested && !more);
        slower += usize::from(tested && more && against_even == Side::Below);
        faster += usize::from(tested && more && against_even == Side::Above);
        f.notes.push(format!(
            "{label} ({}): imbalance {:.2} against {:.2} even; prefill {} against {} ({}): {outcome}",
            skewed.experiment,
            se.overall_imbalance(),
            ee.overall_imbalance(),
            format_seconds(skewed.prefill.median),
            format_seconds(even.prefill.median),
            seconds_range(even.prefill.min, even.prefill.max)
        ));
    }
    let tested = pairs.len() - untested;
    let aside = left_out(untested);
    if tested == 0 {
        return all_left_out(f, untested, "skewed splits");
    }
    if faster > 0 {
        return f.decide(
            false,
            format!("{faster} of {tested} skewed splits were faster than even routing despite the larger imbalance{aside}"),
        );
    }
    if slower == tested {
        return f.decide(true, format!("{} had the larger imbalance and the slower prefill{aside}", every(tested, "skewed split")));
    }
    if flat > 0 && flat == tested - slower {
        // No crowding to test: the claim's second half needs its first.
        return f.inconclusive(
            Inconclusive::NotDecisive,
            format!("not decisive: the skew did not raise the imbalance above even routing's in {flat} of {tested} skewed splits, so they cannot show the crowded rank setting the pace{aside}"),
        );
    }
    f.inconclusive(Inconclusive::Noise, format!("{} of {tested} skewed splits are not clearly slower{aside}", tested - slower))
}
