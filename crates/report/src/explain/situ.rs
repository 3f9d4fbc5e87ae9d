//! What `explain` saw in the round trip itself (issue 28), beside what it models: VM-exit
//! causes counted per transaction (`--trace`), in-situ wake-up and idle-exit latencies
//! from a sampled trial (`--timeline`), and the idle exit measured by keeping both CPUs
//! out of idle, which needs no halt-polling knob.

use std::collections::BTreeMap;

use virtperf_wire::{Env, Timeline, EXIT_CAUSES};

use super::model::{
    diff_spread, span, Cells, Component, InSitu, Missing, Rr, AS_IS, RR_CROSS_AWAKE,
    RR_CROSS_BLOCK, RR_CROSS_TRACED,
};

/// Past this relative difference an in-situ figure and its model term disagree.
pub const DISAGREE: f64 = 0.25;

/// The parts of the explanation this module adds.
pub(super) struct Seen {
    pub exits_by_cause: BTreeMap<String, f64>,
    pub in_situ: Option<InSitu>,
    pub disagreements: Vec<String>,
    pub undecided: Vec<String>,
}

/// Exits by cause (mean over the traced tries) and the in-situ figures of the first traced
/// try, each missing with why when the traced trial did not give it.
pub(super) fn seen(c: &Cells, missing: &mut Vec<Missing>) -> Seen {
    let traced: Vec<_> = c
        .ok(RR_CROSS_TRACED, AS_IS)
        .into_iter()
        .filter_map(|t| t.result.as_ref())
        .collect();
    let mut exits_by_cause = BTreeMap::new();
    let counts: Vec<_> = traced.iter().filter_map(|r| r.trace.as_ref()).collect();
    for (k, _, _) in EXIT_CAUSES {
        let v: Option<f64> = counts.iter().map(|t| t.per_unit.get(*k).copied()).sum();
        if let Some(v) = v.filter(|_| !counts.is_empty()) {
            exits_by_cause.insert((*k).to_string(), v / counts.len() as f64);
        }
    }
    // The tries' own sums (`TraceCounts::likely_exits`), averaged like the causes.
    let likely: Option<f64> = counts.iter().map(|t| t.likely_exits()).sum();
    if let Some(l) = likely.filter(|_| !counts.is_empty()) {
        exits_by_cause.insert("likely_exits".into(), l / counts.len() as f64);
    } else {
        let old = counts
            .iter()
            .any(|t| !t.per_unit.contains_key(virtperf_wire::counter::IDLE_HALTS));
        let why = counts
            .iter()
            .find_map(|t| t.missing.first().cloned())
            .or_else(|| old.then(|| "the traced trial did not count the idle entries that halt apart from polls (idle_halts: a run recorded before they were counted)".to_string()))
            .unwrap_or_else(|| c.why_not(RR_CROSS_TRACED, AS_IS));
        missing.push(Missing {
            name: "exits_by_cause".into(),
            reason: why,
        });
    }
    let timeline = traced.iter().find_map(|r| r.timeline.clone());
    let in_situ = match timeline {
        Some(t) => Some(in_situ(t)),
        None => {
            let why = traced
                .iter()
                .flat_map(|r| &r.warnings)
                .find(|w| w.starts_with("--timeline"))
                .cloned()
                .unwrap_or_else(|| c.why_not(RR_CROSS_TRACED, AS_IS));
            missing.push(Missing {
                name: "in_situ".into(),
                reason: why,
            });
            None
        }
    };
    Seen {
        exits_by_cause,
        in_situ,
        disagreements: Vec::new(),
        undecided: Vec::new(),
    }
}

/// A side's in-situ figure counts when it was seen in at least half the transactions.
fn well_seen(p: Option<virtperf_wire::Pct>, transactions: u64) -> Option<f64> {
    p.filter(|p| p.n * 2 >= transactions).map(|p| p.p50_us)
}

fn in_situ(t: Timeline) -> InSitu {
    let i = &t.in_situ;
    let n = t.transactions;
    let (wake_up_us, wake_up_source) = match (
        well_seen(i.client_wakeup, n),
        well_seen(i.server_wakeup, n),
    ) {
        (Some(c), Some(s)) => (
            Some(c + s),
            format!("client wake-up p50 {c:.2} µs + server wake-up p50 {s:.2} µs (woken → switched in)"),
        ),
        (Some(x), None) | (None, Some(x)) => (
            Some(2.0 * x),
            format!(
                "2 × the {} side's wake-up p50 {x:.2} µs (the other side's switch-in was seen in under half the transactions)",
                if i.client_wakeup.is_some_and(|p| p.p50_us == x) { "client" } else { "server" }
            ),
        ),
        (None, None) => (None, "neither side's wake-up was seen in half the transactions".into()),
    };
    // What halt polling saves a wake-up: the IPI's way to the halted CPU and its way out
    // of idle, and where a deep idle state stopped the tick, its restart (polling keeps
    // the tick): counted where the restart was seen in at least half the wake-ups.
    let (span, with_tick) = match (i.idle_exit_with_tick, i.idle_exit) {
        (Some(w), Some(p)) if w.n * 2 >= p.n => (Some(w), true),
        (_, p) => (p, false),
    };
    let what = if with_tick {
        "IPI sent → idle CPU leaves idle and restarts its tick"
    } else {
        "IPI sent → idle CPU leaves idle"
    };
    let (idle_exit_us, idle_exit_source) = match (span, i.idle_wakeups_per_transaction) {
        (Some(p), Some(k)) => (
            Some(p.p50_us * k),
            format!(
                "{what}, p50 {:.2} µs{} × {k:.2} sides woken from idle per round trip",
                p.p50_us,
                parts(i, with_tick)
            ),
        ),
        // One CPU's idle loop is silent: an rr round trip blocks both sides alike, so the
        // traced side's wake-ups from idle stand for both (said so), as with the wake-up.
        (Some(p), None) if p.n * 2 >= n => (
            Some(2.0 * p.p50_us),
            format!(
                "2 × the traced side's {what} p50 {:.2} µs{} (CPU {} fired no idle tracepoint: taken to wake from idle as the traced side does, once per round trip)",
                p.p50_us,
                parts(i, with_tick),
                i.idle_untraced_cpus
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(" and CPU ")
            ),
        ),
        (_, None) => (
            None,
            format!(
                "how many sides are woken from idle is unknown: no idle tracepoint fired on CPU {} in the sampled trial (never idle, or an idle loop without tracepoints)",
                i.idle_untraced_cpus
                    .iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(" and CPU ")
            ),
        ),
        (None, Some(_)) => (None, "no wake-up from idle was seen (CPUs never idle, or their idle loop is not traced)".into()),
    };
    InSitu {
        wake_up_us,
        wake_up_source,
        idle_exit_us,
        idle_exit_source,
        timeline: t,
    }
}

/// The in-situ idle exit's parts where the trial saw them: the sender's ICR write, the
/// IPI's delivery to the halted vCPU (the host's part) and the guest's way out of idle.
fn parts(i: &virtperf_wire::InSitu, with_tick: bool) -> String {
    let tick = match i.tick_restart {
        Some(t) if with_tick => format!(" + its tick restarted {:.2}", t.p50_us),
        _ => String::new(),
    };
    match (i.ipi_to_icr, i.ipi_delivery, i.idle_exit_in_guest) {
        (Some(a), Some(b), Some(c)) => format!(
            " (= the sender's ICR write, an exit, {:.2} + its end → IPI entry on the halted vCPU {:.2} + IPI entry → leaves idle, in the guest {:.2}{tick}, medians of each)",
            a.p50_us, b.p50_us, c.p50_us
        ),
        _ => String::new(),
    }
}

/// One line per model term the in-situ figure disagrees with by more than [`DISAGREE`].
/// The in-situ figures come from the sampled trial, which the tracepoints on its path
/// slow down: each line says by how much, since that alone can make them disagree.
/// The in-situ figures that disagree with their model terms — more than [`DISAGREE`] apart
/// and outside the span of the term's tries (or the term had one try) — and those more than
/// [`DISAGREE`] apart but inside that span (undecided: the tries' spread covers the gap).
pub(super) fn disagreements(s: &InSitu, components: &[Component]) -> (Vec<String>, Vec<String>) {
    let term = |n: &str| components.iter().find(|c| c.name == n);
    let model = |n: &str| term(n).map(|c| c.us);
    let slowed = match (s.timeline.rr_p50_us, s.timeline.headline_p50_us) {
        (Some(t), Some(h)) if h > 0.0 => format!(
            "; the sampled trial's p50 was {:+.0}% the test's, which inflates in-situ figures",
            (t - h) / h * 100.0
        ),
        _ => String::new(),
    };
    let (mut out, mut undecided) = (Vec::new(), Vec::new());
    // What a gap left after the in-situ figure's parts are counted means, per term.
    // The idle-exit term is the knob's flip where the knob acts, else the CPUs kept awake
    // (its source says which): each leaves a different part of the in-situ span out.
    let awake_term = term("idle_exit").is_some_and(|c| c.source.contains("kept out of idle"));
    let meaning = |name: &str, in_situ_above: bool| {
        match name {
        "idle_exit" if awake_term && in_situ_above => "keeping both CPUs awake removes less than the in-situ span (a woken thread still preempts its CPU's spinner through an IPI, an exit here, and the sender still writes the ICR)",
        "idle_exit" if awake_term => "keeping both CPUs awake removes more than the in-situ span (the spinners' own preemption and cache effects count in it)",
        "idle_exit" => "the halt-poll knob's flip changes more than the in-situ span (with polling no IPI is sent at all, and the woken thread is scheduled from a polling loop instead of a halted CPU's way out)",
        _ => "the model's separate wake-up trial does not wake the way this round trip does",
    }
    };
    for (name, seen) in [("wake_up", s.wake_up_us), ("idle_exit", s.idle_exit_us)] {
        if let (Some(m), Some(x)) = (model(name), seen) {
            // A model term of about 0 gives no relative gap (dividing by it would make any
            // difference huge): the two figures are said, no percentage.
            if m.abs() < 0.05 {
                if (x - m).abs() > 1.0 {
                    out.push(format!(
                        "{name}: in situ {x:.1} µs vs model {m:.2} µs: no relative gap (the model's term is about 0){slowed}; the prediction uses the model's figure"
                    ));
                }
                continue;
            }
            let rel = (x - m) / m.abs();
            if rel.abs() <= DISAGREE {
                continue;
            }
            let gap = format!(
                "{name}: in situ {x:.1} µs vs model {m:.1} µs ({:+.0}%)",
                rel * 100.0
            );
            match term(name).and_then(|t| t.spread_us) {
                Some([lo, hi]) if (lo..=hi).contains(&x) => undecided.push(format!(
                    "{gap}, inside the span of the model's tries ({lo:.1} to {hi:.1} µs): their spread covers the gap, so neither agreement nor disagreement is shown"
                )),
                spread => out.push(format!(
                    "{gap}{}: {}{slowed}; the prediction uses the model's figure",
                    spread.map_or(" (its tries show no spread to hold it against)".into(), |[lo, hi]| {
                        format!(", outside the span of its tries ({lo:.1} to {hi:.1} µs)")
                    }),
                    meaning(name, x > m)
                )),
            }
        }
    }
    (out, undecided)
}

/// The idle exit from keeping both CPUs out of idle: the as-is cross-CPU rr p50 minus the
/// same with a `SCHED_IDLE` spinner on each CPU. It becomes the `idle_exit` term where the
/// halt-poll knob gave none or reaches no idle loop (no haltpoll governor), the
/// knob's difference then kept as a cross-check; elsewhere it is the cross-check.
pub(super) fn awake_idle_exit(
    c: &Cells,
    env: &Env,
    base: &Rr,
    components: &mut Vec<Component>,
    checks: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) -> Option<usize> {
    let knob_reaches_idle = env.halt_poll_knob_inert().is_none();
    let awake = match c.rr(RR_CROSS_AWAKE, AS_IS) {
        None => Err(c.why_not(RR_CROSS_AWAKE, AS_IS)),
        // Kept awake and no faster: the spinners took the CPUs the round trip needs (vCPUs
        // sharing host CPUs, or emulation), and the difference is no cost of leaving idle.
        Some(a) if base.p50 - a.p50 <= 0.0 => Err(format!(
            "the round trip with both CPUs kept out of idle ({:.2} µs) is no faster than as-is ({:.2} µs): the spinners take the CPUs it needs, so no idle-exit cost can be derived",
            a.p50, base.p50
        )),
        Some(a) => Ok(a),
    };
    let awake = match awake {
        Ok(a) => a,
        Err(reason) => {
            // A knob that reaches no idle loop measured noise, not an idle exit: it stays
            // a cross-check even where nothing else gives the term.
            if !knob_reaches_idle {
                demote_knob_term(components, checks, missing);
            }
            if !components.iter().any(|x| x.name == "idle_exit") {
                missing.push(Missing {
                    name: "idle_exit (CPUs kept awake)".into(),
                    reason,
                });
            }
            return None;
        }
    };
    let term = Component {
        name: "idle_exit".into(),
        us: base.p50 - awake.p50,
        source: format!(
            "rr across CPUs p50 {:.2} µs − the same with both CPUs kept out of idle by SCHED_IDLE spinners {:.2} µs, {} tries",
            base.p50, awake.p50, awake.n
        ),
        part_of: Some("wake_up".into()),
        spread_us: span(&base.p50_tries)
            .zip(span(&awake.p50_tries))
            .and_then(|(b, a)| diff_spread(b, a, 1.0)),
    };
    if knob_reaches_idle && components.iter().any(|x| x.name == "idle_exit") {
        checks.push(Component {
            name: "idle_exit_awake".into(),
            ..term
        });
        return Some(awake.n);
    }
    demote_knob_term(components, checks, missing);
    let wake_up = components
        .iter()
        .find(|x| x.name == "wake_up")
        .map(|x| x.us);
    let idle = term.us;
    components.push(term);
    if let Some(w) = wake_up {
        wake_up_other(w, idle, components, missing);
    }
    Some(awake.n)
}

/// The knob's idle-exit term (if it gave one) moved to the cross-checks as
/// `idle_exit_knob`, and the remainder computed from it dropped; why it gave none stays on
/// record under the same name.
fn demote_knob_term(
    components: &mut Vec<Component>,
    checks: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    if let Some(i) = components.iter().position(|x| x.name == "idle_exit") {
        let mut k = components.remove(i);
        k.name = "idle_exit_knob".into();
        k.part_of = None;
        checks.push(k);
        // The remainder (or why there was none) was the knob term's.
        components.retain(|x| x.name != "wake_up_other");
        missing.retain(|m| m.name != "wake_up_other");
    }
    for m in missing.iter_mut().filter(|m| m.name == "idle_exit") {
        m.name = "idle_exit_knob".into();
    }
}

/// The wake-up's remainder beside its idle exit (sending the wake-up, scheduling the woken
/// thread). The two terms come from different trials: a remainder below 0 is their noise,
/// not a cost, and is missing with both figures.
pub(super) fn wake_up_other(
    wake_up: f64,
    idle: f64,
    components: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    if idle <= wake_up {
        components.push(Component {
            name: "wake_up_other".into(),
            us: wake_up - idle,
            source: "wake_up − idle_exit: sending the wake-up and scheduling the woken thread"
                .into(),
            part_of: Some("wake_up".into()),
            spread_us: None,
        });
    } else {
        missing.push(Missing {
            name: "wake_up_other".into(),
            reason: format!(
                "idle_exit ({idle:.1} µs) exceeds the whole wake-up ({wake_up:.1} µs), measured in other trials: no remainder to derive"
            ),
        });
    }
}

/// Remedies that need a reboot or the host, named with why they are not tried here; those
/// among `configs` (a guest booted with them) were measured and are not repeated.
pub(super) fn named_remedies(env: &Env, configs: &[String]) -> Vec<String> {
    let measured = |arg: &str| {
        super::model::BOOT_REMEDIES
            .iter()
            .any(|(cfg, a, _)| *a == arg && configs.iter().any(|k| k == cfg))
    };
    let mut v = vec![
        "idle=poll on the kernel command line (every CPU polls instead of halting): needs a reboot; `rr cross-CPU block CPUs awake` measures its effect on the two CPUs; `virtperf explain --placement guest` measures it in a guest booted with it".to_string(),
        "nohz=off (a periodic tick instead of reprogramming the TSC deadline on every idle entry): needs a reboot; `virtperf explain --placement guest` measures it in a guest booted with it".into(),
        "the host's kvm.halt_poll_ns (the host polls a halted vCPU before descheduling it): set on the host, not from a guest".into(),
        "posted interrupts / APICv / AVIC (IPIs and timer writes without exits): a host and hardware feature".into(),
    ];
    v.retain(|r| !measured(r.split_whitespace().next().unwrap_or_default()));
    let governor_measured = configs.iter().any(|k| k == super::model::GOVERNOR_POLL);
    if env.halt_poll_knob_inert().is_some()
        && env.halt_poll.keys().any(|k| k.contains("guest_halt_poll"))
        && !governor_measured
    {
        v.push(match env.cpuidle_driver.as_deref() {
            // A driver with a polling state is there: only the governor is another.
            Some(d) if d != "none" => format!(
                "the haltpoll cpuidle governor (`echo haltpoll > /sys/devices/system/cpu/cpuidle/current_governor`; the governor now is {}): the guest halt-poll knob is read by it alone; `virtperf tune` measures the switch with the window (haltpoll-gov-50us, haltpoll-gov-200us), a spec sets it with cpuidle_governor = \"haltpoll\", and explain run again after switching measures the idle exit it removes",
                env.cpuidle_governor.as_deref().unwrap_or("unknown")
            ),
            _ => "the cpuidle-haltpoll driver (cpuidle_haltpoll.force=1 or a kernel with it built in): the guest halt-poll knob reaches no idle loop without it; needs a reboot".into(),
        });
    }
    v
}

/// Why keeping both CPUs awake buys back less than halt polling, where both were measured:
/// a woken thread still preempts its CPU's spinner through an IPI (the sender's ICR write,
/// an exit in a guest without IPI virtualization), while a CPU polling in idle watches
/// its need-resched flag and is sent none. The kept-awake trial's IPIs per transaction
/// × the in-situ ICR write predict `idle_exit − idle_exit_awake`, two figures from other
/// trials; the residual is delivering to a running vCPU and preempting the spinner.
pub(super) fn awake_ipis(
    c: &Cells,
    in_situ: Option<&InSitu>,
    components: &[Component],
    checks: &mut Vec<Component>,
    missing: &mut Vec<Missing>,
) {
    let knob = components.iter().find(|x| x.name == "idle_exit");
    let awake = checks.iter().find(|x| x.name == "idle_exit_awake");
    let (Some(knob), Some(awake)) = (knob, awake) else {
        return;
    };
    let gap = knob.us - awake.us;
    let ipis = |r: &Rr| {
        let get = |k: &str| r.events.get(k).copied();
        Some(get(virtperf_wire::counter::IPI_RESCHED)? + get(virtperf_wire::counter::IPI_CALL)?)
    };
    let Some(sent) = c.rr(RR_CROSS_AWAKE, AS_IS).as_ref().and_then(ipis) else {
        missing.push(Missing {
            name: "awake_ipis".into(),
            reason: "IPIs per transaction were not counted on the pinned CPUs in the kept-awake trial (/proc/interrupts)".into(),
        });
        return;
    };
    let Some(icr) = in_situ.and_then(|s| s.timeline.in_situ.ipi_to_icr) else {
        missing.push(Missing {
            name: "awake_ipis".into(),
            reason: "the sampled trial timed no ICR write (no x2APIC MSR tracepoint, or no sampled trial)".into(),
        });
        return;
    };
    // What the polling configuration sent, where its round trip ran: the contrast itself.
    let polled = c
        .configs()
        .iter()
        .filter(|k| c.poll_of(k).is_some_and(|ns| ns > 0))
        .find_map(|k| c.rr(RR_CROSS_BLOCK, k).as_ref().and_then(ipis));
    let polled = polled.map_or_else(String::new, |p| {
        format!(" (with guest halt polling {p:.2})")
    });
    let us = sent * icr.p50_us;
    let source = format!(
        "with both CPUs kept awake {sent:.2} IPIs per transaction were still sent{polled}: a woken thread preempts the spinner through one, a CPU polling in idle needs none; × the sender's ICR write, an exit, in situ {:.2} µs; against idle_exit − idle_exit_awake {gap:.1} µs (residual {:+.1} µs: delivering to a running vCPU, preempting the spinner)",
        icr.p50_us,
        gap - us
    );
    let check = Component {
        name: "awake_ipis".into(),
        us,
        source,
        part_of: None,
        spread_us: None,
    };
    // Beside the check it accounts for.
    let at = checks
        .iter()
        .position(|x| x.name == "idle_exit_awake")
        .map_or(checks.len(), |i| i + 1);
    checks.insert(at, check);
}

/// The round trip's own ICR-write exits priced by their in-situ time (IPI sent → the write
/// done: the exit's round trip, where the guest's APIC writes exit): a floor under what its
/// exits cost, beside `exit_pressure`, whose price (`price`, µs) is an exit of a VM this
/// machine runs. Under nested PVM that probe times an emulated exit one level down (1.3 µs
/// on this project's Intel guest) while this VM's own ICR writes took 12–17 µs in situ;
/// where the two are that far apart, `exit_pressure` says so.
pub(super) fn icr_exits(
    exits_by_cause: &BTreeMap<String, f64>,
    in_situ: Option<&InSitu>,
    price: Option<f64>,
    checks: &mut Vec<Component>,
) {
    let (Some(&n), Some(icr)) = (
        exits_by_cause.get("msr_write_icr"),
        in_situ.and_then(|s| s.timeline.in_situ.ipi_to_icr),
    ) else {
        return;
    };
    if n <= 0.0 {
        return;
    }
    let low = price.filter(|&x| x > 0.0 && icr.p50_us > 3.0 * x);
    if let (Some(x), Some(p)) = (low, checks.iter_mut().find(|c| c.name == "exit_pressure")) {
        p.source.push_str(&format!(
            "; this VM's own ICR-write exits took {:.2} µs in situ, {:.0}× that price, so it prices them low (icr_exits)",
            icr.p50_us,
            icr.p50_us / x
        ));
    }
    checks.push(Component {
        name: "icr_exits".into(),
        us: n * icr.p50_us,
        source: format!(
            "{n:.2} ICR writes per transaction (counted in the traced rr) × their in-situ time, IPI sent → the write done, {:.2} µs: this VM's own exits for the IPIs alone, a floor under what its exits cost (TSC-deadline writes and idle entries are not timed in situ); inside the wake-up, not added",
            icr.p50_us
        ),
        part_of: None,
        spread_us: None,
    });
}
