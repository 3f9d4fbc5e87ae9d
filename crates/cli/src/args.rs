//! Command-line definitions and value parsers. Parsers return one-line messages that say
//! what was wrong and what a good value looks like.

use std::net::IpAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// virtperf: how much slower is networking and message passing inside a VM than on the
/// host, and why.
#[derive(Debug, Parser)]
#[command(name = "virtperf", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent (server half of every workload)
    Serve(ServeArgs),
    /// Print the environment fingerprint (kernel, CPU, hypervisor, clock, idle path, sysctls)
    Env(EnvArgs),
    /// Request/response latency and rate over one connection (netperf TCP_RR)
    Rr(RrArgs),
    /// Connect/request/response: a new connection per transaction (netperf TCP_CRR)
    Crr(RrArgs),
    /// Bulk streaming throughput, parallel flows, either direction (netperf TCP_STREAM, iperf3)
    Stream(StreamArgs),
    /// Time to move a fixed number of bytes over one connection
    Bulk(BulkArgs),
    /// Time HTTP/1.1 downloads of an N-byte body (from the agent, or any --url)
    Http(HttpArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (loopback by default; the agent generates load only towards
    /// clients that connect to it)
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: IpAddr,
    /// Control port (0 picks a free port)
    #[arg(long, default_value_t = virtperf_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Require clients to present this token
    #[arg(long)]
    pub token: Option<String>,
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

/// Where the agent is; shared by every workload.
#[derive(Debug, Args, Clone)]
pub struct ConnArgs {
    /// Agent control port
    #[arg(long, default_value_t = virtperf_wire::DEFAULT_PORT)]
    pub port: u16,
    /// Token the agent was started with
    #[arg(long)]
    pub token: Option<String>,
}

/// Options every workload takes.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Agent host; without it a private agent is started on loopback and stopped afterwards
    #[arg(long, short = 'H')]
    pub host: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Pin client and server data threads: `C,S` (netperf -T), `N` for both, `C,` or `,S`
    #[arg(long, short = 'T', value_parser = parse_cpus, allow_hyphen_values = true)]
    pub cpus: Option<(Option<u32>, Option<u32>)>,
    /// Print the result as JSON (schema: docs/json.md)
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RrArgs {
    /// Request and response sizes in bytes: `REQ,RESP`, or one size for both
    #[arg(long, short = 'r', default_value = "1,1", value_parser = parse_size_pair, allow_hyphen_values = true)]
    pub size: (u32, u32),
    /// Measured duration (10s, 500ms, 1m; a bare number is seconds)
    #[arg(long, short = 'l', default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Bytes per send call (netperf -m)
    #[arg(long, short = 'm', default_value = "16384", value_parser = parse_size32, allow_hyphen_values = true)]
    pub send_size: u32,
    /// Parallel connections
    #[arg(long, short = 'P', default_value_t = 1, value_parser = parse_count)]
    pub flows: u32,
    /// Server sends, client receives
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Measured duration (10s, 500ms, 1m; a bare number is seconds)
    #[arg(long, short = 'l', default_value = "10s", value_parser = parse_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct BulkArgs {
    /// Bytes to move (1GiB, 100MB, 4096)
    #[arg(long, short = 'n', value_parser = parse_bytes, allow_hyphen_values = true)]
    pub bytes: u64,
    /// Bytes per send call
    #[arg(long, short = 'm', default_value = "128KiB", value_parser = parse_size32, allow_hyphen_values = true)]
    pub send_size: u32,
    /// Server sends, client receives
    #[arg(long, short = 'R')]
    pub reverse: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Body size the agent serves (100MB, 1GiB)
    #[arg(long, short = 'n', value_parser = parse_bytes, allow_hyphen_values = true, required_unless_present = "url")]
    pub bytes: Option<u64>,
    /// Number of downloads, one after another
    #[arg(long, short = 'c', default_value_t = 5, value_parser = parse_count)]
    pub count: u32,
    /// Download this URL instead of the agent's body (times any web server; http:// only)
    #[arg(long, conflicts_with_all = ["bytes", "host"])]
    pub url: Option<String>,
    #[command(flatten)]
    pub common: Common,
}

/// Parses a duration: humantime syntax (`10s`, `500ms`, `1m30s`) or bare seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let d = if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!("invalid duration {s:?}: must not be negative"));
        }
        Duration::from_secs_f64(secs)
    } else {
        humantime::parse_duration(t)
            .map_err(|e| format!("invalid duration {s:?}: {e} (examples: 10s, 500ms, 1m)"))?
    };
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be greater than 0"));
    }
    Ok(d)
}

/// Parses a byte count with an optional unit: `4096`, `64K`, `100MB` (10^6), `1GiB` (2^30).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("invalid size {s:?}: must be positive"));
    }
    let v = parse_size::parse_size(t)
        .map_err(|e| format!("invalid size {s:?}: {e} (examples: 1, 4096, 64KiB, 100MB, 1GiB)"))?;
    if v == 0 {
        return Err(format!("invalid size {s:?}: must be at least 1 byte"));
    }
    if v > virtperf_wire::MAX_TRANSFER {
        return Err(format!("invalid size {s:?}: at most 1 TiB"));
    }
    Ok(v)
}

/// Parses a per-message size (at most 64 MiB).
pub fn parse_size32(s: &str) -> Result<u32, String> {
    let v = parse_bytes(s)?;
    if v > u64::from(virtperf_wire::MAX_MESSAGE_SIZE) {
        return Err(format!(
            "invalid size {s:?}: at most {} bytes (64 MiB) per message",
            virtperf_wire::MAX_MESSAGE_SIZE
        ));
    }
    Ok(v as u32)
}

/// Parses `REQ,RESP` or a single size for both.
pub fn parse_size_pair(s: &str) -> Result<(u32, u32), String> {
    match s.split_once(',') {
        Some((a, b)) => Ok((parse_size32(a)?, parse_size32(b)?)),
        None => {
            let v = parse_size32(s)?;
            Ok((v, v))
        }
    }
}

/// Parses a positive count (flows, downloads).
pub fn parse_count(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid count {s:?}: expected a whole number like 1 or 4"))?;
    if v == 0 {
        return Err(format!("invalid count {s:?}: must be at least 1"));
    }
    Ok(v)
}

/// Parses netperf-style CPU pinning: `C,S`, `N` (both), `C,` (client only), `,S`.
pub fn parse_cpus(s: &str) -> Result<(Option<u32>, Option<u32>), String> {
    let one = |p: &str| -> Result<Option<u32>, String> {
        let p = p.trim();
        if p.is_empty() {
            return Ok(None);
        }
        p.parse::<u32>().map(Some).map_err(|_| {
            format!("invalid --cpus {s:?}: expected CPU numbers like 0,1 (client,server)")
        })
    };
    let r = match s.split_once(',') {
        Some((c, v)) => (one(c)?, one(v)?),
        None => {
            let v = one(s)?;
            (v, v)
        }
    };
    if r == (None, None) {
        return Err(format!("invalid --cpus {s:?}: name at least one CPU"));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(parse_duration("0").unwrap_err().contains("greater than 0"));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("-1").unwrap_err().contains("negative"));
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_bytes("100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size_pair("1,1").unwrap(), (1, 1));
        assert_eq!(parse_size_pair("64").unwrap(), (64, 64));
        assert_eq!(parse_size_pair("4K,1").unwrap(), (4000, 1));
        assert!(parse_size_pair("-1").unwrap_err().contains("positive"));
        assert!(parse_size_pair("0,1").unwrap_err().contains("at least 1"));
        assert!(parse_size32("1GiB").unwrap_err().contains("64 MiB"));
        assert!(parse_bytes("2TiB").unwrap_err().contains("1 TiB"));
        assert!(parse_bytes("lots").is_err());
    }

    #[test]
    fn cpus() {
        assert_eq!(parse_cpus("0,1").unwrap(), (Some(0), Some(1)));
        assert_eq!(parse_cpus("1").unwrap(), (Some(1), Some(1)));
        assert_eq!(parse_cpus("0,").unwrap(), (Some(0), None));
        assert_eq!(parse_cpus(",1").unwrap(), (None, Some(1)));
        assert!(parse_cpus(",").is_err());
        assert!(parse_cpus("a,b").is_err());
        assert!(parse_cpus("-1").is_err());
    }

    #[test]
    fn counts() {
        assert_eq!(parse_count("4").unwrap(), 4);
        assert!(parse_count("0").is_err());
        assert!(parse_count("-2").is_err());
    }
}
