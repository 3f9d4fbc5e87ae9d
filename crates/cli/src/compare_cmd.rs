//! `virtperf compare`: configs within a run, or two runs, with significance verdicts and
//! what each compared run is (another host or kernel, a run that is not complete).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use virtperf_report::render;
use virtperf_report::{compare, html, summary};

use crate::experiment::{resolve, spec_of, DbArg, CONFIDENCE};

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// One run (its configs against the baseline config) or two runs (A then B)
    #[arg(required_unless_present = "campaigns", num_args = 1..=2)]
    pub runs: Vec<String>,
    /// Two campaigns instead of runs: --campaign A --campaign B compares the runs tagged
    /// campaign=A with those tagged campaign=B, per group of --group-by (tries pooled
    /// across each group's hosts)
    #[arg(long = "campaign", value_name = "ID", conflicts_with = "runs")]
    pub campaigns: Vec<String>,
    /// With --campaign: the tag whose values are the groups compared apart
    #[arg(
        long,
        value_name = "TAG",
        default_value = "group",
        requires = "campaigns"
    )]
    pub group_by: String,
    /// Compare configs within the run (the default for one run)
    #[arg(long, value_parser = ["config"])]
    pub by: Option<String>,
    /// Baseline config (default: the spec's report.baseline, else the first config)
    #[arg(long)]
    pub baseline: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Exit 3 when a verdict says the candidate regressed (by at least --threshold); exit 5
    /// (undecided) when none did but an undecided comparison's interval leaves one of more
    /// than --threshold (and the 2% noise threshold) possible: for CI
    #[arg(long)]
    pub fail_on_regression: bool,
    /// With --fail-on-regression: the smallest regression that fails, in percent (5%, 2.5)
    #[arg(long, default_value = "0%", value_parser = parse_threshold, requires = "fail_on_regression")]
    pub threshold: f64,
    /// Also write the comparison as an HTML page: a chart of every change coloured by its
    /// verdict, and the table
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Parses a regression threshold in percent (`5%`, `2.5`): finite, not negative, and at
/// most 1,000,000 % (event counts per transaction can grow by thousands of percent; a
/// threshold beyond a 10,000-fold change is a typo, not a policy).
fn parse_threshold(s: &str) -> Result<f64, String> {
    let bad = || format!("invalid threshold {s:?}: expected a percentage like 5% or 2.5");
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .trim()
        .parse()
        .map_err(|_| bad())?;
    if !v.is_finite() || v < 0.0 {
        return Err(bad());
    }
    if v > 1e6 {
        return Err(format!(
            "threshold {s:?} is beyond any change a measurement can show: give at most 1000000%"
        ));
    }
    Ok(v)
}

/// `virtperf compare`
pub fn compare(a: CompareArgs) -> Result<()> {
    let store = a.db.open()?;
    // Two runs from different hosts or kernels: what differs is said before the numbers.
    let mut env_note = None;
    let mut compared = Vec::new();
    let mut rows = match a.runs.as_slice() {
        [one] => {
            let row = resolve(&store, one)?;
            compared.push(row.clone());
            let points = summary::summarize_run(&store.trials(row.id)?, CONFIDENCE);
            let baseline = a
                .baseline
                .clone()
                .or_else(|| spec_of(&row).and_then(|s| s.baseline));
            if let Some(b) = &baseline {
                if !points
                    .iter()
                    .any(|p| p.configs.iter().any(|c| &c.config == b))
                {
                    bail!("run {} has no config {b:?}", row.id);
                }
            }
            let r = compare::by_config(&points, baseline.as_deref());
            if r.is_empty() {
                bail!("run {} has only one config: compare it with another run (`virtperf compare {} OTHER`)", row.id, row.id);
            }
            r
        }
        [x, y] => {
            if a.by.is_some() {
                bail!("--by config compares within one run: give one run id");
            }
            let (ra, rb) = (resolve(&store, x)?, resolve(&store, y)?);
            compared.extend([ra.clone(), rb.clone()]);
            // A run against itself gives every row "no change" or "undecided": no verdict
            // that could mean anything, so it is refused.
            if ra.id == rb.id {
                return Err(crate::signals::exit(
                    crate::signals::code::USAGE,
                    format!(
                        "{x} and {y} are both run {}: compare it with another run, or its configs with `virtperf compare {}`",
                        ra.id, ra.id
                    ),
                ));
            }
            let changes = virtperf_report::trend::env_changes(&ra.env, &rb.env);
            if !changes.is_empty() {
                env_note = Some(format!(
                    "run {} ({}, {}) against run {} ({}, {}): {}",
                    rb.id,
                    rb.host,
                    rb.started_at,
                    ra.id,
                    ra.host,
                    ra.started_at,
                    changes.join("; ")
                ));
            }
            let pa = summary::summarize_run(&store.trials(ra.id)?, CONFIDENCE);
            let pb = summary::summarize_run(&store.trials(rb.id)?, CONFIDENCE);
            let r = compare::runs(&pa, ra.id, &pb, rb.id);
            if r.is_empty() {
                bail!(
                    "runs {} and {} share no point and config to compare",
                    ra.id,
                    rb.id
                );
            }
            r
        }
        _ => bail!("give one or two run ids"),
    };
    let title = format!("virtperf compare {}", a.runs.join(" "));
    let notes: Vec<String> = env_note
        .into_iter()
        .chain(virtperf_report::trial_notes::status_notes(&compared))
        .collect();
    // Each row carries them: `--json` keeps its list of rows, and a reader of any row
    // learns what its runs are.
    for r in &mut rows {
        r.notes.clone_from(&notes);
    }
    emit_comparison(&a, &rows, &title)
}

/// Prints comparison rows (table or JSON), writes them as HTML with `-o`, and fails with
/// the regression exit code when `--fail-on-regression` finds one.
pub(crate) fn emit_comparison(a: &CompareArgs, rows: &[compare::Row], title: &str) -> Result<()> {
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        let notes = rows.first().map_or(&[][..], |r| &r.notes[..]);
        if !notes.is_empty() {
            println!("{}\n", virtperf_wire::printable(&notes.join("\n")));
        }
        print!("{}", virtperf_wire::printable(&render::compare_table(rows)));
    }
    if let Some(path) = &a.output {
        std::fs::write(
            path,
            html::comparison_page(title, rows, &virtperf_store::now_rfc3339()),
        )
        .with_context(|| format!("cannot write {}", path.display()))?;
        if !a.json {
            println!("wrote {}", path.display());
        }
    }
    if a.fail_on_regression {
        let worse = compare::regressions(rows, a.threshold);
        if let Some(first) = worse.first() {
            return Err(crate::signals::exit(
                crate::signals::code::REGRESSION,
                format!(
                    "{} comparison(s) regressed by at least {}%, e.g. {} {} {}: {:+.1}% against {}",
                    worse.len(),
                    a.threshold,
                    first.point,
                    first.candidate,
                    first.metric,
                    first.comparison.pct_change,
                    first.baseline
                ),
            ));
        }
        // No regression shown is a pass only where the tries exclude one too.
        let open = compare::unexcluded_regressions(rows, a.threshold);
        if let Some(first) = open.first() {
            let interval = first
                .comparison
                .change_interval_pct
                .map_or("no interval".to_string(), |[lo, hi]| {
                    format!("{lo:+.1}% to {hi:+.1}%")
                });
            return Err(crate::signals::exit(
                virtperf_report::decide::exit::UNDECIDED,
                format!(
                    "undecided: no regression shown, but {} comparison(s) cannot exclude one of more than {}%, e.g. {} {} {}: {:+.1}% ({interval}) against {}; more repetitions may tell",
                    open.len(),
                    a.threshold.max(compare::NOISE * 100.0),
                    first.point,
                    first.candidate,
                    first.metric,
                    first.comparison.pct_change,
                    first.baseline
                ),
            ));
        }
    }
    Ok(())
}
