//! The store on both backends: a real SQLite file and a real PostgreSQL server started by
//! the test (skipped, with the reason, where PostgreSQL is not installed).

mod common;
mod pgserver;

use std::path::PathBuf;

use common::*;
use virtperf_store::{
    rfc3339_ago, KnobRecord, Location, RunFilter, RunStatus, Saved, Store, StoreError,
};

/// Opens the PostgreSQL database `url` keeping refused records in `dir`.
fn open_pg(url: &str, dir: &std::path::Path) -> Store {
    Store::open_at(&Location::Postgres {
        url: url.to_string(),
        side_file: dir.join("pg.unsaved.jsonl"),
    })
    .unwrap()
}

/// Writes one experiment the way the runner does and reads everything back: the run with
/// its counts and environment, the trials (the whole result, histogram included), the
/// knobs, and the filtered run list.
fn experiment_round_trip(s: &mut Store) -> (virtperf_store::RunRow, Vec<virtperf_store::TrialRow>) {
    let id = s.begin_run(&new_run("sweep")).unwrap();
    s.set_knobs(
        id,
        &[KnobRecord {
            config: "tuned".into(),
            name: "net.core.busy_poll".into(),
            original: Some("0".into()),
            applied: "50".into(),
        }],
    )
    .unwrap();
    s.add_trial(id, &ok_trial(1)).unwrap();
    s.add_trial(id, &failed_trial(2)).unwrap();
    s.finish_run(id, RunStatus::Incomplete).unwrap();
    let row = s.run(id).unwrap();
    assert_eq!(
        (row.trials_ok, row.trials_failed, row.status),
        (1, 1, RunStatus::Incomplete)
    );
    assert_eq!(row.env.kernel, "6.1.0");
    assert_eq!(row.uid.len(), 36, "{}", row.uid);
    let trials = s.trials(id).unwrap();
    assert_eq!(trials.len(), 2);
    assert_eq!(
        trials[0].trial,
        ok_trial(1).with_time(&trials[0].started_at)
    );
    // The HDR histogram travels inside the result, byte for byte.
    assert!(serde_json::to_string(&trials[0].result)
        .unwrap()
        .contains("HISTFAAAACR4nJNpmSzMwMDAwgABzFCaEUrzMEAEmZQAAKdpBZE="));
    assert_eq!(s.knobs(id).unwrap()[0].applied, "50");
    // Setting a knob again keeps the first original, as on SQLite.
    s.set_knobs(
        id,
        &[KnobRecord {
            config: "tuned".into(),
            name: "net.core.busy_poll".into(),
            original: Some("50".into()),
            applied: "0".into(),
        }],
    )
    .unwrap();
    assert_eq!(s.knobs(id).unwrap()[0].original.as_deref(), Some("0"));
    // The cross-run queries: by host and age.
    let host = RunFilter {
        host: Some(this_host()),
        since: Some(rfc3339_ago(std::time::Duration::from_secs(30 * 86_400))),
        ..RunFilter::default()
    };
    assert_eq!(s.runs_where(&host).unwrap().len(), 1);
    let other = RunFilter {
        host: Some("elsewhere".into()),
        ..RunFilter::default()
    };
    assert!(s.runs_where(&other).unwrap().is_empty());
    let future = RunFilter {
        since: Some("2999-01-01T00:00:00.000Z".into()),
        ..RunFilter::default()
    };
    assert!(s.runs_where(&future).unwrap().is_empty());
    match s.run(id + 100).unwrap_err() {
        StoreError::NotFound(m) => assert!(m.contains("virtperf runs"), "{m}"),
        e => panic!("{e:?}"),
    }
    (row, trials)
}

trait WithTime {
    fn with_time(self, t: &str) -> Self;
}
impl WithTime for virtperf_store::NewTrial {
    fn with_time(mut self, t: &str) -> Self {
        self.started_at = t.to_string();
        self
    }
}

#[test]
fn an_experiment_reads_back_the_same_from_sqlite_and_postgres() {
    let pg = pg_or_skip!();
    let dir = TempDir::new("both");
    let mut lite = Store::open(&dir.file("r.db")).unwrap();
    let (lr, lt) = experiment_round_trip(&mut lite);
    let url = pg.create_db("both");
    let mut team = open_pg(&url, &dir.0);
    assert!(team.is_postgres());
    assert!(
        !team
            .path()
            .display()
            .to_string()
            .contains(pgserver::PASSWORD),
        "{}",
        team.path().display()
    );
    let (pr, pt) = experiment_round_trip(&mut team);
    // Everything but the ids, stable id and times is the same on both backends.
    let strip = |mut r: virtperf_store::RunRow| {
        r.id = 0;
        r.uid.clear();
        r.started_at.clear();
        r.finished_at = None;
        r
    };
    assert_eq!(strip(lr), strip(pr));
    let strip_t = |t: &[virtperf_store::TrialRow]| -> Vec<_> {
        t.iter().map(|t| t.trial.clone().with_time("")).collect()
    };
    assert_eq!(strip_t(&lt), strip_t(&pt));
    // Opening again finds the schema in place (no second migration, no error).
    drop(team);
    let again = open_pg(&url, &dir.0);
    assert_eq!(again.runs().unwrap().len(), 1);
}

#[test]
fn a_foreign_postgres_database_is_refused_and_untouched() {
    let pg = pg_or_skip!();
    let dir = TempDir::new("foreign");
    let url = pg.create_db("theirs");
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute("CREATE TABLE accounts (id int); INSERT INTO accounts VALUES (1);")
        .unwrap();
    let e = Store::open_at(&Location::Postgres {
        url: url.clone(),
        side_file: dir.file("x"),
    })
    .unwrap_err();
    assert!(matches!(e, StoreError::NotVirtperf { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.contains("accounts") && !msg.contains(pgserver::PASSWORD),
        "{msg}"
    );
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(n, 1, "the foreign database gained tables");
}

#[test]
fn a_wrong_password_says_where_passwords_come_from() {
    let pg = pg_or_skip!();
    pg.create_db("pw");
    let url = format!("postgres://virtperf:wrong@127.0.0.1:{}/pw", pg.port);
    let e = Store::open_at(&Location::parse(&url)).unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("PGPASSWORD") && !msg.contains("wrong@"),
        "{msg}"
    );
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn pushing_the_same_run_twice_stores_it_once() {
    let pg = pg_or_skip!();
    let dir = TempDir::new("push");
    let mut local = Store::open(&dir.file("guest.db")).unwrap();
    let tags: virtperf_store::Tags = [("campaign", "c9"), ("host", "guest-1")]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let id = local
        .begin_run(&virtperf_store::NewRun {
            tags: tags.clone(),
            ..new_run("sweep")
        })
        .unwrap();
    local
        .set_knobs(
            id,
            &[KnobRecord {
                config: "base".into(),
                name: "kvm.halt_poll_ns".into(),
                original: None,
                applied: "0".into(),
            }],
        )
        .unwrap();
    local.add_trial(id, &ok_trial(1)).unwrap();
    local.add_trial(id, &failed_trial(2)).unwrap();
    local.finish_run(id, RunStatus::Complete).unwrap();
    let running = local.begin_run(&new_run("still going")).unwrap();

    let url = pg.create_db("team");
    let mut team = open_pg(&url, &dir.0);
    let first = local.push_run(id, &mut team).unwrap();
    assert!(first.created);
    assert_eq!(first.trials, 2);
    let second = local.push_run(id, &mut team).unwrap();
    assert!(!second.created, "{second:?}");
    assert_eq!(second.to_id, first.to_id);
    assert_eq!(team.runs().unwrap().len(), 1);
    let pushed = team.run(first.to_id).unwrap();
    let orig = local.run(id).unwrap();
    assert_eq!(pushed.uid, orig.uid);
    assert_eq!(
        (
            pushed.started_at.as_str(),
            pushed.finished_at.as_ref(),
            pushed.status
        ),
        (
            orig.started_at.as_str(),
            orig.finished_at.as_ref(),
            orig.status
        )
    );
    assert_eq!(pushed.env, orig.env);
    // Tags travel with the run and select it in PostgreSQL as in SQLite.
    assert_eq!(pushed.tags, tags);
    let by_campaign = |c: &str| RunFilter {
        tags: vec![("campaign".into(), c.into())],
        ..Default::default()
    };
    assert_eq!(team.runs_where(&by_campaign("c9")).unwrap().len(), 1);
    assert!(team.runs_where(&by_campaign("c8")).unwrap().is_empty());
    let lt = local.trials(id).unwrap();
    let pt = team.trials(first.to_id).unwrap();
    assert_eq!(
        lt.iter().map(|t| &t.trial).collect::<Vec<_>>(),
        pt.iter().map(|t| &t.trial).collect::<Vec<_>>()
    );
    assert_eq!(team.knobs(first.to_id).unwrap(), local.knobs(id).unwrap());
    // A run still being written is refused: its later trials would never follow.
    let e = local.push_run(running, &mut team).unwrap_err();
    assert!(e.to_string().contains("still running"), "{e}");
    assert_eq!(team.runs().unwrap().len(), 1);
    // Pushing into a second SQLite file works the same (one code path for both).
    let mut other = Store::open(&dir.file("other.db")).unwrap();
    assert!(local.push_run(id, &mut other).unwrap().created);
    assert!(!local.push_run(id, &mut other).unwrap().created);
}

#[test]
fn four_concurrent_writers_store_every_trial() {
    let pg = pg_or_skip!();
    let dir = TempDir::new("four");
    // A new, empty database: the four also race to create the schema.
    let url = pg.create_db("fleet");
    const TRIALS: u32 = 30;
    let side: PathBuf = dir.0.clone();
    let handles: Vec<_> = (0..4)
        .map(|w| {
            let url = url.clone();
            let side = side.clone();
            std::thread::spawn(move || {
                let mut s = Store::open_at(&Location::Postgres {
                    url,
                    side_file: side.join(format!("w{w}.jsonl")),
                })
                .unwrap();
                let id = s.begin_run(&new_run(&format!("writer {w}"))).unwrap();
                for seq in 1..=TRIALS {
                    match s.add_trial_or_keep(id, &ok_trial(seq)).unwrap() {
                        Saved::Stored => {}
                        Saved::Kept { error, .. } => panic!("writer {w} kept trial {seq}: {error}"),
                    }
                }
                s.finish_run(id, RunStatus::Complete).unwrap();
                id
            })
        })
        .collect();
    let ids: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let s = open_pg(&url, &dir.0);
    let runs = s.runs().unwrap();
    assert_eq!(runs.len(), 4);
    for id in ids {
        let t = s.trials(id).unwrap();
        assert_eq!(t.len(), TRIALS as usize, "run {id}");
        let seqs: Vec<u32> = t.iter().map(|t| t.seq).collect();
        assert_eq!(seqs, (1..=TRIALS).collect::<Vec<_>>());
    }
}

#[test]
fn a_dropped_connection_keeps_the_trial_locally_until_the_next_write() {
    let mut pg = pg_or_skip!();
    let dir = TempDir::new("drop");
    let url = pg.create_db("flaky");
    let side = dir.file("flaky.unsaved.jsonl");
    let loc = Location::Postgres {
        url: url.clone(),
        side_file: side.clone(),
    };
    let mut s = Store::open_at(&loc).unwrap();
    let id = s.begin_run(&new_run("flaky")).unwrap();
    assert!(matches!(
        s.add_trial_or_keep(id, &ok_trial(1)).unwrap(),
        Saved::Stored
    ));
    pg.stop();
    match s.add_trial_or_keep(id, &ok_trial(2)).unwrap() {
        Saved::Kept { side_file, error } => {
            assert_eq!(side_file, side);
            assert!(!error.to_string().contains('\n'), "{error}");
        }
        Saved::Stored => panic!("stored with the server down"),
    }
    assert_eq!(s.unsaved_pending().map(|(_, n)| n), Some(1));
    // The server comes back on the same port: the next writer imports what was kept.
    pg.boot().unwrap();
    let mut s = Store::open_at(&loc).unwrap();
    let imported = s.import_unsaved().unwrap().unwrap();
    assert_eq!((imported.trials, imported.left), (1, 0));
    let seqs: Vec<u32> = s.trials(id).unwrap().iter().map(|t| t.seq).collect();
    assert_eq!(seqs, [1, 2]);
    assert!(!side.exists());
    // A store whose connection dropped reconnects on its own once the server is back.
    pg.stop();
    pg.boot().unwrap();
    assert!(matches!(
        s.add_trial_or_keep(id, &ok_trial(3)).unwrap(),
        Saved::Stored
    ));
}
