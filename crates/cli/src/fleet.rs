//! A fleet's runs read together: `runs`/`report --where tag.KEY=VALUE`, `report --campaign
//! ID --group-by TAG` (the fleet report) and `compare --campaign A --campaign B` (one
//! campaign against another, per group). The reading itself is the report crate's
//! `fleet` module; this one selects runs from the store.

use anyhow::{bail, Context, Result};
use virtperf_report::fleet::{self, FleetRun};
use virtperf_store::{RunFilter, RunRow, Store, TrialRow};

use crate::args::filter;

use crate::compare_cmd::CompareArgs;
use crate::experiment::{ReportArgs, CONFIDENCE};

/// The finished runs `f` selects, with their trials; a run still being written is left
/// out (its numbers are not final) and said so on stderr.
fn load(store: &Store, f: &RunFilter, what: &str) -> Result<Vec<(RunRow, Vec<TrialRow>)>> {
    let mut out = Vec::new();
    for r in store.runs_where(f)? {
        if r.effective_status() == virtperf_store::RunStatus::Running {
            eprintln!(
                "virtperf: run {} ({}) is still running: left out of {what}",
                r.id, r.host
            );
            continue;
        }
        let t = store.trials(r.id)?;
        out.push((r, t));
    }
    if out.is_empty() {
        bail!(
            "no finished runs in {} match {what}: check the campaign id or --where (see `virtperf runs --where tag.campaign=ID`)",
            store.path().display()
        );
    }
    Ok(out)
}

fn fleet_runs(loaded: &[(RunRow, Vec<TrialRow>)]) -> Vec<FleetRun<'_>> {
    loaded
        .iter()
        .map(|(run, trials)| FleetRun { run, trials })
        .collect()
}

/// `virtperf report --campaign ID | --where … --group-by TAG -o fleet.html`
pub fn report(a: &ReportArgs) -> Result<()> {
    let store = a.db.open()?;
    let campaign: Vec<&str> = a.campaign.iter().map(String::as_str).collect();
    let what = match &a.campaign {
        Some(c) => format!("campaign {c}"),
        None => "the filter".to_string(),
    };
    let loaded = load(&store, &filter(&a.filters, None, &campaign), &what)?;
    let f = fleet::fleet(&fleet_runs(&loaded), &a.group_by, CONFIDENCE);
    let title = format!("virtperf fleet report: {what}, by {}", a.group_by);
    let page = virtperf_report::html::fleet_page(&f, &[], &title, &virtperf_store::now_rfc3339());
    std::fs::write(&a.output, page)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&f)?);
    } else {
        print!("{}", virtperf_wire::printable(&fleet::text(&f)));
        println!("wrote {}", a.output.display());
    }
    Ok(())
}

/// `virtperf compare --campaign A --campaign B [--group-by TAG]`
pub fn compare(a: CompareArgs) -> Result<()> {
    let rows = compare_campaigns(&a)?;
    let title = format!(
        "virtperf compare --campaign {}",
        a.campaigns.join(" --campaign ")
    );
    crate::compare_cmd::emit_comparison(&a, &rows, &title)
}

/// The comparison rows of two campaigns, per group.
fn compare_campaigns(a: &CompareArgs) -> Result<Vec<virtperf_report::compare::Row>> {
    let [ca, cb] = a.campaigns.as_slice() else {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "give two campaigns: --campaign A --campaign B",
        ));
    };
    if ca == cb {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            format!("--campaign {ca} is given twice: name two different campaigns"),
        ));
    }
    let store = a.db.open()?;
    let la = load(&store, &filter(&[], None, &[ca]), &format!("campaign {ca}"))?;
    let lb = load(&store, &filter(&[], None, &[cb]), &format!("campaign {cb}"))?;
    let mut rows = fleet::compare_campaigns(
        &fleet_runs(&la),
        &format!("campaign {ca}"),
        &fleet_runs(&lb),
        &format!("campaign {cb}"),
        &a.group_by,
        CONFIDENCE,
    );
    if rows.is_empty() {
        bail!(
            "campaigns {ca} and {cb} share no group, point and metric to compare (grouped by tag {:?})",
            a.group_by
        );
    }
    // A campaign's run that is not complete pools what it stored: every row says so.
    let runs: Vec<RunRow> = la.iter().chain(&lb).map(|(r, _)| r.clone()).collect();
    let notes = virtperf_report::trial_notes::status_notes(&runs);
    for r in &mut rows {
        r.notes.clone_from(&notes);
    }
    Ok(rows)
}
