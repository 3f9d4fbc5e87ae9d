//! Decisions: what a gate, a pick, a verdict or a headline concludes, and the evidence it
//! rests on. Every command that decides (`vm compare --max-tax`, a spec's `[compare]
//! max_tax`, `tune`'s pick, the quickstart's headline) decides here, by one rule: a bound
//! is met only when the interval of the figure lies on its side, not met only when the
//! interval lies past it, and otherwise the answer is [`Outcome::Undecided`], with why.
//! A decision with no figure at all is [`Outcome::NotMeasured`], never a pass.

use serde::Serialize;

use crate::stats::{t_quantile, Summary};

/// What a decision concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The bound holds: the figure's whole interval is on its side.
    Met,
    /// The figure's interval overlaps the bound (or there is no interval): neither can be
    /// said.
    Undecided,
    /// The figure was not measured (no result on a side it needs).
    NotMeasured,
    /// The bound is broken: the figure's whole interval is past it.
    NotMet,
}

impl Outcome {
    /// The outcome in a word or two, as tables print it.
    pub fn words(self) -> &'static str {
        match self {
            Outcome::Met => "met",
            Outcome::Undecided => "undecided",
            Outcome::NotMeasured => "not measured",
            Outcome::NotMet => "over",
        }
    }

    /// The process exit code for a command whose worst decision is this one (README's
    /// table): 0 met, 3 not met, 4 not measured, 5 undecided.
    pub fn exit_code(self) -> u8 {
        match self {
            Outcome::Met => 0,
            Outcome::NotMet => exit::NOT_MET,
            Outcome::NotMeasured => exit::NOT_MEASURED,
            Outcome::Undecided => exit::UNDECIDED,
        }
    }
}

/// Exit codes of decisions, the same in every command.
pub mod exit {
    /// A gate or goal is not met (over `--max-tax`, a regression past the threshold).
    pub const NOT_MET: u8 = 3;
    /// What a decision needs was not measured (a run with failed trials, a gated workload
    /// without both sides' results).
    pub const NOT_MEASURED: u8 = 4;
    /// The intervals cannot tell (one try, or an interval across the bound).
    pub const UNDECIDED: u8 = 5;
}

/// The worst of `outcomes` (not met before not measured before undecided before met);
/// `Met` for none.
pub fn worst(outcomes: impl IntoIterator<Item = Outcome>) -> Outcome {
    outcomes
        .into_iter()
        .max_by_key(|o| match o {
            Outcome::Met => 0,
            Outcome::Undecided => 1,
            Outcome::NotMeasured => 2,
            Outcome::NotMet => 3,
        })
        .unwrap_or(Outcome::Met)
}

/// An interval of a figure, or why there is none.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Interval {
    /// Its two ends, lowest first, at the decision's confidence.
    Bounded {
        /// Lower end.
        low: f64,
        /// Upper end.
        high: f64,
    },
    /// No interval could be formed, and why ("1 try: no interval").
    None {
        /// Why, in words.
        why: String,
    },
}

impl Interval {
    /// The two ends, if bounded.
    pub fn ends(&self) -> Option<(f64, f64)> {
        match self {
            Interval::Bounded { low, high } => Some((*low, *high)),
            Interval::None { .. } => None,
        }
    }

    /// Its ends through `num` as `[low, high]`, or `(why)` where there is none.
    pub fn words(&self, num: impl Fn(f64) -> String) -> String {
        match self {
            Interval::Bounded { low, high } => format!("[{}, {}]", num(*low), num(*high)),
            Interval::None { why } => format!("({why})"),
        }
    }
}

/// Why a summary of `n` tries has no interval, if it has none.
pub fn no_interval_why(n: usize) -> Option<String> {
    match n {
        0 => Some("not measured".into()),
        1 => Some("1 try: no interval".into()),
        _ => None,
    }
}

/// The interval of the ratio `candidate.mean / baseline.mean` of two independent samples
/// at `confidence` (e.g. 0.95): Fieller's, each ratio at the Welch–Satterthwaite degrees
/// of freedom of its own test ([`crate::stats::ratio_of_means`]), so that it leaves out 1
/// exactly where Welch's test of the two means rejects, and a limit exactly where the test
/// at that limit does. Unlike dividing one mean's interval ends by the other's, this is an
/// interval of the ratio at the level asked for. None (with why) with fewer than 2 tries
/// on a side, or where the baseline's mean is not distinguishable from 0 (the interval is
/// unbounded). Every ratio this tool takes is of quantities that are never negative (rates,
/// times, costs): a low end below 0 (a candidate whose two tries do not tell its mean from
/// 0) is given as 0, the nearest ratio there can be; no decision about 1 or a limit above
/// 0 changes with it.
pub fn ratio_interval(baseline: &Summary, candidate: &Summary, confidence: f64) -> Interval {
    let none = |why: String| Interval::None { why };
    if let Some(why) = no_interval_why(baseline.n.min(candidate.n)) {
        return none(why);
    }
    let (x, y) = (baseline.mean, candidate.mean);
    if !(x.is_finite() && y.is_finite()) || x == 0.0 {
        return none("the baseline's mean is 0: no ratio".into());
    }
    let va = baseline.stdev.powi(2) / baseline.n as f64;
    let vb = candidate.stdev.powi(2) / candidate.n as f64;
    match crate::stats::ratio_of_means(x, y, (va, baseline.n), (vb, candidate.n), confidence) {
        Some([low, high]) => Interval::Bounded {
            low: low.max(0.0),
            high,
        },
        None => none("the baseline's interval reaches 0: the ratio's interval is unbounded".into()),
    }
}

/// Decides `figure ≤ limit` (`at_most`) or `figure ≥ limit` from the figure's interval:
/// met when the whole interval is on the bound's side, not met when it is wholly past it,
/// undecided otherwise (or without an interval).
pub fn bound(interval: &Interval, limit: f64, at_most: bool) -> Outcome {
    let Some((lo, hi)) = interval.ends() else {
        return Outcome::Undecided;
    };
    let (inside, outside) = if at_most {
        (hi <= limit, lo > limit)
    } else {
        (lo >= limit, hi < limit)
    };
    if inside {
        Outcome::Met
    } else if outside {
        Outcome::NotMet
    } else {
        Outcome::Undecided
    }
}

/// Welch–Satterthwaite degrees of freedom of a sum of variance terms, each `(term, n)`: a
/// sample's variance of its mean (times any constant factor) and its tries (at least 2).
/// Infinite where the sum is 0 (exact data: the interval is the point).
fn welch_df(parts: [(f64, usize); 2]) -> f64 {
    let v: f64 = parts.iter().map(|(t, _)| t).sum();
    if v <= 0.0 {
        return f64::INFINITY;
    }
    v * v
        / parts
            .iter()
            .map(|(t, n)| t * t / (n - 1) as f64)
            .sum::<f64>()
}

/// The interval of `candidate.mean − baseline.mean` of two independent samples at
/// `confidence` (Welch: unequal variances, Welch–Satterthwaite degrees of freedom); None
/// (with why) with fewer than 2 tries on a side.
pub fn difference_interval(baseline: &Summary, candidate: &Summary, confidence: f64) -> Interval {
    if let Some(why) = no_interval_why(baseline.n.min(candidate.n)) {
        return Interval::None { why };
    }
    let va = baseline.stdev.powi(2) / baseline.n as f64;
    let vb = candidate.stdev.powi(2) / candidate.n as f64;
    let v = va + vb;
    let df = welch_df([(va, baseline.n), (vb, candidate.n)]);
    let t = t_quantile((1.0 + confidence) / 2.0, df);
    let d = candidate.mean - baseline.mean;
    if !(t.is_finite() && d.is_finite()) {
        return Interval::None {
            why: format!(
                "no {}% quantile at {df:.1} degrees of freedom",
                confidence * 100.0
            ),
        };
    }
    let h = t * v.sqrt();
    Interval::Bounded {
        low: d - h,
        high: d + h,
    }
}

/// What a ratio (candidate ÷ baseline) says of a change, from its interval: `raises` or
/// `lowers` where the interval excludes 1, `no measurable effect` only where it lies within
/// `band` of 1 either way (the tries rule out a larger change), `undecided` where it holds
/// 1 but reaches past the band, or where there is no interval.
pub fn ratio_effect(interval: &Interval, band: f64) -> &'static str {
    match *interval {
        Interval::Bounded { low, .. } if low > 1.0 => "raises",
        Interval::Bounded { high, .. } if high < 1.0 => "lowers",
        Interval::Bounded { low, high } if low >= 1.0 - band && high <= 1.0 + band => {
            "no measurable effect"
        }
        _ => "undecided",
    }
}

/// Whether two summaries' intervals overlap (each figure could be the other's): "not told
/// apart", "no gap". A summary of one try has no interval and overlaps nothing but an
/// equal value; the caller says so.
pub fn overlap(a: &Summary, b: &Summary) -> bool {
    a.n > 0 && b.n > 0 && a.ci_low <= b.ci_high && b.ci_low <= a.ci_high
}

/// A summary's interval, or why it has none.
pub fn interval_of(s: &Summary) -> Interval {
    match no_interval_why(s.n) {
        Some(why) => Interval::None { why },
        None => Interval::Bounded {
            low: s.ci_low,
            high: s.ci_high,
        },
    }
}

/// A mean with its interval in words, each number through `num`: `28.1 [27.5, 28.7]`;
/// `58.1 (1 try: no interval)` for one try, never a zero-width interval; and an interval
/// from two tries, or one reaching below 0, is called what it is (`(t-interval of 2
/// tries)`), since a latency below 0 is no bound anyone measured.
pub fn mean_interval(s: &Summary, num: impl Fn(f64) -> String) -> String {
    match no_interval_why(s.n) {
        Some(why) if s.n == 0 => why,
        Some(why) => format!("{} ({why})", num(s.mean)),
        None => {
            let mut out = format!("{} [{}, {}]", num(s.mean), num(s.ci_low), num(s.ci_high));
            if s.n == 2 || s.ci_low < 0.0 {
                out.push_str(&format!(" (t-interval of {} tries)", s.n));
            }
            out
        }
    }
}

/// One decision with what it rests on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    /// What was decided (`rr p50`, `tune pick`).
    pub subject: String,
    /// The conclusion.
    pub outcome: Outcome,
    /// The figure's estimate, where measured.
    pub estimate: Option<f64>,
    /// Its interval, or why there is none.
    pub interval: Interval,
    /// The bound it was held against, where one.
    pub limit: Option<f64>,
    /// The conclusion in words, with its figures.
    pub why: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;

    /// A ratio's effect is decided by its whole interval: past 1 either way, within the
    /// band, or neither (undecided, also without an interval).
    #[test]
    fn a_ratios_effect_needs_its_interval_on_one_side_or_inside_the_band() {
        let at = |low: f64, high: f64| ratio_effect(&Interval::Bounded { low, high }, 0.1);
        assert_eq!(at(1.01, 1.5), "raises");
        assert_eq!(at(0.2, 0.99), "lowers");
        assert_eq!(at(0.95, 1.08), "no measurable effect");
        assert_eq!(at(0.9, 1.1), "no measurable effect");
        assert_eq!(at(0.85, 1.05), "undecided");
        assert_eq!(at(-8.27, 44.72), "undecided");
        let none = Interval::None {
            why: "1 try: no interval".into(),
        };
        assert_eq!(ratio_effect(&none, 0.1), "undecided");
    }

    /// Welch's interval of a difference: 2 tries each of 10/12 and 20/22 differ by 10 ±
    /// t(0.975, 2) × √(2/2 + 2/2) = 4.303 × 1.414; one try has none.
    #[test]
    fn the_difference_interval_is_welchs() {
        let a = summarize(&[10.0, 12.0], 0.95);
        let b = summarize(&[20.0, 22.0], 0.95);
        let (lo, hi) = difference_interval(&a, &b, 0.95).ends().expect("bounded");
        let h = 4.302652729911275 * 2f64.sqrt();
        assert!(
            (lo - (10.0 - h)).abs() < 1e-6 && (hi - (10.0 + h)).abs() < 1e-6,
            "{lo} {hi}"
        );
        let one = summarize(&[3.0], 0.95);
        assert!(difference_interval(&one, &b, 0.95).ends().is_none());
    }

    /// Fieller's interval holds the ratio, shrinks with more tries, and has no interval
    /// for one try or a baseline indistinguishable from 0.
    #[test]
    fn the_ratio_interval_is_fiellers() {
        let a = summarize(&[10.0, 10.5, 9.5, 10.2, 9.8], 0.95);
        let b = summarize(&[20.0, 21.0, 19.0, 20.4, 19.6], 0.95);
        let (lo, hi) = ratio_interval(&a, &b, 0.95).ends().expect("bounded");
        assert!(lo < 2.0 && 2.0 < hi, "{lo} {hi}");
        // Not the extreme ends of the two intervals (a wider, unnamed level).
        let naive = (b.ci_low / a.ci_high, b.ci_high / a.ci_low);
        assert!(lo > naive.0 && hi < naive.1, "{lo} {hi} {naive:?}");
        // Exact data: the interval is the point.
        let c = summarize(&[3.0, 3.0, 3.0], 0.95);
        let d = summarize(&[6.0, 6.0, 6.0], 0.95);
        assert_eq!(ratio_interval(&c, &d, 0.95).ends(), Some((2.0, 2.0)));
        let one = summarize(&[58.14], 0.95);
        match ratio_interval(&one, &b, 0.95) {
            Interval::None { why } => assert_eq!(why, "1 try: no interval"),
            i => panic!("{i:?}"),
        }
        let zeroish = summarize(&[-1.0, 1.0, 0.5], 0.95);
        assert!(ratio_interval(&zeroish, &b, 0.95).ends().is_none());
        // A candidate whose two tries do not tell its mean from 0 (a remedy's rate 1.2×
        // as-is, the tries 2.4 and 21.6 Gbit/s): no negative ratio of two rates.
        let base = summarize(&[10.0, 10.5, 9.5], 0.95);
        let wild = summarize(&[2.4, 21.6], 0.95);
        let (lo, hi) = ratio_interval(&base, &wild, 0.95).ends().expect("bounded");
        assert_eq!(lo, 0.0);
        assert!(hi > 2.0, "{hi}");
    }

    /// A stream twelve times slower in a guest, two tries a side beside a noisy native
    /// side (`vm compare`, this machine): Welch's test cannot reject "no change" at its
    /// one degree of freedom, so the ratio's interval holds 1 too. It read a tax of
    /// [86%, 95%] beside "difference undecided" when its degrees of freedom were taken at
    /// the estimate. Over a sweep of slow-downs, sizes and spreads, the interval leaves
    /// out 1 exactly where the test rejects.
    #[test]
    fn the_ratio_interval_leaves_out_1_exactly_where_welchs_test_rejects() {
        // Two tries 17% apart do not tell the native mean from 0 at one degree of
        // freedom (9308 ± 12.7 × 780): far from the estimate no ratio is rejected, and
        // the interval is unbounded (then no gate decides on it).
        let (native, guest) = ([8528.0, 10088.0], [680.0, 806.6]);
        let (a, b) = (summarize(&native, 0.95), summarize(&guest, 0.95));
        match ratio_interval(&a, &b, 0.95) {
            Interval::None { why } => assert!(why.contains("unbounded"), "{why}"),
            i => panic!("{i:?}"),
        }
        let c = crate::stats::compare(&native, &guest, true, 0.05, 0.02);
        assert_eq!(c.verdict, crate::stats::Verdict::Undecided);
        // A third try each: bounded, and holding 1 exactly where the test does not reject.
        let (native, guest) = ([8528.0, 10088.0, 9200.0], [680.0, 806.6, 750.0]);
        let (a, b) = (summarize(&native, 0.95), summarize(&guest, 0.95));
        let (lo, hi) = ratio_interval(&a, &b, 0.95).ends().expect("bounded");
        let c = crate::stats::compare(&native, &guest, true, 0.05, 0.02);
        let p = c.test.as_ref().map_or(1.0, |t| t.p_value);
        assert_eq!(p < 0.05, hi < 1.0, "p {p}: {lo} {hi}");
        let mut seen = [0; 2];
        for n in [2usize, 3, 5, 8] {
            for spread in [0.02, 0.1, 0.3] {
                for k in 1..40 {
                    let ratio = 0.05 * f64::from(k);
                    let base: Vec<f64> = (0..n)
                        .map(|i| 1000.0 * (1.0 + spread * (i as f64 - 0.4) / n as f64))
                        .collect();
                    let cand: Vec<f64> = (0..n)
                        .map(|i| {
                            1000.0
                                * ratio
                                * (1.0 + 0.5 * spread * ((n - i) as f64 - 0.7) / n as f64)
                        })
                        .collect();
                    let (a, b) = (summarize(&base, 0.95), summarize(&cand, 0.95));
                    let c = crate::stats::compare(&base, &cand, true, 0.05, 0.0);
                    let t = c.test.clone().expect("a test");
                    if t.test != crate::stats::Test::Welch {
                        continue;
                    }
                    let Some((lo, hi)) = ratio_interval(&a, &b, 0.95).ends() else {
                        continue;
                    };
                    let rejects = t.p_value < 0.05;
                    assert_eq!(
                        rejects,
                        lo > 1.0 || hi < 1.0,
                        "n {n} spread {spread} ratio {ratio}: p {} interval {lo} {hi}",
                        t.p_value
                    );
                    seen[usize::from(rejects)] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&k| k > 20), "{seen:?}");
    }

    #[test]
    fn a_bound_is_decided_only_by_a_whole_interval() {
        let i = |low, high| Interval::Bounded { low, high };
        assert_eq!(bound(&i(1.0, 2.0), 3.0, true), Outcome::Met);
        assert_eq!(bound(&i(4.0, 5.0), 3.0, true), Outcome::NotMet);
        assert_eq!(bound(&i(2.0, 4.0), 3.0, true), Outcome::Undecided);
        assert_eq!(bound(&i(4.0, 5.0), 3.0, false), Outcome::Met);
        assert_eq!(bound(&i(1.0, 2.0), 3.0, false), Outcome::NotMet);
        let no = Interval::None {
            why: "1 try: no interval".into(),
        };
        assert_eq!(bound(&no, 3.0, true), Outcome::Undecided);
        assert_eq!(
            worst([Outcome::Met, Outcome::Undecided, Outcome::NotMeasured]),
            Outcome::NotMeasured
        );
        assert_eq!(
            worst([Outcome::Undecided, Outcome::NotMet]),
            Outcome::NotMet
        );
        assert_eq!(worst([]), Outcome::Met);
        assert_eq!(
            [
                Outcome::Met,
                Outcome::NotMet,
                Outcome::NotMeasured,
                Outcome::Undecided
            ]
            .map(Outcome::exit_code),
            [0, 3, 4, 5]
        );
    }

    #[test]
    fn overlapping_intervals_are_equal_and_one_try_has_none() {
        let a = summarize(&[1.00, 1.02, 0.99], 0.95);
        let b = summarize(&[1.01, 1.03, 1.00], 0.95);
        let c = summarize(&[2.0, 2.01, 1.99], 0.95);
        assert!(overlap(&a, &b) && !overlap(&a, &c));
        assert!(interval_of(&summarize(&[5.0], 0.95)).ends().is_none());
        let f = |v: f64| format!("{v:.2}");
        assert_eq!(
            mean_interval(&summarize(&[58.14], 0.95), f),
            "58.14 (1 try: no interval)"
        );
        let two = mean_interval(&summarize(&[5.0, 118.5], 0.95), f);
        assert!(two.ends_with("(t-interval of 2 tries)"), "{two}");
        assert_eq!(mean_interval(&summarize(&[], 0.95), f), "not measured");
        assert_eq!(mean_interval(&a, f), "1.00 [0.97, 1.04]");
    }
}
