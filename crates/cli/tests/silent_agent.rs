//! An agent whose data port takes requests and never answers one (issue 39): over UDP every
//! transaction is lost (a firewall that drops the responses does the same), so the trial
//! completes none; it has no latency and no service demand, and none is stored, shown or
//! exported as 0 (they used to be 0.0, the best latency ever measured).

use crate::common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::process::Stdio;
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

/// How the silent agent answers, besides never answering a request.
#[derive(Clone, Default)]
struct Silent {
    /// First say another measurement holds the machine, in these words.
    waiting: Option<&'static str>,
    /// And then never get the machine (the other measurement never ends).
    held_forever: bool,
    /// Told when the client starts the test (its warm-up, or its interval, begins).
    started: Option<std::sync::mpsc::Sender<()>>,
}

/// One control connection of the silent agent: a well-behaved protocol peer whose data
/// port takes requests and never responds; it behaves as `how` says.
fn control(mut c: TcpStream, how: Silent) {
    let waiting = how.waiting;
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
                    if how.held_forever {
                        continue;
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
            Message::Start => {
                if let Some(t) = &how.started {
                    let _ = t.send(());
                }
                Message::Started
            }
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
    silent_agent_that(Silent {
        waiting,
        ..Silent::default()
    })
}

/// Starts a silent agent that behaves as `how` says; its control port.
fn silent_agent_that(how: Silent) -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("control port");
    let port = l.local_addr().expect("bound").port();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let how = how.clone();
            std::thread::spawn(move || control(c, how));
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

/// A Ctrl-C while the client waits for the agent's machine ends the command at once, exit
/// 130, saying nothing was measured; its JSON stream ends `interrupted` with no data. It
/// used to notice the signal only when the wait ended (15 s measured behind a 20 s test,
/// here 10 s and then a timeout), and then printed a table of zeros.
#[test]
fn a_signal_while_waiting_for_the_agents_machine_ends_at_once() {
    let port = silent_agent_that(Silent {
        waiting: Some("rr (pid 1)"),
        held_forever: true,
        started: None,
    })
    .to_string();
    let (child, mut stderr) = rr_against(&port, &["--json-stream"]);
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("waiting for another measurement") {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => panic!("ended early: {}", String::from_utf8_lossy(&seen)),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    let out = interrupted_at_once(
        child,
        stderr,
        &[
            "while waiting for the agent's machine",
            "nothing was measured",
        ],
    );
    let end = last_event(&out.stdout);
    assert_eq!(end["reason"], "interrupted", "{end}");
    assert!(end["data"].is_null(), "no result of nothing: {end}");
}

/// A signal in the warm-up (`--omit`), before the measured interval began, measures
/// nothing: exit 130 at once, no result printed. It used to open the interval anyway, wait
/// out the data timeout (10 s) on a request the agent never answered, and fail.
#[test]
fn a_signal_in_the_warm_up_measures_nothing() {
    let (tx, rx) = std::sync::mpsc::channel();
    let port = silent_agent_that(Silent {
        started: Some(tx),
        ..Silent::default()
    })
    .to_string();
    let (child, stderr) = rr_against(&port, &["--omit", "60s"]);
    rx.recv_timeout(Duration::from_secs(60))
        .expect("the client started the test");
    std::thread::sleep(Duration::from_millis(200));
    let out = interrupted_at_once(
        child,
        stderr,
        &["before the measured interval began: nothing was measured"],
    );
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.trim().is_empty(), "no table of nothing: {printed}");
}

/// Starts `virtperf rr -H 127.0.0.1 --port PORT -l 1s --allow-concurrent EXTRA`, its
/// standard error taken to be read as it comes.
fn rr_against(port: &str, extra: &[&str]) -> (std::process::Child, std::process::ChildStderr) {
    let mut child = vp()
        .args(["rr", "-H", "127.0.0.1", "--port", port, "-l", "1s"])
        .arg("--allow-concurrent")
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stderr = child.stderr.take().expect("stderr");
    (child, stderr)
}

/// Sends SIGINT to `child` and checks it ended at once (under 3 s), exit 130, its stderr
/// saying each of `said`; its output.
fn interrupted_at_once(
    child: std::process::Child,
    mut stderr: std::process::ChildStderr,
    said: &[&str],
) -> std::process::Output {
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = std::time::Instant::now();
    let out = common::wait_output(child, Duration::from_secs(60));
    let took = t0.elapsed();
    let err = reader.join().expect("stderr");
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}: {err}");
    for s in said {
        assert!(err.contains(s), "{err}");
    }
    out
}

/// The last line of a JSON stream, parsed.
fn last_event(stdout: &[u8]) -> serde_json::Value {
    let text = String::from_utf8_lossy(stdout);
    let last = text
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no event: {text}"));
    serde_json::from_str(last).expect("JSON")
}

/// A signal while the client waits for a welcome that never comes (a listener that
/// accepts and says nothing) ends the command at once, exit 130, nothing measured; it
/// waited out the 10 s set-up timeout first.
#[test]
fn a_signal_while_waiting_for_a_welcome_ends_at_once() {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("bound").port().to_string();
    let (tx, accepted) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok((c, _)) = l.accept() {
            let _ = tx.send(());
            // Holds the connection open, silent, past the test.
            std::thread::sleep(Duration::from_secs(30));
            drop(c);
        }
    });
    let (child, stderr) = rr_against(&port, &[]);
    accepted
        .recv_timeout(Duration::from_secs(30))
        .expect("the client connected");
    std::thread::sleep(Duration::from_millis(300));
    interrupted_at_once(
        child,
        stderr,
        &["while waiting for the agent's welcome: nothing was measured"],
    );
}

/// A run's config whose agent never greets (a stopped process: the kernel still takes its
/// connections into the backlog) fails two trials, each after one set-up timeout — the
/// signal-aware wait and the read after it each took one, 20 s a trial — and the run skips
/// its other trials, saying why, instead of spending 10 s on each.
#[test]
fn a_config_whose_agent_never_greets_is_given_up_after_two_trials() {
    let l = TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = l.local_addr().expect("bound").port();
    let d = TempDir::new("never-greets");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"mute\"\nduration = \"200ms\"\nrepetitions = 4\n[[workload]]\nkind = \"rr\"\n\
             [[config]]\nname = \"here\"\n[[config]]\nname = \"there\"\n\
             placement = \"remote:127.0.0.1:{port}\"\n"
        ),
    )
    .expect("spec");
    let db = d.path("r.db");
    let t0 = std::time::Instant::now();
    let out = run_with_timeout(
        vp().arg("run")
            .arg(&spec)
            .arg("--db")
            .arg(&db)
            .arg("--allow-concurrent"),
        Duration::from_secs(120),
    );
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(4), "{err}");
    assert!(
        err.contains("config there skipped: its agent was unreached in 2 trials in a row (the agent at 127.0.0.1:")
            && err.contains("sent no welcome within 10s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(40), "{took:?}: {err}");
    // The two trials the skip left unrun are counted with the two that failed.
    assert!(
        err.contains("is incomplete: 2 of 6 trials failed, 2 of 8 planned not run"),
        "{err}"
    );
    let runs: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).expect("runs JSON");
    assert_eq!(runs[0]["trials_ok"], 4, "{runs}");
    assert_eq!(runs[0]["trials_failed"], 2, "{runs}");
    // `show` says it too: "4 trials ok" read as the whole run.
    let shown = run_db_ok(&["show", "1"], &db);
    assert!(
        shown.contains("(4 trials ok, 2 failed, 2 of 8 planned not run)"),
        "{shown}"
    );
    drop(l);
}
