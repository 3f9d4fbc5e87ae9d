//! Capture analyses in the store, and the migration that added them.

use virtperf_store::{CaptureConn, NewCapture, Store};

#[test]
fn captures_round_trip_and_version_1_files_are_migrated() {
    let dir = std::env::temp_dir().join(format!("vp-store-cap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("r.db");
    // A file as schema version 1 left it: open with the current code after rolling the
    // version back by hand and dropping what later versions added.
    {
        let _ = Store::open(&path).unwrap();
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(
            "DROP TABLE run_tags; DROP INDEX runs_uid; DROP INDEX runs_host_started_at; ALTER TABLE runs DROP COLUMN uid;
             DROP TABLE capture_connections; DROP TABLE captures;
             ALTER TABLE trials DROP COLUMN detail_json; PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let mut s = Store::open(&path).unwrap();
    let id = s
        .add_capture(&NewCapture {
            path: "x.pcap".into(),
            summary: serde_json::json!({"packets": 10}),
            connections: vec![
                CaptureConn {
                    a: "10.0.6.2:1028".into(),
                    b: "10.0.6.1:8000".into(),
                    duration_s: 19.5,
                    bytes: 104_783_153,
                    detail: serde_json::json!({"id": 1}),
                },
                CaptureConn {
                    a: "10.0.6.2:1029".into(),
                    b: "10.0.6.1:8000".into(),
                    duration_s: 1.0,
                    bytes: 1,
                    detail: serde_json::json!({"id": 2}),
                },
            ],
        })
        .unwrap();
    let rows = s.captures().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].id, id);
    assert_eq!(rows[0].path, "x.pcap");
    assert_eq!(rows[0].connections, 2);
    let v: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, virtperf_store::SCHEMA_VERSION);
    std::fs::remove_dir_all(&dir).unwrap();
}
