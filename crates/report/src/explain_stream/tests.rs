// Made-up trials, so each case of the model is pinned down without a machine that has it;
// `cli/tests/explain_stream.rs` runs the battery for real.

use super::*;
use virtperf_store::{NewTrial, TrialStatus};
use virtperf_wire::{
    CpuAccounting, CpuShares, CpuSplit, SideCpu, StreamFlow, StreamOutcome, StreamParams, TcpInfo,
};

/// A side whose CPU `cpu` (of two) spent `sys` and `softirq` percent.
fn side(cpu: usize, sys: f64, softirq: f64) -> SideCpu {
    let mut per_cpu = vec![CpuShares::default(); 2];
    per_cpu[cpu] = CpuShares {
        system_pct: sys,
        softirq_pct: softirq,
        idle_pct: 100.0 - sys - softirq,
        ..Default::default()
    };
    SideCpu {
        system: CpuSplit {
            per_cpu,
            ..Default::default()
        },
        process_user_s: 0.0,
        process_system_s: 0.5,
        ..Default::default()
    }
}

/// A 1 s stream at `mbps` whose sender's CPU 0 and receiver's CPU 1 were this busy
/// (sys + softirq), with the sender receive-window limited `rwnd` of its busy time.
pub(super) fn stream(mbps: f64, sender: (f64, f64), receiver: (f64, f64), rwnd: f64) -> TestResult {
    let bytes = (mbps * 1e6 / 8.0) as u64;
    let tcp = TcpInfo {
        busy_us: Some(1_000_000),
        rwnd_limited_us: Some((rwnd * 1e6) as u64),
        sndbuf_limited_us: Some(0),
        ..Default::default()
    };
    TestResult {
        schema: virtperf_wire::RESULT_SCHEMA.into(),
        workload: Workload::Stream(StreamParams::new(16384)),
        duration_s: 1.0,
        client_cpu: Some(0),
        server_cpu: Some(1),
        target: "127.0.0.1:1".into(),
        sock: Default::default(),
        sock_applied: None,
        capture: None,
        kvm: None,
        placement: None,
        guest: None,
        outcome: Outcome::Stream(StreamOutcome {
            mbps,
            receiver_bytes: bytes,
            sender_bytes: bytes,
            elapsed_s: 1.0,
            flows: vec![StreamFlow {
                mbps,
                receiver_bytes: bytes,
                tcp: Some(tcp),
                // 16 KiB sends, read 64 KiB at a time, in 64 KiB segments.
                sender_calls: Some(bytes / 16384),
                receiver_calls: Some(bytes / 65536),
                receiver_segs: Some(bytes / 65536),
                ..Default::default()
            }],
            ..Default::default()
        }),
        cpu: CpuAccounting {
            unit: "KB".into(),
            same_host: true,
            client: side(0, sender.0, sender.1),
            server: Some(side(1, receiver.0, receiver.1)),
        },
        env: Default::default(),
        warnings: vec![],
        events: None,
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

pub(super) fn row(label: &str, r: Option<TestResult>, error: Option<&str>) -> TrialRow {
    TrialRow {
        id: 0,
        run_id: 1,
        trial: NewTrial {
            seq: 0,
            config: "as-is".into(),
            workload: "stream".into(),
            point: serde_json::json!({}),
            point_label: label.into(),
            repetition: 1,
            status: if r.is_some() {
                TrialStatus::Ok
            } else {
                TrialStatus::Skipped
            },
            error: error.map(str::to_string),
            result: r,
            detail: None,
            metric: None,
            metric_name: String::new(),
            started_at: String::new(),
            duration_s: 1.0,
        },
    }
}

/// Three as-is tries bound by the receiver's CPU, three paced, three of each remedy given.
pub(super) fn battery(
    receiver_busy: (f64, f64),
    rwnd: f64,
    remedies: &[(&str, f64)],
) -> Vec<TrialRow> {
    let mut out = Vec::new();
    for (i, rate) in [8000.0, 8100.0, 7900.0].into_iter().enumerate() {
        out.push(row(
            AS_IS,
            Some(stream(rate, (60.0, 10.0), receiver_busy, rwnd)),
            None,
        ));
        // Half the rate, each side at half its busy share plus a little: the cost per MB
        // at half rate is a bit above the limit's.
        let r = (receiver_busy.0 / 2.0 + 2.0, receiver_busy.1 / 2.0);
        out.push(row(PACED, Some(stream(4000.0, (32.0, 5.0), r, 0.0)), None));
        for (label, x) in remedies {
            let jitter = 1.0 + 0.01 * i as f64;
            out.push(row(
                label,
                Some(stream(
                    8000.0 * x * jitter,
                    (60.0, 10.0),
                    receiver_busy,
                    rwnd,
                )),
                None,
            ));
        }
    }
    out
}

#[test]
fn a_busy_receiver_bounds_the_stream_and_the_paced_cost_predicts_it() {
    let trials = battery((60.0, 37.0), 0.0, &[(LARGER_SENDS, 1.5), (ZEROCOPY, 1.0)]);
    let e = explain(1, &trials).expect("explained");
    assert_eq!(e.bound.kind, "cpu");
    assert_eq!(e.bound.side, Some("receiver"));
    assert_eq!(e.bound.dominant, Some("sys"));
    assert!(
        e.verdict
            .contains("bound by the receiver's CPU (CPU 1 97% busy"),
        "{}",
        e.verdict
    );
    let recv = &e.sides[1];
    assert_eq!((recv.role, recv.end, recv.cpu), ("receiver", "server", 1));
    // 97% of 1 s over 1000 MB (8000 Mbit/s) is 970 µs per MB; the tries differ a little.
    assert!(
        (recv.us_per_mb.total - 970.0).abs() < 15.0,
        "{:?}",
        recv.us_per_mb
    );
    assert!((recv.us_per_mb.sys + recv.us_per_mb.softirq - recv.us_per_mb.total).abs() < 1e-9);
    // Paced: 32% + 18.5% of a second over 500 MB = 1010 µs per MB → 7921 Mbit/s predicted.
    let paced = recv.paced_us_per_mb.as_ref().expect("paced cost");
    assert!((paced.mean - 1010.0).abs() < 1e-6, "{paced:?}");
    let predicted = e.model.predicted_mbps.expect("a prediction");
    assert!((predicted - 8.0 * 1e6 / 1010.0).abs() < 1e-6);
    let residual = e.model.residual_pct.expect("a residual");
    assert!((residual - 100.0 * (8000.0 / predicted - 1.0)).abs() < 1e-9);
    // Counted calls per MB received: the as-is trials' calls over their megabytes.
    let per_mb = |each: u64| {
        let bytes = [8000.0, 8100.0, 7900.0].map(|r: f64| (r * 1e6 / 8.0) as u64);
        let calls: u64 = bytes.iter().map(|b| b / each).sum();
        calls as f64 / (bytes.iter().sum::<u64>() as f64 / 1e6)
    };
    let near = |got: Option<f64>, want: f64| got.is_some_and(|g| (g - want).abs() < 1e-9);
    assert!(
        near(e.sides[0].calls_per_mb, per_mb(16384)),
        "{:?}",
        e.sides[0]
    );
    assert!(
        near(e.sides[1].calls_per_mb, per_mb(65536)),
        "{:?}",
        e.sides[1]
    );
    assert!(
        near(e.sides[1].segments_per_mb, per_mb(65536)),
        "{:?}",
        e.sides[1]
    );
    // The sender's TCP state carries no segment count here: not counted, not 0.
    assert_eq!(e.sides[0].segments_per_mb, None);
    // It does carry its retransmissions (none): 0 per MB, counted; the receiver has none.
    assert_eq!(e.sides[0].retransmits_per_mb, Some(0.0));
    assert_eq!(e.sides[1].retransmits_per_mb, None);
    // Nor which of them were spurious: the D-SACK count was not read, so none is given.
    assert_eq!(e.sides[0].spurious_retransmits_per_mb, None);
    assert_eq!(e.remedies[0].effect, "raises", "{:?}", e.remedies[0]);
    assert_eq!(
        e.remedies[2].effect, "no measurable effect",
        "{:?}",
        e.remedies[2]
    );
}

#[test]
fn a_sender_waiting_on_the_receive_window_is_flow_control_with_no_cpu_prediction() {
    let trials = battery((40.0, 10.0), 0.8, &[]);
    let e = explain(1, &trials).expect("explained");
    assert_eq!(e.bound.kind, "flow_control");
    assert!((e.bound.rwnd_limited_pct.expect("measured") - 80.0).abs() < 1e-9);
    assert!(e.verdict.contains("flow control"), "{}", e.verdict);
    assert!(e.model.predicted_mbps.is_none());
    assert!(e.model.note.starts_with("not measured"), "{}", e.model.note);
}

#[test]
fn a_smaller_window_share_is_flow_control_only_where_larger_buffers_raise_the_rate() {
    // Without the counterfactual the share alone cannot tell: undecided, not "no bound".
    let without = explain(1, &battery((40.0, 10.0), 0.3, &[])).expect("explained");
    assert_eq!(without.bound.kind, "undecided", "{}", without.verdict);
    assert!(
        without
            .verdict
            .contains("receive window 30% of its busy time (TCP_INFO), flow control if larger buffers raise the rate, and 4 MiB socket buffers were not measured"),
        "{}",
        without.verdict
    );
    // Buffers measured to change nothing: the window did not set the rate.
    let flat = explain(1, &battery((40.0, 10.0), 0.3, &[(BIG_BUFFERS, 1.0)])).expect("explained");
    assert_eq!(flat.bound.kind, "none", "{}", flat.verdict);
    assert!(
        flat.verdict.contains(", no measurable effect"),
        "{}",
        flat.verdict
    );
    let with = explain(1, &battery((40.0, 10.0), 0.3, &[(BIG_BUFFERS, 2.0)])).expect("explained");
    assert_eq!(with.bound.kind, "flow_control", "{}", with.verdict);
    assert!(
        with.verdict
            .contains("4 MiB socket buffers raise the rate ×2.0"),
        "{}",
        with.verdict
    );
}

/// A short wait on the window (15–19% seen with `--window 4K` on loopback, the sender's CPU
/// 81–90% busy, the buffers ×15–×22): the counterfactual decides, as above — flow control
/// where larger buffers raise the rate, a CPU at its limit included (the small window's
/// small segments are what keep it busy), undecided where their tries cannot tell — never
/// "no single bound" beside a remedy that raises the rate ×16.
#[test]
fn a_short_wait_on_the_window_is_flow_control_where_buffers_raise_the_rate() {
    let with = explain(1, &battery((40.0, 10.0), 0.15, &[(BIG_BUFFERS, 16.0)])).expect("explained");
    assert_eq!(with.bound.kind, "flow_control", "{}", with.verdict);
    assert!(
        with.verdict.contains("bound by flow control: the sender waited on the receive window 15% of its busy time (TCP_INFO), and 4 MiB socket buffers raise the rate ×16.")
            && with.verdict.contains("(CPUs busy: sender 70%, receiver 50%)"),
        "{}",
        with.verdict
    );
    assert!(with.model.predicted_mbps.is_none());
    let busy = explain(1, &battery((60.0, 37.0), 0.15, &[(BIG_BUFFERS, 16.0)])).expect("explained");
    assert_eq!(busy.bound.kind, "flow_control", "{}", busy.verdict);
    assert!(busy.verdict.contains("receiver 97%"), "{}", busy.verdict);
    let without = explain(1, &battery((40.0, 10.0), 0.15, &[])).expect("explained");
    assert_eq!(without.bound.kind, "undecided", "{}", without.verdict);
    // Waits under the share that could change the rate by themselves: a busy CPU bounds.
    let short =
        explain(1, &battery((60.0, 37.0), 0.08, &[(BIG_BUFFERS, 16.0)])).expect("explained");
    assert_eq!(short.bound.kind, "cpu", "{}", short.verdict);
}

/// A sender at its CPU's limit that waited on the window (96% busy, 15% seen with
/// `--window 4K`): its CPU where larger buffers were measured to change nothing, else
/// undecided (their tries could not tell), with both figures; a receiver at its limit
/// stays the bound (the wait is its symptom).
#[test]
fn a_busy_sender_that_waited_on_the_window_is_undecided_until_the_buffers_tell() {
    let sender_busy = |rwnd: f64, buffers: &[f64]| {
        let mut out = Vec::new();
        for rate in [8000.0, 8100.0, 7900.0] {
            out.push(row(
                AS_IS,
                Some(stream(rate, (80.0, 16.0), (20.0, 5.0), rwnd)),
                None,
            ));
            out.push(row(
                PACED,
                Some(stream(4000.0, (42.0, 8.0), (10.0, 3.0), 0.0)),
                None,
            ));
        }
        for rate in buffers {
            out.push(row(
                BIG_BUFFERS,
                Some(stream(*rate, (80.0, 16.0), (20.0, 5.0), rwnd)),
                None,
            ));
        }
        explain(1, &out).expect("explained")
    };
    let e = sender_busy(0.15, &[40_000.0, 250_000.0]);
    assert_eq!(e.bound.kind, "undecided", "{}", e.verdict);
    assert!(
        e.verdict.contains("its bound undecided: the sender's CPU 0 96% busy, and it waited on the receive window 15% of its busy time (TCP_INFO): its CPU, or flow control if larger buffers raise the rate")
            && e.verdict.contains("undecided (more --tries)"),
        "{}",
        e.verdict
    );
    let flat = sender_busy(0.15, &[8000.0, 8050.0, 7950.0]);
    assert_eq!(flat.bound.kind, "cpu", "{}", flat.verdict);
    assert_eq!(flat.bound.side, Some("sender"));
    let raised = sender_busy(0.15, &[128_000.0, 129_000.0, 127_000.0]);
    assert_eq!(raised.bound.kind, "flow_control", "{}", raised.verdict);
    let short = sender_busy(0.05, &[40_000.0, 250_000.0]);
    assert_eq!(short.bound.kind, "cpu", "{}", short.verdict);
}

/// A receiver at its CPU's limit leaves the window full: the sender waits on it (80% here)
/// yet the bound is the receiver's CPU, unless larger buffers measurably raise the rate.
#[test]
fn a_window_left_full_by_a_busy_receiver_is_the_receivers_cpu() {
    for (remedies, larger) in [
        (
            &[(BIG_BUFFERS, 1.0)][..],
            "4 MiB socket buffers: ×1.01 [0.98, 1.04], no measurable effect",
        ),
        (&[][..], "larger buffers not measured"),
    ] {
        let e = explain(1, &battery((60.0, 37.0), 0.8, remedies)).expect("explained");
        assert_eq!(e.bound.kind, "cpu", "{}", e.verdict);
        assert_eq!(e.bound.side, Some("receiver"), "{}", e.verdict);
        let note = e.bound.full_window.as_deref().expect("the full window");
        assert!(note.contains("receive window 80%"), "{note}");
        assert!(note.contains(larger), "{note}");
        assert!(e.verdict.contains(&format!("; {note}")), "{}", e.verdict);
        assert_eq!(e.model.side, Some("receiver"));
    }
    // The counterfactual says otherwise: the window's size was binding.
    let raised = explain(1, &battery((60.0, 37.0), 0.8, &[(BIG_BUFFERS, 2.0)])).expect("explained");
    assert_eq!(raised.bound.kind, "flow_control", "{}", raised.verdict);
    assert_eq!(raised.bound.full_window, None);
    // A receiver below the CPU bound: the window is the bound, as before.
    let idle = explain(1, &battery((40.0, 10.0), 0.8, &[(BIG_BUFFERS, 1.0)])).expect("explained");
    assert_eq!(idle.bound.kind, "flow_control", "{}", idle.verdict);
}

/// Two tries of larger buffers far apart (the 17× gain with an interval of [−8.3, 44.7]
/// seen on loopback): the ratio's interval holds 1 but reaches far past it, which is no
/// evidence of "no effect"; the remedy is undecided and so is a window-waiting bound.
#[test]
fn a_remedy_whose_interval_reaches_far_past_one_is_undecided_not_without_effect() {
    let mut trials = battery((40.0, 10.0), 0.3, &[(LARGER_SENDS, 1.0)]);
    for rate in [40_000.0, 250_000.0] {
        trials.push(row(
            BIG_BUFFERS,
            Some(stream(rate, (60.0, 10.0), (40.0, 10.0), 0.3)),
            None,
        ));
    }
    let e = explain(1, &trials).expect("explained");
    let by = |l: &str| e.remedies.iter().find(|r| r.label == l).expect("listed");
    let big = by(BIG_BUFFERS);
    let (low, high) = big.ratio_interval.ends().expect("two tries: an interval");
    assert!(low < 1.0 && high > 1.0 + NO_EFFECT_BAND, "{big:?}");
    assert_eq!(big.effect, "undecided", "{big:?}");
    // Tight tries around ×1 are shown to change nothing.
    assert_eq!(by(LARGER_SENDS).effect, "no measurable effect");
    assert_eq!(e.bound.kind, "undecided", "{}", e.verdict);
    assert!(
        e.verdict.contains("its bound undecided") && e.verdict.contains("undecided (more --tries)"),
        "{}",
        e.verdict
    );
    // The model still predicts from the busier side, and publishes its residual.
    assert_eq!(e.model.side, Some("sender"));
    assert!(e.model.residual_pct.is_some());
}

#[test]
fn no_busy_cpu_and_no_flow_control_is_no_single_bound() {
    // 8% of the time on the window: its waits alone could not raise the rate past the
    // no-effect band, and ×2 from larger buffers does not make it the bound.
    let trials = battery((40.0, 10.0), 0.08, &[(BIG_BUFFERS, 2.0)]);
    let e = explain(1, &trials).expect("explained");
    assert_eq!(e.bound.kind, "none", "{}", e.verdict);
    assert!(e.verdict.contains("no single bound"), "{}", e.verdict);
    assert!(
        e.verdict
            .contains("flow control under 9% of the sender's time"),
        "{}",
        e.verdict
    );
    let trials = battery((40.0, 10.0), 0.08, &[]);
    let e = explain(1, &trials).expect("explained");
    assert_eq!(e.bound.kind, "none");
    assert!(e.verdict.contains("no single bound"), "{}", e.verdict);
    // The busier side (the sender at 70%) still predicts, and says so.
    assert_eq!(e.model.side, Some("sender"));
    // No segment count, no D-SACK count: no loss is said, none is claimed 0.
    assert_eq!(e.bound.lost_pct, None);
    assert!(!e.verdict.contains("lost"), "{}", e.verdict);
}

/// A stated link bounds the stream where its rate's interval over the tries lies at 85% of
/// the link or above (8000 ± 100 Mbit/s on 9 Gbit/s: [7752, 8248] against 7650); where it
/// straddles that (on 9.5 Gbit/s: 8075) it is undecided, with the interval as shares of
/// the link (its mean, 84%, fell short of it and the receiver's CPU was named); wholly
/// under it (12 Gbit/s), the next bound is.
#[test]
fn a_link_bounds_the_stream_only_where_the_rates_interval_reaches_it() {
    let on_link = |mbit: u64| {
        let mut trials = battery((60.0, 37.0), 0.0, &[]);
        for t in trials.iter_mut() {
            if let Some(r) = t.trial.result.as_mut() {
                r.link_rate_bps = Some(mbit * 1_000_000);
            }
        }
        explain(1, &trials).expect("explained")
    };
    let e = on_link(9000);
    assert_eq!(e.bound.kind, "link", "{}", e.verdict);
    let e = on_link(9500);
    assert_eq!(e.bound.kind, "undecided", "{}", e.verdict);
    assert!(
        e.verdict.contains("84% of the link's stated 9500 Mbit/s ([82%, 87%] over 3 tries), at the link's limit (85% of it as payload) or not"),
        "{}",
        e.verdict
    );
    let e = on_link(12000);
    assert_eq!(
        (e.bound.kind, e.bound.side),
        ("cpu", Some("receiver")),
        "{}",
        e.verdict
    );
}

/// A CPU's busy share is judged by its tries' interval, not its mean: 80%, 88% and 97%
/// (mean 88%, reaching past 90%) were "no CPU at 90% busy", and 84%, 96% and 99% (mean
/// 93%, reaching under it) "bound by the sender's CPU"; both are undecided, as is one
/// try; tries all under the bound are no single bound, all over it the CPU.
#[test]
fn a_cpu_whose_tries_straddle_the_limit_leaves_the_bound_undecided() {
    let with_sender = |busy: &[f64]| {
        let mut trials = battery((40.0, 10.0), 0.0, &[]);
        let mut i = 0;
        trials.retain(|t| {
            t.trial.point_label != AS_IS || {
                i += 1;
                i <= busy.len()
            }
        });
        let mut tries = busy.iter();
        for t in trials.iter_mut().filter(|t| t.trial.point_label == AS_IS) {
            if let (Some(r), Some(b)) = (t.trial.result.as_mut(), tries.next()) {
                r.cpu.client = side(0, b - 5.0, 5.0);
            }
        }
        explain(1, &trials).expect("explained")
    };
    for (busy, says) in [
        (
            &[80.0, 88.0, 97.0][..],
            "the sender's CPU 0 88% busy [67%, 109%] (t-interval) over 3 tries",
        ),
        (
            &[84.0, 96.0, 99.0][..],
            "the sender's CPU 0 93% busy [73%, 113%] (t-interval) over 3 tries",
        ),
        (
            &[99.0][..],
            "the sender's CPU 0 99% busy (1 try: no interval)",
        ),
    ] {
        let e = with_sender(busy);
        assert_eq!(e.bound.kind, "undecided", "{busy:?}: {}", e.verdict);
        assert!(
            e.verdict.contains(says)
                && e.verdict
                    .contains(", at its limit (90%) or not (more --tries)"),
            "{}",
            e.verdict
        );
    }
    let e = with_sender(&[70.0, 75.0, 80.0]);
    assert_eq!(e.bound.kind, "none", "{}", e.verdict);
    let e = with_sender(&[97.0, 98.0, 99.0]);
    assert_eq!(
        (e.bound.kind, e.bound.side),
        ("cpu", Some("sender")),
        "{}",
        e.verdict
    );
}

/// Where nothing bounds the stream and the sender lost segments (retransmitted, not
/// D-SACKed), the verdict names the loss with its share; the spurious ones do not count.
#[test]
fn lost_segments_are_named_where_nothing_else_bounds() {
    let with_loss = |retransmits: u64, dsacked: u64| {
        let mut trials = battery((40.0, 10.0), 0.05, &[]);
        for t in &mut trials {
            if let Some(Outcome::Stream(o)) = t.trial.result.as_mut().map(|r| &mut r.outcome) {
                for f in &mut o.flows {
                    if let Some(tcp) = f.tcp.as_mut() {
                        tcp.retransmits_interval = retransmits;
                        tcp.dsack_dups_interval = Some(dsacked);
                        tcp.data_segs_out = Some(10_000);
                    }
                }
            }
        }
        explain(1, &trials).expect("explained")
    };
    let e = with_loss(120, 20);
    assert_eq!(e.bound.kind, "none");
    assert!(
        (e.bound.lost_pct.unwrap_or(0.0) - 1.0).abs() < 1e-9,
        "{:?}",
        e.bound
    );
    assert!(
        e.verdict
            .contains("the sender lost 1.00% of its data segments"),
        "{}",
        e.verdict
    );
    // All of them D-SACKed: nothing lost, nothing said.
    let e = with_loss(120, 120);
    assert_eq!(e.bound.lost_pct, Some(0.0));
    assert!(!e.verdict.contains("lost"), "{}", e.verdict);
}

#[test]
fn a_remedy_not_measured_says_why_and_one_try_is_undecided() {
    let mut trials = battery((60.0, 37.0), 0.0, &[]);
    trials.push(row(SECOND_FLOW, None, Some("the agent allows 1 flow")));
    trials.push(row(
        BIG_BUFFERS,
        Some(stream(9000.0, (60.0, 10.0), (60.0, 37.0), 0.0)),
        None,
    ));
    let e = explain(1, &trials).expect("explained");
    let by = |l: &str| e.remedies.iter().find(|r| r.label == l).expect("listed");
    assert_eq!(by(SECOND_FLOW).effect, "not measured");
    assert_eq!(
        by(SECOND_FLOW).why_not.as_deref(),
        Some("the agent allows 1 flow")
    );
    assert_eq!(by(BIG_BUFFERS).effect, "undecided");
    // No trial of it at all: a run whose battery did not plan it (an older virtperf's, like
    // runs before the halt-polling remedy) or that stopped first, not "no trial ran".
    assert!(
        by(LARGER_SENDS)
            .why_not
            .as_deref()
            .is_some_and(|w| w.starts_with("not in this run: its battery did not plan it")),
        "{:?}",
        by(LARGER_SENDS)
    );
    // Its row gives the reason where a figure would be, without a stray colon.
    let row = text(&e)
        .lines()
        .find(|l| l.contains("the agent allows 1 flow"))
        .map(str::to_string)
        .expect("the row");
    assert!(
        row.contains("not measured") && !row.contains(": the agent"),
        "{row}"
    );
}

#[test]
fn no_as_is_trial_is_not_measured_with_the_reason() {
    let trials = vec![row(AS_IS, None, Some("CPU 7 does not exist"))];
    let err = explain(1, &trials).expect_err("nothing to explain");
    assert_eq!(err, "not measured: CPU 7 does not exist");
}

/// With the host's view of a KVM VM on every as-is trial (`--host … --vm`), its exits per
/// MB are the counters summed over the trials' windows divided by their MB; under TCG
/// there are none, and the view says why.
#[test]
fn a_kvm_vms_exits_per_mb_are_its_counters_over_the_trials_megabytes() {
    let mut trials = battery((60.0, 37.0), 0.0, &[]);
    let mut mb = 0.0;
    for t in trials.iter_mut().filter(|t| t.trial.point_label == AS_IS) {
        let Some(r) = t.trial.result.as_mut() else {
            continue;
        };
        if let Outcome::Stream(o) = &r.outcome {
            mb += o.receiver_bytes as f64 / 1e6;
        }
        let counts = [("exits", 3000), ("io_exits", 1000), ("halt_wait_ns", 5)]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        r.host_vm = Some(virtperf_wire::HostVm {
            accel: Some("kvm".into()),
            window_s: Some(1.0),
            kvm: Some(virtperf_wire::VmKvmCounters {
                counts,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    let e = explain(1, &trials).expect("explained");
    let h = e.host_view.as_ref().expect("a host view");
    assert_eq!(h.guest_end, "both");
    let x = h.exits_per_mb.as_ref().expect("exits per MB");
    assert!((x["exits"] - 9000.0 / mb).abs() < 1e-9, "{x:?}");
    assert!((x["io_exits"] - 3000.0 / mb).abs() < 1e-9, "{x:?}");
    assert!(!x.contains_key("halt_wait_ns"), "not an exit: {x:?}");
    assert!(text(&e).contains("VM exits per MB: exits"), "{}", text(&e));
    // The battery ran inside the VM: its busy CPUs are that machine's own. A guest the
    // battery booted here puts its vCPU threads among this host's, and the rows say so.
    assert!(
        text(&e).contains("busy CPUs added on this machine)"),
        "{}",
        text(&e)
    );
    let mut booted = e.clone();
    if let Some(h) = booted.host_view.as_mut() {
        h.guest_end = "client";
    }
    assert!(
        text(&booted).contains("busy CPUs added on this host, the guest's vCPU threads included"),
        "{}",
        text(&booted)
    );

    for t in trials.iter_mut() {
        if let Some(h) = t.trial.result.as_mut().and_then(|r| r.host_vm.as_mut()) {
            h.accel = Some("tcg".into());
            h.kvm = None;
        }
    }
    let e = explain(1, &trials).expect("explained");
    let h = e.host_view.as_ref().expect("a host view");
    assert!(h.exits_per_mb.is_none());
    assert!(
        h.exits_why.as_deref().is_some_and(|w| w.contains("TCG")),
        "{h:?}"
    );
}

/// A guest end whose own accounting shows no CPU at its limit is bound on the host by its
/// vCPU threads only where their tries' interval clears 90% of a CPU: 97–99% is; 80%,
/// 95%, 99% (mean 91%, which read "bound by the receiver's CPU") leaves it undecided;
/// 30% is no single bound.
#[test]
fn a_guests_vcpu_threads_bound_it_only_where_their_tries_show_it() {
    let with_vcpu = |busy: &[f64]| {
        let mut trials = battery((40.0, 10.0), 0.0, &[]);
        let mut tries = busy.iter();
        for t in trials.iter_mut().filter(|t| t.trial.point_label == AS_IS) {
            let (Some(r), Some(b)) = (t.trial.result.as_mut(), tries.next()) else {
                continue;
            };
            r.placement = Some("guest".into());
            r.host_vm = Some(virtperf_wire::HostVm {
                accel: Some("kvm".into()),
                window_s: Some(1.0),
                classes: vec![virtperf_wire::ThreadClass {
                    class: "vcpu".into(),
                    threads: 1,
                    cpu_s: b / 100.0,
                    ..Default::default()
                }],
                ..Default::default()
            });
        }
        explain(1, &trials).expect("explained")
    };
    let e = with_vcpu(&[97.0, 98.0, 99.0]);
    assert_eq!(
        (e.bound.kind, e.bound.side),
        ("cpu", Some("receiver")),
        "{}",
        e.verdict
    );
    assert!(
        e.verdict.contains("vCPU thread used 98% of a CPU"),
        "{}",
        e.verdict
    );
    let e = with_vcpu(&[80.0, 95.0, 99.0]);
    assert_eq!(e.bound.kind, "undecided", "{}", e.verdict);
    assert!(
        e.verdict
            .contains("(tries: 80%, 95%, 99%), at one CPU's limit (90%) or not (more --tries)"),
        "{}",
        e.verdict
    );
    let e = with_vcpu(&[30.0, 31.0, 32.0]);
    assert_eq!(e.bound.kind, "none", "{}", e.verdict);
}

/// The carrier of a guest's tax is named only where the tries tell it: a receiver whose
/// CPU per MB doubled in all three tries is; the same battery twice (no side grew beyond
/// its tries' spread) is undecided, and says what each side measured.
#[test]
fn the_carrier_is_named_only_where_its_growth_is_told_apart() {
    let native = explain(1, &battery((40.0, 10.0), 0.0, &[])).expect("native");
    let guest = explain(2, &battery((98.0, 1.0), 0.0, &[])).expect("guest");
    let s = side_by_side(&native, &guest);
    assert_eq!(s.carrier_side, Some("receiver"), "{:?}", s.carrier);
    let words = s.carrier.as_deref().expect("a carrier");
    assert!(
        words.starts_with("the guest pays +") && words.contains("µs per MB on the receiver's CPU"),
        "{words}"
    );
    let same = side_by_side(&native, &native);
    assert_eq!(same.carrier_side, None);
    let words = same.carrier.as_deref().expect("said why");
    assert!(
        words.starts_with("undecided: the sender's CPU +0.0 [")
            && words.contains("the receiver's CPU +0.0 [")
            && words.ends_with("(more --runs)"),
        "{words}"
    );
    // One as-is try a side: no interval, never a carrier, whatever the means say.
    let first_only = |mut t: Vec<TrialRow>| {
        let mut seen = false;
        t.retain(|r| r.trial.point_label != AS_IS || !std::mem::replace(&mut seen, true));
        t
    };
    let n1 = explain(1, &first_only(battery((40.0, 10.0), 0.0, &[]))).expect("native");
    let g1 = explain(2, &first_only(battery((98.0, 1.0), 0.0, &[]))).expect("guest");
    let s1 = side_by_side(&n1, &g1);
    assert_eq!(s1.carrier_side, None, "{:?}", s1.carrier);
    assert!(
        s1.carrier
            .as_deref()
            .is_some_and(|w| w.contains("(1 try: no interval)")),
        "{:?}",
        s1.carrier
    );
}

/// The verdict ends with what raises the rate: each remedy whose interval lies above 1, with
/// it; else that none was shown to, with how the others came out.
#[test]
fn the_verdict_says_what_raises_the_rate_or_that_nothing_measured_does() {
    let raised = explain(1, &battery((60.0, 37.0), 0.0, &[(BIG_BUFFERS, 2.0)])).expect("explained");
    let r = &raised
        .remedies
        .iter()
        .find(|r| r.label == BIG_BUFFERS)
        .expect("buffers");
    let Interval::Bounded { low, high } = r.ratio_interval else {
        panic!("{r:?}")
    };
    assert!(
        raised.verdict.ends_with(&format!(
            "; measured to raise it: 4 MiB socket buffers ×{:.2} [{low:.2}, {high:.2}]",
            r.ratio.expect("ratio")
        )),
        "{}",
        raised.verdict
    );
    let flat = explain(1, &battery((60.0, 37.0), 0.0, &[(BIG_BUFFERS, 1.0)])).expect("explained");
    assert!(
        flat.verdict
            .ends_with("; no measured remedy raises it (1 no measurable effect)"),
        "{}",
        flat.verdict
    );
    let none = explain(1, &battery((60.0, 37.0), 0.0, &[])).expect("explained");
    assert!(
        none.verdict.ends_with("; no remedy was measured"),
        "{}",
        none.verdict
    );
}

/// "Within the 10% goal" rests on the residual's interval: within where the whole interval
/// of measured ÷ predicted lies in ×0.90–×1.10, outside where it lies wholly past that,
/// undecided where it reaches across (seen: a +9.3% residual from a paced cost that ranged
/// ±45% over two tries was called within the goal).
#[test]
fn the_models_goal_is_decided_on_the_residuals_interval() {
    let b = |low: f64, high: f64| Interval::Bounded { low, high };
    assert_eq!(goal_note(&b(0.95, 1.08), ": why"), "within the 10% goal");
    assert_eq!(
        goal_note(&b(1.15, 1.30), ": why"),
        "outside the 10% goal: why"
    );
    assert_eq!(goal_note(&b(0.70, 0.85), ""), "outside the 10% goal");
    assert_eq!(
        goal_note(&b(0.71, 1.46), ": why"),
        "undecided against the 10% goal: the tries put the residual between -29% and +46% (more --tries may tell)"
    );
    let none = Interval::None {
        why: "1 try: no interval".into(),
    };
    assert!(goal_note(&none, "").starts_with("undecided against the 10% goal: no interval"));
    // A battery's model carries the interval it was decided on.
    let e = explain(1, &battery((60.0, 37.0), 0.0, &[])).expect("explained");
    assert!(e.model.predicted_mbps.is_some(), "{:?}", e.model);
    match e.model.ratio_interval {
        Interval::Bounded { low, high } => {
            let r = 1.0 + e.model.residual_pct.expect("residual") / 100.0;
            assert!(low <= high && low.is_finite(), "{:?}", e.model);
            assert!((low - 0.2..=high + 0.2).contains(&r), "{:?}", e.model);
        }
        Interval::None { ref why } => assert!(!why.is_empty()),
    }
}

/// A sender's busy share near 100% over three tries gives a t-interval past 100%, which no
/// CPU can be: it is said to be a t-interval, as one below 0 is (it read "busy 100% [98%,
/// 101%]" unlabelled).
#[test]
fn a_busy_interval_past_100_percent_is_called_a_t_interval() {
    let mut trials = Vec::new();
    for softirq in [38.0, 40.0, 39.5] {
        trials.push(row(
            AS_IS,
            Some(stream(8000.0, (60.0, softirq), (60.0, 37.0), 0.0)),
            None,
        ));
    }
    let e = explain(1, &trials).expect("explained");
    let t = text(&e);
    let line = t
        .lines()
        .find(|l| l.trim_start().starts_with("sender"))
        .expect("the sender's line");
    assert!(line.contains("(t-interval of 3 tries)"), "{line}");
}
