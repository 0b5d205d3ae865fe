//! A run's answer tonight against the baseline's, graded as `audit` grades a layout against
//! the reference: tokens that moved at a step whose float32 top-2 margin is within
//! [`crate::audit::FRAGILE_FACTOR`] × the logit drift either night recorded moved at a near-tie
//! (float32 reordering alone can flip it), tokens of a half-precision run are the precision
//! audit's to grade, and only a move at a robust step is a changed answer (exit 3).

use crate::manifest::Manifest;
use serde::Serialize;

/// How a baseline run's answer compares tonight (serialised `same`, `changed`, `near_tie`,
/// `half_precision`, `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerOutcome {
    /// The same tokens.
    Same,
    /// Other tokens from a robust step on: the answer changed.
    Changed,
    /// Other tokens from a step whose top-2 margin is within the drift: not a change.
    NearTie,
    /// Other tokens of a bfloat16 or float16 run: graded by the precision audit, not here.
    HalfPrecision,
    /// No tokens to compare (either night recorded no answer).
    None,
}

crate::named!(AnswerOutcome {
    Same => "same",
    Changed => "changed",
    NearTie => "near_tie",
    HalfPrecision => "half_precision",
    None => "none",
});

/// Where tonight's tokens left the baseline's, and the margin and drift that grade it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AnswerMove {
    /// The first step (over sequences) whose token differs.
    pub step: usize,
    /// The smallest float32 reference top-2 margin either night recorded at that step; None
    /// where neither recorded per-step margins.
    pub margin: Option<f64>,
    /// The larger of the two nights' largest logit drift from the reference.
    pub drift: f64,
}

/// Tonight's answer of a run (`after`) against the baseline's (`before`).
pub fn grade(before: &Manifest, after: &Manifest) -> (AnswerOutcome, Option<AnswerMove>) {
    let (Some(b), Some(a)) = (before.answer(), after.answer()) else { return (AnswerOutcome::None, None) };
    let Some(step) = first_difference(&b.tokens, &a.tokens) else { return (AnswerOutcome::Same, None) };
    let margin = [b, a].iter().filter_map(|x| x.exactness.steps.get(step).map(|s| s.reference_margin)).reduce(f64::min);
    let drift = b.exactness.max_logit_diff.max(a.exactness.max_logit_diff);
    let moved = AnswerMove { step, margin, drift };
    let outcome = if in_half_precision(before) || in_half_precision(after) {
        AnswerOutcome::HalfPrecision
    } else if margin.is_some_and(|m| m < crate::audit::FRAGILE_FACTOR * drift) {
        AnswerOutcome::NearTie
    } else {
        AnswerOutcome::Changed
    };
    (outcome, Some(moved))
}

/// The first step at which the two nights' token lists differ (a list that ends early differs
/// where it ends; another count of distinct lists differs at step 0).
fn first_difference(before: &[Vec<u32>], after: &[Vec<u32>]) -> Option<usize> {
    if before == after {
        return None;
    }
    if before.len() != after.len() {
        return Some(0);
    }
    before
        .iter()
        .zip(after)
        .filter(|(b, a)| b != a)
        .map(|(b, a)| b.iter().zip(a.iter()).position(|(x, y)| x != y).unwrap_or(b.len().min(a.len())))
        .min()
}

fn in_half_precision(m: &Manifest) -> bool {
    matches!(&m.plan.workload, crate::spec::plan::Workload::Decode { dtype, .. } if *dtype != crate::spec::schema::Dtype::Float32)
}

/// The line that says why a moved answer is not a changed one.
pub fn moved_line(run: &str, outcome: AnswerOutcome, m: &AnswerMove) -> String {
    let margin = m.margin.map_or_else(|| "not recorded".to_string(), |x| format!("{x:.3}"));
    let why = match outcome {
        AnswerOutcome::NearTie => format!(
            "a near-tie (float32 top-2 margin {margin} below {}× the drift {:.3}: reordering alone can flip it), not a change",
            crate::audit::FRAGILE_FACTOR,
            m.drift
        ),
        AnswerOutcome::HalfPrecision => {
            "half precision's rounding (graded by `parlab audit`'s precision audit against its float32 twin), not a change".into()
        }
        _ => format!("float32 top-2 margin {margin}, drift {:.3}", m.drift),
    };
    format!("ANSWER MOVED {run}: tokens differ from the baseline's from step {}: {why}", m.step)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_difference_is_the_earliest_over_sequences() {
        assert_eq!(first_difference(&[vec![1, 2, 3]], &[vec![1, 2, 3]]), None);
        assert_eq!(first_difference(&[vec![1, 2, 3], vec![1, 5, 6]], &[vec![1, 2, 4], vec![1, 7, 6]]), Some(1));
        assert_eq!(first_difference(&[vec![1, 2, 3]], &[vec![1, 2]]), Some(2));
        assert_eq!(first_difference(&[vec![1, 2]], &[vec![1, 2], vec![1, 3]]), Some(0));
    }
}
