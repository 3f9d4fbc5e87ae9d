//! `virtperf explain`'s model: where a cross-CPU round trip's time goes, built from
//! measurements that are independent of the one it explains, with the residual published.
//!
//! The battery (`virtperf_lab::explain`) stores every measurement as a trial of one run; this
//! module reads those trials back (so `virtperf show` of an explain run recomputes the same
//! answer) and computes:
//!
//! - **measured**: the cross-CPU blocking rr round trip (p50; mean and p99 beside it);
//! - **path**: the same rr with both sides spinning: the round trip with no sleep and no
//!   wake-up on its critical path;
//! - **wake-up**: 2 × (one-way p50 of `wake` across CPUs blocking − the same spinning), one
//!   per direction: a thread woken on another CPU, without any socket;
//!   - **of which idle exit**: 2 × (the blocking wake-up with the machine's halt polling off −
//!     with it on), where the polling knob could be written;
//! - **predicted** = path + wake-up, and **residual** = measured − predicted, never forced
//!   to zero;
//! - cross-checks that are not added: VM exits per transaction priced with `kvm exits`, and
//!   `kvm halt`'s wake-up latency of a halted vCPU with and without polling;
//! - **remedies**: every mode or knob the battery ran, with its measured effect on p50/p99
//!   and on CPU time per transaction.
//!
//! Everything here is arithmetic on stored numbers: no sockets, no knobs.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;
use virtperf_store::{TrialRow, TrialStatus};
use virtperf_wire::{Env, TestResult};

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
    /// Change of the p99 round trip, percent.
    pub p99_change_pct: f64,
    /// Change of machine-wide CPU time per transaction, µs: busy time plus time spent
    /// polling in the cpuidle POLL state (which /proc/stat counts as idle).
    pub cpu_us_per_transaction_change: f64,
    /// The p50 round trip with it, µs.
    pub p50_us: f64,
    /// Machine-wide CPU time per transaction with it (polling included), µs.
    pub cpu_us_per_transaction: f64,
    /// CPUs kept busy on average with it (CPU per transaction × rate), polling included.
    pub cpus_busy: f64,
    /// The same for the as-is cross-CPU rr.
    pub cpus_busy_before: f64,
}

/// The whole answer (what `explain --json` prints).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    /// The stored run.
    pub run_id: i64,
    /// Cross-CPU blocking rr, p50 round trip, µs: what is explained.
    pub measured_us: f64,
    /// Its mean round trip (1 / rate), µs.
    pub measured_mean_us: f64,
    /// Its p99, µs.
    pub measured_p99_us: f64,
    /// Same-CPU blocking rr, p50, µs.
    pub same_cpu_us: Option<f64>,
    /// Sum of the top-level components, µs.
    pub predicted_us: f64,
    /// measured − predicted, µs.
    pub residual_us: f64,
    /// residual / measured, percent.
    pub residual_pct: f64,
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
    /// The facts about this machine that decide the answer.
    pub environment: BTreeMap<String, String>,
    /// Tries behind each number (the smallest count of any measurement used).
    pub tries: usize,
    /// What the reader must know before trusting these numbers (emulation, …).
    pub warnings: Vec<String>,
}

/// The trials of one (point, config) cell.
struct Cells<'a> {
    trials: &'a [TrialRow],
}

/// What the rr trials of one cell came to.
struct Rr {
    p50: f64,
    p99: f64,
    mean: f64,
    cpu_per_tr: f64,
    n: usize,
    events: BTreeMap<String, f64>,
}

impl<'a> Cells<'a> {
    fn of(&self, label: &str, config: &str) -> impl Iterator<Item = &'a TrialRow> + '_ {
        let (label, config) = (label.to_string(), config.to_string());
        self.trials
            .iter()
            .filter(move |t| t.point_label == label && t.config == config)
    }

    fn ok(&self, label: &str, config: &str) -> Vec<&'a TrialRow> {
        self.of(label, config)
            .filter(|t| t.status == TrialStatus::Ok)
            .collect()
    }

    /// Why a measurement has no result: the reason of its skipped or failed trials.
    fn why_not(&self, label: &str, config: &str) -> String {
        self.of(label, config)
            .find_map(|t| t.error.clone())
            .unwrap_or_else(|| "not measured in this run".to_string())
    }

    fn rr(&self, label: &str, config: &str) -> Option<Rr> {
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
        let cpu = results.iter().map(|r| cpu_per_transaction(r)).sum::<f64>() / n;
        Some(Rr {
            p50: lat.p50_us,
            p99: lat.p99_us,
            mean: if rate > 0.0 { 1e6 / rate } else { f64::NAN },
            cpu_per_tr: cpu,
            n: results.len(),
            events: pinned_events(&results),
        })
    }

    /// Median of a probe's metric over its tries, and how many.
    fn probe(&self, label: &str, config: &str) -> Option<(f64, usize)> {
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

    /// The halt-poll window (ns) a config ran under, from its trials' parameters.
    fn poll_of(&self, config: &str) -> Option<u64> {
        self.trials
            .iter()
            .find(|t| t.config == config)
            .and_then(|t| t.point.get(POLL_PARAM))
            .and_then(serde_json::Value::as_u64)
    }

    fn configs(&self) -> Vec<String> {
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
fn pinned_events(results: &[&TestResult]) -> BTreeMap<String, f64> {
    let mut sum: BTreeMap<String, f64> = BTreeMap::new();
    let mut n = 0.0;
    for r in results {
        let Some(ev) = &r.events else { continue };
        n += 1.0;
        let sides = std::iter::once(&ev.client).chain(ev.server.as_ref());
        // Each pinned CPU once: both sides on one CPU count the same counters.
        let mut cpus_seen = Vec::new();
        for side in sides {
            if let Some(p) = side.pinned.as_ref().filter(|p| !cpus_seen.contains(&p.cpu)) {
                cpus_seen.push(p.cpu);
                for (k, v) in &p.per_unit {
                    *sum.entry(k.clone()).or_default() += v;
                }
            }
            for k in ["thread_voluntary_switches", "thread_involuntary_switches"] {
                if let Some(v) = side.per_unit.get(k) {
                    *sum.entry(k.to_string()).or_default() += v;
                }
            }
        }
    }
    if n > 0.0 {
        for v in sum.values_mut() {
            *v /= n;
        }
    }
    sum
}

/// Machine-wide CPU time per transaction, µs: busy time (user, system, interrupts) plus the
/// time CPUs spent polling in the cpuidle `POLL` state. /proc/stat counts that polling as
/// idle, but it is exactly what guest halt polling spends: leaving it out would make
/// polling look free.
fn cpu_per_transaction(r: &TestResult) -> f64 {
    let poll = r
        .events
        .as_ref()
        .and_then(|e| e.client.per_unit.get("idle_time_us_poll"))
        .copied()
        .unwrap_or(0.0);
    r.cpu.client.system_service_demand_us + poll
}

fn pct(new: f64, old: f64) -> f64 {
    if old.abs() > f64::EPSILON {
        (new - old) / old * 100.0
    } else {
        f64::NAN
    }
}

fn window_text(ns: u64) -> String {
    if ns.is_multiple_of(1000) {
        format!("{} µs", ns / 1000)
    } else {
        format!("{ns} ns")
    }
}

/// Computes the explanation from an explain run's trials. Fails (one line) when the
/// measurements the model cannot do without are missing.
pub fn explain(run_id: i64, env: &Env, trials: &[TrialRow]) -> Result<Explanation, String> {
    let c = Cells { trials };
    let base = c.rr(RR_CROSS_BLOCK, AS_IS).ok_or_else(|| {
        format!(
            "run {run_id} has no cross-CPU blocking rr result: {}",
            c.why_not(RR_CROSS_BLOCK, AS_IS)
        )
    })?;
    let mut components = Vec::new();
    let mut cross_checks = Vec::new();
    let mut missing = Vec::new();
    let mut tries = base.n;

    // Path: the same round trip with nobody asleep.
    match c.rr(RR_CROSS_SPIN, AS_IS) {
        Some(spin) => {
            tries = tries.min(spin.n);
            components.push(Component {
                name: "path".into(),
                us: spin.p50,
                source: format!(
                    "rr across CPUs with both sides spinning (--wait spin), p50 over {} tries",
                    spin.n
                ),
                part_of: None,
            });
        }
        None => missing.push(Missing {
            name: "path".into(),
            reason: c.why_not(RR_CROSS_SPIN, AS_IS),
        }),
    }

    // Wake-up: a thread woken on another CPU, no socket involved; one per direction.
    let wake_block = c.probe(WAKE_BLOCK, AS_IS);
    let wake_spin = c.probe(WAKE_SPIN, AS_IS);
    match (wake_block, wake_spin) {
        (Some((b, nb)), Some((s, ns))) => {
            tries = tries.min(nb).min(ns);
            let wake_up = 2.0 * (b - s);
            components.push(Component {
                name: "wake_up".into(),
                us: wake_up,
                source: format!(
                    "2 × (wake futex across CPUs: blocking one-way p50 {b:.2} µs − spinning {s:.2} µs), medians of {} tries",
                    nb.min(ns)
                ),
                part_of: None,
            });
            idle_exit(&c, b, wake_up, &mut components, &mut missing);
        }
        _ => missing.push(Missing {
            name: "wake_up".into(),
            reason: if wake_block.is_none() {
                c.why_not(WAKE_BLOCK, AS_IS)
            } else {
                c.why_not(WAKE_SPIN, AS_IS)
            },
        }),
    }

    let predicted: f64 = components
        .iter()
        .filter(|x| x.part_of.is_none())
        .map(|x| x.us)
        .sum();
    let residual = base.p50 - predicted;

    exit_pressure(&c, &base, &mut cross_checks, &mut missing);
    kvm_halt(&c, &mut cross_checks, &mut missing);

    let same = c.rr(RR_SAME_BLOCK, AS_IS);
    let remedies = remedies(&c, &base, same.as_ref());

    Ok(Explanation {
        run_id,
        measured_us: base.p50,
        measured_mean_us: base.mean,
        measured_p99_us: base.p99,
        same_cpu_us: same.as_ref().map(|s| s.p50),
        predicted_us: predicted,
        residual_us: residual,
        residual_pct: pct(base.p50, predicted) * predicted / base.p50,
        components,
        cross_checks,
        missing,
        events_per_transaction: base.events,
        events_per_transaction_same_cpu: same
            .as_ref()
            .map(|s| s.events.clone())
            .unwrap_or_default(),
        remedies,
        environment: environment(env),
        tries,
        warnings: warnings(env),
    })
}

/// The part of the wake-up that is leaving the idle state: the blocking wake-up with halt
/// polling off minus with it on (the polling window keeps the CPU out of the halt).
fn idle_exit(
    c: &Cells,
    as_is_block: f64,
    wake_up: f64,
    components: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    let configs = c.configs();
    let as_is_poll = c.poll_of(AS_IS);
    let polling = configs
        .iter()
        .filter(|k| c.poll_of(k).is_some_and(|p| p > 0))
        .max_by_key(|k| c.poll_of(k));
    let Some(polling) = polling else {
        missing.push(Missing {
            name: "idle_exit".into(),
            reason: if as_is_poll.is_none() {
                "no guest halt-polling knob here (haltpoll.guest_halt_poll_ns: not a KVM guest with cpuidle-haltpoll)".into()
            } else {
                configs
                    .iter()
                    .filter(|k| *k != AS_IS)
                    .find_map(|k| c.of(WAKE_BLOCK, k).find_map(|t| t.error.clone()))
                    .unwrap_or_else(|| "the halt-polling configs did not run".into())
            },
        });
        return;
    };
    let window = c.poll_of(polling).unwrap_or(0);
    let Some((with_poll, n)) = c.probe(WAKE_BLOCK, polling) else {
        missing.push(Missing {
            name: "idle_exit".into(),
            reason: c.why_not(WAKE_BLOCK, polling),
        });
        return;
    };
    let idle = 2.0 * (as_is_block - with_poll);
    let note = if as_is_poll.is_some_and(|p| p > 0) {
        " (polling is already on as-is, so little idle exit is left to see)"
    } else {
        ""
    };
    components.push(Component {
        name: "idle_exit".into(),
        us: idle,
        source: format!(
            "2 × (wake blocking one-way p50 as-is {as_is_block:.2} µs − with haltpoll.guest_halt_poll_ns = {} {with_poll:.2} µs), medians of {n} tries{note}",
            window_text(window)
        ),
        part_of: Some("wake_up".into()),
    });
    components.push(Component {
        name: "wake_up_other".into(),
        us: wake_up - idle,
        source: "wake_up − idle_exit: sending the wake-up and scheduling the woken thread".into(),
        part_of: Some("wake_up".into()),
    });
}

/// VM exits per transaction in a guest without posted interrupts (each IPI sent, each idle
/// entry, each timer interrupt traps to the hypervisor), priced with the exit round trip
/// `kvm exits` measured. A cross-check: the time is inside the path and wake-up already.
fn exit_pressure(c: &Cells, base: &Rr, checks: &mut Vec<Component>, missing: &mut Vec<Missing>) {
    let get = |k: &str| base.events.get(k).copied().unwrap_or(0.0);
    let ipis = get("ipi_resched") + get("ipi_call");
    let idle = get("idle_entries");
    let timer = get("timer_irqs");
    let exits = ipis + idle + timer;
    let cost = c.ok(KVM_EXITS, AS_IS).iter().find_map(|t| {
        let cases = t.detail.as_ref()?.get("cases")?.as_array()?;
        // The cheapest exit handled inside KVM (cpuid), else the user-space one (pio).
        ["cpuid", "pio"].iter().find_map(|want| {
            cases
                .iter()
                .find(|x| x["name"] == *want && x["iterations"].as_u64().unwrap_or(0) > 0)
                .and_then(|x| x["ns"]["p50"].as_f64())
                .map(|ns| (want.to_string(), ns / 1000.0))
        })
    });
    let counts = format!(
        "{ipis:.2} IPIs + {idle:.2} idle entries + {timer:.2} timer interrupts per transaction on the two CPUs"
    );
    match cost {
        Some((kind, us)) => checks.push(Component {
            name: "exit_pressure".into(),
            us: exits * us,
            source: format!(
                "{counts} × {us:.2} µs per exit (`kvm exits` {kind} p50, a VM this machine runs); inside path and wake-up, not added"
            ),
            part_of: None,
        }),
        None => missing.push(Missing {
            name: "exit_pressure".into(),
            reason: format!(
                "{counts}; no exit cost to price them: {}",
                c.why_not(KVM_EXITS, AS_IS)
            ),
        }),
    }
}

/// `kvm halt`: a halted vCPU of a VM this machine runs, woken by an interrupt, without and
/// with per-VM halt polling: the idle-exit cost one level down, as a cross-check.
fn kvm_halt(c: &Cells, checks: &mut Vec<Component>, missing: &mut Vec<Missing>) {
    match (
        c.probe(KVM_HALT_NO_POLL, AS_IS),
        c.probe(KVM_HALT_POLL, AS_IS),
    ) {
        (Some((off, n)), Some((on, _))) => {
            checks.push(Component {
                name: "kvm_halt_exit".into(),
                us: off - on,
                source: format!(
                    "`kvm halt` wake-up p50 of a halted vCPU {off:.2} µs − with per-VM halt polling {on:.2} µs, medians of {n} tries; one wake-up, compare with idle_exit / 2"
                ),
                part_of: None,
            })
        }
        _ => missing.push(Missing {
            name: "kvm_halt_exit".into(),
            reason: c.why_not(KVM_HALT_NO_POLL, AS_IS),
        }),
    }
}

fn remedies(c: &Cells, base: &Rr, same: Option<&Rr>) -> Vec<Remedy> {
    let mut out = Vec::new();
    let mut push = |what: String, r: &Rr| {
        out.push(Remedy {
            what,
            p50_change_pct: pct(r.p50, base.p50),
            p99_change_pct: pct(r.p99, base.p99),
            cpu_us_per_transaction_change: r.cpu_per_tr - base.cpu_per_tr,
            p50_us: r.p50,
            cpu_us_per_transaction: r.cpu_per_tr,
            cpus_busy: r.cpu_per_tr / r.mean,
            cpus_busy_before: base.cpu_per_tr / base.mean,
        })
    };
    for cfg in c.configs().iter().filter(|k| *k != AS_IS) {
        if let (Some(r), Some(ns)) = (c.rr(RR_CROSS_BLOCK, cfg), c.poll_of(cfg)) {
            let what = if ns == 0 {
                "guest halt polling off (haltpoll.guest_halt_poll_ns = 0)".to_string()
            } else {
                format!(
                    "guest halt polling {} (haltpoll.guest_halt_poll_ns = {ns})",
                    window_text(ns)
                )
            };
            push(what, &r);
        }
    }
    if let Some(r) = c.rr(RR_CROSS_SPIN, AS_IS) {
        push(
            "spinning receivers on both sides (rr --wait spin): two cores busy".into(),
            &r,
        );
    }
    if let Some(r) = same {
        push(
            "both ends on one CPU (rr --cpus 0,0): no cross-CPU wake-up".into(),
            r,
        );
    }
    out
}

/// QEMU's emulator announces itself as hypervisor `TCGTCGTCGTCG`: every number measured
/// there is instruction emulation, not a virtualization tax.
fn warnings(env: &Env) -> Vec<String> {
    let mut w = Vec::new();
    if env.hypervisor.as_deref() == Some("TCGTCGTCGTCG") {
        w.push(
            "THIS MACHINE IS A QEMU TCG GUEST: its numbers measure QEMU's instruction emulation, not the cost of virtualization".into(),
        );
    }
    w
}

fn environment(env: &Env) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        m.insert(k.to_string(), v);
    };
    put(
        "hypervisor",
        env.hypervisor
            .clone()
            .unwrap_or_else(|| "none seen (bare metal, or hidden)".into()),
    );
    put("cpu", env.cpu_model.clone());
    put("kernel", env.kernel.clone());
    put(
        "cpuidle_driver",
        env.cpuidle_driver.clone().unwrap_or_else(|| "none".into()),
    );
    put(
        "idle_states",
        env.idle_states
            .iter()
            .map(|s| {
                format!(
                    "{} ({} µs{})",
                    s.name,
                    s.latency_us,
                    if s.disabled { ", disabled" } else { "" }
                )
            })
            .collect::<Vec<_>>()
            .join(", "),
    );
    for (k, v) in &env.halt_poll {
        put(k, v.clone());
    }
    put("tick", env.nohz.clone());
    put("clocksource", env.clocksource.clone());
    for (k, v) in &env.interrupt_virt {
        put(k, v.clone());
    }
    m
}

fn us(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1} µs")
    } else {
        "—".into()
    }
}

fn signed_pct(v: f64) -> String {
    if v.is_finite() {
        format!("{v:+.0}%")
    } else {
        "—".into()
    }
}

/// The explanation for people.
pub fn text(e: &Explanation) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "virtperf explain (run {}, {} tries per measurement)",
        e.run_id, e.tries
    );
    for w in &e.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    let _ = writeln!(s, "\nMeasured: 1-byte request/response round trip");
    let _ = writeln!(
        s,
        "  across CPUs, blocking   p50 {}  (mean {}, p99 {})",
        us(e.measured_us),
        us(e.measured_mean_us),
        us(e.measured_p99_us)
    );
    if let Some(same) = e.same_cpu_us {
        let _ = writeln!(s, "  on one CPU, blocking    p50 {}", us(same));
    }
    let _ = writeln!(s, "\nModel, from independent measurements:");
    for x in &e.components {
        let indent = if x.part_of.is_some() {
            "    of which "
        } else {
            "  "
        };
        let _ = writeln!(s, "{indent}{:<14} {:>10}   {}", x.name, us(x.us), x.source);
    }
    let _ = writeln!(s, "  {:<14} {:>10}", "predicted", us(e.predicted_us));
    let _ = writeln!(
        s,
        "  {:<14} {:>10}   ({:.0}% of measured; not forced to zero)",
        "residual",
        us(e.residual_us),
        e.residual_pct
    );
    for x in &e.cross_checks {
        let _ = writeln!(s, "  check: {:<14} {:>10}   {}", x.name, us(x.us), x.source);
    }
    for m in &e.missing {
        let _ = writeln!(s, "  not measured: {}: {}", m.name, m.reason);
    }
    if !e.events_per_transaction.is_empty() {
        let _ = writeln!(s);
    }
    for (what, ev) in [
        ("across CPUs (both CPUs)", &e.events_per_transaction),
        (
            "on one CPU (that CPU, both sides)",
            &e.events_per_transaction_same_cpu,
        ),
    ] {
        if ev.is_empty() {
            continue;
        }
        let get = |k: &str| ev.get(k).copied().unwrap_or(0.0);
        let _ = writeln!(
            s,
            "Events per transaction {what}: {:.2} sleeps, {:.2} idle entries, {:.2} IPIs, {:.2} timer interrupts",
            get("thread_voluntary_switches"),
            get("idle_entries"),
            get("ipi_resched") + get("ipi_call"),
            get("timer_irqs")
        );
    }
    if !e.remedies.is_empty() {
        let _ = writeln!(
            s,
            "\nWhat buys it back (measured against the as-is cross-CPU rr):"
        );
        for r in &e.remedies {
            let _ = writeln!(
                s,
                "  {:<70} p50 {:>5} ({}), p99 {:>5}, CPU {:+.1} µs/transaction, {:.2} → {:.2} CPUs busy",
                r.what,
                signed_pct(r.p50_change_pct),
                us(r.p50_us),
                signed_pct(r.p99_change_pct),
                r.cpu_us_per_transaction_change,
                r.cpus_busy_before,
                r.cpus_busy
            );
        }
    }
    let _ = writeln!(s, "\nEnvironment:");
    for (k, v) in &e.environment {
        let _ = writeln!(s, "  {k:<44} {v}");
    }
    s
}

/// Two explanations side by side (native and in a guest): every component, the measured
/// and predicted round trips, and the difference: the virtualization tax, broken down.
pub fn side_by_side(a: &Explanation, a_name: &str, b: &Explanation, b_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<22} {:>14} {:>20} {:>14}",
        "p50 µs per round trip", a_name, b_name, "difference"
    );
    let mut names: Vec<String> = vec!["measured".into()];
    for c in a.components.iter().chain(&b.components) {
        if !names.contains(&c.name) {
            names.push(c.name.clone());
        }
    }
    names.extend(["predicted".to_string(), "residual".to_string()]);
    let value = |e: &Explanation, n: &str| -> Option<f64> {
        match n {
            "measured" => Some(e.measured_us),
            "predicted" => Some(e.predicted_us),
            "residual" => Some(e.residual_us),
            _ => e.components.iter().find(|c| c.name == n).map(|c| c.us),
        }
    };
    let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
    for n in &names {
        let (x, y) = (value(a, n), value(b, n));
        let d = x.zip(y).map(|(x, y)| y - x);
        let _ = writeln!(
            s,
            "{:<22} {:>14} {:>20} {:>14}",
            n,
            cell(x),
            cell(y),
            d.map_or("—".to_string(), |d| format!("{d:+.1}"))
        );
    }
    for w in &b.warnings {
        let _ = writeln!(s, "WARNING ({b_name}): {w}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_text_prefers_microseconds() {
        assert_eq!(window_text(200_000), "200 µs");
        assert_eq!(window_text(1_500), "1500 ns");
    }

    #[test]
    fn pct_of_zero_is_not_a_number() {
        assert!(pct(1.0, 0.0).is_nan());
        assert!((pct(50.0, 100.0) + 50.0).abs() < 1e-9);
    }
}
