//! α–β validity: the all-reduce constants fitted on 2 ranks predict other world sizes and
//! held-out (larger) sizes within the declared tolerance; where they do and where they fail.

use super::rounds::{Launched, MIN_ROUNDS};
use super::{worlds, Finding, Inconclusive, Inputs, Oversubscribed, TOLERANCE};
use crate::costmodel::link::{collective_time, fit_collective, Link as Constants, LinkFit};
use crate::report::facts::{CollRow, Stats};
use crate::report::fmt::{percent, plural, tolerance};
use crate::spec::link::Link;
use crate::spec::schema::Op;
use crate::units::{format_bytes, format_gbps, format_seconds};
use std::collections::BTreeMap;

/// One finding per link with a 2-rank all-reduce fit (none: one INCONCLUSIVE finding).
pub fn findings(inp: &Inputs) -> Vec<Finding> {
    let fits = inp.allreduce_fits();
    if fits.is_empty() {
        return vec![claim("alpha-beta", "any link")
            .inconclusive(Inconclusive::MissingRuns, "missing runs: no 2-rank all-reduce sweep to fit".into())];
    }
    fits.into_iter().map(|(link, fit, run)| link_finding(inp, &link, fit, &run)).collect()
}

fn claim(id: &str, link: &str) -> Finding {
    Finding::new(
        id,
        &format!("The all-reduce's α and β fitted on 2 ranks over {link} predict its time at other world sizes and at held-out larger sizes within {}.", tolerance(TOLERANCE)),
        &[
            "collectives.rows.op_time_s (all-reduce; time_s where op_time_s is absent)",
            "collectives.fits.alpha_per_step_s",
            "collectives.fits.beta_Bps",
            "launches.figures[\"all-reduce <S> B op median\"] (where launched in rounds)",
        ],
        &format!("ring model 2(p-1)α + 2(p-1)/p·S/β from the 2-rank fit; a point holds when |predicted - measured| / measured <= {TOLERANCE} or the prediction lies within the min..max of the op's own time over its separate back-to-back loops (not of single calls, whose slow tail would excuse any over-prediction); where the 2-rank run and the point's run ran at least {MIN_ROUNDS} launches in the same rounds of one `parlab run`, each round is fitted and checked apart instead, without the loops' spread (launch r's own times: a fit and the points it predicts from one round of the suite, where the medians mix every round's): a point holds when every round holds, fails when none does, and is at the tolerance's edge when its rounds disagree (INCONCLUSIVE: noise, unless a point fails), its error the round's of largest magnitude; HOLDS when every point outside the fit holds, at worlds whose ranks × threads fit the cores (an oversubscribed world's points are stated, not counted: its ranks wait for a core, which the ring model does not count)"),
    )
}

/// A region of the check: a world size, whether the sizes are beyond the fit, and whether its
/// runs were oversubscribed (kept apart from the runs of that world that were not).
type Region = (u32, bool, bool);

#[derive(Default)]
struct Tally {
    points: usize,
    failed: usize,
    /// Points whose rounds disagree: some hold, some do not.
    at_edge: usize,
    /// Points checked round by round (the others on their medians).
    by_round: usize,
    worst: f64,
    worst_size: u64,
    /// The worst point's error round by round, where its rounds were checked apart.
    worst_rounds: Option<Vec<f64>>,
    runs: Vec<String>,
    /// A run of the region had more ranks × threads than cores: not a test of the model.
    oversubscribed: Option<Oversubscribed>,
}

/// What one point outside the fit came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Point {
    /// Within the tolerance (in every round, where checked by round).
    Holds,
    /// Outside it (in every round, where checked by round).
    Fails,
    /// Within it in some rounds and outside in others: the tolerance's edge lies in the noise.
    AtEdge,
}

/// A region's outcome: a failed point decides it, else a point at the edge, else it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RegionOutcome {
    Holds,
    Fails,
    AtEdge,
    NotATest(Oversubscribed),
}

impl Tally {
    fn outcome(&self) -> RegionOutcome {
        match self.oversubscribed {
            Some(o) => RegionOutcome::NotATest(o),
            None if self.failed > 0 => RegionOutcome::Fails,
            None if self.at_edge > 0 => RegionOutcome::AtEdge,
            None => RegionOutcome::Holds,
        }
    }
}

/// The 2-rank run's launches, each fitted apart: round r's constants from launch r's own times.
struct RoundFits<'a> {
    /// The fit run's launches (their span; any fitted size's values).
    reference: Launched<'a>,
    /// Round r's constants.
    constants: Vec<Constants>,
}

/// Each round's fit of the 2-rank run `run` over `link`, where it ran at least [`MIN_ROUNDS`]
/// launches with the op's own time at every fitted size; Err says why not.
fn round_fits<'a>(inp: &'a Inputs, link: &Link, fit: &LinkFit, run: &str) -> Result<RoundFits<'a>, String> {
    let fitted: Vec<&CollRow> = inp
        .facts
        .collectives
        .iter()
        .filter(|r| r.run == run && r.op == Op::AllReduce && r.link == *link && r.world == 2 && r.size <= fit.fit_max_bytes)
        .collect();
    let launches = fitted.iter().map(|r| r.op_rounds.values.len()).max().unwrap_or(0);
    if launches == 0 {
        return Err(
            "the 2-rank run recorded no launch-by-launch times of the op (launched once, or measured before parlab recorded them)".into()
        );
    }
    if fitted.iter().any(|r| r.op_rounds.values.len() != launches) {
        return Err("the 2-rank run recorded launch-by-launch times at some fitted sizes and not at others".into());
    }
    if launches < MIN_ROUNDS {
        return Err(format!(
            "the 2-rank run ran {}, fewer than {MIN_ROUNDS}: too few rounds to tell a miss from the noise between them",
            plural(launches, "launch", "launches")
        ));
    }
    let mut constants = Vec::with_capacity(launches);
    for round in 0..launches {
        let points: Vec<(u64, f64)> = fitted.iter().map(|r| (r.size, r.op_rounds.values[round])).collect();
        match fit_collective(Op::AllReduce, 2, &points, fit.fit_max_bytes).filter(LinkFit::is_physical) {
            Some(f) => constants.push(f.link()),
            None => return Err(format!("round {}'s 2-rank fit is not physical (a negative α or no bandwidth)", round + 1)),
        }
    }
    Ok(RoundFits { reference: fitted[0].op_rounds.launched(), constants })
}

/// The point's prediction error round by round (each round's own fit against its own launch),
/// where its run and the fit's ran in the same rounds.
fn round_errors(fits: &RoundFits, r: &CollRow) -> Option<Vec<f64>> {
    let rounds = crate::manifest::rounds::in_rounds(fits.reference, r.op_rounds.launched())?;
    let error = |(&(_, measured), link): (&(f64, f64), &Constants)| {
        (collective_time(*link, Op::AllReduce, r.size as f64, r.world) - measured) / measured
    };
    Some(rounds.iter().zip(&fits.constants).map(error).collect())
}

fn link_finding(inp: &Inputs, link: &Link, fit: &LinkFit, run: &str) -> Finding {
    let mut f = claim(&format!("alpha-beta-{link}"), link.name());
    if let Some(o) = inp.oversubscribed(run) {
        return f.inconclusive(Inconclusive::Oversubscribed, format!("oversubscribed: the 2-rank fit's run {run} was {o}"));
    }
    f.number("α (2-rank all-reduce fit)", fit.alpha_per_step_s, "s", &[run]);
    if let Some(b) = fit.beta_bps {
        f.number("β (2-rank all-reduce fit)", b, "B/s", &[run]);
    }
    let by_round = round_fits(inp, link, fit, run);
    f.notes.push(rounds_note(&by_round));
    let rows =
        inp.facts.collectives.iter().filter(|r| r.op == Op::AllReduce && r.link == *link && (r.world != 2 || r.size > fit.fit_max_bytes));
    let mut regions: BTreeMap<Region, Tally> = BTreeMap::new();
    for r in rows {
        let over = inp.oversubscribed(&r.run);
        let t = regions.entry((r.world, r.size > fit.fit_max_bytes, over.is_some())).or_default();
        check(t, fit, by_round.as_ref().ok(), r);
        t.oversubscribed = t.oversubscribed.or(over);
    }
    if regions.is_empty() {
        return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: over {link} only the fitted 2-rank sizes were measured"));
    }
    let mut outcomes = Outcomes::default();
    // A world launched both ways (on cores of its own and oversubscribed) names its two apart.
    let both_ways =
        |world: u32, heldout: bool| regions.contains_key(&(world, heldout, true)) && regions.contains_key(&(world, heldout, false));
    for (&(world, heldout, over), t) in &regions {
        let sizes = if heldout { "held-out sizes above" } else { "sizes up to" };
        let runs_of = if over && both_ways(world, heldout) { ", oversubscribed runs" } else { "" };
        let what = format!("world {world}{runs_of}, {sizes} {}", format_bytes(fit.fit_max_bytes as f64));
        let runs: Vec<&str> = t.runs.iter().map(String::as_str).collect();
        f.number(&format!("largest prediction error, {what}"), t.worst, "fraction", &runs);
        f.notes.push(region_note(&what, t, by_round.is_ok()));
        outcomes.add(world, what, t.outcome());
    }
    decide(f, &outcomes)
}

/// How the rounds were used, in words: each round's constants, or why the points were checked
/// on the medians over all launches.
fn rounds_note(by_round: &Result<RoundFits, String>) -> String {
    match by_round {
        Ok(fits) => {
            let each = |value: fn(&Constants) -> String| fits.constants.iter().map(value).collect::<Vec<_>>().join(", ");
            format!(
                "checked round by round: each of {} rounds fitted on its own launch of the 2-rank run, α {}, β {}",
                fits.constants.len(),
                each(|c| format_seconds(c.alpha_s)),
                each(|c| format_gbps(c.beta_bps))
            )
        }
        Err(why) => format!("checked on the medians over all launches, not round by round: {why}"),
    }
}

/// One region's line: its outcome, how many sizes held, its largest error (and that point's
/// errors round by round, where checked so).
fn region_note(what: &str, t: &Tally, rounds_used: bool) -> String {
    let verdict = match t.outcome() {
        RegionOutcome::NotATest(o) => format!("{o}, not a test"),
        RegionOutcome::Holds => "holds".into(),
        RegionOutcome::Fails => "fails".into(),
        RegionOutcome::AtEdge => "at the tolerance's edge".into(),
    };
    let edge = if t.at_edge > 0 { format!(", {} with rounds on both sides of it", t.at_edge) } else { String::new() };
    // Where the link was checked by round, a run launched outside the 2-rank run's rounds (cached
    // from another `parlab run`) was checked on its medians: say how many were.
    let paired = if rounds_used { format!(", {} of {} by round", t.by_round, t.points) } else { String::new() };
    let rounds = match &t.worst_rounds {
        Some(errors) => format!(" (by round {})", errors.iter().map(|e| percent(*e, true)).collect::<Vec<_>>().join(", ")),
        None => String::new(),
    };
    format!(
        "{what}: {verdict} ({} of {} sizes within {}{edge}{paired}; largest error {} at {}{rounds})",
        t.points - t.failed - t.at_edge,
        t.points,
        tolerance(TOLERANCE),
        percent(t.worst, true),
        format_bytes(t.worst_size as f64)
    )
}

/// The regions by outcome, as the verdict names them.
#[derive(Default)]
struct Outcomes {
    holds: Vec<String>,
    fails: Vec<String>,
    at_edge: Vec<String>,
    untested: Vec<u32>,
}

impl Outcomes {
    fn add(&mut self, world: u32, what: String, outcome: RegionOutcome) {
        match outcome {
            RegionOutcome::NotATest(_) if self.untested.contains(&world) => {}
            RegionOutcome::NotATest(_) => self.untested.push(world),
            RegionOutcome::Holds => self.holds.push(what),
            RegionOutcome::Fails => self.fails.push(what),
            RegionOutcome::AtEdge => self.at_edge.push(what),
        }
    }
}

/// HOLDS where every region run on cores of its own holds, FAILS where one fails, INCONCLUSIVE
/// (noise) where none fails but one's rounds disagree; the oversubscribed regions are named,
/// never counted.
fn decide(f: Finding, o: &Outcomes) -> Finding {
    let aside = if o.untested.is_empty() { String::new() } else { format!("; {} oversubscribed, not counted", worlds(&o.untested)) };
    let edge_at = format!("at the tolerance's edge at {} (rounds on both sides of {})", o.at_edge.join("; "), tolerance(TOLERANCE));
    let and_edge = if o.at_edge.is_empty() { String::new() } else { format!("; {edge_at}") };
    let fails_at = format!("fails at {}{and_edge}", o.fails.join("; "));
    match (o.holds.is_empty(), o.fails.is_empty(), o.at_edge.is_empty()) {
        (true, true, true) => f.inconclusive(
            Inconclusive::Oversubscribed,
            format!("oversubscribed: every world beyond the fit ({}) ran with more ranks × threads than cores", worlds(&o.untested)),
        ),
        (false, true, true) => f.decide(true, format!("the fit holds at {}{aside}", o.holds.join("; "))),
        (true, true, false) => f.inconclusive(Inconclusive::Noise, format!("noise: the fit is {edge_at}{aside}")),
        (false, true, false) => {
            f.inconclusive(Inconclusive::Noise, format!("noise: the fit holds at {}, and is {edge_at}{aside}", o.holds.join("; ")))
        }
        (true, false, _) => f.decide(false, format!("the fit {fails_at}{aside}")),
        (false, false, _) => f.decide(false, format!("the fit holds at {}, and {fails_at}{aside}", o.holds.join("; "))),
    }
}

/// Checks one point outside the fit: by round where `by_round` pairs its run with the fit's,
/// else on its medians.
fn check(t: &mut Tally, fit: &LinkFit, by_round: Option<&RoundFits>, r: &CollRow) {
    let predicted = collective_time(fit.link(), Op::AllReduce, r.size as f64, r.world);
    // The op's own time (skew-free, what the fit used) where measured, else the slowest rank's.
    let measured = r.op_time.unwrap_or(r.time);
    let error = (predicted - measured.median) / measured.median;
    let rounds = by_round.and_then(|fits| round_errors(fits, r));
    // Checked by round, a point's error is its round's of largest magnitude.
    let (point, error) = match &rounds {
        Some(errors) => (on_rounds(errors), errors.iter().copied().fold(0.0_f64, |worst, e| if e.abs() > worst.abs() { e } else { worst })),
        None => (on_medians(error, predicted, r.op_time), error),
    };
    t.points += 1;
    t.failed += usize::from(point == Point::Fails);
    t.at_edge += usize::from(point == Point::AtEdge);
    t.by_round += usize::from(rounds.is_some());
    if error.abs() > t.worst.abs() || t.points == 1 {
        t.worst = error;
        t.worst_size = r.size;
        t.worst_rounds = rounds;
    }
    if !t.runs.contains(&r.run) {
        t.runs.push(r.run.clone());
    }
}

/// A point checked round by round: every round within the tolerance holds, none fails, else
/// the tolerance's edge lies within the noise between launches.
fn on_rounds(errors: &[f64]) -> Point {
    let within = errors.iter().filter(|e| e.abs() <= TOLERANCE).count();
    match within {
        n if n == errors.len() => Point::Holds,
        0 => Point::Fails,
        _ => Point::AtEdge,
    }
}

/// A point checked on its medians over all launches.
fn on_medians(error: f64, predicted: f64, loops: Option<Stats>) -> Point {
    // The op's time is the median of separate back-to-back loops, whose spread is the
    // uncertainty of the estimate; single calls' min..max (the fallback) spans their slow tail.
    let in_loops_spread = loops.is_some_and(|t| predicted >= t.min && predicted <= t.max);
    if error.abs() <= TOLERANCE || in_loops_spread {
        Point::Holds
    } else {
        Point::Fails
    }
}
