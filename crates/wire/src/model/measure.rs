//! What each side measures and reports: CPU times, events, NIC counters, flows.

use super::*;

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
    /// Busy time the kernel's tick never sampled, of no known kind: the wall clock less
    /// every field above, where it falls short by more than the counters' resolution.
    /// Under `NO_HZ` the kernel times idle exactly but charges busy time a tick at a time,
    /// to whatever runs when its tick fires; where a CPU idles and wakes thousands of
    /// times a second (a round trip's wake-ups, a virtual timer's late tick) most ticks
    /// land in idle and whole busy periods go uncharged. 0 in results from before
    /// 2026-11-29.
    #[serde(default)]
    pub unsampled: f64,
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
            + self.unsampled
    }
    /// Time not idle, not waiting for I/O, and not stolen (the unsampled busy time
    /// included).
    pub fn busy(&self) -> f64 {
        self.user + self.nice + self.system + self.irq + self.softirq + self.unsampled
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
    /// Seconds the threads were runnable but waited for a CPU (the kernel's schedstat run
    /// delay); absent where the kernel keeps none (`CONFIG_SCHED_INFO`, which then holds
    /// for every thread alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_s: Option<f64>,
    /// Times the scheduler moved the threads from one CPU to another (`se.nr_migrations`
    /// in `/proc/…/sched`); absent where the kernel shows none (`CONFIG_SCHED_DEBUG`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
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
        // Read for every thread or for none (see `run_delay_s`): an empty sum takes the
        // first thread's figure rather than making it unknown.
        self.run_delay_s = match (self.run_delay_s, o.run_delay_s) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
        self.migrations = match (self.migrations, o.migrations) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
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
        let per_mb = crate::Unit::is_mb(&self.unit);
        let unit = if per_mb { "/MB" } else { "/tr" };
        let mut v = Vec::new();
        for (names, e) in NAMES.iter().zip([Some(&self.client), self.server.as_ref()]) {
            let Some(e) = e else { continue };
            let here = e.pinned.as_ref().map_or(&e.per_unit, |p| &p.per_unit);
            let values = [
                e.per_unit
                    .get(crate::counter::THREAD_VOLUNTARY_SWITCHES)
                    .copied(),
                here.get(crate::counter::IDLE_ENTRIES).copied(),
                ipis(here),
                here.get(crate::counter::TIMER_IRQS).copied(),
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
    Some(m.get(crate::counter::IPI_RESCHED)? + m.get(crate::counter::IPI_CALL)?)
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
    /// Packets both ways; None unless both directions were read.
    pub fn packets(&self) -> Option<u64> {
        Some(self.get(crate::counter::RX_PACKETS)? + self.get(crate::counter::TX_PACKETS)?)
    }
    /// Kicks both ways; None unless the driver reported both (an absent key is a counter
    /// that was not read, not one that stayed at zero).
    pub fn kicks(&self) -> Option<u64> {
        Some(self.get(crate::counter::RX_KICKS)? + self.get(crate::counter::TX_KICKS)?)
    }
    /// Device interrupts, all lines: the per-queue lines both ways, or the shared one.
    /// None when `/proc/interrupts` had no line of the device.
    pub fn irqs(&self) -> Option<u64> {
        nic_irqs(|k| self.get(k))
    }
    fn get(&self, k: &str) -> Option<u64> {
        self.deltas.get(k).copied()
    }
}

/// A virtio-net device's interrupts from its keys (`get`: a count or a rate, None where
/// unread): `rx_irqs` + `tx_irqs` (per-queue lines, both needed), plus `shared_irqs` (one
/// line for all queues). None when neither kind was read.
pub fn nic_irqs<T: std::ops::Add<Output = T> + Default>(
    get: impl Fn(&str) -> Option<T>,
) -> Option<T> {
    let queues = get("rx_irqs").zip(get("tx_irqs")).map(|(r, t)| r + t);
    match (queues, get("shared_irqs")) {
        (None, None) => None,
        // A device has per-queue lines or one shared line, not both: the kind it lacks
        // adds nothing.
        (q, s) => Some(q.unwrap_or_default() + s.unwrap_or_default()),
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
    /// System calls that moved this flow's data over the measured interval (`send` or
    /// `recv`; the TCP stream's own loops count them); absent where the engine does not
    /// count (zero-copy senders, flows multiplexed on threads, other workloads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    /// UDP flows: datagram counts, loss, reordering and jitter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpCounts>,
    /// A TCP connection one worker owns (not multiplexed flows): the kernel's state of it
    /// over the measured interval, as this side saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpInfo>,
    /// CPU seconds of the thread that served this flow alone (a thread per flow; absent
    /// when a thread served several).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_cpu_s: Option<f64>,
    /// What the flow moved during the warm-up (`--omit`), which no other count here
    /// includes; absent without one, or where the engine counts only the measured window
    /// itself (flows multiplexed on threads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<crate::Warmup>,
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
    /// CPU used by this side's workload threads, from the gate to their end (their last
    /// transactions, closing their connections).
    pub threads: ThreadCpu,
    /// CPU seconds of the same threads over the measured interval alone: what service
    /// demand divides (absent from older agents, and where a clock could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_cpu_s: Option<f64>,
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
    /// The socket options the kernel applied to this side's first data connection (a
    /// worker that owns one TCP connection; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sock: Option<AppliedSockOpts>,
    /// `--zerocopy msg` senders on this side: what the kernel's notifications said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy: Option<ZeroCopyCounts>,
    /// CPU seconds over the measured interval of every other user-space process on this
    /// side's machine (not this side's own process, not kernel threads; processes that
    /// exited inside it are gone): the other work, counted whole where /proc/stat's ticks
    /// miss it. Absent from older agents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_cpu_s: Option<f64>,
    /// CPU seconds over the measured interval of the recorder this side started for
    /// `--capture` (tcpdump), counted apart from `others_cpu_s`: the test's own tool, not
    /// a neighbour. Absent without a capture.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture_cpu_s: Option<f64>,
}

/// What the kernel reported of `MSG_ZEROCOPY` sends: how many it completed, and of them
/// how many it copied after all (a loopback, or a device without scatter-gather).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZeroCopyCounts {
    /// Sends the kernel reported complete.
    pub completed: u64,
    /// Of them, sends whose data it copied.
    pub copied: u64,
}

impl ZeroCopyCounts {
    /// Adds another sender's counts.
    pub fn add(&mut self, o: ZeroCopyCounts) {
        self.completed += o.completed;
        self.copied += o.copied;
    }
}

/// The kernel's TCP state of one connection (`TCP_INFO`, as `ss -ti` shows it), read by one
/// side at the end of the measured interval; counters that grow are also given over the
/// interval alone. Fields the running kernel does not report are absent, never 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub retransmits: u64,
    /// Of them, retransmitted during the measured interval.
    pub retransmits_interval: u64,
    /// Congestion window, in segments (`snd_cwnd`).
    pub snd_cwnd: u32,
    /// Sender's maximum segment size, bytes.
    pub snd_mss: u32,
    /// Smoothed round-trip time, µs (`srtt`, ss's `rtt:`).
    pub srtt_us: u32,
    /// Its mean deviation, µs (`rttvar`).
    pub rttvar_us: u32,
    /// Delivery rate the kernel estimates, bits/s (Linux ≥ 4.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_bps: Option<u64>,
    /// Pacing rate, bits/s (absent when the kernel sets none: `u64::MAX` there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_rate_bps: Option<u64>,
    /// Time the sender had data in flight during the interval, µs (Linux ≥ 4.10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_us: Option<u64>,
    /// Of it, limited by the receiver's window, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rwnd_limited_us: Option<u64>,
    /// Of it, limited by the send buffer, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sndbuf_limited_us: Option<u64>,
    /// Data segments sent during the interval (`tcpi_data_segs_out`, Linux ≥ 4.6), counted
    /// as TCP counts them: a GSO/TSO packet as the MSS-sized segments it stands for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_segs_out: Option<u64>,
    /// Data segments received during the interval (`tcpi_data_segs_in`): a GRO packet as
    /// the segments it merged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_segs_in: Option<u64>,
    /// Segments the receiver reported it had twice (D-SACK, `tcpi_dsack_dups`, ss's
    /// `dsack_dups`; Linux ≥ 4.19) during the interval: retransmissions that were spurious,
    /// the first copy had arrived (reordered, or resent too early), not lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dsack_dups_interval: Option<u64>,
    /// Reorderings the sender detected during the interval (`tcpi_reord_seen`, Linux ≥ 4.19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reord_seen_interval: Option<u64>,
    /// Packets this side received out of order during the interval (`tcpi_rcv_ooopack`,
    /// Linux ≥ 5.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ooo_received_interval: Option<u64>,
}
