//! α–β validity: the all-reduce constants fitted on 2 ranks predict other world sizes and
//! held-out (larger) sizes within the declared tolerance; where they do and where they fail.

use super::{worlds, Finding, Inconclusive, Inputs, Oversubscribed, TOLERANCE};
use crate::costmodel::link::{collective_time, LinkFit};
use crate::report::facts::CollRow;
use crate::report::fmt::{percent, tolerance};
use crate::spec::link::Link;
use crate::spec::schema::Op;
use crate::units::format_bytes;
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
        &["collectives.rows.op_time_s (all-reduce; time_s where op_time_s is absent)", "collectives.fits.alpha_per_step_s", "collectives.fits.beta_Bps"],
        &format!("ring model 2(p-1)α + 2(p-1)/p·S/β from the 2-rank fit; a point holds when |predicted - measured| / measured <= {TOLERANCE} or the prediction lies within the min..max of the op's own time over its separate back-to-back loops (not of single calls, whose slow tail would excuse any over-prediction); HOLDS when every point outside the fit holds, at worlds whose ranks × threads fit the cores (an oversubscribed world's points are stated, not counted: its ranks wait for a core, which the ring model does not count)"),
    )
}

/// A region of the check: a world size, whether the sizes are beyond the fit, and whether its
/// runs were oversubscribed (kept apart from the runs of that world that were not).
type Region = (u32, bool, bool);

#[derive(Default)]
struct Tally {
    points: usize,
    failed: usize,
    worst: f64,
    worst_size: u64,
    runs: Vec<String>,
    /// A run of the region had more ranks × threads than cores: not a test of the model.
    oversubscribed: Option<Oversubscribed>,
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
    let rows =
        inp.facts.collectives.iter().filter(|r| r.op == Op::AllReduce && r.link == *link && (r.world != 2 || r.size > fit.fit_max_bytes));
    let mut regions: BTreeMap<Region, Tally> = BTreeMap::new();
    for r in rows {
        let over = inp.oversubscribed(&r.run);
        let t = regions.entry((r.world, r.size > fit.fit_max_bytes, over.is_some())).or_default();
        check(t, fit, r);
        t.oversubscribed = t.oversubscribed.or(over);
    }
    if regions.is_empty() {
        return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: over {link} only the fitted 2-rank sizes were measured"));
    }
    let (mut holds, mut fails, mut untested) = (Vec::new(), Vec::new(), Vec::new());
    // A world launched both ways (on cores of its own and oversubscribed) names its two apart.
    let both_ways =
        |world: u32, heldout: bool| regions.contains_key(&(world, heldout, true)) && regions.contains_key(&(world, heldout, false));
    for (&(world, heldout, over), t) in &regions {
        let sizes = if heldout { "held-out sizes above" } else { "sizes up to" };
        let runs_of = if over && both_ways(world, heldout) { ", oversubscribed runs" } else { "" };
        let what = format!("world {world}{runs_of}, {sizes} {}", format_bytes(fit.fit_max_bytes as f64));
        let runs: Vec<&str> = t.runs.iter().map(String::as_str).collect();
        f.number(&format!("largest prediction error, {what}"), t.worst, "fraction", &runs);
        let verdict = match t.oversubscribed {
            Some(o) => format!("{o}, not a test"),
            None if t.failed == 0 => "holds".into(),
            None => "fails".into(),
        };
        f.notes.push(format!(
            "{what}: {verdict} ({} of {} sizes within {}; largest error {} at {})",
            t.points - t.failed,
            t.points,
            tolerance(TOLERANCE),
            percent(t.worst, true),
            format_bytes(t.worst_size as f64)
        ));
        match (t.oversubscribed, t.failed) {
            (Some(_), _) if untested.contains(&world) => {}
            (Some(_), _) => untested.push(world),
            (None, 0) => holds.push(what),
            (None, _) => fails.push(what),
        }
    }
    decide(f, &holds, &fails, &untested)
}

/// HOLDS where every region run on cores of its own holds, FAILS where one fails; the
/// oversubscribed regions are named, never counted.
fn decide(f: Finding, holds: &[String], fails: &[String], untested: &[u32]) -> Finding {
    let aside = if untested.is_empty() { String::new() } else { format!("; {} oversubscribed, not counted", worlds(untested)) };
    let fails_at = format!("fails at {}", fails.join("; "));
    match (holds.is_empty(), fails.is_empty()) {
        (true, true) => f.inconclusive(
            Inconclusive::Oversubscribed,
            format!("oversubscribed: every world beyond the fit ({}) ran with more ranks × threads than cores", worlds(untested)),
        ),
        (false, true) => f.decide(true, format!("the fit holds at {}{aside}", holds.join("; "))),
        (true, false) => f.decide(false, format!("the fit {fails_at}{aside}")),
        (false, false) => f.decide(false, format!("the fit holds at {}, and {fails_at}{aside}", holds.join("; "))),
    }
}

fn check(t: &mut Tally, fit: &LinkFit, r: &CollRow) {
    let predicted = collective_time(fit.link(), Op::AllReduce, r.size as f64, r.world);
    // The op's own time (skew-free, what the fit used) where measured, else the slowest rank's.
    let measured = r.op_time.unwrap_or(r.time);
    let error = (predicted - measured.median) / measured.median;
    // The op's time is the median of separate back-to-back loops, whose spread is the
    // uncertainty of the estimate; single calls' min..max (the fallback) spans their slow tail.
    let in_loops_spread = r.op_time.is_some() && predicted >= measured.min && predicted <= measured.max;
    let within = error.abs() <= TOLERANCE || in_loops_spread;
    t.points += 1;
    t.failed += usize::from(!within);
    if error.abs() > t.worst.abs() || t.points == 1 {
        t.worst = error;
        t.worst_size = r.size;
    }
    if !t.runs.contains(&r.run) {
        t.runs.push(r.run.clone());
    }
}
