//! The client's time series (`--interval`): turns what the engines publish in their
//! [`Meter`]s into [`Interval`]s while the test runs, hands each to the plan's sink as it
//! ends (live output), and judges the finished series.
//!
//! Stream and bulk intervals are sampled here, on the client's control thread, from the
//! byte counts the client's workers publish: bytes *handed to the kernel* when the client
//! sends, bytes read when it receives. The agent's receive counts are not used: they would
//! need a protocol change and a clock shared by both ends, and over one-second intervals
//! the two differ by at most what the socket buffers hold (docs/json.md says so).
//! rr and crr intervals are closed by the engines themselves (their own clock readings)
//! and merged here across flows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use virtperf_load::interval::{Meter, Tick};
use virtperf_load::tcpinfo::{between, Snapshot};
use virtperf_measure::new_histogram;
use virtperf_wire::{Interval, TcpInfo};

use crate::plan::IntervalSink;

/// A final partial interval shorter than this fraction of the interval is left out.
const MIN_LAST_FRACTION: f64 = 0.1;

/// Below this fraction of the median interval, an interval counts as collapsed.
pub const COLLAPSE_FRACTION: f64 = 0.5;
/// Above this coefficient of variation of its intervals, a trial is called unsteady.
pub const UNSTEADY_CV: f64 = 0.30;

/// What the series is made of.
enum Source {
    /// Byte counts sampled at boundaries: (time of the last sample, each meter's count then,
    /// each meter's senders' `TCP_INFO` readings then).
    Bytes {
        last_t: Instant,
        last: Vec<u64>,
        tcp: Vec<Option<Vec<Snapshot>>>,
    },
    /// Ticks the engines closed, gathered per meter.
    Ticks { got: Vec<Vec<Tick>>, merged: usize },
}

/// One test's series on the client.
pub(crate) struct Series {
    every: Duration,
    started: Instant,
    next: Instant,
    meters: Vec<Arc<Meter>>,
    source: Source,
    out: Vec<Interval>,
    sink: Option<IntervalSink>,
}

impl Series {
    /// A series of `every`-long intervals from `started`, over `meters`; `ticks` when the
    /// engines close their own intervals (rr, crr).
    pub(crate) fn new(
        every: Duration,
        started: Instant,
        meters: Vec<Arc<Meter>>,
        ticks: bool,
        sink: Option<IntervalSink>,
    ) -> Series {
        let source = if ticks {
            Source::Ticks {
                got: vec![Vec::new(); meters.len()],
                merged: 0,
            }
        } else {
            Source::Bytes {
                last_t: started,
                // What the engines moved before the series starts (a warm-up, `--omit`)
                // belongs to no interval.
                last: meters.iter().map(|m| m.bytes()).collect(),
                // The senders' state at the start: the first interval's beginning.
                tcp: meters.iter().map(|m| m.read_tcp()).collect(),
            }
        };
        Series {
            every,
            started,
            next: started + every,
            meters,
            source,
            out: Vec::new(),
            sink,
        }
    }

    /// When the control loop should look next: the next boundary (a little after it for
    /// engine-closed intervals, which close on the first transaction past it).
    pub(crate) fn next_wake(&self) -> Instant {
        match self.source {
            Source::Bytes { .. } => self.next,
            Source::Ticks { .. } => self.next + Duration::from_millis(5),
        }
    }

    /// Closes whatever intervals have ended by `now`.
    pub(crate) fn poll(&mut self, now: Instant) {
        match &mut self.source {
            Source::Bytes { .. } => {
                if now >= self.next {
                    self.sample(now);
                    while self.next <= now {
                        self.next += self.every;
                    }
                }
            }
            Source::Ticks { .. } => {
                while self.next <= now {
                    self.next += self.every;
                }
                self.gather(false);
            }
        }
    }

    /// At the moment the workers are told to stop: the last, partial, byte interval.
    pub(crate) fn at_stop(&mut self, now: Instant) {
        if let Source::Bytes { last_t, .. } = &self.source {
            let left = now.saturating_duration_since(*last_t).as_secs_f64();
            if left >= MIN_LAST_FRACTION * self.every.as_secs_f64() {
                self.sample(now);
            }
        }
    }

    /// After the workers are joined: every interval, oldest first.
    pub(crate) fn finish(mut self) -> Vec<Interval> {
        if matches!(self.source, Source::Ticks { .. }) {
            self.gather(true);
        }
        self.out
    }

    fn emit(&mut self, i: Interval) {
        if let Some(s) = &self.sink {
            (s.0)(&i);
        }
        self.out.push(i);
    }

    /// Closes the byte interval ending `now`, with the senders' `TCP_INFO` over it.
    fn sample(&mut self, now: Instant) {
        let Source::Bytes { last_t, last, tcp } = &mut self.source else {
            return;
        };
        let dt = now.saturating_duration_since(*last_t).as_secs_f64();
        if dt <= 0.0 {
            return;
        }
        let mbps = |b: u64| b as f64 * 8.0 / dt / 1e6;
        let (mut total, mut sent) = (0u64, 0u64);
        let mut flows = Vec::with_capacity(self.meters.len());
        for (m, prev) in self.meters.iter().zip(last.iter_mut()) {
            let b = m.bytes();
            let d = b.saturating_sub(*prev);
            *prev = b;
            total += d;
            if m.is_sending() {
                sent += d;
            }
            flows.push(mbps(d));
        }
        // Both directions at once (--bidir): each direction apart, as iperf3's TX/RX lines.
        let both = self.meters.iter().any(|m| m.is_sending())
            && self.meters.iter().any(|m| !m.is_sending());
        let flow_tcp = tcp_over_interval(&self.meters, tcp);
        let i = Interval {
            t_s: last_t.saturating_duration_since(self.started).as_secs_f64(),
            duration_s: dt,
            bytes: Some(total),
            mbps: Some(mbps(total)),
            mbps_client_to_server: both.then(|| mbps(sent)),
            mbps_server_to_client: both.then(|| mbps(total - sent)),
            flow_mbps: if flows.len() > 1 { flows } else { Vec::new() },
            retransmits: (!flow_tcp.is_empty())
                .then(|| flow_tcp.iter().map(|t| t.retransmits_interval).sum()),
            flow_tcp,
            ..Interval::default()
        };
        *last_t = now;
        self.emit(i);
    }

    /// Merges the engines' closed intervals across flows: interval k once every flow has
    /// closed it (or, at the end, once any has).
    fn gather(&mut self, all: bool) {
        let Source::Ticks { got, merged } = &mut self.source else {
            return;
        };
        for (m, g) in self.meters.iter().zip(got.iter_mut()) {
            g.extend(m.ticks_from(g.len()));
        }
        // Counts of intervals ready: with no meter there are genuinely none.
        let ready = if all {
            got.iter().map(Vec::len).max().unwrap_or(0)
        } else {
            got.iter().map(Vec::len).min().unwrap_or(0)
        };
        let mut new = Vec::new();
        for k in *merged..ready {
            new.push(merge(got.iter().filter_map(|g| g.get(k))));
        }
        *merged = ready.max(*merged);
        for i in new {
            self.emit(i);
        }
    }
}

/// Each of the client's sending flows' `TCP_INFO` over the interval that ends now: read
/// from the sockets now and paired with their readings at the interval's start (`prev`,
/// per meter, then replaced by these, so no retransmit is counted twice or lost between
/// intervals). Empty unless the client sends and every sending meter's sockets were read
/// at both ends: a partial list would read as the whole. Receiving meters (the other
/// direction of `--bidir`) have none: their sender is the agent.
fn tcp_over_interval(meters: &[Arc<Meter>], prev: &mut [Option<Vec<Snapshot>>]) -> Vec<TcpInfo> {
    let sending = || meters.iter().filter(|m| m.is_sending());
    if sending().next().is_none() || !sending().all(|m| m.is_tcp_sender()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut complete = true;
    for (m, p) in meters.iter().zip(prev.iter_mut()) {
        if !m.is_sending() {
            continue;
        }
        let now = m.read_tcp();
        match (p.as_ref(), &now) {
            (Some(start), Some(end)) if start.len() == end.len() => {
                out.extend(start.iter().zip(end).map(|(a, b)| between(a, b)));
            }
            _ => complete = false,
        }
        *p = now;
    }
    if complete {
        out
    } else {
        Vec::new()
    }
}

/// One interval of rr/crr from each flow's tick of it.
fn merge<'a>(ticks: impl Iterator<Item = &'a Tick>) -> Interval {
    let mut h = new_histogram();
    let (mut start, mut end, mut n) = (Duration::MAX, Duration::ZERO, 0u64);
    for t in ticks {
        start = start.min(t.start);
        end = end.max(t.end);
        n += t.transactions;
        for &(v, c) in &t.latency {
            // Cannot fail: the histogram auto-resizes.
            let _ = h.record_n(v, c);
        }
    }
    let dt = end.saturating_sub(start).as_secs_f64();
    let us = |q: f64| (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0);
    Interval {
        t_s: start.as_secs_f64(),
        duration_s: dt,
        transactions: Some(n),
        rate_per_s: Some(if dt > 0.0 { n as f64 / dt } else { 0.0 }),
        p50_us: us(0.50),
        p99_us: us(0.99),
        ..Interval::default()
    }
}

/// `1.0–2.0 s`
fn span(i: &Interval) -> String {
    format!("{:.1}–{:.1} s", i.t_s, i.t_s + i.duration_s)
}

/// A warning when a trial's intervals vary wildly: which ones collapsed below half the
/// median, and the coefficient of variation when above [`UNSTEADY_CV`]. Intervals shorter
/// than half of `every` (a last partial one) are left out; fewer than three say nothing.
pub fn interval_warning(intervals: &[Interval], every: Duration) -> Option<String> {
    let full: Vec<(&Interval, f64)> = intervals
        .iter()
        .filter(|i| i.duration_s >= 0.5 * every.as_secs_f64())
        .filter_map(|i| i.value().map(|v| (i, v)))
        .collect();
    if full.len() < 3 {
        return None;
    }
    let unit = if full[0].0.mbps.is_some() {
        "Mbit/s"
    } else {
        "tr/s"
    };
    let mut vals: Vec<f64> = full.iter().map(|(_, v)| *v).collect();
    vals.sort_by(f64::total_cmp);
    let median = vals[vals.len() / 2];
    let n = vals.len() as f64;
    let mean = vals.iter().sum::<f64>() / n;
    let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let cv = if mean > 0.0 { sd / mean } else { 0.0 };
    let collapsed: Vec<String> = full
        .iter()
        .filter(|(_, v)| *v < COLLAPSE_FRACTION * median)
        .map(|(i, v)| format!("{} ({v:.0} {unit})", span(i)))
        .collect();
    if collapsed.is_empty() && cv <= UNSTEADY_CV {
        return None;
    }
    let mut w = format!(
        "the intervals vary wildly (CV {:.0}% over {} intervals, median {median:.0} {unit})",
        cv * 100.0,
        full.len()
    );
    if !collapsed.is_empty() {
        w.push_str(&format!(
            "; below half the median: {}",
            collapsed.join(", ")
        ));
    }
    w.push_str(": the mean hides it; repeat it until the CI is tight (`virtperf run SPEC --until-ci 95,2%`) to see whether it recurs");
    Some(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(t: f64, rate: f64) -> Interval {
        Interval {
            t_s: t,
            duration_s: 1.0,
            rate_per_s: Some(rate),
            transactions: Some(rate as u64),
            ..Interval::default()
        }
    }

    /// A two-second collapse is named by its intervals; a steady series says nothing; a
    /// short last interval is not judged.
    #[test]
    fn a_collapse_is_named_and_a_steady_series_is_not() {
        let every = Duration::from_secs(1);
        let steady: Vec<Interval> = (0..6).map(|k| iv(k as f64, 10_000.0 + k as f64)).collect();
        assert_eq!(interval_warning(&steady, every), None);
        let mut short = steady.clone();
        short.push(Interval {
            duration_s: 0.2,
            ..iv(6.0, 10.0)
        });
        assert_eq!(interval_warning(&short, every), None);
        let mut stalled = steady.clone();
        stalled[2].rate_per_s = Some(100.0);
        stalled[3].rate_per_s = Some(0.0);
        let w = interval_warning(&stalled, every).expect("a collapse warns");
        assert!(w.contains("2.0–3.0 s (100 tr/s)"), "{w}");
        assert!(w.contains("3.0–4.0 s (0 tr/s)"), "{w}");
        assert!(!w.contains("1.0–2.0 s"), "{w}");
        assert!(w.contains("--until-ci"), "{w}");
    }

    /// Flows' ticks merge into one interval: transactions add up, percentiles come from
    /// the merged latencies.
    #[test]
    fn flows_merge_exactly() {
        let a = Tick {
            start: Duration::ZERO,
            end: Duration::from_secs(1),
            transactions: 99,
            latency: vec![(1000, 99)],
        };
        let b = Tick {
            start: Duration::from_micros(5),
            end: Duration::from_secs(1),
            transactions: 1,
            latency: vec![(1_000_000, 1)],
        };
        let i = merge([&a, &b].into_iter());
        assert_eq!(i.transactions, Some(100));
        assert!((i.rate_per_s.unwrap() - 100.0).abs() < 0.01);
        assert_eq!(i.p50_us, Some(1.0));
        assert_eq!(i.p99_us, Some(1.0));
        let empty = merge(std::iter::empty());
        assert_eq!(empty.p50_us, None);
    }
}
