//! Bad input and broken peers: one line naming the problem, a non-zero exit, no hang.

mod common;

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
        (&["stream", "--flows", "100000"], "flows"),
        (&["bulk"], "--bytes"),
        (&["bulk", "--bytes", "5TiB"], "1 tib"),
        (&["http", "--bytes", "1MB", "--count", "0"], "at least 1"),
        (&["rr", "--duration", "forever"], "duration"),
        (&["rr", "--cpus", "x,y"], "cpus"),
        (&["serve", "--port", "70000"], "70000"),
    ] {
        let (code, err) = run_fail(args);
        assert!(code == 2 || code == 1, "{args:?} exit {code}");
        assert_one_line_error(&err, needle);
    }
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

#[test]
fn cpus_that_do_not_exist_are_refused_on_each_side() {
    let (_, err) = run_fail(&["rr", "-l", "1", "--cpus", "4095,0"]);
    assert_one_line_error(&err, "client cpu 4095");
    let (_, err) = run_fail(&["rr", "-l", "1", "--cpus", "0,4095"]);
    assert_one_line_error(&err, "server cpu 4095");
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
