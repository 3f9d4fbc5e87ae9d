//! Per-interval recording (`--interval`, iperf3's `-i`): what an engine publishes so its
//! caller can report a time series while the test runs.
//!
//! The inner loops pay almost nothing for it, so a run with intervals measures what a run
//! without them does:
//! - byte-moving engines (stream, bulk) store their running byte count in a [`Meter`]'s
//!   atomic after each `send`/`recv` (a relaxed store to a line only this thread writes:
//!   a plain `mov` on x86, no syscall, no clock read); the caller samples it on its own
//!   thread at each interval boundary;
//! - transaction engines (rr, crr) already read the clock once per transaction; a
//!   [`Ticker`] compares that reading with the next boundary (one comparison) and only at
//!   a boundary does its work: the interval's latencies, kept as the histogram's non-empty
//!   buckets, go to the [`Meter`], and the histogram is folded into the test's total and
//!   reset, so each interval has its own percentiles from the same single record per
//!   transaction as before.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

use crate::counts::Counts;
use crate::tcpinfo::Snapshot;

/// One flow's published progress: its running byte count, its closed intervals, and (a
/// TCP sender's) the socket whose `TCP_INFO` the series reads at each boundary.
///
/// The sender owns its connection in a private descriptor table (lab's `side`), so no
/// other thread can name it there; its spawner keeps a duplicate of the descriptor in the
/// process's table for the series ([`Meter::watch`]). That costs the sender nothing: its
/// own table is still single-owner, so its socket calls keep the fast path, and it is
/// never asked to do anything. The series reads the state at the boundary itself, even
/// while the sender sits in a `send` blocked by a retransmission timeout.
#[derive(Debug, Default)]
pub struct Meter {
    every: Option<Duration>,
    bytes: AtomicU64,
    ticks: Mutex<Vec<Tick>>,
    /// Duplicates of a TCP sender's connections (one, or a multiplexing thread's share),
    /// for reading their `TCP_INFO`.
    watched: OnceLock<Vec<OwnedFd>>,
    /// The flows it counts send (the client's senders; `--bidir` has both kinds).
    sending: AtomicBool,
    /// The warm-up before the measured interval (`--omit`), if any.
    omit: Option<Duration>,
    /// Raised by the side's control thread as the warm-up ends: a byte-moving engine sees
    /// it at its next `send`/`recv` (one relaxed load beside the stop flag's) and marks its
    /// counts then, on its own thread, so the mark and its time agree exactly.
    measuring: AtomicBool,
    /// The engine's counts as its warm-up ended (the first mark wins).
    mark: Mutex<Option<Mark>>,
}

/// One engine's counts at the end of its warm-up (`--omit`), when that was, and (a TCP
/// connection's engine) the connection's state then: what the measured interval's counts
/// and `TCP_INFO` deltas start from.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    /// When the warm-up ended for this engine.
    pub at: Instant,
    /// What it had counted by then.
    pub counts: Counts,
    /// Its connection's `TCP_INFO` then (None: not TCP, or not read).
    pub tcp: Option<Snapshot>,
}

/// One closed interval of a transaction engine, times relative to the engine's start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tick {
    /// Interval start.
    pub start: Duration,
    /// Interval end.
    pub end: Duration,
    /// Transactions completed in it.
    pub transactions: u64,
    /// Its latencies: (highest equivalent value in ns, count) per non-empty histogram bucket,
    /// so flows' intervals can be merged exactly before percentiles are taken.
    pub latency: Vec<(u64, u64)>,
}

impl Meter {
    /// A meter closing intervals every `every` (None: no intervals, only the byte count).
    pub fn new(every: Option<Duration>) -> Meter {
        Meter {
            every,
            ..Meter::default()
        }
    }

    /// A meter as [`Meter::new`], for a test that first runs `omit` unmeasured (`--omit`;
    /// None or zero: no warm-up).
    pub fn with_omit(every: Option<Duration>, omit: Option<Duration>) -> Meter {
        Meter {
            every,
            omit: omit.filter(|o| !o.is_zero()),
            ..Meter::default()
        }
    }

    /// The interval length, if intervals are recorded.
    pub fn every(&self) -> Option<Duration> {
        self.every
    }

    /// The warm-up before the measured interval, if any.
    pub fn omit(&self) -> Option<Duration> {
        self.omit
    }

    /// Ends the warm-up for the byte-moving engine counting here (the side's control
    /// thread calls it at the boundary).
    pub fn begin_measuring(&self) {
        self.measuring.store(true, Ordering::Relaxed);
    }

    /// Whether the warm-up is over (see [`Meter::begin_measuring`]).
    #[inline(always)]
    pub fn measuring(&self) -> bool {
        self.measuring.load(Ordering::Relaxed)
    }

    /// Marks the end of the engine's warm-up: its `counts` now and, given its TCP
    /// connection `fd`, that connection's state. Only the first mark counts.
    #[cold]
    #[inline(never)]
    pub fn set_mark(&self, counts: Counts, fd: Option<RawFd>) {
        let at = Instant::now();
        let tcp = fd.and_then(crate::tcpinfo::read);
        if let Ok(mut m) = self.mark.lock() {
            m.get_or_insert(Mark { at, counts, tcp });
        }
    }

    /// A sender's mark, at its first call after the warm-up ended: `sent` bytes since
    /// `start` on connection `fd`. `marked` is the sender's own flag, which it starts as
    /// `omit().is_none()`: without a warm-up, and once marked, the cost per send is one
    /// branch on a local (an atomic load per send cost a 64-byte stream 3%).
    #[inline(always)]
    pub fn mark_sender(&self, marked: &mut bool, sent: u64, start: Instant, fd: Option<RawFd>) {
        if !*marked && self.measuring() {
            *marked = true;
            let c = Counts {
                bytes_tx: sent,
                active: start.elapsed(),
                ..Counts::default()
            };
            self.set_mark(c, fd);
        }
    }

    /// The engine's warm-up mark, once set.
    pub fn mark(&self) -> Option<Mark> {
        self.mark.lock().ok().and_then(|m| *m)
    }

    /// An engine's final counts `c` (its run ended at `end`) less its warm-up: what it
    /// counted after its mark, its time from the mark to `end`, and the warm-up's part kept
    /// apart in `warmup`. An engine that ended before its mark spent its whole run warming
    /// up: nothing measured. Without a warm-up, `c` as it is.
    pub fn trim(&self, c: Counts, end: Instant) -> Counts {
        if self.omit.is_none() || c.warmup.is_some() {
            return c;
        }
        let (at, w) = match self.mark() {
            Some(m) => (m.at, m.counts),
            None => (end, c),
        };
        let active = end.saturating_duration_since(at).min(c.active);
        Counts {
            bytes_rx: c.bytes_rx.saturating_sub(w.bytes_rx),
            bytes_tx: c.bytes_tx.saturating_sub(w.bytes_tx),
            transactions: c.transactions.saturating_sub(w.transactions),
            calls: c.calls.saturating_sub(w.calls),
            active,
            udp: c.udp.map(|u| w.udp.map_or(u, |wu| u.since(&wu))),
            warmup: Some(virtperf_wire::Warmup {
                s: c.active.saturating_sub(active).as_secs_f64(),
                bytes_rx: w.bytes_rx,
                bytes_tx: w.bytes_tx,
                transactions: w.transactions,
                udp: w.udp,
            }),
        }
    }

    /// Publishes the running byte count (engines call this after each I/O).
    #[inline(always)]
    pub fn set_bytes(&self, bytes: u64) {
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    /// The last published byte count.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Keeps `fds` (duplicates of the sending sockets this meter counts for: one flow's,
    /// or a multiplexing thread's share) to read their `TCP_INFO` from any thread; closed
    /// when the meter is dropped. A second call, or an empty list, changes nothing.
    pub fn watch(&self, fds: Vec<OwnedFd>) {
        if !fds.is_empty() {
            let _ = self.watched.set(fds);
        }
    }

    /// Marks this meter's flows as sending (set by whoever starts the sender).
    pub fn mark_sending(&self) {
        self.sending.store(true, Ordering::Relaxed);
    }

    /// Whether this meter's flows send.
    pub fn is_sending(&self) -> bool {
        self.sending.load(Ordering::Relaxed)
    }

    /// Whether this meter counts TCP senders whose state can be read.
    pub fn is_tcp_sender(&self) -> bool {
        self.watched.get().is_some()
    }

    /// Each watched sending socket's `TCP_INFO` now, in the order given to
    /// [`Meter::watch`] (None: not a watched sender, or one of them unreadable).
    pub fn read_tcp(&self) -> Option<Vec<Snapshot>> {
        self.watched
            .get()?
            .iter()
            .map(|fd| crate::tcpinfo::read(fd.as_raw_fd()))
            .collect()
    }

    /// The intervals closed so far from the `from`-th on.
    pub fn ticks_from(&self, from: usize) -> Vec<Tick> {
        self.ticks
            .lock()
            .map(|t| t.get(from..).map(<[Tick]>::to_vec).unwrap_or_default())
            .unwrap_or_default()
    }

    fn push(&self, t: Tick) {
        if let Ok(mut v) = self.ticks.lock() {
            v.push(t);
        }
    }
}

/// A final partial interval shorter than this fraction of the interval is left out: its
/// rate would rest on too few transactions to mean anything (iperf3 drops them too).
const MIN_LAST_FRACTION: f64 = 0.1;

/// Far enough ahead that a test never reaches it: the boundary when intervals are off.
fn never(now: Instant) -> Instant {
    now.checked_add(Duration::from_secs(100 * 365 * 86_400))
        .unwrap_or(now)
}

/// Closes a transaction engine's intervals. See the module documentation for its cost.
pub struct Ticker<'a> {
    meter: &'a Meter,
    origin: Instant,
    from: Instant,
    next: Instant,
    /// Transactions before the open interval.
    n0: u64,
    /// Every closed interval's latencies, folded in at each boundary.
    total: Option<Histogram<u64>>,
    /// The end of the warm-up (`--omit`) while it is still ahead.
    omit_at: Option<Instant>,
    /// Set as the warm-up ends, until the engine asks ([`Ticker::passed_omit`]).
    passed: bool,
}

/// The first interval boundary of an interval starting at `now`.
fn first_boundary(meter: &Meter, now: Instant) -> Instant {
    match meter.every {
        Some(e) if !e.is_zero() => now + e,
        _ => never(now),
    }
}

impl<'a> Ticker<'a> {
    /// Starts at `now` (the engine's start): with a warm-up (`--omit`) the first boundary
    /// is its end, where the latencies so far are dropped and the first interval starts;
    /// without one the first interval starts now.
    pub fn start(meter: &'a Meter, now: Instant) -> Ticker<'a> {
        let omit_at = meter.omit.map(|o| now + o);
        let origin = omit_at.unwrap_or(now);
        Ticker {
            meter,
            origin,
            from: origin,
            next: omit_at.unwrap_or_else(|| first_boundary(meter, now)),
            n0: 0,
            total: None,
            omit_at,
            passed: false,
        }
    }

    /// Starts the first interval at `start`, ignoring the meter's warm-up: for engines
    /// that count only what completes inside their measured span, which already starts
    /// after it.
    pub fn measured_from(meter: &'a Meter, start: Instant) -> Ticker<'a> {
        Ticker {
            meter,
            origin: start,
            from: start,
            next: first_boundary(meter, start),
            n0: 0,
            total: None,
            omit_at: None,
            passed: false,
        }
    }

    /// True once, right after the transaction that ended the warm-up was recorded: the
    /// engine then marks its counts before that transaction (`Meter::set_mark`).
    #[inline(always)]
    pub fn passed_omit(&mut self) -> bool {
        std::mem::take(&mut self.passed)
    }

    /// True when `now` is past the open interval's end: call [`Ticker::tick`] before
    /// recording the transaction that ended at `now`.
    #[inline(always)]
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// Records a back-to-back transaction that started at `t0` and ended now (`n` before
    /// it), closing an interval first when one is due, and returns when the next one starts:
    /// after the interval's bookkeeping (tens of µs, once per interval), so no transaction
    /// is charged with it.
    #[inline(always)]
    pub fn record(&mut self, t0: Instant, n: u64, hist: &mut Histogram<u64>) -> Instant {
        let mut t1 = Instant::now();
        let rtt = t1.duration_since(t0).as_nanos() as u64;
        if self.due(t1) {
            self.tick(t1, n, hist);
            t1 = Instant::now();
        }
        hist.saturating_record(rtt);
        t1
    }

    /// Closes the open interval (`n`: transactions completed before the one that ended at
    /// `now`, whose latencies are in `hist`), and an empty interval for each boundary that
    /// passed while no transaction completed: a stall shows as intervals with none.
    #[cold]
    #[inline(never)]
    pub fn tick(&mut self, now: Instant, n: u64, hist: &mut Histogram<u64>) {
        if let Some(at) = self.omit_at.take() {
            // The warm-up's latencies are not the test's; its transactions are marked by
            // the engine (`passed_omit`).
            hist.reset();
            self.n0 = n;
            self.passed = true;
            self.next = first_boundary(self.meter, at);
            if now < self.next {
                return;
            }
        }
        let Some(every) = self.meter.every.filter(|e| !e.is_zero()) else {
            self.next = never(now);
            return;
        };
        self.close(self.next, n, hist);
        self.next += every;
        while self.next <= now {
            self.close(self.next, n, hist);
            self.next += every;
        }
    }

    /// At the engine's end (`end`, `n` transactions in all): closes the last partial
    /// interval if it is long enough, and leaves every latency of the test in `hist`.
    pub fn finish(&mut self, end: Instant, n: u64, hist: &mut Histogram<u64>) {
        if self.omit_at.is_some() {
            // Ended while warming up: nothing was measured.
            hist.reset();
            return;
        }
        if let Some(every) = self.meter.every.filter(|e| !e.is_zero()) {
            let left = end.saturating_duration_since(self.from);
            if left.as_secs_f64() >= MIN_LAST_FRACTION * every.as_secs_f64() {
                self.close(end, n, hist);
            }
        }
        if let Some(total) = self.total.take() {
            // Cannot fail: both histograms auto-resize (or share bounds).
            let _ = hist.add(&total);
        }
    }

    fn close(&mut self, end: Instant, n: u64, hist: &mut Histogram<u64>) {
        let latency = hist
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        if !hist.is_empty() {
            let total = self.total.get_or_insert_with(|| {
                let mut t = Histogram::new_from(hist);
                t.auto(true);
                t
            });
            let _ = total.add(&*hist);
            hist.reset();
        }
        self.meter.push(Tick {
            start: self.from.duration_since(self.origin),
            end: end.duration_since(self.origin),
            transactions: n - self.n0,
            latency,
        });
        self.from = end;
        self.n0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist() -> Histogram<u64> {
        let mut h = Histogram::new_with_bounds(1, 1_000_000_000, 3).unwrap();
        h.auto(true);
        h
    }

    /// Boundaries close intervals with their own latencies, a stall spanning boundaries
    /// leaves empty intervals, and the whole test's latencies end up back in the histogram.
    #[test]
    fn intervals_split_latencies_and_show_stalls() {
        let m = Meter::new(Some(Duration::from_millis(100)));
        let t0 = Instant::now();
        let mut h = hist();
        let mut tk = Ticker::start(&m, t0);
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Interval 0: three fast transactions.
        for ms in [10u64, 20, 30] {
            assert!(!tk.due(at(ms)));
            h.record(1_000).unwrap();
        }
        // A transaction ending at 350 ms: intervals 0 (3 tr), 1 and 2 (empty) close.
        assert!(tk.due(at(350)));
        tk.tick(at(350), 3, &mut h);
        h.record(320_000_000).unwrap();
        // It belongs to interval 3, which ends partially at 360 ms (10% of 100 ms).
        tk.finish(at(360), 4, &mut h);
        let ticks = m.ticks_from(0);
        let counts: Vec<u64> = ticks.iter().map(|t| t.transactions).collect();
        assert_eq!(counts, [3, 0, 0, 1]);
        assert_eq!(ticks[0].latency.len(), 1);
        assert_eq!(ticks[0].latency[0].1, 3);
        assert!(ticks[1].latency.is_empty());
        assert_eq!(ticks[3].start, Duration::from_millis(300));
        assert_eq!(ticks[3].end, Duration::from_millis(360));
        assert_eq!(h.len(), 4, "the test's histogram holds every transaction");
        assert_eq!(m.ticks_from(3).len(), 1);
    }

    /// A warm-up (`--omit`): its latencies are dropped at its end, the engine is told once,
    /// the intervals start there, and a run that ends inside it measured nothing.
    #[test]
    fn a_warm_up_is_dropped_at_its_end() {
        let m = Meter::with_omit(
            Some(Duration::from_millis(100)),
            Some(Duration::from_millis(50)),
        );
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut h = hist();
        let mut tk = Ticker::start(&m, t0);
        for _ in 0..5 {
            h.record(7).unwrap();
        }
        assert!(!tk.due(at(49)));
        assert!(tk.due(at(50)), "the warm-up's end is a boundary");
        tk.tick(at(60), 5, &mut h);
        assert!(h.is_empty(), "warm-up latencies kept");
        assert!(tk.passed_omit());
        assert!(!tk.passed_omit(), "told twice");
        h.record(9).unwrap();
        assert!(
            !tk.due(at(149)),
            "the first interval runs from the warm-up's end"
        );
        tk.tick(at(150), 6, &mut h);
        tk.finish(at(160), 6, &mut h);
        let ticks = m.ticks_from(0);
        assert_eq!(ticks[0].start, Duration::ZERO);
        assert_eq!(ticks[0].transactions, 1, "only the measured transaction");
        assert_eq!(h.len(), 1);
        // Ended during the warm-up: nothing measured.
        let mut h = hist();
        let mut tk = Ticker::start(&m, t0);
        h.record(7).unwrap();
        tk.finish(at(10), 1, &mut h);
        assert!(h.is_empty());
    }

    /// An engine's counts less its mark: the measured part, timed from the mark, with the
    /// warm-up's part kept apart; no mark means all warm-up; no warm-up, untouched.
    #[test]
    fn trim_takes_the_mark_off() {
        let c = |bytes_tx, transactions, ms| Counts {
            bytes_tx,
            transactions,
            active: Duration::from_millis(ms),
            ..Counts::default()
        };
        let plain = Meter::new(None);
        assert_eq!(plain.trim(c(10, 1, 5), Instant::now()), c(10, 1, 5));
        let m = Meter::with_omit(None, Some(Duration::from_secs(1)));
        let end = Instant::now() + Duration::from_millis(300);
        let none = m.trim(c(100, 4, 500), end);
        assert_eq!((none.bytes_tx, none.transactions), (0, 0));
        assert_eq!(none.warmup.map(|w| w.bytes_tx), Some(100));
        m.set_mark(c(40, 1, 200), None);
        m.set_mark(c(99, 3, 400), None);
        let t = m.trim(c(100, 4, 500), end);
        assert_eq!(
            (t.bytes_tx, t.transactions),
            (60, 3),
            "the first mark counts"
        );
        let w = t.warmup.expect("warm-up kept");
        assert_eq!((w.bytes_tx, w.transactions), (40, 1));
        assert!(t.active <= Duration::from_millis(300) && t.active > Duration::from_millis(250));
        assert!((w.s - 0.2).abs() < 0.06, "{}", w.s);
        // Trimmed once: a second trim leaves it.
        assert_eq!(m.trim(t, end), t);
    }

    /// Without an interval nothing is ever due and the histogram is left as recorded.
    #[test]
    fn off_means_never_due() {
        let m = Meter::new(None);
        let t0 = Instant::now();
        let mut h = hist();
        let mut tk = Ticker::start(&m, t0);
        assert!(!tk.due(t0 + Duration::from_secs(86_400)));
        h.record(5).unwrap();
        tk.finish(t0 + Duration::from_secs(5), 1, &mut h);
        assert!(m.ticks_from(0).is_empty());
        assert_eq!(h.len(), 1);
    }
}
