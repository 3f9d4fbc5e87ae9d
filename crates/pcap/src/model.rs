//! What the analyzer reports: one [`Connection`] per TCP connection and one [`Summary`] per
//! capture. Plain data, serializable, with times in seconds as `f64` (timestamps are seconds
//! since the Unix epoch as written in the capture). JSON carries durations and latencies
//! rounded to the nanosecond and timestamps to the microsecond ([`round_ns`]).

use serde::{Serialize, Serializer};
use std::net::IpAddr;

/// `s` seconds rounded to the nanosecond: the double a decimal with at most nine places
/// parses to, so JSON prints `0.000877`, not the `0.0008770000000000001` an average or a
/// difference leaves. The analyzer's clock is integer nanoseconds, so nothing is lost.
pub fn round_ns(s: f64) -> f64 {
    // Beyond ~104 days of seconds `s * 1e9` passes 2^53 and rounding would add error.
    if s.is_finite() && s.abs() < 9.0e6 {
        (s * 1e9).round() / 1e9
    } else {
        s
    }
}

/// An epoch timestamp rounded to the microsecond: an `f64` near 1.7e9 s resolves only about
/// 0.24 µs, so nanoseconds would print as noise digits.
fn round_us(ts: f64) -> f64 {
    if ts.is_finite() && ts.abs() < 9.0e9 {
        (ts * 1e6).round() / 1e6
    } else {
        ts
    }
}

fn ns<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_ns(*v))
}

fn ns_opt<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) => s.serialize_some(&round_ns(*x)),
        None => s.serialize_none(),
    }
}

fn us<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(round_us(*v))
}

fn us_opt<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) => s.serialize_some(&round_us(*x)),
        None => s.serialize_none(),
    }
}

/// One end of a TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Endpoint {
    /// The IP address (IPv4 or IPv6).
    pub ip: IpAddr,
    /// The TCP port.
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    /// `1.2.3.4:80`, or `[::1]:80` for IPv6, as sockets are written.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// Why a connection left the connection table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EndReason {
    /// Both sides sent FIN.
    Fin,
    /// Either side sent RST.
    Rst,
    /// No packet for longer than [`crate::Options::idle_timeout_s`] of capture time (only
    /// when that option is set).
    Idle,
    /// Another connection started on the same 4-tuple while this one was not closed: a SYN
    /// with a new initial sequence number, or a segment a quarter of the sequence space away
    /// from where this side had got to.
    Reused,
    /// The capture ended while the connection was still open.
    Eof,
}

impl EndReason {
    /// The lowercase word used in JSON and CSV.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Idle => "idle",
            EndReason::Reused => "reused",
            EndReason::Eof => "eof",
        }
    }
}

/// Three-way handshake timing as seen at the capture point.
///
/// Near the client, `syn_to_synack_s` is the network round trip and `synack_to_ack_s` is the
/// client's own turnaround; near the server it is the other way round.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Handshake {
    /// From the (last) SYN of A to the first SYN/ACK of B that acknowledges it.
    #[serde(serialize_with = "ns_opt")]
    pub syn_to_synack_s: Option<f64>,
    /// From that SYN/ACK to A's first ACK of it.
    #[serde(serialize_with = "ns_opt")]
    pub synack_to_ack_s: Option<f64>,
    /// SYN to ACK: the whole handshake. Present only when all three packets were seen.
    #[serde(serialize_with = "ns_opt")]
    pub rtt_s: Option<f64>,
}

/// Round-trip samples of one direction, tcptrace style: for each data segment, the time until
/// the first ACK from the other side that covers it. Retransmitted segments give no sample
/// (Karn's rule).
///
/// Two differences from `tcptrace -l`, which samples only the segment an ACK acknowledges
/// exactly and also times SYN and FIN: here every segment a cumulative ACK covers gives a
/// sample (so a delayed ACK of two segments yields two), and SYN/FIN are not sampled (the
/// handshake is reported in [`Handshake`]). Payload bytes and packet counts match tcptrace's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RttStats {
    /// Number of samples.
    pub samples: u64,
    /// Smallest sample, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub min_s: Option<f64>,
    /// Mean, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub avg_s: Option<f64>,
    /// Largest sample, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub max_s: Option<f64>,
    /// Sample standard deviation (n − 1), seconds; 0 for a single sample.
    #[serde(serialize_with = "ns_opt")]
    pub stdev_s: Option<f64>,
    /// Data segments left unsampled because the ACK covering them carries an earlier
    /// timestamp (the capture's clock went backwards, as on loopback).
    pub negative_gaps: u64,
}

/// Response latency of one endpoint, as tcp_stats.py measured it: for each packet the endpoint
/// sends, if the previous packet of the connection came from the peer, the gap between the two.
///
/// Count, average, minimum and maximum are exact. Percentiles are exact (nearest rank) while the
/// endpoint has at most [`crate::EXACT_SAMPLES`] samples; beyond that they come from a log
/// histogram whose buckets are at most 1/128 of their value wide (error below 0.4 %).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    /// Number of samples.
    pub count: u64,
    /// Mean, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub avg_s: Option<f64>,
    /// Smallest sample, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub min_s: Option<f64>,
    /// Largest sample, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub max_s: Option<f64>,
    /// Median, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub p50_s: Option<f64>,
    /// 99th percentile, seconds.
    #[serde(serialize_with = "ns_opt")]
    pub p99_s: Option<f64>,
    /// Packets of this endpoint that answered the peer's previous packet but carry an earlier
    /// timestamp than it (the capture's clock went backwards, as on loopback): a negative gap
    /// is no latency, so it is counted here instead of being a sample.
    pub negative_gaps: u64,
}

/// Everything one endpoint sent on one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SideStats {
    /// TCP segments sent, including pure ACKs.
    pub packets: u64,
    /// TCP payload bytes sent, as declared by the IP header (snaplen truncation does not
    /// reduce it), retransmissions included.
    pub payload_bytes: u64,
    /// Payload bytes at sequence numbers not sent before.
    pub unique_bytes: u64,
    /// Payload bytes at sequence numbers sent before.
    pub retransmitted_bytes: u64,
    /// Segments that carried at least one retransmitted byte.
    pub retransmitted_packets: u64,
    /// Segments that arrived below the highest sequence sent but filled a gap not seen before
    /// (reordered, or their first copy was not captured).
    pub out_of_order: u64,
    /// Segments advertising a zero receive window (RST excluded).
    pub zero_window: u64,
    /// Round-trip times of this endpoint's data (sent by it, acknowledged by the peer).
    pub rtt: RttStats,
    /// How fast this endpoint answered its peer.
    pub response: LatencyStats,
}

/// One TCP connection of the capture.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Connection {
    /// Order in which the analyzer first saw the connection, from 0.
    pub id: u64,
    /// The side that sent the first SYN; for a partial connection, the sender of the first
    /// packet seen (or the receiver, if that packet was a SYN/ACK).
    pub a: Endpoint,
    /// The other side.
    pub b: Endpoint,
    /// True when the connection was already open when the capture started (no SYN seen).
    pub partial: bool,
    /// Why the connection was finalized.
    pub end: EndReason,
    /// Timestamp of the first packet, seconds since the epoch.
    #[serde(serialize_with = "us")]
    pub start_ts: f64,
    /// Timestamp of the last packet, seconds since the epoch.
    #[serde(serialize_with = "us")]
    pub end_ts: f64,
    /// `end_ts - start_ts`.
    #[serde(serialize_with = "ns")]
    pub duration_s: f64,
    /// Handshake timing.
    pub handshake: Handshake,
    /// What A sent (and A's response latency, and the RTT of A's data).
    pub from_a: SideStats,
    /// What B sent.
    pub from_b: SideStats,
}

impl Connection {
    /// Payload bytes in both directions (tcp_stats.py's `bytes_transferred`).
    pub fn bytes_transferred(&self) -> u64 {
        self.from_a.payload_bytes + self.from_b.payload_bytes
    }
}

/// Totals of one analyzed capture.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Packet records read (every link type, every protocol).
    pub packets: u64,
    /// Packets that decoded to TCP, including those a filter dropped.
    pub tcp_packets: u64,
    /// Packets that were not TCP (ARP, UDP, other ether types).
    pub non_tcp_packets: u64,
    /// Packets skipped because their headers could not be decoded.
    pub skipped_malformed: u64,
    /// TCP packets dropped by the port/host filter.
    pub filtered_packets: u64,
    /// The first [`crate::MAX_WARNINGS`] warnings; the count of the rest is in `warnings_total`.
    pub warnings: Vec<String>,
    /// How many warnings there were in all.
    pub warnings_total: u64,
    /// Connections reported.
    pub connections: u64,
    /// Timestamp of the earliest packet, seconds since the epoch.
    #[serde(serialize_with = "us_opt")]
    pub first_ts: Option<f64>,
    /// Timestamp of the latest packet.
    #[serde(serialize_with = "us_opt")]
    pub last_ts: Option<f64>,
    /// LINKTYPE_ numbers of the capture's interfaces, each once, in order of appearance.
    pub link_types: Vec<u32>,
    /// Largest number of connections held in the table at once (the memory bound's driver).
    pub peak_open_connections: u64,
    /// Packet records whose timestamp is earlier than the record before them.
    pub backwards_timestamps: u64,
    /// Set when the capture could not be read to its end (cut mid-record by a killed tcpdump
    /// or a full disk, or garbage from some byte on): everything before that byte is
    /// analyzed and reported, nothing after it.
    pub stopped: Option<Stopped>,
}

/// Where and why reading a capture stopped before its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stopped {
    /// Byte offset of the record or block that could not be read.
    pub offset: u64,
    /// The error, one line, as [`crate::PcapError`] words it.
    pub error: String,
}
