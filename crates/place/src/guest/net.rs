//! How a booted guest's NIC reaches the host: a tap on a bridge in a namespace virtperf
//! creates (root; what a server's VM has), or QEMU's user networking (SLIRP: no root, no
//! bridge, no tap; what desktop VMs and rootless containers have), where only ports QEMU
//! forwards (`hostfwd`) reach the guest. Its tax against a tap is itself a number users ask
//! for, so both are placements of the same guest.

use std::net::{Ipv4Addr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use virtperf_machine::children::Tracked;

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
    /// passt (a user-mode network stack beside QEMU, by PID, reached over a unix socket)
    /// forwarding the same ports as `User`: no root either, and its own tax to measure.
    Passt,
}

/// The passt binary.
pub(super) const PASST: &str = "passt";

impl GuestNet {
    /// The name users write after `--guest-net`.
    pub fn name(self) -> &'static str {
        match self {
            GuestNet::Tap => "tap",
            GuestNet::User => "user",
            GuestNet::Passt => "passt",
        }
    }

    /// Whether the guest is reached through ports forwarded on the host's loopback.
    pub fn forwards(self) -> bool {
        self != GuestNet::Tap
    }

    /// Refuses what this backend cannot do, before anything is built.
    pub(super) fn check(self, direction: Direction, vhost: bool, queues: u32) -> Result<()> {
        if self == GuestNet::Tap {
            return Ok(());
        }
        let name = self.name();
        if matches!(direction, Direction::GuestHost | Direction::GuestGuest) {
            bail!(
                "guest:{} needs --guest-net tap: under --guest-net {name} only the host reaches the guest (through forwarded ports), the guest reaches nothing",
                direction.name()
            );
        }
        if vhost {
            bail!("vhost needs --guest-net tap (vhost-net serves tap devices, not --guest-net {name})");
        }
        if queues > 1 {
            bail!("queues={queues} needs --guest-net tap (--guest-net {name} has one queue)");
        }
        if self == GuestNet::Passt {
            let found = std::process::Command::new(PASST)
                .arg("--version")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
            if found.is_err() {
                bail!("--guest-net passt: {PASST} is not installed here (apt-get install passt), or use --guest-net user");
            }
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
            "passt" => Ok(GuestNet::Passt),
            _ => Err(anyhow!("unknown guest network {s:?} (tap, user, passt)")),
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
            GuestNet::User | GuestNet::Passt => {
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

    /// passt's arguments for this guest, its end of the QEMU connection at `fd`: the
    /// guest's address and SLIRP's gateway (so the two user-mode stacks give the guest the
    /// same view), and the same ports forwarded from the host's loopback; connections
    /// arrive from the gateway's address (passt maps the host's loopback to it), which the
    /// guest reaches without a route.
    pub fn passt_args(&self, fd: i32) -> Vec<String> {
        let mut a: Vec<String> = ["-f", "-4", "--fd"].iter().map(|s| s.to_string()).collect();
        a.push(fd.to_string());
        for (k, v) in [("-a", "10.0.2.15"), ("-n", "24"), ("-g", "10.0.2.2")] {
            a.push(k.into());
            a.push(v.into());
        }
        a.push("-t".into());
        a.push(format!("127.0.0.1/{}-{}", self.port, self.last_port()));
        if let Some((first, last)) = self.data_ports {
            a.push("-u".into());
            a.push(format!("127.0.0.1/{first}-{last}"));
        }
        a
    }

    /// The last port forwarded (the control port's block runs up to the data range's end).
    fn last_port(&self) -> u16 {
        self.data_ports.map_or(self.port, |(_, l)| l)
    }

    /// QEMU's `-netdev` for guest `i` (`fd`: QEMU's end of the connection to passt, under
    /// [`GuestNet::Passt`]).
    pub fn netdev(&self, net: GuestNet, i: usize, nic: &Nic, fd: i32) -> String {
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
            GuestNet::Passt => format!("stream,id=n0,addr.type=fd,addr.str={fd}"),
        }
    }
}

/// What a guest's NIC backend runs beside QEMU: under passt, passt itself and QEMU's end
/// of their connection until QEMU has inherited it; nothing otherwise.
pub(super) struct Backend {
    passt: Option<Tracked>,
    qemu_end: Option<std::os::unix::net::UnixStream>,
}

impl Backend {
    /// Starts guest `i`'s backend: under passt a connected pair, passt on one end (ours
    /// of it closes here), the other kept for QEMU.
    pub fn start(net: GuestNet, dir: &Path, i: usize, reach: &Reach) -> Result<Backend> {
        if net != GuestNet::Passt {
            return Ok(Backend {
                passt: None,
                qemu_end: None,
            });
        }
        let (passt_end, qemu_end) = std::os::unix::net::UnixStream::pair()?;
        let passt = start_passt(dir, i, reach, passt_end.as_raw_fd())?;
        Ok(Backend {
            passt: Some(passt),
            qemu_end: Some(qemu_end),
        })
    }

    /// The descriptor QEMU's `-netdev` names (-1: none).
    pub fn qemu_fd(&self) -> i32 {
        self.qemu_end.as_ref().map_or(-1, |e| e.as_raw_fd())
    }

    /// Once QEMU runs: passt, and our copy of QEMU's end closed (so passt sees QEMU go).
    pub fn started(self) -> Option<Tracked> {
        self.passt
    }
}

/// Starts passt for guest `i` on its end of the connection to QEMU (`fd`, inherited: no
/// socket file, and passt exits when QEMU closes it), and waits until it listens on every
/// forwarded port. passt does not fail when a port is taken (it forwards the rest), so its
/// listening sockets are read from /proc: one missing is the race [`free_block`] names,
/// and the boot retries on new ports. It dies with us (PDEATHSIG) and is killed by PID
/// with its guest.
pub(super) fn start_passt(dir: &Path, i: usize, reach: &Reach, fd: i32) -> Result<Tracked> {
    let log = dir.join(format!("passt{i}.log"));
    let out = std::fs::File::create(&log)?;
    let mut cmd = Command::new(PASST);
    cmd.args(reach.passt_args(fd))
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0);
    // SAFETY: prctl and fcntl in the child between fork and exec touch no shared state;
    // passt dies with us even if we are killed with SIGKILL, as QEMU does.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0
                || libc::fcntl(fd, libc::F_SETFD, 0) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = Tracked::spawn(&mut cmd, "passt")
        .map_err(|e| anyhow!("cannot start {PASST}: {e} (apt-get install passt)"))?;
    let tcp: Vec<u16> = (reach.port..=reach.last_port()).collect();
    let udp: Vec<u16> = reach
        .data_ports
        .map_or(Vec::new(), |(f, l)| (f..=l).collect());
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            bail!(
                "{PASST} for guest {i} exited ({status}): {}",
                super::text::tail(&text, 2)
            );
        }
        let (t, u) = listening(child.id()).map_err(|why| {
            let _ = child.kill();
            let _ = child.wait();
            anyhow!("cannot tell which ports {PASST} for guest {i} holds: {why}")
        })?;
        let missing: Vec<String> = tcp
            .iter()
            .filter(|p| !t.contains(p))
            .map(|p| format!("tcp {p}"))
            .chain(
                udp.iter()
                    .filter(|p| !u.contains(p))
                    .map(|p| format!("udp {p}")),
            )
            .collect();
        if missing.is_empty() {
            return Ok(child);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(ForwardTaken(format!(
                "{PASST} could not listen on {}",
                missing.join(", ")
            ))
            .into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The TCP ports process `pid` listens on and the UDP ports it has bound, from its socket
/// descriptors and its network namespace's /proc tables. Written by hand: a few lines of
/// /proc, not worth the `procfs` crate for the one question.
fn listening(pid: u32) -> Result<(Vec<u16>, Vec<u16>), String> {
    let inodes: Vec<String> = virtperf_measure::vm::fd_links(pid)
        .into_iter()
        .filter_map(|(_, l)| Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string()))
        .collect();
    // An unreadable table is said, not read as "no ports" (which would look like a race).
    let ports = |table: &str, listen_only: bool| -> Result<Vec<u16>, String> {
        let path = format!("/proc/{pid}/net/{table}");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
        Ok(text
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
                if (listen_only && *state != "0A") || !inodes.iter().any(|i| i == inode) {
                    return None;
                }
                u16::from_str_radix(local.rsplit_once(':')?.1, 16).ok()
            })
            .collect())
    };
    Ok((ports("tcp", true)?, ports("udp", false)?))
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
        let d = r.netdev(GuestNet::User, 0, &nic, -1);
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
        assert!(t
            .netdev(GuestNet::Tap, 1, &nic, -1)
            .contains("ifname=vptap1"));
    }

    /// passt forwards the same ports as SLIRP, on loopback only, over the descriptor QEMU
    /// is given the other end of; and a port another process holds is found before a boot
    /// (passt itself carries on without it), as the race the boot retries on.
    #[test]
    fn passt_forwards_the_agent_ports_and_a_taken_one_is_found() {
        let r = Reach::new(GuestNet::Passt, 0).expect("free ports");
        let (first, last) = r.data_ports.expect("a data range");
        let a = r.passt_args(7).join(" ");
        assert!(a.contains("--fd 7"), "{a}");
        assert!(
            a.contains(&format!("-t 127.0.0.1/{}-{last}", r.port)),
            "{a}"
        );
        assert!(a.contains(&format!("-u 127.0.0.1/{first}-{last}")), "{a}");
        let nic = Nic {
            vhost: false,
            queues: 1,
            device: String::new(),
        };
        assert_eq!(
            r.netdev(GuestNet::Passt, 0, &nic, 9),
            "stream,id=n0,addr.type=fd,addr.str=9"
        );
        if std::process::Command::new(PASST)
            .arg("--version")
            .output()
            .is_err()
        {
            virtperf_testkit::skip(
                "passt",
                &format!("the live half: {PASST} is not installed here"),
            );
            return;
        }
        let dir = std::env::temp_dir().join(format!("vp-passt-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let (ours, _theirs) = std::os::unix::net::UnixStream::pair().expect("pair");
        let fd = ours.as_raw_fd();
        // Free ports: passt listens on all of them.
        let mut p = start_passt(&dir, 0, &r, fd).expect("passt listens on every port");
        let (tcp, udp) = listening(p.id()).expect("its tables");
        assert!(tcp.contains(&r.port) && tcp.contains(&last), "{tcp:?}");
        assert!(udp.contains(&first), "{udp:?}");
        let _ = p.kill();
        let _ = p.wait();
        // One taken: found, as the race the boot retries on.
        let r2 = Reach::new(GuestNet::Passt, 0).expect("free ports");
        let held = TcpListener::bind((Ipv4Addr::LOCALHOST, r2.port + 3)).expect("hold one");
        let e = start_passt(&dir, 0, &r2, fd).expect_err("a port is taken");
        assert!(e.is::<ForwardTaken>(), "{e:#}");
        assert!(
            e.to_string().contains(&format!("tcp {}", r2.port + 3)),
            "{e:#}"
        );
        drop(held);
        let _ = std::fs::remove_dir_all(&dir);
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
        // `timeout` runs whether QEMU is there or not: ask QEMU itself first.
        if let Err(e) = std::process::Command::new(super::super::QEMU)
            .arg("--version")
            .output()
        {
            virtperf_testkit::skip("qemu", &format!("cannot run QEMU here ({e})"));
            return;
        }
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
                virtperf_testkit::skip("qemu", &format!("cannot run QEMU here ({e})"));
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
