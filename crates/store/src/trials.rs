//! Trials: one `trials` row per measurement of a run, with its full [`TestResult`] as JSON.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use virtperf_wire::TestResult;

use crate::db::{vals, Conn, Row};
use crate::runs::ensure_run;
use crate::{to_json_checked, Store, StoreError};

/// What became of one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialStatus {
    /// Measured; `result` and `metric` are normally present.
    Ok,
    /// Attempted and failed; `error` says why.
    Failed,
    /// Not attempted (e.g. the run was stopped, or a prerequisite failed).
    Skipped,
}

impl TrialStatus {
    /// The name stored in the database; the same as the serde name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Ok => "ok",
            TrialStatus::Failed => "failed",
            TrialStatus::Skipped => "skipped",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<TrialStatus> {
        [TrialStatus::Ok, TrialStatus::Failed, TrialStatus::Skipped]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Prints the snake_case name (`ok`, `failed`, `skipped`).
impl fmt::Display for TrialStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One finished (or failed, or skipped) trial, as given to [`Store::add_trial`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewTrial {
    /// Position in the run; [`Store::trials`] returns trials in this order.
    pub seq: u32,
    /// Name of the configuration (set of knobs) the trial ran under.
    pub config: String,
    /// Workload name, e.g. `rr`.
    pub workload: String,
    /// Sweep parameters of this point, e.g. `{"send_size": 64}`.
    pub point: serde_json::Value,
    /// The point for people, e.g. `send_size=64`.
    pub point_label: String,
    /// Repetition number of this point.
    pub repetition: u32,
    /// Outcome.
    pub status: TrialStatus,
    /// Why it failed or was skipped.
    pub error: Option<String>,
    /// The complete measurement, kept whole so nothing is lost.
    pub result: Option<TestResult>,
    /// A measurement that is not a network test (a wake-up or KVM probe): its whole report,
    /// as that tool prints it with `--json`. `metric` then holds its primary number.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
    /// The trial's primary number, copied out of `result` for quick comparisons.
    pub metric: Option<f64>,
    /// What `metric` is: `rate_per_s`, `mbps`, …
    pub metric_name: String,
    /// When the trial started, RFC 3339 UTC (see [`now_rfc3339`](crate::now_rfc3339)).
    pub started_at: String,
    /// Wall-clock seconds the trial took, set-up included.
    pub duration_s: f64,
}

/// A stored trial: its ids plus the [`NewTrial`] it was stored from. Derefs to that trial,
/// so readers write `row.config` as they would for a new one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialRow {
    /// Database id of the trial.
    pub id: i64,
    /// The run it belongs to.
    pub run_id: i64,
    /// What was stored.
    #[serde(flatten)]
    pub trial: NewTrial,
}

impl std::ops::Deref for TrialRow {
    type Target = NewTrial;
    fn deref(&self) -> &NewTrial {
        &self.trial
    }
}

impl Store {
    /// Stores one trial of run `run_id` in its own transaction, so every trial measured is
    /// on disk even if the run is killed later. Returns the trial's id.
    ///
    /// A `result` that cannot be read back from JSON (a NaN somewhere, which JSON writes as
    /// `null`) is refused here with [`StoreError::Json`] rather than stored, since it would
    /// later make the whole run unreadable.
    pub fn add_trial(&mut self, run_id: i64, t: &NewTrial) -> Result<i64, StoreError> {
        let path = &self.path;
        self.conn.write_tx(|c| {
            ensure_run(c, path, run_id)?;
            insert_trial(c, run_id, t)
        })
    }

    /// The trials of run `run_id` in `seq` order (ties in insertion order), or
    /// [`StoreError::NotFound`] if there is no such run.
    pub fn trials(&self, run_id: i64) -> Result<Vec<TrialRow>, StoreError> {
        ensure_run(&self.conn, &self.path, run_id)?;
        self.conn
            .query(
                "SELECT id, run_id, seq, config, workload, point_json, point_label, repetition,
                        status, error, result_json, metric, metric_name, started_at, duration_s,
                        detail_json
                 FROM trials WHERE run_id = ?1 ORDER BY seq, id",
                vals![run_id],
            )?
            .iter()
            .map(|r| trial_row(r, &self.path))
            .collect()
    }
}

/// Inserts trial `t` of run `run_id` (inside the caller's transaction) and returns its id.
///
/// A `result` that cannot be read back from JSON is refused with [`StoreError::Json`].
pub(crate) fn insert_trial(conn: &Conn, run_id: i64, t: &NewTrial) -> Result<i64, StoreError> {
    let point_json = serde_json::to_string(&t.point)?;
    let result_json = t
        .result
        .as_ref()
        .map(to_json_checked::<TestResult>)
        .transpose()?;
    let detail_json = t
        .detail
        .as_ref()
        .map(to_json_checked::<serde_json::Value>)
        .transpose()?;
    let row = conn.query_opt(
        "INSERT INTO trials (run_id, seq, config, workload, point_json, point_label,
                             repetition, status, error, result_json, metric, metric_name,
                             started_at, duration_s, detail_json)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         RETURNING id",
        vals![
            run_id,
            t.seq,
            &t.config,
            &t.workload,
            point_json,
            &t.point_label,
            t.repetition,
            t.status.as_str(),
            t.error.as_ref(),
            result_json,
            t.metric,
            &t.metric_name,
            &t.started_at,
            t.duration_s,
            detail_json,
        ],
    )?;
    row.ok_or_else(|| StoreError::Schema("INSERT … RETURNING gave no id".into()))?
        .int(0)
}

/// A `trials` row parsed: its JSON and status columns checked, the path naming the store in
/// errors.
fn trial_row(row: &Row, path: &Path) -> Result<TrialRow, StoreError> {
    let id = row.int(0)?;
    let run_id = row.int(1)?;
    let corrupt = |what: &str, e: &dyn fmt::Display| StoreError::Corrupt {
        path: path.to_path_buf(),
        detail: format!("trial {id} of run {run_id}: {what}: {e}"),
    };
    let status_text = row.text(8)?;
    let status = TrialStatus::parse(&status_text)
        .ok_or_else(|| corrupt("unknown status", &format!("{status_text:?}")))?;
    let point = serde_json::from_str(&row.text(5)?)
        .map_err(|e| corrupt("stored sweep point does not parse", &e))?;
    let detail = match row.opt_text(15)? {
        None => None,
        Some(s) => Some(
            serde_json::from_str(&s)
                .map_err(|e| corrupt("stored probe report does not parse", &e))?,
        ),
    };
    let result = match row.opt_text(10)? {
        None => None,
        Some(s) => Some(
            serde_json::from_str(&s).map_err(|e| corrupt("stored result does not parse", &e))?,
        ),
    };
    Ok(TrialRow {
        id,
        run_id,
        trial: NewTrial {
            seq: row.u32(2)?,
            config: row.text(3)?,
            workload: row.text(4)?,
            point,
            point_label: row.text(6)?,
            repetition: row.u32(7)?,
            status,
            error: row.opt_text(9)?,
            result,
            detail,
            metric: row.opt_real(11)?,
            metric_name: row.text(12)?,
            started_at: row.text(13)?,
            duration_s: row.real(14)?,
        },
    })
}
