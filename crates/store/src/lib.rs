//! The results store: one SQLite file (the default) or a team's PostgreSQL database
//! (`--db postgres://…`, see [`Location`]) that keeps every benchmark run, its trials (with the
//! full [`TestResult`](virtperf_wire::TestResult) JSON, HDR histogram included), and the
//! tuning knobs it changed.
//!
//! The store knows nothing of sockets or of how trials are produced; it is written to by the
//! orchestrator one trial at a time (so a run killed half-way keeps what it measured) and
//! read by the report and the CLI.
//!
//! Safety of other people's files comes first: [`Store::open`] only ever writes to a file
//! that is empty, missing, or already marked as virtperf's by a `meta` row. Anything else is
//! refused with an error that says what the file is and how to pick another one, and the file
//! is left byte-for-byte as it was.
//!
//! Readers never break a running experiment: the file is in WAL mode, so a reader (a
//! notebook, `sqlite3`, `virtperf show` in a loop) holding a read transaction open does not
//! block the writer, writers wait patiently for each other ([`BUSY_TIMEOUT`]), and a record
//! the database still refuses after that is kept in a side file
//! (`<db>.unsaved.jsonl`) until [`Store::import_unsaved`] moves it in.
//!
//! The code is split by what it stores, one module each: `runs`, `trials`, `knobs`,
//! `captures`, `tags`. `open` decides whether a file may be written at all and brings its schema up
//! to date; `keep` holds the writes that fall back to the side file (`unsaved`).

#![warn(missing_docs)]

mod captures;
mod db;
mod error;
mod handle;
mod keep;
mod knobs;
mod open;
mod pg;
mod pg_connect;
mod push;
mod runs;
mod schema;
mod tags;
mod tls;
mod trials;
mod unsaved;

pub use captures::{CaptureConn, CaptureRow, NewCapture};
pub use error::StoreError;
pub(crate) use handle::to_json_checked;
pub use handle::{Store, BUSY_TIMEOUT, SCHEMA_VERSION};
pub use keep::{Imported, Saved};
pub use knobs::KnobRecord;
pub use pg::Location;
pub use push::Pushed;
pub use runs::{NewRun, RunFilter, RunRow, RunStatus};
pub use tags::{parse_tag, parse_tag_list, Tags};
pub use trials::{NewTrial, TrialRow, TrialStatus};
pub use virtperf_wire::redact_url;
pub use virtperf_wire::time::{now_rfc3339, parse_rfc3339, rfc3339_ago};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_serde_names() {
        for s in [
            RunStatus::Running,
            RunStatus::Complete,
            RunStatus::Incomplete,
            RunStatus::Failed,
        ] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(RunStatus::parse(s.as_str()), Some(s));
        }
        for s in [TrialStatus::Ok, TrialStatus::Failed, TrialStatus::Skipped] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.as_str()));
            assert_eq!(TrialStatus::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn migration_one_writes_the_marker_row() {
        let m = schema::MIGRATIONS[0];
        assert!(m.contains(&format!(
            "VALUES ('{}', '{}')",
            schema::APP_KEY,
            schema::APP_VALUE
        )));
    }
}
