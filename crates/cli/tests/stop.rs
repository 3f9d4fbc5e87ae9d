//! Every engine ends its measured interval on time, also on an oversubscribed machine: more
//! threads than cores, many flows, and a process spinning on each CPU (issue 26: a
//! multiplexed sender whose sockets never filled never saw its stop, and runs overran their
//! duration by seconds, or never ended). The test runs alone ([`crate::alone`]), so no other
//! test competes with the spinners.

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{f, vp, wait_output};

/// Processes that keep every CPU busy, killed by PID when dropped.
struct Spinners(Vec<Child>);

impl Spinners {
    fn start(n: usize) -> Spinners {
        Spinners(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("spawn a spinning shell")
                })
                .collect(),
        )
    }
}

impl Drop for Spinners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The configurations that overran (issue 26), and the other engines with as many flows
/// and threads: each for one second.
const CONFIGS: &[&str] = &[
    "stream -P 8 --threads 8",
    "stream -P 64 --threads 8",
    "stream -P 16 --threads 8 -R",
    "stream -P 8 --threads 2",
    "stream -P 64 --threads 2",
    "stream -P 8",
    "stream -P 8 -R",
    "rr -P 64 --threads 8",
    "rr -P 8",
    "crr -P 64 --threads 8",
    "rr --protocol udp -P 8",
    "stream --protocol udp -P 4 --rate 100mbit",
];

#[test]
fn every_engine_stops_on_time_when_oversubscribed() {
    let _alone = crate::alone();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let _spin = Spinners::start(cpus);
    for cfg in CONFIGS {
        let mut args: Vec<&str> = cfg.split_whitespace().collect();
        args.extend(["-l", "1s", "--allow-concurrent", "--json"]);
        let t0 = Instant::now();
        let child = vp()
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn virtperf");
        // A hang is a failure with a message, not a test that never ends.
        let out = wait_output(child, Duration::from_secs(30));
        let wall = t0.elapsed();
        assert!(
            out.status.success(),
            "{cfg}: {:?} after {wall:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        let elapsed = f(&v, "/outcome/elapsed_s");
        // The interval measured is the one asked for. A thread-per-flow TCP receiver
        // counts to its sender's end of stream: each of the 8 senders sees the stop when its
        // blocking send returns, which waits on its receiver reading, on CPUs shared with
        // the spinners and 15 other such threads; 1.001–1.016 s in 22 CI runs, 1.062 s
        // once (2026-11-29, a sluggish run). The multiplexed engines report the interval.
        let per_flow_stream = cfg.starts_with("stream") && !cfg.contains("--threads");
        let most = if per_flow_stream && !cfg.contains("udp") {
            1.10
        } else {
            1.05
        };
        assert!(
            (0.97..=most).contains(&elapsed),
            "{cfg}: measured {elapsed} s of a 1 s test"
        );
        let stop = f(&v, "/stop_s");
        assert!(
            stop < 0.5,
            "{cfg}: {stop:.3} s from the end of the measured interval to both reports"
        );
        let _ = std::io::Write::write_fmt(
            &mut std::io::stderr(),
            format_args!(
                "{cfg}: elapsed {elapsed:.4} s, stopped {stop:.3} s later, {wall:?} in all\n"
            ),
        );
    }
}
