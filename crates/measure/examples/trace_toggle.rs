//! For `bench/trace_toggle.sh` only: opens `--trace`'s counters (or `--trace-all`'s) on the
//! given CPUs for half of every period and closes them for the other half, printing
//! `on NS` / `off NS` (CLOCK_MONOTONIC) at each edge, so the rate of a test running beside
//! it can be compared between adjacent halves: the counting overhead with the machine's own
//! slow swings (seconds long here) cancelled out, which whole-run comparisons cannot do.
//!
//! Usage: trace_toggle CPUS HALF_MS SECONDS [all]

use std::io::Write;
use std::time::{Duration, Instant};

use virtperf_measure::trace::{Counters, EXITS, MORE};

fn now_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: trace_toggle CPUS HALF_MS SECONDS [all]";
    let (Some(cpus), Some(half), Some(secs)) = (args.get(1), args.get(2), args.get(3)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let cpus: Vec<u32> = cpus.split(',').filter_map(|c| c.parse().ok()).collect();
    let (Ok(half), Ok(secs)) = (half.parse::<u64>(), secs.parse::<u64>()) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let specs: Vec<_> = if args.get(4).is_some_and(|a| a == "all") {
        EXITS.iter().chain(MORE).copied().collect()
    } else {
        EXITS.to_vec()
    };
    let half = Duration::from_millis(half);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut out = std::io::stdout().lock();
    while Instant::now() < end {
        let c = Counters::open(&specs, &cpus);
        if !c.missing.is_empty() {
            eprintln!("not counted: {:?}", c.missing);
        }
        c.start();
        let _ = writeln!(out, "on {}", now_ns());
        let _ = out.flush();
        std::thread::sleep(half);
        let _ = c.stop();
        drop(c);
        let _ = writeln!(out, "off {}", now_ns());
        let _ = out.flush();
        std::thread::sleep(half);
    }
}
