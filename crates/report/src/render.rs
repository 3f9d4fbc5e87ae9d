//! Text renderers for `show` and `compare`: terminal table (in the seeds' shapes), markdown,
//! CSV and JSON. Each takes what `summary`/`compare` concluded and only formats it.

use std::fmt::Write;

use serde::Serialize;
use virtperf_store::{RunRow, TrialRow};

use crate::compare::Row;
use crate::escape::csv_field;
use crate::summary::{ConfigSummary, MetricSummary, PointSummary};
use virtperf_wire::CpuSplit;

/// Output format of `show`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Terminal table.
    Table,
    /// Markdown.
    Md,
    /// CSV, one row per trial and metric.
    Csv,
    /// JSON.
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "table" => Ok(Format::Table),
            "md" | "markdown" => Ok(Format::Md),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            _ => Err(format!("unknown format {s:?} (table, md, csv, json)")),
        }
    }
}

/// The half-width of a 95% CI, or "n/a" when one try gives no interval (never "±0.000").
fn ci(m: &crate::summary::MetricSummary, scale: f64) -> String {
    if m.summary.n >= 2 {
        num(m.summary.ci_half / scale)
    } else {
        "n/a".to_string()
    }
}

/// The tries' coefficient of variation in percent; `n/a` for one try, whose spread was
/// not measured (a 0.0 there read as tries that agreed exactly).
fn cv_cell(summary: &crate::stats::Summary) -> String {
    if summary.n >= 2 {
        format!("{:.1}", summary.cv * 100.0)
    } else {
        "n/a".into()
    }
}

/// [`ci`] with its sign: "±1.2", or "n/a" alone.
fn ci_pm(m: &crate::summary::MetricSummary, scale: f64) -> String {
    if m.summary.n >= 2 {
        format!("±{}", ci(m, scale))
    } else {
        ci(m, scale)
    }
}

/// Significant-figure formatting for tables: enough digits to compare, no more.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let a = v.abs();
    if a >= 1000.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn tries(values: &[f64]) -> String {
    values.iter().map(|v| num(*v)).collect::<Vec<_>>().join("/")
}

/// One line describing a run.
pub fn run_line(r: &RunRow) -> String {
    let status = r.effective_status();
    // A run that has ended with trials short of its plan (stopped by a signal, a config
    // given up on, skipped) says how many: "10 trials ok" of 22 read as the whole run.
    let unrun = match r.trials_not_run() {
        n if n > 0 && status != virtperf_store::RunStatus::Running => {
            format!(", {n} of {} planned not run", r.planned_trials)
        }
        _ => String::new(),
    };
    let mut s = format!(
        "run {}  {}  {}  {status}  hostname {}  ({} trials ok, {} failed{unrun})",
        r.id, r.name, r.started_at, r.host, r.trials_ok, r.trials_failed
    );
    if !r.tags.is_empty() {
        s.push_str("  tags ");
        s.push_str(&tags_text(&r.tags));
    }
    s
}

/// A run's tags as `k=v,k=v` (the form `$VIRTPERF_TAGS` takes).
pub fn tags_text(tags: &virtperf_store::Tags) -> String {
    tags.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn params_text(p: &PointSummary) -> String {
    // Seed 1 names the direction of a stream by the role of this machine.
    if p.workload == "stream" {
        match p.params.get("reverse").and_then(|v| v.as_bool()) {
            Some(false) => return "client (sends)".into(),
            Some(true) => return "server (receives)".into(),
            None => {}
        }
    }
    let rest = p.label.strip_prefix(&p.workload).unwrap_or(&p.label).trim();
    if rest.is_empty() {
        "-".into()
    } else {
        rest.to_string()
    }
}

/// The virtio-net device path beside a row (seed 2): kicks and interrupts per packet on the
/// side(s) whose traffic crossed a guest's device, means of the tries; empty without one.
fn nic_cells(c: &ConfigSummary) -> String {
    let get = |n: &str| {
        c.metrics
            .iter()
            .find(|m| m.name == n)
            .map(|m| m.summary.mean)
    };
    let mut cells = Vec::new();
    for side in ["client", "server"] {
        if let (Some(k), Some(i)) = (
            get(&format!("{side}_kicks_per_pkt")),
            get(&format!("{side}_irqs_per_pkt")),
        ) {
            cells.push(format!("{side} {k:.2} kicks {i:.2} irqs"));
        }
    }
    if cells.is_empty() {
        String::new()
    } else {
        format!(" │ per packet: {}", cells.join(", "))
    }
}

fn cell_row(s: &mut String, c: &ConfigSummary, name_width: usize) {
    let Some(m) = c.metrics.first() else {
        let why = c.error.as_deref().unwrap_or("no result");
        let _ = writeln!(
            s,
            "  {:<w$} {:>3}  {}{why}",
            c.config,
            c.ok,
            if why.starts_with("skipped: ") {
                ""
            } else {
                "failed: "
            },
            w = name_width
        );
        return;
    };
    let lat = c
        .latency
        .as_ref()
        .map(|l| format!("{:>9} {:>9}", num(l.p50_us), num(l.p99_us)))
        .unwrap_or_else(|| format!("{:>9} {:>9}", "", ""));
    let _ = writeln!(
        s,
        "  {:<w$} {:>3}  {:<36} {:>10} {:<10} {:>5} │ {} │ {}{}{}",
        c.config,
        c.ok,
        tries(&m.values),
        num(m.summary.mean),
        ci_pm(m, 1.0),
        cv_cell(&m.summary),
        lat,
        cpu_cells(c.cpu.as_ref()),
        nic_cells(c),
        if c.failed > 0 {
            format!("  ({} failed)", c.failed)
        } else {
            String::new()
        },
        w = name_width
    );
}

/// The default table: per point, one row per config with every try, mean, CI, CV, merged
/// latency percentiles and the CPU split.
pub fn table(run: &RunRow, points: &[PointSummary]) -> String {
    let mut s = run_line(run);
    s.push('\n');
    let w = points
        .iter()
        .flat_map(|p| p.configs.iter().map(|c| c.config.len()))
        .max()
        .unwrap_or(6)
        .max(6);
    for p in points {
        let unit = p
            .configs
            .iter()
            .find_map(|c| {
                c.metrics
                    .first()
                    .map(|m| format!("{} {}", crate::tax::metric_words(&m.name), m.unit))
            })
            .unwrap_or_default();
        match &p.workload_text {
            Some(w) => {
                let _ = writeln!(s, "\n{}  ({w})", p.label);
            }
            None => {
                let _ = writeln!(s, "\n{}", p.label);
            }
        }
        let _ = writeln!(
            s,
            "  {:<w$} {:>3}  {:<36} {:>10} {:<10} {:>5} │ {:>9} {:>9} │ {:>5} {:>5} {:>5} {:>5}",
            "config",
            "n",
            format!("{unit} (each try)"),
            "mean",
            " 95% CI",
            "cv%",
            "p50 µs",
            "p99 µs",
            "busy%",
            "user",
            "sys",
            "soft",
            w = w
        );
        for c in &p.configs {
            cell_row(&mut s, c, w);
        }
    }
    s
}

/// Seed 3's shape: one table per config, one row per sweep point, each try and the average.
pub fn sweep(run: &RunRow, points: &[PointSummary]) -> String {
    let mut s = run_line(run);
    s.push('\n');
    let mut configs: Vec<String> = Vec::new();
    for p in points {
        for c in &p.configs {
            if !configs.contains(&c.config) {
                configs.push(c.config.clone());
            }
        }
    }
    let mut workloads: Vec<&str> = Vec::new();
    for p in points {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    for wl in workloads {
        for cfg in &configs {
            let rows: Vec<(&PointSummary, &ConfigSummary)> = points
                .iter()
                .filter(|p| p.workload == wl)
                .filter_map(|p| p.configs.iter().find(|c| &c.config == cfg).map(|c| (p, c)))
                .collect();
            let Some(first) = rows.iter().find_map(|(_, c)| c.metrics.first()) else {
                continue;
            };
            let n = rows.iter().map(|(_, c)| c.ok).max().unwrap_or(0);
            let _ = writeln!(s, "\n{wl} — {cfg}");
            let _ = writeln!(
                s,
                "  {:<18} {:>8}  {:<48} {:>10} {:>10} │ {:>5} {:>5} {:>5} {:>5}",
                "parameters",
                "elapsed",
                format!("{} {} (tried {n} times)", first.name, first.unit),
                "average",
                "±95% CI",
                "busy%",
                "user",
                "sys",
                "soft"
            );
            for (p, c) in rows {
                let Some(m) = c.metrics.first() else {
                    let _ = writeln!(
                        s,
                        "  {:<18} failed: {}",
                        params_text(p),
                        c.error.as_deref().unwrap_or("?")
                    );
                    continue;
                };
                let _ = writeln!(
                    s,
                    "  {:<18} {:>8.2}  {:<48} {:>10} {:>10} │ {}",
                    params_text(p),
                    c.elapsed_s,
                    tries(&m.values),
                    num(m.summary.mean),
                    ci(m, 1.0),
                    cpu_cells(c.cpu.as_ref())
                );
            }
        }
    }
    s
}

/// Seed 1's shape: rows are configs, columns are points, cells the primary metric's mean
/// (streams in MByte/s, as the seed reports).
pub fn matrix(run: &RunRow, points: &[PointSummary]) -> String {
    let mut s = run_line(run);
    s.push('\n');
    let mut configs: Vec<&str> = Vec::new();
    for p in points {
        for c in &p.configs {
            if !configs.contains(&c.config.as_str()) {
                configs.push(&c.config);
            }
        }
    }
    // Each column in its own unit: streams in MByte/s as seed 1 prints them, request/
    // response workloads as median latency, anything else by its primary metric.
    let streams = points.iter().any(|p| p.workload == "stream");
    let latencies = points.iter().any(timed_per_transaction);
    let title = match (streams, latencies) {
        (true, false) => "MByte/s (receiver-counted, mean of tries)".to_string(),
        (true, true) => {
            "streams in MByte/s (receiver-counted, mean of tries); rr/crr: median latency µs over all tries"
                .to_string()
        }
        (false, true) => "median latency µs over all tries".to_string(),
        (false, false) => "mean of tries, primary metric".to_string(),
    };
    let _ = writeln!(s, "\n{title}");
    let w = configs.iter().map(|c| c.len()).max().unwrap_or(6).max(6);
    let header = |s: &mut String, units: bool| {
        let _ = write!(s, "  {:<w$}", "config");
        for p in points {
            let h = match (timed_per_transaction(p), units) {
                (true, true) => format!("{} p50 µs", p.label),
                (true, false) => p.label.clone(),
                (false, _) => params_text(p),
            };
            let _ = write!(s, " {h:>22}");
        }
        s.push('\n');
    };
    // One row per config, one cell per point (`-` where the config did not run there).
    let rows = |s: &mut String, cell: &dyn Fn(&PointSummary, &ConfigSummary) -> String| {
        for cfg in &configs {
            let _ = write!(s, "  {cfg:<w$}");
            for p in points {
                let v = p
                    .configs
                    .iter()
                    .find(|c| c.config == *cfg)
                    .map(|c| cell(p, c))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(s, " {v:>22}");
            }
            s.push('\n');
        }
    };
    header(&mut s, true);
    rows(&mut s, &matrix_cell);
    // CPU per side: the client's machine and the agent's (a guest's own view when the
    // agent ran in one), system-wide busy % with its softirq share.
    let _ = writeln!(
        s,
        "\nCPU busy % client side / server side (of which softirq), mean of tries"
    );
    header(&mut s, false);
    rows(&mut s, &|_, c| {
        let side = |x: Option<&CpuSplit>| {
            x.map_or("-".to_string(), |x| {
                format!("{:.0} ({:.0})", x.busy_pct, x.softirq_pct)
            })
        };
        match (&c.cpu, &c.server_cpu) {
            (None, None) => "-".into(),
            (cl, sv) => format!("{} / {}", side(cl.as_ref()), side(sv.as_ref())),
        }
    });
    s
}

/// A request/response point (rr, crr, unix-rr): its results carry latency, so its cells
/// are median latencies. Read from the data, not the workload's name.
fn timed_per_transaction(p: &PointSummary) -> bool {
    p.configs.iter().any(|c| c.latency.is_some())
}

fn matrix_cell(p: &PointSummary, c: &ConfigSummary) -> String {
    if c.ok == 0 {
        return "failed".into();
    }
    if timed_per_transaction(p) {
        return match &c.latency {
            Some(l) => num(l.p50_us),
            None => "-".into(),
        };
    }
    match c.metrics.first() {
        Some(m) => {
            // Streams in MByte/s, as seed 1 prints them.
            let k = if p.workload == "stream" { 8.0 } else { 1.0 };
            format!("{} {}", num(m.summary.mean / k), ci_pm(m, k))
        }
        None => "-".into(),
    }
}

/// Seed 0's shape: one line per download, `duration=… bytes_transferred=…`.
pub fn downloads(run: &RunRow, trials: &[TrialRow]) -> String {
    let mut s = run_line(run);
    s.push('\n');
    for t in trials {
        let Some(r) = &t.result else {
            let _ = writeln!(
                s,
                "{} try {}: failed: {}",
                t.config,
                t.repetition,
                t.error.as_deref().unwrap_or("?")
            );
            continue;
        };
        let virtperf_wire::Outcome::Http(o) = &r.outcome else {
            continue;
        };
        for d in &o.downloads {
            let _ = writeln!(
                s,
                "{} try {} download {}: {} duration={:.6} bytes_transferred={} [{:.1} MB/s, first byte after {:.3} ms]",
                t.config,
                t.repetition,
                d.index,
                o.url,
                d.duration_s,
                d.bytes,
                d.mb_per_s,
                d.ttfb_s * 1e3
            );
        }
    }
    s
}

/// A config's client CPU split as four table cells (busy, user, system, softirq %), or
/// dashes where nothing measured it (probe rows).
fn cpu_cells(x: Option<&CpuSplit>) -> String {
    match x {
        Some(x) => format!(
            "{:>5.1} {:>5.1} {:>5.1} {:>5.1}",
            x.busy_pct, x.user_pct, x.system_pct, x.softirq_pct
        ),
        None => format!("{:>5} {:>5} {:>5} {:>5}", "-", "-", "-", "-"),
    }
}

/// Markdown: the default table as a markdown table.
pub fn markdown(run: &RunRow, points: &[PointSummary]) -> String {
    let mut s = format!("## {}\n\n", run_line(run));
    s.push_str("| point | config | n | metric | tries | mean | ±95% CI | CV % | p50 µs | p99 µs | CPU busy % |\n");
    s.push_str("|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|\n");
    for p in points {
        for c in &p.configs {
            let Some(m) = c.metrics.first() else { continue };
            let (p50, p99) = c
                .latency
                .as_ref()
                .map(|l| (num(l.p50_us), num(l.p99_us)))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} {} | {} | {} | {} | {} | {} | {} | {} |",
                p.label,
                c.config,
                c.ok,
                m.name,
                m.unit,
                tries(&m.values),
                num(m.summary.mean),
                ci(m, 1.0),
                cv_cell(&m.summary),
                p50,
                p99,
                // Probes (wake-up, KVM) measure no CPU split: "-", not 0.0.
                c.cpu
                    .as_ref()
                    .map_or("-".to_string(), |x| format!("{:.1}", x.busy_pct))
            );
        }
    }
    s
}

/// CSV in long form: one row per trial and metric, so every metric of every trial is there
/// and columns never depend on the workload.
pub fn csv(run: &RunRow, trials: &[TrialRow]) -> String {
    let mut s =
        String::from("run,seq,config,workload,point,repetition,status,metric,unit,value,error\n");
    for t in trials {
        let base = format!(
            "{},{},{},{},{},{},{}",
            run.id,
            t.seq,
            csv_field(&t.config),
            t.workload,
            csv_field(&t.point_label),
            t.repetition,
            t.status
        );
        match &t.result {
            Some(r) => {
                for m in r.metrics() {
                    let _ = writeln!(s, "{base},{},{},{},", m.name, m.unit, m.value);
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "{base},,,,{}",
                    csv_field(t.error.as_deref().unwrap_or(""))
                );
            }
        }
    }
    s
}

#[derive(Serialize)]
struct JsonShow<'a> {
    schema: &'static str,
    run: &'a RunRow,
    points: &'a [PointSummary],
}

/// JSON: the run and its per-point summaries.
pub fn json(run: &RunRow, points: &[PointSummary]) -> String {
    serde_json::to_string_pretty(&JsonShow {
        schema: "virtperf.show/1",
        run,
        points,
    })
    .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The comparison table.
pub fn compare_table(rows: &[Row]) -> String {
    let mut s = String::new();
    let label = |r: &Row| format!("{} {}", crate::tax::metric_words(&r.metric), r.unit);
    // The columns as wide as their longest entry, so a long metric shifts no column.
    let wm = rows
        .iter()
        .map(|r| label(r).chars().count())
        .fold(24, usize::max);
    let wp = rows
        .iter()
        .map(|r| r.point.chars().count())
        .fold(28, usize::max);
    let _ = writeln!(
        s,
        "{:<wp$} {:<wm$} {:<32} {:>11} {:>11} {:>9} {:>8}  verdict",
        "point", "metric", "candidate vs baseline", "baseline", "candidate", "change", "p",
    );
    for r in rows {
        let c = &r.comparison;
        let p = c
            .test
            .as_ref()
            .map(|t| format!("{:.3}", t.p_value))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "{:<wp$} {:<wm$} {:<32} {:>11} {:>11} {:>+8.1}% {:>8}  {}",
            r.point,
            label(r),
            format!("{} vs {}", r.candidate, r.baseline),
            num(c.baseline.mean),
            num(c.candidate.mean),
            c.pct_change,
            p,
            c.verdict_text()
        );
    }
    if rows
        .iter()
        .any(|r| matches!(r.metric.as_str(), "p50_us" | "p99_us"))
    {
        // `show` prints the percentiles of every round trip pooled: for one run its p50
        // and this table's can differ, which this says rather than leaving it a puzzle.
        s.push_str("\np50/p99 latency above: the mean of each try's own percentile (what is tested); `show` pools every try's round trips into one histogram, so its p50 and p99 may differ\n");
    }
    s.push_str(&crate::compare::undecided_note(rows));
    s
}

/// UDP loss, jitter and reordering per point and config (means over tries of `lost_pct`,
/// `jitter_ms`, `out_of_order`), so a stored UDP run shows what it lost beside its rates.
/// Empty when no point is UDP.
pub fn udp_table(points: &[PointSummary]) -> String {
    let mut out = String::new();
    for p in points {
        for c in &p.configs {
            let get = |n: &str| {
                c.metrics
                    .iter()
                    .find(|m| m.name == n)
                    .map(|m| m.summary.mean)
            };
            let Some(lost) = get("lost_pct") else {
                continue;
            };
            if out.is_empty() {
                out.push_str(
                    "
UDP (mean of tries):
",
                );
            }
            let mut line = format!("  {} · {}: lost {lost:.3}%", p.label, c.config);
            if let Some(j) = get("jitter_ms") {
                line.push_str(&format!(", jitter {j:.3} ms"));
            }
            if let Some(o) = get("out_of_order") {
                line.push_str(&format!(", {o:.1} out of order"));
            }
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// TCP state per point and config, where the results carry it (means over tries):
/// retransmitted segments, and a `--bidir` stream's two directions. Empty otherwise.
pub fn tcp_table(points: &[PointSummary]) -> String {
    let mut out = String::new();
    for p in points {
        for c in &p.configs {
            let get = |n: &str| c.metrics.iter().find(|m| m.name == n).map(|m| &m.summary);
            let mut parts = Vec::new();
            if let Some(r) = get("retransmits") {
                // Of them, the ones the receivers had already (D-SACK): not lost.
                let spurious = get("spurious_retransmits").filter(|_| r.mean > 0.0).map_or(
                    String::new(),
                    |d| {
                        format!(
                            ", {:.1} of them spurious (the receiver had them: D-SACK)",
                            d.mean
                        )
                    },
                );
                parts.push(format!(
                    "retransmits {:.1} per try (min {:.0}, max {:.0}){spurious}",
                    r.mean, r.min, r.max
                ));
            }
            if let (Some(a), Some(b)) = (get("mbps_client_to_server"), get("mbps_server_to_client"))
            {
                parts.push(format!(
                    "client→server {:.0} Mbit/s, server→client {:.0} Mbit/s",
                    a.mean, b.mean
                ));
            }
            if parts.is_empty() {
                continue;
            }
            if out.is_empty() {
                out.push_str("\nTCP (the senders' TCP_INFO; mean of tries):\n");
            }
            let _ = writeln!(out, "  {} · {}: {}", p.label, c.config, parts.join("; "));
        }
    }
    out
}

/// Events per unit of work, per point and config (the means over tries of the `*_per_tr`
/// or `*_per_mb` metrics): how many times each side slept, how many idle entries, IPIs and
/// timer interrupts its CPU took. Empty when no result carries events.
pub fn events_table(points: &[PointSummary]) -> String {
    let mut out = String::new();
    for p in points {
        for c in &p.configs {
            let ev: Vec<&MetricSummary> = c
                .metrics
                .iter()
                .filter(|m| m.name.ends_with("_per_tr") || m.name.ends_with("_per_mb"))
                // Per packet (virtio-net) goes beside the main table's rows instead.
                .collect();
            if ev.is_empty() {
                continue;
            }
            if out.is_empty() {
                out.push_str("\nevents per unit of work (mean of tries; idle, IPIs and timer on the side's pinned CPU when pinned):\n");
            }
            let side = |s: &str| -> String {
                ev.iter()
                    .filter(|m| m.name.starts_with(s))
                    .map(|m| {
                        let what = m.name[s.len() + 1..]
                            .trim_end_matches("_per_tr")
                            .trim_end_matches("_per_mb");
                        format!("{what} {:.2}", m.summary.mean)
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let unit = if ev[0].name.ends_with("_per_mb") {
                virtperf_wire::Unit::Bytes
            } else {
                virtperf_wire::Unit::Transactions
            }
            .events_name();
            let _ = writeln!(
                out,
                "  {} · {} per {unit}: client {} | server {}",
                p.label,
                c.config,
                side("client"),
                side("server")
            );
        }
    }
    out
}

/// Above this coefficient of variation of a cell's tries (primary metric), `show` suggests
/// repeating until the confidence interval is tight.
pub const UNSTEADY_CELL_CV: f64 = 0.10;

/// A note naming the cells (point · config) whose tries' primary metric has a coefficient
/// of variation above `threshold` (a fraction), suggesting `until_ci` as hyperfine
/// suggests more runs for outliers; empty when there are none.
pub fn unsteady_note(points: &[PointSummary], threshold: f64) -> String {
    let cells: Vec<String> = points
        .iter()
        .flat_map(|p| {
            p.configs.iter().filter_map(move |c| {
                let m = c.metrics.first()?;
                (m.summary.n >= 2 && m.summary.cv > threshold).then(|| {
                    format!(
                        "{} · {} (CV {:.0}% over {} tries)",
                        p.label,
                        c.config,
                        m.summary.cv * 100.0,
                        m.summary.n
                    )
                })
            })
        })
        .collect();
    if cells.is_empty() {
        return String::new();
    }
    format!(
        "\nnote: the tries vary by more than {:.0}% in {}: the mean may not be the rate. Run it again with `virtperf run SPEC --until-ci 95,2%` (or until_ci = \"95,2%\" in the spec) so it repeats until the 95% CI is within ±2%.\n",
        threshold * 100.0,
        cells.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::summarize;
    use crate::summary::{ConfigSummary, MetricSummary, PointSummary};

    fn cell(config: &str, values: &[f64]) -> ConfigSummary {
        ConfigSummary {
            config: config.into(),
            ok: values.len(),
            failed: 0,
            error: None,
            metrics: vec![MetricSummary {
                name: "rate_per_s".into(),
                unit: "trans/s".into(),
                higher_is_better: true,
                values: values.to_vec(),
                summary: summarize(values, 0.95),
            }],
            latency: None,
            latency_distribution: Vec::new(),
            cpu: Some(Default::default()),
            server_cpu: None,
            cpus_busy: None,
            cpus_busy_tries: Vec::new(),
            vm_cpus: None,
            elapsed_s: 1.0,
            series: Vec::new(),
            timeline: None,
        }
    }

    /// Only cells whose tries spread beyond the threshold are named, with their CV, and the
    /// note points at the flag that repeats until the interval is tight; one try (no spread
    /// to judge) is never named.
    #[test]
    fn the_unsteady_note_names_only_the_cells_that_spread() {
        let points = vec![PointSummary {
            workload: "rr".into(),
            label: "rr".into(),
            params: serde_json::json!({}),
            workload_text: None,
            configs: vec![
                cell("steady", &[1000.0, 1010.0, 990.0]),
                cell("wild", &[1000.0, 500.0, 1500.0]),
                cell("once", &[42.0]),
            ],
        }];
        let note = unsteady_note(&points, UNSTEADY_CELL_CV);
        assert!(note.contains("rr · wild (CV 50% over 3 tries)"), "{note}");
        assert!(!note.contains("steady") && !note.contains("once"), "{note}");
        assert!(note.contains("--until-ci 95,2%"), "{note}");
        assert_eq!(unsteady_note(&points[..0], UNSTEADY_CELL_CV), "");
    }

    /// One try has no spread: its CV cell says so, where it read 0.0 (as though the tries
    /// agreed exactly) beside a CI of n/a.
    #[test]
    fn one_try_has_no_cv() {
        assert_eq!(cv_cell(&summarize(&[42.0], 0.95)), "n/a");
        assert_eq!(cv_cell(&summarize(&[1000.0, 500.0, 1500.0], 0.95)), "50.0");
    }
}
