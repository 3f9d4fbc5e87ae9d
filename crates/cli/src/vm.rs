//! `virtperf vm compare`: the same workloads natively (loopback) and across a QEMU guest
//! placement, side by side with the ratio — the "virtualization tax" per workload.
//!
//! It writes an ordinary experiment spec (printed by `--print-spec`, stored with the run) and
//! runs it with the experiment runner, so trials are interleaved native/guest, stored in
//! SQLite, and `virtperf show/compare/report` work on the result like on any other run.

use std::fmt::Write;
use std::str::FromStr;

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use virtperf_experiment::spec::{self, Repeat};
use virtperf_place::guest::{Accel, Direction, GuestNet};
use virtperf_report::compare;
use virtperf_report::tax::{self, short_metric, MaxTax, TaxRow};
use virtperf_store::TrialRow;
use virtperf_wire::GuestInfo;

use crate::experiment::{execute_spec, DbArg, Executed};
use virtperf_experiment::runner::RunOptions;

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
    Compare(Box<VmCompareArgs>),
    /// Write an initramfs whose init is virtperf's agent, for a QEMU or Firecracker you
    /// start yourself (prints a QEMU command line that boots it)
    Initramfs(crate::vm_own::InitramfsArgs),
    /// The host's view of a running VM for a while: its threads' CPU, run-queue wait and
    /// switches, KVM's per-VM counters (no test needed)
    Watch(crate::vm_own::WatchArgs),
}

/// `virtperf vm compare`
#[derive(Debug, Args)]
pub struct VmCompareArgs {
    /// Workloads: rr, crr, stream (16 KiB sends) and stream-reverse, comma-separated
    #[arg(long, default_value = "rr,stream,crr", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(WORKLOADS))]
    pub workloads: Vec<String>,
    /// Which ends run in guests: host-guest (agent in the guest), guest-host, guest-guest,
    /// loopback (both ends in one guest, against both ends on this host's loopback);
    /// default host-guest. Only for a guest virtperf boots (not with --guest elsewhere)
    #[arg(long, value_parser = ["host-guest", "guest-host", "guest-guest", "loopback"])]
    pub direction: Option<String>,
    /// Measured duration of each trial
    #[arg(long, short = 'l', default_value = "5s", value_parser = duration_text, allow_hyphen_values = true)]
    pub duration: String,
    /// Run each trial this long first without measuring (iperf3 -O): the guest's halt
    /// polling, vhost threads and page faults settle before the measured duration
    #[arg(long, value_name = "DURATION", value_parser = omit_text, allow_hyphen_values = true)]
    pub omit: Option<String>,
    /// Trials per workload and side (interleaved native, guest, native, guest, …)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: u32,
    /// Where the native side runs: any placement (local, netns:veth, ssh:USER@HOST,
    /// remote:HOST:PORT, guest…); default: this host's loopback
    #[arg(long, value_name = "PLACEMENT", value_parser = placement_text)]
    pub native: Option<String>,
    /// Where the guest side runs: any placement, e.g. remote:ADDR:PORT for an agent in a VM
    /// you run yourself (its token from $VIRTPERF_TOKEN or $VIRTPERF_TOKEN_FILE); default:
    /// a guest virtperf boots, ends as --direction says
    #[arg(long = "guest", value_name = "PLACEMENT", value_parser = placement_text)]
    pub guest_at: Option<String>,
    /// The VM the guest side's agent runs in, on this host (pid:N, qemu:NAME,
    /// libvirt:DOMAIN, firecracker:PID), with --guest remote:…: each guest-side trial gets
    /// the host's view of it over its window (vCPU threads' CPU and run-queue wait per
    /// transaction or MB, KVM's counters)
    #[arg(long, value_name = "SPEC", requires = "guest_at",
          value_parser = clap::value_parser!(virtperf_measure::vm::VmSpec))]
    pub vm: Option<virtperf_measure::vm::VmSpec>,
    /// Fail (exit 3) naming each row whose tax is above this: `20%` for every workload, or
    /// per workload `rr=30%,stream=10%`
    #[arg(long, value_name = "PCT|WORKLOAD=PCT,…", value_parser = parse_max_tax)]
    pub max_tax: Option<MaxTax>,
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

/// A placement as given, checked by the placement grammar.
fn placement_text(s: &str) -> Result<String> {
    virtperf_place::Placement::from_str(s.trim()).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(s.trim().to_string())
}

/// The workloads `--workloads` takes, which `--max-tax` may name.
const WORKLOADS: [&str; 4] = ["rr", "crr", "stream", "stream-reverse"];

/// `--max-tax`, its workloads checked against [`WORKLOADS`].
fn parse_max_tax(s: &str) -> Result<MaxTax> {
    MaxTax::parse(s, Some(&WORKLOADS)).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The two sides' placements as given (native, guest).
fn placements(a: &VmCompareArgs, direction: Direction) -> (String, String) {
    (
        a.native.clone().unwrap_or_else(|| "local".into()),
        match a.guest_at.as_deref() {
            // A bare `guest` takes --direction's (checked not to clash in vm_compare).
            None | Some("guest") => format!("guest:{}", direction.name()),
            Some(g) => g.to_string(),
        },
    )
}

/// `virtperf vm`
/// A duration checked like every other (`virtperf_lab::parse::duration`), kept as typed
/// because it goes into the generated spec.
fn duration_text(s: &str) -> Result<String> {
    virtperf_lab::parse::duration(s).map(|_| s.trim().to_string())
}

/// A warm-up checked like `--omit` everywhere (`virtperf_lab::parse::omit`), kept as typed.
fn omit_text(s: &str) -> Result<String> {
    virtperf_lab::parse::omit(s).map(|_| s.trim().to_string())
}

pub fn vm(a: VmArgs) -> Result<()> {
    match a.cmd {
        VmCmd::Compare(c) => vm_compare(*c),
        VmCmd::Initramfs(a) => crate::vm_own::initramfs_cmd(a),
        VmCmd::Watch(a) => crate::vm_own::watch(a),
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
    let (native, guest) = placements(a, direction);
    let _ = writeln!(
        t,
        "description = {}",
        toml_str(&format!(
            "native ({native}) vs guest ({guest}), per workload"
        ))
    );
    let _ = writeln!(t, "duration = {}", toml_str(&a.duration));
    if let Some(o) = &a.omit {
        let _ = writeln!(t, "omit = {}", toml_str(o));
    }
    let _ = writeln!(t, "repetitions = {}", a.runs);
    if a.workloads.is_empty() {
        bail!("--workloads is empty ({})", WORKLOADS.join(", "));
    }
    for w in &a.workloads {
        let body = match w.trim() {
            "rr" => "kind = \"rr\"\nsize = \"1,1\"",
            "crr" => "kind = \"crr\"\nsize = \"1,1\"",
            "stream" => "kind = \"stream\"\nsend_size = 16384",
            "stream-reverse" => "kind = \"stream\"\nsend_size = 16384\nreverse = true",
            other => {
                bail!(
                    "unknown workload {other:?} in --workloads ({})",
                    WORKLOADS.join(", ")
                )
            }
        };
        let _ = writeln!(t, "\n[[workload]]\nlabel = {}\n{body}", toml_str(w.trim()));
        if a.trace {
            let _ = writeln!(t, "trace = true");
        }
    }
    let _ = writeln!(t, "\n[[config]]\nname = \"native\"");
    if native != "local" {
        let _ = writeln!(t, "placement = {}", toml_str(&native));
    }
    // A guest on the native side is the same guest on a tap: `--native guest --guest-net
    // user` is user networking's tax against a tap, nothing else changed.
    if native.starts_with("guest") {
        let _ = writeln!(t, "{}", guest_table(&a.guest, GuestNet::Tap));
    }
    let _ = writeln!(
        t,
        "\n[[config]]\nname = \"guest\"\nplacement = {}",
        toml_str(&guest)
    );
    if guest.starts_with("guest") {
        let _ = writeln!(t, "{}", guest_table(&a.guest, a.guest.guest_net));
    }
    let _ = writeln!(t, "\n[report]\nbaseline = \"native\"");
    // The gate too: `virtperf run` of the stored spec exits 3 as this command does.
    if let Some(m) = &a.max_tax {
        let _ = writeln!(t, "\n[compare]\nmax_tax = {}", toml_str(m.text()));
    }
    Ok(t)
}

/// A config's `guest = { … }` line from the guest flags, its NIC on `net`.
fn guest_table(g: &crate::args::GuestArgs, net: GuestNet) -> String {
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
        format!("net = \"{}\"", net.name()),
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
    format!("guest = {{ {} }}", fields.join(", "))
}

/// Options of `vm compare` that contradict each other, refused with a usage error.
fn refuse_clashes(a: &VmCompareArgs) -> Result<()> {
    // A direction says which ends a booted guest holds; elsewhere it would be ignored.
    if let (Some(d), Some(g)) = (&a.direction, &a.guest_at) {
        if !g.starts_with("guest") {
            return Err(crate::signals::exit(
                crate::signals::code::USAGE,
                format!("--direction {d} is for a guest virtperf boots; --guest {g} places the ends itself: drop --direction"),
            ));
        }
        if g.contains(':') {
            return Err(crate::signals::exit(
                crate::signals::code::USAGE,
                format!("--direction {d} and --guest {g} both name the direction: give one"),
            ));
        }
    }
    if let (true, Some(v)) = (a.explain, &a.vm) {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            format!("--vm {v} gives the workloads' trials the host's view; --explain runs no workloads: use `virtperf explain --host ADDR --vm {v}`"),
        ));
    }
    Ok(())
}

fn vm_compare(a: VmCompareArgs) -> Result<()> {
    let named = a.direction.as_deref().unwrap_or("host-guest");
    let direction = match Direction::parse_placement(&format!("guest:{named}")) {
        Some(Ok(d)) => d,
        _ => bail!("unknown --direction {named:?} (host-guest, guest-host, guest-guest, loopback)"),
    };
    refuse_clashes(&a)?;
    if a.explain && a.workloads == ["stream"] {
        return explain_stream_in_guest(a, direction);
    }
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
        ok,
        interrupted,
        ..
    } = execute_spec(
        &spec,
        &a.db,
        a.json,
        &a.lock,
        RunOptions {
            repeat: Some(Repeat::Fixed(a.runs)),
            tags: a.tags.resolve()?,
            vm: a.vm.clone(),
            vm_config: Some("guest".into()),
            ..RunOptions::default()
        },
    )?;
    let (tax, gate) = gated_tax(a.max_tax.as_ref(), &spec, &points);
    let info = guest_info(&trials);
    let (native, guest) = placements(&a, direction);
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "run_id": row.id,
                "direction": direction.name(),
                "native_placement": native,
                "guest_placement": guest,
                "guest": info,
                "rows": tax,
                "pooled": pooled(&tax, &points),
                "host_vm": a.vm.as_ref().map(|v| serde_json::json!({"vm": v.to_string(), "rows": host_rows(&points)})),
                "gate": a.max_tax.as_ref().map(|m| serde_json::json!({
                    "max_tax": m.text(),
                    "outcome": virtperf_report::decide::worst(gate.iter().map(|d| d.outcome)),
                    "decisions": gate,
                })),
            }))?
        );
    } else {
        let sides = format!("native ({native}) vs guest ({guest})");
        print_tax(&sides, info.as_ref(), &tax, &trials);
        for line in pooled_lines(&tax, &pooled(&tax, &points)) {
            println!("{line}");
        }
        if let Some(v) = &a.vm {
            print_host_rows(v, &host_rows(&points));
        }
        println!(
            "\nstored as run {} in {}; see `virtperf show {id}`, `virtperf compare {id}`",
            row.id,
            store.path().display(),
            id = row.id
        );
    }
    if tax.is_empty() && gate.is_empty() && !interrupted {
        bail!(
            "no workload finished on both sides: see `virtperf show {}`",
            row.id
        );
    }
    crate::decision::finish(&row, ok, interrupted, "--max-tax", &gate)
}

/// The guest side's guest as configured (the native side may be a guest too); QEMU's CPU
/// use is per trial, so it stays in the stored trials.
fn guest_info(trials: &[TrialRow]) -> Option<GuestInfo> {
    trials
        .iter()
        .filter(|t| t.config == "guest")
        .find_map(|t| t.result.as_ref().and_then(|r| r.guest.clone()))
        .map(|mut g| {
            g.qemu_cpu_s.clear();
            g
        })
}

/// The tax rows (native against guest) and, with a gate, its decision on every workload
/// it names that was planned, measured or not; each row marked with its own.
fn gated_tax(
    max: Option<&MaxTax>,
    spec: &virtperf_experiment::spec::Spec,
    points: &[virtperf_report::summary::PointSummary],
) -> (Vec<TaxRow>, Vec<virtperf_report::decide::Decision>) {
    let rows = compare::by_config(points, Some("native"));
    let mut tax = tax::rows(&rows, "guest");
    let Some(m) = max else {
        return (tax, Vec::new());
    };
    let planned: Vec<String> = spec.points.iter().map(|p| p.label.clone()).collect();
    let gate = m.decide(&planned, &tax);
    for r in &mut tax {
        let subject = format!("{} {}", r.workload, short_metric(&r.metric));
        r.gate = gate
            .iter()
            .find(|d| d.subject == subject)
            .map(|d| d.outcome);
    }
    (tax, gate)
}

/// `vm compare --explain --workloads stream`: the stream battery (quick, `--runs` tries)
/// on this host's loopback and into the guest virtperf boots, term by term.
fn explain_stream_in_guest(a: VmCompareArgs, direction: Direction) -> Result<()> {
    if a.native.is_some()
        || a.guest_at.is_some()
        || !matches!(direction.name(), "host-guest" | "guest-host")
    {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "vm compare --explain --workloads stream compares this host's loopback with a guest virtperf boots (host-guest or guest-host): drop --native/--guest",
        ));
    }
    let mut native = virtperf_explain::StreamOpts::new(true);
    // Trials of the quick battery's length, or `-l` where shorter.
    native.duration = native
        .duration
        .min(virtperf_lab::parse::duration(&a.duration)?);
    native.tries = a.runs.min(virtperf_explain::ExplainOpts::MAX_REMOTE_TRIES);
    native.allow_concurrent = a.lock.allow_concurrent;
    native.tags = a.tags.resolve()?;
    let mut g = a.guest.opts(a.json);
    // The guest end's CPU 1 (`-T 0,1`) must exist in it.
    g.vcpus = g.vcpus.max(2);
    let guest = virtperf_explain::StreamOpts {
        placement: Some(virtperf_place::Placement::Guest(direction, Box::new(g))),
        ..native.clone()
    };
    crate::explain_stream::compare(native, guest, &a.db, a.json, &a.lock)
}

/// `vm compare --explain`: explain's quick battery on both sides (this machine, or
/// `--native`; the booted guest, or `--guest`), side by side.
fn explain_in_guest(a: VmCompareArgs, direction: Direction) -> Result<()> {
    let parse = |p: &str| {
        p.parse::<virtperf_place::Placement>()
            .map_err(|e| crate::signals::exit(crate::signals::code::USAGE, format!("{e:#}")))
    };
    let native = a.native.as_deref().map(parse).transpose()?;
    let guest = match a.guest_at.as_deref() {
        Some(p) => parse(p)?,
        None => virtperf_place::Placement::Guest(direction, Box::new(a.guest.opts(a.json))),
    };
    crate::explain::explain(crate::explain::ExplainArgs {
        native,
        workload: crate::args::ExplainKind::Rr,
        stream: crate::args::ExplainStreamArgs {
            flows: None,
            reverse: false,
            window: None,
            link_rate: None,
        },
        quick: true,
        size: None,
        cpus: (Some(0), Some(1)),
        tries: Some(a.runs.min(virtperf_explain::ExplainOpts::MAX_REMOTE_TRIES)),
        duration: None,
        placement: Some(guest),
        host: None,
        vm: None,
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

/// The native-vs-guest table's lines: header, a row per tax, and under them why a row has
/// no interval (in its 22-character column that text pushed the row's gate and verdict
/// out of line).
fn tax_table(tax: &[TaxRow]) -> Vec<String> {
    let mut lines = vec![format!(
        "{:<22} {:<18} {:>12} {:>12} {:>12} {:>8}  {:<22} {:<12} verdict",
        "workload", "metric", "native", "guest", "guest/native", "tax", "tax 95% interval", "gate"
    )];
    let mut unbounded = Vec::new();
    for r in tax {
        let interval = match r.interval() {
            virtperf_report::decide::Interval::Bounded { low, high } => {
                format!("[{low:.1}%, {high:.1}%]")
            }
            virtperf_report::decide::Interval::None { why } => {
                unbounded.push(format!("{} {}: {why}", r.workload, short_metric(&r.metric)));
                format!("none ({})", unbounded.len())
            }
        };
        lines.push(format!(
            "{:<22} {:<18} {:>12} {:>12} {:>12.3} {:>7.1}%  {:<22} {:<12} {}",
            r.workload,
            format!("{} {}", short_metric(&r.metric), r.unit),
            fmt(r.native),
            fmt(r.guest),
            r.ratio,
            r.tax_pct,
            interval,
            r.gate.map_or("—", |g| g.words()),
            r.verdict
        ));
    }
    for (i, why) in unbounded.iter().enumerate() {
        lines.push(format!(
            "  ({}) no tax interval for {why} (more --runs may bound it; the verdict tests the difference, which needs no ratio)",
            i + 1
        ));
    }
    lines
}

/// The native-vs-guest table, its failures and where it is stored.
fn print_tax(sides: &str, info: Option<&GuestInfo>, tax: &[TaxRow], trials: &[TrialRow]) {
    match info {
        Some(g) => println!("{sides}  guest: {}", crate::render::guest(g)),
        None => println!("{sides}"),
    }
    for line in tax_table(tax) {
        println!("{line}");
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
}

/// Each latency row's figures with every round trip pooled into one histogram (what `show`
/// prints for the same run), native and guest, where both sides have them.
#[derive(Debug, serde::Serialize)]
struct Pooled {
    workload: String,
    metric: String,
    native: f64,
    guest: f64,
}

/// The pooled latencies of the table's latency rows (`vm compare --json`'s `pooled`).
fn pooled(tax: &[TaxRow], points: &[virtperf_report::summary::PointSummary]) -> Vec<Pooled> {
    let pooled = |workload: &str, config: &str, metric: &str| {
        let p = points.iter().find(|p| p.label == workload)?;
        let l = p
            .configs
            .iter()
            .find(|c| c.config == config)?
            .latency
            .as_ref()?;
        match metric {
            "p50_us" => Some(l.p50_us),
            "p99_us" => Some(l.p99_us),
            _ => None,
        }
    };
    tax.iter()
        .filter_map(|r| {
            Some(Pooled {
                workload: r.workload.clone(),
                metric: r.metric.clone(),
                native: pooled(&r.workload, "native", &r.metric)?,
                guest: pooled(&r.workload, "guest", &r.metric)?,
            })
        })
        .collect()
}

/// Under the table, where a latency row's figures (the mean of each try's own percentile:
/// what the tax and its interval are of) would print otherwise than every round trip
/// pooled into one histogram (what `show` prints for the same run), the pooled ones, so
/// the two commands' different numbers for one run say why they differ.
fn pooled_lines(tax: &[TaxRow], pooled: &[Pooled]) -> Vec<String> {
    let parts: Vec<String> = pooled
        .iter()
        .filter(|p| {
            tax.iter().any(|r| {
                r.workload == p.workload
                    && r.metric == p.metric
                    && (fmt(p.native) != fmt(r.native) || fmt(p.guest) != fmt(r.guest))
            })
        })
        .map(|p| {
            format!(
                "{} {} native {} guest {}",
                p.workload,
                short_metric(&p.metric),
                fmt(p.native),
                fmt(p.guest)
            )
        })
        .collect();
    if parts.is_empty() {
        return Vec::new();
    }
    vec![format!(
        "  latencies above: the mean of each try's own percentile (what the tax is of); every round trip pooled, as `show` prints them: {} µs",
        parts.join(", ")
    )]
}

/// One figure of the host's view of the guest side's VM (`vm compare --vm`), over the
/// guest side's trials of one workload.
#[derive(Debug, serde::Serialize)]
struct HostRow {
    workload: String,
    /// `host_vcpu_us`, `host_vcpu_wait_us`, `host_main_us`, `host_io_us`, `host_vhost_us`,
    /// `host_kvm_exits`, `host_halt_exits` (docs/json.md's `host_vm`).
    metric: String,
    unit: String,
    mean: f64,
    /// Trials it is the mean of.
    n: usize,
}

/// The host view's figures the guest side's trials stored, per workload.
fn host_rows(points: &[virtperf_report::summary::PointSummary]) -> Vec<HostRow> {
    let mut rows = Vec::new();
    for p in points {
        let Some(g) = p.configs.iter().find(|c| c.config == "guest") else {
            continue;
        };
        for m in g.metrics.iter().filter(|m| m.name.starts_with("host_")) {
            rows.push(HostRow {
                workload: p.label.clone(),
                metric: m.name.clone(),
                unit: m.unit.clone(),
                mean: m.summary.mean,
                n: m.summary.n,
            });
        }
    }
    rows
}

/// `vm compare --vm`'s lines under the table: the host's share of each guest workload.
fn print_host_rows(vm: &virtperf_measure::vm::VmSpec, rows: &[HostRow]) {
    if rows.is_empty() {
        println!(
            "
host view of {vm}: no guest-side trial has it (see `virtperf show`)"
        );
        return;
    }
    println!(
        "
host view of {vm} over the guest side's trials (mean of each workload's tries):"
    );
    let mut workloads: Vec<&str> = rows.iter().map(|r| r.workload.as_str()).collect();
    workloads.dedup();
    for w in workloads {
        let parts: Vec<String> = rows
            .iter()
            .filter(|r| r.workload == w)
            .map(|r| {
                let what = match r.metric.as_str() {
                    "host_vcpu_us" => "vCPU threads' CPU",
                    "host_vcpu_wait_us" => "their run-queue wait",
                    "host_main_us" => "main loop",
                    "host_io_us" => "I/O threads",
                    "host_vhost_us" => "vhost workers",
                    "host_kvm_exits" => "VM exits",
                    "host_halt_exits" => "halt exits",
                    other => other,
                };
                format!("{what} {} {} (n={})", fmt(r.mean), r.unit, r.n)
            })
            .collect();
        println!("  {w:<20} {}", parts.join(", "));
    }
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workload: &str, low: Option<f64>, why: Option<&str>) -> TaxRow {
        TaxRow {
            workload: workload.into(),
            metric: "p50_us".into(),
            unit: "µs".into(),
            native: 80.0,
            guest: 800.0,
            ratio: 10.0,
            tax_pct: 900.0,
            tax_low: low,
            tax_high: low.map(|l| l + 100.0),
            no_interval: why.map(str::to_string),
            gate: None,
            verdict: "guest worse".into(),
        }
    }

    /// A row without an interval keeps the table's columns: "none (1)" in its column, and
    /// why under the table; a bounded row is unchanged.
    #[test]
    fn a_row_without_an_interval_keeps_the_columns_and_says_why_below() {
        let why = "the baseline's interval reaches 0: the ratio's interval is unbounded";
        let lines = tax_table(&[row("crr", None, Some(why)), row("rr", Some(500.0), None)]);
        assert_eq!(lines.len(), 4, "{lines:#?}");
        let col = |l: &str| l.find("guest worse");
        assert_eq!(col(&lines[1]), col(&lines[2]), "{lines:#?}");
        assert!(lines[1].contains("none (1)"), "{}", lines[1]);
        assert!(lines[2].contains("[500.0%, 600.0%]"), "{}", lines[2]);
        assert!(
            lines[3].starts_with("  (1) no tax interval for crr p50: ") && lines[3].contains(why),
            "{}",
            lines[3]
        );
    }
}
