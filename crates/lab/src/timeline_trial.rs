//! `--timeline`: a separate short rr trial whose scheduler, IPI, idle and syscall
//! tracepoints are sampled with timestamps, rebuilt into the critical path of its
//! transactions (`virtperf_measure::critical`). Separate, because sampling every hit costs
//! time: the test's own numbers never carry it.

use std::time::Duration;

use anyhow::Result;
use virtperf_measure::sampling::Sampler;
use virtperf_wire::{Outcome, TestResult, Timeline};

use crate::plan::Plan;

/// How long the sampled trial runs: long enough for thousands of transactions, short
/// enough that its samples fit the buffers (about 15,000 transactions per CPU).
pub const TRIAL: Duration = Duration::from_millis(500);

/// Runs the sampled trial of `plan` with `run` (a test with the sampler started and
/// stopped at its measured interval) and rebuilds its transactions.
pub(crate) fn trial(
    plan: &Plan,
    run: impl FnOnce(&Plan, &Sampler) -> Result<TestResult>,
) -> std::result::Result<Timeline, String> {
    let (Some(c), Some(s)) = (plan.client_cpu, plan.server_cpu) else {
        return Err("needs two pinned CPUs (--cpus A,B)".into());
    };
    let sampler = Sampler::open(&[c, s])?;
    let mut p = plan.clone();
    p.duration = TRIAL;
    p.trace = false;
    p.timeline = false;
    p.interval = None;
    p.on_interval = None;
    p.capture = None;
    p.kvm_stats = false;
    let r = run(&p, &sampler).map_err(|e| format!("the sampled trial failed: {e:#}"))?;
    let (events, lost) = sampler.stop();
    let rr_p50 = match &r.outcome {
        Outcome::Rr(o) => o.latency.as_ref().map(|l| l.p50_us),
        _ => None,
    };
    let mut t = virtperf_measure::critical::analyze(&events, (c, s), lost, r.duration_s, rr_p50)?;
    // In xAPIC mode an IPI is sent by an MMIO store, not the ICR MSR write sampled here:
    // no ICR write seen is no count of IPIs sent.
    if let Some(why) = virtperf_measure::trace::xapic_mode() {
        t.in_situ.icr_writes_per_transaction = None;
        t.unseen.push(format!("ICR writes: {why}"));
    }
    // Without a TSC-deadline timer the tick is reprogrammed another way (an APIC timer's
    // count, MMIO in xAPIC mode): no such write seen is no count of reprogrammings.
    if let Some(why) = virtperf_measure::trace::no_tsc_deadline() {
        t.in_situ.tsc_deadline_writes_per_transaction = None;
        t.unseen.push(format!("TSC-deadline writes: {why}"));
    }
    Ok(t)
}
