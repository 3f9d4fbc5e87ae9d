//! The pieces workloads' parameters are made of: transport, waits, zero-copy, UDP counts,
//! and the limits every parameter is checked against.

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

impl UdpCounts {
    /// What was counted after `earlier` (the same flow's counts at the end of the warm-up,
    /// `--omit`): every count less its value then. Jitter is a smoothed state, not a count,
    /// so it stays; the offload flags too.
    pub fn since(&self, earlier: &UdpCounts) -> UdpCounts {
        UdpCounts {
            datagrams_rx: self.datagrams_rx.saturating_sub(earlier.datagrams_rx),
            datagrams_tx: self.datagrams_tx.saturating_sub(earlier.datagrams_tx),
            lost: self.lost.saturating_sub(earlier.lost),
            out_of_order: self.out_of_order.saturating_sub(earlier.out_of_order),
            highest_seq: self.highest_seq.saturating_sub(earlier.highest_seq),
            late: self.late.saturating_sub(earlier.late),
            implausible: self.implausible.saturating_sub(earlier.implausible),
            ..*self
        }
    }
}

/// What one flow moved during the warm-up (`--omit`): run, not measured, and left out of
/// every other count; kept so the two sides' whole-run counts can still be held to each
/// other (every byte sent was received, every request answered).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Warmup {
    /// Seconds from the flow's start to the end of its warm-up.
    pub s: f64,
    /// Bytes received during it.
    pub bytes_rx: u64,
    /// Bytes sent during it.
    pub bytes_tx: u64,
    /// Transactions completed during it.
    #[serde(default)]
    pub transactions: u64,
    /// A UDP flow's datagram counts during it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounts>,
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

pub(super) fn check_waits(a: Wait, b: Wait) -> Result<(), String> {
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
pub(super) fn size(what: &str, v: u32) -> Result<(), String> {
    if v == 0 || v > MAX_IO_SIZE {
        return Err(format!(
            "{what} must be between 1 and {MAX_IO_SIZE} bytes, got {v}"
        ));
    }
    Ok(())
}
pub(super) fn check_flows(flows: u32, threads: Option<u32>) -> Result<(), String> {
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
pub(super) fn udp_size(what: &str, v: u32) -> Result<(), String> {
    if v > MAX_UDP_PAYLOAD {
        return Err(format!(
            "{what} {v} bytes does not fit in one UDP datagram (at most {MAX_UDP_PAYLOAD} bytes over IPv4): use a smaller size or --protocol tcp"
        ));
    }
    Ok(())
}
pub(super) fn bytes(v: u64) -> Result<(), String> {
    if v == 0 || v > MAX_TRANSFER {
        return Err(format!(
            "byte count must be between 1 and {MAX_TRANSFER}, got {v}"
        ));
    }
    Ok(())
}

/// `, on 2 threads` for multiplexed flows, nothing for a thread per flow.
pub(super) fn on_threads(threads: Option<u32>) -> String {
    match threads {
        Some(1) => ", on 1 thread".into(),
        Some(t) => format!(", on {t} threads"),
        None => String::new(),
    }
}

/// `1 B request / 1 B response`, and how the sides wait when they do not block.
pub(super) fn sizes_and_waits(request: u32, response: u32, client: Wait, server: Wait) -> String {
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

/// `buf_offset` within a page, and only where the buffers it moves are this engine's own:
/// a thread per TCP flow copying with `send`/`recv`.
pub(super) fn check_buf_offset(
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
