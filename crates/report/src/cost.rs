//! What a configuration costs in CPUs: what `tune` ranks by and the run report's cost and
//! latency plot shows.

use virtperf_wire::{SideCpu, SideEvents, TestResult};

/// Busy CPUs during one trial: the client machine's busy CPUs plus its CPUs' time in the
/// cpuidle POLL state (/proc/stat counts that as idle, but it is what halt polling and
/// `cpu_dma_latency = 0` spend), and the server machine's the same where it is another
/// machine (not the same kernel, not a guest whose vCPUs the host's figures include, not a
/// VM on this host watched with `--vm`: its threads are in this host's figures already).
/// None where a side's split or its polling time could not be read: a cost without them
/// would call polling free.
pub fn busy_cpus(r: &TestResult) -> Option<f64> {
    let side = |cpu: &SideCpu, ev: Option<&SideEvents>| -> Option<f64> {
        if cpu.system.per_cpu_busy_pct.is_empty() {
            return None;
        }
        let busy: f64 = cpu.system.per_cpu_busy_pct.iter().sum::<f64>() / 100.0;
        let e = ev?;
        let poll = match e.deltas.get("idle_time_us_poll") {
            Some(us) => *us as f64 / 1e6 / r.duration_s.max(1e-9),
            // Idle states counted but none is POLL: no polling to add.
            None if e.deltas.contains_key(virtperf_wire::counter::IDLE_ENTRIES) => 0.0,
            None => return None,
        };
        Some(busy + poll)
    };
    let ev = r.events.as_ref();
    let mut total = side(&r.cpu.client, ev.map(|e| &e.client))?;
    if !r.cpu.same_host && r.guest.is_none() && r.host_vm.is_none() {
        let server = r.cpu.server.as_ref()?;
        total += side(server, ev.and_then(|e| e.server.as_ref()))?;
    }
    Some(total)
}

/// The mean busy CPUs of `results`, only when every one of them has its figure (a mean
/// over some would not be the configuration's).
pub fn mean_busy_cpus(results: &[&TestResult]) -> Option<f64> {
    let v: Vec<f64> = results.iter().filter_map(|r| busy_cpus(r)).collect();
    (!v.is_empty() && v.len() == results.len()).then(|| v.iter().sum::<f64>() / v.len() as f64)
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
