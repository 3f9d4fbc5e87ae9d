//! `--trace`: tracepoint counts around a test's measured interval, on the CPUs the test
//! runs on (both sides pinned: those two; otherwise every online CPU), per unit of work.
//! The counting itself is `virtperf_measure::trace`.

use std::sync::{Arc, Mutex};
use std::time::Instant;
use virtperf_measure::trace::{add_other_writes, all_cpus, Counters, Spec, EXITS, KVM_EXIT, MORE};

use virtperf_wire::{Events, Outcome, TestResult, TraceCounts};

use crate::plan::Plan;

/// Counters opened for one test.
pub struct Tracer {
    counters: Counters,
    cpus: Vec<u32>,
    sides: Option<(u32, u32)>,
}

/// What the counters read at the stop.
pub struct Traced {
    cpus: Vec<u32>,
    /// The client's and the server's CPU, when pinned to two different ones.
    sides: Option<(u32, u32)>,
    deltas: std::collections::BTreeMap<String, u64>,
    per_cpu: virtperf_measure::trace::PerCpu,
    missing: Vec<String>,
    /// The counters, stopped and read, still open: closing them unregisters their
    /// tracepoints, which waits for RCU grace periods (about 100 ms for `--trace`'s set
    /// here), so they are closed when this is dropped, after the CPU window has closed,
    /// not inside it (the window's CPUs would look that much idle: 100 % → 95 % busy).
    _open: Counters,
}

impl Tracer {
    /// Opens the `--trace` (or `--trace-all`) counters on the plan's CPUs: both sides'
    /// when pinned, else every CPU.
    pub fn open(plan: &Plan) -> Tracer {
        let cpus = match (plan.client_cpu, plan.server_cpu) {
            (Some(a), Some(b)) => vec![a, b],
            _ => Vec::new(),
        };
        let sides = match (plan.client_cpu, plan.server_cpu) {
            (Some(a), Some(b)) if a != b => Some((a, b)),
            _ => None,
        };
        if plan.trace_all {
            Tracer::on(&[EXITS, MORE].concat(), cpus, sides)
        } else {
            Tracer::on(EXITS, cpus, sides)
        }
    }

    /// `specs` on `cpus` (empty: every CPU).
    fn on(specs: &[Spec], mut cpus: Vec<u32>, sides: Option<(u32, u32)>) -> Tracer {
        if cpus.is_empty() {
            cpus = all_cpus();
        }
        cpus.sort_unstable();
        cpus.dedup();
        Tracer {
            counters: Counters::open(specs, &cpus),
            cpus,
            sides,
        }
    }

    /// The start of the measured interval.
    pub fn start(&self) {
        self.counters.start();
    }

    /// The end of the measured interval.
    pub fn stop(mut self) -> Traced {
        let (mut deltas, mut per_cpu, failed) = self.counters.stop_per_cpu();
        let mut missing = std::mem::take(&mut self.counters.missing);
        missing.extend(failed);
        missing.extend(add_other_writes(&mut deltas));
        for c in per_cpu.values_mut() {
            // Per CPU the same counters opened as in total: the reason is said once.
            add_other_writes(c);
        }
        Traced {
            cpus: self.cpus,
            sides: self.sides,
            deltas,
            per_cpu,
            missing,
            _open: self.counters,
        }
    }
}

impl Traced {
    /// While KVM ran a guest the host's `kvm:kvm_exit` never fired: its zeros measured
    /// nothing, so they are dropped (never read as "no exits") and named in `missing`.
    /// Returns the warning that says so.
    pub fn drop_silent_kvm_exits(&mut self) -> Option<String> {
        if self.deltas.get(virtperf_wire::counter::KVM_EXITS) != Some(&0) {
            return None;
        }
        self.deltas.clear();
        self.per_cpu.clear();
        let why = "the host's kvm:kvm_exit stayed silent while KVM ran the guest: this host's KVM does not fire it (PVM, for one), so host-side exits by reason are not available";
        self.missing.push(format!("kvm_exits: {why}"));
        Some(format!("--trace: {why}"))
    }

    /// `ipis_received` on each pinned CPU counted, and summed when every one has it.
    fn add_ipis(&mut self, ev: &Events) {
        let mut total = Some(0u64);
        let mut seen = Vec::new();
        for side in std::iter::once(&ev.client).chain(ev.server.as_ref()) {
            let Some(p) = side.pinned.as_ref().filter(|p| self.cpus.contains(&p.cpu)) else {
                continue;
            };
            if seen.contains(&p.cpu) {
                continue;
            }
            seen.push(p.cpu);
            let n = p
                .deltas
                .get(virtperf_wire::counter::IPI_CALL)
                .zip(p.deltas.get(virtperf_wire::counter::IPI_RESCHED))
                .map(|(a, b)| a + b);
            if let Some(n) = n {
                self.per_cpu
                    .entry(p.cpu)
                    .or_default()
                    .insert(virtperf_wire::counter::IPIS_RECEIVED.into(), n);
            }
            total = total.zip(n).map(|(t, n)| t + n);
        }
        if let Some(t) = total.filter(|_| seen.len() == self.cpus.len()) {
            self.deltas
                .insert(virtperf_wire::counter::IPIS_RECEIVED.into(), t);
        }
    }

    /// The counts per transaction (rr, crr) or per MB received (the rest), with the IPIs
    /// the counted CPUs received (`/proc/interrupts`' CAL + RES on each side's pinned
    /// CPU, from `events`: counting `ipi:ipi_send_cpu` would cost every transaction).
    pub fn per_unit_of(mut self, o: &Outcome, events: Option<&Events>) -> TraceCounts {
        let mut substituted = Vec::new();
        if let Some(ev) = events {
            self.add_ipis(ev);
            fill_silent_idle(&mut self.deltas, &mut self.per_cpu, &mut substituted, ev);
        }
        let (unit, work) = o.work();
        let units = unit.in_events_units(work);
        let per = |d: &std::collections::BTreeMap<String, u64>| -> std::collections::BTreeMap<String, f64> {
            d.iter()
                .filter(|_| units > 0.0)
                .map(|(k, v)| (k.clone(), *v as f64 / units))
                .collect()
        };
        let mut per_side = std::collections::BTreeMap::new();
        if let Some((c, s)) = self.sides {
            for (side, cpu) in [("client", c), ("server", s)] {
                if let Some(d) = self.per_cpu.get(&cpu) {
                    per_side.insert(side.to_string(), per(d));
                }
            }
        }
        TraceCounts {
            cpus: self.cpus,
            unit: unit.events_name().into(),
            per_side,
            per_unit: per(&self.deltas),
            deltas: self.deltas,
            missing: self.missing,
            substituted,
            whole_test_s: None,
        }
    }
}

/// `--trace` with guests: the host's `kvm:kvm_exit` by reason on the CPUs the guests'
/// vCPUs run on (every CPU when they are not pinned). Where this host drives the test its
/// counters start and stop at the measured interval's edges (the plan's window sink), and
/// the counts are per unit of work; where a guest drives it, the host cannot see the
/// guest's interval: the counts span the whole test and say so, per nothing.
pub struct HostExits {
    tracer: Arc<Mutex<Option<Tracer>>>,
    traced: Arc<Mutex<Option<Traced>>>,
    /// When the whole-test count started (None: over the window).
    whole_since: Option<Instant>,
}

impl HostExits {
    /// Counts over the measured interval of `plan`, which this host's client runs: sets the
    /// plan's window sink.
    pub fn over_window(vcpu_cpus: &[u32], plan: &mut Plan) -> HostExits {
        let h = HostExits {
            tracer: Arc::new(Mutex::new(Some(Tracer::on(
                KVM_EXIT,
                vcpu_cpus.to_vec(),
                None,
            )))),
            traced: Arc::default(),
            whole_since: None,
        };
        let (tracer, traced) = (h.tracer.clone(), h.traced.clone());
        // Whatever else counts over the window (`--vm`) keeps counting.
        let before = plan.on_window.take();
        plan.on_window = Some(crate::plan::WindowSink(Arc::new(move |open| {
            if let Some(b) = &before {
                (b.0)(open);
            }
            let Ok(mut t) = tracer.lock() else { return };
            match (open, t.take()) {
                (true, Some(x)) => {
                    *t = Some({
                        x.start();
                        x
                    })
                }
                (false, Some(x)) => {
                    if let Ok(mut d) = traced.lock() {
                        *d = Some(x.stop());
                    }
                }
                _ => {}
            }
        })));
        h
    }

    /// Counts from now until [`HostExits::finish`]: a test a guest drives.
    pub fn whole_test(vcpu_cpus: &[u32]) -> HostExits {
        let t = Tracer::on(KVM_EXIT, vcpu_cpus.to_vec(), None);
        t.start();
        HostExits {
            tracer: Arc::new(Mutex::new(Some(t))),
            traced: Arc::default(),
            whole_since: Some(Instant::now()),
        }
    }

    /// The counts for result `r`, and a warning when they measured nothing (a host whose
    /// `kvm:kvm_exit` is silent; `emulated` guests run no KVM at all, so there a silence is
    /// the truth). None when the test never reached its interval.
    pub fn finish(self, r: &TestResult, emulated: bool) -> (Option<TraceCounts>, Option<String>) {
        let stopped = self
            .tracer
            .lock()
            .ok()
            .and_then(|mut t| t.take())
            .map(Tracer::stop);
        let Some(mut traced) = stopped.or_else(|| self.traced.lock().ok()?.take()) else {
            return (None, None);
        };
        let warning = if emulated {
            None
        } else {
            traced.drop_silent_kvm_exits()
        };
        let mut counts = traced.per_unit_of(&r.outcome, None);
        if let Some(since) = self.whole_since {
            counts.per_unit.clear();
            counts.per_side.clear();
            counts.whole_test_s = Some(since.elapsed().as_secs_f64());
        }
        (Some(counts), warning)
    }
}

/// A pinned CPU whose idle loop fired no `power:cpu_idle` while cpuidle counted entries
/// there over the same interval takes cpuidle's count (`events`' `idle_entries`), and
/// `substituted` says so; the total follows. Seen on a PVM guest (AMD): its second vCPU's idle
/// loop never fires the tracepoint, while on the first the two counts agree to the entry
/// (0.9443 per transaction each); read as counted, that CPU's 0 halved the idle entries
/// per transaction and the likely VM exits built on them.
fn fill_silent_idle(
    deltas: &mut std::collections::BTreeMap<String, u64>,
    per_cpu: &mut virtperf_measure::trace::PerCpu,
    substituted: &mut Vec<String>,
    ev: &Events,
) {
    const IDLE: &str = virtperf_wire::counter::IDLE_ENTRIES;
    const HALTS: &str = virtperf_wire::counter::IDLE_HALTS;
    let mut seen = Vec::new();
    for side in std::iter::once(&ev.client).chain(ev.server.as_ref()) {
        let Some(p) = side.pinned.as_ref().filter(|p| !seen.contains(&p.cpu)) else {
            continue;
        };
        seen.push(p.cpu);
        let Some(&counted) = p.deltas.get(IDLE).filter(|n| **n > 0) else {
            continue;
        };
        let Some(traced) = per_cpu.get_mut(&p.cpu).and_then(|m| m.get_mut(IDLE)) else {
            continue;
        };
        if *traced != 0 {
            continue;
        }
        *traced = counted;
        if let Some(total) = deltas.get_mut(IDLE) {
            *total += counted;
        }
        substituted.push(format!(
            "idle_entries on CPU {}: power:cpu_idle never fired there while cpuidle counted {counted} idle entries (an idle loop without the tracepoint): cpuidle's count is used",
            p.cpu
        ));
        // The halts among them: every entry but its POLL state's (cpuidle's `poll`; a
        // driver without that state has no polls to leave out).
        let polls = p
            .deltas
            .get(virtperf_wire::counter::IDLE_ENTRIES_POLL)
            .copied()
            .unwrap_or(0);
        let halts = counted.saturating_sub(polls);
        if let Some(t) = per_cpu.get_mut(&p.cpu).and_then(|m| m.get_mut(HALTS)) {
            *t = halts;
            if let Some(total) = deltas.get_mut(HALTS) {
                *total += halts;
            }
            substituted.push(format!(
                "idle_halts on CPU {}: cpuidle's {halts} entries into a state other than POLL are used",
                p.cpu
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use virtperf_wire::{PinnedEvents, SideEvents};

    fn side(cpu: u32, idle: u64) -> SideEvents {
        SideEvents {
            pinned: Some(PinnedEvents {
                cpu,
                deltas: BTreeMap::from([(virtperf_wire::counter::IDLE_ENTRIES.to_string(), idle)]),
                per_unit: BTreeMap::new(),
            }),
            ..Default::default()
        }
    }

    /// CPU 1's tracepoint stayed silent while cpuidle counted 960 entries: its count and
    /// the total take cpuidle's, with why; CPU 0's traced count stands as it was.
    #[test]
    fn a_cpu_whose_idle_tracepoint_stayed_silent_takes_cpuidles_count() {
        let key = virtperf_wire::counter::IDLE_ENTRIES.to_string();
        let mut deltas = BTreeMap::from([(key.clone(), 944)]);
        let mut per_cpu: virtperf_measure::trace::PerCpu = BTreeMap::from([
            (0, BTreeMap::from([(key.clone(), 944)])),
            (1, BTreeMap::from([(key.clone(), 0)])),
        ]);
        let mut substituted = Vec::new();
        let ev = Events {
            client: side(0, 950),
            server: Some(side(1, 960)),
            ..Default::default()
        };
        fill_silent_idle(&mut deltas, &mut per_cpu, &mut substituted, &ev);
        assert_eq!(per_cpu[&0][&key], 944, "a firing tracepoint's count stands");
        assert_eq!(per_cpu[&1][&key], 960);
        assert_eq!(deltas[&key], 944 + 960);
        assert_eq!(substituted.len(), 1, "{substituted:?}");
        assert!(
            substituted[0].contains("CPU 1") && substituted[0].contains("960"),
            "{substituted:?}"
        );
        // A CPU that was never idle (cpuidle counted none) keeps its 0.
        let mut per_cpu: virtperf_measure::trace::PerCpu =
            BTreeMap::from([(1, BTreeMap::from([(key.clone(), 0)]))]);
        let mut substituted = Vec::new();
        let ev = Events {
            client: side(1, 0),
            ..Default::default()
        };
        fill_silent_idle(&mut deltas, &mut per_cpu, &mut substituted, &ev);
        assert_eq!(per_cpu[&1][&key], 0);
        assert!(substituted.is_empty(), "{substituted:?}");
    }

    /// The silent CPU's halts come from cpuidle too: its entries less its POLL state's,
    /// never every entry (a polling vCPU exits nothing).
    #[test]
    fn a_silent_cpus_halts_leave_its_polls_out() {
        let (idle, halts) = (
            virtperf_wire::counter::IDLE_ENTRIES.to_string(),
            virtperf_wire::counter::IDLE_HALTS.to_string(),
        );
        let mut deltas = BTreeMap::from([(idle.clone(), 0), (halts.clone(), 0)]);
        let mut per_cpu: virtperf_measure::trace::PerCpu =
            BTreeMap::from([(1, BTreeMap::from([(idle.clone(), 0), (halts.clone(), 0)]))]);
        let mut ev = Events {
            client: side(1, 960),
            ..Default::default()
        };
        if let Some(p) = ev.client.pinned.as_mut() {
            p.deltas.insert("idle_entries_poll".into(), 900);
        }
        let mut substituted = Vec::new();
        fill_silent_idle(&mut deltas, &mut per_cpu, &mut substituted, &ev);
        assert_eq!(per_cpu[&1][&idle], 960);
        assert_eq!((per_cpu[&1][&halts], deltas[&halts]), (60, 60));
        assert!(
            substituted
                .iter()
                .any(|m| m.contains("idle_halts on CPU 1")),
            "{substituted:?}"
        );
    }
}
