//! The names counters are stored under (`Events`' and `TraceCounts`' `deltas` and
//! `per_unit`, explain's terms): one constant per key, so the code that counts and the
//! code that reads cannot spell a key two ways. The strings are the stored JSON keys.

/// Entries into the idle loop (`power:cpu_idle`, or cpuidle usage counts).
pub const IDLE_ENTRIES: &str = "idle_entries";
/// Idle entries into a state other than POLL (`power:cpu_idle` with a state index above 0,
/// or cpuidle's counts without its `poll` state): the ones that halt, each a VM exit (HLT)
/// in a guest. On x86 state 0 is the polling state: the cpuidle drivers' POLL, and
/// `cpu_idle_poll`'s (idle=poll) where no driver runs, whose halting path reports 1.
pub const IDLE_HALTS: &str = "idle_halts";
/// cpuidle's entries into its POLL state (events' per-state `idle_entries_<state>`).
pub const IDLE_ENTRIES_POLL: &str = "idle_entries_poll";
/// Local timer interrupts (`/proc/interrupts` LOC).
pub const TIMER_IRQS: &str = "timer_irqs";
/// Rescheduling IPIs received (`/proc/interrupts` RES).
pub const IPI_RESCHED: &str = "ipi_resched";
/// Function-call IPIs received (`/proc/interrupts` CAL).
pub const IPI_CALL: &str = "ipi_call";
/// Voluntary context switches of the test's threads (they slept).
pub const THREAD_VOLUNTARY_SWITCHES: &str = "thread_voluntary_switches";
/// Involuntary context switches of the test's threads (they were preempted).
pub const THREAD_INVOLUNTARY_SWITCHES: &str = "thread_involuntary_switches";
/// Microseconds the test's threads were runnable but waited for a CPU (schedstat).
pub const THREAD_RUN_DELAY_US: &str = "thread_run_delay_us";
/// Times the scheduler moved the test's threads from one CPU to another.
pub const THREAD_MIGRATIONS: &str = "thread_migrations";
/// Writes of the TSC-deadline timer MSR (`msr:write_msr` 0x6e0): timer arming.
pub const MSR_WRITE_TSC_DEADLINE: &str = "msr_write_tsc_deadline";
/// Writes of the x2APIC interrupt command register (0x830): IPIs sent.
pub const MSR_WRITE_ICR: &str = "msr_write_icr";
/// Writes of the x2APIC end-of-interrupt register (0x80b).
pub const MSR_WRITE_EOI: &str = "msr_write_eoi";
/// Writes of the APIC timer's initial count (0x838).
pub const MSR_WRITE_APIC_TIMER: &str = "msr_write_apic_timer";
/// Writes of every other MSR.
pub const MSR_WRITE_OTHER: &str = "msr_write_other";
/// Packets the NIC sent (virtio-net queue counters).
pub const TX_PACKETS: &str = "tx_packets";
/// virtio-net transmit notifications (kicks) to the device.
pub const TX_KICKS: &str = "tx_kicks";
/// Packets the NIC received.
pub const RX_PACKETS: &str = "rx_packets";
/// virtio-net receive-queue refill notifications (kicks) to the device.
pub const RX_KICKS: &str = "rx_kicks";
/// VM exits counted by the `kvm:kvm_exit` tracepoint on the counted CPUs (a host's view).
pub const KVM_EXITS: &str = "kvm_exits";
/// IPIs the counted CPUs received (CAL + RES).
pub const IPIS_RECEIVED: &str = "ipis_received";
/// Context switches on the counted CPUs.
pub const CONTEXT_SWITCHES: &str = "context_switches";
/// Packets the per-CPU network input backlog dropped for want of room
/// (`/proc/net/softnet_stat` `dropped`, `net.core.netdev_max_backlog`): on loopback and
/// veth a lost segment, which TCP recovers by retransmission (a lone one after 200 ms+).
pub const BACKLOG_DROPS: &str = "backlog_drops";
