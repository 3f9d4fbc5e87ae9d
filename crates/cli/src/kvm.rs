//! `virtperf kvm`: real /dev/kvm guests measuring exit round trips and halt/wake-up latency.

use std::fmt::Write;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use virtperf_kvm::{ExitOpts, HaltOpts, HaltReport};

#[derive(Debug, Args)]
pub struct KvmArgs {
    #[command(subcommand)]
    pub command: KvmCommand,
}

#[derive(Debug, Subcommand)]
pub enum KvmCommand {
    /// What /dev/kvm offers here (platform, halt-poll capability, binary stats)
    Info {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Round-trip cost of VM exits: port I/O and MMIO to user space, HLT, CPUID
    Exits {
        /// Timed iterations per case
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
        iterations: u32,
        /// Pin the vCPU thread to this CPU
        #[arg(long)]
        cpu: Option<u32>,
        /// Print JSON
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        lock: crate::machine::LockArgs,
    },
    /// Halt/wake-up latency: a halted vCPU woken by an injected interrupt, per halt-poll setting
    Halt(HaltArgs),
}

/// `kvm halt`'s arguments.
#[derive(Debug, Args)]
pub struct HaltArgs {
    /// Wake-ups per setting
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub wakeups: u32,
    /// Random idle time before each wake-up: MIN..MAX (e.g. 5us..40us)
    #[arg(long, default_value = "50us..500us", value_parser = parse_range)]
    pub delay: (Duration, Duration),
    /// Per-VM halt polling (KVM_CAP_HALT_POLL); a list sweeps it: 0,10us,50us,200us
    #[arg(long, value_delimiter = ',', value_parser = parse_poll, default_value = "0,10us,50us,200us")]
    pub halt_poll: Vec<Duration>,
    /// CPU for the vCPU thread
    #[arg(long, default_value_t = 1)]
    pub vcpu_cpu: u32,
    /// CPU for the injecting thread
    #[arg(long, default_value_t = 0)]
    pub injector_cpu: u32,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
}

/// What `kvm:kvm_exit` counted while the probe ran, against the exits the probe made: a
/// tracepoint that stayed silent through them is named as such (PVM, for one, does not
/// fire it), never read as "no exits".
fn host_trace(
    c: &virtperf_measure::trace::Counters,
    r: &virtperf_kvm::ExitReport,
    warmup: u32,
) -> virtperf_kvm::HostTrace {
    let (mut counted, failed) = c.stop();
    let probe_exits: u64 = r
        .cases
        .iter()
        // The cases that leave KVM_RUN for user space: each iteration surely exited (cpuid
        // is handled in the kernel and, emulated, may not exit at all).
        .filter(|x| x.iterations > 0 && matches!(x.name.as_str(), "pio" | "mmio" | "hlt"))
        .map(|x| u64::from(x.iterations + warmup))
        .sum();
    let note = match counted.get(virtperf_wire::counter::KVM_EXITS) {
        None => Some(format!(
            "kvm:kvm_exit not counted: {}",
            c.missing.iter().chain(&failed).next().map_or("unknown", |m| m.as_str())
        )),
        Some(0) if probe_exits > 0 => Some(format!(
            "kvm:kvm_exit stayed silent through the probe's {probe_exits} exits: this host's KVM does not fire it (PVM, for one, handles exits outside it), so host-side exit counts are not available here"
        )),
        Some(n) if *n < probe_exits => Some(format!(
            "kvm:kvm_exit counted {n} of the probe's {probe_exits} exits"
        )),
        Some(_) => None,
    };
    // A tracepoint that never fired measured nothing: its zeros are not counts.
    if counted.get(virtperf_wire::counter::KVM_EXITS) == Some(&0) && probe_exits > 0 {
        counted.clear();
    }
    virtperf_kvm::HostTrace {
        probe_exits,
        counted,
        note,
    }
}

/// Halt-poll windows: 0 to 1 s.
fn parse_poll(s: &str) -> Result<Duration> {
    virtperf_lab::parse::duration_up_to(s, Duration::from_secs(1), "1s")
}

fn parse_range(s: &str) -> Result<(Duration, Duration)> {
    let (a, b) = s
        .split_once("..")
        .or_else(|| s.split_once(','))
        .ok_or_else(|| anyhow!("invalid range {s:?}: expected MIN..MAX like 5us..40us"))?;
    let (a, b) = (
        virtperf_lab::parse::duration(a)?,
        virtperf_lab::parse::duration(b)?,
    );
    if a > b {
        bail!("invalid range {s:?}: MIN is above MAX");
    }
    if b > Duration::from_secs(1) {
        bail!("invalid range {s:?}: at most 1s between wake-ups");
    }
    Ok((a, b))
}

/// `virtperf kvm …`
pub fn kvm(a: KvmArgs) -> Result<()> {
    match a.command {
        KvmCommand::Info { json } => {
            let info = virtperf_kvm::available().map_err(|e| anyhow!("{e}"))?;
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                println!(
                    "/dev/kvm: API {}, platform {}, per-VM halt polling {}, binary stats {}",
                    info.api_version,
                    info.platform,
                    if info.halt_poll_cap { "yes" } else { "no" },
                    if info.stats_fd { "yes" } else { "no" }
                );
            }
        }
        KvmCommand::Exits {
            iterations,
            cpu,
            json,
            lock,
        } => {
            if let Some(c) = cpu {
                check_cpu("--cpu", c)?;
            }
            let _machine = crate::machine::take(&lock)?;
            let cpus = virtperf_measure::trace::all_cpus();
            let counters =
                virtperf_measure::trace::Counters::open(virtperf_measure::trace::KVM_EXIT, &cpus);
            counters.start();
            let warmup = (iterations / 20).max(10);
            let mut r = virtperf_kvm::exits(&ExitOpts {
                iterations,
                warmup,
                cpu,
            })
            .map_err(|e| anyhow!("{e}"))?;
            r.host_trace = Some(host_trace(&counters, &r, warmup));
            if json {
                let out = Exits {
                    schema: "virtperf.kvm-exits/1",
                    env: virtperf_measure::env::fingerprint(),
                    report: &r,
                };
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            print!("{}", render_exits(&r, iterations));
        }
        KvmCommand::Halt(h) => halt(h)?,
    }
    Ok(())
}

/// A usage error (exit 2) naming the flag where `cpu` is not one this process may run on,
/// before any guest is made: pinning to it fails later with only "sched_setaffinity
/// failed: Invalid argument".
fn check_cpu(flag: &str, cpu: u32) -> Result<()> {
    if virtperf_lab::cpu_allowed(cpu) {
        return Ok(());
    }
    Err(crate::signals::exit(
        crate::signals::code::USAGE,
        format!("{flag} {cpu}: that CPU does not exist or is not allowed here (see `nproc`)"),
    ))
}

/// `kvm halt`: one run per halt-poll setting, printed or as JSON.
fn halt(a: HaltArgs) -> Result<()> {
    let HaltArgs {
        wakeups,
        delay,
        halt_poll,
        vcpu_cpu,
        injector_cpu,
        json,
        lock,
    } = a;
    check_cpu("--vcpu-cpu", vcpu_cpu)?;
    check_cpu("--injector-cpu", injector_cpu)?;
    let _machine = crate::machine::take(&lock)?;
    if vcpu_cpu == injector_cpu {
        bail!(
            "--vcpu-cpu and --injector-cpu must differ: the injector must run while the vCPU halts"
        );
    }
    let env = virtperf_measure::env::fingerprint();
    // A signal ends the setting in progress at the wake-up in flight (its warm-up and one
    // measured wake-up always run) and skips the rest (a second one quits at once); the
    // settings that ran are printed.
    let cut = crate::signals::cut_on_termination()?;
    let mut reports = Vec::new();
    for poll in &halt_poll {
        if cut.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let opts = HaltOpts {
            wakeups,
            delay_min_us: delay.0.as_micros() as u32,
            delay_max_us: delay.1.as_micros() as u32,
            halt_poll_ns: Some(poll.as_nanos() as u64),
            vcpu_cpu: Some(vcpu_cpu),
            injector_cpu: Some(injector_cpu),
        };
        let r = virtperf_kvm::halt_until(&opts, &cut).map_err(|e| anyhow!("{e}"))?;
        reports.push(r);
    }
    if json {
        let out = Halts {
            schema: "virtperf.kvm-halt/1",
            env,
            runs: &reports,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render_halt(&reports, delay));
    }
    let sig = crate::signals::received();
    if sig != 0 {
        return Err(crate::signals::exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {}: {} of {} halt-poll settings ran and are printed{}",
                crate::signals::name(sig),
                reports.len(),
                halt_poll.len(),
                reports
                    .last()
                    .filter(|r| r.wakeups < wakeups)
                    .map_or(String::new(), |r| format!(
                        ", the last with {} of {wakeups} wake-ups",
                        r.wakeups
                    ))
            ),
        ));
    }
    Ok(())
}

/// What `kvm exits --json` prints: the report, with what produced it.
#[derive(serde::Serialize)]
struct Exits<'a> {
    schema: &'static str,
    env: virtperf_wire::Env,
    #[serde(flatten)]
    report: &'a virtperf_kvm::ExitReport,
}

/// What `kvm halt --json` prints: one run per halt-poll setting, with what produced them.
#[derive(serde::Serialize)]
struct Halts<'a> {
    schema: &'static str,
    env: virtperf_wire::Env,
    runs: &'a [HaltReport],
}

/// The exit round trips as a table, with what the host's tracepoint counted.
fn render_exits(r: &virtperf_kvm::ExitReport, iterations: u32) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "virtperf kvm exits  {iterations} iterations per case  TSC {} kHz",
        r.tsc_khz
    );
    let _ = writeln!(
        s,
        "  {:<8} {:>9} {:>9} {:>9} {:>9} │ {:>10} {:>10}  note",
        "case", "min µs", "p50 µs", "p99 µs", "max µs", "p50 cyc", "p99 cyc"
    );
    if let Some(h) = &r.host_trace {
        let counts: Vec<String> = h.counted.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(
            s,
            "  host kvm:kvm_exit over the probe: {} (the probe made {} exits){}",
            if counts.is_empty() {
                "—".to_string()
            } else {
                counts.join(", ")
            },
            h.probe_exits,
            h.note
                .as_ref()
                .map_or(String::new(), |n| format!("\n    {n}"))
        );
    }
    for c in &r.cases {
        let note = c.note.as_deref().unwrap_or("");
        let (Some(ns), Some(cyc)) = (&c.ns, &c.cycles) else {
            // Not measured: its reason, not a row of zeros.
            let _ = writeln!(s, "  {:<8} {:>39} │ {:>21}  {note}", c.name, "—", "—");
            continue;
        };
        let _ = writeln!(
            s,
            "  {:<8} {:>9.2} {:>9.2} {:>9.2} {:>9.2} │ {:>10.0} {:>10.0}  {note}",
            c.name,
            ns.min / 1e3,
            ns.p50 / 1e3,
            ns.p99 / 1e3,
            ns.max / 1e3,
            cyc.p50,
            cyc.p99,
        );
    }
    s
}

fn render_halt(reports: &[HaltReport], delay: (Duration, Duration)) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "virtperf kvm halt  wake-ups after {}–{} µs idle; latency = injection → first guest instruction of the handler",
        delay.0.as_micros(),
        delay.1.as_micros()
    );
    let _ = writeln!(
        s,
        "  {:>10} {:>8} {:>8} {:>8} {:>9} │ {:>14} {:>7} │ {:>10} {:>10}",
        "halt-poll",
        "p50 µs",
        "p90 µs",
        "p99 µs",
        "max µs",
        "vCPU CPU µs/wk",
        "busy%",
        "exits/wk",
        "polls ok/wk"
    );
    // Without KVM's binary stats neither count was read: "-", not 0.
    let f = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.2}"));
    for r in reports {
        let ok = r
            .stats
            .get("halt_successful_poll")
            .map(|&n| n as f64 / f64::from(r.wakeups.max(1)));
        let _ = writeln!(
            s,
            "  {:>10} {:>8.2} {:>8.2} {:>8.2} {:>9.2} │ {:>14.1} {:>7.1} │ {:>10} {:>10}",
            // None: the module's default was left alone (not a 0 µs setting).
            r.halt_poll_ns
                .map_or_else(|| "default".to_string(), |ns| format!("{}µs", ns / 1000)),
            r.latency_ns.p50 / 1e3,
            r.latency_ns.p90 / 1e3,
            r.latency_ns.p99 / 1e3,
            r.latency_ns.max / 1e3,
            r.vcpu_cpu_ns_per_wakeup / 1e3,
            r.vcpu_busy_pct,
            f(r.exits_per_wakeup),
            f(ok)
        );
    }
    // Each setting's notes, each said once however many settings share it.
    let mut notes: Vec<&str> = Vec::new();
    for n in reports
        .iter()
        .filter_map(|r| r.note.as_deref())
        .flat_map(|n| n.split("; "))
    {
        if !notes.contains(&n) {
            notes.push(n);
        }
    }
    for n in notes {
        let _ = writeln!(s, "  note: {n}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_kvm::{ExitCase, ExitReport, Summary};

    /// A case the probe could not run prints its reason under dashes, not a row of 0.00 µs.
    #[test]
    fn an_unmeasured_exit_case_prints_no_times() {
        let measured = Summary::from_values(&[2000, 3000]);
        let case = |name: &str, ns: Option<Summary>, note: &str| ExitCase {
            name: name.into(),
            iterations: if ns.is_some() { 2 } else { 0 },
            cycles: ns,
            ns,
            note: Some(note.into()),
        };
        let r = ExitReport {
            tsc_khz: 1_000_000,
            cases: vec![
                case("pio", Some(measured), "timed"),
                case("hlt", None, "not measurable here: no HLT exit"),
            ],
            host_trace: None,
        };
        let text = render_exits(&r, 2);
        let hlt = text
            .lines()
            .find(|l| l.trim_start().starts_with("hlt"))
            .expect("hlt row");
        assert!(hlt.contains("not measurable here: no HLT exit"), "{hlt}");
        assert!(!hlt.contains("0.00"), "{hlt}");
        let pio = text
            .lines()
            .find(|l| l.trim_start().starts_with("pio"))
            .expect("pio row");
        assert!(pio.contains("2.00") && pio.contains("3.00"), "{pio}");
    }
}
