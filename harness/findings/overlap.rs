//! Overlap: cutting a tensor split's all-reduces into pieces, each started non-blocking while
//! the next piece of the row-parallel product computes, hides communication behind compute
//! and shortens prefill (the chapter's "single largest software lever").

use super::rounds::{self, agreed, note, side_of, MIN_ROUNDS};
use super::{all_left_out, every, left_out, side, Finding, Inconclusive, Inputs, Side};
use crate::manifest::summary::Phase;
use crate::report::facts::overlap_pairs;
use crate::report::fmt::seconds_range;
use crate::units::format_seconds;

/// The overlap finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "overlap-hides-communication",
        "Overlapping a tensor split's all-reduces with the computation of the next piece hides communication and shortens prefill.",
        &["decode.all_reduces.total_s", "decode.prefill_s", "decode.step_s"],
        &format!("per overlapped run and its blocking twin: the overlapped prefill's median below the blocking prefill's min is shorter, above its max longer, else noise; where both ran at least {MIN_ROUNDS} launches in the same rounds, shorter or longer also needs every round's blocking / overlapped prefill on that side of 1 (above: shorter); HOLDS when every pair is shorter, FAILS when any is longer (a pair with more ranks × threads than cores is stated, not counted); hidden = (blocking − overlapped) all-reduce seconds / blocking, per phase, reported"),
    );
    let pairs = overlap_pairs(&inp.facts.decode);
    if pairs.is_empty() {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no tensor split run both with and without overlap".into());
    }
    f.notes.push("method: Open MPI progresses a non-blocking collective only inside MPI calls (no progress thread), so a piece's all-reduce advances at the tests after each start and at the final wait".into());
    let (mut shorter, mut longer, mut untested) = (0, 0, 0);
    for (off, on) in &pairs {
        let runs = [off.run.as_str(), on.run.as_str()];
        for phase in [Phase::Prefill, Phase::Decode] {
            if let (Some(b), Some(o)) = (off.all_reduce_total(phase), on.all_reduce_total(phase)) {
                let name = format!(
                    "world {} {}: hidden share of the all-reduce time ({} pieces)",
                    on.world,
                    phase.name(),
                    on.overlap.unwrap_or(0)
                );
                f.number(&name, (b - o) / b, "fraction", &runs);
            }
        }
        let (blocking, overlapped) = (off.phase_time(Phase::Prefill), on.phase_time(Phase::Prefill));
        f.number(
            &format!("world {} prefill: overlapped / blocking (medians)", on.world),
            overlapped.median / blocking.median,
            "ratio",
            &runs,
        );
        let ratios = rounds::ratios(on, off, rounds::prefill);
        f.notes.push(note(&format!("world {} prefill, blocking / overlapped", on.world), ratios.as_deref()));
        let range = side(&blocking, overlapped.median);
        let against_blocking = agreed(range, ratios.as_deref().map(|r| side_of(r, 1.0)));
        let over = inp.oversubscribed(&on.run).or(inp.oversubscribed(&off.run));
        // A piece's all-reduce needs a core to progress on while the next piece computes.
        let outcome = rounds::outcome(
            over,
            "no core is free to progress the overlapped pieces",
            against_blocking,
            range,
            [
                "shorter",
                "LONGER",
                "within the blocking run's range",
                "outside the blocking run's range, but not on that side in every round",
            ],
        );
        let tested = over.is_none();
        untested += usize::from(!tested);
        shorter += usize::from(tested && against_blocking == Side::Above);
        longer += usize::from(tested && against_blocking == Side::Below);
        f.notes.push(format!(
            "world {} ({}): prefill {} overlapped against {} blocking ({}): {outcome}",
            on.world,
            on.experiment,
            format_seconds(overlapped.median),
            format_seconds(blocking.median),
            seconds_range(blocking.min, blocking.max)
        ));
    }
    let tested = pairs.len() - untested;
    let aside = left_out(untested);
    if tested == 0 {
        return all_left_out(f, untested, "overlapped splits");
    }
    if longer > 0 {
        return f.decide(false, format!("overlap lengthened prefill in {longer} of {tested} splits on this machine{aside}"));
    }
    if shorter == tested {
        return f.decide(true, format!("overlap shortened prefill in {}{aside}", every(tested, "split")));
    }
    f.inconclusive(
        Inconclusive::Noise,
        format!(
            "{} of {tested} overlapped prefills are not clearly shorter (within the blocking run's range, or not in every round){aside}",
            tested - shorter
        ),
    )
}
