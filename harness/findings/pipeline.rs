//! Pipeline: one sequence over p stages visits them in turn and is no faster than one
//! stage; with m >= p sequences the rate rises no higher than the ceiling the independent
//! replicas hit (the shared memory system), not to p times one stage.

use super::{by_world, one_experiment_on_cores, Finding, Inconclusive, Inputs, TOLERANCE};
use crate::report::facts::{DecodeRow, Stats};
use crate::spec::schema::Strategy;

/// A rate in tokens per second, as the findings' numbers print it.
fn tokens_per_s(rate: f64) -> String {
    super::render::format_value(rate, "tokens/s")
}

/// The pipeline finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "pipeline",
        "One sequence over p pipeline stages is no faster than one stage, and with m >= p sequences in flight the pipeline's rate rises no higher than the ceiling independent replicas reach (not to p times one stage).",
        &["decode.tokens_per_s (pipeline)", "decode.tokens_per_s (data)"],
        &format!("(1) at every p > 1 with one sequence, the median tokens/s is at most one stage's max; (2) the best median tokens/s with m >= p > 1 is at most the replicas' best median × (1 + {TOLERANCE}) (own bandwidth per stage would give p × one stage); a run with more ranks × threads than cores is stated, not counted"),
    );
    let pipe = one_experiment_on_cores(inp.facts.decode.iter().filter(|d| d.strategy == Strategy::Pipeline), |d| {
        inp.oversubscribed(&d.run).is_some()
    });
    let single = by_world(pipe.iter().copied().filter(|d| d.sequences == 1), |d| d.world);
    let Some(one) = single.get(&1).copied() else {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no one-stage pipeline run with one sequence".into());
    };
    f.notes.push(format!(
        "pipeline runs of experiment `{}` ({} {}; the replicas of the same model), one prompt and generation for every world",
        one.experiment,
        one.model,
        one.dtype_name()
    ));
    if let Some(o) = inp.oversubscribed(&one.run) {
        return f.inconclusive(Inconclusive::Oversubscribed, format!("oversubscribed: the one-stage run {} was {o}", one.run));
    }
    let rate = |d: &DecodeRow| d.tokens_per_s;
    let r1: Stats = rate(one);
    f.number("one stage, one sequence: tokens/s (median)", r1.median, "tokens/s", &[one.run.as_str()]);
    let (mut faster, mut untested) = (Vec::new(), Vec::new());
    for (&p, d) in single.iter().filter(|(&p, _)| p > 1) {
        let r = rate(d);
        f.number(&format!("{p} stages, one sequence: tokens/s (median)"), r.median, "tokens/s", &[d.run.as_str()]);
        let ok = r.median <= r1.max;
        let over = inp.oversubscribed(&d.run);
        // Waiting for a core can only slow a pipeline: oversubscribed, "no faster" is no
        // evidence, but faster still is.
        let outcome = match (over, ok) {
            (Some(o), true) => format!("not a test, {o} (stages wait for a core as well as for each other)"),
            (Some(o), false) => format!("FASTER, though {o}"),
            (None, true) => "no faster".into(),
            (None, false) => "FASTER".into(),
        };
        f.notes.push(format!(
            "{p} stages, one sequence: {} against one stage's {} (max {}): {outcome}",
            tokens_per_s(r.median),
            tokens_per_s(r1.median),
            tokens_per_s(r1.max)
        ));
        match (over, ok) {
            (_, false) => faster.push(p),
            (Some(_), true) => untested.push(p),
            (None, true) => {}
        }
    }
    if single.len() < 2 {
        return f
            .inconclusive(Inconclusive::MissingRuns, "missing runs: no pipeline run over more than one stage with one sequence".into());
    }
    if !faster.is_empty() {
        return f.decide(false, format!("one sequence ran faster over {faster:?} stages than over one"));
    }
    if untested.len() + 1 == single.len() {
        return f.inconclusive(
            Inconclusive::Oversubscribed,
            "oversubscribed: every pipeline of more than one stage with one sequence had more ranks × threads than cores".into(),
        );
    }
    let aside = if untested.is_empty() { String::new() } else { format!("; {} stages oversubscribed, not counted", list(&untested)) };
    ceiling(f, inp, &pipe, r1, &aside)
}

/// Stage counts in words: `4`, `4, 8`.
fn list(stages: &[u32]) -> String {
    stages.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

fn ceiling(mut f: Finding, inp: &Inputs, pipe: &[&DecodeRow], r1: Stats, aside: &str) -> Finding {
    let own_cores = |d: &&DecodeRow| inp.oversubscribed(&d.run).is_none();
    let filled = || pipe.iter().copied().filter(|d| d.world > 1 && d.sequences >= u64::from(d.world));
    // Replicas of the pipeline's model and dtype on its device: more than one, eager.
    let model = pipe.first().map(|d| (&d.model, d.dtype, d.device));
    let eager_replica = |d: &&DecodeRow| d.strategy == Strategy::Data && d.world > 1 && d.step_mode == crate::spec::schema::StepMode::Eager;
    let all_replicas = || inp.facts.decode.iter().filter(eager_replica).filter(|d| Some((&d.model, d.dtype, d.device)) == model);
    let replicas = best(all_replicas().filter(own_cores));
    // The filled pipeline on cores of its own, or an oversubscribed one where it beat the
    // ceiling anyway (waiting for a core can only slow it), whichever is faster.
    let over_ceiling = |(rate, _): &(f64, &DecodeRow)| replicas.is_some_and(|(rr, _)| *rate > rr * (1.0 + TOLERANCE));
    let oversubscribed_over = best(filled().filter(|d| !own_cores(d))).filter(over_ceiling);
    let full = [best(filled().filter(own_cores)), oversubscribed_over].into_iter().flatten().max_by(|a, b| a.0.total_cmp(&b.0));
    let (Some((pr, pd)), Some((rr, rd))) = (full, replicas) else {
        let why = if filled().next().is_some() && all_replicas().next().is_some() {
            Inconclusive::Oversubscribed
        } else {
            Inconclusive::MissingRuns
        };
        return f.inconclusive(
            why,
            format!("{}: the ceiling needs a pipeline run with m >= p > 1 and a data-parallel (replicas) run, each with a core for every rank's threads", if why == Inconclusive::Oversubscribed { "oversubscribed" } else { "missing runs" }),
        );
    };
    f.number(
        &format!("pipeline ceiling: best tokens/s with m >= p ({} stages, {} sequences)", pd.world, pd.sequences),
        pr,
        "tokens/s",
        &[pd.run.as_str()],
    );
    f.number(&format!("replicas' ceiling: best aggregate tokens/s ({} replicas)", rd.world), rr, "tokens/s", &[rd.run.as_str()]);
    f.number(
        &format!("predicted if each of the {} stages had its own bandwidth (p × one stage)", pd.world),
        r1.median * f64::from(pd.world),
        "tokens/s",
        &[],
    );
    let ratio = pr / rr;
    f.number("pipeline ceiling / replicas' ceiling", ratio, "ratio", &[pd.run.as_str(), rd.run.as_str()]);
    f.notes.push(format!(
        "with m >= p the pipeline reached {}, {:.2}× one stage, against the replicas' {}",
        tokens_per_s(pr),
        pr / r1.median,
        tokens_per_s(rr)
    ));
    let stages_alone = r1.median * f64::from(pd.world);
    if ratio <= 1.0 + TOLERANCE && rr * (1.0 + TOLERANCE) >= stages_alone {
        // The replicas reached p × one stage themselves: the ceiling and the claim's alternative
        // predict the same rate, and a pipeline at or below both tells them apart no better.
        return f.inconclusive(
            Inconclusive::NotDecisive,
            format!(
                "not decisive: the replicas' ceiling ({} replicas, {}) is at or within {} of {} stages each at one stage's rate ({}), so the two ceilings coincide and a pipeline below both tells them apart no better",
                rd.world,
                tokens_per_s(rr),
                crate::report::fmt::whole_percent(TOLERANCE),
                pd.world,
                tokens_per_s(stages_alone)
            ),
        );
    }
    if ratio <= 1.0 + TOLERANCE {
        f.decide(
            true,
            format!(
                "one sequence gained nothing from more stages, and the filled pipeline's best rate is {ratio:.2}× the replicas' ceiling{aside}"
            ),
        )
    } else {
        f.decide(
            false,
            format!(
                "the filled pipeline's best rate is {ratio:.2}× the replicas' ceiling: the stages drew bandwidth the replicas could not"
            ),
        )
    }
}

/// The row with the highest median tokens/s, and that median.
fn best<'a>(rows: impl Iterator<Item = &'a DecodeRow>) -> Option<(f64, &'a DecodeRow)> {
    rows.map(|d| (d.tokens_per_s.median, d)).max_by(|a, b| a.0.total_cmp(&b.0))
}
