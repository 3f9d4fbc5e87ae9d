//! `virtperf wake`: thread wake-up latency by mechanism, placement and wait strategy.

use std::fmt::Write;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use serde::Serialize;
use virtperf_wake::{Mech, Placement, Strategy, WakeOpts, WakeReport};

#[derive(Debug, Args)]
pub struct WakeArgs {
    /// futex, eventfd, pipe, condvar, unix, tcp
    #[arg(long, default_value = "futex")]
    pub mech: Mech,
    /// same (both threads on one CPU), cross (two CPUs), none (unpinned)
    #[arg(long, default_value = "cross", value_parser = ["same", "cross", "none"])]
    pub placement: String,
    /// CPUs for the two threads (default 0,1; `same` uses the first)
    #[arg(long, default_value = "0,1", value_parser = virtperf_lab::parse::cpus)]
    pub cpus: (Option<u32>, Option<u32>),
    /// block (sleep until woken), spin (never sleep), poll (spin up to --poll, then sleep)
    #[arg(long, value_parser = ["block", "spin", "poll"])]
    pub strategy: Option<String>,
    /// Poll window before blocking; a comma-separated list sweeps it (0 = block)
    #[arg(long, value_delimiter = ',', value_parser = parse_window)]
    pub poll: Vec<Duration>,
    /// Measured duration of each run
    #[arg(long, short = 'l', default_value = "2s", value_parser = virtperf_lab::parse::duration)]
    pub duration: Duration,
    /// Idle time between round trips (the initiator sleeps), as between packets of a
    /// request stream; poll windows shorter than it fall through to blocking
    #[arg(long, default_value = "0", value_parser = parse_window)]
    pub gap: Duration,
    /// Print JSON
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
}

/// Poll windows and idle gaps: 0 to 1 s (a longer one would make a message take seconds).
fn parse_window(s: &str) -> Result<Duration> {
    virtperf_lab::parse::duration_up_to(s, Duration::from_secs(1), "1s")
}

/// The placement `--placement` and `--cpus` ask for; a usage error (exit 2) where the CPUs
/// cannot be: two the same for `cross`, or one this process may not run on (which hung
/// the threads' rendezvous before the check in `virtperf_wake`).
fn placement(a: &WakeArgs) -> Result<Placement> {
    let usage = |m: String| crate::signals::exit(crate::signals::code::USAGE, m);
    let first = a.cpus.0.or(a.cpus.1).unwrap_or(0);
    let p = match a.placement.as_str() {
        "same" => Placement::Same(first),
        "cross" => {
            let (x, y) = (a.cpus.0.unwrap_or(0), a.cpus.1.unwrap_or(1));
            if x == y {
                return Err(usage(format!(
                    "--placement cross needs two different CPUs (got {x},{y})"
                )));
            }
            Placement::Cross(x, y)
        }
        _ => Placement::Unpinned,
    };
    let cpus = match p {
        Placement::Same(c) => vec![c],
        Placement::Cross(x, y) => vec![x, y],
        Placement::Unpinned => vec![],
    };
    if let Some(c) = cpus.into_iter().find(|c| !virtperf_lab::cpu_allowed(*c)) {
        return Err(usage(format!(
            "--cpus: CPU {c} does not exist or is not allowed here (see `nproc`)"
        )));
    }
    Ok(p)
}

/// `virtperf wake`
pub fn wake(a: WakeArgs) -> Result<()> {
    let placement = placement(&a)?;
    let _machine = crate::machine::take(&a.lock)?;
    let strategies: Vec<Strategy> = match (a.strategy.as_deref(), a.poll.as_slice()) {
        (Some("block"), []) | (None, []) => vec![Strategy::Block],
        (Some("spin"), []) => vec![Strategy::Spin],
        (Some("poll"), []) => bail!("--strategy poll needs --poll WINDOW (e.g. 50us)"),
        (None | Some("poll"), windows) => windows
            .iter()
            .map(|w| {
                if w.is_zero() {
                    Strategy::Block
                } else {
                    Strategy::Poll(*w)
                }
            })
            .collect(),
        (Some(s), _) => bail!("--poll applies to the poll strategy, not --strategy {s}"),
    };
    // What produced the numbers (the idle path above all: a cross-CPU wake-up's cost is
    // mostly the woken CPU's way out of idle), read before the runs, not during them.
    let env = virtperf_measure::env::fingerprint();
    // A signal ends the run in progress early and skips the rest; what ran is printed.
    let cut = crate::signals::cut_on_termination()?;
    let mut reports = Vec::new();
    for strategy in strategies {
        if cut.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let opts = WakeOpts {
            mech: a.mech,
            strategy,
            placement,
            duration: a.duration,
            gap: a.gap,
        };
        let r = virtperf_wake::run_until(&opts, &cut).map_err(|e| anyhow!(e))?;
        reports.push(r);
    }
    let mut warnings = warnings(&reports);
    let sig = crate::signals::received();
    if sig != 0 {
        // The run in progress when the signal came ended there (its round trips over its
        // rate give the time it ran); one that came between runs cut none.
        let short = reports.last().filter(|r| {
            r.round_trips_per_s > 0.0
                && (r.round_trips as f64 / r.round_trips_per_s) < 0.99 * a.duration.as_secs_f64()
        });
        let short = short.map(|r| r.opts.strategy);
        warnings.push(format!(
            "interrupted by {}: {} of {} runs ran{}",
            crate::signals::name(sig),
            reports.len(),
            a.poll.len().max(1),
            short.map_or(String::new(), |s| format!(
                "; the last ({}) stopped before its {:.1} s",
                strategy_text(s),
                a.duration.as_secs_f64()
            ))
        ));
    }
    if a.json {
        let out = Output {
            schema: "virtperf.wake/1",
            env: &env,
            runs: &reports,
            warnings: &warnings,
        };
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", render(&reports));
        println!("  idle path: {}", env.idle_explained);
        for w in &warnings {
            println!("  warning: {w}");
        }
    }
    if sig != 0 {
        return Err(crate::signals::exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {}: the runs that ran are printed",
                crate::signals::name(sig)
            ),
        ));
    }
    Ok(())
}

/// What `wake --json` prints: the runs, what produced them, and what makes them read
/// otherwise than as wake-ups.
#[derive(Serialize)]
struct Output<'a> {
    schema: &'static str,
    env: &'a virtperf_wire::Env,
    runs: &'a [WakeReport],
    warnings: &'a [String],
}

/// Runs whose threads shared one CPU while the waiter did not sleep at once: the peer
/// could not run until the waiter gave the CPU up, so the latency is that wait, not a
/// wake-up. Said only where the run's own median shows it (a kernel that preempted the
/// waiter at once would not).
fn warnings(reports: &[WakeReport]) -> Vec<String> {
    reports
        .iter()
        .filter(|r| matches!(r.opts.placement, Placement::Same(_)))
        .filter_map(|r| {
            let p50 = r.one_way.p50_us;
            match r.opts.strategy {
                Strategy::Spin if p50 >= 500.0 => Some(format!(
                    "spin on one CPU: a spinning thread never gives up the CPU its peer needs, so each message waited for the scheduler to preempt it (one-way p50 {p50:.0} µs: the scheduler's time slice, not a wake-up); spin across CPUs (--placement cross)"
                )),
                Strategy::Poll(w) if p50 >= 0.5 * w.as_secs_f64() * 1e6 => Some(format!(
                    "poll {} µs on one CPU: the polling thread holds the CPU its peer needs until its window runs out, so each message waited about the window (one-way p50 {p50:.1} µs); poll across CPUs (--placement cross)",
                    w.as_micros()
                )),
                _ => None,
            }
        })
        .collect()
}

fn strategy_text(s: Strategy) -> String {
    match s {
        Strategy::Block => "block".into(),
        Strategy::Spin => "spin".into(),
        Strategy::Poll(d) => format!("poll {}µs", d.as_micros()),
    }
}

fn render(reports: &[WakeReport]) -> String {
    let mut s = String::new();
    let Some(first) = reports.first() else {
        return s;
    };
    let place = match first.opts.placement {
        Placement::Same(c) => format!("same CPU ({c})"),
        Placement::Cross(a, b) => format!("cross CPU ({a} ↔ {b})"),
        Placement::Unpinned => "unpinned".into(),
    };
    let _ = writeln!(
        s,
        "virtperf wake  {}  {place}  {:.1} s per run{}",
        first.opts.mech.name(),
        first.opts.duration.as_secs_f64(),
        if first.opts.gap.is_zero() {
            String::new()
        } else {
            format!(
                "  {} µs idle between round trips",
                first.opts.gap.as_micros()
            )
        }
    );
    let _ = writeln!(
        s,
        "  {:<12} {:>12} │ one-way µs {:>7} {:>7} {:>7} {:>8} │ round trip µs {:>7} {:>7} │ {:>10} {:>6}",
        "strategy", "round trip/s", "p50", "p90", "p99", "p99.9", "p50", "p99", "CPU µs/msg", "busy%"
    );
    for r in reports {
        let _ = writeln!(
            s,
            "  {:<12} {:>12.0} │ {:>18.2} {:>7.2} {:>7.2} {:>8.2} │ {:>21.2} {:>7.2} │ {:>10.2} {:>6.1}",
            strategy_text(r.opts.strategy),
            r.round_trips_per_s,
            r.one_way.p50_us,
            r.one_way.p90_us,
            r.one_way.p99_us,
            r.one_way.p999_us,
            r.round_trip.p50_us,
            r.round_trip.p99_us,
            r.cpu_us_per_message,
            r.cpu_busy_pct
        );
    }
    let _ = writeln!(
        s,
        "  (busy% is both threads' CPU time over wall time: 200% = two CPUs spinning)"
    );
    s
}
