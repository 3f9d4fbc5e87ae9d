//! A private agent on loopback for workloads run without `--host`.
//!
//! It is a child process, not threads in ours, so that client and server are two processes
//! as with netperf/netserver (two address spaces: a context switch between them costs what
//! it costs in real deployments). Contract with the `serve` subcommand: with `--announce` it
//! prints `listening on ADDR` as its first stdout line; with `--exit-on-eof` it exits when
//! its stdin closes, so it never outlives us even if we are killed.

use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

use std::sync::mpsc;
use std::time::Duration;
use virtperf_machine::children::Tracked;

use anyhow::{anyhow, Context, Result};
use virtperf_wire::TestResult;

use virtperf_lab::plan::{Plan, ProgressFn, Target};

/// A running local agent; killed (by its PID, which we started) and reaped when dropped.
pub struct LocalAgent {
    child: Tracked,
    /// Its control address.
    pub addr: SocketAddr,
    /// The random token it requires.
    pub token: String,
}

impl LocalAgent {
    /// Starts `virtperf serve` on 127.0.0.1 with a free port and a random token.
    pub fn start() -> Result<LocalAgent> {
        Self::start_at(None, std::net::IpAddr::from([127, 0, 0, 1]))
    }

    /// Starts the agent bound to `bind`, inside network namespace `ns` when given (through
    /// `ip netns exec`, which execs the agent: the PID we hold is the agent's own).
    pub fn start_at(ns: Option<&str>, bind: std::net::IpAddr) -> Result<LocalAgent> {
        Self::spawn(ns, bind, None)
    }

    /// Starts the agent on loopback for a process that holds the machine lock without
    /// having put its nonce in its own environment (an agent running a battery): the child
    /// gets the nonce, so its tests do not wait for the lock their parent holds for them.
    pub fn start_holding(lock: Option<&str>) -> Result<LocalAgent> {
        Self::spawn(None, std::net::IpAddr::from([127, 0, 0, 1]), lock)
    }

    fn spawn(ns: Option<&str>, bind: std::net::IpAddr, lock: Option<&str>) -> Result<LocalAgent> {
        let exe = std::env::current_exe().context("finding our own executable")?;
        let token = random_token()?;
        let mut cmd = match ns {
            Some(ns) => in_namespace(ns, &exe),
            None => Command::new(&exe),
        };
        let bind = bind.to_string();
        cmd.args([
            "serve",
            "--bind",
            &bind,
            "--port",
            "0",
            "--announce",
            "--exit-on-eof",
            "--quiet",
        ])
        // In the environment, not on the command line: any local user can read another
        // process's arguments (`ps`), but not its environment.
        .env(TOKEN_ENV, &token)
        .envs(lock.map(|n| (virtperf_machine::lock::INHERIT_ENV, n)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Its own process group: Ctrl-C at the terminal reaches only us, so an experiment
        // can finish its current trial and restore knobs before the agent goes away.
        .process_group(0);
        let mut child =
            Tracked::spawn(&mut cmd, "local agent").context("starting a local agent")?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("local agent has no stdout"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let mut r = BufReader::new(stdout);
            let res = r.read_line(&mut line).map(|_| line);
            let _ = tx.send(res);
            // Keep draining so the agent never blocks on a full pipe.
            let mut sink = Vec::new();
            let _ = r.read_to_end(&mut sink);
        });
        let mut agent = LocalAgent {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            token,
        };
        let line = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(Ok(l)) => l,
            Ok(Err(e)) => return Err(anyhow!("local agent failed to start: {e}")),
            Err(_) => return Err(anyhow!("local agent did not announce its port within 10 s")),
        };
        agent.addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .ok_or_else(|| anyhow!("local agent failed to start (said {:?})", line.trim()))?;
        Ok(agent)
    }

    /// Where clients reach it, with its token.
    pub fn target(&self) -> Target {
        Target::at(self.addr, &self.token)
    }

    /// PID of the agent process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

// Dropping `child` kills and reaps the agent (unless a termination handler reaped it).

/// The environment variable `serve` and the clients read a token from.
pub const TOKEN_ENV: &str = "VIRTPERF_TOKEN";

/// A random 128-bit token in hex, for private agents.
pub(crate) fn random_token() -> Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .context("reading /dev/urandom for a token")?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// `--placement local`: both ends on this host's loopback, against a private agent.
pub struct LocalSite {
    agent: LocalAgent,
}

impl LocalSite {
    /// Starts the private agent.
    pub fn open() -> Result<LocalSite> {
        Self::open_holding(None)
    }

    /// Starts the private agent on loopback address `ip` (`::1` for `-6`).
    pub fn open_at(ip: std::net::IpAddr) -> Result<LocalSite> {
        Ok(LocalSite {
            agent: LocalAgent::start_at(None, ip)?,
        })
    }

    /// Starts the private agent for a holder of the machine lock whose nonce is not in its
    /// environment (see [`LocalAgent::start_holding`]).
    pub fn open_holding(lock: Option<&str>) -> Result<LocalSite> {
        Ok(LocalSite {
            agent: LocalAgent::start_holding(lock)?,
        })
    }
}

impl super::Site for LocalSite {
    fn target(&self) -> Target {
        self.agent.target()
    }

    fn run(&self, plan: &Plan, progress: ProgressFn) -> Result<TestResult> {
        virtperf_lab::client::run(&self.agent.target(), plan, progress)
    }
}

/// A command run inside network namespace `ns` (`ip netns exec`): the agent of a netns
/// site, QEMU of a guest site.
pub fn in_namespace(ns: &str, program: &std::path::Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(program);
    c
}
