//! An agent whose data port takes requests and never answers one (issue 39): over UDP every
//! transaction is lost (a firewall that drops the responses does the same), so the trial
//! completes none; it has no latency and no service demand, and none is stored, shown or
//! exported as 0 (they used to be 0.0, the best latency ever measured).

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::time::Duration;

use common::{run_db_ok, run_with_timeout, vp, TempDir};
use virtperf_wire::{read_message, write_message, Message, SideReport, PROTOCOL_VERSION};

/// Takes every datagram, answering none.
fn swallow_udp(s: UdpSocket) {
    let mut buf = [0u8; 65536];
    while s.recv(&mut buf).is_ok() {}
}

/// Takes every set-up connection: reads the test's key and the client's UDP port, gives
/// the port of `udp` (UDP's set-up rides on the TCP data port), then reads to the end.
fn swallow(listener: TcpListener, udp: u16) {
    for c in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let mut c = c;
            let mut setup = [0u8; virtperf_wire::DATA_KEY_LEN + 2];
            if c.read_exact(&mut setup).is_err() || c.write_all(&udp.to_be_bytes()).is_err() {
                return;
            }
            let mut buf = [0u8; 4096];
            while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
}

/// One control connection of the silent agent: a well-behaved protocol peer whose data
/// port takes requests and never responds; with `waiting`, it first says another
/// measurement holds its machine, in those words.
fn control(mut c: TcpStream, waiting: Option<&'static str>) {
    while let Ok(m) = read_message(&mut c) {
        let reply = match m {
            // The client's window closed: nothing to answer.
            Message::End => continue,
            Message::Hello { .. } => Message::Welcome {
                version: PROTOCOL_VERSION,
                agent: "silent test agent".into(),
            },
            Message::Fingerprint => Message::Env {
                env: Box::default(),
            },
            Message::Prepare { .. } => {
                if let Some(holder) = waiting {
                    let w = Message::Waiting {
                        holder: holder.into(),
                    };
                    if write_message(&mut c, &w).is_err() {
                        return;
                    }
                }
                // A UDP port whose TCP twin is free too: another process may hold the
                // TCP port of the number UDP got (it failed CI once), so try again.
                let (udp, tcp) = (0..100)
                    .find_map(|_| {
                        let u = UdpSocket::bind("127.0.0.1:0").ok()?;
                        let port = u.local_addr().ok()?.port();
                        let t = TcpListener::bind(("127.0.0.1", port)).ok()?;
                        Some((u, t))
                    })
                    .expect("a UDP port with a free TCP twin");
                let data_port = udp.local_addr().expect("bound").port();
                std::thread::spawn(move || swallow_udp(udp));
                std::thread::spawn(move || swallow(tcp, data_port));
                Message::Ready {
                    data_port,
                    key: "00".repeat(virtperf_wire::DATA_KEY_LEN),
                }
            }
            Message::Hold => Message::Held { lock: None },
            Message::Start => Message::Started,
            Message::Stop => Message::Report {
                side: Box::new(SideReport::default()),
            },
            other => Message::Error {
                message: format!("the silent agent does not answer {other:?}"),
            },
        };
        if write_message(&mut c, &reply).is_err() {
            return;
        }
    }
}

/// Starts the silent agent on loopback (see [`control`]); its control port.
fn silent_agent(waiting: Option<&'static str>) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("control port");
    let port = l.local_addr().expect("bound").port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || control(c, waiting));
        }
    });
    port
}

#[test]
fn a_trial_with_no_transaction_stores_no_latency_and_no_demand() {
    let port = silent_agent(None).to_string();
    let d = TempDir::new("silent-agent");
    let db = d.path("r.db");
    let out = run_with_timeout(
        vp().args([
            "rr",
            "-H",
            "127.0.0.1",
            "--port",
            &port,
            "-l",
            "500ms",
            "--json",
        ])
        .args(["--protocol", "udp", "--loss-timeout", "50ms"])
        .args(["--allow-concurrent", "--db"])
        .arg(&db),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON");
    assert_eq!(printed["outcome"]["transactions"], 0, "{printed}");
    assert!(
        printed["outcome"]["udp"]["lost"].as_u64() > Some(0),
        "every request was lost: {printed}"
    );
    assert!(printed["outcome"]["latency"].is_null(), "{printed}");
    assert!(
        printed["cpu"]["client"]["service_demand_us"].is_null(),
        "{printed}"
    );
    let warned = printed["warnings"].to_string();
    assert!(warned.contains("no transaction completed"), "{warned}");

    // Stored: show --format json and export carry no latency or demand metric.
    let shown = run_db_ok(&["show", "last", "--format", "json"], &db);
    let exported = run_db_ok(&["export", "last", "--format", "json"], &db);
    for (what, text) in [("show", &shown), ("export", &exported)] {
        for metric in [
            "\"mean_us\"",
            "\"p50_us\"",
            "\"p99_us\"",
            "client_demand_us",
        ] {
            assert!(!text.contains(metric), "{what} has {metric}: {text}");
        }
        assert!(text.contains("rate_per_s"), "{what}: {text}");
    }
    let csv = run_db_ok(&["export", "last", "--format", "csv"], &db);
    assert!(!csv.contains("p50_us"), "{csv}");
}

/// Issue 40 §8: who holds an agent's machine is the agent's words, printed escaped: a
/// terminal escape sequence in `Waiting.holder` reaches the terminal as text.
#[test]
fn a_waiting_holder_is_printed_escaped() {
    let port = silent_agent(Some("\u{1b}]0;pwned\u{7}\u{1b}[2J rr (pid 1)")).to_string();
    let out = run_with_timeout(
        vp().args(["rr", "-H", "127.0.0.1", "--port", &port, "-l", "200ms"])
            .args(["--protocol", "udp", "--allow-concurrent"]),
        Duration::from_secs(60),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("waiting for another measurement"), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
    assert!(err.contains("\\u{1b}]0;pwned"), "{err}");
}
