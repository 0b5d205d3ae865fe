//! The stats object of every summary: median, min, max, p99 and n of a figure's samples.

use serde::{Deserialize, Serialize};

/// `{"median", "min", "max", "p99", "n"}` of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Stats {
    /// The middle value (mean of the two middle values when n is even).
    pub median: f64,
    /// The smallest value.
    pub min: f64,
    /// The largest value.
    pub max: f64,
    /// The nearest-rank 99th percentile: the ceil(0.99 n)-th smallest value.
    pub p99: f64,
    /// Number of samples.
    pub n: u64,
}

impl Stats {
    /// Stats of `values`; None when there are none (NaNs are dropped).
    pub fn of(values: &[f64]) -> Option<Stats> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
        Some(Stats { median, min: v[0], max: v[n - 1], p99: v[rank - 1], n: n as u64 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_min_max_p99() {
        let s = Stats::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.p99, s.n), (2.5, 1.0, 4.0, 4.0, 4));
        let many: Vec<f64> = (1..=200).map(f64::from).collect();
        assert_eq!(Stats::of(&many).unwrap().p99, 198.0);
        assert!(Stats::of(&[]).is_none());
    }
}
