//! The remedies' rows and the model's residual, made-up trials as in [`super::tests`]: the
//! send size a row names, what the paced tries measured differently, the zero-copy
//! caveat, the CPUs a remedy adds, and each side's traced counts.

use super::tests::{battery, row, stream};
use super::*;
use virtperf_store::TrialRow;
use virtperf_wire::StreamParams;

/// The larger sends' row names the size its trials used (the ratio is for that size, which
/// the battery chooses), from the trials themselves; a remedy at as-is's size names none.
#[test]
fn larger_sends_name_the_size_their_trials_sent() {
    let mut trials = battery((60.0, 37.0), 0.0, &[(LARGER_SENDS, 3.0), (ZEROCOPY, 1.0)]);
    edit(&mut trials, Some(LARGER_SENDS), |r| {
        r.workload = Workload::Stream(StreamParams::new(1 << 20));
    });
    let e = explain(1, &trials).expect("explained");
    assert_eq!(by_label(&e, LARGER_SENDS).send_size, Some(1 << 20));
    assert_eq!(by_label(&e, ZEROCOPY).send_size, None);
    let out = text(&e);
    assert!(out.contains("  larger sends (1 MiB)  "), "{out}");
    assert!(
        e.verdict
            .contains("measured to raise it: larger sends (1 MiB) ×3."),
        "{}",
        e.verdict
    );
    // Not measured: no trial to read a size from.
    let e = explain(1, &battery((60.0, 37.0), 0.0, &[])).expect("explained");
    assert_eq!(by_label(&e, LARGER_SENDS).send_size, None);
}

fn by_label<'a>(e: &'a StreamExplanation, l: &str) -> &'a Remedy {
    e.remedies.iter().find(|r| r.label == l).expect(l)
}

/// Changes the result of every trial labelled `label` (every trial with `None`).
fn edit(trials: &mut [TrialRow], label: Option<&str>, f: impl Fn(&mut TestResult)) {
    for t in trials {
        if label.is_none_or(|l| t.trial.point_label == l) {
            if let Some(r) = t.trial.result.as_mut() {
                f(r);
            }
        }
    }
}

/// A residual outside the goal says what the paced tries measured differently, not why it
/// might: the kinds of CPU time that moved most per MB and the counts per MB, moved or held.
#[test]
fn a_residual_outside_the_goal_names_what_moved_between_the_limit_and_half_rate() {
    let mut trials = Vec::new();
    for rate in [8000.0, 8100.0, 7900.0] {
        trials.push(row(
            AS_IS,
            Some(stream(rate, (60.0, 10.0), (60.0, 37.0), 0.0)),
            None,
        ));
        // Half the rate at well under half the busy time: 400 sys + 200 softirq µs per MB.
        let paced = stream(4000.0, (30.0, 5.0), (20.0, 10.0), 0.0);
        trials.push(row(PACED, Some(paced), None));
    }
    let e = explain(1, &trials).expect("explained");
    assert_eq!(e.bound.side, Some("receiver"));
    let recv = &e.sides[1];
    let p = recv.paced_split.as_ref().expect("the paced split");
    assert!(
        (p.sys - 400.0).abs() < 1e-6 && (p.softirq - 200.0).abs() < 1e-6,
        "{p:?}"
    );
    assert!(
        e.model.residual_pct.is_some_and(|r| r < -30.0),
        "{:?}",
        e.model
    );
    let note = &e.model.note;
    assert!(note.starts_with("outside the 10% goal: the receiver's CPU per MB at the limit, 970 µs, against 600 µs at half rate: sys 600 against 400, softirq 370 against 200; receives per MB 15 at both rates; TCP data segments per MB 15 at both rates"), "{note}");
    assert!(!note.contains("batching"), "{note}");
    let out = text(&e);
    assert!(
        out.contains("paced to half the rate: 600.0 [600.0, 600.0] µs per MB = user 0.0 + sys 400.0 + softirq 200.0 + irq 0.0\n"),
        "{out}"
    );
}

/// Where the tick left a tenth or more of a window's busy time unsampled, the kinds are not
/// compared (their differences would be mostly the misses'); the counts still are.
#[test]
fn kinds_the_tick_missed_are_not_compared_between_the_limit_and_half_rate() {
    let mut trials = Vec::new();
    for rate in [8000.0, 8100.0, 7900.0] {
        trials.push(row(
            AS_IS,
            Some(stream(rate, (60.0, 10.0), (60.0, 37.0), 0.0)),
            None,
        ));
        // 30% of one CPU busy at half rate, 20 of its points charged to no kind.
        let mut paced = stream(4000.0, (30.0, 5.0), (5.0, 5.0), 0.0);
        if let Some(s) = paced.cpu.server.as_mut() {
            s.system.per_cpu[1].unsampled_pct = 20.0;
            s.system.per_cpu[1].idle_pct -= 20.0;
        }
        trials.push(row(PACED, Some(paced), None));
    }
    let e = explain(1, &trials).expect("explained");
    let note = &e.model.note;
    assert!(
        note.contains("against 600 µs at half rate (by kind not comparable: the tick charged no kind to 0% of the busy time at the limit, 67% at half rate); receives per MB 15 at both rates"),
        "{note}"
    );
    assert!(!note.contains("sys 600 against"), "{note}");
}

/// The verdict's rate is the flows' sum, and says how many (`-P 2`).
#[test]
fn the_verdict_names_the_flows_its_rate_sums() {
    let mut trials = battery((60.0, 37.0), 0.0, &[]);
    edit(&mut trials, None, |r| {
        if let Workload::Stream(p) = &mut r.workload {
            p.flows = 2;
        }
    });
    let e = explain(1, &trials).expect("explained");
    assert!(
        e.verdict
            .starts_with("a 16 KiB stream of 2 flows runs at 8.00 Gbit/s here"),
        "{}",
        e.verdict
    );
    let one = explain(1, &battery((60.0, 37.0), 0.0, &[])).expect("explained");
    assert!(
        one.verdict.starts_with("a 16 KiB stream runs at"),
        "{}",
        one.verdict
    );
}

/// MSG_ZEROCOPY's row carries the kernel's count of sends it copied anyway, and a verdict
/// crediting it says as many as were copied: all of them on loopback, some elsewhere.
#[test]
fn a_zerocopy_remedy_the_kernel_copied_says_how_many_in_the_verdict() {
    // Per trial (three of them): sends completed, of them copied.
    for ((completed, copied), row, caveat) in [
        (
            (400, 400),
            "the kernel copied every one of its 1200 sends all the same",
            "MSG_ZEROCOPY ×2.",
        ),
        (
            (400, 100),
            "the kernel copied 300 of its 1200 sends all the same",
            "(300 of its 1200 sends copied by the kernel all the same)",
        ),
    ] {
        let mut trials = battery((60.0, 37.0), 0.0, &[(ZEROCOPY, 2.0)]);
        edit(&mut trials, Some(ZEROCOPY), |r| {
            if let Outcome::Stream(o) = &mut r.outcome {
                o.zerocopy = Some(virtperf_wire::ZeroCopyCounts { completed, copied });
            }
        });
        let e = explain(1, &trials).expect("explained");
        let zc = by_label(&e, ZEROCOPY);
        assert_eq!(zc.effect, "raises", "{zc:?}");
        assert!(zc.note.as_deref().unwrap_or("").starts_with(row), "{zc:?}");
        assert!(e.verdict.contains(caveat), "{}", e.verdict);
        if copied == completed {
            assert!(
                e.verdict
                    .contains("] (its sends copied by the kernel all the same)"),
                "{}",
                e.verdict
            );
        }
    }
}

/// A trial whose machine was `busy` CPUs busy by /proc/stat and polled in cpuidle for
/// `poll_s` of its 1 s window.
fn costed(mut r: TestResult, busy: [f64; 2], poll_s: f64) -> TestResult {
    r.cpu.client.system.per_cpu_busy_pct = busy.to_vec();
    let mut deltas = std::collections::BTreeMap::new();
    deltas.insert("idle_time_us_poll".to_string(), (poll_s * 1e6) as u64);
    r.events = Some(virtperf_wire::Events {
        unit: "MB".into(),
        client: virtperf_wire::SideEvents {
            deltas,
            ..Default::default()
        },
        server: None,
    });
    r
}

/// Halt polling buys its rate with a polling CPU, which /proc/stat counts as idle: the
/// remedy's busy CPUs count cpuidle's POLL time (tune's cost), and the verdict names the
/// cost where its interval lies above none; a remedy that costs nothing more says none.
#[test]
fn a_remedy_that_polls_names_the_cpus_it_adds() {
    let mut trials = Vec::new();
    for (i, rate) in [8000.0, 8100.0, 7900.0].into_iter().enumerate() {
        let busy = 1.0 + 0.01 * i as f64;
        let as_is = stream(rate, (60.0, 10.0), (60.0, 37.0), 0.0);
        trials.push(row(
            AS_IS,
            Some(costed(as_is, [70.0, 100.0 * busy - 70.0], 0.0)),
            None,
        ));
        let polled = stream(rate * 1.6, (60.0, 10.0), (60.0, 37.0), 0.0);
        // The same /proc/stat busy time, and half a CPU polling.
        let polled = costed(polled, [70.0, 100.0 * busy - 70.0], 0.5 + 0.01 * i as f64);
        trials.push(row(HALT_POLL, Some(polled), None));
        let flows = stream(rate * 1.2, (60.0, 10.0), (60.0, 37.0), 0.0);
        trials.push(row(
            SECOND_FLOW,
            Some(costed(flows, [70.0, 100.0 * busy - 70.0], 0.0)),
            None,
        ));
    }
    let e = explain(1, &trials).expect("explained");
    assert!(
        e.busy_cpus.is_some_and(|b| (b - 1.01).abs() < 1e-9),
        "{:?}",
        e.busy_cpus
    );
    let hp = by_label(&e, HALT_POLL);
    assert!(
        hp.added_cpus.is_some_and(|a| (a - 0.51).abs() < 1e-9),
        "{hp:?}"
    );
    assert!(
        e.verdict.contains("guest halt polling 200 µs ×1.60 [")
            && e.verdict.contains("] for +0.51 busy CPUs [+0."),
        "{}",
        e.verdict
    );
    let flow = by_label(&e, SECOND_FLOW);
    assert!(flow.added_cpus.is_some_and(|a| a.abs() < 1e-9), "{flow:?}");
    let second = e
        .verdict
        .split("second flow")
        .nth(1)
        .expect("second flow raises");
    assert!(!second.contains("busy CPUs"), "{}", e.verdict);
    let out = text(&e);
    assert!(
        out.contains("This machine's busy CPUs: 1.01 (cpuidle polling included)"),
        "{out}"
    );
    assert!(out.contains("; busy CPUs +0.51 ["), "{out}");
}

/// The traced trial's counts per MB, each side's own: IPIs it received, its idle entries,
/// and the MSR writes that are VM exits in a guest without APICv (ICR: IPIs it sent,
/// TSC-deadline: its timer reprogrammed); untraced, each says so instead of 0.
#[test]
fn the_traced_trial_gives_each_sides_ipis_and_exit_causes_per_mb() {
    let mut trials = battery((60.0, 37.0), 0.0, &[]);
    let side = |pairs: &[(&str, f64)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let mut traced = stream(8000.0, (60.0, 10.0), (60.0, 37.0), 0.0);
    traced.trace = Some(virtperf_wire::TraceCounts {
        unit: "MB".into(),
        per_side: [
            (
                "client".to_string(),
                side(&[("msr_write_icr", 9.5), ("msr_write_tsc_deadline", 23.5)]),
            ),
            (
                "server".to_string(),
                side(&[("ipis_received", 9.5), ("idle_entries", 9.4)]),
            ),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    });
    trials.push(row(TRACED, Some(traced), None));
    let e = explain(1, &trials).expect("explained");
    let (sender, receiver) = (&e.sides[0], &e.sides[1]);
    assert_eq!(sender.icr_writes_per_mb, Some(9.5));
    assert_eq!(sender.tsc_deadline_writes_per_mb, Some(23.5));
    assert_eq!(receiver.ipis_per_mb, Some(9.5));
    assert_eq!(receiver.icr_writes_per_mb, None);
    let out = text(&e);
    assert!(
        out.contains("ICR (IPIs sent) 9.50, TSC-deadline (timer reprogrammed) 23.50\n"),
        "{out}"
    );
    assert!(
        out.contains("IPIs received per MB: 9.50; idle entries per MB: 9.40\n    MSR writes per MB: not counted (the traced trial has no msr:write_msr counts)\n"),
        "{out}"
    );
}
