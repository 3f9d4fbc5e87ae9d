//! The open store: one SQLite or PostgreSQL connection, and what every query shares.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::{db, pg_connect, schema, StoreError};

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
    pub(crate) conn: db::Conn,
    /// The file, or the PostgreSQL URL without its password, for messages.
    pub(crate) path: PathBuf,
    /// Where records the database refused are kept (`<db>.unsaved.jsonl` beside a file).
    pub(crate) side_file: PathBuf,
    /// How to connect again after a dropped connection (PostgreSQL only).
    pub(crate) pg: Option<Box<pg_connect::Connector>>,
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
pub(crate) fn to_json_checked<T: Serialize + serde::de::DeserializeOwned>(
    v: &T,
) -> Result<String, StoreError> {
    let s = serde_json::to_string(v)?;
    serde_json::from_str::<T>(&s)?;
    Ok(s)
}
