//! Command-line front end for the crate, for measuring by hand until `virtperf kvm` exists:
//!
//! ```text
//! cargo run --release --example kvm_bench -- info
//! cargo run --release --example kvm_bench -- exits [--iterations N] [--warmup N] [--cpu C] [--json]
//! cargo run --release --example kvm_bench -- halt [--wakeups N] [--delay MIN-MAX(µs)]
//!     [--poll NS|none] [--vcpu-cpu C] [--injector-cpu C] [--json]
//! cargo run --release --example kvm_bench -- debugfs
//! ```

use std::process::ExitCode;

use virtperf_kvm::{available, debugfs_stats, exits, halt, ExitOpts, HaltOpts, Summary};

fn us(s: &Summary) -> String {
    format!(
        "p50 {:.2} p90 {:.2} p99 {:.2} min {:.2} max {:.2} mean {:.2} µs",
        s.p50 / 1e3,
        s.p90 / 1e3,
        s.p99 / 1e3,
        s.min / 1e3,
        s.max / 1e3,
        s.mean / 1e3
    )
}

fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    v.ok_or(format!("{flag} needs a value"))?
        .parse()
        .map_err(|_| format!("{flag}: not a number"))
}

fn run() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let cmd = args.next().unwrap_or_else(|| "info".into());
    let mut json = false;
    let mut eo = ExitOpts::default();
    let mut ho = HaltOpts::default();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json = true,
            "--iterations" => eo.iterations = num(&a, args.next())?,
            "--warmup" => eo.warmup = num(&a, args.next())?,
            "--cpu" => eo.cpu = Some(num(&a, args.next())?),
            "--wakeups" => ho.wakeups = num(&a, args.next())?,
            "--vcpu-cpu" => ho.vcpu_cpu = Some(num(&a, args.next())?),
            "--injector-cpu" => ho.injector_cpu = Some(num(&a, args.next())?),
            "--poll" => {
                let v = args.next().ok_or("--poll needs a value")?;
                ho.halt_poll_ns = if v == "none" {
                    None
                } else {
                    Some(v.parse().map_err(|_| "--poll: ns or none")?)
                };
            }
            "--delay" => {
                let v = args.next().ok_or("--delay needs MIN-MAX")?;
                let (lo, hi) = v.split_once('-').ok_or("--delay needs MIN-MAX")?;
                ho.delay_min_us = lo.parse().map_err(|_| "--delay: µs")?;
                ho.delay_max_us = hi.parse().map_err(|_| "--delay: µs")?;
            }
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let e = |e: virtperf_kvm::KvmError| e.to_string();
    match cmd.as_str() {
        "info" => println!("{:?}", available().map_err(e)?),
        "debugfs" => println!("{:?}", debugfs_stats().map_err(e)?),
        "exits" => {
            let r = exits(&eo).map_err(e)?;
            if json {
                println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
            } else {
                println!("tsc {} kHz", r.tsc_khz);
                for c in &r.cases {
                    println!(
                        "{:6} n={} {}",
                        c.name,
                        c.iterations,
                        c.ns.as_ref().map_or_else(|| "not measured".into(), us)
                    );
                    if let Some(n) = &c.note {
                        println!("       {n}");
                    }
                }
            }
        }
        "halt" => {
            let r = halt(&ho).map_err(e)?;
            if json {
                println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
            } else {
                println!(
                    "poll {:?} delay {}-{} µs, {} wake-ups",
                    r.halt_poll_ns, ho.delay_min_us, ho.delay_max_us, r.wakeups
                );
                println!("latency  {}", us(&r.latency_ns));
                println!("irq_line {}", us(&r.irq_line_ns));
                println!(
                    "vCPU CPU {:.2} µs/wake-up, busy {:.1}%, exits/wake-up {}, spurious {}",
                    r.vcpu_cpu_ns_per_wakeup / 1e3,
                    r.vcpu_busy_pct,
                    r.exits_per_wakeup
                        .map_or_else(|| "-".to_string(), |e| format!("{e:.2}")),
                    r.spurious
                );
                println!("stats {:?}", r.stats);
                if let Some(n) = &r.note {
                    println!("note {n}");
                }
            }
        }
        other => {
            return Err(format!(
                "unknown command {other} (info, exits, halt, debugfs)"
            ))
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("kvm_bench: {msg}");
            ExitCode::FAILURE
        }
    }
}
