//! The table of roles: per workload, what the client half and the server half run (neper's
//! `client_fn` and `server_fn`), one module per workload implementing [`Role`]. The client
//! (`client::run`) and the agent (`agent`'s test) speak the control protocol the same way
//! for every workload and ask this table only which workers to start on their side's data
//! connections; a new workload adds its engine (in `load`), its module here and one row of
//! [`TABLE`] (docs/adding-a-workload.md).
//!
//! Workers are started before the gate opens, so connection set-up stays outside the
//! measured interval (except crr, whose client connects per transaction: connecting is
//! the workload). UDP rr and stream are `udp_roles`' (the protocol picks them).

mod bulk;
mod crr;
mod http;
mod rr;
mod stream;

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{anyhow, Context, Result};
use virtperf_load::http::{self as http_load, Fetched};
use virtperf_load::interval::Meter;
use virtperf_load::sock::prepare_data_socket;
use virtperf_load::Counts;
use virtperf_wire::{SockOpts, Workload};

use crate::side::{accept_n, DataKey};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

pub(crate) use crate::half::{ClientHalf, Handles, ServerHalf, Wake};

/// One workload's two halves, over TCP.
pub(crate) trait Role: Sync {
    /// Starts the client half's workers on connections to `c.data`; `meter` makes the
    /// time-series meter of one worker (each worker gets its own).
    fn client(
        &self,
        w: &Workload,
        c: &ClientHalf,
        meter: &mut dyn FnMut() -> Arc<Meter>,
    ) -> Result<Handles>;
    /// Starts the server half's workers on the test's data listener.
    fn server(&self, w: &Workload, s: ServerHalf) -> Result<Handles>;
}

/// Every workload's role, by the workload's name (`Workload::name`).
const TABLE: &[(&str, &dyn Role)] = &[
    ("rr", &rr::Rr),
    ("crr", &crr::Crr),
    ("stream", &stream::Stream),
    ("bulk", &bulk::Bulk),
    ("http", &http::Http),
];

/// The role of `w`.
fn role(w: &Workload) -> Result<&'static dyn Role> {
    TABLE
        .iter()
        .find(|(name, _)| *name == w.name())
        .map(|(_, r)| *r)
        .ok_or_else(|| anyhow!("no role for workload {}", w.name()))
}

/// Starts the client half of `w`; returns its workers and one [`Meter`] per worker, where
/// each publishes its progress for the time series.
pub(crate) fn client(w: &Workload, c: &ClientHalf) -> Result<(Handles, Vec<Arc<Meter>>)> {
    let mut meters = Vec::new();
    let mut meter = || {
        let m = Arc::new(Meter::new(c.interval));
        meters.push(m.clone());
        m
    };
    let handles = if w.protocol().is_tcp() {
        role(w)?.client(w, c, &mut meter)?
    } else {
        crate::udp_roles::client(w, c, &mut meter)?
    };
    Ok((handles, meters))
}

/// Starts the server half of `w`: takes its data connections (or hands the listener to the
/// engine that takes its own) and starts its workers.
pub(crate) fn server(w: &Workload, s: ServerHalf) -> Result<Handles> {
    if !w.protocol().is_tcp() {
        return crate::udp_roles::server(w, s.listener, s.client, &s.sock, s.side, &s.key);
    }
    role(w)?.server(w, s)
}

/// A receive size for multiplexed stream receivers: the workload's, else 128 KiB
/// (netperf's default, as the blocking receivers use).
pub(super) fn recv_len(recv_size: Option<u32>) -> usize {
    recv_size.map_or(128 << 10, |r| r as usize)
}

/// Opens `flows` data connections one after another (the agent accepts them as they come).
pub(super) fn connect_all(
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
pub(super) fn accept_data(
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
    limits: &http_load::Limits,
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
        let agent = http_load::agent(DATA_TIMEOUT);
        let f = http_load::fetch(&agent, url, accept, limits).map_err(std::io::Error::other)?;
        c.bytes_rx += f.bytes;
        c.transactions += 1;
        if let Ok(mut v) = out.lock() {
            v.push(f);
        }
    }
    c.active = start.elapsed();
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload the wire knows has exactly one row in the table.
    #[test]
    fn every_workload_has_one_role() {
        let all = [
            Workload::rr(1, 1),
            Workload::crr(1, 1),
            Workload::Stream {
                send_size: 1,
                flows: 1,
                reverse: false,
                recv_size: None,
                recv_wait: None,
                protocol: Default::default(),
                rate_bps: None,
                gso: false,
                gro: false,
                threads: None,
            },
            Workload::Bulk {
                bytes: 1,
                send_size: 1,
                reverse: false,
            },
            Workload::Http { bytes: 1 },
        ];
        for w in &all {
            assert!(role(w).is_ok(), "{} has no role", w.name());
            let rows = TABLE.iter().filter(|(n, _)| *n == w.name()).count();
            assert_eq!(rows, 1, "{}: {rows} rows", w.name());
        }
        assert_eq!(
            TABLE.len(),
            all.len(),
            "a row for a workload the wire lacks"
        );
    }
}
