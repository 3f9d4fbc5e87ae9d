//! Counters a machine lacks are missing (null in JSON), never 0 (issue 25): the samplers
//! read from files a test writes, through their hooks, so the case a real kernel rarely
//! shows is shown every time.

use crate::common;

/// Counters a machine lacks are absent (null), never 0: a /proc/interrupts without the
/// IPI lines, and a cpuidle tree where one CPU's directory cannot be read, through the
/// samplers' test hooks (`VIRTPERF_TEST_PROC`, `VIRTPERF_TEST_SYS_CPU`).
#[test]
fn counters_a_machine_lacks_are_missing_not_zero() {
    let dir = std::env::temp_dir().join(format!("vp-hooks-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let proc_dir = dir.join("proc");
    std::fs::create_dir_all(&proc_dir).unwrap();
    // This machine's own files, less the lines of the rescheduling and call-function IPIs.
    let interrupts = std::fs::read_to_string("/proc/interrupts").unwrap();
    let kept: String = interrupts
        .lines()
        .filter(|l| !l.trim_start().starts_with("RES:") && !l.trim_start().starts_with("CAL:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(proc_dir.join("interrupts"), kept).unwrap();
    for f in ["softirqs", "stat"] {
        std::fs::copy(format!("/proc/{f}"), proc_dir.join(f)).unwrap();
    }
    // cpuidle readable for CPU 0 only.
    let sys = dir.join("cpu");
    let state = sys.join("cpu0/cpuidle/state0");
    std::fs::create_dir_all(&state).unwrap();
    for (f, v) in [("name", "POLL"), ("usage", "1"), ("time", "1")] {
        std::fs::write(state.join(f), v).unwrap();
    }
    std::fs::create_dir_all(sys.join("cpu1")).unwrap();
    let out = common::vp()
        .args(["rr", "--cpus", "0,1", "-l", "200ms", "--json"])
        .env("VIRTPERF_TEST_PROC", &proc_dir)
        .env("VIRTPERF_TEST_SYS_CPU", &sys)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let client = &v["events"]["client"];
    let server = &v["events"]["server"];
    for key in ["ipi_resched", "ipi_call"] {
        assert!(client["per_unit"][key].is_null(), "{key}: {client}");
        assert!(
            client["pinned"]["per_unit"][key].is_null(),
            "{key}: {client}"
        );
    }
    assert!(
        client["per_unit"]["timer_irqs"].is_number(),
        "the lines kept are counted"
    );
    // Idle entries: CPU 0 (the client's) read, CPU 1 (the server's) not, all CPUs not.
    assert!(
        client["pinned"]["per_unit"]["idle_entries"].is_number(),
        "{client}"
    );
    assert!(
        server["pinned"]["per_unit"]["idle_entries"].is_null(),
        "{server}"
    );
    assert!(client["per_unit"]["idle_entries"].is_null(), "{client}");
    assert!(
        client["missing"].to_string().contains("cpuidle of CPU 1"),
        "{}",
        client["missing"]
    );
    // No per-transaction IPI metric is made up from the absent counters.
    let typed: virtperf_wire::TestResult = serde_json::from_value(v.clone()).unwrap();
    let metrics = typed.events.expect("events").metrics();
    assert!(
        !metrics.iter().any(|m| m.name.ends_with("ipis_per_tr")),
        "{metrics:?}"
    );
}
