//! Runs: one `runs` row per experiment, written when it begins and when it ends, read back
//! with its trial counts.

use std::fmt;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use virtperf_wire::Env;

use crate::db::{vals, Conn, Row, Val};
use crate::tags::{insert_tags, read_tags, Tags};
use crate::{now_rfc3339, to_json_checked, Store, StoreError};

/// What became of a run, as recorded by the process that wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Still being written (or its writer died: see [`RunRow::effective_status`]).
    Running,
    /// Every planned trial ran and none failed.
    Complete,
    /// Interrupted, or some trials failed: what is there is valid but the sweep has holes.
    Incomplete,
    /// The run could not do its job at all (e.g. the agent was unreachable).
    Failed,
}

impl RunStatus {
    /// The name stored in the database and shown to users; the same as the serde name.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Incomplete => "incomplete",
            RunStatus::Failed => "failed",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<RunStatus> {
        [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Incomplete,
            RunStatus::Failed,
        ]
        .into_iter()
        .find(|v| v.as_str() == s)
    }
}

/// Prints the snake_case name (`running`, `complete`, …), as the CLI shows it.
impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A run about to start, as given to [`Store::begin_run`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    /// The plan's name.
    pub name: String,
    /// The plan exactly as the user wrote it, so the run can be repeated or audited.
    pub spec_text: String,
    /// The client machine's fingerprint at the start.
    pub env: Env,
    /// virtperf version doing the run.
    pub tool_version: String,
    /// Commit virtperf was built from, when known.
    pub git_commit: Option<String>,
    /// Host name of the writing process (compared with this host's to detect a dead run).
    pub host: String,
    /// Process id of the writer, so a reader can tell a live run from a killed one.
    pub pid: u32,
    /// How many trials the plan expands to.
    pub planned_trials: u32,
    /// Where the run ran, in the user's words (`--tag`, `$VIRTPERF_TAGS`).
    #[serde(default)]
    pub tags: Tags,
}

/// A stored run with its trial counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    /// Database id, the number users pass to `virtperf show`.
    pub id: i64,
    /// See [`NewRun::name`].
    pub name: String,
    /// When [`Store::begin_run`] was called, RFC 3339 UTC.
    pub started_at: String,
    /// When [`Store::finish_run`] was called; `None` while running.
    pub finished_at: Option<String>,
    /// Status as last recorded; prefer [`RunRow::effective_status`] for display.
    pub status: RunStatus,
    /// See [`NewRun::host`].
    pub host: String,
    /// See [`NewRun::tool_version`].
    pub tool_version: String,
    /// See [`NewRun::git_commit`].
    pub git_commit: Option<String>,
    /// See [`NewRun::spec_text`].
    pub spec_text: String,
    /// See [`NewRun::env`].
    pub env: Env,
    /// See [`NewRun::pid`].
    pub pid: u32,
    /// See [`NewRun::planned_trials`].
    pub planned_trials: u32,
    /// Trials stored with status `ok`.
    pub trials_ok: u32,
    /// Trials stored with status `failed`.
    pub trials_failed: u32,
    /// The run's stable id: the same in every store it is pushed to (`virtperf push`),
    /// while [`RunRow::id`] is each store's own number.
    #[serde(default)]
    pub uid: String,
    /// See [`NewRun::tags`].
    #[serde(default)]
    pub tags: Tags,
}

impl RunRow {
    /// Planned trials that have no stored outcome, ok or failed (a run stopped by a signal,
    /// a config given up on, a measurement skipped): 0 where every one ran or more did.
    pub fn trials_not_run(&self) -> u32 {
        self.planned_trials
            .saturating_sub(self.trials_ok + self.trials_failed)
    }

    /// The status a reader should believe: a run recorded as `Running` whose writer process
    /// no longer exists on this host was killed half-way, so it reads as `Incomplete`.
    ///
    /// A run written on another host cannot be checked and keeps its recorded status. A
    /// recycled pid makes a dead run look alive; that errs on the safe side (it is shown as
    /// still running, not declared dead).
    pub fn effective_status(&self) -> RunStatus {
        if self.status != RunStatus::Running {
            return self.status;
        }
        let proc_ok = Path::new("/proc/self").exists();
        match local_hostname() {
            Some(h) if proc_ok && h == self.host => {
                if Path::new("/proc").join(self.pid.to_string()).exists() {
                    RunStatus::Running
                } else {
                    RunStatus::Incomplete
                }
            }
            _ => RunStatus::Running,
        }
    }
}

/// This machine's host name as the kernel reports it (the same as `uname -n`), for telling
/// whether a run's writer could be a process here.
fn local_hostname() -> Option<String> {
    let s = fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(s.trim().to_string())
}

/// Which runs [`Store::runs_where`] returns; every field set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    /// Only runs written on this host (exactly as [`NewRun::host`] recorded it).
    pub host: Option<String>,
    /// Only runs with this plan name.
    pub name: Option<String>,
    /// Only runs started at or after this RFC 3339 UTC time (e.g. from
    /// [`rfc3339_ago`](crate::rfc3339_ago)).
    pub since: Option<String>,
    /// Only runs carrying every one of these tags with exactly this value
    /// (`--where tag.KEY=VALUE`).
    pub tags: Vec<(String, String)>,
}

impl Store {
    /// Records the start of a run (status `running`, started now) and returns its id. The
    /// run also gets a stable id ([`RunRow::uid`]) that stays the same wherever the run is
    /// pushed.
    pub fn begin_run(&mut self, r: &NewRun) -> Result<i64, StoreError> {
        let (started_at, uid) = (now_rfc3339(), new_uid());
        // An explicit transaction, committed explicitly: in autocommit, SQLite's
        // `INSERT … RETURNING` hands back the id on its first step and commits only when
        // the statement is reset, whose error (e.g. "database is locked") is discarded, so
        // a run that was never stored got an id, and the next write said "run N not found".
        self.conn.write_tx(|c| insert_run(c, r, &started_at, &uid))
    }

    /// Records how a run ended and when. Setting `Running` again clears `finished_at`.
    pub fn finish_run(&mut self, run_id: i64, status: RunStatus) -> Result<(), StoreError> {
        let finished_at = (status != RunStatus::Running).then(now_rfc3339);
        let n = set_finished(&self.conn, run_id, status, finished_at.as_deref())?;
        if n == 0 {
            return Err(not_found(&self.path, run_id));
        }
        Ok(())
    }

    /// Every run, newest first.
    pub fn runs(&self) -> Result<Vec<RunRow>, StoreError> {
        self.runs_where(&RunFilter::default())
    }

    /// The runs `filter` selects, newest first: e.g. one host's runs of the last 30 days
    /// (`virtperf runs --where host=… --since 30d`).
    pub fn runs_where(&self, filter: &RunFilter) -> Result<Vec<RunRow>, StoreError> {
        // Built from fixed pieces with placeholders only (never a value in the SQL text);
        // absent filters are left out rather than written `?1 IS NULL OR …`, whose
        // parameter type PostgreSQL cannot infer.
        let mut conds = Vec::new();
        let mut params = Vec::new();
        for (col, v) in [
            ("r.host = ", &filter.host),
            ("r.name = ", &filter.name),
            ("r.started_at >= ", &filter.since),
        ] {
            if let Some(v) = v {
                params.push(Val::from(v));
                conds.push(format!("{col}?{}", params.len()));
            }
        }
        for (k, v) in &filter.tags {
            params.push(Val::from(k));
            params.push(Val::from(v));
            conds.push(format!(
                "EXISTS (SELECT 1 FROM run_tags g WHERE g.run_id = r.id AND g.key = ?{} AND g.value = ?{})",
                params.len() - 1,
                params.len()
            ));
        }
        let wh = if conds.is_empty() {
            String::new()
        } else {
            format!(" WHERE {}", conds.join(" AND "))
        };
        let sql = format!("{RUN_SELECT}{wh} ORDER BY r.started_at DESC, r.id DESC");
        self.conn
            .query(&sql, &params)?
            .iter()
            .map(|r| self.run_row_tagged(r))
            .collect()
    }

    /// A `runs` row parsed, with its tags read.
    fn run_row_tagged(&self, r: &Row) -> Result<RunRow, StoreError> {
        let mut row = run_row(r, &self.path)?;
        row.tags = read_tags(&self.conn, row.id)?;
        Ok(row)
    }

    /// One run by id, or [`StoreError::NotFound`].
    pub fn run(&self, id: i64) -> Result<RunRow, StoreError> {
        let sql = format!("{RUN_SELECT} WHERE r.id = ?1");
        let raw = self
            .conn
            .query_opt(&sql, vals![id])?
            .ok_or_else(|| not_found(&self.path, id))?;
        self.run_row_tagged(&raw)
    }
}

/// Inserts run `r` as running, started at `started_at`, with stable id `uid` and its tags,
/// inside the caller's transaction; its database id.
pub(crate) fn insert_run(
    c: &Conn,
    r: &NewRun,
    started_at: &str,
    uid: &str,
) -> Result<i64, StoreError> {
    let env_json = to_json_checked::<Env>(&r.env)?;
    let row = c.query_opt(
        "INSERT INTO runs (name, started_at, status, host, pid, tool_version, git_commit,
                           spec_text, env_json, planned_trials, uid)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
         RETURNING id",
        vals![
            &r.name,
            started_at,
            RunStatus::Running.as_str(),
            &r.host,
            r.pid,
            &r.tool_version,
            r.git_commit.as_ref(),
            &r.spec_text,
            env_json,
            r.planned_trials,
            uid,
        ],
    )?;
    let id = row
        .ok_or_else(|| StoreError::Schema("INSERT … RETURNING gave no id".into()))?
        .int(0)?;
    insert_tags(c, id, &r.tags)?;
    Ok(id)
}

/// A new stable run id: the kernel's random UUID (Linux, where virtperf runs), else one made
/// of this host, process and instant, unique enough for runs that are seconds apart.
pub(crate) fn new_uid() -> String {
    if let Ok(s) = fs::read_to_string("/proc/sys/kernel/random/uuid") {
        return s.trim().to_string();
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{}-{nanos}",
        local_hostname().unwrap_or_default(),
        std::process::id()
    )
}

/// The message users see for a missing run id.
pub(crate) fn not_found(path: &Path, id: i64) -> StoreError {
    StoreError::NotFound(format!(
        "run {id} not found in {} (see `virtperf runs`)",
        path.display()
    ))
}

/// Fails with [`StoreError::NotFound`] unless run `id` exists.
pub(crate) fn ensure_run(conn: &Conn, path: &Path, id: i64) -> Result<(), StoreError> {
    let found = conn.query_opt("SELECT 1 FROM runs WHERE id = ?1", vals![id])?;
    found.map(|_| ()).ok_or_else(|| not_found(path, id))
}

/// Records how run `run_id` ended; returns how many rows changed (0: no such run).
pub(crate) fn set_finished(
    conn: &Conn,
    run_id: i64,
    status: RunStatus,
    finished_at: Option<&str>,
) -> Result<u64, StoreError> {
    conn.execute(
        "UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3",
        vals![status.as_str(), finished_at, run_id],
    )
}

/// The columns of a [`RunRow`], with its trial counts.
const RUN_SELECT: &str = "SELECT r.id, r.name, r.started_at, r.finished_at, r.status, r.host,
        r.tool_version, r.git_commit, r.spec_text, r.env_json, r.pid, r.planned_trials,
        (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'ok'),
        (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'failed'),
        r.uid
     FROM runs r";

/// A `runs` row (columns of [`RUN_SELECT`]) parsed; the path names the store in errors.
fn run_row(row: &Row, path: &Path) -> Result<RunRow, StoreError> {
    let id = row.int(0)?;
    let corrupt = |detail: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        detail,
    };
    let status_text = row.text(4)?;
    let status = RunStatus::parse(&status_text)
        .ok_or_else(|| corrupt(format!("run {id} has unknown status {status_text:?}")))?;
    let env = serde_json::from_str(&row.text(9)?)
        .map_err(|e| corrupt(format!("run {id}: stored environment does not parse: {e}")))?;
    Ok(RunRow {
        id,
        name: row.text(1)?,
        started_at: row.text(2)?,
        finished_at: row.opt_text(3)?,
        status,
        host: row.text(5)?,
        tool_version: row.text(6)?,
        git_commit: row.opt_text(7)?,
        spec_text: row.text(8)?,
        env,
        pid: row.u32(10)?,
        planned_trials: row.u32(11)?,
        trials_ok: row.u32(12)?,
        trials_failed: row.u32(13)?,
        uid: row.opt_text(14)?.unwrap_or_default(),
        tags: Tags::new(),
    })
}
