//! Shared memory bandwidth: decode is limited by one memory system all ranks share, so a
//! tensor split's non-communication time stays at one process's instead of falling as 1/p.
//! The verdict rests on that prediction (the one that could have failed); the membw plateau
//! and the independent replicas' aggregate are reported beside it.

use super::rounds::{self, agreed, note, side_of, MIN_ROUNDS};
use super::{by_world, one_experiment_on_cores, side, worlds, Finding, Inconclusive, Inputs, Side};
use crate::report::facts::{DecodeRow, MembwRow, Stats};
use crate::spec::schema::{HeadPlacement, Strategy};
use crate::units::format_seconds;

/// The shared-bandwidth finding.
pub fn finding(inp: &Inputs) -> Finding {
    let mut f = Finding::new(
        "shared-memory-bandwidth",
        "Decode on this machine is limited by one memory system that all processes share, so splitting the weights over p processes does not shorten the non-communication part of a step.",
        &["decode.compute_s (tensor, sequences 1)", "membw.stream.aggregate_Bps where recorded, else membw.aggregate_Bps (threads 1)", "decode.tokens_per_s (data)"],
        &format!("at each world p > 1, the tensor split's non-communication time T_p against the two predictions: T_1 if bandwidth is shared, T_1/p if each rank brought its own; the boundary is their geometric mean T_1/sqrt(p). Every sample of T_p above it: shared; every sample below: own bandwidth (FAILS at any p); a range straddling it: noise; where T_p's and T_1's runs ran at least {MIN_ROUNDS} launches in the same rounds, a side also needs every round's T_p / T_1 on that side of 1/sqrt(p); a world with more ranks × threads than cores is stated, not counted (its ranks take turns on the cores); the membw plateau and the replicas at the most processes with a core each; a step that stayed is put down to the shared memory only where that plateau is below sqrt(p) of one process's bandwidth (else INCONCLUSIVE: not decisive, or missing runs where it was not measured)"),
    );
    let tensor = by_world(tensor_runs(inp).into_iter(), |d| d.world);
    // The plateau that attributes a step that stayed to memory is read at the tensor split's
    // largest world with a core for every rank (or the largest membw count below it).
    let counted = tensor.iter().filter(|(&p, d)| p > 1 && inp.oversubscribed(&d.run).is_none()).map(|(&p, _)| p).max();
    let plateau = plateau(&mut f, inp, counted);
    replicas(&mut f, inp);
    let Some(&row1) = tensor.get(&1) else {
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no world-1 tensor decode run to give T_1".into());
    };
    if let Some(o) = inp.oversubscribed(&row1.run) {
        return f.inconclusive(Inconclusive::Oversubscribed, format!("oversubscribed: T_1's run {} was {o}", row1.run));
    }
    let (one, run1) = (row1.compute, row1.run.as_str());
    f.notes.push(format!("tensor runs of experiment `{}` (one prompt and generation for every world)", row1.experiment));
    f.number("T_1: non-communication time of a step, 1 process (median)", one.median, "s", &[run1]);
    let (mut sides, mut untested) = (Vec::new(), Vec::new());
    for (&p, d) in tensor.iter().filter(|(&p, _)| p > 1) {
        let t = d.compute;
        let boundary = one.median / f64::from(p).sqrt();
        f.number(&format!("T_{p}: non-communication time at world {p} (median)"), t.median, "s", &[d.run.as_str()]);
        f.number(&format!("predicted at world {p} if each rank had its own bandwidth (T_1/{p})"), one.median / f64::from(p), "s", &[run1]);
        let ratios = rounds::ratios(row1, d, rounds::compute);
        f.notes.push(note(&format!("world {p} T_{p} / T_1 (boundary {:.3})", 1.0 / f64::from(p).sqrt()), ratios.as_deref()));
        let range = side(&t, boundary);
        let s = agreed(range, ratios.as_deref().map(|r| side_of(r, 1.0 / f64::from(p).sqrt())));
        let over = inp.oversubscribed(&d.run);
        let outcome = rounds::outcome(
            over,
            "the ranks take turns on the cores, each reading memory while others wait",
            s,
            range,
            [
                "consistent with shared bandwidth",
                "consistent with each rank's own bandwidth",
                "the range straddles the boundary (noise)",
                "the range is on one side of the boundary, but not every round (noise)",
            ],
        );
        f.notes.push(format!(
            "world {p}: measured {} to {} (median {}); shared predicts {}, own bandwidth {}: {outcome}",
            format_seconds(t.min),
            format_seconds(t.max),
            format_seconds(t.median),
            format_seconds(one.median),
            format_seconds(one.median / f64::from(p)),
        ));
        match over {
            Some(_) => untested.push(p),
            None => sides.push((p, s)),
        }
    }
    match decide(f, &sides, &untested) {
        held if held.verdict == super::Verdict::Holds => attributed_to_memory(held, plateau),
        other => other,
    }
}

/// A step that did not fall is put down to the shared memory system only where the membw
/// runs show it: several processes streaming at once drew less than sqrt(p) times one
/// process's bandwidth. Where they drew more, or were not measured, the ranks may have been
/// held back by something else they share (the cores), and the finding cannot tell.
fn attributed_to_memory(f: Finding, plateau: Option<(u32, f64)>) -> Finding {
    match plateau {
        Some((p, ratio)) if ratio < f64::from(p).sqrt() => f,
        Some((p, ratio)) => f.inconclusive(
            Inconclusive::NotDecisive,
            format!("not decisive: the step did not fall, but {p} processes streamed {ratio:.2}× one process's memory bandwidth (at least sqrt({p})): something else the ranks share held them back"),
        ),
        None => f.inconclusive(
            Inconclusive::MissingRuns,
            "missing runs: the step did not fall, but no membw run of one and of several processes (a core each) shows that memory bandwidth is what the ranks share".into(),
        ),
    }
}

/// The tensor decode runs (one sequence, split head) of one experiment ([`one_experiment_on_cores`]).
fn tensor_runs<'a>(inp: &'a Inputs) -> Vec<&'a DecodeRow> {
    let rows = inp.facts.decode.iter();
    let tensor = rows.filter(|d| d.strategy == Strategy::Tensor && d.sequences == 1 && d.head != Some(HeadPlacement::Replicated));
    one_experiment_on_cores(tensor, |d| inp.oversubscribed(&d.run).is_some())
}

/// Decided by the worlds whose ranks had cores of their own; `untested`: the oversubscribed ones.
fn decide(f: Finding, sides: &[(u32, Side)], untested: &[u32]) -> Finding {
    let Some(&(largest, last)) = sides.last() else {
        if !untested.is_empty() {
            return f.inconclusive(
                Inconclusive::Oversubscribed,
                format!(
                    "oversubscribed: every tensor split with more than one rank ({}) had more ranks × threads than cores",
                    worlds(untested)
                ),
            );
        }
        return f.inconclusive(Inconclusive::MissingRuns, "missing runs: no tensor decode run with more than one rank".into());
    };
    let aside = if untested.is_empty() { String::new() } else { format!("; {} oversubscribed, not counted", worlds(untested)) };
    if let Some((p, _)) = sides.iter().find(|(_, s)| *s == Side::Below) {
        return f.decide(
            false,
            format!("at world {p} the non-communication time fell below T_1/sqrt({p}): each rank brought bandwidth of its own"),
        );
    }
    if last == Side::Above {
        let n = sides.iter().filter(|(_, s)| *s == Side::Above).count();
        return f.decide(
            true,
            format!("the prediction that could have failed did not: up to world {largest} the non-communication time stayed above T_1/sqrt(p) ({n} of {} world sizes decisive{aside})", sides.len()),
        );
    }
    f.inconclusive(
        Inconclusive::Noise,
        format!("noise: at world {largest} the measured range straddles T_1/sqrt({largest}), or its rounds disagree"),
    )
}

/// A membw run's aggregate: parlab's STREAM-class read where recorded (`stream`), else libtorch's sum.
fn aggregate(row: &MembwRow, stream: bool) -> Option<Stats> {
    if stream {
        row.stream_aggregate
    } else {
        Some(row.aggregate)
    }
}

/// The membw plateau: processes and their aggregate over one process's, where measured, at the
/// most processes up to `at_most` (any count where it is None).
fn plateau(f: &mut Finding, inp: &Inputs, at_most: Option<u32>) -> Option<(u32, f64)> {
    let from_memory = crate::costmodel::cache::from_memory(inp.facts.membw.iter().collect(), |r| (r.processes, r.threads), |r| r.buffer);
    let runs = by_world(from_memory.into_iter().filter(|r| r.threads == 1 && inp.oversubscribed(&r.run).is_none()), |r| r.processes as u32);
    let (Some(one), Some((&p, top))) = (runs.get(&1), runs.range(2..=at_most.unwrap_or(u32::MAX)).next_back()) else {
        return None;
    };
    let stream = aggregate(one, true).is_some() && aggregate(top, true).is_some();
    let (Some(a1), Some(ap)) = (aggregate(one, stream), aggregate(top, stream)) else {
        return None;
    };
    let (r1, rp) = (one.run.clone(), top.run.clone());
    let read = if stream { "STREAM-class read" } else { "libtorch sum" };
    f.number(&format!("membw aggregate ({read}), 1 process (median)"), a1.median, "B/s", &[r1.as_str()]);
    f.number(&format!("membw aggregate ({read}), {p} processes (median)"), ap.median, "B/s", &[rp.as_str()]);
    let ratio = ap.median / a1.median;
    f.number(
        &format!("membw aggregate ratio, {p} processes / 1 (own bandwidth predicts {p})"),
        ratio,
        "ratio",
        &[r1.as_str(), rp.as_str()],
    );
    f.notes.push(format!(
        "membw plateau ({read}): {p} processes streamed {ratio:.2}× one process's aggregate (own bandwidth would give {p}×)"
    ));
    Some((p, ratio))
}

fn replicas(f: &mut Finding, inp: &Inputs) {
    let data =
        one_experiment_on_cores(inp.facts.decode.iter().filter(|d| d.strategy == Strategy::Data), |d| inp.oversubscribed(&d.run).is_some());
    let rows = by_world(data.into_iter().filter(|d| inp.oversubscribed(&d.run).is_none()), |d| d.world);
    let (Some(one), Some((&p, top))) = (rows.get(&1), rows.iter().next_back().filter(|(&p, _)| p > 1)) else {
        return;
    };
    let rate = |d: &DecodeRow| d.tokens_per_s.median;
    let ratio = rate(top) / rate(one);
    f.number("one replica's tokens/s (median)", rate(one), "tokens/s", &[one.run.as_str()]);
    f.number(&format!("{p} independent replicas' aggregate tokens/s (median)"), rate(top), "tokens/s", &[top.run.as_str()]);
    f.number(
        &format!("replicas' aggregate ratio, {p} / 1 (own bandwidth predicts {p})"),
        ratio,
        "ratio",
        &[one.run.as_str(), top.run.as_str()],
    );
    f.notes.push(format!("replicas: {p} independent replicas gave {ratio:.2}× one replica's tokens/s (own bandwidth would give {p}×)"));
}
