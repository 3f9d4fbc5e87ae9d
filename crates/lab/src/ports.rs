//! The agent's data ports: anywhere (the kernel picks), or inside `serve --data-ports
//! FIRST-LAST`, so a NAT or port forward of the control port and that range reaches every
//! data listener and UDP data socket (iperf3 #77, netperf #58, flent #212: the peers'
//! most-asked feature). A range with every port taken says so at once, naming the range,
//! instead of a client waiting on a port nobody forwards.

use std::io;
use std::net::{IpAddr, TcpListener};

use anyhow::{bail, Result};
use virtperf_wire::Workload;

/// Binds with `bind` on a port of `range` (the first free one), or on port 0 (the kernel's
/// choice) without a range. A port in use by anything (another test, another program) is
/// skipped; any other failure is returned as it is.
pub(crate) fn bind_in<T>(
    range: Option<(u16, u16)>,
    mut bind: impl FnMut(u16) -> std::io::Result<T>,
) -> Result<T> {
    let Some((first, last)) = range else {
        return Ok(bind(0)?);
    };
    for p in first..=last {
        match bind(p) {
            Ok(s) => return Ok(s),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(e) => return Err(e.into()),
        }
    }
    let n = u32::from(last) - u32::from(first) + 1;
    bail!(
        "agent busy: all {n} data ports ({first}-{last}) are in use (by other tests of this agent or by other programs): try again later, or start the agent with a wider --data-ports range"
    )
}

/// The agent's control listener on `bind:port`. With `--port 0` and a data range, never a
/// port inside the range (the kernel's choice may fall there, taking a data port; a range
/// over the kernel's whole ephemeral span leaves only ports below or above it, nearest
/// first, below 1024 for root only).
pub(crate) fn bind_control(
    bind: IpAddr,
    port: u16,
    data: Option<(u16, u16)>,
) -> io::Result<TcpListener> {
    let listen = |p: u16| TcpListener::bind((bind, p));
    let Some((first, last)) = data.filter(|_| port == 0) else {
        return listen(port);
    };
    let inside = |l: &TcpListener| {
        l.local_addr()
            .is_ok_and(|a| (first..=last).contains(&a.port()))
    };
    (0..16)
        .map(|_| listen(0))
        .find(|l| !matches!(l, Ok(l) if inside(l)))
        .or_else(|| {
            (1..first)
                .rev()
                .chain(last.saturating_add(1)..=u16::MAX)
                .take(4096)
                .map(listen)
                .find(Result::is_ok)
        })
        .unwrap_or_else(|| {
            Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                "no port outside --data-ports could be bound: give --port outside it",
            ))
        })
}

/// Refuses a test whose data ports cannot fit `serve --data-ports` whatever else runs: a
/// UDP test binds one port per flow there (a TCP test one port), so a range smaller than
/// its flows is too small, not busy.
pub(crate) fn check_range(range: Option<(u16, u16)>, w: &Workload) -> Result<()> {
    let Some((first, last)) = range else {
        return Ok(());
    };
    let have = u32::from(last) - u32::from(first) + 1;
    let need = if w.protocol() == virtperf_wire::Protocol::Tcp {
        1
    } else {
        w.connections()
    };
    if need > have {
        bail!(
            "the test needs {need} data ports and this agent's --data-ports {first}-{last} has {have}: start the agent with a wider range, or ask for fewer flows"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, UdpSocket};

    /// Free ports are taken in order, a taken one skipped, and a full range refused with
    /// its size and bounds; without a range the kernel picks.
    #[test]
    fn binds_in_the_range_or_says_it_is_full() {
        let probe = TcpListener::bind("127.0.0.1:0").expect("a free port");
        let first = probe.local_addr().expect("address").port();
        drop(probe);
        let range = Some((first, first));
        let l = bind_in(range, |p| TcpListener::bind(("127.0.0.1", p))).expect("free");
        assert_eq!(l.local_addr().expect("address").port(), first);
        let e = bind_in(range, |p| TcpListener::bind(("127.0.0.1", p))).expect_err("full");
        let text = format!("{e:#}");
        assert!(
            text.contains("all 1 data ports") && text.contains(&first.to_string()),
            "{text}"
        );
        // UDP's ports are its own: the TCP listener does not take the UDP port.
        let u = bind_in(range, |p| UdpSocket::bind(("127.0.0.1", p))).expect("udp");
        assert_eq!(u.local_addr().expect("address").port(), first);
        let any = bind_in(None, |p| TcpListener::bind(("127.0.0.1", p))).expect("any");
        assert_ne!(any.local_addr().expect("address").port(), 0);
    }
}
