//! Opening a database: where it lives by default, telling our file from someone else's
//! (reading only), WAL mode, and the migrations.

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension, TransactionBehavior};

use crate::db::Conn;
use crate::{schema, unsaved, Store, StoreError, BUSY_TIMEOUT};

/// The first 16 bytes of every SQLite 3 database file.
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

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
                error: source,
            })?;
        }
        // Check the header ourselves before SQLite sees the file: it proves nothing will be
        // written to a file that is not a database, and gives a clearer message.
        check_header(path)?;
        let mut conn = Connection::open(path).map_err(|e| classify(path, e))?;
        // Connection settings only; none of these write to the file.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        conn.pragma_update(None, "foreign_keys", true)?;
        let kind = identify_in_tx(&mut conn, path)?;
        // Only now that the file is known to be ours (or empty) may it be written to.
        use_wal(&conn, path)?;
        let needs_migration = match kind {
            Kind::Fresh => true,
            Kind::Ours(v) => v < schema::supported_version(),
        };
        if needs_migration {
            migrate(&mut conn, path)?;
        }
        Ok(Store::sqlite(conn, path))
    }

    fn sqlite(conn: Connection, path: &Path) -> Store {
        Store {
            conn: Conn::Sqlite(conn),
            path: path.to_path_buf(),
            side_file: unsaved::side_path(path),
            pg: None,
        }
    }

    /// Opens the database at `path` for reading only (`runs`, `show`, `compare`, `report`),
    /// so a reader never takes a write lock a running experiment would have to wait for.
    ///
    /// Refuses the same files as [`Store::open`], and a file that does not exist
    /// ([`StoreError::Missing`]): a reader with a mistyped `--db` must not leave an empty
    /// database (and its directories) behind. A file that exists but is empty (another
    /// process is creating it) or has an older schema is opened with [`Store::open`]
    /// instead (initialised or migrated once), since there is nothing to read in it until
    /// then. Writing through a read-only store fails with [`StoreError::Sqlite`].
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        check_header(path)?;
        match fs::metadata(path) {
            Ok(m) if m.len() > 0 => {}
            Ok(_) => return Store::open(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::Missing {
                    path: path.to_path_buf(),
                })
            }
            Err(source) => {
                return Err(StoreError::Io {
                    path: path.to_path_buf(),
                    error: source,
                })
            }
        }
        let (conn, kind) = match open_ro(path, false) {
            Err(e) if unwritable(&e) && !wal_has_frames(path) => {
                // A WAL database is read through its `-shm` file, which a reader must be
                // able to create: in a read-only directory, or a file this user cannot
                // write, it cannot. With no write-ahead log holding data the file alone is
                // the whole database, and SQLite reads it as it is (immutable) without it.
                open_ro(path, true)?
            }
            other => other?,
        };
        match kind {
            Kind::Ours(v) if v >= schema::supported_version() => Ok(Store::sqlite(conn, path)),
            _ => {
                drop(conn);
                Store::open(path)
            }
        }
    }
}

/// Opens `path` read-only (`immutable`: without locks or the WAL's shared memory) and says
/// what it is.
fn open_ro(path: &Path, immutable: bool) -> Result<(Connection, Kind), StoreError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn = if immutable {
        Connection::open_with_flags(format!("file:{}?immutable=1", uri_path(path)), flags)
    } else {
        Connection::open_with_flags(path, flags)
    }
    .map_err(|e| classify(path, e))?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let kind = identify_in_tx(&mut conn, path)?;
    Ok((conn, kind))
}

/// A path as a `file:` URI's path: the characters a URI gives meaning to, escaped.
fn uri_path(path: &Path) -> String {
    let mut out = String::new();
    for b in path.as_os_str().as_encoded_bytes() {
        match b {
            b'%' | b'?' | b'#' | b' ' | 0x00..=0x1f | 0x7f..=0xff => {
                out.push_str(&format!("%{b:02X}"))
            }
            _ => out.push(*b as char),
        }
    }
    out
}

/// The error of a reader that may not create the WAL's `-shm` file.
fn unwritable(e: &StoreError) -> bool {
    match e {
        StoreError::ReadOnly(_) => true,
        StoreError::Io { error, .. } => error.to_string().contains("unable to open"),
        StoreError::Sqlite(e) => matches!(
            e.sqlite_error_code(),
            Some(ErrorCode::ReadOnly | ErrorCode::CannotOpen)
        ),
        _ => false,
    }
}

/// Whether the database's write-ahead log holds frames not yet in the file (a writer is
/// running, or died): then the file alone is not the whole database.
fn wal_has_frames(path: &Path) -> bool {
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    fs::metadata(wal).is_ok_and(|m| m.len() > 0)
}

/// Decides what the file is, reading only, so a foreign or read-only file is reported
/// without ever taking a write lock on it. The reads share one (read) transaction:
/// separately, the version and the tables could come from either side of another
/// process's migration commit ("marked as ours but version 0" when several processes
/// create one file).
fn identify_in_tx(conn: &mut Connection, path: &Path) -> Result<Kind, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Deferred)
        .map_err(|e| classify(path, e))?;
    let kind = identify(&tx, path)?;
    tx.commit().map_err(|e| classify(path, e))?;
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
fn use_wal(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    let r = conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0));
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
        Err(e) => Err(classify(path, e)),
    }
}

/// Applies the missing migrations, each in its own write transaction.
///
/// The file is identified again inside each transaction because another process may
/// have migrated (or, absurdly, claimed) it between our first look and taking the lock.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(path, e))?;
        let version = match identify(&tx, path)? {
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

/// [`Store::default_path`] over an injectable environment, so it can be tested without
/// mutating the process environment.
pub(crate) fn default_path_from(var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
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
    // SQLite needs a regular file it can lock and write beside (its WAL): a directory, or
    // a device such as /dev/null, failed as "disk I/O error", and opening a named pipe to
    // read its header would wait for a writer. Its type is read before it is opened.
    let kind = fs::metadata(path).map(|m| m.file_type()).ok();
    let not = match kind {
        Some(k) if k.is_dir() => Some("it is a directory"),
        Some(k) if !k.is_file() => Some("it is not a regular file (a device, pipe or socket)"),
        _ => None,
    };
    if let Some(why) = not {
        return Err(StoreError::Io {
            path: path.to_path_buf(),
            error: io::Error::other(why),
        });
    }
    let f = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(StoreError::Io {
                path: path.to_path_buf(),
                error: source,
            })
        }
    };
    let mut head = Vec::with_capacity(SQLITE_MAGIC.len());
    f.take(SQLITE_MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|source| StoreError::Io {
            path: path.to_path_buf(),
            error: source,
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
            error: io::Error::other(e.to_string()),
        },
        _ => StoreError::from(e),
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
pub(crate) fn list_tables(tables: &[String]) -> String {
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
}
