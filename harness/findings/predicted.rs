//! The cost model against the splits parlab measures: every split (or run of several
//! sequences) that has an unsplit peer is predicted with each rank streaming at the lower of
//! its ceiling (the memory's bandwidth, or a cache's measured rate where one holds the rank's
//! bytes) and the peer's kernel rate (`costmodel::step::Calibrated`); the
//! claim holds when each lands within the tolerance or past it with an assumption known not to
//! hold for the run (an oversubscribed launch, no progress thread, calls slower than in
//! isolation, or the machine running at another speed when the peer was measured: the same
//! computation, unsplit, ran at other rates at other moments, and at one of them the split is
//! predicted within the tolerance), and fails on a model error. A split launched in rounds
//! with its peer is judged round by round (`costmodel::step::Moments`): each round is one
//! moment, so the other-moments explanation is not offered for it.

use super::{Finding, Inconclusive, Inputs};
use crate::costmodel::step::{predict_steps, Calibrated, Moments, Outcome, StepPrediction, TOLERANCE};
use crate::report::fmt::{percent, tolerance, whole_percent};

/// The calibrated prediction finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "cost-model-predicts-splits",
        "A decode split's step is its busiest rank's bytes at the lower of the memory's bandwidth (a cache's, where membw read the rank's footprint faster; for one rank of the peer's threads, at least the rate the peer read memory at) and the rate the unsplit run's kernel moves them, plus its collectives: calibrated on one unsplit run, the cost model predicts the splits measured here.",
        &["decode.step_s", "membw roofline and aggregate", "collective fits and skew", "the unsplit peer's decode.step_s"],
        &format!("every split or run of several sequences with an unsplit peer of its model, dtype, device, step mode, routing and threads (the register's \"Decode: predicted from the unsplit run's kernel rate\"): within {} of its measured step (a split and peer launched in rounds of one run: the median of the rounds' errors, each round predicted from the peer's step in it), or past it with an assumption known not to hold (oversubscribed, no progress thread, calls as in isolation, weights in the cores' caches, step time the split did not divide, or, not paired by round, the machine at one speed for the split and its peer: within at the rate another unsplit run of its computation ran at); HOLDS when no prediction is a model error, FAILS when one is", tolerance(TOLERANCE)),
    );
    let predictions = predict_steps(inp.list);
    let splits: Vec<(&StepPrediction, &Calibrated)> =
        predictions.iter().filter(|p| !p.is_unsplit()).filter_map(|p| Some((p, p.calibrated.as_ref()?))).collect();
    if splits.is_empty() {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no split with an unsplit peer of its threads".into());
    }
    let runs = |keep: &dyn Fn(&StepPrediction, &Calibrated) -> bool| -> Vec<&str> {
        splits.iter().filter(|(p, c)| keep(p, c)).map(|(p, _)| p.run_id.short()).collect()
    };
    let within = runs(&|_, c| c.outcome == Outcome::Within);
    let explained = runs(&|_, c| matches!(c.outcome, Outcome::AssumptionFailed(_)));
    let (moved, errors): (Vec<_>, Vec<_>) = splits
        .iter()
        .filter(|(_, c)| c.outcome == Outcome::ModelError)
        .map(|&(p, c)| (p, c, at_other_moments(p, c, &predictions)))
        .partition(|(_, _, moments)| moments.is_some());
    let moved_runs: Vec<&str> = moved.iter().map(|(p, _, _)| p.run_id.short()).collect();
    let error_runs: Vec<&str> = errors.iter().map(|(p, _, _)| p.run_id.short()).collect();
    let all = runs(&|_, _| true);
    let in_rounds = runs(&|_, c| matches!(c.moments, Moments::Rounds { .. }));
    f.number("splits predicted from an unsplit peer", splits.len() as f64, "count", &all);
    f.number(
        "of them compared with their peer round by round (the median of the rounds' errors)",
        in_rounds.len() as f64,
        "count",
        &in_rounds,
    );
    f.number(&format!("within {}", tolerance(TOLERANCE)), within.len() as f64, "count", &within);
    f.number("past it, an assumption known not to hold", explained.len() as f64, "count", &explained);
    f.number("past it, within at a rate its peer's computation ran at another moment", moved.len() as f64, "count", &moved_runs);
    f.number("past it, a model error", errors.len() as f64, "count", &error_runs);
    let roofline = splits.iter().filter(|(p, _)| p.error.abs() <= TOLERANCE).count();
    let roofline_runs = runs(&|p, _| p.error.abs() <= TOLERANCE);
    f.number(&format!("the roofline alone within {} (the same splits)", tolerance(TOLERANCE)), roofline as f64, "count", &roofline_runs);
    f.notes = moved
        .iter()
        .filter_map(|(p, c, moments)| Some(moment_note(p, c, moments.as_ref()?)))
        .chain(errors.iter().map(|(p, c, _)| error_note(p, c)))
        .collect();
    let within_errors: Vec<f64> = splits.iter().filter(|(_, c)| c.outcome == Outcome::Within).map(|(_, c)| c.error).collect();
    let lean = lean(&within_errors);
    if let Some(errors) = crate::manifest::stats::Stats::of(&within_errors) {
        f.number("median error of the splits within, (predicted − measured) / measured", errors.median, "fraction", &within);
    }
    if errors.is_empty() && within.is_empty() && moved.is_empty() {
        // Every split explained away: no prediction was tested, so the model is not shown to hold.
        return f.inconclusive(
            Inconclusive::NotDecisive,
            format!(
                "not decisive: none of {} splits within {}; each is past it where an assumption is known not to hold, so none tests the model",
                splits.len(),
                tolerance(TOLERANCE)
            ),
        );
    }
    if errors.is_empty() {
        let moments = match moved.len() {
            0 => String::new(),
            n => {
                format!(" and {n} within at a rate their peer's computation ran at another moment (the machine's speed moved between them)")
            }
        };
        let reason = format!(
            "{} of {} splits within {}{lean}, {} past it where an assumption is known not to hold{moments} (the roofline alone: {roofline})",
            within.len(),
            splits.len(),
            tolerance(TOLERANCE),
            explained.len()
        );
        return f.decide(true, reason);
    }
    let reason = format!(
        "{} of {} splits missed by more than {} with no assumption known to fail ({} within, {} explained, {} within at another moment's rate)",
        errors.len(),
        splits.len(),
        whole_percent(TOLERANCE),
        within.len(),
        explained.len(),
        moved.len()
    );
    f.decide(false, reason)
}

/// How the errors within the tolerance lean, in words (` (all 12 predicted short of the
/// measured step: the model is systematically low)`), or empty where they fall on both sides
/// (or there are fewer than 3).
fn lean(errors: &[f64]) -> String {
    let n = errors.len();
    if n < 3 {
        return String::new();
    }
    if errors.iter().all(|e| *e < 0.0) {
        format!(" (all {n} predicted short of the measured step: the model is systematically low)")
    } else if errors.iter().all(|e| *e > 0.0) {
        format!(" (all {n} predicted above the measured step: the model is systematically high)")
    } else {
        String::new()
    }
}

/// A split's calibration at another moment: the rates the same computation ran at unsplit (its
/// peer's excluded), and the error nearest zero at one of them.
struct OtherMoments {
    /// The slowest and fastest of those rates, bytes per second.
    range_bps: (f64, f64),
    /// How many runs ran at them.
    moments: usize,
    /// The rate that predicts the split best.
    rate_bps: f64,
    /// (predicted − measured) / measured at that rate.
    error: f64,
}

/// Where the unsplit runs of `p`'s computation and threads, its peer's other kin, ran at rates
/// at one of which `p`'s memory time (its calibrated compute, read at the lower of the ceiling
/// and that rate) puts it within the tolerance: the peer's one moment, not the model, missed.
/// None without such a run besides the peer (no other moment to go by), and for a split
/// compared with its peer round by round (each round is one moment already).
fn at_other_moments(p: &StepPrediction, c: &Calibrated, all: &[StepPrediction]) -> Option<OtherMoments> {
    if c.moments != Moments::Medians {
        return None;
    }
    let rates: Vec<f64> =
        all.iter().filter(|u| u.is_kin_of(p) && u.run_id != c.unsplit_run).filter_map(StepPrediction::achieved_bps).collect();
    if rates.is_empty() {
        return None;
    }
    // Everything in the predicted round but its communication is bytes read at the rate (a
    // pipeline's fill reads its stages' bytes several times): it scales with the rate.
    let error_at = |rate: f64| {
        let reading_s = (c.step.step_s - c.step.comm_s) * c.bandwidth_bps / c.ceiling.cap(rate);
        (c.step.comm_s + reading_s - p.measured_step_s) / p.measured_step_s
    };
    let (rate_bps, error) = rates.iter().map(|&r| (r, error_at(r))).min_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))?;
    let range_bps = rates.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), &r| (lo.min(r), hi.max(r)));
    (error.abs() <= TOLERANCE).then_some(OtherMoments { range_bps, moments: rates.len(), rate_bps, error })
}

/// A split within at another moment's rate, in words.
fn moment_note(p: &StepPrediction, c: &Calibrated, o: &OtherMoments) -> String {
    let gbps = crate::units::format_gbps;
    let elsewhere = match o.moments {
        1 => "another unsplit run of its computation ran at it".to_string(),
        n => format!("{n} other unsplit runs of its computation ran at {} to {}", gbps(o.range_bps.0), gbps(o.range_bps.1)),
    };
    format!(
        "{}: {} at its peer {}'s {}, {} at {} ({elsewhere}): the machine's speed between the two moments, not the model, missed",
        split_words(p),
        percent(c.error, true),
        c.unsplit_run.short(),
        gbps(c.kernel_bps),
        percent(o.error, true),
        gbps(o.rate_bps)
    )
}

/// A split and its run in words: `gpt2 float32 pipeline world 2 (4 sequences, run 9ebe72ce4b1a)`.
fn split_words(p: &StepPrediction) -> String {
    format!(
        "{} {} {} world {} ({} sequence{}, run {})",
        p.model,
        p.dtype.name(),
        p.strategy.name(),
        p.world,
        p.sequences,
        if p.sequences == 1 { "" } else { "s" },
        p.run_id.short()
    )
}

/// A model error in words: the run, its layout, measured and predicted step (and where it was
/// compared round by round, the rounds' errors its error is the median of).
fn error_note(p: &StepPrediction, c: &Calibrated) -> String {
    let medians = (c.step.step_s - p.measured_step_s) / p.measured_step_s;
    let error = match &c.moments {
        Moments::Medians => percent(c.error, true),
        Moments::Rounds { errors } => {
            let each: Vec<String> = errors.iter().map(|e| percent(*e, true)).collect();
            format!("{} of the medians; round by round {}, median {}", percent(medians, true), each.join(", "), percent(c.error, true))
        }
    };
    format!(
        "{}: measured {}, predicted {} ({error}) at {} per rank",
        split_words(p),
        crate::units::format_seconds(p.measured_step_s),
        crate::units::format_seconds(c.step.step_s),
        crate::units::format_gbps(c.bandwidth_bps)
    )
}
