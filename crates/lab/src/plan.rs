//! What to run (a [`Plan`]) and against which agent (a [`Target`]): the vocabulary shared by
//! the client half, the placements that run it and the experiment runner. In a module of
//! its own so that those, and `assemble`, depend on it rather than on each other.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use virtperf_load::sock::cpu_allowed;
use virtperf_wire::{Interval, SockOpts, Workload, MAX_DURATION_MS};

/// Where the agent is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or address.
    pub host: String,
    /// Control port.
    pub port: u16,
    /// Token the agent requires, if any.
    pub token: Option<String>,
    /// The id of a hold this client has on the agent's machine ([`crate::client::Hold`]),
    /// presented in the hello instead of the lock this process inherited: the test then
    /// runs beside the client's other tests there instead of waiting for them.
    pub lock: Option<String>,
}

impl Target {
    /// The agent listening at `addr` that requires `token` (one virtperf started).
    pub fn at(addr: std::net::SocketAddr, token: &str) -> Target {
        Target {
            host: addr.ip().to_string(),
            port: addr.port(),
            token: Some(token.to_string()),
            lock: None,
        }
    }
}

pub use virtperf_wire::Family;

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
    /// Count tracepoints on the test's CPUs over the measured interval (`--trace`).
    pub trace: bool,
    /// With `trace`: count every tracepoint virtperf knows, not only the exit causes
    /// (`--trace-all`; costs more per transaction).
    pub trace_all: bool,
    /// After the test, a separate short trial sampling tracepoints with timestamps: the
    /// critical path of its transactions (`--timeline`; rr with two pinned CPUs).
    pub timeline: bool,
    /// Record a time series with intervals this long (`--interval`; stream, bulk, rr, crr).
    pub interval: Option<Duration>,
    /// Called on the client with each interval as it ends (live output).
    pub on_interval: Option<IntervalSink>,
    /// Called on the client as the measured interval opens (`true`) and ends (`false`):
    /// counters the caller keeps (the host's, around a guest) count over it exactly.
    pub on_window: Option<WindowSink>,
    /// Raised to end the measured interval early (a signal asked the command to stop): the
    /// test then stops as it does at its planned end, and its result covers what ran.
    pub cut: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
    /// Only this address family for the agent's address (`-4`/`-6`); any when `None`.
    pub family: Option<Family>,
    /// Run this long before the measured interval, unmeasured (`--omit`, iperf3's `-O`):
    /// timed workloads only; None: measure from the start.
    pub omit: Option<Duration>,
}

/// What is told of each interval as it ends (the CLI prints it).
#[derive(Clone)]
pub struct IntervalSink(pub std::sync::Arc<dyn Fn(&Interval) + Send + Sync>);

impl std::fmt::Debug for IntervalSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IntervalSink")
    }
}

/// What is told as the measured interval opens (`true`) and ends (`false`).
#[derive(Clone)]
pub struct WindowSink(pub std::sync::Arc<dyn Fn(bool) + Send + Sync>);

impl std::fmt::Debug for WindowSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WindowSink")
    }
}

/// Shortest interval accepted: shorter ones measure the scheduler's wake-ups of the
/// sampling thread more than the traffic.
pub const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// Checks an interval length on its own (the CLI's and the spec's parsers call it; the
/// plan checks it against the duration).
pub fn check_interval(d: Duration) -> std::result::Result<(), String> {
    if d < MIN_INTERVAL {
        return Err(format!(
            "interval {} is too short: give at least 100ms",
            humantime::format_duration(d)
        ));
    }
    if d.as_millis() > u128::from(MAX_DURATION_MS) {
        return Err("interval must be at most 24h".into());
    }
    Ok(())
}

impl Plan {
    /// `workload` for `duration`, unpinned, one download (http), default socket options,
    /// and nothing extra (no capture, counters, timeline or intervals): change what a
    /// caller needs with struct update syntax, `Plan { count: 5, ..Plan::new(w, d) }`.
    pub fn new(workload: Workload, duration: Duration) -> Plan {
        Plan {
            workload,
            duration,
            client_cpu: None,
            server_cpu: None,
            count: 1,
            sock: Default::default(),
            capture: None,
            kvm_stats: false,
            trace: false,
            trace_all: false,
            timeline: false,
            interval: None,
            on_interval: None,
            on_window: None,
            cut: None,
            family: None,
            omit: None,
        }
    }

    /// The plan as it travels to an agent that drives the test (`Drive`): every field is
    /// named here (no `..`), so a field added to `Plan` does not compile until it is carried
    /// or refused. `capture` is refused (the driving machine would write the file; an agent
    /// never writes where a peer names); `kvm_stats` stays with the caller, which reads the
    /// host's counters around the drive ([`crate::client::drive`]); the hooks call back into
    /// this process and stay with it.
    pub fn to_wire(&self) -> Result<virtperf_wire::DrivePlan> {
        let Plan {
            workload,
            duration,
            client_cpu,
            server_cpu,
            count,
            sock,
            capture,
            kvm_stats: _,
            trace,
            trace_all,
            timeline,
            interval,
            on_interval: _,
            on_window: _,
            cut: _,
            family,
            omit,
        } = self;
        if capture.is_some() {
            bail!("--capture is not carried to a guest that drives the test (the pcap would be written inside the guest): drop it, or let this process be the client (direction host-guest, placement `guest`)");
        }
        Ok(virtperf_wire::DrivePlan {
            workload: workload.clone(),
            duration_ms: if workload.is_timed() {
                duration.as_millis() as u64
            } else {
                0
            },
            client_cpu: *client_cpu,
            server_cpu: *server_cpu,
            count: *count,
            sock: *sock,
            interval_ms: interval.map(|d| d.as_millis() as u64),
            trace: *trace,
            trace_all: *trace_all,
            timeline: *timeline,
            family: *family,
            omit_ms: omit.map(|d| d.as_millis() as u64),
        })
    }

    /// The plan a `Drive` carried, as the driving agent runs it.
    pub fn from_wire(p: virtperf_wire::DrivePlan) -> Plan {
        let virtperf_wire::DrivePlan {
            workload,
            duration_ms,
            client_cpu,
            server_cpu,
            count,
            sock,
            interval_ms,
            trace,
            trace_all,
            timeline,
            family,
            omit_ms,
        } = p;
        Plan {
            client_cpu,
            server_cpu,
            count,
            sock,
            // Checked with the rest of the plan by client::run (plan.validate).
            interval: interval_ms.map(Duration::from_millis),
            trace,
            trace_all,
            timeline,
            family,
            omit: omit_ms.map(Duration::from_millis),
            ..Plan::new(workload, Duration::from_millis(duration_ms))
        }
    }

    /// Checks parameters that can be checked before contacting anyone.
    pub fn validate(&self) -> Result<()> {
        self.workload.validate().map_err(|e| anyhow!(e))?;
        self.sock.validate().map_err(|e| anyhow!(e))?;
        if !self.workload.protocol().is_tcp() {
            let o = &self.sock;
            let tcp_only = [
                ("--congestion", o.congestion.is_some()),
                ("--mss", o.mss.is_some()),
                ("--nodelay", o.nodelay.is_some()),
                ("--mptcp", o.mptcp.is_some()),
            ];
            if let Some((flag, _)) = tcp_only.iter().find(|(_, set)| *set) {
                bail!("{flag} is a TCP option: drop it with --protocol udp (buffers, --tos and --busy-poll apply to UDP too)");
            }
        }
        if self.sock.mptcp == Some(true) {
            if !self.workload.kind().takes_mptcp() {
                bail!("--mptcp applies to TCP rr, stream and bulk (crr and http open connections of their own)");
            }
            virtperf_load::sock::mptcp_available().map_err(|e| anyhow!(e))?;
        }
        // Before any lock is waited for or agent started: a test this process cannot
        // open the sockets for fails now, in one line.
        crate::fds::make_room(&self.workload, "this process").map_err(|e| anyhow!(e))?;
        // The capture filter and `virtperf pcap` follow TCP connections only: a UDP test's
        // file would hold its set-up and none of its datagrams.
        if self.capture.is_some() && !self.workload.kind().takes_capture() {
            bail!("--capture records TCP tests (virtperf pcap analyzes TCP): drop it, or run tcpdump yourself for UDP");
        }
        if self.workload.is_timed() {
            crate::parse::check_test_duration(self.duration)
                .map_err(|e| anyhow!("--duration: {e}"))?;
        }
        if let Some(o) = self.omit {
            check_omit(&self.workload, o, self.duration).map_err(|e| anyhow!(e))?;
        }
        if let Some(i) = self.interval {
            if !self.workload.kind().takes_interval() {
                bail!("--interval applies to stream, bulk, rr and crr");
            }
            check_interval(i).map_err(|e| anyhow!("--{e}"))?;
            if self.workload.is_timed() && i > self.duration {
                bail!(
                    "--interval {} is longer than the test ({}): give a shorter interval or a longer --duration",
                    humantime::format_duration(i),
                    humantime::format_duration(self.duration)
                );
            }
        }
        if self.timeline {
            let two = matches!((self.client_cpu, self.server_cpu), (Some(a), Some(b)) if a != b);
            if !matches!(
                self.workload,
                Workload::Rr(virtperf_wire::RrParams { flows: 1, .. })
            ) || !two
            {
                bail!("--timeline follows one rr flow between two pinned CPUs: add --cpus A,B (two different CPUs) to a single-flow rr");
            }
        }
        if let Some(cpu) = self.client_cpu {
            if !cpu_allowed(cpu) {
                bail!("client CPU {cpu} does not exist or is not allowed here (see `nproc`)");
            }
        }
        if self.workload.kind().counted() && !(1..=10_000).contains(&self.count) {
            bail!("--count must be between 1 and 10000");
        }
        Ok(())
    }
}

impl Plan {
    /// Where the agent runs on this machine too (a private local agent): its CPU is
    /// checked here before anything starts, as the client's is (a server CPU that does not
    /// exist was the agent's refusal, exit 1, after it had started).
    pub fn validate_local_server(&self) -> Result<()> {
        if let Some(cpu) = self.server_cpu.filter(|c| !cpu_allowed(*c)) {
            bail!("server CPU {cpu} does not exist or is not allowed here (see `nproc`)");
        }
        Ok(())
    }
}

/// Checks a warm-up (`--omit`) for `workload` measured for `duration`: a timed workload
/// (a byte count has no time to leave out), at most [`crate::parse::MAX_OMIT`], and with
/// the measured duration not past the test length limit.
pub fn check_omit(workload: &Workload, omit: Duration, duration: Duration) -> Result<(), String> {
    if !workload.is_timed() {
        return Err(format!(
            "--omit applies to timed workloads (rr, crr, stream, unix-rr); {} moves a fixed amount and has no time to leave out",
            workload.name()
        ));
    }
    if omit > crate::parse::MAX_OMIT {
        return Err(format!(
            "--omit {} is longer than the 1h a warm-up may take: give a shorter one",
            humantime::format_duration(omit)
        ));
    }
    if (omit + duration).as_millis() > u128::from(MAX_DURATION_MS) {
        return Err("--omit and --duration together exceed 24h: shorten one".into());
    }
    Ok(())
}

/// Progress of a running test: fraction done (0..=1) when known, else `None`.
pub type ProgressFn<'a> = &'a dyn Fn(Option<f64>);

#[cfg(test)]
mod tests {
    use super::*;

    /// A plan a program built obeys the duration rule a flag and a spec key obey: one
    /// rule (`parse::check_test_duration`), not two (it used to take 5 ms here and refuse
    /// it on the command line).
    #[test]
    fn a_built_plan_obeys_the_flags_duration_rule() {
        let short = Plan::new(Workload::rr(1, 1), Duration::from_millis(5));
        let e = short.validate().expect_err("5 ms accepted");
        let flag = crate::parse::test_duration("5ms").expect_err("5 ms accepted as a flag");
        assert!(format!("{e:#}").contains("at least 10 ms"), "{e:#}");
        assert!(format!("{flag:#}").contains("at least 10 ms"), "{flag:#}");
        let long = Plan::new(Workload::rr(1, 1), Duration::from_secs(25 * 3600));
        assert!(format!("{:#}", long.validate().expect_err("25 h accepted")).contains("24h"));
        // Byte-count workloads have no duration to check.
        let bulk: Workload =
            serde_json::from_str(r#"{"kind":"bulk","bytes":10,"send_size":10,"reverse":false}"#)
                .expect("bulk");
        assert!(Plan::new(bulk, Duration::ZERO).validate().is_ok());
    }
}
