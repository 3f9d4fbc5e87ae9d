//! One function per subcommand: turn arguments into a plan, run it, render the result.

use std::io::Read;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use virtperf_lab::agent::{self, AgentConfig};
use virtperf_lab::client;
use virtperf_lab::place::remote::RemoteSite;
use virtperf_lab::place::{self, Placement, Site};
use virtperf_lab::plan::{Plan, Target};
use virtperf_wire::{TestResult, Workload};

use crate::args::{BulkArgs, Common, EnvArgs, HttpArgs, RrArgs, ServeArgs, StreamArgs};
use crate::progress::Progress;
use crate::render;

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
    };
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

/// Runs a plan where `--placement` says (or against `--host`): opens that site, hands it the
/// plan, renders the result.
fn execute(common: &Common, plan: Plan) -> Result<()> {
    // Every value of the plan came from the command line: a value out of range is a usage
    // error (exit 2), like one clap's parsers caught.
    plan.validate()
        .map_err(|e| crate::signals::exit(crate::signals::code::USAGE, format!("{e:#}")))?;
    let local = common.placement == Placement::Local;
    if !local && common.host.is_some() {
        bail!("--placement chooses the agent: drop --host");
    }
    // Refusals that need no lock come first: a user without root, or with a ring size QEMU
    // refuses, should not wait for another measurement to learn it.
    let placement = common.placement()?;
    placement.preflight()?;
    // Held until this function returns: the whole test, set-up and teardown included.
    let _machine = crate::machine::take(&common.lock)?;
    if common.placement.needs_root() {
        // SIGINT, SIGTERM or SIGHUP must not leave namespaces, taps or guests behind:
        // remove what this process made and exit the way a tool stopped by that signal does.
        crate::signals::on_termination(|sig| {
            let removed = virtperf_lab::place::guest::cleanup_own();
            eprintln!(
                "\nvirtperf: {}: removed {} namespace(s)/guest(s)/run dir(s) this run created",
                crate::signals::name(sig),
                removed.len()
            );
            std::process::exit(i32::from(crate::signals::code_for(sig)));
        })?;
    }
    let site: Box<dyn Site> = match &common.host {
        // An agent someone started, named the way results have always shown it: by target.
        Some(host) => Box::new(RemoteSite::new(
            Target {
                host: host.clone(),
                port: common.conn.port,
                token: common.conn.token()?,
            },
            None,
        )),
        None => place::open(&placement)?,
    };
    // Live interval lines replace the progress bar (both would draw on stderr).
    let progress = Progress::new(
        plan.workload.name(),
        common.json || plan.on_interval.is_some(),
    );
    let result = site.run(&plan, &|f| progress.update(f))?;
    drop(progress);
    drop(site);
    output(&result, common.json, local && common.host.is_none())
}

fn output(r: &TestResult, json: bool, local: bool) -> Result<()> {
    let mut r = r.clone();
    r.allow_concurrent |= crate::machine::concurrent();
    if json {
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
    let on_interval = (interval.is_some() && !common.json).then(|| {
        virtperf_lab::plan::IntervalSink(std::sync::Arc::new(|i: &virtperf_wire::Interval| {
            eprintln!("{}", render::interval_line(i));
        }))
    });
    Plan {
        workload,
        duration,
        client_cpu,
        server_cpu,
        count,
        sock: Default::default(),
        capture: common.capture.clone(),
        kvm_stats: common.kvm_stats,
        trace: common.trace || common.trace_all,
        trace_all: common.trace_all,
        timeline: common.timeline,
        interval,
        on_interval,
    }
}

/// `virtperf rr`
pub fn rr(a: RrArgs) -> Result<()> {
    let (client_wait, server_wait) = a.wait.unwrap_or_default();
    let w = Workload::Rr {
        request: a.size.0,
        response: a.size.1,
        client_wait,
        server_wait,
        gap_us: a.gap.map(|g| g.as_micros() as u64),
        rate_per_s: a.request_rate,
        flows: a.flows,
        threads: a.threads,
        protocol: a.protocol.unwrap_or_default(),
        loss_timeout_ms: a.loss_timeout.map(|d| d.as_millis().max(1) as u32),
    };
    execute(
        &a.common,
        plan_every(&a.common, w, a.duration, 0, a.interval),
    )
}

/// `virtperf crr`
pub fn crr(a: RrArgs) -> Result<()> {
    if a.gap.is_some() || a.request_rate.is_some() {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "--gap and --rate apply to rr (crr connects for every transaction)",
        ));
    }
    if a.protocol.is_some_and(|p| !p.is_tcp()) || a.loss_timeout.is_some() {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "crr is TCP only (UDP has no connection to set up): use rr --protocol udp",
        ));
    }
    let (client_wait, server_wait) = a.wait.unwrap_or_default();
    let w = Workload::Crr {
        request: a.size.0,
        response: a.size.1,
        client_wait,
        server_wait,
        flows: a.flows,
        threads: a.threads,
    };
    execute(
        &a.common,
        plan_every(&a.common, w, a.duration, 0, a.interval),
    )
}

/// `virtperf stream`
pub fn stream(a: StreamArgs) -> Result<()> {
    let protocol = a.protocol.unwrap_or_default();
    let w = Workload::Stream {
        send_size: a
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
    };
    execute(
        &a.common,
        plan_every(&a.common, w, a.duration, 0, a.interval),
    )
}

/// `virtperf bulk`
pub fn bulk(a: BulkArgs) -> Result<()> {
    let w = Workload::Bulk {
        bytes: a.bytes,
        send_size: a.send_size,
        reverse: a.reverse,
    };
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
        let progress = Progress::new("http", a.common.json);
        let limits = virtperf_lab::HttpLimits {
            max_bytes: a.max_size,
            max_time: a.max_time,
        };
        let r = client::run_url(url, a.count, &a.accept_status, limits, &|f| {
            progress.update(f)
        })?;
        drop(progress);
        return output(&r, a.common.json, false);
    }
    let bytes = a
        .bytes
        .ok_or_else(|| anyhow!("--bytes is required (or give --url)"))?;
    let w = Workload::Http { bytes };
    execute(&a.common, plan(&a.common, w, Duration::ZERO, a.count))
}
