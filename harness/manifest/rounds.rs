//! Two runs' launches paired round by round: launch r of each ran in round r of one `parlab
//! run`, seconds apart, so a machine that changes speed between rounds (these VMs switch
//! regimes up to 2.8× apart every 5–15 s) moves both figures of a round together. One launch
//! each is two moments, which a regime can decide.

use super::Manifest;

/// Fewest launches in shared rounds before two runs' rounds are paired.
pub const MIN_ROUNDS: usize = 3;

/// One run's values of a figure launch by launch, with when its launches ran.
#[derive(Debug, Clone, Copy)]
pub struct Launched<'a> {
    /// One value per launch, in launch order.
    pub values: &'a [f64],
    /// When its first launch started and its last one ended (RFC 3339, UTC).
    pub span: (&'a str, &'a str),
}

impl<'a> Launched<'a> {
    /// `m`'s values of `figure` launch by launch (None where it recorded none, or not one for
    /// every launch: [`super::LaunchStats::in_launch_order`]).
    pub fn of(m: &'a Manifest, figure: &str) -> Option<Self> {
        let values = m.launches()?.in_launch_order(figure)?;
        Some(Launched { values, span: (&m.started_at, &m.finished_at) })
    }
}

/// The two runs' values round by round, `(reference, other)`, when both ran at least
/// [`MIN_ROUNDS`] launches in one `parlab run` (their spans overlap): as many rounds as the
/// one of fewer launches ran (launch r of each ran in round r, so the first rounds pair).
pub fn in_rounds(reference: Launched, other: Launched) -> Option<Vec<(f64, f64)>> {
    let (r, o) = (reference.span, other.span);
    let together = r.0 <= o.1 && o.0 <= r.1;
    let (a, b) = (reference.values, other.values);
    (together && a.len().min(b.len()) >= MIN_ROUNDS).then(|| a.iter().copied().zip(b.iter().copied()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_pair_only_with_enough_launches_in_overlapping_spans() {
        let span = ("2026-12-06T10:00:00Z", "2026-12-06T10:05:00Z");
        let later = ("2026-12-06T10:06:00Z", "2026-12-06T10:09:00Z");
        let three = [1.0, 2.0, 3.0];
        let launched = |values, span| Launched { values, span };
        assert_eq!(in_rounds(launched(&three, span), launched(&[4.0, 5.0, 6.0], span)), Some(vec![(1.0, 4.0), (2.0, 5.0), (3.0, 6.0)]));
        assert_eq!(in_rounds(launched(&three, span), launched(&three, later)), None, "two `parlab run`s");
        assert_eq!(in_rounds(launched(&three, span), launched(&[1.0, 2.0], span)), None, "two launches");
    }

    #[test]
    fn a_figure_that_a_launch_gave_no_value_is_not_paired_by_round() {
        use crate::manifest::{LaunchStatistic, LaunchStats};
        let figures = [("step".to_string(), vec![1.0, 2.0, 3.0]), ("prefill".to_string(), vec![1.0, 3.0])].into();
        let stats = LaunchStats { count: 3, statistic: LaunchStatistic::Median, figures };
        assert_eq!(stats.in_launch_order("step"), Some(&[1.0, 2.0, 3.0][..]));
        assert_eq!(stats.in_launch_order("prefill"), None, "launch 3's value would pair with round 2");
        assert_eq!(stats.in_launch_order("compute"), None);
    }
}
