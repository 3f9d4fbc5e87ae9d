//! `--vm`: the hypervisor's view of the VM a test's far end runs in. The VM's threads and
//! KVM's per-VM counters are sampled at the edges of the measured window (where the
//! client runs here) and reported by thread class and per unit of work, beside what the
//! guest measured of itself.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Result};
use virtperf_kvm::ProcessStats;
use virtperf_measure::vm::{self, ThreadSample, VmProcess, VmSpec};
use virtperf_wire::{HostVm, ThreadClass, Unit, VmKvmCounters};

use crate::plan::{Plan, WindowSink};

/// The VM's counters at one moment.
#[derive(Debug, Clone)]
struct Snapshot {
    at: Instant,
    /// Clock ticks since boot as the sample began (to tell a thread born after it).
    uptime_ticks: Option<u64>,
    threads: Vec<ThreadSample>,
    kvm: Result<KvmRead, String>,
}

/// KVM's counters for the VM at one moment, and where they came from.
#[derive(Debug, Clone)]
struct KvmRead {
    source: String,
    dirs: Vec<String>,
    counters: BTreeMap<String, u64>,
    refused: BTreeMap<String, String>,
}

/// Where KVM's counters for one VM are read: its vCPUs' binary statistics (duplicated
/// descriptors; works where debugfs is refused), else its debugfs directories.
#[derive(Debug, Clone)]
struct Counters {
    stats: Arc<Mutex<Result<ProcessStats, String>>>,
}

impl Counters {
    fn open(pid: u32) -> Counters {
        Counters {
            stats: Arc::new(Mutex::new(
                ProcessStats::open(pid).map_err(|e| e.to_string()),
            )),
        }
    }

    fn read(&self, vm: &VmProcess) -> Result<KvmRead, String> {
        let stats_why = match self.stats.lock().as_deref_mut() {
            Ok(Ok(s)) => match s.read() {
                Ok(counters) => {
                    return Ok(KvmRead {
                        source: format!(
                            "KVM_GET_STATS_FD of its {} vCPU{} (descriptors duplicated with pidfd_getfd)",
                            s.vcpus(),
                            if s.vcpus() == 1 { "" } else { "s" }
                        ),
                        dirs: Vec::new(),
                        counters,
                        refused: BTreeMap::new(),
                    })
                }
                Err(e) => e.to_string(),
            },
            Ok(Err(why)) => why.clone(),
            Err(_) => "statistics lock poisoned".to_string(),
        };
        match virtperf_kvm::debugfs_vm_stats(vm.pid, &vm::kvm_vm_fds(vm.pid)) {
            Ok((dirs, mut d)) => {
                d.refused.insert("binary statistics".into(), stats_why);
                Ok(KvmRead {
                    source: "debugfs".into(),
                    dirs,
                    counters: d.counters,
                    refused: d.refused,
                })
            }
            Err(e) => Err(format!("binary statistics: {stats_why}; debugfs: {e}")),
        }
    }
}

/// A VM being watched: found once, sampled at the window's edges.
pub struct Watch {
    spec: VmSpec,
    vm: VmProcess,
    counters: Counters,
    /// Taken when the watch opened: the start where no window edge is seen.
    first: Snapshot,
    /// The window's opening and closing samples, as the client saw its edges.
    edges: Arc<Edges>,
    /// `vm watch`'s samples not yet known whole: the newest (taken before the VM was last
    /// seen alive, or not yet), and the closing edge it replaced.
    held: Mutex<Held>,
}

/// A watch's closing samples in waiting ([`Watch::hold`]).
#[derive(Default)]
struct Held {
    /// The newest sample, not yet followed by a check that the VM still runs.
    newest: Option<Snapshot>,
    /// The closing edge before the last one promoted.
    before: Option<Snapshot>,
}

impl Watch {
    /// Finds the VM `spec` names and samples it once (so a VM that cannot be read is an
    /// error before any test runs).
    pub fn open(spec: &VmSpec) -> Result<Watch> {
        let vm = vm::find(spec).map_err(|e| anyhow!("--vm {e}"))?;
        Watch::of_process(spec, vm)
    }

    /// A watch over a process already found (what [`Watch::open`] does after finding it).
    fn of_process(spec: &VmSpec, vm: VmProcess) -> Result<Watch> {
        let counters = Counters::open(vm.pid);
        let first = snapshot(&vm, &counters).map_err(|e| anyhow!("--vm {spec}: {e}"))?;
        Ok(Watch {
            spec: spec.clone(),
            vm,
            counters,
            first,
            edges: Arc::default(),
            held: Mutex::default(),
        })
    }

    /// Samples at `plan`'s window edges, after whatever else the plan does there.
    pub fn attach(&self, plan: &mut Plan) {
        let (vm, edges, counters) = (self.vm.clone(), self.edges.clone(), self.counters.clone());
        let before = plan.on_window.take();
        plan.on_window = Some(WindowSink(Arc::new(move |open| {
            if let Some(b) = &before {
                (b.0)(open);
            }
            mark_edge(&vm, &counters, &edges, open);
        })));
    }

    /// The host's view over the window (or, where no window edge was seen, from
    /// [`Watch::open`] until now), per unit of `work` when given.
    pub fn finish(&self, work: Option<(Unit, f64)>) -> HostVm {
        let mut missing = BTreeMap::new();
        let (open, close) = self.edges.lock().map(|e| e.clone()).unwrap_or((None, None));
        let (open, close) = match (open, close) {
            (Some(o), Some(c)) => (o, c),
            (o, _) => {
                // No closing sample: read the VM now. One that cannot be read (it exited)
                // has no figures at all, not zeros from comparing a sample with itself.
                let now = match snapshot(&self.vm, &self.counters) {
                    Ok(now) => now,
                    Err(e) => return self.unread(&e),
                };
                let why = match o {
                    Some(_) => "the VM could not be read as the window closed: the figures run on to the end of the command",
                    None => "the measured window's edges were not seen here (a guest drove the test): the figures span from the start of the command to its end",
                };
                if work.is_some() {
                    missing.insert("window".to_string(), why.to_string());
                    // The work was counted over the measured interval, these figures over
                    // a longer span (set-up, warm-up, drain): dividing one by the other
                    // would charge all of it to the work. Totals only.
                    missing.insert(
                        "per_unit".to_string(),
                        "not divided by the work: it was counted over the measured interval, these figures over the whole command (totals only)".to_string(),
                    );
                }
                let open = o.unwrap_or_else(|| self.first.clone());
                return report(self, &open, &now, None, missing);
            }
        };
        report(self, &open, &close, work, missing)
    }

    /// The view of a VM that could not be read at the end: no figures, and why.
    fn unread(&self, why: &str) -> HostVm {
        HostVm {
            spec: self.spec.to_string(),
            pid: self.vm.pid,
            vmm: self.vm.vmm.clone(),
            accel: None,
            window_s: Some(self.first.at.elapsed().as_secs_f64()),
            unit: None,
            classes: Vec::new(),
            kvm: None,
            missing: BTreeMap::from([(
                "threads".to_string(),
                format!("the VM could not be read at the end ({why}): did it exit?"),
            )]),
        }
    }

    /// Whether the watched VM's process still runs.
    pub fn alive(&self) -> bool {
        vm::alive(self.vm.pid)
    }

    /// A sample now, as the window's opening (`vm watch`).
    pub fn mark(&self, open: bool) {
        mark_edge(&self.vm, &self.counters, &self.edges, open);
    }

    /// `vm watch`'s closing edge, as the VM runs: the sample held since the last call
    /// becomes the closing edge (the caller has just seen the VM alive after it), and a
    /// new one is held. A VM killed part-way loses its threads one by one before it is
    /// gone: a sample taken then would end the window with its vCPUs missing, so none is
    /// trusted before the VM is seen alive after it ([`Watch::ended`] drops the last).
    pub fn hold(&self) {
        let Ok(mut h) = self.held.lock() else { return };
        if let (Some(newest), Ok(mut e)) = (h.newest.take(), self.edges.lock()) {
            h.before = e.1.replace(newest);
        }
        h.newest = snapshot(&self.vm, &self.counters).ok();
    }

    /// The VM exited during `vm watch`: the held sample is dropped, and so is the closing
    /// edge where it had fewer threads than the one before it (the VM was already going
    /// when it was taken, more slowly than one sampling period).
    pub fn ended(&self) {
        let Ok(mut h) = self.held.lock() else { return };
        h.newest = None;
        let Ok(mut e) = self.edges.lock() else { return };
        if let (Some(c), Some(b)) = (&e.1, &h.before) {
            if c.threads.len() < b.threads.len() {
                e.1 = h.before.take();
            }
        }
    }

    /// The end of `vm watch` with the VM running: the held sample is the closing edge.
    pub fn close(&self) {
        if let (Ok(mut h), Ok(mut e)) = (self.held.lock(), self.edges.lock()) {
            if let Some(newest) = h.newest.take() {
                e.1 = Some(newest);
            }
        }
    }

    /// Samples the VM every `every` (with the wall clock) until the recording stops: for a
    /// battery that runs elsewhere in one piece (`explain --host`), whose trials' windows
    /// are known only afterwards, from their own times ([`Watch::between`]).
    pub fn record(&self, every: Duration) -> Recording {
        let (vm, counters) = (self.vm.clone(), self.counters.clone());
        let samples: Arc<Mutex<Vec<(SystemTime, Snapshot)>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (samples.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("vm-record".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    let now = SystemTime::now();
                    if let (Ok(x), Ok(mut v)) = (snapshot(&vm, &counters), s.lock()) {
                        v.push((now, x));
                    }
                    std::thread::sleep(every);
                }
            })
            .ok();
        Recording {
            every,
            samples,
            stop,
            thread,
        }
    }

    /// The host's view over `from`..`to` (wall clock: a trial's measured interval as the
    /// far machine timed it) from `rec`'s samples nearest those edges, per unit of `work`.
    /// Edges outside what was recorded give no figures, and why.
    pub fn between(
        &self,
        rec: &Recording,
        from: SystemTime,
        to: SystemTime,
        work: Option<(Unit, f64)>,
    ) -> HostVm {
        let samples = rec.samples.lock().map(|v| v.clone()).unwrap_or_default();
        let near = |t: SystemTime| {
            samples
                .iter()
                .min_by_key(|(at, _)| at.duration_since(t).unwrap_or_else(|e| e.duration()))
                .filter(|(at, _)| {
                    at.duration_since(t).unwrap_or_else(|e| e.duration()) <= 2 * rec.every
                })
                .map(|(_, s)| s.clone())
        };
        match (near(from), near(to)) {
            (Some(a), Some(b)) if b.at > a.at => {
                let edges = format!(
                    "sampled every {:.2} s on this host; the window's edges are the samples nearest the trial's measured interval as the far machine's wall clock timed it (its clock and this one taken to agree)",
                    rec.every.as_secs_f64()
                );
                report(
                    self,
                    &a,
                    &b,
                    work,
                    BTreeMap::from([("window".into(), edges)]),
                )
            }
            _ => self.unread_window(),
        }
    }

    /// No samples at a window's edges (or no window known): no figures, and why.
    pub fn unread_window(&self) -> HostVm {
        let mut h = self.unread("");
        h.window_s = None;
        h.missing = BTreeMap::from([(
            "window".to_string(),
            "no host sample near the trial's measured interval (it ran outside the recording, or the two machines' clocks disagree)".to_string(),
        )]);
        h
    }
}

/// The VM sampled in the background ([`Watch::record`]); stopped when dropped.
pub struct Recording {
    every: Duration,
    samples: Arc<Mutex<Vec<(SystemTime, Snapshot)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Recording {
    /// Stops sampling (waits for the sampler's last sample).
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The window's opening and closing samples.
type Edges = Mutex<(Option<Snapshot>, Option<Snapshot>)>;

/// Samples the VM now as the window's opening (`open`) or closing edge; a VM that cannot
/// be read then leaves the edge unseen (the report says so).
fn mark_edge(vm: &VmProcess, counters: &Counters, edges: &Edges, open: bool) {
    if let (Ok(s), Ok(mut e)) = (snapshot(vm, counters), edges.lock()) {
        if open {
            e.0 = Some(s);
        } else {
            e.1 = Some(s);
        }
    }
}

fn snapshot(vm: &VmProcess, counters: &Counters) -> Result<Snapshot, String> {
    let uptime_ticks = vm::uptime_ticks();
    let threads = vm::sample(vm)?;
    let kvm = counters.read(vm);
    Ok(Snapshot {
        at: Instant::now(),
        uptime_ticks,
        threads,
        kvm,
    })
}

/// The per-unit divisor: transactions, or MB received.
fn units(work: Option<(Unit, f64)>) -> Option<(Unit, f64)> {
    work.map(|(u, w)| (u, u.in_events_units(w)))
        .filter(|(_, n)| *n > 0.0)
}

fn report(
    w: &Watch,
    open: &Snapshot,
    close: &Snapshot,
    work: Option<(Unit, f64)>,
    mut missing: BTreeMap<String, String>,
) -> HostVm {
    let per = units(work);
    let unseen = vm::unseen_at_open(&open.threads, &close.threads, open.uptime_ticks);
    if !unseen.is_empty() {
        let names: Vec<&str> = unseen.iter().map(|t| t.comm.as_str()).collect();
        missing.insert(
            "threads_unseen".into(),
            format!(
                "{} thread(s) ({}) were alive before the window but not in its opening sample: their CPU is not counted (not measured), not their whole life's put in this window",
                names.len(),
                names.join(", ")
            ),
        );
    }
    let classes: Vec<ThreadClass> = vm::by_class(&open.threads, &close.threads, open.uptime_ticks)
        .into_iter()
        .map(|(class, d)| {
            let cpu_s = d
                .exec_ns
                .map_or_else(|| vm::ticks_s(d.utime + d.stime), |n| n as f64 / 1e9);
            let run_delay_s = d.run_delay_ns.map(|n| n as f64 / 1e9);
            let mut per_unit = BTreeMap::new();
            if let Some((_, n)) = per {
                per_unit.insert("cpu_us".to_string(), cpu_s * 1e6 / n);
                if let Some(r) = run_delay_s {
                    per_unit.insert("run_delay_us".to_string(), r * 1e6 / n);
                }
                per_unit.insert(
                    "switches".to_string(),
                    (d.voluntary + d.involuntary) as f64 / n,
                );
            }
            ThreadClass {
                class: class.to_string(),
                threads: d.names.len() as u32,
                names: d.names,
                cpu_s,
                user_s: vm::ticks_s(d.utime),
                sys_s: vm::ticks_s(d.stime),
                run_delay_s,
                voluntary_switches: d.voluntary,
                involuntary_switches: d.involuntary,
                migrations: d.migrations,
                per_unit,
            }
        })
        .collect();
    if classes.iter().any(|c| c.run_delay_s.is_none()) {
        missing.insert(
            "run_delay".into(),
            "no /proc/PID/task/TID/schedstat here (a kernel without CONFIG_SCHED_INFO)".into(),
        );
    }
    if !classes.iter().any(|c| c.class == "vcpu") {
        missing.insert(
            "vcpu".into(),
            "no thread is named as a vCPU (QEMU names them `CPU n/KVM` only with -name …,debug-threads=on, as libvirt starts it): their time is under main/other".into(),
        );
    }
    let accel = vm::accel(&w.vm, &close.threads);
    let kvm = kvm_counters(open, close, per, &mut missing);
    if accel == Some("tcg") {
        missing.insert(
            "kvm".into(),
            "the VM runs under TCG: KVM holds no VM for it".into(),
        );
    }
    exits_missing(accel, kvm.is_some(), &mut missing);
    HostVm {
        spec: w.spec.to_string(),
        pid: w.vm.pid,
        vmm: w.vm.vmm.clone(),
        accel: accel.map(str::to_string),
        window_s: Some(close.at.saturating_duration_since(open.at).as_secs_f64()),
        unit: per.map(|(u, _)| u.events_name().to_string()),
        classes,
        kvm,
        missing,
    }
}

fn kvm_counters(
    open: &Snapshot,
    close: &Snapshot,
    per: Option<(Unit, f64)>,
    missing: &mut BTreeMap<String, String>,
) -> Option<VmKvmCounters> {
    let (a, b) = match (&open.kvm, &close.kvm) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            missing.insert("kvm".into(), e.clone());
            return None;
        }
    };
    let mut refused = a.refused.clone();
    refused.extend(b.refused.clone());
    // A counter lower at the close than at the open (a VM reset, a wrapped or reused
    // statistic) has no delta to give: not measured, said, never read as 0.
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for (k, v) in &b.counters {
        let Some(before) = a.counters.get(k) else {
            continue;
        };
        match v.checked_sub(*before) {
            Some(d) => {
                counts.insert(k.clone(), d);
            }
            None => {
                refused.insert(
                    k.clone(),
                    format!("went backwards over the window ({before} → {v}): not measured"),
                );
            }
        }
    }
    let per_unit = per
        .map(|(_, n)| {
            counts
                .iter()
                .map(|(k, v)| (k.clone(), *v as f64 / n))
                .collect()
        })
        .unwrap_or_default();
    Some(VmKvmCounters {
        source: a.source.clone(),
        dirs: a.dirs.clone(),
        counts,
        per_unit,
        refused,
    })
}

/// Why exits by reason are not in the view.
fn exits_missing(accel: Option<&str>, kvm: bool, missing: &mut BTreeMap<String, String>) {
    let why = match accel {
        Some("tcg") => "the VM runs under TCG: QEMU emulates its CPU, so there are no VM exits",
        Some("kvm") if kvm => "exits by reason with their time (kvm:kvm_exit paired with kvm:kvm_entry per vCPU thread) are not counted by --vm yet: exits by kind are in `kvm`, and `rr --trace` counts them on the vCPUs' CPUs",
        Some("kvm") => "exits by reason with their time (kvm:kvm_exit paired with kvm:kvm_entry per vCPU thread) are not counted by --vm yet, and KVM's per-VM debugfs could not be read (see `kvm`)",
        _ => "the process holds no KVM VM and names no TCG vCPU: what runs it could not be told",
    };
    missing.insert("exits".into(), why.into());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A window no sample was taken at has no length and no figures, and says why; a watch
    /// over this very process (past `open`'s "is it a VM" check) has both.
    #[test]
    fn an_unread_window_is_null_not_zero() {
        let me = std::process::id();
        let vm = VmProcess {
            pid: me,
            vmm: "test".into(),
            helpers: Vec::new(),
        };
        let w = Watch::of_process(&VmSpec::Pid(me), vm).expect("this process");
        let h = w.unread_window();
        assert_eq!(h.window_s, None);
        assert!(h.classes.is_empty());
        assert!(h
            .missing
            .get("window")
            .is_some_and(|m| m.contains("no host sample")));
        std::thread::sleep(Duration::from_millis(20));
        let h = w.finish(None);
        assert!(h.window_s.is_some_and(|s| s > 0.0), "{h:?}");
    }
}
