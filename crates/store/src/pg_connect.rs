//! Connecting to a PostgreSQL store, and again after a dropped connection: credentials as
//! libpq users expect them (URL, `PGPASSWORD`, `~/.pgpass`, `PGUSER`), TLS as `sslmode`
//! says ([`crate::tls`]).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use postgres::config::Host;
use postgres::Config;
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::tls::{take_tls_params, TlsSettings};
use crate::StoreError;

/// How long connecting may take before the store gives up with a message.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to connect to a PostgreSQL store, and again after a dropped connection: the
/// settings of its URL and environment, and its TLS.
pub(crate) struct Connector {
    config: Config,
    tls: TlsSettings,
    make_tls: MakeRustlsConnect,
}

/// The `postgres` crate's `Config` hides the password in its `Debug`; the TLS connector
/// has none to show.
impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("config", &self.config)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl Connector {
    /// The settings of `url` (shown as `shown` in messages) and the environment `var`.
    pub(crate) fn new(
        url: &str,
        shown: &str,
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Connector, StoreError> {
        let bad = |detail: String| StoreError::Connect {
            url: shown.to_string(),
            detail,
        };
        let (url, tls) = take_tls_params(url, &var).map_err(bad)?;
        let mut config = pg_config(&url, shown, var)?;
        config.ssl_mode(tls.negotiation());
        let make_tls = tls.connector().map_err(bad)?;
        Ok(Connector {
            config,
            tls,
            make_tls,
        })
    }

    /// Connects (with TLS when the sslmode and the server say so); errors are one line
    /// naming what failed and how to fix it.
    pub(crate) fn connect(&self, shown: &str) -> Result<postgres::Client, StoreError> {
        self.config.connect(self.make_tls.clone()).map_err(|e| {
            let mut chain: Vec<&(dyn std::error::Error + 'static)> = vec![&e];
            while let Some(x) = chain.last().and_then(|c| c.source()) {
                chain.push(x);
            }
            let host = match self.config.get_hosts().first() {
                Some(Host::Tcp(h)) => h.clone(),
                _ => "localhost".to_string(),
            };
            let detail = self.tls.explain(&chain, &host).unwrap_or_else(|| {
                let msg = match e.as_db_error() {
                    Some(db) => db.message().to_string(),
                    // The chain holds the useful part ("Connection refused", "password missing").
                    None => chain
                        .iter()
                        .map(|x| x.to_string())
                        .collect::<Vec<_>>()
                        .join(": "),
                };
                let hint = if msg.contains("password") {
                    "give the password in the URL, in PGPASSWORD, or in ~/.pgpass"
                } else {
                    "check the URL (postgres://USER@HOST[:PORT]/DB) and that the server is up"
                };
                format!("{msg}: {hint}")
            });
            StoreError::Connect {
                url: shown.to_string(),
                detail,
            }
        })
    }
}

/// The connection settings of `url`, with the password from `PGPASSWORD` or the password
/// file (`PGPASSFILE`, else `~/.pgpass`) when the URL has none, and the user from `PGUSER`
/// or `USER` when it names none, as libpq does (the `postgres` crate reads no environment).
pub(crate) fn pg_config(
    url: &str,
    shown: &str,
    var: impl Fn(&str) -> Option<OsString>,
) -> Result<Config, StoreError> {
    let mut config = Config::from_str(url).map_err(|e| StoreError::Connect {
        url: shown.to_string(),
        detail: format!("{e}: write it as postgres://USER@HOST[:PORT]/DB"),
    })?;
    let env = |k: &str| {
        var(k)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.is_empty())
    };
    if config.get_user().is_none() {
        if let Some(u) = env("PGUSER").or_else(|| env("USER")) {
            config.user(&u);
        }
    }
    if config.get_hosts().is_empty() {
        config.host("localhost");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    config.application_name("virtperf");
    if config.get_password().is_none() {
        if let Some(p) = env("PGPASSWORD") {
            config.password(p);
        } else {
            let file = var("PGPASSFILE")
                .map(PathBuf::from)
                .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".pgpass")));
            if let Some(p) = file.and_then(|f| std::fs::read_to_string(f).ok()) {
                if let Some(pw) = pgpass_lookup(&p, &config) {
                    config.password(pw);
                }
            }
        }
    }
    Ok(config)
}

/// The password `~/.pgpass` gives for `config`'s first host, port, database and user.
pub(crate) fn pgpass_lookup(text: &str, config: &Config) -> Option<String> {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        // libpq matches a socket directory against `localhost` too.
        _ => "localhost".to_string(),
    };
    let port = config
        .get_ports()
        .first()
        .copied()
        .unwrap_or(5432)
        .to_string();
    let user = config.get_user().unwrap_or_default();
    let db = config.get_dbname().unwrap_or(user);
    pgpass_find(text, [host.as_str(), &port, db, user])
}

/// The first line of a password file whose four fields match `want` (`*` matches
/// anything). Hand-written: the format is five colon-separated fields with `\:` and `\\`
/// escapes, and no maintained crate reads it for the synchronous client.
pub(crate) fn pgpass_find(text: &str, want: [&str; 4]) -> Option<String> {
    for line in text.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let mut fields = Vec::new();
        let mut cur = String::new();
        let mut chars = line.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => cur.extend(chars.next()),
                ':' if fields.len() < 4 => fields.push(std::mem::take(&mut cur)),
                c => cur.push(c),
            }
        }
        fields.push(cur);
        if fields.len() != 5 {
            continue;
        }
        if fields[..4]
            .iter()
            .zip(want)
            .all(|(f, w)| f == "*" || f == w)
        {
            return fields.pop();
        }
    }
    None
}
