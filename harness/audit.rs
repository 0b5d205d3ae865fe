//! Answers compared across layouts: runs that share an answer identity must agree.
//!
//! Every decode run is compared by its ranks with the cached unsplit reference, step by
//! step; `audit` grades each layout from those records: `BITWISE` (no logit moved),
//! `TOKENS_EQUAL` (with the largest drift) or `DIVERGED` at step k (the two tokens and the
//! reference's top-2 margin there). A step whose reference margin is below
//! [`FRAGILE_FACTOR`] times the drift of the runs that kept the reference's tokens is fragile:
//! float32 reordering alone could flip it, so a divergence there (against the drift of the
//! group's other runs that kept them) is explained by a near-tie; one at a robust step is a real change. The world-1
//! run is the reference decoded again: if it left the cached reference at or before a
//! layout's divergence, run-to-run noise is reported as such. A decode run that
//! produced no answer (failed, NOT_RUN, or ok without one) is listed with its group as not
//! graded, so a layout that never answered is not mistaken for one that agreed.

use crate::manifest::answer::{Answer, AnswerExactness};
use crate::manifest::{Manifest, Status};
use crate::spec::schema::Strategy;
use serde::Serialize;
use std::collections::BTreeMap;

/// A margin below this many times the observed drift is a near-tie: the top two logits may
/// each move by the drift, in opposite directions.
pub const FRAGILE_FACTOR: f64 = 2.0;

/// How a layout's answer compares with the unsplit reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grade {
    /// Logits bit-identical at every compared step.
    Bitwise,
    /// Same tokens; logits moved by at most the drift.
    TokensEqual,
    /// A token differs from step `step` on.
    Diverged,
}

crate::named!(Grade { Bitwise => "BITWISE", TokensEqual => "TOKENS_EQUAL", Diverged => "DIVERGED" });

/// Why a layout diverged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// The reference's margin at the step is within the drift: float32 reordering could flip it.
    NearTie,
    /// The reference decoded again differs from itself: run-to-run noise, not the layout.
    NoisyReference,
    /// The reference decoded again (the world-1 run) left the cached reference at a robust
    /// step: the same computation gave another answer, beyond what reordering can flip (a race,
    /// memory read before it was written): counted as a change, as it leaves every verdict of
    /// the group resting on an answer that is not reproducible.
    Unreproducible,
    /// A divergence at a robust step: the layout changed the answer.
    RealChange,
    /// A half-precision run left the float32 reference at a robust step: its rounding, not its
    /// layout, is what the precision audit (`crate::precision`) grades against its float32 twin.
    HalfPrecision,
}

/// One run's graded verdict against the unsplit reference.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayoutVerdict {
    /// Short run identity.
    pub run: String,
    /// Experiment.
    pub experiment: String,
    /// Strategy (the layout family).
    pub family: Strategy,
    /// The layout in words.
    pub layout: String,
    /// Threads each rank computed with (not in the answer identity: runs of one answer may differ there).
    pub threads_per_rank: u32,
    /// True for the world-1 run (the reference decoded again).
    pub is_reference: bool,
    /// The grade.
    pub verdict: Grade,
    /// Largest |logit difference| over the compared steps.
    pub max_logit_drift: f64,
    /// First differing step (DIVERGED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// This layout's token at that step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<u32>,
    /// The reference's token at that step.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_token: Option<u32>,
    /// The reference's top-2 margin at that step, when the manifest records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_margin: Option<f64>,
    /// Why it diverged (DIVERGED).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<Cause>,
    /// True when this is a divergence the layout itself caused.
    pub real_change: bool,
    /// Whose drift its near-tie stands on (a divergence explained by a near-tie only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub noise: Option<NoiseBasis>,
}

/// Whose logit drift a layout's near-tie threshold stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoiseBasis {
    /// The largest drift of the group's other runs that kept the reference's tokens: float32
    /// reordering seen apart from this layout.
    OtherRuns,
    /// Its own drift before it diverged: no run that kept the tokens drifted at all (splits
    /// beside bitwise runs: a lone split, or several that left the tokens), so nothing apart
    /// from the layout measures the noise.
    OwnDrift,
}

/// A decode run that shares an answer identity but could not be graded: it failed, was not
/// run, or ended ok without recording an answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotGraded {
    /// Short run identity.
    pub run: String,
    /// Experiment.
    pub experiment: String,
    /// Strategy (the layout family).
    pub family: Strategy,
    /// The layout in words.
    pub layout: String,
    /// Threads each rank computed with.
    pub threads_per_rank: u32,
    /// How the run ended.
    pub status: Status,
    /// Why it failed or did not run, where the manifest records it (None for an ok run).
    pub reason: Option<String>,
}

/// One answer identity's runs and whether their answers agree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerGroup {
    /// The shared answer identity.
    pub answer_id: crate::identity::AnswerId,
    /// The experiments involved (of the graded and the not graded runs).
    pub experiments: Vec<String>,
    /// Short run identities of the runs compared (status ok, with an answer).
    pub runs: Vec<String>,
    /// True when some layout really changed the answer (a divergence at a robust step).
    pub changed: bool,
    /// Largest |difference| of logits any run reported against the unsplit model.
    pub max_logit_diff: Option<f64>,
    /// Smallest top-2 margin any run saw.
    pub min_top2_margin: Option<f64>,
    /// The world-1 run, the reference decoded again, if there is one.
    pub reference_run: Option<String>,
    /// Decodes of the unsplit model compared (the cached reference plus the world-1 run's repetitions; 0 where no run was graded).
    pub reference_decodes: u32,
    /// Whether the reference decoded again equals itself bitwise; None without a world-1 run.
    pub reference_reproducible: Option<bool>,
    /// The reference's drift from itself (run-to-run noise).
    pub reference_self_drift: Option<f64>,
    /// Largest drift observed across layouts (before each one's divergence).
    pub drift_across_layouts: f64,
    /// The drift the group's fragile steps stand on: the largest of the runs that kept the
    /// reference's tokens, or where none of them drifted, `drift_across_layouts`.
    pub fragility_drift: f64,
    /// True when some step's top-2 margin is below FRAGILE_FACTOR × the drift.
    pub fragile: bool,
    /// The fragile steps, when the manifests record per-step margins.
    pub fragile_steps: Vec<usize>,
    /// Every run's verdict.
    pub layouts: Vec<LayoutVerdict>,
    /// The decode runs of this answer identity that produced no answer to grade.
    pub not_graded: Vec<NotGraded>,
}

/// Groups ok runs with answers by answer identity and grades each layout; the decode runs of
/// an identity without an answer are listed as not graded (a group of only those still appears).
pub fn audit(manifests: &[Manifest]) -> Vec<AnswerGroup> {
    let mut groups: BTreeMap<&crate::identity::AnswerId, (Vec<Answered>, Vec<NotGraded>)> = BTreeMap::new();
    for m in manifests {
        let answer = m.answer().filter(|_| m.status() == Status::Ok);
        if answer.is_none() && m.kind != crate::spec::Kind::Decode {
            continue;
        }
        let (answered, not_graded) = groups.entry(&m.answer_id).or_default();
        match answer.map(|a| (a, incomplete(m, a))) {
            Some((answer, None)) => answered.push(Answered { m, answer }),
            Some((_, Some(why))) => not_graded.push(NotGraded { reason: Some(why), ..NotGraded::of(m) }),
            None => not_graded.push(NotGraded::of(m)),
        }
    }
    groups.into_iter().map(|(id, (runs, not_graded))| group(id, &runs, not_graded)).collect()
}

/// Why an ok run's answer cannot be graded: it holds no token list, or a list of other than
/// the `new_tokens` the run asked for (a truncated list would agree with every prefix).
pub(crate) fn incomplete(m: &Manifest, answer: &Answer) -> Option<String> {
    let asked = match &m.plan.workload {
        crate::spec::plan::Workload::Decode { new_tokens, .. } => *new_tokens as usize,
        _ => return None,
    };
    if answer.tokens.is_empty() {
        return Some("its answer holds no tokens".to_string());
    }
    let odd = answer.tokens.iter().map(Vec::len).find(|&n| n != asked)?;
    Some(format!("its answer holds a list of {odd} tokens where the run asked for {asked}"))
}

impl NotGraded {
    /// A decode run without an answer, as the audit lists it.
    fn of(m: &Manifest) -> Self {
        NotGraded {
            run: m.run_id.short().to_string(),
            experiment: m.experiment.clone(),
            family: m.layout.strategy,
            layout: layout_words(m),
            threads_per_rank: m.plan.threads_per_rank,
            status: m.status(),
            reason: m.reason().map(str::to_string),
        }
    }
}

/// A run and its answer, as the audit reads them.
struct Answered<'a> {
    m: &'a Manifest,
    answer: &'a Answer,
}

impl Answered<'_> {
    fn tokens(&self) -> &[Vec<u32>] {
        &self.answer.tokens
    }

    fn exact(&self) -> &AnswerExactness {
        &self.answer.exactness
    }

    /// True for a decode in bfloat16 or float16 (graded against the float32 reference).
    fn in_half_precision(&self) -> bool {
        matches!(&self.m.plan.workload, crate::spec::plan::Workload::Decode { dtype, .. } if *dtype != crate::spec::schema::Dtype::Float32)
    }

    /// A run of the unsplit computation itself, on the reference's device (a one-rank context
    /// split computes attention another way, and a GPU computes with other kernels, so each is
    /// a layout like any other, not a reproduction of the reference).
    fn is_world_one(&self) -> bool {
        let unsplit = self.m.layout.strategy != crate::spec::Strategy::Context;
        let on_host = self.m.plan.device == crate::spec::Device::Cpu;
        // A half-precision run computes another arithmetic: a layout like any other, graded
        // against its float32 twin, never the reference decoded again.
        unsplit && on_host && !self.in_half_precision() && self.m.layout.world == 1 && self.m.layout.sequences.unwrap_or(1) <= 1
    }
}

/// The reference tokens and margins of a group: recorded per step, else the world-1 run's tokens.
struct Reference {
    tokens: Option<Vec<u32>>,
    margins: Vec<Option<f64>>,
}

fn reference(answers: &[Answered], world_one: Option<&Answered>) -> Reference {
    let recorded = answers.iter().find_map(|a| a.answer.recorded_reference());
    // Without a per-step record or a world-1 run, the first run's tokens stand in.
    let tokens = recorded
        .or_else(|| world_one.and_then(|a| a.tokens().first().cloned()))
        .or_else(|| answers.first().and_then(|a| a.tokens().first().cloned()));
    let len = answers.iter().map(|a| a.exact().steps.len()).max().unwrap_or(0);
    let margins = (0..len).map(|k| answers.iter().find_map(|a| Some(a.exact().steps.get(k)?.reference_margin))).collect();
    Reference { tokens, margins }
}

fn first_difference(a: &Answered, reference: Option<&[u32]>) -> Option<usize> {
    let recorded = a.exact().first_difference;
    let from_tokens = reference.and_then(|r| a.tokens().iter().filter_map(|t| t.iter().zip(r).position(|(x, y)| x != y)).min());
    recorded.into_iter().chain(from_tokens).min()
}

/// The largest logit drift a run recorded before its tokens left the reference (or before
/// step `upto`, where sooner): the drift at the step a token changed measures that change (a
/// different token moves the logits by at least half the margin), not the reordering noise
/// the near-tie threshold stands for. A run that never left the reference, or whose manifest
/// has no per-step records, gives its largest drift.
pub fn drift_before(exact: &AnswerExactness, upto: Option<usize>) -> f64 {
    let left = [exact.first_difference, upto].into_iter().flatten().min();
    match left {
        Some(k) if !exact.steps.is_empty() => exact.steps.iter().take(k).filter_map(|s| s.drift).fold(0.0, f64::max),
        _ => exact.max_logit_diff,
    }
}

/// The world-1 run that stands for the reference decoded again: the one with the most threads
/// per rank (the machine used whole), the first of them in manifest order. Another world-1 run
/// (a one-thread peer for the cost model) is graded as a layout.
fn reference_run<'a, 'm>(answers: &'a [Answered<'m>]) -> Option<&'a Answered<'m>> {
    answers.iter().filter(|a| a.is_world_one()).rev().max_by_key(|a| a.m.plan.threads_per_rank)
}

fn group(answer_id: &crate::identity::AnswerId, answers: &[Answered], not_graded: Vec<NotGraded>) -> AnswerGroup {
    let reference_run = reference_run(answers);
    let refr = reference(answers, reference_run);
    let self_drift = reference_run.map(|a| a.exact().max_logit_diff);
    let reference_left = reference_run.and_then(|a| left_reference(a, refr.tokens.as_deref()));
    let reproducible = reference_run.map(|_| reference_left.is_none() && self_drift == Some(0.0));
    let drifts: Vec<f64> = answers.iter().map(|a| drift_before(a.exact(), first_difference(a, refr.tokens.as_deref()))).collect();
    let kept: Vec<bool> = answers.iter().map(|a| kept_tokens(a, refr.tokens.as_deref())).collect();
    let drift = drifts.iter().copied().fold(0.0, f64::max);
    // Fragile steps by the drift of the runs that kept the tokens, as each layout is graded
    // (all runs' where none of those drifted).
    let kept_drift = drifts.iter().zip(&kept).filter(|(_, k)| **k).map(|(d, _)| *d).fold(0.0, f64::max);
    let fragility_drift = if kept_drift > 0.0 { kept_drift } else { drift };
    let threshold = FRAGILE_FACTOR * fragility_drift;
    let fragile_steps: Vec<usize> =
        refr.margins.iter().enumerate().filter(|(_, m)| m.is_some_and(|m| m < threshold)).map(|(k, _)| k).collect();
    let min_margin = answers.iter().filter_map(|a| a.exact().min_top2_margin).reduce(f64::min);
    let fragile = !fragile_steps.is_empty() || (refr.margins.is_empty() && min_margin.is_some_and(|m| m < threshold));
    let ctx = Context {
        refr: &refr,
        reference_left,
        // Its drift before it left the tokens (at the step it left, the drift has closed that
        // step's margin, and would excuse every later margin below it).
        reference_drift: reference_run.map_or(0.0, |a| drift_before(a.exact(), reference_left)),
        reference_run: reference_run.map(|a| &a.m.run_id),
    };
    let is_reference = |a: &Answered| ctx.reference_run == Some(&a.m.run_id);
    let layouts: Vec<LayoutVerdict> =
        answers.iter().enumerate().map(|(i, a)| verdict(a, &ctx, noise_for(&drifts, &kept, i, is_reference(a)))).collect();
    let mut experiments: Vec<String> =
        answers.iter().map(|a| a.m.experiment.clone()).chain(not_graded.iter().map(|n| n.experiment.clone())).collect();
    experiments.sort();
    experiments.dedup();
    AnswerGroup {
        answer_id: answer_id.clone(),
        experiments,
        runs: answers.iter().map(|a| a.m.run_id.short().to_string()).collect(),
        changed: layouts.iter().any(|l| l.real_change),
        max_logit_diff: answers.iter().map(|a| a.exact().max_logit_diff).reduce(f64::max),
        min_top2_margin: min_margin,
        reference_run: reference_run.map(|a| a.m.run_id.short().to_string()),
        reference_decodes: match reference_run {
            Some(a) => 1 + a.m.plan.warmup + a.m.plan.repetitions,
            None => u32::from(!answers.is_empty()),
        },
        reference_reproducible: reproducible,
        reference_self_drift: self_drift,
        drift_across_layouts: drift,
        fragility_drift,
        fragile,
        fragile_steps,
        layouts,
        not_graded,
    }
}

/// The step at which the reference decoded again left the reference tokens (0 where its
/// tokens differ at a step not recorded), if it did.
fn left_reference(reference_run: &Answered, tokens: Option<&[u32]>) -> Option<usize> {
    first_difference(reference_run, tokens).or_else(|| (!reference_run.exact().tokens_equal).then_some(0))
}

/// Whether `a` kept the reference's tokens: its drift is float32 reordering alone.
fn kept_tokens(a: &Answered, tokens: Option<&[u32]>) -> bool {
    first_difference(a, tokens).is_none() && kept_recorded(a.answer)
}

/// Whether an answer kept the tokens of the reference it was checked against, as its own
/// record says: no step recorded where it left them, its tokens equal, one token list (a run
/// of several sequences is not read as one that kept them).
pub fn kept_recorded(answer: &Answer) -> bool {
    answer.exactness.first_difference.is_none() && answer.exactness.tokens_equal && answer.tokens.len() <= 1
}

/// The reordering noise run `i` is graded against, and whose it is: the largest drift of the
/// group's other runs that kept the tokens, so a layout cannot excuse its own divergence by
/// drifting far before it (nor two layouts drifting alike each other's); its own drift only
/// where no such run drifted at all ([`NoiseBasis::OwnDrift`]), and never for the reference
/// decoded again (`is_reference`): its own drift is what would make it unreproducible.
fn noise_for(drifts: &[f64], kept: &[bool], i: usize, is_reference: bool) -> (f64, NoiseBasis) {
    let others = drifts.iter().zip(kept).enumerate().filter(|(j, (_, k))| *j != i && **k).map(|(_, (d, _))| *d).fold(0.0, f64::max);
    if others > 0.0 || is_reference {
        (others, NoiseBasis::OtherRuns)
    } else {
        (drifts.get(i).copied().unwrap_or(0.0), NoiseBasis::OwnDrift)
    }
}

struct Context<'a> {
    refr: &'a Reference,
    reference_left: Option<usize>,
    /// The reference decoded again: its largest |logit difference| from the reference before
    /// the step it left the reference's tokens.
    reference_drift: f64,
    reference_run: Option<&'a crate::identity::RunId>,
}

/// `a`'s grade; a divergence at a reference margin below [`FRAGILE_FACTOR`] × `noise`'s drift
/// is a near-tie.
fn verdict(a: &Answered, ctx: &Context, noise: (f64, NoiseBasis)) -> LayoutVerdict {
    let threshold = FRAGILE_FACTOR * noise.0;
    let drift = a.exact().max_logit_diff;
    let k = first_difference(a, ctx.refr.tokens.as_deref());
    let diverged = !kept_tokens(a, ctx.refr.tokens.as_deref());
    let mut v = LayoutVerdict {
        run: a.m.run_id.short().to_string(),
        experiment: a.m.experiment.clone(),
        family: a.m.layout.strategy,
        layout: layout_words(a.m),
        threads_per_rank: a.m.plan.threads_per_rank,
        is_reference: ctx.reference_run == Some(&a.m.run_id),
        verdict: if drift == 0.0 { Grade::Bitwise } else { Grade::TokensEqual },
        max_logit_drift: drift,
        step: None,
        token: None,
        reference_token: None,
        reference_margin: None,
        cause: None,
        real_change: false,
        noise: None,
    };
    if !diverged {
        return v;
    }
    v.verdict = Grade::Diverged;
    v.step = k;
    if let Some(k) = k {
        let reference = ctx.refr.tokens.as_ref().and_then(|r| r.get(k).copied());
        v.reference_token = reference;
        v.token = a.tokens().iter().filter_map(|t| t.get(k).copied()).find(|t| Some(*t) != reference);
        v.reference_margin = ctx.refr.margins.get(k).copied().flatten();
    }
    // The reference decoded again explains a divergence only where it left the tokens itself at
    // this run's step, or before it where the reference's margin there is within reach of the
    // reference's own drift: a run that kept the reference's tokens past a wide margin diverged
    // on the reference's own context, which no noise of the reference closes.
    let within_reference_noise = v.reference_margin.is_none_or(|m| m < FRAGILE_FACTOR * ctx.reference_drift);
    let noisy_reference = ctx.reference_left.is_some_and(|r| k.is_none_or(|k| r == k || (r < k && within_reference_noise)));
    let cause = if v.reference_margin.is_some_and(|m| m < threshold) {
        Cause::NearTie
    } else if v.is_reference && v.reference_margin.is_some() {
        // Without a recorded margin (a manifest older than per-step records) nothing says the
        // step was robust: run-to-run noise, as before.
        Cause::Unreproducible
    } else if noisy_reference {
        Cause::NoisyReference
    } else if a.in_half_precision() {
        Cause::HalfPrecision
    } else {
        Cause::RealChange
    };
    v.cause = Some(cause);
    v.real_change = matches!(cause, Cause::RealChange | Cause::Unreproducible);
    v.noise = (cause == Cause::NearTie).then_some(noise.1);
    v
}

/// A run's layout in words: strategy, world, what `parlab plan` shows of its layout
/// ([`crate::spec::plan::Layout::details`]: head placement, zig-zag blocks, decode split,
/// overlap pieces, sequences above one), link, and where it is not the CPU's eager step, its
/// device and step mode; so two layouts of one answer are told apart.
pub fn layout_words(m: &Manifest) -> String {
    let l = &m.layout;
    let details: String = l.details().iter().filter_map(crate::spec::plan::LayoutDetail::words).map(|w| format!(" {w}")).collect();
    let mut on = String::new();
    if m.plan.device != crate::spec::Device::Cpu {
        on.push_str(&format!(" on {}", m.plan.device.name()));
    }
    if m.plan.step != crate::spec::schema::StepMode::Eager {
        on.push_str(&format!(" step={}", m.plan.step.name()));
    }
    format!("{} world {}{details} over {}{on}", l.strategy.name(), l.world, m.plan.link)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or("n/a".into(), f)
}

/// Where a diverged layout left the reference, in words: the step and both tokens, or what the
/// manifest lacks to name them (a first difference past the tokens it recorded, or only its own
/// check's word that the tokens differ).
fn divergence_words(l: &LayoutVerdict) -> String {
    match (l.step, l.token, l.reference_token) {
        (Some(k), Some(t), Some(r)) => format!("at step {k}: token {t} where the reference has {r}"),
        (Some(k), _, _) => format!("at step {k}, its recorded first difference, past the tokens it or the reference recorded"),
        (None, ..) => "its own check found tokens other than the reference's, at no step its recorded tokens show".to_string(),
    }
}

/// `, N threads per rank` where a run computed with more than one (runs of one answer may
/// differ only there), else nothing.
fn threads_words(threads: u32) -> String {
    match threads {
        0 | 1 => String::new(),
        n => format!(", {n} threads per rank"),
    }
}

/// One line for a layout's verdict.
pub fn layout_line(l: &LayoutVerdict) -> String {
    let role = if l.is_reference { " (the reference decoded again)" } else { "" };
    let detail = match l.verdict {
        Grade::Bitwise => "logits bit-identical at every compared step".to_string(),
        Grade::TokensEqual => format!("same tokens, largest logit drift {:.2e}", l.max_logit_drift),
        Grade::Diverged => format!(
            "{}; reference top-2 margin there {}; {}",
            divergence_words(l),
            opt(l.reference_margin, |v| format!("{v:.3e}")),
            match l.cause {
                Some(Cause::NearTie) if l.noise == Some(NoiseBasis::OwnDrift) => {
                    "explained by a near-tie against its own drift before it (no run that kept the tokens drifted, to measure the noise by apart from this layout; not counted as a change)"
                }
                Some(Cause::NearTie) => "explained by a near-tie (not counted as a change)",
                Some(Cause::NoisyReference) => "the reference differs from itself (run-to-run noise)",
                Some(Cause::Unreproducible) => {
                    "NOT REPRODUCIBLE: the reference decoded again left the cached reference at a robust step (beyond what float reordering flips)"
                }
                Some(Cause::HalfPrecision) => "half precision's rounding (graded by the precision audit against its float32 twin)",
                _ => "a REAL CHANGE at a robust step",
            }
        ),
    };
    format!("{} {}{}{role}: {} {detail}", l.run, l.layout, threads_words(l.threads_per_rank), l.verdict.name())
}

/// One line for a decode run the audit could not grade: why it has no answer.
pub fn not_graded_line(n: &NotGraded) -> String {
    let reason = n.reason.as_deref().unwrap_or("no reason recorded");
    let why = match n.status {
        Status::Failed => format!("FAILED: {reason}"),
        Status::NotRun => format!("NOT_RUN: {reason}"),
        Status::Ok => format!("ok but {}", n.reason.as_deref().unwrap_or("no answer recorded")),
    };
    format!("{} {}{}: NOT GRADED: {why}", n.run, n.layout, threads_words(n.threads_per_rank))
}

/// `count` decode run(s).
fn decode_runs(count: usize) -> String {
    format!("{count} decode run{}", if count == 1 { "" } else { "s" })
}

/// A plain-text account of the groups, one paragraph each: its head line, then a line per
/// graded layout and per run not graded.
pub fn render_text(groups: &[AnswerGroup]) -> String {
    let mut out = String::new();
    if groups.is_empty() {
        out.push_str("audit: no runs with answers to compare\n");
    }
    for g in groups {
        out.push_str(&group_head(g));
        for l in &g.layouts {
            out.push_str(&format!("  {}\n", layout_line(l)));
        }
        for n in &g.not_graded {
            out.push_str(&format!("  {}\n", not_graded_line(n)));
        }
    }
    out
}

impl AnswerGroup {
    /// Whether a layout changed the answer at a robust step (not only the reference failing
    /// to reproduce itself).
    pub fn layout_changed(&self) -> bool {
        self.layouts.iter().any(|l| l.cause == Some(Cause::RealChange))
    }

    /// Whether the reference decoded again left the cached reference at a robust step.
    pub fn reference_unreproducible(&self) -> bool {
        self.layouts.iter().any(|l| l.cause == Some(Cause::Unreproducible))
    }
}

/// Whether the reference reproduced itself, in words.
fn noise_words(g: &AnswerGroup) -> String {
    match g.reference_reproducible {
        Some(true) => format!("reference reproducible bitwise over {} decodes", g.reference_decodes),
        Some(false) => format!("reference NOT reproducible (drift {} from itself)", opt(g.reference_self_drift, |v| format!("{v:.2e}"))),
        None => "reference decoded once (no world-1 run to measure run-to-run noise)".into(),
    }
}

/// A group's first line: its verdict and figures, or that no run could be graded.
fn group_head(g: &AnswerGroup) -> String {
    let name = format!("{} ({})", g.answer_id.short(), g.experiments.join(", "));
    if g.layouts.is_empty() {
        return format!("{name}: no run graded: {} produced no answer\n", decode_runs(g.not_graded.len()));
    }
    let verdict = if g.layout_changed() {
        "ANSWER CHANGED"
    } else if g.reference_unreproducible() {
        "REFERENCE NOT REPRODUCIBLE"
    } else {
        "same answer"
    };
    let fragile = if g.fragile {
        format!("; FRAGILE: top-2 margin below {FRAGILE_FACTOR}× the drift at steps {:?}", g.fragile_steps)
    } else {
        String::new()
    };
    let noise = noise_words(g);
    let ungraded = match g.not_graded.len() {
        0 => String::new(),
        n => format!("; {} not graded (below)", decode_runs(n)),
    };
    format!(
        "{name}: {}: {verdict}; largest logit difference {}; smallest top-2 margin {}; {noise}{fragile}{ungraded}\n",
        crate::report::fmt::plural(g.runs.len(), "run", "runs"),
        opt(g.max_logit_diff, |v| format!("{v:.2e}")),
        opt(g.min_top2_margin, |v| format!("{v:.3}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::Outcome;
    use std::path::Path;

    #[test]
    fn a_divergence_the_manifest_cannot_place_is_said_in_words_not_question_marks() {
        let diverged = |step: Option<usize>, token: Option<u32>, reference_token: Option<u32>| LayoutVerdict {
            run: "abc".into(),
            experiment: "e".into(),
            family: Strategy::Tensor,
            layout: "tensor world 2".into(),
            threads_per_rank: 1,
            is_reference: false,
            verdict: Grade::Diverged,
            max_logit_drift: 0.1,
            step,
            token,
            reference_token,
            reference_margin: None,
            cause: Some(Cause::RealChange),
            real_change: true,
            noise: None,
        };
        let placed = layout_line(&diverged(Some(3), Some(7), Some(9)));
        assert!(placed.contains("at step 3: token 7 where the reference has 9"), "{placed}");
        let past = layout_line(&diverged(Some(40), None, None));
        assert!(past.contains("at step 40, its recorded first difference, past the tokens it or the reference recorded"), "{past}");
        let unplaced = layout_line(&diverged(None, None, None));
        assert!(unplaced.contains("its own check found tokens other than the reference's"), "{unplaced}");
        assert!(![past, unplaced].iter().any(|l| l.contains('?')), "no question marks");
    }

    /// The fixture store: decode runs of one answer identity (tensor and context layouts), and
    /// a cost-model run that shares it.
    fn fixtures() -> Vec<Manifest> {
        let (list, skipped) = crate::manifest::read_all(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/manifests"));
        assert!(skipped.is_empty(), "{skipped:?}");
        list
    }

    /// The decode run whose short run identity is `short`.
    fn run<'a>(list: &'a mut [Manifest], short: &str) -> &'a mut Manifest {
        list.iter_mut().find(|m| m.run_id.short() == short).unwrap_or_else(|| panic!("no run {short}"))
    }

    fn fail(m: &mut Manifest, reason: &str) {
        m.outcome = Outcome::Failed { reason: reason.into(), launch: None };
    }

    /// Gives `m` per-step records against the fixture's reference tokens: `drift` at every step
    /// before `diverge`'s, the reference's margin 1.0 except 0.25 at step 5, and where `diverge`
    /// is given, its token at that step.
    fn with_steps(m: &mut Manifest, drift: f64, diverge: Option<(usize, u32)>) {
        let answer = m.answer_mut().unwrap();
        let reference = answer.tokens[0].clone();
        let steps: Vec<crate::manifest::answer::StepCheck> = reference
            .iter()
            .enumerate()
            .map(|(k, &t)| {
                let left = diverge.is_some_and(|(at, _)| k >= at);
                crate::manifest::answer::StepCheck {
                    margin: 1.0,
                    drift: (!left).then_some(drift),
                    reference_margin: if k == 5 { 0.25 } else { 1.0 },
                    reference_token: t,
                    token: diverge.filter(|(at, _)| *at == k).map_or(t, |(_, token)| token),
                }
            })
            .collect();
        if let Some((at, token)) = diverge {
            answer.tokens[0][at] = token;
            answer.exactness.tokens_equal = false;
            answer.exactness.first_difference = Some(at);
        }
        answer.exactness.max_logit_diff = drift;
        answer.exactness.steps = steps;
    }

    /// The fixture group with per-step records, each run drifting 1e-5 and agreeing.
    fn stepped() -> Vec<Manifest> {
        let mut list = fixtures();
        for m in list.iter_mut().filter(|m| m.answer().is_some()) {
            with_steps(m, 1e-5, None);
        }
        list
    }

    fn graded<'g>(g: &'g AnswerGroup, short: &str) -> &'g LayoutVerdict {
        g.layouts.iter().find(|l| l.run == short).unwrap_or_else(|| panic!("{short} graded"))
    }

    #[test]
    fn a_layout_cannot_excuse_its_own_divergence_by_drifting_far_before_it() {
        let mut list = stepped();
        // Its logits moved 0.2 for five steps, then its token changed where the reference's
        // margin was 0.25: 2 × its own drift would call that a near-tie, 2 × the others' 1e-5
        // does not.
        with_steps(run(&mut list, "e10e3402b841"), 0.2, Some((5, 999)));
        let g = &audit(&list)[0];
        let l = graded(g, "e10e3402b841");
        assert_eq!((l.verdict, l.cause, l.step), (Grade::Diverged, Some(Cause::RealChange), Some(5)), "{l:?}");
        assert!(g.changed);
        // The same divergence in a layout drifting like the others is a near-tie where the
        // others drift that far too.
        let mut list = stepped();
        for m in list.iter_mut().filter(|m| m.answer().is_some()) {
            with_steps(m, 0.2, None);
        }
        with_steps(run(&mut list, "e10e3402b841"), 0.2, Some((5, 999)));
        let g = &audit(&list)[0];
        assert_eq!(graded(g, "e10e3402b841").cause, Some(Cause::NearTie));
        assert!(!g.changed);
        // Two layouts drifting alike before the same divergence do not excuse each other: the
        // runs that kept the tokens measure the reordering.
        let mut list = stepped();
        with_steps(run(&mut list, "e10e3402b841"), 0.2, Some((5, 999)));
        with_steps(run(&mut list, "fdff37995f7e"), 0.2, Some((5, 999)));
        let g = &audit(&list)[0];
        for short in ["e10e3402b841", "fdff37995f7e"] {
            assert_eq!((graded(g, short).cause, graded(g, short).noise), (Some(Cause::RealChange), None), "{short}");
        }
        assert!(g.fragile_steps.is_empty(), "the group's fragility on the same basis: {:?}", g.fragile_steps);
        // Where every run that kept the tokens is bitwise, nothing but the layout's own drift
        // measures the reordering: a near-tie, and the line says on whose drift.
        let mut list = stepped();
        for m in list.iter_mut().filter(|m| m.answer().is_some()) {
            with_steps(m, 0.0, None);
        }
        with_steps(run(&mut list, "e10e3402b841"), 0.2, Some((5, 999)));
        let g = &audit(&list)[0];
        let l = graded(g, "e10e3402b841");
        assert_eq!((l.cause, l.noise), (Some(Cause::NearTie), Some(NoiseBasis::OwnDrift)));
        assert!(layout_line(l).contains("a near-tie against its own drift before it"), "{}", layout_line(l));
        assert!(g.layouts.iter().filter(|o| o.run != "e10e3402b841").all(|o| o.noise.is_none()), "said only where it decided");
    }

    #[test]
    fn a_noisy_reference_explains_only_divergences_at_or_after_its_own() {
        // 49fd8bd66b03 is the world-1 run, the reference decoded again.
        // Left at step 3 while the layout kept its tokens to step 6, whose margin (1.0) its own
        // drift (1e-5) cannot close: the layout's divergence is its own.
        for (reference_left, cause) in [(7, Cause::RealChange), (3, Cause::RealChange), (6, Cause::NoisyReference)] {
            let mut list = stepped();
            with_steps(run(&mut list, "49fd8bd66b03"), 1e-5, Some((reference_left, 998)));
            with_steps(run(&mut list, "e10e3402b841"), 1e-5, Some((6, 999)));
            let g = &audit(&list)[0];
            assert_eq!(g.reference_run.as_deref(), Some("49fd8bd66b03"));
            assert_eq!(graded(g, "e10e3402b841").cause, Some(cause), "the reference left at step {reference_left}");
            assert_eq!(g.reference_reproducible, Some(false));
        }
        // A reference decoded again that drifts 0.6 itself reaches a margin of 1.0 (2 × 0.6):
        // its own noise may have moved the later step.
        let mut list = stepped();
        with_steps(run(&mut list, "49fd8bd66b03"), 0.6, Some((3, 998)));
        with_steps(run(&mut list, "e10e3402b841"), 1e-5, Some((6, 999)));
        assert_eq!(graded(&audit(&list)[0], "e10e3402b841").cause, Some(Cause::NoisyReference));
    }

    #[test]
    fn the_reference_decoded_again_leaving_itself_at_a_robust_step_is_not_reproducible_and_a_change() {
        // 49fd8bd66b03 is the world-1 run; the others kept the tokens drifting 1e-5.
        let mut list = stepped();
        with_steps(run(&mut list, "49fd8bd66b03"), 1e-5, Some((3, 998)));
        let g = &audit(&list)[0];
        let r = graded(g, "49fd8bd66b03");
        assert!(r.is_reference);
        assert_eq!((r.cause, r.real_change, g.changed), (Some(Cause::Unreproducible), true, true), "margin 1.0 against 2 × 1e-5");
        assert!(layout_line(r).contains("NOT REPRODUCIBLE"), "{}", layout_line(r));
        // At step 5 (margin 0.25) beside a run that kept the tokens drifting 0.2: a near-tie.
        let mut list = stepped();
        with_steps(run(&mut list, "49fd8bd66b03"), 1e-5, Some((5, 998)));
        with_steps(run(&mut list, "e10e3402b841"), 0.2, None);
        let g = &audit(&list)[0];
        assert_eq!((graded(g, "49fd8bd66b03").cause, g.changed), (Some(Cause::NearTie), false));
        // Beside runs that are all bitwise it cannot excuse its move by its own drift (0.2, so
        // 2 × 0.2 past the margin 0.25): no run apart from it measures any reordering.
        let mut list = stepped();
        for m in list.iter_mut().filter(|m| m.answer().is_some()) {
            with_steps(m, 0.0, None);
        }
        with_steps(run(&mut list, "49fd8bd66b03"), 0.2, Some((5, 998)));
        let g = &audit(&list)[0];
        assert_eq!((graded(g, "49fd8bd66b03").cause, g.changed), (Some(Cause::Unreproducible), true));
        assert!(!g.layout_changed() && g.reference_unreproducible());
        assert!(group_head(g).contains(": REFERENCE NOT REPRODUCIBLE;"), "{}", group_head(g));
    }

    #[test]
    fn failed_and_not_run_decodes_of_an_answer_are_listed_as_not_graded() {
        let mut list = fixtures();
        fail(run(&mut list, "82d5af0356c6"), "rank 2 killed by signal 9");
        run(&mut list, "c879e160e608").outcome = Outcome::NotRun { reason: "needs 4 cores, found 2".into() };
        let groups = audit(&list);
        assert_eq!(groups.len(), 1, "{groups:?}");
        let g = &groups[0];
        assert!(!g.changed, "a run that produced no answer changed nothing");
        assert!(!g.layouts.iter().any(|l| l.run == "82d5af0356c6" || l.run == "c879e160e608"), "not graded: {:?}", g.layouts);
        let failed = g.not_graded.iter().find(|n| n.run == "82d5af0356c6").expect("the failed run is listed");
        assert_eq!(
            (failed.experiment.as_str(), failed.status, failed.reason.as_deref()),
            ("synth-decode", Status::Failed, Some("rank 2 killed by signal 9"))
        );
        assert!(failed.layout.starts_with("tensor world 4 "), "{}", failed.layout);
        let not_run = g.not_graded.iter().find(|n| n.run == "c879e160e608").expect("the NOT_RUN run is listed");
        assert_eq!((not_run.status, not_run.reason.as_deref()), (Status::NotRun, Some("needs 4 cores, found 2")));
        assert_eq!(g.not_graded.len(), 2, "the cost-model run that shares the identity is no decode: {:?}", g.not_graded);
    }

    #[test]
    fn the_reference_decoded_again_is_the_world_one_run_with_the_most_threads_and_another_is_graded() {
        let mut list = fixtures();
        let world_one = |m: &Manifest| m.kind == crate::spec::Kind::Decode && m.layout.world == 1 && m.answer().is_some();
        let whole = list.iter().find(|m| world_one(m) && m.layout.strategy == crate::spec::Strategy::Tensor).unwrap().clone();
        // A one-thread copy of the unsplit run (the cost model's peer), first in manifest order.
        let mut peer = whole.clone();
        (peer.run_id, peer.plan.threads_per_rank) = ("0".repeat(64).into(), 1);
        list.iter_mut().filter(|m| m.run_id == whole.run_id).for_each(|m| m.plan.threads_per_rank = 2);
        list.insert(0, peer);
        let g = &audit(&list)[0];
        assert_eq!(g.reference_run.as_deref(), Some(whole.run_id.short()), "{:?}", g.reference_run);
        let graded = g.layouts.iter().find(|l| l.run == "000000000000").expect("the peer is graded");
        assert!(!graded.is_reference && graded.verdict != Grade::Diverged, "{graded:?}");
        assert_eq!(g.layouts.iter().filter(|l| l.is_reference).count(), 1);
    }

    #[test]
    fn an_ok_decode_without_an_answer_is_not_graded() {
        let mut list = fixtures();
        if let Outcome::Ok { answer, .. } = &mut run(&mut list, "e10e3402b841").outcome {
            *answer = None;
        }
        let g = &audit(&list)[0];
        let n = g.not_graded.iter().find(|n| n.run == "e10e3402b841").expect("listed");
        assert_eq!((n.status, n.reason.as_deref()), (Status::Ok, None));
        let text = render_text(&audit(&list));
        assert!(text.contains("  e10e3402b841 tensor world 2 "), "{text}");
        assert!(text.contains("NOT GRADED: ok but no answer recorded"), "{text}");
    }

    #[test]
    fn layouts_of_one_answer_that_differ_only_in_overlap_or_threads_are_told_apart() {
        let mut list = fixtures();
        let text = render_text(&audit(&list));
        // fdff37995f7e and e10e3402b841: a tensor split of 2, the second with 4 overlapped pieces.
        assert!(text.contains("  fdff37995f7e tensor world 2 head split over mpi-shm:"), "{text}");
        assert!(text.contains("  e10e3402b841 tensor world 2 head split overlap 4 over mpi-shm:"), "{text}");
        // An early manifest recorded a head placement at world 1, where there is nothing to place.
        assert_eq!(run(&mut list, "49fd8bd66b03").layout.head, Some(crate::spec::HeadPlacement::Split));
        assert!(text.contains("  49fd8bd66b03 tensor world 1 over mpi-shm (the reference"), "{text}");
        run(&mut list, "fdff37995f7e").plan.threads_per_rank = 2;
        let text = render_text(&audit(&list));
        assert!(text.contains("  fdff37995f7e tensor world 2 head split over mpi-shm, 2 threads per rank: TOKENS_EQUAL"), "{text}");
        let g = &audit(&list)[0];
        assert_eq!(g.layouts.iter().find(|l| l.run == "fdff37995f7e").map(|l| l.threads_per_rank), Some(2), "in --json too");
    }

    #[test]
    fn a_truncated_or_empty_answer_is_not_graded_as_the_same_tokens() {
        let mut list = fixtures();
        let full = run(&mut list, "e10e3402b841").answer().unwrap().tokens.clone();
        assert!(full[0].len() > 2, "{full:?}");
        run(&mut list, "e10e3402b841").answer_mut().unwrap().tokens = vec![full[0][..2].to_vec()];
        let g = &audit(&list)[0];
        assert!(g.layouts.iter().all(|l| l.run != "e10e3402b841"), "a prefix of the reference is not graded TOKENS_EQUAL");
        let n = g.not_graded.iter().find(|n| n.run == "e10e3402b841").expect("listed");
        let asked = full[0].len();
        assert_eq!(n.reason.as_deref(), Some(format!("its answer holds a list of 2 tokens where the run asked for {asked}").as_str()));
        run(&mut list, "e10e3402b841").answer_mut().unwrap().tokens.clear();
        let text = render_text(&audit(&list));
        assert!(text.contains("e10e3402b841 tensor world 2 ") && text.contains("NOT GRADED: ok but its answer holds no tokens"), "{text}");
    }

    #[test]
    fn an_answer_no_run_could_grade_still_appears() {
        let mut list = fixtures();
        for m in list.iter_mut().filter(|m| m.kind == crate::spec::Kind::Decode) {
            fail(m, "timed out after 60 s");
        }
        let groups = audit(&list);
        assert_eq!(groups.len(), 1, "the answer identity is still there: {groups:?}");
        let g = &groups[0];
        assert!(g.layouts.is_empty() && !g.changed);
        assert_eq!((g.not_graded.len(), g.reference_decodes, g.max_logit_diff), (8, 0, None), "nothing was decoded and compared");
        assert_eq!(g.experiments, vec!["synth-context".to_string(), "synth-decode".into()]);
        let text = render_text(&groups);
        assert!(text.contains("9c7ab09474c7 (synth-context, synth-decode): no run graded: 8 decode runs produced no answer"), "{text}");
        assert!(text.contains("  82d5af0356c6 tensor world 4 "), "{text}");
        assert!(text.contains("NOT GRADED: FAILED: timed out after 60 s"), "{text}");
        assert!(!text.contains("same answer"), "nothing was compared: {text}");
    }

    #[test]
    fn a_group_with_graded_and_ungraded_runs_counts_both() {
        let mut list = fixtures();
        fail(run(&mut list, "82d5af0356c6"), "rank 2 killed by signal 9");
        let text = render_text(&audit(&list));
        let head = text.lines().next().unwrap();
        assert!(head.contains(": 7 runs: same answer;") && head.ends_with("; 1 decode run not graded (below)"), "{head}");
        assert!(
            text.contains("  82d5af0356c6 tensor world 4 ") && text.contains("NOT GRADED: FAILED: rank 2 killed by signal 9"),
            "{text}"
        );
    }
}
