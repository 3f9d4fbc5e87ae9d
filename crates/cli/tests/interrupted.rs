//! An interrupted workload keeps what it measured (issue 40 §9): SIGINT, SIGTERM or SIGHUP
//! mid-test ends the measured interval early, the part that ran is printed, stored as an
//! incomplete run, and a JSON stream ends with its `end` event saying so; the command exits
//! 128 + the signal. It used to store nothing, print nothing and end the stream mid-air.

use crate::common;

use std::io::{BufRead, BufReader};
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
        let db_arg = db.to_str().expect("a UTF-8 path");
        // The signal goes once the test measures (its third interval is out), however slow
        // the machine is to start it.
        let (child, lines) = started_stream(&["rr", "-l", "30s", "--db", db_arg], 3);
        let (rest, out, _) = signalled(child, lines, sig);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(128 + sig), "{name}: {err}");
        assert!(
            err.contains(name) && err.contains("stored as incomplete"),
            "{err}"
        );
        let text = rest.join("\n");
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
        // Said once, with the signal's name (the client's own warning gives way to it).
        let warnings = end["data"]["warnings"].to_string();
        assert_eq!(
            warnings.matches("stopped early").count(),
            1,
            "{name}: {warnings}"
        );
        assert!(
            warnings.contains(&format!(
                "interrupted by {name}: the test was stopped early"
            )),
            "{warnings}"
        );
        let runs: serde_json::Value =
            serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).expect("runs JSON");
        assert_eq!(runs[0]["status"], "incomplete", "{name}: {runs}");
        assert_eq!(runs[0]["trials_ok"], 1, "{name}: {runs}");
        if sig == libc::SIGINT {
            // Compared with a whole run, the interrupted one is said to be what it is (a
            // comparison said nothing of it).
            run_db_ok(&["rr", "-l", "200ms", "--allow-concurrent"], &db);
            let compared = run_db_ok(&["compare", "1", "2"], &db);
            assert!(
                compared.contains("run 1 is incomplete: 1 of its 1 planned trials stored"),
                "{compared}"
            );
            assert!(!compared.contains("run 2 is"), "{compared}");
            // A script reading `--json` learns it from every row.
            let rows: serde_json::Value =
                serde_json::from_str(&run_db_ok(&["compare", "1", "2", "--json"], &db))
                    .expect("compare JSON");
            let rows = rows.as_array().expect("a list of rows");
            assert!(!rows.is_empty());
            for r in rows {
                let notes = r["notes"].to_string();
                assert!(
                    notes.contains("run 1 is incomplete") && !notes.contains("run 2 is"),
                    "{r}"
                );
            }
        }
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

/// `rr --under-load` stopped between its pairs reports the pairs that completed (it used to
/// print nothing) and exits 128 + the signal. The signal is sent once the progress line
/// says the second pair began, so the first has completed however slow the machine is.
#[test]
fn an_interrupted_under_load_reports_its_completed_pairs() {
    use std::io::Read;
    let mut child = vp()
        .args(["rr", "--under-load", "streams=1,pairs=20", "-l", "300ms"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    let mut stderr = child.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    let mut buf = [0u8; 256];
    while !String::from_utf8_lossy(&seen).contains("pair 2/20") {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => panic!("ended early: {}", String::from_utf8_lossy(&seen)),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let out = wait_output(child, Duration::from_secs(60));
    let err = reader.join().expect("stderr");
    assert_eq!(out.status.code(), Some(143), "{err}");
    let text = String::from_utf8_lossy(&out.stdout);
    let pairs: u32 = err
        .split("stopped by SIGTERM: ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("how many pairs ran: {err}"));
    assert!((1..20).contains(&pairs), "{err}");
    assert!(err.contains(&format!("{pairs} of 20 pairs ran")), "{err}");
    assert!(
        text.contains(&format!("{pairs} interleaved pairs")),
        "the completed pairs' report: {text}"
    );
}

/// `wake` keeps what it measured too: a signal mid-sweep ends the run in progress early,
/// skips the windows after it, and prints what ran, with why, before exiting 128 + N. It
/// used to die with nothing printed, its finished runs lost.
#[test]
fn a_signal_mid_wake_sweep_prints_the_runs_that_ran() {
    let t0 = std::time::Instant::now();
    // The first run measures once its responder thread is up (after the handler is in).
    let responder = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|t| {
                std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim() == "wake-b")
            })
    };
    let (out, _) = sigterm_once_ready(
        &["wake", "--poll", "0,10us,50us", "-l", "30s"],
        responder,
        "no responder thread",
        Duration::from_millis(300),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("stopped by SIGTERM"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(25), "ran to its 30 s");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON of what ran");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(
        runs.len(),
        1,
        "the windows after the cut one did not run: {v}"
    );
    assert!(runs[0]["round_trips"].as_u64().unwrap_or(0) > 0, "{v}");
    assert!(
        v["warnings"].to_string().contains(
            "interrupted by SIGTERM: 1 of 3 runs ran; the last (block) stopped before its 30.0 s"
        ),
        "{}",
        v["warnings"]
    );
}

/// `kvm halt` on a signal ends the halt-poll setting in progress at the wake-up in flight
/// (it used to finish it: minutes with a million wake-ups), skips the rest and prints what
/// ran, exiting 128 + N (it died with nothing printed).
#[test]
fn a_signal_mid_kvm_halt_sweep_prints_the_settings_that_ran() {
    if let Err(e) = virtperf_kvm::available() {
        virtperf_testkit::skip("kvm", &format!("no usable /dev/kvm: {e}"));
        return;
    }
    // The first setting runs once its vCPU exists (its statistics descriptor open), which
    // is after the handler is in.
    let vcpu = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                std::fs::read_link(e.path())
                    .is_ok_and(|l| l.to_string_lossy().starts_with("anon_inode:kvm-vcpu"))
            })
    };
    let (out, after) = sigterm_once_ready(
        &[
            "kvm",
            "halt",
            "--wakeups",
            "1000000",
            "--halt-poll",
            "0,10us,50us,200us",
        ],
        vcpu,
        "no vCPU made",
        Duration::ZERO,
    );
    // A million wake-ups 50–500 µs apart take minutes: the setting in progress ends at
    // the wake-up in flight instead.
    assert!(after < Duration::from_secs(10), "{after:?} after SIGTERM");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{err}");
    assert!(err.contains("stopped by SIGTERM"), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON of what ran");
    let runs = v["runs"].as_array().expect("runs");
    assert_eq!(
        runs.len(),
        1,
        "the setting in progress, cut; the rest skipped"
    );
    let measured = runs[0]["wakeups"].as_u64().expect("wakeups");
    assert!((1..1_000_000).contains(&measured), "{measured}");
    let note = runs[0]["note"].as_str().unwrap_or("");
    assert!(
        note.contains(&format!(
            "cut short: {measured} of 1000000 wake-ups measured"
        )),
        "{note}"
    );
    // Its latencies are of the wake-ups it measured.
    assert!(
        runs[0]["latency_ns"]["p50"]
            .as_f64()
            .is_some_and(|p| p > 0.0),
        "{}",
        runs[0]
    );
    assert!(
        err.contains(&format!(
            "1 of 4 halt-poll settings ran and are printed, the last with {measured} of 1000000 wake-ups"
        )),
        "{err}"
    );
}

/// Starts `virtperf ARGS --allow-concurrent --json`, waits (20 s at most) until `ready`
/// holds of its PID (it then measures), lets it run `settle` more, sends it one SIGTERM and
/// returns its output and the time it took to end after the signal.
fn sigterm_once_ready(
    args: &[&str],
    ready: impl Fn(u32) -> bool,
    what: &str,
    settle: Duration,
) -> (std::process::Output, Duration) {
    let t0 = std::time::Instant::now();
    let child = vp()
        .args(args)
        .args(["--allow-concurrent", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    while !ready(pid) {
        assert!(t0.elapsed() < Duration::from_secs(20), "{what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(settle);
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(pid as i32, libc::SIGTERM) };
    let signalled = std::time::Instant::now();
    let out = wait_output(child, Duration::from_secs(60));
    (out, signalled.elapsed())
}

/// A Ctrl-C while the agent is frozen (SIGSTOP: a stopped process, a paused guest) ends the
/// command within the grace of 5 s, exit 130, saying nothing was kept; the JSON stream ends
/// `interrupted` with no data. It used to wait out the data connections' timeout and then
/// the report's: 29 s after the signal for a stream, measured.
#[test]
fn a_signal_with_the_agent_frozen_ends_within_the_grace() {
    let agent = common::Agent::start(&[]);
    let port = agent.port();
    let args = ["stream", "-H", "127.0.0.1", "--port", &port, "-l", "30s"];
    let (child, lines) = started_stream(&args, 3);
    // SAFETY: kill(2) on the agent this test started, by its PID.
    unsafe { libc::kill(agent.pid() as i32, libc::SIGSTOP) };
    // Time for the client's sender to fill the socket buffers and block.
    std::thread::sleep(Duration::from_millis(500));
    let (rest, out, took) = signalled(child, lines, libc::SIGINT);
    // SAFETY: as above; the agent is killed when dropped.
    unsafe { libc::kill(agent.pid() as i32, libc::SIGCONT) };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {err}");
    assert!(err.contains("nothing was kept"), "{err}");
    let last = rest.last().expect("an end event");
    let end: serde_json::Value = serde_json::from_str(last).expect("JSON");
    assert_eq!(end["reason"], "interrupted", "{end}");
    assert!(end["data"].is_null(), "{end}");
}

/// A foreign web server for `http --url`: the first `fast` requests get a 1000-byte body at
/// once, every later one a byte every 100 ms; `asked` is told of each request. It serves for
/// a minute at most, so no test leaves it behind.
fn web_server(fast: usize, asked: std::sync::mpsc::Sender<usize>) -> u16 {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("bound").port();
    std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        for (n, c) in l.incoming().enumerate() {
            let Ok(mut c) = c else { return };
            let _ = asked.send(n);
            std::thread::spawn(move || {
                let mut head = [0u8; 2048];
                let _ = c.read(&mut head);
                let _ = c.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n",
                );
                if n < fast {
                    let _ = c.write_all(&[b'x'; 1000]);
                    return;
                }
                while t0.elapsed() < Duration::from_secs(60) && c.write_all(b"x").is_ok() {
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        }
    });
    port
}

/// `http --url` is stored and stopped as every workload is: `--db` keeps its run (the flag
/// was ignored: nothing stored), and a SIGINT during the fourth download keeps the three
/// that completed, printed and stored as incomplete, exit 130 at once (the command died at
/// once with nothing printed; told to finish, it waited out the trickling download and
/// then lost the three to its error).
#[test]
fn http_url_is_stored_and_keeps_its_downloads_on_a_signal() {
    let d = TempDir::new("http-url-cut");
    let db = d.path("r.db");
    let (tx, _all_fast) = std::sync::mpsc::channel();
    let url = format!("http://127.0.0.1:{}/", web_server(usize::MAX, tx));
    run_db_ok(&["http", "--url", &url, "-c", "2"], &db);

    let (tx, asked) = std::sync::mpsc::channel();
    let url = format!("http://127.0.0.1:{}/", web_server(3, tx));
    let child = vp()
        .args(["http", "--url", &url, "-c", "10", "--json", "--db"])
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    for _ in 0..4 {
        asked
            .recv_timeout(Duration::from_secs(60))
            .expect("the next download");
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = std::time::Instant::now();
    let out = wait_output(child, Duration::from_secs(60));
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(3), "took {took:?}: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the result");
    let downloads = v["outcome"]["downloads"].as_array().expect("downloads");
    assert_eq!(downloads.len(), 3, "{v}");
    let runs: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).expect("runs JSON");
    let statuses: Vec<&str> = runs
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["status"].as_str())
        .collect();
    assert_eq!(statuses.len(), 2, "{runs}");
    assert!(
        statuses.contains(&"complete") && statuses.contains(&"incomplete"),
        "{runs}"
    );
}

/// A signal mid-transfer ends a bulk transfer there, in either direction (the agent's sender
/// stops at the client's stop): the part that moved is printed with its rate, exit 130 at
/// once. The transfer used to run on to its end (a 20 GiB one 9 s past the signal) while its
/// warning said it had stopped early.
#[test]
fn a_signal_mid_bulk_transfer_ends_it_there() {
    for reverse in [false, true] {
        let mut args = vec!["bulk", "-n", "64GiB"];
        args.extend(reverse.then_some("--reverse"));
        let (child, lines) = started_stream(&args, 2);
        let (rest, out, took) = signalled(child, lines, libc::SIGINT);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "reverse {reverse}: {err}");
        assert!(took < Duration::from_secs(5), "reverse {reverse}: {took:?}");
        let end: serde_json::Value =
            serde_json::from_str(rest.last().expect("an end event")).expect("JSON");
        assert_eq!(end["reason"], "interrupted", "{end}");
        let o = &end["data"]["outcome"];
        let (moved, asked) = (common::u(o, "/receiver_bytes"), common::u(o, "/bytes"));
        assert!(moved > 0 && moved < asked, "reverse {reverse}: {o}");
        assert!(common::f(o, "/mib_per_s") > 0.0, "{o}");
    }
}

/// The lines a `--json-stream` test prints, as they come.
type StreamLines = std::io::Lines<BufReader<std::process::ChildStdout>>;

/// Starts `virtperf ARGS -i 200ms --json-stream --allow-concurrent` and waits for its first
/// `n` interval lines, so a signal sent next finds it measuring however slow the machine is.
fn started_stream(args: &[&str], n: usize) -> (std::process::Child, StreamLines) {
    let mut child = vp()
        .args(args)
        .args(["-i", "200ms", "--json-stream", "--allow-concurrent"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    for i in 0..n {
        assert!(
            matches!(lines.next(), Some(Ok(_))),
            "{args:?}: the stream ended after {i} intervals"
        );
    }
    (child, lines)
}

/// Sends `sig` to `child`; the rest of its stream, its output and how long it took to end.
fn signalled(
    child: std::process::Child,
    lines: StreamLines,
    sig: i32,
) -> (Vec<String>, std::process::Output, Duration) {
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, sig) };
    let t0 = std::time::Instant::now();
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = wait_output(child, Duration::from_secs(60));
    (rest, out, t0.elapsed())
}

/// A signal ends a run's trial in flight where it finds it, as it ends a single workload:
/// the run used to finish it first, so Ctrl-C in a 60 s trial waited out the minute. The
/// part that ran is kept with a warning `show` repeats; the run is incomplete, and no other
/// trial starts.
#[test]
fn a_signal_ends_a_runs_trial_in_flight() {
    let d = TempDir::new("cut-run");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        "name = \"cut\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\nduration = \"300ms\"\n\
         [[workload]]\nkind = \"rr\"\nduration = \"60s\"\n[[workload]]\nkind = \"crr\"\n",
    )
    .expect("spec");
    let db = d.path("r.db");
    let mut child = vp()
        .arg("run")
        .arg(&spec)
        .arg("--db")
        .arg(&db)
        .arg("--allow-concurrent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Off a terminal a trial's progress line is written as it ends: the first one's says
    // the second has started; 2 s on, it measures.
    let mut err = child.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    while !String::from_utf8_lossy(&seen).contains("[1/3]") {
        let n = std::io::Read::read(&mut err, &mut buf).expect("stderr");
        assert!(n > 0, "{}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t0 = std::time::Instant::now();
    std::io::Read::read_to_end(&mut err, &mut seen).expect("stderr");
    let out = wait_output(child, Duration::from_secs(90));
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&seen);
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{err}");
    assert!(
        took < Duration::from_secs(15),
        "{took:?} after the signal: {err}"
    );
    assert!(
        !err.contains("[3/3]"),
        "a trial started after the signal: {err}"
    );
    let runs: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).expect("runs JSON");
    assert_eq!(runs[0]["status"], "incomplete", "{runs}");
    assert_eq!(runs[0]["trials_ok"], 2, "{runs}");
    let shown = run_db_ok(&["show", "last"], &db);
    assert!(
        shown.contains("try 1: interrupted by a signal")
            && shown.matches("interrupted by").count() == 1,
        "{shown}"
    );
    // The report says it too, on its page and in its JSON.
    let page = d.path("r.html");
    let v: serde_json::Value = serde_json::from_str(&run_db_ok(
        &[
            "report",
            "last",
            "--json",
            "-o",
            page.to_str().expect("UTF-8"),
        ],
        &db,
    ))
    .expect("report JSON");
    assert!(
        v["runs"][0]["notes"][0]
            .as_str()
            .is_some_and(|n| n.contains("try 1: interrupted by a signal")),
        "{v}"
    );
    let html = std::fs::read_to_string(&page).expect("the page");
    assert!(
        html.contains(
            "<p class=\"warning\">warning: rr · default · try 1: interrupted by a signal"
        ),
        "no warning on the page"
    );
}

/// `explain`'s rr tries end at a signal too: its battery finished the try in flight, so
/// Ctrl-C in a 60 s try waited out the minute. (Its first config is the machine as it is,
/// so no knob has changed when the signal comes.)
#[test]
fn a_signal_ends_an_explain_try_in_flight() {
    let d = TempDir::new("cut-explain");
    let db = d.path("r.db");
    let mut child = vp()
        .args(["explain", "-l", "60s", "--allow-concurrent", "--db"])
        .arg(&db)
        .env("VIRTPERF_STATE_DIR", d.path("state"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Once the run is stored its first try is starting; 3 s on, it measures.
    let t0 = std::time::Instant::now();
    while !vp()
        .args(["runs", "--json", "--db"])
        .arg(&db)
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("\"running\""))
    {
        assert!(t0.elapsed() < Duration::from_secs(60), "no run was stored");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "explain ended"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t1 = std::time::Instant::now();
    let out = wait_output(child, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + libc::SIGINT), "{err}");
    assert!(
        t1.elapsed() < Duration::from_secs(15),
        "{:?}: {err}",
        t1.elapsed()
    );
    let rows: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["export", "last", "--format", "json"], &db))
            .expect("export JSON");
    let rows = rows.as_array().expect("rows");
    assert!(
        !rows.is_empty() && rows.iter().all(|r| r["config"] == "as-is"),
        "{rows:?}"
    );
    // Shown, the explanation says first that it rests on a stopped battery's one try.
    let shown = run_db_ok(&["show", "last"], &db);
    assert!(
        shown.starts_with("run 1 is incomplete: 1 of its")
            && shown.contains("try 1: interrupted by a signal"),
        "{shown}"
    );
    // And as JSON: the explanation alone read as a whole battery's there too.
    let v: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["show", "last", "--json"], &db)).expect("show JSON");
    assert_eq!(v["run_status"], "incomplete", "{v}");
    let notes = v["notes"].to_string();
    assert!(
        notes.contains("run 1 is incomplete: 1 of its")
            && notes.contains("interrupted by a signal"),
        "{notes}"
    );
}
