//! A spec's `[compare] max_tax`: `run` exits 3 naming each config's row whose tax against
//! `[report] baseline` is over it, stores the run either way, and refuses a gate it cannot
//! apply before measuring anything.

mod common;

use std::time::Duration;

use common::{assert_one_line_error, run_with_timeout, vp};

/// Two configs of rr, the second beside two bulk streams unless `quiet`.
fn spec_with(gate: &str, baseline: bool, quiet: bool) -> String {
    let load = if quiet { "" } else { "load = \"streams=2\"\n" };
    let base = if baseline {
        "[report]\nbaseline = \"quiet\"\n"
    } else {
        ""
    };
    format!(
        "name = \"gate\"\nduration = \"400ms\"\nrepetitions = 2\n\
         [[workload]]\nkind = \"rr\"\nlabel = \"rr\"\n\
         [[config]]\nname = \"quiet\"\n\
         [[config]]\nname = \"loaded\"\n{load}{base}[compare]\nmax_tax = \"{gate}\"\n"
    )
}

fn spec(gate: &str, baseline: bool) -> String {
    spec_with(gate, baseline, false)
}

/// rr beside two bulk streams on a 2-CPU machine pays far more than 5% somewhere (its p99
/// at least; its rate may even rise where the streams keep CPUs out of idle): the gate
/// names the config, workload and metric and exits 3. Two quiet configs under a 1000%
/// gate pass.
#[test]
fn run_exits_3_naming_rows_over_the_specs_max_tax() {
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
        err.contains("over [compare] max_tax: loaded: rr ") && err.contains("> 5%"),
        "{err}"
    );
    // Stored, complete: the gate judges a run, it does not lose it.
    let shown = run_with_timeout(
        vp().args(["show", "1", "--json", "--db"]).arg(&db),
        Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).expect("show JSON");
    assert_eq!(v["run"]["status"], "complete", "{}", v["run"]);
    std::fs::write(&path, spec_with("1000%", true, true)).expect("spec");
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
