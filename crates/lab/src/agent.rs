//! The agent: serves the server half of every workload to clients that speak the control
//! protocol (`virtperf serve`).
//!
//! One thread per control connection. A connection that sends anything unexpected
//! (garbage, an oversized frame, an unknown message, a wrong token or version) gets an
//! `Error` message and is closed; the agent itself keeps serving.
//!
//! No client can lock others out (docs/security.md): a new connection has
//! [`HANDSHAKE_TIMEOUT`] in total to present a valid hello, at most
//! [`MAX_UNAUTHENTICATED`] such connections wait at once (the oldest is closed to make room),
//! and only sessions past the hello count against `--max-clients`. Data ports accept only
//! the connections a test expects, from the client's address, and close the rest at once.

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use virtperf_load::sock::cpu_allowed;
use virtperf_measure::fingerprint;
use virtperf_wire::{
    write_message, Message, SideReport, SockOpts, WireError, Workload, MAX_DURATION_MS,
    PROTOCOL_VERSION,
};

use crate::client::kind;
use crate::roles;
use crate::side::{join_all, Ctl};
use crate::{SETUP_TIMEOUT, STOP_GRACE};
use virtperf_machine::lock::{LockError, MachineLock, Mode as LockMode};

/// Agent settings (`virtperf serve` flags).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Address to listen on; loopback unless the user says otherwise.
    pub bind: IpAddr,
    /// Control port (0 picks a free one).
    pub port: u16,
    /// Shared secret clients must present, if set.
    pub token: Option<String>,
    /// Most authenticated sessions (past a valid hello) served at once.
    pub max_clients: usize,
    /// Longest test a client may ask for (at most [`MAX_DURATION_MS`]); also bounds how
    /// long a byte-count test may run.
    pub max_duration: Duration,
    /// Log one line per test to stderr.
    pub verbose: bool,
    /// Accept `Drive` requests: run the client half of a test against another agent. Off
    /// by default, so an agent never sends traffic anywhere on a client's say-so; the guest
    /// agent virtperf boots turns it on (its only peers are on the tap virtperf made).
    /// Requires a token: [`serve`] refuses to start without one.
    pub allow_drive: bool,
    /// `serve --concurrent N`: run up to N tests at once, beside other measurements on this
    /// machine. None (the default): each test holds the machine lock, so a second client
    /// waits for the first test (and for any other measurement here) to end.
    pub concurrent: Option<usize>,
    /// `serve --max-flows`: most data connections one test may ask for (each is a socket
    /// held for the test's length).
    pub max_flows: u32,
    /// `serve --max-threads`: most worker threads one test may ask for per side.
    pub max_threads: u32,
    /// `serve --data-ports FIRST-LAST`: every data listener and UDP data socket in this
    /// range, so a NAT or a port forward of the control port and the range is enough; None:
    /// ports the kernel picks.
    pub data_ports: Option<(u16, u16)>,
}

/// Default of `serve --max-flows`: the 10,000 flows of the scaling benchmark, with room.
pub const DEFAULT_MAX_FLOWS: u32 = 20_000;
/// Default of `serve --max-threads`.
pub const DEFAULT_MAX_THREADS: u32 = 64;

/// Refuses a test with more flows or threads than this agent allows.
fn check_flows(cfg: &AgentConfig, w: &Workload) -> Result<()> {
    let flows = w.connections();
    if flows > cfg.max_flows {
        bail!(
            "{flows} flows exceed this agent's limit of {} (set by `serve --max-flows`): ask for fewer --flows",
            cfg.max_flows
        );
    }
    if let Some((_, t)) = w.multiplexed() {
        if t > cfg.max_threads {
            bail!(
                "{t} threads exceed this agent's limit of {} (set by `serve --max-threads`): ask for fewer --threads",
                cfg.max_threads
            );
        }
    }
    Ok(())
}

/// Time a new connection has, in total (not per read), to present a valid hello: a client
/// that trickles one byte at a time cannot hold a connection longer than this without the
/// token.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Most connections waiting to present their hello at once. When one more arrives, the
/// oldest waiting one is closed: keeping a real client out then needs a stream of new
/// connections faster than the real client completes its hello, not a few idle sockets.
pub const MAX_UNAUTHENTICATED: usize = 64;

/// Reads a token from `path` (its first line), or from the first line of standard input
/// when `path` is `-`. A token in a file or in `$VIRTPERF_TOKEN` is not visible in `ps`,
/// unlike one given with `--token`.
pub fn read_token_file(path: &std::path::Path) -> Result<String> {
    let text = if path.as_os_str() == "-" {
        let mut line = String::new();
        io::stdin()
            .read_line(&mut line)
            .context("reading the token from standard input")?;
        line
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the token file {}", path.display()))?
    };
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.is_empty() {
        bail!(
            "the token file {} is empty: put the token on its first line",
            path.display()
        );
    }
    Ok(token)
}

/// Whether the client's token matches, in time that does not depend on where the two
/// differ (`subtle`), so the token cannot be guessed byte by byte from response times.
/// Only the length can be learnt that way, and virtperf's own tokens all have one length.
fn token_matches(expected: &Option<String>, got: &Option<String>) -> bool {
    use subtle::ConstantTimeEq;
    match (expected, got) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some(e), Some(g)) => bool::from(e.as_bytes().ct_eq(g.as_bytes())),
    }
}

/// Binds the control listener. Separate from [`serve`] so a caller can learn the port (for
/// `--port 0`) before serving starts.
pub fn bind(cfg: &AgentConfig) -> Result<TcpListener> {
    // Refused before the port is taken (and "listening" printed): see `serve`.
    check_drive_token(cfg)?;
    let bound = crate::ports::bind_control(cfg.bind, cfg.port, cfg.data_ports);
    bound.map_err(|e| {
        let hint = if e.kind() == io::ErrorKind::AddrInUse {
            " (another agent running? pick another --port)"
        } else {
            ""
        };
        anyhow!("cannot listen on {}:{}: {e}{hint}", cfg.bind, cfg.port)
    })
}

/// Who is connected: connections still owing their hello (each with a clone of its
/// socket, so the oldest can be closed from the accept loop) and the number of sessions.
#[derive(Default)]
struct Slots {
    pending: Mutex<Pending>,
    sessions: AtomicUsize,
}

#[derive(Default)]
struct Pending {
    next: u64,
    conns: BTreeMap<u64, TcpStream>,
}

impl Slots {
    /// Registers a new connection as waiting for its hello, closing the oldest waiting one
    /// if all [`MAX_UNAUTHENTICATED`] places are taken. `None`: it could not be registered
    /// (no descriptor left to clone it), so it must be dropped.
    fn admit(&self, s: &TcpStream) -> Option<u64> {
        let clone = s.try_clone().ok()?;
        let mut p = self.pending.lock().ok()?;
        if p.conns.len() >= MAX_UNAUTHENTICATED {
            if let Some((_, oldest)) = p.conns.pop_first() {
                // Its thread's read returns at once and the thread ends.
                let _ = oldest.shutdown(Shutdown::Both);
            }
        }
        p.next += 1;
        let id = p.next;
        p.conns.insert(id, clone);
        Some(id)
    }

    /// The connection `id` has presented its hello (or failed to).
    fn leave(&self, id: u64) {
        if let Ok(mut p) = self.pending.lock() {
            p.conns.remove(&id);
        }
    }

    /// Takes a session place if fewer than `max` are taken; released when dropped.
    fn session(&self, max: usize) -> Option<SessionPlace<'_>> {
        self.sessions
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| SessionPlace(&self.sessions))
    }
}

/// `Drive`: runs a test as its client, against the agent the message names, and sends the
/// result back (an agent started with `--allow-drive` only).
fn drive(s: &mut TcpStream, cfg: &AgentConfig, m: Message) -> Result<()> {
    let Message::Drive { to, plan } = m else {
        bail!("expected a drive request, got {}", kind(&m));
    };
    if !cfg.allow_drive {
        bail!("this agent does not drive tests (start it with `serve --allow-drive`)");
    }
    check_duration(cfg, plan.duration_ms)?;
    // Checked whole by client::run (plan.validate), as any client's plan is.
    let plan = crate::plan::Plan::from_wire(plan);
    let target = crate::plan::Target {
        host: to.host,
        port: to.port,
        token: to.token,
        lock: to.lock,
    };
    let result = crate::client::run(&target, &plan, &|_| {})
        .with_context(|| format!("driving a test against {}", target.host))?;
    s.set_write_timeout(Some(SETUP_TIMEOUT))?;
    write_message(
        s,
        &Message::Outcome {
            result: Box::new(result),
        },
    )?;
    Ok(())
}

/// `Explain`: runs the probe the program registered for it (explain's battery) under the
/// machine lock and sends its result back (`--allow-drive` only).
fn run_probe(
    s: &mut TcpStream,
    cfg: &AgentConfig,
    client_lock: Option<&str>,
    battery: serde_json::Value,
) -> Result<()> {
    if !cfg.allow_drive {
        bail!("this agent does not run explain's battery (start it with `serve --allow-drive`)");
    }
    let probe = crate::probe::find(crate::probe::EXPLAIN)
        .ok_or_else(|| anyhow!("this agent has no {} probe", crate::probe::EXPLAIN))?;
    check_duration(cfg, probe.bound(&battery)?.as_millis() as u64)?;
    // The probe may change this machine's knobs: one measurement at a time. The
    // agents it starts are told the lock is held for it.
    let lock = lock_for_test(s, cfg, client_lock)?;
    let nonce = match &lock {
        Some(l) if l.held() => Some(l.nonce().to_string()),
        _ => client_lock.map(str::to_string),
    };
    let out = probe.run(battery, nonce)?;
    drop(lock);
    s.set_write_timeout(Some(SETUP_TIMEOUT))?;
    write_message(s, &Message::Explained { battery: out })?;
    Ok(())
}

struct SessionPlace<'a>(&'a AtomicUsize);

impl Drop for SessionPlace<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn check_drive_token(cfg: &AgentConfig) -> Result<()> {
    if cfg.allow_drive && cfg.token.is_none() {
        bail!("--allow-drive needs a token (--token-file FILE or $VIRTPERF_TOKEN): without one anybody could make this agent send traffic anywhere");
    }
    Ok(())
}

/// Serves control connections forever (until the process is killed). Refuses to start an
/// agent that drives tests (`allow_drive`) without a token: it would send traffic anywhere
/// on anyone's say-so.
pub fn serve(listener: TcpListener, cfg: AgentConfig) -> Result<()> {
    check_drive_token(&cfg)?;
    let cfg = Arc::new(cfg);
    let slots = Arc::new(Slots::default());
    loop {
        let (s, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning; never exit.
                eprintln!("virtperf agent: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        let Some(id) = slots.admit(&s) else {
            continue; // dropped: closed at once
        };
        let (cfg, slots2) = (cfg.clone(), slots.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("ctl-{peer}"))
            .spawn(move || handle(s, peer, &cfg, &slots2, id));
        if let Err(e) = spawned {
            slots.leave(id);
            eprintln!("virtperf agent: cannot start a thread for {peer}: {e}");
        }
    }
}

fn handle(mut s: TcpStream, peer: SocketAddr, cfg: &AgentConfig, slots: &Slots, id: u64) {
    let _ = s.set_nodelay(true);
    crate::control_keepalive(&s);
    let _ = s.set_write_timeout(Some(SETUP_TIMEOUT));
    let hello = handshake(&mut s, cfg);
    slots.leave(id);
    let result = hello.and_then(|client_lock| {
        let _place = slots.session(cfg.max_clients).ok_or_else(|| {
            anyhow!(
                "agent busy: {} tests already running; try again later",
                cfg.max_clients
            )
        })?;
        write_message(
            &mut s,
            &Message::Welcome {
                version: PROTOCOL_VERSION,
                agent: format!("virtperf {}", env!("CARGO_PKG_VERSION")),
            },
        )?;
        session(&mut s, cfg, client_lock.as_deref())
    });
    if let Err(e) = result {
        let message = format!("{e:#}");
        if cfg.verbose {
            eprintln!("virtperf agent: {peer}: {message}");
        }
        let _ = write_message(&mut s, &Message::Error { message });
    }
}

/// Reads one message, all of which must arrive within `timeout`.
fn recv(s: &mut TcpStream, timeout: Duration, waiting_for: &str) -> Result<Message> {
    match virtperf_wire::read_message_within(s, timeout, virtperf_wire::MAX_CONTROL_FRAME) {
        Ok(m) => Ok(m),
        Err(e) if e.is_timeout() => {
            bail!(
                "client sent no {waiting_for} within {}",
                humantime::format_duration(timeout)
            )
        }
        Err(WireError::Closed) => Err(WireError::Closed.into()),
        Err(e) => Err(anyhow!("bad message while waiting for {waiting_for}: {e}")),
    }
}

/// Reads and checks the hello, all within [`HANDSHAKE_TIMEOUT`].
/// Returns the id of the machine lock the client holds, if it said.
fn handshake(s: &mut TcpStream, cfg: &AgentConfig) -> Result<Option<String>> {
    match recv(s, HANDSHAKE_TIMEOUT, "hello")? {
        Message::Hello {
            version,
            token,
            lock,
        } => {
            if version != PROTOCOL_VERSION {
                bail!(
                    "protocol version mismatch: agent speaks {PROTOCOL_VERSION}, client {version}; use the same virtperf version on both sides"
                );
            }
            if !token_matches(&cfg.token, &token) {
                bail!("wrong or missing token: the agent was started with a token");
            }
            Ok(lock)
        }
        other => bail!("expected hello, got {}", kind(&other)),
    }
}

/// Holds this agent process granted (`Hold`), by id, while their connections last.
/// Process-wide, like the machine lock they stand for: a test presenting one of them runs
/// without waiting for the lock, even where the lock file cannot say who holds it.
static HOLDS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A hold granted to one session: the machine lock, if one was taken for it, and its id
/// registered in [`HOLDS`] until the session ends.
struct Holding {
    _lock: Option<MachineLock>,
    id: Option<String>,
    /// When the hold ends, whatever the holder sends: `--max-duration` after `Held`.
    until: Instant,
}

impl Drop for Holding {
    fn drop(&mut self) {
        if let (Some(id), Ok(mut h)) = (&self.id, HOLDS.lock()) {
            h.retain(|x| x != id);
        }
    }
}

/// `Hold`: takes the machine lock for this session (as a test would, telling the client
/// while it waits) and answers `Held` with the id its other connections present.
fn hold(s: &mut TcpStream, cfg: &AgentConfig, client_lock: Option<&str>) -> Result<Holding> {
    let lock = lock_for_test(s, cfg, client_lock)?;
    let (id, ours) = match &lock {
        Some(l) if l.held() => (Some(l.nonce().to_string()), true),
        // Held for this client already (by itself, on this machine), or nothing to hold.
        _ => (client_lock.map(str::to_string), false),
    };
    if let (true, Some(id), Ok(mut h)) = (ours, &id, HOLDS.lock()) {
        h.push(id.clone());
    }
    let holding = Holding {
        _lock: lock,
        id: id.clone().filter(|_| ours),
        until: Instant::now() + cfg.max_duration.min(Duration::from_millis(MAX_DURATION_MS)),
    };
    write_message(s, &Message::Held { lock: id })?;
    Ok(holding)
}

/// Serves one authenticated client's requests until it hangs up.
fn session(s: &mut TcpStream, cfg: &AgentConfig, client_lock: Option<&str>) -> Result<()> {
    let mut client_lock = client_lock.map(str::to_string);
    let mut holding: Option<Holding> = None;
    loop {
        // A holding client is quiet while its other connections run: it may stay as long
        // as a test may, counted from `Held`, not from its last message (a holder that
        // keeps talking must not keep the machine past the agent's limit).
        let hold_ended = || {
            anyhow!(
                "the hold ended: it lasts at most --max-duration ({}) after it was granted, whatever its requests",
                humantime::format_duration(cfg.max_duration)
            )
        };
        let idle = match &holding {
            Some(h) => match h.until.saturating_duration_since(Instant::now()) {
                left if left.is_zero() => return Err(hold_ended()),
                left => left,
            },
            None => SETUP_TIMEOUT * 6,
        };
        let msg = match recv(s, idle, "request") {
            Ok(m) => m,
            Err(e) if matches!(e.downcast_ref::<WireError>(), Some(WireError::Closed)) => {
                return Ok(())
            }
            Err(_) if holding.as_ref().is_some_and(|h| Instant::now() >= h.until) => {
                return Err(hold_ended())
            }
            Err(e) => return Err(e),
        };
        match msg {
            Message::Fingerprint => write_message(
                s,
                &Message::Env {
                    env: Box::new(fingerprint()),
                },
            )?,
            Message::Prepare {
                workload,
                duration_ms,
                server_cpu,
                sock,
                omit_ms,
            } => {
                let summary = run_test(
                    s,
                    cfg,
                    client_lock.as_deref(),
                    &TestAsked {
                        w: &workload,
                        duration_ms,
                        omit_ms: omit_ms.unwrap_or(0),
                        server_cpu,
                        sock: &sock,
                    },
                )?;
                if cfg.verbose {
                    eprintln!(
                        "virtperf agent: {}: {} done: {} transactions, {} bytes in, {} bytes out",
                        s.peer_addr().map(|a| a.to_string()).unwrap_or_default(),
                        workload.name(),
                        summary.transactions,
                        summary.flows.iter().map(|f| f.bytes_rx).sum::<u64>(),
                        summary.flows.iter().map(|f| f.bytes_tx).sum::<u64>()
                    );
                }
            }
            m @ Message::Drive { .. } => drive(s, cfg, m)?,
            Message::Explain { battery } => run_probe(s, cfg, client_lock.as_deref(), battery)?,
            // Held already: the same hold again (a new one would let go of the first).
            Message::Hold if holding.is_some() => write_message(
                s,
                &Message::Held {
                    lock: client_lock.clone(),
                },
            )?,
            Message::Hold => {
                let h = hold(s, cfg, client_lock.as_deref())?;
                if let Some(id) = &h.id {
                    client_lock = Some(id.clone());
                }
                holding = Some(h);
            }
            other => bail!("unexpected {} message", kind(&other)),
        }
    }
}

/// How often a waiting agent tells its client it is still waiting (well inside the
/// client's set-up timeout).
const WAITING_EVERY: Duration = Duration::from_secs(3);

/// How long a test waits for the machine lock before the agent tells its client so.
const HANDOVER_GRACE: Duration = Duration::from_millis(500);

/// Takes the machine lock for one test, telling the client while it waits. No lock is
/// taken when the agent serves tests concurrently (`serve --concurrent`), when the lock is
/// held for this very test (by the client on this machine, or by the process that started
/// this private agent), or when the lock file cannot be used at all (said once per test
/// when verbose; a guest's initramfs, say, may have no /run).
fn lock_for_test(
    ctl: &mut TcpStream,
    cfg: &AgentConfig,
    client_lock: Option<&str>,
) -> Result<Option<MachineLock>> {
    if cfg.concurrent.is_some() {
        return Ok(None);
    }
    if let (Some(n), Ok(h)) = (client_lock, HOLDS.lock()) {
        if h.iter().any(|x| x == n) {
            return Ok(None);
        }
    }
    let peer = ctl.peer_addr().map(|a| a.to_string()).unwrap_or_default();
    let what = format!("virtperf serve: a test for {peer}");
    let mut told: Option<Instant> = None;
    let asked = Instant::now();
    loop {
        match MachineLock::acquire(LockMode::NoWait, &what, &mut |_| {}) {
            Ok(l) => return Ok(Some(l)),
            Err(LockError::Busy(h)) => {
                if h.as_ref()
                    .zip(client_lock)
                    .is_some_and(|(h, n)| h.nonce == n)
                {
                    return Ok(None);
                }
                // A lock let go of within the grace is a hand-over from the client's
                // previous test (its report is sent a moment before its lock is dropped),
                // not a wait worth telling.
                let tell = match told {
                    None => asked.elapsed() >= HANDOVER_GRACE,
                    Some(t) => t.elapsed() >= WAITING_EVERY,
                };
                if tell {
                    let holder = h
                        .map(|h| h.to_string())
                        .unwrap_or_else(|| "an unknown process".into());
                    write_message(ctl, &Message::Waiting { holder })
                        .context("the client left while the agent waited for its machine")?;
                    told = Some(Instant::now());
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(LockError::Io(e)) => {
                if cfg.verbose {
                    eprintln!("virtperf agent: serving without the machine lock: {e}");
                }
                return Ok(None);
            }
        }
    }
}

/// Refuses a test longer than this agent allows.
fn check_duration(cfg: &AgentConfig, duration_ms: u64) -> Result<()> {
    let max = cfg.max_duration.min(Duration::from_millis(MAX_DURATION_MS));
    if u128::from(duration_ms) > max.as_millis() {
        bail!(
            "a {} test exceeds this agent's limit of {} (set by `serve --max-duration`): ask for a shorter --duration, or a shorter --omit (the warm-up runs within the limit too)",
            humantime::format_duration(Duration::from_millis(duration_ms)),
            humantime::format_duration(max)
        );
    }
    Ok(())
}

/// Stops a test's workers however `run_test` ends: raises the stop flag, opens the gate so
/// workers still waiting return at once, and wakes threads blocked in `accept` or serving.
struct Teardown {
    side: Ctl,
    wake: crate::half::Wake,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        self.side.stop.store(true, Ordering::SeqCst);
        self.side.gate.open();
        self.wake.wake();
    }
}

/// What a client's `Prepare` asks for.
struct TestAsked<'a> {
    w: &'a Workload,
    duration_ms: u64,
    /// The warm-up before the measured interval (`--omit`); 0: none.
    omit_ms: u64,
    server_cpu: Option<u32>,
    sock: &'a SockOpts,
}

/// Runs the server half of one test on the control connection `ctl`.
fn run_test(
    ctl: &mut TcpStream,
    cfg: &AgentConfig,
    client_lock: Option<&str>,
    asked: &TestAsked,
) -> Result<SideReport> {
    let TestAsked {
        w,
        duration_ms,
        omit_ms,
        server_cpu,
        sock,
    } = *asked;
    if omit_ms > 0 && !w.is_timed() {
        bail!("a warm-up (--omit) applies to timed workloads only");
    }
    // The agent runs the warm-up too: its limits cover the whole run.
    let run_ms = duration_ms.saturating_add(omit_ms);
    check_test(cfg, w, sock, run_ms, server_cpu)?;
    // One measurement at a time on this machine: held until the test's report is sent.
    let _machine = lock_for_test(ctl, cfg, client_lock)?;
    let (listener, ip, client, key) = open_data_port(ctl, cfg, w, sock)?;

    let mut td = Teardown {
        side: Ctl::new(server_cpu).with_omit(Some(Duration::from_millis(omit_ms))),
        wake: crate::half::Wake::default(),
    };
    let side = td.side.clone();
    let setup0 = Instant::now();
    let watch = SetupWatch::start(ctl, &listener)?;
    let handles = roles::server(
        w,
        crate::half::ServerHalf {
            listener,
            client,
            sock: *sock,
            side: &side,
            wake: &mut td.wake,
            window: w.is_timed().then(|| Duration::from_millis(duration_ms)),
            key,
            ports: cfg.data_ports,
        },
    );
    if watch.finish() {
        bail!("the client closed its control connection while the agent waited for its data connections");
    }
    let handles = handles?;

    let setup_s = w.multiplexed().map(|_| setup0.elapsed().as_secs_f64());
    match recv(ctl, SETUP_TIMEOUT, "start")? {
        Message::Start => {}
        other => bail!("expected start, got {}", kind(&other)),
    }
    // The interface the test's traffic arrives by: in a guest its virtio-net device,
    // whose kicks and interrupts are counted with the events.
    // A client on one of our own addresses reaches us over loopback, not the device.
    let nic = (ip != client)
        .then(|| virtperf_measure::nic::interface_of(ip))
        .flatten();
    let window = crate::window::Window::open(nic, Vec::new())?;
    side.gate.open();
    write_message(ctl, &Message::Started)?;
    let closed = close_on_end(ctl, stop_limit(cfg, w, run_ms), window, &side, &handles)?;
    drop(td);
    let joined = join_all(handles)?;
    let report = closed.report(&joined, &side, setup_s);
    // A report over the limit is not sent (the client would take it for another protocol);
    // the error below says what happened instead.
    virtperf_wire::write_message_max(
        ctl,
        &Message::Report {
            side: Box::new(report.clone()),
        },
        virtperf_wire::report_limit(w.connections()),
    )
    .map_err(|e| anyhow!("the agent's report could not be sent: {e}"))?;
    Ok(report)
}

/// Watches a test's control connection while the agent waits for its data connections: a
/// client that gives up then (it closes the connection) ends the wait at once, so no
/// phantom test holds the agent's machine for the whole set-up timeout (and no chain of
/// them does). Its end is seen as a hang-up (`POLLRDHUP`), never by reading: the client's
/// next message stays where it is.
struct SetupWatch {
    done: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<bool>,
}

impl SetupWatch {
    fn start(ctl: &TcpStream, listener: &TcpListener) -> Result<SetupWatch> {
        let (ctl, listener) = (ctl.try_clone()?, listener.try_clone()?);
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("setup-watch".into())
            .spawn(move || {
                use rustix::event::{poll, PollFd, PollFlags, Timespec};
                let nap = Timespec {
                    tv_sec: 0,
                    tv_nsec: 50_000_000,
                };
                while !d.load(Ordering::SeqCst) {
                    let mut fds = [PollFd::new(&ctl, PollFlags::RDHUP)];
                    if poll(&mut fds, Some(&nap)).is_ok_and(|n| n > 0) {
                        let gone = PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR;
                        if fds[0].revents().intersects(gone) {
                            // A listening socket shut down for reading wakes its accept
                            // with an error: the wait for data connections ends now.
                            let _ = socket2::SockRef::from(&listener).shutdown(Shutdown::Read);
                            return true;
                        }
                    }
                }
                false
            })?;
        Ok(SetupWatch { done, thread })
    }

    /// Stops watching; whether the client had gone.
    fn finish(self) -> bool {
        self.done.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or(false)
    }
}

/// Waits for the client's `End` and reads this side's counters then (the transactions in
/// flight are served on until `Stop`), then for its `Stop`. A client that sends `Stop`
/// alone (a hand-written one) has the counters read at its `Stop`.
fn close_on_end(
    ctl: &mut TcpStream,
    limit: Duration,
    window: crate::window::Window,
    side: &Ctl,
    handles: &crate::half::Handles,
) -> Result<crate::window::Closed> {
    let mut window = window;
    let mut msg = recv(ctl, limit, "end")?;
    if matches!(msg, Message::Measure) {
        // The warm-up is over: the interval opens now, and the engines mark their counts.
        side.begin_measuring();
        window = window.reopen()?;
        msg = recv(ctl, limit, "end")?;
    }
    let ended = match msg {
        Message::End => true,
        Message::Stop => false,
        other => bail!("expected end, got {}", kind(&other)),
    };
    let closed = window.close(side, handles.len(), side.cpu)?;
    if !ended {
        return Ok(closed);
    }
    match recv(ctl, limit, "stop")? {
        Message::Stop => Ok(closed),
        other => bail!("expected stop, got {}", kind(&other)),
    }
}

/// Refuses a test this agent will not run: bad parameters, too long, too many flows, more
/// descriptors than it may open, a CPU it does not have.
fn check_test(
    cfg: &AgentConfig,
    w: &Workload,
    sock: &SockOpts,
    duration_ms: u64,
    server_cpu: Option<u32>,
) -> Result<()> {
    w.validate().map_err(|e| anyhow!(e))?;
    sock.validate().map_err(|e| anyhow!(e))?;
    if sock.mptcp == Some(true) {
        virtperf_load::sock::mptcp_available().map_err(|e| anyhow!("the agent's machine: {e}"))?;
    }
    check_duration(cfg, duration_ms)?;
    check_flows(cfg, w)?;
    crate::ports::check_range(cfg.data_ports, w)?;
    crate::fds::make_room(w, "the agent").map_err(|e| anyhow!(e))?;
    if let Some(cpu) = server_cpu {
        if !cpu_allowed(cpu) {
            bail!("server CPU {cpu} does not exist or is not allowed on the agent's machine");
        }
    }
    Ok(())
}

/// Binds the test's data port on the address the client used for control and sends it
/// with the test's key (`Ready`): the listener, our address, the client's, the key.
fn open_data_port(
    ctl: &mut TcpStream,
    cfg: &AgentConfig,
    w: &Workload,
    sock: &SockOpts,
) -> Result<(TcpListener, IpAddr, IpAddr, crate::side::DataKey)> {
    // Data connections arrive on the address the client used for control, and come from
    // the address it used: connections from anywhere else are closed at once.
    let ip = ctl.local_addr()?.ip();
    let client = ctl.peer_addr()?.ip();
    let listener = crate::ports::bind_in(cfg.data_ports, |p| {
        data_listener(SocketAddr::new(ip, p), sock)
    })
    .context("binding a data port")?;
    // Accepted connections inherit the MSS and buffers their SYN-ACK announces.
    virtperf_load::sock::prepare_before_connect(&listener, sock)?;
    // Thousands of flows connect at once: a deeper backlog, set before Ready (the client
    // starts connecting as soon as it has the port).
    if let Some((flows, _)) = w.multiplexed() {
        virtperf_load::mux::deepen_backlog(&listener, flows.max(128))?;
    }
    let data_port = listener.local_addr()?.port();
    let key = crate::side::DataKey::random()?;
    write_message(
        ctl,
        &Message::Ready {
            data_port,
            key: key.hex(),
        },
    )?;
    Ok((listener, ip, client, key))
}

/// The test's data listener: MPTCP when the test asks for it (a plain TCP client falls
/// back to TCP on it, as the kernel does), else TCP.
fn data_listener(addr: SocketAddr, sock: &SockOpts) -> std::io::Result<TcpListener> {
    let s = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(virtperf_load::sock::data_protocol(sock)),
    )?;
    // A port of a `--data-ports` range is used again and again: the connections of the
    // test before may still be in TIME_WAIT on it, which SO_REUSEADDR lets a new listener
    // bind over (on Linux it never lets two listeners share the port: busy stays busy).
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(1024)?;
    Ok(s.into())
}

/// How long the agent waits for `Stop`: a client that never says stop cannot keep the
/// agent busy forever. Timed tests are bounded by their duration plus a grace period,
/// byte-count tests by the agent's limit.
fn stop_limit(cfg: &AgentConfig, w: &Workload, duration_ms: u64) -> Duration {
    if w.is_timed() {
        Duration::from_millis(duration_ms) + STOP_GRACE
    } else {
        cfg.max_duration
            .min(Duration::from_millis(MAX_DURATION_MS))
            .max(Duration::from_secs(1))
    }
}
