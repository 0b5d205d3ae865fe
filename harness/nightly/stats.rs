//! The statistics of a night's verdicts: Yuen's trimmed (Welch) t on the logarithms of
//! per-launch values (Yuen 1974, Welch 1947), Benjamini–Hochberg (1995), a scaled median absolute deviation for a figure's
//! night-to-night noise; Mann–Whitney U (Mann and Whitney 1947) with the smallest p-value two
//! sample sizes can reach (asv's power guard) for the history's change points.

/// Samples up to this combined size get the exact permutation distribution of U.
pub const EXACT_MAX_N: usize = 20;

/// A two-sided Mann–Whitney U test of `a` against `b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UTest {
    /// U of the first sample: pairs (x in a, y in b) with x > y, ties counting one half.
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` is exact (permutation distribution) or the normal approximation.
    pub exact: bool,
}

/// Midranks (1-based) of `values` in their sorted order, and the sizes of the tie groups.
fn midranks(values: &[f64]) -> (Vec<f64>, Vec<usize>) {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| values[i].total_cmp(&values[j]));
    let mut ranks = vec![0.0; values.len()];
    let mut ties = Vec::new();
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && values[order[end]] == values[order[start]] {
            end += 1;
        }
        let rank = (start + end + 1) as f64 / 2.0;
        order[start..end].iter().for_each(|&i| ranks[i] = rank);
        ties.push(end - start);
        start = end;
    }
    (ranks, ties)
}

/// Mann–Whitney U of `a` against `b` (NaNs dropped); None when either sample is empty.
///
/// Exact (the permutation distribution of the rank sum, ties as midranks) when the two samples
/// together have at most [`EXACT_MAX_N`] values; otherwise the normal approximation with the
/// tie correction of the variance and a continuity correction of one half.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<UTest> {
    let a: Vec<f64> = a.iter().copied().filter(|x| !x.is_nan()).collect();
    let b: Vec<f64> = b.iter().copied().filter(|x| !x.is_nan()).collect();
    let (n1, n2) = (a.len(), b.len());
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let all: Vec<f64> = a.iter().chain(&b).copied().collect();
    let (ranks, ties) = midranks(&all);
    let r1: f64 = ranks[..n1].iter().sum();
    let u = r1 - (n1 * (n1 + 1)) as f64 / 2.0;
    if n1 + n2 <= EXACT_MAX_N {
        return Some(UTest { u, p: exact_p(&ranks, n1, r1), exact: true });
    }
    let (n1f, n2f, n) = (n1 as f64, n2 as f64, (n1 + n2) as f64);
    let tie_sum: f64 = ties.iter().map(|&t| (t * t * t - t) as f64).sum();
    let variance = n1f * n2f / 12.0 * ((n + 1.0) - tie_sum / (n * (n - 1.0)));
    if variance <= 0.0 {
        return Some(UTest { u, p: 1.0, exact: false });
    }
    let z = (((u - n1f * n2f / 2.0).abs() - 0.5).max(0.0)) / variance.sqrt();
    Some(UTest { u, p: erfc(z / std::f64::consts::SQRT_2).min(1.0), exact: false })
}

/// Two-sided exact p of rank sum `r1` for the first `n1` of `ranks`: twice the smaller tail
/// of the distribution of the sum of `n1` ranks drawn without replacement.
fn exact_p(ranks: &[f64], n1: usize, r1: f64) -> f64 {
    // Doubled midranks are integers; ways[k][s]: subsets of k ranks with doubled sum s.
    let doubled: Vec<usize> = ranks.iter().map(|r| (r * 2.0).round() as usize).collect();
    let total: usize = doubled.iter().sum();
    let mut ways = vec![vec![0.0f64; total + 1]; n1 + 1];
    ways[0][0] = 1.0;
    for &d in &doubled {
        for k in (1..=n1).rev() {
            for s in (d..=total).rev() {
                ways[k][s] += ways[k - 1][s - d];
            }
        }
    }
    let observed = (r1 * 2.0).round() as usize;
    let all: f64 = ways[n1].iter().sum();
    let low: f64 = ways[n1][..=observed].iter().sum();
    let high: f64 = ways[n1][observed..].iter().sum();
    (2.0 * low.min(high) / all).min(1.0)
}

/// The smallest two-sided p-value a rank test of samples of sizes `n1` and `n2` can reach:
/// 2 / C(n1 + n2, n1) (asv's `is_different` uses the one-sided 1 / C(n1 + n2, min(n1, n2))).
pub fn smallest_p(n1: usize, n2: usize) -> f64 {
    if n1 == 0 || n2 == 0 {
        return 1.0;
    }
    let k = n1.min(n2);
    let mut c = 1.0f64;
    for i in 0..k {
        c = c * (n1 + n2 - i) as f64 / (i + 1) as f64;
    }
    (2.0 / c).min(1.0)
}

/// Benjamini–Hochberg adjusted p-values (q-values), in the order of `p`: q(i) is the smallest
/// m p(j) / j over the j-th smallest p-values with j at or above i's rank, at most 1.
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut q = vec![1.0; m];
    let mut running = 1.0f64;
    for (rank, &i) in order.iter().enumerate().rev() {
        running = running.min(p[i] * m as f64 / (rank + 1) as f64);
        q[i] = running.min(1.0);
    }
    q
}

/// The complementary error function (Numerical Recipes' `erfcc`: fractional error below 1.2e-7).
pub fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07 + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Yuen's two-sample trimmed t-test of `ln b` against `ln a` (Welch's t on trimmed means with
/// winsorised variances and Welch–Satterthwaite degrees of freedom).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TTest {
    /// t of the difference of trimmed mean logarithms, tonight minus baseline.
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom of the values kept after trimming.
    pub df: f64,
    /// Two-sided p-value from Student's t distribution with `df` degrees of freedom.
    pub p: f64,
    /// The launches trimmed from each end of the baseline's and of tonight's values.
    pub trimmed: (usize, usize),
}

/// The fewest values a side needs for [`yuen_log`]: a variance from at least two degrees of freedom.
pub const MIN_PER_SIDE: usize = 3;

/// A standard error of the difference of log means below which the launches have no spread
/// (a relative spread of 1e-9, far below any clock's; float residue of equal values lies under it).
const DEGENERATE_SE: f64 = 1e-9;

/// The fraction trimmed from each end of a night's launches: one launch of 5 to 9, two of 10 to 14;
/// none of 3 or 4, where the test is Welch's t itself.
pub const TRIM: f64 = 0.2;

/// How many of a night's `n` values [`TRIM`] trims from each end.
pub fn trim_count(n: usize) -> usize {
    (TRIM * n as f64).floor() as usize
}

/// One night's sorted logs reduced for Yuen's test: trimmed mean, the squared standard error
/// `d` and the values kept `h`.
fn trimmed(x: &mut [f64]) -> (f64, f64, usize) {
    x.sort_by(f64::total_cmp);
    let n = x.len();
    let g = trim_count(n);
    let h = n - 2 * g;
    let mean = x[g..n - g].iter().sum::<f64>() / h as f64;
    let winsorised: Vec<f64> = x.iter().map(|v| v.clamp(x[g], x[n - 1 - g])).collect();
    let wmean = winsorised.iter().sum::<f64>() / n as f64;
    let ss: f64 = winsorised.iter().map(|v| (v - wmean).powi(2)).sum();
    (mean, ss / (h * (h - 1)) as f64, h)
}

/// Yuen's trimmed t-test (Yuen 1974) on the logarithms of `a` (baseline) and `b` (tonight): a
/// ratio of geometric means, so a 1.5× slowdown is the same effect for a microsecond and a
/// second, with [`TRIM`] of each night's launches trimmed from each end so that one disturbed
/// launch neither hides nor fakes a change; with 3 or 4 launches nothing is trimmed and it is
/// Welch's t (Welch 1947). None when a side has fewer than [`MIN_PER_SIDE`] positive finite values.
pub fn yuen_log(a: &[f64], b: &[f64]) -> Option<TTest> {
    let logs = |v: &[f64]| usable(v).iter().map(|x| x.ln()).collect::<Vec<f64>>();
    let (mut a, mut b) = (logs(a), logs(b));
    if a.len() < MIN_PER_SIDE || b.len() < MIN_PER_SIDE {
        return None;
    }
    let ((ma, da, ha), (mb, db, hb)) = (trimmed(&mut a), trimmed(&mut b));
    let se = (da + db).sqrt();
    if se <= DEGENERATE_SE {
        // No spread left after winsorising (launch medians that repeat, as a timer's ticks do):
        // a t would be infinite whatever the difference. The ranks still say how surprising the
        // two nights' launches are (a night of 4.0, 4.0, …, 4.5 against 4.5, 4.5, …, 4.0 is not).
        let df = (ha + hb - 2) as f64;
        let p = if ma == mb { 1.0 } else { mann_whitney(&a, &b).map_or(1.0, |u| u.p) };
        let t = if ma == mb { 0.0 } else { (mb - ma).signum() * f64::INFINITY };
        return Some(TTest { t, df, p, trimmed: (trim_count(a.len()), trim_count(b.len())) });
    }
    let df = (da + db).powi(2) / (da * da / (ha - 1) as f64 + db * db / (hb - 1) as f64);
    let t = (mb - ma) / se;
    Some(TTest { t, df, p: student_t_two_sided(t, df), trimmed: (trim_count(a.len()), trim_count(b.len())) })
}

/// Two-sided p of Student's t with `df` degrees of freedom: I_{df/(df+t²)}(df/2, 1/2).
pub fn student_t_two_sided(t: f64, df: f64) -> f64 {
    if !t.is_finite() {
        return 0.0;
    }
    incomplete_beta(df / 2.0, 0.5, df / (df + t * t)).clamp(0.0, 1.0)
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients: about 15 significant digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let sum = G[1..].iter().enumerate().fold(G[0], |s, (i, g)| s + g / (x + i as f64 + 1.0));
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

/// The regularised incomplete beta function I_x(a, b) (continued fraction, modified Lentz).
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of I_x(a, b) (Numerical Recipes' `betacf`).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    d = 1.0 / if d.abs() < TINY { TINY } else { d };
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        for aa in [m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))] {
            d = 1.0 + aa * d;
            d = 1.0 / if d.abs() < TINY { TINY } else { d };
            c = 1.0 + aa / c;
            c = if c.abs() < TINY { TINY } else { c };
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// The expected range of n independent standard normal values (the control charts' d2) for
/// n = 3 and 4: a range over d2(n) estimates their standard deviation.
const RANGE_D2: [(usize, f64); 2] = [(3, 1.693), (4, 2.059)];

/// A night's launch-to-launch spread of log values, as a standard deviation. Where the t-test
/// trims no launch (3 or 4 launches, [`TRIM`]) the range over d2(n), from every launch as the
/// test's variance is: the scaled MAD of 3 values is the distance from the median to its
/// nearer neighbour, often near 0, which made the floor of the quieter of two nights no floor
/// at all (in `nightly::band`'s seeded simulation of unchanged nights of 3 independent normal
/// launches, the floor alone is left by over 25 % of them with the MAD, under 10 % with the
/// range). From 5 launches on
/// the scaled MAD, robust to the launch the test trims. None below 3 values.
pub fn launch_spread(logs: &[f64]) -> Option<f64> {
    match RANGE_D2.iter().find(|(n, _)| *n == logs.len()) {
        Some((_, d2)) => {
            let (lo, hi) = logs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            Some((hi - lo) / d2)
        }
        None if logs.len() >= MIN_PER_SIDE => scaled_mad(logs),
        None => None,
    }
}

/// How [`launch_spread`] estimates from `n` values, in words.
pub fn spread_words(n: usize) -> &'static str {
    if RANGE_D2.iter().any(|(m, _)| *m == n) {
        "range / d2"
    } else {
        "scaled MAD"
    }
}

/// The median absolute deviation of `v` scaled by 1.4826 (a standard deviation for normal
/// data, robust to a few wild values); None when `v` is empty.
pub fn scaled_mad(v: &[f64]) -> Option<f64> {
    let m = median(v)?;
    let deviations: Vec<f64> = v.iter().map(|x| (x - m).abs()).collect();
    median(&deviations).map(|d| 1.4826 * d)
}

/// The median of `v` (NaNs dropped); None when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    crate::manifest::stats::Stats::of(v).map(|s| s.median)
}

/// The values a night's figure can be judged on: positive and finite (a time, rate or
/// bandwidth; a launch that recorded 0 or NaN measured nothing).
pub fn usable(v: &[f64]) -> Vec<f64> {
    v.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect()
}

/// The median of [`usable`] values.
pub fn usable_median(v: &[f64]) -> Option<f64> {
    median(&usable(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_and_normal_p_values_match_known_tables() {
        // Fully separated 3 vs 3: the most extreme of C(6,3) = 20 arrangements, two-sided 0.1.
        let t = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!(t.exact && t.u == 0.0 && (t.p - 0.1).abs() < 1e-12, "{t:?}");
        assert!((smallest_p(3, 3) - 0.1).abs() < 1e-12);
        // Identical samples: no evidence at all.
        assert_eq!(mann_whitney(&[1.0; 5], &[1.0; 5]).unwrap().p, 1.0);
        // 15 vs 15 interleaved except a shift: normal approximation close to exact.
        let a: Vec<f64> = (0..15).map(f64::from).collect();
        let b: Vec<f64> = (0..15).map(|i| f64::from(i) + 5.5).collect();
        let normal = mann_whitney(&a, &b).unwrap();
        assert!(!normal.exact && normal.p > 0.005 && normal.p < 0.05, "{normal:?}");
        assert!((erfc(0.0) - 1.0).abs() < 1e-7 && (erfc(1.959_964 / std::f64::consts::SQRT_2) - 0.05).abs() < 1e-6);
    }

    #[test]
    fn the_exact_p_with_ties_matches_brute_force_enumeration() {
        let (a, b) = ([1.0, 1.0, 2.0, 2.0, 5.0], [2.0, 3.0, 3.0, 4.0, 5.0, 6.0]);
        let all: Vec<f64> = a.iter().chain(&b).copied().collect();
        let (ranks, _) = midranks(&all);
        let observed: f64 = ranks[..a.len()].iter().sum();
        let (mut low, mut high, mut total) = (0u32, 0u32, 0u32);
        for mask in 0u32..(1 << all.len()) {
            if mask.count_ones() as usize != a.len() {
                continue;
            }
            let sum: f64 = (0..all.len()).filter(|i| mask >> i & 1 == 1).map(|i| ranks[i]).sum();
            total += 1;
            low += u32::from(sum <= observed + 1e-9);
            high += u32::from(sum >= observed - 1e-9);
        }
        let brute = (2.0 * f64::from(low.min(high)) / f64::from(total)).min(1.0);
        let t = mann_whitney(&a, &b).unwrap();
        assert!(t.exact && (t.p - brute).abs() < 1e-12, "{} vs {brute}", t.p);
        assert!(t.p < 0.2 && t.p > 0.01, "{}", t.p);
    }

    #[test]
    fn student_t_welch_and_yuen_match_published_and_hand_computed_values() {
        // Two-sided 5% critical values of Student's t: df 10 -> 2.228, df 4 -> 2.776, df 1 -> 12.706.
        for (t, df) in [(2.228_139, 10.0), (2.776_445, 4.0), (12.706_2, 1.0)] {
            assert!((student_t_two_sided(t, df) - 0.05).abs() < 1e-4, "t {t} df {df}: {}", student_t_two_sided(t, df));
        }
        assert!((student_t_two_sided(0.0, 7.0) - 1.0).abs() < 1e-12);
        assert!((incomplete_beta(2.0, 3.0, 0.4) - 0.5248).abs() < 1e-4, "I_0.4(2,3) = 0.5248");
        // Welch by hand: logs 0,0.1,0.2 vs 0.5,0.6,0.7 -> t = 0.5 / sqrt(0.01/3 + 0.01/3) = 6.124, df 4.
        let e = |v: &[f64]| v.iter().map(|x| x.exp()).collect::<Vec<f64>>();
        // Three launches a side: nothing trimmed, Welch's t.
        let t = yuen_log(&e(&[0.0, 0.1, 0.2]), &e(&[0.5, 0.6, 0.7])).unwrap();
        assert!((t.t - 6.123_724).abs() < 1e-5 && (t.df - 4.0).abs() < 1e-9, "{t:?}");
        assert!((t.p - 0.003_6).abs() < 2e-4, "{t:?}");
        // Five a side: one trimmed from each end, so a wild launch (5.0) changes nothing. Winsorised
        // 0.1,0.1,0.2,0.3,0.3 (variance 0.01), d = 4 x 0.01 / (3 x 2) each side: t = 0.5 / sqrt(2d) = 4.330, df 4.
        let t = yuen_log(&e(&[0.0, 0.1, 0.2, 0.3, 5.0]), &e(&[0.5, 0.6, 0.7, 0.8, 0.9])).unwrap();
        assert!((t.t - 4.330_127).abs() < 1e-5 && (t.df - 4.0).abs() < 1e-9, "{t:?}");
        assert!((t.p - 0.012_35).abs() < 2e-4, "{t:?}");
        assert_eq!(t, yuen_log(&e(&[-3.0, 0.1, 0.2, 0.3, 0.4]), &e(&[0.5, 0.6, 0.7, 0.8, 0.9])).unwrap(), "either end");
        assert!(yuen_log(&[1.0, 2.0], &[1.0, 2.0, 3.0]).is_none(), "two launches give no variance worth the name");
        assert_eq!(yuen_log(&[1.0; 3], &[1.0; 4]).unwrap().p, 1.0);
        // Launch medians on a timer's ticks: the middle launches of each night are equal, so no
        // spread survives winsorising; one tick's flip is judged by its ranks, not as p = 0.
        let ticks = |most: f64, odd: f64| [vec![most; 6], vec![odd]].concat();
        let flipped = yuen_log(&ticks(4.0e-6, 4.5e-6), &ticks(4.5e-6, 4.0e-6)).unwrap();
        assert!(flipped.t.is_infinite() && (flipped.p - 0.0291).abs() < 1e-3, "{flipped:?}: 100 of 3432 splits as far out");
        let exact = mann_whitney(&ticks(4.0e-6, 4.5e-6), &ticks(4.5e-6, 4.0e-6)).unwrap().p;
        assert_eq!(flipped.p, exact);
        let apart = yuen_log(&[4.0e-6; 7], &[4.5e-6; 7]).unwrap();
        assert!(apart.p < 1e-3 && apart.p == mann_whitney(&[4.0e-6; 7], &[4.5e-6; 7]).unwrap().p, "{apart:?}");
        assert!((scaled_mad(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap() - 1.4826).abs() < 1e-12, "one wild value barely moves it");
        // 3 or 4 launches: every one counts (the range over d2), where the scaled MAD of 3
        // values is the gap from the median to its nearer neighbour (0.01 here, of a spread ~1).
        assert!((launch_spread(&[0.0, 0.01, 1.7]).unwrap() - 1.7 / 1.693).abs() < 1e-12);
        assert!((scaled_mad(&[0.0, 0.01, 1.7]).unwrap() - 0.014826).abs() < 1e-12);
        assert!((launch_spread(&[0.0, 1.0, 2.0, 2.059]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(launch_spread(&[1.0, 2.0, 3.0, 4.0, 100.0]), scaled_mad(&[1.0, 2.0, 3.0, 4.0, 100.0]), "5 launches: robust");
        assert_eq!((launch_spread(&[1.0, 2.0]), spread_words(3), spread_words(5)), (None, "range / d2", "scaled MAD"));
    }

    #[test]
    fn benjamini_hochberg_matches_a_worked_example() {
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.5]);
        let want = [0.04, 0.04 * 4.0 / 3.0, 0.04 * 4.0 / 3.0, 0.5];
        q.iter().zip(want).for_each(|(q, w)| assert!((q - w).abs() < 1e-12, "{q} vs {w}"));
    }
}
