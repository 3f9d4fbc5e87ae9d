//! A real PostgreSQL server for tests: `initdb` into a temporary directory and `pg_ctl
//! start` on a private port (loopback only, or also a test namespace's address with
//! [`PgServer::start_in`]) and socket directory, as the unprivileged
//! `nobody` when the tests run as root, torn down when dropped (a panic included) and, by a
//! watchdog, when the test process dies without unwinding.
//!
//! Shared by the store's and the CLI's tests (`#[path]`); a test whose machine has no
//! PostgreSQL prints why and skips.

#![allow(dead_code)]

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The password of the server's superuser `virtperf` (connections over TCP need it).
pub const PASSWORD: &str = "vp-test-pw";

/// uid and gid of `nobody`/`nogroup` on Debian, which the server runs as under root.
const NOBODY: u32 = 65534;

pub struct PgServer {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    as_root: bool,
    watchdog: Option<std::process::Child>,
    /// The network namespace the server runs in (`None`: the test's own).
    netns: Option<String>,
    /// `listen_addresses`.
    listen: String,
}

/// The newest installed PostgreSQL's programs (Debian keeps them out of PATH).
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let b = e.path().join("bin");
            b.join("initdb").exists().then_some((v, b))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

impl PgServer {
    /// Starts a fresh server, or says why it cannot (then the test skips).
    pub fn start() -> Result<PgServer, String> {
        Self::start_with(None, "127.0.0.1", None)
    }

    /// [`PgServer::start`], or None (a printed skip, a failure where CI requires
    /// `postgresql`) where PostgreSQL is not installed.
    ///
    /// # Panics
    /// When PostgreSQL is installed and does not start: a failure, not a skip (a broken
    /// server must not turn the tests that need it into passes).
    pub fn start_or_skip() -> Option<PgServer> {
        Self::installed_or_skip()?;
        Some(Self::start().unwrap_or_else(|e| panic!("PostgreSQL is installed but: {e}")))
    }

    /// [`PgServer::start_in`] as [`PgServer::start_or_skip`] does it.
    pub fn start_in_or_skip(netns: &str, addr: &str, subnet: &str) -> Option<PgServer> {
        Self::installed_or_skip()?;
        Some(
            Self::start_in(netns, addr, subnet)
                .unwrap_or_else(|e| panic!("PostgreSQL is installed but: {e}")),
        )
    }

    fn installed_or_skip() -> Option<()> {
        if bin_dir().is_none() {
            virtperf_testkit::skip(
                "postgresql",
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)",
            );
            return None;
        }
        Some(())
    }

    /// Starts a fresh server inside network namespace `netns` (which the test made),
    /// listening on its loopback and on `addr`, admitting password logins from `subnet`.
    pub fn start_in(netns: &str, addr: &str, subnet: &str) -> Result<PgServer, String> {
        Self::start_with(Some(netns), &format!("127.0.0.1,{addr}"), Some(subnet))
    }

    fn start_with(
        netns: Option<&str>,
        listen: &str,
        subnet: Option<&str>,
    ) -> Result<PgServer, String> {
        static N: AtomicU32 = AtomicU32::new(0);
        let bin = bin_dir().ok_or(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb; apt-get install postgresql)",
        )?;
        let as_root = std::fs::metadata("/proc/self")
            .is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0);
        let dir = std::env::temp_dir().join(format!(
            "vp-pg-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::write(dir.join("pw"), PASSWORD).map_err(|e| e.to_string())?;
        if as_root {
            for p in [dir.clone(), dir.join("pw")] {
                std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY))
                    .map_err(|e| format!("cannot hand {} to nobody: {e}", p.display()))?;
            }
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| e.to_string())?;
        }
        let mut server = PgServer {
            dir,
            bin,
            port: 0,
            as_root,
            watchdog: None,
            netns: netns.map(str::to_string),
            listen: listen.to_string(),
        };
        // A watchdog for the cases Drop never sees (SIGKILL, abort): once this process is
        // gone, stop the server and remove its directory.
        server.watchdog = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop}; rm -rf '{dir}'",
                pid = std::process::id(),
                stop = server.pg_ctl_line("stop -m immediate"),
                dir = server.dir.display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .ok();
        let data = server.dir.join("data");
        let out = server
            .as_owner(&server.bin.join("initdb"))
            .arg("-D")
            .arg(&data)
            .args(["-U", "virtperf", "-E", "UTF8", "--no-sync"])
            .args(["--auth-local=trust", "--auth-host=scram-sha-256"])
            .arg(format!("--pwfile={}", server.dir.join("pw").display()))
            .output()
            .map_err(|e| format!("cannot run initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        if let Some(net) = subnet {
            let hba = data.join("pg_hba.conf");
            let mut text = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
            text.push_str(&format!("host all all {net} scram-sha-256\n"));
            std::fs::write(&hba, text).map_err(|e| e.to_string())?;
        }
        server.boot()?;
        Ok(server)
    }

    /// A command run as the data directory's owner (`nobody` under root).
    fn as_owner(&self, program: &Path) -> Command {
        let mut c = if let Some(ns) = &self.netns {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]);
            if self.as_root {
                c.args([
                    "setpriv",
                    "--reuid=65534",
                    "--regid=65534",
                    "--clear-groups",
                    "--reset-env",
                ]);
            }
            c.arg(program);
            c
        } else if self.as_root {
            let mut c = Command::new("setpriv");
            c.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--reset-env",
            ])
            .arg(program);
            c
        } else {
            Command::new(program)
        };
        c.stdin(Stdio::null());
        c
    }

    fn pg_ctl_line(&self, what: &str) -> String {
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.dir.join("data");
        let ns = self
            .netns
            .as_ref()
            .map(|n| format!("ip netns exec {n} "))
            .unwrap_or_default();
        let prefix = if self.as_root {
            "setpriv --reuid=65534 --regid=65534 --clear-groups "
        } else {
            ""
        };
        format!(
            "{ns}{prefix}{} -D '{}' -w {what} >/dev/null 2>&1",
            pg_ctl.display(),
            data.display()
        )
    }

    /// Starts (or restarts) the server on a new free port.
    pub fn boot(&mut self) -> Result<(), String> {
        let port = if self.port == 0 {
            free_port()
        } else {
            self.port
        };
        let out = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .arg("-w")
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} -c listen_addresses={} -c fsync=off -c max_connections=40",
                self.dir.display(),
                self.listen
            ))
            .arg("start")
            .output()
            .map_err(|e| format!("cannot run pg_ctl: {e}"))?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            return Err(format!("pg_ctl start failed: {log}"));
        }
        self.port = port;
        Ok(())
    }

    /// Stops the server at once, as a crash or a cut network would look to a client.
    pub fn stop(&self) {
        let _ = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-w", "-m", "immediate", "stop"])
            .output();
    }

    /// Creates database `name` and returns its URL (without the password: tests give it
    /// through PGPASSWORD or the URL, as they need).
    pub fn create_db(&self, name: &str) -> String {
        // Through the UNIX socket (trusted): it reaches a server in any network namespace.
        let out = Command::new(self.bin.join("createdb"))
            .arg("-h")
            .arg(&self.dir)
            .args(["-U", "virtperf"])
            .args(["-p", &self.port.to_string(), name])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .expect("createdb runs");
        assert!(
            out.status.success(),
            "createdb {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(name)
    }

    /// Creates a superuser role `name` that logs in with `password`: a test whose check
    /// looks for its own secret in other processes' command lines needs a password no
    /// other test running beside it uses (they all log in as `virtperf` with [`PASSWORD`]).
    pub fn create_role(&self, name: &str, password: &str) {
        // Through the UNIX socket (trusted), as `create_db`; the statement on standard
        // input, so the password shows in no command line.
        let mut child = Command::new(self.bin.join("psql"))
            .arg("-h")
            .arg(&self.dir)
            .args(["-U", "virtperf", "-p", &self.port.to_string()])
            .args(["-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("psql runs");
        let sql = format!("CREATE ROLE \"{name}\" LOGIN SUPERUSER PASSWORD '{password}';\n");
        if let Some(mut input) = child.stdin.take() {
            std::io::Write::write_all(&mut input, sql.as_bytes())
                .expect("psql takes the statement");
        }
        let out = child.wait_with_output().expect("psql ends");
        assert!(
            out.status.success(),
            "creating role {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The URL of database `name` with the password in it.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://virtperf:{PASSWORD}@127.0.0.1:{}/{name}",
            self.port
        )
    }

    /// The URL of database `name` without a password.
    pub fn bare_url(&self, name: &str) -> String {
        format!("postgres://virtperf@127.0.0.1:{}/{name}", self.port)
    }

    /// Turns on TLS with this certificate chain and key (PEM) and restarts the server on
    /// the same port; with `hostssl_only`, pg_hba.conf then admits TCP clients only over TLS.
    pub fn enable_tls(
        &mut self,
        cert_pem: &str,
        key_pem: &str,
        hostssl_only: bool,
    ) -> Result<(), String> {
        let data = self.dir.join("data");
        // The server refuses a key others can read: 0600, owned by the server's user.
        for (name, text) in [("server.crt", cert_pem), ("server.key", key_pem)] {
            let p = data.join(name);
            std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
            if self.as_root {
                std::os::unix::fs::chown(&p, Some(NOBODY), Some(NOBODY))
                    .map_err(|e| format!("cannot hand {} to nobody: {e}", p.display()))?;
            }
        }
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).map_err(|e| e.to_string())?;
        text.push_str("\nssl = on\n");
        std::fs::write(&conf, text).map_err(|e| e.to_string())?;
        if hostssl_only {
            let hba = data.join("pg_hba.conf");
            let text = std::fs::read_to_string(&hba).map_err(|e| e.to_string())?;
            let text: String = text
                .lines()
                .map(|l| match l.strip_prefix("host ") {
                    Some(rest) => format!("hostssl {rest}\n"),
                    None => format!("{l}\n"),
                })
                .collect();
            std::fs::write(&hba, text).map_err(|e| e.to_string())?;
        }
        self.stop();
        self.boot()
    }

    /// The directory of the server's UNIX socket (local connections are trusted: no
    /// password, no TLS).
    pub fn socket_dir(&self) -> &Path {
        &self.dir
    }

    /// A scratch directory beside the server's, removed with it.
    pub fn scratch(&self) -> PathBuf {
        let d = self.dir.join("scratch");
        std::fs::create_dir_all(&d).expect("scratch dir");
        d
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(mut w) = self.watchdog.take() {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

/// Starts a server, or skips the calling test where PostgreSQL is not installed.
#[macro_export]
macro_rules! pg_or_skip {
    () => {
        match $crate::pgserver::PgServer::start_or_skip() {
            Some(s) => s,
            None => return,
        }
    };
}
