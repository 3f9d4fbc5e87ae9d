//! Goals: a bound on a metric a workload's results carry (`p99<=80us`, `rate>=30000`),
//! and whether a configuration's repetitions meet it — by their confidence interval,
//! never by their mean alone.

use serde::Serialize;
use virtperf_report::stats::Summary;

/// Which side of the bound is good.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// The metric must be at most the bound (latencies).
    AtMost,
    /// The metric must be at least the bound (rates, throughput).
    AtLeast,
}

/// One goal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Goal {
    /// The stored metric it bounds (`p50_us`, `rate_per_s`, `mbps`, …).
    pub metric: String,
    /// Which side is good.
    pub op: Op,
    /// The bound, in the metric's unit.
    pub value: f64,
}

/// How a configuration stands against a goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Its whole confidence interval is on the good side.
    Meets,
    /// Its whole interval is on the wrong side.
    Misses,
    /// The interval straddles the bound (or rests on one try): not shown to meet it.
    Unsure,
}

/// Short names users type, and the stored metric each stands for.
const ALIASES: &[(&str, &str)] = &[
    ("p50", "p50_us"),
    ("p99", "p99_us"),
    ("mean", "mean_us"),
    ("rate", "rate_per_s"),
    ("throughput", "mbps"),
];

/// The metrics a workload's results carry that a goal may bound: `kind` is `rr`, `crr`,
/// `udp-rr` or `stream`.
pub fn metrics_of(kind: &str) -> &'static [&'static str] {
    match kind {
        "rr" | "crr" => &["p50_us", "p99_us", "mean_us", "rate_per_s"],
        "udp-rr" => &["p50_us", "p99_us", "mean_us", "rate_per_s", "lost_pct"],
        "stream" => &["mbps", "retransmits"],
        _ => &[],
    }
}

/// Whether larger values of `metric` are better.
fn higher_is_better(metric: &str) -> bool {
    matches!(metric, "rate_per_s" | "mbps")
}

impl Goal {
    /// Parses `METRIC<=VALUE` or `METRIC>=VALUE` (`≤`/`≥` too): `p99<=80us`,
    /// `p50_us<=0.05ms`, `rate>=30k`, `mbps>=2gbit`. A value without a unit is in the
    /// metric's own (µs, trans/s, Mbit/s).
    pub fn parse(text: &str) -> Result<Goal, String> {
        let t = text.trim().replace('≤', "<=").replace('≥', ">=");
        let (name, op, value) = if let Some((a, b)) = t.split_once("<=") {
            (a, Op::AtMost, b)
        } else if let Some((a, b)) = t.split_once(">=") {
            (a, Op::AtLeast, b)
        } else {
            return Err(format!(
                "goal {text:?}: write METRIC<=VALUE or METRIC>=VALUE, e.g. 'p99<=80us' or 'rate>=30000'"
            ));
        };
        let name = name.trim().to_ascii_lowercase();
        let metric = ALIASES
            .iter()
            .find(|(a, _)| *a == name)
            .map_or(name.clone(), |(_, m)| (*m).to_string());
        if metric.is_empty() {
            return Err(format!("goal {text:?} names no metric"));
        }
        let known = ["rr", "udp-rr", "stream"]
            .iter()
            .flat_map(|k| metrics_of(k).iter())
            .any(|m| *m == metric);
        if !known {
            return Err(format!(
                "goal {text:?}: {name:?} is no metric a goal can bound (p50, p99, mean, rate, loss, throughput, retransmits)"
            ));
        }
        let value = value_of(&metric, value.trim()).map_err(|m| format!("goal {text:?}: {m}"))?;
        let good = if higher_is_better(&metric) {
            Op::AtLeast
        } else {
            Op::AtMost
        };
        if op != good
            && matches!(
                metric.as_str(),
                "p50_us" | "p99_us" | "mean_us" | "rate_per_s" | "mbps"
            )
        {
            return Err(format!(
                "goal {text:?}: {metric} is better {}, so its goal is {metric}{}VALUE",
                if good == Op::AtMost {
                    "lower"
                } else {
                    "higher"
                },
                if good == Op::AtMost { "<=" } else { ">=" },
            ));
        }
        Ok(Goal { metric, op, value })
    }

    /// Refuses a goal on a metric `kind`'s results do not carry, naming those they do.
    pub fn check_for(&self, kind: &str) -> Result<(), String> {
        let have = metrics_of(kind);
        if have.contains(&self.metric.as_str()) {
            return Ok(());
        }
        Err(format!(
            "{kind} results have no metric {:?}; goals can bound {}",
            self.metric,
            have.join(", ")
        ))
    }

    /// The goal in words: `p99 ≤ 80 µs`.
    pub fn words(&self) -> String {
        let (name, unit) = match self.metric.as_str() {
            "p50_us" => ("p50", " µs"),
            "p99_us" => ("p99", " µs"),
            "mean_us" => ("mean", " µs"),
            "rate_per_s" => ("rate", " trans/s"),
            "mbps" => ("throughput", " Mbit/s"),
            "lost_pct" => ("loss", " %"),
            other => (other, ""),
        };
        let op = match self.op {
            Op::AtMost => "≤",
            Op::AtLeast => "≥",
        };
        format!("{name} {op} {}{unit}", trim_num(self.value))
    }

    /// Where `s` (a configuration's repetitions of the metric) stands: a goal is met only
    /// when the whole confidence interval is on its good side, on at least two tries.
    pub fn standing(&self, s: &Summary) -> Standing {
        let (good, bad) = match self.op {
            Op::AtMost => (s.ci_high <= self.value, s.ci_low > self.value),
            Op::AtLeast => (s.ci_low >= self.value, s.ci_high < self.value),
        };
        if s.n >= 2 && good {
            Standing::Meets
        } else if s.n >= 1 && bad {
            Standing::Misses
        } else {
            Standing::Unsure
        }
    }

    /// How far a mean is from the goal, as a fraction of the bound: ≤ 0 on the good side.
    pub fn shortfall(&self, mean: f64) -> f64 {
        match self.op {
            Op::AtMost => (mean - self.value) / self.value,
            Op::AtLeast => (self.value - mean) / self.value,
        }
    }
}

/// `80`, `0.5`, `1234.5`: a number as short as it reads.
fn trim_num(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// A goal's bound in `metric`'s unit.
fn value_of(metric: &str, text: &str) -> Result<f64, String> {
    let split = text
        .find(|c: char| {
            !(c.is_ascii_digit() || c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+')
        })
        .unwrap_or(text.len());
    // An exponent's `e` followed by a unit letter (`5e` of `5e3us`) is read by `parse`.
    let (num, unit) = text.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{text:?} is not a number with an optional unit"))?;
    let unit = unit.trim().to_ascii_lowercase();
    let scale = match (metric, unit.as_str()) {
        (_, "") => 1.0,
        (m, u) if m.ends_with("_us") => match u {
            "ns" => 1e-3,
            "us" | "µs" => 1.0,
            "ms" => 1e3,
            "s" => 1e6,
            _ => return Err(format!("unit {u:?}: a latency takes ns, us, ms or s")),
        },
        ("rate_per_s", u) => match u {
            "k" => 1e3,
            "m" => 1e6,
            "/s" => 1.0,
            _ => return Err(format!("unit {u:?}: a rate takes k or M (or none)")),
        },
        ("mbps", u) => match u.trim_end_matches("/s").trim_end_matches("ps") {
            "k" | "kbit" | "kb" => 1e-3,
            "m" | "mbit" | "mb" => 1.0,
            "g" | "gbit" | "gb" => 1e3,
            _ => return Err(format!("unit {u:?}: throughput takes kbit, mbit or gbit")),
        },
        (_, u) => return Err(format!("{metric} takes no unit (got {u:?})")),
    };
    let v = v * scale;
    // A bound must be a measurement's size: 0, negative, NaN or 1e30 are typos.
    if !v.is_finite() || v <= 0.0 || v > 1e12 {
        return Err(format!(
            "{text:?} is not a bound a measurement can meet (0 < value ≤ 1e12)"
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_report::stats::summarize;

    #[test]
    fn goals_parse_with_units_and_aliases() {
        let g = Goal::parse("p99<=80us").unwrap();
        assert_eq!(
            (g.metric.as_str(), g.op, g.value),
            ("p99_us", Op::AtMost, 80.0)
        );
        assert_eq!(Goal::parse("p50_us ≤ 0.05ms").unwrap().value, 50.0);
        assert_eq!(Goal::parse("p50<=80000ns").unwrap().value, 80.0);
        let r = Goal::parse("rate>=30k").unwrap();
        assert_eq!(
            (r.metric.as_str(), r.op, r.value),
            ("rate_per_s", Op::AtLeast, 30_000.0)
        );
        assert_eq!(Goal::parse("mbps>=2gbit").unwrap().value, 2000.0);
        assert_eq!(Goal::parse("p99<=80us").unwrap().words(), "p99 ≤ 80 µs");
    }

    #[test]
    fn bad_goals_say_what_is_wrong() {
        for (text, says) in [
            ("p99<80us", "METRIC<=VALUE"),
            ("p99>=80us", "lower"),
            ("rate<=5", "higher"),
            ("p99<=1e30", "not a bound"),
            ("p99<=0", "not a bound"),
            ("p99<=-3", "not a bound"),
            ("p99<=NaN", "not a number"),
            ("p99<=80furlongs", "latency takes"),
            ("<=5", "names no metric"),
            ("p101<=5us", "\"p101\" is no metric a goal can bound"),
        ] {
            let e = Goal::parse(text).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn a_metric_the_workload_lacks_is_named_with_those_it_has() {
        let g = Goal::parse("mbps>=100").unwrap();
        let e = g.check_for("rr").unwrap_err();
        assert!(e.contains("p50_us") && e.contains("\"mbps\""), "{e}");
        assert!(Goal::parse("p50<=5").unwrap().check_for("crr").is_ok());
    }

    /// Met only when the whole interval is inside: a mean inside with a wide interval is
    /// unsure, one try is never enough.
    #[test]
    fn standing_is_decided_by_the_interval() {
        let g = Goal::parse("p50<=50").unwrap();
        assert_eq!(
            g.standing(&summarize(&[40.0, 41.0, 40.5], 0.95)),
            Standing::Meets
        );
        assert_eq!(
            g.standing(&summarize(&[30.0, 49.0, 60.0], 0.95)),
            Standing::Unsure
        );
        assert_eq!(
            g.standing(&summarize(&[70.0, 71.0, 72.0], 0.95)),
            Standing::Misses
        );
        assert_eq!(g.standing(&summarize(&[40.0], 0.95)), Standing::Unsure);
        let r = Goal::parse("rate>=1000").unwrap();
        assert_eq!(
            r.standing(&summarize(&[1500.0, 1510.0], 0.95)),
            Standing::Meets
        );
        assert!(g.shortfall(60.0) > 0.0 && g.shortfall(40.0) < 0.0);
    }
}
