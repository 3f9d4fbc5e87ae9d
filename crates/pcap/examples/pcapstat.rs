//! Prints a capture's connections in tcp_stats.py's shape, and the time the analysis took.
//!
//! ```text
//! cargo run --release --example pcapstat -- trace.pcap [repeat] [--csv] [filter…]
//! ```

use std::time::Instant;
use virtperf_pcap::{render_csv, render_seed0, Analyzer, Options};

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: pcapstat FILE [REPEAT] [--csv] [FILTER…]");
        std::process::exit(2);
    };
    let repeat: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(1).max(1);
    let mut filter: Vec<String> = args.collect();
    let csv = filter.first().is_some_and(|a| a == "--csv");
    if csv {
        filter.remove(0);
    }
    let mut opts = Options::default();
    if let Err(e) = opts.apply_filter(&filter.join(" ")) {
        eprintln!("{e}");
        std::process::exit(2);
    }
    let mut best = f64::INFINITY;
    let mut out = None;
    for _ in 0..repeat {
        let file = match std::fs::File::open(&path) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("{path}: {e}");
                std::process::exit(1);
            }
        };
        let mut conns = Vec::new();
        let start = Instant::now();
        let r = Analyzer::new(opts.clone()).analyze_reader(file, |c| conns.push(c));
        best = best.min(start.elapsed().as_secs_f64());
        out = Some((r, conns));
    }
    let Some((result, mut conns)) = out else {
        return;
    };
    conns.sort_by_key(|c| c.id);
    if csv {
        print!("{}", render_csv(&conns));
    } else {
        print!("{}", render_seed0(&conns));
    }
    match result {
        Ok(s) => {
            for w in &s.warnings {
                eprintln!("warning: {w}");
            }
            eprintln!(
                "{} packets, {} TCP, {} connections in {:.1} ms ({:.2} M packets/s)",
                s.packets,
                s.tcp_packets,
                s.connections,
                best * 1e3,
                s.packets as f64 / best / 1e6
            );
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}
