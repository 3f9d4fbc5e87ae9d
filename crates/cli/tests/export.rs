//! `virtperf export`: a real sweep run into a real SQLite file, exported as CSV and JSON.

use crate::common;

use common::{assert_one_line_error, run_db_ok, vp, TempDir};

const STREAM_SWEEP: &str = r#"
name = "sweep"
duration = "300ms"
repetitions = 1
[[workload]]
kind = "stream"
send_size = [1024, 4096]
"#;

const RR: &str = r#"
name = "rr"
duration = "300ms"
repetitions = 1
[[workload]]
kind = "rr"
size = ["1,1", "64,64"]
"#;

#[test]
fn a_sweep_exports_its_parameter_as_a_column_and_runs_export_together() {
    let d = TempDir::new("export-sweep");
    let db = d.path("results.db");
    for (name, text) in [("sweep.toml", STREAM_SWEEP), ("rr.toml", RR)] {
        let spec = d.path(name);
        std::fs::write(&spec, text).unwrap();
        run_db_ok(&["run", spec.to_str().unwrap()], &db);
    }

    // One run: the swept send_size is a column of its own, one value per trial.
    let csv = run_db_ok(&["export", "1"], &db);
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(
        header,
        [
            "run",
            "seq",
            "config",
            "workload",
            "repetition",
            "status",
            "send_size",
            "metric",
            "value",
            "unit",
            "error"
        ],
        "{csv}"
    );
    let mbps: Vec<Vec<&str>> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|c| c[7] == "mbps")
        .collect();
    let sizes: Vec<&str> = mbps.iter().map(|c| c[6]).collect();
    assert_eq!(sizes, ["1024", "4096"], "{csv}");
    for c in &mbps {
        assert_eq!((c[0], c[3], c[5], c[9]), ("1", "stream", "ok", "Mbit/s"));
        assert!(c[8].parse::<f64>().unwrap() > 0.0, "{csv}");
    }

    // Two runs at once (`last` is the rr run): the union of their parameters, empty cells
    // where a run has no such parameter.
    let json = run_db_ok(&["export", "1", "last", "--format", "json"], &db);
    let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
    let rows = rows.as_array().unwrap();
    let stream: Vec<_> = rows.iter().filter(|r| r["run"] == 1).collect();
    let rr: Vec<_> = rows.iter().filter(|r| r["run"] == 2).collect();
    assert!(!stream.is_empty() && !rr.is_empty(), "{json}");
    for r in &stream {
        assert!(r["send_size"].is_u64(), "{r}");
        assert!(r["size"].is_null(), "{r}");
    }
    for r in &rr {
        assert!(
            ["1,1", "64,64"].contains(&r["size"].as_str().unwrap()),
            "{r}"
        );
        assert!(r["send_size"].is_null(), "{r}");
        assert_eq!(r["workload"], "rr");
    }
    let p99 = rr
        .iter()
        .find(|r| r["metric"] == "p99_us")
        .expect("p99_us row");
    assert_eq!(p99["unit"], "µs");
    assert!(p99["value"].as_f64().unwrap() > 0.0);

    // The CSV of both runs has both columns.
    let both = run_db_ok(&["export", "1", "2"], &db);
    let header = both.lines().next().unwrap();
    assert!(header.contains(",send_size,size,"), "{header}");
}

#[test]
fn a_missing_run_is_one_line_and_nothing_is_printed() {
    let d = TempDir::new("export-missing");
    let db = d.path("results.db");
    let spec = d.path("rr.toml");
    std::fs::write(&spec, RR).unwrap();
    run_db_ok(&["run", spec.to_str().unwrap()], &db);
    let out = vp()
        .args(["export", "1", "7", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "half an export was printed");
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "7");
}

/// Issue 40 §11: a tag (or config) that a spreadsheet would run as a formula comes out of
/// `export` as text (OWASP: a leading `'`, quoted; the table CSV of `show` shares the
/// cell function), never as an unquoted formula cell.
#[test]
fn csv_cells_are_never_formulas() {
    let d = TempDir::new("export-formula");
    let db = d.path("r.db");
    let evil = "=cmd|' /C calc'!A0";
    let out = vp()
        .args([
            "rr",
            "-l",
            "200ms",
            "--tag",
            &format!("rack={evil}"),
            "--db",
        ])
        .arg(&db)
        .output()
        .expect("rr");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let csv = run_db_ok(&["export", "last", "--format", "csv"], &db);
    assert!(csv.contains(&format!("\"'{evil}\"")), "{csv}");
    for line in csv.lines() {
        assert!(
            !line.split(',').any(|cell| cell.starts_with('=')),
            "a formula cell: {line}"
        );
    }
}
