//! What an engine counted: the one record every engine returns.

use std::time::Duration;

/// What one engine half counted on one connection (or, for crr/http, over all of them).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Counts {
    /// Bytes read.
    pub bytes_rx: u64,
    /// Bytes written.
    pub bytes_tx: u64,
    /// Completed transactions (rr, crr, http requests served).
    pub transactions: u64,
    /// System calls that moved data: the stream engines' `send`s (one per message) and
    /// `recv`s; 0 where an engine does not count them.
    pub calls: u64,
    /// From the first byte moved to the last (receivers count from their first received
    /// byte), or the engine's whole run for rr/crr.
    pub active: Duration,
    /// UDP engines: datagram counts, loss, reordering and jitter.
    pub udp: Option<virtperf_wire::UdpCounts>,
    /// What moved during the warm-up (`--omit`), left out of the counts above.
    pub warmup: Option<virtperf_wire::Warmup>,
}

impl Counts {
    /// `n` transactions of `rx` bytes in and `tx` bytes out each, over `active`.
    pub fn of_transactions(n: u64, rx: usize, tx: usize, active: Duration) -> Counts {
        Counts {
            bytes_rx: n * rx as u64,
            bytes_tx: n * tx as u64,
            transactions: n,
            active,
            ..Counts::default()
        }
    }
}
