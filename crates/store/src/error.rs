//! [`StoreError`]: everything that can go wrong with the results database, one line each.

use std::io;
use std::path::PathBuf;

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
    /// A reader (`runs`, `show`, `compare`, `report`) was pointed at a file that does not
    /// exist; nothing was created.
    #[error("{} does not exist: no results are stored there yet (`virtperf run` makes one; or choose another --db)", path.display())]
    Missing {
        /// The database file asked for.
        path: PathBuf,
    },
    /// A run asked for by id does not exist; the message names the id and the file.
    #[error("{0}")]
    NotFound(String),
    /// A request the store refuses as it stands (e.g. pushing a run still being written);
    /// the message says what to do instead.
    #[error("{0}")]
    Refused(String),
    /// Any other SQLite failure (a lock held longer than the busy timeout, a full disk, …).
    /// Not marked as the error's source: SQLite's message is already in this one, and
    /// printing the chain would repeat it.
    #[error("results database error: {0} (if another process holds the database locked, retry; otherwise check the disk or choose another --db)")]
    Sqlite(rusqlite::Error),
    /// A write the file's permissions forbid (a read-only file or directory): no lock to
    /// wait for, nothing to retry.
    #[error("results database error: {0}: this user cannot write the database file or its directory (run as its owner, or copy it with sqlite3 FILE '.backup copy.db' and use the copy)")]
    ReadOnly(String),
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
    /// Not marked as the source, for the same reason as [`StoreError::Sqlite`].
    #[error(
        "cannot store or read a record as JSON: {0} (this is a virtperf bug; please report it)"
    )]
    Json(serde_json::Error),
    /// A PostgreSQL store refused a statement or lost its connection.
    #[error("team database error: {0} (check that the server is up and reachable, then retry)")]
    Postgres(String),
    /// A `--db postgres://…` URL that cannot be used, or a server that cannot be reached.
    #[error("cannot use the database {url}: {detail}")]
    Connect {
        /// The URL, without its password.
        url: String,
        /// What is wrong and how to fix it.
        detail: String,
    },
    /// A row that does not have the shape this version's schema gives it.
    #[error("the results database does not have the expected schema ({0}): choose another --db")]
    Schema(String),
    /// The file or its directory cannot be read or created. The operating system's error
    /// is not marked as the source (a field named `source` would be): it is in this
    /// message, and printing the chain repeated it ("…: it is a directory" twice).
    #[error("cannot use {}: {error}: check the path and its permissions, or choose another --db", path.display())]
    Io {
        /// The file or directory that failed.
        path: PathBuf,
        /// The operating system's error.
        error: io::Error,
    },
}

impl From<postgres::Error> for StoreError {
    fn from(e: postgres::Error) -> StoreError {
        // The server's own message (with its detail) when there is one: postgres::Error's
        // Display alone says only "db error".
        let msg = match e.as_db_error() {
            Some(db) => match db.detail() {
                Some(d) => format!("{}: {d}", db.message()),
                None => db.message().to_string(),
            },
            None => {
                // The cause ("Connection refused", a column's type) is in the chain.
                let mut s = e.to_string();
                let mut src = std::error::Error::source(&e);
                while let Some(x) = src {
                    s.push_str(": ");
                    s.push_str(&x.to_string());
                    src = x.source();
                }
                s
            }
        };
        StoreError::Postgres(msg)
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::ReadOnly) => StoreError::ReadOnly(e.to_string()),
            _ => StoreError::Sqlite(e),
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(e: serde_json::Error) -> StoreError {
        StoreError::Json(e)
    }
}
