//! An interrupted workload keeps what it measured (issue 40 §9): SIGINT, SIGTERM or SIGHUP
//! mid-test ends the measured interval early, the part that ran is printed, stored as an
//! incomplete run, and a JSON stream ends with its `end` event saying so; the command exits
//! 128 + the signal. It used to store nothing, print nothing and end the stream mid-air.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{run_db_ok, vp, wait_output, TempDir};

#[test]
fn each_signal_keeps_what_was_measured() {
    let d = TempDir::new("interrupted");
    for (sig, name) in [
        (libc::SIGINT, "SIGINT"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let db = d.path(&format!("{name}.db"));
        let child = vp()
            .args(["rr", "-l", "30s", "--json-stream", "--db"])
            .arg(&db)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: kill(2) on the child this test started, by its PID.
        unsafe { libc::kill(pid as i32, sig) };
        let out = wait_output(child, Duration::from_secs(20));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + sig), "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("stored as incomplete"),
            "{err}"
        );
        let text = String::from_utf8_lossy(&out.stdout);
        let last = text.lines().last().expect("an end event");
        let end: serde_json::Value = serde_json::from_str(last).expect("JSON");
        assert_eq!(end["event"], "end", "{last}");
        assert_eq!(end["reason"], "interrupted", "{last}");
        let n = end["data"]["outcome"]["transactions"].as_u64().unwrap_or(0);
        assert!(
            n > 100,
            "{name}: the part that ran has its transactions: {n}"
        );
        let elapsed = end["data"]["outcome"]["elapsed_s"].as_f64().unwrap_or(0.0);
        assert!(
            elapsed < 10.0,
            "{name}: stopped early, not after 30 s: {elapsed}"
        );
        let runs: serde_json::Value =
            serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).expect("runs JSON");
        assert_eq!(runs[0]["status"], "incomplete", "{name}: {runs}");
        assert_eq!(runs[0]["trials_ok"], 1, "{name}: {runs}");
    }
}

/// A JSON stream ends with an event when the test fails too (here: no agent where it was
/// told to be).
#[test]
fn a_failed_test_ends_its_json_stream_with_an_error_event() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = l.local_addr().expect("bound").port().to_string();
    drop(l); // nobody listens there now
    let out = vp()
        .args([
            "rr",
            "-l",
            "1s",
            "--json-stream",
            "-H",
            "127.0.0.1",
            "--port",
            &port,
        ])
        .output()
        .expect("rr");
    assert!(!out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let last = text.lines().last().expect("an end event");
    let end: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(end["event"], "end", "{last}");
    assert_eq!(end["reason"], "error", "{last}");
    assert!(
        end["error"].as_str().is_some_and(|e| e.contains("connect")),
        "{last}"
    );
}
