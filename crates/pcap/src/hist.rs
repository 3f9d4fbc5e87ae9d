//! Bounded-memory recorders for per-connection latency samples.
//!
//! Written here rather than taken from the `hdrhistogram` crate because that one sizes its
//! counts array for the largest value recorded (tens of thousands of `u64` for a 300 s
//! maximum at 3 significant figures, i.e. hundreds of KiB), and a capture can hold many
//! thousands of open connections with two recorders each. This one keeps samples exactly up to
//! [`EXACT_SAMPLES`] (so short exchanges get exact percentiles) and then folds them into a
//! log-bucketed histogram of at most [`MAX_BUCKETS`] `u32` counts (15 KiB).

use crate::model::{LatencyStats, RttStats};

/// Samples kept exactly before a recorder switches to its histogram.
pub const EXACT_SAMPLES: usize = 256;

/// Sub-bucket bits: each power of two is split into 2^(SUB_BITS-1) buckets, so a bucket is at
/// most 1/128 of its lower bound wide.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS; // values below this get one bucket each
const HALF: u64 = SUB / 2;
/// Most buckets a latency histogram can have (4-byte counts each): enough for every `u64`.
pub const MAX_BUCKETS: usize = (SUB + (64 - SUB_BITS as u64) * HALF) as usize;

fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let msb = 63 - v.leading_zeros(); // >= SUB_BITS
    let shift = msb - (SUB_BITS - 1);
    let sub = (v >> shift) & (HALF - 1);
    (SUB + (msb - SUB_BITS) as u64 * HALF + sub) as usize
}

/// Lowest value and width of a bucket.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let msb = SUB_BITS as u64 + (i - SUB) / HALF;
    let sub = (i - SUB) % HALF;
    let shift = msb - (SUB_BITS as u64 - 1);
    ((HALF + sub) << shift, 1u64 << shift)
}

/// Response-latency recorder of one endpoint (values in nanoseconds).
#[derive(Debug, Clone, Default)]
pub struct Latency {
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
    exact: Vec<u64>,
    /// Empty until more than [`EXACT_SAMPLES`] samples arrived; grows only up to the bucket of
    /// the largest sample, never beyond [`MAX_BUCKETS`].
    buckets: Vec<u32>,
}

impl Latency {
    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, v: u64) {
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.count += 1;
        self.sum += v as u128;
        if self.buckets.is_empty() {
            if self.exact.len() < EXACT_SAMPLES {
                self.exact.push(v);
                return;
            }
            // Switch to the histogram: fold the exact samples in and release them.
            let exact = std::mem::take(&mut self.exact);
            for s in exact {
                self.bump(s);
            }
        }
        self.bump(v);
    }

    #[inline]
    fn bump(&mut self, v: u64) {
        let b = bucket_of(v);
        debug_assert!(b < MAX_BUCKETS);
        if b >= self.buckets.len() {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] = self.buckets[b].saturating_add(1);
    }

    /// Nearest-rank percentile `p` in (0, 1], in nanoseconds.
    fn percentile(&self, sorted_exact: &[u64], p: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let rank = ((p * self.count as f64).ceil() as u64).clamp(1, self.count);
        if self.buckets.is_empty() {
            return sorted_exact.get(rank as usize - 1).copied();
        }
        let mut seen = 0u64;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c as u64;
            if seen >= rank {
                let (lo, w) = bucket_range(i);
                let mid = lo.saturating_add(w / 2);
                return Some(mid.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Summary statistics in seconds.
    pub fn stats(&self) -> LatencyStats {
        if self.count == 0 {
            return LatencyStats::default();
        }
        let mut sorted = self.exact.clone();
        sorted.sort_unstable();
        let s = |ns: u64| ns as f64 * 1e-9;
        LatencyStats {
            count: self.count,
            avg_s: Some(self.sum as f64 / self.count as f64 * 1e-9),
            min_s: Some(s(self.min)),
            max_s: Some(s(self.max)),
            p50_s: self.percentile(&sorted, 0.50).map(s),
            p99_s: self.percentile(&sorted, 0.99).map(s),
            // Counted by the connection, which sees the timestamps.
            negative_gaps: 0,
        }
    }
}

/// Running RTT statistics: no samples kept.
///
/// Sums of the samples and their squares, shifted by the first sample (so the variance does
/// not cancel catastrophically) and kept in integers: a per-packet division (Welford's update)
/// was a visible cost of the whole analyzer.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rtt {
    n: u64,
    shift: u64,
    sum: i128,
    sumsq: u128,
    min: u64,
    max: u64,
}

impl Rtt {
    /// Adds one sample in nanoseconds.
    #[inline]
    pub fn record(&mut self, ns: u64) {
        if self.n == 0 {
            self.shift = ns;
            self.min = ns;
        } else if ns < self.min {
            self.min = ns;
        }
        if ns > self.max {
            self.max = ns;
        }
        self.n += 1;
        let d = ns as i128 - self.shift as i128;
        self.sum = self.sum.saturating_add(d);
        let a = d.unsigned_abs();
        self.sumsq = self.sumsq.saturating_add(a.saturating_mul(a));
    }

    /// Summary statistics in seconds.
    pub fn stats(&self) -> RttStats {
        if self.n == 0 {
            return RttStats::default();
        }
        let n = self.n as f64;
        let mean_d = self.sum as f64 / n;
        let var = if self.n > 1 {
            (self.sumsq as f64 - self.sum as f64 * mean_d) / (n - 1.0)
        } else {
            0.0
        };
        RttStats {
            samples: self.n,
            min_s: Some(self.min as f64 * 1e-9),
            avg_s: Some((self.shift as f64 + mean_d) * 1e-9),
            max_s: Some(self.max as f64 * 1e-9),
            stdev_s: Some(var.max(0.0).sqrt() * 1e-9),
            // Counted by the connection, which sees the timestamps.
            negative_gaps: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_narrow() {
        let mut prev_end = 0u64;
        for i in 0..MAX_BUCKETS {
            let (lo, w) = bucket_range(i);
            assert_eq!(lo, prev_end, "bucket {i}");
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(lo + (w - 1)), i);
            if lo >= SUB {
                assert!(w * 64 <= lo, "bucket {i} too wide");
            }
            prev_end = lo.wrapping_add(w);
        }
        assert_eq!(bucket_of(u64::MAX), MAX_BUCKETS - 1);
    }

    #[test]
    fn exact_then_histogram_percentiles() {
        let mut l = Latency::default();
        for v in [5u64, 1, 3, 2, 4] {
            l.record(v * 1000);
        }
        let s = l.stats();
        assert_eq!(s.count, 5);
        assert_eq!(s.p50_s, Some(3e-6));
        assert_eq!(s.p99_s, Some(5e-6));
        let mut l = Latency::default();
        for v in 1..=10_000u64 {
            l.record(v * 1000);
        }
        let s = l.stats();
        let p50 = s.p50_s.unwrap_or(0.0);
        let p99 = s.p99_s.unwrap_or(0.0);
        assert!((p50 / 5e-3 - 1.0).abs() < 0.005, "{p50}");
        assert!((p99 / 9.9e-3 - 1.0).abs() < 0.005, "{p99}");
        assert_eq!(s.max_s, Some(1e-2));
        assert!(l.buckets.len() <= MAX_BUCKETS && l.exact.is_empty());
    }

    #[test]
    fn rtt_stdev() {
        let mut r = Rtt::default();
        for v in [2u64, 4, 4, 4, 5, 5, 7, 9] {
            r.record(v);
        }
        let s = r.stats();
        assert_eq!(s.samples, 8);
        let sd = s.stdev_s.unwrap_or(0.0) * 1e9;
        assert!((sd - 2.138_089_935).abs() < 1e-6, "{sd}");
    }
}
