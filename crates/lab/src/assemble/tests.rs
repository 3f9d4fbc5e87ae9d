//! Tests of the assembly of a result from its two sides' reports.

use std::collections::BTreeMap;
use std::time::Duration;

use virtperf_wire::{EventCounts, FlowStats, UdpCounts, Workload};

use super::outcome::check_udp_flows;
use crate::plan::Plan;
use virtperf_measure::latency;
use virtperf_wire::{Env, Outcome};

use super::*;

fn plan(client_cpu: Option<u32>) -> Plan {
    Plan {
        client_cpu,
        server_cpu: Some(1),
        ..Plan::new(Workload::rr(1, 1), Duration::from_secs(2))
    }
}

fn side(transactions: u64, active_s: f64, events: &[(&str, u64)], pinned: bool) -> SideReport {
    let counts: BTreeMap<String, u64> = events.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    SideReport {
        elapsed_s: active_s,
        transactions,
        flows: vec![FlowStats {
            active_s,
            transactions,
            ..Default::default()
        }],
        events: Some(EventCounts {
            pinned: pinned.then(|| counts.clone()),
            all: counts,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// The two sides' boot ids: one machine where they are equal.
fn boot_ids(c: &mut Collected<'_>, client: &str, server: &str) {
    c.client_env.boot_id = client.into();
    c.server_env = Some(Env {
        boot_id: server.into(),
        ..Default::default()
    });
}

fn collected(plan: &Plan, client: SideReport, server: SideReport) -> Collected<'_> {
    let mut h = latency::new_histogram();
    for ns in [10_000u64, 20_000, 30_000] {
        h.record(ns).expect("in range");
    }
    Collected {
        plan,
        target: "127.0.0.1:1".into(),
        client,
        client_hist: Some(h),
        server: Some(server),
        client_env: Env::default(),
        server_env: None,
        downloads: vec![],
        url: String::new(),
    }
}

#[test]
fn rr_rate_latency_and_events_per_transaction() {
    let p = plan(Some(0));
    let ev = [("ipi_call", 2000), ("timer_irqs", 500)];
    let r = assemble(collected(
        &p,
        side(1000, 2.0, &ev, true),
        side(1000, 2.0, &ev, true),
    ))
    .expect("assembled");
    let Outcome::Rr(o) = &r.outcome else {
        panic!("rr gives an rr outcome: {:?}", r.outcome)
    };
    assert_eq!(o.transactions, 1000);
    assert!((o.rate_per_s - 500.0).abs() < 1e-9, "{}", o.rate_per_s);
    let l = o.latency.as_ref().expect("transactions give a latency");
    assert!((l.p50_us - 20.0).abs() < 0.1, "{l:?}");
    let e = r.events.expect("events were counted");
    assert_eq!(e.unit, virtperf_wire::Unit::Transactions.events_name());
    assert!((e.client.per_unit["ipi_call"] - 2.0).abs() < 1e-9);
    let pinned = e.client.pinned.expect("the client was pinned");
    assert_eq!(pinned.cpu, 0);
    assert!((pinned.per_unit["timer_irqs"] - 0.5).abs() < 1e-9);
    assert!(
        e.client.per_unit.contains_key("thread_voluntary_switches"),
        "the side's own threads' switches are counted too"
    );
}

/// Other work is every other process's CPU where a side counted it (the far side's
/// threads taken out when both share the machine), /proc/stat's sampled user and
/// system time only where it did not: 0.94 s of others over 2 s beside 0.3 s of the
/// agent's threads is 32% of a CPU and warned of, whatever the ticks sampled.
#[test]
fn other_work_is_the_other_processes_cpu_where_counted() {
    let p = plan(Some(0));
    let mut client = side(1000, 2.0, &[], true);
    let mut server = side(1000, 2.0, &[], true);
    client.window_cpu_s = Some(0.5);
    server.window_cpu_s = Some(0.3);
    client.others_cpu_s = Some(0.94);
    let mut c = collected(&p, client, server);
    boot_ids(&mut c, "one", "one");
    let r = assemble(c).expect("assembled");
    assert!(
        (r.cpu.client.other_cpu_pct - 32.0).abs() < 1e-6,
        "{:?}",
        r.cpu.client
    );
    assert!(r
        .warnings
        .iter()
        .any(|w| w.starts_with("other work used 32%")));
    // Without the count (an older agent): the sampled fields, here none.
    let r = assemble(collected(
        &p,
        side(1000, 2.0, &[], true),
        side(1000, 2.0, &[], true),
    ));
    assert_eq!(r.expect("assembled").cpu.client.other_cpu_pct, 0.0);
}

/// The client's `--capture` recorder is the test's: 0.4 s of it over 2 s is its own
/// 20% (warned of as the capture's cost), and neither side's other work, though the
/// server's process scan on the same machine counted it among the others.
#[test]
fn the_capture_recorder_is_no_sides_other_work() {
    let p = plan(Some(0));
    let mut client = side(1000, 2.0, &[], true);
    let mut server = side(1000, 2.0, &[], true);
    (client.window_cpu_s, server.window_cpu_s) = (Some(0.5), Some(0.3));
    // A neighbour's 0.1 s on one machine, beside the other side's process and tcpdump.
    client.others_cpu_s = Some(0.1 + 0.3);
    client.capture_cpu_s = Some(0.4);
    server.others_cpu_s = Some(0.1 + 0.5 + 0.4);
    let mut c = collected(&p, client, server);
    boot_ids(&mut c, "one", "one");
    let r = assemble(c).expect("assembled");
    let server = r.cpu.server.as_ref().expect("server");
    for (side, cpu) in [("client", &r.cpu.client), ("server", server)] {
        assert!((cpu.other_cpu_pct - 5.0).abs() < 1e-6, "{side}: {cpu:?}");
    }
    assert_eq!(r.cpu.client.capture_cpu_pct, Some(20.0));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.starts_with("--capture's tcpdump used 20%")),
        "{:?}",
        r.warnings
    );
    assert!(!r.warnings.iter().any(|w| w.starts_with("other work")));
}

/// An unpinned round trip whose threads the scheduler moved mid-interval ran on more
/// than one placement: a warning names each unpinned side's moves (a pinned side's are
/// not its placement changing), and the count is an event of that side; with the two
/// ends on two machines it names no placement of both ends.
#[test]
fn moved_unpinned_threads_are_warned_of() {
    let warned_on = |ids: (&str, &str), client_cpu: Option<u32>, moves: (u64, u64)| {
        let p = plan(client_cpu);
        let mut c = collected(&p, side(1000, 2.0, &[], true), side(1000, 2.0, &[], true));
        boot_ids(&mut c, ids.0, ids.1);
        c.client.threads.migrations = Some(moves.0);
        if let Some(s) = c.server.as_mut() {
            s.threads.migrations = Some(moves.1);
        }
        let r = assemble(c).expect("assembled");
        let e = r.events.expect("events");
        assert_eq!(
            e.client.deltas[virtperf_wire::counter::THREAD_MIGRATIONS],
            moves.0
        );
        r.warnings
            .into_iter()
            .filter(|w| w.contains("between CPUs"))
            .collect::<Vec<_>>()
    };
    let warned = |client_cpu, moves| warned_on(("one", "one"), client_cpu, moves);
    let w = warned(None, (3, 2));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("(moves: client 3)")
            && w[0].contains("one CPU for both ends, or one each")
            && w[0].contains("--cpus CLIENT,SERVER"),
        "{w:?}"
    );
    // Two machines (a guest's agent): a move is no change of sharing a CPU with the far
    // end, which runs elsewhere.
    let w = warned_on(("host", "guest"), None, (3, 2));
    assert!(
        w.len() == 1
            && w[0].contains("from more than one CPU of the moved side's machine")
            && !w[0].contains("one CPU for both ends"),
        "{w:?}"
    );
    assert!(warned(Some(0), (3, 2)).is_empty(), "both pinned");
    assert!(warned(None, (0, 2)).is_empty(), "the unpinned side stayed");
}

/// No transaction: nothing to divide by, so no per-transaction figure at all.
#[test]
fn zero_transactions_give_no_per_unit_numbers() {
    let p = plan(Some(0));
    let ev = [("ipi_call", 7)];
    let mut c = collected(&p, side(0, 2.0, &ev, true), side(0, 2.0, &ev, true));
    c.client_hist = Some(latency::new_histogram());
    c.client.threads = virtperf_wire::ThreadCpu {
        user_s: 0.0002,
        system_s: 0.0001,
        run_delay_s: Some(0.0042),
        ..Default::default()
    };
    let r = assemble(c).expect("assembled");
    // No latency and no service demand: they were not measured, and zeros would
    // reach the store, show --format json, export and compare as the best run ever.
    let Outcome::Rr(o) = &r.outcome else {
        panic!("rr gives an rr outcome: {:?}", r.outcome)
    };
    assert_eq!(o.latency, None);
    assert_eq!(r.cpu.client.service_demand_us, None);
    assert_eq!(r.cpu.client.system_service_demand_us, None);
    let names: Vec<&str> = r.metrics().iter().map(|m| m.name).collect();
    for absent in [
        "mean_us",
        "p50_us",
        "p99_us",
        "client_demand_us",
        "server_demand_us",
    ] {
        assert!(!names.contains(&absent), "{absent} in {names:?}");
    }
    assert!(names.contains(&"rate_per_s"), "{names:?}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("no transaction completed")
                && w.contains("the server answered 0 in its window")
                && w.contains("the client's threads ran 0.3 ms and waited 4.2 ms for a CPU")),
        "the trial says so, with what each side counted: {:?}",
        r.warnings
    );
    let json = serde_json::to_value(&r).expect("serializes");
    assert!(json["outcome"]["Rr"]["latency"].is_null(), "{json}");
    let e = r.events.expect("events were counted");
    assert!(e.client.per_unit.is_empty(), "{:?}", e.client.per_unit);
    assert_eq!(e.client.deltas["ipi_call"], 7, "the raw count stays");
    assert_eq!(
        e.client.deltas[virtperf_wire::counter::THREAD_RUN_DELAY_US],
        4200,
        "the threads' wait for a CPU, in µs"
    );
    assert!(
        !e.server
            .as_ref()
            .expect("server")
            .deltas
            .contains_key(virtperf_wire::counter::THREAD_RUN_DELAY_US),
        "a side whose wait was not read has none, not 0"
    );
    assert!(
        e.metrics().is_empty(),
        "no per-transaction metric: {:?}",
        e.metrics()
    );
    // No retransmission: the warning names none.
    assert!(!r.warnings.iter().any(|w| w.contains("retransmitted")));
}

/// A window with no transaction whose connection retransmitted: the warning names the
/// segments each side retransmitted and the timeout a lost one waits out.
#[test]
fn a_stall_with_retransmissions_says_so() {
    let p = plan(Some(0));
    let ev = [("ipi_call", 7)];
    let mut client = side(0, 2.0, &ev, true);
    client.flows[0].tcp = Some(virtperf_wire::TcpInfo {
        retransmits: 2,
        ..Default::default()
    });
    let mut c = collected(&p, client, side(0, 2.0, &ev, true));
    c.client_hist = Some(latency::new_histogram());
    let r = assemble(c).expect("assembled");
    assert!(
        r.warnings.iter().any(|w| w.contains("no transaction completed")
            && w.contains("(2 segments retransmitted by the client, 0 by the server: a lost segment waits out TCP's retransmission timeout, 200 ms or more)")),
        "{:?}",
        r.warnings
    );
    // One of them D-SACKed by the server in the window: late, not lost, and said so.
    let mut client = side(0, 2.0, &ev, true);
    client.flows[0].tcp = Some(virtperf_wire::TcpInfo {
        retransmits: 2,
        dsack_dups_interval: Some(1),
        ..Default::default()
    });
    let mut c = collected(&p, client, side(0, 2.0, &ev, true));
    c.client_hist = Some(latency::new_histogram());
    let r = assemble(c).expect("assembled");
    assert!(
        r.warnings
            .iter()
            .any(|w| w
                .contains("200 ms or more; 1 of them D-SACKed in the window: delayed, not lost)")),
        "{:?}",
        r.warnings
    );
}

/// Packets the machine's input backlog dropped during the test are a warning (a lost
/// segment stalls a round trip for a retransmission timeout), said once where both
/// sides share the machine; none dropped, none said.
#[test]
fn backlog_drops_during_the_test_are_a_warning() {
    let p = plan(Some(0));
    let ev = [("ipi_call", 7), (virtperf_wire::counter::BACKLOG_DROPS, 3)];
    let said = |r: &TestResult| {
        r.warnings
            .iter()
            .filter(|w| w.contains("dropped 3 packet(s) from its network input backlog"))
            .count()
    };
    // Two machines (the server's not known to be this one): each side's own.
    let c = collected(&p, side(100, 1.0, &ev, true), side(100, 1.0, &ev, true));
    let r = assemble(c).expect("assembled");
    assert_eq!(said(&r), 2, "{:?}", r.warnings);
    // One machine (the same boot id): its drops said once.
    let mut c = collected(&p, side(100, 1.0, &ev, true), side(100, 1.0, &ev, true));
    c.client_env.boot_id = "b".into();
    c.server_env = Some(Env {
        boot_id: "b".into(),
        ..Env::default()
    });
    let r = assemble(c).expect("assembled");
    assert_eq!(said(&r), 1, "{:?}", r.warnings);
    let quiet = [("ipi_call", 7), (virtperf_wire::counter::BACKLOG_DROPS, 0)];
    let c = collected(
        &p,
        side(100, 1.0, &quiet, true),
        side(100, 1.0, &quiet, true),
    );
    let r = assemble(c).expect("assembled");
    assert!(
        !r.warnings.iter().any(|w| w.contains("backlog")),
        "{:?}",
        r.warnings
    );
}

/// A stream whose sender reported fewer flows than its receiver: the flows it did not
/// report have no sender bytes (they used to read 0), and a warning says so.
#[test]
fn a_flow_the_sender_did_not_report_has_no_sender_bytes() {
    let w: Workload = serde_json::from_value(serde_json::json!(
        {"kind": "stream", "send_size": 16384, "flows": 2, "reverse": false}
    ))
    .expect("a stream workload");
    let p = Plan::new(w, Duration::from_secs(1));
    let flow = |rx: u64, tx: u64| FlowStats {
        bytes_rx: rx,
        bytes_tx: tx,
        active_s: 1.0,
        ..Default::default()
    };
    let sender = SideReport {
        flows: vec![flow(0, 1000)],
        ..Default::default()
    };
    let receiver = SideReport {
        flows: vec![flow(1000, 0), flow(700, 0)],
        ..Default::default()
    };
    let r = assemble(collected(&p, sender, receiver)).expect("assembled");
    let Outcome::Stream(o) = &r.outcome else {
        panic!("a stream outcome: {:?}", r.outcome)
    };
    assert_eq!(o.flows[0].sender_bytes, Some(1000));
    assert_eq!(o.flows[1].sender_bytes, None);
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("have no sender bytes")),
        "{:?}",
        r.warnings
    );
}

/// A receiver that saw a number past the sender's last, or more datagrams than were
/// sent: warned about, and the flow's loss recomputed from the sender's numbering.
#[test]
fn udp_counts_are_held_to_the_sender() {
    let tx = UdpCounts {
        datagrams_tx: 1000,
        highest_seq: 1000,
        ..Default::default()
    };
    let mut rx = vec![UdpCounts {
        datagrams_rx: 990,
        highest_seq: 1 << 40,
        lost: (1 << 40) - 990,
        implausible: 3,
        ..Default::default()
    }];
    let mut w = Vec::new();
    check_udp_flows(&mut rx, &[tx], &mut w);
    assert_eq!(rx[0].highest_seq, 1000);
    assert_eq!(rx[0].lost, 10);
    assert!(w.iter().any(|x| x.contains("3 datagrams carried")), "{w:?}");
    assert!(w.iter().any(|x| x.contains("numbered only 1000")), "{w:?}");
    let mut more = vec![UdpCounts {
        datagrams_rx: 1001,
        highest_seq: 1000,
        ..Default::default()
    }];
    let mut w = Vec::new();
    check_udp_flows(&mut more, &[tx], &mut w);
    assert!(w.iter().any(|x| x.contains("cannot both be true")), "{w:?}");
    let mut honest = vec![UdpCounts {
        datagrams_rx: 990,
        highest_seq: 1000,
        lost: 10,
        ..Default::default()
    }];
    let mut w = Vec::new();
    check_udp_flows(&mut honest, &[tx], &mut w);
    assert!(w.is_empty(), "{w:?}");
}

/// An unpinned side has no pinned block, whatever its machine counted.
#[test]
fn unpinned_side_has_no_pinned_events() {
    let p = plan(None);
    let ev = [("ipi_call", 10)];
    let r = assemble(collected(
        &p,
        side(10, 1.0, &ev, true),
        side(10, 1.0, &ev, true),
    ))
    .expect("assembled");
    let e = r.events.expect("events");
    assert!(e.client.pinned.is_none());
    assert!(
        e.server.and_then(|s| s.pinned).is_some(),
        "the server was pinned to 1"
    );
}
