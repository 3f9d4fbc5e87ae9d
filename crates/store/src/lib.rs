//! The results store: one SQLite file (the default) or a team's PostgreSQL database
//! (`--db postgres://…`, see [`Location`]) that keeps every benchmark run, its trials (with the
//! full [`TestResult`](virtperf_wire::TestResult) JSON, HDR histogram included), and the
//! tuning knobs it changed.
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
//!
//! The code is split by what it stores, one module each: `runs`, `trials`, `knobs`,
//! `captures`. `open` decides whether a file may be written at all and brings its schema up
//! to date; `keep` holds the writes that fall back to the side file (`unsaved`).

#![warn(missing_docs)]

mod captures;
mod db;
mod error;
mod keep;
mod knobs;
mod open;
mod pg;
mod push;
mod runs;
mod schema;
mod time;
mod tls;
mod trials;
mod unsaved;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use captures::{CaptureConn, CaptureRow, NewCapture};
pub use error::StoreError;
pub use keep::{Imported, Saved};
pub use knobs::KnobRecord;
pub use pg::Location;
pub use push::Pushed;
pub use runs::{NewRun, RunFilter, RunRow, RunStatus};
pub use time::{now_rfc3339, rfc3339_ago};
pub use trials::{NewTrial, TrialRow, TrialStatus};

/// How long a statement waits for another connection's lock before failing with "database
/// is locked". In WAL mode readers never take a lock a writer waits for; what a writer can
/// wait for is another writer (another virtperf run, each holding the lock for one trial's
/// insert, or someone's `BEGIN IMMEDIATE` in `sqlite3`). A measured trial is worth far more
/// than a minute of waiting, so the wait is generous; readers use it too (they only wait
/// while a connection recovers or converts the file).
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(60);

/// The schema version this code writes (`PRAGMA user_version`): the number of migrations.
pub const SCHEMA_VERSION: i64 = schema::MIGRATIONS.len() as i64;

/// An open results database.
///
/// One `Store` is one SQLite or PostgreSQL connection; several processes (or threads, each
/// with its own `Store`) may write to the same database at once: on SQLite writes wait up to
/// [`BUSY_TIMEOUT`] for each other, on PostgreSQL they do not wait at all (each trial is a
/// row insert), and readers never block them.
#[derive(Debug)]
pub struct Store {
    conn: db::Conn,
    /// The file, or the PostgreSQL URL without its password, for messages.
    path: PathBuf,
    /// Where records the database refused are kept (`<db>.unsaved.jsonl` beside a file).
    side_file: PathBuf,
    /// How to connect again after a dropped connection (PostgreSQL only).
    pg: Option<Box<pg::Connector>>,
}

impl Store {
    /// Sets how long statements wait for another connection's lock (default
    /// [`BUSY_TIMEOUT`]); tests shorten it to provoke "database is locked" quickly. A no-op
    /// on PostgreSQL, whose writers do not lock each other out.
    pub fn set_busy_timeout(&mut self, timeout: Duration) -> Result<(), StoreError> {
        if let db::Conn::Sqlite(c) = &self.conn {
            c.busy_timeout(timeout)?;
        }
        Ok(())
    }

    /// The file this store was opened on, or its PostgreSQL URL without the password, for
    /// messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True when this store is a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        matches!(self.conn, db::Conn::Pg(_))
    }
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

#[cfg(test)]
mod tests {
    use super::*;

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
