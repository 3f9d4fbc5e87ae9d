//! The UDP rows of the role table (`roles`): rr and stream over connected UDP sockets.
//!
//! Set-up rides on the test's TCP data port, so UDP keeps TCP's rules for who may take
//! part: per flow, the client opens one TCP data connection (accepted only from the
//! control connection's address, as for TCP workloads), and each end writes its UDP port
//! on it (2 bytes, big-endian) and connects its UDP socket to the other's. The TCP
//! connection is then closed: nothing is lost or reordered during set-up, and no datagram
//! from anywhere else reaches a connected UDP socket.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;

use anyhow::{Context, Result};
use virtperf_load::interval::Meter;
use virtperf_load::sock::prepare_data_socket;
use virtperf_load::udp;
use virtperf_wire::{RrParams, SockOpts, StreamParams};

use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{accept_n, spawn_conn_worker, Ctl, DataKey};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

/// TCP_NODELAY means nothing to UDP: the other options apply as they are.
fn udp_opts(sock: &SockOpts) -> SockOpts {
    SockOpts {
        nodelay: None,
        ..*sock
    }
}

/// Swaps UDP ports over the set-up connections `conns` and returns this end's UDP socket
/// per connection, bound on its local address and connected to the peer's. Every port is
/// written before any is read, so the two ends never wait on each other whatever order
/// the agent accepted the connections in.
fn pair_all(
    conns: Vec<TcpStream>,
    sock: &SockOpts,
    ports: Option<(u16, u16)>,
) -> Result<Vec<UdpSocket>> {
    let mut socks = Vec::with_capacity(conns.len());
    for t in &conns {
        t.set_read_timeout(Some(SETUP_TIMEOUT))?;
        t.set_write_timeout(Some(SETUP_TIMEOUT))?;
        let ip = t.local_addr()?.ip();
        let u = crate::ports::bind_in(ports, |p| UdpSocket::bind((ip, p)))
            .context("binding a UDP data socket")?;
        (&*t)
            .write_all(&u.local_addr()?.port().to_be_bytes())
            .context("sending our UDP port")?;
        socks.push(u);
    }
    for (t, u) in conns.iter().zip(&socks) {
        let mut port = [0u8; 2];
        (&*t)
            .read_exact(&mut port)
            .context("reading the peer's UDP port (the peer went away during set-up)")?;
        u.connect((t.peer_addr()?.ip(), u16::from_be_bytes(port)))
            .context("connecting the UDP data socket")?;
        prepare_data_socket(u, DATA_TIMEOUT, false, &udp_opts(sock))?;
    }
    Ok(socks)
}

/// The client's UDP sockets for `n` flows, set up through the agent's data port `data`.
fn open(data: SocketAddr, n: u32, sock: &SockOpts, key: &DataKey) -> Result<Vec<UdpSocket>> {
    let conns = (0..n)
        .map(|_| {
            let mut s = TcpStream::connect_timeout(&data, SETUP_TIMEOUT)
                .with_context(|| format!("opening a data connection to {data}"))?;
            key.present(&mut s)
                .with_context(|| format!("presenting the test's key to {data}"))?;
            Ok(s)
        })
        .collect::<Result<Vec<_>>>()?;
    // The client's own UDP ports: any (it is the side that sends first through a NAT).
    pair_all(conns, sock, None)
}

/// The agent's UDP sockets for `n` flows from `client`; closes the listener afterwards.
fn accept(s: ServerHalf, n: usize) -> Result<Vec<UdpSocket>> {
    let conns = accept_n(&s.listener, n, SETUP_TIMEOUT, s.client, &s.key)?;
    drop(s.listener);
    pair_all(conns, &s.sock, s.ports)
}

/// Starts the client half of UDP rr.
pub(crate) fn rr_client(
    p: &RrParams,
    c: &ClientHalf,
    meter: &mut dyn FnMut() -> Arc<Meter>,
) -> Result<Handles> {
    let RrParams {
        request,
        response,
        client_wait,
        flows,
        loss_timeout_ms,
        ..
    } = *p;
    let loss_timeout = loss_timeout(loss_timeout_ms);
    let mut handles = Vec::new();
    for (i, s) in open(c.data, flows, &c.sock, &c.key)?
        .into_iter()
        .enumerate()
    {
        let m = meter();
        handles.push(spawn_conn_worker(
            &format!("udp-rr-client-{i}"),
            c.side,
            s,
            move |c, h, s| {
                udp::rr_client(
                    s,
                    virtperf_load::Exchange {
                        request: request as usize,
                        response: response as usize,
                        wait: client_wait,
                    },
                    loss_timeout,
                    virtperf_load::Sink {
                        stop: &c.stop,
                        hist: h,
                        meter: &m,
                    },
                )
            },
        )?);
    }
    Ok(handles)
}

/// Starts the client half of a UDP stream.
pub(crate) fn stream_client(
    p: &StreamParams,
    c: &ClientHalf,
    meter: &mut dyn FnMut() -> Arc<Meter>,
) -> Result<Handles> {
    let mut handles = Vec::new();
    for (i, s) in open(c.data, p.flows, &c.sock, &c.key)?
        .into_iter()
        .enumerate()
    {
        let m = meter();
        let name = format!("udp-stream-client-{i}");
        handles.push(stream_worker(&name, c.side, s, !p.reverse, p, m)?);
    }
    Ok(handles)
}

/// The rr client's wait for a response: the workload's, else [`udp::LOSS_TIMEOUT`].
pub(crate) fn loss_timeout(ms: Option<u32>) -> std::time::Duration {
    ms.map_or(udp::LOSS_TIMEOUT, |ms| {
        std::time::Duration::from_millis(u64::from(ms))
    })
}

/// Starts the server half of UDP rr.
pub(crate) fn rr_server(p: &RrParams, s: ServerHalf) -> Result<Handles> {
    let RrParams {
        request,
        response,
        server_wait,
        flows,
        ..
    } = *p;
    let mut handles = Vec::new();
    let side = s.side;
    for u in accept(s, flows as usize)? {
        handles.push(spawn_conn_worker(
            "udp-rr-server",
            side,
            u,
            move |c, _, u| {
                udp::rr_server(u, request as usize, response as usize, server_wait, &c.stop)
            },
        )?);
    }
    Ok(handles)
}

/// Starts the server half of a UDP stream.
pub(crate) fn stream_server(p: &StreamParams, s: ServerHalf) -> Result<Handles> {
    let mut handles = Vec::new();
    let side = s.side;
    for (i, u) in accept(s, p.flows as usize)?.into_iter().enumerate() {
        // The agent keeps no time series: its meter is written and never read.
        let name = format!("udp-stream-server-{i}");
        let m = side.meter(None);
        handles.push(stream_worker(&name, side, u, p.reverse, p, m)?);
    }
    Ok(handles)
}

/// One stream flow's worker: the sender (with GSO where asked and the kernel has it) or
/// the receiver (with GRO likewise).
fn stream_worker(
    name: &str,
    side: &Ctl,
    s: UdpSocket,
    sends: bool,
    p: &StreamParams,
    m: Arc<Meter>,
) -> Result<std::thread::JoinHandle<Result<crate::side::WorkerOut>>> {
    let (size, rate_bps) = (p.send_size as usize, p.rate_bps);
    if sends {
        let gso = p.gso && udp::try_gso(&s, size);
        spawn_conn_worker(name, side, s, move |c, _, s| {
            udp::stream_send(s, size, rate_bps, gso, &c.stop, &m)
        })
    } else {
        let gro = p.gro && udp::try_gro(&s);
        spawn_conn_worker(name, side, s, move |c, _, s| {
            udp::stream_receive(s, size, gro, &c.stop, &m)
        })
    }
}
