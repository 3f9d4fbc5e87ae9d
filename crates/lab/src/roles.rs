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
use std::time::Instant;

use anyhow::{Context, Result};
use virtperf_load::http::{self, Fetched};
use virtperf_load::interval::Meter;
use virtperf_load::sock::prepare_data_socket;
use virtperf_load::{bulk, crr, mux, rr, stream, Counts};
use virtperf_wire::{SockOpts, Workload};

use crate::side::{
    accept_n, spawn_conn_worker, spawn_mux_worker, spawn_private_worker, spawn_worker, DataKey,
};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

pub(crate) use crate::half::{ClientHalf, Handles, ServerHalf, Wake};

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
                download_series(&url, count, &c.stop, &out, &[], &limits)
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

/// Downloads `url` `count` times, one connection each, recording every download in `out`.
pub(crate) fn download_series(
    url: &str,
    count: u32,
    stop: &std::sync::atomic::AtomicBool,
    out: &Mutex<Vec<Fetched>>,
    accept: &[u16],
    limits: &http::Limits,
) -> std::io::Result<Counts> {
    let mut c = Counts::default();
    let start = Instant::now();
    for _ in 0..count {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        // A fresh client per download: each download is its own TCP connection, as a
        // browser or boot loader fetching one file does (seed 0's captures show one
        // connection per download), and the time includes the connection set-up.
        let agent = http::agent(DATA_TIMEOUT);
        let f = http::fetch(&agent, url, accept, limits).map_err(std::io::Error::other)?;
        c.bytes_rx += f.bytes;
        c.transactions += 1;
        if let Ok(mut v) = out.lock() {
            v.push(f);
        }
    }
    c.active = start.elapsed();
    Ok(c)
}
