//! Exactness per layout family: splitting changes the arithmetic's order and nothing else,
//! so every float32 layout of a family gives the unsplit model's tokens (the audit's
//! verdicts). A half-precision layout changes the rounding as well as the order: the
//! `precision-audit` finding grades it against its float32 twin, and here it is only counted.

use super::{Finding, Inconclusive, Inputs};
use crate::audit::{Cause, Grade, LayoutVerdict};
use std::collections::{BTreeMap, BTreeSet};

/// One layout's verdicts over the answer identities (prompts) that checked it.
#[derive(Default)]
struct Layout<'a> {
    verdicts: Vec<&'a LayoutVerdict>,
    prompts: BTreeSet<&'a str>,
}

/// One finding per strategy with decode answers (none: one INCONCLUSIVE finding).
pub fn findings(inp: &Inputs) -> Vec<Finding> {
    let half = half_precision_runs(inp);
    let mut families: BTreeMap<&str, Family> = BTreeMap::new();
    for g in &inp.audit {
        for l in &g.layouts {
            let e = families.entry(l.family.name()).or_default();
            if half.contains(l.run.as_str()) {
                e.half_precision += 1;
            } else if !l.is_reference {
                let layout = e.layouts.entry(l.layout.as_str()).or_default();
                layout.verdicts.push(l);
                layout.prompts.insert(g.answer_id.as_str());
            }
        }
    }
    if families.is_empty() {
        return vec![claim("exactness", None).inconclusive(Inconclusive::MissingRuns, "missing runs: no decode run with an answer".into())];
    }
    families.into_iter().map(|(family, f)| family_finding(inp, family, &f)).collect()
}

/// A family's float32 layouts, and how many of its runs were in half precision.
#[derive(Default)]
struct Family<'a> {
    layouts: BTreeMap<&'a str, Layout<'a>>,
    half_precision: usize,
}

/// Short identities of the decode runs in bfloat16 or float16.
fn half_precision_runs<'a>(inp: &Inputs<'a>) -> BTreeSet<&'a str> {
    let float32 = |d: &crate::report::facts::DecodeRow| d.dtype.is_none_or(|t| t == crate::spec::schema::Dtype::Float32);
    inp.facts.decode.iter().filter(|d| !float32(d)).map(|d| d.run.as_str()).collect()
}

/// The claim of `family` (None: of every split, where no decode run answered).
fn claim(id: &str, family: Option<&str>) -> Finding {
    let (by, every) = family.map_or((String::new(), "every".to_string()), |f| (format!(" by {f}"), format!("every {f}")));
    Finding::new(
        id,
        &format!("Splitting the model{by} changes the arithmetic's order and nothing else: {every} layout generates the unsplit model's tokens."),
        &["answer.tokens", "answer.exactness.max_logit_diff", "answer.exactness.steps"],
        "audit: every float32 split layout is BITWISE or TOKENS_EQUAL against the unsplit reference (HOLDS); a DIVERGED layout at a robust step, or a reference that the unsplit run decoded again does not reproduce at one, FAILS; one explained only by a near-tie or a noisy reference is INCONCLUSIVE",
    )
}

fn family_finding(inp: &Inputs, family: &str, fam: &Family) -> Finding {
    let mut f = claim(&format!("exactness-{family}"), Some(family));
    let layouts = &fam.layouts;
    if fam.half_precision > 0 {
        let (n, runs) = (fam.half_precision, if fam.half_precision == 1 { "run" } else { "runs" });
        f.notes.push(format!(
            "{n} {family} {runs} in half precision not graded here: the rounding differs as well as the order, and `precision-audit` grades each against its float32 twin"
        ));
    }
    let all: Vec<&LayoutVerdict> = layouts.values().flat_map(|l| l.verdicts.iter().copied()).collect();
    if all.is_empty() {
        return f.inconclusive(
            Inconclusive::MissingRuns,
            format!("missing runs: only the unsplit {family} run; no float32 split layout was checked"),
        );
    }
    let runs: Vec<&str> = all.iter().map(|l| l.run.as_str()).collect();
    f.number("layouts checked", layouts.len() as f64, "count", &runs);
    let drift = all.iter().map(|l| (l.max_logit_drift, l.run.as_str())).fold(None, |acc: Option<(f64, &str)>, x| match acc {
        Some(a) if a.0 >= x.0 => Some(a),
        _ => Some(x),
    });
    if let Some((d, run)) = drift {
        f.number("largest logit drift from the reference", d, "logit", &[run]);
    }
    noise_numbers(&mut f, inp, &runs);
    f.notes.extend(layouts.iter().map(|(name, l)| note(name, l)));
    if let Some(why) = unreproducible(inp, &runs) {
        return f.decide(false, why);
    }
    let real: Vec<&&LayoutVerdict> = all.iter().filter(|l| l.real_change).collect();
    let explained = all.iter().filter(|l| l.verdict == Grade::Diverged && !l.real_change).count();
    let bitwise = all.iter().filter(|l| l.verdict == Grade::Bitwise).count();
    if let Some(first) = real.first() {
        let why = format!(
            "{} of {} runs changed the answer at a robust step; the first, {}, at step {}",
            real.len(),
            all.len(),
            first.layout,
            first.step.map_or("?".into(), |k| k.to_string())
        );
        return f.decide(false, why);
    }
    if explained > 0 {
        return f.inconclusive(
            Inconclusive::Noise,
            format!("noise: {explained} runs diverged only where the reference's top-2 margin is within the observed drift, or where the reference differs from itself"),
        );
    }
    f.decide(
        true,
        format!(
            "all {} runs of {} {family} layouts generated the reference's tokens ({bitwise} bitwise, {} within the drift)",
            all.len(),
            layouts.len(),
            all.len() - bitwise
        ),
    )
}

/// Why the tokens `runs` are graded against are not an answer: the reference decoded again in
/// one of their audit groups left the cached reference at a robust step (the first such group).
fn unreproducible(inp: &Inputs, runs: &[&str]) -> Option<String> {
    let holds = |g: &&crate::audit::AnswerGroup| g.layouts.iter().any(|l| runs.contains(&l.run.as_str()));
    let (g, r) =
        inp.audit.iter().filter(holds).find_map(|g| Some((g, g.layouts.iter().find(|l| l.cause == Some(Cause::Unreproducible))?)))?;
    Some(format!(
        "the reference is NOT REPRODUCIBLE: the unsplit run {} decoded again left the cached reference of answer {} at step {} (a robust step), so no layout's tokens can be checked against it",
        r.run,
        g.answer_id.short(),
        r.step.map_or("?".into(), |k| k.to_string())
    ))
}

/// The reference's drift from itself, of the audit groups holding `runs` (this family's
/// layouts; another family's reference is another model or prompt): the largest, with its run.
fn noise_numbers(f: &mut Finding, inp: &Inputs, runs: &[&str]) {
    let own = inp.audit.iter().filter(|g| g.layouts.iter().any(|l| runs.contains(&l.run.as_str())));
    let worst = own
        .filter_map(|g| Some((g.reference_run.as_ref()?, g.reference_self_drift?)))
        .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.0.cmp(a.0)));
    if let Some((run, d)) = worst {
        f.number("reference's drift from itself (run-to-run noise)", d, "logit", &[run.as_str()]);
    }
}

fn note(name: &str, l: &Layout) -> String {
    // The worst run: by grade, then a real change before one explained, then by drift.
    let worst = l.verdicts.iter().max_by(|a, b| {
        a.verdict.cmp(&b.verdict).then(a.real_change.cmp(&b.real_change)).then(a.max_logit_drift.total_cmp(&b.max_logit_drift))
    });
    let Some(w) = worst else {
        return name.to_string();
    };
    let prompts = l.prompts.len();
    let plural = if prompts == 1 { "" } else { "s" };
    match (w.verdict, w.cause) {
        (Grade::Diverged, Some(Cause::RealChange)) => format!("{name}: CHANGED the answer ({})", crate::audit::layout_line(w)),
        (Grade::Diverged, Some(Cause::HalfPrecision)) => {
            format!("{name}: diverged in half precision, graded by the precision audit ({})", crate::audit::layout_line(w))
        }
        (Grade::Diverged, _) => format!("{name}: diverged, explained by a near-tie or noise ({})", crate::audit::layout_line(w)),
        (g, _) => format!(
            "{name}: shown not to change the answer over {prompts} checked prompt{plural} (runs: {}, worst {}{})",
            l.verdicts.len(),
            g.name(),
            Some(w.max_logit_drift).filter(|d| *d > 0.0).map(|d| format!(", drift {}", crate::report::fmt::small(d))).unwrap_or_default()
        ),
    }
}
