//! Workloads and their parameters: what a test runs, its validation and its name.

#[allow(unused_imports)]
use super::*;

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
            w @ Workload::Stream { .. } => stream_text(w),
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
/// `describe` of a stream: sizes, flows, direction, UDP and zero-copy settings.
fn stream_text(w: &Workload) -> String {
    let Workload::Stream {
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
        bidir,
        zerocopy,
        buf_offset,
    } = w
    else {
        return String::new();
    };
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
        match (*bidir, *reverse) {
            (true, _) => "both directions",
            (false, true) => "server→client",
            (false, false) => "client→server",
        }
    ) + &udp_stream_text(*protocol, *rate_bps, *gso, *gro)
        + &zerocopy
            .map(|z| {
                format!(
                    ", zero-copy ({})",
                    if z == ZeroCopy::Msg {
                        "MSG_ZEROCOPY"
                    } else {
                        "sendfile"
                    }
                )
            })
            .unwrap_or_default()
        + &buf_offset
            .map(|o| format!(", buffers {o} B into a page"))
            .unwrap_or_default()
}

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
        /// How the receiving end waits for data; None: [`RecvWait::default`] (results name
        /// it: see [`Workload::name_receive_loop`]; older results without it ran `Poll`).
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
        /// Both directions at once (iperf3 --bidir): each flow is two connections, one
        /// sending each way.
        #[serde(default, skip_serializing_if = "is_false")]
        bidir: bool,
        /// How the senders avoid copying (`--zerocopy`); absent: ordinary `send`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        zerocopy: Option<ZeroCopy>,
        /// Where each end's send and receive buffer starts within its page, bytes (0–4095;
        /// netperf's `-o`/`-O` offsets from page-aligned buffers, `-a`/`-A 4096`); absent:
        /// 0, page-aligned. How dear the kernel's copies are at an offset depends on the CPU
        /// (bench/RESULTS.md, "buffer alignment").
        #[serde(default, skip_serializing_if = "Option::is_none")]
        buf_offset: Option<u32>,
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

/// How a zero-copy stream sender sends (`stream --zerocopy[=sendfile|msg]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ZeroCopy {
    /// `sendfile(2)` from an in-memory file of one message (iperf3 -Z).
    Sendfile,
    /// `send(MSG_ZEROCOPY)` with the kernel's completion notifications reaped.
    Msg,
}

impl ZeroCopy {
    /// Parses `sendfile` or `msg`.
    pub fn parse(s: &str) -> Result<ZeroCopy, String> {
        match s.trim() {
            "sendfile" => Ok(ZeroCopy::Sendfile),
            "msg" | "msg_zerocopy" => Ok(ZeroCopy::Msg),
            other => Err(format!(
                "unknown zero-copy method {other:?} (sendfile, iperf3 -Z's; or msg, MSG_ZEROCOPY)"
            )),
        }
    }
}

/// How a stream receiver waits for data: two common application designs, which cost the
/// sender different wake-ups (and so differ most on virtual machines, where waking an idle
/// vCPU is expensive).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecvWait {
    /// Event-loop style, iperf3's: a non-blocking socket read until empty, then `poll(2)`.
    /// The default until 2026-11-26 (a result without `recv_wait` ran this loop).
    Poll,
    /// netperf's: blocking `recv` calls, sleeping inside the receive. The default: with
    /// page-aligned buffers it moves as much as `Poll` on AMD for less receiver CPU, and
    /// moved more on Intel (issue 30 §5; bench/RESULTS.md, "buffer alignment").
    #[default]
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
            Workload::Stream {
                flows, bidir: true, ..
            } => 2 * flows,
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

    /// Names the receive loop a TCP stream's receivers will use when none was asked for, so
    /// a result says which loop ran: the default changed (absent meant [`RecvWait::Poll`]
    /// in older results). Multiplexed flows (`threads`) have an epoll loop of their own and
    /// UDP receivers one blocking receive per datagram: nothing to name there.
    pub fn name_receive_loop(&mut self) {
        if let Workload::Stream {
            recv_wait,
            threads: None,
            protocol: Protocol::Tcp,
            ..
        } = self
        {
            recv_wait.get_or_insert_with(RecvWait::default);
        }
    }

    /// Checks every parameter against its limits; the message names the bad parameter.
    /// Both the client (before connecting) and the agent (on `Prepare`) call this.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Workload::Rr { .. } => validate_rr(self),
            Workload::Crr { .. } => validate_crr(self),
            Workload::Stream { .. } => validate_stream(self),
            Workload::Bulk { .. } => validate_bulk(self),
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

/// Rr's parameters within their limits and consistent with each other.
fn validate_rr(w: &Workload) -> Result<(), String> {
    let Workload::Rr {
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
    } = *w
    else {
        return Ok(());
    };
    size("request size", request)?;
    if let Some(t) = loss_timeout_ms {
        if protocol.is_tcp() {
            return Err("--loss-timeout applies to --protocol udp (TCP retransmits)".into());
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
        return Err(
            "--threads waits in epoll_wait: drop --wait, or drop --threads for a thread per flow"
                .into(),
        );
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
            return Err("give either a rate (open loop) or a gap (closed loop), not both".into());
        }
    }
    Ok(())
}

/// Crr's parameters within their limits and consistent with each other.
fn validate_crr(w: &Workload) -> Result<(), String> {
    let Workload::Crr {
        request,
        response,
        client_wait,
        server_wait,
        flows,
        threads,
    } = *w
    else {
        return Ok(());
    };
    size("request size", request)?;
    size("response size", response)?;
    check_waits(client_wait, server_wait)?;
    if flows > 1 && threads.is_none() {
        return Err(format!(
            "crr with {flows} flows needs --threads (its flows are multiplexed on worker threads)"
        ));
    }
    if threads.is_some() && !(client_wait.is_block() && server_wait.is_block()) {
        return Err("--threads waits in epoll_wait: drop --wait, or drop --threads".into());
    }
    check_flows(flows, threads)
}

/// Stream's parameters within their limits and consistent with each other.
fn validate_stream(w: &Workload) -> Result<(), String> {
    let Workload::Stream {
        send_size,
        flows,
        recv_size,
        threads,
        recv_wait,
        protocol,
        rate_bps,
        gso,
        gro,
        reverse,
        bidir,
        zerocopy,
        buf_offset,
    } = *w
    else {
        return Ok(());
    };
    size("send size", send_size)?;
    check_buf_offset(buf_offset, threads, protocol, zerocopy)?;
    if zerocopy.is_some() && (threads.is_some() || protocol != Protocol::Tcp) {
        return Err(
            "--zerocopy sends TCP flows on threads of their own: drop --threads and --protocol udp"
                .into(),
        );
    }
    if bidir && (reverse || threads.is_some() || protocol != Protocol::Tcp) {
        return Err("--bidir sends both ways on TCP flows of their own threads: drop --reverse, --threads and --protocol udp".into());
    }
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

/// `buf_offset` within a page, and only where the buffers it moves are this engine's own:
/// a thread per TCP flow copying with `send`/`recv`.
fn check_buf_offset(
    offset: Option<u32>,
    threads: Option<u32>,
    protocol: Protocol,
    zerocopy: Option<ZeroCopy>,
) -> Result<(), String> {
    let Some(o) = offset else { return Ok(()) };
    if o >= super::PAGE_BYTES {
        return Err(format!(
            "buffer offset {o} is not within a page: give 0 to {} bytes",
            super::PAGE_BYTES - 1
        ));
    }
    if threads.is_some() || protocol != Protocol::Tcp || zerocopy.is_some() {
        return Err("--buf-offset places a TCP flow's own send and receive buffers: drop --threads, --protocol udp and --zerocopy".into());
    }
    Ok(())
}

/// Bulk's parameters within their limits and consistent with each other.
fn validate_bulk(w: &Workload) -> Result<(), String> {
    let Workload::Bulk {
        bytes: b,
        send_size,
        ..
    } = *w
    else {
        return Ok(());
    };
    size("send size", send_size)?;
    bytes(b)
}
