//! Forged datagrams against a real test (issue 27): a raw socket sends datagrams that carry
//! the test's own addresses and ports, as only a privileged attacker on the machine can.
//! One with sequence number 2^63 into a UDP stream's receiver made its loss 2^63; a spray
//! of 1-byte datagrams at a UDP rr client doubled its rate, silently. Now both are counted
//! apart and warned about. Root only (raw sockets); skipped with the reason otherwise.

use crate::common;

use std::net::Ipv4Addr;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{vp, wait_output, Agent};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// The socket inodes process `pid` holds, in any of its threads' descriptor tables (the
/// data workers run with private ones).
fn inodes_of(pid: u32) -> Vec<u64> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for t in tasks.flatten() {
        let Ok(dir) = std::fs::read_dir(t.path().join("fd")) else {
            continue;
        };
        out.extend(dir.flatten().filter_map(|e| {
            let l = std::fs::read_link(e.path()).ok()?;
            let l = l.to_str()?;
            l.strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse::<u64>()
                .ok()
        }));
    }
    out
}

/// Of `pid`'s UDP sockets, the first connected one on loopback: (its port, its peer's).
fn connected_udp_of(pid: u32) -> Option<(u16, u16)> {
    let mine = inodes_of(pid);
    let table = std::fs::read_to_string("/proc/net/udp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (local, remote, inode) = (f.get(1)?, f.get(2)?, f.get(9)?.parse::<u64>().ok()?);
        let port = |a: &str| u16::from_str_radix(a.split(':').nth(1)?, 16).ok();
        let (lp, rp) = (port(local)?, port(remote)?);
        (rp != 0 && mine.contains(&inode) && local.starts_with("0100007F")).then_some((lp, rp))
    })
}

/// Sends `payload` in a UDP datagram from 127.0.0.1:`src` to 127.0.0.1:`dst`, through a raw
/// socket that writes the IP header itself (the source is whatever we say).
fn forge(src: u16, dst: u16, payload: &[u8], count: usize) {
    // SAFETY: plain socket(2); the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_RAW) };
    assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut p = vec![0u8; total];
    p[0] = 0x45; // IPv4, 5-word header
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[8] = 64; // TTL
    p[9] = libc::IPPROTO_UDP as u8;
    p[12..16].copy_from_slice(&Ipv4Addr::LOCALHOST.octets());
    p[16..20].copy_from_slice(&Ipv4Addr::LOCALHOST.octets());
    p[20..22].copy_from_slice(&src.to_be_bytes());
    p[22..24].copy_from_slice(&dst.to_be_bytes());
    p[24..26].copy_from_slice(&(udp_len as u16).to_be_bytes());
    // UDP checksum 0: none, which IPv4 allows. The kernel fills the IP checksum.
    p[28..].copy_from_slice(payload);
    let to = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: 0,
        sin_addr: libc::in_addr {
            s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    };
    for _ in 0..count {
        // SAFETY: `p` and `to` outlive the call; the lengths are theirs.
        let n = unsafe {
            libc::sendto(
                fd,
                p.as_ptr().cast(),
                p.len(),
                0,
                (&to as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        };
        assert_eq!(n, total as isize, "{}", std::io::Error::last_os_error());
    }
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
}

/// Starts a test against `agent` and waits until `pid_of` finds its connected UDP socket.
fn start(agent: &Agent, args: &[&str]) -> Child {
    let mut a = args.to_vec();
    let port = agent.port();
    a.extend([
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--json",
        "--allow-concurrent",
    ]);
    vp().args(&a)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn virtperf")
}

fn wait_for_socket(pid: u32) -> (u16, u16) {
    let t0 = Instant::now();
    loop {
        if let Some(p) = connected_udp_of(pid) {
            return p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no UDP socket of {pid}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn skip(why: &str) {
    virtperf_testkit::skip("root", why);
}

/// One datagram numbered 2^63, from the client's port to the agent's receiver, mid-stream.
#[test]
fn a_forged_sequence_number_is_counted_apart_not_as_loss() {
    if !root() {
        return skip("raw sockets need root");
    }
    let agent = Agent::start(&[]);
    let child = start(
        &agent,
        &[
            "stream",
            "--protocol",
            "udp",
            "--rate",
            "100mbit",
            "-l",
            "2s",
        ],
    );
    let (agent_port, client_port) = wait_for_socket(agent.pid());
    std::thread::sleep(Duration::from_millis(500));
    let mut payload = vec![0u8; 64];
    payload[..8].copy_from_slice(&(1u64 << 63).to_le_bytes());
    forge(client_port, agent_port, &payload, 1);
    let out = wait_output(child, Duration::from_secs(30));
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let udp = &v["outcome"]["udp"];
    let (sent, lost) = (
        udp["datagrams_sent"].as_u64().unwrap(),
        udp["lost"].as_u64().unwrap(),
    );
    assert!(lost <= sent, "lost {lost} of {sent} sent: {udp}");
    assert!(udp["lost_pct"].as_f64().unwrap() < 50.0, "{udp}");
    let w = v["warnings"].to_string();
    assert!(w.contains("1 datagrams carried sequence numbers"), "{w}");
}

/// A spray of 1-byte datagrams at a UDP rr client from the agent's port: some are taken
/// for answers (a 1-byte request carries a 1-byte tag), and the result says it cannot be
/// trusted instead of reporting a doubled rate in silence.
#[test]
fn forged_answers_to_udp_rr_are_reported() {
    if !root() {
        return skip("raw sockets need root");
    }
    let agent = Agent::start(&[]);
    let child = start(&agent, &["rr", "--protocol", "udp", "-l", "2s"]);
    let (client_port, agent_port) = wait_for_socket(child.id());
    std::thread::sleep(Duration::from_millis(300));
    for b in 0..=255u8 {
        forge(agent_port, client_port, &[b], 100);
    }
    let out = wait_output(child, Duration::from_secs(30));
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let w = v["warnings"].to_string();
    assert!(
        w.contains("someone other than the agent"),
        "{w}\n{}",
        v["outcome"]["udp"]
    );
}
