//! What to run (a [`Plan`]) and against which agent (a [`Target`]): the vocabulary shared by
//! the client half, the placements that run it and the experiment runner. In a module of
//! its own so that those, and `assemble`, depend on it rather than on each other.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use virtperf_load::sock::cpu_allowed;
use virtperf_wire::{SockOpts, Workload, MAX_DURATION_MS};

/// Where the agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address.
    pub host: String,
    /// Control port.
    pub port: u16,
    /// Token the agent requires, if any.
    pub token: Option<String>,
}

impl Target {
    /// The agent listening at `addr` that requires `token` (one virtperf started).
    pub fn at(addr: std::net::SocketAddr, token: &str) -> Target {
        Target {
            host: addr.ip().to_string(),
            port: addr.port(),
            token: Some(token.to_string()),
        }
    }
}

/// What to run and how.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The workload.
    pub workload: Workload,
    /// Measured duration for timed workloads (ignored by bulk and http).
    pub duration: Duration,
    /// Pin the client's data threads here.
    pub client_cpu: Option<u32>,
    /// Pin the agent's data threads here.
    pub server_cpu: Option<u32>,
    /// Number of downloads (http only).
    pub count: u32,
    /// Socket options for the data connections, both ends.
    pub sock: SockOpts,
    /// Record the test's traffic to this pcap file (tcpdump).
    pub capture: Option<std::path::PathBuf>,
    /// Sample the host's KVM exit counters around the test.
    pub kvm_stats: bool,
}

impl Plan {
    /// Checks parameters that can be checked before contacting anyone.
    pub fn validate(&self) -> Result<()> {
        self.workload.validate().map_err(|e| anyhow!(e))?;
        if self.workload.is_timed() {
            if self.duration.is_zero() {
                bail!("--duration must be greater than 0 (e.g. 10s, 500ms)");
            }
            if self.duration.as_millis() > u128::from(MAX_DURATION_MS) {
                bail!("--duration must be at most 24h");
            }
        }
        if let Some(cpu) = self.client_cpu {
            if !cpu_allowed(cpu) {
                bail!("client CPU {cpu} does not exist or is not allowed here (see `nproc`)");
            }
        }
        if matches!(self.workload, Workload::Http { .. }) && !(1..=10_000).contains(&self.count) {
            bail!("--count must be between 1 and 10000");
        }
        Ok(())
    }
}

/// Progress of a running test: fraction done (0..=1) when known, else `None`.
pub type ProgressFn<'a> = &'a dyn Fn(Option<f64>);
