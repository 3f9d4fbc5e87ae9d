//! A team's store: the quickstart into PostgreSQL through `VIRTPERF_DB` and `PGPASSWORD`,
//! then `runs`, `show last`, `report last`; runs pushed from a local file, twice; the
//! cross-run filters. A real PostgreSQL server per test (skipped where absent).

use crate::common;
use crate::pgserver;

use std::path::Path;
use std::process::Output;

use common::{assert_one_line_error, run_db_ok, vp, TempDir};

fn ok(out: Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const TINY: &str =
    "name = \"tiny\"\nduration = \"200ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n";

#[test]
fn the_quickstart_into_postgres_then_runs_show_and_report() {
    let pg = pg_or_skip!();
    let d = TempDir::new("team-quick");
    pg.create_db("team");
    // The URL without its password, which comes from PGPASSWORD as libpq users expect.
    let team = |args: &[&str]| {
        let mut c = vp();
        c.args(args)
            .env("VIRTPERF_DB", pg.bare_url("team"))
            .env("PGPASSWORD", pgserver::PASSWORD)
            .env("XDG_DATA_HOME", &d.0);
        c.output().unwrap()
    };
    let out = ok(team(&["run", "--runs", "1"]), "quickstart");
    assert!(
        out.contains("stored as run 1 in postgres://virtperf@127.0.0.1"),
        "{out}"
    );
    let runs = ok(team(&["runs"]), "runs");
    assert!(
        runs.contains("quickstart") && runs.contains("complete"),
        "{runs}"
    );
    let show = ok(team(&["show", "last"]), "show last");
    assert!(show.contains("rr") && show.contains("stream"), "{show}");
    let html = d.path("r.html");
    ok(
        team(&["report", "last", "-o", html.to_str().unwrap()]),
        "report last",
    );
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
    // Without a password anywhere the server refuses, and the message says where one goes.
    let out = vp()
        .args(["runs", "--db", &pg.bare_url("team")])
        .env_remove("PGPASSWORD")
        .env("PGPASSFILE", d.path("none"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "PGPASSWORD");
}

#[test]
fn push_is_idempotent_and_runs_filter_by_host_and_age() {
    let pg = pg_or_skip!();
    let d = TempDir::new("team-push");
    let url = pg.create_db("pushed");
    let local = d.path("guest.db");
    let spec = d.path("tiny.toml");
    std::fs::write(&spec, TINY).unwrap();
    run_db_ok(&["run", spec.to_str().unwrap()], &local);
    run_db_ok(&["run", spec.to_str().unwrap()], &local);
    let push = |runs: &[&str]| {
        let mut c = vp();
        c.arg("push")
            .args(runs)
            .args(["--to", &url, "--db"])
            .arg(&local)
            .env("XDG_DATA_HOME", &d.0);
        ok(c.output().unwrap(), "push")
    };
    let first = push(&["all"]);
    assert!(
        first.contains("pushed 2 run(s); 0 already there"),
        "{first}"
    );
    let again = push(&["1", "last"]);
    assert!(
        again.contains("pushed 0 run(s); 2 already there"),
        "{again}"
    );
    let runs: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["runs", "--json"], Path::new(&url))).unwrap();
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 2, "{runs:?}");
    let lruns: serde_json::Value =
        serde_json::from_str(&run_db_ok(&["runs", "--json"], &local)).unwrap();
    let uid = |v: &serde_json::Value| v["uid"].as_str().unwrap().to_string();
    let mut a: Vec<_> = runs.iter().map(uid).collect();
    let mut b: Vec<_> = lruns.as_array().unwrap().iter().map(uid).collect();
    a.sort();
    b.sort();
    assert_eq!(a, b, "pushed runs keep their stable ids");
    // The trials, histograms included, read back the same: `show` of both agrees.
    let shown = |db: &Path| run_db_ok(&["show", "1", "--format", "csv"], db);
    assert_eq!(shown(Path::new(&url)), shown(&local));
    // Cross-run queries on the team store.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let mine = run_db_ok(
        &[
            "runs",
            "--where",
            &format!("host={}", host.trim()),
            "--since",
            "30d",
        ],
        Path::new(&url),
    );
    assert_eq!(
        mine.lines().filter(|l| l.contains("tiny")).count(),
        2,
        "{mine}"
    );
    let none = run_db_ok(&["runs", "--where", "host=elsewhere"], Path::new(&url));
    assert!(none.contains("no runs") && none.contains("match"), "{none}");
    let out = vp()
        .args(["runs", "--where", "colour=red", "--db"])
        .arg(&local)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("use host, name or tag.KEY"));
}

/// `report --trend` of runs from two kernels, read from the team store: one point per run
/// by date, the kernel change named on the plot.
#[test]
fn a_trend_report_names_the_kernel_change_between_runs() {
    let pg = pg_or_skip!();
    let d = TempDir::new("team-trend");
    let url = pg.create_db("trend");
    let local = d.path("host.db");
    let spec = d.path("tiny.toml");
    std::fs::write(&spec, TINY).unwrap();
    run_db_ok(&["run", spec.to_str().unwrap()], &local);
    // The same measurement as if taken after a kernel upgrade: a second run whose
    // environment names another kernel release (the store's own API, as the runner uses it).
    {
        use virtperf_store::{NewRun, RunStatus, Store};
        let mut s = Store::open(&local).unwrap();
        let first = s.run(1).unwrap();
        let mut env = first.env.clone();
        env.kernel = "6.19.0-test".into();
        let id = s
            .begin_run(&NewRun {
                name: first.name.clone(),
                spec_text: first.spec_text.clone(),
                env,
                tool_version: first.tool_version.clone(),
                git_commit: first.git_commit.clone(),
                host: first.host.clone(),
                pid: first.pid,
                planned_trials: first.planned_trials,
                tags: Default::default(),
            })
            .unwrap();
        for t in s.trials(1).unwrap() {
            s.add_trial(id, &t.trial).unwrap();
        }
        s.finish_run(id, RunStatus::Complete).unwrap();
    }
    let mut c = vp();
    c.args(["push", "all", "--to", &url, "--db"])
        .arg(&local)
        .env("XDG_DATA_HOME", &d.0);
    ok(c.output().unwrap(), "push");
    let html = d.path("trend.html");
    run_db_ok(
        &["report", "1", "2", "--trend", "-o", html.to_str().unwrap()],
        Path::new(&url),
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("trend over 2 runs"), "no trend section");
    assert!(page.contains("class=\"plot trend\""), "no trend plot");
    assert_eq!(
        page.matches("class=\"trend-point\"").count(),
        2,
        "one point per run"
    );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert!(
        page.contains(&format!("kernel {} → 6.19.0-test", kernel.trim())),
        "the kernel change is not named"
    );
    common::chromium_renders(&html, &d.0, 1);
    // Comparing the two runs names what differs between their machines first.
    let cmp = run_db_ok(&["compare", "1", "2"], Path::new(&url));
    assert!(
        cmp.lines().next().unwrap_or("").contains("6.19.0-test"),
        "{cmp}"
    );
    // So does each row of its JSON, and the page `-o` writes.
    let html = d.path("compare.html");
    let cmp = run_db_ok(
        &["compare", "1", "2", "--json", "-o", html.to_str().unwrap()],
        Path::new(&url),
    );
    let rows: serde_json::Value = serde_json::from_str(&cmp).expect("compare JSON");
    let rows = rows.as_array().expect("a list of rows");
    assert!(
        !rows.is_empty()
            && rows.iter().all(|r| r["notes"][0]
                .as_str()
                .is_some_and(|n| n.contains("6.19.0-test"))),
        "{cmp}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("6.19.0-test"), "the page names no kernel");
    // One run is not a trend.
    let out = vp()
        .args([
            "report",
            "1",
            "--trend",
            "-o",
            html.to_str().unwrap(),
            "--db",
            &url,
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "at least two runs");
}
