//! Two samples compared by rank (Mann-Whitney U, one-sided) and by how far apart they sit
//! (the Hodges-Lehmann shift: the median of every pairwise difference). Ranks, not means, so
//! that one outlier scrape neither fails a canary nor hides a regression; the shift, so that a
//! difference too small to matter never fails one however sure the test is. Kayenta's judge
//! does the same; the normal approximation (with the tie correction and a continuity
//! correction) is exact enough from a handful of points per side, which a window always has.

/// What a comparison of `canary` with `baseline` found, higher being worse.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankComparison {
    /// The one-sided p-value of "the canary's values are stochastically greater".
    pub p_greater: f64,
    /// The Hodges-Lehmann estimate of canary minus baseline.
    pub shift: f64,
    pub canary_median: f64,
    pub baseline_median: f64,
}

/// Compares two samples of finite values (others are dropped); `None` when either is empty.
pub fn compare(canary: &[f64], baseline: &[f64]) -> Option<RankComparison> {
    let canary: Vec<f64> = canary.iter().copied().filter(|v| v.is_finite()).collect();
    let baseline: Vec<f64> = baseline.iter().copied().filter(|v| v.is_finite()).collect();
    if canary.is_empty() || baseline.is_empty() {
        return None;
    }
    let mut differences: Vec<f64> = canary
        .iter()
        .flat_map(|c| baseline.iter().map(move |b| c - b))
        .collect();
    Some(RankComparison {
        p_greater: p_greater(&canary, &baseline),
        shift: median(&mut differences),
        canary_median: median(&mut canary.clone()),
        baseline_median: median(&mut baseline.clone()),
    })
}

/// The median (the mean of the middle two for an even count); 0 for none.
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    }
}

/// The one-sided p-value of Mann-Whitney's U for "canary greater than baseline".
fn p_greater(canary: &[f64], baseline: &[f64]) -> f64 {
    let (n1, n2) = (canary.len() as f64, baseline.len() as f64);
    let mut pooled: Vec<(f64, bool)> = canary
        .iter()
        .map(|v| (*v, true))
        .chain(baseline.iter().map(|v| (*v, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Average ranks over ties, and the ties' correction to the variance.
    let mut canary_rank_sum = 0.0;
    let mut tie_term = 0.0;
    let mut start = 0;
    while start < pooled.len() {
        let mut end = start;
        while end + 1 < pooled.len() && pooled[end + 1].0 == pooled[start].0 {
            end += 1;
        }
        let tied = (end - start + 1) as f64;
        let rank = (start + end) as f64 / 2.0 + 1.0;
        canary_rank_sum += rank * pooled[start..=end].iter().filter(|(_, c)| *c).count() as f64;
        tie_term += tied.powi(3) - tied;
        start = end + 1;
    }
    let n = n1 + n2;
    let u = canary_rank_sum - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)));
    if variance <= 0.0 || !variance.is_finite() {
        // Every value the same: no evidence either way.
        return 1.0;
    }
    let z = (u - mean - 0.5) / variance.sqrt();
    1.0 - standard_normal_cdf(z)
}

/// Φ(z), from the complementary error function (Numerical Recipes' erfc, relative error
/// below 1.2e-7: far finer than any threshold here).
fn standard_normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let t = 1.0 / (1.0 + 0.5 * x.abs());
    let poly = -x * x - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let value = t * poly.exp();
    if x >= 0.0 { value } else { 2.0 - value }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn the_normal_cdf_matches_its_table() {
        for (z, phi) in [
            (0.0, 0.5),
            (1.0, 0.841_344_7),
            (1.96, 0.975_002_1),
            (-2.326_348, 0.01),
        ] {
            assert!(close(standard_normal_cdf(z), phi, 1e-6), "{z}");
        }
    }

    #[test]
    fn a_clearly_greater_canary_is_significant_and_its_shift_is_the_gap() {
        let baseline: Vec<f64> = (0..20).map(|i| 10.0 + f64::from(i % 5) * 0.1).collect();
        let canary: Vec<f64> = baseline.iter().map(|v| v * 3.0).collect();
        let found = compare(&canary, &baseline).unwrap_or_else(|| panic!("both have values"));
        assert!(found.p_greater < 1e-6, "{found:?}");
        assert!(close(found.shift, 20.4, 0.3), "{found:?}");
        assert!(close(found.baseline_median, 10.2, 1e-9), "{found:?}");
    }

    #[test]
    fn a_lower_or_equal_canary_is_not() {
        let baseline = [5.0, 6.0, 7.0, 8.0, 9.0];
        let lower = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert!(compare(&lower, &baseline).is_some_and(|c| c.p_greater > 0.9));
        assert!(compare(&baseline, &baseline).is_some_and(|c| c.p_greater > 0.3 && c.shift == 0.0));
        // All tied: no evidence.
        assert_eq!(
            compare(&[1.0; 4], &[1.0; 4]).map(|c| c.p_greater),
            Some(1.0)
        );
    }

    #[test]
    fn a_known_small_case_matches_the_exact_test() {
        // U = 23 of 25 for n1 = n2 = 5: the exact one-sided p is 4/252 = 0.0159; the normal
        // approximation with continuity correction gives 0.0184.
        let canary = [6.0, 7.0, 8.0, 9.0, 3.5];
        let baseline = [1.0, 2.0, 3.0, 4.0, 5.0];
        let found = compare(&canary, &baseline).unwrap_or_else(|| panic!("values"));
        assert!(close(found.p_greater, 0.0184, 0.0005), "{found:?}");
    }

    #[test]
    fn nothing_finite_is_nothing_to_compare() {
        assert_eq!(compare(&[], &[1.0]), None);
        assert_eq!(compare(&[f64::NAN], &[1.0]), None);
    }
}
