//! The agent: serves the server half of every workload to clients that speak the control
//! protocol (`virtperf serve`).
//!
//! One thread per control connection, capped. A connection that sends anything unexpected
//! (garbage, an oversized frame, an unknown message, a wrong token or version) gets an
//! `Error` message and is closed; the agent itself keeps serving.

use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use virtperf_load::sock::{cpu_allowed, prepare_data_socket, wake_listener};
use virtperf_load::{bulk, crr, http, rr, stream};
use virtperf_measure::{fingerprint, ProcStat};
use virtperf_wire::{
    read_message, write_message, Message, SideReport, SockOpts, WireError, Workload,
    MAX_DURATION_MS, PROTOCOL_VERSION,
};

use crate::side::{accept_n, join_all, spawn_conn_worker, spawn_worker, Ctl};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT, STOP_GRACE};

/// Agent settings (`virtperf serve` flags).
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Address to listen on; loopback unless the user says otherwise.
    pub bind: IpAddr,
    /// Control port (0 picks a free one).
    pub port: u16,
    /// Shared secret clients must present, if set.
    pub token: Option<String>,
    /// Most control connections served at once.
    pub max_clients: usize,
    /// Log one line per test to stderr.
    pub verbose: bool,
    /// Accept `Drive` requests: run the client half of a test against another agent. Off
    /// by default, so an agent never sends traffic anywhere on a client's say-so; the guest
    /// agent virtperf boots turns it on (its only peers are on the tap virtperf made).
    pub allow_drive: bool,
}

/// Binds the control listener. Separate from [`serve`] so a caller can learn the port (for
/// `--port 0`) before serving starts.
pub fn bind(cfg: &AgentConfig) -> Result<TcpListener> {
    TcpListener::bind((cfg.bind, cfg.port)).map_err(|e| {
        let hint = if e.kind() == io::ErrorKind::AddrInUse {
            " (another agent running? pick another --port)"
        } else {
            ""
        };
        anyhow!("cannot listen on {}:{}: {e}{hint}", cfg.bind, cfg.port)
    })
}

/// Serves control connections forever (until the process is killed).
pub fn serve(listener: TcpListener, cfg: AgentConfig) -> Result<()> {
    let cfg = Arc::new(cfg);
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let (mut s, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning; never exit.
                eprintln!("virtperf agent: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if active.load(Ordering::SeqCst) >= cfg.max_clients {
            let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
            let _ = write_message(
                &mut s,
                &Message::Error {
                    message: format!("agent busy: {} tests already running", cfg.max_clients),
                },
            );
            continue;
        }
        active.fetch_add(1, Ordering::SeqCst);
        let (cfg, active) = (cfg.clone(), active.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("ctl-{peer}"))
            .spawn(move || {
                handle(s, peer, &cfg);
                active.fetch_sub(1, Ordering::SeqCst);
            });
        if let Err(e) = spawned {
            eprintln!("virtperf agent: cannot start a thread for {peer}: {e}");
        }
    }
}

fn handle(mut s: TcpStream, peer: SocketAddr, cfg: &AgentConfig) {
    let _ = s.set_nodelay(true);
    let _ = s.set_write_timeout(Some(SETUP_TIMEOUT));
    if let Err(e) = session(&mut s, cfg) {
        let message = format!("{e:#}");
        if cfg.verbose {
            eprintln!("virtperf agent: {peer}: {message}");
        }
        let _ = write_message(&mut s, &Message::Error { message });
    }
}

fn recv(s: &mut TcpStream, timeout: Duration, waiting_for: &str) -> Result<Message> {
    s.set_read_timeout(Some(timeout))?;
    match read_message(s) {
        Ok(m) => Ok(m),
        Err(e) if e.is_timeout() => {
            bail!("client sent no {waiting_for} within {}s", timeout.as_secs())
        }
        Err(WireError::Closed) => Err(WireError::Closed.into()),
        Err(e) => Err(anyhow!("bad message while waiting for {waiting_for}: {e}")),
    }
}

fn session(s: &mut TcpStream, cfg: &AgentConfig) -> Result<()> {
    match recv(s, SETUP_TIMEOUT, "hello")? {
        Message::Hello { version, token } => {
            if version != PROTOCOL_VERSION {
                bail!(
                    "protocol version mismatch: agent speaks {PROTOCOL_VERSION}, client {version}; use the same virtperf version on both sides"
                );
            }
            if cfg.token.is_some() && token != cfg.token {
                bail!("wrong or missing token: the agent was started with --token");
            }
        }
        other => bail!("expected hello, got {}", kind(&other)),
    }
    write_message(
        s,
        &Message::Welcome {
            version: PROTOCOL_VERSION,
            agent: format!("virtperf {}", env!("CARGO_PKG_VERSION")),
        },
    )?;
    loop {
        let msg = match recv(s, SETUP_TIMEOUT * 6, "request") {
            Ok(m) => m,
            Err(e) if matches!(e.downcast_ref::<WireError>(), Some(WireError::Closed)) => {
                return Ok(())
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
            } => {
                let summary = run_test(s, &workload, duration_ms, server_cpu, &sock)?;
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
            Message::Drive {
                to,
                workload,
                duration_ms,
                client_cpu,
                server_cpu,
                count,
                sock,
            } => {
                if !cfg.allow_drive {
                    bail!("this agent does not drive tests (start it with `serve --allow-drive`)");
                }
                let plan = crate::client::Plan {
                    workload,
                    duration: Duration::from_millis(duration_ms),
                    client_cpu,
                    server_cpu,
                    count,
                    sock,
                    capture: None,
                    kvm_stats: false,
                };
                let target = crate::client::Target {
                    host: to.host,
                    port: to.port,
                    token: to.token,
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
            }
            other => bail!("unexpected {} message", kind(&other)),
        }
    }
}

fn kind(m: &Message) -> &'static str {
    match m {
        Message::Hello { .. } => "hello",
        Message::Welcome { .. } => "welcome",
        Message::Fingerprint => "fingerprint",
        Message::Env { .. } => "env",
        Message::Prepare { .. } => "prepare",
        Message::Ready { .. } => "ready",
        Message::Start => "start",
        Message::Started => "started",
        Message::Stop => "stop",
        Message::Report { .. } => "report",
        Message::Drive { .. } => "drive",
        Message::Outcome { .. } => "outcome",
        Message::Error { .. } => "error",
    }
}

/// Stops a test's workers however `run_test` ends: raises the stop flag, opens the gate so
/// workers still waiting return at once, and wakes threads blocked in `accept`.
struct Teardown {
    side: Ctl,
    crr: Option<Arc<TcpListener>>,
    http: Option<Arc<virtperf_load::http::HttpServer>>,
}

impl Drop for Teardown {
    fn drop(&mut self) {
        self.side.stop.store(true, Ordering::SeqCst);
        self.side.gate.open();
        if let Some(l) = &self.crr {
            wake_listener(&**l);
        }
        if let Some(h) = &self.http {
            h.unblock();
        }
    }
}

/// Runs the server half of one test on the control connection `ctl`.
fn run_test(
    ctl: &mut TcpStream,
    w: &Workload,
    duration_ms: u64,
    server_cpu: Option<u32>,
    sock: &SockOpts,
) -> Result<SideReport> {
    w.validate().map_err(|e| anyhow!(e))?;
    if duration_ms > MAX_DURATION_MS {
        bail!("duration {duration_ms} ms exceeds the {MAX_DURATION_MS} ms limit");
    }
    if let Some(cpu) = server_cpu {
        if !cpu_allowed(cpu) {
            bail!("server CPU {cpu} does not exist or is not allowed on the agent's machine");
        }
    }
    // Data connections arrive on the address the client used for control.
    let ip = ctl.local_addr()?.ip();
    let listener = TcpListener::bind((ip, 0)).context("binding a data port")?;
    let data_port = listener.local_addr()?.port();
    write_message(ctl, &Message::Ready { data_port })?;

    let mut td = Teardown {
        side: Ctl::new(server_cpu),
        crr: None,
        http: None,
    };
    let side = td.side.clone();
    let mut handles = Vec::new();
    match *w {
        Workload::Rr { request, response } => {
            for s in accept_data(&listener, 1, true, sock)? {
                handles.push(spawn_conn_worker("rr-server", &side, s, move |c, _, s| {
                    rr::server(s, request as usize, response as usize, &c.stop)
                })?);
            }
        }
        Workload::Stream {
            flows,
            reverse,
            send_size,
            recv_size,
            recv_wait,
        } => {
            for (i, s) in accept_data(&listener, flows as usize, false, sock)?
                .into_iter()
                .enumerate()
            {
                let name = format!("stream-server-{i}");
                handles.push(if reverse {
                    spawn_conn_worker(&name, &side, s, move |c, _, s| {
                        stream::send(s, send_size as usize, &c.stop)
                    })?
                } else {
                    spawn_conn_worker(&name, &side, s, move |c, _, s| {
                        stream::receive(s, recv_size, recv_wait, &c.stop)
                    })?
                });
            }
        }
        Workload::Bulk {
            bytes,
            send_size,
            reverse,
        } => {
            for s in accept_data(&listener, 1, false, sock)? {
                handles.push(if reverse {
                    spawn_conn_worker("bulk-server", &side, s, move |_, _, s| {
                        bulk::send(s, bytes, send_size as usize)
                    })?
                } else {
                    spawn_conn_worker("bulk-server", &side, s, move |_, _, s| bulk::receive(s))?
                });
            }
        }
        Workload::Crr { request, response } => {
            let l = Arc::new(listener);
            td.crr = Some(l.clone());
            let sock = *sock;
            handles.push(spawn_worker("crr-server", &side, move |c, _| {
                crr::server(
                    &l,
                    request as usize,
                    response as usize,
                    DATA_TIMEOUT,
                    &sock,
                    &c.stop,
                )
            })?);
        }
        Workload::Http { bytes } => {
            let srv = Arc::new(http::server(listener)?);
            td.http = Some(srv.clone());
            handles.push(spawn_worker("http-server", &side, move |_, _| {
                let n = http::serve(&srv, bytes);
                Ok(virtperf_load::Counts {
                    transactions: n,
                    bytes_tx: n * bytes,
                    ..Default::default()
                })
            })?);
        }
    }

    match recv(ctl, SETUP_TIMEOUT, "start")? {
        Message::Start => {}
        other => bail!("expected start, got {}", kind(&other)),
    }
    let t0 = ProcStat::read()?;
    let started = Instant::now();
    side.gate.open();
    write_message(ctl, &Message::Started)?;

    // A client that never says stop cannot keep the agent busy forever: timed tests are
    // bounded by their duration plus a grace period, byte-count tests by the global limit.
    let limit = if w.is_timed() {
        Duration::from_millis(duration_ms) + STOP_GRACE
    } else {
        Duration::from_millis(MAX_DURATION_MS)
    };
    match recv(ctl, limit, "stop")? {
        Message::Stop => {}
        other => bail!("expected stop, got {}", kind(&other)),
    }
    let t1 = ProcStat::read()?;
    let elapsed = started.elapsed();
    drop(td);
    let joined = join_all(handles)?;
    let report = SideReport {
        elapsed_s: elapsed.as_secs_f64(),
        cpu: t0.delta(&t1),
        threads: joined.cpu,
        flows: joined.flow_stats(),
        transactions: joined.transactions(),
    };
    write_message(
        ctl,
        &Message::Report {
            side: Box::new(report.clone()),
        },
    )?;
    Ok(report)
}

fn accept_data(
    listener: &TcpListener,
    n: usize,
    nodelay: bool,
    sock: &SockOpts,
) -> Result<Vec<TcpStream>> {
    let conns = accept_n(listener, n, SETUP_TIMEOUT)?;
    for s in &conns {
        prepare_data_socket(s, DATA_TIMEOUT, nodelay, sock)?;
    }
    Ok(conns)
}
