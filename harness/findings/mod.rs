//! Findings: the chapters' hypotheses tested on tonight's manifests, each with its claim,
//! its test (runs, figures, rule), the numbers it rests on with their runs, and a verdict.
//!
//! Nothing here is typed in: every number is computed from the manifests or from the cost
//! model; a finding whose runs are missing, or whose measurements cannot separate the
//! predictions, is INCONCLUSIVE and says which. One file per finding.

pub mod advice;
pub mod alpha_beta;
pub mod break_even;
pub mod claims;
pub mod context;
pub mod exactness;
pub mod expert;
pub mod kv_cap;
pub mod membw;
pub mod overlap;
pub mod pipeline;
pub mod precision;
pub mod predicted;
pub mod regimes;
pub mod render;
pub mod rounds;

use crate::audit::AnswerGroup;
use crate::costmodel::link::LinkFit;
pub use crate::manifest::caveat::Oversubscribed;
use crate::manifest::Manifest;
use crate::report::facts::{DecodeRow, Facts, Stats};
use crate::spec::link::Link;
use crate::spec::schema::Op;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// The declared tolerance of the built-in findings' "within" rules (relative, ±25 %).
pub const TOLERANCE: f64 = 0.25;

/// The findings.json format's version tag.
pub const SCHEMA: &str = "parlab.findings/1";

/// A finding's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The prediction that could have failed did not.
    Holds,
    /// The measurements contradict the claim.
    Fails,
    /// Runs are missing, or noise cannot separate the outcomes.
    Inconclusive,
}

crate::named!(Verdict { Holds => "HOLDS", Fails => "FAILS", Inconclusive => "INCONCLUSIVE" });

/// Why a finding is inconclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Inconclusive {
    /// The runs the test needs are not in the manifests.
    MissingRuns,
    /// The measured ranges overlap the boundary between the outcomes.
    Noise,
    /// Every run that could decide it had more ranks × threads than cores: its times include
    /// ranks waiting for a core, which the claim does not describe.
    Oversubscribed,
    /// A declared claim that cannot be judged as written: its spec is invalid now or names
    /// another experiment, its id is taken, or its figure gives no ratio.
    InvalidClaim,
    /// The runs land where the claim and its alternative predict the same outcome (a link that
    /// pays for every model, a step that did not fall while memory bandwidth scaled): they
    /// cannot tell the two apart.
    NotDecisive,
}

/// A number a finding rests on, in SI units, with the runs it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Number {
    /// What it is.
    pub name: String,
    /// Its value.
    pub value: f64,
    /// Its unit: `s`, `B`, `B/s`, `tokens/s`, `ratio`, `fraction`, `count` or `logit`.
    pub unit: String,
    /// Short run identities.
    pub runs: Vec<String>,
}

/// What a finding tested: which runs, which figures, which rule.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Test {
    /// Short run identities the test read.
    pub runs: Vec<String>,
    /// Figures read (summary keys).
    pub figures: Vec<String>,
    /// The rule that decides the verdict.
    pub rule: String,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable identifier.
    pub id: String,
    /// The claim in one sentence.
    pub claim: String,
    /// The test.
    pub test: Test,
    /// The numbers it rests on.
    pub numbers: Vec<Number>,
    /// The verdict.
    pub verdict: Verdict,
    /// Why inconclusive, when it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<Inconclusive>,
    /// The verdict's reason in one or two sentences.
    pub reason: String,
    /// Where it holds and where it fails, layout by layout or size by size.
    pub notes: Vec<String>,
}

impl Finding {
    /// A finding with its claim and rule, not yet decided.
    pub fn new(id: &str, claim: &str, figures: &[&str], rule: &str) -> Self {
        Finding {
            id: id.into(),
            claim: claim.into(),
            test: Test { runs: Vec::new(), figures: figures.iter().map(|f| f.to_string()).collect(), rule: rule.into() },
            numbers: Vec::new(),
            verdict: Verdict::Inconclusive,
            inconclusive: Some(Inconclusive::MissingRuns),
            reason: String::new(),
            notes: Vec::new(),
        }
    }

    /// Adds a number and its runs to the test's runs.
    pub fn number(&mut self, name: &str, value: f64, unit: &str, runs: &[&str]) {
        for r in runs {
            if !self.test.runs.iter().any(|x| x == r) {
                self.test.runs.push(r.to_string());
            }
        }
        self.numbers.push(Number { name: name.into(), value, unit: unit.into(), runs: runs.iter().map(|r| r.to_string()).collect() });
    }

    /// Decides the verdict (HOLDS or FAILS) with its reason.
    pub fn decide(mut self, holds: bool, reason: String) -> Self {
        self.verdict = if holds { Verdict::Holds } else { Verdict::Fails };
        self.inconclusive = None;
        self.reason = reason;
        self
    }

    /// Leaves the verdict INCONCLUSIVE for `why`, with its reason.
    pub fn inconclusive(mut self, why: Inconclusive, reason: String) -> Self {
        self.verdict = Verdict::Inconclusive;
        self.inconclusive = Some(why);
        self.reason = reason;
        self
    }
}

/// What every finding reads: the manifests, their typed rows, the audit and the 2-rank fits.
pub struct Inputs<'a> {
    /// Every manifest.
    pub list: &'a [Manifest],
    /// Typed rows of the ok manifests.
    pub facts: &'a Facts,
    /// Answers graded by layout.
    pub audit: Vec<AnswerGroup>,
    /// The 2-rank fit of each (op, link), with its run.
    pub fits: BTreeMap<(Op, Link), (LinkFit, crate::identity::RunId)>,
    /// The oversubscribed runs (12 hex), with their shape.
    oversubscribed: BTreeMap<String, Oversubscribed>,
}

impl<'a> Inputs<'a> {
    /// Reads the audit and the fits of `list`.
    pub fn new(list: &'a [Manifest], facts: &'a Facts) -> Self {
        Inputs {
            list,
            facts,
            audit: crate::audit::audit(list),
            fits: measured_two_rank_fits(list),
            oversubscribed: list.iter().filter_map(|m| Some((m.run_id.short().to_string(), oversubscription(m)?))).collect(),
        }
    }

    /// The run's oversubscription (12 hex), if its launch had more ranks × threads than cores.
    /// Its times include ranks waiting for a core: a timing finding states it and does not let
    /// it decide the verdict.
    pub fn oversubscribed(&self, run: &str) -> Option<Oversubscribed> {
        self.oversubscribed.get(run).copied()
    }

    /// The links with a 2-rank all-reduce fit, and the fit with its run (12 hex).
    pub fn allreduce_fits(&self) -> Vec<(Link, &LinkFit, String)> {
        self.fits
            .iter()
            .filter(|((op, _), _)| *op == Op::AllReduce)
            .map(|((_, link), (fit, run))| (link.clone(), fit, run.short().to_string()))
            .collect()
    }
}

/// The oversubscription a manifest's caveats record, if any.
pub(crate) fn oversubscription(m: &Manifest) -> Option<Oversubscribed> {
    crate::manifest::caveat::oversubscribed(&m.caveats)
}

/// The end of a verdict's reason naming the `n` pairs it left out as oversubscribed (empty for none).
pub fn left_out(n: usize) -> String {
    if n == 0 {
        String::new()
    } else {
        format!("; {n} more oversubscribed, not counted")
    }
}

/// INCONCLUSIVE (oversubscribed): each of the `n` pairs (`what`, plural) had more ranks × threads
/// than cores.
pub fn all_left_out(f: Finding, n: usize, what: &str) -> Finding {
    f.inconclusive(Inconclusive::Oversubscribed, format!("oversubscribed: all {n} {what} had more ranks × threads than cores"))
}

/// `n` things in words for "HOLDS in …": `the one split`, `all 3 splits`.
pub fn every(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("the one {noun}")
    } else {
        format!("all {n} {noun}s")
    }
}

/// World sizes in words: `world 4`, `worlds 3, 4, 6`.
pub fn worlds(list: &[u32]) -> String {
    let sizes = list.iter().map(u32::to_string).collect::<Vec<_>>().join(", ");
    if list.len() == 1 {
        format!("world {sizes}")
    } else {
        format!("worlds {sizes}")
    }
}

/// Every finding: the built-in ones, then the specs' declared claims.
pub fn compute(list: &[Manifest], facts: &Facts) -> Vec<Finding> {
    let inputs = Inputs::new(list, facts);
    let mut out = built_in(&inputs);
    let taken: Vec<&str> = out.iter().map(|f| f.id.as_str()).collect();
    let declared = claims::findings(&inputs, &taken);
    out.extend(declared);
    out
}

/// Every built-in finding, in a fixed order.
pub fn built_in(inputs: &Inputs) -> Vec<Finding> {
    let mut out = exactness::findings(inputs);
    out.push(membw::finding(inputs));
    out.extend(alpha_beta::findings(inputs));
    out.extend(regimes::findings(inputs));
    out.push(pipeline::finding(inputs));
    out.push(overlap::finding(inputs));
    out.push(expert::finding(inputs));
    out.push(context::finding(inputs));
    out.push(kv_cap::finding(inputs));
    out.push(precision::finding(inputs));
    out.extend(break_even::findings(inputs));
    out.push(predicted::finding(inputs));
    out.extend(advice::findings(inputs));
    out
}

/// The 2-rank fits of the collectives parlab measured: an imported run (another tool's, on
/// another machine) never decides a finding.
fn measured_two_rank_fits(list: &[Manifest]) -> BTreeMap<(Op, Link), (LinkFit, crate::identity::RunId)> {
    let measured: Vec<Manifest> = list
        .iter()
        .filter(|m| m.provenance.is_measured() && m.kind == crate::spec::Kind::Collectives && m.layout.world == 2)
        .cloned()
        .collect();
    crate::costmodel::predict::two_rank_fits(&measured)
}

/// The stats of one row per world size (the first row of each world, in manifest order).
pub fn by_world<T>(rows: impl Iterator<Item = T>, world: impl Fn(&T) -> u32) -> BTreeMap<u32, T> {
    let mut out = BTreeMap::new();
    for r in rows {
        out.entry(world(&r)).or_insert(r);
    }
    out
}

/// The rows of one experiment: figures are only comparable across world sizes of the same
/// model, prompt and generation, in one dtype on one device. The series (experiment, model,
/// dtype, device, prompt and tokens generated) with a world-1 row and the most world sizes is taken (ties: the first by name), and of each world only the rows at its most threads per
/// rank: the machine used whole (a one-thread unsplit run launched as the cost model's peer of
/// one-thread ranks is not T_1). Replayed CUDA graphs are left out: the splits are eager, and
/// their unsplit baseline must be too.
pub fn one_experiment<'a>(rows: impl Iterator<Item = &'a DecodeRow>) -> Vec<&'a DecodeRow> {
    one_experiment_on_cores(rows, |_| false)
}

/// [`one_experiment`], each world's rows taken from those not `oversubscribed` where it has
/// any (a world's two-thread run on 2 cores oversubscribed, its one-thread run is the test).
pub fn one_experiment_on_cores<'a>(
    rows: impl Iterator<Item = &'a DecodeRow>,
    oversubscribed: impl Fn(&DecodeRow) -> bool,
) -> Vec<&'a DecodeRow> {
    // One series is one model decoded one way: an experiment crossing models, dtypes or
    // devices holds several.
    type Series<'d> = (&'d str, &'d str, &'static str, &'static str, &'d Option<(crate::spec::schema::Prompt, u32)>);
    let mut by_experiment: BTreeMap<Series, Vec<&DecodeRow>> = BTreeMap::new();
    for d in rows.filter(|d| d.step_mode == crate::spec::schema::StepMode::Eager) {
        by_experiment.entry((d.experiment.as_str(), d.model.as_str(), d.dtype_name(), d.device.name(), &d.generation)).or_default().push(d);
    }
    let worlds = |v: &Vec<&DecodeRow>| (v.iter().any(|d| d.world == 1), v.iter().map(|d| d.world).collect::<BTreeSet<_>>().len());
    let mut best: Option<Vec<&DecodeRow>> = None;
    for v in by_experiment.into_values() {
        if best.as_ref().is_none_or(|b| worlds(&v) > worlds(b)) {
            best = Some(v);
        }
    }
    let rows = best.unwrap_or_default();
    // Per world: the most threads per rank among its runs on cores of their own, else the most.
    let mut most_threads: BTreeMap<u32, (bool, u32)> = BTreeMap::new();
    for d in &rows {
        let t = most_threads.entry(d.world).or_default();
        *t = (*t).max((!oversubscribed(d), d.threads));
    }
    rows.into_iter().filter(|d| most_threads.get(&d.world).map(|t| t.1) == Some(d.threads)).collect()
}

/// Where `x` stands against the boundary `b`: above its whole range, below it, or straddling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Every sample is above the boundary.
    Above,
    /// Every sample is below it.
    Below,
    /// The range [min, max] contains it.
    Straddles,
    /// The range holds fewer than [`MIN_RANGE_VALUES`] values: too few to show a spread.
    TooFew,
}

/// The fewest values a measured range decides a side with: one or two values show no spread,
/// so a range of them lies wholly on a side by chance alone.
pub const MIN_RANGE_VALUES: u64 = 3;

/// The side of `boundary` a measured range lies on (none where it holds fewer than
/// [`MIN_RANGE_VALUES`] values).
pub fn side(s: &Stats, boundary: f64) -> Side {
    if s.n < MIN_RANGE_VALUES {
        Side::TooFew
    } else if s.min > boundary {
        Side::Above
    } else if s.max < boundary {
        Side::Below
    } else {
        Side::Straddles
    }
}

#[cfg(test)]
mod tests {
    use super::{side, Side, Stats};

    #[test]
    fn a_range_of_one_or_two_values_decides_no_side() {
        let range = |values: &[f64]| Stats::of(values).unwrap();
        assert_eq!(side(&range(&[2.0, 3.0, 4.0]), 1.0), Side::Above);
        assert_eq!(side(&range(&[2.0, 3.0, 4.0]), 5.0), Side::Below);
        assert_eq!(side(&range(&[2.0, 3.0, 4.0]), 3.0), Side::Straddles);
        assert_eq!(side(&range(&[2.0, 3.0]), 1.0), Side::TooFew, "two values show no spread");
        assert_eq!(side(&range(&[2.0]), 1.0), Side::TooFew);
    }
}
