//! The agent's data ports: anywhere (the kernel picks), or inside `serve --data-ports
//! FIRST-LAST`, so a NAT or port forward of the control port and that range reaches every
//! data listener and UDP data socket (iperf3 #77, netperf #58, flent #212: the peers'
//! most-asked feature). A range with every port taken says so at once, naming the range,
//! instead of a client waiting on a port nobody forwards.

use anyhow::{bail, Result};

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
