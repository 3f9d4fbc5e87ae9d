//! How a booted guest's NIC reaches the host: a tap on a bridge in a namespace virtperf
//! creates (root; what a server's VM has), or QEMU's user networking (SLIRP: no root, no
//! bridge, no tap; what desktop VMs and rootless containers have), where only ports QEMU
//! forwards (`hostfwd`) reach the guest. Its tax against a tap is itself a number users ask
//! for, so both are placements of the same guest.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};

use anyhow::{anyhow, bail, Result};

use super::direction::Direction;
use crate::netns;

pub(super) const BRIDGE: &str = "vpbr0";
/// The host's address on the bridge (the guests' peer, and a guest-host agent's).
pub(super) const HOST_IP: Ipv4Addr = Ipv4Addr::new(10, 99, 3, 1);
/// A guest agent's control port on a tap.
pub(super) const GUEST_PORT: u16 = 7150;

/// Guest `i`'s address on the lab's bridge.
pub(super) fn tap_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 99, 3, 10 + i as u8)
}

/// The backend and device settings of each guest's NIC.
pub(super) struct Nic {
    pub vhost: bool,
    pub queues: u32,
    /// Options after `virtio-net-pci,netdev=…,mac=…,romfile=`.
    pub device: String,
}

/// A guest NIC's backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GuestNet {
    /// A tap on the lab's bridge, in a namespace virtperf creates (needs root).
    #[default]
    Tap,
    /// QEMU's user networking with the agent's control port and data range forwarded on
    /// the host's loopback (no root; the guest has no route beyond SLIRP's subnet).
    User,
}

impl GuestNet {
    /// The name users write after `--guest-net`.
    pub fn name(self) -> &'static str {
        match self {
            GuestNet::Tap => "tap",
            GuestNet::User => "user",
        }
    }

    /// Refuses what this backend cannot do, before anything is built.
    pub(super) fn check(self, direction: Direction, vhost: bool, queues: u32) -> Result<()> {
        if self == GuestNet::Tap {
            return Ok(());
        }
        if matches!(direction, Direction::GuestHost | Direction::GuestGuest) {
            bail!(
                "guest:{} needs --guest-net tap: under user networking only the host reaches the guest (through forwarded ports), the guest reaches nothing",
                direction.name()
            );
        }
        if vhost {
            bail!("vhost needs --guest-net tap (vhost-net serves tap devices, not QEMU's user networking)");
        }
        if queues > 1 {
            bail!("queues={queues} needs --guest-net tap (QEMU's user networking has one queue)");
        }
        Ok(())
    }
}

impl std::str::FromStr for GuestNet {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "tap" => Ok(GuestNet::Tap),
            "user" => Ok(GuestNet::User),
            _ => Err(anyhow!("unknown guest network {s:?} (tap, user)")),
        }
    }
}

/// The guest's address under user networking (QEMU's default 10.0.2.0/24).
pub(super) const USER_GUEST_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 15);
/// Data ports forwarded to a guest under user networking: one per test at a time (UDP: one
/// per flow), so parallel UDP flows and tests beside a load fit.
pub(super) const USER_DATA_PORTS: u16 = 16;

/// Where the host reaches guest `i`'s agent and what its agent binds.
#[derive(Debug, Clone)]
pub(super) struct Reach {
    /// The address the host connects to (the guest's own, or the host's loopback).
    pub host: String,
    /// The agent's control port, the same number on both sides of a forward.
    pub port: u16,
    /// The guest agent's data range (forwarded port for port), under user networking.
    pub data_ports: Option<(u16, u16)>,
    /// The guest's address on its NIC.
    pub guest_ip: Ipv4Addr,
}

impl Reach {
    /// Guest `i`'s reach under `net`: its bridge address, or a block of free ports on the
    /// host's loopback (forwarded to the same ports in the guest).
    pub fn new(net: GuestNet, i: usize) -> Result<Reach> {
        match net {
            GuestNet::Tap => {
                let ip = tap_ip(i);
                Ok(Reach {
                    host: ip.to_string(),
                    port: GUEST_PORT,
                    data_ports: None,
                    guest_ip: ip,
                })
            }
            GuestNet::User => {
                let first = free_block(1 + USER_DATA_PORTS)?;
                Ok(Reach {
                    host: Ipv4Addr::LOCALHOST.to_string(),
                    port: first,
                    data_ports: Some((first + 1, first + USER_DATA_PORTS)),
                    guest_ip: USER_GUEST_IP,
                })
            }
        }
    }

    /// QEMU's `-netdev` for guest `i`.
    pub fn netdev(&self, net: GuestNet, i: usize, nic: &Nic) -> String {
        match net {
            GuestNet::Tap => {
                let mut d = format!(
                    "tap,id=n0,ifname=vptap{i},script=no,downscript=no,vhost={}",
                    if nic.vhost { "on" } else { "off" }
                );
                if nic.queues > 1 {
                    d.push_str(&format!(",queues={}", nic.queues));
                }
                d
            }
            GuestNet::User => {
                // Not restrict=on: a restricted SLIRP drops the guest's UDP replies to a
                // forwarded datagram (UDP rr got no answer). The guest still reaches no
                // other machine: its init gives eth0 an address and no route, so only
                // 10.0.2.0/24 (SLIRP's own host alias for 127.0.0.1) is reachable, and its
                // agent connects only where the host's tests tell it to.
                let mut d = String::from("user,id=n0,net=10.0.2.0/24");
                let (first, last) = self.data_ports.unwrap_or((self.port, self.port));
                for p in std::iter::once(self.port).chain(first..=last) {
                    d.push_str(&format!(",hostfwd=tcp:127.0.0.1:{p}-:{p}"));
                }
                for p in first..=last {
                    d.push_str(&format!(",hostfwd=udp:127.0.0.1:{p}-:{p}"));
                }
                d
            }
        }
    }
}

/// The first of `n` consecutive ports free on the host's loopback for TCP and UDP, from a
/// start that differs per process (guests booting at once rarely meet). QEMU binds them a
/// moment later; a port taken in between fails QEMU's start with its own message.
fn free_block(n: u16) -> Result<u16> {
    let seed = u32::from(std::process::id() as u16)
        ^ (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos()));
    let (lo, hi) = (20_000u32, 60_000u32);
    let free = |p: u16| {
        TcpListener::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
            && UdpSocket::bind((Ipv4Addr::LOCALHOST, p)).is_ok()
    };
    for attempt in 0..64u32 {
        let start = lo + (seed.wrapping_add(attempt.wrapping_mul(7919)) % (hi - lo));
        let start = start as u16;
        if (start..start + n).all(free) {
            return Ok(start);
        }
    }
    bail!(
        "no {n} consecutive free ports on 127.0.0.1 between {lo} and {hi} for the guest's forwards"
    )
}

/// QEMU's message when a `hostfwd` port it was given is taken on the host.
pub(super) const FORWARD_FAILED: &str = "Could not set up host forwarding rule";

/// QEMU exited because another process took one of the loopback ports chosen for its
/// forwards after they were probed free: the boot retries with a new block.
#[derive(Debug)]
pub(super) struct ForwardTaken(pub String);

impl std::fmt::Display for ForwardTaken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "QEMU could not bind a forwarded port on 127.0.0.1: {}",
            self.0
        )
    }
}

impl std::error::Error for ForwardTaken {}

/// The lab's bridge (the host's address on it) and one tap per guest on it, in `ns`;
/// multiqueue taps for several queue pairs (one fd per queue for QEMU).
pub(super) fn bridge_and_taps(ns: &str, guests: usize, queues: u32) -> Result<()> {
    let host_cidr = format!("{HOST_IP}/24");
    netns::exec_in(ns, &["ip", "link", "add", BRIDGE, "type", "bridge"])?;
    netns::exec_in(ns, &["ip", "addr", "add", &host_cidr, "dev", BRIDGE])?;
    netns::exec_in(ns, &["ip", "link", "set", BRIDGE, "up"])?;
    for i in 0..guests {
        let tap = format!("vptap{i}");
        // Several queue pairs need a multiqueue tap (one fd per queue for QEMU).
        let mut add = vec!["ip", "tuntap", "add", "dev", &tap, "mode", "tap"];
        if queues > 1 {
            add.push("multi_queue");
        }
        netns::exec_in(ns, &add)?;
        netns::exec_in(ns, &["ip", "link", "set", &tap, "master", BRIDGE])?;
        netns::exec_in(ns, &["ip", "link", "set", &tap, "up"])?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// User networking forwards the control port and every data port (TCP and UDP) on
    /// loopback only; a tap reaches the guest's bridge address.
    #[test]
    fn user_networking_forwards_exactly_the_agent_ports_on_loopback() {
        let nic = Nic {
            vhost: false,
            queues: 1,
            device: String::new(),
        };
        let r = Reach::new(GuestNet::User, 0).expect("free ports");
        let (first, last) = r.data_ports.expect("a data range");
        assert_eq!(first, r.port + 1);
        assert_eq!(last - first + 1, USER_DATA_PORTS);
        let d = r.netdev(GuestNet::User, 0, &nic);
        assert!(
            d.starts_with("user,") && d.contains("net=10.0.2.0/24"),
            "{d}"
        );
        let fwds: Vec<&str> = d.split(',').filter(|w| w.starts_with("hostfwd=")).collect();
        assert_eq!(fwds.len(), 1 + 2 * usize::from(USER_DATA_PORTS), "{d}");
        assert!(fwds.iter().all(|f| f.contains(":127.0.0.1:")), "{d}");
        assert!(d.contains(&format!("hostfwd=tcp:127.0.0.1:{0}-:{0}", r.port)));
        assert!(d.contains(&format!("hostfwd=udp:127.0.0.1:{last}-:{last}")));
        let t = Reach::new(GuestNet::Tap, 1).expect("tap");
        assert_eq!(t.host, "10.99.3.11");
        assert!(t.netdev(GuestNet::Tap, 1, &nic).contains("ifname=vptap1"));
    }

    /// What user networking cannot do is refused by name before a boot.
    #[test]
    fn user_networking_refuses_what_it_cannot_do() {
        let u = GuestNet::User;
        assert!(u.check(Direction::HostGuest, false, 1).is_ok());
        assert!(u.check(Direction::Loopback, false, 1).is_ok());
        for (d, vhost, q, word) in [
            (Direction::GuestHost, false, 1, "guest-host"),
            (Direction::GuestGuest, false, 1, "guest-guest"),
            (Direction::HostGuest, true, 1, "vhost"),
            (Direction::HostGuest, false, 2, "queues=2"),
        ] {
            let e = u.check(d, vhost, q).expect_err("refused").to_string();
            assert!(e.contains(word) && e.contains("--guest-net tap"), "{e}");
        }
        assert!("slirp".parse::<GuestNet>().is_err());
    }

    /// The boot's retry on a taken port depends on QEMU's own words for it: QEMU is asked
    /// to forward a port this test holds, and must fail with them.
    #[test]
    fn qemu_names_a_taken_forward_port_as_the_boot_expects() {
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a loopback port");
        let p = held.local_addr().expect("its address").port();
        // Bounded: a QEMU that did start (with -machine none) would otherwise run on.
        let out = match std::process::Command::new("timeout")
            .args(["10", super::super::QEMU])
            .args(["-nodefaults", "-display", "none", "-machine", "none"])
            .args([
                "-netdev",
                &format!("user,id=n0,hostfwd=tcp:127.0.0.1:{p}-:{p}"),
            ])
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                eprintln!("skipped: cannot run QEMU here ({e})");
                return;
            }
        };
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "QEMU started with a taken port: {err}"
        );
        assert!(err.contains(FORWARD_FAILED), "{err}");
    }
}
