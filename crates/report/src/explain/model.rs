//! The explanation's vocabulary (trial names, components, remedies, the result) and the
//! cells of a run's trials by name, which the model (`super`) and the in-situ reading
//! (`situ`) both read.

use std::collections::BTreeMap;

use serde::Serialize;
use virtperf_store::{TrialRow, TrialStatus};
use virtperf_wire::{TestResult, Timeline};

use crate::summary::merged_latency;

/// Run name of an explain battery (how `show` recognizes one).
pub const RUN_NAME: &str = "explain";
/// Config with every knob as the machine had it.
pub const AS_IS: &str = "as-is";
/// Point labels of the battery's measurements.
pub const RR_CROSS_BLOCK: &str = "rr cross-CPU block";
/// Both ends on one CPU.
pub const RR_SAME_BLOCK: &str = "rr same-CPU block";
/// Both sides spinning.
pub const RR_CROSS_SPIN: &str = "rr cross-CPU spin";
/// The cross-CPU blocking rr with tracepoints counted (`--trace`) and a sampled trial
/// after it (`--timeline`): exits by cause and in-situ latencies.
pub const RR_CROSS_TRACED: &str = "rr cross-CPU block traced";
/// The cross-CPU blocking rr with both CPUs kept out of idle by `SCHED_IDLE` spinners.
pub const RR_CROSS_AWAKE: &str = "rr cross-CPU block CPUs awake";
/// `unix-rr` (the same round trip over an AF_UNIX socket) across CPUs, both sides
/// spinning: the path without the TCP/IP stack.
pub const UNIX_RR_CROSS_SPIN: &str = "unix-rr cross-CPU spin";
/// `wake` futex across CPUs, blocking.
pub const WAKE_BLOCK: &str = "wake cross-CPU block";
/// `wake` futex across CPUs, spinning.
pub const WAKE_SPIN: &str = "wake cross-CPU spin";
/// `kvm halt` without per-VM polling.
pub const KVM_HALT_NO_POLL: &str = "kvm halt poll=0";
/// `kvm halt` with per-VM polling (the window is in the point's parameters).
pub const KVM_HALT_POLL: &str = "kvm halt poll=window";
/// `kvm exits`.
pub const KVM_EXITS: &str = "kvm exits";
/// Config with `net.core.busy_poll` and `busy_read` at 50 µs.
pub const BUSY_POLL: &str = "busy-poll-50us";
/// Config that switches the cpuidle governor to haltpoll and sets a 200 µs guest
/// halt-poll window, where only the governor kept the window from acting: a remedy
/// measured beside as-is, never a term of the decomposition (its trials carry no
/// [`POLL_PARAM`], as they ran under another governor than as-is).
pub const GOVERNOR_POLL: &str = "haltpoll-governor-200us";
/// Its window, ns.
pub const GOVERNOR_POLL_NS: u64 = 200_000;
/// Config that switches the cpuidle governor from haltpoll to menu: a remedy (the tick is
/// kept through short idle periods), no term, its trials carrying no window.
pub const MENU_GOVERNOR: &str = "menu-governor";
/// Remedies that need a reboot, measured in a second guest booted with the kernel argument
/// when explain runs at `--placement guest`: (config name, kernel argument, what it does).
pub const BOOT_REMEDIES: &[(&str, &str, &str)] = &[
    (
        "boot-idle-poll",
        "idle=poll",
        "every vCPU polls instead of halting: no HLT exit, no halted-vCPU wake-up; the polling counts as idle time, so its CPU figures understate it",
    ),
    (
        "boot-nohz-off",
        "nohz=off",
        "a periodic tick instead of reprogramming the TSC deadline on every idle entry",
    ),
];
/// Point parameter holding the guest halt-poll window a trial ran under (null: no knob).
pub const POLL_PARAM: &str = "guest_halt_poll_ns";

/// One part of the round trip (or a cross-check), with the measurement it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Component {
    /// `path`, `wake_up`, `idle_exit`, `wake_up_other`, `exit_pressure`, …
    pub name: String,
    /// Microseconds per round trip.
    pub us: f64,
    /// Which measurement gave it, and how it was computed.
    pub source: String,
    /// The component this one is a part of (`idle_exit` is part of `wake_up`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part_of: Option<String>,
    /// The lowest and highest the term could be from its tries' own figures (a difference:
    /// the extremes of each side taken against each other), µs; absent with one try a
    /// side or for a term not computed from tries. What an in-situ figure is held against.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spread_us: Option<[f64; 2]>,
}

/// `factor × (x − y)` over the extremes of the tries of `x` and `y` (each `[min, max]`):
/// None where neither side has two tries, whose spread would be no spread.
pub(super) fn diff_spread(x: [f64; 2], y: [f64; 2], factor: f64) -> Option<[f64; 2]> {
    (x[0] < x[1] || y[0] < y[1]).then(|| [factor * (x[0] - y[1]), factor * (x[1] - y[0])])
}

/// `[min, max]` of the finite values, None where there is none.
pub(super) fn span(v: &[f64]) -> Option<[f64; 2]> {
    let f = v.iter().copied().filter(|x| x.is_finite());
    let lo = f.clone().fold(f64::INFINITY, f64::min);
    let hi = f.fold(f64::NEG_INFINITY, f64::max);
    (lo <= hi).then_some([lo, hi])
}

/// A component the battery could not measure here, with why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Missing {
    /// The component's name.
    pub name: String,
    /// Why it is absent (the capability this machine lacks).
    pub reason: String,
}

/// A mode or knob the battery measured, with its effect against the as-is cross-CPU rr.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Remedy {
    /// What was changed, in words.
    pub what: String,
    /// Change of the p50 round trip, percent (negative: faster).
    pub p50_change_pct: f64,
    /// Its p50 ÷ the as-is p50 over the tries' own p50s (Fieller's 95% interval), or why
    /// none: what the verdict decides a real cut on.
    pub p50_ratio_interval: crate::decide::Interval,
    /// Change of the p99 round trip, percent.
    pub p99_change_pct: f64,
    /// Change of machine-wide CPU time per transaction, µs: busy time plus time spent
    /// polling in the cpuidle POLL state (which /proc/stat counts as idle).
    pub cpu_us_per_transaction_change: Option<f64>,
    /// The p50 round trip with it, µs.
    pub p50_us: f64,
    /// Machine-wide CPU time per transaction with it (polling included), µs.
    pub cpu_us_per_transaction: Option<f64>,
    /// CPUs kept busy on average with it (CPU per transaction × rate), polling included.
    pub cpus_busy: Option<f64>,
    /// The same for the as-is cross-CPU rr.
    pub cpus_busy_before: Option<f64>,
    /// Each try's busy CPUs with it (polling included); None where some try's CPU time
    /// could not be read: what the verdict compares remedies' costs on.
    pub cpus_busy_tries: Option<Vec<f64>>,
    /// The busy CPUs it adds to the as-is rr (its tries against the as-is tries, Welch's
    /// 95% interval), or why none.
    pub added_cpus_interval: crate::decide::Interval,
}

/// The whole answer (what `explain --json` prints).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The answer in one sentence: the round trip, its largest share, the cheapest measured
    /// remedy, the residual (what `explain` prints first).
    pub verdict: Option<String>,
    /// The stored run.
    pub run_id: i64,
    /// Cross-CPU blocking rr, p50 round trip, µs: what is explained.
    pub measured_us: f64,
    /// Its mean round trip (1 / rate), µs.
    pub measured_mean_us: f64,
    /// Its p99, µs.
    pub measured_p99_us: f64,
    /// Request and response size of the explained rr, bytes (from its result).
    pub request_bytes: Option<u32>,
    /// Response size, bytes.
    pub response_bytes: Option<u32>,
    /// CPUs of the explained rr's client and server (from its result).
    pub cpus: (Option<u32>, Option<u32>),
    /// Same-CPU blocking rr, p50, µs.
    pub same_cpu_us: Option<f64>,
    /// The CPU of the same-CPU rr (from its result).
    pub same_cpu: Option<u32>,
    /// Sum of the top-level components, µs; None unless every one of them was measured
    /// (a partial sum is no prediction).
    pub predicted_us: Option<f64>,
    /// measured − predicted, µs (None without a prediction).
    pub residual_us: Option<f64>,
    /// residual / measured, percent (None without a prediction).
    pub residual_pct: Option<f64>,
    /// The parts of the prediction (top level: `path`, `wake_up`; parts of them name it in
    /// `part_of`).
    pub components: Vec<Component>,
    /// Estimates that are not added to the prediction (they are inside its components).
    pub cross_checks: Vec<Component>,
    /// Components this machine could not measure, with the reason.
    pub missing: Vec<Missing>,
    /// Events per transaction of the measured rr on its two CPUs together.
    pub events_per_transaction: BTreeMap<String, f64>,
    /// The same for the same-CPU rr (its one CPU).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub events_per_transaction_same_cpu: BTreeMap<String, f64>,
    /// Measured effects of every mode and knob the battery ran.
    pub remedies: Vec<Remedy>,
    /// Remedies that need a reboot or the host, with why they were not tried here.
    pub remedies_named: Vec<String>,
    /// Events that are VM exits in a guest, counted per transaction of the traced
    /// cross-CPU rr (`--trace`), by cause, with their sum `likely_exits`.
    pub exits_by_cause: BTreeMap<String, f64>,
    /// What the sampled trial (`--timeline`) saw in the round trip itself.
    pub in_situ: Option<InSitu>,
    /// In-situ figures that differ from their model term by more than 25% and lie outside
    /// the span of the term's tries (or the term had one try), one line each.
    pub disagreements: Vec<String>,
    /// In-situ figures more than 25% from their model term but inside the span of its
    /// tries: a gap the tries cannot tell from their spread, one line each.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub undecided_in_situ: Vec<String>,
    /// The hypervisor's view of the VM the battery ran in (`explain --host … --vm`), over
    /// the explained round trip's measured window, per round trip: what the guest cannot
    /// see of its own cost. Absent without `--vm`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<virtperf_wire::HostVm>,
    /// The facts about this machine that decide the answer.
    pub environment: BTreeMap<String, String>,
    /// Tries behind each number (the smallest count of any measurement used).
    pub tries: usize,
    /// What the reader must know before trusting these numbers (emulation, …).
    pub warnings: Vec<String>,
}

/// The trials of one (point, config) cell.
pub(super) struct Cells<'a> {
    pub(super) trials: &'a [TrialRow],
}

/// What the rr trials of one cell came to.
pub(super) struct Rr {
    pub(super) result: TestResult,
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) mean: f64,
    /// None when some try's polling time could not be read.
    pub(super) cpu_per_tr: Option<f64>,
    pub(super) n: usize,
    pub(super) events: BTreeMap<String, f64>,
    /// Each try's own p50, µs.
    pub(super) p50_tries: Vec<f64>,
    /// Each try's busy CPUs (CPU per transaction × its rate); None where some try's CPU
    /// time could not be read.
    pub(super) busy_tries: Option<Vec<f64>>,
}

impl Rr {
    /// Busy CPUs: the mean of each try's own (its CPU per transaction × its rate). Not the
    /// mean CPU per transaction × the mean rate: where a try's CPU is fixed (two spinning
    /// CPUs), CPU per transaction falls as its rate rises, and that product of means read
    /// 2.05 busy CPUs on a 2-CPU machine.
    pub(super) fn busy(&self) -> Option<f64> {
        let t = self.busy_tries.as_ref().filter(|t| !t.is_empty())?;
        Some(t.iter().sum::<f64>() / t.len() as f64)
    }
}

impl<'a> Cells<'a> {
    pub(super) fn of(&self, label: &str, config: &str) -> impl Iterator<Item = &'a TrialRow> + '_ {
        let (label, config) = (label.to_string(), config.to_string());
        self.trials
            .iter()
            .filter(move |t| t.point_label == label && t.config == config)
    }

    pub(super) fn ok(&self, label: &str, config: &str) -> Vec<&'a TrialRow> {
        self.of(label, config)
            .filter(|t| t.status == TrialStatus::Ok)
            .collect()
    }

    /// Why a measurement has no result: the reason of its skipped or failed trials, or
    /// what its measured trials warned of where none gave a figure (a round trip that
    /// completed no transaction in its window: a stall, not a missing measurement).
    pub(super) fn why_not(&self, label: &str, config: &str) -> String {
        if let Some(e) = self.of(label, config).find_map(|t| t.error.clone()) {
            return e;
        }
        let warned = self
            .ok(label, config)
            .into_iter()
            .filter_map(|t| t.result.as_ref())
            .find(|r| !r.warnings.is_empty())
            // All of them: the one saying nothing was measured, and any naming a cause
            // beside it (time the hypervisor stole).
            .map(|r| r.warnings.join("; "));
        match warned {
            Some(w) => {
                format!("its tries gave no figure: {w} (a longer --duration may measure it)")
            }
            None => "not measured in this run".to_string(),
        }
    }

    pub(super) fn rr(&self, label: &str, config: &str) -> Option<Rr> {
        let ok = self.ok(label, config);
        let results: Vec<&TestResult> = ok.iter().filter_map(|t| t.result.as_ref()).collect();
        if results.is_empty() {
            return None;
        }
        let lat = merged_latency(&results)?;
        let n = results.len() as f64;
        let rate = results
            .iter()
            .map(|r| r.primary_metric().value)
            .sum::<f64>()
            / n;
        let cpu = results
            .iter()
            .map(|r| cpu_per_transaction(r))
            .sum::<Option<f64>>()
            .map(|c| c / n);
        Some(Rr {
            result: results[0].clone(),
            p50: lat.p50_us,
            p99: lat.p99_us,
            mean: if rate > 0.0 { 1e6 / rate } else { f64::NAN },
            cpu_per_tr: cpu,
            n: results.len(),
            events: pinned_events(&results),
            p50_tries: results
                .iter()
                .filter_map(|r| merged_latency(&[*r]).map(|l| l.p50_us))
                .collect(),
            busy_tries: results
                .iter()
                .map(|r| Some(cpu_per_transaction(r)? * r.primary_metric().value / 1e6))
                .collect(),
        })
    }

    /// Median of a probe's metric over its tries, and how many.
    /// `[min, max]` of the probe's tries (as [`Cells::probe`] takes them).
    pub(super) fn probe_span(&self, label: &str, config: &str) -> Option<[f64; 2]> {
        let v: Vec<f64> = self
            .ok(label, config)
            .iter()
            .filter_map(|t| t.metric)
            .collect();
        span(&v)
    }

    pub(super) fn probe(&self, label: &str, config: &str) -> Option<(f64, usize)> {
        let mut v: Vec<f64> = self
            .ok(label, config)
            .iter()
            .filter_map(|t| t.metric)
            .filter(|m| m.is_finite())
            .collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        let med = if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        };
        Some((med, v.len()))
    }

    /// The halt-poll window (ns) a config ran under, from the parameters of its measured
    /// trials (a skipped trial ran under nothing).
    pub(super) fn poll_of(&self, config: &str) -> Option<u64> {
        self.trials
            .iter()
            .filter(|t| t.status != TrialStatus::Skipped)
            .find(|t| t.config == config)
            .and_then(|t| t.point.get(POLL_PARAM))
            .and_then(serde_json::Value::as_u64)
    }

    /// Why a config that sets the halt-poll knob did not run: the first skipped or failed
    /// trial's reason outside as-is.
    pub(super) fn why_no_poll_config(&self) -> Option<String> {
        self.trials
            .iter()
            .filter(|t| {
                t.config != AS_IS
                    && t.config != BUSY_POLL
                    && t.config != GOVERNOR_POLL
                    && t.config != MENU_GOVERNOR
                    && t.status != TrialStatus::Ok
            })
            .find_map(|t| t.error.clone())
    }

    pub(super) fn configs(&self) -> Vec<String> {
        let mut c: Vec<String> = Vec::new();
        for t in self.trials {
            if !c.contains(&t.config) {
                c.push(t.config.clone());
            }
        }
        c
    }
}

/// Events per transaction on the pinned CPUs together (the client's and the server's, each
/// CPU once), averaged over tries; the two sides' own threads' switches added. The
/// system-wide counts would count one machine twice.
///
/// A sum is kept only where it is whole: a key counted on every pinned CPU and both sides
/// in every try. A key seen on one CPU, or in some tries, is left out rather than added
/// up partly and divided by all tries.
pub(super) fn pinned_events(results: &[&TestResult]) -> BTreeMap<String, f64> {
    let tries: Option<Vec<BTreeMap<String, f64>>> =
        results.iter().map(|r| try_pinned_events(r)).collect();
    let Some(tries) = tries.filter(|t| !t.is_empty()) else {
        return BTreeMap::new();
    };
    let n = tries.len() as f64;
    tries[0]
        .keys()
        .filter_map(|k| {
            let total: Option<f64> = tries.iter().map(|t| t.get(k).copied()).sum();
            Some((k.clone(), total? / n))
        })
        .collect()
}

/// One try's [`pinned_events`]: None when a side has no events or was not pinned.
fn try_pinned_events(r: &TestResult) -> Option<BTreeMap<String, f64>> {
    let ev = r.events.as_ref()?;
    let sides = [&ev.client, ev.server.as_ref()?];
    // Each pinned CPU once: both sides on one CPU count the same counters.
    let mut cpus: Vec<&virtperf_wire::PinnedEvents> = Vec::new();
    for side in sides {
        let p = side.pinned.as_ref()?;
        if cpus.iter().all(|c| c.cpu != p.cpu) {
            cpus.push(p);
        }
    }
    let mut sum = BTreeMap::new();
    for k in cpus[0].per_unit.keys() {
        let total: Option<f64> = cpus.iter().map(|c| c.per_unit.get(k).copied()).sum();
        if let Some(t) = total {
            sum.insert(k.clone(), t);
        }
    }
    for k in [
        virtperf_wire::counter::THREAD_VOLUNTARY_SWITCHES,
        virtperf_wire::counter::THREAD_INVOLUNTARY_SWITCHES,
    ] {
        let total: Option<f64> = sides.iter().map(|s| s.per_unit.get(k).copied()).sum();
        if let Some(t) = total {
            sum.insert(k.to_string(), t);
        }
    }
    Some(sum)
}

/// Machine-wide CPU time per transaction, µs: busy time (user, system, interrupts) plus the
/// time CPUs spent polling in the cpuidle `POLL` state. /proc/stat counts that polling as
/// idle, but it is exactly what guest halt polling spends: leaving it out would make
/// polling look free. Polling is read by tune's rule ([`crate::cost::poll_us`]): where it
/// cannot be known, neither is this.
pub(super) fn cpu_per_transaction(r: &TestResult) -> Option<f64> {
    let e = &r.events.as_ref()?.client;
    let poll = match e.per_unit.get("idle_time_us_poll") {
        Some(p) => *p,
        // Known to be 0, or unknown (then so is this).
        None => (crate::cost::poll_us(&e.deltas, Some(&r.env.client))? == 0).then_some(0.0)?,
    };
    Some(r.cpu.client.system_service_demand_us? + poll)
}

/// In-situ figures of the traced trial's round trip, per round trip, µs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InSitu {
    /// Both directions' wake-up (woken → switched in, p50), summed; one direction seen
    /// only: twice it (said in `wake_up_source`).
    pub wake_up_us: Option<f64>,
    /// How `wake_up_us` was formed.
    pub wake_up_source: String,
    /// IPI sent to an idle CPU → it left idle (p50) × sides woken from idle per round trip.
    pub idle_exit_us: Option<f64>,
    /// How `idle_exit_us` was formed.
    pub idle_exit_source: String,
    /// The sampled trial's critical path, in-situ latencies and example transaction.
    pub timeline: Timeline,
}
