//! Where a store lives ([`Location`]: a file or a `postgres://` URL) and opening a
//! PostgreSQL store: credentials as libpq users expect them, the same schema and migrations
//! as SQLite's (in PostgreSQL's dialect), TLS as libpq's `sslmode` says ([`crate::tls`]),
//! and reconnecting after a dropped connection.

use std::cell::RefCell;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::db::{vals, Conn};
use crate::pg_connect::Connector;
use crate::{schema, Store, StoreError};
use virtperf_wire::redact_url as redact;

/// Key of the `meta` row holding a PostgreSQL store's schema version (SQLite keeps it in
/// `PRAGMA user_version`).
const VERSION_KEY: &str = "schema_version";

/// Key of the advisory lock migrations hold, so several hosts opening a new team database
/// at once apply each migration once ("vprf" in ASCII).
const MIGRATION_LOCK: i64 = 0x7670_7266;

/// Where a store lives: a SQLite file (the default) or a PostgreSQL database.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// An SQLite file.
    File(PathBuf),
    /// A PostgreSQL database, `postgres://USER@HOST[:PORT]/DB`.
    Postgres {
        /// The URL as given (it may hold a password: never print it; see [`Location`]'s
        /// `Display`).
        url: String,
        /// Where trials the server would not take are kept until the next write imports
        /// them.
        side_file: PathBuf,
    },
}

/// Never prints a password: a URL's is replaced by `***`.
impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File(p) => write!(f, "{}", p.display()),
            Location::Postgres { url, .. } => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Location({self})")
    }
}

impl Location {
    /// A `--db` value: `postgres://…` or `postgresql://…` is a PostgreSQL database, anything
    /// else a file.
    pub fn parse(s: &str) -> Location {
        if s.starts_with("postgres://") || s.starts_with("postgresql://") {
            Location::Postgres {
                url: s.to_string(),
                side_file: pg_side_file(s, |k| std::env::var_os(k)),
            }
        } else {
            Location::File(PathBuf::from(s))
        }
    }

    /// Where the store lives unless `--db` says otherwise: `$VIRTPERF_DB` (a file or a URL),
    /// else [`Store::default_path`].
    pub fn default_location() -> Location {
        match std::env::var("VIRTPERF_DB") {
            Ok(v) if !v.is_empty() => Location::parse(&v),
            _ => Location::File(Store::default_path()),
        }
    }
}

/// Where a PostgreSQL store keeps refused records on this machine: one file per URL (less
/// its password) in virtperf's data directory, so the next write to the same database
/// imports them.
fn pg_side_file(url: &str, var: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let name: String = redact(url)
        .split_once("://")
        .map_or(url, |(_, r)| r)
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let dir = crate::open::default_path_from(|k| if k == "VIRTPERF_DB" { None } else { var(k) })
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    dir.join(format!("{name}.unsaved.jsonl"))
}

impl Store {
    /// Opens the store at `loc`, creating or migrating it as [`Store::open`] does.
    pub fn open_at(loc: &Location) -> Result<Store, StoreError> {
        match loc {
            Location::File(p) => Store::open(p),
            Location::Postgres { url, side_file } => Store::open_postgres(url, side_file),
        }
    }

    /// Opens the store at `loc` for reading, as [`Store::open_read_only`] does. A
    /// PostgreSQL store is read through an ordinary connection (readers there never block
    /// writers), created or migrated on first use like any other.
    pub fn open_read_only_at(loc: &Location) -> Result<Store, StoreError> {
        match loc {
            Location::File(p) => Store::open_read_only(p),
            Location::Postgres { url, side_file } => Store::open_postgres(url, side_file),
        }
    }

    /// Opens (creating the tables on first use) the PostgreSQL database at `url`,
    /// keeping refused records in `side_file`.
    ///
    /// A database with other tables and no virtperf `meta` row is refused
    /// ([`StoreError::NotVirtperf`]) and left alone, as a foreign SQLite file is.
    pub fn open_postgres(url: &str, side_file: &Path) -> Result<Store, StoreError> {
        let shown = redact(url);
        let connector = Connector::new(url, &shown, |k| std::env::var_os(k))?;
        let client = connector.connect(&shown)?;
        let store = Store {
            conn: Conn::Pg(RefCell::new(client)),
            path: PathBuf::from(&shown),
            side_file: side_file.to_path_buf(),
            pg: Some(Box::new(connector)),
        };
        let version = store.pg_version()?;
        if version < schema::supported_version() {
            store.pg_migrate()?;
        }
        Ok(store)
    }

    /// Replaces a PostgreSQL connection that was closed (server restarted, network cut)
    /// with a new one. Nothing to do for SQLite or a live connection.
    pub(crate) fn reconnect_if_closed(&mut self) -> Result<(), StoreError> {
        let Some(connector) = &self.pg else {
            return Ok(());
        };
        if !self.conn.is_closed() {
            return Ok(());
        }
        let client = connector.connect(&self.path.display().to_string())?;
        self.conn = Conn::Pg(RefCell::new(client));
        Ok(())
    }

    /// The schema version of a PostgreSQL store: 0 when it has no tables, an error when
    /// it is someone else's or newer than this code.
    fn pg_version(&self) -> Result<i64, StoreError> {
        let tables: Vec<String> = self
            .conn
            .query(
                "SELECT tablename::text FROM pg_catalog.pg_tables
                 WHERE schemaname = current_schema() ORDER BY 1",
                &[],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<_, _>>()?;
        let not_ours = |detail: String| StoreError::NotVirtperf {
            path: self.path.clone(),
            detail,
        };
        if tables.is_empty() {
            return Ok(0);
        }
        let listed = crate::open::list_tables(&tables);
        if !tables.iter().any(|t| t == "meta") {
            return Err(not_ours(format!("it has tables: {listed}")));
        }
        // Someone else's `meta` may have other columns: failing to read it means "not ours".
        let meta = self
            .conn
            .query(
                "SELECT key, value FROM meta WHERE key IN (?1, ?2)",
                vals![schema::APP_KEY, VERSION_KEY],
            )
            .map_err(|_| {
                not_ours(format!(
                    "its meta table does not name virtperf; it has tables: {listed}"
                ))
            })?;
        let get = |k: &str| {
            meta.iter()
                .find(|r| r.text(0).is_ok_and(|v| v == k))
                .and_then(|r| r.text(1).ok())
        };
        if get(schema::APP_KEY).as_deref() != Some(schema::APP_VALUE) {
            return Err(not_ours(format!(
                "its meta table does not name virtperf; it has tables: {listed}"
            )));
        }
        let version: i64 = get(VERSION_KEY)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::Corrupt {
                path: self.path.clone(),
                detail: format!("its meta table has no valid {VERSION_KEY}"),
            })?;
        let supported = schema::supported_version();
        if version > supported {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
                supported,
            });
        }
        Ok(version)
    }

    /// Applies the missing migrations, each in its own transaction with the version bump
    /// (PostgreSQL's DDL is transactional, so a failure leaves a whole version). An
    /// advisory lock serialises hosts migrating at once; each looks again under it.
    fn pg_migrate(&self) -> Result<(), StoreError> {
        loop {
            let done = self.conn.write_tx(|c| {
                c.query("SELECT pg_advisory_xact_lock(?1)", vals![MIGRATION_LOCK])?;
                let version = self.pg_version()?;
                let Some(sql) = usize::try_from(version)
                    .ok()
                    .and_then(|i| schema::PG_MIGRATIONS.get(i))
                else {
                    return Ok(true);
                };
                c.batch(sql)?;
                c.execute(
                    "INSERT INTO meta (key, value) VALUES (?1, ?2)
                     ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    vals![VERSION_KEY, (version + 1).to_string()],
                )?;
                Ok(false)
            })?;
            if done {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pg_connect::{pg_config, pgpass_find};

    #[test]
    fn passwords_never_shown() {
        assert_eq!(
            redact("postgres://me:s3cret@db:5433/vp"),
            "postgres://me:***@db:5433/vp"
        );
        assert_eq!(redact("postgres://me@db/vp"), "postgres://me@db/vp");
        let loc = Location::parse("postgresql://me:pw@h/d");
        assert!(!format!("{loc} {loc:?}").contains("pw@"));
        assert_eq!(
            Location::parse("results.db"),
            Location::File("results.db".into())
        );
    }

    #[test]
    fn pgpass_fields_wildcards_and_escapes() {
        let text = "# comment\nother:5432:*:me:no\ndb\\:x:*:vp:me:a\\:b\\\\c\n";
        assert_eq!(
            pgpass_find(text, ["db:x", "5432", "vp", "me"]).as_deref(),
            Some("a:b\\c")
        );
        assert_eq!(pgpass_find(text, ["db", "5432", "vp", "me"]), None);
    }

    #[test]
    fn password_from_env_then_pgpass() {
        let dir = std::env::temp_dir().join(format!("vp-pgpass-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pass = dir.join("pgpass");
        std::fs::write(&pass, "127.0.0.1:5999:team:me:frompass\n").unwrap();
        let url = "postgres://me@127.0.0.1:5999/team";
        let env = |pw: Option<&'static str>| {
            let pass = pass.clone();
            move |k: &str| match k {
                "PGPASSWORD" => pw.map(OsString::from),
                "PGPASSFILE" => Some(pass.clone().into_os_string()),
                _ => None,
            }
        };
        let c = pg_config(url, url, env(Some("fromenv"))).unwrap();
        assert_eq!(c.get_password(), Some(&b"fromenv"[..]));
        let c = pg_config(url, url, env(None)).unwrap();
        assert_eq!(c.get_password(), Some(&b"frompass"[..]));
        let c = pg_config("postgres://me:inurl@127.0.0.1:5999/team", url, env(None)).unwrap();
        assert_eq!(c.get_password(), Some(&b"inurl"[..]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn side_file_per_database_in_the_data_dir() {
        let p = pg_side_file("postgres://me:pw@h:5/d", |k| {
            (k == "XDG_DATA_HOME").then(|| OsString::from("/x"))
        });
        assert_eq!(p, PathBuf::from("/x/virtperf/me_____h_5_d.unsaved.jsonl"));
    }
}
