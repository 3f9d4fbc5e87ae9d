//! The results store: one SQLite file that keeps every benchmark run, its trials (with the
//! full [`TestResult`] JSON, HDR histogram included), and the tuning knobs it changed.
//!
//! The store knows nothing of sockets or of how trials are produced; it is written to by the
//! orchestrator one trial at a time (so a run killed half-way keeps what it measured) and
//! read by the report and the CLI.
//!
//! Safety of other people's files comes first: [`Store::open`] only ever writes to a file
//! that is empty, missing, or already marked as virtperf's by a `meta` row. Anything else is
//! refused with an error that says what the file is and how to pick another one, and the file
//! is left byte-for-byte as it was.
//!
//! Readers never break a running experiment: the file is in WAL mode, so a reader (a
//! notebook, `sqlite3`, `virtperf show` in a loop) holding a read transaction open does not
//! block the writer, writers wait patiently for each other ([`BUSY_TIMEOUT`]), and a record
//! the database still refuses after that is kept in a side file
//! (`<db>.unsaved.jsonl`) until [`Store::import_unsaved`] moves it in.

#![warn(missing_docs)]

mod schema;
mod time;
mod unsaved;

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};
use serde::{Deserialize, Serialize};
use virtperf_wire::{Env, TestResult};

pub use time::now_rfc3339;

/// How long a statement waits for another connection's lock before failing with "database
/// is locked". In WAL mode readers never take a lock a writer waits for; what a writer can
/// wait for is another writer (another virtperf run, each holding the lock for one trial's
/// insert, or someone's `BEGIN IMMEDIATE` in `sqlite3`). A measured trial is worth far more
/// than a minute of waiting, so the wait is generous; readers use it too (they only wait
/// while a connection recovers or converts the file).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// Pauses between the attempts [`Store::add_trial_or_keep`] and [`Store::finish_run_or_keep`]
/// make after a failure (each attempt itself waits up to [`BUSY_TIMEOUT`] for locks); after
/// the last one the record goes to the side file.
const RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1500)];

/// The first 16 bytes of every SQLite 3 database file.
/// The schema version this code writes (`PRAGMA user_version`): the number of migrations.
pub const SCHEMA_VERSION: i64 = schema::MIGRATIONS.len() as i64;

const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// A capture analysis to store (`virtperf pcap --store`). The analyzer's types stay out of
/// the store: summary and connections travel as JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewCapture {
    /// The capture file as given.
    pub path: String,
    /// The analyzer's summary.
    pub summary: serde_json::Value,
    /// Every connection.
    pub connections: Vec<CaptureConn>,
}

/// One analyzed connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureConn {
    /// Opening endpoint, `ip:port`.
    pub a: String,
    /// Other endpoint.
    pub b: String,
    /// First to last packet, seconds.
    pub duration_s: f64,
    /// Payload bytes both ways.
    pub bytes: u64,
    /// Every field, as the analyzer reports it.
    pub detail: serde_json::Value,
}

/// A stored capture analysis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaptureRow {
    /// Id.
    pub id: i64,
    /// File analyzed.
    pub path: String,
    /// When.
    pub analyzed_at: String,
    /// Connections stored.
    pub connections: u64,
}

/// Everything that can go wrong with the results database. Each message is one line that
/// says what is wrong and what to do about it, so the CLI can print it as is.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The file is an SQLite database that belongs to something else; it was not modified.
    #[error("{} is not a virtperf database ({detail}): choose another file with --db", path.display())]
    NotVirtperf {
        /// The database file.
        path: PathBuf,
        /// What the file holds instead (its tables).
        detail: String,
    },
    /// The file is not SQLite at all, or SQLite finds it damaged; it was not modified.
    #[error("{} is corrupt or not an SQLite file ({detail}): move it aside or choose another --db", path.display())]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// What SQLite (or the header check) reported.
        detail: String,
    },
    /// The file was written by a newer virtperf whose schema this one does not know.
    #[error("{} was written by a newer virtperf (schema version {found}, this one reads up to {supported}): upgrade virtperf or choose another --db", path.display())]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// The file's `user_version`.
        found: i64,
        /// The newest schema version this build knows.
        supported: i64,
    },
    /// A run asked for by id does not exist; the message names the id and the file.
    #[error("{0}")]
    NotFound(String),
    /// Any other SQLite failure (a lock held longer than the busy timeout, a full disk, …).
    /// Not marked as the error's source: SQLite's message is already in this one, and
    /// printing the chain would repeat it.
    #[error("results database error: {0} (if another process holds the database locked, retry; otherwise check the disk or choose another --db)")]
    Sqlite(rusqlite::Error),
    /// A record the database refused could not be kept in the side file either.
    #[error("cannot store a record in {} ({db_error}) nor keep it in {} ({file_error}): free some disk space or fix the permissions", db.display(), side_file.display())]
    Unsaved {
        /// The database file.
        db: PathBuf,
        /// Why the database refused it.
        db_error: String,
        /// The side file.
        side_file: PathBuf,
        /// Why the side file refused it.
        file_error: io::Error,
    },
    /// A value could not be turned into JSON or back, e.g. a `TestResult` holding NaN, which
    /// JSON cannot represent.
    #[error(
        "cannot store or read a record as JSON: {0} (this is a virtperf bug; please report it)"
    )]
    Json(#[from] serde_json::Error),
    /// The file or its directory cannot be read or created.
    #[error("cannot use {}: {source}: check the path and its permissions, or choose another --db", path.display())]
    Io {
        /// The file or directory that failed.
        path: PathBuf,
        /// The operating system's error.
        source: io::Error,
    },
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Sqlite(e)
    }
}

/// Where a record given to [`Store::add_trial_or_keep`] or [`Store::finish_run_or_keep`]
/// ended up.
#[derive(Debug)]
pub enum Saved {
    /// In the database.
    Stored,
    /// The database refused it even after retries; it was appended to `side_file`, from
    /// which [`Store::import_unsaved`] moves it into the database later.
    Kept {
        /// The side file, `<db>.unsaved.jsonl`.
        side_file: PathBuf,
        /// Why the database refused it (the last attempt's error).
        error: StoreError,
    },
}

/// What [`Store::import_unsaved`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The side file it read.
    pub side_file: PathBuf,
    /// Trials now in the database (new ones, or found already there from an import that
    /// was interrupted before it could remove the file).
    pub trials: usize,
    /// Run endings applied.
    pub finishes: usize,
    /// Lines left in the side file: their run is not in this database, or the line is not a
    /// record this version of virtperf reads.
    pub left: usize,
}

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
    fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Incomplete => "incomplete",
            RunStatus::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Option<RunStatus> {
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
    fn as_str(self) -> &'static str {
        match self {
            TrialStatus::Ok => "ok",
            TrialStatus::Failed => "failed",
            TrialStatus::Skipped => "skipped",
        }
    }

    fn parse(s: &str) -> Option<TrialStatus> {
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
    /// The trial's primary number, copied out of `result` for quick comparisons.
    pub metric: Option<f64>,
    /// What `metric` is: `rate_per_s`, `mbps`, …
    pub metric_name: String,
    /// When the trial started, RFC 3339 UTC (see [`now_rfc3339`]).
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
}

impl RunRow {
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

/// A tuning knob one configuration of a run changed, with the value it had before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobRecord {
    /// Configuration that set it.
    pub config: String,
    /// Knob name, e.g. `net.core.busy_poll`.
    pub name: String,
    /// Value before the run changed it; `None` when the knob did not exist or was unreadable.
    pub original: Option<String>,
    /// Value the run set.
    pub applied: String,
}

/// This machine's host name as the kernel reports it (the same as `uname -n`), for telling
/// whether a run's writer could be a process here.
fn local_hostname() -> Option<String> {
    let s = fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    Some(s.trim().to_string())
}

/// An open results database.
///
/// One `Store` is one SQLite connection; several processes (or threads, each with its own
/// `Store`) may write to the same file at once: writes wait up to [`BUSY_TIMEOUT`] for each
/// other, and readers never block them.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// What [`identify`] found in a file.
enum Kind {
    /// No tables and no version: ours to initialise.
    Fresh,
    /// Our database at this schema version (not newer than this code).
    Ours(i64),
}

impl Store {
    /// Where the results database lives unless `--db` says otherwise: `$VIRTPERF_DB` if set,
    /// else `$XDG_DATA_HOME/virtperf/results.db`, else `$HOME/.local/share/virtperf/results.db`,
    /// else `results.db` in the current directory. [`Store::open`] creates missing parent
    /// directories.
    pub fn default_path() -> PathBuf {
        default_path_from(|k| std::env::var_os(k))
    }

    /// Opens (creating if missing) the database at `path` and brings its schema up to date.
    ///
    /// A file that is not ours is never written to: a database with other tables and no
    /// virtperf `meta` row gives [`StoreError::NotVirtperf`], a file that is not SQLite gives
    /// [`StoreError::Corrupt`], and a schema newer than this code gives
    /// [`StoreError::TooNew`].
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        // Check the header ourselves before SQLite sees the file: it proves nothing will be
        // written to a file that is not a database, and gives a clearer message.
        check_header(path)?;
        let conn = Connection::open(path).map_err(|e| classify(path, e))?;
        // Connection settings only; none of these write to the file.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        let kind = store.identify()?;
        // Only now that the file is known to be ours (or empty) may it be written to.
        store.use_wal()?;
        let needs_migration = match kind {
            Kind::Fresh => true,
            Kind::Ours(v) => v < schema::supported_version(),
        };
        if needs_migration {
            store.migrate()?;
        }
        Ok(store)
    }

    /// Opens the database at `path` for reading only (`runs`, `show`, `compare`, `report`),
    /// so a reader never takes a write lock a running experiment would have to wait for.
    ///
    /// Refuses the same files as [`Store::open`]. A file that does not exist yet, is empty,
    /// or has an older schema is opened with [`Store::open`] instead (created or migrated
    /// once), since there is nothing to read in it until then. Writing through a read-only
    /// store fails with [`StoreError::Sqlite`].
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        check_header(path)?;
        match fs::metadata(path) {
            Ok(m) if m.len() > 0 => {}
            Ok(_) => return Store::open(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Store::open(path),
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.to_path_buf(),
                    source,
                })
            }
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| classify(path, e))?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        let mut store = Store {
            conn,
            path: path.to_path_buf(),
        };
        match store.identify()? {
            Kind::Ours(v) if v >= schema::supported_version() => Ok(store),
            _ => {
                drop(store);
                Store::open(path)
            }
        }
    }

    /// Decides what the file is, reading only, so a foreign or read-only file is reported
    /// without ever taking a write lock on it. The reads share one (read) transaction:
    /// separately, the version and the tables could come from either side of another
    /// process's migration commit ("marked as ours but version 0" when several processes
    /// create one file).
    fn identify(&mut self) -> Result<Kind, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(|e| classify(&self.path, e))?;
        let kind = identify(&tx, &self.path)?;
        tx.commit().map_err(|e| classify(&self.path, e))?;
        Ok(kind)
    }

    /// Puts the file in WAL mode (a persistent property of the file; a no-op once set), so
    /// readers and the writer do not block each other: in the default rollback mode a
    /// reader's open transaction makes every commit wait, and an experiment's insert fails
    /// once the busy timeout runs out. The price is two files beside the database
    /// (`-wal`, `-shm`) while it is open; SQLite folds them back when the last connection
    /// closes.
    ///
    /// Converting needs a moment without other connections; if another process keeps the
    /// file open longer than the busy timeout, this connection carries on in the old mode
    /// and a later open converts it.
    fn use_wal(&mut self) -> Result<(), StoreError> {
        let r = self
            .conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0));
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.sqlite_error_code(),
                    Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(classify(&self.path, e)),
        }
    }

    /// Sets how long statements wait for another connection's lock (default
    /// [`BUSY_TIMEOUT`]); tests shorten it to provoke "database is locked" quickly.
    pub fn set_busy_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        self.conn.busy_timeout(timeout)?;
        Ok(())
    }

    /// Applies the missing migrations, each in its own write transaction.
    ///
    /// The file is identified again inside each transaction because another process may
    /// have migrated (or, absurdly, claimed) it between our first look and taking the lock.
    fn migrate(&mut self) -> Result<(), StoreError> {
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(|e| classify(&self.path, e))?;
            let version = match identify(&tx, &self.path)? {
                Kind::Fresh => 0,
                Kind::Ours(v) => v,
            };
            let Some(sql) = usize::try_from(version)
                .ok()
                .and_then(|i| schema::MIGRATIONS.get(i))
            else {
                // Up to date (identify already refused anything newer).
                tx.commit()?;
                return Ok(());
            };
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", version + 1)?;
            tx.commit()?;
        }
    }

    /// Stores one capture analysis with all its connections, in one transaction, and returns
    /// its id.
    pub fn add_capture(&mut self, c: &NewCapture) -> Result<i64, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = tx.query_row(
            "INSERT INTO captures (path, analyzed_at, summary_json) VALUES (?1, ?2, ?3) RETURNING id",
            params![c.path, now_rfc3339(), serde_json::to_string(&c.summary)?],
            |r| r.get(0),
        )?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO capture_connections (capture_id, seq, a, b, duration_s, bytes, conn_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?;
            for (i, k) in c.connections.iter().enumerate() {
                stmt.execute(params![
                    id,
                    i as i64,
                    k.a,
                    k.b,
                    k.duration_s,
                    i64::try_from(k.bytes).unwrap_or(i64::MAX),
                    serde_json::to_string(&k.detail)?
                ])?;
            }
        }
        tx.commit()?;
        Ok(id)
    }

    /// Stored captures, newest first: id, path, time of analysis, number of connections.
    pub fn captures(&self) -> Result<Vec<CaptureRow>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT c.id, c.path, c.analyzed_at,
                    (SELECT COUNT(*) FROM capture_connections k WHERE k.capture_id = c.id)
             FROM captures c ORDER BY c.id DESC",
        )?;
        let rows = stmt
            .query_map([], |r| {
                Ok(CaptureRow {
                    id: r.get(0)?,
                    path: r.get(1)?,
                    analyzed_at: r.get(2)?,
                    connections: r.get::<_, i64>(3)?.max(0) as u64,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Records the start of a run (status `running`, started now) and returns its id.
    pub fn begin_run(&mut self, r: &NewRun) -> Result<i64, StoreError> {
        let env_json = to_json_checked::<Env>(&r.env)?;
        // An explicit transaction, committed explicitly: in autocommit, `INSERT … RETURNING`
        // hands back the id on its first step and commits only when the statement is reset,
        // whose error (e.g. "database is locked") is discarded, so a run that was never
        // stored got an id, and the next write said "run N not found".
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let id = tx.query_row(
            "INSERT INTO runs (name, started_at, status, host, pid, tool_version, git_commit,
                               spec_text, env_json, planned_trials)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
             RETURNING id",
            params![
                r.name,
                now_rfc3339(),
                RunStatus::Running.as_str(),
                r.host,
                r.pid,
                r.tool_version,
                r.git_commit,
                r.spec_text,
                env_json,
                r.planned_trials,
            ],
            |row| row.get(0),
        )?;
        tx.commit()?;
        Ok(id)
    }

    /// Stores one trial of run `run_id` in its own transaction, so every trial measured is
    /// on disk even if the run is killed later. Returns the trial's id.
    ///
    /// A `result` that cannot be read back from JSON (a NaN somewhere, which JSON writes as
    /// `null`) is refused here with [`StoreError::Json`] rather than stored, since it would
    /// later make the whole run unreadable.
    pub fn add_trial(&mut self, run_id: i64, t: &NewTrial) -> Result<i64, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        ensure_run(&tx, &self.path, run_id)?;
        let id = insert_trial(&tx, run_id, t)?;
        tx.commit()?;
        Ok(id)
    }

    /// [`Store::add_trial`] that never loses the trial: a failure is retried (after the busy
    /// handler's own wait), and a trial the database still refuses is appended to the side
    /// file (`<db>.unsaved.jsonl`) and reported as [`Saved::Kept`].
    ///
    /// Fails only when the trial cannot be kept either ([`StoreError::Unsaved`]), or cannot
    /// be written as JSON at all ([`StoreError::Json`]).
    pub fn add_trial_or_keep(&mut self, run_id: i64, t: &NewTrial) -> Result<Saved, StoreError> {
        let r = self.with_retries(|s| s.add_trial(run_id, t).map(|_| ()));
        self.keep_on_error(r, || unsaved::Pending::Trial {
            run_id,
            trial: Box::new(t.clone()),
        })
    }

    /// [`Store::finish_run`] that never loses the ending: retried, then kept in the side
    /// file like [`Store::add_trial_or_keep`]'s trials.
    pub fn finish_run_or_keep(
        &mut self,
        run_id: i64,
        status: RunStatus,
    ) -> Result<Saved, StoreError> {
        let finished_at = (status != RunStatus::Running).then(now_rfc3339);
        let r = self.with_retries(|s| {
            let n = set_finished(&s.conn, run_id, status, finished_at.as_deref())?;
            if n == 0 {
                return Err(not_found(&s.path, run_id));
            }
            Ok(())
        });
        self.keep_on_error(r, || unsaved::Pending::Finish {
            run_id,
            status,
            finished_at: finished_at.clone(),
        })
    }

    /// Runs `f` until it succeeds or [`RETRY_DELAYS`] run out. JSON errors are not retried:
    /// the same record would fail the same way.
    fn with_retries(
        &mut self,
        mut f: impl FnMut(&mut Store) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut delays = RETRY_DELAYS.iter();
        loop {
            match f(self) {
                Ok(()) => return Ok(()),
                Err(e @ StoreError::Json(_)) => return Err(e),
                Err(e) => match delays.next() {
                    Some(d) => std::thread::sleep(*d),
                    None => return Err(e),
                },
            }
        }
    }

    /// Turns the last error of a write into a line of the side file.
    fn keep_on_error(
        &self,
        r: Result<(), StoreError>,
        record: impl FnOnce() -> unsaved::Pending,
    ) -> Result<Saved, StoreError> {
        let error = match r {
            Ok(()) => return Ok(Saved::Stored),
            Err(e @ StoreError::Json(_)) => return Err(e),
            Err(e) => e,
        };
        let side_file = unsaved::side_path(&self.path);
        match unsaved::append(&side_file, &record()) {
            Ok(()) => Ok(Saved::Kept { side_file, error }),
            Err(file_error) => Err(StoreError::Unsaved {
                db: self.path.clone(),
                db_error: error.to_string(),
                side_file,
                file_error,
            }),
        }
    }

    /// Moves the records of the side file (`<db>.unsaved.jsonl`, see
    /// [`Store::add_trial_or_keep`]) into the database in one transaction, then removes the
    /// file. `None` when there is no side file.
    ///
    /// Idempotent: a trial already stored (same run, `seq` and start time) is not stored
    /// twice, so an import interrupted between its commit and removing the file is simply
    /// done again. Lines whose run is not in this database, or that this version cannot
    /// read, stay in the file (counted in [`Imported::left`]); nothing is dropped.
    pub fn import_unsaved(&mut self) -> Result<Option<Imported>, StoreError> {
        let side_file = unsaved::side_path(&self.path);
        let io_err = |source| StoreError::Io {
            path: side_file.clone(),
            source,
        };
        let Some(mut import) = unsaved::Import::open(&side_file).map_err(io_err)? else {
            return Ok(None);
        };
        let contents = import.read().map_err(io_err)?;
        let mut keep = contents.unreadable;
        let (mut trials, mut finishes) = (0, 0);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for (line, record) in &contents.records {
            let run_id = match record {
                unsaved::Pending::Trial { run_id, .. }
                | unsaved::Pending::Finish { run_id, .. } => *run_id,
            };
            if ensure_run(&tx, &self.path, run_id).is_err() {
                keep.push(line.clone());
                continue;
            }
            match record {
                unsaved::Pending::Trial { trial, .. } => {
                    let stored = tx
                        .query_row(
                            "SELECT 1 FROM trials WHERE run_id = ?1 AND seq = ?2 AND started_at = ?3",
                            params![run_id, trial.seq, trial.started_at],
                            |_| Ok(()),
                        )
                        .optional()?;
                    if stored.is_none() {
                        insert_trial(&tx, run_id, trial)?;
                    }
                    trials += 1;
                }
                unsaved::Pending::Finish {
                    status,
                    finished_at,
                    ..
                } => {
                    set_finished(&tx, run_id, *status, finished_at.as_deref())?;
                    finishes += 1;
                }
            }
        }
        tx.commit()?;
        let left = keep.len();
        import.finish(&keep).map_err(io_err)?;
        if trials + finishes + left == 0 {
            // An empty side file (e.g. left by a crash before its first line was written).
            return Ok(None);
        }
        Ok(Some(Imported {
            side_file,
            trials,
            finishes,
            left,
        }))
    }

    /// The side file and how many records wait in it, if there is one: for a reader to say
    /// that some trials are not in the database yet.
    pub fn unsaved_pending(&self) -> Option<(PathBuf, usize)> {
        let side_file = unsaved::side_path(&self.path);
        let n = unsaved::count(&side_file);
        (n > 0).then_some((side_file, n))
    }

    /// Records the knobs a run changed. Knobs are keyed by (config, name) and merged with
    /// what is already stored, so this may be called once per configuration or once with all
    /// of them. Setting a knob again updates `applied` but keeps the first `original`, because
    /// that is the value to restore.
    pub fn set_knobs(&mut self, run_id: i64, knobs: &[KnobRecord]) -> Result<(), StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        ensure_run(&tx, &self.path, run_id)?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO knobs (run_id, config, name, original, applied)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (run_id, config, name) DO UPDATE
                 SET applied = excluded.applied,
                     original = COALESCE(knobs.original, excluded.original)",
            )?;
            for k in knobs {
                stmt.execute(params![run_id, k.config, k.name, k.original, k.applied])?;
            }
        }
        tx.commit()?;
        Ok(())
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
        let sql = format!("{RUN_SELECT} ORDER BY r.started_at DESC, r.id DESC");
        let mut stmt = self.conn.prepare(&sql)?;
        let raw = stmt
            .query_map([], RawRun::from_row)?
            .collect::<Result<Vec<_>, _>>()?;
        raw.into_iter().map(|r| r.into_row(&self.path)).collect()
    }

    /// One run by id, or [`StoreError::NotFound`].
    pub fn run(&self, id: i64) -> Result<RunRow, StoreError> {
        let sql = format!("{RUN_SELECT} WHERE r.id = ?1");
        let raw = self
            .conn
            .query_row(&sql, [id], RawRun::from_row)
            .optional()?
            .ok_or_else(|| not_found(&self.path, id))?;
        raw.into_row(&self.path)
    }

    /// The trials of run `run_id` in `seq` order (ties in insertion order), or
    /// [`StoreError::NotFound`] if there is no such run.
    pub fn trials(&self, run_id: i64) -> Result<Vec<TrialRow>, StoreError> {
        ensure_run(&self.conn, &self.path, run_id)?;
        let mut stmt = self.conn.prepare(
            "SELECT id, run_id, seq, config, workload, point_json, point_label, repetition,
                    status, error, result_json, metric, metric_name, started_at, duration_s
             FROM trials WHERE run_id = ?1 ORDER BY seq, id",
        )?;
        let raw = stmt
            .query_map([run_id], RawTrial::from_row)?
            .collect::<Result<Vec<_>, _>>()?;
        raw.into_iter().map(|t| t.into_row(&self.path)).collect()
    }

    /// The knobs of run `run_id` in the order they were first set, or
    /// [`StoreError::NotFound`] if there is no such run.
    pub fn knobs(&self, run_id: i64) -> Result<Vec<KnobRecord>, StoreError> {
        ensure_run(&self.conn, &self.path, run_id)?;
        let mut stmt = self.conn.prepare(
            "SELECT config, name, original, applied FROM knobs WHERE run_id = ?1 ORDER BY id",
        )?;
        let knobs = stmt
            .query_map([run_id], |row| {
                Ok(KnobRecord {
                    config: row.get(0)?,
                    name: row.get(1)?,
                    original: row.get(2)?,
                    applied: row.get(3)?,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        Ok(knobs)
    }

    /// The file this store was opened on, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// [`Store::default_path`] over an injectable environment, so it can be tested without
/// mutating the process environment.
fn default_path_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |k: &str| var(k).filter(|v| !v.is_empty());
    if let Some(p) = set("VIRTPERF_DB") {
        return PathBuf::from(p);
    }
    // The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    if let Some(d) = set("XDG_DATA_HOME").map(PathBuf::from) {
        if d.is_absolute() {
            return d.join("virtperf").join("results.db");
        }
    }
    if let Some(h) = set("HOME") {
        return PathBuf::from(h)
            .join(".local/share")
            .join("virtperf")
            .join("results.db");
    }
    PathBuf::from("results.db")
}

/// Refuses a non-empty file that does not start with the SQLite header, without writing.
fn check_header(path: &Path) -> Result<(), StoreError> {
    let f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                source,
            })
        }
    };
    if f.metadata().map(|m| m.is_dir()).unwrap_or(false) {
        return Err(StoreError::Io {
            path: path.to_path_buf(),
            source: io::Error::other("it is a directory"),
        });
    }
    let mut head = Vec::with_capacity(SQLITE_MAGIC.len());
    f.take(SQLITE_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    // An empty file is a valid empty SQLite database: that is how `touch results.db` works.
    if head.is_empty() || head == SQLITE_MAGIC {
        return Ok(());
    }
    Err(StoreError::Corrupt {
        path: path.to_path_buf(),
        detail: "file is not a database: it does not start with the SQLite header".into(),
    })
}

/// Turns SQLite's "this is not a usable database" errors into [`StoreError::Corrupt`] and
/// "cannot open" into [`StoreError::Io`], keeping the rest as [`StoreError::Sqlite`].
fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: e.to_string(),
        },
        Some(ErrorCode::CannotOpen) => StoreError::Io {
            path: path.to_path_buf(),
            source: io::Error::other(e.to_string()),
        },
        _ => StoreError::Sqlite(e),
    }
}

/// Decides whether a file is a fresh database, ours, or something to leave alone. Reads
/// only.
fn identify(conn: &Connection, path: &Path) -> Result<Kind, StoreError> {
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(|e| classify(path, e))?;
    let tables: Vec<String> = {
        let mut stmt = conn
            .prepare(
                "SELECT name FROM sqlite_master
                 WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
                 ORDER BY name",
            )
            .map_err(|e| classify(path, e))?;
        let names = stmt
            .query_map([], |r| r.get(0))
            .and_then(|rows| rows.collect::<Result<Vec<String>, _>>())
            .map_err(|e| classify(path, e))?;
        names
    };
    let not_ours = |detail: String| StoreError::NotVirtperf {
        path: path.to_path_buf(),
        detail,
    };
    if tables.is_empty() {
        if version == 0 {
            return Ok(Kind::Fresh);
        }
        return Err(not_ours(format!(
            "it has no tables but schema version {version}"
        )));
    }
    let listed = list_tables(&tables);
    if !tables.iter().any(|t| t == "meta") {
        return Err(not_ours(format!("it has tables: {listed}")));
    }
    // Someone else's `meta` table may have other columns; failing to query it means "not
    // ours", not a database error.
    let app: Option<String> = conn
        .query_row(
            "SELECT value FROM meta WHERE key = ?1",
            [schema::APP_KEY],
            |r| r.get(0),
        )
        .optional()
        .or_else(|e| match e.sqlite_error_code() {
            // A missing column is SQLITE_ERROR (Unknown here); a value of another type is a
            // rusqlite conversion error without an SQLite code. Both mean "not our meta".
            Some(ErrorCode::Unknown) | None => Ok(None),
            _ => Err(classify(path, e)),
        })?;
    if app.as_deref() != Some(schema::APP_VALUE) {
        return Err(not_ours(format!(
            "its meta table does not name virtperf; it has tables: {listed}"
        )));
    }
    let supported = schema::supported_version();
    if version > supported {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported,
        });
    }
    if version < 1 {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("it is marked as virtperf's but has schema version {version}"),
        });
    }
    Ok(Kind::Ours(version))
}

/// Table names for a one-line message: at most eight, control characters escaped.
fn list_tables(tables: &[String]) -> String {
    const SHOWN: usize = 8;
    let mut s = tables
        .iter()
        .take(SHOWN)
        .map(|t| t.escape_debug().to_string())
        .collect::<Vec<_>>()
        .join(", ");
    if tables.len() > SHOWN {
        s.push_str(&format!(" and {} more", tables.len() - SHOWN));
    }
    s
}

/// Serialises `v` and checks it parses back as `T`: JSON turns NaN and infinities into
/// `null`, which would then fail to load; better to fail at write time, with the record
/// still in the caller's hands.
fn to_json_checked<T: Serialize + serde::de::DeserializeOwned>(
    v: &T,
) -> Result<String, StoreError> {
    let s = serde_json::to_string(v)?;
    serde_json::from_str::<T>(&s)?;
    Ok(s)
}

/// The message users see for a missing run id.
fn not_found(path: &Path, id: i64) -> StoreError {
    StoreError::NotFound(format!(
        "run {id} not found in {} (see `virtperf runs`)",
        path.display()
    ))
}

/// Fails with [`StoreError::NotFound`] unless run `id` exists.
fn ensure_run(conn: &Connection, path: &Path, id: i64) -> Result<(), StoreError> {
    let found = conn
        .query_row("SELECT 1 FROM runs WHERE id = ?1", [id], |_| Ok(()))
        .optional()?;
    found.ok_or_else(|| not_found(path, id))
}

/// Inserts trial `t` of run `run_id` (inside the caller's transaction) and returns its id.
///
/// A `result` that cannot be read back from JSON is refused with [`StoreError::Json`].
fn insert_trial(conn: &Connection, run_id: i64, t: &NewTrial) -> Result<i64, StoreError> {
    let point_json = serde_json::to_string(&t.point)?;
    let result_json = t
        .result
        .as_ref()
        .map(to_json_checked::<TestResult>)
        .transpose()?;
    let id = conn.query_row(
        "INSERT INTO trials (run_id, seq, config, workload, point_json, point_label,
                             repetition, status, error, result_json, metric, metric_name,
                             started_at, duration_s)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
         RETURNING id",
        params![
            run_id,
            t.seq,
            t.config,
            t.workload,
            point_json,
            t.point_label,
            t.repetition,
            t.status.as_str(),
            t.error,
            result_json,
            t.metric,
            t.metric_name,
            t.started_at,
            t.duration_s,
        ],
        |row| row.get(0),
    )?;
    Ok(id)
}

/// Records how run `run_id` ended; returns how many rows changed (0: no such run).
fn set_finished(
    conn: &Connection,
    run_id: i64,
    status: RunStatus,
    finished_at: Option<&str>,
) -> Result<usize, StoreError> {
    Ok(conn.execute(
        "UPDATE runs SET status = ?1, finished_at = ?2 WHERE id = ?3",
        params![status.as_str(), finished_at, run_id],
    )?)
}

/// The columns of a [`RunRow`], with its trial counts.
const RUN_SELECT: &str = "SELECT r.id, r.name, r.started_at, r.finished_at, r.status, r.host,
        r.tool_version, r.git_commit, r.spec_text, r.env_json, r.pid, r.planned_trials,
        (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'ok'),
        (SELECT count(*) FROM trials t WHERE t.run_id = r.id AND t.status = 'failed')
     FROM runs r";

/// A `runs` row as SQLite returns it, before the text columns are parsed (which needs the
/// path for error messages, unavailable inside a rusqlite row closure).
struct RawRun {
    id: i64,
    name: String,
    started_at: String,
    finished_at: Option<String>,
    status: String,
    host: String,
    tool_version: String,
    git_commit: Option<String>,
    spec_text: String,
    env_json: String,
    pid: u32,
    planned_trials: u32,
    trials_ok: u32,
    trials_failed: u32,
}

impl RawRun {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRun> {
        Ok(RawRun {
            id: row.get(0)?,
            name: row.get(1)?,
            started_at: row.get(2)?,
            finished_at: row.get(3)?,
            status: row.get(4)?,
            host: row.get(5)?,
            tool_version: row.get(6)?,
            git_commit: row.get(7)?,
            spec_text: row.get(8)?,
            env_json: row.get(9)?,
            pid: row.get(10)?,
            planned_trials: row.get(11)?,
            trials_ok: row.get(12)?,
            trials_failed: row.get(13)?,
        })
    }

    fn into_row(self, path: &Path) -> Result<RunRow, StoreError> {
        let corrupt = |detail: String| StoreError::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        let status = RunStatus::parse(&self.status).ok_or_else(|| {
            corrupt(format!(
                "run {} has unknown status {:?}",
                self.id, self.status
            ))
        })?;
        let env = serde_json::from_str(&self.env_json).map_err(|e| {
            corrupt(format!(
                "run {}: stored environment does not parse: {e}",
                self.id
            ))
        })?;
        Ok(RunRow {
            id: self.id,
            name: self.name,
            started_at: self.started_at,
            finished_at: self.finished_at,
            status,
            host: self.host,
            tool_version: self.tool_version,
            git_commit: self.git_commit,
            spec_text: self.spec_text,
            env,
            pid: self.pid,
            planned_trials: self.planned_trials,
            trials_ok: self.trials_ok,
            trials_failed: self.trials_failed,
        })
    }
}

/// A `trials` row as SQLite returns it, before the JSON and status columns are parsed.
struct RawTrial {
    id: i64,
    run_id: i64,
    seq: u32,
    config: String,
    workload: String,
    point_json: String,
    point_label: String,
    repetition: u32,
    status: String,
    error: Option<String>,
    result_json: Option<String>,
    metric: Option<f64>,
    metric_name: String,
    started_at: String,
    duration_s: f64,
}

impl RawTrial {
    fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawTrial> {
        Ok(RawTrial {
            id: row.get(0)?,
            run_id: row.get(1)?,
            seq: row.get(2)?,
            config: row.get(3)?,
            workload: row.get(4)?,
            point_json: row.get(5)?,
            point_label: row.get(6)?,
            repetition: row.get(7)?,
            status: row.get(8)?,
            error: row.get(9)?,
            result_json: row.get(10)?,
            metric: row.get(11)?,
            metric_name: row.get(12)?,
            started_at: row.get(13)?,
            duration_s: row.get(14)?,
        })
    }

    fn into_row(self, path: &Path) -> Result<TrialRow, StoreError> {
        let id = self.id;
        let corrupt = |what: &str, e: &dyn fmt::Display| StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: format!("trial {id} of run {}: {what}: {e}", self.run_id),
        };
        let status = TrialStatus::parse(&self.status)
            .ok_or_else(|| corrupt("unknown status", &format!("{:?}", self.status)))?;
        let point = serde_json::from_str(&self.point_json)
            .map_err(|e| corrupt("stored sweep point does not parse", &e))?;
        let result = match self.result_json.as_deref() {
            None => None,
            Some(s) => Some(
                serde_json::from_str(s).map_err(|e| corrupt("stored result does not parse", &e))?,
            ),
        };
        Ok(TrialRow {
            id,
            run_id: self.run_id,
            trial: NewTrial {
                seq: self.seq,
                config: self.config,
                workload: self.workload,
                point,
                point_label: self.point_label,
                repetition: self.repetition,
                status,
                error: self.error,
                result,
                metric: self.metric,
                metric_name: self.metric_name,
                started_at: self.started_at,
                duration_s: self.duration_s,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_path_order() {
        fn env(
            pairs: &'static [(&'static str, &'static str)],
        ) -> impl Fn(&str) -> Option<OsString> {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| OsString::from(v))
            }
        }
        const ALL: &[(&str, &str)] = &[
            ("VIRTPERF_DB", "/x/my.db"),
            ("XDG_DATA_HOME", "/xdg"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(default_path_from(env(ALL)), PathBuf::from("/x/my.db"));
        assert_eq!(
            default_path_from(env(&[("VIRTPERF_DB", ""), ("XDG_DATA_HOME", "/xdg")])),
            PathBuf::from("/xdg/virtperf/results.db")
        );
        assert_eq!(
            default_path_from(env(&[("XDG_DATA_HOME", "rel"), ("HOME", "/home/u")])),
            PathBuf::from("/home/u/.local/share/virtperf/results.db")
        );
        assert_eq!(default_path_from(env(&[])), PathBuf::from("results.db"));
    }

    #[test]
    fn statuses_match_serde_names() {
        for s in [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Incomplete,
            RunStatus::Failed,
        ] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
        }
        for s in [TrialStatus::Ok, TrialStatus::Failed, TrialStatus::Skipped] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(TrialStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn migration_one_writes_the_marker_row() {
        let m = schema::MIGRATIONS[0];
        assert!(m.contains(&format!(
            "VALUES ('{}', '{}')",
            schema::APP_KEY,
            schema::APP_VALUE
        )));
    }
}
