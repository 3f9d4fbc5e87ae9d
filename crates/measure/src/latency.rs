//! Latency histograms: HdrHistogram in nanoseconds, summarized in microseconds.

use base64::Engine as _;
use hdrhistogram::serialization::{Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use virtperf_wire::LatencySummary;

/// The histogram type all latency recording uses: nanosecond values.
pub type LatencyHistogram = Histogram<u64>;

/// A histogram tracking 1 ns to 100 s at 3 significant digits: every value is kept within
/// 0.1%, which is better than 1 µs for anything under 1 ms and 1 ms at 1 s. It grows if a
/// larger value arrives, so nothing is ever dropped.
pub fn new_histogram() -> LatencyHistogram {
    // The bounds are constants known to be valid for HdrHistogram (low ≥ 1, high ≥ 2·low,
    // sigfig ≤ 5), so creation cannot fail.
    let mut h = Histogram::new_with_bounds(1, 100_000_000_000, 3)
        .expect("constant histogram bounds are valid");
    h.auto(true);
    h
}

/// Summary statistics of a histogram, in microseconds.
pub fn summarize(h: &LatencyHistogram) -> LatencySummary {
    if h.is_empty() {
        return LatencySummary::default();
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    LatencySummary {
        count: h.len(),
        mean_us: h.mean() / 1000.0,
        stdev_us: h.stdev() / 1000.0,
        min_us: us(h.min()),
        p50_us: us(h.value_at_quantile(0.50)),
        p90_us: us(h.value_at_quantile(0.90)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

/// Encodes a histogram as base64 of its V2+deflate serialization (the HdrHistogram
/// interchange format, readable by every HdrHistogram implementation).
pub fn encode(h: &LatencyHistogram) -> String {
    let mut buf = Vec::new();
    if V2DeflateSerializer::new().serialize(h, &mut buf).is_err() {
        return String::new();
    }
    base64_encode(&buf)
}

/// Decodes what [`encode`] produced.
pub fn decode(s: &str) -> Option<LatencyHistogram> {
    let bytes = base64_decode(s)?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .ok()
}

// Standard base64 with padding (RFC 4648), as other HdrHistogram tools write it.
fn base64_encode(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD
        .decode(s.trim())
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap(); // 1..=1000 µs
        }
        let s = summarize(&h);
        assert_eq!(s.count, 1000);
        assert!((s.mean_us - 500.5).abs() < 0.5, "{s:?}");
        assert!((s.p50_us - 500.0).abs() <= 0.5, "{s:?}");
        assert!((s.p99_us - 990.0).abs() <= 1.0, "{s:?}");
        assert!((s.min_us - 1.0).abs() < 0.01);
        assert!((s.max_us - 1000.0).abs() <= 1.0);
    }

    #[test]
    fn microsecond_resolution_below_a_millisecond() {
        let mut h = new_histogram();
        h.record(12_345).unwrap();
        let s = summarize(&h);
        assert!((s.p50_us - 12.345).abs() < 0.02, "{s:?}");
    }

    #[test]
    fn values_beyond_the_range_are_kept() {
        let mut h = new_histogram();
        h.record(500_000_000_000).unwrap();
        assert_eq!(h.len(), 1);
    }

    #[test]
    fn encode_decode_round_trip() {
        let mut h = new_histogram();
        for v in [1u64, 10, 100, 15_000, 2_000_000] {
            h.record(v).unwrap();
        }
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back.len(), h.len());
        assert_eq!(back.max(), h.max());
        assert_eq!(back.value_at_quantile(0.5), h.value_at_quantile(0.5));
        assert!(decode("!!not base64").is_none());
    }

    #[test]
    fn base64_matches_rfc4648_vectors() {
        for (raw, enc) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64_encode(raw.as_bytes()), enc);
            assert_eq!(base64_decode(enc).unwrap(), raw.as_bytes());
        }
    }
}
