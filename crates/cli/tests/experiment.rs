//! Experiments end to end: spec → runner → real SQLite file → show / compare / report, and
//! knobs restored on success, on failure and on Ctrl-C.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{assert_one_line_error, run_db_ok, vp, TempDir};

const TWO_CONFIGS: &str = r#"
name = "tiny"
duration = "300ms"
repetitions = 3
[[workload]]
kind = "rr"
size = ["1,1", "64,64"]
[[config]]
name = "plain"
[[config]]
name = "nodelay-off"
socket = { nodelay = false, busy_poll_us = 0 }
"#;

#[test]
fn run_store_show_compare_report() {
    let d = TempDir::new("exp-flow");
    let db = d.path("results.db");
    experiment_flow(&d, &db);
}

/// The same experiment, shown, compared and reported from a team's PostgreSQL store.
#[test]
fn run_store_show_compare_report_on_postgres() {
    let pg = pg_or_skip!();
    let d = TempDir::new("exp-flow-pg");
    let url = pg.create_db("flow");
    experiment_flow(&d, Path::new(&url));
}

fn experiment_flow(d: &TempDir, db: &Path) {
    let spec = d.path("tiny.toml");
    std::fs::write(&spec, TWO_CONFIGS).unwrap();
    let db = db.to_path_buf();
    let out = run_db_ok(&["run", spec.to_str().unwrap()], &db);
    assert!(
        out.contains("rr size=1,1") && out.contains("rr size=64,64"),
        "{out}"
    );
    assert!(
        out.contains("plain") && out.contains("nodelay-off"),
        "{out}"
    );
    // The comparison printed after the run carries a verdict per metric.
    assert!(out.contains("nodelay-off vs plain"), "{out}");

    let runs: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).unwrap();
    let r = &runs[0];
    assert_eq!(r["name"], "tiny");
    assert_eq!(r["status"], "complete");
    assert_eq!(r["trials_ok"], 12, "2 points × 2 configs × 3 reps");
    assert!(r["spec_text"].as_str().unwrap().contains("nodelay-off"));
    assert!(!r["env"]["kernel"].as_str().unwrap().is_empty());

    let show: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["show", "last", "--format", "json"], &db)).unwrap();
    let points = show["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    let cell = &points[0]["configs"][0];
    assert_eq!(cell["ok"], 3);
    let m = &cell["metrics"][0];
    assert_eq!(m["name"], "rate_per_s");
    let vals: Vec<f64> = m["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(vals.len(), 3);
    let mean = vals.iter().sum::<f64>() / 3.0;
    assert!((m["summary"]["mean"].as_f64().unwrap() - mean).abs() < 1e-6 * mean);
    // Latency merged from the three histograms: count is the sum of transactions.
    assert!(cell["latency"]["count"].as_u64().unwrap() > 100);

    let md = run_db_ok(&["show", "1", "--format", "md"], &db);
    assert!(md.contains("| rr size=1,1 | plain | 3 |"), "{md}");
    let csv = run_db_ok(&["show", "1", "--format", "csv"], &db);
    assert!(csv.starts_with("run,seq,config"));
    assert_eq!(
        csv.lines().filter(|l| l.contains(",rate_per_s,")).count(),
        12
    );

    // A run id that is no number is a usage error (exit 2) of every reader; a number that
    // names no run is not (exit 1: the store was asked).
    for (args, code, needle) in [
        (&["show", "x1"][..], 2, "invalid run id"),
        (&["show", "99999999999999999999"], 2, "invalid run id"),
        (&["compare", "1", "2x"], 2, "invalid run id"),
        (&["compare", "1", "1"], 2, "are both run 1"),
        (&["compare", "last", "1"], 2, "are both run 1"),
        (&["report", "first"], 2, "invalid run id"),
        (&["show", "999"], 1, "999"),
    ] {
        let out = vp().args(args).arg("--db").arg(&db).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert_one_line_error(&err, needle);
    }

    let cmp: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["compare", "1", "--json"], &db)).unwrap();
    let rows = cmp.as_array().unwrap();
    assert!(rows.iter().any(|r| r["metric"] == "p99_us"));
    // Each verdict agrees with the numbers printed beside it: significant only below alpha,
    // and improved or regressed in the direction the metric counts as better.
    for r in rows {
        let c = &r["comparison"];
        let v = c["verdict"].as_str().unwrap();
        let p = c["test"]["p_value"].as_f64();
        let alpha = c["alpha"].as_f64().unwrap();
        let significant = p.is_some_and(|p| p < alpha);
        // Not significant is "no change" only where the change's interval lies within the
        // 2% noise threshold; otherwise it is undecided.
        let interval = c["change_interval_pct"]
            .as_array()
            .map(|i| (i[0].as_f64().unwrap(), i[1].as_f64().unwrap()));
        let within = interval.is_some_and(|(lo, hi)| lo >= -2.0 && hi <= 2.0);
        match v {
            "no_change" => assert!(!significant && within, "{r}"),
            "undecided" => assert!(!significant && !within, "{r}"),
            "within_noise" | "improved" | "regressed" => assert!(significant, "{r}"),
            other => panic!("unknown verdict {other}: {r}"),
        }
        // Welch's interval is of the change of means; Mann–Whitney's, of the shift its
        // ranks give, may leave the means' change outside.
        if let Some((lo, hi)) = interval.filter(|_| c["test"]["test"] == "welch") {
            let pct = c["pct_change"].as_f64().unwrap();
            assert!(
                lo <= pct && pct <= hi,
                "the change outside its interval: {r}"
            );
        }
        let pct = c["pct_change"].as_f64().unwrap();
        let metric = r["metric"].as_str().unwrap();
        let higher_is_better = metric == "rate_per_s";
        if (metric == "rate_per_s" || metric.ends_with("_us"))
            && (v == "improved" || v == "regressed")
        {
            assert_eq!(
                v == "improved",
                (pct > 0.0) == higher_is_better,
                "{metric} changed {pct:+.1}% and is called {v}: {r}"
            );
        }
    }

    let html = d.path("report.html");
    run_db_ok(&["report", "1", "-o", html.to_str().unwrap()], &db);
    // --json: what the page shows, the same comparisons as `compare --json`.
    let rep: serde_json::Value = serde_json::from_str(&run_db_ok(
        &[
            "report",
            "1",
            "-o",
            d.path("r2.html").to_str().unwrap(),
            "--json",
        ],
        &db,
    ))
    .expect("report --json");
    assert_eq!(rep["runs"][0]["run"], 1, "{rep}");
    assert_eq!(rep["runs"][0]["points"].as_array().map(Vec::len), Some(2));
    assert_eq!(rep["runs"][0]["comparisons"], cmp, "{rep}");
    assert!(rep["runs"][0]["explanation"].is_null(), "{rep}");
    assert!(d.path("r2.html").exists());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<svg") && page.contains("class=\"plot"),
        "no plots"
    );
    // The latency distribution on a percentile axis, the tries as dots over each bar, and a
    // CI whisker only where there are at least two tries.
    assert!(
        page.contains("class=\"plot percentiles\""),
        "no percentile plot"
    );
    assert!(page.contains(">99.9%<"), "no nines axis");
    assert!(page.contains("class=\"try\""), "tries not drawn");
    assert!(page.contains("environment"));
    common::chromium_renders(&html, &d.0, 3);
}

#[test]
fn spec_errors_name_the_line_and_change_nothing() {
    let d = TempDir::new("exp-bad");
    let spec = d.path("bad.toml");
    std::fs::write(
        &spec,
        "name = \"x\"\n[[workload]]\nkind = \"rr\"\nsize = \"-1\"\n",
    )
    .unwrap();
    let db = d.path("r.db");
    let out = vp()
        .args(["run", spec.to_str().unwrap(), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    // A bad spec is bad input, like a bad flag: exit 2 (README's exit codes).
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "line 4");
    assert!(!db.exists(), "a bad spec must not create a database");
}

#[test]
fn foreign_and_corrupt_databases_are_refused_untouched() {
    let d = TempDir::new("exp-db");
    let junk = d.path("junk.db");
    std::fs::write(&junk, b"definitely not sqlite ".repeat(100)).unwrap();
    let before = std::fs::read(&junk).unwrap();
    let out = vp().args(["runs", "--db"]).arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "junk.db");
    assert_eq!(std::fs::read(&junk).unwrap(), before);
}

/// A reader pointed at a file that does not exist says so and creates nothing: not the
/// file, not its directory (a mistyped --db used to leave an empty database behind).
#[test]
fn readers_of_a_missing_database_create_nothing() {
    let d = TempDir::new("exp-missing");
    let dir = d.path("nowhere");
    let db = dir.join("x.db");
    let html = d.path("r.html");
    for args in [
        &["runs"][..],
        &["show", "1"],
        &["show", "last"],
        &["compare", "1", "2"],
        &["report", "1", "-o", html.to_str().unwrap()],
    ] {
        let out = vp().args(args).arg("--db").arg(&db).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_one_line_error(&err, "does not exist");
        assert!(err.contains("virtperf run"), "{args:?}: {err}");
        assert!(!dir.exists(), "{args:?} created {}", dir.display());
        assert!(!html.exists(), "{args:?} wrote a report");
    }
    // In an existing directory too: no file, no -wal, no side file.
    let here = d.path("x.db");
    let out = vp()
        .args(["show", "1", "--db"])
        .arg(&here)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let left: Vec<_> = std::fs::read_dir(&d.0).unwrap().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// `compare --fail-on-regression` exits 3 when a verdict says the candidate got worse by at
/// least the threshold. Two real runs: back to back, then with a 2 ms gap between
/// transactions, which cuts the rate by over 90 %; 6 tries each so that Welch's test finds
/// it significant even when other work on a shared machine makes the fast run's rate vary
/// by half.
#[test]
fn compare_fails_on_a_regression_for_ci() {
    let d = TempDir::new("exp-regress");
    let db = d.path("r.db");
    regression_flow(&d, &db);
}

/// The same regression gate, both runs in a team's PostgreSQL store.
#[test]
fn compare_fails_on_a_regression_for_ci_on_postgres() {
    let pg = pg_or_skip!();
    let d = TempDir::new("exp-regress-pg");
    let url = pg.create_db("regress");
    regression_flow(&d, Path::new(&url));
}

fn regression_flow(d: &TempDir, db: &Path) {
    let db = db.to_path_buf();
    // Both rates are set by the idle gap between transactions (≈ 1/1ms vs ≈ 1/4ms), not by
    // how busy the machine is: a back-to-back rr beside the other tests varies too much
    // (CV near 100%) for six tries to show a regression.
    let rr = "name = \"ci\"\nduration = \"200ms\"\nrepetitions = 6\n[[workload]]\nkind = \"rr\"\n";
    let (fast, slow) = (d.path("fast.toml"), d.path("slow.toml"));
    std::fs::write(&fast, format!("{rr}gap = \"1ms\"\n")).unwrap();
    std::fs::write(&slow, format!("{rr}gap = \"4ms\"\n")).unwrap();
    run_db_ok(&["run", fast.to_str().unwrap()], &db);
    run_db_ok(&["run", slow.to_str().unwrap()], &db);

    let code = |extra: &[&str]| {
        let out = vp()
            .args(["compare", "1", "2"])
            .args(extra)
            .arg("--db")
            .arg(&db)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let rows: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["compare", "1", "2", "--json"], &db)).unwrap();
    let rows = rows.as_array().unwrap();
    let rate = rows
        .iter()
        .find(|r| r["metric"] == "rate_per_s")
        .unwrap_or_else(|| panic!("no rate row: {rows:?}"));
    assert_eq!(rate["comparison"]["verdict"], "regressed", "{rate}");
    let worst = rows
        .iter()
        .filter(|r| r["comparison"]["verdict"] == "regressed")
        .filter_map(|r| r["comparison"]["pct_change"].as_f64())
        .map(f64::abs)
        .fold(0.0, f64::max);

    // Without the flag a regression is only reported; -o draws it.
    let page = d.path("compare.html");
    assert_eq!(code(&["-o", page.to_str().unwrap()]).0, Some(0));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("class=\"plot compare\"") && html.contains("regressed"),
        "{html}"
    );
    common::chromium_renders(&page, &d.0, 1);
    let (c, err) = code(&["--fail-on-regression"]);
    assert_eq!(c, Some(3), "{err}");
    assert_one_line_error(&err, "regressed by at least 0%");
    let (c, err) = code(&["--fail-on-regression", "--threshold", "5%"]);
    assert_eq!(c, Some(3), "{err}");
    // A threshold above the worst regression passes where every undecided row's interval
    // excludes a regression beyond it, and is undecided (exit 5) where one does not; the
    // candidate's improvements never fail.
    let limit = worst + 1.0;
    let t = format!("{limit:.1}%");
    let open: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["comparison"]["verdict"] == "undecided")
        .filter(|r| {
            let c = &r["comparison"];
            match c["change_interval_pct"].as_array() {
                None => true,
                Some(i) => {
                    let (lo, hi) = (i[0].as_f64().unwrap(), i[1].as_f64().unwrap());
                    let worse = if c["higher_is_better"] == true {
                        -lo
                    } else {
                        hi
                    };
                    worse > limit
                }
            }
        })
        .collect();
    let (c, err) = code(&["--fail-on-regression", "--threshold", &t]);
    if open.is_empty() {
        assert_eq!(c, Some(0), "threshold {t}: {err}");
    } else {
        assert_eq!(c, Some(5), "threshold {t}: {err}");
        assert_one_line_error(&err, "cannot exclude one of more than");
        let named = open[0]["metric"].as_str().unwrap();
        assert!(err.contains(named), "{err} does not name {named}");
    }
    // The faster run as the candidate: its rate improved, so that row never fails it.
    let back: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["compare", "2", "1", "--json"], &db)).unwrap();
    let rate_back = back
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "rate_per_s")
        .unwrap();
    assert_eq!(rate_back["comparison"]["verdict"], "improved");
    // One try a side can show no regression, and exclude none either: undecided, exit 5.
    let once = d.path("once.toml");
    std::fs::write(
        &once,
        format!(
            "{}gap = \"1ms\"\n",
            rr.replace("repetitions = 6", "repetitions = 1")
        ),
    )
    .unwrap();
    run_db_ok(&["run", once.to_str().unwrap()], &db);
    run_db_ok(&["run", once.to_str().unwrap()], &db);
    let out = vp()
        .args([
            "compare",
            "3",
            "4",
            "--fail-on-regression",
            "--threshold",
            "50%",
        ])
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert_one_line_error(&err, "cannot exclude one of more than 50%");
    assert!(err.contains("(no interval)"), "{err}");
    // --threshold means nothing alone, and must be a percentage.
    assert_eq!(code(&["--threshold", "5%"]).0, Some(2));
    assert_eq!(
        code(&["--fail-on-regression", "--threshold", "lots"]).0,
        Some(2)
    );
}

/// A spec in `d` of one rr and two configs: `ok` (no knob) and `name` setting `knob` (a
/// TOML line such as `module = { "x.y" = 1 }`).
fn spec_with_knob(d: &TempDir, name: &str, knob: &str) -> std::path::PathBuf {
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"s\"\nduration = \"200ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n\
             [[config]]\nname = \"ok\"\n[[config]]\nname = \"{name}\"\n{knob}\n"
        ),
    )
    .unwrap();
    spec
}

#[test]
fn configs_whose_knobs_cannot_apply_are_skipped_with_the_reason() {
    let d = TempDir::new("exp-skip");
    let spec = spec_with_knob(&d, "ghost", "module = { \"nosuchmodule.param\" = 1 }");
    let db = d.path("r.db");
    let out = vp()
        .args(["run", spec.to_str().unwrap(), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config ghost skipped") && err.contains("does not exist"),
        "{err}"
    );
}

/// Under the haltpoll cpuidle governor, which never reads cpuidle's disable switches, a
/// config that only flips them would measure the unchanged idle path under its own name:
/// it is skipped saying so, before anything is written, and the other config runs.
#[test]
fn cpuidle_switches_the_governor_ignores_are_skipped_with_the_reason() {
    let gov = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_governor_ro")
        .or_else(|_| std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_governor"))
        .unwrap_or_default();
    if gov.trim() != "haltpoll" {
        virtperf_testkit::skip(
            "haltpoll",
            &format!(
                "the cpuidle governor here is {:?}, not haltpoll",
                gov.trim()
            ),
        );
        return;
    }
    let switch = "/sys/devices/system/cpu/cpu0/cpuidle/state1/disable";
    let before = std::fs::read_to_string(switch).ok();
    let d = TempDir::new("exp-inert-switch");
    let spec = spec_with_knob(&d, "no-halt", "cpuidle_disable = [1]");
    let out = vp()
        .args(["run", spec.to_str().unwrap(), "--db"])
        .arg(d.path("r.db"))
        .output()
        .unwrap();
    common::assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config no-halt skipped")
            && err.contains("no effect under the cpuidle governor haltpoll"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(switch).ok(),
        before,
        "a switch was written"
    );
}

/// In a network namespace of its own (`unshare -n`, as a container runs it), a config
/// setting `net.core.busy_poll` (a sysctl the kernel keeps in the initial namespace only) is
/// skipped saying so, not that the machine lacks it; the config without knobs still runs.
#[test]
fn a_net_sysctl_missing_in_a_namespace_is_said_to_be_missing_there() {
    if !virtperf_testkit::need_root("unshare -n needs root") {
        return;
    }
    let d = TempDir::new("exp-netns-knob");
    let spec = spec_with_knob(&d, "bp", "sysctl = { \"net.core.busy_poll\" = \"50\" }");
    let script = format!(
        "ip link set lo up && exec {} run {} --db {}",
        env!("CARGO_BIN_EXE_virtperf"),
        spec.display(),
        d.path("r.db").display()
    );
    let out = std::process::Command::new("unshare")
        .args(["-n", "sh", "-c", &script])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config bp skipped")
            && err.contains("net.core.busy_poll does not exist in this network namespace")
            && !err.contains("on this machine"),
        "{err}"
    );
}

/// A sysctl this test may change: writable only as root. Each test uses its own so tests
/// running in parallel never see each other's values as originals.
fn writable_sysctl(path: &str) -> Option<String> {
    let v = std::fs::read_to_string(path).ok()?;
    std::fs::write(path, v.trim()).ok()?;
    Some(v.trim().to_string())
}

fn knob_spec(sysctl: &str, value: &str, probe_file: &Path, extra_setup: &str, reps: u32) -> String {
    let path = format!("/proc/sys/{}", sysctl.replace('.', "/"));
    format!(
        "name = \"knobs\"\nduration = \"300ms\"\nrepetitions = {reps}\n[[workload]]\nkind = \"rr\"\n\
         [[config]]\nname = \"changed\"\nsysctl = {{ \"{sysctl}\" = \"{value}\" }}\n\
         setup = \"cat {path} > {} {extra_setup}\"\n",
        probe_file.display()
    )
}

/// Set-up shared by the knob tests: the sysctl's original value (None when not root), a
/// value different from it, and a temp dir holding a spec that applies it, records the
/// applied value from its setup hook into `during`, then runs `extra_setup`.
struct KnobCase {
    path: String,
    orig: String,
    want: String,
    dir: TempDir,
}

impl KnobCase {
    fn new(
        sysctl: &str,
        tag: &str,
        a: &str,
        b: &str,
        extra_setup: &str,
        reps: u32,
    ) -> Option<KnobCase> {
        let path = format!("/proc/sys/{}", sysctl.replace('.', "/"));
        let Some(orig) = writable_sysctl(&path) else {
            virtperf_testkit::skip("root", &format!("needs root to write {path}"));
            return None;
        };
        let want = if orig == a { b } else { a }.to_string();
        let dir = TempDir::new(tag);
        let spec = knob_spec(sysctl, &want, &dir.path("during"), extra_setup, reps);
        std::fs::write(dir.path("s.toml"), spec).unwrap();
        Some(KnobCase {
            path,
            orig,
            want,
            dir,
        })
    }

    fn spec(&self) -> String {
        self.dir.path("s.toml").to_string_lossy().into_owned()
    }

    /// The knob's value now (after the run: restored or not).
    fn now(&self) -> String {
        std::fs::read_to_string(&self.path)
            .unwrap()
            .trim()
            .to_string()
    }

    fn applied(&self) -> String {
        std::fs::read_to_string(self.dir.path("during"))
            .unwrap()
            .trim()
            .to_string()
    }
}

#[test]
fn knobs_are_applied_then_restored_after_success() {
    let Some(k) = KnobCase::new("net.ipv4.tcp_fin_timeout", "ok", "61", "62", "", 1) else {
        return;
    };
    run_db_ok(&["run", &k.spec()], &k.dir.path("r.db"));
    assert_eq!(k.applied(), k.want, "knob not applied during the run");
    assert_eq!(k.now(), k.orig, "knob not restored");
}

#[test]
fn knobs_are_restored_when_the_run_fails() {
    // The setup hook records the applied value, then fails: the run stops.
    let Some(k) = KnobCase::new(
        "net.ipv4.tcp_keepalive_probes",
        "fail",
        "7",
        "8",
        "; exit 3",
        1,
    ) else {
        return;
    };
    let out = vp()
        .args(["run", &k.spec(), "--db"])
        .arg(k.dir.path("r.db"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "setup hook");
    assert_eq!(k.applied(), k.want);
    assert_eq!(k.now(), k.orig, "knob not restored after failure");
}

#[test]
fn ctrl_c_keeps_finished_trials_restores_knobs_and_marks_the_run_incomplete() {
    let Some(k) = KnobCase::new("net.ipv4.tcp_keepalive_intvl", "int", "71", "72", "", 40) else {
        return;
    };
    let db = k.dir.path("r.db");
    let mut child = vp()
        .args(["run", &k.spec(), "--db"])
        .arg(&db)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until at least two trials are stored, then interrupt (SIGINT to our child only).
    let t0 = Instant::now();
    loop {
        let out = vp()
            .args(["runs", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        let n = serde_json::from_slice::<serde_json::Value>(&out.stdout)
            .ok()
            .and_then(|v| v[0]["trials_ok"].as_u64())
            .unwrap_or(0);
        if n >= 2 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "run made no progress"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t1.elapsed() < Duration::from_secs(30), "run ignored Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    assert_eq!(k.now(), k.orig, "knob not restored after Ctrl-C");
    let out = vp()
        .args(["runs", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v[0]["status"], "incomplete");
    let kept = v[0]["trials_ok"].as_u64().unwrap();
    assert!((2..40).contains(&kept), "kept {kept} trials");
}

#[test]
fn until_ci_stops_when_the_interval_is_tight_enough_or_at_the_cap() {
    let d = TempDir::new("exp-ci");
    let db = d.path("r.db");
    let spec = d.path("s.toml");
    // Loose target: a ±99% interval is met after a few tries even on a busy machine (other
    // tests run in parallel), well before the cap of 12.
    std::fs::write(&spec, "name = \"ci\"\nduration = \"200ms\"\nuntil_ci = \"95,99%\"\nmax_repetitions = 12\n[[workload]]\nkind = \"rr\"\n").unwrap();
    run_db_ok(&["run", spec.to_str().unwrap()], &db);
    // Impossible target from the command line: stops at the cap.
    run_db_ok(
        &[
            "run",
            spec.to_str().unwrap(),
            "--until-ci",
            "99,0.0001%",
            "--max-runs",
            "4",
        ],
        &db,
    );
    let v: serde_json::Value = serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).unwrap();
    assert_eq!(v[0]["trials_ok"], 4, "capped at --max-runs");
    let loose = v[1]["trials_ok"].as_u64().unwrap();
    assert!(
        (3..12).contains(&loose),
        "stopped once the CI was tight enough: {loose} tries"
    );
}

#[test]
fn show_renders_the_seeds_shapes() {
    let d = TempDir::new("exp-shapes");
    let db = d.path("r.db");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        "name = \"shapes\"\nduration = \"200ms\"\nrepetitions = 2\n[[workload]]\nkind = \"stream\"\n\
         send_size = [64, 1024]\n[[workload]]\nkind = \"http\"\nbytes = \"200KB\"\ncount = 2\n\
         [[workload]]\nkind = \"rr\"\n",
    )
    .unwrap();
    run_db_ok(&["run", spec.to_str().unwrap()], &db);
    // Seed 3: a row per swept size with each try and the average.
    let sweep = run_db_ok(&["show", "last", "--shape", "sweep"], &db);
    assert!(sweep.contains("(tried 2 times)"), "{sweep}");
    assert!(
        sweep.contains("send_size=64") && sweep.contains("send_size=1024"),
        "{sweep}"
    );
    // Seed 1: configs as rows, points as columns.
    let matrix = run_db_ok(&["show", "last", "--shape", "matrix"], &db);
    assert!(
        matrix.contains("default") && matrix.contains("send_size=64"),
        "{matrix}"
    );
    // Streams in MByte/s, rr as its median latency, then each side's CPU.
    assert!(matrix.contains("rr p50 µs"), "{matrix}");
    let cpu = matrix
        .split("CPU busy % client side / server side")
        .nth(1)
        .unwrap_or_else(|| panic!("no CPU block: {matrix}"));
    let row = cpu
        .lines()
        .find(|l| l.trim_start().starts_with("default"))
        .unwrap_or_else(|| panic!("no default row: {cpu}"));
    // One "client (softirq) / server (softirq)" cell per point (2 streams, http, rr), each
    // with an agent reporting its side.
    assert_eq!(row.matches(" / ").count(), 4, "{row}");
    assert!(!row.contains("/ -"), "{row}");
    // Seed 0: one line per download.
    let dl = run_db_ok(&["show", "last", "--shape", "downloads"], &db);
    assert_eq!(dl.matches("bytes_transferred=200000").count(), 4, "{dl}");
    assert!(dl.contains("duration="), "{dl}");
    let (code, err) = {
        let out = vp()
            .args(["show", "last", "--shape", "pie", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    assert_eq!(code, Some(1));
    assert_one_line_error(&err, "unknown shape");
}

/// Sizes as the field writes them resolve to bytes, and `show` says so for every point,
/// swept or not: `64K` is 65536 (netperf's reading), `1KB` 1000.
#[test]
fn show_prints_every_point_with_its_resolved_byte_counts() {
    let d = TempDir::new("exp-bytes");
    let spec = d.path("k.toml");
    std::fs::write(
        &spec,
        "name = \"k\"\nduration = \"300ms\"\nrepetitions = 1\n\
         [[workload]]\nkind = \"rr\"\nsize = \"4K,64K\"\n\
         [[workload]]\nkind = \"stream\"\nsend_size = [\"1KB\", \"2K\"]\n",
    )
    .unwrap();
    let db = d.path("r.db");
    run_db_ok(&["run", spec.to_str().unwrap()], &db);
    let out = run_db_ok(&["show", "last"], &db);
    assert!(
        out.contains("rr  (4096 B request / 65536 B response)"),
        "{out}"
    );
    assert!(
        out.contains("stream send_size=1000  (1000 B sends"),
        "{out}"
    );
    assert!(
        out.contains("stream send_size=2048  (2048 B (2 KiB) sends"),
        "{out}"
    );
}
