//! Data connections as every TCP role opens and accepts them: the test's key presented,
//! the socket options applied.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};

use anyhow::{Context, Result};
use virtperf_load::sock::{prepare_before_connect, prepare_data_socket};
use virtperf_wire::SockOpts;

use crate::side::{accept_n, DataKey};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

/// A receive size for multiplexed stream receivers: the workload's, else 128 KiB
/// (netperf's default, as the blocking receivers use).
pub(crate) fn recv_len(recv_size: Option<u32>) -> usize {
    recv_size.map_or(128 << 10, |r| r as usize)
}

/// Opens `flows` data connections one after another (the agent accepts them as they come).
pub(crate) fn connect_all(
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
    // Through socket2, so the options a SYN carries (MSS, window scale) are set first.
    let raw = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(virtperf_load::sock::data_protocol(sock)),
    )?;
    prepare_before_connect(&raw, sock)?;
    raw.connect_timeout(&addr.into(), SETUP_TIMEOUT)
        .with_context(|| format!("opening a data connection to {addr}"))?;
    let mut s = TcpStream::from(raw);
    prepare_data_socket(&s, DATA_TIMEOUT, nodelay, sock)?;
    key.present(&mut s)
        .with_context(|| format!("presenting the test's key to {addr}"))?;
    Ok(s)
}

/// Accepts the test's `n` data connections from `client` and closes the listener, so any
/// later connection is refused.
pub(crate) fn accept_data(
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

/// Records what the kernel applied to the first of `conns` (flows that share one set of
/// options, multiplexed on threads) as the side's `sock_applied`.
pub(crate) fn note_first(ctl: &crate::side::Ctl, conns: &[std::net::TcpStream]) {
    if let Some(c) = conns.first() {
        crate::side::note_applied(ctl, std::os::fd::AsFd::as_fd(c));
    }
}
