//! From stored trials to per-point, per-config summaries: every metric's repetitions with
//! their statistics, latency percentiles merged across repetitions from the histograms (not
//! averaged percentiles), and the mean CPU split.

use serde::Serialize;
use virtperf_store::{TrialRow, TrialStatus};
use virtperf_wire::{CpuSplit, LatencySummary, TestResult};

use crate::stats::{summarize, Summary};

/// One metric over a cell's repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricSummary {
    /// Metric name (`rate_per_s`, `mbps`, …).
    pub name: String,
    /// Display unit.
    pub unit: String,
    /// Direction.
    pub higher_is_better: bool,
    /// Every repetition's value, in trial order.
    pub values: Vec<f64>,
    /// Statistics over `values`.
    pub summary: Summary,
}

/// One config at one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigSummary {
    /// Config name.
    pub config: String,
    /// Successful repetitions.
    pub ok: usize,
    /// Failed repetitions.
    pub failed: usize,
    /// First failure message, if any.
    pub error: Option<String>,
    /// Metrics, the primary one first.
    pub metrics: Vec<MetricSummary>,
    /// Latency merged over all repetitions' histograms (rr, crr).
    pub latency: Option<LatencySummary>,
    /// The merged distribution as `[percentile, µs]` pairs, for a percentile plot.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub latency_distribution: Vec<(f64, f64)>,
    /// Mean system-wide CPU split on the client's machine over the repetitions; None for
    /// probes (wake-up and KVM measurements carry no CPU split: not 0% busy).
    pub cpu: Option<CpuSplit>,
    /// The same on the agent's machine (a guest's own view in guest placements); None for
    /// foreign HTTP servers.
    pub server_cpu: Option<CpuSplit>,
    /// Mean busy CPUs over its tries, cpuidle polling included (`cost::busy_cpus`); None
    /// unless every try has the figure.
    pub cpus_busy: Option<f64>,
    /// Each try's busy CPUs, in try order (what an interval of the cost is formed from);
    /// empty unless every try has the figure.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus_busy_tries: Vec<f64>,
    /// Of those, mean CPUs the watched VM's host threads kept busy (`run --vm`); None
    /// without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vm_cpus: Option<f64>,
    /// Mean elapsed seconds of a trial's measurement.
    pub elapsed_s: f64,
    /// Each try's time series (a spec's `interval`), in try order; tries without one are
    /// left out.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Vec<virtperf_wire::Interval>>,
    /// The first try's sampled critical path (`timeline = true`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeline: Option<virtperf_wire::Timeline>,
}

impl ConfigSummary {
    /// A metric by name.
    pub fn metric(&self, name: &str) -> Option<&MetricSummary> {
        self.metrics.iter().find(|m| m.name == name)
    }
}

/// One sweep point of one workload with every config measured there.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PointSummary {
    /// Workload name.
    pub workload: String,
    /// Point label (`stream send_size=64`).
    pub label: String,
    /// Swept parameters.
    pub params: serde_json::Value,
    /// The workload with every parameter, sizes as resolved byte counts (the label names
    /// only what is swept), from the first stored result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload_text: Option<String>,
    /// Configs in order of first appearance.
    pub configs: Vec<ConfigSummary>,
}

fn ok_results<'a>(trials: &[&'a TrialRow]) -> Vec<&'a TestResult> {
    trials
        .iter()
        .filter(|t| t.status == TrialStatus::Ok)
        .filter_map(|t| t.result.as_ref())
        .collect()
}

fn cell(config: &str, trials: &[&TrialRow], confidence: f64) -> ConfigSummary {
    let results = ok_results(trials);
    let failed = trials
        .iter()
        .filter(|t| t.status == TrialStatus::Failed)
        .count();
    // A skipped trial (its guest lacks what the config asked) says so, not "failed".
    let error = trials.iter().find_map(|t| {
        t.error.as_ref().map(|e| match t.status {
            TrialStatus::Skipped => format!("skipped: {e}"),
            _ => e.clone(),
        })
    });
    // Metric names and order come from the first result; every result of one workload
    // yields the same list.
    let mut metrics: Vec<MetricSummary> = Vec::new();
    for r in &results {
        for m in r.metrics() {
            match metrics.iter_mut().find(|x| x.name == m.name) {
                Some(x) => x.values.push(m.value),
                None => metrics.push(MetricSummary {
                    name: m.name.to_string(),
                    unit: m.unit.to_string(),
                    higher_is_better: m.higher_is_better,
                    values: vec![m.value],
                    summary: summarize(&[], confidence),
                }),
            }
        }
    }
    // A probe (a wake-up or KVM measurement, no TestResult) contributes its one number.
    for t in trials
        .iter()
        .filter(|t| t.status == TrialStatus::Ok && t.result.is_none())
    {
        let Some(v) = t.metric else { continue };
        match metrics.iter_mut().find(|x| x.name == t.metric_name) {
            Some(x) => x.values.push(v),
            None => metrics.push(MetricSummary {
                name: t.metric_name.clone(),
                unit: probe_unit(&t.metric_name).to_string(),
                // Probes report times: lower is better.
                higher_is_better: false,
                values: vec![v],
                summary: summarize(&[], confidence),
            }),
        }
    }
    for m in &mut metrics {
        m.summary = summarize(&m.values, confidence);
    }
    let merged = merged_histogram(&results);
    let latency = merged.as_ref().map(virtperf_measure::summarize);
    let latency_distribution = merged.as_ref().map(distribution).unwrap_or_default();
    let cpu = mean_split(results.iter().map(|r| &r.cpu.client.system));
    let server_cpu = mean_split(
        results
            .iter()
            .filter_map(|r| r.cpu.server.as_ref().map(|s| &s.system)),
    );
    let elapsed_s = results.iter().map(|r| elapsed(r)).sum::<f64>() / results.len().max(1) as f64;
    ConfigSummary {
        config: config.to_string(),
        ok: trials
            .iter()
            .filter(|t| t.status == TrialStatus::Ok)
            .count(),
        failed,
        error,
        metrics,
        latency,
        latency_distribution,
        cpu,
        server_cpu,
        cpus_busy: crate::cost::mean_busy_cpus(&results),
        cpus_busy_tries: crate::cost::each_busy_cpus(&results).unwrap_or_default(),
        vm_cpus: crate::cost::mean_vm_cpus(&results),
        elapsed_s,
        series: results
            .iter()
            .filter(|r| !r.intervals.is_empty())
            .map(|r| r.intervals.clone())
            .collect(),
        timeline: results.iter().find_map(|r| r.timeline.clone()),
    }
}

/// The unit of a probe's metric, from its name's suffix (`one_way_p50_us`).
pub(crate) fn probe_unit(name: &str) -> &'static str {
    if name.ends_with("_us") {
        "µs"
    } else if name.ends_with("_ns") {
        "ns"
    } else {
        ""
    }
}

/// Field-by-field mean of CPU splits (per-CPU figures too, where the CPU counts agree);
/// None of none.
fn mean_split<'a>(splits: impl Iterator<Item = &'a CpuSplit>) -> Option<CpuSplit> {
    let all: Vec<&CpuSplit> = splits.collect();
    if all.is_empty() {
        return None;
    }
    let n = all.len() as f64;
    let mut m = CpuSplit::default();
    for s in &all {
        m.user_pct += s.user_pct / n;
        m.system_pct += s.system_pct / n;
        m.irq_pct += s.irq_pct / n;
        m.softirq_pct += s.softirq_pct / n;
        m.steal_pct += s.steal_pct / n;
        m.guest_pct += s.guest_pct / n;
        m.idle_pct += s.idle_pct / n;
        m.unsampled_pct += s.unsampled_pct / n;
        m.busy_pct += s.busy_pct / n;
        if m.per_cpu_busy_pct.is_empty() {
            m.per_cpu_busy_pct = vec![0.0; s.per_cpu_busy_pct.len()];
        }
        if m.per_cpu_busy_pct.len() == s.per_cpu_busy_pct.len() {
            for (acc, v) in m.per_cpu_busy_pct.iter_mut().zip(&s.per_cpu_busy_pct) {
                *acc += v / n;
            }
        }
    }
    Some(m)
}

fn elapsed(r: &TestResult) -> f64 {
    crate::cost::measured_s(r)
}

/// Latency over all repetitions, from their merged histograms.
pub fn merged_latency(results: &[&TestResult]) -> Option<LatencySummary> {
    merged_histogram(results).map(|h| virtperf_measure::summarize(&h))
}

/// The repetitions' latency histograms added together (rr, crr).
fn merged_histogram(results: &[&TestResult]) -> Option<virtperf_measure::LatencyHistogram> {
    use virtperf_wire::Outcome;
    let mut acc: Option<virtperf_measure::LatencyHistogram> = None;
    for r in results {
        let (Outcome::Rr(o) | Outcome::Crr(o)) = &r.outcome else {
            continue;
        };
        let Some(h) = virtperf_measure::latency::decode(&o.histogram) else {
            continue;
        };
        match &mut acc {
            Some(a) => {
                // Both come from new_histogram() with auto-resize, so adding cannot fail for
                // range reasons; a failure would only drop this repetition's samples.
                let _ = a.add(&h);
            }
            None => acc = Some(h),
        }
    }
    acc
}

/// Percentiles at which the latency distribution is kept: evenly spaced on the "nines"
/// scale HdrHistogram and wrk2 plot (0, 50, 90, 99, 99.9 … and points in between).
const DISTRIBUTION_PERCENTILES: &[f64] = &[
    0.0, 25.0, 50.0, 68.4, 75.0, 82.2, 90.0, 93.7, 96.8, 98.2, 99.0, 99.37, 99.68, 99.82, 99.9,
    99.937, 99.968, 99.982, 99.99, 99.995, 99.999,
];

/// `(percentile, µs)` pairs of the merged histogram, up to the highest percentile its
/// sample count resolves (the 99.99th of 1,000 samples is just the maximum), then the maximum
/// at 100.
fn distribution(h: &virtperf_measure::LatencyHistogram) -> Vec<(f64, f64)> {
    let n = h.len() as f64;
    if n == 0.0 {
        return Vec::new();
    }
    let mut out: Vec<(f64, f64)> = DISTRIBUTION_PERCENTILES
        .iter()
        .filter(|p| n * (1.0 - **p / 100.0) >= 1.0)
        .map(|p| (*p, h.value_at_quantile(*p / 100.0) as f64 / 1000.0))
        .collect();
    out.push((100.0, h.max() as f64 / 1000.0));
    out
}

/// Groups a run's trials by point (in order of first appearance) and config, and
/// summarizes each cell at `confidence`.
pub fn summarize_run(trials: &[TrialRow], confidence: f64) -> Vec<PointSummary> {
    struct Group<'a> {
        workload: String,
        label: String,
        params: serde_json::Value,
        cells: Vec<(String, Vec<&'a TrialRow>)>,
    }
    let mut groups: Vec<Group> = Vec::new();
    for t in trials {
        let idx = match groups
            .iter()
            .position(|g| g.workload == t.workload && g.label == t.point_label)
        {
            Some(i) => i,
            None => {
                groups.push(Group {
                    workload: t.workload.clone(),
                    label: t.point_label.clone(),
                    params: t.point.clone(),
                    cells: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let cells = &mut groups[idx].cells;
        match cells.iter_mut().find(|c| c.0 == t.config) {
            Some(c) => c.1.push(t),
            None => cells.push((t.config.clone(), vec![t])),
        }
    }
    groups
        .into_iter()
        .map(|g| PointSummary {
            workload_text: g
                .cells
                .iter()
                .flat_map(|(_, ts)| ts.iter())
                .find_map(|t| t.result.as_ref())
                .map(|r| r.workload.describe()),
            workload: g.workload,
            label: g.label,
            params: g.params,
            configs: g
                .cells
                .iter()
                .map(|(c, ts)| cell(c, ts, confidence))
                .collect(),
        })
        .collect()
}
