//! Bad input and broken peers: one line naming the problem, a non-zero exit, no hang.

use crate::common;

use std::time::{Duration, Instant};

use common::{assert_one_line_error, run_fail, vp, Agent};

#[test]
fn usage_errors_exit_2_with_one_line() {
    for (args, needle) in [
        (&["rr", "--duration", "0"][..], "greater than 0"),
        (&["rr", "--size", "-1"], "positive"),
        (&["rr", "--size", "1,0"], "at least 1"),
        (&["rr", "--size", "1GiB"], "64 mib"),
        (&["stream", "--send-size", "99999999999"], "64 mib"),
        (&["stream", "--flows", "0"], "at least 1"),
        (&["stream", "--recv-size", "0"], "at least 1"),
        (&["stream", "-M", "100MiB"], "64 mib"),
        (&["stream", "--recv-wait", "spin"], "`poll`"),
        (&["stream", "--buf-offset", "4096"], "0 to 4095"),
        (&["stream", "--buf-offset", "-1"], "0 to 4095"),
        (&["stream", "--buf-offset", "1e30"], "0 to 4095"),
        // clap's integer counts: what the value is not, not Rust's parse error.
        (
            &["explain", "--tries", "1e30"],
            "'1e30' for '--tries <tries>': not a whole number",
        ),
        (&["vm", "compare", "--runs", "2.5"], "not a whole number"),
        (
            &[
                "stream",
                "--buf-offset",
                "16",
                "--flows",
                "2",
                "--threads",
                "1",
            ],
            "drop --threads",
        ),
        (
            &["stream", "--buf-offset", "16", "--protocol", "udp"],
            "drop --threads, --protocol udp",
        ),
        (&["stream", "--flows", "100000"], "flows"),
        (&["bulk"], "--bytes"),
        (&["bulk", "--bytes", "5TiB"], "1 tib"),
        (&["http", "--bytes", "1MB", "--count", "0"], "at least 1"),
        (&["rr", "--duration", "forever"], "duration"),
        (&["rr", "--cpus", "x,y"], "cpus"),
        (&["serve", "--port", "70000"], "70000"),
        (
            &["vm", "initramfs", "--out", "/nonexistent-virtperf/x.cpio"],
            "directory /nonexistent-virtperf does not exist",
        ),
        // Out-of-range and non-finite numbers: an error of the parser, never a panic.
        (&["rr", "--duration", "1e20"], "at most 24h"),
        (&["rr", "--duration", "100000h"], "at most 24h"),
        (&["rr", "--duration", "NaN"], "not a finite number"),
        (&["crr", "-l", "inf"], "not a finite number"),
        (&["wake", "--gap", "1e30"], "at most 1s"),
        (&["wake", "--poll", "10us,1e30"], "at most 1s"),
        (&["kvm", "halt", "--halt-poll", "1e30"], "at most 1s"),
        (
            &["rr", "--placement", "netns:veth", "--link-rate", "1e30gbit"],
            "rate",
        ),
        (
            &["rr", "--placement", "netns:veth", "--delay", "1e30"],
            "at most 10s",
        ),
        (&["vm", "compare", "--duration", "1e30"], "at most 24h"),
        (&["run", "--runs", "1e30"], "1e30"),
        (&["rr", "--wait", "nap"], "wait"),
        (&["rr", "--wait", "poll:2s"], "at most 1s"),
        (&["rr", "--rate", "0"], "rate"),
        (&["rr", "--gap", "5s"], "at most 1s"),
        (
            &["rr", "--rate", "2000", "--gap", "1ms"],
            "cannot be used with",
        ),
        (&["crr", "--gap", "1ms"], "apply to rr"),
        (&["crr", "--flows", "2"], "needs --threads"),
        (&["rr", "--threads", "0"], "threads must be"),
        (
            &["rr", "--flows", "200000", "--threads", "2"],
            "between 1 and 100000",
        ),
        (&["rr", "--flows", "0"], "at least 1"),
        (&["rr", "--flows", "1000"], "flows must be between"),
        // The multiplexed engines are TCP's: UDP runs a thread per flow.
        (
            &["rr", "--protocol", "udp", "--flows", "4", "--threads", "2"],
            "multiplexes TCP connections",
        ),
        (
            &[
                "stream",
                "--protocol",
                "udp",
                "--flows",
                "4",
                "--threads",
                "2",
            ],
            "multiplexes TCP connections",
        ),
    ] {
        let (code, err) = run_fail(args);
        assert_eq!(code, 2, "{args:?} exit {code}: {err}");
        assert_one_line_error(&err, needle);
    }
}

/// A typo gets clap's suggestion: the one error line, then the tip on a line of its own.
#[test]
fn a_mistyped_flag_keeps_clap_s_tip() {
    let (code, err) = run_fail(&["rr", "--durtion", "1s"]);
    assert_eq!(code, 2, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 2, "error and tip: {err:?}");
    assert!(
        lines[0].starts_with("virtperf: error: ") && lines[0].contains("'--durtion'"),
        "{err:?}"
    );
    assert_eq!(
        lines[1], "tip: a similar argument exists: '--duration'",
        "{err:?}"
    );
}

#[test]
fn refused_connection_names_the_address() {
    // A port nobody listens on: bind, note it, release it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, err) = run_fail(&["rr", "--host", "127.0.0.1", "--port", &port.to_string()]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, &format!("127.0.0.1:{port}"));
    assert!(err.contains("refused"), "{err}");
}

#[test]
fn unknown_host_is_named() {
    let (code, err) = run_fail(&["rr", "--host", "no-such-host.invalid", "-l", "1"]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "no-such-host.invalid");
}

#[test]
fn wrong_token_is_refused() {
    let a = Agent::start(&["--token", "right"]);
    let (code, err) = run_fail(&[
        "rr",
        "--host",
        "127.0.0.1",
        "--port",
        &a.port(),
        "--token",
        "wrong",
    ]);
    assert_eq!(code, 1);
    assert_one_line_error(&err, "token");
}

/// Both sides' CPUs on this machine are usage errors before anything starts (the server's
/// was the private agent's refusal, exit 1, once it had started); a remote agent's CPU is
/// that agent's to refuse, naming its machine.
#[test]
fn cpus_that_do_not_exist_are_refused_on_each_side() {
    let (code, err) = run_fail(&["rr", "-l", "1", "--cpus", "4095,0"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "client cpu 4095");
    let (code, err) = run_fail(&["rr", "-l", "1", "--cpus", "0,4095"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "server cpu 4095");
    let a = Agent::start(&[]);
    let (code, err) = run_fail(&[
        "rr",
        "-l",
        "100ms",
        "--host",
        "127.0.0.1",
        "--port",
        &a.port(),
        "--cpus",
        "0,4095",
    ]);
    assert_eq!(code, 1, "{err}");
    assert_one_line_error(&err, "on the agent's machine");
    // The KVM benchmarks' pinning: a usage error naming the flag before any guest is made
    // (it was "sched_setaffinity failed: Invalid argument", exit 1, from inside the run).
    for (args, flag) in [
        (&["kvm", "exits", "--cpu", "4095"][..], "--cpu 4095"),
        (
            &["kvm", "halt", "--vcpu-cpu", "4095", "--injector-cpu", "0"][..],
            "--vcpu-cpu 4095",
        ),
        (
            &["kvm", "halt", "--vcpu-cpu", "0", "--injector-cpu", "4095"][..],
            "--injector-cpu 4095",
        ),
    ] {
        let (code, err) = run_fail(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err, &format!("{flag}: that CPU does not exist"));
    }
    // `wake` hung on one (its threads' rendezvous), deaf to SIGTERM: now a usage error.
    for args in [
        &["wake", "--cpus", "0,4095", "-l", "100ms"][..],
        &[
            "wake",
            "--placement",
            "same",
            "--cpus",
            "4095,4095",
            "-l",
            "100ms",
        ][..],
    ] {
        let (code, err) = run_fail(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err, "CPU 4095 does not exist");
    }
}

#[test]
fn agent_killed_mid_test_ends_the_client_with_an_error() {
    for workload in [&["rr"][..], &["stream"], &["stream", "--reverse"], &["crr"]] {
        let mut a = Agent::start(&[]);
        let port = a.port();
        let mut client = vp()
            .args(workload)
            .args(["--host", "127.0.0.1", "--port", &port, "--duration", "30s"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(800));
        a.child.kill().unwrap();
        let _ = a.child.wait();
        let t0 = Instant::now();
        let status = loop {
            if let Some(s) = client.try_wait().unwrap() {
                break s;
            }
            if t0.elapsed() > Duration::from_secs(40) {
                let _ = client.kill();
                panic!("{workload:?}: client hung after the agent died");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(!status.success(), "{workload:?}: client claimed success");
        let mut err = String::new();
        use std::io::Read;
        client
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert_one_line_error(&err, "agent");
    }
}

/// A spec in a temp dir, with its database beside it.
fn spec_file(tag: &str, text: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("vp-errors-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("s.toml"), text).unwrap();
    (dir.join("s.toml"), dir.join("r.db"))
}

#[test]
fn specs_out_of_range_fail_before_any_trial_with_exit_2() {
    let (spec, db) = spec_file(
        "range",
        "name = \"x\"\nduration = \"100000h\"\n[[workload]]\nkind = \"rr\"\n",
    );
    let (code, err) = run_fail(&["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "line 2");
    assert!(err.contains("at most 24h"), "{err}");
    assert!(!db.exists(), "a spec that cannot run stored a run");
    let _ = std::fs::remove_dir_all(spec.parent().unwrap());
}

/// A run whose every trial fails exits 1; one with some failed trials exits 4 (README's
/// table); both keep what they stored.
#[test]
fn failed_and_incomplete_runs_exit_non_zero() {
    // A port nobody listens on: every trial against it is refused at once.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let bad = format!("[[config]]\nname = \"nobody\"\nplacement = \"remote:127.0.0.1:{port}\"\n");
    let head = "name = \"x\"\nduration = \"200ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n";
    let (spec, db) = spec_file("allfail", &format!("{head}{bad}"));
    let (code, err) = run_fail(&["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("stored no result"), "{err}");
    let _ = std::fs::remove_dir_all(spec.parent().unwrap());

    let (spec, db) = spec_file(
        "partial",
        &format!("{head}[[config]]\nname = \"loopback\"\n{bad}"),
    );
    let (code, err) = run_fail(&["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("incomplete: 2 of 4 trials failed"), "{err}");
    let _ = std::fs::remove_dir_all(spec.parent().unwrap());
}

/// Issue 53: "or omit --host to start a local one" where the user gave --host, and
/// nowhere else (a `--placement remote:` has no --host to omit).
#[test]
fn cannot_connect_suggests_omitting_only_a_given_host() {
    let port = common::closed_port().to_string();
    let (_, err) = run_fail(&["rr", "--host", "127.0.0.1", "--port", &port, "-l", "200ms"]);
    assert_one_line_error(&err, "or omit --host to start a local one");
    let remote = format!("remote:127.0.0.1:{port}");
    let (_, err) = run_fail(&["rr", "--placement", &remote, "-l", "200ms"]);
    assert_one_line_error(&err, "cannot connect to the agent");
    assert!(!err.contains("omit --host"), "{err}");
}

/// The operating system's reason is said once: an error that carried it both in its
/// message and as its source printed it twice in the one-line chain ("cannot use /tmp: it
/// is a directory: … or choose another --db: it is a directory").
#[test]
fn an_os_error_is_said_once() {
    let dir = std::env::temp_dir();
    let missing = dir.join(format!("vp-no-such-capture-{}.pcap", std::process::id()));
    for (args, reason) in [
        (
            vec!["runs".to_string(), "--db".into(), dir.display().to_string()],
            "it is a directory",
        ),
        (
            vec!["pcap".to_string(), missing.display().to_string()],
            "No such file or directory",
        ),
        // A device is no database either (it was "disk I/O error").
        (
            vec!["runs".to_string(), "--db".into(), "/dev/null".into()],
            "it is not a regular file",
        ),
    ] {
        let out = vp().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_one_line_error(&err, reason);
        assert_eq!(err.matches(reason).count(), 1, "{args:?}: {err}");
    }
    // A named pipe is refused before it is opened: reading its header waited for a writer.
    let fifo = dir.join(format!("vp-fifo-{}.db", std::process::id()));
    let c = std::ffi::CString::new(fifo.display().to_string()).expect("a path");
    // SAFETY: mkfifo(3) with a NUL-terminated path this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    let out = common::run_with_timeout(
        vp().args(["runs", "--db"]).arg(&fifo),
        std::time::Duration::from_secs(20),
    );
    let _ = std::fs::remove_file(&fifo);
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_error(
        &String::from_utf8_lossy(&out.stderr),
        "it is not a regular file",
    );
}
