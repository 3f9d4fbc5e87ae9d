//! Throughput check on a synthetic 300k-packet loopback-like capture (Ethernet framing on
//! `lo`, snaplen 96, request/response, bulk and connect-per-request traffic interleaved).
//!
//! Ignored by default; run it in release mode:
//!
//! ```text
//! CARGO_TARGET_DIR=/tmp/pcap-target cargo test --release \
//!     --manifest-path crates/pcap/Cargo.toml --test bench -- --ignored --nocapture
//! ```

mod common;

use common::*;
use std::time::Instant;
use virtperf_pcap::{Analyzer, Options};

/// Builds the capture: 8 request/response connections, 2 bulk ones and short
/// connect-request-close ones, interleaved by time, until `target` packets.
pub fn synthetic_capture(target: usize) -> Vec<u8> {
    let mut p = Pcap::new(1, false, false, 96);
    let base = 1_700_000_000_000_000_000u64;
    let mut rr: Vec<Conv> = (0..8)
        .map(|i| {
            let mut c = Conv::new(
                &format!("127.0.0.1:{}", 40000 + i),
                "127.0.0.1:7150",
                1000 * i,
                7,
            );
            c.handshake(0, 5, 10);
            c
        })
        .collect();
    let mut bulk: Vec<Conv> = (0..2)
        .map(|i| {
            let mut c = Conv::new(&format!("127.0.0.1:{}", 41000 + i), "127.0.0.1:7151", 99, 3);
            c.handshake(0, 5, 10);
            c
        })
        .collect();
    let mut count = 0usize;
    let mut t = 100u64; // µs
    let mut crr_port = 50000u32;
    let emit = |p: &mut Pcap, c: &mut Conv, count: &mut usize| {
        for (ts, _, ip) in c.pkts.drain(..) {
            p.record(base + ts, &ethernet(0x0800, &ip), 96);
            *count += 1;
        }
    };
    for c in rr.iter_mut().chain(bulk.iter_mut()) {
        emit(&mut p, c, &mut count);
    }
    while count < target {
        for c in rr.iter_mut() {
            c.send(t, true, ACK | PSH, 1);
            c.send(t + 14, false, ACK | PSH, 1);
            t += 15;
            emit(&mut p, c, &mut count);
        }
        for c in bulk.iter_mut() {
            // A 64 KiB segment of which snaplen keeps the headers: built header-only, then its
            // IP total length raised (so generating the file stays fast; checksums are not
            // verified by the analyzer, as by tcptrace).
            c.send(t, true, ACK, 0);
            let ip = &mut c.pkts.last_mut().expect("packet").2;
            ip[2..4].copy_from_slice(&(40u16 + 65_483).to_be_bytes());
            c.cseq = c.cseq.wrapping_add(65_483);
            c.send(t + 3, false, ACK, 0);
            t += 4;
            emit(&mut p, c, &mut count);
        }
        if count % 64 < 20 {
            let mut c = Conv::new(
                &format!("127.0.0.1:{}", crr_port % 60000 + 1024),
                "127.0.0.1:7152",
                5,
                9,
            );
            crr_port += 1;
            standard_script(&mut c);
            c.pkts.iter_mut().for_each(|x| x.0 = x.0 / 100 + t * 1000);
            t += 31;
            emit(&mut p, &mut c, &mut count);
        }
    }
    p.buf
}

#[test]
#[ignore = "benchmark: run in release with --ignored --nocapture"]
fn throughput_300k_packets() {
    let data = synthetic_capture(300_000);
    let path = std::env::temp_dir().join("virtperf-pcap-bench.pcap");
    std::fs::write(&path, &data).expect("write capture");
    let mut best = f64::INFINITY;
    let mut result = None;
    for _ in 0..7 {
        let start = Instant::now();
        let mut n = 0;
        let s = Analyzer::new(Options::default())
            .analyze_reader(std::fs::File::open(&path).expect("open"), |_| n += 1)
            .expect("analysis");
        best = best.min(start.elapsed().as_secs_f64());
        result = Some((s, n));
    }
    let (s, n) = result.expect("ran");
    println!(
        "{} packets ({} TCP), {} connections, {} MB: best {:.1} ms = {:.2} M packets/s (file: {})",
        s.packets,
        s.tcp_packets,
        n,
        data.len() / 1_000_000,
        best * 1e3,
        s.packets as f64 / best / 1e6,
        path.display()
    );
    assert_eq!(s.skipped_malformed, 0);
}
