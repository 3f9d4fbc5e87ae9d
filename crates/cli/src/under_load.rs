//! `rr --under-load streams=N[,reverse][,pairs=K]`: latency under load, flent's RRUL idea
//! for a VM's queue. An rr measured while N bulk streams run through the same path, and
//! the same rr alone, interleaved (alone, loaded, alone, loaded … K pairs, the order
//! flipped every pair), so the latency the load adds is one number per pair, summarized
//! with its confidence interval. The streams start half a second before the rr and end
//! after it: the rr is loaded from its first transaction to its last. Both tests of a
//! loaded trial go through the same site, so on a netns placement they share its veth
//! pair, in a guest its virtio queues. An agent elsewhere (remote, ssh, a guest) runs one
//! test at a time under its machine's lock: the site holds that machine for each loaded
//! trial, so the rr runs beside the streams instead of queueing behind them. A spec
//! config's `load = "streams=N"` runs each of its trials the same way (`experiment`).

use anyhow::Result;
use serde::Serialize;
use virtperf_lab::plan::Plan;
pub use virtperf_lab::under_load::{parse, stream_plan, UnderLoad};
use virtperf_report::stats::{summarize, Summary};
use virtperf_wire::{Outcome, TestResult};

/// One metric, alone and loaded: each side's median over its trials, and the paired
/// differences (loaded − alone) with their mean's 95 % confidence interval.
#[derive(Debug, Serialize)]
struct Added {
    metric: &'static str,
    /// Median over the trials alone; `None` when no trial completed a transaction.
    alone: Option<f64>,
    /// Median over the loaded trials; `None` likewise.
    loaded: Option<f64>,
    added: Summary,
}

/// What `--under-load --json` prints.
#[derive(Debug, Serialize)]
struct Report {
    streams: u32,
    reverse: bool,
    pairs: u32,
    added: Vec<Added>,
    /// The streams' receiver throughput in each loaded trial, Mbit/s.
    stream_mbps: Vec<f64>,
    alone: Vec<TestResult>,
    loaded: Vec<TestResult>,
    streams_results: Vec<TestResult>,
}

/// Runs the interleaved pairs on `site` (both tests of a loaded trial at once, through
/// the same path) and prints the report (JSON when `json`). When `cut` is raised (a
/// signal) no new trial starts: the pairs completed so far are reported, and the command
/// ends as stopped by that signal.
pub fn run(
    site: &dyn virtperf_place::Site,
    rr: &Plan,
    stream: &Plan,
    load: UnderLoad,
    json: bool,
    cut: Option<&std::sync::atomic::AtomicBool>,
) -> Result<()> {
    let stopped = || cut.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst));
    let (mut alone, mut loaded, mut streams) = (Vec::new(), Vec::new(), Vec::new());
    'pairs: for pair in 0..load.pairs {
        for with_load in if pair % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        } {
            if stopped() {
                break 'pairs;
            }
            if !json {
                eprint!(
                    "\rpair {}/{}: rr {}   ",
                    pair + 1,
                    load.pairs,
                    if with_load { "with load" } else { "alone" }
                );
            }
            if !with_load {
                alone.push(site.run(rr, &|_| {})?);
                continue;
            }
            let (mut r, s) = site.run_beside(stream, rr, virtperf_lab::under_load::LEAD)?;
            virtperf_lab::under_load::note_beside(&mut r, load.streams);
            loaded.push(r);
            streams.push(s.map_err(|e| e.context("the streams beside the rr failed"))?);
        }
    }
    if !json {
        eprint!("\r{:60}\r", "");
    }
    // Only whole pairs are compared: a pair cut in half is left out.
    let done = alone.len().min(loaded.len());
    alone.truncate(done);
    loaded.truncate(done);
    streams.truncate(done);
    let sig = crate::signals::received();
    if stopped() && done == 0 {
        return Err(crate::signals::exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {} before a pair completed",
                crate::signals::name(sig)
            ),
        ));
    }
    let report = summarize_pairs(
        UnderLoad {
            pairs: done as u32,
            ..load
        },
        alone,
        loaded,
        streams,
    );
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", text(&report));
    }
    if stopped() {
        return Err(crate::signals::exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {}: {done} of {} pairs ran, and their report is printed",
                crate::signals::name(sig),
                load.pairs
            ),
        ));
    }
    Ok(())
}

fn rr_metrics(r: &TestResult) -> Option<[f64; 3]> {
    match &r.outcome {
        Outcome::Rr(o) => o
            .latency
            .as_ref()
            .map(|l| [l.p50_us, l.p99_us, o.rate_per_s]),
        _ => None,
    }
}

fn summarize_pairs(
    load: UnderLoad,
    alone: Vec<TestResult>,
    loaded: Vec<TestResult>,
    streams: Vec<TestResult>,
) -> Report {
    let names = ["p50_us", "p99_us", "rate_per_s"];
    let median = |v: &[f64]| (!v.is_empty()).then(|| summarize(v, 0.95).median);
    let added = (0..3)
        .map(|k| {
            let a: Vec<f64> = alone.iter().filter_map(rr_metrics).map(|m| m[k]).collect();
            let l: Vec<f64> = loaded.iter().filter_map(rr_metrics).map(|m| m[k]).collect();
            let diffs: Vec<f64> = a.iter().zip(&l).map(|(a, l)| l - a).collect();
            Added {
                metric: names[k],
                alone: median(&a),
                loaded: median(&l),
                added: summarize(&diffs, 0.95),
            }
        })
        .collect();
    let stream_mbps = streams
        .iter()
        .filter_map(|s| match &s.outcome {
            Outcome::Stream(o) => Some(o.mbps),
            _ => None,
        })
        .collect();
    Report {
        streams: load.streams,
        reverse: load.reverse,
        pairs: load.pairs,
        added,
        stream_mbps,
        alone,
        loaded,
        streams_results: streams,
    }
}

fn text(r: &Report) -> String {
    use std::fmt::Write;
    let mut s = format!(
        "virtperf rr under load: {} stream{} {}, {} interleaved pairs\n",
        r.streams,
        if r.streams == 1 { "" } else { "s" },
        if r.reverse {
            "server→client"
        } else {
            "client→server"
        },
        r.pairs
    );
    let _ = writeln!(
        s,
        "  {:<11} {:>12} {:>12} {:>12} {:>22}",
        "metric", "alone", "loaded", "added", "added 95% CI"
    );
    // No trial with a completed transaction: not measured, shown as such (never 0).
    let num = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.2}"));
    for a in &r.added {
        let _ = writeln!(
            s,
            "  {:<11} {:>12} {:>12} {:>12} {:>22}",
            a.metric,
            num(a.alone),
            num(a.loaded),
            num((a.added.n > 0).then_some(a.added.mean)),
            match a.added.n {
                0 => "— (no pair measured)".to_string(),
                1 => "— (one pair)".to_string(),
                _ => format!("[{:.2}, {:.2}]", a.added.ci_low, a.added.ci_high),
            }
        );
    }
    let mb: Vec<String> = r.stream_mbps.iter().map(|m| format!("{m:.0}")).collect();
    let _ = writeln!(
        s,
        "  streams' throughput in the loaded trials, Mbit/s: {}",
        mb.join(", ")
    );
    s
}
