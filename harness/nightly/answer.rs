//! A run's answer tonight against the baseline's, graded as `audit` grades a layout against
//! the reference: tokens that moved at a step whose float32 top-2 margin is within
//! [`crate::audit::FRAGILE_FACTOR`] × the logit drift that reordering is known to cause moved at
//! a near-tie (reordering alone can flip it; a half-precision run's drift from the float32
//! reference is its rounding's, so its threshold is wider), and only a move at a robust step is
//! a changed answer (exit 3). The drift allowed is the baseline run's (its layout's, when its
//! answer was accepted) and that of tonight's other runs of the answer that kept their
//! reference's tokens: never tonight's run's own, so a run cannot excuse its own move by
//! drifting. An ok run that recorded a whole answer in the baseline and none, or a cut-short
//! one, tonight is a finding of its own.

use crate::manifest::answer::Answer;
use crate::manifest::Manifest;
use serde::Serialize;
use std::collections::BTreeMap;

/// How a baseline run's answer compares tonight (serialised `same`, `changed`, `near_tie`,
/// `missing`, `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// The same tokens.
    Same,
    /// Other tokens from a robust step on: the answer changed.
    Changed,
    /// Other tokens from a step whose top-2 margin is within the drift: not a change.
    NearTie,
    /// The baseline recorded a whole answer, tonight's ok run none or one cut short.
    Missing,
    /// No tokens to compare (the baseline recorded no whole answer).
    None,
}

crate::named!(AnswerOutcome { Same => "same", Changed => "changed", NearTie => "near_tie", Missing => "missing", None => "none" });

/// Where tonight's tokens left the baseline's, and the margin and drift that grade it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AnswerMove {
    /// The first step (over sequences) whose token differs.
    pub step: usize,
    /// The smallest float32 reference top-2 margin either night recorded at that step; None
    /// where neither recorded per-step margins.
    pub margin: Option<f64>,
    /// The drift reordering is known to cause: the larger of the baseline run's largest logit
    /// drift from its reference before that step (and before it left the reference) and the
    /// largest drift of tonight's other runs of the answer that kept their reference's tokens.
    pub drift: f64,
}

/// Tonight's answer of a run (`after`) against the baseline's (`before`), the drift allowed
/// from `peers`.
pub fn grade(before: &Manifest, after: &Manifest, peers: &Peers) -> (AnswerOutcome, Option<AnswerMove>) {
    // An answer that holds no whole token list is none at all (not a change from step 0, nor
    // from where a cut-short list ends).
    let Some(b) = whole(before) else { return (AnswerOutcome::None, None) };
    let Some(a) = whole(after) else { return (AnswerOutcome::Missing, None) };
    let Some(step) = first_difference(&b.tokens, &a.tokens) else { return (AnswerOutcome::Same, None) };
    let margin = [b, a].iter().filter_map(|x| x.exactness.steps.get(step).map(|s| s.reference_margin)).reduce(f64::min);
    let drift = crate::audit::drift_before(&b.exactness, Some(step)).max(peers.besides(after));
    let moved = AnswerMove { step, margin, drift };
    let outcome =
        if margin.is_some_and(|m| m < crate::audit::FRAGILE_FACTOR * drift) { AnswerOutcome::NearTie } else { AnswerOutcome::Changed };
    (outcome, Some(moved))
}

/// A run's answer, where it holds every token list whole (as `audit` grades one).
fn whole(m: &Manifest) -> Option<&Answer> {
    m.answer().filter(|x| crate::audit::incomplete(m, x).is_none())
}

/// Why an ok run has no answer to compare: none recorded, or one cut short.
pub fn missing_why(m: &Manifest) -> String {
    match m.answer() {
        Some(a) => crate::audit::incomplete(m, a).unwrap_or_else(|| "its answer is whole".into()),
        None => "it recorded no answer".into(),
    }
}

/// The largest logit drift of each run of an answer identity tonight that kept its reference's
/// tokens whole: how far reordering moves that answer's logits tonight.
#[derive(Debug, Default)]
pub struct Peers {
    kept: BTreeMap<String, Vec<(String, f64)>>,
}

impl Peers {
    /// The runs of `manifests` that kept their reference's tokens, by answer identity.
    pub fn of(manifests: &[Manifest]) -> Self {
        let mut kept: BTreeMap<String, Vec<(String, f64)>> = BTreeMap::new();
        for m in manifests.iter().filter(|m| m.status() == crate::manifest::Status::Ok) {
            if let Some(a) = whole(m).filter(|a| crate::audit::kept_recorded(a)) {
                kept.entry(m.answer_id.to_string()).or_default().push((m.run_id.to_string(), a.exactness.max_logit_diff));
            }
        }
        Peers { kept }
    }

    /// The largest drift among the runs of `m`'s answer other than `m` (0 where there are none).
    fn besides(&self, m: &Manifest) -> f64 {
        let runs = self.kept.get(m.answer_id.as_str()).map_or(&[][..], Vec::as_slice);
        runs.iter().filter(|(run, _)| run != m.run_id.as_str()).map(|(_, d)| *d).fold(0.0, f64::max)
    }
}

/// The first step at which the two nights' token lists (each distinct list of the run) differ:
/// for every list one night has and the other not, the longest prefix it shares with any list
/// of the other night; the earliest of those. None where both nights hold the same lists.
fn first_difference(before: &[Vec<u32>], after: &[Vec<u32>]) -> Option<usize> {
    let shared = |l: &[u32], others: &[Vec<u32>]| others.iter().map(|o| common_prefix(l, o)).max().unwrap_or(0);
    let new = after.iter().filter(|l| !before.contains(l)).map(|l| shared(l, before));
    let gone = before.iter().filter(|l| !after.contains(l)).map(|l| shared(l, after));
    new.chain(gone).min()
}

/// How many leading tokens `a` and `b` share.
fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The line that says why a moved answer is not a changed one.
pub fn moved_line(run: &str, outcome: AnswerOutcome, m: &AnswerMove) -> String {
    let why = match outcome {
        AnswerOutcome::NearTie => format!(
            "a near-tie (float32 top-2 margin {} below {}× the drift {:.3e}: reordering alone can flip it), not a change",
            margin_words(m.margin),
            crate::audit::FRAGILE_FACTOR,
            m.drift
        ),
        _ => format!("float32 top-2 margin {}, drift {:.3e}", margin_words(m.margin), m.drift),
    };
    format!("ANSWER MOVED {run}: tokens differ from the baseline's from step {}: {why}", m.step)
}

/// A recorded margin in three significant digits, or that none was recorded.
fn margin_words(margin: Option<f64>) -> String {
    margin.map_or_else(|| "not recorded".to_string(), |x| format!("{x:.3e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_the_earliest_over_the_lists_either_night_lacks() {
        assert_eq!(first_difference(&[vec![1, 2, 3]], &[vec![1, 2, 3]]), None);
        assert_eq!(first_difference(&[vec![1, 2, 3], vec![1, 5, 6]], &[vec![1, 2, 4], vec![1, 7, 6]]), Some(1));
        assert_eq!(first_difference(&[vec![1, 2, 3]], &[vec![1, 2]]), Some(2));
        // A second list tonight that leaves the baseline's at step 1: step 1, not step 0.
        assert_eq!(first_difference(&[vec![1, 2]], &[vec![1, 2], vec![1, 3]]), Some(1));
        assert_eq!(first_difference(&[vec![1, 2], vec![1, 3]], &[vec![1, 3], vec![1, 2]]), None, "the same lists");
    }
}
