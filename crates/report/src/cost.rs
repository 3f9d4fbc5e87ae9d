//! What a configuration costs in CPUs: what `tune` ranks by and the run report's cost and
//! latency plot shows.

use std::collections::BTreeMap;

use virtperf_wire::{CpuSplit, Env, HostCpu, SideEvents, TestResult};

/// The window a trial's CPU split was taken over: its measured interval (`elapsed_s`), the
/// one the busy shares are fractions of, so polling time divides by the same window. None
/// where it is not positive (a trial that measured nothing).
pub fn window_s(r: &TestResult) -> Option<f64> {
    let w = measured_s(r);
    (w.is_finite() && w > 0.0).then_some(w)
}

/// A trial's measured seconds as its outcome states them (an HTTP series' downloads
/// added up), whatever they are.
pub fn measured_s(r: &TestResult) -> f64 {
    use virtperf_wire::Outcome;
    match &r.outcome {
        Outcome::Rr(o) | Outcome::Crr(o) => o.elapsed_s,
        Outcome::Stream(o) => o.elapsed_s,
        Outcome::Bulk(o) => o.elapsed_s,
        Outcome::Http(o) => o.downloads.iter().map(|d| d.duration_s).sum(),
    }
}

/// Busy CPUs from a split: its CPUs' busy shares added up, plus `poll_s` of cpuidle POLL
/// over `window_s` (/proc/stat counts that as idle, but it is what halt polling and
/// `cpu_dma_latency = 0` spend). None without per-CPU shares or polling time.
fn busy(split: &CpuSplit, poll_s: Option<f64>, window_s: f64) -> Option<f64> {
    if split.per_cpu_busy_pct.is_empty() || window_s <= 0.0 {
        return None;
    }
    Some(split.per_cpu_busy_pct.iter().sum::<f64>() / 100.0 + poll_s? / window_s)
}

/// The one rule for a side's cpuidle polling, in µs over its events' window (tune's cost
/// and explain's CPU per transaction both use it): what the POLL state counted; 0 where
/// idle states were counted and none is POLL, or where the machine has no cpuidle driver
/// at all and was not booted with `idle=poll` (its idle loop then halts: there is no
/// polling to count); None otherwise (idle not readable: polling unknown, not free).
pub fn poll_us(deltas: &BTreeMap<String, u64>, env: Option<&Env>) -> Option<u64> {
    match deltas.get("idle_time_us_poll") {
        Some(us) => Some(*us),
        None if deltas.contains_key(virtperf_wire::counter::IDLE_ENTRIES) => Some(0),
        None if env.is_some_and(halts_without_cpuidle) => Some(0),
        None => None,
    }
}

/// A machine with no cpuidle driver whose kernel was not told to poll when idle.
pub fn halts_without_cpuidle(env: &Env) -> bool {
    virtperf_measure::events::idle_never_polls(
        env.cpuidle_driver.as_deref(),
        env.idle_states.len(),
        &env.cmdline,
    )
}

/// Seconds in cpuidle POLL on one side, by [`poll_us`].
fn poll_s(e: Option<&SideEvents>, env: Option<&Env>) -> Option<f64> {
    poll_us(&e?.deltas, env).map(|us| us as f64 / 1e6)
}

/// Busy CPUs during one trial: what every machine the configuration keeps busy spent,
/// counted once. This host's busy CPUs and its CPUs' cpuidle polling; for a guest on this
/// host, the host's figures only (its vCPU threads are in them): from the client's side
/// where the host drives, from the host's own sample of the test ([`HostCpu`]) where a
/// guest drives (guest-host, guest-guest, loopback), since then neither side is the host;
/// and a remote machine's own where the server is on one (not the same kernel, not a VM on
/// this host watched with `--vm`: its threads are in this host's figures already). None
/// where a figure it needs could not be read: a cost without it would call that part free.
pub fn busy_cpus(r: &TestResult) -> Option<f64> {
    if let Some(g) = &r.guest {
        if g.direction != "host-guest" {
            let HostCpu {
                window_s,
                system,
                poll_s,
            } = r.host_cpu.as_ref()?;
            return busy(system, *poll_s, *window_s);
        }
    }
    let window = window_s(r)?;
    let ev = r.events.as_ref();
    let mut total = busy(
        &r.cpu.client.system,
        poll_s(ev.map(|e| &e.client), Some(&r.env.client)),
        window,
    )?;
    if !r.cpu.same_host && r.guest.is_none() && r.host_vm.is_none() {
        let server = r.cpu.server.as_ref()?;
        total += busy(
            &server.system,
            poll_s(ev.and_then(|e| e.server.as_ref()), r.env.server.as_ref()),
            window,
        )?;
    }
    Some(total)
}

/// Every trial's busy CPUs, only when every one of them has its figure (a mean or
/// interval over some would not be the configuration's).
pub fn each_busy_cpus(results: &[&TestResult]) -> Option<Vec<f64>> {
    let v: Vec<f64> = results.iter().filter_map(|r| busy_cpus(r)).collect();
    (!v.is_empty() && v.len() == results.len()).then_some(v)
}

/// The mean busy CPUs of `results`, only when every one of them has its figure.
pub fn mean_busy_cpus(results: &[&TestResult]) -> Option<f64> {
    each_busy_cpus(results).map(|v| v.iter().sum::<f64>() / v.len() as f64)
}

/// CPUs a watched VM's host threads kept busy during one trial (all classes: vCPUs, vhost,
/// I/O, main loop): the host's share of [`busy_cpus`] that the guest itself cannot see.
/// None without a `--vm` view or where its window was not read.
pub fn vm_cpus(r: &TestResult) -> Option<f64> {
    let h = r.host_vm.as_ref()?;
    let window = h.window_s.filter(|w| *w > 0.0)?;
    if h.classes.is_empty() {
        return None;
    }
    Some(h.classes.iter().map(|c| c.cpu_s).sum::<f64>() / window)
}

/// The mean of [`vm_cpus`] over `results`, only when every one has it.
pub fn mean_vm_cpus(results: &[&TestResult]) -> Option<f64> {
    let v: Vec<f64> = results.iter().filter_map(|r| vm_cpus(r)).collect();
    (!v.is_empty() && v.len() == results.len()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}
