//! The built-in experiment (`virtperf run` without a spec, README's first command) ends
//! with its answer: the headline ratio, what this machine is, and the next two commands.

use crate::common;

use std::time::Duration;

use common::{run_with_timeout, vp};

/// The built-in run's last lines, its exit checked.
fn headline_of(runs: &str) -> String {
    let dir = common::TempDir::new("quickstart");
    let out = run_with_timeout(
        vp().args(["run", "--runs", runs, "--db"])
            .arg(dir.path("r.db")),
        Duration::from_secs(180),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() || out.status.code() == Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
}

/// One try of each point: the headline names both round trips and says no interval is
/// claimed from one try, so it proposes no tune goal (no gap was shown); the machine is
/// called a VM exactly when `virtperf env` reports a hypervisor; `explain` and `vm compare`
/// are named; with one try the table's p50s are the headline's, so no note tells them
/// apart. Beside, never alone: the next test changes the idle loop this run depends on.
#[test]
fn the_built_in_run_ends_with_its_headline_and_the_next_commands() {
    let _beside = crate::beside();
    let tail = headline_of("1");
    assert!(
        tail.contains("Headline: a 1-byte round trip between two CPUs takes")
            && tail.contains("(p50s of one try each; 1 try: no interval"),
        "{tail}"
    );
    // One try: the table's pooled p50 is that try's own, so no note of two figures.
    assert!(!tail.contains("pool every round trip"), "{tail}");
    assert!(
        tail.contains("`virtperf explain`") && tail.contains("`virtperf vm compare`"),
        "{tail}"
    );
    assert!(
        tail.contains("no tune goal is proposed")
            && !tail.contains("--goal 'p50<=1")
            && !tail.contains("--goal 'p50<=2"),
        "{tail}"
    );
    // Where this machine's idle loop cannot poll (no cpuidle driver, no idle=poll), the
    // headline says it halts, by the rule tune's cost uses, rather than "not measured".
    if virtperf_measure::events::this_machine_never_polls() {
        assert!(tail.contains("the kernel's idle loop halts"), "{tail}");
    }
    let env = run_with_timeout(vp().args(["env", "--json"]), Duration::from_secs(60));
    let env: serde_json::Value = serde_json::from_slice(&env.stdout).expect("env JSON");
    let vm = tail.contains("This machine is itself a virtual machine");
    assert_eq!(
        vm,
        !env["hypervisor"].is_null(),
        "{tail}\nenv hypervisor: {}",
        env["hypervisor"]
    );
}

/// Issue 52: the headline follows the idle state the CPUs were measured in. With the
/// guest's idle loop polling 200 µs before it halts (cpuidle-haltpoll's own default) the
/// waiting CPU spins: the headline says POLL and claims no halted vCPU; with the window at
/// 0 the idle CPUs halt and the headline says so. The knob is put back as found.
#[test]
fn the_headline_names_the_idle_state_it_measured() {
    let _alone = crate::alone();
    if std::fs::read_dir("/sys/devices/system/cpu/cpu0/cpuidle").is_err() {
        let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver")
            .unwrap_or_default();
        virtperf_testkit::skip(
            "cpuidle",
            &format!(
                "no cpuidle states to count here (driver {:?})",
                driver.trim()
            ),
        );
        return;
    }
    if let Some(why) = virtperf_measure::env::halt_poll_inert_now() {
        virtperf_testkit::skip("haltpoll", &format!("the halt-poll window: {why}"));
        return;
    }
    for (ns, says, never) in [
        ("200000", "POLL state", "waking a halted vCPU"),
        ("0", "halted (", "POLL state ("),
    ] {
        let Some(_knob) = common::halt_poll_at(ns) else {
            return;
        };
        let tail = headline_of("1");
        assert!(tail.contains(says) && !tail.contains(never), "{ns}: {tail}");
    }
}

/// The recipes are built in: `run --list` names each (with its description), and a spec
/// that is neither a file nor a recipe is one line pointing at both (exit 2).
#[test]
fn recipes_are_listed_and_a_missing_spec_points_at_them() {
    let _beside = crate::beside();
    let out = run_with_timeout(vp().args(["run", "--list"]), Duration::from_secs(30));
    assert!(out.status.success());
    let list = String::from_utf8_lossy(&out.stdout);
    for name in ["quickstart", "halt-polling", "seed3-netperf-sweep"] {
        assert!(list.lines().any(|l| l.starts_with(name)), "{list}");
    }
    let (code, err) = common::run_fail(&["run", "nosuch.toml"]);
    assert_eq!(code, 2, "{err}");
    common::assert_one_line_error(&err, "`virtperf run --list`");
    assert!(
        err.contains("nosuch.toml") && err.contains("recipes/"),
        "{err}"
    );
}
