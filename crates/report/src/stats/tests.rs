use super::*;

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

macro_rules! assert_close {
    ($a:expr, $b:expr, $tol:expr) => {{
        let (a, b): (f64, f64) = ($a, $b);
        assert!(close(a, b, $tol), "{a} != {b} (tolerance {})", $tol);
    }};
}

// ---- summarize ----

#[test]
fn summarize_textbook() {
    let s = summarize(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0], 0.95);
    assert_eq!(s.n, 8);
    assert_close!(s.mean, 5.0, 1e-12);
    assert_close!(s.median, 4.5, 1e-12);
    // sqrt(32 / 7)
    assert_close!(s.stdev, 2.138_089_935_299_395, 1e-12);
    assert_eq!((s.min, s.max), (2.0, 9.0));
    assert_close!(s.cv, 2.138_089_935_299_395 / 5.0, 1e-12);
    // t(0.975, 7) = 2.364624; half = t * s / sqrt(8)
    assert_close!(s.ci_half, 2.364_624 * 2.138_089_935 / 8f64.sqrt(), 1e-5);
    assert_close!(s.ci_low, 5.0 - s.ci_half, 1e-12);
    assert_close!(s.ci_high, 5.0 + s.ci_half, 1e-12);
    assert_eq!(s.confidence, 0.95);
}

#[test]
fn summarize_odd_median_unsorted_input() {
    let s = summarize(&[9.0, 1.0, 5.0], 0.95);
    assert_eq!(s.median, 5.0);
    assert_eq!((s.min, s.max), (1.0, 9.0));
}

#[test]
fn summarize_empty() {
    let s = summarize(&[], 0.95);
    assert_eq!(s.n, 0);
    for v in [
        s.mean, s.median, s.stdev, s.min, s.max, s.cv, s.ci_low, s.ci_high, s.ci_half,
    ] {
        assert_eq!(v, 0.0);
    }
    assert_eq!(s.confidence, 0.95);
}

#[test]
fn summarize_single() {
    let s = summarize(&[3.5], 0.95);
    assert_eq!(s.n, 1);
    assert_eq!((s.mean, s.median, s.min, s.max), (3.5, 3.5, 3.5, 3.5));
    assert_eq!((s.stdev, s.cv, s.ci_half), (0.0, 0.0, 0.0));
    assert_eq!((s.ci_low, s.ci_high), (3.5, 3.5));
}

#[test]
fn summarize_drops_non_finite() {
    let s = summarize(
        &[
            f64::NAN,
            1.0,
            f64::INFINITY,
            3.0,
            f64::NEG_INFINITY,
            f64::NAN,
        ],
        0.95,
    );
    assert_eq!(s.n, 2);
    assert_eq!(s.mean, 2.0);
    assert!(s.ci_half.is_finite() && s.ci_half > 0.0);
    let all_nan = summarize(&[f64::NAN, f64::NAN], 0.95);
    assert_eq!(all_nan.n, 0);
    assert_eq!(all_nan.mean, 0.0);
}

#[test]
fn summarize_zero_variance_and_zero_mean() {
    let s = summarize(&[7.0; 5], 0.95);
    assert_eq!((s.stdev, s.cv, s.ci_half), (0.0, 0.0, 0.0));
    let z = summarize(&[-1.0, 1.0], 0.95);
    assert_eq!(z.mean, 0.0);
    assert_eq!(z.cv, 0.0);
}

#[test]
fn summarize_invalid_confidence() {
    for c in [f64::NAN, 0.0, 1.0, 95.0, -0.5] {
        let s = summarize(&[1.0, 2.0, 3.0], c);
        assert_eq!(s.confidence, 0.0);
        assert_eq!(s.ci_half, 0.0);
        assert_eq!((s.ci_low, s.ci_high), (2.0, 2.0));
        assert!(!ci_within(&s, 1.0));
    }
}

// ---- t_quantile ----

#[test]
fn t_quantile_table_values() {
    assert_close!(t_quantile(0.975, 4.0), 2.776_445, 1e-5);
    assert_close!(t_quantile(0.975, 1.0), 12.706_205, 1e-4);
    assert_close!(t_quantile(0.025, 4.0), -2.776_445, 1e-5);
    assert_close!(t_quantile(0.995, 10.0), 3.169_273, 1e-5);
    assert_close!(t_quantile(0.95, 30.0), 1.697_261, 1e-5);
    assert_close!(t_quantile(0.5, 3.0), 0.0, 1e-12);
    assert_close!(t_quantile(0.975, f64::INFINITY), 1.959_964, 1e-6);
    assert_close!(t_quantile(0.975, 1e6), 1.959_966, 1e-5);
}

#[test]
fn t_quantile_closed_forms() {
    // df = 1 is the Cauchy distribution, df = 2 has a closed-form quantile.
    for p in [0.001, 0.1, 0.3, 0.6, 0.9, 0.999] {
        let cauchy = (std::f64::consts::PI * (p - 0.5)).tan();
        assert_close!(t_quantile(p, 1.0), cauchy, 1e-12 * cauchy.abs().max(1.0));
        let two = (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt();
        assert_close!(t_quantile(p, 2.0), two, 1e-12 * two.abs().max(1.0));
    }
}

#[test]
fn t_quantile_round_trips_through_tail() {
    for df in [0.3, 1.0, 2.5, 7.0, 29.0, 150.0, 5000.0] {
        // Powers of two, so that 1 - p is exact and symmetry can be checked tightly.
        for p in [2f64.powi(-40), 2f64.powi(-13), 2f64.powi(-7), 0.25, 0.4375] {
            let q = t_quantile(p, df);
            assert!(q < 0.0);
            let back = t_sf(-q, df);
            assert_close!(back / p, 1.0, 1e-10);
            assert_close!(t_quantile(1.0 - p, df), -q, 1e-9 * q.abs());
        }
    }
}

#[test]
fn t_quantile_continuous_at_large_df_switch() {
    // The quantile moves by about -(z³ + z) / (4 df²) per unit of df, so across the
    // switch to the expansion the two methods must agree to well below that.
    let below = t_quantile(0.975, T_LARGE_DF);
    let above = t_quantile(0.975, T_LARGE_DF * (1.0 + 1e-12));
    assert_close!(below, above, 1e-11);
    assert_close!(below, 1.960_201_24, 1e-8);
}

#[test]
fn t_quantile_extremes_do_not_panic() {
    for df in [
        1e-3,
        0.5,
        1.0,
        3.0,
        1e3,
        1e4,
        1e6,
        1e12,
        1e300,
        f64::INFINITY,
    ] {
        for p in [f64::MIN_POSITIVE, 1e-300, 1e-20, 0.5 + 1e-15, 1.0 - 1e-16] {
            let q = t_quantile(p, df);
            assert!(!q.is_nan(), "t_quantile({p}, {df}) is NaN");
            assert_eq!(q < 0.0, p < 0.5, "t_quantile({p}, {df}) = {q}");
        }
    }
    // Beyond 1e150 the answer is infinite rather than wrong.
    assert_eq!(t_quantile(1e-300, 0.5), f64::NEG_INFINITY);
}

#[test]
fn t_quantile_domain() {
    assert!(t_quantile(f64::NAN, 4.0).is_nan());
    assert!(t_quantile(0.9, f64::NAN).is_nan());
    assert!(t_quantile(1.5, 4.0).is_nan());
    assert!(t_quantile(-0.1, 4.0).is_nan());
    assert!(t_quantile(0.9, 0.0).is_nan());
    assert!(t_quantile(0.9, -3.0).is_nan());
    assert_eq!(t_quantile(0.0, 4.0), f64::NEG_INFINITY);
    assert_eq!(t_quantile(1.0, 4.0), f64::INFINITY);
}

// ---- ci_within ----

#[test]
fn ci_within_behaviour() {
    let tight = summarize(&[100.0, 100.1, 99.9, 100.0, 100.05], 0.95);
    assert!(ci_within(&tight, 0.01));
    assert!(!ci_within(&tight, 0.0001));
    let wide = summarize(&[50.0, 150.0, 100.0], 0.95);
    assert!(!ci_within(&wide, 0.05));
    assert!(ci_within(&wide, 2.0));
    let one = summarize(&[100.0], 0.95);
    assert!(!ci_within(&one, 0.5));
    assert!(!ci_within(&tight, f64::NAN));
    assert!(!ci_within(&tight, -0.1));
    let constant = summarize(&[4.0, 4.0, 4.0], 0.95);
    assert!(ci_within(&constant, 0.0));
}

// ---- Welch ----

const WIKI_A: [f64; 15] = [
    27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4,
];
const WIKI_B: [f64; 15] = [
    27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4,
];

#[test]
fn welch_wikipedia_example_1() {
    // Wikipedia, "Welch's t-test", example 1: t = -2.46, df = 24.98, p = 0.021.
    // Reference values recomputed independently (numeric integration of the t density).
    let r = welch_t(&WIKI_A, &WIKI_B).expect("both samples have 15 values");
    assert_eq!(r.test, Test::Welch);
    assert_close!(r.statistic, -2.455_356_398, 1e-8);
    assert_close!(r.df.unwrap_or(f64::NAN), 24.988_529_29, 1e-6);
    assert_close!(r.p_value, 0.021_378, 1e-5);
    // Swapping the samples flips the sign only.
    let s = welch_t(&WIKI_B, &WIKI_A).expect("both samples have 15 values");
    assert_close!(s.statistic, 2.455_356_398, 1e-8);
    assert_close!(s.p_value, r.p_value, 1e-12);
}

#[test]
fn welch_small_and_degenerate() {
    assert!(welch_t(&[1.0], &[1.0, 2.0]).is_none());
    assert!(welch_t(&[], &[]).is_none());
    assert!(welch_t(&[1.0, f64::NAN], &[1.0, 2.0]).is_none());
    let same = welch_t(&[3.0, 3.0], &[3.0, 3.0, 3.0]).expect("n >= 2");
    assert_eq!((same.statistic, same.df, same.p_value), (0.0, None, 1.0));
    let diff = welch_t(&[3.0, 3.0], &[4.0, 4.0]).expect("n >= 2");
    assert_eq!(
        (diff.statistic, diff.df, diff.p_value),
        (f64::NEG_INFINITY, None, 0.0)
    );
    // One side constant: df collapses to the other side's n - 1.
    let one = welch_t(&[5.0, 5.0, 5.0], &[1.0, 2.0, 3.0, 4.0]).expect("n >= 2");
    assert_close!(one.df.unwrap_or(f64::NAN), 3.0, 1e-12);
    // Tiny variances must not underflow to a NaN df.
    let tiny = welch_t(&[1e-150, 2e-150, 3e-150], &[1e-150, 3e-150, 5e-150]).expect("n >= 2");
    assert!(tiny.df.is_some_and(f64::is_finite));
    assert!((0.0..=1.0).contains(&tiny.p_value));
}

// ---- Mann–Whitney ----

#[test]
fn mann_whitney_exact_small() {
    let r = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).expect("non-empty");
    assert_eq!(r.test, Test::MannWhitney);
    assert_eq!(r.statistic, 0.0);
    assert_eq!(r.df, None);
    assert_close!(r.p_value, 0.1, 1e-12); // 2 / C(6,3)
    let r =
        mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).expect("non-empty");
    assert_close!(r.p_value, 2.0 / 252.0, 1e-12); // 0.00794
                                                  // Reversed: U = n_a * n_b, same p.
    let r =
        mann_whitney(&[6.0, 7.0, 8.0, 9.0, 10.0], &[1.0, 2.0, 3.0, 4.0, 5.0]).expect("non-empty");
    assert_eq!(r.statistic, 25.0);
    assert_close!(r.p_value, 2.0 / 252.0, 1e-12);
    // Overlap: U = 1 (5 > 4); P(U <= 1) = 2/70, two-sided 4/70.
    let r = mann_whitney(&[1.0, 2.0, 3.0, 5.0], &[4.0, 6.0, 7.0, 8.0]).expect("non-empty");
    assert_eq!(r.statistic, 1.0);
    assert_close!(r.p_value, 4.0 / 70.0, 1e-12);
    // Centre of the distribution caps at 1.
    let r = mann_whitney(&[1.0, 4.0], &[2.0, 3.0]).expect("non-empty");
    assert_eq!(r.statistic, 2.0);
    assert_eq!(r.p_value, 1.0);
    let r = mann_whitney(&[1.0], &[2.0]).expect("non-empty");
    assert_eq!(r.p_value, 1.0);
}

#[test]
fn mann_whitney_exact_distribution_sums() {
    // Counts of every U must add up to C(m + n, m) and be symmetric.
    let c = u_counts(4, 6);
    assert_eq!(c.len(), 25);
    assert_eq!(c.iter().sum::<f64>(), 210.0);
    assert!(c.iter().zip(c.iter().rev()).all(|(x, y)| x == y));
    assert_eq!(u_counts(10, 10).iter().sum::<f64>(), 184_756.0);
    assert_eq!(u_counts(0, 3), vec![1.0]);
}

#[test]
fn mann_whitney_ties_normal_approximation() {
    // Ties force the normal approximation even for N = 9. Midranks give U = 2.5;
    // sigma² = 20/12 * (10 - 12/72), z = (|2.5 - 10| - 0.5) / sigma.
    let r = mann_whitney(&[1.0, 2.0, 2.0, 3.0], &[2.0, 3.0, 4.0, 4.0, 5.0]).expect("non-empty");
    assert_eq!(r.statistic, 2.5);
    assert_close!(r.p_value, 0.078_545_851, 1e-8);
    // Every value tied: no information.
    let r = mann_whitney(&[2.0, 2.0], &[2.0, 2.0, 2.0]).expect("non-empty");
    assert_eq!(r.statistic, 3.0);
    assert_eq!(r.p_value, 1.0);
}

#[test]
fn mann_whitney_large_normal_approximation() {
    let a: Vec<f64> = (1..=15).map(f64::from).collect();
    let b: Vec<f64> = (5..20).map(|x| f64::from(x) + 0.5).collect();
    let r = mann_whitney(&a, &b).expect("non-empty");
    assert_eq!(r.statistic, 55.0);
    assert_close!(r.p_value, 0.018_066_623, 1e-8);
}

#[test]
fn mann_whitney_empty_and_nan() {
    assert!(mann_whitney(&[], &[1.0]).is_none());
    assert!(mann_whitney(&[f64::NAN], &[1.0]).is_none());
    let r =
        mann_whitney(&[1.0, f64::NAN, 2.0, 3.0], &[4.0, 5.0, f64::NAN, 6.0]).expect("non-empty");
    assert_close!(r.p_value, 0.1, 1e-12);
}

// ---- compare ----

/// `n` values around `centre`, spread up to ±`jitter` in a fixed pattern whose mean is
/// exactly `centre` when `n` is even.
fn sample(centre: f64, jitter: f64, n: usize) -> Vec<f64> {
    const PATTERN: [f64; 4] = [0.3, 1.0, 0.6, 0.1];
    (0..n)
        .map(|i| {
            let sign = if i % 2 == 0 { 1.0 } else { -1.0 };
            centre + sign * jitter * PATTERN[(i / 2) % PATTERN.len()]
        })
        .collect()
}

#[test]
fn compare_improved_and_regressed() {
    let base = sample(100.0, 1.0, 10);
    let better = sample(110.0, 1.0, 10);
    let c = compare(&base, &better, true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::Improved);
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::Welch));
    assert_close!(c.pct_change, 10.0, 1e-9);
    assert_eq!(c.baseline.confidence, 0.95);
    // Same data, lower is better (a latency).
    assert_eq!(
        compare(&base, &better, false, 0.05, 0.02).verdict,
        Verdict::Regressed
    );
    assert_eq!(
        compare(&better, &base, true, 0.05, 0.02).verdict,
        Verdict::Regressed
    );
    assert_eq!(
        compare(&better, &base, false, 0.05, 0.02).verdict,
        Verdict::Improved
    );
}

/// Not significant is "no change" only where the change's interval lies within the
/// noise threshold; where it reaches beyond, the verdict is undecided, with the interval.
#[test]
fn compare_no_change_needs_an_interval_within_noise() {
    let a = sample(100.0, 0.5, 10);
    let mut b = a.clone();
    b.reverse();
    let c = compare(&a, &b, true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::NoChange);
    assert_close!(c.test.as_ref().map_or(0.0, |t| t.p_value), 1.0, 1e-9);
    let [lo, hi] = c.change_interval_pct.expect("interval");
    assert!(lo < 0.0 && hi > 0.0 && lo > -2.0 && hi < 2.0, "{lo} {hi}");
    // The same means with a ±5% spread: the interval spans more than ±2%.
    let a = sample(100.0, 5.0, 10);
    let mut b = a.clone();
    b.reverse();
    let c = compare(&a, &b, true, 0.05, 0.02);
    assert_close!(c.test.as_ref().map_or(0.0, |t| t.p_value), 1.0, 1e-9);
    assert_eq!(c.verdict, Verdict::Undecided);
    let [lo, hi] = c.change_interval_pct.expect("interval");
    assert!(lo < -2.0 && hi > 2.0, "{lo} {hi}");
    assert!(
        c.verdict_text().starts_with("undecided (-"),
        "{}",
        c.verdict_text()
    );
    // Two tries a side 46% apart, not significant: undecided, never "no change".
    let c = compare(&[18.0, 18.6], &[8.0, 11.8], false, 0.05, 0.02);
    assert!(c.test.as_ref().is_some_and(|t| t.p_value >= 0.05), "{c:?}");
    assert_eq!(c.verdict, Verdict::Undecided);
    // Without a noise threshold nothing can be shown equal.
    let c = compare(&[5.0; 6], &[5.0; 6], true, 0.05, 0.0);
    assert_eq!(c.verdict, Verdict::Undecided);
}

#[test]
fn compare_within_noise() {
    let a = sample(100.0, 0.05, 10);
    let b = sample(100.5, 0.05, 10);
    let c = compare(&a, &b, true, 0.05, 0.02);
    assert!(c.test.as_ref().is_some_and(|t| t.p_value < 1e-6));
    assert_close!(c.pct_change, 0.5, 1e-9);
    assert_eq!(c.verdict, Verdict::WithinNoise);
    // Without a noise threshold the same change counts.
    assert_eq!(compare(&a, &b, true, 0.05, 0.0).verdict, Verdict::Improved);
    assert_eq!(
        compare(&a, &b, true, 0.05, f64::NAN).verdict,
        Verdict::Improved
    );
}

#[test]
fn compare_test_selection() {
    // 4 against 4: Mann–Whitney can reach 2/70 < 0.05, so it is used.
    let c = compare(
        &[1.0, 2.0, 3.0, 4.0],
        &[11.0, 12.0, 13.0, 14.0],
        true,
        0.05,
        0.02,
    );
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
    assert_eq!(c.verdict, Verdict::Improved);
    // 3 against 3: Mann–Whitney's best is p = 0.1, so Welch is used.
    let c = compare(&[10.0, 10.1, 9.9], &[20.0, 20.2, 19.8], true, 0.05, 0.02);
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::Welch));
    assert_eq!(c.verdict, Verdict::Improved);
    // ... but at alpha = 0.2 Mann–Whitney can decide, so it is used.
    let c = compare(&[10.0, 10.1, 9.9], &[20.0, 20.2, 19.8], true, 0.2, 0.02);
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
    assert_eq!(c.verdict, Verdict::Improved);
    // 1 against 3: no Welch possible; Mann–Whitney cannot be significant.
    let c = compare(&[10.0], &[20.0, 21.0, 22.0], true, 0.05, 0.02);
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
    assert_eq!(c.verdict, Verdict::Undecided);
}

#[test]
fn compare_degenerate_inputs_do_not_panic() {
    let c = compare(&[], &[], true, 0.05, 0.02);
    assert_eq!(
        (c.test, c.verdict, c.pct_change),
        (None, Verdict::Undecided, 0.0)
    );
    let c = compare(&[], &[1.0, 2.0], true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::Undecided);
    assert_eq!(c.pct_change, f64::INFINITY);
    let c = compare(&[f64::NAN; 3], &[1.0, f64::NAN], true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::Undecided);
    let c = compare(&[1.0], &[2.0], true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::Undecided);
    // Constant, different: exact Welch answer p = 0.
    let c = compare(&[5.0; 6], &[6.0; 6], true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::Improved);
    // Constant, equal.
    let c = compare(&[5.0; 6], &[5.0; 6], true, 0.05, 0.02);
    assert_eq!(c.verdict, Verdict::NoChange);
    // Senseless alpha never finds significance.
    for alpha in [f64::NAN, 0.0, -1.0, 2.0] {
        let c = compare(
            &sample(100.0, 1.0, 10),
            &sample(200.0, 1.0, 10),
            true,
            alpha,
            0.02,
        );
        assert_eq!(c.verdict, Verdict::Undecided);
        assert_eq!(c.baseline.confidence, 0.0);
    }
}

#[test]
fn verdict_words() {
    assert_eq!(Verdict::Improved.words(), "improved");
    assert_eq!(Verdict::Regressed.words(), "regressed");
    assert_eq!(Verdict::NoChange.words(), "no significant change");
    assert_eq!(Verdict::Undecided.words(), "undecided");
    assert_eq!(
        Verdict::WithinNoise.words(),
        "change within noise threshold"
    );
}

/// Under Mann–Whitney the interval is the one its ranks give (Hodges–Lehmann with Moses'
/// bounds): for 4 against 4 at 95% the extreme comparisons. Positive values: the ratios
/// (R's `exp(wilcox.test(log(b), log(a), conf.int = TRUE)$conf.int)`: 11/4 to 14/1);
/// with a 0 among them, the differences (`wilcox.test(b, a, conf.int = TRUE)`: 7 to 13)
/// in percent of the baseline's mean.
#[test]
fn mann_whitney_interval_is_the_ranks_one() {
    let c = compare(
        &[1.0, 2.0, 3.0, 4.0],
        &[11.0, 12.0, 13.0, 14.0],
        true,
        0.05,
        0.02,
    );
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
    let [lo, hi] = c.change_interval_pct.expect("interval");
    assert_close!(lo, (11.0 / 4.0 - 1.0) * 100.0, 1e-9);
    assert_close!(hi, (14.0 - 1.0) * 100.0, 1e-9);
    let c = compare(
        &[0.0, 1.0, 2.0, 3.0],
        &[10.0, 11.0, 12.0, 13.0],
        true,
        0.05,
        0.02,
    );
    let [lo, hi] = c.change_interval_pct.expect("interval");
    assert_close!(lo, 7.0 / 1.5 * 100.0, 1e-9);
    assert_close!(hi, 13.0 / 1.5 * 100.0, 1e-9);
}

/// A stream that slowed twelvefold beside a noisy baseline (the fleet test's 4 KiB
/// buffers, tries in Mbit/s): neither test's interval says it fell by more than 100%,
/// which no rate can. Before, differences over the baseline's mean gave −150% (ranks) and
/// about −200% (Welch).
#[test]
fn a_rate_that_fell_cannot_have_fallen_past_100_percent() {
    let fast = [9501.7, 13100.0, 15413.5, 24318.1];
    let slow = [936.9, 1150.0, 1308.6, 1442.4];
    let ranks = compare(&fast, &slow, true, 0.05, 0.02);
    assert_eq!(ranks.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
    let [lo, hi] = ranks.change_interval_pct.expect("interval");
    assert_close!(lo, (936.9 / 24318.1 - 1.0) * 100.0, 1e-9);
    assert_close!(hi, (1442.4 / 9501.7 - 1.0) * 100.0, 1e-9);
    assert_eq!(ranks.verdict, Verdict::Regressed);
    // Counts with tries at 0 (retransmissions): differences, not ratios, but still no
    // fall past all of it; with a negative value among them the interval is left alone.
    let counts = compare(
        &[5.0, 3.0, 7.0, 6.0],
        &[0.0, 0.0, 1.0, 2.0],
        false,
        0.05,
        0.02,
    );
    let [lo, hi] = counts.change_interval_pct.expect("interval");
    assert_eq!(lo, -100.0, "{counts:?}");
    assert_close!(hi, (2.0 - 3.0) / 5.25 * 100.0, 1e-9);
    let signed = compare(
        &[5.0, 3.0, 7.0, 6.0],
        &[0.0, -1.0, 1.0, 2.0],
        false,
        0.05,
        0.02,
    );
    let [lo, _] = signed.change_interval_pct.expect("interval");
    assert_close!(lo, (-1.0 - 7.0) / 5.25 * 100.0, 1e-9);
    let welch = compare(&fast[..3], &slow[..3], true, 0.05, 0.02);
    assert_eq!(welch.test.as_ref().map(|t| t.test), Some(Test::Welch));
    let [lo, hi] = welch.change_interval_pct.expect("interval");
    assert!(
        lo > -100.0 && lo <= welch.pct_change && welch.pct_change <= hi,
        "{welch:?}"
    );
}

/// Welch's interval is Fieller's of the ratio of means: each end ρ solves
/// (ȳ − ρx̄)² = q²(s²_b/n_b + ρ²s²_a/n_a), q at the Welch–Satterthwaite degrees of freedom
/// of the test at ρ, and the interval leaves out a ratio of 1
/// exactly where the test finds the change significant, over a sweep of shifts and sizes
/// (baselines of either sign).
#[test]
fn welch_interval_is_fiellers_and_agrees_with_its_test() {
    let base: Vec<f64> = (0..12)
        .map(|i| 10.0 + f64::from((i * 5) % 12) * 0.3)
        .collect();
    let mut seen = [0; 2];
    for sign in [1.0, -1.0] {
        for (na, nb) in [(2, 3), (3, 3), (5, 5), (6, 9), (12, 5)] {
            for step in -30..=30 {
                let shift = f64::from(step) * 0.1 + 0.013;
                let a: Vec<f64> = base[..na].iter().map(|x| sign * x).collect();
                let b: Vec<f64> = base[..nb]
                    .iter()
                    .rev()
                    .map(|x| sign * (x + shift))
                    .collect();
                let c = compare(&a, &b, true, 0.05, 0.0);
                let t = c.test.clone().expect("a test");
                assert_eq!(t.test, Test::Welch, "{na} against {nb}");
                let [lo, hi] = c.change_interval_pct.expect("interval");
                assert_eq!(
                    t.p_value < 0.05,
                    lo > 0.0 || hi < 0.0,
                    "{na} against {nb}, shift {shift}: p {}, interval {lo} to {hi}",
                    t.p_value
                );
                seen[usize::from(t.p_value < 0.05)] += 1;
                // Each end on the boundary of Fieller's set, its quantile at the degrees
                // of freedom of the test at that ratio (at 1, the test's own).
                let w = Welch::of(&a, &b).expect("welch");
                for end in [lo, hi] {
                    let rho = 1.0 + end / 100.0 * w.ma.signum();
                    let (ta, tb) = (rho * rho * w.sa, w.sb);
                    let df =
                        (ta + tb).powi(2) / (ta * ta / (na - 1) as f64 + tb * tb / (nb - 1) as f64);
                    let q = t_quantile(0.975, df);
                    let lhs = (w.mb - rho * w.ma).powi(2);
                    let rhs = q * q * (w.sb + rho * rho * w.sa);
                    assert!((lhs - rhs).abs() <= 1e-6 * rhs.max(1e-9), "{lhs} vs {rhs}");
                }
            }
        }
    }
    assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
}

/// The interval and the test agree: for samples without ties, Mann–Whitney finds the
/// change significant exactly where its interval leaves out 0, over a sweep of shifts and
/// sample sizes where it decides (exact and normal approximation alike).
#[test]
fn mann_whitney_significance_and_interval_agree() {
    // 24 distinct values around 11; 4 against 24 takes the normal approximation.
    let base: Vec<f64> = (0..24)
        .map(|i| 10.0 + f64::from((i * 7) % 24) * 0.09)
        .collect();
    let mut seen = [0; 2];
    // Offset by −11 the values take both signs: the differences' interval, not the ratios'.
    for (offset, (na, nb)) in [0.0, -11.0]
        .into_iter()
        .flat_map(|o| [(4, 4), (3, 5), (4, 8), (4, 12), (12, 4), (4, 24)].map(|s| (o, s)))
    {
        for step in -30..=30 {
            let shift = f64::from(step) * 0.05 + 0.013;
            let a: Vec<f64> = base[..na].iter().map(|x| x + offset).collect();
            let a = &a[..];
            let b: Vec<f64> = base[..nb]
                .iter()
                .rev()
                .map(|x| x + offset + shift)
                .collect();
            let c = compare(a, &b, true, 0.05, 0.0);
            assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
            let p = c.test.as_ref().map_or(1.0, |t| t.p_value);
            let [lo, hi] = c.change_interval_pct.expect("interval");
            assert_eq!(
                p < 0.05,
                lo > 0.0 || hi < 0.0,
                "{na} against {nb}, shift {shift}: p {p}, interval {lo} to {hi}"
            );
            seen[usize::from(p < 0.05)] += 1;
        }
    }
    // Both answers were put to the test, many times each.
    assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
}

/// Ranks that show a rise while an outlier pulls the mean down are no decision: the
/// comparison is undecided, not "regressed" on the means nor "improved" on the ranks.
#[test]
fn means_against_the_ranks_leave_it_undecided() {
    let a = [10.0, 11.0, 12.0, 13.0];
    let b = [20.0, 21.0, 22.0, 23.0, 24.0, 25.0, 26.0, -1000.0];
    let c = compare(&a, &b, true, 0.05, 0.02);
    assert_eq!(c.test.as_ref().map(|t| t.test), Some(Test::MannWhitney));
    assert!(c.test.as_ref().is_some_and(|t| t.p_value < 0.05), "{c:?}");
    assert!(c.pct_change < 0.0, "{c:?}");
    let [lo, _] = c.change_interval_pct.expect("interval");
    assert!(lo > 0.0, "{c:?}");
    assert_eq!(c.verdict, Verdict::Undecided);
    // The interval printed is named as the ranks', not the means' it lies away from.
    assert!(
        c.verdict_text().starts_with("undecided (ranks' shift +"),
        "{}",
        c.verdict_text()
    );
}

/// Counts that stayed 0 in every try on both sides (retransmissions on a clean path) did
/// not change: shown equal, not undecided for want of a percent of 0 — by either test.
#[test]
fn all_zero_on_both_sides_is_no_change() {
    for n in [3, 4, 6] {
        let z = vec![0.0; n];
        let c = compare(&z, &z, false, 0.05, 0.02);
        assert_eq!(c.change_interval_pct, Some([0.0, 0.0]), "{n}: {c:?}");
        assert_eq!(c.verdict, Verdict::NoChange, "{n}: {c:?}");
    }
    // 0 against counts that moved: no percent, undecided.
    let c = compare(&[0.0; 3], &[1.0, 0.0, 2.0], false, 0.05, 0.02);
    assert_eq!(c.change_interval_pct, None);
    assert_eq!(c.verdict, Verdict::Undecided);
}
