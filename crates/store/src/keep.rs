//! Writes that never lose a record: retried, then kept in the side file (`unsaved`), and
//! moved into the database later by [`Store::import_unsaved`].

use std::path::PathBuf;
use std::time::Duration;

use crate::db::vals;
use crate::db::Conn;
use crate::runs::{ensure_run, insert_run, new_uid, not_found, set_finished};
use crate::trials::insert_trial;
use crate::{now_rfc3339, unsaved, NewRun, NewTrial, RunStatus, Store, StoreError};

/// Pauses between the attempts [`Store::add_trial_or_keep`] and [`Store::finish_run_or_keep`]
/// make after a failure (each attempt itself waits up to
/// [`BUSY_TIMEOUT`](crate::BUSY_TIMEOUT) for locks); after the last one the record goes to
/// the side file.
const RETRY_DELAYS: [Duration; 2] = [Duration::from_millis(500), Duration::from_millis(1500)];

/// Where a record given to [`Store::add_trial_or_keep`] or [`Store::finish_run_or_keep`]
/// ended up.
#[derive(Debug)]
pub enum Saved {
    /// In the database.
    Stored,
    /// The database refused it even after retries; it was appended to `side_file`, from
    /// which [`Store::import_unsaved`] moves it into the database later.
    Kept {
        /// The side file, `<db>.unsaved.jsonl`.
        side_file: PathBuf,
        /// Why the database refused it (the last attempt's error).
        error: StoreError,
    },
}

/// What [`Store::import_unsaved`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    /// The side file it read.
    pub side_file: PathBuf,
    /// Trials now in the database (new ones, or found already there from an import that
    /// was interrupted before it could remove the file).
    pub trials: usize,
    /// Run endings applied.
    pub finishes: usize,
    /// Whole runs now in the database (kept whole when the database would not begin them).
    pub runs: usize,
    /// Lines left in the side file: their run is not in this database, or the line is not a
    /// record this version of virtperf reads.
    pub left: usize,
}

impl Store {
    /// A whole run, already measured: begun, its `trials` added and ended with `status`, in
    /// one transaction. Where the database still refuses it after the busy handler and the
    /// retries (a lock held past the wait), the run is kept whole in the side file and
    /// reported as [`Saved::Kept`]; [`Store::import_unsaved`] stores it later (once, by
    /// its stable id). The database id, when it was stored.
    pub fn store_run_or_keep(
        &mut self,
        run: &NewRun,
        trials: &[NewTrial],
        status: RunStatus,
    ) -> Result<(Option<i64>, Saved), StoreError> {
        let (uid, started_at, finished_at) = (new_uid(), now_rfc3339(), now_rfc3339());
        let mut id = None;
        let r = self.with_retries(|s| {
            let stored = s.conn.write_tx(|c| {
                let id = insert_run(c, run, &started_at, &uid)?;
                for t in trials {
                    insert_trial(c, id, t)?;
                }
                set_finished(c, id, status, Some(&finished_at))?;
                Ok(id)
            })?;
            id = Some(stored);
            Ok(())
        });
        let saved = self.keep_on_error(r, || unsaved::Pending::Run {
            uid: uid.clone(),
            started_at: started_at.clone(),
            run: Box::new(run.clone()),
            trials: trials.to_vec(),
            status,
            finished_at: Some(finished_at.clone()),
        })?;
        Ok((id, saved))
    }

    /// [`Store::add_trial`] that never loses the trial: a failure is retried (after the busy
    /// handler's own wait), and a trial the database still refuses is appended to the side
    /// file (`<db>.unsaved.jsonl`) and reported as [`Saved::Kept`].
    ///
    /// Fails only when the trial cannot be kept either ([`StoreError::Unsaved`]), or cannot
    /// be written as JSON at all ([`StoreError::Json`]).
    pub fn add_trial_or_keep(&mut self, run_id: i64, t: &NewTrial) -> Result<Saved, StoreError> {
        let r = self.with_retries(|s| s.add_trial(run_id, t).map(|_| ()));
        self.keep_on_error(r, || unsaved::Pending::Trial {
            run_id,
            trial: Box::new(t.clone()),
        })
    }

    /// [`Store::finish_run`] that never loses the ending: retried, then kept in the side
    /// file like [`Store::add_trial_or_keep`]'s trials.
    pub fn finish_run_or_keep(
        &mut self,
        run_id: i64,
        status: RunStatus,
    ) -> Result<Saved, StoreError> {
        let finished_at = (status != RunStatus::Running).then(now_rfc3339);
        let r = self.with_retries(|s| {
            let n = set_finished(&s.conn, run_id, status, finished_at.as_deref())?;
            if n == 0 {
                return Err(not_found(&s.path, run_id));
            }
            Ok(())
        });
        self.keep_on_error(r, || unsaved::Pending::Finish {
            run_id,
            status,
            finished_at: finished_at.clone(),
        })
    }

    /// Runs `f` until it succeeds or [`RETRY_DELAYS`] run out. JSON errors are not retried:
    /// the same record would fail the same way.
    fn with_retries(
        &mut self,
        mut f: impl FnMut(&mut Store) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut delays = RETRY_DELAYS.iter();
        loop {
            match f(self) {
                Ok(()) => return Ok(()),
                Err(e @ StoreError::Json(_)) => return Err(e),
                Err(e) => match delays.next() {
                    Some(d) => {
                        std::thread::sleep(*d);
                        // A PostgreSQL connection the server or network dropped stays
                        // closed: the retry needs a new one (which may fail too, and then
                        // the next attempt says so).
                        let _ = self.reconnect_if_closed();
                    }
                    None => return Err(e),
                },
            }
        }
    }

    /// Turns the last error of a write into a line of the side file.
    fn keep_on_error(
        &self,
        r: Result<(), StoreError>,
        record: impl FnOnce() -> unsaved::Pending,
    ) -> Result<Saved, StoreError> {
        let error = match r {
            Ok(()) => return Ok(Saved::Stored),
            Err(e @ StoreError::Json(_)) => return Err(e),
            Err(e) => e,
        };
        let side_file = self.side_file.clone();
        match unsaved::append(&side_file, &record()) {
            Ok(()) => Ok(Saved::Kept { side_file, error }),
            Err(file_error) => Err(StoreError::Unsaved {
                db: self.path.clone(),
                db_error: error.to_string(),
                side_file,
                file_error,
            }),
        }
    }

    /// Moves the records of the side file (`<db>.unsaved.jsonl`, see
    /// [`Store::add_trial_or_keep`]) into the database in one transaction, then removes the
    /// file. `None` when there is no side file.
    ///
    /// Idempotent: a trial already stored (same run, `seq` and start time) is not stored
    /// twice, so an import interrupted between its commit and removing the file is simply
    /// done again. Lines whose run is not in this database, or that this version cannot
    /// read, stay in the file (counted in [`Imported::left`]); nothing is dropped.
    pub fn import_unsaved(&mut self) -> Result<Option<Imported>, StoreError> {
        let side_file = self.side_file.clone();
        let io_err = |source| StoreError::Io {
            path: side_file.clone(),
            error: source,
        };
        let Some(mut import) = unsaved::Import::open(&side_file).map_err(io_err)? else {
            return Ok(None);
        };
        let contents = import.read().map_err(io_err)?;
        let mut keep = contents.unreadable;
        let (mut trials, mut finishes, mut runs) = (0, 0, 0);
        let path = &self.path;
        self.conn.write_tx(|tx| {
            for (line, record) in &contents.records {
                let run_id = match record {
                    unsaved::Pending::Trial { run_id, .. }
                    | unsaved::Pending::Finish { run_id, .. } => *run_id,
                    unsaved::Pending::Run { .. } => {
                        import_run(tx, record)?;
                        runs += 1;
                        continue;
                    }
                };
                if ensure_run(tx, path, run_id).is_err() {
                    keep.push(line.clone());
                    continue;
                }
                match record {
                    unsaved::Pending::Trial { trial, .. } => {
                        let stored = tx.query_opt(
                            "SELECT 1 FROM trials WHERE run_id = ?1 AND seq = ?2 AND started_at = ?3",
                            vals![run_id, trial.seq, &trial.started_at],
                        )?;
                        if stored.is_none() {
                            insert_trial(tx, run_id, trial)?;
                        }
                        trials += 1;
                    }
                    unsaved::Pending::Finish {
                        status,
                        finished_at,
                        ..
                    } => {
                        set_finished(tx, run_id, *status, finished_at.as_deref())?;
                        finishes += 1;
                    }
                    unsaved::Pending::Run { .. } => {}
                }
            }
            Ok(())
        })?;
        let left = keep.len();
        import.finish(&keep).map_err(io_err)?;
        if trials + finishes + runs + left == 0 {
            // An empty side file (e.g. left by a crash before its first line was written).
            return Ok(None);
        }
        Ok(Some(Imported {
            side_file,
            trials,
            finishes,
            runs,
            left,
        }))
    }

    /// The side file and how many records wait in it, if there is one: for a reader to say
    /// that some trials are not in the database yet.
    pub fn unsaved_pending(&self) -> Option<(PathBuf, usize)> {
        let n = unsaved::count(&self.side_file);
        (n > 0).then_some((self.side_file.clone(), n))
    }
}

/// Stores a run kept whole ([`unsaved::Pending::Run`]) inside the import's transaction,
/// unless a run with its stable id is there already (an import done before).
fn import_run(tx: &Conn, record: &unsaved::Pending) -> Result<(), StoreError> {
    let unsaved::Pending::Run {
        uid,
        started_at,
        run,
        trials,
        status,
        finished_at,
    } = record
    else {
        return Ok(());
    };
    if tx
        .query_opt("SELECT 1 FROM runs WHERE uid = ?1", vals![uid])?
        .is_some()
    {
        return Ok(());
    }
    let id = insert_run(tx, run, started_at, uid)?;
    for t in trials {
        insert_trial(tx, id, t)?;
    }
    set_finished(tx, id, *status, finished_at.as_deref())?;
    Ok(())
}
