//! `virtperf explain`: where a cross-CPU round trip's time goes. Runs the battery in
//! `virtperf_lab::explain`, stores it as a run, and prints the model of
//! `virtperf_report::explain` with its residual.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use virtperf_lab::explain::ExplainOpts;
use virtperf_report::explain::{self as model, Explanation};
use virtperf_report::html;
use virtperf_store::{RunRow, TrialRow};

use crate::experiment::DbArg;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A shorter battery (≈ 45 s instead of ≈ 2 min): 3 tries, 2 s per rr trial
    #[arg(long)]
    pub quick: bool,
    /// Request and response sizes in bytes: `REQ,RESP`, or one size for both
    #[arg(long, short = 'r', default_value = "1,1", value_parser = virtperf_lab::parse::size_pair)]
    pub size: (u32, u32),
    /// The two CPUs of the cross-CPU measurements (the first also hosts the same-CPU one)
    #[arg(long, short = 'T', default_value = "0,1", value_parser = virtperf_lab::parse::cpus)]
    pub cpus: (Option<u32>, Option<u32>),
    /// Tries of every measurement (default 5, with --quick 3)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub tries: Option<u32>,
    /// Length of each rr trial (default 3s, with --quick 2s); wake trials take half of it
    #[arg(long, short = 'l', value_parser = parse_trial)]
    pub duration: Option<Duration>,
    /// Only `local` for now: the wake-up and KVM probes run in-process, so run explain on
    /// the machine (or inside the guest) to be explained
    #[arg(long, value_parser = <virtperf_lab::place::Placement as std::str::FromStr>::from_str)]
    pub placement: Option<virtperf_lab::place::Placement>,
    /// Not supported: run explain on the agent's machine itself
    #[arg(long)]
    pub host: Option<String>,
    /// Print the explanation as JSON (docs/json.md)
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report with the waterfall chart to this file
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
}

/// Trial lengths: 100 ms (too short to mean much, but fine for a smoke test) to 60 s.
fn parse_trial(s: &str) -> Result<Duration> {
    let d = virtperf_lab::parse::duration_up_to(s, Duration::from_secs(60), "60s")?;
    if d < Duration::from_millis(100) {
        anyhow::bail!("{s:?} is too short for a trial: give at least 100ms");
    }
    Ok(d)
}

/// `virtperf explain`
pub fn explain(a: ExplainArgs) -> Result<()> {
    use crate::signals::{code, exit};
    let elsewhere = a
        .placement
        .as_ref()
        .is_some_and(|p| *p != virtperf_lab::place::Placement::Local);
    if elsewhere || a.host.is_some() {
        // The wake-up and halt measurements run inside this process, so they describe this
        // machine only: explaining a guest means running virtperf inside it.
        return Err(exit(
            code::USAGE,
            "explain measures this machine only (its wake-up and KVM probes run in-process): run `virtperf explain` inside the guest or on the host you want explained",
        ));
    }
    let (Some(c0), Some(c1)) = a.cpus else {
        return Err(exit(code::USAGE, "--cpus needs two CPUs, e.g. --cpus 0,1"));
    };
    let mut opts = ExplainOpts::new(a.quick);
    opts.size = a.size;
    opts.cpus = (c0, c1);
    opts.allow_concurrent = a.lock.allow_concurrent;
    if let Some(n) = a.tries {
        opts.tries = n;
    }
    if let Some(d) = a.duration {
        opts.rr_duration = d;
        opts.wake_duration = (d / 2).max(Duration::from_millis(100));
    }
    let done = crate::experiment::execute_with(&a.db, a.json, &a.lock, |store, stop, obs| {
        virtperf_lab::explain::run(&opts, store, stop, obs)
    })?;
    let e = explanation(&done.row, &done.trials)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", model::text(&e));
        println!(
            "\nstored as run {} in {} ({}); see `virtperf show {}`",
            done.row.id,
            done.store.path().display(),
            done.row.effective_status(),
            done.row.id
        );
    }
    if let Some(path) = &a.output {
        write_report(path, &done.row, &done.points, &e)?;
        if !a.json {
            println!("wrote {}", path.display());
        }
    }
    crate::experiment::run_exit(&done.row, done.ok, done.interrupted)
}

/// The explanation of a stored explain run.
pub fn explanation(row: &RunRow, trials: &[TrialRow]) -> Result<Explanation> {
    model::explain(row.id, &row.env, trials).map_err(|e| anyhow!(e))
}

/// Whether a stored run is an explain battery.
pub fn is_explain(row: &RunRow) -> bool {
    row.name == model::RUN_NAME
}

fn write_report(
    path: &std::path::Path,
    row: &RunRow,
    points: &[virtperf_report::summary::PointSummary],
    e: &Explanation,
) -> Result<()> {
    let page = html::report(
        &[html::RunSection {
            run: row,
            points,
            comparisons: &[],
            explanation: Some(e),
        }],
        &[],
        &virtperf_store::now_rfc3339(),
    );
    std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))
}
