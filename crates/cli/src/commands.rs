//! One function per subcommand: turn arguments into a plan, run it, render the result.

use std::str::FromStr;
use std::time::Duration;
// A workload from the command line goes through the conversion a spec point goes through
// (`roles::build`), so a flag and a spec key mean the same.
use virtperf_lab::roles::{build, Params};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use virtperf_lab::client;
use virtperf_lab::plan::{Plan, Target};
use virtperf_place::remote::RemoteSite;
use virtperf_place::{Placement, Site};
use virtperf_wire::{RecvWait, TestResult, Workload};

use crate::args::ConnArgs;
use crate::progress::Progress;
use crate::render;

/// Checks `plan`, takes the machine lock and opens the site `--placement` (or `--host`)
/// names: what every workload command does before its test. The lock is held while the
/// returned guard lives.
pub(crate) fn open_site(
    common: &Common,
    plan: &Plan,
) -> Result<(virtperf_machine::lock::MachineLock, Box<dyn Site>)> {
    // Every value of the plan came from the command line: a value out of range is a usage
    // error (exit 2), like one clap's parsers caught.
    let local = common.placement == Placement::Local;
    plan.validate()
        .and_then(|()| {
            // The agent on this machine: loopback's private one or a namespace's.
            let here = matches!(common.placement, Placement::Local | Placement::Netns(..));
            match here && common.host.is_none() {
                true => plan.validate_local_server(),
                false => Ok(()),
            }
        })
        .map_err(|e| crate::signals::exit(crate::signals::code::USAGE, format!("{e:#}")))?;
    if !local && common.host.is_some() {
        bail!("--placement chooses the agent: drop --host");
    }
    // Refusals that need no lock come first: a user without root, or with a ring size QEMU
    // refuses, should not wait for another measurement to learn it.
    let placement = common.placement()?;
    placement.preflight(plan)?;
    // Held until this function returns: the whole test, set-up and teardown included.
    let machine = crate::machine::take(&common.lock)?;
    if common.placement.needs_root() {
        // SIGINT, SIGTERM or SIGHUP must not leave namespaces, taps or guests behind:
        // remove what this process made and exit the way a tool stopped by that signal does.
        crate::signals::remove_own_on_termination("")?;
    }
    let site: Box<dyn Site> = match &common.host {
        // An agent someone started, named the way results have always shown it: by target.
        Some(host) => Box::new(RemoteSite::new(
            Target {
                host: host.clone(),
                port: common.conn.port,
                token: common.conn.token()?,
                lock: None,
            },
            None,
        )),
        // -6 on loopback: the private agent listens on ::1.
        None if placement == Placement::Local
            && plan.family == Some(virtperf_lab::plan::Family::V6) =>
        {
            Box::new(virtperf_place::local::LocalSite::open_at(
                std::net::Ipv6Addr::LOCALHOST.into(),
            )?)
        }
        None => virtperf_place::open(&placement)?,
    };
    Ok((machine, site))
}

/// Runs a plan where `--placement` says (or against `--host`): opens that site, hands it the
/// plan, renders the result.
fn execute(common: &Common, mut plan: Plan) -> Result<()> {
    let local = common.placement == Placement::Local;
    let keeper = common.keep.open()?;
    let started_at = virtperf_store::now_rfc3339();
    let (_machine, site) = open_site(common, &plan)?;
    let watch = common
        .vm
        .as_ref()
        .map(virtperf_lab::host_vm::Watch::open)
        .transpose()?;
    if let Some(w) = &watch {
        w.attach(&mut plan);
    }
    if !common.placement.needs_root() {
        // Placements that made nothing to remove: a signal ends the measured interval
        // early, and what ran is printed and kept (namespace and guest placements have
        // their own handler, which removes what they made).
        plan.cut = Some(crate::signals::cut_on_termination()?);
    }
    // Live interval lines replace the progress bar (both would draw on stderr).
    let progress = Progress::new(
        plan.workload.name(),
        common.machine_readable() || plan.on_interval.is_some(),
    );
    let result = site.run(&plan, &|f| progress.update(f));
    drop(progress);
    drop(site);
    let result = result.map(|mut r| {
        if let Some(w) = &watch {
            let h = w.finish(Some(r.outcome.work()));
            virtperf_lab::assemble::attach_vm(&mut r, h);
        }
        r
    });
    conclude(
        common,
        result,
        keeper,
        started_at,
        local && common.host.is_none(),
    )
}

/// What every single workload does with its result: prints it (`--json`, `--json-stream`
/// or the table), stores it where asked (`--store`, `--db`, `--tag`: incomplete after a
/// signal), and exits 128 + N after a signal; a failure ends a JSON stream with its event.
/// `local`: both ends on this machine (the table says so).
fn conclude(
    common: &Common,
    result: Result<TestResult>,
    keeper: Option<crate::keep::Keeper>,
    started_at: String,
    local: bool,
) -> Result<()> {
    let mut result = match result {
        Ok(r) => r,
        Err(e) => {
            // Only where the user named the agent with --host is a local one the way out.
            let e = match format!("{e:#}") {
                m if common.host.is_some() && m.contains("cannot connect to the agent") => {
                    anyhow::anyhow!("{m}; or omit --host to start a local one")
                }
                _ => e,
            };
            // A stream of JSON lines ends with an event, whatever ended it: a signal that
            // left nothing to keep (it came before the interval, or the agent froze) is
            // still an interruption, with no data.
            if common.json_stream {
                let reason = if crate::signals::received() != 0 {
                    "interrupted"
                } else {
                    "error"
                };
                let end = serde_json::json!({"event": "end", "reason": reason, "error": format!("{e:#}")});
                println!("{end}");
            }
            return Err(e);
        }
    };
    let sig = crate::signals::received();
    if sig != 0 {
        // The client says whether the signal ended the measured interval: named here.
        let cut = result.warnings.iter().any(|w| w == virtperf_lab::CUT_SHORT);
        result.warnings.retain(|w| w != virtperf_lab::CUT_SHORT);
        result.warnings.push(if cut {
            format!(
                "interrupted by {}: the test was stopped early and its numbers cover the part that ran",
                crate::signals::name(sig)
            )
        } else {
            format!(
                "interrupted by {} after its measured interval had ended: its numbers cover all of it",
                crate::signals::name(sig)
            )
        });
    }
    output(&result, common, local, sig != 0)?;
    if let Some(k) = keeper {
        // Stored, shown and pushed to a team's store: never a password or a token.
        let status = if sig != 0 {
            virtperf_store::RunStatus::Incomplete
        } else {
            virtperf_store::RunStatus::Complete
        };
        let note = k.keep(
            &result,
            started_at,
            &virtperf_machine::command_line(),
            status,
        )?;
        if !common.machine_readable() {
            eprintln!("virtperf: {note}");
        }
    }
    if sig != 0 {
        return Err(crate::signals::exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {}: the part of the test that ran is printed{}",
                crate::signals::name(sig),
                if common.keep.wanted() {
                    " and stored as incomplete"
                } else {
                    ""
                }
            ),
        ));
    }
    Ok(())
}

fn output(r: &TestResult, common: &Common, local: bool, interrupted: bool) -> Result<()> {
    let mut r = r.clone();
    r.allow_concurrent |= crate::machine::concurrent();
    if common.json_stream {
        let mut end = serde_json::json!({"event": "end", "data": r});
        if interrupted {
            end["reason"] = "interrupted".into();
        }
        println!("{}", serde_json::to_string(&end)?);
    } else if common.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        print!("{}", virtperf_wire::printable(&render::result(&r, local)));
    }
    Ok(())
}

fn plan(common: &Common, workload: Workload, duration: Duration, count: u32) -> Plan {
    plan_every(common, workload, duration, count, None)
}

/// A plan with a time series every `interval`, printed live on stderr unless `--json`.
fn plan_every(
    common: &Common,
    workload: Workload,
    duration: Duration,
    count: u32,
    interval: Option<Duration>,
) -> Plan {
    let (client_cpu, server_cpu) = common.cpus.unwrap_or((None, None));
    let on_interval = match (interval.is_some(), common.json_stream, common.json) {
        (true, true, _) => Some(virtperf_lab::plan::IntervalSink(std::sync::Arc::new(
            |i: &virtperf_wire::Interval| {
                let line = serde_json::json!({"event": "interval", "data": i});
                println!("{line}");
            },
        ))),
        (true, false, false) => Some(virtperf_lab::plan::IntervalSink(std::sync::Arc::new(
            |i: &virtperf_wire::Interval| eprintln!("{}", render::interval_line(i)),
        ))),
        _ => None,
    };
    Plan {
        workload,
        duration,
        client_cpu,
        server_cpu,
        count,
        sock: common.sock.opts(),
        capture: common.capture.clone(),
        kvm_stats: common.kvm_stats,
        trace: common.trace || common.trace_all,
        trace_all: common.trace_all,
        timeline: common.timeline,
        interval,
        on_interval,
        on_window: None,
        cut: None,
        family: common.sock.family(),
        omit: common.omit.filter(|o| !o.is_zero()),
    }
}

fn parse_zerocopy(s: &str) -> Result<virtperf_wire::ZeroCopy, String> {
    virtperf_wire::ZeroCopy::parse(s)
}

/// The workload commands: one variant each, its arguments and its function below (adding
/// a workload adds its variant here; docs/adding-a-workload.md).
#[derive(Debug, clap::Subcommand)]
pub enum WorkloadCommand {
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
    /// Request/response over an AF_UNIX socket on one machine: rr without the TCP/IP stack
    #[command(name = "unix-rr")]
    UnixRr(UnixRrArgs),
}

impl WorkloadCommand {
    /// Runs the workload command.
    pub fn run(self) -> Result<()> {
        match self {
            WorkloadCommand::Rr(a) => rr(a),
            WorkloadCommand::Crr(a) => crr(a),
            WorkloadCommand::Stream(a) => stream(a),
            WorkloadCommand::Bulk(a) => bulk(a),
            WorkloadCommand::Http(a) => http(a),
            WorkloadCommand::UnixRr(a) => unix_rr(a),
        }
    }
}

/// `virtperf rr`
pub fn rr(a: RrArgs) -> Result<()> {
    let w = build::rr(&Params {
        size: a.size,
        wait: a.wait.unwrap_or_default(),
        gap_us: a.gap.map(|g| g.as_micros() as u64),
        rate_per_s: a.request_rate,
        flows: a.flows,
        threads: a.threads,
        protocol: a.protocol.unwrap_or_default(),
        loss_timeout_ms: a.loss_timeout.map(|d| d.as_millis().max(1) as u32),
        ..Params::default()
    });
    let plan = plan_every(&a.common, w, a.duration, 0, a.interval);
    match a.under_load {
        Some(load) => rr_under_load(&a.common, plan, load),
        None => execute(&a.common, plan),
    }
}

/// `rr --under-load`: the rr alone and beside bulk streams, interleaved, on one agent.
fn rr_under_load(common: &Common, plan: Plan, load: crate::under_load::UnderLoad) -> Result<()> {
    let usage =
        |e: anyhow::Error| crate::signals::exit(crate::signals::code::USAGE, format!("{e:#}"));
    if plan.interval.is_some() || common.json_stream {
        return Err(usage(anyhow::anyhow!(
            "--under-load reports whole trials: drop -i and --json-stream"
        )));
    }
    let stream = crate::under_load::stream_plan(&plan, load).map_err(usage)?;
    let (_machine, site) = open_site(common, &plan)?;
    // A signal lets the trial under way finish, then the completed pairs are reported
    // (namespace and guest placements keep their own handler, which removes what they made).
    let cut = if common.placement.needs_root() {
        None
    } else {
        Some(crate::signals::cut_on_termination()?)
    };
    crate::under_load::run(
        site.as_ref(),
        &plan,
        &stream,
        load,
        common.json,
        cut.as_deref(),
    )
}

/// `virtperf crr`
pub fn crr(a: RrArgs) -> Result<()> {
    if a.gap.is_some() || a.request_rate.is_some() || a.under_load.is_some() {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "--gap, --rate and --under-load apply to rr (crr connects for every transaction)",
        ));
    }
    if a.protocol.is_some_and(|p| !p.is_tcp()) || a.loss_timeout.is_some() {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "crr is TCP only (UDP has no connection to set up): use rr --protocol udp",
        ));
    }
    let w = build::crr(&Params {
        size: a.size,
        wait: a.wait.unwrap_or_default(),
        flows: a.flows,
        threads: a.threads,
        ..Params::default()
    });
    execute(
        &a.common,
        plan_every(&a.common, w, a.duration, 0, a.interval),
    )
}

/// `virtperf stream`
pub fn stream(a: StreamArgs) -> Result<()> {
    let protocol = a.protocol.unwrap_or_default();
    let w = build::stream(&Params {
        send: a
            .send_size
            .unwrap_or(if protocol.is_tcp() { 16384 } else { 1472 }),
        flows: a.flows,
        reverse: a.reverse,
        recv_size: a.recv_size,
        recv_wait: a.recv_wait,
        threads: a.threads,
        protocol,
        rate_bps: a.rate,
        gso: a.gso,
        gro: a.gro,
        bidir: a.bidir,
        zerocopy: a.zerocopy,
        buf_offset: a.buf_offset,
        ..Params::default()
    });
    execute(
        &a.common,
        plan_every(&a.common, w, a.duration, 0, a.interval),
    )
}

/// `virtperf bulk`
pub fn bulk(a: BulkArgs) -> Result<()> {
    let w = build::bulk(&Params {
        bytes: Some(a.bytes),
        send: a.send_size,
        reverse: a.reverse,
        ..Params::default()
    });
    execute(
        &a.common,
        plan_every(&a.common, w, Duration::ZERO, 0, a.interval),
    )
}

/// `virtperf http`
pub fn http(a: HttpArgs) -> Result<()> {
    if let Some(url) = &a.url {
        if a.common.cpus.is_some() {
            return Err(anyhow!(
                "--cpus cannot be used with --url (no agent to pin)"
            ));
        }
        // Stored, interrupted and printed as every workload is (--db, --tag and a signal
        // were ignored here: nothing stored, and a Ctrl-C lost the finished downloads).
        let keeper = a.common.keep.open()?;
        let started_at = virtperf_store::now_rfc3339();
        let cut = crate::signals::cut_on_termination()?;
        let progress = Progress::new("http", a.common.machine_readable());
        let limits = virtperf_lab::HttpLimits {
            max_bytes: a.max_size,
            max_time: a.max_time,
        };
        let sock = a.common.sock.opts();
        let r = client::run_url(
            url,
            a.count,
            &a.accept_status,
            limits,
            sock,
            Some(&cut),
            &|f| progress.update(f),
        );
        drop(progress);
        return conclude(&a.common, r, keeper, started_at, false);
    }
    let bytes = a
        .bytes
        .ok_or_else(|| anyhow!("--bytes is required (or give --url)"))?;
    let w = build::http(&Params {
        bytes: Some(bytes),
        ..Params::default()
    });
    execute(&a.common, plan(&a.common, w, Duration::ZERO, a.count))
}

// What each command here takes: its argument struct beside the function that runs it.

/// Options every workload takes.
#[derive(Debug, Args, Clone)]
pub struct Common {
    /// Agent host; without it a private agent is started on loopback and stopped afterwards
    #[arg(long, short = 'H')]
    pub host: Option<String>,
    #[command(flatten)]
    pub conn: ConnArgs,
    #[command(flatten)]
    pub sock: crate::args::SockArgs,
    /// Pin client and server data threads: `C,S` (netperf -T), `N` for both, `C,` or `,S`
    #[arg(long, short = 'T', value_parser = parse_cpus, allow_hyphen_values = true)]
    pub cpus: Option<(Option<u32>, Option<u32>)>,
    /// Print the result as JSON (schema: docs/json.md)
    #[arg(long)]
    pub json: bool,
    /// Print JSON lines as the test goes (iperf3 --json-stream): with -i, each interval as
    /// it ends, {"event":"interval","data":…}; then the result, {"event":"end","data":…}
    #[arg(long, conflicts_with = "json")]
    pub json_stream: bool,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
    /// Record the test's traffic to this pcap file with tcpdump (analyze with `virtperf pcap`)
    #[arg(long, value_name = "FILE")]
    pub capture: Option<std::path::PathBuf>,
    /// Sample the host's KVM exit counters (debugfs) around the test: exits per transaction
    #[arg(long)]
    pub kvm_stats: bool,
    /// Count kernel tracepoints on the test's CPUs (its pinned CPUs, else all) over the
    /// measured interval: the VM-exit causes (timer-MSR and ICR writes, IPIs sent, idle
    /// entries), per transaction or MB (needs root or CAP_PERFMON; without, the test runs
    /// and says why)
    #[arg(long)]
    pub trace: bool,
    /// --trace, plus KVM paravirtual MSRs, MSR reads, interrupts and softirqs by vector,
    /// wake-ups and switches (costs each transaction more: bench/trace.sh)
    #[arg(long)]
    pub trace_all: bool,
    /// After the test, a separate 0.5 s trial that samples scheduler, IPI, idle and
    /// syscall tracepoints with timestamps: the critical path of a transaction, stage by
    /// stage, and in-situ wake-up and idle-exit latencies (rr with --cpus A,B; needs root)
    #[arg(long)]
    pub timeline: bool,
    /// Run this long first without measuring (iperf3 -O): a guest's halt polling, vhost
    /// and page faults settle, TCP leaves slow start; the measured duration follows it
    /// (timed workloads; 0: measure from the start)
    #[arg(long, value_name = "DURATION", value_parser = virtperf_lab::parse::omit, allow_hyphen_values = true)]
    pub omit: Option<Duration>,
    /// The hypervisor's view of the VM the agent runs in, from this host (pid:N,
    /// qemu:NAME, libvirt:DOMAIN, firecracker:PID): its vCPU, vhost, I/O and main threads'
    /// CPU time, run-queue wait and switches, and KVM's per-VM exit counters (debugfs),
    /// over the measured window and per unit of work (docs/own-vm.md)
    #[arg(long, value_name = "SPEC", value_parser = clap::value_parser!(virtperf_measure::vm::VmSpec))]
    pub vm: Option<virtperf_measure::vm::VmSpec>,
    /// Where the two ends run: local (loopback); netns:veth|bridge|nat (namespaces virtperf
    /// creates and removes; needs root); ssh:USER@HOST[:PORT] (virtperf copies itself there
    /// over SSH and runs the agent); remote:HOST[:PORT] (an agent someone started);
    /// guest[:host-guest|guest-host|guest-guest|loopback] (QEMU guests virtperf boots; needs root)
    #[arg(long, default_value = "local", value_parser = Placement::from_str, help_heading = PLACEMENT)]
    pub placement: Placement,
    /// With a netns placement: shape the client's link with a token bucket (e.g. 1gbit)
    #[arg(long, requires = "placement", value_parser = virtperf_lab::parse::rate, allow_hyphen_values = true, value_name = "RATE", help_heading = PLACEMENT)]
    pub link_rate: Option<String>,
    /// With a netns placement: add this one-way delay to the client's link (netem, e.g. 1ms)
    #[arg(long, requires = "placement", value_parser = virtperf_lab::parse::delay, allow_hyphen_values = true, help_heading = PLACEMENT)]
    pub delay: Option<String>,
    /// Identity file for ssh: placements
    #[arg(long, value_name = "FILE", help_heading = PLACEMENT)]
    pub ssh_key: Option<std::path::PathBuf>,
    /// Extra ssh option for ssh: placements, as for `ssh -o` (repeatable)
    #[arg(long, value_name = "KEY=VALUE", help_heading = PLACEMENT)]
    pub ssh_opt: Vec<String>,
    #[command(flatten)]
    pub keep: crate::keep::KeepArgs,
    // Last: its flags carry their own heading, "Guest placement".
    #[command(flatten)]
    pub guest: crate::args::GuestArgs,
}

/// The help heading of the flags that say where the two ends run.
const PLACEMENT: &str = "Placement";

impl Common {
    /// Whether the output is for a program (`--json`, `--json-stream`): no progress bar,
    /// no chatter on stderr.
    pub fn machine_readable(&self) -> bool {
        self.json || self.json_stream
    }

    /// The placement with the settings these flags give it: link shaping, guest options,
    /// SSH key and options, the agent's port and token.
    pub fn placement(&self) -> anyhow::Result<Placement> {
        let mut p = self.placement.clone();
        let g = &self.guest;
        if !matches!(p, Placement::Guest(..))
            && (!g.virtio.is_empty() || g.guest_cmdline.is_some() || !g.guest_module.is_empty())
        {
            anyhow::bail!(
                "--virtio, --guest-cmdline and --guest-module set up a guest: add --placement guest (or guest:loopback, guest:guest-host, …)"
            );
        }
        match &mut p {
            Placement::Local => {}
            Placement::Netns(_, shaping) => {
                shaping.rate.clone_from(&self.link_rate);
                shaping.delay.clone_from(&self.delay);
            }
            Placement::Ssh(t) => {
                t.identity.clone_from(&self.ssh_key);
                t.options.clone_from(&self.ssh_opt);
            }
            Placement::Remote { port, token, .. } => {
                port.get_or_insert(self.conn.port);
                *token = self.conn.token()?;
            }
            Placement::Guest(_, opts) => **opts = self.guest.opts(self.machine_readable()),
        }
        Ok(p)
    }
}

/// `virtperf unix-rr`
pub fn unix_rr(a: UnixRrArgs) -> Result<()> {
    let w = build::unix_rr(&Params {
        size: a.size,
        wait: a.wait.unwrap_or_default(),
        seqpacket: a.seqpacket,
        ..Params::default()
    });
    execute(
        &a.common,
        plan_every(&a.common, w, a.duration, 0, a.interval),
    )
}

#[derive(Debug, Args)]
pub struct UnixRrArgs {
    /// Request and response sizes in bytes: `REQ,RESP`, or one size for both
    #[arg(long, short = 'r', default_value = "1,1", value_parser = parse_size_pair, allow_hyphen_values = true)]
    pub size: (u32, u32),
    /// Measured duration (10s, 500ms, 1m; a bare number is seconds)
    #[arg(long, short = 'l', default_value = "10s", value_parser = virtperf_lab::parse::test_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// How each side waits for the other's message: block, spin or poll:50us; one for
    /// both or CLIENT,SERVER
    #[arg(long, value_parser = virtperf_lab::parse::wait, value_name = "MODE[,MODE]")]
    pub wait: Option<(virtperf_wire::Wait, virtperf_wire::Wait)>,
    /// SOCK_SEQPACKET (message boundaries kept) instead of SOCK_STREAM
    #[arg(long)]
    pub seqpacket: bool,
    /// Report every interval (1s, 500ms; at least 100ms)
    #[arg(long, short = 'i', value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Option<Duration>,
    #[command(flatten)]
    pub common: Common,
}

#[derive(Debug, Args)]
pub struct RrArgs {
    /// Request and response sizes in bytes: `REQ,RESP`, or one size for both (64K = 65536,
    /// 64KB = 64000)
    #[arg(long, short = 'r', default_value = "1,1", value_parser = parse_size_pair, allow_hyphen_values = true)]
    pub size: (u32, u32),
    /// Measured duration (10s, 500ms, 1m; a bare number is seconds)
    #[arg(long, short = 'l', default_value = "10s", value_parser = virtperf_lab::parse::test_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// How each side waits for the other's message: block (netperf), spin (never sleeps:
    /// no wake-up on the critical path), poll:50us (spin that long, then block); one for
    /// both or CLIENT,SERVER (crr: for the response and the request; connects block)
    #[arg(long, value_parser = virtperf_lab::parse::wait, value_name = "MODE[,MODE]")]
    pub wait: Option<(virtperf_wire::Wait, virtperf_wire::Wait)>,
    /// rr: idle time between a response and the next request (closed loop with think time)
    #[arg(long, value_parser = parse_gap, allow_hyphen_values = true, conflicts_with = "rate")]
    pub gap: Option<Duration>,
    /// rr: open loop at this many requests per second; latency from each request's
    /// intended send time (no coordinated omission)
    #[arg(long = "rate", id = "rate", value_parser = virtperf_lab::parse::rate_per_s, allow_hyphen_values = true)]
    pub request_rate: Option<u32>,
    /// Parallel connections, each its own request/response loop; an open loop's rate is
    /// shared among them (crr: concurrent connect/request/response loops, with --threads)
    #[arg(long, short = 'P', default_value_t = 1, value_parser = parse_count)]
    pub flows: u32,
    /// Worker threads per side, each multiplexing its share of the flows on epoll
    /// (neper's -T; up to 100000 flows; default: one thread per flow, at most 256)
    #[arg(long, value_parser = parse_threads, value_name = "N")]
    pub threads: Option<u32>,
    /// rr: the data path, tcp (default) or udp (UDP_RR: one datagram each way; a lost one
    /// is counted and the transaction restarted after 50 ms)
    #[arg(long, value_name = "tcp|udp", value_parser = virtperf_wire::Protocol::parse)]
    pub protocol: Option<virtperf_wire::Protocol>,
    /// rr --protocol udp: how long to wait for a response before counting the transaction
    /// lost and sending a new request (default 50ms; raise it where round trips are slow)
    #[arg(long, value_parser = parse_loss_timeout, value_name = "DURATION")]
    pub loss_timeout: Option<Duration>,
    /// Report every interval (iperf3 -i: 1s, 500ms; at least 100ms): printed as each ends,
    /// kept in the JSON result as `intervals`
    #[arg(long, short = 'i', value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Option<Duration>,
    /// Latency under load (flent's RRUL idea): the rr alone and beside N bulk streams on
    /// the same path, interleaved over K pairs, the latency the load adds with its CI:
    /// `streams=N[,reverse][,pairs=K]` (K defaults to 3)
    #[arg(long, value_parser = crate::under_load::parse, value_name = "streams=N[,reverse][,pairs=K]")]
    pub under_load: Option<crate::under_load::UnderLoad>,
    #[command(flatten)]
    pub common: Common,
}

/// UDP rr's loss timeout: 1 ms to 60 s.
fn parse_loss_timeout(s: &str) -> anyhow::Result<Duration> {
    let d = virtperf_lab::parse::duration_up_to(s, Duration::from_secs(60), "60s")?;
    anyhow::ensure!(
        d >= Duration::from_millis(1),
        "invalid loss timeout {s:?}: at least 1ms"
    );
    Ok(d)
}

/// An interval of the time series: 100ms to 24h (the plan checks it against --duration).
fn parse_interval(s: &str) -> anyhow::Result<Duration> {
    let d = parse_duration(s)?;
    virtperf_lab::plan::check_interval(d).map_err(anyhow::Error::msg)?;
    Ok(d)
}

/// Worker threads per side: 1 to 256.
fn parse_threads(s: &str) -> anyhow::Result<u32> {
    match s.parse::<u32>() {
        Ok(n) if (1..=virtperf_wire::MAX_THREADS).contains(&n) => Ok(n),
        _ => anyhow::bail!(
            "threads must be a whole number from 1 to {}, got {s:?}",
            virtperf_wire::MAX_THREADS
        ),
    }
}

/// Where a buffer starts within its page: 0 to 4095 bytes.
fn parse_buf_offset(s: &str) -> anyhow::Result<u32> {
    match s.trim().parse::<u32>() {
        Ok(n) if n < virtperf_wire::PAGE_BYTES => Ok(n),
        _ => anyhow::bail!(
            "the buffer offset is bytes into a page, 0 to {}: got {s:?}",
            virtperf_wire::PAGE_BYTES - 1
        ),
    }
}

/// A gap between transactions: 0 to 1 s.
fn parse_gap(s: &str) -> anyhow::Result<Duration> {
    virtperf_lab::parse::duration_up_to(s, Duration::from_secs(1), "1s")
}

#[derive(Debug, Args)]
pub struct StreamArgs {
    /// Bytes per send call (netperf -m; default 16384, with --protocol udp 1472: one
    /// datagram per 1500-byte Ethernet frame, as iperf3 -u picks)
    #[arg(long, short = 'm', value_parser = parse_size32, allow_hyphen_values = true)]
    pub send_size: Option<u32>,
    /// Parallel connections
    #[arg(long, short = 'P', default_value_t = 1, value_parser = parse_count)]
    pub flows: u32,
    /// Worker threads per side, each multiplexing its share of the flows on epoll
    /// (default: one thread per flow, at most 256)
    #[arg(long, value_parser = parse_threads, value_name = "N")]
    pub threads: Option<u32>,
    /// Server sends, client receives
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Bytes per receive call on the receiving end (netperf -M; default 128KiB, netperf's)
    #[arg(long, short = 'M', value_parser = parse_size32, allow_hyphen_values = true)]
    pub recv_size: Option<u32>,
    /// How the receiver waits for data: block (netperf's loop, default) or poll (iperf3's)
    #[arg(long, value_name = "block|poll", value_parser = RecvWait::parse)]
    pub recv_wait: Option<RecvWait>,
    /// Start each end's send and receive buffers this many bytes into a page (0–4095;
    /// netperf -o/-O; default 0, page-aligned): what an offset costs the kernel's copies
    /// depends on the CPU
    #[arg(long, value_name = "BYTES", value_parser = parse_buf_offset, allow_hyphen_values = true)]
    pub buf_offset: Option<u32>,
    /// The data path, tcp (default) or udp (UDP_STREAM, iperf3 -u: loss, out-of-order and
    /// jitter counted by the receiver; sizes up to 65507 bytes)
    #[arg(long, value_name = "tcp|udp", value_parser = virtperf_wire::Protocol::parse)]
    pub protocol: Option<virtperf_wire::Protocol>,
    /// Pace each flow's sends to this rate (2gbit, 500mbit; 0: unpaced, the default, as
    /// iperf3 -b 0 and netperf): UDP on the sender's schedule, TCP by the kernel
    /// (SO_MAX_PACING_RATE, iperf3 --fq-rate)
    #[arg(long, value_name = "RATE", value_parser = virtperf_lab::parse::bit_rate, allow_hyphen_values = true)]
    pub rate: Option<u64>,
    /// UDP: UDP_SEGMENT on the sender (one send hands the kernel up to 64 datagrams)
    #[arg(long)]
    pub gso: bool,
    /// UDP: UDP_GRO on the receiver (coalesced receives)
    #[arg(long)]
    pub gro: bool,
    /// Both directions at once (iperf3 --bidir): each flow is two connections, one sending
    /// each way; each direction reported apart and summed
    #[arg(long, conflicts_with = "reverse")]
    pub bidir: bool,
    /// Zero-copy senders (iperf3 -Z): `sendfile` (the default, iperf3's method) or `msg`
    /// (MSG_ZEROCOPY, completions reaped)
    #[arg(long, short = 'Z', num_args = 0..=1, default_missing_value = "sendfile", value_parser = parse_zerocopy, value_name = "METHOD")]
    pub zerocopy: Option<virtperf_wire::ZeroCopy>,
    /// Measured duration (10s, 500ms, 1m; a bare number is seconds)
    #[arg(long, short = 'l', default_value = "10s", value_parser = virtperf_lab::parse::test_duration, allow_hyphen_values = true)]
    pub duration: Duration,
    /// Report every interval (iperf3 -i: 1s, 500ms; at least 100ms): printed as each ends,
    /// kept in the JSON result as `intervals`
    #[arg(long, short = 'i', value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Option<Duration>,
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
    /// Report every interval (iperf3 -i: 1s, 500ms; at least 100ms): printed as each ends,
    /// kept in the JSON result as `intervals`
    #[arg(long, short = 'i', value_parser = parse_interval, value_name = "DURATION")]
    pub interval: Option<Duration>,
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
    /// With --url: also time responses with this non-2xx status (e.g. 404; repeatable or
    /// comma-separated); any other status outside 2xx is an error
    #[arg(long, requires = "url", conflicts_with_all = ["bytes", "host"], value_delimiter = ',', value_parser = clap::value_parser!(u16).range(100..=599), value_name = "CODE")]
    pub accept_status: Vec<u16>,
    /// With --url: fail a download whose body goes past this size (a server that never
    /// ends its body)
    #[arg(long, requires = "url", default_value = "64GiB", value_parser = parse_bytes)]
    pub max_size: u64,
    /// With --url: fail a download that takes longer than this
    #[arg(long, requires = "url", default_value = "10m", value_parser = parse_duration)]
    pub max_time: Duration,
    #[command(flatten)]
    pub common: Common,
}

// The value parsers live in `virtperf_lab::parse`, shared with experiment specs so a value
// means the same on the command line and in a spec file.
use virtperf_lab::parse::{
    bytes as parse_bytes, count as parse_count, cpus as parse_cpus, duration as parse_duration,
    size32 as parse_size32, size_pair as parse_size_pair,
};
