//! `serve --data-ports FIRST-LAST` (issue 42 §2): every data listener and UDP data socket of
//! the agent inside the range, so forwarding the control port and the range is enough; a
//! range with every port taken answered at once, in one line that names it.

use crate::common;

use std::net::{TcpListener, UdpSocket};

use common::{run_fail, run_json, Agent};

/// Two consecutive ports free on 127.0.0.1 for TCP and UDP, as `FIRST-LAST`.
fn free_range() -> (u16, u16) {
    for _ in 0..50 {
        let a = TcpListener::bind("127.0.0.1:0").expect("bind");
        let p = a.local_addr().expect("address").port();
        let free = |q: u16| {
            TcpListener::bind(("127.0.0.1", q)).is_ok() && UdpSocket::bind(("127.0.0.1", q)).is_ok()
        };
        drop(a);
        if p < u16::MAX && free(p) && free(p + 1) {
            return (p, p + 1);
        }
    }
    panic!("no two free consecutive ports on 127.0.0.1");
}

/// `workload` against the agent on `port`, 300 ms when it is timed.
fn test<'a>(workload: &[&'a str], port: &'a str) -> Vec<&'a str> {
    let mut v = workload.to_vec();
    v.extend(["--host", "127.0.0.1", "--port", port, "--token", "t"]);
    if workload[0] != "bulk" {
        v.extend(["-l", "300ms"]);
    }
    v
}

/// The agent's data ports are the range's and nothing else: with both of its TCP ports
/// taken by another program every TCP test is refused as busy (an agent that ignored the
/// range would bind elsewhere and pass), with its UDP ports taken UDP tests are, and with
/// the ports free again every workload runs through them.
#[test]
fn data_ports_stay_in_the_range_and_a_full_range_is_busy() {
    let (first, last) = free_range();
    let range = format!("{first}-{last}");
    let agent = Agent::start(&["--token", "t", "--data-ports", &range, "--concurrent", "4"]);
    let port = agent.port();
    let held: Vec<TcpListener> = [first, last]
        .iter()
        .map(|p| TcpListener::bind(("127.0.0.1", *p)).expect("hold"))
        .collect();
    let (code, err) = run_fail(&test(&["rr"], &port));
    assert_ne!(code, 0);
    common::assert_one_line_error(&err, "agent busy: all 2 data ports");
    assert!(err.contains(&range), "{err}");
    drop(held);

    // UDP: its data sockets bind in the range too (set-up rides on the TCP data port).
    let held: Vec<UdpSocket> = [first, last]
        .iter()
        .map(|p| UdpSocket::bind(("127.0.0.1", *p)).expect("hold udp"))
        .collect();
    let (_, err) = run_fail(&test(&["rr", "--protocol", "udp"], &port));
    assert!(err.contains("agent busy: all 2 data ports"), "{err}");
    let v = run_json(&test(&["rr"], &port));
    assert!(
        v["outcome"]["transactions"].as_u64().unwrap_or(0) > 0,
        "{v}"
    );
    drop(held);

    for extra in [
        &["rr", "--protocol", "udp"][..],
        &["stream", "-P", "2"][..],
        &["stream", "--protocol", "udp", "-P", "2"][..],
        &["crr"][..],
        &["rr", "-P", "4", "--threads", "2"][..],
    ] {
        let v = run_json(&test(extra, &port));
        let o = &v["outcome"];
        let moved = o["transactions"].as_u64().unwrap_or(0) > 0 || o["mbps"].as_f64() > Some(0.0);
        assert!(moved, "{extra:?}: {o}");
    }
    let v = run_json(&test(&["bulk", "--bytes", "1MB"], &port));
    assert_eq!(v["outcome"]["receiver_bytes"], 1_000_000, "{v}");
}

/// A range that holds the control port, or is not a range, is refused before the agent
/// starts, in one line.
#[test]
fn bad_ranges_are_refused_in_one_line() {
    let (code, err) = run_fail(&["serve", "--port", "17160", "--data-ports", "17151-17170"]);
    assert_ne!(code, 0);
    common::assert_one_line_error(&err, "control port 17160 is inside --data-ports");
    for bad in ["0-10", "20-10", "x", "1-70000"] {
        let (code, err) = run_fail(&["serve", "--data-ports", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("invalid port range"), "{bad}: {err}");
    }
}

/// A network this test makes and removes: a namespace holding the agent behind a veth pair,
/// and on this side an address that reaches it only through nftables DNAT of the control
/// port and a data port range (nothing else is routed to it).
struct Dnat {
    ns: String,
    veth: String,
    front: String,
    table: String,
}

impl Dnat {
    const AGENT: &'static str = "10.213.41.2";
    const FRONT: &'static str = "10.214.41.1";

    fn sh(args: &[&str]) -> Result<(), String> {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .map_err(|e| format!("{}: {e}", args[0]))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// Builds it, forwarding TCP `ctl` and TCP and UDP `first`-`last` to the agent.
    fn make(ctl: u16, first: u16, last: u16) -> Result<Dnat, String> {
        let id = std::process::id() % 100_000;
        let d = Dnat {
            ns: format!("vp-dnat-{id}"),
            veth: format!("vpdn{id}"),
            front: format!("{}/32", Dnat::FRONT),
            table: format!("vp_dnat_{id}"),
        };
        let (ns, veth, peer) = (&d.ns, &d.veth, format!("{}p", d.veth));
        Dnat::sh(&["ip", "netns", "add", ns])?;
        Dnat::sh(&[
            "ip", "link", "add", veth, "type", "veth", "peer", "name", &peer,
        ])?;
        Dnat::sh(&["ip", "link", "set", &peer, "netns", ns])?;
        Dnat::sh(&["ip", "addr", "add", "10.213.41.1/24", "dev", veth])?;
        Dnat::sh(&["ip", "link", "set", veth, "up"])?;
        let agent = format!("{}/24", Dnat::AGENT);
        Dnat::sh(&["ip", "-n", ns, "addr", "add", &agent, "dev", &peer])?;
        Dnat::sh(&["ip", "-n", ns, "link", "set", &peer, "up"])?;
        Dnat::sh(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        // Replies to the front address go back through this side, where the DNAT is undone.
        Dnat::sh(&[
            "ip",
            "-n",
            ns,
            "route",
            "add",
            "default",
            "via",
            "10.213.41.1",
        ])?;
        // The front address on loopback: local, and reaching the agent only through the DNAT.
        Dnat::sh(&["ip", "addr", "add", &d.front, "dev", "lo"])?;
        let rules = format!(
            "table ip {t} {{\n  chain out {{\n    type nat hook output priority -100;\n    \
             ip daddr {f} tcp dport {{ {ctl}, {first}-{last} }} dnat to {a}\n    \
             ip daddr {f} udp dport {first}-{last} dnat to {a}\n  }}\n}}\n",
            t = d.table,
            f = Dnat::FRONT,
            a = Dnat::AGENT
        );
        let file = std::env::temp_dir().join(format!("{}.nft", d.table));
        std::fs::write(&file, rules).map_err(|e| e.to_string())?;
        let loaded = Dnat::sh(&["nft", "-f", &file.to_string_lossy()]);
        let _ = std::fs::remove_file(&file);
        loaded?;
        Ok(d)
    }

    /// `virtperf serve` inside the namespace with `extra` flags, listening on the agent's
    /// address and control port `ctl`.
    fn agent(&self, ctl: u16, extra: &[&str]) -> Agent {
        let mut c = std::process::Command::new("ip");
        let port = ctl.to_string();
        c.args([
            "netns",
            "exec",
            &self.ns,
            env!("CARGO_BIN_EXE_virtperf"),
            "serve",
        ])
        .args([
            "--bind",
            Dnat::AGENT,
            "--port",
            &port,
            "--token",
            "t",
            "--announce",
        ])
        .args(["--quiet", "--concurrent", "4"])
        .args(extra);
        Agent::start_raw(c)
    }
}

impl Drop for Dnat {
    fn drop(&mut self) {
        let _ = Dnat::sh(&["nft", "delete", "table", "ip", &self.table]);
        let _ = Dnat::sh(&["ip", "addr", "del", &self.front, "dev", "lo"]);
        let _ = Dnat::sh(&["ip", "link", "del", &self.veth]);
        let _ = Dnat::sh(&["ip", "netns", "del", &self.ns]);
    }
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Issue 42 §2 (a): an agent reachable only through DNAT of its control port and its data
/// port range runs every workload; the same agent without `--data-ports` (ports the kernel
/// picks, which nothing forwards) cannot run one.
#[test]
fn every_workload_runs_through_a_dnat_of_the_control_port_and_the_range() {
    if !virtperf_testkit::need_root("namespaces, veth and nftables need root") {
        return;
    }
    let (first, last) = (17241, 17248);
    let ctl = 17240;
    let net = match Dnat::make(ctl, first, last) {
        Ok(n) => n,
        Err(e) => {
            virtperf_testkit::skip("nft", &format!("cannot build the DNAT: {e}"));
            return;
        }
    };
    let port = ctl.to_string();
    let on = |w: &[&str]| {
        let mut v: Vec<String> = w.iter().map(|s| s.to_string()).collect();
        v.extend(["--host", Dnat::FRONT, "--port", &port, "--token", "t"].map(String::from));
        if !matches!(w[0], "bulk" | "http") {
            v.extend(["-l", "300ms"].map(String::from));
        }
        v
    };
    {
        // Without the range the first data connection goes to a port nobody forwards.
        let _unforwarded = net.agent(ctl, &[]);
        let (_, err) = run_fail(&refs(&on(&["rr"])));
        assert!(err.contains("data connection"), "{err}");
    }
    let range = format!("{first}-{last}");
    let _agent = net.agent(ctl, &["--data-ports", &range]);
    vm_compare_gates_on_the_tax(&format!("remote:{}:{ctl}", Dnat::FRONT));
    for w in [
        &["rr"][..],
        &["rr", "--protocol", "udp"][..],
        &["crr"][..],
        &["stream", "-P", "2"][..],
        &["stream", "--reverse"][..],
        &["stream", "--protocol", "udp"][..],
        &["rr", "-P", "4", "--threads", "2"][..],
        &["bulk", "--bytes", "1MB"][..],
        &["http", "--bytes", "100KB", "--count", "2"][..],
    ] {
        let v = run_json(&refs(&on(w)));
        assert!(
            v["target"].as_str().unwrap_or("").starts_with(Dnat::FRONT),
            "{w:?}: {}",
            v["target"]
        );
        let o = &v["outcome"];
        let moved = o["transactions"].as_u64().unwrap_or(0) > 0
            || o["mbps"].as_f64() > Some(0.0)
            || o["receiver_bytes"].as_u64() > Some(0)
            || o["downloads"].as_array().is_some_and(|d| d.len() == 2);
        assert!(moved, "{w:?}: {o}");
    }
}

/// Issue 42 §1: `vm compare` between any two placements — here a namespace natively and,
/// as the "guest", the agent behind the DNAT — stores one run each time. `--max-tax` with
/// one try cannot decide (no interval: exit 5, every row "undecided"); with three tries a
/// throughput limit no tax reaches lies above the tax's interval and passes (exit 3 over
/// a gate is tax_gate.rs's).
fn vm_compare_gates_on_the_tax(guest: &str) {
    let dir = std::env::temp_dir().join(format!("vp-vmtax-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let db = dir.join("r.db");
    let run_on = |max: &str, runs: &str, workloads: &str| {
        common::vm_compare_gated("netns:veth", guest, workloads, runs, max, &db)
    };
    let run = |max: &str, runs: &str| run_on(max, runs, "rr");
    let (code, v, err) = run("5%", "1");
    assert_eq!(v["guest_placement"], guest, "{v}");
    assert_eq!(v["native_placement"], "netns:veth", "{v}");
    let rows = v["rows"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{v}");
    assert_eq!(code, Some(5), "{err}");
    common::assert_one_line_error(&err, "--max-tax undecided");
    assert!(rows.iter().all(|r| r["gate"] == "undecided"), "{v}");
    // Throughput's tax cannot come near 1000% (its interval's top is about 100% at
    // worst), where a p99 of three short tries can spike past anything: met, exit 0. Five
    // tries: with three, one slow try across the veth once put the native mean's interval
    // down to 0, and a ratio over a baseline that may be 0 has no interval (rightly
    // undecided, exit 5; CI saw it).
    let (code, v, err) = run_on("stream=1000%", "5", "stream");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["run_id"], 2, "each compare is one stored run: {v}");
    for r in v["rows"].as_array().expect("rows") {
        assert_eq!(r["gate"], "met", "{r}");
        assert!(r["tax_high"].as_f64().is_some_and(|h| h <= 1000.0), "{r}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 53: a data range smaller than the test's flows is said to be too small (not
/// "busy: wait for the other tests"), and `--port 0` never puts the control port inside the
/// data range, even one over the kernel's whole ephemeral span (as root a port below it).
#[test]
fn a_range_too_small_is_said_so_and_the_control_port_stays_outside_it() {
    let base = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("port")
        .port()
        .min(65000);
    let range = format!("{base}-{}", base + 2);
    let a = Agent::start(&["--data-ports", &range]);
    let ctl: u16 = a.port().parse().expect("port");
    assert!(
        !(base..=base + 2).contains(&ctl),
        "control port {ctl} inside {range}"
    );
    let (_, err) = run_fail(&[
        "rr",
        "--host",
        "127.0.0.1",
        "--port",
        &a.port(),
        "--protocol",
        "udp",
        "-P",
        "5",
        "-l",
        "300ms",
    ]);
    common::assert_one_line_error(&err, "needs 5 data ports");
    assert!(
        err.contains(&range) && !err.contains("wait for the other tests"),
        "{err}"
    );
    if virtperf_testkit::is_root() {
        let wide = Agent::start(&["--data-ports", "1024-65535"]);
        let ctl: u16 = wide.port().parse().expect("port");
        assert!(ctl < 1024, "control port {ctl} inside 1024-65535");
    }
}
