//! `virtperf export`: stored trials as a tidy table, one row per trial and metric, with
//! every sweep parameter in a column of its own, for pandas, R, a spreadsheet or DuckDB.
//!
//! The columns are the fixed ones ([`FIXED`]), then one per sweep parameter (the union of
//! the parameters of every exported run, in order of first appearance; empty where a trial
//! has no such parameter), then one per run tag named `tag.KEY` (the union of the runs'
//! tags; empty where a run lacks it), then [`TAIL`]. A trial without metrics (failed or skipped) is
//! one row with an empty metric, so what is missing stays visible.

use std::fmt::Write as _;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use virtperf_store::{RunRow, TrialRow};

use crate::escape::csv_field;
use crate::summary::probe_unit;

/// Columns before the sweep parameters.
pub const FIXED: [&str; 6] = ["run", "seq", "config", "workload", "repetition", "status"];
/// Columns after the sweep parameters.
pub const TAIL: [&str; 4] = ["metric", "value", "unit", "error"];

/// One row: one metric of one trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Run id.
    pub run: i64,
    /// The trial's position in its run.
    pub seq: u32,
    /// Config name.
    pub config: String,
    /// Workload name.
    pub workload: String,
    /// Repetition number.
    pub repetition: u32,
    /// `ok`, `failed` or `skipped`.
    pub status: String,
    /// One value per [`Export::params`] column; `None` where the trial lacks it.
    pub params: Vec<Option<Value>>,
    /// Metric name (`mbps`, `p99_us`, …); `None` for a trial without metrics.
    pub metric: Option<String>,
    /// The metric's value; `None` when absent or not finite.
    pub value: Option<f64>,
    /// The metric's unit (`Mbit/s`, `µs`, …).
    pub unit: Option<String>,
    /// Why the trial failed or was skipped.
    pub error: Option<String>,
}

/// A tidy table of the trials of one or more runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Export {
    /// Sweep parameter columns, in order of first appearance, then the tag columns
    /// (`tag.KEY`, sorted). A parameter whose name is also a fixed column (`run`,
    /// `metric`, …) is named `point.NAME` here.
    pub params: Vec<String>,
    /// The rows, run by run, trials in `seq` order, metrics in their stored order.
    pub rows: Vec<Row>,
}

/// The parameter's column name: its own, unless a fixed column has it.
fn column_name(key: &str) -> String {
    if FIXED.contains(&key) || TAIL.contains(&key) {
        format!("point.{key}")
    } else {
        key.to_string()
    }
}

/// Builds the tidy table of `runs`, each with its trials.
pub fn tidy(runs: &[(&RunRow, &[TrialRow])]) -> Export {
    // The parameter columns first, so every row gets the same cells.
    let mut keys: Vec<String> = Vec::new();
    for (_, trials) in runs {
        for t in trials.iter() {
            if let Value::Object(m) = &t.point {
                for k in m.keys() {
                    if !keys.contains(k) {
                        keys.push(k.clone());
                    }
                }
            }
        }
    }
    let tag_keys: std::collections::BTreeSet<&String> =
        runs.iter().flat_map(|(r, _)| r.tags.keys()).collect();
    let mut rows = Vec::new();
    for (run, trials) in runs {
        for t in trials.iter() {
            let params: Vec<Option<Value>> = keys
                .iter()
                .map(|k| t.point.get(k).filter(|v| !v.is_null()).cloned())
                .chain(
                    tag_keys
                        .iter()
                        .map(|k| run.tags.get(*k).map(|v| Value::String(v.clone()))),
                )
                .collect();
            let row = |metric: Option<(&str, &str, f64)>| Row {
                run: run.id,
                seq: t.seq,
                config: t.config.clone(),
                workload: t.workload.clone(),
                repetition: t.repetition,
                status: t.status.to_string(),
                params: params.clone(),
                metric: metric.map(|m| m.0.to_string()),
                value: metric.map(|m| m.2).filter(|v| v.is_finite()),
                unit: metric.map(|m| m.1.to_string()),
                error: t.error.clone(),
            };
            let before = rows.len();
            if let Some(r) = &t.result {
                for m in r.metrics() {
                    rows.push(row(Some((m.name, m.unit, m.value))));
                }
            } else if let Some(v) = t.metric {
                // A probe (wake-up, KVM): no TestResult, its one number is the metric.
                rows.push(row(Some((
                    t.metric_name.as_str(),
                    probe_unit(&t.metric_name),
                    v,
                ))));
            }
            if rows.len() == before {
                rows.push(row(None));
            }
        }
    }
    Export {
        params: keys
            .iter()
            .map(|k| column_name(k))
            .chain(tag_keys.iter().map(|k| format!("tag.{k}")))
            .collect(),
        rows,
    }
}

/// A parameter's cell: strings as they are, anything else as its JSON text.
fn param_cell(v: &Option<Value>) -> String {
    match v {
        None => String::new(),
        Some(Value::String(s)) => csv_field(s),
        Some(other) => csv_field(&other.to_string()),
    }
}

impl Export {
    /// Every column name, in order.
    pub fn columns(&self) -> Vec<String> {
        FIXED
            .iter()
            .map(|s| s.to_string())
            .chain(self.params.iter().cloned())
            .chain(TAIL.iter().map(|s| s.to_string()))
            .collect()
    }

    /// CSV with a header line. Values are written as Rust's shortest round-trip decimal
    /// (the stored double exactly), empty when absent.
    pub fn csv(&self) -> String {
        let mut s = self
            .columns()
            .iter()
            .map(|c| csv_field(c))
            .collect::<Vec<_>>()
            .join(",");
        s.push('\n');
        for r in &self.rows {
            let _ = write!(
                s,
                "{},{},{},{},{},{}",
                r.run,
                r.seq,
                csv_field(&r.config),
                csv_field(&r.workload),
                r.repetition,
                r.status
            );
            for p in &r.params {
                s.push(',');
                s.push_str(&param_cell(p));
            }
            let _ = writeln!(
                s,
                ",{},{},{},{}",
                csv_field(r.metric.as_deref().unwrap_or("")),
                r.value.map(|v| v.to_string()).unwrap_or_default(),
                csv_field(r.unit.as_deref().unwrap_or("")),
                csv_field(r.error.as_deref().unwrap_or("")),
            );
        }
        s
    }

    /// JSON: a list of objects, one per row, keys in column order (absent values `null`).
    pub fn json(&self) -> String {
        let objs: Vec<JsonRow> = self
            .rows
            .iter()
            .map(|row| JsonRow {
                params: &self.params,
                row,
            })
            .collect();
        // Serialising plain strings, numbers and JSON values cannot fail.
        serde_json::to_string_pretty(&objs).unwrap_or_default()
    }
}

/// One row as a JSON object whose keys keep the column order (a serde_json `Map` would sort
/// them).
struct JsonRow<'a> {
    params: &'a [String],
    row: &'a Row,
}

impl Serialize for JsonRow<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = self.row;
        let mut m = s.serialize_map(Some(FIXED.len() + self.params.len() + TAIL.len()))?;
        m.serialize_entry("run", &r.run)?;
        m.serialize_entry("seq", &r.seq)?;
        m.serialize_entry("config", &r.config)?;
        m.serialize_entry("workload", &r.workload)?;
        m.serialize_entry("repetition", &r.repetition)?;
        m.serialize_entry("status", &r.status)?;
        for (k, v) in self.params.iter().zip(&r.params) {
            m.serialize_entry(k, v)?;
        }
        m.serialize_entry("metric", &r.metric)?;
        m.serialize_entry("value", &r.value)?;
        m.serialize_entry("unit", &r.unit)?;
        m.serialize_entry("error", &r.error)?;
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use virtperf_store::{NewTrial, RunStatus, TrialStatus};

    fn run(id: i64) -> RunRow {
        RunRow {
            id,
            name: "t".into(),
            started_at: "2026-01-01T00:00:00.000Z".into(),
            finished_at: None,
            status: RunStatus::Complete,
            host: "h".into(),
            tool_version: "0".into(),
            git_commit: None,
            spec_text: String::new(),
            env: Default::default(),
            pid: 1,
            planned_trials: 1,
            trials_ok: 1,
            trials_failed: 0,
            uid: String::new(),
            tags: Default::default(),
        }
    }

    fn probe(seq: u32, point: Value, metric: Option<f64>, error: Option<&str>) -> TrialRow {
        TrialRow {
            id: i64::from(seq),
            run_id: 1,
            trial: NewTrial {
                seq,
                config: "a,b".into(),
                workload: "wake".into(),
                point,
                point_label: String::new(),
                repetition: 1,
                status: if metric.is_some() {
                    TrialStatus::Ok
                } else {
                    TrialStatus::Failed
                },
                error: error.map(str::to_string),
                result: None,
                detail: None,
                metric,
                metric_name: "one_way_p50_us".into(),
                started_at: String::new(),
                duration_s: 0.0,
            },
        }
    }

    #[test]
    fn parameters_become_columns_with_empty_cells_where_absent() {
        let (r1, r2) = (run(1), run(2));
        let t1 = vec![
            probe(1, json!({"send_size": 1024}), Some(3.5), None),
            probe(2, json!({"send_size": 4096}), None, Some("refused, \"no\"")),
        ];
        let t2 = vec![probe(
            1,
            json!({"cpus": "0,1", "metric": 7}),
            Some(0.1),
            None,
        )];
        let e = tidy(&[(&r1, &t1), (&r2, &t2)]);
        assert_eq!(e.params, ["send_size", "cpus", "point.metric"]);
        let csv = e.csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines[0],
            "run,seq,config,workload,repetition,status,send_size,cpus,point.metric,metric,value,unit,error"
        );
        assert_eq!(
            lines[1],
            "1,1,\"a,b\",wake,1,ok,1024,,,one_way_p50_us,3.5,µs,"
        );
        assert_eq!(
            lines[2],
            "1,2,\"a,b\",wake,1,failed,4096,,,,,,\"refused, \"\"no\"\"\""
        );
        assert_eq!(
            lines[3],
            "2,1,\"a,b\",wake,1,ok,,\"0,1\",7,one_way_p50_us,0.1,µs,"
        );
        assert_eq!(lines.len(), 4);

        let j: Value = serde_json::from_str(&e.json()).unwrap();
        assert_eq!(j[0]["send_size"], 1024);
        assert_eq!(j[0]["cpus"], Value::Null);
        assert_eq!(j[2]["cpus"], "0,1");
        assert_eq!(j[1]["metric"], Value::Null);
        assert_eq!(j[2]["value"], 0.1);
        // Keys keep the column order.
        let text = e.json();
        assert!(text.find("\"status\"").unwrap() < text.find("\"send_size\"").unwrap());
        assert!(text.find("\"send_size\"").unwrap() < text.find("\"metric\"").unwrap());
    }
}
