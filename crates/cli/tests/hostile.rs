//! Hardening, round two (issue 27): each test here failed on 4f9cf32. A closed or full
//! standard output, durations too short to measure, empty sweeps, an empty token, IPv6
//! literals as virtperf prints them, and terminal escapes hidden in names.
//!
//! Round three (issue 40) lives beside the code each case attacks, each test failing on
//! 4154aa7: secrets in the lock and a stored run, root's lock against another user
//! (`lock.rs`); holds that never end, a vanished holder, phantom tests (`agent.rs`); an
//! agent's escapes in `Waiting` (`silent_agent.rs`); every signal mid-test
//! (`interrupted.rs`); a locked database (`store/tests/store.rs`); CSV formulas
//! (`export.rs`); tracefs left mounted (`trace.rs`); the fleet's secrets and summary
//! (`ansible_fleet.rs`).

use crate::common;

use std::process::Stdio;
use std::time::Duration;

use common::{assert_one_line_error, run_fail, run_with_timeout, vp};

/// A spec and its database in a scratch directory, removed when the returned guard drops
/// (also when the test fails: these directories were left in the temp dir by every run).
fn spec(tag: &str, text: &str) -> (common::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = common::TempDir::new(&format!("hostile-{tag}"));
    std::fs::write(dir.path("s.toml"), text).unwrap();
    let (s, db) = (dir.path("s.toml"), dir.path("r.db"));
    (dir, s, db)
}

/// `> /dev/full`: one line and exit 1 (not a panic, exit 101), for commands that print a
/// little and commands that print a lot; a closed pipe (`| head`) ends quietly.
#[test]
fn a_full_or_closed_stdout_is_one_line_not_a_panic() {
    let (_dir, s, db) = spec(
        "full",
        "name = \"f\"\nduration = \"100ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"a\"\n[[config]]\nname = \"b\"\n",
    );
    let out = run_with_timeout(
        vp().args(["run", s.to_str().unwrap(), "--db", db.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    common::assert_ok(&out);
    let db = db.to_str().unwrap();
    for args in [
        &["runs", "--db", db][..],
        &["show", "last", "--db", db],
        &["export", "1", "--db", db],
        &["compare", "1", "--db", db],
        &["env"],
        &["rr", "-l", "100ms"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let child = vp()
            .args(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let out = common::wait_output(child, Duration::from_secs(60));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_one_line_error(&err, "cannot write to standard output");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    // A reader that stops after one line: no error, no panic.
    let mut child = vp()
        .args(["runs", "--db", db])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = common::wait_output(child, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}

/// A duration shorter than the stop's own granularity is refused (it printed zeros that
/// looked like a measurement), on the command line and in a spec.
#[test]
fn durations_too_short_to_measure_are_refused() {
    for d in ["1ns", "1us", "9ms"] {
        let (code, err) = run_fail(&["rr", "-l", d]);
        assert_eq!(code, 2, "{d}: {err}");
        assert_one_line_error(&err, "at least 10 ms");
    }
    let (_dir, s, db) = spec(
        "short",
        "name = \"s\"\n[[workload]]\nkind = \"rr\"\nduration = \"1ns\"\n",
    );
    let (code, err) = run_fail(&["run", s.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "line 4");
    assert!(!db.exists());
}

/// `flows = []` sweeps nothing: refused while parsing, naming the line, before anything is
/// stored (it gave a "complete" run of 0 trials).
#[test]
fn empty_sweeps_are_refused_with_their_line() {
    for key in ["flows", "size", "gap", "cpus"] {
        let (_dir, s, db) = spec(
            key,
            &format!("name = \"e\"\n[[workload]]\nkind = \"rr\"\n{key} = []\n"),
        );
        for extra in [&["--dry-run"][..], &[]] {
            let mut args = vec!["run", s.to_str().unwrap(), "--db", db.to_str().unwrap()];
            args.extend(extra);
            let (code, err) = run_fail(&args);
            assert_eq!(code, 2, "{key}: {err}");
            assert_one_line_error(&err, "line 4");
            assert!(err.contains("empty list"), "{err}");
        }
        assert!(!db.exists(), "{key}: an empty sweep stored a run");
    }
}

/// An empty token is an error, not an agent without authentication; `--allow-drive` with
/// one is refused before the agent says it listens.
#[test]
fn an_empty_token_is_refused_before_listening() {
    for args in [
        &["serve", "--port", "0", "--token", ""][..],
        &["serve", "--port", "0", "--token", "  "],
        &["serve", "--port", "0", "--allow-drive", "--token", ""],
    ] {
        let (code, err) = run_fail(args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert_one_line_error(&err, "empty");
        assert!(!err.contains("listening"), "{args:?}: {err}");
    }
}

/// `[::1]` as virtperf prints it is accepted where a host is typed.
#[test]
fn bracketed_ipv6_literals_are_accepted() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        virtperf_testkit::skip("ipv6", "no IPv6 loopback here");
        return;
    }
    let mut agent = vp()
        .args([
            "serve",
            "--bind",
            "::1",
            "--port",
            "0",
            "--announce",
            "--quiet",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn agent");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(agent.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("announce");
    let port = line
        .trim()
        .rsplit_once(':')
        .map(|(_, p)| p.to_string())
        .unwrap_or_else(|| panic!("bad announce line {line:?}"));
    // Killed and reaped by PID whatever the asserts below do.
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _agent = Reap(agent);
    let v = common::run_json(&["rr", "-H", "[::1]", "--port", &port, "-l", "100ms"]);
    assert!(v["target"].as_str().unwrap().starts_with("[::1]:"), "{v}");
    let remote = format!("remote:[::1]:{port}");
    let v = common::run_json(&["rr", "--placement", &remote, "-l", "100ms"]);
    assert!(v["outcome"]["transactions"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["placement"], remote.as_str());
}

/// A name with an escape sequence in a spec is refused; one already in a store (written
/// by hand, or by an older version) is printed escaped, never raw.
#[test]
fn terminal_escapes_never_reach_the_terminal() {
    let (_dir, s, db) = spec(
        "esc",
        "name = \"a\\u001b[31mRED\"\n[[workload]]\nkind = \"rr\"\n",
    );
    let (code, err) = run_fail(&["run", s.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "control characters");
    assert!(!err.contains('\u{1b}'), "{err:?}");

    let (_dir, s, db) = spec(
        "esc2",
        "name = \"plain\"\nduration = \"100ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n",
    );
    let out = run_with_timeout(
        vp().args(["run", s.to_str().unwrap(), "--db", db.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    common::assert_ok(&out);
    let status = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("UPDATE runs SET name = 'x' || char(27) || '[2J', host = 'h' || char(27) || ']0;pwned' || char(7)")
        .status();
    if !status.is_ok_and(|s| s.success()) {
        virtperf_testkit::skip("sqlite3", "the stored-name half: no sqlite3 here");
        return;
    }
    for args in [&["runs"][..], &["show", "1"], &["compare", "1"]] {
        let mut a = args.to_vec();
        a.extend(["--db", db.to_str().unwrap()]);
        let out = run_with_timeout(vp().args(&a), Duration::from_secs(30));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{args:?}: {text:?}"
        );
    }
}

/// A server that sends a body without Content-Length and never ends it: at `every`, `chunk`
/// bytes, until the client goes away (or a minute passes: the test never leaves it behind).
fn endless_server(chunk: usize, every: Duration) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        while let Ok((mut s, _)) = l.accept() {
            let mut head = [0u8; 1024];
            let _ = s.read(&mut head);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
            let body = vec![0u8; chunk];
            while t0.elapsed() < Duration::from_secs(60) && s.write_all(&body).is_ok() {
                std::thread::sleep(every);
            }
        }
    });
    port
}

/// Every download is bounded by size and by time: an endless body fails in one line
/// instead of hanging the command until it is killed.
#[test]
fn an_endless_http_body_is_bounded() {
    let port = endless_server(64 * 1024, Duration::ZERO);
    let url = format!("http://127.0.0.1:{port}/");
    let t0 = std::time::Instant::now();
    let (code, err) = run_fail(&["http", "--url", &url, "-c", "2", "--max-size", "20MB"]);
    assert_eq!(code, 1, "{err}");
    assert_one_line_error(&err, "went past 20000000 bytes");
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());

    let port = endless_server(1, Duration::from_millis(100));
    let url = format!("http://127.0.0.1:{port}/");
    let (code, err) = run_fail(&["http", "--url", &url, "--max-time", "1s"]);
    assert_eq!(code, 1, "{err}");
    assert_one_line_error(&err, "still downloading after 1s");
}

/// A store this user may only read (a file of mode 444, or in a read-only directory):
/// the reading commands work; a write says it cannot write, without blaming a lock.
#[test]
fn read_only_stores_can_be_read() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || std::process::Command::new("setpriv")
            .arg("--version")
            .output()
            .is_err()
    {
        virtperf_testkit::skip(
            "root",
            "needs root and setpriv to act as an unprivileged user",
        );
        return;
    }
    let (_dir, s, db) = spec(
        "ro",
        "name = \"ro\"\nduration = \"100ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n",
    );
    let out = run_with_timeout(
        vp().args(["run", s.to_str().unwrap(), "--db", db.to_str().unwrap()]),
        Duration::from_secs(60),
    );
    common::assert_ok(&out);
    let dir = db.parent().unwrap().to_path_buf();
    let nobody = |args: &[&str]| {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_virtperf"))
            .args(args)
            .args(["--db", db.to_str().unwrap()])
            .env("HOME", &dir)
            // The machine lock is not under test: nobody cannot use the state directory
            // root made under this HOME (nor /run/virtperf unless root made it before).
            .env("VIRTPERF_ALLOW_CONCURRENT", "1");
        run_with_timeout(&mut c, Duration::from_secs(60))
    };
    for (file_mode, dir_mode) in [(0o444, 0o755), (0o644, 0o555)] {
        std::fs::set_permissions(&db, std::fs::Permissions::from_mode(file_mode)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(dir_mode)).unwrap();
        for args in [&["runs"][..], &["show", "1"], &["export", "1"]] {
            let out = nobody(args);
            assert!(
                out.status.success(),
                "{args:?} with file {file_mode:o}, dir {dir_mode:o}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                String::from_utf8_lossy(&out.stdout).contains("ro"),
                "{args:?}"
            );
        }
        let out = nobody(&["run", s.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains("cannot write the database"), "{err}");
        assert!(!err.contains("locked"), "a permission is not a lock: {err}");
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}
