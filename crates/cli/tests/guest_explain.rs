//! `explain --placement guest` for real: the battery natively and inside a QEMU guest
//! virtperf boots, and a battery interrupted with the guest up leaves nothing behind.

use crate::common;
use crate::guest::{assert_nothing_left, missing, qemus_of, run};

use std::time::Duration;

use common::vp;

/// `explain --placement guest`: the battery runs natively and inside the guest (where
/// virtperf's agent runs it in-process), both are stored, and the guest's side says loudly
/// when it is emulation; the guest's own missing capabilities are named.
#[test]
fn explain_runs_the_battery_natively_and_in_the_guest() {
    // Its native battery changes this host's halt-poll knob.
    let _knob = crate::host_knob();
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    // Removed when the test ends, also when it fails.
    let dir = common::TempDir::new("guest-explain");
    let db = dir.path("r.db");
    let (pid, out) = run(&[
        "explain",
        "--tries",
        "1",
        "-l",
        "300ms",
        "--placement",
        "guest",
        // Already on the battery guest's command line: that boot remedy is skipped as the
        // baseline itself, and only idle=poll boots a second guest (each boot costs this
        // test half a minute under TCG).
        "--guest-cmdline",
        "nohz=off",
        "--json",
        "--db",
        db.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Two guests boot (the battery's and idle=poll's): the TCG warning is said once.
    assert!(
        err.matches("guests run under TCG emulation").count() <= 1,
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["placement"], "guest:host-guest");
    let (native, guest) = (&v["native"], &v["elsewhere"]);
    assert!(native["measured_us"].as_f64().unwrap() > 0.0);
    assert!(guest["measured_us"].as_f64().unwrap() > 0.0);
    assert_ne!(native["run_id"], guest["run_id"], "two stored runs");
    // The guest has no /dev/kvm: its KVM components are missing, with the reason.
    let missing: Vec<&str> = guest["missing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(missing.contains(&"kvm_halt_exit"), "{guest}");
    // The remedies that need a reboot were measured in guests booted with them (or say why
    // not), and are then no longer only named.
    let remedies: Vec<&str> = guest["remedies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["what"].as_str().unwrap())
        .collect();
    let named = guest["remedies_named"].to_string();
    let why = |cfg: &str| {
        guest["missing"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == cfg)
            .map(|m| m["reason"].to_string())
    };
    assert!(
        why("boot-nohz-off").is_some_and(|w| w.contains("already on --guest-cmdline")),
        "nohz=off was on the command line: {guest}"
    );
    for (cfg, arg) in [
        ("boot-idle-poll", "idle=poll"),
        ("boot-nohz-off", "nohz=off"),
    ] {
        let measured = remedies.iter().any(|w| w.starts_with(arg));
        assert!(
            measured != missing.contains(&cfg),
            "{arg}: measured {measured}, missing {}: {guest}",
            missing.contains(&cfg)
        );
        assert!(
            !named.contains(&format!("\"{arg} on the kernel")),
            "{arg} still only named: {named}"
        );
        assert!(native["remedies_named"].to_string().contains(arg));
    }
    let env = &guest["environment"];
    if env["hypervisor"] == "TCGTCGTCGTCG" {
        let w = guest["warnings"][0].as_str().unwrap_or_default();
        assert!(w.contains("TCG"), "emulation not flagged: {guest}");
    }
    assert_nothing_left(pid);
}

/// Ctrl-C while a guest runs explain's battery ends the command at once (the guest's
/// battery cannot be stopped between trials from outside) and leaves nothing behind; this
/// machine's battery, finished before, stays stored.
#[test]
fn ctrl_c_during_a_guest_battery_leaves_nothing() {
    // Its native battery changes this host's halt-poll knob.
    let _knob = crate::host_knob();
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    // Removed when the test ends, also when it fails.
    let dir = common::TempDir::new("guest-explain-stop");
    let db = dir.path("r.db");
    let mut child = vp()
        .args([
            "explain",
            "--tries",
            "1",
            "-l",
            "300ms",
            "--placement",
            "guest",
            "--db",
        ])
        .arg(&db)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn virtperf");
    let pid = child.id();
    let t0 = std::time::Instant::now();
    while qemus_of(pid).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(120), "no guest appeared");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "virtperf ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let out = common::wait_output(child, Duration::from_secs(20));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let t0 = std::time::Instant::now();
    while !qemus_of(pid).is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_nothing_left(pid);
    // This machine's battery ran first and is stored whole.
    let runs = vp()
        .args(["runs", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let runs: serde_json::Value = serde_json::from_slice(&runs.stdout).unwrap();
    assert!(
        runs.as_array()
            .unwrap()
            .iter()
            .any(|r| r["status"] == "complete"),
        "{runs}"
    );
}
