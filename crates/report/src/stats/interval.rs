//! The change's interval beside the test that decided it, in percent of the baseline: a
//! ratio of the two sides, since a percent is one. Each interval is the one its test
//! inverts, so it leaves out "no change" exactly where the test finds the change
//! significant; and a rate that fell cannot have fallen by more than 100% (differences
//! divided by the baseline's mean gave −150% for a stream that slowed twelvefold, with
//! a noisy baseline). Where a count's tries hold 0, no ratio can be taken: its
//! differences' interval is cut at −100%.

use super::{finite, mean_var, t_quantile, u_counts, Welch, MW_EXACT_MAX_N};
use statrs::distribution::{ContinuousCDF, Normal};

/// Welch's `1 - alpha` interval of the change of means, `b` against `a`, in percent of
/// `a`'s mean: Fieller's interval of the ratio of the means (which, unlike the difference's
/// interval over the observed baseline mean, counts the baseline mean's own uncertainty),
/// at the Welch test's own quantile and degrees of freedom, so that it leaves out a ratio
/// of 1 exactly where the test rejects. None with fewer than two finite values a side, a
/// baseline mean of 0 (but [0, 0] where both sides are all 0), or a baseline mean that
/// its own interval does not tell from 0 (the ratio is then unbounded).
pub(super) fn change_interval(a: &[f64], b: &[f64], alpha: f64) -> Option<[f64; 2]> {
    let w = Welch::of(a, b)?;
    if w.ma == 0.0 {
        // No percent of a zero mean, except for no change at all: both sides the same
        // constant (every try counted 0 retransmissions, say) is exactly 0%.
        return (w.mb == 0.0 && w.se2 == 0.0).then_some([0.0, 0.0]);
    }
    let q = w.df.map_or(0.0, |df| t_quantile(1.0 - alpha / 2.0, df));
    let (x, y) = (w.ma, w.mb);
    // The ratios ρ with (y − ρx)² ≤ q²(sb + ρ²sa): bounded where x² > q²·sa.
    let lead = x * x - q * q * w.sa;
    if lead.is_nan() || lead <= 0.0 {
        return None;
    }
    let root = (x * x * w.sb + y * y * w.sa - q * q * w.sa * w.sb)
        .max(0.0)
        .sqrt();
    // (ρ − 1) in percent of |x|: for a negative baseline mean the ends swap.
    let pct = |rho: f64| (rho - 1.0) * 100.0 * x.signum();
    let (p, r) = (
        pct((x * y - q * root) / lead),
        pct((x * y + q * root) / lead),
    );
    let [lo, hi] = if p <= r { [p, r] } else { [r, p] };
    (lo.is_finite() && hi.is_finite()).then_some(no_lower_than_none(a, b, [lo, hi]))
}

/// The `1 - alpha` interval of the shift of `b` against `a` that Mann–Whitney's test
/// inverts (Hodges–Lehmann's, with Moses' bounds): the `c+1`-th smallest and largest of the
/// `n_a·n_b` pairwise comparisons, `c` the largest U the two-sided test at `alpha` rejects
/// (U ≤ c) — exact where [`super::mann_whitney`] is, else the same normal approximation
/// with its continuity correction. Where every value is positive the comparisons are the
/// ratios `b_j / a_i` (the same test on the logarithms: its ranks, so its p-value, do not
/// change), in percent `(ratio − 1)·100`; otherwise the differences `b_j − a_i` in percent
/// of `a`'s mean. None where the sample sizes cannot reach `alpha` (the interval is
/// unbounded), a side has no finite value, or (differences) `a`'s mean is 0. The change of
/// the means may lie outside it: the ranks measure a shift, not the means.
pub(super) fn shift_interval(a: &[f64], b: &[f64], alpha: f64) -> Option<[f64; 2]> {
    let (a, b) = (finite(a), finite(b));
    if a.is_empty() || b.is_empty() || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let positive = a.iter().chain(&b).all(|&x| x > 0.0);
    let mut d: Vec<f64> = b
        .iter()
        .flat_map(|y| a.iter().map(move |x| if positive { y / x } else { y - x }))
        .collect();
    d.sort_by(f64::total_cmp);
    let c = rejected_u(&a, &b, alpha)?;
    let ends = [d[c], d[d.len() - 1 - c]];
    let [lo, hi] = if positive {
        ends.map(|r| (r - 1.0) * 100.0)
    } else {
        let mean_a = mean_var(&a).0;
        if mean_a == 0.0 {
            // As for Welch's: only a shift of exactly 0 has a percent of a zero mean.
            return (ends == [0.0, 0.0]).then_some([0.0, 0.0]);
        }
        ends.map(|x| x / mean_a.abs() * 100.0)
    };
    (lo.is_finite() && hi.is_finite() && lo <= hi).then_some(no_lower_than_none(&a, &b, [lo, hi]))
}

/// `[lo, hi]` with both ends at −100% or above where no value on either side is negative
/// (counts with some tries at 0, which neither ratio can take): a figure that cannot be
/// negative cannot fall by more than all of it, and cutting off what the data could not
/// have does not move the interval's verdict (whether it leaves out 0).
fn no_lower_than_none(a: &[f64], b: &[f64], [lo, hi]: [f64; 2]) -> [f64; 2] {
    if a.iter().chain(b).all(|&x| x >= 0.0 || x.is_nan()) {
        [lo.max(-100.0), hi.max(-100.0)]
    } else {
        [lo, hi]
    }
}

/// The largest U that Mann–Whitney's two-sided test at `alpha` rejects for these samples
/// (exact without ties up to [`MW_EXACT_MAX_N`] values, else the normal approximation with
/// the tie correction and continuity correction); None where no U is rejected.
fn rejected_u(a: &[f64], b: &[f64], alpha: f64) -> Option<usize> {
    let (na, nb) = (a.len(), b.len());
    let mut all: Vec<f64> = a.iter().chain(b).copied().collect();
    all.sort_by(f64::total_cmp);
    // Σ(t³ − t) over tie groups, as the test's variance takes it.
    let mut tie_term = 0.0;
    for group in all.chunk_by(|x, y| x == y) {
        let t = group.len() as f64;
        tie_term += t * t * t - t;
    }
    if na + nb <= MW_EXACT_MAX_N && tie_term == 0.0 {
        let counts = u_counts(na, nb);
        let total: f64 = counts.iter().sum();
        let mut below = 0.0;
        let mut c = None;
        for (u, n) in counts.iter().enumerate() {
            below += n;
            // Strictly below, as the test's p-value must be below alpha.
            if below / total >= alpha / 2.0 {
                break;
            }
            c = Some(u);
        }
        c
    } else {
        let (naf, nbf, nf) = (na as f64, nb as f64, (na + nb) as f64);
        let sd = (naf * nbf / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)))).sqrt();
        let z = Normal::standard().inverse_cdf(1.0 - alpha / 2.0);
        let c = (naf * nbf / 2.0 - 0.5 - z * sd).floor();
        (c >= 0.0).then_some(c as usize)
    }
}
