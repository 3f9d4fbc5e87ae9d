//! Both halves in this process (an agent on a thread, `client::run` against it): UDP rr and
//! streams in both directions, with real datagrams on loopback.

use std::time::Duration;
use virtperf_wire::{RrParams, StreamParams};

use virtperf_wire::{Outcome, Protocol, Workload};

mod common;

use common::agent;
use virtperf_lab::client;
use virtperf_lab::plan::Plan;

fn plan(workload: Workload) -> Plan {
    Plan::new(workload, Duration::from_millis(300))
}

#[test]
fn udp_rr_and_streams_run_between_the_two_halves() {
    let t = agent("u", false);
    let mut w = Workload::rr(1, 1);
    if let Workload::Rr(RrParams {
        protocol, flows, ..
    }) = &mut w
    {
        *protocol = Protocol::Udp;
        *flows = 2;
    }
    let r = client::run(&t, &plan(w), &|_| {}).expect("udp rr");
    let Outcome::Rr(o) = &r.outcome else {
        panic!("rr outcome expected")
    };
    let u = o.udp.as_ref().expect("UDP rr reports its losses");
    assert!(o.transactions > 100, "{o:?}");
    // Every answered request was served; a lost one would be counted, not hidden.
    assert_eq!(o.server_transactions, o.transactions + u.lost, "{o:?}");
    assert!(r.metrics().iter().any(|m| m.name == "lost_pct"));

    for reverse in [false, true] {
        let w = Workload::Stream(StreamParams {
            send_size: 1472,
            flows: 2,
            reverse,
            recv_size: None,
            recv_wait: None,
            protocol: Protocol::Udp,
            rate_bps: Some(50_000_000),
            gso: false,
            gro: false,
            threads: None,
            bidir: false,
            zerocopy: None,
            buf_offset: None,
        });
        let r = client::run(&t, &plan(w), &|_| {}).expect("udp stream");
        let Outcome::Stream(o) = &r.outcome else {
            panic!("stream outcome expected")
        };
        let u = o.udp.as_ref().expect("UDP stream accounting");
        assert_eq!(o.flows.len(), 2);
        assert!(u.datagrams_received > 100, "reverse {reverse}: {u:?}");
        assert!(Some(u.datagrams_received) <= u.datagrams_sent, "{u:?}");
        // Paced at 50 Mbit/s per flow: about 100 Mbit/s in all, well under loopback's.
        // Sent on the pace; received less what a busy machine drops.
        let sent = o.sender_bytes as f64 * 8.0 / 1e6 / 0.3;
        assert!(
            (85.0..=110.0).contains(&sent),
            "reverse {reverse}: sent {sent} Mbit/s"
        );
        assert!(
            (40.0..=110.0).contains(&o.mbps),
            "reverse {reverse}: {} Mbit/s",
            o.mbps
        );
        assert!(u.jitter_ms >= 0.0 && u.jitter_ms < 100.0, "{u:?}");
        assert!((0.0..=100.0).contains(&u.lost_pct), "{u:?}");
        assert!(o.flows.iter().all(|f| f.udp.is_some()));
    }
}

/// GSO and GRO where this kernel has them: the result says which were in effect, and a
/// refused one is a warning, never silence.
#[test]
fn gso_and_gro_are_recorded_with_the_result() {
    let t = agent("u", false);
    let w = Workload::Stream(StreamParams {
        send_size: 1400,
        flows: 1,
        reverse: false,
        recv_size: None,
        recv_wait: None,
        protocol: Protocol::Udp,
        rate_bps: Some(200_000_000),
        gso: true,
        gro: true,
        threads: None,
        bidir: false,
        zerocopy: None,
        buf_offset: None,
    });
    let r = client::run(&t, &plan(w), &|_| {}).expect("udp stream with offloads");
    let Outcome::Stream(o) = &r.outcome else {
        panic!("stream outcome expected")
    };
    let u = o.udp.as_ref().expect("UDP stream accounting");
    assert!(u.datagrams_received > 100, "{u:?}");
    for (asked, on, name) in [(true, u.gso, "GSO"), (true, u.gro, "GRO")] {
        assert!(
            !asked || on || r.warnings.iter().any(|w| w.contains(name)),
            "{name} neither on nor warned about: {:?}",
            r.warnings
        );
    }
    // Each datagram still counted once with GSO/GRO batching them.
    assert!(u.lost_pct < 50.0, "{u:?}");
}
