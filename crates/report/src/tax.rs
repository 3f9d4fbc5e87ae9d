//! The "virtualization tax": each headline metric (rate or throughput, p50 and p99
//! latency) of a candidate config against the baseline's, as a percentage worse whichever
//! way the metric points, and a gate on it (`vm compare --max-tax`, a spec's
//! `[compare] max_tax`).

use serde::Serialize;

use crate::compare::Row;
use crate::decide::{self, Decision, Interval, Outcome};
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

    /// The gate's decision on every workload it names among `planned`: each headline
    /// metric's tax interval against the limit (over only when the whole interval is
    /// above it, within only when it is below; otherwise undecided), and a named workload
    /// with no row (no result on both sides) "not measured", never a pass.
    pub fn decide(&self, planned: &[String], tax: &[TaxRow]) -> Vec<Decision> {
        let mut out = Vec::new();
        for w in planned {
            let Some(limit) = self.of(w) else { continue };
            let mine: Vec<&TaxRow> = tax.iter().filter(|r| &r.workload == w).collect();
            if mine.is_empty() {
                out.push(Decision {
                    subject: w.clone(),
                    outcome: Outcome::NotMeasured,
                    estimate: None,
                    interval: Interval::None {
                        why: "no result on both sides".into(),
                    },
                    limit: Some(limit),
                    why: format!("{w} not measured (no result on both sides)"),
                });
            }
            for r in mine {
                let interval = r.interval();
                let outcome = decide::bound(&interval, limit, true);
                let span = match &interval {
                    Interval::Bounded { low, high } => format!("[{low:.1}%, {high:.1}%]"),
                    Interval::None { why } => format!("({why})"),
                };
                let rel = match outcome {
                    Outcome::NotMet => ">",
                    Outcome::Met => "<=",
                    _ => "vs",
                };
                out.push(Decision {
                    subject: format!("{} {}", r.workload, short_metric(&r.metric)),
                    outcome,
                    estimate: r.tax_pct.is_finite().then_some(r.tax_pct),
                    interval,
                    limit: Some(limit),
                    why: format!(
                        "{} {} tax {:.1}% {span} {rel} {limit}% ({})",
                        r.workload,
                        short_metric(&r.metric),
                        r.tax_pct,
                        r.verdict
                    ),
                });
            }
        }
        out
    }
}

/// The gate's decisions as the one line a command exits with: the worst outcome and
/// every decision that is not met, not measured or undecided, named; None when every
/// decision is met.
pub fn gate_message(what: &str, decisions: &[Decision]) -> Option<(Outcome, String)> {
    let worst = decide::worst(decisions.iter().map(|d| d.outcome));
    if worst == Outcome::Met {
        return None;
    }
    let mut parts = Vec::new();
    for o in [Outcome::NotMet, Outcome::NotMeasured, Outcome::Undecided] {
        let named: Vec<&str> = decisions
            .iter()
            .filter(|d| d.outcome == o)
            .map(|d| d.why.as_str())
            .collect();
        if !named.is_empty() {
            let head = match o {
                Outcome::NotMet => format!("over {what}"),
                Outcome::NotMeasured => format!("{what} not measured"),
                _ => format!("{what} undecided (the tax's 95% interval spans the limit, or there is none: more --runs)"),
            };
            parts.push(format!("{head}: {}", named.join("; ")));
        }
    }
    Some((worst, parts.join(" · ")))
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
    /// metric points; NaN where the baseline's mean is 0.
    pub tax_pct: f64,
    /// The tax's 95% interval (from Fieller's interval of the ratio of means), lower end;
    /// null where there is none (`no_interval` says why).
    pub tax_low: Option<f64>,
    /// Its upper end.
    pub tax_high: Option<f64>,
    /// Why there is no interval (`1 try: no interval`), where there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub no_interval: Option<String>,
    /// The gate's outcome on this row (`met`, `over`, `undecided`), with a gate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gate: Option<Outcome>,
    /// The comparison's verdict in words, naming the candidate.
    pub verdict: String,
}

impl TaxRow {
    /// The tax's interval as one value: its ends, or why there are none.
    pub fn interval(&self) -> Interval {
        match (self.tax_low, self.tax_high) {
            (Some(low), Some(high)) => Interval::Bounded { low, high },
            _ => Interval::None {
                why: self
                    .no_interval
                    .clone()
                    .unwrap_or_else(|| "no interval".into()),
            },
        }
    }
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
            let interval = decide::ratio_interval(
                &r.comparison.baseline,
                &r.comparison.candidate,
                1.0 - crate::compare::ALPHA,
            );
            let tax = |q: f64| {
                if higher_better {
                    (1.0 - q) * 100.0
                } else {
                    (q - 1.0) * 100.0
                }
            };
            let (tax_low, tax_high, no_interval) = match interval {
                Interval::Bounded { low, high } => {
                    let (a, b) = (tax(low), tax(high));
                    (Some(a.min(b)), Some(a.max(b)), None)
                }
                Interval::None { why } => (None, None, Some(why)),
            };
            TaxRow {
                workload: r.point.clone(),
                metric: r.metric.clone(),
                unit: r.unit.clone(),
                native: n,
                guest: g,
                ratio,
                tax_pct,
                tax_low,
                tax_high,
                no_interval,
                gate: None,
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
        // Per-transaction and per-MB counts carry their unit (`/tr`, `/MB`) beside the
        // name already.
        other => other
            .trim_end_matches("_us")
            .trim_end_matches("_per_s")
            .trim_end_matches("_per_tr")
            .trim_end_matches("_per_mb")
            .replace('_', " "),
    }
}

fn verdict_words(v: Verdict, candidate: &str) -> String {
    match v {
        Verdict::Improved => format!("{candidate} better"),
        Verdict::Regressed => format!("{candidate} worse"),
        Verdict::NoChange => "no significant difference".into(),
        Verdict::Undecided => "difference undecided".into(),
        Verdict::WithinNoise => "within noise".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A row whose tax interval is `tax_pct` ± 2 points.
    fn row(workload: &str, metric: &str, tax_pct: f64) -> TaxRow {
        TaxRow {
            workload: workload.into(),
            metric: metric.into(),
            unit: String::new(),
            native: 1.0,
            guest: 1.0,
            ratio: 1.0,
            tax_pct,
            tax_low: Some(tax_pct - 2.0),
            tax_high: Some(tax_pct + 2.0),
            no_interval: None,
            gate: None,
            verdict: "guest worse".into(),
        }
    }

    fn outcomes(m: &MaxTax, planned: &[&str], tax: &[TaxRow]) -> Vec<(String, Outcome)> {
        let planned: Vec<String> = planned.iter().map(|s| s.to_string()).collect();
        m.decide(&planned, tax)
            .into_iter()
            .map(|d| (d.subject, d.outcome))
            .collect()
    }

    /// One limit for all, or per workload (a workload's own beats the common one); every
    /// row over its limit is named, the rest are not; bad limits are refused with the text.
    #[test]
    fn max_tax_names_each_row_over_its_limit() {
        let known: &[&str] = &["rr", "crr", "stream"];
        let all = MaxTax::parse("20%", Some(known)).expect("parses");
        let tax = [row("rr", "p50_us", 25.0), row("stream", "mbps", 10.0)];
        let planned = ["rr", "stream"];
        assert_eq!(
            outcomes(&all, &planned, &tax),
            [
                ("rr p50".into(), Outcome::NotMet),
                ("stream throughput".into(), Outcome::Met)
            ]
        );
        let d = all.decide(&["rr".into()], &tax);
        assert!(
            d[0].why
                .starts_with("rr p50 tax 25.0% [23.0%, 27.0%] > 20%"),
            "{d:?}"
        );
        let each = MaxTax::parse("rr=30%,stream=5", Some(known)).expect("parses");
        assert_eq!(
            outcomes(&each, &planned, &tax),
            [
                ("rr p50".into(), Outcome::Met),
                ("stream throughput".into(), Outcome::NotMet)
            ]
        );
        // An interval across the limit, no interval (one try), a NaN tax: undecided.
        let mut one = row("rr", "p50_us", 19.0);
        (one.tax_low, one.tax_high) = (None, None);
        one.no_interval = Some("1 try: no interval".into());
        let mut nan = row("stream", "mbps", f64::NAN);
        (nan.tax_low, nan.tax_high) = (None, None);
        assert_eq!(
            outcomes(&all, &planned, &[row("rr", "p50_us", 19.0), one, nan]),
            [
                ("rr p50".into(), Outcome::Undecided),
                ("rr p50".into(), Outcome::Undecided),
                ("stream throughput".into(), Outcome::Undecided)
            ]
        );
        // A workload the gate names without a row is not measured, and the line says so.
        let gated = MaxTax::parse("stream=0%", Some(known)).expect("parses");
        let d = gated.decide(&planned.map(String::from), &[row("rr", "p50_us", 1.0)]);
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].outcome, Outcome::NotMeasured);
        let (worst, line) = gate_message("--max-tax", &d).expect("fails");
        assert_eq!(worst.exit_code(), 4);
        assert!(
            line.contains("--max-tax not measured: stream not measured"),
            "{line}"
        );
        assert!(gate_message("--max-tax", &all.decide(&["stream".into()], &tax)).is_none());
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
