//! One measurement at a time per machine: a second command waits for the first (or, with
//! --no-wait, refuses naming it), a SIGKILLed holder blocks nobody, --allow-concurrent runs
//! beside and says so, and an agent's tests wait for a measurement on its machine.
//! These tests take the real machine lock, so they run one at a time.

use crate::common;

use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{assert_one_line_error, Agent};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// virtperf taking the machine lock as a user's command does.
fn vpl() -> Command {
    let mut c = common::vp();
    c.env_remove("VIRTPERF_ALLOW_CONCURRENT");
    c
}

fn start(args: &[&str]) -> Child {
    vpl()
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// Waits until `pid` holds the machine lock.
fn wait_holder(pid: u32) {
    let t0 = Instant::now();
    while virtperf_machine::lock::holder().is_none_or(|h| h.pid != pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "pid {pid} never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn finish(c: Child) -> (Output, Instant) {
    let out = common::wait_output(c, Duration::from_secs(60));
    (out, Instant::now())
}

/// Waits for a child on its own thread, so each end time is taken when that child ends.
fn finish_later(c: Child) -> std::thread::JoinHandle<(Output, Instant)> {
    std::thread::spawn(move || finish(c))
}

#[test]
fn a_second_measurement_waits_for_the_first_and_says_for_whom() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = start(&["rr", "-l", "2s"]);
    let a_pid = a.id();
    wait_holder(a_pid);
    let b = finish_later(start(&["rr", "-l", "300ms", "--json"]));
    let (a_out, a_end) = finish(a);
    let (b_out, b_end) = b.join().unwrap();
    common::assert_ok(&a_out);
    common::assert_ok(&b_out);
    assert!(b_end >= a_end, "the second finished before the first");
    let err = String::from_utf8_lossy(&b_out.stderr);
    assert!(
        err.contains("waiting for another measurement") && err.contains(&format!("pid {a_pid}")),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&b_out.stdout).unwrap();
    assert!(
        v.get("allow_concurrent").is_none(),
        "a locked run is not concurrent"
    );
}

#[test]
fn no_wait_refuses_naming_the_holder() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = start(&["rr", "-l", "2s"]);
    let a_pid = a.id();
    wait_holder(a_pid);
    let out = common::run_with_timeout(
        vpl().args(["rr", "-l", "300ms", "--no-wait"]),
        Duration::from_secs(10),
    );
    let (a_out, _) = finish(a);
    common::assert_ok(&a_out);
    assert_eq!(out.status.code(), Some(75));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_one_line_error(&err, &format!("pid {a_pid}"));
    assert!(err.contains("virtperf rr -l 2s"), "{err}");
}

#[test]
fn a_sigkilled_holder_blocks_nobody() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut a = start(&["rr", "-l", "30s"]);
    wait_holder(a.id());
    a.kill().unwrap();
    a.wait().unwrap();
    let t0 = Instant::now();
    let out = common::run_with_timeout(
        vpl().args(["rr", "-l", "300ms", "--no-wait"]),
        Duration::from_secs(20),
    );
    common::assert_ok(&out);
    assert!(t0.elapsed() < Duration::from_secs(10));
}

#[test]
fn allow_concurrent_runs_beside_and_the_result_says_so() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = start(&["rr", "-l", "4s"]);
    wait_holder(a.id());
    let t0 = Instant::now();
    let b = finish_later(start(&[
        "rr",
        "-l",
        "300ms",
        "--json",
        "--allow-concurrent",
    ]));
    let (a_out, _) = finish(a);
    let (b_out, b_end) = b.join().unwrap();
    common::assert_ok(&a_out);
    common::assert_ok(&b_out);
    // Neither the command nor the private agent it starts waits for the 4 s measurement.
    let err = String::from_utf8_lossy(&b_out.stderr);
    assert!(!err.contains("waiting"), "{err}");
    assert!(
        b_end.duration_since(t0) < Duration::from_millis(2500),
        "--allow-concurrent waited: {:?}",
        b_end.duration_since(t0)
    );
    let v: serde_json::Value = serde_json::from_slice(&b_out.stdout).unwrap();
    assert_eq!(v["allow_concurrent"], true);
}

/// A client on another machine (here: one that takes no lock of its own) waits for a
/// measurement running on the agent's machine; `serve --concurrent` does not.
#[test]
fn an_agent_waits_for_its_machine_unless_concurrent() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // The agents themselves must take the lock: start them as a user would.
    let agent = Agent::start_from(vpl(), &[]);
    let concurrent = Agent::start_from(vpl(), &["--concurrent", "2"]);
    let a = start(&["rr", "-l", "2s"]);
    wait_holder(a.id());
    let remote = |port: String| {
        start(&[
            "rr",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "-l",
            "300ms",
            "--allow-concurrent",
        ])
    };
    let c = finish_later(remote(concurrent.port()));
    let w = finish_later(remote(agent.port()));
    let (a_out, a_end) = finish(a);
    let (c_out, c_end) = c.join().unwrap();
    let (w_out, w_end) = w.join().unwrap();
    common::assert_ok(&a_out);
    common::assert_ok(&c_out);
    common::assert_ok(&w_out);
    assert!(c_end < a_end, "serve --concurrent waited");
    assert!(
        w_end >= a_end,
        "the agent ran its test beside the measurement"
    );
    let err = String::from_utf8_lossy(&w_out.stderr);
    assert!(err.contains("on the agent's machine"), "{err}");
}

/// Work that is not the test is measured, shown and warned about.
#[test]
fn other_work_on_the_machine_is_recorded_and_warned_about() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut spinner = Command::new("sh")
        .args(["-c", "while :; do :; done"])
        .spawn()
        .expect("spinner");
    let out = common::run_with_timeout(
        vpl().args(["rr", "-l", "1s", "--json"]),
        Duration::from_secs(30),
    );
    // The same in a stored run: `show` says which trials ran on a busy machine.
    let dir = std::env::temp_dir().join(format!("vp-lock-busy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("s.toml"),
        "name = \"busy\"\nduration = \"1s\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n",
    )
    .unwrap();
    let run = common::run_with_timeout(
        vpl()
            .arg("run")
            .arg(dir.join("s.toml"))
            .arg("--db")
            .arg(dir.join("r.db")),
        Duration::from_secs(30),
    );
    let _ = spinner.kill();
    let _ = spinner.wait();
    let show = common::run_with_timeout(
        vpl().args(["show", "last", "--db"]).arg(dir.join("r.db")),
        Duration::from_secs(30),
    );
    let _ = std::fs::remove_dir_all(&dir);
    common::assert_ok(&run);
    common::assert_ok(&show);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("1 trial(s) ran while other work used more than 10%"),
        "{text}"
    );
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let other = common::f(&v, "/cpu/client/other_cpu_pct");
    assert!(
        other > 30.0,
        "a spinning process beside the test: other work {other}%"
    );
    assert!(v["cpu"]["client"]["loadavg_1m"].is_number(), "{v}");
    let warned = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap_or("").contains("other work used"));
    assert!(warned, "{}", v["warnings"]);
}

/// A neighbour at about half a CPU beside a cross-CPU round trip is seen. /proc/stat's
/// user and system time missed it: the round trip idles and wakes each CPU 10 000 times a
/// second, most busy time went to no tick, and "user + system less the test's threads"
/// read 4.7% beside a neighbour using 47% on a 2-vCPU guest. Every other process's own
/// CPU (/proc/PID/stat) misses nothing that ran.
#[test]
fn half_a_cpu_of_other_work_beside_a_cross_cpu_round_trip_is_seen() {
    if !std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2) {
        virtperf_testkit::skip("two-cpus", "a cross-CPU round trip: one CPU here");
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // Spins 2 ms, sleeps 2 ms, for at most 60 s: bounded should this test die first.
    let script = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    \
                  t = time.time()\n    while time.time() - t < 0.002: pass\n    time.sleep(0.002)\n";
    let mut neighbour = Command::new("python3")
        .args(["-c", script])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("python3");
    let cpu_s =
        |pid: u32| virtperf_measure::process_cpu_s(pid).expect("the neighbour's /proc/PID/stat");
    std::thread::sleep(Duration::from_millis(300));
    let (before, t0) = (cpu_s(neighbour.id()), std::time::Instant::now());
    let out = common::run_with_timeout(
        vpl().args(["rr", "--cpus", "0,1", "-l", "2s", "--json"]),
        Duration::from_secs(30),
    );
    let share = 100.0 * (cpu_s(neighbour.id()) - before) / t0.elapsed().as_secs_f64();
    let _ = neighbour.kill();
    let _ = neighbour.wait();
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let other = common::f(&v, "/cpu/client/other_cpu_pct");
    assert!(share > 15.0, "the neighbour used only {share:.0}% of a CPU");
    assert!(
        other >= 0.6 * share,
        "a neighbour at {share:.0}% of a CPU, other work read {other:.1}%: {}",
        v["warnings"]
    );
}

/// Issue 40 §1: the lock names its holder for others to read (waiters, an agent's
/// `Waiting`), but never with the holder's token or a URL's password.
#[test]
fn the_lock_names_its_holder_without_secrets() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let a = start(&["rr", "-l", "2s", "--token", "PLANTEDT0KEN"]);
    let pid = a.id();
    wait_holder(pid);
    let text = std::fs::read_to_string(virtperf_machine::lock::path()).expect("lock file");
    let (out, _) = finish(a);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("PLANTEDT0KEN"), "{text}");
    assert!(text.contains("--token ***"), "{text}");
}

/// Issue 40 §2: a stored run keeps its command line without the token, in the database
/// file and in what `show` prints.
#[test]
fn a_stored_run_keeps_no_token() {
    let d = common::TempDir::new("lock-secret-store");
    let db = d.path("r.db");
    let out = common::vp()
        .args(["rr", "-l", "200ms", "--token", "PLANTEDT0KEN", "--db"])
        .arg(&db)
        .output()
        .expect("rr");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let shown = common::run_db_ok(&["show", "last", "--format", "json"], &db);
    assert!(shown.contains("--token ***"), "{shown}");
    for f in std::fs::read_dir(d.path("")).expect("dir").flatten() {
        let bytes = std::fs::read(f.path()).expect("readable");
        let found = bytes.windows(12).any(|w| w == b"PLANTEDT0KEN");
        assert!(!found, "{} holds the token", f.path().display());
    }
    assert!(!shown.contains("PLANTEDT0KEN"), "{shown}");
}

/// Issue 40 §6: root's lock is root's alone. Its file is 0600 (the hold's nonce in it is
/// no longer world-readable), so another user can neither read it nor open it to `flock`
/// it and make root's measurements wait; that user's own measurements take a lock of
/// their own and do not wait for root's.
#[test]
fn another_user_can_neither_read_nor_take_roots_lock() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !virtperf_testkit::need_root("root's lock against an unprivileged user") {
        return;
    }
    let a = start(&["rr", "-l", "3s"]);
    wait_holder(a.id());
    let path = virtperf_machine::lock::path();
    let mode = std::fs::metadata(&path).expect("lock file").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o077,
        0,
        "{path:?} is readable by others"
    );
    let home = common::TempDir::new("lock-nobody");
    std::fs::set_permissions(
        home.path(""),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let as_nobody = |prog: &str, args: &[&str]| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", prog])
            .args(args)
            .env("HOME", home.path(""))
            .env_remove("VIRTPERF_ALLOW_CONCURRENT")
            .env_remove("VIRTPERF_STATE_DIR")
            .env_remove("XDG_STATE_HOME");
        common::run_with_timeout(&mut c, Duration::from_secs(30))
    };
    let p = path.to_str().unwrap();
    let flock = as_nobody("flock", &["-n", "-x", p, "true"]);
    assert!(!flock.status.success(), "nobody took root's lock file");
    let t0 = Instant::now();
    let mine = as_nobody(
        env!("CARGO_BIN_EXE_virtperf"),
        &["rr", "-l", "200ms", "--no-wait"],
    );
    assert!(
        mine.status.success(),
        "nobody's own measurement: {}",
        String::from_utf8_lossy(&mine.stderr)
    );
    assert!(t0.elapsed() < Duration::from_secs(2), "waited for root's");
    let (out, _) = finish(a);
    assert!(out.status.success());
}
