//! `virtperf serve` and `virtperf env`: the agent, and this machine's fingerprint.

use std::io::Read;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::{anyhow, Result};
use clap::Args;
use virtperf_lab::agent::{self, AgentConfig};
use virtperf_lab::client;
use virtperf_lab::plan::Target;

use crate::args::ConnArgs;
use crate::render;
use virtperf_lab::parse::duration as parse_duration;

/// `virtperf serve`
pub fn serve(a: ServeArgs) -> Result<()> {
    let bind = if a.bind_ssh {
        // "client_ip client_port server_ip server_port": we want the server side.
        std::env::var("SSH_CONNECTION")
            .ok()
            .and_then(|v| v.split_whitespace().nth(2).and_then(|ip| ip.parse().ok()))
            .ok_or_else(|| anyhow!("--bind-ssh: $SSH_CONNECTION is not set or unreadable"))?
    } else {
        a.bind
    };
    // Read before the stdin watcher below starts: `--token-file -` takes stdin's first line.
    let token = a.token()?;
    // VIRTPERF_ALLOW_CONCURRENT=1 means for an agent what it means for a client: measure
    // beside other measurements (as many tests at once as --max-clients allows).
    let concurrent = a
        .concurrent
        .or(crate::machine::allow_concurrent_env().then_some(a.max_clients));
    let cfg = AgentConfig {
        bind,
        port: a.port,
        token,
        // With --concurrent N, N tests may run at once: at most N sessions.
        max_clients: concurrent.map_or(a.max_clients, |n| n.min(a.max_clients)) as usize,
        max_duration: a.max_duration,
        verbose: !a.quiet,
        allow_drive: a.allow_drive,
        concurrent: concurrent.map(|n| n as usize),
        max_flows: a.max_flows,
        max_threads: a.max_threads,
        data_ports: a.data_ports,
    };
    if let Some((first, last)) = a.data_ports {
        if (first..=last).contains(&a.port) {
            anyhow::bail!("the control port {} is inside --data-ports {first}-{last}: give a range that leaves it out", a.port);
        }
    }
    let listener = agent::bind(&cfg)?;
    let addr = listener.local_addr()?;
    if a.announce {
        println!("listening on {addr}");
    } else {
        eprintln!(
            "virtperf agent listening on {addr} (protocol v{})",
            virtperf_wire::PROTOCOL_VERSION
        );
    }
    if a.exit_on_eof {
        // Our parent holds our stdin; when it goes away, so do we.
        std::thread::spawn(|| {
            let mut sink = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut sink), Ok(n) if n > 0) {}
            // An agent running a battery has an agent of its own: it goes with us.
            virtperf_machine::children::reap_all(std::time::Duration::from_secs(2));
            std::process::exit(0);
        });
    }
    agent::serve(listener, cfg)
}

/// `virtperf env`
pub fn env(a: EnvArgs) -> Result<()> {
    let env = match a.host {
        Some(host) => client::remote_env(&Target {
            host,
            port: a.conn.port,
            token: a.conn.token()?,
            lock: None,
        })?,
        None => virtperf_measure::fingerprint(),
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&env)?);
    } else {
        print!("{}", render::env(&env));
    }
    Ok(())
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("serve_token").args(["token", "token_file"])))]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; the agent generates load only towards
    /// clients that connect to it)
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Control port (0 picks a free port)
    #[arg(long, default_value_t = virtperf_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Require clients to present this token (visible in `ps`: prefer --token-file or
    /// $VIRTPERF_TOKEN). The control channel is not encrypted (docs/security.md)
    #[arg(long, env = "VIRTPERF_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Read the token from the first line of FILE (`-`: of standard input)
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// Longest test a client may ask for (at most 24h)
    #[arg(long, default_value = "24h", value_parser = parse_max_duration, value_name = "DURATION")]
    pub max_duration: Duration,
    /// Most tests served at once
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_clients: u32,
    /// Print nothing per test
    #[arg(long)]
    pub quiet: bool,
    /// Print `listening on ADDR` as the first line of stdout (for scripts)
    #[arg(long, hide = true)]
    pub announce: bool,
    /// Exit when stdin closes (used by the private agent workloads start)
    #[arg(long, hide = true)]
    pub exit_on_eof: bool,
    /// Bind the address this SSH session arrived on ($SSH_CONNECTION; used by ssh: placements)
    #[arg(long, hide = true)]
    pub bind_ssh: bool,
    /// Accept requests to run the client half of a test against another agent (what the
    /// guest agent does for guest→host and guest↔guest placements); needs a token
    #[arg(long, requires = "serve_token")]
    pub allow_drive: bool,
    /// Serve up to N tests at once, beside other measurements on this machine (default:
    /// one test at a time, each holding the machine-wide measurement lock;
    /// $VIRTPERF_ALLOW_CONCURRENT=1 means --concurrent up to --max-clients)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub concurrent: Option<u32>,
    /// Most data connections (flows) one test may ask for
    #[arg(long, default_value_t = virtperf_lab::agent::DEFAULT_MAX_FLOWS, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_flows: u32,
    /// Most worker threads per side one test may ask for (--threads)
    #[arg(long, default_value_t = virtperf_lab::agent::DEFAULT_MAX_THREADS, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_threads: u32,
    /// Bind every data listener and UDP data socket in FIRST-LAST (e.g. 17151-17158), so
    /// forwarding the control port and this range through a NAT, a port forward or a
    /// security group is enough (clients connect data connections to the address they used
    /// for control). Each test takes one port of it while it runs (UDP: one per flow)
    #[arg(long, value_name = "FIRST-LAST", value_parser = virtperf_lab::parse::port_range)]
    pub data_ports: Option<(u16, u16)>,
}

impl ServeArgs {
    /// The token, from --token-file, --token or $VIRTPERF_TOKEN. An empty one is an error:
    /// it would start an agent without authentication while looking like one with it.
    pub fn token(&self) -> anyhow::Result<Option<String>> {
        if self.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
            anyhow::bail!(
                "--token (or $VIRTPERF_TOKEN) is empty: give a token, or leave the option out to run an agent without authentication on purpose (anyone who can reach its port can then run tests)"
            );
        }
        crate::args::resolve_token(&self.token, &self.token_file)
    }
}

fn parse_max_duration(s: &str) -> anyhow::Result<Duration> {
    let d = parse_duration(s)?;
    if d.is_zero() || d.as_millis() > u128::from(virtperf_wire::MAX_DURATION_MS) {
        anyhow::bail!("{s:?}: give a duration between 1ms and 24h");
    }
    Ok(d)
}

#[derive(Debug, Args)]
pub struct EnvArgs {
    /// Ask the agent at this host instead of describing this machine
    #[arg(long)]
    pub host: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
}
