//! The critical path of a request/response transaction as a sampled trial saw it
//! (`--timeline`, issue 28): stages between tracepoint hits, in-situ wake-up and idle-exit
//! latencies, and one typical transaction's events for a swimlane.

use serde::{Deserialize, Serialize};

/// What a `--timeline` trial saw. The trial is separate from the test's measured interval
/// (sampling every hit costs time), so none of this is mixed into the headline numbers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timeline {
    /// The client's and the server's CPU.
    pub client_cpu: u32,
    /// See `client_cpu`.
    pub server_cpu: u32,
    /// Length of the sampled trial, seconds.
    pub trial_s: f64,
    /// Transactions whose whole path was seen, in order.
    pub transactions: u64,
    /// Transactions left out: an event missing or out of order (a lost record, a
    /// spurious wake-up).
    pub skipped: u64,
    /// Records the full perf buffers dropped (the kernel's count).
    pub lost_records: u64,
    /// The stages in path order; their p50s are summed in `sum_p50_us` (a stage that
    /// never occurred adds nothing).
    pub stages: Vec<Stage>,
    /// Sum of the stages' medians, µs.
    pub sum_p50_us: f64,
    /// The engine's own rr median in the same trial, µs.
    pub rr_p50_us: Option<f64>,
    /// `(sum_p50_us - rr_p50_us) / rr_p50_us`, percent: how far the stages' medians are
    /// from the measured median (they need not add up exactly: a sum of medians is not the
    /// median of sums).
    pub gap_pct: Option<f64>,
    /// The test's own rr median (its measured interval, not sampled), µs: against
    /// `rr_p50_us`, what sampling every hit cost each transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline_p50_us: Option<f64>,
    /// In-situ latencies and counts.
    pub in_situ: InSitu,
    /// Stages whose events (almost) never fired, with why that may be.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unseen: Vec<String>,
    /// The events of the transaction nearest the median, for a swimlane.
    pub example: Vec<Mark>,
}

/// One stage of the path: from one tracepoint hit to the next.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    /// What happens in it ("server CPU leaves idle").
    pub name: String,
    /// The CPU it runs on (the side's CPU; a wake-up's delivery is charged to the woken
    /// side's CPU).
    pub cpu: u32,
    /// Median, µs, over all transactions (a transaction where the stage did not occur
    /// counts 0: its time is in the next stage); null when it occurred in none.
    pub p50_us: Option<f64>,
    /// 90th percentile, µs; null likewise.
    pub p90_us: Option<f64>,
    /// Fraction of transactions in which the stage occurred (its closing event was seen).
    pub seen: f64,
}

/// Latencies measured inside the sampled transactions, µs, and events per transaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InSitu {
    /// Server thread woken → switched in (transactions where it slept).
    pub server_wakeup: Option<Pct>,
    /// Client thread woken → switched in.
    pub client_wakeup: Option<Pct>,
    /// IPI sent to an idle CPU → that CPU leaves idle, both sides: in a guest, the halted
    /// vCPU's wake-up by the host (what halt polling saves).
    pub idle_exit: Option<Pct>,
    /// The CPU left idle → the woken thread runs.
    pub idle_to_run: Option<Pct>,
    /// `idle_exit`'s three parts, on the guest's clock (both sides woken from idle, where
    /// each event was sampled): the IPI sent → the sender's x2APIC ICR write;
    #[serde(default)]
    pub ipi_to_icr: Option<Pct>,
    /// the ICR write → the IPI's entry on the idle CPU: delivery to a halted vCPU, the
    /// host's part (the sender's ICR exit, the HLT exit's wake-up, the vCPU entered again);
    #[serde(default)]
    pub ipi_delivery: Option<Pct>,
    /// the IPI's entry → the CPU leaves idle: the guest's own part (the handler, the way
    /// out of the idle state).
    #[serde(default)]
    pub idle_exit_in_guest: Option<Pct>,
    /// The CPU left idle → its TSC-deadline write done, before the woken thread ran: the
    /// tick a deep idle state stopped, restarted (a VM exit without APICv); wake-ups where
    /// it happened. Polling idle keeps the tick, so halt polling saves this too.
    #[serde(default)]
    pub tick_restart: Option<Pct>,
    /// IPI sent → that tick restarted, per wake-up where both were seen: the whole of what
    /// leaving a deep idle state costs the round trip.
    #[serde(default)]
    pub idle_exit_with_tick: Option<Pct>,
    /// The client's `send` entered → the server's `recv` returned: the request's
    /// delivery, wake-up included.
    #[serde(default)]
    pub request_delivery: Option<Pct>,
    /// The server's `send` entered → the client's `recv` returned.
    #[serde(default)]
    pub response_delivery: Option<Pct>,
    /// Sides woken from idle per transaction (0 to 2); None when a CPU's idle loop fired
    /// no tracepoint in the sampled trial (named in `idle_untraced_cpus`): its wake-ups
    /// from idle are unknown, not zero.
    #[serde(default)]
    pub idle_wakeups_per_transaction: Option<f64>,
    /// The test's CPUs on which no idle tracepoint fired during the sampled trial (never
    /// idle, or an idle loop that runs untraced): whether they were woken from idle is
    /// not known.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idle_untraced_cpus: Vec<u32>,
    /// x2APIC ICR writes (IPIs sent) per transaction, on the two CPUs; None (null) where
    /// the kernel runs its APIC in xAPIC mode, whose ICR writes are MMIO stores the msr
    /// tracepoint never sees.
    pub icr_writes_per_transaction: Option<f64>,
    /// TSC-deadline writes (timer reprogrammed) per transaction; None (null) where the
    /// CPU has no TSC-deadline timer (its tick is reprogrammed some other way, unseen).
    pub tsc_deadline_writes_per_transaction: Option<f64>,
    /// NET_RX softirq time per transaction inside the two deliveries (a side's send →
    /// the peer's recv returns): the receive processing on the critical path. It overlaps
    /// the stages (it runs inside "send → woken"), so it is not one of them.
    #[serde(default)]
    pub net_rx_on_path: Option<Pct>,
    /// NET_RX softirq runs per transaction that overlapped the deliveries; null in results
    /// recorded before it was sampled.
    #[serde(default)]
    pub net_rx_runs_per_transaction: Option<f64>,
}

/// A median and a 90th percentile, µs, over `n` samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Pct {
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// Samples.
    pub n: u64,
}

/// One event of the example transaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    /// µs since the client's send.
    pub t_us: f64,
    /// The CPU it happened on.
    pub cpu: u32,
    /// What it was ("send", "IPI → 1", "idle exit", "server runs").
    pub what: String,
}

/// The counted events that are VM exits in a guest, with what each costs and what would
/// remove it: `(key in TraceCounts, label, cost in a guest)`.
pub const EXIT_CAUSES: &[(&str, &str, &str)] = &[
    (
        crate::counter::MSR_WRITE_TSC_DEADLINE,
        "TSC-deadline writes (timer reprogrammed)",
        "exit unless APICv/posted interrupts",
    ),
    (
        crate::counter::MSR_WRITE_ICR,
        "ICR writes (IPIs sent)",
        "exit unless APICv/posted interrupts (IPI virtualization)",
    ),
    (
        crate::counter::MSR_WRITE_EOI,
        "EOI writes",
        "exit unless APICv/posted interrupts (or PV EOI)",
    ),
    (
        crate::counter::MSR_WRITE_APIC_TIMER,
        "APIC-timer writes",
        "exit unless APICv/posted interrupts",
    ),
    (
        crate::counter::IDLE_HALTS,
        "idle entries that halt (not POLL)",
        "exit (HLT); guest halt polling turns them into polls",
    ),
];

impl crate::TraceCounts {
    /// The sum of [`EXIT_CAUSES`] per unit: how many VM exits a unit of work likely costs
    /// in a guest without APICv, posted interrupts or halt polling. `None` unless every
    /// one of them was counted.
    pub fn likely_exits(&self) -> Option<f64> {
        EXIT_CAUSES
            .iter()
            .map(|(k, _, _)| self.per_unit.get(*k).copied())
            .sum()
    }

    /// The counts worth comparing between runs (fewer is better): the exit causes and
    /// their sum, per unit of work.
    pub fn metrics(&self) -> Vec<crate::Metric> {
        let unit = if crate::Unit::is_transactions(&self.unit) {
            "/tr"
        } else {
            "/MB"
        };
        let mut v: Vec<crate::Metric> = [
            (crate::counter::MSR_WRITE_ICR, "trace_icr_writes"),
            (
                crate::counter::MSR_WRITE_TSC_DEADLINE,
                "trace_tsc_deadline_writes",
            ),
            (crate::counter::IDLE_ENTRIES, "trace_idle_entries"),
            (crate::counter::IDLE_HALTS, "trace_idle_halts"),
        ]
        .iter()
        .filter_map(|(k, name)| {
            Some(crate::Metric {
                name,
                unit,
                value: *self.per_unit.get(*k)?,
                higher_is_better: false,
            })
        })
        .collect();
        if let Some(x) = self.likely_exits() {
            v.push(crate::Metric {
                name: "trace_likely_exits",
                unit,
                value: x,
                higher_is_better: false,
            });
        }
        v
    }
}

/// What would remove each exit cause on a machine, read from its fingerprint's
/// interrupt-virtualization entries (`Env::interrupt_virt`).
pub fn exit_remedies(interrupt_virt: &std::collections::BTreeMap<String, String>) -> Vec<String> {
    let on = |k: &str| {
        interrupt_virt
            .get(k)
            .is_some_and(|v| matches!(v.as_str(), "Y" | "1" | "y"))
    };
    let pv = interrupt_virt
        .get("kvm_guest_pv_features")
        .cloned()
        .unwrap_or_default();
    let mut out = Vec::new();
    if interrupt_virt.contains_key("kvm_guest_pv_features") {
        out.push(
            "in a KVM guest: whether the host has APICv/AVIC with posted interrupts is not visible from here; with them, the MSR writes above do not exit".to_string(),
        );
        for (f, what) in [
            ("pv_eoi", "pv_eoi is offered: EOIs mostly skip the exit"),
            (
                "pv_send_ipi",
                "pv_send_ipi is offered: one hypercall exit per IPI sent to many CPUs",
            ),
            (
                "poll_control",
                "poll_control is offered: the guest can ask the host to halt-poll",
            ),
        ] {
            if pv.split(' ').any(|x| x == f) {
                out.push(what.to_string());
            }
        }
    }
    for (k, what) in [
        ("kvm_intel.enable_apicv", "this host's KVM has APICv on: its guests' EOI and timer writes and IPI deliveries do not exit"),
        ("kvm_intel.enable_ipiv", "this host's KVM has IPI virtualization on: its guests' ICR writes do not exit"),
        ("kvm_amd.avic", "this host's KVM has AVIC on: its guests' IPIs and EOIs mostly do not exit"),
    ] {
        if on(k) {
            out.push(what.to_string());
        }
    }
    out.push("idle entries that halt: guest halt polling (the haltpoll cpuidle driver's POLL state) or idle=poll makes them polls, which exit nothing; the host's halt_poll_ns only shortens the wait after the HLT exit".into());
    out
}
