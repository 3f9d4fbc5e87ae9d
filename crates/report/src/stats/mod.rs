//! Statistics over repeated measurements of one point: summaries with Student-t confidence
//! intervals, Welch's t-test, the Mann–Whitney U test, and a criterion-style verdict on a
//! candidate against a baseline.
//!
//! Everything here is a pure function of the slices it is given, so results can be
//! recomputed from stored samples at any time.
//!
//! # Input that is not a measurement
//!
//! Non-finite values (NaN, ±∞) are dropped before anything is computed, and every `n`
//! reported counts only the finite values kept. A measurement cannot be infinite or NaN; such
//! a value is the trace of a failed run (a division by a zero duration, say), and letting one
//! through would turn every derived number into NaN. Dropping ±∞ as well as NaN keeps every
//! field of a [`Summary`] finite, so it survives a JSON round trip (JSON has no NaN or ∞).
//!
//! No function panics on any input: empty slices, a single value, zero variance and
//! out-of-range parameters each have a documented result.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Normal};
use statrs::function::beta::checked_beta_reg;
use statrs::function::gamma::ln_gamma;

/// Summary of repeated measurements of one point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of finite values summarized (non-finite inputs are not counted).
    pub n: usize,
    /// Arithmetic mean; 0 when `n == 0`.
    pub mean: f64,
    /// Median (mean of the two middle values when `n` is even); 0 when `n == 0`.
    pub median: f64,
    /// Sample standard deviation (divisor `n - 1`); 0 when `n < 2`.
    pub stdev: f64,
    /// Smallest value; 0 when `n == 0`.
    pub min: f64,
    /// Largest value; 0 when `n == 0`.
    pub max: f64,
    /// Coefficient of variation, `stdev / |mean|`; 0 when the mean is 0.
    ///
    /// The absolute value keeps it a non-negative relative spread whatever the sign of the
    /// data; for the positive quantities virtperf measures it is plain `stdev / mean`.
    pub cv: f64,
    /// Lower end of the confidence interval of the mean (`mean - ci_half`).
    pub ci_low: f64,
    /// Upper end of the confidence interval of the mean (`mean + ci_half`).
    pub ci_high: f64,
    /// Half-width of the Student-t confidence interval of the mean.
    ///
    /// 0 when `n < 2`: one value says nothing about spread, but an infinite width would not
    /// survive JSON. A 0 here is therefore only meaningful together with `n >= 2`, which is
    /// why [`ci_within`] demands it.
    pub ci_half: f64,
    /// Confidence level of the interval, in (0, 1); 0 when the level asked for was not in
    /// that open interval, in which case the interval is the mean itself.
    pub confidence: f64,
}

/// Summarize `xs`, with a Student-t confidence interval of the mean at level `confidence`
/// (e.g. 0.95).
///
/// - Non-finite values are dropped (see the [module documentation](self)).
/// - Empty input (or nothing finite) gives `n == 0` and every other field 0, except
///   `confidence`.
/// - `n == 1` gives `stdev == 0` and a zero-width interval; see [`Summary::ci_half`].
/// - All values equal gives `stdev == 0` and a zero-width interval, which is exact.
/// - A `confidence` that is NaN or outside the open interval (0, 1) is recorded as 0 and
///   gives a zero-width interval (a 0 % interval), rather than a panic or a silent default.
pub fn summarize(xs: &[f64], confidence: f64) -> Summary {
    let confidence = valid_confidence(confidence);
    let mut v = finite(xs);
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let (Some(&min), Some(&max)) = (v.first(), v.last()) else {
        return Summary {
            n: 0,
            mean: 0.0,
            median: 0.0,
            stdev: 0.0,
            min: 0.0,
            max: 0.0,
            cv: 0.0,
            ci_low: 0.0,
            ci_high: 0.0,
            ci_half: 0.0,
            confidence,
        };
    };
    let mid = n / 2;
    let median = if n % 2 == 1 {
        v[mid]
    } else {
        // Halfway point written so that two huge values cannot overflow their sum.
        v[mid - 1] + (v[mid] - v[mid - 1]) / 2.0
    };
    let (mean, var) = mean_var(&v);
    let stdev = var.sqrt();
    let cv = if mean == 0.0 { 0.0 } else { stdev / mean.abs() };
    let ci_half = if n >= 2 && confidence > 0.0 {
        t_quantile((1.0 + confidence) / 2.0, (n - 1) as f64) * stdev / (n as f64).sqrt()
    } else {
        0.0
    };
    Summary {
        n,
        mean,
        median,
        stdev,
        min,
        max,
        cv,
        ci_low: mean - ci_half,
        ci_high: mean + ci_half,
        ci_half,
        confidence,
    }
}

/// Inverse cumulative distribution function (quantile) of Student's t distribution with
/// `df` degrees of freedom: the `t` such that P(T <= t) = `p`.
///
/// `df` may be fractional (as Welch's test produces) or infinite (the standard normal).
/// Returns NaN when `p` is NaN or outside [0, 1], or `df` is NaN or not positive, like the
/// float functions of `std` do for arguments outside their domain; `p == 0` and `p == 1`
/// give −∞ and +∞, and so does a quantile beyond 10¹⁵⁰ (`df` < 2 with extreme `p`).
///
/// statrs' own `StudentsT::inverse_cdf` is not used: in statrs 0.18 it panics for small
/// `df` with extreme `p` (its starting point turns NaN) and drifts for large `df` (1.959848
/// for the 0.975 quantile at df = 10⁶, against 1.959966). Instead the upper tail
/// probability, from statrs' regularized incomplete beta function, is inverted by a
/// bracketed Newton iteration, or the Cornish–Fisher expansion is used for large `df`.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(0.0..=1.0).contains(&p) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p == 0.5 {
        return 0.0;
    }
    if df > T_LARGE_DF {
        return t_quantile_large_df(p, df);
    }
    // By symmetry, solve in the upper tail; 1 - p is exact for p in [0.5, 1].
    if p < 0.5 {
        -t_upper_quantile(p, df)
    } else {
        t_upper_quantile(1.0 - p, df)
    }
}

/// Largest quantile [`t_quantile`] resolves; beyond it (only reachable with `df` < 2 and
/// extreme `p`) it answers ±∞, because `df / (df + q²)` underflows and the tail probability
/// can no longer be evaluated.
const T_MAX_QUANTILE: f64 = 1e150;

/// Degrees of freedom above which [`t_quantile`] uses the Cornish–Fisher expansion.
const T_LARGE_DF: f64 = 1e4;

/// Degrees of freedom above which [`t_sf`] is replaced by the normal tail, whose difference
/// from the t tail is then below 10⁻⁸ and smaller than the incomplete beta function's error
/// (its argument `df / (df + t²)` is too close to 1).
const T_NORMAL_DF: f64 = 1e8;

/// Student-t quantile for large `df` (including ∞) by the Cornish–Fisher expansion around
/// the normal quantile (Abramowitz & Stegun 26.7.5). Its terms shrink like (z²/df)ᵏ, so
/// above [`T_LARGE_DF`] four terms are exact to double precision for ordinary `p` and to
/// about 10⁻⁸ relative at the extreme tails representable in f64. `p` must be in (0, 1).
fn t_quantile_large_df(p: f64, df: f64) -> f64 {
    let z = Normal::standard().inverse_cdf(p);
    if df.is_infinite() {
        return z;
    }
    let z2 = z * z;
    let g1 = z * (z2 + 1.0) / 4.0;
    let g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0;
    let g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0;
    let g4 = z * ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) / 92160.0;
    z + (g1 + (g2 + (g3 + g4 / df) / df) / df) / df
}

/// The `q >= 0` with P(T > q) = `tail`, for `tail` in (0, 0.5) and finite `df > 0`.
///
/// Works in `s = ln q` on `g(s) = ln sf(e^s) - ln tail`, which is close to linear for the
/// power-law tails of small `df` (where Newton in `q` itself crawls) and smooth for large
/// `df`. The root is first bracketed, then Newton steps are taken, replaced by bisection
/// whenever one would leave the bracket, so the loop always ends.
fn t_upper_quantile(tail: f64, df: f64) -> f64 {
    let ln_tail = tail.ln();
    let g = |s: f64| t_sf(s.exp(), df).ln() - ln_tail;
    let guess = t_quantile_large_df(1.0 - tail, df);
    let mut s = if guess.is_finite() && guess > 0.0 {
        guess.ln()
    } else {
        0.0
    };

    // Bracket: g(lo) > 0 (q too small), g(hi) <= 0. g > 0 as s → −∞ since sf(0) = 0.5 > tail.
    let max_s = T_MAX_QUANTILE.ln();
    let (mut lo, mut hi) = if g(s) > 0.0 {
        (s, f64::NAN)
    } else {
        (f64::NAN, s)
    };
    let mut width = 1.0;
    for _ in 0..80 {
        if lo.is_nan() {
            let t = hi - width;
            if g(t) > 0.0 {
                lo = t;
            } else {
                hi = t;
            }
        } else if hi.is_nan() {
            let t = (lo + width).min(max_s);
            if g(t) > 0.0 {
                if t >= max_s {
                    return f64::INFINITY;
                }
                lo = t;
            } else {
                hi = t;
            }
        } else {
            break;
        }
        width *= 2.0;
    }
    if lo.is_nan() || hi.is_nan() {
        return f64::NAN;
    }

    s = s.clamp(lo, hi);
    for _ in 0..200 {
        let q = s.exp();
        let sf = t_sf(q, df);
        let gs = sf.ln() - ln_tail;
        if gs == 0.0 {
            return q;
        }
        if gs > 0.0 {
            lo = s;
        } else {
            hi = s;
        }
        // dg/ds = -pdf(q) q / sf(q).
        let slope = -t_pdf(q, df) * q / sf;
        let newton = s - gs / slope;
        let next = if newton > lo && newton < hi {
            newton
        } else {
            lo + (hi - lo) / 2.0
        };
        if (next - s).abs() <= 4.0 * f64::EPSILON * s.abs().max(1.0) || next == lo || next == hi {
            return next.exp();
        }
        s = next;
    }
    s.exp()
}

/// Upper tail P(T > q) of Student's t for `q >= 0`; NaN only if statrs rejects the input.
fn t_sf(q: f64, df: f64) -> f64 {
    if df > T_NORMAL_DF {
        return Normal::standard().sf(q);
    }
    let q2 = q * q;
    if q2.is_infinite() {
        return 0.0;
    }
    // P(T > q) = I_h(df/2, 1/2) / 2 with h = df / (df + q²), accurate to relative precision
    // in the tail. Near the centre (small q, h close to 1) statrs evaluates it as
    // 1 - I_{1-h}(1/2, df/2) and forming 1 - h cancels, so there the complement is taken
    // with y = q² / (df + q²) computed directly; it is only used when I_y <= 1/2, where
    // subtracting it from 1 loses nothing.
    match checked_beta_reg(df / 2.0, 0.5, df / (df + q2)) {
        Ok(i) if i <= 0.5 => 0.5 * i,
        Ok(_) => {
            checked_beta_reg(0.5, df / 2.0, q2 / (df + q2)).map_or(f64::NAN, |c| 0.5 - 0.5 * c)
        }
        Err(_) => f64::NAN,
    }
}

/// Density of Student's t at `q`, through log-gamma so that large `df` cannot overflow.
fn t_pdf(q: f64, df: f64) -> f64 {
    (ln_gamma((df + 1.0) / 2.0)
        - ln_gamma(df / 2.0)
        - 0.5 * (df * std::f64::consts::PI).ln()
        - (df + 1.0) / 2.0 * (q * q / df).ln_1p())
    .exp()
}

/// True when the confidence interval of the mean is within `rel` of `|mean|`, i.e.
/// `ci_half <= rel * |mean|`: the repetition-stopping rule of netperf's `-I`.
///
/// `rel` bounds the half-width, so netperf's `-I 99,5` (the whole interval within 5 % of
/// the mean) is `rel = 0.025` on a summary at confidence 0.99. False when `n < 2` (one
/// value has a zero-width interval that proves nothing), when the summary has no valid
/// confidence level, or when `rel` is NaN or negative.
pub fn ci_within(s: &Summary, rel: f64) -> bool {
    s.n >= 2
        && s.confidence > 0.0
        && rel >= 0.0
        && s.ci_half.is_finite()
        && s.ci_half <= rel * s.mean.abs()
}

/// Which significance test produced a [`TestResult`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// Welch's unequal-variances t-test on the means.
    Welch,
    /// Mann–Whitney U (Wilcoxon rank-sum) test, free of any normality assumption.
    MannWhitney,
}

/// Outcome of a two-sided, two-sample significance test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// The test that was run.
    pub test: Test,
    /// Welch: `t = (mean_a - mean_b) / se`. Mann–Whitney: `U` of the first sample, the
    /// number of pairs (x from `a`, y from `b`) with x > y, ties counting one half (as
    /// SciPy reports it).
    pub statistic: f64,
    /// Welch–Satterthwaite degrees of freedom; `None` for Mann–Whitney and for Welch when
    /// both samples have zero variance (the formula is 0/0 there).
    pub df: Option<f64>,
    /// Two-sided p-value, in [0, 1].
    pub p_value: f64,
}

/// Welch's two-sided t-test of equal means, `a` against `b`.
///
/// Non-finite values are dropped first. `None` when either sample has fewer than 2 values,
/// since a sample variance needs two.
///
/// When both samples have zero variance the t statistic is a division by zero; the answer
/// is then exact rather than statistical: equal means give `statistic = 0, p = 1`,
/// different means give `statistic = ±∞, p = 0`, with `df = None`. Note that JSON cannot
/// hold that infinite statistic.
pub fn welch_t(a: &[f64], b: &[f64]) -> Option<TestResult> {
    let w = Welch::of(a, b)?;
    let Some(df) = w.df else {
        let (statistic, p_value) = if w.ma == w.mb {
            (0.0, 1.0)
        } else {
            ((w.ma - w.mb).signum() * f64::INFINITY, 0.0)
        };
        return Some(TestResult {
            test: Test::Welch,
            statistic,
            df: None,
            p_value,
        });
    };
    let t = (w.ma - w.mb) / w.se2.sqrt();
    let p_value = (2.0 * t_sf(t.abs(), df)).clamp(0.0, 1.0);
    Some(TestResult {
        test: Test::Welch,
        statistic: t,
        df: Some(df),
        p_value,
    })
}

/// The parts of Welch's two-sample statistics that its test and its interval share: the
/// finite values' means, the squared standard error of their difference, and the
/// Welch–Satterthwaite degrees of freedom (None where both variances are 0: 0/0).
struct Welch {
    ma: f64,
    mb: f64,
    /// Each mean's squared standard error (variance over tries).
    sa: f64,
    sb: f64,
    se2: f64,
    df: Option<f64>,
}

impl Welch {
    /// None when either side has fewer than 2 finite values (a variance needs two).
    fn of(a: &[f64], b: &[f64]) -> Option<Welch> {
        let (a, b) = (finite(a), finite(b));
        if a.len() < 2 || b.len() < 2 {
            return None;
        }
        let (na, nb) = (a.len() as f64, b.len() as f64);
        let ((ma, va), (mb, vb)) = (mean_var(&a), mean_var(&b));
        let (sa, sb) = (va / na, vb / nb);
        let se2 = sa + sb;
        // Written in shares of se² so that tiny variances cannot underflow their squares
        // to 0/0.
        let df = (se2 > 0.0).then(|| {
            let (ra, rb) = (sa / se2, sb / se2);
            1.0 / (ra * ra / (na - 1.0) + rb * rb / (nb - 1.0))
        });
        Some(Welch {
            ma,
            mb,
            sa,
            sb,
            se2,
            df,
        })
    }
}

/// Largest total sample size for which [`mann_whitney`] uses the exact distribution of U.
const MW_EXACT_MAX_N: usize = 20;

/// Mann–Whitney U test (two-sided) of `a` against `b`.
///
/// Non-finite values are dropped first. `None` when either sample is empty.
///
/// The p-value is exact (from the permutation distribution of U, counted by dynamic
/// programming) when `n_a + n_b <= 20` and there are no ties; otherwise it is the normal
/// approximation with the tie correction of the variance and a continuity correction of
/// 0.5, which is what SciPy's `mannwhitneyu(method="asymptotic")` and R's `wilcox.test`
/// compute. When every value is tied the ranks carry no information and `p = 1`.
pub fn mann_whitney(a: &[f64], b: &[f64]) -> Option<TestResult> {
    let (a, b) = (finite(a), finite(b));
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (na, nb) = (a.len(), b.len());
    let n = na + nb;
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&x| (x, true))
        .chain(b.iter().map(|&y| (y, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));

    // Midranks of tie groups, and Σ(t³ − t) over tie groups for the variance correction.
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i + 1;
        while j < n && all[j].0 == all[i].0 {
            j += 1;
        }
        let midrank = (i + 1 + j) as f64 / 2.0;
        let t = (j - i) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += midrank * all[i..j].iter().filter(|e| e.1).count() as f64;
        i = j;
    }
    let u = rank_sum_a - (na * (na + 1)) as f64 / 2.0;
    Some(TestResult {
        test: Test::MannWhitney,
        statistic: u,
        df: None,
        p_value: mw_p_value(u, na, nb, tie_term),
    })
}

/// Two-sided p-value of `U` (of the first sample) for sample sizes `na`, `nb` ≥ 1, with
/// `tie_term` = Σ(t³ − t) over tie groups (0 when there are no ties).
fn mw_p_value(u: f64, na: usize, nb: usize, tie_term: f64) -> f64 {
    let n = na + nb;
    if n <= MW_EXACT_MAX_N && tie_term == 0.0 {
        // Without ties U is an integer in 0..=na*nb; rounding only removes float noise.
        let u = u.round().clamp(0.0, (na * nb) as f64) as usize;
        let counts = u_counts(na, nb);
        let total: f64 = counts.iter().sum();
        let lower: f64 = counts[..=u].iter().sum();
        let upper: f64 = counts[u..].iter().sum();
        return (2.0 * lower.min(upper) / total).min(1.0);
    }
    let (naf, nbf, nf) = (na as f64, nb as f64, n as f64);
    let mu = naf * nbf / 2.0;
    let var = naf * nbf / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mu).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * Normal::standard().sf(z)).min(1.0)
}

/// Number of orderings of `m` values of one sample and `n` of the other (no ties) giving
/// each value of U = 0..=m*n, U counting pairs where the first sample's value is larger.
///
/// Recurrence on the largest value: if it belongs to the first sample it beats all `n`
/// others (U grows by `n`), otherwise it adds nothing. Counts stay below C(20, 10) for the
/// sizes used, so f64 holds them exactly.
fn u_counts(m: usize, n: usize) -> Vec<f64> {
    // prev[j] holds the distribution for (i - 1, j); cur[j] is built for (i, j).
    let mut prev: Vec<Vec<f64>> = vec![vec![1.0]; n + 1];
    for i in 1..=m {
        let mut cur: Vec<Vec<f64>> = Vec::with_capacity(n + 1);
        cur.push(vec![1.0]);
        for j in 1..=n {
            let mut d = vec![0.0; i * j + 1];
            for (u, c) in cur[j - 1].iter().enumerate() {
                d[u] += c;
            }
            for (u, c) in prev[j].iter().enumerate() {
                d[u + j] += c;
            }
            cur.push(d);
        }
        prev = cur;
    }
    prev.pop().unwrap_or_else(|| vec![1.0])
}

/// Verdict on a candidate against its baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Significantly better, by more than the noise threshold.
    Improved,
    /// Significantly worse, by more than the noise threshold.
    Regressed,
    /// Not statistically significant, and the change's interval (at the test's confidence)
    /// lies within the noise threshold: no change beyond noise, shown by the data.
    NoChange,
    /// Not statistically significant, but the change's interval reaches beyond the noise
    /// threshold (or none could be computed: fewer than two values a side, no threshold):
    /// the data cannot tell a change from none. Also where Mann–Whitney found a shift and
    /// the means moved the other way. Called "no significant change" before,
    /// which read as "no change" for a −46% of two tries a side.
    Undecided,
    /// Statistically significant, but the change is smaller than the noise threshold.
    WithinNoise,
}

impl Verdict {
    /// Human wording, after criterion's.
    pub fn words(&self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no significant change",
            Verdict::Undecided => "undecided",
            Verdict::WithinNoise => "change within noise threshold",
        }
    }
}

/// A candidate compared with a baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Summary of the baseline samples, at confidence `1 - alpha`.
    pub baseline: Summary,
    /// Summary of the candidate samples, at confidence `1 - alpha`.
    pub candidate: Summary,
    /// `(mean_candidate - mean_baseline) / |mean_baseline| * 100`; when the baseline mean
    /// is 0 it is 0 if the candidate mean is 0 too and ±∞ otherwise.
    pub pct_change: f64,
    /// The significance test run, `None` when no test could be (a side with no values).
    pub test: Option<TestResult>,
    /// Significance level the p-value was held against.
    pub alpha: f64,
    /// The `1 - alpha` interval of the change, in percent of the baseline's mean, from the
    /// test that decided: Welch's interval of `pct_change` (both sides with two values or
    /// more), or under Mann–Whitney the interval of the shift its ranks give
    /// (Hodges–Lehmann, which `pct_change`, a change of means, may lie outside). None where
    /// there is none: too few values, or a baseline mean of 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub change_interval_pct: Option<[f64; 2]>,
    /// Whether a higher value is better (a rate) or worse (a latency): the direction a
    /// regression lies in.
    #[serde(default)]
    pub higher_is_better: bool,
    /// The verdict.
    pub verdict: Verdict,
}

impl Comparison {
    /// The verdict in words, an undecided one with the change's interval that left it so:
    /// `undecided (-12.3% to +3.1%)`.
    pub fn verdict_text(&self) -> String {
        // Mann–Whitney's interval is of the shift its ranks show, which the change of
        // means beside it may lie outside: it is named as such.
        let of = match self.test.as_ref().map(|t| t.test) {
            Some(Test::MannWhitney) => "ranks' shift ",
            _ => "",
        };
        match (self.verdict, self.change_interval_pct) {
            (Verdict::Undecided, Some([lo, hi])) => {
                format!("undecided ({of}{lo:+.1}% to {hi:+.1}%)")
            }
            (v, _) => v.words().to_string(),
        }
    }

    /// The largest regression the change's interval leaves possible, in percent (the
    /// interval's end on the worse side, as a positive number; 0 where that end is an
    /// improvement): None without an interval, where no regression is excluded.
    pub fn worst_regression_pct(&self) -> Option<f64> {
        let [lo, hi] = self.change_interval_pct?;
        Some(if self.higher_is_better { -lo } else { hi }.max(0.0))
    }
}

/// Compare candidate `b` against baseline `a`. `higher_is_better` decides improved vs
/// regressed.
///
/// The test: Welch's t-test when both sides have at least 5 finite values; below that
/// Mann–Whitney, which assumes no normality. But with few values Mann–Whitney cannot reach
/// significance at all: its smallest p-value is that of complete separation, 0.1 for 3
/// against 3. When that smallest p-value is not below `alpha`, Welch is run instead if both
/// sides have at least 2 values, since it at least can detect a large, clean difference
/// (at the price of assuming normality); with fewer, Mann–Whitney is kept and the verdict is
/// [`Verdict::Undecided`]. With an empty side no test is run (`test = None`, `Undecided`).
///
/// The verdict: where `p ≥ alpha` (and always when `alpha` is NaN or outside (0, 1)),
/// `NoChange` if the change's `1 - alpha` interval lies within ±`noise`, else `Undecided`;
/// where `p < alpha`, [`Verdict::WithinNoise`] if `|pct_change| < noise * 100` (`noise` is
/// relative, e.g. 0.02 for 2 %; NaN or negative means no threshold) or the means are equal;
/// otherwise the direction of the change of the means, read through `higher_is_better` —
/// `Undecided` instead where Mann–Whitney decided and the means moved against the shift
/// its interval shows (an outlier's pull), `WithinNoise` where that shift's interval lies
/// within the noise threshold. The interval is the deciding test's:
/// [`Comparison::change_interval_pct`].
pub fn compare(a: &[f64], b: &[f64], higher_is_better: bool, alpha: f64, noise: f64) -> Comparison {
    // Intervals at the level matching the test; summarize() records 0 for a senseless alpha.
    let confidence = 1.0 - alpha;
    let baseline = summarize(a, confidence);
    let candidate = summarize(b, confidence);
    let pct_change = if baseline.mean == 0.0 {
        if candidate.mean == 0.0 {
            0.0
        } else {
            candidate.mean.signum() * f64::INFINITY
        }
    } else {
        (candidate.mean - baseline.mean) / baseline.mean.abs() * 100.0
    };

    let (na, nb) = (baseline.n, candidate.n);
    // Mann–Whitney only when it is the better choice and could find significance at all.
    let mw_can_decide = mw_min_p(na, nb) < alpha;
    let use_welch = na >= 2 && nb >= 2 && ((na >= 5 && nb >= 5) || !mw_can_decide);
    let test = if use_welch {
        welch_t(a, b)
    } else {
        mann_whitney(a, b)
    };

    let alpha_valid = alpha > 0.0 && alpha < 1.0;
    let significant = alpha_valid && test.as_ref().is_some_and(|t| t.p_value < alpha);
    // The interval of the test that decides: Welch's, or the one Mann–Whitney's ranks give.
    let change_interval_pct = match test.as_ref().map(|t| t.test) {
        Some(Test::MannWhitney) => shift_interval(a, b, alpha),
        _ => change_interval(a, b, alpha),
    }
    .filter(|_| alpha_valid);
    let within = |[lo, hi]: [f64; 2]| noise > 0.0 && lo >= -noise * 100.0 && hi <= noise * 100.0;
    // Mann–Whitney decides on ranks, the direction is read from the means: where an
    // outlier turns the means against the shift the ranks showed, the data disagree.
    let against_ranks = change_interval_pct
        .is_some_and(|[lo, hi]| (lo > 0.0 && pct_change < 0.0) || (hi < 0.0 && pct_change > 0.0));
    let shift_within = change_interval_pct.is_some_and(within);
    let verdict = if !significant {
        if shift_within {
            Verdict::NoChange
        } else {
            Verdict::Undecided
        }
    } else if pct_change == 0.0
        || pct_change.abs() < noise * 100.0
        || (against_ranks && shift_within)
    {
        Verdict::WithinNoise
    } else if against_ranks {
        Verdict::Undecided
    } else if (pct_change > 0.0) == higher_is_better {
        Verdict::Improved
    } else {
        Verdict::Regressed
    };
    Comparison {
        baseline,
        candidate,
        pct_change,
        test,
        alpha,
        change_interval_pct,
        higher_is_better,
        verdict,
    }
}

/// The `confidence` interval of the ratio of two independent means (`x` the baseline's,
/// `y` the candidate's, each with its squared standard error and tries): the ratios
/// Welch's test does not reject, each at its own degrees of freedom ([`welch_ratio`]).
/// None with fewer than 2 tries a side, a baseline mean of 0, or one its own t-interval
/// does not tell from 0 (unbounded).
pub(crate) fn ratio_of_means(
    x: f64,
    y: f64,
    a: (f64, usize),
    b: (f64, usize),
    confidence: f64,
) -> Option<[f64; 2]> {
    let p = (1.0 + confidence) / 2.0;
    welch_ratio(x, y, a, b, &|df| t_quantile(p, df))
}

/// Welch's `1 - alpha` interval of the change of means, `b` against `a`, in percent of
/// `a`'s mean: the ratios of the means Welch's test does not reject ([`welch_ratio`]:
/// Fieller's interval, each ratio at its own degrees of freedom), so that it leaves out a
/// ratio of 1 exactly where the test rejects. None with fewer than two finite values a
/// side, a baseline mean of 0 (but [0, 0] where both sides are all 0), or a baseline mean
/// that its own interval does not tell from 0 (the ratio is then unbounded).
fn change_interval(a: &[f64], b: &[f64], alpha: f64) -> Option<[f64; 2]> {
    let w = Welch::of(a, b)?;
    if w.ma == 0.0 {
        // No percent of a zero mean, except for no change at all: both sides the same
        // constant (every try counted 0 retransmissions, say) is exactly 0%.
        return (w.mb == 0.0 && w.se2 == 0.0).then_some([0.0, 0.0]);
    }
    let (na, nb) = (finite(a).len(), finite(b).len());
    let [lo, hi] = ratio_of_means(w.ma, w.mb, (w.sa, na), (w.sb, nb), 1.0 - alpha)?;
    // (ρ − 1) in percent of |x|: for a negative baseline mean the ends swap.
    let pct = |rho: f64| (rho - 1.0) * 100.0 * w.ma.signum();
    let (p, r) = (pct(lo), pct(hi));
    let ends = if p <= r { [p, r] } else { [r, p] };
    ends.iter()
        .all(|e| e.is_finite())
        .then_some(ends)
        .map(|iv| no_lower_than_none(a, b, iv))
}

/// The `1 - alpha` interval of the shift of `b` against `a` that Mann–Whitney's test
/// inverts ([`shift_pct`] at the largest U it rejects, [`rejected_u`]): None where the
/// sample sizes cannot reach `alpha` (the interval is unbounded) or a side has no finite
/// value. The change of the means may lie outside it: the ranks measure a shift.
fn shift_interval(a: &[f64], b: &[f64], alpha: f64) -> Option<[f64; 2]> {
    let (a, b) = (finite(a), finite(b));
    if a.is_empty() || b.is_empty() || !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let c = rejected_u(&a, &b, alpha)?;
    shift_pct(&a, &b, c).map(|iv| no_lower_than_none(&a, &b, iv))
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

/// Smallest p-value Mann–Whitney can give for sample sizes `na`, `nb` ≥ 1: the one for
/// complete separation (U = 0, no ties), computed by the same path as the test itself.
fn mw_min_p(na: usize, nb: usize) -> f64 {
    mw_p_value(0.0, na, nb, 0.0)
}

/// The finite values of `xs`, in order.
fn finite(xs: &[f64]) -> Vec<f64> {
    xs.iter().copied().filter(|x| x.is_finite()).collect()
}

/// Mean and sample variance (divisor n − 1; 0 when n < 2) of a non-empty slice.
///
/// Two passes rather than a running sum of squares, which cancels catastrophically for
/// values with a large mean and a small spread, exactly the shape of benchmark results.
fn mean_var(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = v.iter().map(|x| (x - mean) * (x - mean)).sum();
    (mean, ss / (n - 1.0))
}

/// `confidence` when it is in the open interval (0, 1), else 0.
fn valid_confidence(confidence: f64) -> f64 {
    if confidence > 0.0 && confidence < 1.0 {
        confidence
    } else {
        0.0
    }
}

mod interval;
use interval::{no_lower_than_none, shift_pct, welch_ratio};

#[cfg(test)]
mod tests;
