//! A spec's `[compare] max_tax`: `run` exits 3 naming each config's row whose tax against
//! `[report] baseline` is over it, stores the run either way, and refuses a gate it cannot
//! apply before measuring anything.

use crate::common;

use std::time::Duration;

use common::{assert_one_line_error, run_with_timeout, vp};

/// Two configs of rr: both ends on CPU 0, then (unless `quiet`, where both are alike)
/// across CPUs 0 and 1. A cross-CPU round trip waits for a wake-up on another CPU (here a
/// halted vCPU's, through the hypervisor): it costs a multiple of the same-CPU one. (A
/// config beside bulk streams was tried first: on this VM the streams keep the CPUs out of
/// idle and the rr got faster in every metric, so a gate on its tax did not fire.)
fn spec_with(gate: &str, baseline: bool, quiet: bool) -> String {
    let cpus = if quiet {
        "cpus = \"0,0\"\n"
    } else {
        "cpus = \"0,1\"\n"
    };
    let base = if baseline {
        "[report]\nbaseline = \"quiet\"\n"
    } else {
        ""
    };
    // Five tries: with three, one slow first try (63614 against 89104 and 90582 trans/s in
    // CI) widened the interval across the 5% gate, rightly undecided.
    // Alike configs pass on a throughput gate: a stream's tax cannot come near 1000%,
    // where an rr's p99 over a few short tries can spike past anything.
    let workload = if quiet {
        "kind = \"stream\"\nlabel = \"stream\"\n"
    } else {
        "kind = \"rr\"\nlabel = \"rr\"\n"
    };
    format!(
        "name = \"gate\"\nduration = \"400ms\"\nrepetitions = 5\n\
         [[workload]]\n{workload}\
         [[config]]\nname = \"quiet\"\ncpus = \"0,0\"\n\
         [[config]]\nname = \"across\"\n{cpus}{base}[compare]\nmax_tax = \"{gate}\"\n"
    )
}

fn spec(gate: &str, baseline: bool) -> String {
    spec_with(gate, baseline, false)
}

/// rr across two CPUs pays far more than 5% against rr on one: the gate names the config,
/// workload and metric and exits 3 (five tries: the tax's 95% interval lies above 5%).
/// Two alike configs under a 1000% gate pass (their interval lies below it).
#[test]
fn run_exits_3_naming_rows_over_the_specs_max_tax() {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        virtperf_testkit::skip("two-cpus", "the gate is tested with rr across CPUs 0 and 1");
        return;
    }
    let dir = common::TempDir::new("tax-gate");
    let db = dir.path("r.db");
    let path = dir.path("gate.toml");
    std::fs::write(&path, spec("rr=5%", true)).expect("spec");
    let out = run_with_timeout(
        vp().arg("run").arg(&path).arg("--db").arg(&db),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("over [compare] max_tax: across: rr ") && err.contains("> 5%"),
        "{err}"
    );
    // Stored, complete: the gate judges a run, it does not lose it.
    let shown = run_with_timeout(
        vp().args(["show", "1", "--json", "--db"]).arg(&db),
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("show JSON");
    assert_eq!(v["run"]["status"], "complete", "{}", v["run"]);
    std::fs::write(&path, spec_with("stream=1000%", true, true)).expect("spec");
    let out = run_with_timeout(
        vp().arg("run").arg(&path).arg("--db").arg(&db),
        Duration::from_secs(120),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A gate without a baseline, on a workload the spec does not have, or with a bad limit is
/// the spec's error (exit 2), before any trial.
#[test]
fn a_gate_the_spec_cannot_apply_is_refused_before_measuring() {
    let dir = common::TempDir::new("tax-gate-bad");
    let path = dir.path("gate.toml");
    for (text, needle) in [
        (spec("20%", false), "needs [report] baseline"),
        (spec("stream=20%", true), "unknown workload \"stream\""),
        (spec("1e30", true), "invalid tax"),
    ] {
        std::fs::write(&path, text).expect("spec");
        let out = run_with_timeout(
            vp().arg("run").arg(&path).arg("--db").arg(dir.path("r.db")),
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(2), "{needle}");
        assert_one_line_error(&String::from_utf8_lossy(&out.stderr), needle);
    }
}
