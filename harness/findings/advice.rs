//! A source's advice checked against `parlab advise`'s: a `kind: advise` spec that states
//! `expect:` (the layout a chapter says to run first, the ones it says never to run) gets a
//! finding that HOLDS when the arithmetic ranks the same layout first and refuses every
//! layout named, and FAILS naming what differs.

use super::{Finding, Inputs};
use crate::manifest::summary::Advised;
use crate::manifest::{Manifest, Status};
use crate::spec::plan::Workload;
use crate::spec::schema::Expectation;

/// One finding per experiment of each ok `kind: advise` run whose spec states an expected
/// answer, in manifest order: two experiments of one question share the run, each its finding.
pub fn findings(inp: &Inputs) -> Vec<Finding> {
    inp.list
        .iter()
        .filter_map(expected)
        .flat_map(|(m, expect, advised)| experiments(m).into_iter().map(move |name| finding(m, name, expect, advised)))
        .collect()
}

/// The experiments the run answers for: the manifest's own, then the other origins' names.
fn experiments(m: &Manifest) -> Vec<&str> {
    let mut names = vec![m.experiment.as_str()];
    for o in &m.origins {
        if !names.contains(&o.experiment.as_str()) {
            names.push(&o.experiment);
        }
    }
    names
}

/// An ok advise run with an expectation, and its advice.
fn expected(m: &Manifest) -> Option<(&Manifest, &Expectation, &Advised)> {
    let Workload::Advise { params, .. } = &m.plan.workload else { return None };
    let advised = m.summary()?.advice()?;
    (m.status() == Status::Ok && !params.expect.is_empty()).then_some((m, &params.expect, advised))
}

/// The claim in words: what the spec says the answer is.
fn claim(experiment: &str, e: &Expectation) -> String {
    let mut parts = Vec::new();
    if let Some(leader) = &e.leader {
        parts.push(format!("{leader} is the layout to run first"));
    }
    if !e.rejected.is_empty() {
        parts.push(format!("{} should not be run", e.rejected.join(", ")));
    }
    format!("For the question of `{experiment}`: {} (the answer its spec expects).", parts.join("; "))
}

fn finding(m: &Manifest, experiment: &str, e: &Expectation, advised: &Advised) -> Finding {
    let mut f = Finding::new(
        &format!("advice-{experiment}"),
        &claim(experiment, e),
        &["advice.ranked", "advice.rejected"],
        "parlab advise's arithmetic on the same model, machine and traffic: HOLDS when its first-ranked layout is expect.leader and every layout of expect.rejected is refused; FAILS otherwise",
    );
    let run = m.run_id.short();
    // The advice run is what the finding rests on, whatever the expectation names.
    f.test.runs.push(run.to_string());
    let mut differs = Vec::new();
    if let Some(leader) = &e.leader {
        // A layout the advice did not rank has no rank (0 would read as above the first).
        let rank = rank_of(advised, leader);
        if let Some(rank) = rank {
            f.number(&format!("rank of {leader}"), rank as f64, "", &[run]);
        }
        match (advised.ranked.first(), rank) {
            (Some(first), _) if first == leader => f.notes.push(format!("{leader} ranks first")),
            (Some(first), Some(rank)) => differs.push(format!("{first} ranks first, {leader} ranks {rank}")),
            (Some(first), None) => differs.push(format!("{first} ranks first, {leader} is not ranked{}", refusal(advised, leader))),
            (None, _) => differs.push("no layout can run".into()),
        }
    }
    for label in &e.rejected {
        match advised.rejected.iter().find(|r| &r.label == label) {
            Some(r) => f.notes.push(format!("{label} refused: {}", r.why)),
            None => differs.push(format!("{label} is not refused{}", ranked_at(advised, label))),
        }
    }
    let reason = if differs.is_empty() {
        "the arithmetic gives the expected answer".to_string()
    } else {
        format!("it differs: {}", differs.join("; "))
    };
    f.decide(differs.is_empty(), reason)
}

/// ` (refused: why)` when the advice refused `label`.
fn refusal(advised: &Advised, label: &str) -> String {
    advised.rejected.iter().find(|r| r.label == label).map(|r| format!(" (refused: {})", r.why)).unwrap_or_default()
}

/// `label`'s place in the advice's ranking, 1 for the first; None when it is not ranked.
fn rank_of(advised: &Advised, label: &str) -> Option<usize> {
    advised.ranked.iter().position(|l| l == label).map(|i| i + 1)
}

/// ` (it ranks N)` when the advice ranked `label`; ` (no such layout)` when it has none.
fn ranked_at(advised: &Advised, label: &str) -> String {
    match rank_of(advised, label) {
        Some(rank) => format!(" (it ranks {rank})"),
        None => " (no such layout on this machine)".into(),
    }
}
