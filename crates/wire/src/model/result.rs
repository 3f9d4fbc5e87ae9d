//! A test's result: outcomes per workload, CPU accounting, trace counts, intervals, metrics.

use super::*;

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
    /// Transactions the agent served (over the whole run: with `--omit`, the warm-up's
    /// too).
    pub server_transactions: u64,
    /// Transactions the client completed during the warm-up (`--omit`), in no other count
    /// here: `transactions + warmup_transactions` is what the agent served. Absent without
    /// a warm-up, or where the client counts only the measured window itself (flows
    /// multiplexed on threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup_transactions: Option<u64>,
    /// Seconds of the measured interval on the client.
    pub elapsed_s: f64,
    /// Transactions per second.
    pub rate_per_s: f64,
    /// Per-transaction latency (from the send of the request — for crr the connect — to the
    /// last byte of the response). None when no transaction completed: there is no latency
    /// to summarize, and zeros would read as the fastest run ever.
    #[serde(default)]
    pub latency: Option<LatencySummary>,
    /// The full latency histogram in HdrHistogram V2+deflate encoding, base64, nanoseconds.
    pub histogram: String,
    /// Per-flow transaction rates (flows multiplexed on threads, `--threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_spread: Option<FlowSpread>,
    /// UDP: lost transactions (restarted after a timeout), never hidden.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpRr>,
    /// TCP, a thread per flow: the client's view of its first connection over the measured
    /// interval (each flow's is in the sides' reports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
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
    /// Datagrams the sender handed to the kernel; None for a flow the sender did not
    /// report (not 0 sent).
    #[serde(default)]
    pub datagrams_sent: Option<u64>,
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
    /// Bytes the sender handed to the kernel; None when the sender reported no such flow
    /// (fewer flows than the receiver: not 0 bytes sent).
    #[serde(default)]
    pub sender_bytes: Option<u64>,
    /// Receiver's first-to-last-byte seconds.
    pub active_s: f64,
    /// UDP: this flow's datagram accounting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpStream>,
    /// TCP: the sender's view of the connection over the measured interval (congestion
    /// window, round-trip time, retransmissions, what limited it). Absent for UDP and for
    /// flows multiplexed on threads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// `--bidir`: which way this connection sent (`client_to_server`, `server_to_client`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// `send` calls the sender made over the measured interval (TCP stream loops; absent
    /// where not counted: zero-copy senders, multiplexed flows, UDP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_calls: Option<u64>,
    /// `recv` calls that returned data to the receiver over the interval (as above).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_calls: Option<u64>,
    /// Data segments the receiver's TCP counted in (`tcpi_data_segs_in`: a GRO packet as
    /// the segments it merged); the sender's count out is `tcp.data_segs_out`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_segs: Option<u64>,
}

/// One direction of a `--bidir` stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionTotals {
    /// Receiver-counted throughput of this direction's flows, 10^6 bits/s.
    pub mbps: f64,
    /// Bytes its receivers counted.
    pub receiver_bytes: u64,
    /// Bytes its senders handed to the kernel.
    pub sender_bytes: u64,
    /// Its receivers' interval, seconds.
    pub elapsed_s: f64,
    /// TCP segments its senders retransmitted in the interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// CPU seconds of this direction's sending threads (on the sending side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_cpu_s: Option<f64>,
    /// CPU seconds of this direction's receiving threads (on the receiving side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_cpu_s: Option<f64>,
}

/// Both directions of a `--bidir` stream, apart (the outcome's totals are their sums).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bidir {
    /// The client's sending flows.
    pub client_to_server: DirectionTotals,
    /// The agent's sending flows.
    pub server_to_client: DirectionTotals,
}

/// The socket options the kernel applied, per side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SockApplied {
    /// On the client's data connection.
    pub client: Option<AppliedSockOpts>,
    /// On the agent's.
    pub server: Option<AppliedSockOpts>,
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
    /// TCP segments the senders retransmitted during the measured interval, all flows
    /// (from `flows[].tcp`); absent when no flow's TCP state was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Of them, those the receivers reported they had already (D-SACK, `flows[].tcp.
    /// dsack_dups_interval`): spurious, reordered or resent too early, not lost. Absent
    /// unless every flow's count was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spurious_retransmits: Option<u64>,
    /// `--bidir`: each direction apart (then `direction` is `bidirectional` and the
    /// totals above are both directions').
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bidir: Option<Bidir>,
    /// `--zerocopy msg`: the sending side's MSG_ZEROCOPY sends, as the kernel reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<ZeroCopyCounts>,
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
    /// The sender's view of the connection over the transfer (`TCP_INFO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
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

impl Outcome {
    /// The work done in the measured interval in its unit: transactions completed, or
    /// bytes received (by the receiving end; every download's body for http).
    pub fn work(&self) -> (crate::Unit, f64) {
        match self {
            Outcome::Rr(r) | Outcome::Crr(r) => (crate::Unit::Transactions, r.transactions as f64),
            Outcome::Stream(s) => (crate::Unit::Bytes, s.receiver_bytes as f64),
            Outcome::Bulk(b) => (crate::Unit::Bytes, b.receiver_bytes as f64),
            Outcome::Http(h) => (
                crate::Unit::Bytes,
                h.downloads.iter().map(|d| d.bytes).sum::<u64>() as f64,
            ),
        }
    }
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
    /// Busy time the kernel's tick never sampled, of no known kind (see
    /// [`CpuTimes::unsampled`]); 0 in results from before 2026-11-29.
    #[serde(default)]
    pub unsampled_pct: f64,
    /// Everything but idle, iowait and steal (the unsampled busy time included).
    pub busy_pct: f64,
    /// Busy percent of each CPU.
    pub per_cpu_busy_pct: Vec<f64>,
    /// Each CPU's split by kind, in percent of that CPU's time (absent in results from
    /// before 2026-11-27): what a stream's side spent its CPU on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_cpu: Vec<CpuShares>,
    /// Wall-clock length of the interval the split covers, seconds; 0 where not recorded
    /// (results from before 2026-11-29). /proc/stat counts its kinds in whole ticks of
    /// 1/`USER_HZ` s, so over a short interval each kind is coarse.
    #[serde(default)]
    pub wall_s: f64,
}

/// One CPU's time by kind over an interval, in percent of that CPU's time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuShares {
    /// User time on the host itself (guest time removed).
    pub user_pct: f64,
    /// Kernel time outside interrupts (system calls: a stream's copies).
    pub system_pct: f64,
    /// Hard interrupts.
    pub irq_pct: f64,
    /// Soft interrupts (the network stack's receive and transmit completion work).
    pub softirq_pct: f64,
    /// Stolen by the hypervisor.
    pub steal_pct: f64,
    /// Running guests' vCPUs.
    pub guest_pct: f64,
    /// Idle (including iowait).
    pub idle_pct: f64,
    /// Busy time the kernel's tick never sampled, of no known kind (see
    /// [`CpuTimes::unsampled`]); 0 in results from before 2026-11-29.
    #[serde(default)]
    pub unsampled_pct: f64,
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
    /// This side's thread CPU in µs per unit (transaction, or KB moved); None when no unit
    /// of work was done (nothing to divide by).
    #[serde(default)]
    pub service_demand_us: Option<f64>,
    /// System-wide busy CPU in µs per unit (what netperf -c/-C reports); None as above.
    #[serde(default)]
    pub system_service_demand_us: Option<f64>,
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
    /// CPU used by the `--capture` recorder (tcpdump) over the measured interval, in
    /// percent of one CPU; not in `other_cpu_pct`. Absent without a capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_cpu_pct: Option<f64>,
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
    /// What the kernel applied on each side, read back from a data connection: a buffer it
    /// doubled or clamped, the congestion control and MSS in effect. Absent where no side
    /// read it (flows multiplexed on threads, crr, http).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sock_applied: Option<SockApplied>,
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
    /// by exit reason on the vCPUs' CPUs: over the measured interval, per unit of work,
    /// where the host drives the test; over the whole test (`whole_test_s`) where a guest
    /// does, since the host cannot see the guest's interval.
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
    /// The bulk streams this test ran beside (a spec config's `load`); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<BesideLoad>,
    /// The hypervisor's view of the VM the test's far end ran in (`--vm`): its threads'
    /// CPU, run-queue wait and switches, and KVM's per-VM counters, over the measured
    /// window; absent without `--vm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_vm: Option<crate::HostVm>,
    /// Seconds run before the measured interval and not measured (`--omit`, iperf3's
    /// `-O`): the warm-up; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omit_s: Option<f64>,
    /// This host's CPUs over a test a guest it runs drove (`--placement guest:guest-host`,
    /// `guest-guest`, `loopback`): then neither side's figures are this host's, yet the
    /// host paid for the test (its vCPU threads, QEMU, its own agent). Absent elsewhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<HostCpu>,
    /// The client's link was shaped to this many bits/s (`--link-rate`: a namespace
    /// placement's token bucket, which counts each packet's headers too): the stated limit
    /// a stream can be bound by. Absent without shaping.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_rate_bps: Option<u64>,
}

/// This host's busy CPUs over a test driven from inside a guest it runs, over the whole
/// test (the host cannot see the guest's measured interval, so this is a rate over a
/// window of its own, said with its length).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCpu {
    /// Seconds between the two samples.
    pub window_s: f64,
    /// The host's system-wide split over that window.
    pub system: CpuSplit,
    /// Seconds the host's CPUs spent in cpuidle's POLL state (idle to /proc/stat, busy to
    /// a cost); 0 where idle states were counted and none is POLL; null where cpuidle
    /// could not be read.
    pub poll_s: Option<f64>,
}

/// Bulk streams a test ran beside, through the same path (a spec config's `load`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BesideLoad {
    /// Streams (128 KiB sends each).
    pub streams: u32,
    /// They ran server → client.
    pub reverse: bool,
    /// Their receivers' total throughput, 10^6 bits/s; null when their test failed.
    pub mbps: Option<f64>,
    /// Why their test failed, if it did (the loaded test's result stands: it ran beside
    /// whatever load there was until then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
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
    /// Counts taken from another source than the tracepoint, with why (a CPU whose idle
    /// loop fires no `power:cpu_idle` takes cpuidle's count): counted, so not `missing`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub substituted: Vec<String>,
    /// Set when the counts span the whole test (connect to report, set-up and stop
    /// included) rather than its measured interval: how long they ran, in seconds. Then
    /// nothing is per unit of work (`per_unit` and `per_side` are empty): the units were
    /// counted over the interval alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub whole_test_s: Option<f64>,
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
    /// `--bidir`: the client's sending flows' 10^6 bits/s (bytes handed to the kernel).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_client_to_server: Option<f64>,
    /// `--bidir`: the client's receiving flows' 10^6 bits/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_server_to_client: Option<f64>,
    /// stream, client sending over TCP: segments retransmitted in the interval, all flows
    /// (absent unless every flow's sender was read at both ends of the interval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// stream, client sending over TCP: each flow's `TCP_INFO` at the interval's end, its
    /// counters (retransmits, busy and limited times) over the interval; in flow order,
    /// present under the same condition as `retransmits`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flow_tcp: Vec<TcpInfo>,
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
    /// The NIC's backend: `tap` (a bridge virtperf made) or `user` (QEMU's user
    /// networking, SLIRP, with forwarded ports). Results stored before it: tap.
    #[serde(default = "tap")]
    pub net: String,
}

fn tap() -> String {
    "tap".into()
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
    /// Counters that could not be read (at the start or the end), with why: absent from
    /// `deltas`, never counted as 0.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unread: BTreeMap<String, String>,
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
                let mut v = vec![m("rate_per_s", "trans/s", o.rate_per_s, true)];
                // No completed transaction: no latency was measured, so none is stored.
                if let Some(l) = &o.latency {
                    v.push(m("mean_us", "µs", l.mean_us, false));
                    v.push(m("p50_us", "µs", l.p50_us, false));
                    v.push(m("p99_us", "µs", l.p99_us, false));
                }
                if let Some(u) = &o.udp {
                    v.push(m("lost_pct", "%", u.lost_pct, false));
                }
                v
            }
            Outcome::Stream(o) => {
                let mut v = vec![m("mbps", "Mbit/s", o.mbps, true)];
                if let Some(r) = o.retransmits {
                    v.push(m("retransmits", "segments", r as f64, false));
                }
                if let Some(r) = o.spurious_retransmits {
                    v.push(m("spurious_retransmits", "segments", r as f64, false));
                }
                if let Some(b) = &o.bidir {
                    v.push(m(
                        "mbps_client_to_server",
                        "Mbit/s",
                        b.client_to_server.mbps,
                        true,
                    ));
                    v.push(m(
                        "mbps_server_to_client",
                        "Mbit/s",
                        b.server_to_client.mbps,
                        true,
                    ));
                }
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
        // Beside a spec config's load: the streams' throughput, so tables show what the
        // rr was loaded with (absent where their test failed).
        if let Some(mbps) = self.load.as_ref().and_then(|l| l.mbps) {
            v.push(m("load_mbps", "Mbit/s", mbps, true));
        }
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
        let unit = if crate::Unit::is_transactions(&self.cpu.unit) {
            "µs/tr"
        } else {
            "µs/KB"
        };
        if let Some(d) = self.cpu.client.service_demand_us {
            v.push(m("client_demand_us", unit, d, false));
        }
        if let Some(d) = self.cpu.server.as_ref().and_then(|s| s.service_demand_us) {
            v.push(m("server_demand_us", unit, d, false));
        }
        if let Some(e) = &self.events {
            v.extend(e.metrics());
        }
        if let Some(t) = &self.trace {
            v.extend(t.metrics());
        }
        if let Some(h) = &self.host_vm {
            v.extend(h.metrics());
        }
        v
    }

    /// The first of [`TestResult::metrics`]: what repetitions and CI targets are judged by.
    pub fn primary_metric(&self) -> Metric {
        self.metrics().swap_remove(0)
    }
}
