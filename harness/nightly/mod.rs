//! Night-to-night comparison: the same run identities measured again, checked for changed
//! answers, new failures, missing runs and a changed machine, and every comparable figure
//! given a verdict from its per-launch medians (the launch is the unit of replication):
//! Yuen's trimmed (Welch) t on their logarithms with a power guard on the launch counts, Benjamini–Hochberg
//! across the night, a minimum practical effect, and the figure's own night-to-night noise
//! band learnt from the history (without a history, a floor from the two nights' launch-to-launch
//! spread).

use crate::manifest::{Manifest, Skipped, Status};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub mod answer;
pub mod band;
pub mod figures;
pub mod history;
pub mod outputs;
pub mod samples;
pub mod stats;

pub use answer::{AnswerMove, AnswerOutcome};
use figures::FigureKind;
use history::{Noise, NoiseBook};
pub use outputs::render_text;
use samples::FigureSamples;

/// Which direction of a figure is an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Times: lower is better.
    Lower,
    /// Rates and bandwidths: higher is better.
    Higher,
}

/// One comparable figure of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// What it measures (not written: `name` says it to people).
    #[serde(skip)]
    pub kind: FigureKind,
    /// What it is (`all-reduce 4096 B median`, `decode step median`).
    pub name: String,
    /// Its value (seconds, bytes/s or tokens/s).
    pub value: f64,
    /// Which way is better.
    pub better: Better,
}

/// A finding of the comparison: each one fails the night.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "finding")]
pub enum Finding {
    /// Generated tokens differ from the baseline's for the same run identity.
    AnswerChanged {
        /// Short run identity and experiment.
        run: String,
        /// Where the tokens left the baseline's, and the margin there.
        moved: AnswerMove,
    },
    /// A run whose baseline recorded a whole answer ended ok tonight without one, or with one
    /// cut short.
    NoAnswer {
        /// Short run identity and experiment.
        run: String,
        /// What tonight's run holds instead (`it recorded no answer`, a list's length).
        why: String,
    },
    /// A run that was ok in the baseline failed, or was not run, now.
    NowFailing {
        /// Short run identity and experiment.
        run: String,
        /// How it ended tonight: failed or not run.
        status: Status,
        /// Why (its manifest's reason; null where it records none).
        reason: Option<String>,
    },
    /// A file of the baseline folder that could not be read as a manifest: the run it holds,
    /// if any, was not compared.
    BaselineUnread {
        /// The file's name in the baseline folder.
        file: String,
        /// Why it was skipped.
        reason: String,
    },
    /// A run that was ok in the baseline has no manifest tonight that could be read.
    Missing {
        /// Short run identity and experiment (as in the baseline).
        run: String,
        /// What tonight holds in its place.
        #[serde(flatten)]
        absence: Absence,
    },
    /// Runs measured on a machine whose fingerprint differs from the baseline's: their
    /// timings were not compared (answers were).
    MachineDiffers {
        /// How many compared runs are affected.
        runs: usize,
        /// Each differing fingerprint key, `key: before -> after`.
        differences: Vec<String>,
    },
    /// A figure's verdict is REGRESSED.
    Regressed {
        /// Short run identity and experiment.
        run: String,
        /// The figure.
        figure: String,
        /// Baseline value (median).
        before: f64,
        /// Current value (median).
        after: f64,
        /// How much worse, as a fraction (0.3 = 30 % worse).
        worse_by: f64,
        /// The test's p-value.
        p: f64,
    },
}

/// The settings a night is judged by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Policy {
    /// The smallest relative change of medians that counts (0.10 = 10 %).
    pub min_effect: f64,
    /// The false-discovery rate controlled across the night's tested figures.
    pub fdr: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy { min_effect: 0.10, fdr: 0.05 }
    }
}

/// The launches a nightly uses (`ci/nightly.sh`: `parlab run --launches 7`): with 7 a night the
/// trimmed t keeps 5 launches a side after trimming one from each end, up to 8 degrees of freedom.
pub const NIGHTLY_LAUNCHES: u32 = 7;

/// A figure's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verdict {
    /// Significantly and practically worse, beyond the figure's noise.
    Regressed,
    /// Significantly and practically better, beyond the figure's noise.
    Improved,
    /// Not significant, smaller than the minimum effect, or within the noise band.
    NoChange,
    /// Too few launches to test, or too little history to tell a change from noise.
    InsufficientEvidence,
}

crate::named!(Verdict { Regressed => "REGRESSED", Improved => "IMPROVED", NoChange => "NO_CHANGE", InsufficientEvidence => "INSUFFICIENT_EVIDENCE" });

impl Verdict {
    /// Whether the figure changed: REGRESSED or IMPROVED.
    pub fn is_change(self) -> bool {
        matches!(self, Verdict::Regressed | Verdict::Improved)
    }
}

/// How a figure's verdict was reached.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Method {
    /// Tonight has no per-launch value of the figure (no launch measured it).
    NoValueTonight {
        /// Baseline launches.
        before: usize,
    },
    /// A night has fewer launches (or fewer above 0) than the t-test needs.
    TooFewLaunches {
        /// Baseline launches.
        before: usize,
        /// Tonight's launches.
        after: usize,
        /// Baseline launches above 0 (the test compares logarithms).
        usable_before: usize,
        /// Tonight's launches above 0.
        usable_after: usize,
    },
    /// Yuen's trimmed t on the logarithms of the per-launch medians, Benjamini–Hochberg across
    /// the night's tested figures.
    Tested {
        /// The test.
        test: stats::TTest,
        /// Its Benjamini–Hochberg adjusted p-value.
        q: f64,
        /// The settings it was judged by.
        policy: Policy,
        /// The bandwidth-normalised change (how much worse) that explained a significant change
        /// away, turning it into NO_CHANGE.
        explained_by_bandwidth: Option<f64>,
    },
}

impl Method {
    /// The test's two-sided p, when tested.
    pub fn p(&self) -> Option<f64> {
        match self {
            Method::Tested { test, .. } => Some(test.p),
            _ => None,
        }
    }

    /// The Benjamini–Hochberg adjusted p, when tested.
    pub fn q(&self) -> Option<f64> {
        match self {
            Method::Tested { q, .. } => Some(*q),
            _ => None,
        }
    }
}

/// One figure of one run compared across the two nights (serialised with `p`, `q` and the
/// method in words by `outputs`).
#[derive(Debug, Clone, PartialEq)]
pub struct FigureVerdict {
    /// Short run identity and experiment.
    pub run: String,
    /// Experiment name.
    pub experiment: String,
    /// The figure.
    pub figure: String,
    /// The verdict.
    pub verdict: Verdict,
    /// Baseline: the median of its per-launch medians.
    pub before: f64,
    /// Tonight: the median of its per-launch medians.
    pub after: f64,
    /// Relative change, after / before - 1.
    pub effect: f64,
    /// How much worse, oriented by the figure's better direction (negative: better).
    pub worse_by: f64,
    /// Baseline launches.
    pub n_before: usize,
    /// Tonight's launches.
    pub n_after: usize,
    /// The figure's night-to-night noise from the history.
    pub noise: Noise,
    /// How the verdict was reached.
    pub method: Method,
    /// Tonight's change after scaling by the nights' memory-bandwidth ratio (decode figures
    /// when both nights measured membw).
    pub bandwidth_normalised_worse_by: Option<f64>,
}

/// What tonight holds in place of a baseline run it has no manifest of.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "absence")]
pub enum Absence {
    /// No file of its identity and no likely successor.
    NoManifest,
    /// Tonight's run of the same experiment at the same position in its expansion, under an
    /// identity the baseline lacks (its spec or parlab's identity rules changed).
    Renamed {
        /// Short run identity and experiment of tonight's run.
        now_as: String,
    },
    /// A file of its identity that was skipped: unreadable, corrupt or implausible.
    Unread {
        /// Why it was skipped.
        reason: String,
    },
}

/// What became of a baseline run tonight (serialised `ok`, `now_failing`, `missing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// It ran and is ok.
    Ok,
    /// It ran and did not succeed.
    NowFailing,
    /// Tonight has no manifest of it.
    Missing,
}

crate::named!(RunStatus { Ok => "ok", NowFailing => "now_failing", Missing => "missing" });

/// What happened to one baseline run tonight.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunOutcome {
    /// Short run identity and experiment.
    pub run: String,
    /// Experiment name.
    pub experiment: String,
    /// Whether it ran and succeeded.
    pub status: RunStatus,
    /// Whether its answer is the baseline's.
    pub answer: AnswerOutcome,
    /// Where its tokens left the baseline's, when they did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved: Option<AnswerMove>,
    /// Whether the machine fingerprints match.
    pub same_machine: bool,
}

/// A night judged against its baseline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Runs ok in the baseline that tonight holds a manifest of.
    pub compared: usize,
    /// The settings.
    pub policy: Policy,
    /// Tonight's / the baseline's memory bandwidth, where both nights measured it.
    pub bandwidth_ratio: Option<f64>,
    /// Each baseline run that was ok, and what became of it.
    pub runs: Vec<RunOutcome>,
    /// Every comparable figure's verdict.
    pub verdicts: Vec<FigureVerdict>,
    /// The hard findings.
    pub findings: Vec<Finding>,
}

/// What tonight's audit found wrong with one answer across its layouts (exit 3 either way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcrossLayouts {
    /// The answer and its experiments, as `answer 1a2b3c4d (decode-split, decode-tensor)`.
    pub answer: String,
    /// A layout changed the answer; else only its world-1 reference did not reproduce.
    pub layout_changed: bool,
}

impl AcrossLayouts {
    /// The group's finding, when `audit` calls it changed.
    pub fn of_group(g: &crate::audit::AnswerGroup) -> Option<Self> {
        let answer = format!("answer {} ({})", g.answer_id.short(), g.experiments.join(", "));
        g.changed.then(|| AcrossLayouts { answer, layout_changed: g.layout_changed() })
    }

    /// The line printed for it (text, JUnit message, summary).
    pub fn line(&self) -> String {
        if self.layout_changed {
            format!("ANSWER CHANGED across layouts: {}", self.answer)
        } else {
            format!("REFERENCE NOT REPRODUCIBLE: {}: no layout changed it, but the reference decoded again left its cached record at a robust step", self.answer)
        }
    }

    /// The JUnit failure type.
    pub fn kind(&self) -> &'static str {
        if self.layout_changed {
            "answer_changed_across_layouts"
        } else {
            "reference_not_reproducible"
        }
    }

    /// Its entry in `--json`'s `answers_changed_across_layouts`.
    pub fn json(&self) -> String {
        match self.layout_changed {
            true => self.answer.clone(),
            false => format!("{}: no layout changed it, but the reference decoded again is NOT REPRODUCIBLE", self.answer),
        }
    }
}

/// One night's manifests; each ok run's figures are its per-launch medians
/// ([`samples::of_manifest`]).
#[derive(Debug, Clone, Default)]
pub struct Night {
    /// The manifests.
    pub manifests: Vec<Manifest>,
    /// Why each skipped `.json` file of the folder that holds a run ([`holds_a_run`]) was
    /// skipped, by its name without `.json` (a run's manifest is named by its run identity).
    pub unread: BTreeMap<String, String>,
}

impl Night {
    /// A night of these manifests.
    pub fn new(manifests: Vec<Manifest>) -> Self {
        Night { manifests, unread: BTreeMap::new() }
    }

    /// Reads the manifests in `dir`.
    pub fn load(dir: &Path) -> (Night, Vec<Skipped>) {
        let (manifests, skipped) = crate::manifest::read_all(dir);
        let unread = skipped
            .iter()
            .filter(|s| holds_a_run(s))
            .filter_map(|s| Some((s.path.file_stem()?.to_string_lossy().into_owned(), s.reason.to_string())))
            .collect();
        (Night { manifests, unread }, skipped)
    }

    /// How many ok launched runs have no per-launch figures (manifests written before launches
    /// were recorded: each counts as one launch), and one of them.
    pub fn without_launches(&self) -> (usize, Option<String>) {
        // An imported run was launched by its tool, never by parlab: it has no launches to record.
        let launched = |m: &&Manifest| m.kind.launches_ranks() && m.provenance.imported().is_none();
        let old: Vec<&Manifest> =
            self.manifests.iter().filter(launched).filter(|m| m.status() == Status::Ok && m.launches().is_none()).collect();
        (old.len(), old.first().map(|m| label(m)))
    }
}

/// Whether a skipped file holds a run: named by a run identity, or read as a manifest of a
/// schema or shape this parlab refuses. Another `.json` file (notes a person left, not JSON, no
/// `schema`) holds none: it is only warned of.
fn holds_a_run(s: &Skipped) -> bool {
    use crate::manifest::ReadError;
    let stem = s.path.file_stem().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let named = crate::identity::is_run_id(&stem);
    named || !matches!(s.reason, ReadError::Unreadable(_) | ReadError::NotJson(_) | ReadError::NoSchema)
}

/// The comparable figures in a manifest's summary (medians only: ranges are noise).
pub fn figures(m: &Manifest) -> Vec<Figure> {
    m.summary()
        .into_iter()
        .flat_map(figures::comparable)
        .filter(|f| f.median.is_finite() && f.median > 0.0)
        .map(|f| Figure { kind: f.kind, name: f.name, value: f.median, better: f.better })
        .collect()
}

fn label(m: &Manifest) -> String {
    format!("{} {}", m.run_id.short(), m.experiment)
}

/// How many runs ok in `baseline` have a manifest in `current` too (the runs compared: a run
/// failed or not run in the baseline has nothing to compare tonight against).
pub fn compared(baseline: &[Manifest], current: &[Manifest]) -> usize {
    let now: BTreeSet<&str> = current.iter().map(|m| m.run_id.as_str()).collect();
    baseline.iter().filter(|m| m.status() == Status::Ok && now.contains(m.run_id.as_str())).count()
}

/// Tonight's membw aggregate over the baseline's, the median over membw runs ok in both nights
/// that read from memory (each launch shape's largest buffer; a smaller one may be a cache's).
pub fn bandwidth_ratio(baseline: &[Manifest], current: &[Manifest]) -> Option<f64> {
    let bw = |(_, b): &(&Manifest, &crate::manifest::summary::Membw)| Some(b.aggregate.median).filter(|v| *v > 0.0);
    let now: BTreeMap<&str, f64> =
        crate::costmodel::predict::membw_runs(current).iter().filter_map(|r| Some((r.0.run_id.as_str(), bw(r)?))).collect();
    let ratios: Vec<f64> =
        crate::costmodel::predict::membw_runs(baseline).iter().filter_map(|r| Some(now.get(r.0.run_id.as_str())? / bw(r)?)).collect();
    stats::median(&ratios)
}

/// A figure of one run in both nights, before its verdict.
struct Pair {
    run: String,
    run_id: String,
    /// The run computed on the host (its decode steps bound by host memory, not a GPU's).
    on_host: bool,
    experiment: String,
    figure: Figure,
    before: Vec<f64>,
    after: Vec<f64>,
    noise: Noise,
}

/// Compares `current` with `baseline` run by run and figure by figure under `policy`, each
/// figure's noise band from `noise`.
pub fn compare(baseline: &Night, current: &Night, policy: &Policy, noise: &NoiseBook) -> Comparison {
    let now: BTreeMap<&str, &Manifest> = current.manifests.iter().map(|m| (m.run_id.as_str(), m)).collect();
    let peers = answer::Peers::of(&current.manifests);
    let unread =
        baseline.unread.iter().map(|(name, reason)| Finding::BaselineUnread { file: format!("{name}.json"), reason: reason.clone() });
    let (mut findings, mut runs, mut pairs): (Vec<Finding>, _, _) = (unread.collect(), Vec::new(), Vec::new());
    let (mut differences, mut differing) = (BTreeSet::new(), 0);
    for before in baseline.manifests.iter().filter(|m| m.status() == Status::Ok) {
        let after = now.get(before.run_id.as_str()).copied();
        let outcome = run_outcome(before, after, &peers, &mut findings);
        if let Some(Finding::Missing { absence, .. }) = findings.last_mut().filter(|_| outcome.status == RunStatus::Missing) {
            *absence = absence_of(before, baseline, current);
        }
        if let (Some(after), RunStatus::Ok) = (after, outcome.status) {
            if outcome.same_machine {
                pairs.extend(figure_pairs(before, after, noise, policy));
            } else {
                differing += 1;
                differences.extend(before.machine.differences(&after.machine));
            }
        }
        runs.push(outcome);
    }
    if differing > 0 {
        findings.push(Finding::MachineDiffers { runs: differing, differences: differences.into_iter().collect() });
    }
    let ratio = bandwidth_ratio(&baseline.manifests, &current.manifests);
    let mut verdicts = judge(&pairs, policy);
    // Host decode figures are scaled by the bandwidth ratio only where a run the ratio rests on
    // (a read from memory, not a cache) moved (REGRESSED or IMPROVED) and the ratio is itself
    // beyond the minimum effect: a ratio inside its noise, or a cache's swing, would explain a
    // real change away. A GPU's step is not bound by the host's memory.
    let memory_runs: BTreeSet<String> =
        crate::costmodel::predict::membw_runs(&current.manifests).iter().map(|(m, _)| m.run_id.to_string()).collect();
    let moved = pairs
        .iter()
        .zip(&verdicts)
        .any(|(p, v)| p.figure.kind == FigureKind::Bandwidth && memory_runs.contains(&p.run_id) && v.verdict.is_change());
    if let Some(r) = ratio.filter(|r| moved && beyond_min_effect(r - 1.0, policy.min_effect)) {
        for (v, pair) in verdicts.iter_mut().zip(&pairs).filter(|(_, p)| p.figure.kind == FigureKind::Decode && p.on_host) {
            normalise_by_bandwidth(v, pair.figure.better, policy, r);
        }
    }
    findings.extend(verdicts.iter().filter(|v| v.verdict == Verdict::Regressed).map(|v| Finding::Regressed {
        run: v.run.clone(),
        figure: v.figure.clone(),
        before: v.before,
        after: v.after,
        worse_by: v.worse_by,
        p: v.method.p().unwrap_or(f64::NAN),
    }));
    Comparison {
        compared: compared(&baseline.manifests, &current.manifests),
        policy: *policy,
        bandwidth_ratio: ratio,
        runs,
        verdicts,
        findings,
    }
}

/// What `current` holds in place of `before`: its skipped file, else its likely successor.
fn absence_of(before: &Manifest, baseline: &Night, current: &Night) -> Absence {
    if let Some(reason) = current.unread.get(before.run_id.as_str()) {
        return Absence::Unread { reason: reason.clone() };
    }
    successor(before, baseline, current).map_or(Absence::NoManifest, |m| Absence::Renamed { now_as: label(m) })
}

/// Tonight's run of `before`'s experiment at its position in the expansion whose identity the
/// baseline does not hold: what `before` most likely became under a changed spec or identity rule.
fn successor<'n>(before: &Manifest, baseline: &Night, current: &'n Night) -> Option<&'n Manifest> {
    current.manifests.iter().find(|m| {
        m.experiment == before.experiment && m.plan.index == before.plan.index && !baseline.manifests.iter().any(|b| b.run_id == m.run_id)
    })
}

/// What became of a baseline run tonight; pushes its hard findings (missing, now failing,
/// changed answer).
fn run_outcome(before: &Manifest, after: Option<&Manifest>, peers: &answer::Peers, findings: &mut Vec<Finding>) -> RunOutcome {
    // Named as tonight names it, where it ran (its figures and findings are): an experiment
    // renamed keeps its identity.
    let named = after.unwrap_or(before);
    let outcome = |status, (answer, moved), same_machine| RunOutcome {
        run: label(named),
        experiment: named.experiment.clone(),
        status,
        answer,
        moved,
        same_machine,
    };
    let Some(after) = after else {
        findings.push(Finding::Missing { run: label(before), absence: Absence::NoManifest });
        return outcome(RunStatus::Missing, (AnswerOutcome::None, None), true);
    };
    let same_machine = before.machine.differences(&after.machine).is_empty();
    if after.status() != Status::Ok {
        let reason = after.reason().map(str::to_string);
        findings.push(Finding::NowFailing { run: label(after), status: after.status(), reason });
        return outcome(RunStatus::NowFailing, (AnswerOutcome::None, None), same_machine);
    }
    let graded = answer::grade(before, after, peers);
    match graded {
        (AnswerOutcome::Changed, Some(moved)) => findings.push(Finding::AnswerChanged { run: label(after), moved }),
        (AnswerOutcome::Missing, _) => findings.push(Finding::NoAnswer { run: label(after), why: answer::missing_why(after) }),
        _ => {}
    }
    outcome(RunStatus::Ok, graded, same_machine)
}

/// The figures of a run in both nights, with their per-launch values and noise.
fn figure_pairs(before: &Manifest, after: &Manifest, noise: &NoiseBook, policy: &Policy) -> Vec<Pair> {
    let (lb, la): (FigureSamples, FigureSamples) = (samples::of_manifest(before), samples::of_manifest(after));
    let tonight: BTreeMap<String, f64> = figures(after).into_iter().map(|f| (f.name, f.value)).collect();
    figures(before)
        .into_iter()
        .map(|f| {
            // A figure a night's launches give no value (none measured it) counts as one launch,
            // its summary median, as a manifest without per-launch figures does (none where the
            // summary has none either): INSUFFICIENT_EVIDENCE, not left out of the comparison.
            let b = lb.get(&f.name).cloned().unwrap_or_else(|| vec![f.value]);
            let a = la.get(&f.name).cloned().unwrap_or_else(|| tonight.get(&f.name).map(|v| vec![*v]).unwrap_or_default());
            Pair {
                run: label(after),
                run_id: after.run_id.to_string(),
                on_host: after.plan.device == crate::spec::schema::Device::Cpu,
                experiment: after.experiment.clone(),
                noise: match noise.noise(&before.run_id, &f.name, policy) {
                    Noise::NotKept => Noise::from_launches(&b, &a, None),
                    // Too few past nights for the figure's own band: the launches' floor stands
                    // in, as without a history (a new history must not pass what none would catch).
                    Noise::TooFew { nights } => match Noise::from_launches(&b, &a, Some(nights)) {
                        Noise::NotKept => Noise::TooFew { nights },
                        floor => floor,
                    },
                    kept => kept,
                },
                before: b,
                after: a,
                figure: f,
            }
        })
        .collect()
}

/// How much worse `after` is than `before` for a figure whose better direction is `better`.
fn worse_by(better: Better, before: f64, after: f64) -> f64 {
    match better {
        Better::Lower => after / before - 1.0,
        Better::Higher => before / after - 1.0,
    }
}

/// Verdicts for every pair: Yuen's trimmed t where both nights have enough launches, then
/// Benjamini–Hochberg over the tested.
fn judge(pairs: &[Pair], policy: &Policy) -> Vec<FigureVerdict> {
    let tests: Vec<Option<stats::TTest>> = pairs.iter().map(|p| stats::yuen_log(&p.before, &p.after)).collect();
    let tested: Vec<f64> = tests.iter().flatten().map(|t| t.p).collect();
    let mut q = stats::benjamini_hochberg(&tested).into_iter();
    pairs
        .iter()
        .zip(&tests)
        .map(|(pair, test)| {
            let q = test.map(|_| q.next().unwrap_or(1.0));
            verdict(pair, test.zip(q), policy)
        })
        .collect()
}

/// The direction of a change that counts: worse is REGRESSED, better IMPROVED.
fn direction(worse: f64) -> Verdict {
    if worse > 0.0 {
        Verdict::Regressed
    } else {
        Verdict::Improved
    }
}

/// The verdict of a tested figure whose change is significant and beyond the minimum effect:
/// held against its noise band (the history's, or the floor from the launches without one).
fn against_noise(noise: &Noise, worse: f64, log_ratio: f64) -> Verdict {
    match (noise, noise.band()) {
        (Noise::NotKept, _) => direction(worse),
        (_, Some(band)) if log_ratio.abs() > band => direction(worse),
        (Noise::Estimated { .. } | Noise::FromLaunches { .. }, _) => Verdict::NoChange,
        (Noise::TooFew { .. }, _) => Verdict::InsufficientEvidence,
    }
}

/// Whether a relative change `effect` (after / before − 1) is at least `min_effect` as a ratio
/// either way: after / before ≥ 1 + m or ≤ 1 / (1 + m), so a change and its reverse (a night
/// and its baseline swapped, a step time and its tokens/s) are judged alike.
pub(crate) fn beyond_min_effect(effect: f64, min_effect: f64) -> bool {
    (1.0 + effect).ln().abs() >= (1.0 + min_effect).ln()
}

/// The verdict and how it was reached, before the bandwidth check.
fn raw_verdict(pair: &Pair, tested: Option<(stats::TTest, f64)>, policy: &Policy, worse: f64, effect: f64) -> (Verdict, Method) {
    let Some((test, q)) = tested else {
        if pair.after.is_empty() {
            return (Verdict::InsufficientEvidence, Method::NoValueTonight { before: pair.before.len() });
        }
        let usable = |v: &[f64]| stats::usable(v).len();
        let method = Method::TooFewLaunches {
            before: pair.before.len(),
            after: pair.after.len(),
            usable_before: usable(&pair.before),
            usable_after: usable(&pair.after),
        };
        return (Verdict::InsufficientEvidence, method);
    };
    let significant = q <= policy.fdr && beyond_min_effect(effect, policy.min_effect);
    let v = if significant { against_noise(&pair.noise, worse, (1.0 + effect).ln()) } else { Verdict::NoChange };
    (v, Method::Tested { test, q, policy: *policy, explained_by_bandwidth: None })
}

/// Sets a decode figure's change at the baseline's memory bandwidth (tonight's step × the
/// bandwidth ratio, a rate ÷ it); a REGRESSED or IMPROVED whose normalised change is no longer
/// beyond the minimum effect the same way, in the gate's own terms ([`beyond_min_effect`]),
/// becomes NO_CHANGE, explained by memory bandwidth.
fn normalise_by_bandwidth(v: &mut FigureVerdict, better: Better, policy: &Policy, ratio: f64) {
    let n = match better {
        Better::Lower => v.after * ratio,
        Better::Higher => v.after / ratio,
    };
    let (n_effect, n_worse) = (n / v.before - 1.0, worse_by(better, v.before, n));
    v.bandwidth_normalised_worse_by = Some(n_worse);
    if let (Verdict::Regressed | Verdict::Improved, Method::Tested { explained_by_bandwidth, .. }) = (v.verdict, &mut v.method) {
        let still = beyond_min_effect(n_effect, policy.min_effect) && (n_worse > 0.0) == (v.verdict == Verdict::Regressed);
        if !still {
            *explained_by_bandwidth = Some(n_effect);
            v.verdict = Verdict::NoChange;
        }
    }
}

fn verdict(pair: &Pair, tested: Option<(stats::TTest, f64)>, policy: &Policy) -> FigureVerdict {
    // Over the values the test judges (a launch that recorded 0 measured nothing).
    let before = stats::usable_median(&pair.before).unwrap_or(pair.figure.value);
    let after = stats::usable_median(&pair.after).unwrap_or(f64::NAN);
    let worse = worse_by(pair.figure.better, before, after);
    let effect = after / before - 1.0;
    let (verdict, method) = raw_verdict(pair, tested, policy, worse, effect);
    FigureVerdict {
        run: pair.run.clone(),
        experiment: pair.experiment.clone(),
        figure: pair.figure.name.clone(),
        verdict,
        before,
        after,
        effect,
        worse_by: worse,
        n_before: pair.before.len(),
        n_after: pair.after.len(),
        noise: pair.noise,
        method,
        bandwidth_normalised_worse_by: None,
    }
}

#[cfg(test)]
mod tests {
    use super::beyond_min_effect;

    #[test]
    fn the_minimum_effect_judges_a_change_and_its_reverse_alike() {
        for after in [0.905, 1.105, 0.91, 1.099, 0.5, 2.0] {
            let (forward, reverse) = (beyond_min_effect(after - 1.0, 0.10), beyond_min_effect(1.0 / after - 1.0, 0.10));
            assert_eq!(forward, reverse, "1 -> {after} and back");
        }
        assert!(beyond_min_effect(0.105, 0.10) && beyond_min_effect(-0.095, 0.10), "1.105 and its reverse 0.905");
        assert!(!beyond_min_effect(0.095, 0.10) && !beyond_min_effect(-0.087, 0.10), "1.095 and its reverse 0.913");
    }
}
