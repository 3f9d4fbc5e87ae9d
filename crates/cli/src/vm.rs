//! `virtperf vm compare`: the same workloads natively (loopback) and across a QEMU guest
//! placement, side by side with the ratio — the "virtualization tax" per workload.
//!
//! It writes an ordinary experiment spec (printed by `--print-spec`, stored with the run) and
//! runs it with the experiment runner, so trials are interleaved native/guest, stored in
//! SQLite, and `virtperf show/compare/report` work on the result like on any other run.

use std::fmt::Write;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde::Serialize;
use virtperf_experiment::spec::{self, Repeat};
use virtperf_place::guest::{Accel, Direction};
use virtperf_report::compare;
use virtperf_report::stats::Verdict;
use virtperf_store::{RunRow, Store, TrialRow};
use virtperf_wire::GuestInfo;

use crate::experiment::{execute_spec, DbArg, Executed};

/// `virtperf vm …`
#[derive(Debug, Args)]
pub struct VmArgs {
    #[command(subcommand)]
    pub cmd: VmCmd,
}

/// What to do with guests.
#[derive(Debug, Subcommand)]
pub enum VmCmd {
    /// Native (loopback) vs guest, per workload, with the ratio and significance
    Compare(VmCompareArgs),
}

/// `virtperf vm compare`
#[derive(Debug, Args)]
pub struct VmCompareArgs {
    /// Workloads: rr, crr, stream (16 KiB sends) and stream-reverse, comma-separated
    #[arg(long, default_value = "rr,stream,crr", value_delimiter = ',', value_parser = ["rr", "crr", "stream", "stream-reverse"])]
    pub workloads: Vec<String>,
    /// Which ends run in guests: host-guest (agent in the guest), guest-host, guest-guest,
    /// loopback (both ends in one guest, against both ends on this host's loopback)
    #[arg(long, default_value = "host-guest", value_parser = ["host-guest", "guest-host", "guest-guest", "loopback"])]
    pub direction: String,
    /// Measured duration of each trial
    #[arg(long, short = 'l', default_value = "5s", value_parser = duration_text, allow_hyphen_values = true)]
    pub duration: String,
    /// Trials per workload and side (interleaved native, guest, native, guest, …)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Count tracepoints on the test's CPUs in every trial (`rr --trace`): natively this
    /// host's, in the guest directions where a guest drives the test the guest's own, with
    /// the host's KVM exits beside them
    #[arg(long)]
    pub trace: bool,
    /// Print the experiment spec this runs, and exit
    #[arg(long)]
    pub print_spec: bool,
    /// Instead of the workloads: `virtperf explain --quick` natively and in the guest, the
    /// two decompositions side by side (--runs tries each, at most 10)
    #[arg(long, conflicts_with = "print_spec")]
    pub explain: bool,
    #[command(flatten)]
    pub db: DbArg,
    /// Print the comparison as JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub guest: crate::args::GuestArgs,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
    #[command(flatten)]
    pub tags: crate::args::TagArgs,
}

/// `virtperf vm`
/// A duration checked like every other (`virtperf_lab::parse::duration`), kept as typed
/// because it goes into the generated spec.
fn duration_text(s: &str) -> Result<String> {
    virtperf_lab::parse::duration(s).map(|_| s.trim().to_string())
}

pub fn vm(a: VmArgs) -> Result<()> {
    match a.cmd {
        VmCmd::Compare(c) => vm_compare(c),
    }
}

fn toml_str(s: &str) -> String {
    // A JSON string literal is a valid TOML basic string (same escapes).
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// The experiment `vm compare` runs, as spec text (so it can be stored and rerun).
fn spec_text(a: &VmCompareArgs, direction: Direction) -> Result<String> {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# Written by `virtperf vm compare`; rerun with `virtperf run FILE`."
    );
    let _ = writeln!(t, "name = \"vm-compare\"");
    let _ = writeln!(
        t,
        "description = \"native (loopback) vs QEMU guest ({}), per workload\"",
        direction.name()
    );
    let _ = writeln!(t, "duration = {}", toml_str(&a.duration));
    let _ = writeln!(t, "repetitions = {}", a.runs);
    if a.workloads.is_empty() {
        bail!("--workloads is empty (rr, crr, stream, stream-reverse)");
    }
    for w in &a.workloads {
        let body = match w.trim() {
            "rr" => "kind = \"rr\"\nsize = \"1,1\"",
            "crr" => "kind = \"crr\"\nsize = \"1,1\"",
            "stream" => "kind = \"stream\"\nsend_size = 16384",
            "stream-reverse" => "kind = \"stream\"\nsend_size = 16384\nreverse = true",
            other => {
                bail!("unknown workload {other:?} in --workloads (rr, crr, stream, stream-reverse)")
            }
        };
        let _ = writeln!(t, "\n[[workload]]\n{body}");
        if a.trace {
            let _ = writeln!(t, "trace = true");
        }
    }
    let _ = writeln!(t, "\n[[config]]\nname = \"native\"");
    let _ = writeln!(
        t,
        "\n[[config]]\nname = \"guest\"\nplacement = \"guest:{}\"",
        direction.name()
    );
    let g = &a.guest;
    let mut fields = vec![
        format!("vcpus = {}", g.vcpus),
        format!("mem = {}", g.mem),
        format!("vhost = {}", g.vhost),
        format!(
            "accel = \"{}\"",
            match g.accel {
                Accel::Auto => "auto",
                Accel::Kvm => "kvm",
                Accel::Tcg => "tcg",
            }
        ),
        format!("boot_timeout = \"{}s\"", g.boot_timeout.as_secs()),
    ];
    if !g.vcpu_cpus.is_empty() {
        fields.push(format!("vcpu_cpus = {:?}", g.vcpu_cpus));
    }
    for (k, v) in [
        ("kernel", &g.kernel),
        ("kernel_modules", &g.kernel_modules),
        ("binary", &g.guest_binary),
    ] {
        if let Some(p) = v {
            fields.push(format!("{k} = {}", toml_str(&p.to_string_lossy())));
        }
    }
    let table = |m: Vec<(String, String)>| {
        let inner: Vec<String> = m
            .iter()
            .map(|(k, v)| format!("{} = {}", toml_str(k), toml_str(v)))
            .collect();
        format!("{{ {} }}", inner.join(", "))
    };
    if !g.virtio.is_empty() {
        fields.push(format!("virtio = {}", table(g.virtio.clone())));
    }
    if !g.guest_module.is_empty() {
        fields.push(format!("modules = {}", table(g.guest_module.clone())));
    }
    if let Some(c) = &g.guest_cmdline {
        fields.push(format!("cmdline = {}", toml_str(c)));
    }
    let _ = writeln!(t, "guest = {{ {} }}", fields.join(", "));
    let _ = writeln!(t, "\n[report]\nbaseline = \"native\"");
    Ok(t)
}

/// One line of the tax table.
#[derive(Debug, Serialize)]
struct TaxRow {
    workload: String,
    metric: String,
    unit: String,
    native: f64,
    guest: f64,
    /// guest / native.
    ratio: f64,
    /// How much worse the guest is, in percent (positive = slower), whichever way the
    /// metric points.
    tax_pct: f64,
    verdict: String,
}

fn vm_compare(a: VmCompareArgs) -> Result<()> {
    let direction = match Direction::parse_placement(&format!("guest:{}", a.direction)) {
        Some(Ok(d)) => d,
        _ => bail!(
            "unknown --direction {:?} (host-guest, guest-host, guest-guest, loopback)",
            a.direction
        ),
    };
    if a.explain {
        return explain_in_guest(a, direction);
    }
    let text = spec_text(&a, direction)?;
    if a.print_spec {
        print!("{text}");
        return Ok(());
    }
    let spec = spec::parse(&text)
        .map_err(|e| crate::signals::exit(crate::signals::code::USAGE, e.to_string()))?;
    let Executed {
        store,
        row,
        trials,
        points,
        interrupted,
        ..
    } = execute_spec(
        &spec,
        &a.db,
        Some(Repeat::Fixed(a.runs)),
        a.json,
        &a.lock,
        a.tags.resolve()?,
    )?;
    let rows = compare::by_config(&points, Some("native"));
    let tax = tax_rows(&rows);
    // The guest as configured; QEMU's CPU use is per trial, so it stays in the stored trials.
    let info = trials
        .iter()
        .find_map(|t| t.result.as_ref().and_then(|r| r.guest.clone()))
        .map(|mut g| {
            g.qemu_cpu_s.clear();
            g
        });
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "run_id": row.id,
                "direction": direction.name(),
                "guest": info,
                "rows": tax,
            }))?
        );
    } else {
        print_tax(direction, info.as_ref(), &tax, &trials, &row, &store);
    }
    if interrupted {
        return crate::experiment::run_exit(&row, 0, true);
    }
    if tax.is_empty() {
        bail!(
            "no workload finished on both sides: see `virtperf show {}`",
            row.id
        );
    }
    Ok(())
}

/// `vm compare --explain`: explain's quick battery inside the guest.
fn explain_in_guest(a: VmCompareArgs, direction: Direction) -> Result<()> {
    crate::explain::explain(crate::explain::ExplainArgs {
        quick: true,
        size: (1, 1),
        cpus: (Some(0), Some(1)),
        tries: Some(a.runs.min(virtperf_explain::ExplainOpts::MAX_REMOTE_TRIES)),
        duration: None,
        placement: Some(virtperf_place::Placement::Guest(
            direction,
            Box::new(a.guest.opts(a.json)),
        )),
        host: None,
        conn: crate::args::ConnArgs {
            port: virtperf_wire::DEFAULT_PORT,
            token: None,
            token_file: None,
        },
        guest: a.guest,
        no_boot_remedies: false,
        json: a.json,
        output: None,
        db: a.db,
        lock: a.lock,
        tags: a.tags,
    })
}

/// The headline metrics (throughput or rate, p50/p99 latency) as native-vs-guest rows.
fn tax_rows(rows: &[compare::Row]) -> Vec<TaxRow> {
    let wanted = ["rate_per_s", "mbps", "p50_us", "p99_us"];
    rows.iter()
        .filter(|r| wanted.contains(&r.metric.as_str()))
        .map(|r| {
            let (n, g) = (r.comparison.baseline.mean, r.comparison.candidate.mean);
            let ratio = if n != 0.0 { g / n } else { f64::NAN };
            let higher_better = !r.metric.ends_with("_us");
            let tax_pct = if higher_better {
                (1.0 - ratio) * 100.0
            } else {
                (ratio - 1.0) * 100.0
            };
            TaxRow {
                workload: r.point.clone(),
                metric: r.metric.clone(),
                unit: r.unit.clone(),
                native: n,
                guest: g,
                ratio,
                tax_pct,
                verdict: verdict_word(r.comparison.verdict).to_string(),
            }
        })
        .collect()
}

/// The native-vs-guest table, its failures and where it is stored.
fn print_tax(
    direction: Direction,
    info: Option<&GuestInfo>,
    tax: &[TaxRow],
    trials: &[TrialRow],
    row: &RunRow,
    store: &Store,
) {
    match info {
        Some(g) => println!(
            "native vs guest ({})  guest: {}",
            direction.name(),
            crate::render::guest(g)
        ),
        None => println!(
            "native vs guest ({}): no guest trial succeeded",
            direction.name()
        ),
    }
    println!(
        "{:<22} {:<18} {:>12} {:>12} {:>12} {:>8}  verdict",
        "workload", "metric", "native", "guest", "guest/native", "tax"
    );
    for r in tax {
        println!(
            "{:<22} {:<18} {:>12} {:>12} {:>12.3} {:>7.1}%  {}",
            r.workload,
            format!("{} {}", short_metric(&r.metric), r.unit),
            fmt(r.native),
            fmt(r.guest),
            r.ratio,
            r.tax_pct,
            r.verdict
        );
    }
    if info.is_some_and(|g| g.emulated) {
        println!("\nWARNING: the guest ran under TCG emulation: this tax is QEMU's instruction emulation, not what a KVM guest would pay.");
    }
    for t in trials.iter().filter(|t| t.error.is_some()) {
        println!(
            "failed: {} · {} · try {}: {}",
            t.point_label,
            t.config,
            t.repetition,
            t.error.as_deref().unwrap_or("")
        );
    }
    println!(
        "\nstored as run {} in {}; see `virtperf show {}`, `virtperf compare {}`",
        row.id,
        store.path().display(),
        row.id,
        row.id
    );
}

fn short_metric(m: &str) -> &str {
    match m {
        "rate_per_s" => "rate",
        "mbps" => "throughput",
        "p50_us" => "p50",
        "p99_us" => "p99",
        other => other,
    }
}

fn verdict_word(v: Verdict) -> &'static str {
    match v {
        Verdict::Improved => "guest better",
        Verdict::Regressed => "guest worse",
        Verdict::NoChange => "no significant difference",
        Verdict::WithinNoise => "within noise",
    }
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}
