//! stream (netperf TCP_STREAM, iperf3): bulk data one way on each flow until the stop;
//! with `--threads`, flows multiplexed on epoll threads.

use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_load::{mux, stream};
use virtperf_wire::{Outcome, SideReport, StreamParams, Workload};

use super::conn::recv_len;
use super::role::Role;
use super::threads::{self, ConnStep, Flows, ShareStep};
use crate::assemble::outcome::{bidir_outcome, stream_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_metered_conn_worker, spawn_mux_conns_worker, Ctl};
use virtperf_wire::Kind;

impl Role for StreamParams {
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles> {
        if !self.protocol.is_tcp() {
            return crate::udp_roles::stream_client(self, c, meter);
        }
        threads::client(c, meter, steps(self, c.side, c.window, true))
    }

    fn server(&self, s: ServerHalf) -> Result<Handles> {
        if !self.protocol.is_tcp() {
            return crate::udp_roles::stream_server(self, s);
        }
        let (side, window) = (s.side, s.window);
        threads::server(s, steps(self, side, window, false))
    }

    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        if self.bidir {
            bidir_outcome(c, server, warnings)
        } else {
            stream_outcome(c, server, self.reverse, warnings)
        }
    }
}

/// One side's connections and what runs on them; `client` says which side, and so
/// which connections send: with --bidir each flow is two connections, the first sending
/// from the client, the second from the server (the agent accepts them in that order).
/// Only the client keeps a time series, so only its senders are watched.
fn steps<'a>(
    p: &StreamParams,
    side: &'a Ctl,
    window: Option<Duration>,
    client: bool,
) -> Flows<impl ConnStep + 'a, impl ShareStep + 'a> {
    let p = *p;
    let who = if client { "client" } else { "server" };
    let sends = move |j: usize| {
        if p.bidir {
            j.is_multiple_of(2) == client
        } else {
            p.reverse != client
        }
    };
    let watch = client && crate::fds::room_for_duplicates(&p);
    Flows {
        conns: p.connections(),
        threads: p.threads,
        nodelay: false,
        per_conn: move |j, s, m: Arc<Meter>| {
            let name = format!("stream-{who}-{j}");
            if sends(j) {
                pace(&s, p.rate_bps)?;
                return spawn_sender(&name, side, s, p.send_size, p.buf_offset, p.zerocopy, m);
            }
            spawn_metered_conn_worker(&name, side, s, Some(m.clone()), move |c, _, s| {
                stream::receive(s, p.recv_size, p.buf_offset, p.recv_wait, &c.stop, &m)
            })
        },
        // Multiplexed flows are one-way (no --bidir): this side sends on all or none.
        per_share: move |i, share: Vec<TcpStream>, m: Arc<Meter>| {
            let sending = p.reverse != client;
            if sending {
                share.iter().try_for_each(|s| pace(s, p.rate_bps))?;
                if client {
                    m.mark_sending();
                    if watch {
                        watch_senders(&m, &share);
                    }
                }
            }
            let name = format!("stream-mux-{i}");
            spawn_mux_conns_worker(&name, side, share, move |c, share| {
                if sending {
                    mux::stream_send(share, p.send_size as usize, &c.stop, &m)
                } else {
                    let span = c.span(window);
                    mux::stream_recv(share, recv_len(p.recv_size), span, &c.stop, &m)
                }
            })
        },
    }
}

/// Caps a TCP sender at the stream's rate, where it has one (0: unpaced).
fn pace(s: &std::net::TcpStream, rate_bps: Option<u64>) -> Result<()> {
    if let Some(r) = rate_bps.filter(|r| *r > 0) {
        virtperf_load::sock::set_max_pacing_rate(s, r)
            .map_err(|e| anyhow::anyhow!("cannot pace the stream's sender to {r} bit/s: {e}"))?;
    }
    Ok(())
}

/// With a time series, lets the series read the TCP state of the sending connections
/// `conns` at each boundary, through duplicates kept in this (shared) descriptor table: a
/// worker with a private table keeps it private, and a multiplexing worker is not asked.
/// Without a series, or when a duplicate cannot be had (the open-file limit), nothing.
fn watch_senders(m: &Meter, conns: &[std::net::TcpStream]) {
    if m.every().is_none() {
        return;
    }
    let dups: std::io::Result<Vec<std::os::fd::OwnedFd>> = conns
        .iter()
        .map(|s| s.try_clone().map(Into::into))
        .collect();
    if let Ok(d) = dups {
        m.watch(d);
    }
}

/// A sending worker on connection `s`: `send` calls, or the zero-copy method asked.
fn spawn_sender(
    name: &str,
    side: &crate::side::Ctl,
    s: std::net::TcpStream,
    send_size: u32,
    offset: Option<u32>,
    zerocopy: Option<virtperf_wire::ZeroCopy>,
    m: Arc<Meter>,
) -> Result<std::thread::JoinHandle<Result<crate::side::WorkerOut>>> {
    // With a time series, the series reads the connection's TCP state at each boundary
    // through a duplicate kept in this (shared) table; the worker's own table stays
    // private. Without one, nothing reads it: no duplicate.
    m.mark_sending();
    watch_senders(&m, std::slice::from_ref(&s));
    spawn_metered_conn_worker(
        name,
        side,
        s,
        Some(m.clone()),
        move |c, _, s| match zerocopy {
            Some(z) => {
                let (n, zc) = virtperf_load::zerocopy::send(s, send_size as usize, z, &c.stop, &m)?;
                if z == virtperf_wire::ZeroCopy::Msg {
                    if let Ok(mut acc) = c.zerocopy.lock() {
                        acc.get_or_insert_with(Default::default).add(zc);
                    }
                }
                Ok(n)
            }
            None => stream::send(s, send_size as usize, offset, &c.stop, &m),
        },
    )
}

/// The keys stream's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `omit`).
pub(super) const KEYS: &[&str] = &[
    "send_size",
    "flows",
    "threads",
    "reverse",
    "cpus",
    "interval",
    "protocol",
    "rate",
    "gso",
    "gro",
    "bidir",
    "zerocopy",
    "trace",
];

/// stream's `Workload` from a spec point's parameters.
pub fn from_params(p: &super::role::Params) -> Workload {
    Workload::Stream(StreamParams {
        send_size: p.send,
        flows: p.flows,
        reverse: p.reverse,
        recv_size: p.recv_size,
        recv_wait: p.recv_wait,
        threads: p.threads,
        protocol: p.protocol,
        rate_bps: p.rate_bps,
        gso: p.gso,
        gro: p.gro,
        bidir: p.bidir,
        zerocopy: p.zerocopy,
        buf_offset: p.buf_offset,
    })
}
