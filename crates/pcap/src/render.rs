//! Text renderings of analyzed connections: the shape of gPXE's `tcp_stats.py` (the seed's
//! output, so old numbers and new can be compared line by line) and a flat CSV.

use crate::model::{Connection, EndReason, SideStats};
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

/// Seconds as a duration with a unit and three significant digits, the way people read
/// them: `3.12µs`, `45.0µs`, `390µs`, `3.06ms`, `19.5s` (`-` when not finite).
///
/// Hand-written: humantime prints every digit (`3µs 120ns`) and the unit-aware formatting
/// crates do not round to significant digits.
pub fn duration(s: f64) -> String {
    const UNITS: [(f64, &str); 4] = [(1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s")];
    if !s.is_finite() {
        return "-".into();
    }
    if s == 0.0 {
        return "0s".into();
    }
    let a = s.abs();
    let sign = if s < 0.0 { "-" } else { "" };
    if a >= 1000.0 {
        // No larger unit: whole seconds, every digit kept.
        return format!("{sign}{a:.0}s");
    }
    let mut i = UNITS.iter().rposition(|u| a >= u.0).unwrap_or(0);
    let mut v = a / UNITS[i].0;
    // Round to three significant digits; 999.7µs becomes 1000µs, which reads as 1.00ms.
    let scale = 10f64.powi(v.log10().floor() as i32 - 2);
    v = (v / scale).round() * scale;
    if v >= 1000.0 && i + 1 < UNITS.len() {
        v /= 1000.0;
        i += 1;
    }
    let decimals = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{sign}{v:.decimals$}{}", UNITS[i].1)
}

fn dur_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), duration)
}

/// A column `--columns` adds to the seed lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    /// Per endpoint: TCP segments it sent (`packets=`).
    Packets,
    /// Per endpoint: segments it sent that carried retransmitted bytes (`retrans=`).
    Retrans,
    /// Per connection: SYN to the ACK of the SYN/ACK (`handshake=`; `-` when not all three
    /// were seen).
    Handshake,
    /// Per endpoint: median response latency (`p50=`).
    P50,
    /// Per endpoint: 99th percentile response latency (`p99=`).
    P99,
}

impl Column {
    const ALL: [(Column, &'static str); 5] = [
        (Column::Packets, "packets"),
        (Column::Retrans, "retrans"),
        (Column::Handshake, "handshake"),
        (Column::P50, "p50"),
        (Column::P99, "p99"),
    ];

    /// Parses a comma-separated list (`packets,retrans,p99`); the error names the valid
    /// columns.
    pub fn parse_list(s: &str) -> Result<Vec<Column>, String> {
        let mut out = Vec::new();
        for name in s.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let c = name.parse()?;
            if !out.contains(&c) {
                out.push(c);
            }
        }
        Ok(out)
    }
}

/// One column name, as `--columns` takes it (`p99`); the error names the valid columns.
impl std::str::FromStr for Column {
    type Err = String;
    fn from_str(name: &str) -> Result<Column, String> {
        let name = name.trim();
        Column::ALL
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case(name))
            .map(|(c, _)| *c)
            .ok_or_else(|| {
                let names: Vec<&str> = Column::ALL.iter().map(|(_, n)| *n).collect();
                format!("unknown column {name:?}: choose from {}", names.join(","))
            })
    }
}

fn seed_stats(out: &mut String, name: &str, s: &SideStats, cols: &[Column]) {
    let l = &s.response;
    match (l.avg_s, l.min_s, l.max_s) {
        (Some(avg), Some(min), Some(max)) => {
            let _ = write!(
                out,
                "[{name}: avg={} min={} max={}",
                duration(avg),
                duration(min),
                duration(max)
            );
        }
        _ => {
            let _ = write!(out, "[{name}: avg=- min=- max=-");
        }
    }
    // Extra columns in one fixed order, whatever order they were asked in, so lines of
    // different invocations line up.
    for (c, _) in Column::ALL {
        if !cols.contains(&c) {
            continue;
        }
        let _ = match c {
            Column::Packets => write!(out, " packets={}", s.packets),
            Column::Retrans => write!(out, " retrans={}", s.retransmitted_packets),
            Column::P50 => write!(out, " p50={}", dur_opt(l.p50_s)),
            Column::P99 => write!(out, " p99={}", dur_opt(l.p99_s)),
            Column::Handshake => Ok(()),
        };
    }
    out.push(']');
}

/// Pooled response latency over many endpoints: exact count, mean, min and max, and the
/// packet counts.
#[derive(Default)]
struct Pool {
    count: u64,
    sum: f64,
    min: Option<f64>,
    max: Option<f64>,
    packets: u64,
    retrans: u64,
}

impl Pool {
    fn add(&mut self, s: &SideStats) {
        self.packets += s.packets;
        self.retrans += s.retransmitted_packets;
        let l = &s.response;
        let (Some(avg), Some(min), Some(max)) = (l.avg_s, l.min_s, l.max_s) else {
            return;
        };
        self.count += l.count;
        self.sum += avg * l.count as f64;
        self.min = Some(self.min.map_or(min, |m| m.min(min)));
        self.max = Some(self.max.map_or(max, |m| m.max(max)));
    }

    fn write(&self, out: &mut String, name: &str, cols: &[Column]) {
        match (self.min, self.max) {
            (Some(min), Some(max)) if self.count > 0 => {
                let avg = self.sum / self.count as f64;
                let _ = write!(
                    out,
                    "[{name}: samples={} avg={} min={} max={}",
                    self.count,
                    duration(avg),
                    duration(min),
                    duration(max)
                );
            }
            _ => {
                let _ = write!(out, "[{name}: samples=0");
            }
        }
        // Percentiles do not pool from per-connection percentiles: only the counts here.
        if cols.contains(&Column::Packets) {
            let _ = write!(out, " packets={}", self.packets);
        }
        if cols.contains(&Column::Retrans) {
            let _ = write!(out, " retrans={}", self.retrans);
        }
        out.push(']');
    }
}

/// The note under a connection's line when it is not a whole connection: open before the
/// capture began, or cut by `--idle-split` (the 4-tuple's next packets are the next
/// connection, which reads as partial).
fn marks(conns: &[Connection], i: usize) -> Vec<String> {
    let c = &conns[i];
    let same_tuple = |o: &Connection| (o.a == c.a && o.b == c.b) || (o.a == c.b && o.b == c.a);
    let mut v = Vec::new();
    if c.partial {
        let after_split = conns[..i]
            .iter()
            .rev()
            .find(|o| same_tuple(o))
            .filter(|o| o.end == EndReason::Idle);
        v.push(match after_split {
            Some(o) => format!(
                "  ^ partial: continues connection {} after its idle split (no handshake seen)",
                o.id
            ),
            None => "  ^ partial: already open when the capture began (no handshake seen; earlier bytes not counted)".to_string(),
        });
    }
    if c.end == EndReason::Idle {
        v.push("  ^ idle split: silent longer than --idle-split; its later packets are the next connection on this 4-tuple".to_string());
    }
    v
}

/// One line per connection in tcp_stats.py's shape, then a summary line across connections:
///
/// ```text
/// 10.0.6.2:1028-10.0.6.1:8000 duration=19.5s bytes_transferred=104783153 [10.0.6.2: avg=256µs min=148µs max=13.2ms] [10.0.6.1: avg=14.0µs min=8.00µs max=6.00ms]
/// summary: connections=1 partial=0 bytes_transferred=104783153 duration avg=19.5s min=19.5s max=19.5s [A: samples=… avg=… min=… max=…] [B: samples=… …]
/// ```
///
/// A is the connecting side (see [`Connection::a`]); times carry their unit with three
/// significant digits ([`duration`]); `bytes_transferred` is payload in both directions. An
/// endpoint without samples prints `avg=- min=- max=-`. When timestamps went backwards, a
/// line ends with ` negative_gaps=N`: the response gaps of both endpoints that came out
/// negative and are not in the figures (absent when there were none). A partial or
/// idle-split connection gets a line of its own below it, starting with `  ^ `.
pub fn render_seed0(conns: &[Connection]) -> String {
    render_seed0_with(conns, &[])
}

/// [`render_seed0`] with extra columns: `handshake=` after `bytes_transferred=`, the
/// endpoint ones (`packets=`, `retrans=`, `p50=`, `p99=`) inside each endpoint's brackets,
/// and packet totals in the summary's.
pub fn render_seed0_with(conns: &[Connection], cols: &[Column]) -> String {
    let mut out = String::new();
    let (mut pa, mut pb) = (Pool::default(), Pool::default());
    let mut total = 0u64;
    let mut partial = 0u64;
    let mut negative = 0u64;
    let (mut dsum, mut dmin, mut dmax) = (0.0f64, f64::INFINITY, 0.0f64);
    for (i, c) in conns.iter().enumerate() {
        let _ = write!(
            out,
            "{}-{} duration={} bytes_transferred={} ",
            c.a,
            c.b,
            duration(c.duration_s),
            c.bytes_transferred()
        );
        if cols.contains(&Column::Handshake) {
            let _ = write!(out, "handshake={} ", dur_opt(c.handshake.rtt_s));
        }
        seed_stats(&mut out, &label(c, true), &c.from_a, cols);
        out.push(' ');
        seed_stats(&mut out, &label(c, false), &c.from_b, cols);
        let neg = c.from_a.response.negative_gaps + c.from_b.response.negative_gaps;
        if neg > 0 {
            let _ = write!(out, " negative_gaps={neg}");
        }
        negative += neg;
        out.push('\n');
        for m in marks(conns, i) {
            out.push_str(&m);
            out.push('\n');
        }
        pa.add(&c.from_a);
        pb.add(&c.from_b);
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
            " duration avg={} min={} max={}",
            duration(dsum / conns.len() as f64),
            duration(dmin),
            duration(dmax)
        );
    }
    out.push(' ');
    pa.write(&mut out, "A", cols);
    out.push(' ');
    pb.write(&mut out, "B", cols);
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

/// Every field of every connection, flattened, one row each after a header row. Durations
/// and latencies in seconds with nine decimals (whole nanoseconds), timestamps with six; absent values are empty cells. No field contains a comma or quote. The
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
            // An f64 epoch timestamp resolves about 0.24 µs: more places would print noise.
            format!("{:.6}", c.start_ts),
            format!("{:.6}", c.end_ts),
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

#[cfg(test)]
mod tests {
    use super::duration;

    #[test]
    fn durations_keep_three_significant_digits_with_a_unit() {
        for (s, want) in [
            (0.0, "0s"),
            (3.12e-6, "3.12µs"),
            (3.124_9e-6, "3.12µs"),
            (0.000_003, "3.00µs"),
            (4.5e-5, "45.0µs"),
            (0.000_390, "390µs"),
            (0.000_999_7, "1.00ms"),
            (0.003_06, "3.06ms"),
            (9.999e-3, "10.0ms"),
            (19.541_665, "19.5s"),
            (1234.6, "1235s"),
            (999.96, "1000s"),
            (5e-10, "0.50ns"),
            (42e-9, "42.0ns"),
            (-2.5e-6, "-2.50µs"),
            (f64::NAN, "-"),
        ] {
            assert_eq!(duration(s), want, "{s}");
        }
    }
}
