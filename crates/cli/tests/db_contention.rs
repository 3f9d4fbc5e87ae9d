//! A results database that a second process holds while a run writes it: a reader's shared
//! lock, a writer's lock held mid-run, trials the database refuses (kept beside it and
//! imported by the next run). The second process is the real `sqlite3` shell.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{run_db_ok, vp, TempDir};

/// A second process (the `sqlite3` shell) holding a lock on a results database: stdin stays
/// open until `release`, so the transaction it began stays open too.
struct Sqlite3Holder {
    child: std::process::Child,
}

impl Sqlite3Holder {
    /// Starts `sqlite3 db`, runs `sql` (which must print one line once its lock is held) and
    /// returns once that line arrived.
    fn hold(db: &Path, sql: &str) -> Sqlite3Holder {
        use std::io::{BufRead, BufReader, Write};
        let mut child = std::process::Command::new("sqlite3")
            .arg(db)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{sql}").unwrap();
        stdin.flush().unwrap();
        child.stdin = Some(stdin);
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            !line.trim().is_empty(),
            "sqlite3 printed nothing for {sql:?}"
        );
        Sqlite3Holder { child }
    }

    /// Ends the transaction and waits for the shell to exit.
    fn release(mut self) {
        use std::io::Write;
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = writeln!(stdin, "COMMIT;");
        }
        let _ = self.child.wait();
    }
}

impl Drop for Sqlite3Holder {
    fn drop(&mut self) {
        // Only reached when a test panicked before `release`: the shell is ours.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// True if the `sqlite3` shell runs here; prints why the test is skipped otherwise.
fn have_sqlite3() -> bool {
    match std::process::Command::new("sqlite3")
        .arg("-version")
        .stdout(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => true,
        r => {
            virtperf_testkit::skip(
                "sqlite3",
                &format!("the sqlite3 shell does not run here ({r:?}); install sqlite3"),
            );
            false
        }
    }
}

/// One point, one config, four 200 ms trials.
const FOUR_TRIALS: &str =
    "name = \"locks\"\nduration = \"200ms\"\nrepetitions = 4\n[[workload]]\nkind = \"rr\"\n";

/// The newest run's status and ok trials, read through `virtperf runs`.
/// `virtperf run SPEC --json --db DB`, to be spawned or waited for.
fn run_spec(spec: &Path, db: &Path) -> std::process::Command {
    let mut c = vp();
    c.arg("run").arg(spec).args(["--json", "--db"]).arg(db);
    c
}

fn stored(db: &Path) -> (String, u64) {
    let v: serde_json::Value = serde_json::from_str(&run_db_ok(&["runs", "--json"], db)).unwrap();
    (
        v[0]["status"].as_str().expect("a run's status").to_string(),
        v[0]["trials_ok"].as_u64().expect("a run's ok trials"),
    )
}

/// The newest run's ok trials while a run may be starting: 0 where there is no database
/// or no run in it yet (the run creates the file before it stores its row: under load a
/// poll can fall in between).
fn ok_trials(db: &Path) -> u64 {
    if !db.exists() {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_str(&run_db_ok(&["runs", "--json"], db)).unwrap();
    v[0]["trials_ok"].as_u64().unwrap_or(0)
}

#[test]
fn a_reader_holding_the_database_for_8_s_does_not_break_a_run() {
    if !have_sqlite3() {
        return;
    }
    let d = TempDir::new("exp-reader");
    let db = d.path("r.db");
    let spec = d.path("s.toml");
    std::fs::write(&spec, FOUR_TRIALS).unwrap();
    // The database exists (as after any earlier run) before the reader opens it: a reader
    // initialises an empty file (it creates none).
    std::fs::write(&db, b"").unwrap();
    run_db_ok(&["runs"], &db);
    // A notebook's open read transaction, held across the whole run: begin_run and every
    // trial's insert happen while it is open.
    let reader = Sqlite3Holder::hold(&db, "BEGIN; SELECT count(*) FROM runs;");
    let held = Instant::now();
    let run = run_spec(&spec, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep reading in the meantime, as `virtperf show` in a loop would.
    while held.elapsed() < Duration::from_secs(8) {
        let out = vp()
            .args(["runs", "--json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "a reader failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let out = common::wait_output(run, Duration::from_secs(90));
    reader.release();
    assert!(
        out.status.success(),
        "run failed under a reader: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stored(&db), ("complete".to_string(), 4));
}

#[test]
fn a_write_lock_held_for_6_s_mid_run_is_waited_for() {
    if !have_sqlite3() {
        return;
    }
    let d = TempDir::new("exp-writer");
    let db = d.path("r.db");
    let spec = d.path("s.toml");
    std::fs::write(&spec, FOUR_TRIALS).unwrap();
    let run = run_spec(&spec, &db)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first trial is stored, another writer takes the write lock for 6 s (longer
    // than SQLite's usual 5 s timeouts): the next trials must wait for it, not fail.
    let t0 = Instant::now();
    while ok_trials(&db) < 1 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "run made no progress"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let writer = Sqlite3Holder::hold(&db, "BEGIN IMMEDIATE; SELECT 'locked';");
    std::thread::sleep(Duration::from_secs(6));
    writer.release();
    let out = common::wait_output(run, Duration::from_secs(90));
    assert!(
        out.status.success(),
        "run failed under a held write lock: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stored(&db), ("complete".to_string(), 4));
}

#[test]
fn trials_the_database_refuses_are_kept_beside_it_and_imported_by_the_next_run() {
    if !have_sqlite3() {
        return;
    }
    let d = TempDir::new("exp-refuse");
    let db = d.path("r.db");
    let side = d.path("r.db.unsaved.jsonl");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        "name = \"refused\"\nduration = \"200ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n",
    )
    .unwrap();
    std::fs::write(&db, b"").unwrap();
    run_db_ok(&["runs"], &db);
    let sql = |q: &str| {
        let out = std::process::Command::new("sqlite3")
            .arg(&db)
            .arg(q)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // The database takes the run but refuses every trial, as a full disk or a lock held for
    // minutes would.
    sql("CREATE TRIGGER refuse BEFORE INSERT ON trials BEGIN SELECT RAISE(ABORT, 'no room for trials'); END;");
    let out = run_spec(&spec, &db).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("was not stored"))
        .collect();
    assert_eq!(warnings.len(), 2, "one line per refused trial: {err}");
    for w in &warnings {
        assert!(
            w.contains("no room for trials") && w.contains(side.to_str().unwrap()),
            "{w}"
        );
    }
    assert_eq!(std::fs::read_to_string(&side).unwrap().lines().count(), 2);
    let (status, ok) = stored(&db);
    assert_eq!((status.as_str(), ok), ("incomplete", 0));
    // Readers say that trials wait outside the database.
    let out = vp().args(["runs", "--db"]).arg(&db).output().unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 record(s) the database refused"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Once the database takes trials again, the next run imports them first.
    sql("DROP TRIGGER refuse;");
    let out = run_spec(&spec, &db).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("imported 2 trial(s)"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!side.exists(), "side file removed once imported");
    let v: serde_json::Value = serde_json::from_str(&run_db_ok(&["runs", "--json"], &db)).unwrap();
    assert_eq!(v[0]["trials_ok"], 2);
    assert_eq!(
        v[1]["trials_ok"], 2,
        "the refused trials are back in their run"
    );
    assert_eq!(v[1]["status"], "incomplete");
}
