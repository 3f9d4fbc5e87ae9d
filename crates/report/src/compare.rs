//! Comparisons: a candidate against a baseline, per point and metric, with a verdict.

use serde::Serialize;

use crate::stats::{compare, Comparison};
use crate::summary::{ConfigSummary, PointSummary};

/// Significance level of every comparison.
pub const ALPHA: f64 = 0.05;
/// Relative changes smaller than this are "within noise" even when significant.
pub const NOISE: f64 = 0.02;

/// One metric of one point compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Point label.
    pub point: String,
    /// Baseline name (config, or `run N config`).
    pub baseline: String,
    /// Candidate name.
    pub candidate: String,
    /// Metric name.
    pub metric: String,
    /// Display unit.
    pub unit: String,
    /// The statistics.
    pub comparison: Comparison,
    /// What the compared runs are, where it qualifies the numbers: another host or
    /// kernel, a run that is not complete (absent when there is nothing to say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

fn rows(point: &str, a: &ConfigSummary, an: &str, b: &ConfigSummary, bn: &str) -> Vec<Row> {
    a.metrics
        .iter()
        .filter_map(|ma| {
            let mb = b.metric(&ma.name)?;
            Some(Row {
                point: point.to_string(),
                baseline: an.to_string(),
                candidate: bn.to_string(),
                metric: ma.name.clone(),
                unit: ma.unit.clone(),
                comparison: compare(&ma.values, &mb.values, ma.higher_is_better, ALPHA, NOISE),
                notes: Vec::new(),
            })
        })
        .collect()
}

/// Within one run: every config against `baseline` (default: the first config), per point.
pub fn by_config(points: &[PointSummary], baseline: Option<&str>) -> Vec<Row> {
    let mut out = Vec::new();
    for p in points {
        let base = match baseline {
            Some(b) => p.configs.iter().find(|c| c.config == b),
            None => p.configs.first(),
        };
        let Some(base) = base else { continue };
        for c in &p.configs {
            if c.config != base.config {
                out.extend(rows(&p.label, base, &base.config, c, &c.config));
            }
        }
    }
    out
}

/// Two runs: the same point and config in each. When a point has exactly one config in each
/// run, those are compared even if their names differ (two single-config runs of one spec).
pub fn runs(a: &[PointSummary], an: i64, b: &[PointSummary], bn: i64) -> Vec<Row> {
    let mut out = Vec::new();
    for pa in a {
        let Some(pb) = b
            .iter()
            .find(|p| p.label == pa.label && p.workload == pa.workload)
        else {
            continue;
        };
        // One config each: compare them whatever their names; else pair configs by name.
        let pairs: Vec<(&ConfigSummary, &ConfigSummary)> =
            if pa.configs.len() == 1 && pb.configs.len() == 1 {
                vec![(&pa.configs[0], &pb.configs[0])]
            } else {
                pa.configs
                    .iter()
                    .filter_map(|ca| Some((ca, pb.configs.iter().find(|c| c.config == ca.config)?)))
                    .collect()
            };
        for (ca, cb) in pairs {
            out.extend(rows(
                &pa.label,
                ca,
                &format!("run {an} {}", ca.config),
                cb,
                &format!("run {bn} {}", cb.config),
            ));
        }
    }
    out
}

/// The rows whose verdict is [`Verdict::Regressed`](crate::stats::Verdict::Regressed) by at
/// least `threshold_pct` percent (`5.0` for 5 %) in either direction of the metric: what
/// `compare --fail-on-regression` fails on. The verdict already says the change is
/// significant and beyond the noise threshold; the threshold lets CI ignore small ones.
pub fn regressions(rows: &[Row], threshold_pct: f64) -> Vec<&Row> {
    rows.iter()
        .filter(|r| {
            r.comparison.verdict == crate::stats::Verdict::Regressed
                && r.comparison.pct_change.abs() >= threshold_pct
        })
        .collect()
}

/// The undecided rows that cannot exclude a regression of `threshold_pct` percent (or of
/// the noise threshold, whichever is larger: a smaller change is never called one): their
/// interval's worse end lies beyond it, or there is no interval. What makes
/// `compare --fail-on-regression` undecided rather than passing where no regression was
/// found only for want of tries.
pub fn unexcluded_regressions(rows: &[Row], threshold_pct: f64) -> Vec<&Row> {
    let limit = threshold_pct.max(NOISE * 100.0);
    rows.iter()
        .filter(|r| {
            r.comparison.verdict == crate::stats::Verdict::Undecided
                && r.comparison
                    .worst_regression_pct()
                    .is_none_or(|w| w > limit)
        })
        .collect()
}

/// Under the table, where some verdicts are undecided: how many, and what would decide
/// them (more tries narrow each change's interval).
pub fn undecided_note(rows: &[Row]) -> String {
    let n = rows
        .iter()
        .filter(|r| r.comparison.verdict == crate::stats::Verdict::Undecided)
        .count();
    if n == 0 {
        return String::new();
    }
    format!(
        "\n{n} of {} comparisons undecided: their 95% intervals reach past ±2%, so neither a change nor its absence is shown; more tries narrow them (repetitions = N, or `virtperf run SPEC --until-ci 95,2%`; for campaigns, more hosts)\n",
        rows.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(base: &[f64], cand: &[f64], higher_is_better: bool) -> Row {
        Row {
            point: "p".into(),
            baseline: "a".into(),
            candidate: "b".into(),
            metric: "m".into(),
            unit: "u".into(),
            comparison: compare(base, cand, higher_is_better, ALPHA, NOISE),
            notes: Vec::new(),
        }
    }

    #[test]
    fn regressions_are_regressed_verdicts_at_or_past_the_threshold() {
        let base = [100.0, 101.0, 99.0, 100.5, 99.5];
        // Throughput down 10 %: regressed; latency (lower is better) down 10 %: improved.
        let worse = row(&base, &[90.0, 91.0, 89.0, 90.5, 89.5], true);
        let better = row(&base, &[90.0, 91.0, 89.0, 90.5, 89.5], false);
        let same = row(&base, &base, true);
        let rows = vec![worse.clone(), better, same];
        assert_eq!(regressions(&rows, 0.0), vec![&worse]);
        assert_eq!(regressions(&rows, 5.0), vec![&worse]);
        assert!(regressions(&rows, 10.5).is_empty());
    }

    /// An undecided row fails to exclude a regression past the threshold where its
    /// interval's worse end reaches beyond it (the direction read through the metric), or
    /// where it has no interval; a shown "no change" and an improvement never do.
    #[test]
    fn undecided_rows_leave_regressions_past_their_interval_unexcluded() {
        let base = [100.0, 104.0, 96.0];
        // A rate 2% lower within ±6% tries: undecided, a regression of ~13% not excluded.
        let noisy = row(&base, &[98.0, 102.0, 94.0], true);
        assert_eq!(noisy.comparison.verdict, crate::stats::Verdict::Undecided);
        let w = noisy.comparison.worst_regression_pct().expect("interval");
        assert!(w > 5.0 && w < 30.0, "{w}");
        // The same numbers as a latency: its worse side is the interval's upper end.
        let as_latency = row(&base, &[98.0, 102.0, 94.0], false);
        let w2 = as_latency
            .comparison
            .worst_regression_pct()
            .expect("interval");
        assert!(w2 < w, "{w2} vs {w}");
        let one = row(&[100.0], &[99.0], true);
        assert_eq!(one.comparison.worst_regression_pct(), None);
        let flat = row(&[100.0, 100.1, 99.9], &[100.0, 100.1, 99.9], true);
        assert_eq!(flat.comparison.verdict, crate::stats::Verdict::NoChange);
        let rows = vec![noisy.clone(), one.clone(), flat];
        assert_eq!(unexcluded_regressions(&rows, 5.0), vec![&noisy, &one]);
        assert_eq!(unexcluded_regressions(&rows, w + 1.0), vec![&one]);
        let note = undecided_note(&rows);
        assert!(note.contains("2 of 3 comparisons undecided"), "{note}");
        assert!(undecided_note(&rows[2..]).is_empty());
    }
}
