//! The client side of a test: connect to an agent, set the workload up on both sides, run
//! it for its duration (or byte count), collect both halves' measurements.

use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use virtperf_load::http;
use virtperf_load::http::Fetched;
use virtperf_measure::events::EventSnapshot;
use virtperf_measure::{fingerprint, ProcStat};
use virtperf_wire::{
    write_message, Env, Message, SideReport, TestResult, WireError, Workload, PROTOCOL_VERSION,
};

use crate::assemble::{assemble, Collected};
use crate::plan::{Family, Plan, ProgressFn, Target};
use crate::roles;
use crate::side::{spawn_worker, Ctl, DataKey};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

/// What a client waits for after its hello.
const WELCOME: &str = "welcome";

/// An open control connection to an agent.
struct Control {
    s: TcpStream,
    addr: SocketAddr,
    /// The test's signal flag until its measured interval begins: any wait for the agent
    /// before then (its welcome, its machine, its set-up) ends on it, nothing measured.
    cut: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl Control {
    fn connect(t: &Target, family: Option<Family>) -> Result<Control> {
        Control::connect_cut(t, family, None)
    }

    /// [`Control::connect`] whose waits end on `cut` (see [`Control::cut`]).
    fn connect_cut(
        t: &Target,
        family: Option<Family>,
        cut: Option<Arc<std::sync::atomic::AtomicBool>>,
    ) -> Result<Control> {
        let addrs: Vec<SocketAddr> = (crate::parse::host(&t.host), t.port)
            .to_socket_addrs()
            .map_err(|e| anyhow!("cannot resolve host {:?}: {e}", t.host))?
            .filter(|a| family.is_none_or(|f| f.has(a)))
            .collect();
        if addrs.is_empty() {
            if let Some(f) = family {
                bail!(
                    "host {:?} has no {} address (drop -{})",
                    t.host,
                    if f == Family::V4 { "IPv4" } else { "IPv6" },
                    if f == Family::V4 { "4" } else { "6" }
                );
            }
        }
        let mut last = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, SETUP_TIMEOUT) {
                Ok(s) => {
                    let mut c = Control {
                        s,
                        addr,
                        cut: cut.clone(),
                    };
                    c.s.set_nodelay(true)?;
                    c.s.set_write_timeout(Some(SETUP_TIMEOUT))?;
                    crate::control_keepalive(&c.s);
                    c.hello(t.token.clone(), t.lock.clone())?;
                    return Ok(c);
                }
                Err(e) => last = Some((addr, e)),
            }
        }
        match last {
            Some((addr, e)) => Err(crate::Unreached(format!(
                "cannot connect to the agent at {addr}: {e} (is `virtperf serve` running there?)"
            ))
            .into()),
            None => Err(anyhow!("host {:?} resolved to no address", t.host)),
        }
    }

    fn send(&mut self, m: &Message) -> Result<()> {
        write_message(&mut self.s, m)
            .map_err(|e| anyhow!("sending to the agent at {}: {e}", self.addr))
    }

    fn recv(&mut self, timeout: Duration, waiting_for: &str) -> Result<Message> {
        self.recv_max(timeout, waiting_for, virtperf_wire::MAX_CONTROL_FRAME)
    }

    /// The error the agent sent, if it sent one within `wait` (and nothing else first).
    fn error_sent(&mut self, wait: Duration) -> Option<anyhow::Error> {
        self.s.set_read_timeout(Some(wait)).ok()?;
        match virtperf_wire::read_message(&mut self.s) {
            Ok(Message::Error { message }) => Some(self.agent_said(&message)),
            _ => None,
        }
    }

    /// An `Error` the agent sent, as this client reports it.
    fn agent_said(&self, message: &str) -> anyhow::Error {
        anyhow!(
            "agent at {}: {}",
            self.addr,
            virtperf_wire::printable(message)
        )
    }

    /// Like `recv`, for a message of up to `max` bytes (an agent's report of many flows).
    /// The whole message must arrive within `timeout` (an agent that trickles bytes gets no
    /// more: it held a client for as long as it trickled, 45 s measured).
    fn recv_max(&mut self, timeout: Duration, waiting_for: &str, max: u32) -> Result<Message> {
        let t0 = Instant::now();
        if self.cut.is_some() {
            let what = format!("waiting for the agent's {waiting_for}");
            crate::cut::readable_unless_cut(&self.s, timeout, self.cut.as_ref(), &what)?;
        }
        // One deadline for the wait and the read: a silent agent cost twice the timeout.
        let left = timeout
            .saturating_sub(t0.elapsed())
            .max(Duration::from_millis(1));
        // An agent silent at its welcome never began the test (see `Unreached`).
        let silent = |m: String| match waiting_for {
            WELCOME => crate::Unreached(m).into(),
            _ => anyhow!(m),
        };
        match virtperf_wire::read_message_within(&self.s, left, max) {
            Ok(Message::Error { message }) => Err(self.agent_said(&message)),
            Ok(m) => Ok(m),
            Err(e) if e.is_timeout() => Err(silent(format!(
                "the agent at {} sent no {waiting_for} within {}s",
                self.addr,
                timeout.as_secs()
            ))),
            Err(WireError::Closed) => Err(silent(format!(
                "the agent at {} closed the connection while we waited for {waiting_for} (agent killed?)",
                self.addr
            ))),
            Err(WireError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(anyhow!(
                "the agent at {} closed the connection in the middle of a {waiting_for} (agent killed?)",
                self.addr
            )),
            Err(e @ WireError::Io(_)) => Err(anyhow!("agent at {}: {e}", self.addr)),
            Err(WireError::TooLarge { len, max }) if len < max.saturating_mul(64) => Err(anyhow!(
                "the agent at {} sent a {waiting_for} of {len} bytes, over the {max}-byte limit for it",
                self.addr
            )),
            // Never the peer's bytes (nor the length its first four bytes spell): what is
            // listening there may be another service, whose banner is not ours to relay
            // (an agent driving a test would hand it to its client).
            Err(_) => Err(anyhow!(
                "{} does not speak the virtperf protocol (is another service listening on that port?)",
                self.addr
            )),
        }
    }

    /// Presents `lock` (a hold on the agent's machine), else the machine lock this process
    /// inherited, if any.
    fn hello(&mut self, token: Option<String>, lock: Option<String>) -> Result<()> {
        self.send(&Message::Hello {
            version: PROTOCOL_VERSION,
            token,
            lock: lock.or_else(|| {
                std::env::var(virtperf_machine::lock::INHERIT_ENV)
                    .ok()
                    .filter(|n| !n.is_empty())
            }),
        })?;
        match self.recv(SETUP_TIMEOUT, WELCOME)? {
            Message::Welcome { .. } => Ok(()),
            other => Err(anyhow!(
                "agent at {} answered hello with a {} message",
                self.addr,
                kind(&other)
            )),
        }
    }

    fn fingerprint(&mut self) -> Result<Env> {
        self.send(&Message::Fingerprint)?;
        match self.recv(SETUP_TIMEOUT, "fingerprint")? {
            Message::Env { env } => Ok(*env),
            other => Err(anyhow!(
                "unexpected answer to fingerprint: {}",
                kind(&other)
            )),
        }
    }
    /// Asks the agent to set `plan` up; waits (saying so once) while the agent's machine is
    /// busy with another measurement. Returns the data port.
    /// Asks the agent to prepare `plan`: its data port and the test's data key.
    fn prepare(&mut self, plan: &Plan) -> Result<(u16, DataKey)> {
        self.send(&Message::Prepare {
            workload: plan.workload.clone(),
            duration_ms: if plan.workload.is_timed() {
                plan.duration.as_millis() as u64
            } else {
                0
            },
            server_cpu: plan.server_cpu,
            sock: plan.sock,
            omit_ms: plan.omit.map(|o| o.as_millis() as u64),
        })?;
        match self.recv_after_waiting("ready")? {
            Message::Ready { data_port, key } => Ok((data_port, DataKey::from_hex(&key)?)),
            other => bail!("unexpected answer to prepare: {}", kind(&other)),
        }
    }

    /// The next message that is not `Waiting`: while the agent's machine is busy with
    /// another measurement the agent waits, and so do we (saying so once).
    fn recv_after_waiting(&mut self, waiting_for: &str) -> Result<Message> {
        let mut said_waiting = false;
        loop {
            let what = if said_waiting {
                "waiting for the agent's machine (another measurement holds it)"
            } else {
                "setting the test up"
            };
            crate::cut::readable_unless_cut(&self.s, SETUP_TIMEOUT, self.cut.as_ref(), what)?;
            match self.recv(SETUP_TIMEOUT, waiting_for)? {
                Message::Waiting { holder } => {
                    if !said_waiting {
                        // The peer's words: escaped, as every string an agent sends is.
                        eprintln!(
                            "virtperf: waiting for another measurement on the agent's machine to finish: {}",
                            virtperf_wire::printable(&holder)
                        );
                        said_waiting = true;
                    }
                }
                other => return Ok(other),
            }
        }
    }
}

/// A hold on an agent's machine for this client (the `Hold` message): the client's tests
/// there present its id and run beside each other instead of one after the other (the
/// agent runs one measurement at a time otherwise). Released when dropped: the agent lets
/// go when the connection closes, or after its `--max-duration`.
pub struct Hold {
    _ctl: Control,
    id: Option<String>,
}

impl Hold {
    /// Asks the agent at `t` to hold its machine for us, waiting (saying so once) while
    /// another measurement has it.
    pub fn take(t: &Target) -> Result<Hold> {
        let mut ctl = Control::connect(t, None)?;
        ctl.send(&Message::Hold)?;
        match ctl.recv_after_waiting("held")? {
            Message::Held { lock } => Ok(Hold {
                _ctl: ctl,
                id: lock,
            }),
            other => bail!("unexpected answer to hold: {}", kind(&other)),
        }
    }

    /// The hold's id, for a hello; `None` when the agent takes no lock.
    pub fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// `t`, its tests presenting this hold. Unchanged when the agent takes no lock.
    pub fn target(&self, t: &Target) -> Target {
        Target {
            lock: self.id.clone().or_else(|| t.lock.clone()),
            ..t.clone()
        }
    }
}

/// Fetches the agent's environment fingerprint only.
pub fn remote_env(t: &Target) -> Result<Env> {
    Control::connect(t, None)?.fingerprint()
}

/// Has the agent at `driver` run `plan` as the client against the agent at `to` (the
/// driver must run with `--allow-drive`); returns the result the driver assembled. Used to
/// make a guest the sending end.
pub fn drive(driver: &Target, to: &Target, plan: &Plan) -> Result<TestResult> {
    plan.validate()?;
    let wire = plan.to_wire()?;
    let duration_ms = wire.duration_ms;
    let mut ctl = Control::connect(driver, None)?;
    // The host's KVM counters are this machine's: read here, around the drive.
    let kvm0 = plan.kvm_stats.then(virtperf_kvm::debugfs_stats);
    ctl.send(&Message::Drive {
        to: virtperf_wire::DriveTarget {
            host: to.host.clone(),
            port: to.port,
            token: to.token.clone(),
            lock: to.lock.clone(),
        },
        plan: wire,
    })?;
    // Byte-count workloads have no planned length: allow them the agent's own bound.
    let wait = Duration::from_millis(duration_ms) + SETUP_TIMEOUT * 2 + crate::STOP_GRACE;
    let wait = if plan.workload.is_timed() {
        wait
    } else {
        wait + Duration::from_secs(600)
    };
    let mut result = match ctl.recv(wait, "outcome")? {
        Message::Outcome { result } => *result,
        other => bail!("unexpected answer to drive: {}", kind(&other)),
    };
    if let Some(before) = kvm0 {
        add_kvm(
            &mut result,
            kvm_counters(before, virtperf_kvm::debugfs_stats()),
        );
    }
    Ok(result)
}

/// Asks the agent at `t` (one started with `--allow-drive`) to run a probe on its machine
/// (`crate::probe`; the protocol names one, `explain`) with `params`, waiting up to `bound`
/// for what it measured.
pub fn probe(t: &Target, params: serde_json::Value, bound: Duration) -> Result<serde_json::Value> {
    let mut ctl = Control::connect(t, None)?;
    ctl.send(&Message::Explain { battery: params })?;
    match ctl.recv(bound + SETUP_TIMEOUT * 2, "explained")? {
        Message::Explained { battery } => Ok(battery),
        other => bail!("unexpected answer to explain: {}", kind(&other)),
    }
}

/// Runs one test against the agent at `t`, and after it the `--timeline` trial if asked.
pub fn run(t: &Target, plan: &Plan, progress: ProgressFn) -> Result<TestResult> {
    plan.validate()?;
    let mut named = plan.clone();
    named.workload.name_receive_loop();
    let plan = &named;
    let mut result = run_once(t, plan, progress, None)?;
    if plan.timeline {
        match crate::timeline_trial::trial(plan, |p, s| run_once(t, p, &|_| {}, Some(s))) {
            Ok(mut tl) => {
                if let virtperf_wire::Outcome::Rr(o) = &result.outcome {
                    tl.headline_p50_us = o.latency.as_ref().map(|l| l.p50_us);
                }
                result.timeline = Some(tl);
            }
            Err(e) => result.warnings.push(format!("--timeline: not taken: {e}")),
        }
    }
    Ok(result)
}

/// One test, with tracepoints sampled over its measured interval if `sampler` is given.
fn run_once(
    t: &Target,
    plan: &Plan,
    progress: ProgressFn,
    sampler: Option<&virtperf_measure::sampling::Sampler>,
) -> Result<TestResult> {
    let mut ctl = Control::connect_cut(t, plan.family, plan.cut.clone())?;
    let server_env = ctl.fingerprint()?;
    let client_env = fingerprint();
    let (data_port, key) = ctl.prepare(plan)?;
    let data = SocketAddr::new(ctl.addr.ip(), data_port);
    // Capture from before the first data connection, so handshakes are in the file.
    let capture = match &plan.capture {
        Some(path) => Some(crate::capture::Capture::start(path, data.ip(), data_port)?),
        None => None,
    };
    let side = Ctl::new(plan.client_cpu).with_omit(plan.omit);
    let downloads: Arc<Mutex<Vec<Fetched>>> = Arc::default();
    let (handles, meters, setup_s) = match start_workers(plan, data, key, &side, &downloads) {
        Ok(w) => w,
        // The agent's own error (its data ports all taken, a socket it could not bind)
        // says more than what the data side saw of it (a set-up connection reset).
        Err(e) => return Err(ctl.error_sent(Duration::from_millis(500)).unwrap_or(e)),
    };
    ctl.send(&Message::Start)?;
    match ctl.recv(SETUP_TIMEOUT, "started")? {
        Message::Started => {}
        other => bail!("unexpected answer to start: {}", kind(&other)),
    }
    warm_up(&mut ctl, plan, &side, &handles, progress)?;
    not_cut_yet(plan, &side)?;
    // From here a signal ends the interval, and the stop's waits have their own grace.
    ctl.cut = None;
    let kvm0 = plan.kvm_stats.then(virtperf_kvm::debugfs_stats);
    let nic = traffic_interface(&ctl);
    // Tracepoint counters are opened before the interval (opening costs milliseconds per
    // CPU) and started and stopped right at its edges.
    let tracer = plan.trace.then(|| crate::trace::Tracer::open(plan));
    let tools = capture.iter().map(crate::capture::Capture::pid).collect();
    let window = crate::window::Window::open(nic, tools)?;
    if let Some(t) = &tracer {
        t.start();
    }
    if let Some(s) = sampler {
        s.start();
    }
    if let Some(w) = &plan.on_window {
        (w.0)(true);
    }
    let started = window.started();
    side.gate.open();
    let ticks = plan.workload.kind().ticks();
    let mut series = plan.interval.map(|every| {
        crate::series::Series::new(every, started, meters, ticks, plan.on_interval.clone())
    });
    let cut_early = wait_for_end(plan, &handles, series.as_mut(), started, progress);
    side.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let stopped = Instant::now();
    // The agent reads its counters at the same moment, before either side drains. An agent
    // that died is said by the workers' error or the report's, which say more than this.
    let _ = ctl.send(&Message::End);
    if let Some(w) = &plan.on_window {
        (w.0)(false);
    }
    let traced = tracer.map(|t| t.stop());
    if let Some(s) = sampler {
        s.pause();
    }
    if let Some(s) = series.as_mut() {
        s.at_stop(stopped);
    }
    let closed = window.close(&side, handles.len(), plan.client_cpu)?;
    let kvm = kvm0.map(|before| kvm_counters(before, virtperf_kvm::debugfs_stats()));
    let (joined, server) = stop_and_report(&mut ctl, plan, &side, handles)?;
    let stop_s = stopped.elapsed().as_secs_f64();
    let client = closed.report(&joined, &side, setup_s);
    if let Some(c) = capture {
        c.stop()?;
    }
    let downloads = downloads.lock().map(|d| d.clone()).unwrap_or_default();
    let mut result = assemble(Collected {
        plan,
        target: ctl.addr.to_string(),
        client,
        client_hist: joined.hist,
        server: Some(server),
        client_env,
        server_env: Some(server_env),
        downloads,
        url: format!("http://{data}/"),
    })?;
    add_kvm_and_intervals(&mut result, plan, kvm, series);
    annotate(&mut result, plan, stop_s, traced);
    if cut_early {
        result.warnings.push(crate::cut::CUT_SHORT.to_string());
    }
    Ok(result)
}

/// Runs the warm-up (`--omit`, iperf3's `-O`): both sides' engines run from the gate,
/// unmeasured, until it has passed (or the run is cut, or every worker ended); then every
/// engine on both sides marks its counts and the workers' CPU is counted from there, and
/// the caller opens the measured interval. The agent ends its warm-up on our `Measure`,
/// as it ends the interval on our `End`: both sides on this clock.
fn warm_up(
    ctl: &mut Control,
    plan: &Plan,
    side: &Ctl,
    handles: &crate::half::Handles,
    progress: ProgressFn,
) -> Result<()> {
    let Some(omit) = side.omit else {
        return Ok(());
    };
    side.gate.open();
    let until = Instant::now() + omit;
    let cut = || {
        plan.cut
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
    };
    while Instant::now() < until && !cut() && !handles.iter().all(|h| h.is_finished()) {
        progress(Some(0.0));
        let left = until.saturating_duration_since(Instant::now());
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
    side.begin_measuring();
    ctl.send(&Message::Measure)
}

/// Fails (and lets the waiting workers go) when the test was cut before its measured
/// interval began: a result of no interval would be a table of zeros, not a measurement.
fn not_cut_yet(plan: &Plan, side: &Ctl) -> Result<()> {
    if !crate::cut::is_cut(plan.cut.as_ref()) {
        return Ok(());
    }
    side.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    side.gate.open();
    bail!("the signal came before the measured interval began: nothing was measured")
}

/// The interface our traffic leaves by: in a guest its virtio-net device, whose kicks
/// and interrupts are counted with the events.
fn traffic_interface(ctl: &Control) -> Option<String> {
    ctl.s
        .local_addr()
        .ok()
        // A connection to one of our own addresses never leaves by the device.
        .filter(|a| a.ip() != ctl.addr.ip())
        .and_then(|a| virtperf_measure::nic::interface_of(a.ip()))
}

/// Adds the KVM counters (`--kvm-stats`) and the time series (`-i`) to a result.
fn add_kvm_and_intervals(
    result: &mut TestResult,
    plan: &Plan,
    kvm: Option<virtperf_wire::KvmCounters>,
    series: Option<crate::series::Series>,
) {
    if let Some(k) = kvm {
        add_kvm(result, k);
    }
    if let (Some(s), Some(every)) = (series, plan.interval) {
        result.intervals = s.finish();
        result
            .warnings
            .extend(crate::series::interval_warning(&result.intervals, every));
    }
}

/// Starts the client half's workers (they wait at the gate); the set-up time of a
/// multiplexed workload's many connections, kept out of the measured interval.
fn start_workers(
    plan: &Plan,
    data: SocketAddr,
    key: DataKey,
    side: &Ctl,
    downloads: &Arc<Mutex<Vec<Fetched>>>,
) -> Result<(
    crate::half::Handles,
    Vec<Arc<virtperf_load::interval::Meter>>,
    Option<f64>,
)> {
    // Opening thousands of connections takes a while: timed, and kept out of the
    // measured interval (the gate opens after it).
    let setup0 = Instant::now();
    let (handles, meters) = roles::client(
        &plan.workload,
        &crate::half::ClientHalf {
            data,
            sock: plan.sock,
            count: plan.count,
            side,
            downloads,
            interval: plan.interval,
            window: plan.workload.is_timed().then_some(plan.duration),
            key,
        },
    )?;
    let setup_s = plan
        .workload
        .multiplexed()
        .map(|_| setup0.elapsed().as_secs_f64());

    Ok((handles, meters, setup_s))
}

/// Waits until the test's duration is over (or, untimed, its workers are done), reporting
/// progress and closing the live intervals on time. True where the signal ended it first.
fn wait_for_end(
    plan: &Plan,
    handles: &crate::half::Handles,
    mut series: Option<&mut crate::series::Series>,
    started: Instant,
    progress: ProgressFn,
) -> bool {
    loop {
        let el = started.elapsed();
        if let Some(s) = series.as_deref_mut() {
            s.poll(Instant::now());
        }
        if handles.iter().all(|h| h.is_finished()) {
            return false;
        }
        if crate::cut::is_cut(plan.cut.as_ref()) {
            return !(plan.workload.is_timed() && el >= plan.duration);
        }
        // Wake at the next interval boundary too, so live intervals end on time.
        let to_boundary = series.as_deref().map_or(Duration::MAX, |s| {
            s.next_wake().saturating_duration_since(Instant::now())
        });
        if plan.workload.is_timed() {
            if el >= plan.duration {
                return false;
            }
            progress(Some(el.as_secs_f64() / plan.duration.as_secs_f64()));
            let left = plan.duration - el;
            std::thread::sleep(left.min(Duration::from_millis(100)).min(to_boundary));
        } else {
            progress(None);
            std::thread::sleep(Duration::from_millis(50).min(to_boundary));
        }
    }
}

/// Stops the test and joins the workers (in the order that lets the last transaction
/// finish), then takes the agent's report of its side.
fn stop_and_report(
    ctl: &mut Control,
    plan: &Plan,
    side: &Ctl,
    handles: crate::half::Handles,
) -> Result<(crate::side::Joined, SideReport)> {
    // Where the client drives the traffic, let its workers finish their last transaction
    // before the agent stops serving (a crr connection still in the agent's accept queue
    // would otherwise be reset). In reverse streams our receivers end only when the agent's
    // senders stop, so there Stop goes first. A failed send usually means the agent died;
    // the workers' error says more, so it wins.
    let agent_addr = ctl.addr;
    let stop_first = plan.workload.kind().server_sends();
    let mut stop_sent = Ok(());
    if stop_first {
        stop_sent = ctl.send(&Message::Stop);
    }
    // Cut by a signal, workers that make no progress and a report that does not come are
    // given up on after a grace, not every timeout in turn (a frozen agent held a Ctrl-C
    // for 29 s).
    let peer = format!("the agent at {agent_addr}");
    let joined = crate::cut::join_within(
        handles,
        plan.cut.as_ref(),
        || side.running_cpu_s(),
        &peer,
        crate::cut::CUT_GRACE,
    )
    .with_context(|| format!("data connection to the agent at {agent_addr}"))?;
    if !stop_first {
        stop_sent = ctl.send(&Message::Stop);
    }
    stop_sent?;
    let report_max = virtperf_wire::report_limit(plan.workload.connections());
    let cut = crate::cut::is_cut(plan.cut.as_ref());
    let wait = if cut {
        crate::cut::CUT_GRACE
    } else {
        DATA_TIMEOUT + SETUP_TIMEOUT
    };
    let got = ctl.recv_max(wait, "report", report_max);
    let got = if cut {
        got.context("the agent stopped answering after the signal, so nothing was kept")
    } else {
        got
    };
    let server = match got? {
        Message::Report { side } => *side,
        other => bail!("unexpected answer to stop: {}", kind(&other)),
    };
    Ok((joined, server))
}

/// What a result says about how it was measured, besides its numbers: knobs a killed run
/// left changed, the tracepoint counts (`--trace`), and how long the test ran past its stop.
fn annotate(
    result: &mut TestResult,
    plan: &Plan,
    stop_s: f64,
    traced: Option<crate::trace::Traced>,
) {
    // A killed run's knobs may still be set (busy polling, halt polling): this result was
    // measured with them, which it must say. `run` refuses outright; a single test warns.
    for l in virtperf_machine::knob::leaked(&virtperf_machine::state::journal_base()) {
        result.warnings.push(format!(
            "measured while knobs of a killed virtperf run are still changed: {l}; `virtperf cleanup` restores them"
        ));
    }
    if let Some(t) = traced {
        result.trace = Some(t.per_unit_of(&result.outcome, result.events.as_ref()));
        if let Some(m) = result.trace.as_ref().and_then(|t| t.missing.first()) {
            result
                .warnings
                .push(format!("--trace: not every tracepoint was counted: {m}"));
        }
    }
    if plan.workload.is_timed() {
        result.stop_s = Some(stop_s);
        if stop_s > STOP_WARN_S {
            result.warnings.push(format!(
                "the test took {stop_s:.2} s after its measured interval to stop (finishing in-flight transactions, closing connections, the agent's report)"
            ));
        }
    }
}

/// Past this many seconds between a timed test's stop and both sides' reports, the result
/// says so: a run that overruns its duration is a finding, not something to hide.
const STOP_WARN_S: f64 = 0.5;

/// Adds the KVM exit counters to `result`, with exits per unit of the workload (a
/// transaction, or a KiB moved), or a warning saying why there are none.
fn add_kvm(result: &mut TestResult, mut k: virtperf_wire::KvmCounters) {
    match (&k.reason, k.deltas.get("exits")) {
        (Some(why), _) => result.warnings.push(format!(
            "KVM exit counters are not visible from here ({why}); exits per transaction are not reported"
        )),
        (None, Some(&exits)) => {
            let (unit, work) = result.outcome.work();
            let units = unit.in_demand_units(work);
            k.exits_per_unit = (units > 0.0).then(|| exits as f64 / units);
            // The same counters by reason beside the guest-visible events, per the events
            // block's unit (transaction, or MB), so one block says what a round trip cost.
            if let Some(ev) = &mut result.events {
                let per = unit.in_events_units(work);
                for (name, v) in k.deltas.iter().filter(|(n, _)| n.contains("exits")) {
                    let key = format!("kvm_{name}");
                    ev.client.deltas.insert(key.clone(), *v);
                    if per > 0.0 {
                        ev.client.per_unit.insert(key, *v as f64 / per);
                    }
                }
            }
        }
        (None, None) => result.warnings.push(match k.unread.get("exits") {
            Some(why) => format!(
                "KVM's host-wide `exits` counter could not be read ({why}); exits per transaction are not reported"
            ),
            None => "KVM counters were read but have no `exits` total".to_string(),
        }),
    }
    result.kvm = Some(k);
}

/// Differences of two counter samples; a failed sample makes the whole thing unavailable
/// with its reason (never zeros that look like "no exits").
fn kvm_counters(
    before: Result<virtperf_kvm::DebugfsSample, virtperf_kvm::KvmError>,
    after: Result<virtperf_kvm::DebugfsSample, virtperf_kvm::KvmError>,
) -> virtperf_wire::KvmCounters {
    match (before, after) {
        (Ok(a), Ok(b)) => virtperf_wire::KvmCounters {
            available: true,
            reason: None,
            source: "/sys/kernel/debug/kvm".into(),
            // A counter absent at the start has no start value: left out, not counted
            // from 0.
            deltas: b
                .counters
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v.saturating_sub(*a.counters.get(k)?))))
                .collect(),
            exits_per_unit: None,
            unread: a.refused.into_iter().chain(b.refused).collect(),
        },
        (Err(e), _) | (_, Err(e)) => virtperf_wire::KvmCounters {
            available: false,
            reason: Some(e.to_string()),
            source: "/sys/kernel/debug/kvm".into(),
            ..Default::default()
        },
    }
}

/// Times `count` downloads of a URL served by someone else (`virtperf http --url`). Only the
/// client side is measured. A status outside 2xx fails the run unless `accept` lists it;
/// each download is bounded by `limits`. Once `cut` is raised (a signal), no download
/// starts; the one in flight ends as the workload's do (see `cut::join_within`).
pub fn run_url(
    url: &str,
    count: u32,
    accept: &[u16],
    limits: http::Limits,
    sock: virtperf_wire::SockOpts,
    cut: Option<&Arc<std::sync::atomic::AtomicBool>>,
    progress: ProgressFn,
) -> Result<TestResult> {
    sock.validate().map_err(|e| anyhow!(e))?;
    if !(1..=10_000).contains(&count) {
        bail!("--count must be between 1 and 10000");
    }
    if !url.starts_with("http://") {
        bail!("--url must start with http:// (https is not supported)");
    }
    let client_env = fingerprint();
    let side = Ctl::new(None);
    let downloads: Arc<Mutex<Vec<Fetched>>> = Arc::default();
    let (u, out, ok) = (url.to_string(), downloads.clone(), accept.to_vec());
    let agent = crate::roles::client_agent(sock, &side);
    let h = spawn_worker("http-client", &side, move |c, _| {
        crate::roles::download_series(&agent, &u, count, &c.stop, &out, &ok, &limits)
    })?;
    let ev0 = EventSnapshot::read();
    let t0 = ProcStat::read()?;
    let started = Instant::now();
    side.gate.open();
    while !h.is_finished() && !crate::cut::is_cut(cut) {
        progress(None);
        std::thread::sleep(Duration::from_millis(50));
    }
    let cut_early = !h.is_finished();
    side.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let peer = format!("the server at {url}");
    // A download that stalls ends by its own read timeout (DATA_TIMEOUT) and, after the
    // stop, is not counted: waiting a moment past that keeps the downloads that finished
    // (giving up on the worker first would lose them with its counts).
    let joined = crate::cut::join_within(
        vec![h],
        cut,
        || side.running_cpu_s(),
        &peer,
        DATA_TIMEOUT + Duration::from_secs(1),
    )?;
    let t1 = ProcStat::read()?;
    let events = ev0.delta(&EventSnapshot::read()).counts(None);
    // The body's size names the workload (at least 1 byte), it is not a measured figure:
    // what was received is in the downloads themselves.
    let bytes = downloads
        .lock()
        .ok()
        .and_then(|d| d.first().map(|f| f.bytes))
        .unwrap_or(0);
    let plan = Plan {
        count,
        sock,
        ..Plan::new(
            Workload::Http(virtperf_wire::HttpParams {
                bytes: bytes.max(1),
            }),
            Duration::ZERO,
        )
    };
    let client = SideReport {
        elapsed_s: started.elapsed().as_secs_f64(),
        cpu: t0.delta(&t1),
        threads: joined.cpu,
        // The download is the whole run: its threads' CPU is the interval's.
        window_cpu_s: None,
        flows: joined.flow_stats(),
        transactions: joined.transactions(),
        events: Some(events),
        setup_s: None,
        sock: side.applied.lock().ok().and_then(|a| a.clone()),
        zerocopy: None,
        // A foreign server's download: /proc/stat's user and system time is the measure.
        others_cpu_s: None,
        capture_cpu_s: None,
    };
    let downloads = downloads.lock().map(|d| d.clone()).unwrap_or_default();
    let mut r = assemble(Collected {
        plan: &plan,
        target: url.to_string(),
        client,
        client_hist: None,
        server: None,
        client_env,
        server_env: None,
        downloads,
        url: url.to_string(),
    })?;
    if cut_early {
        r.warnings.push(crate::cut::CUT_SHORT.to_string());
    }
    Ok(r)
}

/// The name of a message's type, for errors (never its contents: they are the peer's).
pub(crate) fn kind(m: &Message) -> &'static str {
    match m {
        Message::Hello { .. } => "hello",
        Message::Welcome { .. } => "welcome",
        Message::Fingerprint => "fingerprint",
        Message::Env { .. } => "env",
        Message::Prepare { .. } => "prepare",
        Message::Ready { .. } => "ready",
        Message::Waiting { .. } => "waiting",
        Message::Hold => "hold",
        Message::Held { .. } => "held",
        Message::Start => "start",
        Message::Started => "started",
        Message::End => "end",
        Message::Measure => "measure",
        Message::Stop => "stop",
        Message::Report { .. } => "report",
        Message::Drive { .. } => "drive",
        Message::Outcome { .. } => "outcome",
        Message::Explain { .. } => "explain",
        Message::Explained { .. } => "explained",
        Message::Error { .. } => "error",
    }
}
