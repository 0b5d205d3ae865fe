//! The precision audit: each half-precision answer beside its float32 twin, the run that is
//! the same in everything but its dtype (model, weights, prompt, tokens, layout, device, link),
//! so what half precision did to the answer is told apart from what the layout did.
//!
//! Both runs are graded by their ranks against the same float32 unsplit reference, step by
//! step (`answer.exactness.steps`); from those records: the steps up to which the two runs'
//! tokens are equal (k), the half-precision run's largest logit drift before k (and the
//! twin's, which is the layout's own), and the twin's top-2 margin at k. A divergence at a
//! step whose float32 margin is below [`FRAGILE_FACTOR`] times the half-precision drift is a
//! near-tie its rounding could flip; one above it moved a robust step.

use crate::audit::FRAGILE_FACTOR;
use crate::manifest::{Manifest, Status};
use crate::spec::plan::Workload;
use crate::spec::schema::Dtype;
use serde::Serialize;

/// How a half-precision answer compares with its float32 twin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrecisionGrade {
    /// Every token equals the twin's.
    TokensEqual,
    /// A token differs at a step whose float32 margin is within the rounding's reach.
    NearTie,
    /// A token differs at a step whose float32 margin was wider than the drift could close.
    Moved,
    /// No float32 twin among the manifests.
    NoTwin,
    /// Its answer or its twin's holds fewer tokens than the run asked for (or none): not graded.
    Incomplete,
}

crate::named!(PrecisionGrade {
    TokensEqual => "TOKENS_EQUAL",
    NearTie => "NEAR_TIE",
    Moved => "MOVED",
    NoTwin => "NO_TWIN",
    Incomplete => "INCOMPLETE",
});

impl PrecisionGrade {
    /// Whether the run was compared with a twin (not [`PrecisionGrade::NoTwin`] or
    /// [`PrecisionGrade::Incomplete`]).
    pub fn is_graded(self) -> bool {
        !matches!(self, PrecisionGrade::NoTwin | PrecisionGrade::Incomplete)
    }
}

/// One half-precision run beside its float32 twin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PrecisionRow {
    /// Short run identity of the half-precision run.
    pub run: String,
    /// Short run identity of its float32 twin.
    pub twin: Option<String>,
    /// Experiment.
    pub experiment: String,
    /// The layout in words.
    pub layout: String,
    /// `bfloat16` or `float16`.
    pub dtype: String,
    /// The grade.
    pub grade: PrecisionGrade,
    /// Tokens equal to the twin's before the first difference (all of them when equal); None
    /// without a twin (nothing was compared).
    pub equal_steps: Option<usize>,
    /// Tokens compared.
    pub steps: usize,
    /// Largest |logit difference| of the half-precision run from the float32 reference, over
    /// the steps before the first difference.
    pub drift: f64,
    /// The twin's own largest |logit difference| from the reference (what the layout did).
    pub twin_drift: Option<f64>,
    /// The twin's top-2 margin at the first differing step.
    pub twin_margin: Option<f64>,
    /// Why it was not graded, where its answer or its twin's is incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// The runs whose dtype is not float32, each with its twin, in manifest order.
pub fn audit(manifests: &[Manifest]) -> Vec<PrecisionRow> {
    let answered: Vec<&Manifest> = manifests.iter().filter(|m| m.status() == Status::Ok && m.answer().is_some()).collect();
    answered
        .iter()
        .filter(|m| dtype_of(m).is_some_and(|d| d != Dtype::Float32))
        .map(|half| {
            // A twin whose answer is complete before one that is not.
            let twins = || answered.iter().copied().filter(|m| is_twin(half, m));
            let complete = twins().find(|t| t.answer().is_some_and(|a| crate::audit::incomplete(t, a).is_none()));
            row(half, complete.or_else(|| twins().next()))
        })
        .collect()
}

fn dtype_of(m: &Manifest) -> Option<Dtype> {
    match &m.plan.workload {
        Workload::Decode { dtype, .. } => Some(*dtype),
        _ => None,
    }
}

/// The workload with its dtype set to float32.
fn as_float32(w: &Workload) -> Workload {
    let mut w = w.clone();
    if let Workload::Decode { dtype, .. } = &mut w {
        *dtype = Dtype::Float32;
    }
    w
}

/// True when two runs computed with the same model: its config's digest and its weights (a
/// checkpoint's digest, or a seeded one's seed and generator), wherever the folder or the
/// checkpoint lay and however the spec named it, as their identities are.
fn same_model(a: Option<&crate::spec::plan::ModelSource>, b: Option<&crate::spec::plan::ModelSource>) -> bool {
    use crate::spec::plan::Weights;
    let weights = |w: &Weights| match w {
        Weights::Checkpoint { sha256, .. } => (Some(sha256.clone()), None),
        Weights::Seeded { seed, generator, .. } => (None, Some((*seed, generator.clone()))),
    };
    match (a, b) {
        (Some(a), Some(b)) => a.config_sha256 == b.config_sha256 && weights(&a.weights) == weights(&b.weights),
        (None, None) => true,
        _ => false,
    }
}

/// True when `m` is a float32 run of `half`'s model, workload, layout, threads per rank,
/// device, step mode and link.
fn is_twin(half: &Manifest, m: &Manifest) -> bool {
    let (a, b) = (&half.plan, &m.plan);
    dtype_of(m) == Some(Dtype::Float32)
        && a.layout == b.layout
        && same_model(a.model.as_ref(), b.model.as_ref())
        && a.threads_per_rank == b.threads_per_rank
        && a.device == b.device
        && a.step == b.step
        && a.link == b.link
        && as_float32(&a.workload) == b.workload
}

/// " on cpu" for a run on the CPU (the layout words name any other device themselves).
fn on_cpu(m: &Manifest) -> &'static str {
    if m.plan.device == crate::spec::Device::Cpu {
        " on cpu"
    } else {
        ""
    }
}

/// The first step at which any of `half`'s token lists differs from the twin's list of the same
/// sequence (its first list where the twin decoded one sequence).
fn first_difference(half: &[Vec<u32>], twin: &[Vec<u32>]) -> Option<usize> {
    half.iter()
        .enumerate()
        .filter_map(|(i, tokens)| {
            let theirs = twin.get(i).or(twin.first())?;
            tokens.iter().zip(theirs).position(|(a, b)| a != b)
        })
        .min()
}

/// Why `half` or its twin cannot be graded: an answer holding fewer tokens than asked (or none).
fn incomplete(half: &Manifest, twin: Option<&Manifest>) -> Option<String> {
    let why = |m: &Manifest| m.answer().and_then(|a| crate::audit::incomplete(m, a));
    why(half).or_else(|| twin.and_then(|t| why(t).map(|w| format!("its float32 twin: {w}"))))
}

fn row(half: &Manifest, twin: Option<&Manifest>) -> PrecisionRow {
    let answer = half.answer().map(|a| (a.tokens.first().cloned().unwrap_or_default(), &a.exactness));
    let (tokens, exact) = answer.unzip();
    let tokens = tokens.unwrap_or_default();
    let twin_lists = twin.and_then(|t| t.answer()).map(|a| a.tokens.as_slice());
    let twin_tokens = twin_lists.and_then(|t| t.first().cloned());
    let half_lists = half.answer().map_or(&[][..], |a| a.tokens.as_slice());
    let k = twin_lists.and_then(|t| first_difference(half_lists, t));
    let equal_steps = k.unwrap_or(tokens.len());
    let incomplete = twin.and(incomplete(half, twin));
    let drift = exact.map_or(0.0, |e| e.steps.iter().take(equal_steps).filter_map(|s| s.drift).fold(e.prompt_logit_diff, f64::max));
    let twin_exact = twin.and_then(|t| t.answer()).map(|a| &a.exactness);
    let twin_margin = k.and_then(|k| twin_exact.and_then(|e| e.steps.get(k)).map(|s| s.margin));
    let grade = match (twin_tokens, k) {
        _ if incomplete.is_some() => PrecisionGrade::Incomplete,
        (None, _) => PrecisionGrade::NoTwin,
        (Some(_), None) => PrecisionGrade::TokensEqual,
        (Some(_), Some(_)) if twin_margin.is_some_and(|m| m < FRAGILE_FACTOR * drift) => PrecisionGrade::NearTie,
        (Some(_), Some(_)) => PrecisionGrade::Moved,
    };
    PrecisionRow {
        run: half.run_id.short().to_string(),
        twin: twin.map(|t| t.run_id.short().to_string()),
        experiment: half.experiment.clone(),
        layout: format!("{}{}, {}", crate::audit::layout_words(half), on_cpu(half), threads_words(half.plan.threads_per_rank)),
        dtype: dtype_of(half).map_or("float32", |d| d.name()).to_string(),
        grade,
        equal_steps: twin.is_some().then_some(equal_steps),
        steps: tokens.len(),
        drift,
        twin_drift: twin_exact.map(|e| e.max_logit_diff),
        twin_margin,
        incomplete,
    }
}

/// "1 thread per rank", "2 threads per rank".
fn threads_words(threads: u32) -> String {
    format!("{threads} thread{} per rank", if threads == 1 { "" } else { "s" })
}

/// One line for a half-precision run.
pub fn line(r: &PrecisionRow) -> String {
    let twin = r.twin.as_deref().map_or("no float32 twin among the manifests".to_string(), |t| format!("float32 twin {t}"));
    let detail = match r.grade {
        PrecisionGrade::NoTwin => "not graded".to_string(),
        PrecisionGrade::Incomplete => format!("not graded: {}", r.incomplete.as_deref().unwrap_or("an incomplete answer")),
        PrecisionGrade::TokensEqual => format!("all {} tokens equal", r.steps),
        PrecisionGrade::NearTie | PrecisionGrade::Moved => format!(
            "tokens equal up to step {} of {}; the float32 top-2 margin there {}",
            r.equal_steps.unwrap_or_default(),
            r.steps,
            r.twin_margin.map_or("not recorded".into(), |m| format!("{m:.3e}"))
        ),
    };
    format!(
        "{} {} {} ({twin}): {}: {detail}; drift from the float32 reference {:.2e} (the twin's own {})",
        r.run,
        r.dtype,
        r.layout,
        r.grade.name(),
        r.drift,
        r.twin_drift.map_or("n/a".into(), |d| format!("{d:.2e}"))
    )
}

/// A plain-text account of the rows (empty when no run computed in half precision).
pub fn render_text(rows: &[PrecisionRow]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let twins = rows.iter().filter(|r| r.twin.is_some()).count();
    let mut out = format!("precision audit: {} half-precision runs, {twins} with a float32 twin to grade against\n", rows.len());
    for r in rows {
        out.push_str(&format!("  {}\n", line(r)));
    }
    out
}
