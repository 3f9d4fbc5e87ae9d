//! `run`, `runs`, `show`, `compare`, `report`: experiments and their stored results.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use virtperf_experiment::runner::{self, Observer, RunOptions, RunOutcome};
use virtperf_experiment::spec::{self, Repeat, Spec};
use virtperf_report::render::{self, Format};
use virtperf_report::{compare, html, summary, trial_notes};
use virtperf_store::{Location, RunRow, Store};

/// Confidence level of every interval shown.
pub(crate) const CONFIDENCE: f64 = 0.95;

#[derive(Debug, Clone, Args)]
pub struct DbArg {
    /// Results database: an SQLite file, or a team's postgres://USER@HOST[:PORT]/DB
    /// (default: $VIRTPERF_DB, else ~/.local/share/virtperf/results.db)
    #[arg(long, value_name = "FILE|URL")]
    pub db: Option<String>,
}

impl DbArg {
    /// Where the store lives: `--db`, else `$VIRTPERF_DB`, else the default file.
    pub(crate) fn location(&self) -> Location {
        match &self.db {
            Some(d) => Location::parse(d),
            None => Location::default_location(),
        }
    }

    /// Opens the database for reading (`runs`, `show`, `compare`, `report`): read-only, so
    /// it never holds a lock a running experiment waits for. Says so when trials wait in
    /// the side file, since they are not shown until imported.
    pub(crate) fn open(&self) -> Result<Store> {
        let store = Store::open_read_only_at(&self.location())?;
        if let Some((file, n)) = store.unsaved_pending() {
            eprintln!(
                "virtperf: note: {n} record(s) the database refused wait in {}; the next `virtperf run` with this database imports them",
                file.display()
            );
        }
        Ok(store)
    }

    /// Opens the database for an experiment, first importing what an earlier run had to
    /// keep in the side file. A failed import is a warning: the file stays for next time.
    pub(crate) fn open_for_writing(&self) -> Result<Store> {
        let mut store = Store::open_at(&self.location())?;
        match store.import_unsaved() {
            Ok(None) => {}
            Ok(Some(i)) => {
                let left = if i.left > 0 {
                    format!(
                        "; {} line(s) left in it (run not in this database or unreadable)",
                        i.left
                    )
                } else {
                    String::new()
                };
                eprintln!(
                    "virtperf: note: imported {} trial(s) and {} run ending(s){} kept in {}{left}",
                    i.trials,
                    i.finishes,
                    if i.runs > 0 {
                        format!(", and {} whole run(s)", i.runs)
                    } else {
                        String::new()
                    },
                    i.side_file.display()
                );
            }
            Err(e) => eprintln!(
                "virtperf: warning: records kept beside the database are not imported yet: {e}"
            ),
        }
        Ok(store)
    }
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Experiment spec (TOML), or a built-in recipe's name (`--list`); without it, the
    /// built-in quickstart experiment runs
    pub spec: Option<PathBuf>,
    /// List the built-in recipes and exit
    #[arg(long, conflicts_with = "spec")]
    pub list: bool,
    #[command(flatten)]
    pub db: DbArg,
    /// Repetitions per point and config (overrides the spec)
    #[arg(long, conflicts_with = "until_ci", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: Option<u32>,
    /// Repeat until the CI is this tight, e.g. 95,2% (overrides the spec)
    #[arg(long, value_parser = virtperf_lab::parse::until_ci)]
    pub until_ci: Option<(f64, f64)>,
    /// Most repetitions with --until-ci
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(3..=1000))]
    pub max_runs: u32,
    /// Parse the spec and print the plan without running anything
    #[arg(long)]
    pub dry_run: bool,
    /// The VM on this host that the trials' server runs in (pid:N, qemu:NAME,
    /// libvirt:DOMAIN, firecracker:PID): every trial gets the host's view of it over its
    /// measured window, and its cost counts this host's busy CPUs, the VM's included, once
    #[arg(long, value_name = "SPEC", value_parser = clap::value_parser!(virtperf_measure::vm::VmSpec))]
    pub vm: Option<virtperf_measure::vm::VmSpec>,
    /// Print the run's summary as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
    #[command(flatten)]
    pub tags: crate::args::TagArgs,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    /// Only runs whose field matches: host=NAME, name=PLAN or tag.KEY=VALUE (repeatable;
    /// all must match)
    #[arg(long = "where", value_name = "KEY=VALUE", value_parser = crate::args::parse_where)]
    pub filters: Vec<(String, String)>,
    /// Only runs started within this long before now: 30d, 12h, 2w
    #[arg(long, value_parser = parse_since)]
    pub since: Option<std::time::Duration>,
}

/// A `--since` age: a humantime duration (`30d`, `12h`, `1w`) of at most 100 years.
pub(crate) fn parse_since(s: &str) -> Result<std::time::Duration, String> {
    virtperf_lab::parse::duration_up_to(
        s,
        std::time::Duration::from_secs(100 * 365 * 86_400),
        "100 years",
    )
    .map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Run id, or `last`
    #[arg(default_value = "last")]
    pub run: String,
    #[command(flatten)]
    pub db: DbArg,
    /// table, md, csv or json
    #[arg(long, default_value = "table", value_parser = parse_format)]
    pub format: Format,
    /// The same as --format json (every reporting command takes --json)
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Table shape: tries, sweep (seed 3), matrix (seed 1), downloads (seed 0); default from the spec
    #[arg(long)]
    pub shape: Option<String>,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Runs to include (ids or `last`); or select them with --campaign / --where
    #[arg(required_unless_present_any = ["campaign", "filters"])]
    pub runs: Vec<String>,
    /// A fleet report of the runs tagged campaign=ID, grouped by --group-by
    #[arg(long, value_name = "ID", conflicts_with = "runs")]
    pub campaign: Option<String>,
    /// A fleet report of the runs matching host=NAME, name=PLAN or tag.KEY=VALUE
    /// (repeatable; all must match)
    #[arg(long = "where", value_name = "KEY=VALUE", value_parser = crate::args::parse_where, conflicts_with = "runs")]
    pub filters: Vec<(String, String)>,
    /// The tag whose values group a fleet report (hosts of one type, say)
    #[arg(long, value_name = "TAG", default_value = "group")]
    pub group_by: String,
    /// Also print what the report shows as JSON on standard output (instead of "wrote FILE")
    #[arg(long)]
    pub json: bool,
    /// Output file
    #[arg(short, long, default_value = "report.html")]
    pub output: PathBuf,
    /// Also plot the runs as a trend: one point per run by date, with the environment
    /// changes between runs (kernel, host, knobs) named on the plot
    #[arg(long)]
    pub trend: bool,
    #[command(flatten)]
    pub db: DbArg,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

/// Progress and per-trial reporting on stderr: a bar on a terminal, one line per trial
/// otherwise (so logs of long runs show where they are).
struct Reporter {
    bar: Option<ProgressBar>,
    quiet: bool,
    current: String,
    /// The machine lock, held for the whole run; names the run once it has an id.
    lock: virtperf_machine::lock::MachineLock,
}

impl Observer for Reporter {
    fn config_skipped(&mut self, config: &str, reason: &str) {
        let msg = format!("virtperf: config {config} skipped: {reason}");
        match &self.bar {
            Some(b) => b.println(msg),
            None => eprintln!("{msg}"),
        }
    }

    fn trial_started(&mut self, index: usize, planned: usize, point: &str, config: &str, rep: u32) {
        self.current = format!("[{index}/{planned}] {point} · {config} · try {rep}");
        if let Some(b) = &self.bar {
            b.set_length(planned as u64);
            b.set_position(index.saturating_sub(1) as u64);
            b.set_message(format!("{point} · {config} · try {rep}"));
        }
    }

    fn run_started(&mut self, run_id: i64) {
        self.lock.set_run(run_id);
    }

    fn trial_done(&mut self, result: &Result<f64>) {
        let line = match result {
            Ok(v) => format!("{} … {}", self.current, render::num(*v)),
            Err(e) => format!("{} … failed: {e:#}", self.current),
        };
        match &self.bar {
            Some(b) => {
                b.inc(1);
                if result.is_err() {
                    b.println(line);
                }
            }
            None if !self.quiet => eprintln!("{line}"),
            None => {}
        }
    }
}

/// A finished experiment: its store and stored rows.
pub struct Executed {
    /// The store it is in.
    pub store: Store,
    /// The run.
    pub row: RunRow,
    /// Its trials.
    pub trials: Vec<virtperf_store::TrialRow>,
    /// Per point and config summaries.
    pub points: Vec<summary::PointSummary>,
    /// Trials that succeeded.
    pub ok: usize,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
    /// Configs skipped as a whole, with the reason.
    pub skipped: Vec<(String, String)>,
}

/// Runs `spec` into the store with progress on a terminal, Ctrl-C handling and knob
/// restoration; shared by `virtperf run` and `virtperf vm compare`.
pub fn execute_spec(
    spec: &Spec,
    db: &DbArg,
    json: bool,
    lock: &crate::machine::LockArgs,
    opts: RunOptions,
) -> Result<Executed> {
    let opts = RunOptions {
        allow_concurrent: lock.allow_concurrent,
        ..opts
    };
    execute_with(db, json, lock, |store, interrupted, obs| {
        runner::run(spec, store, &opts, interrupted, obs)
    })
}

/// The flag SIGINT, SIGTERM or SIGHUP raises to stop runs: the trial in flight ends its
/// measured interval there, no other starts, and the runner restores every knob and marks
/// the run incomplete, keeping the trials done and the part of the one cut.
/// One handler per process: a command that stores several runs (`tune`'s rounds) says
/// what a signal does once, and a run after the signal stops before its first trial.
fn stop_flag() -> Result<Arc<AtomicBool>> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    if let Some(f) = FLAG.get() {
        return Ok(f.clone());
    }
    let flag = Arc::new(AtomicBool::new(false));
    let raised = flag.clone();
    crate::signals::on_termination(move |sig| {
        raised.store(true, Ordering::SeqCst);
        eprintln!(
            "\nvirtperf: {}: ending the current trial where it is, then restoring knobs",
            crate::signals::name(sig)
        );
    })?;
    Ok(FLAG.get_or_init(|| flag).clone())
}

/// Runs something that stores a run (an experiment, the explain battery) the way every
/// such command does: under the machine lock, into the database opened for writing, with a
/// progress bar on a terminal, and SIGINT/SIGTERM/SIGHUP stopping it between trials (knobs
/// restored, the run marked incomplete, the trials that ran kept).
pub fn execute_with(
    db: &DbArg,
    json: bool,
    lock: &crate::machine::LockArgs,
    run: impl FnOnce(&mut Store, &Arc<AtomicBool>, &mut dyn Observer) -> Result<RunOutcome>,
) -> Result<Executed> {
    // Before the store and the knobs: a second run waits here, changing nothing.
    let machine = crate::machine::take(lock)?;
    let mut store = db.open_for_writing()?;
    let interrupted = stop_flag()?;
    let tty = std::io::stderr().is_terminal() && !json;
    let bar = tty.then(|| {
        let b = ProgressBar::new(1);
        if let Ok(st) = ProgressStyle::with_template("{pos}/{len} [{bar:30}] ETA {eta}  {msg}") {
            b.set_style(st.progress_chars("=> "));
        }
        b
    });
    let mut rep = Reporter {
        bar,
        quiet: json,
        current: String::new(),
        lock: machine,
    };
    let outcome = run(&mut store, &interrupted, &mut rep);
    if let Some(b) = &rep.bar {
        b.finish_and_clear();
    }
    let outcome = outcome?;
    for e in &outcome.restore_errors {
        eprintln!("virtperf: warning: {e}");
    }
    let row = store.run(outcome.run_id)?;
    let trials = store.trials(outcome.run_id)?;
    let points = summary::summarize_run(&trials, CONFIDENCE);
    Ok(Executed {
        store,
        row,
        trials,
        points,
        ok: outcome.ok,
        interrupted: interrupted.load(Ordering::SeqCst),
        skipped: outcome.skipped,
    })
}

/// `virtperf run`
pub fn run(a: RunArgs) -> Result<()> {
    if a.list {
        return crate::recipes::list();
    }
    let spec = crate::recipes::load(a.spec.as_deref())?;
    // Before a dry run too: a fleet's malformed $VIRTPERF_TAGS shows up in a rehearsal.
    let tags = a.tags.resolve()?;
    let repeat = match (a.runs, a.until_ci) {
        (Some(n), _) => Some(Repeat::Fixed(n)),
        (None, Some((level, width))) => Some(Repeat::UntilCi {
            level,
            width,
            min: 3,
            max: a.max_runs,
        }),
        (None, None) => None,
    };
    if a.dry_run {
        let reps = match repeat.as_ref().unwrap_or(&spec.repeat) {
            Repeat::Fixed(n) => format!("{n} repetitions"),
            Repeat::UntilCi {
                level,
                width,
                min,
                max,
            } => format!(
                "{min}..{max} repetitions until the {:.0}% CI is within {:.1}%",
                level * 100.0,
                width * 100.0
            ),
        };
        println!(
            "{}: {} points × {} configs, {reps}",
            spec.name,
            spec.points.len(),
            spec.configs.len()
        );
        for p in &spec.points {
            println!("  point  {} ({:?})", p.label, p.duration);
        }
        for c in &spec.configs {
            let knobs: Vec<String> = c
                .knobs
                .iter()
                .map(|(k, v)| format!("{}={v}", k.name))
                .collect();
            println!("  config {} {}", c.name, knobs.join(" "));
        }
        return Ok(());
    }
    let Executed {
        store,
        row,
        trials,
        points,
        ok,
        interrupted,
        ..
    } = execute_spec(
        &spec,
        &a.db,
        a.json,
        &a.lock,
        RunOptions {
            repeat,
            tags,
            vm: a.vm.clone(),
            ..RunOptions::default()
        },
    )?;
    if a.json {
        println!("{}", render::json(&row, &points));
    } else {
        print!("{}", shaped(&row, &trials, &points, spec.shape.as_deref())?);
        let cmp = compare::by_config(&points, spec.baseline.as_deref());
        if !cmp.is_empty() {
            println!();
            print!("{}", render::compare_table(&cmp));
        }
        // The built-in experiment says what it found, and where to look next.
        if let Some(h) = a
            .spec
            .is_none()
            .then(|| crate::headline::quickstart(&points, &trials))
            .flatten()
        {
            println!("\n{h}");
        }
        println!(
            "\nstored as run {} in {} ({}); see `virtperf show {}`, `virtperf report {} -o report.html`",
            row.id,
            store.path().display(),
            row.effective_status(),
            row.id,
            row.id
        );
    }
    let gate = crate::decision::spec_gate(&spec, &points);
    crate::decision::finish(&row, ok, interrupted, "[compare] max_tax", &gate)
}

fn shaped(
    row: &RunRow,
    trials: &[virtperf_store::TrialRow],
    points: &[summary::PointSummary],
    shape: Option<&str>,
) -> Result<String> {
    let inferred = if points.iter().all(|p| p.workload == "http") {
        "downloads"
    } else if points.len() > 1
        && points.iter().all(|p| {
            p.params
                .as_object()
                .is_some_and(|o| o.values().any(|v| v.is_number()))
        })
    {
        "sweep"
    } else {
        "tries"
    };
    let mut out = match shape.unwrap_or(inferred) {
        "tries" | "table" => render::table(row, points),
        "sweep" => render::sweep(row, points),
        "matrix" => render::matrix(row, points),
        "downloads" => render::downloads(row, trials),
        other => bail!("unknown shape {other:?} (tries, sweep, matrix, downloads)"),
    };
    out.push_str(&render::udp_table(points));
    out.push_str(&render::events_table(points));
    out.push_str(&render::tcp_table(points));
    out.push_str(&trial_notes::emulation_note(trials));
    out.push_str(&trial_notes::load_note(trials));
    out.push_str(&render::unsteady_note(points, render::UNSTEADY_CELL_CV));
    out.push_str(&trial_notes::other_load_note(
        trials,
        virtperf_lab::assemble::OTHER_LOAD_WARN_PCT,
    ));
    out.push_str(&trial_notes::lost_packets_note(trials));
    out.push_str(&trial_notes::unsampled_note(trials));
    Ok(out)
}

/// The run `id` names: a number, or `last` (the newest).
pub(crate) fn resolve(store: &Store, id: &str) -> Result<RunRow> {
    if id == "last" {
        return store.runs()?.into_iter().next().ok_or_else(|| {
            anyhow!(
                "{} holds no runs yet: start one with `virtperf run`",
                store.path().display()
            )
        });
    }
    let n: i64 = id.parse().map_err(|_| {
        crate::signals::exit(
            crate::signals::code::USAGE,
            format!("invalid run id {id:?}: give a number from `virtperf runs`, or `last`"),
        )
    })?;
    Ok(store.run(n)?)
}

pub(crate) fn spec_of(row: &RunRow) -> Option<Spec> {
    spec::parse(&row.spec_text).ok()
}

/// `virtperf runs`
pub fn runs(a: RunsArgs) -> Result<()> {
    let store = a.db.open()?;
    let filter = crate::args::filter(&a.filters, a.since, &[]);
    let runs = store.runs_where(&filter)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(());
    }
    if runs.is_empty() {
        if filter == virtperf_store::RunFilter::default() {
            println!(
                "no runs in {} yet: start one with `virtperf run`",
                store.path().display()
            );
        } else {
            println!(
                "no runs in {} match: widen --where or --since",
                store.path().display()
            );
        }
        return Ok(());
    }
    println!(
        "{:>4}  {:<24} {:<24} {:<11} {:<12} {:>9}  tags",
        "id", "name", "started (UTC)", "status", "hostname", "trials"
    );
    for r in runs {
        println!(
            "{:>4}  {:<24} {:<24} {:<11} {:<12} {:>4}/{:<4}  {}",
            r.id,
            virtperf_wire::printable(&r.name),
            r.started_at,
            r.effective_status().to_string(),
            virtperf_wire::printable(&r.host),
            r.trials_ok,
            r.planned_trials,
            virtperf_wire::printable(&virtperf_report::render::tags_text(&r.tags))
        );
    }
    Ok(())
}

/// `virtperf show`
pub fn show(mut a: ShowArgs) -> Result<()> {
    if a.json {
        a.format = Format::Json;
    }
    let store = a.db.open()?;
    let row = resolve(&store, &a.run)?;
    let trials = store.trials(row.id)?;
    let points = summary::summarize_run(&trials, CONFIDENCE);
    let explained = virtperf_report::explain_stream::Explained::of(&row, &trials);
    if let (Some(e), Format::Table | Format::Json) = (explained, &a.format) {
        // An explain run reads back as the explanation its trials give.
        let e = e.map_err(|e| anyhow!(e))?;
        // A battery a signal stopped explains what it stored: said first, with the try it
        // cut short (the explanation alone read as a whole battery's).
        let notes = trial_notes::status_notes(std::slice::from_ref(&row));
        let trial_note = trial_notes::lost_packets_note(&trials);
        match a.format {
            Format::Json => {
                let mut v = serde_json::to_value(&e)?;
                if let Some(o) = v.as_object_mut() {
                    o.insert(
                        "run_status".into(),
                        row.effective_status().to_string().into(),
                    );
                    let mut all = notes.clone();
                    all.extend(
                        (!trial_note.trim().is_empty()).then(|| trial_note.trim().to_string()),
                    );
                    o.insert("notes".into(), all.into());
                }
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
            _ => {
                let mut head: String = notes.iter().map(|n| format!("{n}\n")).collect();
                head.push_str(trial_note.trim_start());
                if !head.is_empty() {
                    head.push('\n');
                }
                print!("{}", virtperf_wire::printable(&(head + &e.text())));
            }
        }
        return Ok(());
    }
    let out = match a.format {
        Format::Table => {
            let shape = a
                .shape
                .clone()
                .or_else(|| spec_of(&row).and_then(|s| s.shape));
            shaped(&row, &trials, &points, shape.as_deref())?
        }
        Format::Md => render::markdown(&row, &points),
        Format::Csv => render::csv(&row, &trials),
        Format::Json => render::json(&row, &points) + "\n",
    };
    // Names, hosts and errors come from the store: nothing in them may steer the terminal
    // (JSON escapes them itself).
    print!("{}", virtperf_wire::printable(&out));
    Ok(())
}

/// `virtperf report`
pub fn report(a: ReportArgs) -> Result<()> {
    let store = a.db.open()?;
    let mut loaded = Vec::new();
    for id in &a.runs {
        let row = resolve(&store, id)?;
        let trials = store.trials(row.id)?;
        let points = summary::summarize_run(&trials, CONFIDENCE);
        let baseline = spec_of(&row).and_then(|s| s.baseline);
        let cmp = compare::by_config(&points, baseline.as_deref());
        let expl = (row.name == virtperf_report::explain::RUN_NAME)
            .then(|| {
                virtperf_report::explain::explain(row.id, &row.env, &trials).map_err(|e| anyhow!(e))
            })
            .transpose()?;
        let notes: Vec<String> = trial_notes::lost_packets_note(&trials)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect();
        loaded.push((row, points, cmp, expl, notes));
    }
    let cross = if loaded.len() >= 2 {
        compare::runs(&loaded[0].1, loaded[0].0.id, &loaded[1].1, loaded[1].0.id)
    } else {
        Vec::new()
    };
    let sections: Vec<html::RunSection> = loaded
        .iter()
        .map(|(row, points, cmp, expl, notes)| html::RunSection {
            run: row,
            points,
            comparisons: cmp,
            explanation: expl.as_ref(),
            notes: notes.clone(),
        })
        .collect();
    let trend = if a.trend {
        let runs: Vec<virtperf_report::trend::TrendRun> = loaded
            .iter()
            .map(|(row, points, ..)| virtperf_report::trend::TrendRun { run: row, points })
            .collect();
        let t = virtperf_report::trend::section(&runs);
        if t.is_empty() {
            bail!("--trend needs at least two runs sharing a point and config");
        }
        t
    } else {
        String::new()
    };
    let page = html::report_with_trend(&sections, &cross, &trend, &virtperf_store::now_rfc3339());
    std::fs::write(&a.output, page)
        .with_context(|| format!("cannot write {}", a.output.display()))?;
    if a.json {
        // What the page shows, for a script: each run's points, their comparisons and
        // (explain runs) the explanation; the comparison of the first two runs.
        let runs: Vec<serde_json::Value> = loaded
            .iter()
            .map(|(row, points, cmp, expl, notes)| {
                serde_json::json!({"run": row.id, "name": row.name, "points": points,
                    "comparisons": cmp, "explanation": expl, "notes": notes})
            })
            .collect();
        let out = serde_json::json!({"output": a.output, "runs": runs, "cross": cross});
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("wrote {}", a.output.display());
    }
    Ok(())
}
