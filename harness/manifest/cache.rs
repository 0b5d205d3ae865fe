//! The run cache: a manifest stands for what this build would measure when it is ok and its
//! measuring-code digest is this build's ([`MEASURING_DIGEST`]); the run identity in its
//! name already covers the spec, the model config and the weights.

use super::{Manifest, Outcome, Status, MEASURING_DIGEST};
use std::collections::BTreeSet;

/// Whether `m` is ok and was measured by this build's measuring code.
pub fn fresh(m: &Manifest) -> bool {
    m.status() == Status::Ok && m.parlab.measuring == MEASURING_DIGEST
}

/// Whether `stored` already records the NOT_RUN decision `decided`: the same reason (read
/// without its probes' cache labels, [`crate::gates::unlabelled`]), plan, origins, machine and
/// measuring code. Rewriting it would move only its dates and commit, and with them the
/// register's, so a rerun on an unchanged machine leaves it as it is.
pub fn same_not_run(stored: &Manifest, decided: &Manifest) -> bool {
    let (Outcome::NotRun { reason: was }, Outcome::NotRun { reason: now }) = (&stored.outcome, &decided.outcome) else {
        return false;
    };
    if crate::gates::unlabelled(was) != crate::gates::unlabelled(now) {
        return false;
    }
    let mut again = decided.clone();
    again.outcome = stored.outcome.clone();
    again.parlab.commit.clone_from(&stored.parlab.commit);
    again.started_at.clone_from(&stored.started_at);
    again.finished_at.clone_from(&stored.finished_at);
    again == *stored
}

/// The register's caveat for ok, launched runs measured by other measuring code, if any.
pub fn older_build_caveat(list: &[Manifest]) -> Option<String> {
    let older: Vec<&Manifest> =
        list.iter().filter(|m| m.status() == Status::Ok && m.kind.launches_ranks() && m.parlab.measuring != MEASURING_DIGEST).collect();
    if older.is_empty() {
        return None;
    }
    let names: BTreeSet<&str> = older.iter().map(|m| m.experiment.as_str()).collect();
    let digests: BTreeSet<String> = older
        .iter()
        .map(|m| match m.parlab.measuring.as_str() {
            "" => "none recorded".to_string(),
            d => crate::identity::short(d).to_string(),
        })
        .collect();
    Some(format!(
        "{} runs ({}) were measured by other measuring code than this build's (their measuring digest: {}); `parlab run` re-measures them.",
        older.len(),
        names.into_iter().collect::<Vec<_>>().join(", "),
        digests.into_iter().collect::<Vec<_>>().join(", ")
    ))
}
