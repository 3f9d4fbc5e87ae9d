//! The change's interval beside the test that decided it, in percent of the baseline: a
//! ratio of the two sides, since a percent is one. Each interval is the one its test
//! inverts, so it leaves out "no change" exactly where the test finds the change
//! significant; and a rate that fell cannot have fallen by more than 100% (differences
//! divided by the baseline's mean gave −150% for a stream that slowed twelvefold, with
//! a noisy baseline). Where a count's tries hold 0, no ratio can be taken: its
//! differences' interval is cut at −100%.

/// The ratios ρ of two independent means (`x` the baseline's, `y` the candidate's; `sa`,
/// `sb` their squared standard errors over `na`, `nb` tries, each at least 2) that Welch's
/// test of `y − ρ·x = 0` does not reject: each ρ's statistic (y − ρx)² / (sb + ρ²sa)
/// against `quantile` (the test's t quantile at given degrees of freedom) at that ρ's own
/// Welch–Satterthwaite degrees of freedom. Fieller's interval, with the degrees of freedom
/// where the test is made: at ρ = 1 they are Welch's test's own, so the interval leaves
/// out 1 exactly where that test rejects, and at a gate's limit they are the limit's. (Taking them at the
/// estimate instead, as before 2026-11-30, gave a stream two tries a side a tax interval
/// of [86%, 95%] beside Welch's "undecided": the baseline's variance, which sets the test
/// at ρ = 1, counted for little at ρ = 0.08.) The connected set around the estimate;
/// None where the baseline's mean is not told from 0 at its own `na − 1` degrees of
/// freedom (far from the estimate no ρ is rejected: unbounded).
pub(super) fn welch_ratio(
    x: f64,
    y: f64,
    (sa, na): (f64, usize),
    (sb, nb): (f64, usize),
    quantile: &dyn Fn(f64) -> f64,
) -> Option<[f64; 2]> {
    if na < 2 || nb < 2 || x == 0.0 || !(x.is_finite() && y.is_finite()) {
        return None;
    }
    let r = y / x;
    if sa == 0.0 && sb == 0.0 {
        return Some([r, r]);
    }
    let df = |rho: f64| {
        let (ta, tb) = (rho * rho * sa, sb);
        let v = ta + tb;
        v * v / (ta * ta / (na - 1) as f64 + tb * tb / (nb - 1) as f64)
    };
    let q_far = quantile((na - 1) as f64);
    if !(q_far.is_finite() && x * x > q_far * q_far * sa) {
        return None;
    }
    let outside = |rho: f64| {
        let q = quantile(df(rho));
        // A ratio where both terms vanish (ρ = 0 with sb = 0) is the estimate's own.
        q.is_finite() && (y - rho * x).powi(2) > q * q * (sb + rho * rho * sa)
    };
    let scale = ((sb + r * r * sa).sqrt() / x.abs())
        .max(r.abs() * 1e-12)
        .max(1e-300);
    let end = |dir: f64| -> Option<f64> {
        // Out from the estimate by doubling steps to a rejected ratio, then bisected.
        let (mut inside, mut step) = (r, scale);
        let mut out = r + dir * step;
        let mut k = 0;
        while !outside(out) {
            inside = out;
            step *= 2.0;
            out = r + dir * step;
            k += 1;
            if k > 1100 {
                return None;
            }
        }
        for _ in 0..200 {
            let mid = 0.5 * (inside + out);
            if mid == inside || mid == out {
                break;
            }
            if outside(mid) {
                out = mid;
            } else {
                inside = mid;
            }
        }
        Some(inside)
    };
    Some([end(-1.0)?, end(1.0)?])
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
