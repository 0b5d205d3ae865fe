//! Two runs compared at one moment: launch r of each ran in round r of one `parlab run`,
//! seconds apart, so a machine that changes speed between rounds (these VMs switch regimes up
//! to 2.8× apart every 5–15 s) moves both figures of a round together and their ratio keeps
//! the difference between the runs. One launch each is two moments, which a regime can decide.

use super::Side;
use crate::report::facts::{DecodeRow, Rounds};

pub use crate::manifest::rounds::{Launched, MIN_ROUNDS};

/// Per-round ratios `other / reference`, when both runs ran at least [`MIN_ROUNDS`] launches in
/// one `parlab run` (their spans overlap).
pub fn paired(reference: Launched, other: Launched) -> Option<Vec<f64>> {
    crate::manifest::rounds::in_rounds(reference, other).map(|rounds| rounds.iter().map(|(x, y)| y / x).collect())
}

/// [`paired`] for two decode runs' figure (`figure` picks it).
pub fn ratios(reference: &DecodeRow, other: &DecodeRow, figure: fn(&Rounds) -> &[f64]) -> Option<Vec<f64>> {
    let (r, o) = (&reference.rounds, &other.rounds);
    paired(Launched { values: figure(r), span: (&r.span.0, &r.span.1) }, Launched { values: figure(o), span: (&o.span.0, &o.span.1) })
}

/// The prefill launch by launch.
pub fn prefill(r: &Rounds) -> &[f64] {
    &r.prefill
}

/// A step's non-communication time launch by launch.
pub fn compute(r: &Rounds) -> &[f64] {
    &r.compute
}

/// The side of `threshold` every ratio lies on: `Above` all greater, `Below` all smaller, else
/// `Straddles`.
pub fn side_of(ratios: &[f64], threshold: f64) -> Side {
    if ratios.iter().all(|r| *r > threshold) {
        Side::Above
    } else if ratios.iter().all(|r| *r < threshold) {
        Side::Below
    } else {
        Side::Straddles
    }
}

/// A range's decisive side, kept only where the rounds (`rounds`: their side, said the same
/// way as `range`) agree; without rounds the range alone decides.
pub fn agreed(range: Side, rounds: Option<Side>) -> Side {
    match rounds {
        _ if range == Side::TooFew => Side::TooFew,
        Some(r) if r != range => Side::Straddles,
        _ => range,
    }
}

/// The note saying how a pair was compared: its per-round ratios, or why it had none.
pub fn note(what: &str, ratios: Option<&[f64]>) -> String {
    match ratios {
        Some(r) => {
            let listed: Vec<String> = r.iter().map(|x| format!("{x:.3}")).collect();
            format!("{what} per round: {}", listed.join(", "))
        }
        None => format!(
            "{what}: not paired by round (fewer than {MIN_ROUNDS} launches each in one `parlab run`): two moments apart, which a machine changing speed can decide"
        ),
    }
}

/// What one comparison of a paired finding came to, in words: `not a test, {o} ({why})` where a
/// run was oversubscribed (it never decides), else `words` by side: `[agreed above, agreed
/// below, range straddling, one side but not in every round]`.
pub fn outcome(over: Option<super::Oversubscribed>, why: &str, agreed: Side, range: Side, words: [&str; 4]) -> String {
    let [above, below, straddles, not_every_round] = words;
    match (over, agreed, range) {
        (Some(o), ..) => format!("not a test, {o} ({why})"),
        (None, Side::Above, _) => above.into(),
        (None, Side::Below, _) => below.into(),
        (None, _, Side::Straddles) => straddles.into(),
        (None, _, Side::TooFew) => format!(
            "fewer than {} values in the measured range, which shows no spread (noise: more repetitions or launches)",
            super::MIN_RANGE_VALUES
        ),
        _ => not_every_round.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_stands_only_where_every_round_agrees() {
        assert_eq!(agreed(Side::Above, None), Side::Above);
        assert_eq!(agreed(Side::Above, Some(side_of(&[1.1, 1.05, 1.2], 1.0))), Side::Above);
        assert_eq!(agreed(Side::Above, Some(side_of(&[1.1, 0.95, 1.2], 1.0))), Side::Straddles);
        assert_eq!(agreed(Side::Below, Some(side_of(&[0.6, 0.7, 0.65], 0.707))), Side::Below);
        assert_eq!(agreed(Side::Below, Some(side_of(&[1.2, 1.1, 1.3], 1.0))), Side::Straddles);
        assert_eq!(agreed(Side::Straddles, Some(Side::Above)), Side::Straddles);
        assert_eq!(agreed(Side::TooFew, Some(Side::Above)), Side::TooFew, "the range cannot agree with the rounds");
        assert!(outcome(None, "", Side::TooFew, Side::TooFew, ["a", "b", "c", "d"]).starts_with("fewer than 3 values"));
    }
}
