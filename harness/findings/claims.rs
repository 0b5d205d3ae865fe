//! Declared claims (`claims:` in a spec) evaluated on the manifests its runs wrote: a
//! figure of the selected runs against a reference selection (or a value) under a rule.

use super::{oversubscription, rounds, Finding, Inconclusive, Inputs, Oversubscribed};
use crate::manifest::summary::Summary;
use crate::manifest::{Manifest, Status};
use crate::report::facts::Stats;
use crate::spec::claims::{parse, Baseline, Claim, Rule};
use crate::spec::schema::Op;
use crate::spec::Workload;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// One finding per declared claim of the specs the manifests' origins name (every experiment
/// that planned a run, not only the first; specs that no longer exist are skipped, one that
/// cannot be read as text stands as an invalid claim). A claim
/// whose id is `taken` (a built-in finding's, or an earlier spec's claim's) is not judged: the
/// register would show two findings of one name.
pub fn findings(inp: &Inputs, taken: &[&str]) -> Vec<Finding> {
    let mut taken: std::collections::BTreeSet<String> = taken.iter().map(|t| t.to_string()).collect();
    judged(inp)
        .into_iter()
        .map(|(path, f)| match taken.insert(f.id.clone()) {
            true => f,
            false => {
                let why = format!("its id `{}` in {} is already another finding's; give it its own", f.id, path.display());
                let mut stand_in = invalid(&path, why);
                stand_in.id = format!("{}-{}", stand_in.id, f.id);
                stand_in
            }
        })
        .collect()
}

/// Each spec's claims judged, with the spec they came from.
fn judged(inp: &Inputs) -> Vec<(PathBuf, Finding)> {
    let mut specs: BTreeMap<(&PathBuf, &str), Vec<&Manifest>> = BTreeMap::new();
    for m in inp.list {
        for (spec, experiment) in origins(m) {
            specs.entry((spec, experiment)).or_default().push(m);
        }
    }
    let mut out = Vec::new();
    let mut unreadable = std::collections::BTreeSet::new();
    for ((path, experiment), runs) in specs {
        let text = match crate::files::read_text(path, crate::files::TEXT_LIMIT) {
            Ok(text) => text,
            // A spec moved or deleted since its runs: nothing declares claims there any more.
            Err(crate::files::FileError::Io { cause, .. })
                if matches!(cause.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) =>
            {
                continue
            }
            // Said once per spec, however many of its experiments planned these runs.
            Err(e) => {
                if unreadable.insert(path) {
                    out.push((path.clone(), invalid(path, format!("its claims cannot be read: {e}"))));
                }
                continue;
            }
        };
        match parse(path, &text) {
            Ok(declared) if declared.name == experiment => out.extend(declared.claims.iter().map(|c| (path.clone(), evaluate(c, &runs)))),
            Ok(declared) if declared.claims.is_empty() => {}
            Ok(declared) => out.push((
                path.clone(),
                invalid(
                    path,
                    format!(
                        "{} now names experiment `{}`, not `{experiment}` whose runs the manifests hold: its claims are not judged on them",
                        path.display(),
                        declared.name
                    ),
                ),
            )),
            Err(problems) => out.push((
                path.clone(),
                invalid(
                    path,
                    format!("the claims of {} are invalid now ({} problems; run `parlab validate`)", path.display(), problems.len()),
                ),
            )),
        }
    }
    out
}

/// The specs and experiments that planned `m` (a manifest before origins: its plan's).
fn origins(m: &Manifest) -> Vec<(&PathBuf, &str)> {
    match m.origins.is_empty() {
        true => vec![(&m.plan.spec_path, m.plan.experiment.as_str())],
        false => m.origins.iter().map(|o| (&o.spec, o.experiment.as_str())).collect(),
    }
}

/// The finding that stands for a spec's claims where they cannot be judged.
fn invalid(path: &std::path::Path, why: String) -> Finding {
    let id = format!("claims-{}", path.display());
    let f = Finding::new(&id, "The spec's declared claims hold.", &[], "claims: as declared");
    f.inconclusive(Inconclusive::InvalidClaim, format!("invalid claim: {why}"))
}

/// A figure's value over the runs a selection matched, with their runs.
struct Measured<'m> {
    stat: Stats,
    runs: Vec<String>,
    tokens: Vec<Vec<Vec<u32>>>,
    /// Where the selection is one run that recorded the figure launch by launch: its values and
    /// when its launches ran (for pairing with the reference round by round).
    launched: Option<rounds::Launched<'m>>,
    /// The matching runs left out for more ranks × threads than cores (12 hex): a figure but
    /// `tokens` then times ranks waiting for a core. Where every matching run was, `runs` is empty.
    oversubscribed: Vec<(String, Oversubscribed)>,
}

/// The name a claim's figure is recorded under launch by launch, where it is.
fn launch_figure(figure: &str) -> Option<&'static str> {
    use crate::nightly::figures as f;
    Some(match figure {
        "step" => f::STEP_MEDIAN,
        "tokens_per_s" => f::TOKENS_PER_S_MEDIAN,
        "prefill" => f::PREFILL_MEDIAN,
        "compute" => f::COMPUTE_MEDIAN,
        "aggregate_bandwidth" => f::AGGREGATE_BANDWIDTH_MEDIAN,
        _ => return None,
    })
}

/// `m`'s values of `figure` launch by launch, with its span.
fn launched<'m>(m: &'m Manifest, figure: &str) -> Option<rounds::Launched<'m>> {
    rounds::Launched::of(m, launch_figure(figure)?)
}

fn unit(figure: &str) -> &'static str {
    match figure {
        "tokens_per_s" => "tokens/s",
        "aggregate_bandwidth" | "per_process_bandwidth" | "stream_aggregate_bandwidth" | "busbw" | "algbw" => "B/s",
        "tokens" => "count",
        _ => "s",
    }
}

fn layout_value(m: &Manifest, axis: &str) -> Option<String> {
    let l = &m.layout;
    Some(match axis {
        "world" => l.world.to_string(),
        "strategy" => l.strategy.name().to_string(),
        "head" => l.head.or(l.decode.as_ref().map(|d| d.head))?.name().to_string(),
        "sequences" => l.sequences.unwrap_or(1).to_string(),
        "link" => m.plan.link.name().to_string(),
        "threads" => m.plan.threads_per_rank.to_string(),
        _ => return None,
    })
}

fn run_matches(m: &Manifest, select: &BTreeMap<String, String>) -> bool {
    select.iter().filter(|(k, _)| k.as_str() != "op" && k.as_str() != "size").all(|(k, v)| match k.as_str() {
        // A membw run's buffer, however the claim writes the size (16MiB, 16777216).
        "buffer" => matches!(&m.plan.workload, Workload::Membw(b) if crate::units::parse_bytes(v) == Some(b.buffer_bytes)),
        // A layout that places no head (one rank, a data or pipeline split) holds it whole
        // whatever the spec's head axis said: any head matches it.
        "head" => layout_value(m, k).is_none_or(|h| &h == v),
        _ => layout_value(m, k).as_deref() == Some(v.as_str()),
    })
}

/// The runs a selection matches that did not end ok, in words (`run 1a2b… FAILED`), if any:
/// a figure over the others would silently stand for them.
fn unfinished(runs: &[&Manifest], select: &BTreeMap<String, String>) -> Option<String> {
    let words: Vec<String> = runs
        .iter()
        .filter(|m| m.status() != Status::Ok && run_matches(m, select))
        .map(|m| format!("run {} {}", m.run_id.short(), if m.status() == Status::Failed { "FAILED" } else { "NOT_RUN" }))
        .collect();
    (!words.is_empty()).then(|| words.join(", "))
}

/// Whether a row of op `op` (None for dispatch rows) and size `size` is selected.
fn row_matches(op: Option<Op>, size: u64, select: &BTreeMap<String, String>) -> bool {
    let op_ok = select.get("op").is_none_or(|want| op.is_some_and(|o| o.name() == want));
    let size_ok = select.get("size").is_none_or(|s| crate::units::parse_bytes(s) == Some(size));
    op_ok && size_ok
}

/// The stats of `figure` in one manifest (collectives and dispatch: every matching row).
fn stats_of(m: &Manifest, figure: &str, select: &BTreeMap<String, String>) -> Vec<Stats> {
    let plain = |x: f64| Stats { median: x, min: x, max: x, p99: x, n: 1 };
    let Some(summary) = m.summary() else {
        return Vec::new();
    };
    match (summary, figure) {
        (Summary::Decode(d), "step") => vec![d.step_s],
        (Summary::Decode(d), "comm") => vec![d.comm_s],
        (Summary::Decode(d), "compute") => vec![d.compute_s],
        (Summary::Decode(d), "prefill") => vec![d.prefill_s],
        (Summary::Decode(d), "tokens_per_s") => vec![d.tokens_per_s],
        (Summary::Membw(b), "aggregate_bandwidth") => vec![b.aggregate],
        (Summary::Membw(b), "per_process_bandwidth") => vec![b.per_process],
        // parlab's STREAM-class read, the aggregate shared-memory-bandwidth reads (none where
        // it did not run).
        (Summary::Membw(b), "stream_aggregate_bandwidth") => b.stream.iter().map(|s| s.aggregate).collect(),
        (Summary::Collectives(c), "time" | "busbw" | "algbw") => c
            .rows
            .iter()
            .filter(|r| row_matches(Some(r.op), r.size_bytes, select))
            .map(|r| match figure {
                "time" => r.time,
                "busbw" => plain(r.busbw_bps()),
                _ => plain(r.algbw_bps()),
            })
            .collect(),
        (Summary::Dispatch(d), "time") => d.rows.iter().filter(|r| row_matches(None, r.bytes, select)).map(|r| r.time).collect(),
        _ => Vec::new(),
    }
}

fn measure<'m>(runs: &[&'m Manifest], figure: &str, select: &BTreeMap<String, String>) -> Option<Measured<'m>> {
    let mut stats = Vec::new();
    let mut ids = Vec::new();
    let mut tokens = Vec::new();
    let mut launches = Vec::new();
    let mut oversubscribed = Vec::new();
    for m in runs.iter().filter(|m| m.status() == Status::Ok && run_matches(m, select)) {
        let found = stats_of(m, figure, select);
        let answer_tokens = m.answer().map(|a| &a.tokens).filter(|_| figure == "tokens");
        let has_tokens = answer_tokens.is_some();
        if found.is_empty() && !has_tokens {
            continue;
        }
        if let Some(o) = oversubscription(m).filter(|_| figure != "tokens") {
            oversubscribed.push((m.run_id.short().to_string(), o));
            continue;
        }
        stats.extend(found);
        tokens.extend(answer_tokens.cloned());
        ids.push(m.run_id.short().to_string());
        launches.push(launched(m, figure));
    }
    if ids.is_empty() && oversubscribed.is_empty() {
        return None;
    }
    let medians: Vec<f64> = stats.iter().map(|s| s.median).collect();
    let median = Stats::of(&medians).map_or(f64::NAN, |s| s.median);
    let stat = Stats {
        median,
        min: stats.iter().map(|s| s.min).fold(f64::INFINITY, f64::min),
        max: stats.iter().map(|s| s.max).fold(f64::NEG_INFINITY, f64::max),
        p99: median,
        n: stats.len() as u64,
    };
    let launched = match <[_; 1]>::try_from(launches) {
        Ok([one]) => one,
        Err(_) => None,
    };
    Some(Measured { stat, runs: ids, tokens, launched, oversubscribed })
}

fn words(select: &BTreeMap<String, String>) -> String {
    if select.is_empty() {
        return "every run".into();
    }
    select.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

fn claim_text(c: &Claim) -> String {
    c.text.clone().unwrap_or_else(|| {
        let sel = words(&c.select);
        let against = match &c.against {
            Baseline::Runs(r) => format!("that of {}", words(r)),
            Baseline::Value(v) => format!("{v}"),
        };
        let tol = crate::report::fmt::percent(c.tolerance, false);
        match c.rule {
            Rule::EqualTokens => {
                format!("The runs of {sel} generate the same tokens as those of {against}.")
            }
            Rule::Less => format!("The {} of {sel} is below {against} (tolerance {tol}).", c.figure),
            Rule::Greater => format!("The {} of {sel} is above {against} (tolerance {tol}).", c.figure),
            Rule::RatioWithin => format!("The {} of {sel} is within ±{tol} of {against}.", c.figure),
        }
        .replace("those of that of", "those of")
    })
}

fn evaluate(c: &Claim, runs: &[&Manifest]) -> Finding {
    let against = match &c.against {
        Baseline::Runs(r) => words(r),
        Baseline::Value(v) => format!("value {v}"),
    };
    let rule =
        format!("{} on the median {} of [{}] against [{against}], tolerance {}", c.rule.name(), c.figure, words(&c.select), c.tolerance);
    let mut f = Finding::new(&c.id, &claim_text(c), &[c.figure.as_str()], &format!("declared in the spec: {rule}"));
    for (side, axes) in std::iter::once(&c.select).chain(c.against.runs()).enumerate() {
        if let Some(which) = unfinished(runs, axes) {
            let of = if side == 0 { "" } else { "reference " };
            return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: the {of}selection {} matches {which}", words(axes)));
        }
    }
    let Some(sel) = measure(runs, &c.figure, &c.select) else {
        return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: no run matches {}", words(&c.select)));
    };
    let reference = match c.against.runs() {
        Some(r) => match measure(runs, &c.figure, r) {
            Some(m) => Some(m),
            None => return f.inconclusive(Inconclusive::MissingRuns, format!("missing runs: no reference run matches {}", words(r))),
        },
        None => None,
    };
    if let Some(r) = reference.as_ref().filter(|r| !r.runs.is_empty() && r.runs == sel.runs) {
        // Axes a layout ignores (a head at world 1) can make two selections one run.
        let why = format!(
            "invalid claim: the selection and the reference match the same runs ({}): each compared with itself",
            r.runs.join(", ")
        );
        return f.inconclusive(Inconclusive::InvalidClaim, why);
    }
    if let Some(over) = oversubscribed(&sel, reference.as_ref()) {
        f.notes.push(format!("{over}: its figures include ranks waiting for a core, which the claim does not describe; left out"));
        if sel.runs.is_empty() || reference.as_ref().is_some_and(|r| r.runs.is_empty()) {
            let side = if sel.runs.is_empty() { words(&c.select) } else { against };
            return f.inconclusive(Inconclusive::Oversubscribed, format!("oversubscribed: every run of {side} was ({over})"));
        }
    }
    if c.rule == Rule::EqualTokens {
        equal_tokens(f, &sel, reference.as_ref())
    } else {
        compare(f, c, &sel, reference.as_ref())
    }
}

/// The runs of both selections (12 hex).
fn both<'a>(sel: &'a Measured, reference: Option<&'a Measured>) -> Vec<&'a str> {
    sel.runs.iter().chain(reference.into_iter().flat_map(|r| &r.runs)).map(String::as_str).collect()
}

fn equal_tokens(mut f: Finding, sel: &Measured, reference: Option<&Measured>) -> Finding {
    let r = reference.map(|r| r.tokens.clone()).unwrap_or_default();
    let equal = sel.tokens.iter().all(|t| r.iter().all(|x| x == t));
    let runs = both(sel, reference);
    f.number("runs compared", runs.len() as f64, "count", &runs);
    let reason = if equal {
        "every selected run generated the reference's tokens"
    } else {
        "some selected run's tokens differ from the reference's"
    };
    f.decide(equal, reason.into())
}

fn compare(mut f: Finding, c: &Claim, sel: &Measured, reference: Option<&Measured>) -> Finding {
    let u = unit(&c.figure);
    let sel_runs: Vec<&str> = sel.runs.iter().map(String::as_str).collect();
    f.number(&format!("{} of {} (median)", c.figure, words(&c.select)), sel.stat.median, u, &sel_runs);
    let base = match (reference, &c.against) {
        (Some(r), Baseline::Runs(axes)) => {
            let rr: Vec<&str> = r.runs.iter().map(String::as_str).collect();
            f.number(&format!("{} of {} (median)", c.figure, words(axes)), r.stat.median, u, &rr);
            r.stat.median
        }
        (_, Baseline::Value(v)) => *v,
        (None, Baseline::Runs(_)) => f64::NAN,
    };
    for (side, m) in std::iter::once(("selection", sel)).chain(reference.map(|r| ("reference", r))) {
        if m.runs.len() > 1 {
            f.notes.push(format!("the {side}'s median is the median over {} runs' medians ({})", m.runs.len(), m.runs.join(", ")));
        }
    }
    let ratio = sel.stat.median / base;
    if !ratio.is_finite() || ratio < 0.0 {
        let why = format!("invalid claim: selected / reference = {} / {} gives no ratio", sel.stat.median, base);
        return f.inconclusive(Inconclusive::InvalidClaim, why);
    }
    f.number("selected / reference", ratio, "ratio", &both(sel, reference));
    let holds = |ratio: f64| match c.rule {
        Rule::Less => ratio < 1.0 + c.tolerance,
        Rule::Greater => ratio > 1.0 - c.tolerance,
        Rule::RatioWithin | Rule::EqualTokens => (ratio - 1.0).abs() <= c.tolerance,
    };
    let bound = match c.rule {
        Rule::Less => format!("< {:.3}", 1.0 + c.tolerance),
        Rule::Greater => format!("> {:.3}", 1.0 - c.tolerance),
        Rule::RatioWithin | Rule::EqualTokens => format!("within {:.3} of 1", c.tolerance),
    };
    let reason = format!("selected / reference = {ratio:.3} ({}: {bound})", c.rule.name().replace('_', " "));
    let per_round = round_ratios(sel, reference);
    if let Some(r) = &per_round {
        f.notes.push(rounds::note("selected / reference", Some(r)));
    }
    let Some(per_round) = per_round else {
        return f.decide(holds(ratio), reason);
    };
    // Decided only where the medians and every round say the same.
    let (held, rounds) = (per_round.iter().filter(|r| holds(**r)).count(), per_round.len());
    match (holds(ratio), held) {
        (false, 0) => f.decide(false, format!("{reason}; in none of {rounds} rounds")),
        (true, n) if n == rounds => f.decide(true, format!("{reason}; in all {n} rounds")),
        (_, n) => f.inconclusive(Inconclusive::Noise, format!("noise: {reason}, but it holds in {n} of {rounds} rounds")),
    }
}

/// The oversubscribed runs of either selection in words, if any.
fn oversubscribed(sel: &Measured, reference: Option<&Measured>) -> Option<String> {
    let all: Vec<String> = sel
        .oversubscribed
        .iter()
        .chain(reference.into_iter().flat_map(|r| &r.oversubscribed))
        .map(|(run, o)| format!("run {run} was {o}"))
        .collect();
    (!all.is_empty()).then(|| all.join("; "))
}

/// Per-round ratios selected / reference, where both selections are one run each that ran at
/// least [`rounds::MIN_ROUNDS`] launches in the same rounds.
fn round_ratios(sel: &Measured, reference: Option<&Measured>) -> Option<Vec<f64>> {
    let (s, r) = (sel.launched.as_ref()?, reference?.launched.as_ref()?);
    rounds::paired(*r, *s)
}
