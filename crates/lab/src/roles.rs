//! The table of roles: per workload, what the client half and the server half run (neper's
//! `client_fn` and `server_fn`). The client (`client::run`) and the agent (`agent`'s test)
//! speak the control protocol the same way for every workload and ask this table only
//! which workers to start on their side's data connections; a new workload adds its
//! engine (in `load`) and one entry here.
//!
//! Workers are started before the gate opens, so connection set-up stays outside the
//! measured interval (except crr, whose client connects per transaction: connecting is
//! the workload).

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use virtperf_load::http::{self, Fetched};
use virtperf_load::interval::Meter;
use virtperf_load::sock::prepare_data_socket;
use virtperf_load::{bulk, crr, mux, rr, stream};
use virtperf_wire::{SockOpts, Workload};

use crate::side::WorkerOut;
use crate::side::{
    accept_n, spawn_conn_worker, spawn_mux_worker, spawn_private_worker, spawn_worker, Ctl, DataKey,
};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

/// One side's worker threads, joined after the test.
pub(crate) type Handles = Vec<JoinHandle<Result<WorkerOut>>>;

/// What the client half of a workload is given.
pub(crate) struct ClientHalf<'a> {
    /// The agent's data port.
    pub data: SocketAddr,
    /// Socket options for data connections.
    pub sock: SockOpts,
    /// Downloads (http), one per request.
    pub count: u32,
    /// This side's workers' stop flag, gate and CPU.
    pub side: &'a Ctl,
    /// Where http downloads are recorded, for the result.
    pub downloads: &'a Arc<Mutex<Vec<Fetched>>>,
    /// Time-series interval (`--interval`), if any.
    pub interval: Option<std::time::Duration>,
    /// The measured interval of a timed workload: receivers count the bytes that arrive
    /// inside it, from the gate.
    pub window: Option<std::time::Duration>,
    /// The test's key, presented first on every data connection.
    pub key: DataKey,
}

/// What the server half of a workload is given.
pub(crate) struct ServerHalf<'a> {
    /// The test's data listener, on the address the client used for control.
    pub listener: TcpListener,
    /// The only address data connections are taken from.
    pub client: IpAddr,
    /// Socket options for data connections.
    pub sock: SockOpts,
    /// This side's workers' stop flag, gate and CPU.
    pub side: &'a Ctl,
    /// What must be woken if the test ends early (set before the worker blocks on it).
    pub wake: &'a mut Wake,
    /// The measured interval of a timed workload (see [`ClientHalf::window`]).
    pub window: Option<std::time::Duration>,
    /// The test's key: data connections that do not present it are closed.
    pub key: DataKey,
}

/// Objects a server worker may block on outside the stop flag's reach: the teardown wakes
/// them.
#[derive(Default)]
pub(crate) struct Wake {
    /// crr's listener (its worker blocks in `accept`).
    pub listener: Option<Arc<TcpListener>>,
    /// http's server (it blocks serving).
    pub http: Option<Arc<http::HttpServer>>,
}

impl Wake {
    /// Unblocks whatever was registered.
    pub(crate) fn wake(&self) {
        if let Some(l) = &self.listener {
            virtperf_load::sock::wake_listener(&**l);
        }
        if let Some(h) = &self.http {
            h.unblock();
        }
    }
}

/// Starts the client half of `w`; returns its workers and one [`Meter`] per worker, where
/// each publishes its progress for the time series.
pub(crate) fn client(w: &Workload, c: &ClientHalf) -> Result<(Handles, Vec<Arc<Meter>>)> {
    let (data, sock, side, window, key) = (c.data, c.sock, c.side, c.window, c.key);
    let mut handles = Vec::new();
    let mut meters = Vec::new();
    let mut meter = || {
        let m = Arc::new(Meter::new(c.interval));
        meters.push(m.clone());
        m
    };
    if !w.protocol().is_tcp() {
        let handles = crate::udp_roles::client(w, c, &mut meter)?;
        return Ok((handles, meters));
    }
    match *w {
        // Flows multiplexed on threads (neper's design): every connection is opened here,
        // before the gate, and each thread takes an even share.
        Workload::Rr {
            request,
            response,
            flows,
            threads: Some(t),
            ..
        } => {
            let conns = connect_all(data, flows, true, &sock, &key)?;
            for (i, share) in mux::spread(conns, t.min(flows) as usize)
                .into_iter()
                .enumerate()
            {
                let m = meter();
                handles.push(spawn_mux_worker(
                    &format!("rr-mux-{i}"),
                    side,
                    move |c, h| {
                        let span = c.gate.span(window);
                        mux::rr_client(
                            share,
                            request as usize,
                            response as usize,
                            span,
                            &c.stop,
                            h,
                            &m,
                        )
                    },
                )?);
            }
        }
        Workload::Stream {
            send_size,
            flows,
            reverse,
            recv_size,
            threads: Some(t),
            ..
        } => {
            let conns = connect_all(data, flows, false, &sock, &key)?;
            for (i, share) in mux::spread(conns, t.min(flows) as usize)
                .into_iter()
                .enumerate()
            {
                let m = meter();
                handles.push(spawn_mux_worker(
                    &format!("stream-mux-{i}"),
                    side,
                    move |c, _| {
                        if reverse {
                            mux::stream_recv(
                                share,
                                recv_len(recv_size),
                                c.gate.span(window),
                                &c.stop,
                                &m,
                            )
                        } else {
                            mux::stream_send(share, send_size as usize, &c.stop, &m)
                        }
                    },
                )?);
            }
        }
        Workload::Crr {
            request,
            response,
            flows,
            threads: Some(t),
            ..
        } => {
            // crr connects per transaction: each thread opens its share itself.
            for (i, k) in mux::spread((0..flows).collect(), t.min(flows) as usize)
                .into_iter()
                .enumerate()
            {
                let m = meter();
                let k = k.len();
                handles.push(spawn_mux_worker(
                    &format!("crr-mux-{i}"),
                    side,
                    move |c, h| {
                        mux::crr_client(
                            data,
                            k,
                            request as usize,
                            response as usize,
                            &sock,
                            c.gate.span(window),
                            &c.stop,
                            h,
                            &m,
                        )
                    },
                )?);
            }
        }
        Workload::Rr {
            request,
            response,
            client_wait,
            gap_us,
            rate_per_s,
            flows,
            ..
        } => {
            // Flows share an open loop's rate, their schedules staggered evenly so the
            // requests do not leave in bursts of `flows`.
            let per_flow = rate_per_s.map(|r| f64::from(r) / f64::from(flows));
            for i in 0..flows {
                let pace = match (per_flow, gap_us) {
                    (Some(r), _) => rr::Pace::Rate(
                        r,
                        std::time::Duration::from_secs_f64(f64::from(i) / r / f64::from(flows)),
                    ),
                    (None, Some(g)) => rr::Pace::Gap(std::time::Duration::from_micros(g)),
                    (None, None) => rr::Pace::BackToBack,
                };
                let s = connect_data(data, true, &sock, &key)?;
                let m = meter();
                handles.push(spawn_conn_worker(
                    &format!("rr-client-{i}"),
                    side,
                    s,
                    move |c, h, s| {
                        rr::client_paced(
                            s,
                            request as usize,
                            response as usize,
                            client_wait,
                            pace,
                            &c.stop,
                            h,
                            &m,
                        )
                    },
                )?);
            }
        }
        Workload::Crr {
            request,
            response,
            client_wait,
            ..
        } => {
            let m = meter();
            handles.push(spawn_private_worker("crr-client", side, move |c, h| {
                crr::client(
                    data,
                    request as usize,
                    response as usize,
                    client_wait,
                    DATA_TIMEOUT,
                    &sock,
                    &c.stop,
                    h,
                    &m,
                )
            })?);
        }
        Workload::Stream {
            send_size,
            flows,
            reverse,
            recv_size,
            recv_wait,
            ..
        } => {
            for i in 0..flows {
                let s = connect_data(data, false, &sock, &key)?;
                let name = format!("stream-client-{i}");
                let m = meter();
                handles.push(if reverse {
                    spawn_conn_worker(&name, side, s, move |c, _, s| {
                        stream::receive(s, recv_size, recv_wait, &c.stop, &m)
                    })?
                } else {
                    spawn_conn_worker(&name, side, s, move |c, _, s| {
                        stream::send(s, send_size as usize, &c.stop, &m)
                    })?
                });
            }
        }
        Workload::Bulk {
            bytes,
            send_size,
            reverse,
        } => {
            let s = connect_data(data, false, &sock, &key)?;
            let m = meter();
            handles.push(if reverse {
                spawn_conn_worker("bulk-client", side, s, move |_, _, s| bulk::receive(s, &m))?
            } else {
                spawn_conn_worker("bulk-client", side, s, move |_, _, s| {
                    bulk::send(s, bytes, send_size as usize, &m)
                })?
            });
        }
        Workload::Http { bytes } => {
            let url = format!("http://{data}/");
            let (out, count) = (c.downloads.clone(), c.count);
            // The agent's body is exactly `bytes` long: anything past it is not ours.
            let limits = http::Limits {
                max_bytes: bytes,
                ..http::Limits::default()
            };
            handles.push(spawn_private_worker("http-client", side, move |c, _| {
                // The agent's own server answers 200 or nothing: accept no other status.
                crate::client::download_series(&url, count, &c.stop, &out, &[], &limits)
            })?);
        }
    }
    Ok((handles, meters))
}

/// Starts the server half of `w`: takes its data connections (or hands the listener to the
/// engine that takes its own) and starts its workers.
pub(crate) fn server(w: &Workload, s: ServerHalf) -> Result<Handles> {
    let ServerHalf {
        listener,
        client,
        sock,
        side,
        wake,
        window,
        key,
    } = s;
    if !w.protocol().is_tcp() {
        return crate::udp_roles::server(w, listener, client, &sock, side, &key);
    }
    let mut handles = Vec::new();
    match *w {
        Workload::Rr {
            request,
            response,
            flows,
            threads: Some(t),
            ..
        } => {
            let conns = accept_data(listener, client, flows as usize, true, &sock, &key)?;
            for (i, share) in mux::spread(conns, t.min(flows) as usize)
                .into_iter()
                .enumerate()
            {
                handles.push(spawn_mux_worker(
                    &format!("rr-mux-{i}"),
                    side,
                    move |c, _| mux::rr_server(share, request as usize, response as usize, &c.stop),
                )?);
            }
        }
        Workload::Stream {
            send_size,
            flows,
            reverse,
            recv_size,
            threads: Some(t),
            ..
        } => {
            let conns = accept_data(listener, client, flows as usize, false, &sock, &key)?;
            for (i, share) in mux::spread(conns, t.min(flows) as usize)
                .into_iter()
                .enumerate()
            {
                // The agent keeps no time series: its meter is written and never read.
                let m = Meter::new(None);
                handles.push(spawn_mux_worker(
                    &format!("stream-mux-{i}"),
                    side,
                    move |c, _| {
                        if reverse {
                            mux::stream_send(share, send_size as usize, &c.stop, &m)
                        } else {
                            mux::stream_recv(
                                share,
                                recv_len(recv_size),
                                c.gate.span(window),
                                &c.stop,
                                &m,
                            )
                        }
                    },
                )?);
            }
        }
        Workload::Crr {
            request,
            response,
            flows,
            threads: Some(t),
            ..
        } => {
            // Options set on the listener are inherited by every accepted connection.
            prepare_data_socket(&listener, DATA_TIMEOUT, true, &sock)?;
            let l = Arc::new(listener);
            wake.listener = Some(l.clone());
            for i in 0..t.min(flows) {
                let l = l.clone();
                handles.push(spawn_mux_worker(
                    &format!("crr-mux-{i}"),
                    side,
                    move |c, _| {
                        mux::crr_server(
                            &l,
                            Some(client),
                            request as usize,
                            response as usize,
                            &c.stop,
                        )
                        .map(|n| vec![n])
                    },
                )?);
            }
        }
        Workload::Rr {
            request,
            response,
            server_wait,
            flows,
            ..
        } => {
            for s in accept_data(listener, client, flows as usize, true, &sock, &key)? {
                handles.push(spawn_conn_worker("rr-server", side, s, move |c, _, s| {
                    rr::server_waiting(s, request as usize, response as usize, server_wait, &c.stop)
                })?);
            }
        }
        Workload::Stream {
            flows,
            reverse,
            send_size,
            recv_size,
            recv_wait,
            ..
        } => {
            for (i, s) in accept_data(listener, client, flows as usize, false, &sock, &key)?
                .into_iter()
                .enumerate()
            {
                let name = format!("stream-server-{i}");
                // The agent keeps no time series: its meter is written and never read.
                let m = Meter::new(None);
                handles.push(if reverse {
                    spawn_conn_worker(&name, side, s, move |c, _, s| {
                        stream::send(s, send_size as usize, &c.stop, &m)
                    })?
                } else {
                    spawn_conn_worker(&name, side, s, move |c, _, s| {
                        stream::receive(s, recv_size, recv_wait, &c.stop, &m)
                    })?
                });
            }
        }
        Workload::Bulk {
            bytes,
            send_size,
            reverse,
        } => {
            for s in accept_data(listener, client, 1, false, &sock, &key)? {
                let m = Meter::new(None);
                handles.push(if reverse {
                    spawn_conn_worker("bulk-server", side, s, move |_, _, s| {
                        bulk::send(s, bytes, send_size as usize, &m)
                    })?
                } else {
                    spawn_conn_worker("bulk-server", side, s, move |_, _, s| bulk::receive(s, &m))?
                });
            }
        }
        Workload::Crr {
            request,
            response,
            server_wait,
            ..
        } => {
            let l = Arc::new(listener);
            wake.listener = Some(l.clone());
            handles.push(spawn_worker("crr-server", side, move |c, _| {
                crr::server(
                    &l,
                    Some(client),
                    server_wait,
                    request as usize,
                    response as usize,
                    DATA_TIMEOUT,
                    &sock,
                    &c.stop,
                )
            })?);
        }
        Workload::Http { bytes } => {
            let srv = Arc::new(http::HttpServer::new(listener, Some(client)));
            wake.http = Some(srv.clone());
            handles.push(spawn_worker("http-server", side, move |_, _| {
                let n = srv.serve(bytes, DATA_TIMEOUT);
                Ok(virtperf_load::Counts {
                    transactions: n,
                    bytes_tx: n * bytes,
                    ..Default::default()
                })
            })?);
        }
    }
    Ok(handles)
}

/// A receive size for multiplexed stream receivers: the workload's, else 128 KiB
/// (netperf's default, as the blocking receivers use).
fn recv_len(recv_size: Option<u32>) -> usize {
    recv_size.map_or(128 << 10, |r| r as usize)
}

/// Opens `flows` data connections one after another (the agent accepts them as they come).
fn connect_all(
    addr: SocketAddr,
    flows: u32,
    nodelay: bool,
    sock: &SockOpts,
    key: &DataKey,
) -> Result<Vec<TcpStream>> {
    (0..flows)
        .map(|i| {
            connect_data(addr, nodelay, sock, key)
                .with_context(|| format!("flow {} of {flows}", i + 1))
        })
        .collect()
}

/// Opens one data connection and presents the test's key on it.
pub(crate) fn connect_data(
    addr: SocketAddr,
    nodelay: bool,
    sock: &SockOpts,
    key: &DataKey,
) -> Result<TcpStream> {
    let mut s = TcpStream::connect_timeout(&addr, SETUP_TIMEOUT)
        .with_context(|| format!("opening a data connection to {addr}"))?;
    prepare_data_socket(&s, DATA_TIMEOUT, nodelay, sock)?;
    key.present(&mut s)
        .with_context(|| format!("presenting the test's key to {addr}"))?;
    Ok(s)
}

/// Accepts the test's `n` data connections from `client` and closes the listener, so any
/// later connection is refused.
fn accept_data(
    listener: TcpListener,
    client: IpAddr,
    n: usize,
    nodelay: bool,
    sock: &SockOpts,
    key: &DataKey,
) -> Result<Vec<TcpStream>> {
    let conns = accept_n(&listener, n, SETUP_TIMEOUT, client, key)?;
    drop(listener);
    for s in &conns {
        prepare_data_socket(s, DATA_TIMEOUT, nodelay, sock)?;
    }
    Ok(conns)
}

/// Both halves in this process: the agent's serve loop on a thread on 127.0.0.1:0 and
/// `client::run` against it, for every workload, so a change to the protocol or to a role
/// is caught in a second (the end-to-end tests in `crates/cli/tests` take a minute).
#[cfg(test)]
mod tests {
    use std::time::Duration;

    use virtperf_wire::{Outcome, SockOpts, Workload};

    use crate::agent::{self, AgentConfig};
    use crate::client;
    use crate::plan::{Plan, Target};

    /// Starts an agent on a thread (it serves until the test process ends) and returns
    /// where it is. Concurrent, so the tests neither take nor wait for the machine lock.
    fn agent(token: &str, allow_drive: bool) -> Target {
        let cfg = AgentConfig {
            bind: [127, 0, 0, 1].into(),
            port: 0,
            token: Some(token.to_string()),
            max_clients: 16,
            max_duration: Duration::from_secs(60),
            verbose: false,
            allow_drive,
            concurrent: Some(16),
            max_flows: agent::DEFAULT_MAX_FLOWS,
            max_threads: agent::DEFAULT_MAX_THREADS,
        };
        let listener = agent::bind(&cfg).expect("bind");
        let addr = listener.local_addr().expect("address");
        std::thread::spawn(move || agent::serve(listener, cfg));
        Target::at(addr, token)
    }

    fn plan(workload: Workload) -> Plan {
        Plan {
            workload,
            duration: Duration::from_millis(200),
            client_cpu: None,
            server_cpu: None,
            count: 2,
            sock: SockOpts::default(),
            capture: None,
            kvm_stats: false,
            trace: false,
            trace_all: false,
            timeline: false,
            interval: None,
            on_interval: None,
        }
    }

    #[test]
    fn every_workload_runs_between_the_two_halves() {
        let t = agent("t0", false);
        let rr = client::run(&t, &plan(Workload::rr(8, 16)), &|_| {}).expect("rr");
        let Outcome::Rr(o) = &rr.outcome else {
            panic!("rr outcome expected: {:?}", rr.outcome)
        };
        assert!(o.transactions > 10, "{o:?}");
        assert!(o.server_transactions > 0, "{o:?}");
        assert!(rr.cpu.server.is_some());
        assert!(rr.target.starts_with("127.0.0.1:"), "{}", rr.target);

        let crr = client::run(&t, &plan(Workload::crr(1, 1)), &|_| {}).expect("crr");
        assert!(matches!(&crr.outcome, Outcome::Crr(o) if o.transactions > 0));

        for reverse in [false, true] {
            let w = Workload::Stream {
                send_size: 4096,
                flows: 2,
                reverse,
                recv_size: None,
                recv_wait: None,
                threads: None,
                protocol: Default::default(),
                rate_bps: None,
                gso: false,
                gro: false,
            };
            let r = client::run(&t, &plan(w), &|_| {}).expect("stream");
            let Outcome::Stream(o) = &r.outcome else {
                panic!("stream outcome expected")
            };
            assert_eq!(o.flows.len(), 2);
            assert!(o.receiver_bytes > 0, "reverse {reverse}: {o:?}");

            let w = Workload::Bulk {
                bytes: 1 << 20,
                send_size: 65536,
                reverse,
            };
            let r = client::run(&t, &plan(w), &|_| {}).expect("bulk");
            let Outcome::Bulk(o) = &r.outcome else {
                panic!("bulk outcome expected")
            };
            assert_eq!(o.receiver_bytes, 1 << 20, "reverse {reverse}");
        }

        let http = client::run(&t, &plan(Workload::Http { bytes: 10_000 }), &|_| {}).expect("http");
        let Outcome::Http(o) = &http.outcome else {
            panic!("http outcome expected")
        };
        assert_eq!(o.downloads.len(), 2);
        assert!(o
            .downloads
            .iter()
            .all(|d| d.bytes == 10_000 && d.status == 200));
    }

    #[test]
    fn the_agent_refuses_a_wrong_token_and_undriven_drives() {
        let t = agent("right", false);
        let wrong = Target {
            token: Some("wrong".into()),
            ..t.clone()
        };
        let e = client::remote_env(&wrong).expect_err("wrong token accepted");
        assert!(format!("{e:#}").contains("wrong or missing token"), "{e:#}");
        assert!(client::remote_env(&t).is_ok());
        let e = client::drive(&t, &t, &plan(Workload::rr(1, 1)))
            .expect_err("drive accepted without --allow-drive");
        assert!(format!("{e:#}").contains("does not drive tests"), "{e:#}");
    }

    #[test]
    fn a_driving_agent_runs_the_client_half_and_returns_the_result() {
        let server = agent("s", false);
        let driver = agent("d", true);
        let r = client::drive(&driver, &server, &plan(Workload::rr(1, 1))).expect("drive");
        assert!(matches!(&r.outcome, Outcome::Rr(o) if o.transactions > 0));
    }

    #[test]
    fn the_agent_refuses_an_invalid_workload_in_one_message() {
        let t = agent("v", false);
        let mut p = plan(Workload::rr(1, 1));
        p.server_cpu = Some(100_000);
        let e = client::run(&t, &p, &|_| {}).expect_err("server CPU 100000 accepted");
        assert!(format!("{e:#}").contains("server CPU 100000"), "{e:#}");
    }
}
