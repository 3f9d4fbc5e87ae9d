//! A workload command's result kept as a run of the results store (`rr … --store`, `--db`,
//! `--tag`): so a fleet's battery can be a plain `rr -l 10s` and still land, tagged, in the
//! team's store, and `show`, `compare`, `report` and `export` read it like any run.

use anyhow::Result;
use clap::Args;
use virtperf_store::{NewRun, NewTrial, RunStatus, Store, TrialStatus};
use virtperf_wire::TestResult;

use crate::args::TagArgs;
use crate::experiment::DbArg;

/// Whether and where a workload's result is stored.
#[derive(Debug, Clone, Args)]
pub struct KeepArgs {
    /// Store the result as a run in the results database (implied by --db and --tag)
    #[arg(long)]
    pub store: bool,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub tags: TagArgs,
}

/// The store a result will go to, opened before the test so a bad `--db` or tag fails
/// before anything is measured.
pub struct Keeper {
    store: Store,
    tags: virtperf_store::Tags,
}

impl KeepArgs {
    /// Whether the result is to be kept (`--store`, `--db` or `--tag`).
    pub fn wanted(&self) -> bool {
        self.store || self.db.db.is_some() || !self.tags.tags.is_empty()
    }

    /// Opens the store when the result is to be kept (`--store`, `--db` or `--tag`).
    pub fn open(&self) -> Result<Option<Keeper>> {
        let tags = self.tags.resolve()?;
        if !(self.store || self.db.db.is_some() || !self.tags.tags.is_empty()) {
            return Ok(None);
        }
        Ok(Some(Keeper {
            store: self.db.open_for_writing()?,
            tags,
        }))
    }
}

impl Keeper {
    /// Stores `r` as a finished run of one trial; `command` (the command line) is kept as
    /// the run's plan. Returns the run id and the store's name. Measured already: a
    /// database that refuses the run (a lock held past the wait) leaves it whole in the
    /// side file (imported by the next write), not lost, and the error names that file.
    pub fn keep(
        mut self,
        r: &TestResult,
        started_at: String,
        command: &str,
        status: RunStatus,
    ) -> Result<String> {
        let env = r.env.client.clone();
        let name = r.workload.name().to_string();
        let run = NewRun {
            name: name.clone(),
            spec_text: format!("# {command}\n"),
            git_commit: env.git_commit.clone(),
            tool_version: env.tool_version.clone(),
            host: virtperf_measure::fingerprint().hostname,
            env,
            pid: std::process::id(),
            planned_trials: 1,
            tags: self.tags,
        };
        let metric = r.primary_metric();
        let trial = NewTrial {
            seq: 1,
            config: "default".into(),
            workload: name.clone(),
            point: serde_json::json!({}),
            point_label: name,
            repetition: 1,
            status: TrialStatus::Ok,
            error: None,
            metric: Some(metric.value),
            metric_name: metric.name.to_string(),
            result: Some(r.clone()),
            detail: None,
            started_at,
            duration_s: r.duration_s,
        };
        match self
            .store
            .store_run_or_keep(&run, &[trial], status)?
        {
            (Some(run_id), virtperf_store::Saved::Stored) => Ok(format!(
                "stored as run {run_id} in {}",
                self.store.path().display()
            )),
            (_, virtperf_store::Saved::Kept { side_file, error }) => anyhow::bail!(
                "the database refused the result ({error}); it waits in {}, and the next command that writes to this database imports it",
                side_file.display()
            ),
            (None, virtperf_store::Saved::Stored) => {
                anyhow::bail!("the database stored the run without giving its id")
            }
        }
    }
}
