//! A fleet's runs read together: grouped by one tag (`report --group-by TAG`), each group's
//! explain decompositions side by side (one row per host), its workload metrics aggregated
//! across the hosts the ClusterLoader2 way (each host's mean, then the median and spread
//! across hosts), the environment fields that differ between groups, and one campaign
//! against another per group (`compare --campaign A --campaign B`).

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use virtperf_store::{RunRow, TrialRow};
use virtperf_wire::Env;

use crate::compare::{Row, ALPHA, NOISE};
use crate::stats::compare;
use crate::summary::{summarize_run, PointSummary};

/// The group of runs that lack the grouping tag.
pub const UNTAGGED: &str = "(untagged)";

/// One stored run with its trials, as the fleet reads it.
pub struct FleetRun<'a> {
    /// The run.
    pub run: &'a RunRow,
    /// Its trials.
    pub trials: &'a [TrialRow],
}

impl FleetRun<'_> {
    /// The host the run measured: its `host` tag (Ansible's inventory name) when it has one,
    /// else the host name of the machine that wrote it.
    pub fn host(&self) -> String {
        self.run
            .tags
            .get("host")
            .cloned()
            .unwrap_or_else(|| self.run.host.clone())
    }

    /// The run's group under `tag`.
    pub fn group(&self, tag: &str) -> String {
        self.run
            .tags
            .get(tag)
            .cloned()
            .unwrap_or_else(|| UNTAGGED.to_string())
    }
}

/// One host's explain decomposition, microseconds per cross-CPU round trip; a term the
/// run could not measure is `None`, never 0.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostTerms {
    /// Run id.
    pub run_id: i64,
    /// See [`FleetRun::host`].
    pub host: String,
    /// The measured round trip (median).
    pub measured_us: f64,
    /// Path: the cross-CPU round trip with both sides spinning (`--wait spin`), so no
    /// wake-up is on it (explain's `path` term).
    pub path_us: Option<f64>,
    /// Wake-ups: what blocking adds to the spinning path (explain's `wake_up` term).
    pub wake_up_us: Option<f64>,
    /// The part of the wake-ups spent leaving idle (an exit in a guest).
    pub idle_exit_us: Option<f64>,
    /// Measured minus predicted.
    pub residual_us: Option<f64>,
}

/// One metric of one point and config across a group's hosts: each run's mean, then their
/// median and range.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FleetMetric {
    /// Point label.
    pub point: String,
    /// Config name.
    pub config: String,
    /// Metric name.
    pub metric: String,
    /// Display unit.
    pub unit: String,
    /// Each run's mean, by host, in run order.
    pub per_host: Vec<(String, f64)>,
    /// Median of the per-host means.
    pub median: f64,
    /// Smallest per-host mean.
    pub min: f64,
    /// Largest per-host mean.
    pub max: f64,
}

/// One group of the fleet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Group {
    /// The tag's value.
    pub name: String,
    /// Run ids in the group.
    pub runs: Vec<i64>,
    /// Hosts in the group (distinct, sorted).
    pub hosts: Vec<String>,
    /// Explain decompositions, one per explain run.
    pub explain: Vec<HostTerms>,
    /// Workload metrics across hosts.
    pub metrics: Vec<FleetMetric>,
    /// Runs whose explanation could not be computed, with why.
    pub unexplained: Vec<String>,
}

/// An environment field whose values differ between groups.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnvDifference {
    /// Field name (`kernel`, `cpu`, a halt-poll parameter, …).
    pub field: String,
    /// The values seen in each group, by group name.
    pub by_group: BTreeMap<String, Vec<String>>,
}

/// The fleet report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fleet {
    /// The grouping tag.
    pub group_by: String,
    /// Groups, by name.
    pub groups: Vec<Group>,
    /// Environment fields that differ between groups.
    pub env_differences: Vec<EnvDifference>,
}

/// Groups `runs` by tag `group_by` and reads each group.
pub fn fleet(runs: &[FleetRun], group_by: &str, confidence: f64) -> Fleet {
    let mut by: BTreeMap<String, Vec<&FleetRun>> = BTreeMap::new();
    for r in runs {
        by.entry(r.group(group_by)).or_default().push(r);
    }
    let groups = by
        .iter()
        .map(|(name, rs)| group(name, rs, confidence))
        .collect();
    let env_differences = env_differences(&by);
    Fleet {
        group_by: group_by.to_string(),
        groups,
        env_differences,
    }
}

/// (point, config, metric) → (unit, each host's mean).
type Cells = BTreeMap<(String, String, String), (String, Vec<(String, f64)>)>;

fn group(name: &str, runs: &[&FleetRun], confidence: f64) -> Group {
    let mut explain = Vec::new();
    let mut unexplained = Vec::new();
    let mut cells: Cells = BTreeMap::new();
    for r in runs {
        if r.run.name == crate::explain::RUN_NAME {
            match crate::explain::explain(r.run.id, &r.run.env, r.trials) {
                Ok(e) => explain.push(terms(r, &e)),
                Err(why) => unexplained.push(format!("run {} ({}): {why}", r.run.id, r.host())),
            }
        }
        for p in summarize_run(r.trials, confidence) {
            add_means(&mut cells, &p, &r.host());
        }
    }
    let metrics = cells
        .into_iter()
        .filter_map(|((point, config, metric), (unit, per_host))| {
            let mut v: Vec<f64> = per_host.iter().map(|(_, x)| *x).collect();
            v.sort_by(f64::total_cmp);
            Some(FleetMetric {
                point,
                config,
                metric,
                unit,
                median: median(&v)?,
                min: *v.first()?,
                max: *v.last()?,
                per_host,
            })
        })
        .collect();
    let hosts: BTreeSet<String> = runs.iter().map(|r| r.host()).collect();
    Group {
        name: name.to_string(),
        runs: runs.iter().map(|r| r.run.id).collect(),
        hosts: hosts.into_iter().collect(),
        explain,
        metrics,
        unexplained,
    }
}

/// Each config's per-metric mean of point `p`, added under (point, config, metric).
fn add_means(cells: &mut Cells, p: &PointSummary, host: &str) {
    for c in &p.configs {
        for m in &c.metrics {
            if m.values.is_empty() || !m.summary.mean.is_finite() {
                continue;
            }
            let key = (p.label.clone(), c.config.clone(), m.name.clone());
            let cell = cells.entry(key).or_insert_with(|| (m.unit.clone(), vec![]));
            cell.1.push((host.to_string(), m.summary.mean));
        }
    }
}

fn terms(r: &FleetRun, e: &crate::explain::Explanation) -> HostTerms {
    let part = |n: &str| e.components.iter().find(|c| c.name == n).map(|c| c.us);
    HostTerms {
        run_id: r.run.id,
        host: r.host(),
        measured_us: e.measured_us,
        path_us: part("path"),
        wake_up_us: part("wake_up"),
        idle_exit_us: part("idle_exit"),
        residual_us: e.residual_us,
    }
}

/// The median of sorted values; `None` for none.
pub fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// The environment fields that say what a host is, flattened to name → value.
pub fn env_fields(e: &Env) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let none = |o: &Option<String>| o.clone().unwrap_or_else(|| "none".into());
    m.insert("kernel".into(), e.kernel.clone());
    m.insert("cpu".into(), e.cpu_model.clone());
    m.insert("cpus".into(), e.cpus.to_string());
    m.insert("hypervisor".into(), none(&e.hypervisor));
    m.insert("clocksource".into(), e.clocksource.clone());
    m.insert("nohz".into(), e.nohz.clone());
    m.insert("cpuidle".into(), none(&e.cpuidle_driver));
    // The governor decides whether the guest halt-poll window acts (two hosts with one
    // driver differ there); absent from fingerprints older than its field, left out then.
    if let Some(g) = &e.cpuidle_governor {
        m.insert("cpuidle_governor".into(), g.clone());
    }
    m.insert("virtperf".into(), e.tool_version.clone());
    for (k, v) in e.halt_poll.iter().chain(e.sysctls.iter()) {
        m.insert(k.clone(), v.clone());
    }
    m
}

/// Fields whose set of values is not the same in every group (none with one group).
fn env_differences(by: &BTreeMap<String, Vec<&FleetRun>>) -> Vec<EnvDifference> {
    if by.len() < 2 {
        return Vec::new();
    }
    let mut seen: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (g, runs) in by {
        for r in runs {
            for (k, v) in env_fields(&r.run.env) {
                seen.entry(k)
                    .or_default()
                    .entry(g.clone())
                    .or_default()
                    .insert(v);
            }
        }
    }
    seen.into_iter()
        .filter(|(_, per)| {
            let sets: BTreeSet<&BTreeSet<String>> = per.values().collect();
            sets.len() > 1 || per.len() < by.len()
        })
        .map(|(field, per)| EnvDifference {
            field,
            by_group: per
                .into_iter()
                .map(|(g, vs)| (g, vs.into_iter().collect()))
                .collect(),
        })
        .collect()
}

/// Campaign `a` against campaign `b`, per group of `group_by`: for every point, config and
/// metric the group has in both, the pooled tries of its hosts compared (Welch, at
/// [`ALPHA`], [`NOISE`] as the smallest change that counts). Rows' point reads
/// `GROUP · POINT config CONFIG`.
pub fn compare_campaigns(
    a: &[FleetRun],
    a_name: &str,
    b: &[FleetRun],
    b_name: &str,
    group_by: &str,
    confidence: f64,
) -> Vec<Row> {
    let pa = pooled(a, group_by, confidence);
    let pb = pooled(b, group_by, confidence);
    let mut out = Vec::new();
    for (key, (unit, hib, va)) in &pa {
        let Some((_, _, vb)) = pb.get(key) else {
            continue;
        };
        let (g, point, config, metric) = key;
        out.push(Row {
            point: format!("{g} · {point} config {config}"),
            baseline: a_name.to_string(),
            candidate: b_name.to_string(),
            metric: metric.clone(),
            unit: unit.clone(),
            comparison: compare(va, vb, *hib, ALPHA, NOISE),
            notes: Vec::new(),
        });
    }
    out
}

type PoolKey = (String, String, String, String);

/// Every try's value of every (group, point, config, metric), pooled over the group's runs.
fn pooled(
    runs: &[FleetRun],
    group_by: &str,
    confidence: f64,
) -> BTreeMap<PoolKey, (String, bool, Vec<f64>)> {
    let mut m: BTreeMap<PoolKey, (String, bool, Vec<f64>)> = BTreeMap::new();
    for r in runs {
        let g = r.group(group_by);
        for p in summarize_run(r.trials, confidence) {
            for c in &p.configs {
                for x in &c.metrics {
                    let key = (g.clone(), p.label.clone(), c.config.clone(), x.name.clone());
                    let e = m
                        .entry(key)
                        .or_insert_with(|| (x.unit.clone(), x.higher_is_better, vec![]));
                    e.2.extend(x.values.iter().copied().filter(|v| v.is_finite()));
                }
            }
        }
    }
    m
}

/// Whether a metric is one of the headline numbers the text and HTML fleet tables show
/// (rates, throughput, latency, probes); events per transaction and service demand stay in
/// the JSON, where a fleet's tables would drown in them.
pub fn headline(metric: &str) -> bool {
    !(metric.ends_with("_per_tr") || metric.ends_with("_demand_us") || metric.ends_with("_per_mb"))
}

/// `—` for a value that was not measured, else one decimal.
fn us(v: Option<f64>) -> String {
    v.map_or_else(|| "—".to_string(), |x| format!("{x:.1}"))
}

/// The fleet as text: per group its hosts, explain terms and metrics; then the
/// environment differences.
pub fn text(f: &Fleet) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for g in &f.groups {
        let _ = writeln!(
            s,
            "== {}={}: {} run(s) on {} host(s): {}",
            f.group_by,
            g.name,
            g.runs.len(),
            g.hosts.len(),
            g.hosts.join(", ")
        );
        if !g.explain.is_empty() {
            let _ = writeln!(
                s,
                "  {:<16} {:>10} {:>8} {:>9} {:>10} {:>9}   (µs per cross-CPU round trip)",
                "host", "measured", "path", "wake-up", "idle exit", "residual"
            );
            for t in &g.explain {
                let _ = writeln!(
                    s,
                    "  {:<16} {:>10.1} {:>8} {:>9} {:>10} {:>9}",
                    virtperf_wire::printable(&t.host),
                    t.measured_us,
                    us(t.path_us),
                    us(t.wake_up_us),
                    us(t.idle_exit_us),
                    us(t.residual_us)
                );
            }
        }
        for why in &g.unexplained {
            let _ = writeln!(s, "  not explained: {why}");
        }
        if !g.metrics.is_empty() {
            let _ = writeln!(
                s,
                "  {:<34} {:<14} {:<22} {:>5} {:>12} {:>12} {:>12}",
                "point", "config", "metric", "hosts", "median", "min", "max"
            );
            for m in g.metrics.iter().filter(|m| headline(&m.metric)) {
                let _ = writeln!(
                    s,
                    "  {:<34} {:<14} {:<22} {:>5} {:>12.2} {:>12.2} {:>12.2} {}",
                    m.point,
                    m.config,
                    crate::tax::metric_words(&m.metric),
                    m.per_host.len(),
                    m.median,
                    m.min,
                    m.max,
                    m.unit
                );
            }
        }
    }
    if !f.env_differences.is_empty() {
        let _ = writeln!(s, "== what differs between the groups");
        for d in &f.env_differences {
            let per: Vec<String> = d
                .by_group
                .iter()
                .map(|(g, vs)| format!("{g}: {}", vs.join(" | ")))
                .collect();
            let _ = writeln!(s, "  {:<28} {}", d.field, per.join("; "));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two hosts with the haltpoll driver, one switched to menu: the field that tells them
    /// apart is there; a fingerprint without a governor adds none.
    #[test]
    fn the_cpuidle_governor_is_among_the_fields_that_say_what_a_host_is() {
        let e = Env {
            cpuidle_driver: Some("haltpoll".into()),
            cpuidle_governor: Some("menu".into()),
            ..Env::default()
        };
        let f = env_fields(&e);
        assert_eq!(f.get("cpuidle").map(String::as_str), Some("haltpoll"));
        assert_eq!(f.get("cpuidle_governor").map(String::as_str), Some("menu"));
        let old = Env {
            cpuidle_governor: None,
            ..e
        };
        assert!(!env_fields(&old).contains_key("cpuidle_governor"));
    }
}
