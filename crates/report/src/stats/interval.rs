//! The change's interval beside the test that decided it, in percent of the baseline: a
//! ratio of the two sides, since a percent is one. Each interval is the one its test
//! inverts, so it leaves out "no change" exactly where the test finds the change
//! significant; and a rate that fell cannot have fallen by more than 100% (differences
//! divided by the baseline's mean gave −150% for a stream that slowed twelvefold, with
//! a noisy baseline). Where a count's tries hold 0, no ratio can be taken: its
//! differences' interval is cut at −100%.

/// Fieller's interval of the ratio `y/x` of two independent means (`x`, `y`, their
/// squared standard errors `sa`, `sb`) at quantile `q`, as the percent change `(ρ − 1)·100`
/// of `|x|`: the ratios ρ with (y − ρx)² ≤ q²(sb + ρ²sa). None where x² ≤ q²·sa (the
/// baseline's mean is not told from 0: the set is unbounded). Unlike the difference's
/// interval over the observed baseline mean, it counts the baseline mean's own uncertainty.
pub(super) fn fieller_pct(x: f64, y: f64, sa: f64, sb: f64, q: f64) -> Option<[f64; 2]> {
    let lead = x * x - q * q * sa;
    if lead.is_nan() || lead <= 0.0 {
        return None;
    }
    let root = (x * x * sb + y * y * sa - q * q * sa * sb).max(0.0).sqrt();
    // (ρ − 1) in percent of |x|: for a negative baseline mean the ends swap.
    let pct = |rho: f64| (rho - 1.0) * 100.0 * x.signum();
    let (p, r) = (
        pct((x * y - q * root) / lead),
        pct((x * y + q * root) / lead),
    );
    let ends = if p <= r { [p, r] } else { [r, p] };
    ends.iter().all(|e| e.is_finite()).then_some(ends)
}

/// The interval from the `c+1`-th smallest to the `c+1`-th largest of the `n_a·n_b`
/// pairwise comparisons of `b` against `a` (Hodges–Lehmann's shift with Moses' bounds, `c`
/// the largest U Mann–Whitney rejects), in percent: where every value is positive the
/// comparisons are the ratios `b_j / a_i` (the same test on the logarithms: its ranks, so
/// its p-value, do not change), as `(ratio − 1)·100`; otherwise the differences `b_j − a_i`
/// in percent of `a`'s mean (None where that mean is 0, but [0, 0] for a shift of exactly
/// 0). `a` and `b` are finite and not empty, `c < n_a·n_b / 2`.
pub(super) fn shift_pct(a: &[f64], b: &[f64], c: usize) -> Option<[f64; 2]> {
    let positive = a.iter().chain(b).all(|&x| x > 0.0);
    let mut d: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| if positive { y / x } else { y - x }))
        .collect();
    d.sort_by(f64::total_cmp);
    let ends = [*d.get(c)?, *d.get(d.len().checked_sub(1 + c)?)?];
    let [lo, hi] = if positive {
        ends.map(|r| (r - 1.0) * 100.0)
    } else {
        let mean_a = a.iter().sum::<f64>() / a.len() as f64;
        if mean_a == 0.0 {
            // As for Welch's: only a shift of exactly 0 has a percent of a zero mean.
            return (ends == [0.0, 0.0]).then_some([0.0, 0.0]);
        }
        ends.map(|x| x / mean_a.abs() * 100.0)
    };
    (lo.is_finite() && hi.is_finite() && lo <= hi).then_some([lo, hi])
}

/// `[lo, hi]` with both ends at −100% or above where no value on either side is negative
/// (counts with some tries at 0, which neither ratio can take): a figure that cannot be
/// negative cannot fall by more than all of it, and cutting off what the data could not
/// have does not move the interval's verdict (whether it leaves out 0).
pub(super) fn no_lower_than_none(a: &[f64], b: &[f64], [lo, hi]: [f64; 2]) -> [f64; 2] {
    if a.iter().chain(b).all(|&x| x >= 0.0 || x.is_nan()) {
        [lo.max(-100.0), hi.max(-100.0)]
    } else {
        [lo, hi]
    }
}
