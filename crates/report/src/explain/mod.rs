//! `virtperf explain`'s model: where a cross-CPU round trip's time goes, built from
//! measurements that are independent of the one it explains, with the residual published.
//!
//! The battery (`virtperf_explain`) stores every measurement as a trial of one run; this
//! module reads those trials back (so `virtperf show` of an explain run recomputes the same
//! answer) and computes:
//!
//! - **measured**: the cross-CPU blocking rr round trip (p50; mean and p99 beside it);
//! - **path**: the same rr with both sides spinning: the round trip with no sleep and no
//!   wake-up on its critical path;
//! - **wake-up**: 2 × (one-way p50 of `wake` across CPUs blocking − the same spinning), one
//!   per direction: a thread woken on another CPU, without any socket;
//!   - **of which idle exit**: 2 × (the blocking wake-up with the machine's halt polling off −
//!     with it on), both measured (as-is supplies whichever of the two it already is); "not
//!     measured" with the reason where one of the two could not be set, never 0;
//! - **predicted** = path + wake-up, and **residual** = measured − predicted, never forced
//!   to zero; both absent (null) unless path and wake-up were both measured;
//! - cross-checks that are not added: VM exits per transaction priced with `kvm exits`, and
//!   `kvm halt`'s wake-up latency of a halted vCPU with and without polling;
//! - **remedies**: every mode or knob the battery ran, with its measured effect on p50/p99
//!   and on CPU time per transaction.
//!
//! Everything here is arithmetic on stored numbers: no sockets, no knobs.

use std::collections::BTreeMap;
use virtperf_wire::RrParams;

use virtperf_store::TrialRow;
use virtperf_wire::{Env, TestResult, Workload};

mod model;
mod situ;
mod text;
mod verdict;
pub use model::*;
pub(crate) use text::signed_pct;
pub use text::{fixed2, opt, side_by_side, signed1, text};
pub use verdict::verdict;
pub(crate) use verdict::NO_COST_BAND;

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

    path_and_wake_up(&c, env, base.p50, &mut tries, &mut components, &mut missing);

    if let Some(n) = situ::awake_idle_exit(
        &c,
        env,
        &base,
        &mut components,
        &mut cross_checks,
        &mut missing,
    ) {
        tries = tries.min(n);
    }

    // A prediction needs every top-level term: a partial sum would look like a model that
    // explains less than it does.
    let complete = ["path", "wake_up"]
        .iter()
        .all(|n| components.iter().any(|x| x.name == *n));
    let predicted = complete.then(|| {
        components
            .iter()
            .filter(|x| x.part_of.is_none())
            .map(|x| x.us)
            .sum::<f64>()
    });
    let residual = predicted.map(|p| base.p50 - p);

    let mut seen = situ::seen(&c, &mut missing);
    checks_beside(
        &c,
        (env, &base),
        &seen,
        &components,
        &mut cross_checks,
        &mut missing,
    );

    if let Some(s) = &seen.in_situ {
        (seen.disagreements, seen.undecided) = situ::disagreements(s, &components);
    }
    let same = c.rr(RR_SAME_BLOCK, AS_IS);
    let remedies = remedies(&c, &base, same.as_ref(), &mut missing);
    let (request_bytes, response_bytes) = match rr_sizes(&base.result) {
        Some((a, b)) => (Some(a), Some(b)),
        None => (None, None),
    };

    let mut e = Explanation {
        verdict: None,
        run_id,
        measured_us: base.p50,
        measured_mean_us: base.mean,
        measured_p99_us: base.p99,
        request_bytes,
        response_bytes,
        cpus: (base.result.client_cpu, base.result.server_cpu),
        same_cpu_us: same.as_ref().map(|s| s.p50),
        same_cpu: same.as_ref().and_then(|s| s.result.client_cpu),
        predicted_us: predicted,
        residual_us: residual,
        residual_pct: residual
            .map(|r| r / base.p50 * 100.0)
            .filter(|v| v.is_finite()),
        components,
        cross_checks,
        missing,
        events_per_transaction: base.events,
        events_per_transaction_same_cpu: same
            .as_ref()
            .map(|s| s.events.clone())
            .unwrap_or_default(),
        remedies,
        remedies_named: situ::named_remedies(env, &c.configs()),
        exits_by_cause: seen.exits_by_cause,
        in_situ: seen.in_situ,
        disagreements: seen.disagreements,
        undecided_in_situ: seen.undecided,
        host: base.result.host_vm.clone(),
        environment: environment(env),
        tries,
        warnings: warnings(env),
    };
    e.verdict = verdict(&e);
    Ok(e)
}

/// The path's TCP/IP stack share: the spinning rr minus the same round trip over an AF_UNIX
/// socket (`unix-rr`, spinning: no wake-up in either), and what is left (socket calls, the
/// message crossing CPUs). Parts of `path`, so the prediction is unchanged.
fn stack_share(
    c: &Cells,
    tries: &mut usize,
    components: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    let (Some(tcp), Some(unix)) = (c.rr(RR_CROSS_SPIN, AS_IS), c.rr(UNIX_RR_CROSS_SPIN, AS_IS))
    else {
        missing.push(Missing {
            name: "tcp_ip_stack".into(),
            reason: c.why_not(UNIX_RR_CROSS_SPIN, AS_IS),
        });
        return;
    };
    if tcp.p50 < unix.p50 {
        missing.push(Missing {
            name: "tcp_ip_stack".into(),
            reason: format!(
                "the spinning AF_UNIX round trip ({:.2} µs) is slower than the TCP one ({:.2} µs): their difference is no cost of the TCP/IP stack",
                unix.p50, tcp.p50
            ),
        });
        return;
    }
    *tries = (*tries).min(unix.n);
    components.push(Component {
        name: "tcp_ip_stack".into(),
        us: tcp.p50 - unix.p50,
        source: format!(
            "rr spinning p50 {:.2} µs − unix-rr spinning p50 {:.2} µs (AF_UNIX, same CPUs), medians of {} tries",
            tcp.p50, unix.p50, unix.n
        ),
        part_of: Some("path".into()),
        spread_us: None,
    });
    components.push(Component {
        name: "socket_path".into(),
        us: unix.p50,
        source: "unix-rr spinning p50: the socket calls and the message crossing CPUs, no TCP/IP"
            .into(),
        part_of: Some("path".into()),
        spread_us: None,
    });
}

/// The model's two top-level terms: the path (the round trip with both sides spinning) and
/// the wake-ups (two futex wake-ups across CPUs, blocking minus spinning), with the idle
/// exit inside the latter; `tries` lowered to the fewest tries any term had.
fn path_and_wake_up(
    c: &Cells,
    env: &Env,
    measured: f64,
    tries: &mut usize,
    components: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    // Path: the same round trip with nobody asleep.
    match c.rr(RR_CROSS_SPIN, AS_IS) {
        // Spinning that is no faster than blocking took the CPUs the messages need (two
        // vCPUs on shared host CPUs, a TCG guest): it isolates no path.
        Some(spin) if spin.p50 >= measured => missing.push(Missing {
            name: "path".into(),
            reason: format!(
                "the round trip with both sides spinning ({:.1} µs) is no faster than the blocking one ({measured:.1} µs): the spinners take the CPUs the messages need (vCPUs sharing host CPUs, or emulation), so it isolates no path",
                spin.p50
            ),
        }),
        Some(spin) => {
            *tries = (*tries).min(spin.n);
            components.push(Component {
                name: "path".into(),
                us: spin.p50,
                source: format!(
                    "rr across CPUs with both sides spinning (--wait spin), p50 over {} tries",
                    spin.n
                ),
                part_of: None,
                spread_us: None,
            });
        }
        None => missing.push(Missing {
            name: "path".into(),
            reason: c.why_not(RR_CROSS_SPIN, AS_IS),
        }),
    }
    // The path's parts only under a path.
    if components.iter().any(|x| x.name == "path") {
        stack_share(c, tries, components, missing);
    }

    // Wake-up: a thread woken on another CPU, no socket involved; one per direction.
    let wake_block = c.probe(WAKE_BLOCK, AS_IS);
    let wake_spin = c.probe(WAKE_SPIN, AS_IS);
    match (wake_block, wake_spin) {
        // A difference below 0 is no cost: the spinning waiter took the CPU its waker needed.
        (Some((b, _)), Some((s, _))) if b < s => missing.push(Missing {
            name: "wake_up".into(),
            reason: format!(
                "the spinning one-way wake-up ({s:.2} µs) is slower than the blocking one ({b:.2} µs), so their difference is no wake-up cost: the spinner takes the CPU its waker needs (vCPUs sharing host CPUs, or emulation)"
            ),
        }),
        (Some((b, nb)), Some((s, ns))) => {
            *tries = (*tries).min(nb).min(ns);
            let wake_up = 2.0 * (b - s);
            components.push(Component {
                name: "wake_up".into(),
                us: wake_up,
                source: format!(
                    "2 × (wake futex across CPUs: blocking one-way p50 {b:.2} µs − spinning {s:.2} µs), medians of {} tries",
                    nb.min(ns)
                ),
                part_of: None,
                spread_us: c
                    .probe_span(WAKE_BLOCK, AS_IS)
                    .zip(c.probe_span(WAKE_SPIN, AS_IS))
                    .and_then(|(b, s)| model::diff_spread(b, s, 2.0)),
            });
            if let Some(n) = idle_exit(c, env, wake_up, components, missing) {
                *tries = (*tries).min(n);
            }
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
}

/// Request and response sizes of an rr result.
fn rr_sizes(r: &TestResult) -> Option<(u32, u32)> {
    match &r.workload {
        Workload::Rr(RrParams {
            request, response, ..
        }) => Some((*request, *response)),
        _ => None,
    }
}

/// A config whose blocking wake-up was measured, with the halt-poll window it ran under.
struct PollCell {
    config: String,
    window: u64,
    wake_p50: f64,
    tries: usize,
}

/// The part of the wake-up that is leaving the idle state: the blocking wake-up with halt
/// polling off minus with it on (the polling window keeps the CPU out of the halt). Both
/// are measured; as-is supplies whichever of the two it already is. Where either could not
/// be set the term is missing with the reason, never 0.
fn idle_exit(
    c: &Cells,
    env: &Env,
    wake_up: f64,
    components: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) -> Option<usize> {
    let cells: Vec<PollCell> = c
        .configs()
        .into_iter()
        .filter_map(|config| {
            let window = c.poll_of(&config)?;
            let (wake_p50, tries) = c.probe(WAKE_BLOCK, &config)?;
            Some(PollCell {
                config,
                window,
                wake_p50,
                tries,
            })
        })
        .collect();
    let off = cells.iter().find(|p| p.window == 0);
    let on = cells
        .iter()
        .filter(|p| p.window > 0)
        .max_by_key(|p| p.window);
    let (Some(off), Some(on)) = (off, on) else {
        let reason = if cells.is_empty() && c.poll_of(AS_IS).is_none() {
            "no guest halt-polling knob here (haltpoll.guest_halt_poll_ns: not a KVM guest with cpuidle-haltpoll)".to_string()
        } else {
            let absent = if off.is_none() { "off" } else { "on" };
            format!(
                "needs the blocking wake-up with halt polling both off and on; polling {absent} was not measured: {}",
                c.why_no_poll_config()
                    .unwrap_or_else(|| "the halt-polling configs did not run".into())
            )
        };
        missing.push(Missing {
            name: "idle_exit".into(),
            reason,
        });
        return None;
    };
    let idle = 2.0 * (off.wake_p50 - on.wake_p50);
    let tries = off.tries.min(on.tries);
    if idle < 0.0 {
        missing.push(Missing {
            name: "idle_exit".into(),
            reason: format!(
                "the blocking wake-up with halt polling on ({}: {:.2} µs) is slower than with it off ({}: {:.2} µs): no idle-exit cost can be derived from them",
                on.config, on.wake_p50, off.config, off.wake_p50
            ),
        });
        return None;
    }
    // The knob is read by the haltpoll cpuidle governor only: under another (or without a
    // driver) it reaches no idle loop, and the two configurations should not differ.
    let inert = env.halt_poll_knob_inert().map_or_else(String::new, |why| {
        format!("; {why}, and the two should not differ")
    });
    components.push(Component {
        name: "idle_exit".into(),
        us: idle,
        source: format!(
            "2 × (wake blocking one-way p50 with haltpoll.guest_halt_poll_ns = 0 ({}) {:.2} µs − with {} ({}) {:.2} µs), medians of {tries} tries{inert}",
            off.config,
            off.wake_p50,
            window_text(on.window),
            on.config,
            on.wake_p50
        ),
        part_of: Some("wake_up".into()),
        spread_us: c
            .probe_span(WAKE_BLOCK, &off.config)
            .zip(c.probe_span(WAKE_BLOCK, &on.config))
            .and_then(|(off, on)| model::diff_spread(off, on, 2.0)),
    });
    situ::wake_up_other(wake_up, idle, components, missing);
    Some(tries)
}

/// VM exits per transaction in a guest without posted interrupts (each IPI sent, each idle
/// entry, each timer interrupt traps to the hypervisor), priced with the exit round trip
/// `kvm exits` measured. A cross-check: the time is inside the path and wake-up already.
/// The cross-checks set beside the model, none of them added: exits priced two ways, a
/// halted vCPU's wake-up one level down, and what keeping the CPUs awake leaves.
fn checks_beside(
    c: &Cells,
    (env, base): (&Env, &Rr),
    seen: &situ::Seen,
    components: &[Component],
    checks: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    let likely = seen.exits_by_cause.get("likely_exits").copied();
    let price = exit_pressure(c, base, likely, checks, missing);
    kvm_halt(c, checks, missing);
    situ::awake_ipis(c, seen.in_situ.as_ref(), components, checks, missing);
    // Without a hypervisor an ICR write is no exit: nothing of the VM's to price.
    if env.hypervisor.is_some() {
        situ::icr_exits(&seen.exits_by_cause, seen.in_situ.as_ref(), price, checks);
    }
}

/// Returns the price per exit it used, µs.
fn exit_pressure(
    c: &Cells,
    base: &Rr,
    likely: Option<f64>,
    checks: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) -> Option<f64> {
    let counted = ExitCounts::of(&base.events);
    // The traced trial's exit causes first: its tracepoints count every cause, the
    // TSC-deadline writes among them (the tick reprogrammed around each idle entry: 2.18 a
    // transaction on this project's Intel guest), which /proc's events cannot see; a
    // price on /proc's IPIs, idle entries and timer interrupts alone left them out (3.87
    // there against 5.96 likely exits in the table beside it). /proc's, where untraced.
    let (exits, counts) = match (likely, &counted) {
        (Some(l), _) => (
            l,
            format!("{l:.2} likely exits per transaction (TSC-deadline, ICR, EOI and APIC-timer writes and idle entries that halt, counted in the traced rr)"),
        ),
        (None, Some(ev)) => (
            ev.ipis + ev.idle + ev.timer,
            format!(
                "{:.2} IPIs + {:.2} idle entries that halt (cpuidle's POLL entries left out) + {:.2} timer interrupts per transaction on the two CPUs (not traced: TSC-deadline writes not counted)",
                ev.ipis, ev.idle, ev.timer
            ),
        ),
        (None, None) => {
            missing.push(Missing {
            name: "exit_pressure".into(),
            reason: format!(
                "events per transaction not counted here: {} absent from the pinned CPUs' counters (/proc/interrupts, cpuidle)",
                ExitCounts::absent(&base.events).join(", ")
            ),
            });
            return None;
        }
    };
    let cost = c.ok(KVM_EXITS, AS_IS).iter().find_map(|t| {
        let cases = t.detail.as_ref()?.get("cases")?.as_array()?;
        // The cheapest exit handled inside KVM (cpuid), else the user-space one (pio).
        ["cpuid", "pio"].iter().find_map(|want| {
            cases
                .iter()
                .find(|x| x["name"] == *want && x["iterations"].as_u64().is_some_and(|n| n > 0))
                .and_then(|x| x["ns"]["p50"].as_f64())
                .map(|ns| (want.to_string(), ns / 1000.0))
        })
    });
    match cost {
        Some((kind, us)) => {
            checks.push(Component {
                name: "exit_pressure".into(),
                us: exits * us,
                source: format!(
                    "{counts} × {us:.2} µs per exit (`kvm exits` {kind} p50, a VM this machine runs); inside path and wake-up, not added"
                ),
                part_of: None,
                spread_us: None,
            });
            Some(us)
        }
        None => {
            missing.push(Missing {
                name: "exit_pressure".into(),
                reason: format!(
                    "{counts}; no exit cost to price them: {}",
                    c.why_not(KVM_EXITS, AS_IS)
                ),
            });
            None
        }
    }
}

/// The events per transaction that are VM exits in a guest without posted interrupts, when
/// every one of them was counted.
struct ExitCounts {
    ipis: f64,
    idle: f64,
    timer: f64,
}

impl ExitCounts {
    const KEYS: [&'static str; 4] = [
        virtperf_wire::counter::IPI_RESCHED,
        virtperf_wire::counter::IPI_CALL,
        virtperf_wire::counter::IDLE_ENTRIES,
        virtperf_wire::counter::TIMER_IRQS,
    ];

    fn of(ev: &BTreeMap<String, f64>) -> Option<ExitCounts> {
        let get = |k: &str| ev.get(k).copied();
        Some(ExitCounts {
            ipis: get(virtperf_wire::counter::IPI_RESCHED)?
                + get(virtperf_wire::counter::IPI_CALL)?,
            // A polling entry exits nothing (cpuidle's `poll` state; a driver without it
            // has no polls).
            idle: get(virtperf_wire::counter::IDLE_ENTRIES)?
                - get(virtperf_wire::counter::IDLE_ENTRIES_POLL).unwrap_or(0.0),
            timer: get(virtperf_wire::counter::TIMER_IRQS)?,
        })
    }

    fn absent(ev: &BTreeMap<String, f64>) -> Vec<&'static str> {
        Self::KEYS
            .into_iter()
            .filter(|k| !ev.contains_key(*k))
            .collect()
    }
}

/// `kvm halt`: a halted vCPU of a VM this machine runs, woken by an interrupt, without and
/// with per-VM halt polling: the idle-exit cost one level down, as a cross-check.
fn kvm_halt(c: &Cells, checks: &mut Vec<Component>, missing: &mut Vec<Missing>) {
    match (
        c.probe(KVM_HALT_NO_POLL, AS_IS),
        c.probe(KVM_HALT_POLL, AS_IS),
    ) {
        // Polling that slows the wake-up prices no halt exit.
        (Some((off, _)), Some((on, _))) if off < on => missing.push(Missing {
            name: "kvm_halt_exit".into(),
            reason: format!(
                "`kvm halt` wake-up with per-VM halt polling ({on:.2} µs) is slower than without ({off:.2} µs): no halt-exit cost can be derived"
            ),
        }),
        (Some((off, n)), Some((on, _))) => {
            checks.push(Component {
                name: "kvm_halt_exit".into(),
                us: off - on,
                source: format!(
                    "`kvm halt` wake-up p50 of a halted vCPU {off:.2} µs − with per-VM halt polling {on:.2} µs, medians of {n} tries; one wake-up, compare with idle_exit / 2"
                ),
                part_of: None,
                spread_us: None,
            })
        }
        _ => missing.push(Missing {
            name: "kvm_halt_exit".into(),
            reason: c.why_not(KVM_HALT_NO_POLL, AS_IS),
        }),
    }
}

/// Confidence of a remedy's p50 ratio and added-CPU intervals (the level of every
/// decision's interval).
pub(super) const CONFIDENCE: f64 = 0.95;

/// The interval of `candidate`'s mean − `baseline`'s over their tries (Welch, at
/// [`CONFIDENCE`]): what a remedy adds, and which of two remedies is dearer.
pub(super) fn tries_difference(baseline: &[f64], candidate: &[f64]) -> crate::decide::Interval {
    crate::decide::difference_interval(
        &crate::stats::summarize(baseline, CONFIDENCE),
        &crate::stats::summarize(candidate, CONFIDENCE),
        CONFIDENCE,
    )
}

/// The busy CPUs `r` adds to `base` over their tries, or why there is no interval.
fn added_interval(base: &Rr, r: &Rr) -> crate::decide::Interval {
    match (&base.busy_tries, &r.busy_tries) {
        (Some(b), Some(x)) => tries_difference(b, x),
        _ => crate::decide::Interval::None {
            why: "some try's CPU time was not read".into(),
        },
    }
}

/// Every remedy the battery measured, against the as-is blocking rr; a boot-time remedy
/// that was tried and gave nothing goes to `missing` with why.
fn remedies(c: &Cells, base: &Rr, same: Option<&Rr>, missing: &mut Vec<Missing>) -> Vec<Remedy> {
    let mut out = Vec::new();
    let mut push = |what: String, r: &Rr| {
        out.push(Remedy {
            what,
            p50_change_pct: pct(r.p50, base.p50),
            p50_ratio_interval: crate::decide::ratio_interval(
                &crate::stats::summarize(&base.p50_tries, CONFIDENCE),
                &crate::stats::summarize(&r.p50_tries, CONFIDENCE),
                CONFIDENCE,
            ),
            p99_change_pct: pct(r.p99, base.p99),
            cpu_us_per_transaction_change: r.cpu_per_tr.zip(base.cpu_per_tr).map(|(a, b)| a - b),
            p50_us: r.p50,
            cpu_us_per_transaction: r.cpu_per_tr,
            cpus_busy: r.busy(),
            cpus_busy_before: base.busy(),
            cpus_busy_tries: r.busy_tries.clone(),
            added_cpus_interval: added_interval(base, r),
        })
    };
    if let Some(r) = c.rr(RR_CROSS_BLOCK, BUSY_POLL) {
        push(
            "busy polling (net.core.busy_poll = busy_read = 50 µs: the receiver polls its socket before it sleeps)".into(),
            &r,
        );
    }
    let configs = c.configs();
    for (what, r) in governor_switches(c, &configs, missing) {
        push(what, &r);
    }
    for cfg in c.configs().iter().filter(|k| {
        *k != AS_IS
            && *k != BUSY_POLL
            && *k != GOVERNOR_POLL
            && *k != MENU_GOVERNOR
            && !k.starts_with("boot-")
    }) {
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
    for (cfg, arg, what) in BOOT_REMEDIES {
        if !configs.iter().any(|k| k == cfg) {
            continue;
        }
        match c.rr(RR_CROSS_BLOCK, cfg) {
            Some(r) => push(
                format!("{arg} on the guest's kernel command line ({what}; measured in a second guest booted with it)"),
                &r,
            ),
            None => missing.push(Missing {
                name: (*cfg).into(),
                reason: c.why_not(RR_CROSS_BLOCK, cfg),
            }),
        }
    }
    if let Some(r) = c.rr(RR_CROSS_SPIN, AS_IS) {
        push(
            "spinning receivers on both sides (rr --wait spin): two cores busy".into(),
            &r,
        );
    }
    if let Some(r) = c.rr(RR_CROSS_AWAKE, AS_IS) {
        push(
            "both CPUs kept out of idle (a SCHED_IDLE spinner on each: idle=poll for two CPUs, at run time)".into(),
            &r,
        );
    }
    if let Some(r) = same {
        let what = match r.result.client_cpu {
            Some(cpu) => {
                format!("both ends on one CPU (rr --cpus {cpu},{cpu}): no cross-CPU wake-up")
            }
            None => "both ends on one CPU: no cross-CPU wake-up".to_string(),
        };
        push(what, r);
    }
    out
}

/// The cpuidle governor switches the battery measured (what each is, its round trip), each
/// tried where it applies: the haltpoll governor with a window where only the governor
/// kept the window from acting (else named among the remedies not measured), menu where
/// haltpoll runs. One tried that gave nothing goes to `missing` with why.
fn governor_switches(
    c: &Cells,
    configs: &[String],
    missing: &mut Vec<Missing>,
) -> Vec<(String, Rr)> {
    let switches = [
        (
            GOVERNOR_POLL,
            format!(
                "the haltpoll cpuidle governor with guest halt polling {} (current_governor = haltpoll, haltpoll.guest_halt_poll_ns = {GOVERNOR_POLL_NS}: the window acts under this governor alone)",
                window_text(GOVERNOR_POLL_NS)
            ),
        ),
        (
            MENU_GOVERNOR,
            "the menu cpuidle governor (current_governor = menu: CPUs halt as before, but the tick is kept through short idle periods instead of stopped and restarted on each; no halt-poll window acts under it)".to_string(),
        ),
    ];
    let mut out = Vec::new();
    for (cfg, what) in switches {
        if !configs.iter().any(|k| k == cfg) {
            continue;
        }
        match c.rr(RR_CROSS_BLOCK, cfg) {
            Some(r) => out.push((what, r)),
            None => missing.push(Missing {
                name: cfg.into(),
                reason: c.why_not(RR_CROSS_BLOCK, cfg),
            }),
        }
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
    // The governor, not the driver, reads the halt-poll knob (and can be switched).
    if let Some(g) = &env.cpuidle_governor {
        put("cpuidle_governor", g.clone());
    }
    put(
        "idle_states",
        env.idle_states
            .iter()
            .map(|s| {
                format!(
                    "{} ({}{})",
                    s.name,
                    s.latency_us
                        .map_or("exit latency unknown".to_string(), |l| format!("{l} µs")),
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

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_knob;
#[cfg(test)]
mod tests_terms;
#[cfg(test)]
mod tests_verdict;
