//! Two runs compared at one moment: launch r of each ran in round r of one `parlab run`,
//! seconds apart, so a machine that changes speed between rounds (these VMs switch regimes up
//! to 2.8× apart every 5–15 s) moves both figures of a round together and their ratio keeps
//! the difference between the runs. One launch each is two moments, which a regime can decide.

use super::Side;
use crate::report::facts::DecodeRow;

/// Fewest launches in shared rounds before two runs' per-round ratios count.
pub const MIN_ROUNDS: usize = 3;

/// Per-round ratios `other / reference` of two decode runs' prefill medians, when both ran at
/// least [`MIN_ROUNDS`] launches in one `parlab run` (their spans overlap); None otherwise.
pub fn prefill_ratios(reference: &DecodeRow, other: &DecodeRow) -> Option<Vec<f64>> {
    let (r, o) = (&reference.rounds, &other.rounds);
    let together = r.span.0 <= o.span.1 && o.span.0 <= r.span.1;
    let shared = r.prefill.len().min(o.prefill.len());
    (together && shared >= MIN_ROUNDS).then(|| r.prefill.iter().zip(&o.prefill).map(|(a, b)| b / a).collect())
}

/// The side of the reference's range that `other`'s median lies on ([`super::side`]), kept only
/// where every round agrees: `Above` (other shorter) needs every ratio below 1, `Below` every
/// ratio above 1; without ratios the range alone decides.
pub fn agreed_side(range: Side, ratios: Option<&[f64]>) -> Side {
    let Some(ratios) = ratios else { return range };
    match range {
        Side::Above if ratios.iter().all(|r| *r < 1.0) => Side::Above,
        Side::Below if ratios.iter().all(|r| *r > 1.0) => Side::Below,
        _ => Side::Straddles,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_stands_only_where_every_round_agrees() {
        assert_eq!(agreed_side(Side::Above, None), Side::Above);
        assert_eq!(agreed_side(Side::Above, Some(&[0.9, 0.95, 0.8])), Side::Above);
        assert_eq!(agreed_side(Side::Above, Some(&[0.9, 1.05, 0.8])), Side::Straddles);
        assert_eq!(agreed_side(Side::Below, Some(&[1.2, 1.1, 1.3])), Side::Below);
        assert_eq!(agreed_side(Side::Below, Some(&[0.7, 0.8, 0.9])), Side::Straddles);
        assert_eq!(agreed_side(Side::Straddles, Some(&[0.5, 0.5, 0.5])), Side::Straddles);
    }
}
