//! Text renderings of analyzed connections: the shape of gPXE's `tcp_stats.py` (the seed's
//! output, so old numbers and new can be compared line by line) and a flat CSV.

use crate::model::{Connection, LatencyStats, SideStats};
use std::fmt::Write as _;
use std::net::IpAddr;

/// The name an endpoint goes by inside the `[…]` of a seed line: the bare address as
/// tcp_stats.py printed it, or address and port when both ends share an address (loopback),
/// where the address alone would not say which end is meant.
fn label(c: &Connection, a: bool) -> String {
    let e = if a { c.a } else { c.b };
    if c.a.ip != c.b.ip {
        e.ip.to_string()
    } else {
        e.to_string()
    }
}

fn seed_stats(out: &mut String, name: &str, l: &LatencyStats) {
    match (l.avg_s, l.min_s, l.max_s) {
        (Some(avg), Some(min), Some(max)) => {
            let _ = write!(out, "[{name}: avg={avg:.6} min={min:.6} max={max:.6}]");
        }
        _ => {
            let _ = write!(out, "[{name}: avg=- min=- max=-]");
        }
    }
}

/// Pooled response latency over many endpoints: exact count, mean, min and max.
#[derive(Default)]
struct Pool {
    count: u64,
    sum: f64,
    min: Option<f64>,
    max: Option<f64>,
}

impl Pool {
    fn add(&mut self, l: &LatencyStats) {
        let (Some(avg), Some(min), Some(max)) = (l.avg_s, l.min_s, l.max_s) else {
            return;
        };
        self.count += l.count;
        self.sum += avg * l.count as f64;
        self.min = Some(self.min.map_or(min, |m| m.min(min)));
        self.max = Some(self.max.map_or(max, |m| m.max(max)));
    }

    fn write(&self, out: &mut String, name: &str) {
        match (self.min, self.max) {
            (Some(min), Some(max)) if self.count > 0 => {
                let avg = self.sum / self.count as f64;
                let _ = write!(
                    out,
                    "[{name}: samples={} avg={avg:.6} min={min:.6} max={max:.6}]",
                    self.count
                );
            }
            _ => {
                let _ = write!(out, "[{name}: samples=0]");
            }
        }
    }
}

/// One line per connection in tcp_stats.py's shape, then a summary line across connections:
///
/// ```text
/// 10.0.6.2:1028-10.0.6.1:8000 duration=19.541665 bytes_transferred=104783153 [10.0.6.2: avg=0.000256 min=0.000148 max=0.013202] [10.0.6.1: avg=0.000014 min=0.000008 max=0.006002]
/// summary: connections=1 partial=0 bytes_transferred=104783153 duration avg=19.541665 min=19.541665 max=19.541665 [A: samples=… avg=… min=… max=…] [B: samples=… …]
/// ```
///
/// A is the connecting side (see [`Connection::a`]); seconds with six decimals;
/// `bytes_transferred` is payload in both directions. An endpoint without samples prints
/// `avg=- min=- max=-`. When timestamps went backwards, a line ends with ` negative_gaps=N`:
/// the response gaps of both endpoints that came out negative and are not in the figures
/// (absent when there were none, so ordinary captures keep the seed's exact shape).
pub fn render_seed0(conns: &[Connection]) -> String {
    let mut out = String::new();
    let (mut pa, mut pb) = (Pool::default(), Pool::default());
    let mut total = 0u64;
    let mut partial = 0u64;
    let mut negative = 0u64;
    let (mut dsum, mut dmin, mut dmax) = (0.0f64, f64::INFINITY, 0.0f64);
    for c in conns {
        let _ = write!(
            out,
            "{}-{} duration={:.6} bytes_transferred={} ",
            c.a,
            c.b,
            c.duration_s,
            c.bytes_transferred()
        );
        seed_stats(&mut out, &label(c, true), &c.from_a.response);
        out.push(' ');
        seed_stats(&mut out, &label(c, false), &c.from_b.response);
        let neg = c.from_a.response.negative_gaps + c.from_b.response.negative_gaps;
        if neg > 0 {
            let _ = write!(out, " negative_gaps={neg}");
        }
        negative += neg;
        out.push('\n');
        pa.add(&c.from_a.response);
        pb.add(&c.from_b.response);
        total += c.bytes_transferred();
        partial += c.partial as u64;
        dsum += c.duration_s;
        dmin = dmin.min(c.duration_s);
        dmax = dmax.max(c.duration_s);
    }
    let _ = write!(
        out,
        "summary: connections={} partial={partial} bytes_transferred={total}",
        conns.len()
    );
    if !conns.is_empty() {
        let _ = write!(
            out,
            " duration avg={:.6} min={dmin:.6} max={dmax:.6}",
            dsum / conns.len() as f64
        );
    }
    out.push(' ');
    pa.write(&mut out, "A");
    out.push(' ');
    pb.write(&mut out, "B");
    if negative > 0 {
        let _ = write!(out, " negative_gaps={negative}");
    }
    out.push('\n');
    out
}

fn opt(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.9}")).unwrap_or_default()
}

fn ip(v: IpAddr) -> String {
    v.to_string()
}

const SIDE_COLUMNS: &[&str] = &[
    "packets",
    "payload_bytes",
    "unique_bytes",
    "retransmitted_bytes",
    "retransmitted_packets",
    "out_of_order",
    "zero_window",
    "rtt_samples",
    "rtt_min_s",
    "rtt_avg_s",
    "rtt_max_s",
    "rtt_stdev_s",
    "response_count",
    "response_avg_s",
    "response_min_s",
    "response_max_s",
    "response_p50_s",
    "response_p99_s",
];

fn side_values(s: &SideStats) -> [String; 18] {
    [
        s.packets.to_string(),
        s.payload_bytes.to_string(),
        s.unique_bytes.to_string(),
        s.retransmitted_bytes.to_string(),
        s.retransmitted_packets.to_string(),
        s.out_of_order.to_string(),
        s.zero_window.to_string(),
        s.rtt.samples.to_string(),
        opt(s.rtt.min_s),
        opt(s.rtt.avg_s),
        opt(s.rtt.max_s),
        opt(s.rtt.stdev_s),
        s.response.count.to_string(),
        opt(s.response.avg_s),
        opt(s.response.min_s),
        opt(s.response.max_s),
        opt(s.response.p50_s),
        opt(s.response.p99_s),
    ]
}

/// Every field of every connection, flattened, one row each after a header row. Seconds with
/// nine decimals; absent values are empty cells. No field contains a comma or quote. The
/// negative-gap counts are the last four columns, after every older column, so readers that
/// go by position keep working.
pub fn render_csv(conns: &[Connection]) -> String {
    let mut out = String::new();
    let mut head: Vec<String> = [
        "id",
        "a_ip",
        "a_port",
        "b_ip",
        "b_port",
        "partial",
        "end",
        "start_ts",
        "end_ts",
        "duration_s",
        "bytes_transferred",
        "handshake_syn_to_synack_s",
        "handshake_synack_to_ack_s",
        "handshake_rtt_s",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for prefix in ["from_a", "from_b"] {
        head.extend(SIDE_COLUMNS.iter().map(|c| format!("{prefix}_{c}")));
    }
    for prefix in ["from_a", "from_b"] {
        head.push(format!("{prefix}_response_negative_gaps"));
        head.push(format!("{prefix}_rtt_negative_gaps"));
    }
    out.push_str(&head.join(","));
    out.push('\n');
    for c in conns {
        let mut row = vec![
            c.id.to_string(),
            ip(c.a.ip),
            c.a.port.to_string(),
            ip(c.b.ip),
            c.b.port.to_string(),
            c.partial.to_string(),
            c.end.as_str().to_string(),
            format!("{:.9}", c.start_ts),
            format!("{:.9}", c.end_ts),
            format!("{:.9}", c.duration_s),
            c.bytes_transferred().to_string(),
            opt(c.handshake.syn_to_synack_s),
            opt(c.handshake.synack_to_ack_s),
            opt(c.handshake.rtt_s),
        ];
        row.extend(side_values(&c.from_a));
        row.extend(side_values(&c.from_b));
        for s in [&c.from_a, &c.from_b] {
            row.push(s.response.negative_gaps.to_string());
            row.push(s.rtt.negative_gaps.to_string());
        }
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}
