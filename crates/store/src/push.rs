//! `virtperf push`: copying finished runs from one store (a guest's or a laptop's SQLite
//! file) into another (the team's PostgreSQL database), identified by their stable id so
//! pushing again creates nothing new.

use crate::db::vals;
use crate::knobs::insert_knobs;
use crate::runs::RunStatus;
use crate::tags::insert_tags;
use crate::trials::insert_trial;
use crate::{to_json_checked, Store, StoreError};

/// What [`Store::push_run`] did with one run (as `push --json` prints it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Pushed {
    /// The run's stable id, the same in both stores.
    pub uid: String,
    /// Its id in the source store.
    pub from_id: i64,
    /// Its id in the destination store.
    pub to_id: i64,
    /// False when the destination had it already (nothing was written).
    pub created: bool,
    /// Trials copied (0 when it was there already).
    pub trials: usize,
}

impl Store {
    /// Copies finished run `run_id` of this store, with its trials (whole results,
    /// histograms included), knobs and environment, into `to`, in one transaction there.
    ///
    /// Idempotent: a run whose stable id `to` already holds is left as it is, so pushing
    /// twice (or two hosts pushing the same file at once) stores it once. A run still
    /// being written is refused: its missing trials would never follow.
    pub fn push_run(&self, run_id: i64, to: &mut Store) -> Result<Pushed, StoreError> {
        let run = self.run(run_id)?;
        if run.effective_status() == RunStatus::Running {
            return Err(StoreError::Refused(format!(
                "run {run_id} of {} is still running: push it once it has finished",
                self.path.display()
            )));
        }
        let trials = self.trials(run_id)?;
        let knobs = self.knobs(run_id)?;
        let env_json = to_json_checked(&run.env)?;
        // A run stored before stable ids existed got one from the migration; an empty one
        // cannot happen, but would make every such run "the same": refuse it.
        if run.uid.is_empty() {
            return Err(StoreError::Refused(format!(
                "run {run_id} of {} has no stable id: open the store with this virtperf once (it migrates it), then push again",
                self.path.display()
            )));
        }
        let uid = run.uid.clone();
        to.conn.write_tx(|c| {
            let inserted = c.query_opt(
                "INSERT INTO runs (name, started_at, finished_at, status, host, pid, tool_version,
                                   git_commit, spec_text, env_json, planned_trials, uid)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
                 ON CONFLICT (uid) DO NOTHING
                 RETURNING id",
                vals![
                    &run.name,
                    &run.started_at,
                    run.finished_at.as_ref(),
                    run.status.as_str(),
                    &run.host,
                    run.pid,
                    &run.tool_version,
                    run.git_commit.as_ref(),
                    &run.spec_text,
                    env_json.clone(),
                    run.planned_trials,
                    &uid,
                ],
            )?;
            let Some(row) = inserted else {
                let id = c
                    .query_opt("SELECT id FROM runs WHERE uid = ?1", vals![&uid])?
                    .ok_or_else(|| {
                        StoreError::Schema(format!("run {uid} neither inserted nor found"))
                    })?
                    .int(0)?;
                return Ok(Pushed {
                    uid: uid.clone(),
                    from_id: run_id,
                    to_id: id,
                    created: false,
                    trials: 0,
                });
            };
            let id = row.int(0)?;
            for t in &trials {
                insert_trial(c, id, &t.trial)?;
            }
            insert_knobs(c, id, &knobs)?;
            insert_tags(c, id, &run.tags)?;
            Ok(Pushed {
                uid: uid.clone(),
                from_id: run_id,
                to_id: id,
                created: true,
                trials: trials.len(),
            })
        })
    }
}
