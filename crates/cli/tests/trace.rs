//! `--trace` (issue 28, counting mode): tracepoints counted per transaction on the test's
//! CPUs, against the kernel's own counts, and as a user who may not count them. In `alone`:
//! the counts are system-wide per CPU, as `perf stat -a` counts, so another test's work on
//! those CPUs adds its events (4.22 wake-ups per round trip beside `together`'s tests,
//! against 2.00 here alone); the counting tests take the machine to themselves.

use crate::common;

use std::process::Command;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether tracepoints can be counted on two CPUs here; skips (printing why) if not.
fn counting_on_two_cpus() -> bool {
    if !root() {
        virtperf_testkit::skip("root", "counting tracepoints needs root");
        return false;
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        virtperf_testkit::skip("two-cpus", "one CPU here");
        return false;
    }
    true
}

/// The CPU split of a traced test covers its interval, as an untraced one's does: a
/// 64-byte stream's sender keeps its CPU busy throughout, traced too. Closing the
/// counters (which waits on RCU to unregister the tracepoints) used to fall inside the
/// window and showed that CPU 95 % busy, not 100 %.
#[test]
fn a_traced_tests_cpu_window_is_its_interval() {
    let _alone = crate::alone();
    if !counting_on_two_cpus() {
        return;
    }
    let v = common::run_json(&[
        "stream",
        "-m",
        "64",
        "--cpus",
        "0,1",
        "-l",
        "1s",
        "--trace-all",
    ]);
    assert!(v["trace"]["per_unit"].is_object(), "{}", v["trace"]);
    let cpu0 = &v["cpu"]["client"]["system"]["per_cpu"][0];
    let busy = 100.0 - common::f(cpu0, "/idle_pct");
    assert!(busy >= 98.0, "the sender's CPU {busy:.1}% busy: {cpu0}");
}

/// A blocking round trip across two CPUs wakes a thread on the other CPU twice per
/// transaction: the counted wake-ups and IPIs say so, every default key is present or
/// named as missing, and nothing reads 0 for want of counting.
#[test]
fn a_cross_cpu_round_trip_is_counted_per_transaction() {
    let _alone = crate::alone();
    if !counting_on_two_cpus() {
        return;
    }
    let v = common::run_json(&["rr", "--cpus", "0,1", "-l", "1s", "--trace-all"]);
    let t = &v["trace"];
    assert_eq!(t["unit"], "transaction", "{t}");
    assert_eq!(t["cpus"], serde_json::json!([0, 1]));
    let per = |k: &str| t["per_unit"][k].as_f64();
    let missing = t["missing"].to_string();
    for key in [
        "msr_write_tsc_deadline",
        "msr_write_icr",
        "msr_write_other",
        "ipi_send_cpu",
        "ipis_received",
        "idle_entries",
        "idle_halts",
        "sched_wakeups",
        "sched_switches",
        "softirq_net_rx",
    ] {
        assert!(
            per(key).is_some() || missing.contains(key),
            "{key} neither counted nor named missing: {t}"
        );
    }
    let wakeups = per("sched_wakeups").expect("sched:sched_wakeup is in every kernel");
    assert!(
        (1.5..4.0).contains(&wakeups),
        "{wakeups:.2} wake-ups per cross-CPU transaction"
    );
    // Each side's CPU apart: the two add up to the whole.
    let side = |s: &str| {
        t["per_side"][s]["sched_wakeups"]
            .as_f64()
            .expect("per side")
    };
    assert!(
        (side("client") + side("server") - wakeups).abs() < 1e-9,
        "{t}"
    );
    // Each side's CPU goes idle about once per transaction: where cpuidle counted that, the
    // traced count says it too (a CPU whose idle loop fires no power:cpu_idle takes
    // cpuidle's count and `substituted` names it: counted, so not `missing`), never a 0
    // that was not counted.
    let says = |field: &str| {
        t[field].as_array().is_some_and(|a| {
            a.iter().any(|m| {
                m.as_str()
                    .is_some_and(|m| m.contains("cpuidle's count is used"))
            })
        })
    };
    assert!(!says("missing"), "a substituted count is not missing: {t}");
    for s in ["client", "server"] {
        let cpuidle = v["events"][s]["pinned"]["per_unit"]["idle_entries"].as_f64();
        let traced = t["per_side"][s]["idle_entries"].as_f64();
        if let (Some(c), Some(tr)) = (cpuidle, traced) {
            assert!(
                c < 0.5 || tr >= 0.5,
                "{s}: cpuidle {c:.2}, traced {tr:.2}: {t}"
            );
        }
    }
    // The loopback delivers each message in a NET_RX softirq on the sender's CPU (other
    // tests' traffic on these CPUs may add more: counting is system-wide per CPU).
    let rx = per("softirq_net_rx").expect("irq:softirq_entry");
    assert!(rx >= 1.5, "{rx:.2} NET_RX softirqs per transaction");
    let n = v["outcome"]["transactions"].as_u64().unwrap() as f64;
    let deltas = t["deltas"]["sched_wakeups"].as_f64().unwrap();
    assert!(
        (deltas / n - wakeups).abs() < 1e-9,
        "per_unit is deltas / transactions"
    );
}

/// Without the privilege the test still runs and says, in the result and a warning, what
/// could not be counted and why; no key reads 0.
#[test]
fn without_the_privilege_the_test_runs_and_says_why() {
    let _beside = crate::beside();
    if !root() || Command::new("setpriv").arg("--version").output().is_err() {
        virtperf_testkit::skip(
            "root",
            "needs root and setpriv to act as an unprivileged user",
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("vp-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A home the user may write: its machine lock is its own, in its state directory.
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_virtperf"))
        .args(["rr", "-l", "200ms", "--trace", "--json"])
        .args(["--timeline", "--cpus", "0,1"])
        .env("HOME", &dir)
        .env_remove("VIRTPERF_LOCK_NONCE")
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["trace"];
    // No tracepoint counted; the IPIs come from /proc/interrupts, which needs no privilege.
    assert!(
        t["per_unit"]
            .as_object()
            .is_none_or(|m| m.keys().all(|k| k == "ipis_received")),
        "counted as nobody? {t}"
    );
    let missing = t["missing"].to_string();
    assert!(
        missing.contains("root") || missing.contains("perf_event_paranoid"),
        "{missing}"
    );
    assert!(
        v["warnings"].to_string().contains("--trace"),
        "{}",
        v["warnings"]
    );
    assert!(v["timeline"].is_null());
    assert!(
        v["warnings"].to_string().contains("--timeline: not taken"),
        "{}",
        v["warnings"]
    );
}

/// `--timeline` refuses what it cannot follow, in one line, before any test runs.
#[test]
fn the_timeline_needs_one_flow_between_two_pinned_cpus() {
    let _beside = crate::beside();
    for args in [
        &["rr", "-l", "200ms", "--timeline"][..],
        &["rr", "--cpus", "0,0", "-l", "200ms", "--timeline"],
        &["stream", "--cpus", "0,1", "-l", "200ms", "--timeline"],
    ] {
        let out = common::vp().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--cpus A,B") && err.lines().count() == 1,
            "{err}"
        );
    }
}

/// `kvm exits` sets the host's `kvm:kvm_exit` beside the exits its probe made: counts
/// where the tracepoint fires (at least one per exit the probe surely made), and where it
/// stayed silent (PVM) no counts at all, only the note that says so — never zeros.
#[test]
fn kvm_exits_counts_the_hosts_tracepoint_or_says_it_is_silent() {
    let _beside = crate::beside();
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    if !root() || !kvm {
        virtperf_testkit::skip("kvm", "needs root and /dev/kvm");
        return;
    }
    let v = common::run_json(&["kvm", "exits", "--iterations", "50"]);
    let h = &v["host_trace"];
    let made = h["probe_exits"].as_u64().expect("probe_exits");
    assert!(made > 0, "{h}");
    let counted = h["counted"].as_object().expect("counted");
    match counted.get("kvm_exits").and_then(|n| n.as_u64()) {
        Some(n) => assert!(n >= made, "{n} kvm_exit hits for {made} exits: {h}"),
        None => {
            assert!(counted.is_empty(), "zeros of a silent tracepoint: {h}");
            assert!(h["note"].as_str().is_some_and(|n| !n.is_empty()), "{h}");
        }
    }
}

/// Issue 40 §12: `--trace` on a machine without tracefs mounted mounts it to open its
/// counters, and takes it away again: run in a mount namespace of its own where tracefs
/// (and debugfs, whose `tracing` would mount it on access) is unmounted first.
#[test]
fn trace_unmounts_the_tracefs_it_mounted() {
    let _beside = crate::beside();
    if !root() {
        virtperf_testkit::skip("root", "mounting tracefs needs root");
        return;
    }
    let script = r#"umount -l /sys/kernel/tracing 2>/dev/null; umount -l /sys/kernel/debug 2>/dev/null
grep -q ' tracefs ' /proc/self/mounts && exit 5
"$0" rr -l 200ms --trace --json > "$1" || exit 3
grep ' tracefs ' /proc/self/mounts && exit 4
exit 0"#;
    let dir = common::TempDir::new("trace-unmount");
    let out_json = dir.path("r.json");
    let out = common::run_with_timeout(
        std::process::Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", script])
            .arg(env!("CARGO_BIN_EXE_virtperf"))
            .arg(&out_json),
        std::time::Duration::from_secs(60),
    );
    let said = String::from_utf8_lossy(&out.stdout);
    match out.status.code() {
        Some(0) => {}
        Some(5) => {
            virtperf_testkit::skip("tracefs", "tracefs stays mounted in a private namespace");
            return;
        }
        Some(4) => panic!("tracefs left mounted: {said}"),
        other => panic!("{other:?}: {}", String::from_utf8_lossy(&out.stderr)),
    }
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out_json).unwrap()).unwrap();
    assert!(
        v["trace"]["deltas"]
            .as_object()
            .is_some_and(|d| !d.is_empty()),
        "counted through the tracefs it mounted: {}",
        v["trace"]
    );
}

/// Halt polling turns idle entries into polls, which exit nothing: with cpuidle-haltpoll's
/// window at 200 µs a cross-CPU round trip still enters idle about twice, but few
/// of those entries halt, and the likely VM exits fall with them; at 0 every entry halts.
/// (Before `idle_halts`, the likely exits counted every entry: 2.04 per transaction with
/// polling on here, 0.06 without the polls; bench/RESULTS.md.) The spec run sets the knob
/// and restores it.
#[test]
fn polls_are_neither_halts_nor_exits() {
    let _alone = crate::alone();
    if !counting_on_two_cpus() {
        return;
    }
    if let Some(why) = virtperf_measure::env::halt_poll_inert_now() {
        virtperf_testkit::skip("haltpoll", &format!("the halt-poll window: {why}"));
        return;
    }
    if std::fs::read_to_string(common::HALT_POLL).is_err() {
        virtperf_testkit::skip("haltpoll", "no haltpoll.guest_halt_poll_ns here");
        return;
    }
    let before = std::fs::read_to_string(common::HALT_POLL).unwrap();
    let d = common::TempDir::new("trace-polls");
    let spec = d.path("polls.toml");
    std::fs::write(
        &spec,
        r#"name = "polls"
duration = "1s"
repetitions = 1
[[workload]]
kind = "rr"
cpus = "0,1"
trace = true
[[config]]
name = "halt"
module = { "haltpoll.guest_halt_poll_ns" = 0 }
[[config]]
name = "poll"
module = { "haltpoll.guest_halt_poll_ns" = 200000 }
"#,
    )
    .unwrap();
    let db = d.path("polls.db");
    common::run_db_ok(&["run", spec.to_str().unwrap()], &db);
    assert_eq!(
        std::fs::read_to_string(common::HALT_POLL).unwrap(),
        before,
        "the knob was not restored"
    );
    let rows: Vec<serde_json::Value> = serde_json::from_str(&common::run_db_ok(
        &["export", "last", "--format", "json"],
        &db,
    ))
    .unwrap();
    let get = |config: &str, metric: &str| {
        rows.iter()
            .find(|r| r["config"] == config && r["metric"] == metric)
            .and_then(|r| r["value"].as_f64())
            .unwrap_or_else(|| panic!("{config} {metric} not counted: {rows:?}"))
    };
    for c in ["halt", "poll"] {
        let (entries, halts) = (get(c, "trace_idle_entries"), get(c, "trace_idle_halts"));
        assert!(
            entries >= 1.5,
            "{c}: {entries:.2} idle entries per transaction"
        );
        assert!(
            halts <= entries + 1e-9,
            "{c}: {halts:.2} halts > {entries:.2} entries"
        );
    }
    // Without polling each entry halts; with it, the wake-up comes while the CPU polls.
    let (entries, halts) = (
        get("halt", "trace_idle_entries"),
        get("halt", "trace_idle_halts"),
    );
    assert!(
        halts >= 0.9 * entries,
        "halt: {halts:.2} of {entries:.2} entries halted"
    );
    let (entries, halts) = (
        get("poll", "trace_idle_entries"),
        get("poll", "trace_idle_halts"),
    );
    // Machine B halts 0.1 % of them; a host that preempts the vCPUs stretches some idle
    // periods past the window, and cpuidle-haltpoll then shrinks it, so some halt there
    // (about a fifth in CI stop 77): half is the bound a counted poll would break.
    assert!(
        halts <= 0.5 * entries,
        "poll: {halts:.2} of {entries:.2} entries halted"
    );
    // The exits fall with the halts. How far depends on how many entries outlast the
    // window: each halt that remains brings its IPI and timer writes (about 3.8 exits per
    // halt on machine B), so a busy host's few halts can keep them near the entries (a CI
    // run counted 1.91 for 2.38 entries). What the polls must not add is themselves:
    // beyond the halts and the counted ICR and TSC-deadline writes only EOI and APIC-timer
    // writes remain, far fewer than the polled entries that counting polls as exits added.
    let likely = get("poll", "trace_likely_exits");
    assert!(
        likely < get("halt", "trace_likely_exits") / 2.0,
        "poll: {likely:.2} likely exits per transaction, halt: {:.2}",
        get("halt", "trace_likely_exits")
    );
    let rest =
        likely - halts - get("poll", "trace_icr_writes") - get("poll", "trace_tsc_deadline_writes");
    assert!(
        rest < 0.5 * (entries - halts),
        "poll: {rest:.2} likely exits per transaction are neither halts nor counted writes, \
         for {:.2} polled entries",
        entries - halts
    );
}
