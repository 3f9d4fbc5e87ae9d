//! Issue 52: decisions rest on the evidence they name. `vm compare --max-tax` never passes
//! a workload it has no result for (exit 4, "not measured"), decides over or within only
//! when the tax's 95% interval lies wholly on one side of the limit, and is "undecided"
//! (exit 5) otherwise, each row saying which; every trial's cost has one window (a bulk
//! transfer's is its measured time, not 0).

use crate::common;

use std::time::Duration;

use common::{assert_one_line_error, run_with_timeout, vp};

/// `vm compare` between this host's loopback and `guest`, rr (and `extra`) with `runs`
/// tries of 300 ms under `gate`: (exit code, JSON, stderr).
fn gated(
    db: &std::path::Path,
    guest: &str,
    workloads: &str,
    runs: &str,
    gate: &str,
) -> (Option<i32>, serde_json::Value, String) {
    common::vm_compare_gated("local", guest, workloads, runs, gate, db)
}

/// The "VM" is an agent that is not there: every guest try fails, the native ones pass.
/// A gate on stream names it "not measured" and exits 4, never 0; the JSON's gate says
/// `not_measured`; the run is stored, incomplete.
#[test]
fn a_gated_workload_without_results_is_not_measured_and_never_passes() {
    let dir = common::TempDir::new("gate-unmeasured");
    // A port nothing listens on: bind one, then let it go.
    let port = common::closed_port();
    let guest = format!("remote:127.0.0.1:{port}");
    let (code, v, err) = gated(&dir.path("r.db"), &guest, "rr,stream", "1", "stream=0%");
    assert_eq!(code, Some(4), "{err}");
    // Its two trials never began, so the run says it gave up on that config, then errs.
    let (skipped, rest): (Vec<&str>, Vec<&str>) = err
        .lines()
        .partition(|l| l.starts_with("virtperf: config guest skipped: its agent was unreached"));
    assert_eq!(skipped.len(), 1, "{err}");
    assert_one_line_error(
        &rest.join("\n"),
        "--max-tax not measured: stream not measured",
    );
    assert_eq!(v["gate"]["outcome"], "not_measured", "{v}");
    assert!(
        err.contains("trials failed"),
        "the run's failure is said too: {err}"
    );
}

/// One try: no interval, so the gate cannot decide whatever the limit (exit 5), and each
/// row says "undecided" and why; with three tries and a limit no throughput tax reaches
/// (1000%) the interval lies below it: met, exit 0.
#[test]
fn one_try_is_undecided_and_an_interval_below_the_limit_passes() {
    let dir = common::TempDir::new("gate-undecided");
    let db = dir.path("r.db");
    let (code, v, err) = gated(&db, "local", "rr", "1", "rr=1000%");
    assert_eq!(code, Some(5), "{err}");
    assert_one_line_error(&err, "--max-tax undecided");
    assert!(err.contains("1 try: no interval"), "{err}");
    let rows = v["rows"].as_array().expect("rows");
    assert!(!rows.is_empty(), "{v}");
    for r in rows {
        assert_eq!(r["gate"], "undecided", "{r}");
        assert!(
            r["tax_low"].is_null() && r["no_interval"] == "1 try: no interval",
            "{r}"
        );
    }
    // Throughput's tax cannot come near 1000%; a p99 of three short tries could. Tries of
    // 1 s: among three of 300 ms beside the other tests, one slow try put the baseline's
    // interval down to 0 (undecided, "-21.1%": CI of 7051d42 on the AMD machine, where
    // loopback streams retransmit now and then: bench/RESULTS.md, "Spurious
    // retransmissions on loopback").
    let (code, v, err) =
        common::vm_compare_gated_for("local", "local", "stream", ("3", "1s"), "stream=1000%", &db);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["gate"]["outcome"], "met", "{v}");
    for r in v["rows"].as_array().expect("rows") {
        let (lo, hi) = (
            r["tax_low"].as_f64().expect("low"),
            r["tax_high"].as_f64().expect("high"),
        );
        let tax = r["tax_pct"].as_f64().expect("tax");
        assert!(lo <= tax && tax <= hi && hi <= 1000.0, "{r}");
    }
}

/// A bulk transfer's trial has no nominal duration (`duration_s` 0): its cost in busy
/// CPUs divides by its measured time like every other, so it is a number no larger than
/// the machine's CPUs (it was divided by a 1 ns floor, or missing).
#[test]
fn a_bulk_trials_cost_is_over_its_measured_time() {
    let dir = common::TempDir::new("bulk-cost");
    let spec = dir.path("bulk.toml");
    std::fs::write(
        &spec,
        "name = \"bulk-cost\"\nrepetitions = 2\n[[workload]]\nkind = \"bulk\"\nbytes = \"64M\"\n",
    )
    .expect("spec");
    let db = dir.path("r.db");
    let out = run_with_timeout(
        vp().arg("run")
            .arg(&spec)
            .arg("--db")
            .arg(&db)
            .arg("--json"),
        Duration::from_secs(120),
    );
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let cell = &v["points"][0]["configs"][0];
    let busy = cell["cpus_busy"]
        .as_f64()
        .unwrap_or_else(|| panic!("no cost for a bulk trial: {cell}"));
    assert!(
        busy > 0.0 && busy <= cpus + 0.05,
        "{busy} busy CPUs of {cpus}: {cell}"
    );
    let tries = cell["cpus_busy_tries"].as_array().expect("each try's cost");
    assert_eq!(tries.len(), 2, "{cell}");
}

/// README's exit-code table is the code's: each decision's code has its row, in the
/// decision's words, and docs/json.md names every outcome and code.
#[test]
fn readme_and_json_doc_give_the_codes_decisions_exit_with() {
    use virtperf_report::decide::Outcome;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let row = |code: u8| -> String {
        readme
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("| {code} |")))
            .unwrap_or_else(|| panic!("README's exit-code table has no row for {code}"))
            .to_string()
    };
    for (o, words) in [
        (Outcome::NotMet, "not met"),
        (Outcome::NotMeasured, "not measured"),
        (Outcome::Undecided, "undecided"),
    ] {
        let r = row(o.exit_code());
        assert!(
            r.contains(words),
            "{o:?} exits {}: README's row {r}",
            o.exit_code()
        );
    }
    assert!(row(0).contains("every gate met"), "{}", row(0));
    let json = std::fs::read_to_string(root.join("docs/json.md")).expect("json.md");
    for o in [
        Outcome::Met,
        Outcome::NotMet,
        Outcome::NotMeasured,
        Outcome::Undecided,
    ] {
        let name = serde_json::to_value(o).expect("outcome");
        let name = name.as_str().expect("a string");
        assert!(
            json.contains(&format!("`{name}` {}", o.exit_code())),
            "docs/json.md does not give `{name}` {}",
            o.exit_code()
        );
    }
}
