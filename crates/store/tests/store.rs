//! The store against real SQLite files in a private temporary directory.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use virtperf_store::{KnobRecord, NewRun, NewTrial, RunStatus, Saved, Store, StoreError};
use virtperf_wire::Outcome;

mod common;
use common::*;

fn user_version(path: &Path) -> i64 {
    let c = rusqlite::Connection::open(path).unwrap();
    c.pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

fn assert_one_line(e: &StoreError) {
    let s = e.to_string();
    assert!(!s.contains('\n'), "message spans lines: {s}");
}

#[test]
fn creates_a_missing_file_and_its_directories() {
    let dir = TempDir::new("missing");
    let path = dir.file("a/b/results.db");
    let store = Store::open(&path).unwrap();
    assert_eq!(store.path(), path);
    assert!(store.runs().unwrap().is_empty());
    drop(store);
    assert_eq!(user_version(&path), virtperf_store::SCHEMA_VERSION);
    // Reopening an up-to-date file changes nothing.
    let before = fs::read(&path).unwrap();
    let store = Store::open(&path).unwrap();
    drop(store);
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn migrates_an_empty_file() {
    let dir = TempDir::new("empty");
    let path = dir.file("results.db");
    fs::write(&path, b"").unwrap();
    let mut store = Store::open(&path).unwrap();
    let id = store.begin_run(&new_run("r")).unwrap();
    assert_eq!(store.run(id).unwrap().name, "r");
    drop(store);
    assert_eq!(user_version(&path), virtperf_store::SCHEMA_VERSION);
    let c = rusqlite::Connection::open(&path).unwrap();
    let app: String = c
        .query_row("SELECT value FROM meta WHERE key = 'app'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(app, "virtperf");
}

#[test]
fn round_trips_a_run_with_trials_and_knobs() {
    let dir = TempDir::new("roundtrip");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    let run = new_run("sweep");
    let id = store.begin_run(&run).unwrap();
    // Inserted out of seq order: reads come back in seq order.
    let t2 = failed_trial(2);
    let t1 = ok_trial(1);
    let id2 = store.add_trial(id, &t2).unwrap();
    let id1 = store.add_trial(id, &t1).unwrap();
    store
        .set_knobs(
            id,
            &[
                KnobRecord {
                    config: "tuned".into(),
                    name: "net.core.busy_poll".into(),
                    original: Some("0".into()),
                    applied: "50".into(),
                },
                KnobRecord {
                    config: "tuned".into(),
                    name: "kvm.halt_poll_ns".into(),
                    original: None,
                    applied: "0".into(),
                },
            ],
        )
        .unwrap();
    // Setting a knob again keeps the first original (the value to restore).
    store
        .set_knobs(
            id,
            &[KnobRecord {
                config: "tuned".into(),
                name: "net.core.busy_poll".into(),
                original: Some("50".into()),
                applied: "100".into(),
            }],
        )
        .unwrap();
    drop(store);

    // Read back through a fresh handle, as another process would.
    let store = Store::open(&path).unwrap();
    let row = store.run(id).unwrap();
    assert_eq!(row.name, run.name);
    assert_eq!(row.spec_text, run.spec_text);
    assert_eq!(row.env, run.env);
    assert_eq!(row.host, run.host);
    assert_eq!(row.pid, run.pid);
    assert_eq!(row.tool_version, run.tool_version);
    assert_eq!(row.git_commit, run.git_commit);
    assert_eq!(row.planned_trials, 2);
    assert_eq!(row.status, RunStatus::Running);
    assert_eq!(row.effective_status(), RunStatus::Running); // we are alive
    assert_eq!(row.finished_at, None);
    assert_eq!((row.trials_ok, row.trials_failed), (1, 1));
    assert_eq!(row.started_at.len(), 24);

    let trials = store.trials(id).unwrap();
    assert_eq!(trials.len(), 2);
    for (got, (want, want_id)) in trials.iter().zip([(&t1, id1), (&t2, id2)]) {
        assert_eq!(got.id, want_id);
        assert_eq!(got.run_id, id);
        assert_eq!(got.seq, want.seq);
        assert_eq!(got.config, want.config);
        assert_eq!(got.workload, want.workload);
        assert_eq!(got.point, want.point);
        assert_eq!(got.point_label, want.point_label);
        assert_eq!(got.repetition, want.repetition);
        assert_eq!(got.status, want.status);
        assert_eq!(got.error, want.error);
        assert_eq!(got.result, want.result);
        assert_eq!(got.metric, want.metric);
        assert_eq!(got.metric_name, want.metric_name);
        assert_eq!(got.started_at, want.started_at);
        assert_eq!(got.duration_s, want.duration_s);
    }
    // The histogram survives byte for byte inside the stored result.
    match &trials[0].result.as_ref().unwrap().outcome {
        Outcome::Rr(o) => assert!(o.histogram.starts_with("HISTF")),
        other => panic!("unexpected outcome {other:?}"),
    }

    let knobs = store.knobs(id).unwrap();
    assert_eq!(
        knobs,
        vec![
            KnobRecord {
                config: "tuned".into(),
                name: "net.core.busy_poll".into(),
                original: Some("0".into()),
                applied: "100".into(),
            },
            KnobRecord {
                config: "tuned".into(),
                name: "kvm.halt_poll_ns".into(),
                original: None,
                applied: "0".into(),
            },
        ]
    );
}

/// A probe's report (not a network test) is kept whole beside its primary number, and a
/// file from before probe reports existed (schema 2) is migrated with its trials intact.
#[test]
fn probe_reports_round_trip_and_version_2_files_are_migrated() {
    let dir = TempDir::new("probe");
    let path = dir.file("r.db");
    {
        let mut s = Store::open(&path).unwrap();
        let run = s.begin_run(&new_run("old")).unwrap();
        s.add_trial(run, &ok_trial(1)).unwrap();
    }
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(&format!(
            "{UNDO_5} {UNDO_4} ALTER TABLE trials DROP COLUMN detail_json; PRAGMA user_version = 2;"
        ))
        .unwrap();
    }
    let mut s = Store::open(&path).unwrap();
    assert_eq!(user_version(&path), virtperf_store::SCHEMA_VERSION);
    let run = s.begin_run(&new_run("explain")).unwrap();
    let report = json!({"one_way": {"p50_us": 31.5}, "strategy": {"kind": "block"}});
    let probe = NewTrial {
        workload: "wake".into(),
        result: None,
        detail: Some(report.clone()),
        metric: Some(31.5),
        metric_name: "one_way_p50_us".into(),
        ..ok_trial(1)
    };
    s.add_trial(run, &probe).unwrap();
    let back = s.trials(run).unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].detail.as_ref(), Some(&report));
    assert_eq!(back[0].metric, Some(31.5));
    assert!(back[0].result.is_none());
    // The trial stored before the migration reads back unchanged, without a report.
    let old = s.trials(1).unwrap();
    assert_eq!(old.len(), 1);
    assert!(old[0].result.is_some() && old[0].detail.is_none());
}

#[test]
fn finish_run_records_status_and_time() {
    let dir = TempDir::new("finish");
    let mut store = Store::open(&dir.file("results.db")).unwrap();
    let a = store.begin_run(&new_run("a")).unwrap();
    let b = store.begin_run(&new_run("b")).unwrap();
    store.finish_run(a, RunStatus::Complete).unwrap();
    store.finish_run(b, RunStatus::Incomplete).unwrap();
    let ra = store.run(a).unwrap();
    assert_eq!(ra.status, RunStatus::Complete);
    assert_eq!(ra.effective_status(), RunStatus::Complete);
    let fin = ra.finished_at.unwrap();
    assert!(fin >= ra.started_at, "{fin} < {}", ra.started_at);
    assert_eq!(store.run(b).unwrap().status, RunStatus::Incomplete);
    store.finish_run(b, RunStatus::Failed).unwrap();
    assert_eq!(store.run(b).unwrap().status, RunStatus::Failed);
}

#[test]
fn missing_runs_are_not_found_with_a_hint() {
    let dir = TempDir::new("notfound");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    let e = store.run(7).unwrap_err();
    assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "run 7 not found in {} (see `virtperf runs`)",
            path.display()
        )
    );
    for e in [
        store.finish_run(7, RunStatus::Complete).unwrap_err(),
        store.add_trial(7, &ok_trial(1)).unwrap_err(),
        store.set_knobs(7, &[]).unwrap_err(),
        store.trials(7).unwrap_err(),
        store.knobs(7).unwrap_err(),
    ] {
        assert!(matches!(e, StoreError::NotFound(_)), "{e:?}");
    }
}

#[test]
fn runs_are_listed_newest_first() {
    let dir = TempDir::new("order");
    let mut store = Store::open(&dir.file("results.db")).unwrap();
    let ids: Vec<i64> = (0..3)
        .map(|i| store.begin_run(&new_run(&format!("run{i}"))).unwrap())
        .collect();
    let listed: Vec<i64> = store.runs().unwrap().iter().map(|r| r.id).collect();
    assert_eq!(listed, ids.iter().rev().copied().collect::<Vec<_>>());
}

#[test]
fn a_foreign_database_is_refused_and_untouched() {
    let dir = TempDir::new("foreign");
    let path = dir.file("other.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE foo (x INTEGER); INSERT INTO foo VALUES (1);
             CREATE TABLE bar (y TEXT);",
        )
        .unwrap();
    }
    let before = fs::read(&path).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotVirtperf { .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "{} is not a virtperf database (it has tables: bar, foo): choose another file with --db",
            path.display()
        )
    );
    assert_eq!(fs::read(&path).unwrap(), before);
    let mut names: Vec<_> = fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["other.db"],
        "no journal or other file left beside it"
    );
}

#[test]
fn a_foreign_meta_table_is_not_mistaken_for_ours() {
    let dir = TempDir::new("foreignmeta");
    let path = dir.file("other.db");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "CREATE TABLE meta (name TEXT, data BLOB); INSERT INTO meta VALUES ('app', 'x');
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let before = fs::read(&path).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::NotVirtperf { .. }), "{e:?}");
    assert_one_line(&e);
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn a_garbage_file_is_corrupt_and_untouched() {
    let dir = TempDir::new("garbage");
    let path = dir.file("results.db");
    let garbage = "hello world".repeat(100);
    fs::write(&path, &garbage).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!(
            "{} is corrupt or not an SQLite file (file is not a database",
            path.display()
        )),
        "{msg}"
    );
    assert!(
        msg.ends_with("move it aside or choose another --db"),
        "{msg}"
    );
    assert_eq!(fs::read(&path).unwrap(), garbage.as_bytes());
}

#[test]
fn a_damaged_sqlite_file_is_corrupt_and_untouched() {
    // A valid header followed by rubbish: only SQLite itself can tell.
    let dir = TempDir::new("damaged");
    let path = dir.file("results.db");
    let mut bytes = b"SQLite format 3\0".to_vec();
    bytes.extend("hello world".repeat(500).as_bytes());
    fs::write(&path, &bytes).unwrap();
    let e = Store::open(&path).unwrap_err();
    assert!(matches!(e, StoreError::Corrupt { .. }), "{e:?}");
    assert_one_line(&e);
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_newer_schema_is_too_new() {
    let dir = TempDir::new("toonew");
    let path = dir.file("results.db");
    drop(Store::open(&path).unwrap());
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let before = fs::read(&path).unwrap();
    let e = Store::open(&path).unwrap_err();
    match &e {
        StoreError::TooNew {
            found, supported, ..
        } => assert_eq!((*found, *supported), (99, virtperf_store::SCHEMA_VERSION)),
        other => panic!("expected TooNew, got {other:?}"),
    }
    assert_one_line(&e);
    assert!(e.to_string().contains("upgrade virtperf"), "{e}");
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn a_running_run_whose_process_died_reads_incomplete() {
    let dir = TempDir::new("deadpid");
    let mut store = Store::open(&dir.file("results.db")).unwrap();
    let mut child = Command::new("true").spawn().unwrap();
    let dead_pid = child.id();
    child.wait().unwrap();

    let dead = store
        .begin_run(&NewRun {
            pid: dead_pid,
            ..new_run("killed")
        })
        .unwrap();
    let row = store.run(dead).unwrap();
    assert_eq!(row.status, RunStatus::Running);
    assert_eq!(row.effective_status(), RunStatus::Incomplete);

    // On another host the pid means nothing: the recorded status stands.
    let remote = store
        .begin_run(&NewRun {
            pid: dead_pid,
            host: format!("{}-elsewhere", this_host()),
            ..new_run("remote")
        })
        .unwrap();
    assert_eq!(
        store.run(remote).unwrap().effective_status(),
        RunStatus::Running
    );
}

#[test]
fn two_handles_write_one_file_concurrently() {
    let dir = TempDir::new("concurrent");
    let path = dir.file("results.db");
    let run = Store::open(&path)
        .unwrap()
        .begin_run(&new_run("shared"))
        .unwrap();
    const PER_WRITER: u32 = 40;
    let writers: Vec<_> = (0..2u32)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut store = Store::open(&path).unwrap();
                for i in 0..PER_WRITER {
                    let seq = w * PER_WRITER + i;
                    store.add_trial(run, &ok_trial(seq)).unwrap();
                    // A reader in the same loop takes shared locks between the writes.
                    assert!(store.run(run).unwrap().trials_ok > i);
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = Store::open(&path).unwrap();
    let seqs: Vec<u32> = store.trials(run).unwrap().iter().map(|t| t.seq).collect();
    assert_eq!(seqs, (0..2 * PER_WRITER).collect::<Vec<_>>());
    assert_eq!(store.run(run).unwrap().trials_ok, 2 * PER_WRITER);
}

#[test]
fn four_handles_creating_one_file_at_once_all_succeed() {
    let dir = TempDir::new("race");
    let path = dir.file("results.db");
    let openers: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut s = Store::open(&path).unwrap();
                s.begin_run(&new_run("x")).unwrap()
            })
        })
        .collect();
    let mut ids: Vec<i64> = openers.into_iter().map(|h| h.join().unwrap()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 4);
    assert_eq!(user_version(&path), virtperf_store::SCHEMA_VERSION);
}

#[test]
fn a_result_json_cannot_hold_is_refused_at_write_time() {
    let dir = TempDir::new("nan");
    let mut store = Store::open(&dir.file("results.db")).unwrap();
    let run = store.begin_run(&new_run("nan")).unwrap();
    let mut t = ok_trial(1);
    if let Some(r) = t.result.as_mut() {
        r.duration_s = f64::NAN;
    }
    let e = store.add_trial(run, &t).unwrap_err();
    assert!(matches!(e, StoreError::Json(_)), "{e:?}");
    assert_one_line(&e);
    // Nothing half-written: the run is still readable and empty.
    assert!(store.trials(run).unwrap().is_empty());
}

/// A second connection to `path` holding an open read transaction, as a notebook or the
/// `sqlite3` shell does between two queries.
fn hold_read(path: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch("BEGIN").unwrap();
    let n: i64 = c
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    c
}

/// A second connection to `path` holding the write lock (`BEGIN IMMEDIATE`).
fn hold_write(path: &Path) -> rusqlite::Connection {
    let c = rusqlite::Connection::open(path).unwrap();
    c.execute_batch("BEGIN IMMEDIATE").unwrap();
    c
}

#[test]
fn an_open_read_transaction_does_not_block_the_writer() {
    let dir = TempDir::new("reader");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    // Nothing may wait for the reader: a writer that had to would fail after 100 ms.
    store.set_busy_timeout(Duration::from_millis(100)).unwrap();
    let reader = hold_read(&path);
    let run = store.begin_run(&new_run("under a reader")).unwrap();
    for seq in 1..=3 {
        store.add_trial(run, &ok_trial(seq)).unwrap();
    }
    store.finish_run(run, RunStatus::Complete).unwrap();
    // The reader still sees its snapshot; a new reader sees everything.
    let n: i64 = reader
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 0);
    let other = Store::open_read_only(&path).unwrap();
    assert_eq!(other.run(run).unwrap().trials_ok, 3);
    assert_eq!(other.run(run).unwrap().status, RunStatus::Complete);
}

#[test]
fn begin_run_reports_a_failed_commit_not_a_missing_run() {
    let dir = TempDir::new("commit");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    // A deferred foreign key makes the run's insert fail at commit, after the INSERT …
    // RETURNING statement has already produced an id: the error must surface there, not as
    // "run N not found" at the next write.
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE audit (run INTEGER REFERENCES runs (id) DEFERRABLE INITIALLY DEFERRED);
             CREATE TRIGGER audit_runs AFTER INSERT ON runs BEGIN INSERT INTO audit VALUES (-1); END;",
        )
        .unwrap();
    let e = store.begin_run(&new_run("doomed")).unwrap_err();
    assert!(matches!(e, StoreError::Sqlite(_)), "{e:?}");
    assert!(
        e.to_string().contains("FOREIGN KEY constraint failed"),
        "{e}"
    );
    assert_one_line(&e);
    assert!(store.runs().unwrap().is_empty());
}

#[test]
fn a_trial_the_database_refuses_is_kept_beside_it_then_imported_once() {
    let dir = TempDir::new("keep");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&new_run("kept")).unwrap();
    store.set_busy_timeout(Duration::from_millis(50)).unwrap();
    let trial = ok_trial(1);
    let writer = hold_write(&path);
    let side = match store.add_trial_or_keep(run, &trial).unwrap() {
        Saved::Kept { side_file, error } => {
            assert!(error.to_string().contains("database is locked"), "{error}");
            assert_one_line(&error);
            side_file
        }
        Saved::Stored => panic!("stored although the database was locked"),
    };
    assert_eq!(side, dir.file("results.db.unsaved.jsonl"));
    assert!(matches!(
        store
            .finish_run_or_keep(run, RunStatus::Incomplete)
            .unwrap(),
        Saved::Kept { .. }
    ));
    assert_eq!(store.unsaved_pending(), Some((side.clone(), 2)));
    assert!(store.trials(run).unwrap().is_empty());
    drop(writer);

    let kept = fs::read(&side).unwrap();
    let done = store.import_unsaved().unwrap().unwrap();
    assert_eq!((done.trials, done.finishes, done.left), (1, 1, 0));
    assert!(!side.exists(), "side file removed after import");
    let rows = store.trials(run).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].trial, trial, "the trial comes back exactly");
    let row = store.run(run).unwrap();
    assert_eq!(row.status, RunStatus::Incomplete);
    assert!(row.finished_at.is_some());
    assert_eq!(store.import_unsaved().unwrap(), None);
    assert_eq!(store.unsaved_pending(), None);

    // An import that committed but died before removing the file runs again harmlessly.
    fs::write(&side, &kept).unwrap();
    let again = store.import_unsaved().unwrap().unwrap();
    assert_eq!(again.trials, 1);
    assert_eq!(store.trials(run).unwrap().len(), 1, "not stored twice");
    assert!(!side.exists());
}

/// Issue 40 §10: a whole run measured before the database could be written (a workload's
/// `--store`) is kept whole in the side file when the database stays locked past the
/// wait, then imported once: nothing measured is lost (it used to be: the run was never
/// begun, and nothing was written anywhere).
#[test]
fn a_run_the_database_will_not_begin_is_kept_whole_then_imported_once() {
    let dir = TempDir::new("keep-run");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    store.set_busy_timeout(Duration::from_millis(50)).unwrap();
    let trial = ok_trial(1);
    let writer = hold_write(&path);
    let (id, saved) = store
        .store_run_or_keep(
            &new_run("locked out"),
            std::slice::from_ref(&trial),
            RunStatus::Complete,
        )
        .unwrap();
    assert_eq!(id, None);
    let side = match saved {
        Saved::Kept { side_file, error } => {
            assert!(error.to_string().contains("database is locked"), "{error}");
            side_file
        }
        Saved::Stored => panic!("stored although the database was locked"),
    };
    assert!(store.runs().unwrap().is_empty());
    drop(writer);
    let kept = fs::read(&side).unwrap();
    let done = store.import_unsaved().unwrap().unwrap();
    assert_eq!((done.runs, done.trials, done.left), (1, 0, 0));
    let runs = store.runs().unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].name, "locked out");
    assert_eq!(runs[0].status, RunStatus::Complete);
    let rows = store.trials(runs[0].id).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].trial, trial, "the trial comes back exactly");
    // Imported again (an import that died before removing the file): still one run.
    fs::write(&side, &kept).unwrap();
    store.import_unsaved().unwrap();
    assert_eq!(store.runs().unwrap().len(), 1, "not stored twice");
    // Unlocked, the same call stores the run at once.
    let (id, saved) = store
        .store_run_or_keep(&new_run("free"), &[ok_trial(1)], RunStatus::Complete)
        .unwrap();
    assert!(matches!(saved, Saved::Stored) && id.is_some());
}

#[test]
fn side_file_lines_that_cannot_be_imported_stay_in_it() {
    let dir = TempDir::new("leftover");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    let side = dir.file("results.db.unsaved.jsonl");
    let foreign = json!({"kind": "trial", "run_id": 999, "trial": ok_trial(1)}).to_string();
    let garbage = "{\"kind\": \"from the future\"}".to_string();
    fs::write(&side, format!("{foreign}\n{garbage}\n")).unwrap();
    let done = store.import_unsaved().unwrap().unwrap();
    assert_eq!((done.trials, done.finishes, done.left), (0, 0, 2));
    let left = fs::read_to_string(&side).unwrap();
    let mut lines: Vec<&str> = left.lines().collect();
    lines.sort();
    let mut want = vec![foreign.as_str(), garbage.as_str()];
    want.sort();
    assert_eq!(lines, want);
}

#[test]
fn a_trial_that_cannot_be_kept_either_is_an_error_naming_both_files() {
    let dir = TempDir::new("nokeep");
    let path = dir.file("results.db");
    let mut store = Store::open(&path).unwrap();
    let run = store.begin_run(&new_run("nowhere")).unwrap();
    store.set_busy_timeout(Duration::from_millis(50)).unwrap();
    // A directory where the side file would go: no file can be created there, root or not.
    fs::create_dir(dir.file("results.db.unsaved.jsonl")).unwrap();
    let _writer = hold_write(&path);
    let e = store.add_trial_or_keep(run, &ok_trial(1)).unwrap_err();
    assert!(matches!(e, StoreError::Unsaved { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("database is locked") && msg.contains("results.db.unsaved.jsonl"),
        "{msg}"
    );
    assert_one_line(&e);
}

#[test]
fn readers_open_read_only_and_refuse_what_writers_refuse() {
    let dir = TempDir::new("readonly");
    let path = dir.file("results.db");
    let run = Store::open(&path)
        .unwrap()
        .begin_run(&new_run("read me"))
        .unwrap();
    // A writer holding the lock does not keep a reader out.
    let _writer = hold_write(&path);
    let mut reader = Store::open_read_only(&path).unwrap();
    assert_eq!(reader.run(run).unwrap().name, "read me");
    let e = reader.begin_run(&new_run("no")).unwrap_err();
    assert!(e.to_string().contains("readonly"), "{e}");

    let foreign = dir.file("other.db");
    rusqlite::Connection::open(&foreign)
        .unwrap()
        .execute_batch("CREATE TABLE foo (x INTEGER)")
        .unwrap();
    let before = fs::read(&foreign).unwrap();
    let e = Store::open_read_only(&foreign).unwrap_err();
    assert!(matches!(e, StoreError::NotVirtperf { .. }), "{e:?}");
    assert_eq!(fs::read(&foreign).unwrap(), before);
    assert!(!dir.file("other.db-wal").exists());

    // A missing file is an error that says so, and nothing is created: not the file, not
    // its directory (a reader with a mistyped --db used to leave an empty database behind).
    let fresh = dir.file("sub/new.db");
    let e = Store::open_read_only(&fresh).unwrap_err();
    assert!(matches!(e, StoreError::Missing { .. }), "{e:?}");
    assert!(e.to_string().contains("does not exist"), "{e}");
    assert!(e.to_string().contains("virtperf run"), "{e}");
    assert!(!dir.file("sub").exists());
    let here = dir.file("missing.db");
    assert!(Store::open_read_only(&here).is_err());
    assert!(!here.exists() && !dir.file("missing.db-wal").exists());

    // An empty file exists (`touch results.db`, or a writer creating it): it is initialised.
    let empty = dir.file("empty.db");
    fs::write(&empty, b"").unwrap();
    assert!(Store::open_read_only(&empty)
        .unwrap()
        .runs()
        .unwrap()
        .is_empty());
    assert_eq!(user_version(&empty), virtperf_store::SCHEMA_VERSION);
}

/// What schema version 4 added (stable run ids), to roll a file back to an older version.
const UNDO_4: &str =
    "DROP INDEX runs_uid; DROP INDEX runs_host_started_at; ALTER TABLE runs DROP COLUMN uid;";

/// What schema version 5 added (run tags).
const UNDO_5: &str = "DROP TABLE run_tags;";

/// Tags are stored with a run, read back with it, select runs (every tag given must match,
/// exactly), are copied by push, and a version 4 file (before tags) is migrated with its
/// runs intact and untagged.
#[test]
fn tags_round_trip_filter_push_and_version_4_files_are_migrated() {
    let dir = TempDir::new("tags");
    let path = dir.file("r.db");
    let old = {
        let mut s = Store::open(&path).unwrap();
        let id = s.begin_run(&new_run("before tags")).unwrap();
        s.finish_run(id, RunStatus::Complete).unwrap();
        id
    };
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(&format!("{UNDO_5} PRAGMA user_version = 4;"))
        .unwrap();
    let mut s = Store::open(&path).unwrap();
    assert_eq!(user_version(&path), virtperf_store::SCHEMA_VERSION);
    assert!(s.run(old).unwrap().tags.is_empty());
    let tagged = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<virtperf_store::Tags>()
    };
    let a = s
        .begin_run(&NewRun {
            tags: tagged(&[("campaign", "c1"), ("group", "amd"), ("host", "h1")]),
            ..new_run("a")
        })
        .unwrap();
    let b = s
        .begin_run(&NewRun {
            tags: tagged(&[("campaign", "c1"), ("group", "intel"), ("host", "h2")]),
            ..new_run("b")
        })
        .unwrap();
    for id in [a, b] {
        s.finish_run(id, RunStatus::Complete).unwrap();
    }
    assert_eq!(s.run(a).unwrap().tags.get("group").unwrap(), "amd");
    let ids = |f: &virtperf_store::RunFilter| {
        s.runs_where(f)
            .unwrap()
            .iter()
            .map(|r| r.id)
            .collect::<Vec<_>>()
    };
    let by = |pairs: &[(&str, &str)]| virtperf_store::RunFilter {
        tags: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..Default::default()
    };
    assert_eq!(ids(&by(&[("campaign", "c1")])), vec![b, a]);
    assert_eq!(ids(&by(&[("campaign", "c1"), ("group", "amd")])), vec![a]);
    assert!(ids(&by(&[("campaign", "c1"), ("group", "arm")])).is_empty());
    // A value is matched whole, not as a prefix or pattern.
    assert!(ids(&by(&[("campaign", "c")])).is_empty());
    assert!(ids(&by(&[("campaign", "%")])).is_empty());
    let mut other = Store::open(&dir.file("other.db")).unwrap();
    let pushed = s.push_run(b, &mut other).unwrap();
    assert_eq!(
        other.run(pushed.to_id).unwrap().tags,
        s.run(b).unwrap().tags
    );
}
