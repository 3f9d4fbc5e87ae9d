use super::*;
use virtperf_store::TrialStatus;

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

// Made-up trials, so each case of the model is pinned down without a machine that has it.

use virtperf_store::NewTrial;
use virtperf_wire::{Events, Outcome, PinnedEvents, RrOutcome, SideEvents};

/// An rr result whose latency histogram holds `p50_us` only, pinned to `cpus`, with these
/// events per transaction on the client's pinned CPU (the server's counted the same
/// events, none of which happened there).
pub(super) fn rr(
    p50_us: f64,
    size: (u32, u32),
    cpus: (u32, u32),
    events: &[(&str, f64)],
) -> TestResult {
    let mut h = virtperf_measure::latency::new_histogram();
    for _ in 0..100 {
        h.record((p50_us * 1000.0) as u64).expect("in range");
    }
    let per_unit: BTreeMap<String, f64> = events.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    TestResult {
        schema: virtperf_wire::RESULT_SCHEMA.into(),
        workload: Workload::rr(size.0, size.1),
        duration_s: 1.0,
        client_cpu: Some(cpus.0),
        server_cpu: Some(cpus.1),
        target: "127.0.0.1:1".into(),
        sock: Default::default(),
        sock_applied: None,
        capture: None,
        kvm: None,
        placement: None,
        guest: None,
        outcome: Outcome::Rr(RrOutcome {
            transactions: 1000,
            server_transactions: 1000,
            elapsed_s: 1.0,
            rate_per_s: 1e6 / p50_us,
            histogram: virtperf_measure::latency::encode(&h),
            ..Default::default()
        }),
        cpu: Default::default(),
        env: Default::default(),
        warnings: vec![],
        events: Some(Events {
            unit: virtperf_wire::Unit::Transactions.events_name().into(),
            client: SideEvents {
                pinned: Some(PinnedEvents {
                    cpu: cpus.0,
                    deltas: BTreeMap::new(),
                    per_unit: per_unit.clone(),
                }),
                per_unit: per_unit.clone(),
                ..Default::default()
            },
            server: Some(SideEvents {
                pinned: Some(PinnedEvents {
                    cpu: cpus.1,
                    deltas: BTreeMap::new(),
                    per_unit: per_unit.keys().map(|k| (k.clone(), 0.0)).collect(),
                }),
                per_unit: per_unit.keys().map(|k| (k.clone(), 0.0)).collect(),
                ..Default::default()
            }),
        }),
        allow_concurrent: false,
        stop_s: None,
        trace: None,
        timeline: None,
        host_trace: None,
        intervals: vec![],
        load: None,
        host_vm: None,
        omit_s: None,
        host_cpu: None,
        link_rate_bps: None,
    }
}

fn trial(config: &str, label: &str, poll: Option<u64>) -> NewTrial {
    NewTrial {
        seq: 0,
        config: config.into(),
        workload: "x".into(),
        point: serde_json::json!({ POLL_PARAM: poll }),
        point_label: label.into(),
        repetition: 1,
        status: TrialStatus::Ok,
        error: None,
        result: None,
        detail: None,
        metric: None,
        metric_name: String::new(),
        started_at: String::new(),
        duration_s: 1.0,
    }
}

fn row(t: NewTrial) -> TrialRow {
    TrialRow {
        id: 0,
        run_id: 1,
        trial: t,
    }
}

pub(super) fn rr_trial(config: &str, label: &str, poll: Option<u64>, r: TestResult) -> TrialRow {
    row(NewTrial {
        result: Some(r),
        ..trial(config, label, poll)
    })
}

pub(super) fn probe(config: &str, label: &str, poll: Option<u64>, v: f64) -> TrialRow {
    row(NewTrial {
        metric: Some(v),
        ..trial(config, label, poll)
    })
}

pub(super) fn skipped(config: &str, label: &str, reason: &str) -> TrialRow {
    row(NewTrial {
        status: TrialStatus::Skipped,
        error: Some(reason.into()),
        ..trial(config, label, None)
    })
}

pub(super) const EVENTS: &[(&str, f64)] = &[
    ("ipi_resched", 0.1),
    ("ipi_call", 1.9),
    ("idle_entries", 1.0),
    ("timer_irqs", 2.0),
];

/// The as-is battery: measured rr 60 µs, path 20 µs, wake blocking 25 / spinning 5 µs
/// one-way, under halt-poll window `poll` (None: no knob).
pub(super) fn as_is(poll: Option<u64>) -> Vec<TrialRow> {
    vec![
        rr_trial(
            AS_IS,
            RR_CROSS_BLOCK,
            poll,
            rr(60.0, (1, 1), (0, 1), EVENTS),
        ),
        rr_trial(AS_IS, RR_CROSS_SPIN, poll, rr(20.0, (1, 1), (0, 1), EVENTS)),
        rr_trial(AS_IS, RR_SAME_BLOCK, poll, rr(15.0, (1, 1), (0, 0), EVENTS)),
        probe(AS_IS, WAKE_BLOCK, poll, 25.0),
        probe(AS_IS, WAKE_SPIN, poll, 5.0),
    ]
}

pub(super) fn haltpoll_env() -> Env {
    Env {
        cpuidle_driver: Some("haltpoll".into()),
        ..Env::default()
    }
}

pub(super) fn component<'a>(e: &'a Explanation, name: &str) -> Option<&'a Component> {
    e.components.iter().find(|c| c.name == name)
}

#[test]
fn prediction_residual_and_labels() {
    let mut t = as_is(Some(0));
    t[0] = rr_trial(
        AS_IS,
        RR_CROSS_BLOCK,
        Some(0),
        rr(60.0, (4096, 1), (2, 3), EVENTS),
    );
    t[2] = rr_trial(
        AS_IS,
        RR_SAME_BLOCK,
        Some(0),
        rr(15.0, (4096, 1), (2, 2), EVENTS),
    );
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    // path 20 + wake-up 2 × (25 − 5) = 60: residual 0 here because the numbers were made so.
    let p = e.predicted_us.expect("both terms measured");
    assert!((p - 60.0).abs() < 0.5, "{p}");
    assert!(e.residual_pct.expect("a prediction").abs() < 1.0);
    let txt = text(&e);
    assert!(txt.contains("4096-byte request / 1-byte response"), "{txt}");
    assert!(txt.contains("(2 → 3)"), "{txt}");
    assert!(txt.contains("rr --cpus 2,2"), "{txt}");
    assert!(!txt.contains("1-byte request/response"), "{txt}");
}

#[test]
fn no_prediction_without_every_term() {
    let t: Vec<TrialRow> = as_is(Some(0))
        .into_iter()
        .filter(|r| r.point_label != RR_CROSS_SPIN)
        .collect();
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    assert_eq!(e.predicted_us, None);
    assert_eq!(e.residual_us, None);
    assert_eq!(e.residual_pct, None);
    assert!(e.missing.iter().any(|m| m.name == "path"));
    let txt = text(&e);
    assert!(!txt.contains("NaN") && !txt.contains("-0.0"), "{txt}");
    assert!(txt.contains("not predicted"), "{txt}");
    let json = serde_json::to_value(&e).expect("serializes");
    assert!(json["residual_pct"].is_null() && json["predicted_us"].is_null());
}

#[test]
fn uncounted_events_are_missing_not_zero() {
    let mut t = as_is(Some(0));
    // A kernel without RES/CAL lines: only idle entries and timer interrupts counted.
    let few = &[("idle_entries", 1.0), ("timer_irqs", 2.0)];
    t[0] = rr_trial(
        AS_IS,
        RR_CROSS_BLOCK,
        Some(0),
        rr(60.0, (1, 1), (0, 1), few),
    );
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let m = e
        .missing
        .iter()
        .find(|m| m.name == "exit_pressure")
        .expect("exit pressure cannot be priced without the IPIs");
    assert!(m.reason.contains("ipi_resched"), "{m:?}");
    let txt = text(&e);
    assert!(txt.contains("— (not counted) IPIs"), "{txt}");
    assert!(!txt.contains("0.00 IPIs"), "{txt}");
}

/// A probe (a wake-up or KVM measurement) has no CPU split: its row's CPU is absent and
/// the tables print "-" (the markdown table printed "CPU busy 0.0").
#[test]
fn probe_rows_have_no_cpu_split() {
    let points = crate::summary::summarize_run(&[probe(AS_IS, "wake", None, 12.5)], 0.95);
    let c = &points[0].configs[0];
    assert_eq!(c.metrics[0].values, [12.5]);
    assert_eq!(c.cpu, None);
    assert_eq!(c.server_cpu, None);
}

/// A sum over the two pinned CPUs is kept only where every CPU and every try counted
/// the key: one CPU's count printed as "both CPUs", or two tries' counts divided by three,
/// are not sums (they used to be).
#[test]
fn pinned_sums_need_every_cpu_and_every_try() {
    let both = rr(
        60.0,
        (1, 1),
        (0, 1),
        &[("ipi_call", 2.0), ("timer_irqs", 1.0)],
    );
    let mut one_cpu = both.clone();
    let server = one_cpu.events.as_mut().and_then(|e| e.server.as_mut());
    let pinned = server.and_then(|s| s.pinned.as_mut()).expect("pinned");
    pinned.per_unit.remove("timer_irqs");
    let sums = pinned_events(&[&both, &both]);
    assert_eq!(sums.get("ipi_call"), Some(&2.0));
    assert_eq!(sums.get("timer_irqs"), Some(&1.0));
    let sums = pinned_events(&[&one_cpu]);
    assert_eq!(sums.get("ipi_call"), Some(&2.0), "{sums:?}");
    assert_eq!(
        sums.get("timer_irqs"),
        None,
        "one CPU is not both: {sums:?}"
    );
    let sums = pinned_events(&[&both, &one_cpu, &both]);
    assert_eq!(sums.get("timer_irqs"), None, "not in every try: {sums:?}");
    // A try without the server's events: no sum at all.
    let mut no_server = both.clone();
    no_server.events.as_mut().expect("events").server = None;
    assert!(pinned_events(&[&both, &no_server]).is_empty());
}

/// A traced cross-CPU rr: these per-transaction counts, and a timeline whose in-situ
/// client wake-up is `wake` µs (server side unseen) and idle exit `idle` µs per wake.
pub(super) fn traced(wake: f64, idle: f64) -> TrialRow {
    rr_trial(AS_IS, RR_CROSS_TRACED, None, traced_result(wake, idle))
}

/// [`traced`]'s result.
fn traced_result(wake: f64, idle: f64) -> TestResult {
    let mut r = rr(60.0, (1, 1), (0, 1), EVENTS);
    let per_unit: BTreeMap<String, f64> = [
        ("msr_write_tsc_deadline", 0.02),
        ("msr_write_icr", 2.0),
        ("msr_write_eoi", 0.0),
        ("msr_write_apic_timer", 0.0),
        // Half an entry per transaction polled: only the halts are exits.
        ("idle_entries", 1.5),
        ("idle_halts", 1.0),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), *v))
    .collect();
    r.trace = Some(virtperf_wire::TraceCounts {
        per_unit,
        unit: virtperf_wire::Unit::Transactions.events_name().into(),
        ..Default::default()
    });
    let p = |us: f64| virtperf_wire::Pct {
        p50_us: us,
        p90_us: us,
        n: 1000,
    };
    r.timeline = Some(virtperf_wire::Timeline {
        transactions: 1000,
        in_situ: virtperf_wire::InSitu {
            client_wakeup: Some(p(wake)),
            idle_exit: Some(p(idle)),
            idle_wakeups_per_transaction: Some(2.0),
            ..Default::default()
        },
        ..Default::default()
    });
    r
}

/// The as-is trials without a halt-poll knob (it does not exist), and the cross-CPU rr
/// with both CPUs kept awake at 52 µs: the idle exit is 60 − 52 = 8 µs.
fn awake_without_knob() -> Vec<TrialRow> {
    let mut t = as_is(None);
    t.push(skipped(
        "guest-poll",
        WAKE_BLOCK,
        "haltpoll.guest_halt_poll_ns does not exist here",
    ));
    t.push(rr_trial(
        AS_IS,
        RR_CROSS_AWAKE,
        None,
        rr(52.0, (1, 1), (0, 1), EVENTS),
    ));
    t
}

/// A median and 90th percentile both `us`, over `n` samples.
pub(super) fn p(us: f64, n: u64) -> virtperf_wire::Pct {
    virtperf_wire::Pct {
        p50_us: us,
        p90_us: us,
        n,
    }
}

/// A traced trial recorded before idle entries that halt were counted apart from polls
/// gives no exits by cause: its idle entries may be polls, which exit nothing.
#[test]
fn a_trace_without_halts_apart_gives_no_exits_by_cause() {
    let mut t = awake_without_knob();
    let mut old = traced_result(20.0, 6.0);
    if let Some(tr) = old.trace.as_mut() {
        tr.per_unit.remove("idle_halts");
    }
    t.push(rr_trial(AS_IS, RR_CROSS_TRACED, None, old));
    let e = explain(1, &Env::default(), &t).expect("explains");
    assert!(
        !e.exits_by_cause.contains_key("likely_exits"),
        "{:?}",
        e.exits_by_cause
    );
    let m = e
        .missing
        .iter()
        .find(|m| m.name == "exits_by_cause")
        .expect("named");
    assert!(m.reason.contains("idle_halts"), "{m:?}");
}

/// Without a halt-poll knob, keeping both CPUs awake gives the idle exit (never 0.0 for
/// lack of a knob), and what the traced trial saw is set beside it, disagreements named.
#[test]
fn idle_exit_from_cpus_kept_awake_and_in_situ_beside_it() {
    let mut t = awake_without_knob();
    // In situ: wake-up 2 × 20 µs = 40 µs (the model's 40: agrees); idle exit 2 × 6 µs = 12
    // µs against the model's 8 µs: +50%, flagged.
    t.push(traced(20.0, 6.0));
    let e = explain(1, &Env::default(), &t).expect("explains");
    let idle = component(&e, "idle_exit").expect("measured without the knob");
    assert!((idle.us - 8.0).abs() < 1e-9, "{idle:?}");
    assert!(idle.source.contains("SCHED_IDLE"), "{}", idle.source);
    assert!(
        !e.missing.iter().any(|m| m.name == "idle_exit"),
        "{:?}",
        e.missing
    );
    let other = component(&e, "wake_up_other").expect("the rest");
    assert!((other.us - 32.0).abs() < 1e-9);
    assert_eq!(e.exits_by_cause.get("likely_exits").copied(), Some(3.02));
    let i = e.in_situ.as_ref().expect("in situ");
    assert_eq!(i.wake_up_us, Some(40.0));
    assert_eq!(i.idle_exit_us, Some(12.0));
    assert_eq!(e.disagreements.len(), 1, "{:?}", e.disagreements);
    assert!(
        e.disagreements[0].starts_with("idle_exit"),
        "{:?}",
        e.disagreements
    );
    assert!(e
        .remedies
        .iter()
        .any(|r| r.what.contains("kept out of idle")));
    let txt = text(&e);
    assert!(txt.contains("DISAGREES: idle_exit"), "{txt}");
    assert!(txt.contains("likely exits per transaction"), "{txt}");
}

/// A gap to the model beyond [`DISAGREE`] is a disagreement only outside the span the
/// term's tries allow: inside it the tries' spread covers the gap, and it is undecided.
#[test]
fn a_gap_inside_the_tries_spread_is_undecided() {
    let with_awake_tries = |in_situ_idle: f64| {
        let mut t = awake_without_knob();
        // Two more awake tries around the first (52 µs): the term (60 − 52 = 8 µs) spans
        // 60 − 58 = 2 to 60 − 45 = 15 µs over them.
        for us in [45.0, 58.0] {
            t.push(rr_trial(
                AS_IS,
                RR_CROSS_AWAKE,
                None,
                rr(us, (1, 1), (0, 1), EVENTS),
            ));
        }
        t.push(traced(20.0, in_situ_idle));
        explain(1, &Env::default(), &t).expect("explains")
    };
    // 2 × 6 µs = 12 against 8: +50%, but inside 2–15 µs.
    let e = with_awake_tries(6.0);
    let idle = component(&e, "idle_exit").expect("idle exit");
    // (The histograms keep 3 significant digits: 2.016 to 15.008.)
    let [lo, hi] = idle.spread_us.expect("three tries: a spread");
    assert!(
        (lo - 2.0).abs() < 0.05 && (hi - 15.0).abs() < 0.05,
        "{idle:?}"
    );
    assert!(e.disagreements.is_empty(), "{:?}", e.disagreements);
    assert_eq!(e.undecided_in_situ.len(), 1, "{:?}", e.undecided_in_situ);
    assert!(
        e.undecided_in_situ[0].contains("inside the span of the model's tries (2.0 to 15.0 µs)"),
        "{:?}",
        e.undecided_in_situ
    );
    assert!(text(&e).contains("undecided: idle_exit"), "{}", text(&e));
    // 2 × 10 µs = 20: outside the span, a disagreement that names it.
    let e = with_awake_tries(10.0);
    assert!(e.undecided_in_situ.is_empty(), "{:?}", e.undecided_in_situ);
    assert_eq!(e.disagreements.len(), 1, "{:?}", e.disagreements);
    assert!(
        e.disagreements[0].contains("outside the span of its tries (2.0 to 15.0 µs)"),
        "{:?}",
        e.disagreements
    );
}

/// One CPU's idle loop fired no tracepoint: the traced side's idle exit stands for both
/// (said so), split into the ICR write, the delivery to the halted vCPU and the guest's
/// part, and a gap to the model beyond [`DISAGREE`] is named with what it means and
/// which figure the prediction uses; within it, nothing is flagged.
#[test]
fn a_silent_idle_loop_leaves_the_traced_side_to_stand_for_both() {
    let trial = |idle: f64| {
        let mut t = awake_without_knob();
        let mut row = traced(20.0, idle);
        if let Some(tl) = row.trial.result.as_mut().and_then(|r| r.timeline.as_mut()) {
            let i = &mut tl.in_situ;
            i.idle_exit = Some(p(idle, 990));
            i.idle_wakeups_per_transaction = None;
            i.idle_untraced_cpus = vec![1];
            i.ipi_to_icr = Some(p(0.5, 990));
            i.ipi_delivery = Some(p(idle - 1.5, 990));
            i.idle_exit_in_guest = Some(p(1.0, 990));
        }
        t.push(row);
        explain(1, &Env::default(), &t).expect("explains")
    };
    // The model's idle exit here is 8 µs (60 − 52): 2 × 3.5 µs in situ is −12.5%, agreeing.
    let e = trial(3.5);
    let i = e.in_situ.as_ref().expect("in situ");
    assert_eq!(i.idle_exit_us, Some(7.0));
    assert!(
        i.idle_exit_source
            .contains("CPU 1 fired no idle tracepoint"),
        "{}",
        i.idle_exit_source
    );
    assert!(
        i.idle_exit_source
            .contains("IPI entry on the halted vCPU 2.00"),
        "{}",
        i.idle_exit_source
    );
    assert!(e.disagreements.is_empty(), "{:?}", e.disagreements);
    let txt = text(&e);
    assert!(
        txt.contains("ICR write done → IPI entry on the halted vCPU"),
        "{txt}"
    );
    // 2 × 6 µs = 12 against 8: +50%, named with its meaning and the figure used.
    let e = trial(6.0);
    assert_eq!(e.disagreements.len(), 1, "{:?}", e.disagreements);
    let d = &e.disagreements[0];
    assert!(
        d.starts_with("idle_exit: in situ 12.0 µs vs model 8.0 µs (+50%)"),
        "{d}"
    );
    // Its idle exit came from the CPUs kept awake (no knob here), so the gap means what
    // keeping them awake leaves out, not a knob's flip (which this text said before).
    assert!(
        d.contains("keeping both CPUs awake removes less than the in-situ span")
            && !d.contains("knob")
            && d.ends_with("the prediction uses the model's figure"),
        "{d}"
    );
}

/// Where the woken CPU's tick restart after idle is seen in most wake-ups, it is part of
/// what halt polling saves: the in-situ idle exit runs to it.
#[test]
fn the_tick_restart_after_idle_is_part_of_the_idle_exit() {
    let mut t = awake_without_knob();
    let mut row = traced(20.0, 3.0);
    if let Some(tl) = row.trial.result.as_mut().and_then(|r| r.timeline.as_mut()) {
        tl.in_situ.tick_restart = Some(p(1.0, 900));
        tl.in_situ.idle_exit_with_tick = Some(p(4.0, 900));
        tl.in_situ.idle_exit = Some(p(3.0, 990));
    }
    t.push(row);
    let e = explain(1, &Env::default(), &t).expect("explains");
    let i = e.in_situ.as_ref().expect("in situ");
    assert_eq!(
        i.idle_exit_us,
        Some(8.0),
        "2 sides × (IPI → tick restarted) 4 µs"
    );
    assert!(
        i.idle_exit_source.contains("restarts its tick"),
        "{}",
        i.idle_exit_source
    );
}

/// No traced trial: exits by cause and in situ are missing with the reason, not empty
/// numbers.
#[test]
fn no_traced_trial_means_named_absences() {
    let mut t = as_is(None);
    t.push(skipped(AS_IS, RR_CROSS_TRACED, "not root"));
    let e = explain(1, &Env::default(), &t).expect("explains");
    assert!(e.exits_by_cause.is_empty() && e.in_situ.is_none());
    for n in ["exits_by_cause", "in_situ"] {
        let m = e.missing.iter().find(|m| m.name == n).expect("named");
        assert!(m.reason.contains("not root"), "{m:?}");
    }
}

/// The path splits into the TCP/IP stack (rr spinning − unix-rr spinning) and the rest,
/// parts of `path` that leave the prediction as it was; without the unix-rr trial the
/// split is named missing with the reason.
#[test]
fn the_path_splits_into_the_tcp_ip_stack_and_the_socket_path() {
    let mut t = as_is(Some(0));
    let before = explain(1, &haltpoll_env(), &t).expect("explains");
    assert!(before.missing.iter().any(|m| m.name == "tcp_ip_stack"));
    assert!(component(&before, "tcp_ip_stack").is_none());
    t.push(rr_trial(
        AS_IS,
        UNIX_RR_CROSS_SPIN,
        Some(0),
        rr(12.0, (1, 1), (0, 1), EVENTS),
    ));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let stack = component(&e, "tcp_ip_stack").expect("the stack's share");
    assert!((stack.us - 8.0).abs() < 0.1, "20 − 12: {}", stack.us);
    assert_eq!(stack.part_of.as_deref(), Some("path"));
    let rest = component(&e, "socket_path").expect("the rest of the path");
    assert!((rest.us - 12.0).abs() < 0.1, "{}", rest.us);
    assert_eq!(e.predicted_us, before.predicted_us, "parts add nothing");
    assert!(text(&e).contains("tcp_ip_stack"), "{}", text(&e));
}

/// A remedy whose tries agree closely (its p50 ratio's interval ±2% around the change).
pub(super) fn remedy(what: &str, p50: f64, busy: Option<(f64, f64)>) -> Remedy {
    let x = 1.0 + p50 / 100.0;
    Remedy {
        what: what.into(),
        p50_change_pct: p50,
        p50_ratio_interval: crate::decide::Interval::Bounded {
            low: x - 0.02,
            high: x + 0.02,
        },
        p99_change_pct: p50,
        cpu_us_per_transaction_change: None,
        p50_us: 1.0,
        cpu_us_per_transaction: None,
        cpus_busy: busy.map(|b| b.1),
        cpus_busy_before: busy.map(|b| b.0),
        cpus_busy_tries: busy.map(|b| vec![b.1 - 0.01, b.1, b.1 + 0.01]),
        added_cpus_interval: match busy {
            Some((before, with)) => crate::decide::Interval::Bounded {
                low: with - before - 0.05,
                high: with - before + 0.05,
            },
            None => crate::decide::Interval::None {
                why: "not measured".into(),
            },
        },
    }
}

/// The verdict names the remedy that buys at least 20% back for the fewest added busy
/// CPUs (not the fastest one), says so when none does, and states the residual.
#[test]
fn the_verdict_names_the_cheapest_remedy_that_matters() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    e.remedies = vec![
        remedy(
            "spinning receivers (rr --wait spin)",
            -85.0,
            Some((0.5, 2.0)),
        ),
        remedy(
            "guest halt polling 200 µs (haltpoll…)",
            -78.0,
            Some((0.5, 1.6)),
        ),
        remedy("busy polling (net.core…)", -5.0, Some((0.5, 0.5))),
    ];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("the cheapest measured remedy is guest halt polling 200 µs: p50 -78% for +1.10 busy CPUs"),
        "{v}"
    );
    assert!(
        v.starts_with("Verdict: a cross-CPU round trip here takes"),
        "{v}"
    );
    // No cost measured: the largest cut is named, not called the cheapest.
    e.remedies = vec![
        remedy("spinning receivers (rr --wait spin)", -85.0, None),
        remedy("guest halt polling 200 µs (haltpoll…)", -78.0, None),
    ];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("the largest measured cut is spinning receivers: p50 -85% (no remedy's CPU cost was measured")
            && !v.contains("cheapest measured remedy is"),
        "{v}"
    );
    e.remedies = vec![remedy("busy polling (net.core…)", -5.0, None)];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("no measured remedy cuts the p50 by 20% or more"),
        "{v}"
    );
}

/// A cut is real only where its tries' interval shows it: a −78% whose p50 ratio could
/// be anything from ×0.05 to ×0.95 is named undecided, never the cheapest; a −5% of one
/// try (no interval) is not said to cut nothing.
#[test]
fn a_cut_the_tries_cannot_tell_is_undecided_not_picked() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    let mut wide = remedy(
        "guest halt polling 200 µs (haltpoll…)",
        -78.0,
        Some((0.5, 0.6)),
    );
    wide.p50_ratio_interval = crate::decide::Interval::Bounded {
        low: 0.05,
        high: 0.95,
    };
    e.remedies = vec![
        wide,
        remedy("busy polling (net.core…)", -5.0, Some((0.5, 0.5))),
    ];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("the largest measured cut, guest halt polling 200 µs: p50 -78%, is undecided: its tries' p50 ratio ×[0.05, 0.95] does not rule out a cut under 20% (more --tries)")
            && !v.contains("cheapest"),
        "{v}"
    );
    let mut one = remedy("busy polling (net.core…)", -5.0, None);
    one.p50_ratio_interval = crate::decide::Interval::None {
        why: "1 try: no interval".into(),
    };
    e.remedies = vec![one];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains(
            "no measured remedy is shown to cut the p50 by 20% or more (more --tries could tell)"
        ),
        "{v}"
    );
}

/// Two real cuts whose costs' tries overlap are tied: neither is called the cheapest, both
/// are named with what they cost; where the tries do show one dearer, the other is picked.
#[test]
fn a_cheapest_the_tries_cannot_tell_is_a_tie() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    let mut spin = remedy(
        "spinning receivers (rr --wait spin)",
        -85.0,
        Some((0.5, 1.4)),
    );
    spin.cpus_busy_tries = Some(vec![0.6, 1.4, 2.2]);
    let poll = remedy(
        "guest halt polling 200 µs (haltpoll…)",
        -78.0,
        Some((0.5, 1.6)),
    );
    e.remedies = vec![spin.clone(), poll.clone()];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("2 measured remedies cut it by a real amount, and their tries cannot tell which costs less CPU (more --tries): spinning receivers: p50 -85% for +0.90 busy CPUs [+0.85, +0.95]; guest halt polling 200 µs: p50 -78% for +1.10 busy CPUs [+1.05, +1.15]")
            && !v.contains("cheapest"),
        "{v}"
    );
    spin.cpus_busy_tries = Some(vec![1.38, 1.4, 1.42]);
    e.remedies = vec![poll, spin];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains(
            "the cheapest measured remedy is spinning receivers: p50 -85% for +0.90 busy CPUs"
        ),
        "{v}"
    );
    // One try of a rival: no interval shows it dearer, so it ties with the lowest; the
    // halt polling the tries do show dearer stays out.
    let mut one = remedy("busy polling (net.core…)", -40.0, Some((0.5, 1.9)));
    one.cpus_busy_tries = Some(vec![1.9]);
    e.remedies.push(one);
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("2 measured remedies cut it")
            && v.contains("busy polling: p50 -40% for +1.40 busy CPUs")
            && !v.contains("guest halt polling"),
        "{v}"
    );
}

/// A cross-CPU rr that completed no transaction in its window is a stall its trial warned
/// of: the refusal says so, not "not measured".
#[test]
fn a_round_trip_that_completed_nothing_is_refused_with_its_warning() {
    let mut stalled = rr(60.0, (1, 1), (0, 1), EVENTS);
    stalled.outcome = Outcome::Rr(RrOutcome::default());
    stalled.warnings = vec![
        "no transaction completed in the measured window: latency and service demand not measured"
            .into(),
        "41.0% of CPU time was stolen by the hypervisor during the run: expect noise".into(),
    ];
    let mut t = as_is(Some(0));
    t[0] = rr_trial(AS_IS, RR_CROSS_BLOCK, Some(0), stalled);
    let err = explain(7, &haltpoll_env(), &t).expect_err("nothing to explain");
    assert_eq!(
        err,
        "run 7 has no cross-CPU blocking rr result: its tries gave no figure: no transaction completed in the measured window: latency and service demand not measured; 41.0% of CPU time was stolen by the hypervisor during the run: expect noise (a longer --duration may measure it)"
    );
}

/// An rr try at `rate` per second whose client machine kept `busy` CPUs busy.
fn rr_busy(p50_us: f64, rate: f64, busy: f64) -> TestResult {
    let mut r = rr(p50_us, (1, 1), (0, 1), &[("idle_time_us_poll", 0.0)]);
    if let Outcome::Rr(o) = &mut r.outcome {
        o.rate_per_s = rate;
    }
    r.cpu.client.system_service_demand_us = Some(busy * 1e6 / rate);
    r
}

/// A remedy's busy CPUs are the mean of its tries' own: two tries of spinning receivers,
/// each keeping both CPUs busy at rates 50 000 and 100 000 per second, busy 2.0 CPUs (the
/// mean CPU per transaction × the mean rate read 2.25 on a 2-CPU machine), and what it
/// adds is the centre of its interval.
#[test]
fn busy_cpus_are_the_mean_of_each_tries_own() {
    let mut t = vec![
        rr_trial(AS_IS, RR_CROSS_BLOCK, Some(0), rr_busy(60.0, 16_000.0, 0.4)),
        rr_trial(AS_IS, RR_CROSS_BLOCK, Some(0), rr_busy(62.0, 20_000.0, 0.6)),
        rr_trial(AS_IS, RR_CROSS_SPIN, Some(0), rr_busy(20.0, 50_000.0, 2.0)),
        rr_trial(AS_IS, RR_CROSS_SPIN, Some(0), rr_busy(10.0, 100_000.0, 2.0)),
    ];
    t.push(probe(AS_IS, WAKE_BLOCK, Some(0), 25.0));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let spin = e
        .remedies
        .iter()
        .find(|r| r.what.starts_with("spinning receivers"))
        .expect("the spinning remedy");
    let busy = spin.cpus_busy.expect("busy CPUs");
    assert!((busy - 2.0).abs() < 1e-9, "{spin:?}");
    let before = spin.cpus_busy_before.expect("before");
    assert!((before - 0.5).abs() < 1e-9, "{spin:?}");
    match spin.added_cpus_interval {
        crate::decide::Interval::Bounded { low, high } => {
            assert!(((low + high) / 2.0 - 1.5).abs() < 1e-9, "{spin:?}")
        }
        ref i => panic!("no interval: {i:?}"),
    }
}
