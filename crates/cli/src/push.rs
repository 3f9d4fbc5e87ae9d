//! `virtperf push RUN… --to postgres://…`: copies finished runs from the local store (a
//! guest's, a laptop's, a CI machine's that had no network during the run) into a team's
//! store, idempotently.

use anyhow::{bail, Result};
use clap::Args;
use virtperf_store::{Location, Store};

use crate::experiment::{resolve, DbArg};

#[derive(Debug, Args)]
pub struct PushArgs {
    /// Runs to push (ids or `last`); `all` pushes every finished run
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// The team's store: postgres://USER@HOST[:PORT]/DB (or another SQLite file)
    #[arg(long, value_name = "URL")]
    pub to: String,
    /// The store to push from (default: $VIRTPERF_DB, else the local results file)
    #[command(flatten)]
    pub db: DbArg,
    /// Print what was pushed as JSON: one object per run (uid, from_id, to_id, created,
    /// trials)
    #[arg(long)]
    pub json: bool,
}

/// `virtperf push`
pub fn push(a: PushArgs) -> Result<()> {
    let from = a.db.open()?;
    let to_loc = Location::parse(&a.to);
    if to_loc == a.db.location() {
        bail!("--to names the store pushed from ({to_loc}): give the team's URL");
    }
    let mut to = Store::open_at(&to_loc)?;
    let ids: Vec<i64> = if a.runs.iter().any(|r| r == "all") {
        // Unfinished runs are left for a later push; naming one explicitly is an error.
        from.runs()?
            .into_iter()
            .filter(|r| r.effective_status() != virtperf_store::RunStatus::Running)
            .map(|r| r.id)
            .rev()
            .collect()
    } else {
        let mut ids = Vec::new();
        for r in &a.runs {
            let id = resolve(&from, r)?.id;
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        ids
    };
    let mut done = Vec::new();
    for id in ids {
        let p = from.push_run(id, &mut to)?;
        if !a.json {
            println!("{}", line(&p, &to));
        }
        done.push(p);
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&done)?);
    } else {
        let new = done.iter().filter(|p| p.created).count();
        println!("pushed {new} run(s); {} already there", done.len() - new);
    }
    Ok(())
}

/// What happened to one run, for people.
fn line(p: &virtperf_store::Pushed, to: &Store) -> String {
    if p.created {
        format!(
            "run {} → run {} in {} ({} trials)",
            p.from_id,
            p.to_id,
            to.path().display(),
            p.trials
        )
    } else {
        format!(
            "run {} is already run {} in {}: nothing to push",
            p.from_id,
            p.to_id,
            to.path().display()
        )
    }
}
