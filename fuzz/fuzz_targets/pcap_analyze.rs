//! Fuzzes the capture analyzer: any byte string must analyze to a summary or fail with an
//! error carrying a byte offset — never panic, hang, or allocate beyond the reader's caps.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Cursor;
use virtperf_pcap::{render_csv, render_seed0, Analyzer, Options};

fuzz_target!(|data: &[u8]| {
    // A short idle timeout, so the sweep and timeout paths run on tiny inputs too.
    let opts = Options {
        idle_timeout_s: Some(0.5),
        close_linger_s: 0.01,
        ..Options::default()
    };
    let mut conns = Vec::new();
    match Analyzer::new(opts).analyze_reader(Cursor::new(data), |c| conns.push(c)) {
        Ok(summary) => {
            assert_eq!(summary.connections, conns.len() as u64);
            assert!(
                summary.tcp_packets + summary.non_tcp_packets + summary.skipped_malformed
                    <= summary.packets
            );
        }
        Err(e) => assert!(e.offset().is_some(), "error without offset: {e}"),
    }
    let _ = render_seed0(&conns);
    let _ = render_csv(&conns);
});
