//! The side file of records the database would not take: `<db>.unsaved.jsonl`, one JSON
//! object a line, next to the database.
//!
//! A measured trial is minutes of someone's machine time; when SQLite still refuses it after
//! the busy handler and the retries (a lock held for minutes, a full disk, a file made
//! read-only under us), it is appended here instead of being lost, and
//! [`Store::import_unsaved`](crate::Store::import_unsaved) moves it into the database later.
//!
//! Writers append and the importer reads and removes, possibly from different processes at
//! once, so both hold an exclusive `flock` on the file while they touch it. A writer that
//! waited for the lock checks that the path still names the file it locked: if the importer
//! removed it meanwhile, the writer starts a new file rather than appending to a removed one.
//! (`File::lock` would do, but it needs Rust 1.89 and the workspace supports 1.88.)

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{NewRun, NewTrial, RunStatus};

/// One record the database did not take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Pending {
    /// A trial of run `run_id`, exactly as it was given to `add_trial`.
    Trial {
        /// The run it belongs to.
        run_id: i64,
        /// The trial.
        trial: Box<NewTrial>,
    },
    /// A whole run the database would not begin: the run, its trials and how it ended.
    /// `uid` is its stable id, so importing it twice stores it once.
    Run {
        /// The run's stable id.
        uid: String,
        /// When it started.
        started_at: String,
        /// The run.
        run: Box<NewRun>,
        /// Its trials, in order.
        trials: Vec<NewTrial>,
        /// How it ended, and when.
        status: RunStatus,
        /// When it ended.
        finished_at: Option<String>,
    },
    /// How run `run_id` ended, as given to `finish_run`, and when.
    Finish {
        /// The run.
        run_id: i64,
        /// Its final status.
        status: RunStatus,
        /// When it was finished; `None` for `Running`.
        finished_at: Option<String>,
    },
}

/// The side file of the database at `db`: the same path with `.unsaved.jsonl` appended.
pub(crate) fn side_path(db: &Path) -> PathBuf {
    let mut s = OsString::from(db.as_os_str());
    s.push(".unsaved.jsonl");
    PathBuf::from(s)
}

/// An open side file under an exclusive `flock`, released when dropped (closing the file).
struct Locked(File);

/// Takes an exclusive lock on `f`, waiting for other holders.
fn lock(f: File) -> io::Result<Locked> {
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
    Ok(Locked(f))
}

/// True if `path` still names the file `f` is open on (not removed or replaced by an import
/// that held the lock before us).
fn still_named(f: &File, path: &Path) -> io::Result<bool> {
    let ours = f.metadata()?;
    match fs::metadata(path) {
        Ok(m) => Ok(m.dev() == ours.dev() && m.ino() == ours.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Appends `p` as one line to `path` and syncs it to disk.
pub(crate) fn append(path: &Path, p: &Pending) -> io::Result<()> {
    let mut line = serde_json::to_string(p).map_err(io::Error::other)?;
    line.push('\n');
    // A few rounds at most: each retry means an import removed the file in between.
    for _ in 0..10 {
        let f = OpenOptions::new().create(true).append(true).open(path)?;
        let mut locked = lock(f)?;
        if !still_named(&locked.0, path)? {
            continue;
        }
        locked.0.write_all(line.as_bytes())?;
        locked.0.sync_data()?;
        return Ok(());
    }
    Err(io::Error::other(
        "the file kept being replaced while appending",
    ))
}

/// A side file opened and locked for import.
pub(crate) struct Import {
    locked: Locked,
    path: PathBuf,
}

/// The lines of a side file that parse, in order, and the raw lines that do not.
pub(crate) struct Contents {
    /// Records to import.
    pub(crate) records: Vec<(String, Pending)>,
    /// Lines that are not a record this version knows; kept in the file, never dropped.
    pub(crate) unreadable: Vec<String>,
}

impl Import {
    /// Opens and locks the side file at `path`; `None` if there is none.
    pub(crate) fn open(path: &Path) -> io::Result<Option<Import>> {
        for _ in 0..10 {
            let f = match OpenOptions::new().read(true).write(true).open(path) {
                Ok(f) => f,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            };
            let locked = lock(f)?;
            if still_named(&locked.0, path)? {
                return Ok(Some(Import {
                    locked,
                    path: path.to_path_buf(),
                }));
            }
        }
        Err(io::Error::other(
            "the file kept being replaced while importing",
        ))
    }

    /// Every line of the file.
    pub(crate) fn read(&mut self) -> io::Result<Contents> {
        let mut text = String::new();
        self.locked.0.seek(SeekFrom::Start(0))?;
        self.locked.0.read_to_string(&mut text)?;
        let mut c = Contents {
            records: Vec::new(),
            unreadable: Vec::new(),
        };
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Pending>(line) {
                Ok(p) => c.records.push((line.to_string(), p)),
                Err(_) => c.unreadable.push(line.to_string()),
            }
        }
        Ok(c)
    }

    /// Leaves only `keep` in the file, or removes it when `keep` is empty. Called with the
    /// lock still held, after the imported records were committed: a crash before this
    /// leaves them in the file, and importing them again skips what is already stored.
    pub(crate) fn finish(self, keep: &[String]) -> io::Result<()> {
        if keep.is_empty() {
            return fs::remove_file(&self.path);
        }
        let mut f = self.locked.0;
        f.set_len(0)?;
        f.seek(SeekFrom::Start(0))?;
        for line in keep {
            f.write_all(line.as_bytes())?;
            f.write_all(b"\n")?;
        }
        f.sync_data()
    }
}

/// How many records wait in the side file at `path` (0 if there is none). Reads without
/// locking: a count for a note, not for import.
pub(crate) fn count(path: &Path) -> usize {
    fs::read_to_string(path)
        .map(|t| t.lines().filter(|l| !l.trim().is_empty()).count())
        .unwrap_or(0)
}
