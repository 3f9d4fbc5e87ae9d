//! The "virtualization tax": each headline metric (rate or throughput, p50 and p99
//! latency) of a candidate config against the baseline's, as a percentage worse whichever
//! way the metric points, and a gate on it (`vm compare --max-tax`, a spec's
//! `[compare] max_tax`).

use serde::Serialize;

use crate::compare::Row;
use crate::stats::Verdict;

/// The most tax allowed, in percent, for every workload or per workload (point label).
#[derive(Debug, Clone, PartialEq)]
pub struct MaxTax {
    all: Option<f64>,
    each: Vec<(String, f64)>,
    /// As it was written, for a spec that reruns with the same gate.
    text: String,
}

impl MaxTax {
    /// Parses `20%` (every workload) or `rr=30%,stream=10%` (each; a common limit may be
    /// given too: `50%,stream=5%`). With `known`, a workload not in it is refused.
    pub fn parse(s: &str, known: Option<&[&str]>) -> Result<MaxTax, String> {
        let pct = |t: &str| -> Result<f64, String> {
            let v: f64 = t.trim().trim_end_matches('%').trim().parse().map_err(|_| {
                format!("invalid tax {t:?}: give a percentage such as 20% (or rr=30%,stream=10%)")
            })?;
            if !(0.0..=1000.0).contains(&v) {
                return Err(format!("invalid tax {t:?}: between 0% and 1000%"));
            }
            Ok(v)
        };
        let mut m = MaxTax {
            all: None,
            each: Vec::new(),
            text: s.trim().to_string(),
        };
        for part in s.split(',') {
            match part.split_once('=') {
                None => m.all = Some(pct(part)?),
                Some((w, p)) => {
                    let w = w.trim();
                    if let Some(k) = known.filter(|k| !k.contains(&w)) {
                        return Err(format!(
                            "unknown workload {w:?} in the tax limit ({})",
                            k.join(", ")
                        ));
                    }
                    m.each.push((w.to_string(), pct(p)?));
                }
            }
        }
        Ok(m)
    }

    /// The limit as it was written (`20%`, `rr=30%,stream=10%`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The limit for `workload`, if any.
    pub fn of(&self, workload: &str) -> Option<f64> {
        self.each
            .iter()
            .find(|(w, _)| w == workload)
            .map(|(_, p)| *p)
            .or(self.all)
    }

    /// The rows whose tax is above their workload's limit, one phrase each.
    pub fn over(&self, tax: &[TaxRow]) -> Vec<String> {
        tax.iter()
            .filter_map(|r| {
                let limit = self.of(&r.workload)?;
                (r.tax_pct > limit).then(|| {
                    format!(
                        "{} {} tax {:.1}% > {limit}% ({})",
                        r.workload,
                        short_metric(&r.metric),
                        r.tax_pct,
                        r.verdict
                    )
                })
            })
            .collect()
    }
}

/// One line of the tax table.
#[derive(Debug, Clone, Serialize)]
pub struct TaxRow {
    /// The workload (point label).
    pub workload: String,
    /// The metric (`rate_per_s`, `mbps`, `p50_us`, `p99_us`).
    pub metric: String,
    /// Its display unit.
    pub unit: String,
    /// The baseline's mean.
    pub native: f64,
    /// The candidate's mean.
    pub guest: f64,
    /// guest / native.
    pub ratio: f64,
    /// How much worse the candidate is, in percent (positive = slower), whichever way the
    /// metric points.
    pub tax_pct: f64,
    /// The comparison's verdict in words, naming the candidate.
    pub verdict: String,
}

/// The headline metrics of `rows` (baseline vs one candidate) as tax rows; `candidate`
/// names the candidate in verdicts ("guest worse").
pub fn rows(rows: &[Row], candidate: &str) -> Vec<TaxRow> {
    let wanted = ["rate_per_s", "mbps", "p50_us", "p99_us"];
    rows.iter()
        .filter(|r| wanted.contains(&r.metric.as_str()))
        .map(|r| {
            let (n, g) = (r.comparison.baseline.mean, r.comparison.candidate.mean);
            let ratio = if n != 0.0 { g / n } else { f64::NAN };
            let higher_better = !r.metric.ends_with("_us");
            let tax_pct = if higher_better {
                (1.0 - ratio) * 100.0
            } else {
                (ratio - 1.0) * 100.0
            };
            TaxRow {
                workload: r.point.clone(),
                metric: r.metric.clone(),
                unit: r.unit.clone(),
                native: n,
                guest: g,
                ratio,
                tax_pct,
                verdict: verdict_words(r.comparison.verdict, candidate),
            }
        })
        .collect()
}

/// A metric's short name in tables.
pub fn short_metric(m: &str) -> &str {
    match m {
        "rate_per_s" => "rate",
        "mbps" => "throughput",
        "p50_us" => "p50",
        "p99_us" => "p99",
        other => other,
    }
}

/// A metric's name in words for column and axis titles (`rate_per_s` → `rate`, `mbps` →
/// `throughput`); keys stay in `--json`.
pub fn metric_words(m: &str) -> String {
    match m {
        "rate_per_s" => "rate".into(),
        "mbps" => "throughput".into(),
        "mib_per_s" | "mb_per_s" => "throughput".into(),
        "p50_us" => "p50 latency".into(),
        "p99_us" => "p99 latency".into(),
        "mean_us" => "mean latency".into(),
        "elapsed_s" => "time".into(),
        "mean_duration_s" => "mean download time".into(),
        // Per-transaction counts carry their unit (`/tr`) beside the name already.
        other => other
            .trim_end_matches("_us")
            .trim_end_matches("_per_s")
            .trim_end_matches("_per_tr")
            .replace('_', " "),
    }
}

fn verdict_words(v: Verdict, candidate: &str) -> String {
    match v {
        Verdict::Improved => format!("{candidate} better"),
        Verdict::Regressed => format!("{candidate} worse"),
        Verdict::NoChange => "no significant difference".into(),
        Verdict::WithinNoise => "within noise".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workload: &str, metric: &str, tax_pct: f64) -> TaxRow {
        TaxRow {
            workload: workload.into(),
            metric: metric.into(),
            unit: String::new(),
            native: 1.0,
            guest: 1.0,
            ratio: 1.0,
            tax_pct,
            verdict: "guest worse".into(),
        }
    }

    /// One limit for all, or per workload (a workload's own beats the common one); every
    /// row over its limit is named, the rest are not; bad limits are refused with the text.
    #[test]
    fn max_tax_names_each_row_over_its_limit() {
        let known: &[&str] = &["rr", "crr", "stream"];
        let all = MaxTax::parse("20%", Some(known)).expect("parses");
        let tax = [row("rr", "p50_us", 25.0), row("stream", "mbps", 10.0)];
        let over = all.over(&tax);
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].starts_with("rr p50 tax 25.0% > 20%"), "{over:?}");
        let each = MaxTax::parse("rr=30%,stream=5", Some(known)).expect("parses");
        let over = each.over(&tax);
        assert_eq!(over.len(), 1, "{over:?}");
        assert!(over[0].starts_with("stream throughput"), "{over:?}");
        let mixed = MaxTax::parse("50%,stream=5%", Some(known)).expect("parses");
        assert_eq!(
            (mixed.of("rr"), mixed.of("stream")),
            (Some(50.0), Some(5.0))
        );
        assert_eq!(
            MaxTax::parse("rr=1%", None).expect("parses").of("crr"),
            None
        );
        for bad in ["x", "-5%", "1e30", "tcp=5%", "rr=", "2000%"] {
            let e = MaxTax::parse(bad, Some(known)).expect_err(bad);
            assert!(!e.is_empty(), "{bad}");
        }
        assert_eq!(metric_words("rate_per_s"), "rate");
        assert_eq!(metric_words("client_demand_us"), "client demand");
        assert_eq!(metric_words("client_sleeps_per_tr"), "client sleeps");
        // Without a list of workloads, any label may be named.
        assert!(MaxTax::parse("my rr=5%", None).is_ok());
    }
}
