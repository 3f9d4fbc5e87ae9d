//! The stream explanation's parts, as the JSON gives them.

use serde::Serialize;

use crate::decide::Interval;
use crate::stats::summarize;

/// Confidence of every interval here.
const CONFIDENCE: f64 = 0.95;

/// A mean over tries with its 95% interval, or why there is none.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    /// Mean.
    pub mean: f64,
    /// Tries it is the mean of.
    pub n: usize,
    /// Its 95% interval.
    pub interval: Interval,
}

impl Estimate {
    pub(crate) fn of(xs: &[f64]) -> Option<Estimate> {
        let s = summarize(xs, CONFIDENCE);
        (s.n > 0).then(|| Estimate {
            mean: s.mean,
            n: s.n,
            interval: crate::decide::interval_of(&s),
        })
    }
}

/// CPU µs per MB received, by kind, of one side's CPU.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PerMb {
    /// All busy time.
    pub total: f64,
    /// User mode (the application outside the kernel).
    pub user: f64,
    /// Kernel outside interrupts: system calls, with the copies to and from user space.
    pub sys: f64,
    /// Soft interrupts: the network stack's receive path and transmit completions.
    pub softirq: f64,
    /// Hard interrupts.
    pub irq: f64,
    /// Stolen by the hypervisor.
    pub steal: f64,
    /// Busy time the kernel's tick never charged to a kind (in `total`, not in the kinds).
    pub unsampled: f64,
}

/// What one side of the stream costs.
#[derive(Debug, Clone, Serialize)]
pub struct SideCost {
    /// `sender` or `receiver`.
    pub role: &'static str,
    /// `client` or `server` (the agent).
    pub end: &'static str,
    /// The CPU its data thread ran on.
    pub cpu: u32,
    /// That CPU's busy percent over the window (all work on it, other work included).
    pub busy_pct: Estimate,
    /// That CPU's µs per MB by kind (means over the as-is tries).
    pub us_per_mb: PerMb,
    /// That CPU's total µs per MB in each as-is try (`us_per_mb.total` is their mean): what
    /// a comparison of two explanations decides on.
    pub total_us_per_mb_tries: Vec<f64>,
    /// Of it, the test's own data threads (rusage), µs per MB.
    pub threads_us_per_mb: Option<f64>,
    /// The same CPU's µs per MB paced to half the rate: its cost off the limit.
    pub paced_us_per_mb: Option<Estimate>,
    /// That cost in each paced try: what the model's prediction varies by.
    pub paced_us_per_mb_tries: Vec<f64>,
    /// The paced tries' µs per MB by kind (means), None where none was sampled: which kind
    /// of work costs more or less per MB at the limit than off it.
    pub paced_split: Option<PerMb>,
    /// [`SideCost::calls_per_mb`] in the paced tries.
    pub paced_calls_per_mb: Option<f64>,
    /// [`SideCost::segments_per_mb`] in the paced tries.
    pub paced_segments_per_mb: Option<f64>,
    /// System calls that moved data per MB: the sender's `send`s, the receiver's `recv`s
    /// that returned data (counted by the stream's loops; None where not counted, e.g.
    /// `MSG_ZEROCOPY` or multiplexed flows).
    pub calls_per_mb: Option<f64>,
    /// TCP data segments per MB this side counted (sender: out, receiver: in), each
    /// MSS-sized unit of a GSO/TSO/GRO packet counted (None: the kernel does not report
    /// them).
    pub segments_per_mb: Option<f64>,
    /// Sender: segments retransmitted per MB over the measured intervals (TCP_INFO);
    /// receiver: None (a sender's count).
    pub retransmits_per_mb: Option<f64>,
    /// Sender: of them, the ones its receiver reported it had already (D-SACK), per MB:
    /// spurious, reordered or resent too early, not lost. None where not counted.
    pub spurious_retransmits_per_mb: Option<f64>,
    /// IPIs this CPU received per MB (a traced trial of its own; root); None where not
    /// traced.
    pub ipis_per_mb: Option<f64>,
    /// Idle entries of this CPU per MB (`--trace`); None where not traced.
    pub idle_entries_per_mb: Option<f64>,
    /// ICR writes (IPIs this CPU sent) per MB, the traced trial's `msr:write_msr`: each a VM
    /// exit in a KVM guest without APICv/posted interrupts. None where not traced or not
    /// counted (an xAPIC sends IPIs without the MSR).
    pub icr_writes_per_mb: Option<f64>,
    /// TSC-deadline writes (this CPU's timer reprogrammed) per MB, likewise.
    pub tsc_deadline_writes_per_mb: Option<f64>,
}

/// What limits the stream.
#[derive(Debug, Clone, Serialize)]
pub struct Bound {
    /// `link`, `cpu`, `flow_control`, `none`, or `undecided` (the sender waited on flow
    /// control long enough that larger buffers' effect would decide, and their tries did not).
    pub kind: &'static str,
    /// `sender` or `receiver` (a CPU bound).
    pub side: Option<&'static str>,
    /// The largest kind of work on that CPU (`sys`, `softirq`, …).
    pub dominant: Option<&'static str>,
    /// The figure that shows it, as printed.
    pub figure: String,
    /// With a guest end bound: its vCPU threads on this host, as printed.
    pub on_host: Option<String>,
    /// A CPU-bound receiver whose sender waited on the receive window past the flow-control
    /// share: the window it left full, and what larger buffers measured, as printed. The
    /// window is then the receiver's symptom, not the bound.
    pub full_window: Option<String>,
    /// Share of the sender's busy time it waited on the receive window, percent.
    pub rwnd_limited_pct: Option<f64>,
    /// Share of the sender's busy time it waited on its send buffer, percent.
    pub sndbuf_limited_pct: Option<f64>,
    /// The link's stated rate, Mbit/s (`--link-rate`), where the stream's was shaped.
    pub link_mbps: Option<f64>,
    /// Share of the sender's data segments lost (retransmitted and not D-SACKed by the
    /// receiver), percent, over the as-is tries; None where not counted.
    pub lost_pct: Option<f64>,
}

/// The rate a CPU bound predicts, against the rate measured.
#[derive(Debug, Clone, Serialize)]
pub struct Model {
    /// The side whose cost predicts (the bound side, else the busier).
    pub side: Option<&'static str>,
    /// Predicted Mbit/s: one CPU at the paced cost per MB.
    pub predicted_mbps: Option<f64>,
    /// Measured ÷ predicted − 1, percent.
    pub residual_pct: Option<f64>,
    /// Measured ÷ predicted over the tries (95%: Fieller's over the as-is rates and the
    /// paced tries' predictions; against a link, the measured rate's interval over the
    /// link's payload rate), or why none: what "within the goal" is decided on.
    pub ratio_interval: Interval,
    /// Why there is no prediction, or what the residual says.
    pub note: String,
}

/// A remedy's measured effect.
#[derive(Debug, Clone, Serialize)]
pub struct Remedy {
    /// Its label (a trial label of the run).
    pub label: String,
    /// Its rate, Mbit/s.
    pub mbps: Option<Estimate>,
    /// Remedy ÷ as-is, with Fieller's 95% interval.
    pub ratio: Option<f64>,
    /// The ratio's interval, or why none.
    pub ratio_interval: Interval,
    /// `raises`, `lowers`, `no measurable effect`, `undecided` or `not measured`.
    pub effect: &'static str,
    /// The bound (or busier) side's CPU µs per MB under it.
    pub bound_side_us_per_mb: Option<f64>,
    /// Why it was not measured (a skipped or failed trial's reason).
    pub why_not: Option<String>,
    /// What its trials' own counts say of it: for `MSG_ZEROCOPY`, sends the kernel copied
    /// all the same (a loopback, or a device without scatter-gather), so that what it
    /// changed is not a copy avoided.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The verdict's words for that note, where the verdict names the remedy as raising the
    /// rate ("its sends copied by the kernel all the same"); None with no note.
    #[serde(skip)]
    pub caveat: Option<String>,
    /// Bytes per send of its trials, where they differ from as-is's (larger sends): the
    /// size the ratio is for.
    pub send_size: Option<u32>,
    /// This machine's busy CPUs over its trials (cpuidle polling included: what halt
    /// polling spends; `tune`'s cost), mean; None where a trial lacks the figure.
    pub busy_cpus: Option<f64>,
    /// Its busy CPUs less as-is's, mean.
    pub added_cpus: Option<f64>,
    /// That difference's 95% interval (Welch), or why none.
    pub added_cpus_interval: Interval,
}

/// A class of the VM's threads on the host (a guest placement's host view).
#[derive(Debug, Clone, Serialize)]
pub struct HostClass {
    /// `vcpu`, `main`, `io`, `vhost` or `other`.
    pub class: String,
    /// Threads in it.
    pub threads: u32,
    /// Their CPU over the window, percent of one CPU (mean over the as-is tries).
    pub busy_pct: f64,
    /// The same in each as-is try, for judging it by its interval (not printed).
    #[serde(skip)]
    pub busy_pct_tries: Vec<f64>,
    /// Their CPU µs per MB received.
    pub us_per_mb: f64,
}

/// The hypervisor's view of the guest end: its QEMU's threads on this host.
#[derive(Debug, Clone, Serialize)]
pub struct HostView {
    /// The end that runs in the guest: `client` or `server`; `both` where the battery ran
    /// inside a VM you run (`--host … --vm`).
    pub guest_end: &'static str,
    /// `kvm` or `tcg` (QEMU emulating the guest's CPU).
    pub accel: Option<String>,
    /// Each class of its threads.
    pub classes: Vec<HostClass>,
    /// KVM's exits per MB received by kind (`exits`, `io_exits`, `mmio_exits`,
    /// `halt_exits`, `irq_injections`, …: the VM's statistics over each as-is trial's
    /// window), where every as-is trial read them.
    pub exits_per_mb: Option<std::collections::BTreeMap<String, f64>>,
    /// Why there are none: a guest under TCG makes no exits; else what the host view says.
    pub exits_why: Option<String>,
}

/// What the battery could not try here, with why.
#[derive(Debug, Clone, Serialize)]
pub struct NotTried {
    /// The remedy.
    pub remedy: String,
    /// Why not.
    pub why: String,
}

/// The whole answer.
#[derive(Debug, Clone, Serialize)]
pub struct StreamExplanation {
    /// The run it was computed from.
    pub run_id: i64,
    /// Bytes per send.
    pub send_size: u32,
    /// Flows.
    pub flows: u32,
    /// The agent sent (client received).
    pub reverse: bool,
    /// The rate, Mbit/s.
    pub mbps: Estimate,
    /// What limits it.
    pub bound: Bound,
    /// This machine's busy CPUs over the as-is tries (cpuidle polling included), mean;
    /// None where a try lacks the figure.
    pub busy_cpus: Option<f64>,
    /// With a guest placement: the guest's threads on this host.
    pub host_view: Option<HostView>,
    /// Sender first, then receiver.
    pub sides: Vec<SideCost>,
    /// The model and its residual.
    pub model: Model,
    /// Each remedy.
    pub remedies: Vec<Remedy>,
    /// What could not be tried here.
    pub not_tried: Vec<NotTried>,
    /// One line: the bound, with its figure.
    pub verdict: String,
}
