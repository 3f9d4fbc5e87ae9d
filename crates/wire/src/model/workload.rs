//! Workloads: one typed parameter struct per workload, what each answers about itself
//! ([`Kind`]: its name, limits, unit of work and capabilities, in one place), and the
//! [`Workload`] enum that carries one of them over the wire and into stored results.

use super::parts::{
    bytes, bytes_text, check_buf_offset, check_flows, check_waits, on_threads, size,
    sizes_and_waits, udp_size, Protocol, RecvWait, Wait, ZeroCopy,
};
use super::unit::Unit;
use super::*;

/// What every workload's parameters answer about the workload: the questions the client,
/// the agent, spec files and reports ask, answered once beside the parameters (one `impl`
/// per workload), so no caller matches on the workload to learn them.
pub trait Kind {
    /// Short name users type (`rr`, `crr`, `stream`, `bulk`, `http`).
    fn name(&self) -> &'static str;
    /// Checks every parameter against its limits and the others; the message names the
    /// bad parameter. Both ends call it (the client before connecting, the agent on
    /// `Prepare`; spec files before the first trial).
    fn validate(&self) -> Result<(), String>;
    /// The parameters for people, sizes as resolved byte counts (`65536 B (64 KiB)
    /// sends, 1 flow, client→server`): what a header prints.
    fn describe(&self) -> String;
    /// Its unit of work.
    fn unit(&self) -> Unit;
    /// Runs for a duration (not a byte count).
    fn timed(&self) -> bool;
    /// Takes `--interval` (a time series).
    fn takes_interval(&self) -> bool;
    /// Takes `--mptcp` (its connections are the engine's to open as MPTCP).
    fn takes_mptcp(&self) -> bool;
    /// Its time series counts transactions (not bytes).
    fn ticks(&self) -> bool {
        self.unit() == Unit::Transactions
    }
    /// A side waits by spinning or polling: its threads are busy by choice.
    fn spins(&self) -> bool {
        false
    }
    /// The data path's transport.
    fn protocol(&self) -> Protocol {
        Protocol::Tcp
    }
    /// Flows and worker threads per side when flows are multiplexed on threads
    /// (`--threads`). Never more threads than flows.
    fn multiplexed(&self) -> Option<(u32, u32)> {
        None
    }
    /// Data connections each side holds open at once.
    fn connections(&self) -> u32 {
        1
    }
    /// Worker threads per side.
    fn workers(&self) -> u32 {
        self.multiplexed().map_or(1, |(_, t)| t)
    }
    /// The client's receivers end only when the agent's senders stop, so the client
    /// asks the agent to stop first.
    fn server_sends(&self) -> bool {
        false
    }
    /// Its data crosses TCP connections that `--capture` (a TCP filter, `virtperf pcap`)
    /// can record.
    fn takes_capture(&self) -> bool {
        self.protocol().is_tcp()
    }
    /// Carries a download count (`--count`).
    fn counted(&self) -> bool {
        false
    }
}

fn multiplexed(flows: u32, threads: Option<u32>) -> Option<(u32, u32)> {
    threads.map(|t| (flows, t.min(flows)))
}

fn waits_spin(a: Wait, b: Wait) -> bool {
    !a.is_block() || !b.is_block()
}

/// Request/response over one connection (netperf TCP_RR).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RrParams {
    /// Request size in bytes.
    pub request: u32,
    /// Response size in bytes.
    pub response: u32,
    /// How the client waits for each response (absent: blocking).
    #[serde(default, skip_serializing_if = "Wait::is_block")]
    pub client_wait: Wait,
    /// How the server waits for each request (absent: blocking).
    #[serde(default, skip_serializing_if = "Wait::is_block")]
    pub server_wait: Wait,
    /// Idle time between a response and the next request, µs (closed loop with think
    /// time; absent: back to back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap_us: Option<u64>,
    /// Open loop at this many requests per second, latency from each request's intended
    /// send time (absent: closed loop).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<u32>,
    /// Parallel connections, each its own request/response loop (an open loop's rate is
    /// shared among them, their schedules staggered); absent: one.
    #[serde(default = "one_flow", skip_serializing_if = "is_one_flow")]
    pub flows: u32,
    /// Worker threads per side, each multiplexing its share of the flows on epoll
    /// (neper's design); absent: one thread per flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Data path transport (absent: TCP). UDP: one datagram each way per transaction;
    /// a lost one is counted and the transaction restarted after a timeout.
    #[serde(default, skip_serializing_if = "Protocol::is_tcp")]
    pub protocol: Protocol,
    /// UDP: how long the client waits for a response before it counts the transaction
    /// lost and sends a new request, ms (absent: 50).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_timeout_ms: Option<u32>,
}

impl Kind for RrParams {
    fn name(&self) -> &'static str {
        "rr"
    }
    fn validate(&self) -> Result<(), String> {
        let RrParams {
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
        } = *self;
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
                return Err(
                    "give either a rate (open loop) or a gap (closed loop), not both".into(),
                );
            }
        }
        Ok(())
    }
    fn describe(&self) -> String {
        let mut t = sizes_and_waits(
            self.request,
            self.response,
            self.client_wait,
            self.server_wait,
        );
        if !self.protocol.is_tcp() {
            t.push_str(", UDP");
        }
        if self.flows > 1 {
            t.push_str(&format!(", {} flows", self.flows));
        }
        t.push_str(&on_threads(self.threads));
        if let Some(g) = self.gap_us {
            t.push_str(&format!(", {g} µs gap"));
        }
        if let Some(r) = self.rate_per_s {
            t.push_str(&format!(", open loop at {r}/s"));
        }
        t
    }
    fn unit(&self) -> Unit {
        Unit::Transactions
    }
    fn timed(&self) -> bool {
        true
    }
    fn takes_interval(&self) -> bool {
        true
    }
    fn takes_mptcp(&self) -> bool {
        self.protocol.is_tcp()
    }
    fn spins(&self) -> bool {
        waits_spin(self.client_wait, self.server_wait)
    }
    fn protocol(&self) -> Protocol {
        self.protocol
    }
    fn multiplexed(&self) -> Option<(u32, u32)> {
        multiplexed(self.flows, self.threads)
    }
    fn connections(&self) -> u32 {
        self.flows
    }
    fn workers(&self) -> u32 {
        self.multiplexed().map_or(self.flows, |(_, t)| t)
    }
}

/// A new connection per request/response (netperf TCP_CRR).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrrParams {
    /// Request size in bytes.
    pub request: u32,
    /// Response size in bytes.
    pub response: u32,
    /// How the client waits for each response (absent: blocking).
    #[serde(default, skip_serializing_if = "Wait::is_block")]
    pub client_wait: Wait,
    /// How the server waits for each request (absent: blocking).
    #[serde(default, skip_serializing_if = "Wait::is_block")]
    pub server_wait: Wait,
    /// Concurrent connect/request/response loops (needs `threads` above one); absent: one.
    #[serde(default = "one_flow", skip_serializing_if = "is_one_flow")]
    pub flows: u32,
    /// Worker threads per side multiplexing the flows on epoll; absent: one blocking
    /// thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
}

impl Kind for CrrParams {
    fn name(&self) -> &'static str {
        "crr"
    }
    fn validate(&self) -> Result<(), String> {
        let CrrParams {
            request,
            response,
            client_wait,
            server_wait,
            flows,
            threads,
        } = *self;
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
    fn describe(&self) -> String {
        let mut t = sizes_and_waits(
            self.request,
            self.response,
            self.client_wait,
            self.server_wait,
        );
        if self.flows > 1 {
            t.push_str(&format!(", {} flows", self.flows));
        }
        t.push_str(&on_threads(self.threads));
        t
    }
    fn unit(&self) -> Unit {
        Unit::Transactions
    }
    fn timed(&self) -> bool {
        true
    }
    fn takes_interval(&self) -> bool {
        true
    }
    fn takes_mptcp(&self) -> bool {
        // crr opens its connections itself, one per transaction.
        false
    }
    fn spins(&self) -> bool {
        waits_spin(self.client_wait, self.server_wait)
    }
    fn multiplexed(&self) -> Option<(u32, u32)> {
        multiplexed(self.flows, self.threads)
    }
    fn connections(&self) -> u32 {
        self.flows
    }
}

/// Unidirectional stream for a duration (netperf TCP_STREAM, iperf3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamParams {
    /// Bytes per `send` call.
    pub send_size: u32,
    /// Parallel connections.
    pub flows: u32,
    /// Server sends, client receives (netperf TCP_MAERTS, iperf3 -R).
    pub reverse: bool,
    /// Bytes per `recv` call on the receiving end (netperf -M); None: 128 KiB, netperf's
    /// default (the socket buffer size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_size: Option<u32>,
    /// How the receiving end waits for data; None: [`RecvWait::default`] (results name
    /// it: see [`Workload::name_receive_loop`]; older results without it ran `Poll`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recv_wait: Option<RecvWait>,
    /// Worker threads per side multiplexing the flows on epoll; absent: one thread per
    /// flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Data path transport (absent: TCP). UDP: `send_size`-byte datagrams, each with a
    /// sequence number and send time for loss, reordering and jitter.
    #[serde(default, skip_serializing_if = "Protocol::is_tcp")]
    pub protocol: Protocol,
    /// Paced to this many bits per second per flow (iperf3 `-b`): UDP by the sender's own
    /// schedule, TCP by the kernel (`SO_MAX_PACING_RATE`, iperf3 `--fq-rate`); absent or
    /// 0: as fast as the sender can (iperf3 `-b 0`, netperf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_bps: Option<u64>,
    /// UDP: ask for UDP_SEGMENT on the sender (GSO: one send hands the kernel many
    /// datagrams).
    #[serde(default, skip_serializing_if = "is_false")]
    pub gso: bool,
    /// UDP: ask for UDP_GRO on the receiver (coalesced receives).
    #[serde(default, skip_serializing_if = "is_false")]
    pub gro: bool,
    /// Both directions at once (iperf3 --bidir): each flow is two connections, one
    /// sending each way.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bidir: bool,
    /// How the senders avoid copying (`--zerocopy`); absent: ordinary `send`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<ZeroCopy>,
    /// Where each end's send and receive buffer starts within its page, bytes (0–4095;
    /// netperf's `-o`/`-O` offsets from page-aligned buffers, `-a`/`-A 4096`); absent:
    /// 0, page-aligned. How dear the kernel's copies are at an offset depends on the CPU
    /// (bench/RESULTS.md, "buffer alignment").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buf_offset: Option<u32>,
}

impl Kind for StreamParams {
    fn name(&self) -> &'static str {
        "stream"
    }
    fn validate(&self) -> Result<(), String> {
        let StreamParams {
            send_size,
            flows,
            recv_size,
            threads,
            recv_wait,
            protocol,
            rate_bps: _,
            gso,
            gro,
            reverse,
            bidir,
            zerocopy,
            buf_offset,
        } = *self;
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
        } else if gso || gro {
            return Err(
                "--gso and --gro offload UDP streams: add --protocol udp (protocol = \"udp\" in a spec)"
                    .into(),
            );
        }
        if let Some(r) = recv_size {
            size("receive size", r)?;
        }
        check_flows(flows, threads)
    }
    fn describe(&self) -> String {
        stream_text(self)
    }
    fn unit(&self) -> Unit {
        Unit::Bytes
    }
    fn timed(&self) -> bool {
        true
    }
    fn takes_interval(&self) -> bool {
        true
    }
    fn takes_mptcp(&self) -> bool {
        self.protocol.is_tcp()
    }
    fn protocol(&self) -> Protocol {
        self.protocol
    }
    fn multiplexed(&self) -> Option<(u32, u32)> {
        multiplexed(self.flows, self.threads)
    }
    fn connections(&self) -> u32 {
        if self.bidir {
            2 * self.flows
        } else {
            self.flows
        }
    }
    fn workers(&self) -> u32 {
        self.multiplexed().map_or(self.flows, |(_, t)| t)
    }
    fn server_sends(&self) -> bool {
        self.reverse || self.bidir
    }
}

/// Move a fixed number of bytes over one connection and time it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkParams {
    /// Total bytes to move.
    pub bytes: u64,
    /// Bytes per `send` call.
    pub send_size: u32,
    /// Server sends, client receives.
    pub reverse: bool,
}

impl Kind for BulkParams {
    fn name(&self) -> &'static str {
        "bulk"
    }
    fn validate(&self) -> Result<(), String> {
        let BulkParams {
            bytes: b,
            send_size,
            ..
        } = *self;
        size("send size", send_size)?;
        bytes(b)
    }
    fn describe(&self) -> String {
        format!(
            "{}, {}",
            bytes_text(self.bytes),
            if self.reverse {
                "server→client"
            } else {
                "client→server"
            }
        )
    }
    fn unit(&self) -> Unit {
        Unit::Bytes
    }
    fn timed(&self) -> bool {
        false
    }
    fn takes_interval(&self) -> bool {
        true
    }
    fn takes_mptcp(&self) -> bool {
        true
    }
    fn server_sends(&self) -> bool {
        self.reverse
    }
}

/// Request/response over one AF_UNIX socket between the two ends on one machine: message
/// passing without the TCP/IP stack, so TCP rr minus this is the network stack's share.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UnixRrParams {
    /// Request size in bytes.
    pub request: u32,
    /// Response size in bytes.
    pub response: u32,
    /// How the client waits for each response (absent: blocking).
    #[serde(default, skip_serializing_if = "Wait::is_block")]
    pub client_wait: Wait,
    /// How the server waits for each request (absent: blocking).
    #[serde(default, skip_serializing_if = "Wait::is_block")]
    pub server_wait: Wait,
    /// `SOCK_SEQPACKET` (message boundaries kept) instead of `SOCK_STREAM`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub seqpacket: bool,
}

impl Kind for UnixRrParams {
    fn name(&self) -> &'static str {
        "unix-rr"
    }
    fn validate(&self) -> Result<(), String> {
        size("request size", self.request)?;
        size("response size", self.response)?;
        // A seqpacket message travels whole: it must fit the send buffer (208 KiB by
        // default, net.core.wmem_default); 64 KiB fits with room to spare.
        const MAX_SEQPACKET: u32 = 64 << 10;
        if self.seqpacket && self.request.max(self.response) > MAX_SEQPACKET {
            return Err(format!(
                "a seqpacket message of {} bytes is larger than unix-rr sends whole (at most {MAX_SEQPACKET}): use a smaller size or drop --seqpacket",
                self.request.max(self.response)
            ));
        }
        check_waits(self.client_wait, self.server_wait)
    }
    fn describe(&self) -> String {
        let t = sizes_and_waits(
            self.request,
            self.response,
            self.client_wait,
            self.server_wait,
        );
        let kind = if self.seqpacket {
            "SEQPACKET"
        } else {
            "STREAM"
        };
        format!("{t}, AF_UNIX {kind}")
    }
    fn unit(&self) -> Unit {
        Unit::Transactions
    }
    fn timed(&self) -> bool {
        true
    }
    fn takes_interval(&self) -> bool {
        true
    }
    fn takes_mptcp(&self) -> bool {
        false
    }
    fn takes_capture(&self) -> bool {
        // Its data never crosses TCP/IP: a capture would hold the control connection only.
        false
    }
    fn spins(&self) -> bool {
        waits_spin(self.client_wait, self.server_wait)
    }
}

/// The agent serves a body of `bytes` bytes over HTTP/1.1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpParams {
    /// Body size in bytes.
    pub bytes: u64,
}

impl Kind for HttpParams {
    fn name(&self) -> &'static str {
        "http"
    }
    fn validate(&self) -> Result<(), String> {
        bytes(self.bytes)
    }
    fn describe(&self) -> String {
        format!("{} body", bytes_text(self.bytes))
    }
    fn unit(&self) -> Unit {
        Unit::Bytes
    }
    fn timed(&self) -> bool {
        false
    }
    fn takes_interval(&self) -> bool {
        false
    }
    fn takes_mptcp(&self) -> bool {
        // Each download opens a connection of its own.
        false
    }
    fn counted(&self) -> bool {
        true
    }
}

/// A workload and its parameters, as the client asks the agent to serve it: one variant
/// per workload, each carrying its own parameter struct. In JSON the struct's fields sit
/// beside `kind`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Workload {
    /// Request/response over one connection (netperf TCP_RR).
    Rr(RrParams),
    /// A new connection per request/response (netperf TCP_CRR).
    Crr(CrrParams),
    /// Unidirectional stream for a duration (netperf TCP_STREAM, iperf3).
    Stream(StreamParams),
    /// Move a fixed number of bytes over one connection and time it.
    Bulk(BulkParams),
    /// The agent serves a body of `bytes` bytes over HTTP/1.1.
    Http(HttpParams),
    /// Request/response over an AF_UNIX socket, both ends on one machine.
    #[serde(rename = "unix-rr")]
    UnixRr(UnixRrParams),
}

impl Workload {
    /// Its parameters as what they answer about the workload: the one match over every
    /// variant (no catch-all arm, so a new variant without its [`Kind`] does not compile).
    pub fn kind(&self) -> &dyn Kind {
        match self {
            Workload::Rr(p) => p,
            Workload::Crr(p) => p,
            Workload::Stream(p) => p,
            Workload::Bulk(p) => p,
            Workload::Http(p) => p,
            Workload::UnixRr(p) => p,
        }
    }

    /// Whether `--threads` gives each of a side's data connections a thread of its own:
    /// then each runs the thread-per-connection engine (no epoll round per receive, a
    /// private descriptor table), and its counts are that engine's (issue 45).
    pub fn one_connection_per_thread(&self) -> bool {
        let threads = match self {
            Workload::Rr(p) => p.threads,
            Workload::Stream(p) => p.threads,
            Workload::Crr(_) | Workload::Bulk(_) | Workload::Http(_) | Workload::UnixRr(_) => None,
        };
        threads.is_some_and(|t| t >= self.connections())
    }

    /// The same workload with each side waiting as given (a config's `wait`, `tune`'s
    /// spinning receivers), checked as a whole; an error for a workload whose receivers
    /// have no wait mode (streams, bulk, http).
    pub fn with_waits(&self, client: Wait, server: Wait) -> Result<Workload, String> {
        let mut w = self.clone();
        match &mut w {
            Workload::Rr(p) => (p.client_wait, p.server_wait) = (client, server),
            Workload::Crr(p) => (p.client_wait, p.server_wait) = (client, server),
            Workload::UnixRr(p) => (p.client_wait, p.server_wait) = (client, server),
            Workload::Stream(_) | Workload::Bulk(_) | Workload::Http(_) => {
                return Err(format!(
                    "{} has no wait mode (rr, crr and unix-rr do)",
                    self.kind().name()
                ))
            }
        }
        w.kind().validate()?;
        Ok(w)
    }

    /// Blocking connect/request/response (netperf's TCP_CRR).
    pub fn crr(request: u32, response: u32) -> Workload {
        Workload::Crr(CrrParams {
            request,
            response,
            client_wait: Wait::Block,
            server_wait: Wait::Block,
            flows: 1,
            threads: None,
        })
    }

    /// Blocking, back-to-back request/response (netperf's TCP_RR): the common case.
    pub fn rr(request: u32, response: u32) -> Workload {
        Workload::Rr(RrParams::new(request, response))
    }

    /// Short name (`rr`, `crr`, `stream`, `bulk`, `http`).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// See [`Kind::describe`].
    pub fn describe(&self) -> String {
        self.kind().describe()
    }

    /// See [`Kind::validate`].
    pub fn validate(&self) -> Result<(), String> {
        self.kind().validate()
    }

    /// See [`Kind::multiplexed`].
    pub fn multiplexed(&self) -> Option<(u32, u32)> {
        self.kind().multiplexed()
    }

    /// See [`Kind::connections`].
    pub fn connections(&self) -> u32 {
        self.kind().connections()
    }

    /// See [`Kind::protocol`].
    pub fn protocol(&self) -> Protocol {
        self.kind().protocol()
    }

    /// See [`Kind::timed`].
    pub fn is_timed(&self) -> bool {
        self.kind().timed()
    }

    /// Names the receive loop a TCP stream's receivers will use when none was asked for, so
    /// a result says which loop ran: the default changed (absent meant [`RecvWait::Poll`]
    /// in older results). Multiplexed flows (`threads`) have an epoll loop of their own and
    /// UDP receivers one blocking receive per datagram: nothing to name there.
    pub fn name_receive_loop(&mut self) {
        if let Workload::Stream(StreamParams {
            recv_wait,
            threads: None,
            protocol: Protocol::Tcp,
            ..
        }) = self
        {
            recv_wait.get_or_insert_with(RecvWait::default);
        }
    }
}

impl RrParams {
    /// Blocking, back-to-back request/response of these sizes on one TCP flow.
    pub fn new(request: u32, response: u32) -> RrParams {
        RrParams {
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
}

impl StreamParams {
    /// One TCP flow of `send_size`-byte sends, client to server, every option at its
    /// default.
    pub fn new(send_size: u32) -> StreamParams {
        StreamParams {
            send_size,
            flows: 1,
            reverse: false,
            recv_size: None,
            recv_wait: None,
            protocol: Protocol::Tcp,
            rate_bps: None,
            gso: false,
            gro: false,
            bidir: false,
            zerocopy: None,
            threads: None,
            buf_offset: None,
        }
    }
}

/// A UDP stream's pacing and offloads for a header (`, paced to 2000 Mbit/s per flow, GSO`).
/// `describe` of a stream: sizes, flows, direction, UDP and zero-copy settings.
fn stream_text(p: &StreamParams) -> String {
    let StreamParams {
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
    } = p;
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
    let paced = rate_bps
        .filter(|r| *r > 0)
        .map(|r| format!(", paced to {} Mbit/s per flow", r as f64 / 1e6));
    if protocol.is_tcp() {
        return paced.unwrap_or_default();
    }
    let mut t = paced.unwrap_or_else(|| ", unpaced".to_string());
    if gso {
        t.push_str(", GSO");
    }
    if gro {
        t.push_str(", GRO");
    }
    t
}
