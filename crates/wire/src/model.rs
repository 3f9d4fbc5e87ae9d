//! Data that crosses the wire or is stored: workloads, measurements, fingerprints, results.
//!
//! The JSON field names here are the stable schema documented in `docs/json.md`; rename
//! nothing without bumping [`RESULT_SCHEMA`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Identifier of the JSON result schema emitted by `--json`.
pub const RESULT_SCHEMA: &str = "virtperf.result/1";

/// Largest request, response or send size a workload accepts (one I/O, 64 MiB): larger
/// ones only measure memory allocation. Not the control protocol's frame cap
/// ([`crate::MAX_CONTROL_FRAME`]).
pub const MAX_IO_SIZE: u32 = 64 << 20;
/// Most parallel flows in one test with a thread per flow (no `threads`).
pub const MAX_FLOWS: u32 = 256;
/// Most flows in one test multiplexed on worker threads (`threads`): each is a socket on
/// both sides, so the file-descriptor limit usually binds first.
pub const MAX_MUX_FLOWS: u32 = 100_000;
/// Most worker threads per side (`threads`).
pub const MAX_THREADS: u32 = 256;
/// Largest byte count for bulk and http transfers (1 TiB).
pub const MAX_TRANSFER: u64 = 1 << 40;
fn one_flow() -> u32 {
    1
}

fn is_one_flow(n: &u32) -> bool {
    *n == 1
}

/// Highest open-loop request rate (`rr --rate`), per second.
pub const MAX_RATE: u32 = 1_000_000;
/// Longest test duration accepted (24 h).
pub const MAX_DURATION_MS: u64 = 24 * 3600 * 1000;

/// Largest UDP payload over IPv4 (65,535 − 8 UDP header − 20 IP header bytes): the most one
/// datagram carries, so the largest UDP request, response or send size.
pub const MAX_UDP_PAYLOAD: u32 = 65_507;
/// Smallest UDP stream datagram: its sequence number and send timestamp (8 bytes each),
/// which loss, reordering and jitter are computed from (iperf3 needs the same).
pub const MIN_UDP_STREAM_SIZE: u32 = 16;

/// The data path's transport. The control connection is TCP either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// TCP (netperf TCP_RR / TCP_STREAM). The default.
    #[default]
    Tcp,
    /// UDP datagrams (netperf UDP_RR / UDP_STREAM, iperf3 `-u`, sockperf).
    Udp,
}

impl Protocol {
    /// True for the default (TCP), so results and specs from before UDP read the same.
    pub fn is_tcp(&self) -> bool {
        *self == Protocol::Tcp
    }

    /// `tcp` or `udp`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
        }
    }

    /// Parses `tcp` or `udp`.
    pub fn parse(s: &str) -> Result<Protocol, String> {
        match s {
            "tcp" => Ok(Protocol::Tcp),
            "udp" => Ok(Protocol::Udp),
            _ => Err(format!("protocol must be `tcp` or `udp`, got `{s}`")),
        }
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What one side counted of one UDP flow's datagrams (absent on TCP flows).
///
/// Stream receivers count as iperf3 does: each datagram carries a sequence number (from 1)
/// and its send time; a sequence number above the highest seen so far opens a gap that
/// counts as lost, one below it is out of order and takes one back from the lost count, and
/// jitter is RFC 1889's smoothed transit-time difference (J += (|D| − J) / 16). An rr
/// client's `lost` counts transactions whose request or response never came back within the
/// loss timeout (each restarted with a new request); `late` the responses that then arrived
/// for an abandoned request, discarded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpCounts {
    /// Datagrams received.
    pub datagrams_rx: u64,
    /// Datagrams sent.
    pub datagrams_tx: u64,
    /// Datagrams lost (stream receiver), or transactions restarted after a timeout (rr
    /// client).
    pub lost: u64,
    /// Datagrams that arrived after a higher sequence number (stream receiver).
    #[serde(default)]
    pub out_of_order: u64,
    /// Highest sequence number received (stream receiver): iperf3's datagram total; the
    /// highest it gave a datagram (stream sender), which the receiver's may not exceed.
    #[serde(default)]
    pub highest_seq: u64,
    /// Smoothed transit-time variation, milliseconds (stream receiver).
    #[serde(default)]
    pub jitter_ms: f64,
    /// Responses that arrived for an abandoned request and were discarded (rr client).
    #[serde(default)]
    pub late: u64,
    /// UDP_SEGMENT (GSO) was set on this sender's socket.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gso: bool,
    /// UDP_GRO was set on this receiver's socket.
    #[serde(default, skip_serializing_if = "is_false")]
    pub gro: bool,
    /// Stream receiver: datagrams whose sequence number no sender of this test could have
    /// sent (0, or a jump far past the highest seen): forged or corrupt, counted here and
    /// nowhere else.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub implausible: u64,
}

/// A byte count as typed units can hide it (`64K` is 65536, `64KB` 64000): the exact count
/// first, then a readable unit when one fits (`65536 B (64 KiB)`, `100000000 B (100.0 MB)`).
pub fn bytes_text(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n;
    let mut i = 0;
    while v >= 1024 && v.is_multiple_of(1024) && i < U.len() - 1 {
        v /= 1024;
        i += 1;
    }
    if i > 0 {
        format!("{n} B ({v} {})", U[i])
    } else if n >= 10_000_000 {
        format!("{n} B ({:.1} MB)", n as f64 / 1e6)
    } else {
        format!("{n} B")
    }
}

/// `, on 2 threads` for multiplexed flows, nothing for a thread per flow.
fn on_threads(threads: Option<u32>) -> String {
    match threads {
        Some(1) => ", on 1 thread".into(),
        Some(t) => format!(", on {t} threads"),
        None => String::new(),
    }
}

/// `1 B request / 1 B response`, and how the sides wait when they do not block.
fn sizes_and_waits(request: u32, response: u32, client: Wait, server: Wait) -> String {
    let mut t = format!("{request} B request / {response} B response");
    if !client.is_block() || !server.is_block() {
        t.push_str(&format!(
            ", wait {} (client) / {} (server)",
            client.name(),
            server.name()
        ));
    }
    t
}

impl Workload {
    /// The workload's parameters for people, sizes as resolved byte counts
    /// (`65536 B (64 KiB) sends, 1 flow, client→server`): what a header prints.
    pub fn describe(&self) -> String {
        match self {
            Workload::Rr {
                request,
                response,
                client_wait,
                server_wait,
                gap_us,
                rate_per_s,
                flows,
                threads,
                protocol,
                ..
            } => {
                let mut t = sizes_and_waits(*request, *response, *client_wait, *server_wait);
                if !protocol.is_tcp() {
                    t.push_str(", UDP");
                }
                if *flows > 1 {
                    t.push_str(&format!(", {flows} flows"));
                }
                t.push_str(&on_threads(*threads));
                if let Some(g) = gap_us {
                    t.push_str(&format!(", {g} µs gap"));
                }
                if let Some(r) = rate_per_s {
                    t.push_str(&format!(", open loop at {r}/s"));
                }
                t
            }
            Workload::Crr {
                request,
                response,
                client_wait,
                server_wait,
                flows,
                threads,
            } => {
                let mut t = sizes_and_waits(*request, *response, *client_wait, *server_wait);
                if *flows > 1 {
                    t.push_str(&format!(", {flows} flows"));
                }
                t.push_str(&on_threads(*threads));
                t
            }
            Workload::Stream {
                send_size,
                flows,
                reverse,
                recv_size,
                recv_wait,
                threads,
                protocol,
                rate_bps,
                gso,
                gro,
            } => {
                format!(
                    "{}{} sends{}{}, {flows} flow{}{}, {}",
                    if protocol.is_tcp() { "" } else { "UDP " },
                    bytes_text(u64::from(*send_size)),
                    recv_size
                        .map(|r| format!(" / {} receives", bytes_text(u64::from(r))))
                        .unwrap_or_default(),
                    recv_wait
                        .map(|w| format!(" ({}ing receiver)", w.name()))
                        .unwrap_or_default(),
                    if *flows == 1 { "" } else { "s" },
                    on_threads(*threads),
                    if *reverse {
                        "server→client"
                    } else {
                        "client→server"
                    }
                ) + &udp_stream_text(*protocol, *rate_bps, *gso, *gro)
            }
            Workload::Bulk {
                bytes: b, reverse, ..
            } => format!(
                "{}, {}",
                bytes_text(*b),
                if *reverse {
                    "server→client"
                } else {
                    "client→server"
                }
            ),
            Workload::Http { bytes: b } => format!("{} body", bytes_text(*b)),
        }
    }
}

/// A UDP stream's pacing and offloads for a header (`, paced to 2000 Mbit/s per flow, GSO`).
fn udp_stream_text(protocol: Protocol, rate_bps: Option<u64>, gso: bool, gro: bool) -> String {
    if protocol.is_tcp() {
        return String::new();
    }
    let mut t = match rate_bps.filter(|r| *r > 0) {
        Some(r) => format!(", paced to {} Mbit/s per flow", r as f64 / 1e6),
        None => ", unpaced".to_string(),
    };
    if gso {
        t.push_str(", GSO");
    }
    if gro {
        t.push_str(", GRO");
    }
    t
}

/// A workload and its parameters, as the client asks the agent to serve it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Workload {
    /// Request/response over one connection (netperf TCP_RR).
    Rr {
        /// Request size in bytes.
        request: u32,
        /// Response size in bytes.
        response: u32,
        /// How the client waits for each response (absent: blocking).
        #[serde(default, skip_serializing_if = "Wait::is_block")]
        client_wait: Wait,
        /// How the server waits for each request (absent: blocking).
        #[serde(default, skip_serializing_if = "Wait::is_block")]
        server_wait: Wait,
        /// Idle time between a response and the next request, µs (closed loop with think
        /// time; absent: back to back).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        gap_us: Option<u64>,
        /// Open loop at this many requests per second, latency from each request's intended
        /// send time (absent: closed loop).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate_per_s: Option<u32>,
        /// Parallel connections, each its own request/response loop (an open loop's rate is
        /// shared among them, their schedules staggered); absent: one.
        #[serde(default = "one_flow", skip_serializing_if = "is_one_flow")]
        flows: u32,
        /// Worker threads per side, each multiplexing its share of the flows on epoll
        /// (neper's design); absent: one thread per flow.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<u32>,
        /// Data path transport (absent: TCP). UDP: one datagram each way per transaction;
        /// a lost one is counted and the transaction restarted after a timeout.
        #[serde(default, skip_serializing_if = "Protocol::is_tcp")]
        protocol: Protocol,
        /// UDP: how long the client waits for a response before it counts the transaction
        /// lost and sends a new request, ms (absent: 50).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        loss_timeout_ms: Option<u32>,
    },
    /// A new connection per request/response (netperf TCP_CRR).
    Crr {
        /// Request size in bytes.
        request: u32,
        /// Response size in bytes.
        response: u32,
        /// How the client waits for each response (absent: blocking).
        #[serde(default, skip_serializing_if = "Wait::is_block")]
        client_wait: Wait,
        /// How the server waits for each request (absent: blocking).
        #[serde(default, skip_serializing_if = "Wait::is_block")]
        server_wait: Wait,
        /// Concurrent connect/request/response loops (needs `threads` above one); absent: one.
        #[serde(default = "one_flow", skip_serializing_if = "is_one_flow")]
        flows: u32,
        /// Worker threads per side multiplexing the flows on epoll; absent: one blocking
        /// thread.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<u32>,
    },
    /// Unidirectional stream for a duration (netperf TCP_STREAM, iperf3).
    Stream {
        /// Bytes per `send` call.
        send_size: u32,
        /// Parallel connections.
        flows: u32,
        /// Server sends, client receives (netperf TCP_MAERTS, iperf3 -R).
        reverse: bool,
        /// Bytes per `recv` call on the receiving end (netperf -M); None: 128 KiB, netperf's
        /// default (the socket buffer size).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recv_size: Option<u32>,
        /// How the receiving end waits for data; None: [`RecvWait::Poll`].
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recv_wait: Option<RecvWait>,
        /// Worker threads per side multiplexing the flows on epoll; absent: one thread per
        /// flow.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        threads: Option<u32>,
        /// Data path transport (absent: TCP). UDP: `send_size`-byte datagrams, each with a
        /// sequence number and send time for loss, reordering and jitter.
        #[serde(default, skip_serializing_if = "Protocol::is_tcp")]
        protocol: Protocol,
        /// UDP: paced to this many bits per second per flow (iperf3 `-b`); absent or 0:
        /// as fast as the sender can (iperf3 `-b 0`, netperf UDP_STREAM).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rate_bps: Option<u64>,
        /// UDP: ask for UDP_SEGMENT on the sender (GSO: one send hands the kernel many
        /// datagrams).
        #[serde(default, skip_serializing_if = "is_false")]
        gso: bool,
        /// UDP: ask for UDP_GRO on the receiver (coalesced receives).
        #[serde(default, skip_serializing_if = "is_false")]
        gro: bool,
    },
    /// Move a fixed number of bytes over one connection and time it.
    Bulk {
        /// Total bytes to move.
        bytes: u64,
        /// Bytes per `send` call.
        send_size: u32,
        /// Server sends, client receives.
        reverse: bool,
    },
    /// The agent serves a body of `bytes` bytes over HTTP/1.1.
    Http {
        /// Body size in bytes.
        bytes: u64,
    },
}

/// How a stream receiver waits for data: two common application designs, which cost the
/// sender different wake-ups (and so differ most on virtual machines, where waking an idle
/// vCPU is expensive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecvWait {
    /// Event-loop style, iperf3's: a non-blocking socket read until empty, then `poll(2)`.
    /// The default.
    #[default]
    Poll,
    /// netperf's: blocking `recv` calls, sleeping inside the receive.
    Block,
}

/// How a request/response side waits for the peer's next message. Only a side that sleeps
/// puts a wake-up (an IPI, an idle exit, in a VM a halt and an injection) on the round
/// trip's critical path; spinning removes it at the price of a busy CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "lowercase")]
pub enum Wait {
    /// Sleep in a blocking `recv` (netperf's TCP_RR). The default.
    #[default]
    Block,
    /// Non-blocking `recv` in a loop: the thread never sleeps.
    Spin,
    /// Spin for up to `window_us`, then block: the user-space twin of halt polling.
    Poll {
        /// The spinning window in microseconds.
        window_us: u32,
    },
}

impl Wait {
    /// `block`, `spin` or `poll:50us`.
    pub fn name(self) -> String {
        match self {
            Wait::Block => "block".into(),
            Wait::Spin => "spin".into(),
            Wait::Poll { window_us } => format!("poll:{window_us}us"),
        }
    }

    /// True for the default (blocking), so results and specs can leave it out.
    pub fn is_block(&self) -> bool {
        *self == Wait::Block
    }
}

impl RecvWait {
    /// Parses `poll` or `block`.
    pub fn parse(s: &str) -> Result<RecvWait, String> {
        match s {
            "poll" => Ok(RecvWait::Poll),
            "block" => Ok(RecvWait::Block),
            _ => Err(format!(
                "receive wait must be `poll` (iperf3's loop) or `block` (netperf's), got `{s}`"
            )),
        }
    }

    /// `poll` or `block`.
    pub fn name(self) -> &'static str {
        match self {
            RecvWait::Poll => "poll",
            RecvWait::Block => "block",
        }
    }
}

impl Workload {
    /// Blocking connect/request/response (netperf's TCP_CRR).
    pub fn crr(request: u32, response: u32) -> Workload {
        Workload::Crr {
            request,
            response,
            client_wait: Wait::Block,
            server_wait: Wait::Block,
            flows: 1,
            threads: None,
        }
    }

    /// Blocking, back-to-back request/response (netperf's TCP_RR): the common case.
    pub fn rr(request: u32, response: u32) -> Workload {
        Workload::Rr {
            request,
            response,
            client_wait: Wait::Block,
            server_wait: Wait::Block,
            gap_us: None,
            rate_per_s: None,
            flows: 1,
            threads: None,
            protocol: Protocol::Tcp,
            loss_timeout_ms: None,
        }
    }

    /// Flows and worker threads per side when the flows are multiplexed on threads
    /// (`--threads`), for the engines that do so. Never more threads than flows, so a
    /// sweep `flows = [1, 100]` with `threads = 2` runs its single flow on one thread.
    pub fn multiplexed(&self) -> Option<(u32, u32)> {
        match *self {
            Workload::Rr {
                flows,
                threads: Some(t),
                ..
            }
            | Workload::Crr {
                flows,
                threads: Some(t),
                ..
            }
            | Workload::Stream {
                flows,
                threads: Some(t),
                ..
            } => Some((flows, t.min(flows))),
            _ => None,
        }
    }

    /// Data connections each side holds open at once (crr: one per flow while it runs).
    pub fn connections(&self) -> u32 {
        match *self {
            Workload::Rr { flows, .. }
            | Workload::Crr { flows, .. }
            | Workload::Stream { flows, .. } => flows,
            Workload::Bulk { .. } | Workload::Http { .. } => 1,
        }
    }

    /// Short name (`rr`, `crr`, `stream`, `bulk`, `http`).
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Rr { .. } => "rr",
            Workload::Crr { .. } => "crr",
            Workload::Stream { .. } => "stream",
            Workload::Bulk { .. } => "bulk",
            Workload::Http { .. } => "http",
        }
    }

    /// Checks every parameter against its limits; the message names the bad parameter.
    /// Both the client (before connecting) and the agent (on `Prepare`) call this.
    pub fn validate(&self) -> Result<(), String> {
        fn check_waits(a: Wait, b: Wait) -> Result<(), String> {
            for w in [a, b] {
                if let Wait::Poll { window_us } = w {
                    if window_us == 0 || window_us > 1_000_000 {
                        return Err(format!(
                            "a poll window must be between 1 us and 1 s, got {window_us} us"
                        ));
                    }
                }
            }
            Ok(())
        }
        fn size(what: &str, v: u32) -> Result<(), String> {
            if v == 0 || v > MAX_IO_SIZE {
                return Err(format!(
                    "{what} must be between 1 and {MAX_IO_SIZE} bytes, got {v}"
                ));
            }
            Ok(())
        }
        fn check_flows(flows: u32, threads: Option<u32>) -> Result<(), String> {
            match threads {
                None if flows == 0 || flows > MAX_FLOWS => Err(format!(
                    "flows must be between 1 and {MAX_FLOWS} with a thread per flow, got {flows} (add --threads 2 to multiplex up to {MAX_MUX_FLOWS})"
                )),
                None => Ok(()),
                Some(t) if t == 0 || t > MAX_THREADS => Err(format!(
                    "threads must be between 1 and {MAX_THREADS}, got {t}"
                )),
                Some(_) if flows == 0 || flows > MAX_MUX_FLOWS => Err(format!(
                    "flows must be between 1 and {MAX_MUX_FLOWS}, got {flows}"
                )),
                Some(_) => Ok(()),
            }
        }
        fn udp_size(what: &str, v: u32) -> Result<(), String> {
            if v > MAX_UDP_PAYLOAD {
                return Err(format!(
                    "{what} {v} bytes does not fit in one UDP datagram (at most {MAX_UDP_PAYLOAD} bytes over IPv4): use a smaller size or --protocol tcp"
                ));
            }
            Ok(())
        }
        fn bytes(v: u64) -> Result<(), String> {
            if v == 0 || v > MAX_TRANSFER {
                return Err(format!(
                    "byte count must be between 1 and {MAX_TRANSFER}, got {v}"
                ));
            }
            Ok(())
        }
        match *self {
            Workload::Rr {
                request,
                response,
                client_wait,
                server_wait,
                gap_us,
                rate_per_s,
                flows,
                threads,
                protocol,
                loss_timeout_ms,
            } => {
                size("request size", request)?;
                if let Some(t) = loss_timeout_ms {
                    if protocol.is_tcp() {
                        return Err(
                            "--loss-timeout applies to --protocol udp (TCP retransmits)".into()
                        );
                    }
                    if !(1..=60_000).contains(&t) {
                        return Err(format!(
                            "the loss timeout must be between 1 ms and 60 s, got {t} ms"
                        ));
                    }
                }
                size("response size", response)?;
                check_waits(client_wait, server_wait)?;
                if protocol == Protocol::Udp {
                    if threads.is_some() {
                        return Err("--threads multiplexes TCP connections: drop it with --protocol udp (a thread per UDP flow)".into());
                    }
                    udp_size("request size", request)?;
                    udp_size("response size", response)?;
                    if gap_us.is_some() || rate_per_s.is_some() {
                        return Err(
                            "--gap and --rate (open loop) are TCP-only for now: drop them or use --protocol tcp"
                                .into(),
                        );
                    }
                }
                check_flows(flows, threads)?;
                if threads.is_some() && (gap_us.is_some() || rate_per_s.is_some()) {
                    return Err("--threads runs flows back to back: drop --gap/--rate, or drop --threads for a thread per flow".into());
                }
                if threads.is_some() && !(client_wait.is_block() && server_wait.is_block()) {
                    return Err("--threads waits in epoll_wait: drop --wait, or drop --threads for a thread per flow".into());
                }
                if gap_us.is_some_and(|g| g > 1_000_000) {
                    return Err("the gap between transactions must be at most 1s".into());
                }
                if let Some(r) = rate_per_s {
                    if !(1..=MAX_RATE).contains(&r) {
                        return Err(format!(
                            "the request rate must be between 1 and {MAX_RATE} per second, got {r}"
                        ));
                    }
                    if gap_us.is_some() {
                        return Err(
                            "give either a rate (open loop) or a gap (closed loop), not both"
                                .into(),
                        );
                    }
                }
                Ok(())
            }
            Workload::Crr {
                request,
                response,
                client_wait,
                server_wait,
                flows,
                threads,
            } => {
                size("request size", request)?;
                size("response size", response)?;
                check_waits(client_wait, server_wait)?;
                if flows > 1 && threads.is_none() {
                    return Err(format!(
                        "crr with {flows} flows needs --threads (its flows are multiplexed on worker threads)"
                    ));
                }
                if threads.is_some() && !(client_wait.is_block() && server_wait.is_block()) {
                    return Err(
                        "--threads waits in epoll_wait: drop --wait, or drop --threads".into(),
                    );
                }
                check_flows(flows, threads)
            }
            Workload::Stream {
                send_size,
                flows,
                recv_size,
                threads,
                recv_wait,
                protocol,
                rate_bps,
                gso,
                gro,
                ..
            } => {
                size("send size", send_size)?;
                if protocol == Protocol::Udp {
                    if threads.is_some() {
                        return Err("--threads multiplexes TCP connections: drop it with --protocol udp (a thread per UDP flow)".into());
                    }
                    udp_size("send size", send_size)?;
                    if send_size < MIN_UDP_STREAM_SIZE {
                        return Err(format!(
                            "a UDP stream datagram must hold its sequence number and timestamp: send size at least {MIN_UDP_STREAM_SIZE} bytes, got {send_size}"
                        ));
                    }
                    if recv_size.is_some() || recv_wait.is_some() {
                        return Err("--recv-size and --recv-wait are TCP-only (a UDP receiver takes one whole datagram per blocking receive)".into());
                    }
                } else if rate_bps.is_some() || gso || gro {
                    return Err(
                        "--rate, --gso and --gro pace and offload UDP streams: add --protocol udp (protocol = \"udp\" in a spec)"
                            .into(),
                    );
                }
                if let Some(r) = recv_size {
                    size("receive size", r)?;
                }
                check_flows(flows, threads)
            }
            Workload::Bulk {
                bytes: b,
                send_size,
                ..
            } => {
                size("send size", send_size)?;
                bytes(b)
            }
            Workload::Http { bytes: b } => bytes(b),
        }
    }

    /// The data path's transport: UDP for `protocol = "udp"` rr and stream, else TCP.
    pub fn protocol(&self) -> Protocol {
        match self {
            Workload::Rr { protocol, .. } | Workload::Stream { protocol, .. } => *protocol,
            _ => Protocol::Tcp,
        }
    }

    /// True for workloads that run for a duration rather than a byte count.
    pub fn is_timed(&self) -> bool {
        matches!(
            self,
            Workload::Rr { .. } | Workload::Crr { .. } | Workload::Stream { .. }
        )
    }
}

/// Socket options for data connections (an experiment config's `socket = {…}`). Unset
/// fields keep the system default (and the workload's own default for `nodelay`: on for rr
/// and crr, off for streams).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SockOpts {
    /// TCP_NODELAY.
    #[serde(default)]
    pub nodelay: Option<bool>,
    /// SO_BUSY_POLL in microseconds: busy-wait on the device queue in blocking reads.
    #[serde(default)]
    pub busy_poll_us: Option<u32>,
    /// SO_SNDBUF in bytes (the kernel doubles it).
    #[serde(default)]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes (the kernel doubles it).
    #[serde(default)]
    pub rcvbuf: Option<u32>,
}

impl SockOpts {
    /// True when no option is set.
    pub fn is_default(&self) -> bool {
        *self == SockOpts::default()
    }
}

/// CPU time by /proc/stat category, in seconds, summed over the CPUs it covers.
///
/// Note: the kernel counts guest time inside `user` (and guest_nice inside `nice`); the
/// host-only share is `user - guest`, see [`CpuTimes::host_user`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuTimes {
    /// Time in user mode, including guest time.
    pub user: f64,
    /// Niced user time, including guest_nice.
    pub nice: f64,
    /// Kernel time (not interrupts).
    pub system: f64,
    /// Idle time.
    pub idle: f64,
    /// Idle while I/O was outstanding.
    pub iowait: f64,
    /// Hard-interrupt time.
    pub irq: f64,
    /// Soft-interrupt time (most of the network stack's receive path).
    pub softirq: f64,
    /// Time the hypervisor ran something else while this CPU wanted to run.
    pub steal: f64,
    /// Time spent running a guest's vCPU (this host is a hypervisor).
    pub guest: f64,
    /// Niced guest time.
    pub guest_nice: f64,
}

impl CpuTimes {
    /// User time that was not guest time.
    pub fn host_user(&self) -> f64 {
        (self.user - self.guest).max(0.0) + (self.nice - self.guest_nice).max(0.0)
    }
    /// Total of all categories (guest counted once, inside user/nice).
    pub fn total(&self) -> f64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }
    /// Time not idle, not waiting for I/O, and not stolen.
    pub fn busy(&self) -> f64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }
}

/// System-wide CPU time over an interval, from /proc/stat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuDelta {
    /// Wall-clock length of the interval in seconds.
    pub wall_s: f64,
    /// Number of CPUs in the sum.
    pub ncpus: u32,
    /// Sum over all CPUs.
    pub total: CpuTimes,
    /// Each CPU, in /proc/stat order (index = CPU number as listed there).
    pub per_cpu: Vec<CpuTimes>,
}

/// CPU time consumed by a set of threads (the workload's own threads on one side).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ThreadCpu {
    /// User-mode seconds.
    pub user_s: f64,
    /// Kernel-mode seconds (includes softirq work done in the thread's context).
    pub system_s: f64,
    /// Times the threads gave up the CPU to wait (blocked in a receive, slept).
    #[serde(default)]
    pub voluntary_switches: u64,
    /// Times the threads were preempted.
    #[serde(default)]
    pub involuntary_switches: u64,
}

impl ThreadCpu {
    /// Sum of user and system time.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }
    /// Adds another thread's time.
    pub fn add(&mut self, o: ThreadCpu) {
        self.user_s += o.user_s;
        self.system_s += o.system_s;
        self.voluntary_switches += o.voluntary_switches;
        self.involuntary_switches += o.involuntary_switches;
    }
}

/// Events counted on one side, raw and per unit of work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideEvents {
    /// Increases over the measured interval (all CPUs), plus the side's own threads'
    /// `thread_voluntary_switches` and `thread_involuntary_switches`.
    pub deltas: std::collections::BTreeMap<String, u64>,
    /// `deltas` divided by the units of work (transactions, or MB moved).
    pub per_unit: std::collections::BTreeMap<String, f64>,
    /// The same two over the side's pinned CPU only, when it was pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedEvents>,
    /// Counter files the side's machine lacks, with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The virtio-net interface the side's traffic crossed (in a guest), normalized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicEvents>,
}

impl Events {
    /// Per side: its own threads' sleeps, idle entries and IPIs (on its pinned CPU when
    /// pinned) and timer interrupts, per unit: the wake-up work a round trip costs. Fewer
    /// is better (each is a VM exit in a guest without posted interrupts).
    pub fn metrics(&self) -> Vec<Metric> {
        // Metric names must be 'static: one row per side, one column per unit.
        const NAMES: [[[&str; 4]; 2]; 2] = [
            [
                [
                    "client_sleeps_per_tr",
                    "client_idle_per_tr",
                    "client_ipis_per_tr",
                    "client_timer_per_tr",
                ],
                [
                    "client_sleeps_per_mb",
                    "client_idle_per_mb",
                    "client_ipis_per_mb",
                    "client_timer_per_mb",
                ],
            ],
            [
                [
                    "server_sleeps_per_tr",
                    "server_idle_per_tr",
                    "server_ipis_per_tr",
                    "server_timer_per_tr",
                ],
                [
                    "server_sleeps_per_mb",
                    "server_idle_per_mb",
                    "server_ipis_per_mb",
                    "server_timer_per_mb",
                ],
            ],
        ];
        let per_mb = self.unit == "MB";
        let unit = if per_mb { "/MB" } else { "/tr" };
        let mut v = Vec::new();
        for (names, e) in NAMES.iter().zip([Some(&self.client), self.server.as_ref()]) {
            let Some(e) = e else { continue };
            let here = e.pinned.as_ref().map_or(&e.per_unit, |p| &p.per_unit);
            let values = [
                e.per_unit.get("thread_voluntary_switches").copied(),
                here.get("idle_entries").copied(),
                ipis(here),
                here.get("timer_irqs").copied(),
            ];
            for (name, value) in names[usize::from(per_mb)].iter().zip(values) {
                if let Some(value) = value {
                    v.push(Metric {
                        name,
                        unit,
                        value,
                        higher_is_better: false,
                    });
                }
            }
        }
        // The virtio-net device path, where a side's traffic crossed one (in a guest).
        const NIC: [[&str; 2]; 2] = [
            ["client_kicks_per_pkt", "client_irqs_per_pkt"],
            ["server_kicks_per_pkt", "server_irqs_per_pkt"],
        ];
        for (names, e) in NIC.iter().zip([Some(&self.client), self.server.as_ref()]) {
            let Some(n) = e.and_then(|e| e.nic.as_ref()) else {
                continue;
            };
            for (name, value) in names.iter().zip([n.kicks_per_packet, n.irqs_per_packet]) {
                if let Some(value) = value {
                    v.push(Metric {
                        name,
                        unit: "/pkt",
                        value,
                        higher_is_better: false,
                    });
                }
            }
        }
        v
    }
}

/// Rescheduling plus function-call IPIs (a remote wake-up uses one or the other); None
/// unless both were counted (one alone would undercount).
fn ipis(m: &std::collections::BTreeMap<String, f64>) -> Option<f64> {
    Some(m.get("ipi_resched")? + m.get("ipi_call")?)
}

/// Events over one pinned CPU.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PinnedEvents {
    /// The CPU.
    pub cpu: u32,
    /// Increases on it.
    pub deltas: std::collections::BTreeMap<String, u64>,
    /// Per unit of work.
    pub per_unit: std::collections::BTreeMap<String, f64>,
}

/// Events per unit of work on both sides (the `events` block of a result).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Events {
    /// `transaction` or `MB`.
    pub unit: String,
    /// Client side.
    pub client: SideEvents,
    /// Agent side (absent for foreign HTTP URLs and older agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<SideEvents>,
}

/// Kernel events on one side's machine over the measured interval (see
/// `virtperf_measure::events` for the keys), as the side measured them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventCounts {
    /// Totals over all CPUs under stable keys: `context_switches`, `idle_entries`,
    /// `idle_entries_<state>`, `ipi_resched`, `ipi_call`, `timer_irqs`, `net_rx_softirqs`, …
    pub all: std::collections::BTreeMap<String, u64>,
    /// The same over the CPU this side's data threads were pinned to, when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<std::collections::BTreeMap<String, u64>>,
    /// Counter files this machine lacks (no cpuidle in a container …), with the reason.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The virtio-net interface this side's connection crossed, when it crossed one (a
    /// guest's NIC): its own counters over the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nic: Option<NicCounts>,
}

/// A virtio-net interface's counters over a side's measured interval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicCounts {
    /// Interface (`eth0`).
    pub interface: String,
    /// Its virtio device (`virtio0`).
    pub device: String,
    /// Increases: `rx_packets`, `tx_packets`, `rx_bytes`, `tx_bytes`, `rx_dropped`,
    /// `tx_dropped` (interface statistics), `rx_kicks`, `tx_kicks`, `rx_drops` (the driver's
    /// notifications to the device, each a VM exit, and its drops), `rx_irqs`, `tx_irqs`
    /// (the device's per-queue interrupt lines) or `shared_irqs` (one line for all queues).
    pub deltas: std::collections::BTreeMap<String, u64>,
}

impl NicCounts {
    /// Packets both ways.
    pub fn packets(&self) -> u64 {
        self.get("rx_packets") + self.get("tx_packets")
    }
    /// Kicks both ways.
    pub fn kicks(&self) -> u64 {
        self.get("rx_kicks") + self.get("tx_kicks")
    }
    /// Device interrupts, all lines.
    pub fn irqs(&self) -> u64 {
        self.get("rx_irqs") + self.get("tx_irqs") + self.get("shared_irqs")
    }
    fn get(&self, k: &str) -> u64 {
        self.deltas.get(k).copied().unwrap_or(0)
    }
}

/// A side's virtio-net counters normalized: what the device path cost per packet and per
/// unit of work.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NicEvents {
    /// Interface (`eth0`).
    pub interface: String,
    /// Its virtio device (`virtio0`).
    pub device: String,
    /// Raw increases (see [`NicCounts::deltas`]).
    pub deltas: std::collections::BTreeMap<String, u64>,
    /// The same per transaction or per MB.
    pub per_unit: std::collections::BTreeMap<String, f64>,
    /// Kicks (notifications, each a VM exit) per packet, both ways.
    pub kicks_per_packet: Option<f64>,
    /// Device interrupts (injections) per packet, both ways.
    pub irqs_per_packet: Option<f64>,
    /// Packets per device interrupt: how much NAPI batched.
    pub packets_per_irq: Option<f64>,
}

/// Byte counts of one data connection, as seen by one side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowStats {
    /// Bytes received on this connection.
    pub bytes_rx: u64,
    /// Bytes sent on this connection.
    pub bytes_tx: u64,
    /// Seconds from the first byte received to the last (receivers), or from the first send
    /// to the last (senders).
    pub active_s: f64,
    /// Transactions on this connection (rr and crr flows multiplexed on threads; absent
    /// otherwise).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub transactions: u64,
    /// UDP flows: datagram counts, loss, reordering and jitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounts>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Per-flow rates of a test whose flows are multiplexed on threads (`--threads`): how
/// evenly the work was shared, not only its total.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FlowSpread {
    /// Flows the client counted (connections that took part).
    pub flows: u32,
    /// Flows the agent counted.
    pub server_flows: u32,
    /// Worker threads per side.
    pub threads: u32,
    /// Unit of the rates: `transactions/s` (rr, crr) or `Mbit/s` (stream).
    pub unit: String,
    /// Slowest flow.
    pub min: f64,
    /// Median flow.
    pub p50: f64,
    /// Fastest flow.
    pub max: f64,
    /// Jain's fairness index, (Σx)² / (n·Σx²): 1 when every flow got the same rate, 1/n
    /// when one flow got everything.
    pub jain: f64,
    /// Seconds the client took to open every data connection (and the agent to accept
    /// them), before the measured interval began; for crr, whose connections are the
    /// workload, the first round of connects is inside the interval and this is 0. Null
    /// when it was not timed.
    #[serde(default)]
    pub setup_s: Option<f64>,
}

impl FlowSpread {
    /// The spread of `rates` (one per flow); None when there are none.
    pub fn of(rates: &[f64]) -> Option<FlowSpread> {
        if rates.is_empty() {
            return None;
        }
        let mut v = rates.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len() as f64;
        let sum: f64 = v.iter().sum();
        let sq: f64 = v.iter().map(|x| x * x).sum();
        Some(FlowSpread {
            flows: v.len() as u32,
            min: v[0],
            p50: v[(v.len() - 1) / 2],
            max: v[v.len() - 1],
            // All zero: nobody got anything, which is even.
            jain: if sq > 0.0 { sum * sum / (n * sq) } else { 1.0 },
            ..Default::default()
        })
    }
}

/// What one side measured of its half of a test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideReport {
    /// Wall-clock seconds between this side's start and stop snapshots.
    pub elapsed_s: f64,
    /// System-wide CPU over that interval.
    pub cpu: CpuDelta,
    /// CPU used by this side's workload threads.
    pub threads: ThreadCpu,
    /// Per data connection counts.
    pub flows: Vec<FlowStats>,
    /// Requests served (rr, crr, http).
    pub transactions: u64,
    /// Kernel events over the interval (absent from older agents).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<EventCounts>,
    /// Seconds this side took to set its data connections up, outside the measured
    /// interval (flows multiplexed on threads; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub setup_s: Option<f64>,
}

/// Latency distribution summary, microseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Standard deviation.
    pub stdev_us: f64,
    /// Smallest sample.
    pub min_us: f64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// 99.9th percentile.
    pub p999_us: f64,
    /// Largest sample.
    pub max_us: f64,
}

/// Outcome of a request/response workload (rr or crr).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RrOutcome {
    /// Completed transactions counted by the client.
    pub transactions: u64,
    /// Transactions the agent served.
    pub server_transactions: u64,
    /// Seconds of the measured interval on the client.
    pub elapsed_s: f64,
    /// Transactions per second.
    pub rate_per_s: f64,
    /// Per-transaction latency (from the send of the request — for crr the connect — to the
    /// last byte of the response).
    pub latency: LatencySummary,
    /// The full latency histogram in HdrHistogram V2+deflate encoding, base64, nanoseconds.
    pub histogram: String,
    /// Per-flow transaction rates (flows multiplexed on threads, `--threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_spread: Option<FlowSpread>,
    /// UDP: lost transactions (restarted after a timeout), never hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpRr>,
}

/// A UDP rr test's losses: a transaction whose request or response is lost is counted and
/// restarted with a new request after `timeout_ms`; its time is in no latency sample.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpRr {
    /// Transactions restarted after a timeout.
    pub lost: u64,
    /// `lost` in percent of transactions tried (completed + lost).
    pub lost_pct: f64,
    /// Responses that arrived after their transaction was given up, discarded.
    pub late: u64,
    /// How long the client waited for a response before counting it lost, ms.
    pub timeout_ms: f64,
}

/// A UDP stream's datagram accounting, as iperf3 reports it (see [`UdpCounts`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpStream {
    /// Datagrams the sender handed to the kernel.
    pub datagrams_sent: u64,
    /// Datagrams the receiver got.
    pub datagrams_received: u64,
    /// Datagrams lost: gaps in the sequence numbers minus late arrivals (iperf3's count;
    /// datagrams still in flight when the test stopped are not counted).
    pub lost: u64,
    /// `lost` in percent of the highest sequence number received (iperf3's "Lost/Total").
    pub lost_pct: f64,
    /// Datagrams that arrived after a higher sequence number.
    pub out_of_order: u64,
    /// RFC 1889 jitter, milliseconds (flows: their mean, as iperf3 sums them up).
    pub jitter_ms: f64,
    /// UDP_SEGMENT was in effect on every sender.
    pub gso: bool,
    /// UDP_GRO was in effect on every receiver.
    pub gro: bool,
}

/// One connection of a stream test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamFlow {
    /// Throughput counted by the receiver, 10^6 bits/s.
    pub mbps: f64,
    /// Bytes counted by the receiver.
    pub receiver_bytes: u64,
    /// Bytes the sender handed to the kernel.
    pub sender_bytes: u64,
    /// Receiver's first-to-last-byte seconds.
    pub active_s: f64,
    /// UDP: this flow's datagram accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpStream>,
}

/// Outcome of a stream workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOutcome {
    /// `client_to_server` or `server_to_client`.
    pub direction: String,
    /// Total receiver-counted throughput, 10^6 bits/s.
    pub mbps: f64,
    /// Total bytes counted by the receiver.
    pub receiver_bytes: u64,
    /// Total bytes the sender handed to the kernel.
    pub sender_bytes: u64,
    /// Receiver's interval (earliest first byte to latest last byte) in seconds.
    pub elapsed_s: f64,
    /// Per connection.
    pub flows: Vec<StreamFlow>,
    /// Per-flow receiver throughput (flows multiplexed on threads, `--threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_spread: Option<FlowSpread>,
    /// UDP: all flows' datagram accounting (loss, out of order, jitter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpStream>,
}

/// Outcome of a bulk transfer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BulkOutcome {
    /// `client_to_server` or `server_to_client`.
    pub direction: String,
    /// Bytes requested.
    pub bytes: u64,
    /// Bytes the receiver counted.
    pub receiver_bytes: u64,
    /// Seconds from the first send to the receiver's acknowledgement of the last byte.
    pub elapsed_s: f64,
    /// 2^20 bytes per second.
    pub mib_per_s: f64,
    /// 10^6 bits per second.
    pub mbps: f64,
}

/// One HTTP download.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Download {
    /// 1-based index.
    pub index: u32,
    /// Body bytes received.
    pub bytes: u64,
    /// HTTP status code.
    pub status: u16,
    /// Seconds from the request to the response head.
    pub ttfb_s: f64,
    /// Seconds from the request to the last body byte.
    pub duration_s: f64,
    /// 10^6 bytes per second over the whole download.
    pub mb_per_s: f64,
}

/// Outcome of an HTTP download series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HttpOutcome {
    /// URL downloaded.
    pub url: String,
    /// Each download in order.
    pub downloads: Vec<Download>,
    /// Mean download duration, seconds.
    pub mean_duration_s: f64,
    /// Total body bytes over total download time, 10^6 bytes/s.
    pub mb_per_s: f64,
}

/// Workload-specific outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// Request/response.
    Rr(RrOutcome),
    /// Connect/request/response.
    Crr(RrOutcome),
    /// Stream.
    Stream(StreamOutcome),
    /// Bulk transfer.
    Bulk(BulkOutcome),
    /// HTTP downloads.
    Http(HttpOutcome),
}

/// System-wide CPU split over an interval, in percent of all CPUs' time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSplit {
    /// User time on the host itself (guest time removed).
    pub user_pct: f64,
    /// Kernel time.
    pub system_pct: f64,
    /// Hard interrupts.
    pub irq_pct: f64,
    /// Soft interrupts.
    pub softirq_pct: f64,
    /// Stolen by the hypervisor.
    pub steal_pct: f64,
    /// Running guests.
    pub guest_pct: f64,
    /// Idle (including iowait).
    pub idle_pct: f64,
    /// Everything but idle, iowait and steal.
    pub busy_pct: f64,
    /// Busy percent of each CPU.
    pub per_cpu_busy_pct: Vec<f64>,
}

/// CPU accounting for one side of a test.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideCpu {
    /// System-wide split on that side's machine.
    pub system: CpuSplit,
    /// User seconds of this side's workload threads.
    pub process_user_s: f64,
    /// System seconds of this side's workload threads.
    pub process_system_s: f64,
    /// This side's thread CPU in µs per unit (transaction, or KB moved).
    pub service_demand_us: f64,
    /// System-wide busy CPU in µs per unit (what netperf -c/-C reports).
    pub system_service_demand_us: f64,
    /// CPU used on that machine by work other than the test, in percent of one CPU: user
    /// and kernel time of all processes minus the test's own threads (both sides' when
    /// they share the machine). Interrupt and softirq time is left out: the test's own
    /// traffic causes most of it.
    #[serde(default)]
    pub other_cpu_pct: f64,
    /// The 1-minute load average at the end of the test, where read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loadavg_1m: Option<f64>,
    /// CPU time of this side's test threads in percent of what they could have used
    /// (elapsed × the fewer of their count and the machine's CPUs); near 100 the number
    /// measured is this side's CPU limit, not the network's. Null where not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_busy_pct: Option<f64>,
}

/// CPU accounting for both sides.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuAccounting {
    /// Unit of the service demands: `transaction` or `KB` (1024 bytes received).
    pub unit: String,
    /// Both sides run on the same kernel (same boot id): their system-wide figures are the
    /// same machine measured twice, not two machines.
    pub same_host: bool,
    /// Client side.
    pub client: SideCpu,
    /// Agent side (absent for HTTP tests against a foreign URL).
    pub server: Option<SideCpu>,
}

/// Both sides' environment fingerprints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Envs {
    /// Where the client ran.
    pub client: Env,
    /// Where the agent ran (absent for foreign HTTP URLs).
    pub server: Option<Env>,
}

/// The complete result of one workload run: what `--json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// Always [`RESULT_SCHEMA`].
    pub schema: String,
    /// The workload and its parameters.
    pub workload: Workload,
    /// Requested duration in seconds (0 for byte-count workloads).
    pub duration_s: f64,
    /// CPU the client's data threads were pinned to.
    pub client_cpu: Option<u32>,
    /// CPU the agent's data threads were pinned to.
    pub server_cpu: Option<u32>,
    /// Agent address (`host:port`), or the URL for foreign HTTP tests.
    pub target: String,
    /// Socket options applied to data connections (empty: system defaults).
    #[serde(default)]
    pub sock: SockOpts,
    /// pcap file the test's traffic was recorded to (`--capture`).
    #[serde(default)]
    pub capture: Option<String>,
    /// Host KVM exit counters around the test (`--kvm-stats`).
    #[serde(default)]
    pub kvm: Option<KvmCounters>,
    /// Where the two ends ran when not on this host's loopback (`netns:veth`, …).
    #[serde(default)]
    pub placement: Option<String>,
    /// The QEMU guest(s) one or both ends ran in (`--placement guest…`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest: Option<GuestInfo>,
    /// What was measured.
    pub outcome: Outcome,
    /// Who used how much CPU.
    pub cpu: CpuAccounting,
    /// Both sides' environment.
    pub env: Envs,
    /// Things the user should know about these numbers.
    pub warnings: Vec<String>,
    /// Kernel events per unit of work on both sides (context switches, idle entries, IPIs,
    /// timer interrupts, softirqs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events: Option<Events>,
    /// Measured without the machine-wide lock (`--allow-concurrent`): another measurement
    /// may have run beside this one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_concurrent: bool,
    /// Kernel tracepoints counted on the test's CPUs over the measured interval
    /// (`--trace`); absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceCounts>,
    /// With guests (`--placement guest`) and `--trace`: the host's `kvm:kvm_exit` counted
    /// by exit reason on the vCPUs' CPUs over the whole test, per unit of work.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_trace: Option<TraceCounts>,
    /// The critical path of a transaction from a separate sampled trial (`--timeline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeline: Option<crate::Timeline>,
    /// Seconds from the end of the client's measured interval until both sides had
    /// stopped and reported (in-flight transactions finishing, connections closing, the
    /// agent's report): how far the test ran past its stop. Null where not timed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_s: Option<f64>,
    /// The time series (`--interval`), oldest first; empty without it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
}

/// Tracepoint counts over a test's measured interval, counted by the client on CPUs of its
/// machine (both sides' when they share it), system-wide on each of those CPUs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TraceCounts {
    /// The CPUs counted.
    pub cpus: Vec<u32>,
    /// `transaction` or `MB`.
    pub unit: String,
    /// Counts over the interval, summed over `cpus`, by key (`msr_write_icr`, …); a key
    /// that could not be counted is absent.
    pub deltas: std::collections::BTreeMap<String, u64>,
    /// `deltas` per unit of work (empty when there was none).
    pub per_unit: std::collections::BTreeMap<String, f64>,
    /// With the two sides pinned to different CPUs: each side's CPU's counts per unit of
    /// work, under `client` and `server`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub per_side: std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>,
    /// What could not be counted, with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// One interval of a test's time series (`--interval`), measured on the client.
/// Stream and bulk intervals carry bytes and throughput, rr and crr intervals carry
/// transactions, their rate and that interval's own latency percentiles.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Start, seconds since the measured start.
    pub t_s: f64,
    /// Length in seconds (the last interval may be shorter).
    pub duration_s: f64,
    /// stream, bulk: bytes counted by the client in the interval (sent, when the client
    /// sends; received, when it receives).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// stream, bulk: all flows' throughput, 10^6 bits/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps: Option<f64>,
    /// stream with several flows: each flow's throughput, 10^6 bits/s.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_mbps: Vec<f64>,
    /// rr, crr: transactions completed in the interval (all flows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<u64>,
    /// rr, crr: transactions per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// rr, crr: the interval's median latency, µs (absent when none completed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_us: Option<f64>,
    /// rr, crr: the interval's 99th percentile latency, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_us: Option<f64>,
}

impl Interval {
    /// The interval's headline value: Mbit/s for stream and bulk, transactions/s for rr and
    /// crr.
    pub fn value(&self) -> Option<f64> {
        self.mbps.or(self.rate_per_s)
    }
}

/// How the guest an end ran in was built, so a guest number says what produced it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GuestInfo {
    /// `kvm` (hardware-assisted) or `tcg` (QEMU's emulator).
    pub accel: String,
    /// True under TCG: the numbers measure instruction emulation, not a virtualization tax.
    pub emulated: bool,
    /// Which ends ran in guests: `host-guest`, `guest-host` or `guest-guest`.
    pub direction: String,
    /// vCPUs per guest.
    pub vcpus: u32,
    /// Memory per guest in MiB.
    pub mem_mib: u32,
    /// Guest kernel release (or the file name of a kernel given with `--kernel`).
    pub kernel: String,
    /// Whether virtio-net used vhost-net.
    pub vhost: bool,
    /// Host CPUs the vCPU threads were pinned to (empty: unpinned).
    #[serde(default)]
    pub vcpu_cpus: Vec<u32>,
    /// Host CPU seconds each guest's QEMU process used over the test (set-up included):
    /// what the guest cost the host, whatever the guest itself believes it used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qemu_cpu_s: Vec<f64>,
    /// QEMU's version line.
    pub qemu: String,
    /// virtio-net options given (`--virtio`), as `KEY` → normalized `VALUE`; empty: QEMU's
    /// defaults. What the guest's driver made of them is in that side's `env.virtio_net`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub virtio: BTreeMap<String, String>,
    /// Kernel arguments added to virtperf's own (`--guest-cmdline`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    /// Module parameters the guest's init set (`guest = { modules = … }`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub modules: BTreeMap<String, String>,
}

/// Host KVM exit counters sampled around a test (`--kvm-stats`): how many VM exits (by
/// reason) the test cost, and per transaction (seed 4's key figure).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KvmCounters {
    /// Whether counters could be read at all.
    pub available: bool,
    /// Why not, when they could not (inside a guest the host's counters are invisible).
    pub reason: Option<String>,
    /// Where they came from.
    pub source: String,
    /// Counter increases over the test, by name (`exits`, `halt_exits`, `io_exits`, …).
    pub deltas: BTreeMap<String, u64>,
    /// `exits` per transaction (rr, crr) or per KB (streams).
    pub exits_per_unit: Option<f64>,
}

/// One number a result yields, named, with its unit and which direction is better.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Metric {
    /// Stable name, e.g. `rate_per_s`, `p99_us`, `mbps`.
    pub name: &'static str,
    /// Unit for display.
    pub unit: &'static str,
    /// The value.
    pub value: f64,
    /// Whether larger values are better (rates) or worse (latencies, times, CPU cost).
    pub higher_is_better: bool,
}

impl TestResult {
    /// The numbers worth comparing for this result's workload, the primary one first:
    /// rate and latency for rr/crr, throughput for streams, time and throughput for bulk and
    /// HTTP, then each side's CPU service demand.
    pub fn metrics(&self) -> Vec<Metric> {
        let m = |name, unit, value, higher_is_better| Metric {
            name,
            unit,
            value,
            higher_is_better,
        };
        let mut v = match &self.outcome {
            Outcome::Rr(o) | Outcome::Crr(o) => {
                let mut v = vec![
                    m("rate_per_s", "trans/s", o.rate_per_s, true),
                    m("mean_us", "µs", o.latency.mean_us, false),
                    m("p50_us", "µs", o.latency.p50_us, false),
                    m("p99_us", "µs", o.latency.p99_us, false),
                ];
                if let Some(u) = &o.udp {
                    v.push(m("lost_pct", "%", u.lost_pct, false));
                }
                v
            }
            Outcome::Stream(o) => {
                let mut v = vec![m("mbps", "Mbit/s", o.mbps, true)];
                if let Some(u) = &o.udp {
                    v.push(m("lost_pct", "%", u.lost_pct, false));
                    v.push(m("jitter_ms", "ms", u.jitter_ms, false));
                    v.push(m("out_of_order", "datagrams", u.out_of_order as f64, false));
                }
                v
            }
            Outcome::Bulk(o) => vec![
                m("elapsed_s", "s", o.elapsed_s, false),
                m("mib_per_s", "MiB/s", o.mib_per_s, true),
            ],
            Outcome::Http(o) => vec![
                m("mean_duration_s", "s", o.mean_duration_s, false),
                m("mb_per_s", "MB/s", o.mb_per_s, true),
            ],
        };
        // Flows multiplexed on threads: how evenly they were served is a result too.
        let spread = match &self.outcome {
            Outcome::Rr(o) | Outcome::Crr(o) => o.flow_spread.as_ref().map(|s| (s, "trans/s")),
            Outcome::Stream(o) => o.flow_spread.as_ref().map(|s| (s, "Mbit/s")),
            _ => None,
        };
        if let Some((s, unit)) = spread {
            v.push(m("flow_min", unit, s.min, true));
            v.push(m("flow_jain", "", s.jain, true));
            if let Some(setup) = s.setup_s {
                v.push(m("setup_s", "s", setup, false));
            }
        }
        let unit = if self.cpu.unit == "transaction" {
            "µs/tr"
        } else {
            "µs/KB"
        };
        v.push(m(
            "client_demand_us",
            unit,
            self.cpu.client.service_demand_us,
            false,
        ));
        if let Some(s) = &self.cpu.server {
            v.push(m("server_demand_us", unit, s.service_demand_us, false));
        }
        if let Some(e) = &self.events {
            v.extend(e.metrics());
        }
        if let Some(t) = &self.trace {
            v.extend(t.metrics());
        }
        v
    }

    /// The first of [`TestResult::metrics`]: what repetitions and CI targets are judged by.
    pub fn primary_metric(&self) -> Metric {
        self.metrics().swap_remove(0)
    }
}

/// One cpuidle state of CPU 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleState {
    /// State name (`POLL`, `C1`, `haltpoll`, …).
    pub name: String,
    /// Exit latency in µs.
    #[serde(default)]
    pub latency_us: Option<u64>,
    /// Disabled through sysfs.
    pub disabled: bool,
}

/// Everything that shapes a network or message-passing number on one machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Env {
    /// virtperf version.
    pub tool_version: String,
    /// Git commit the binary was built from, when known.
    pub git_commit: Option<String>,
    /// Host name.
    pub hostname: String,
    /// Kernel boot id: equal on both sides means the same kernel.
    pub boot_id: String,
    /// `uname -r`.
    pub kernel: String,
    /// `uname -v`.
    pub kernel_build: String,
    /// `uname -m`.
    pub arch: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Online CPUs.
    pub cpus: u32,
    /// Hypervisor vendor from CPUID leaf 0x40000000 (`KVMKVMKVM`, `Microsoft Hv`, …), when
    /// the CPUID hypervisor bit is set.
    pub hypervisor: Option<String>,
    /// /sys/hypervisor/type, when present.
    pub hypervisor_sys: Option<String>,
    /// DMI system vendor and product.
    pub dmi: Option<String>,
    /// Kernel command line.
    pub cmdline: String,
    /// Current clocksource.
    pub clocksource: String,
    /// Cost of one monotonic clock read from user space, ns.
    pub clock_read_ns: f64,
    /// Tick mode: `periodic`, `idle` (NO_HZ_IDLE) or `full` (NO_HZ_FULL), with its source.
    pub nohz: String,
    /// cpuidle driver (`haltpoll`, `acpi_idle`, `intel_idle`, `none`).
    pub cpuidle_driver: Option<String>,
    /// cpuidle governor.
    pub cpuidle_governor: Option<String>,
    /// CPU 0's idle states.
    pub idle_states: Vec<IdleState>,
    /// The idle path in plain words.
    pub idle_explained: String,
    /// cpufreq governor of CPU 0.
    pub cpufreq_governor: Option<String>,
    /// /dev/kvm present and openable.
    pub kvm_available: bool,
    /// The KVM implementation behind /dev/kvm (`vmx`, `svm`, `pvm`).
    pub kvm_platform: Option<String>,
    /// Module parameters that steer halting: `kvm.halt_poll_ns`, `haltpoll.guest_halt_poll_ns`, …
    pub halt_poll: BTreeMap<String, String>,
    /// Whether interrupts reach a vCPU without an exit: on a KVM host the module's
    /// `enable_apicv`/`enable_ipiv` (Intel) or `avic` (AMD); inside a KVM guest the
    /// paravirtual features the hypervisor offers (`pv_send_ipi`, `pv_unhalt`, `pv_eoi`,
    /// `poll_control`), since posted interrupts themselves are invisible from inside.
    #[serde(default)]
    pub interrupt_virt: BTreeMap<String, String>,
    /// Network sysctls that shape these tests.
    pub sysctls: BTreeMap<String, String>,
    /// This machine's virtio-net interfaces as its driver sees them (a guest's NIC: the
    /// features negotiated with the device, ring sizes, queue pairs). Empty elsewhere.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub virtio_net: Vec<VirtioNet>,
    /// In a virtperf guest: the module parameters its experiment set (`--guest-module`),
    /// read back from `/sys/module`. Empty elsewhere.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub module_params: BTreeMap<String, String>,
}

/// A virtio-net interface as its driver sees it: what the device offered and the driver
/// accepted (QEMU's `-device virtio-net-pci,…` options arrive here).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VirtioNet {
    /// The virtio device (`virtio0`).
    pub device: String,
    /// Its interface (`eth0`).
    pub interface: String,
    /// Negotiated feature bits as sysfs shows them (one `0`/`1` per bit, bit 0 first;
    /// trailing zeros trimmed).
    pub features: String,
    /// The names of the bits set (`csum`, `mrg_rxbuf`, `event_idx`, …).
    pub feature_names: Vec<String>,
    /// Receive ring (virtqueue) size, from `ETHTOOL_GRINGPARAM`.
    pub rx_ring: Option<u32>,
    /// Transmit ring size.
    pub tx_ring: Option<u32>,
    /// Queue pairs in use (`ethtool -l` combined).
    pub queue_pairs: Option<u32>,
}
