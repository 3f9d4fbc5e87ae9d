//! Both halves in this process: the agent's serve loop on a thread on 127.0.0.1:0 and
//! `client::run` against it, for every workload, so a change to the protocol or to a role
//! is caught in a second (the end-to-end tests in `crates/cli/tests` take a minute).

use std::time::Duration;
use virtperf_wire::{BulkParams, HttpParams, StreamParams};

use virtperf_wire::{Outcome, Workload};

mod common;

use common::agent;
use virtperf_lab::client;
use virtperf_lab::plan::{Plan, Target};

fn plan(workload: Workload) -> Plan {
    Plan {
        count: 2,
        ..Plan::new(workload, Duration::from_millis(200))
    }
}

#[test]
fn every_workload_runs_between_the_two_halves() {
    let t = agent("t0", false);
    let rr = client::run(&t, &plan(Workload::rr(8, 16)), &|_| {}).expect("rr");
    let Outcome::Rr(o) = &rr.outcome else {
        panic!("rr outcome expected: {:?}", rr.outcome)
    };
    assert!(o.transactions > 10, "{o:?}");
    assert!(o.server_transactions > 0, "{o:?}");
    assert!(rr.cpu.server.is_some());
    assert!(rr.target.starts_with("127.0.0.1:"), "{}", rr.target);

    let crr = client::run(&t, &plan(Workload::crr(1, 1)), &|_| {}).expect("crr");
    assert!(matches!(&crr.outcome, Outcome::Crr(o) if o.transactions > 0));

    for seqpacket in [false, true] {
        let w = Workload::UnixRr(virtperf_wire::UnixRrParams {
            request: 8,
            response: 16,
            client_wait: Default::default(),
            server_wait: Default::default(),
            seqpacket,
        });
        let r = client::run(&t, &plan(w), &|_| {}).expect("unix-rr");
        assert!(
            matches!(&r.outcome, Outcome::Rr(o) if o.transactions > 10 && (o.transactions..=o.transactions + 1).contains(&o.server_transactions)),
            "seqpacket {seqpacket}: {:?}",
            r.outcome
        );
    }

    // --bidir: two connections per flow, one each way, each direction apart.
    let w = Workload::Stream(StreamParams {
        send_size: 4096,
        flows: 2,
        reverse: false,
        recv_size: None,
        recv_wait: None,
        threads: None,
        protocol: Default::default(),
        rate_bps: None,
        gso: false,
        gro: false,
        bidir: true,
        zerocopy: None,
        buf_offset: None,
    });
    let r = client::run(&t, &plan(w), &|_| {}).expect("bidir stream");
    let Outcome::Stream(o) = &r.outcome else {
        panic!("stream outcome expected")
    };
    let b = o.bidir.as_ref().expect("bidir totals");
    assert!(
        b.client_to_server.receiver_bytes > 0 && b.server_to_client.receiver_bytes > 0,
        "{o:?}"
    );
    assert_eq!(
        o.receiver_bytes,
        b.client_to_server.receiver_bytes + b.server_to_client.receiver_bytes
    );
    assert_eq!(o.flows.len(), 4, "{o:?}");
    for d in [&b.client_to_server, &b.server_to_client] {
        // Each direction's threads, apart: its senders on one side, receivers on the other.
        assert!(
            d.sender_cpu_s > Some(0.0) && d.receiver_cpu_s > Some(0.0),
            "{d:?}"
        );
    }
    assert_eq!(o.flows[0].direction.as_deref(), Some("client_to_server"));
    assert_eq!(o.flows[1].direction.as_deref(), Some("server_to_client"));

    for reverse in [false, true] {
        let w = Workload::Stream(StreamParams {
            send_size: 4096,
            flows: 2,
            reverse,
            recv_size: None,
            recv_wait: None,
            threads: None,
            protocol: Default::default(),
            rate_bps: None,
            gso: false,
            gro: false,
            bidir: false,
            zerocopy: None,
            buf_offset: None,
        });
        let r = client::run(&t, &plan(w), &|_| {}).expect("stream");
        let Outcome::Stream(o) = &r.outcome else {
            panic!("stream outcome expected")
        };
        assert_eq!(o.flows.len(), 2);
        assert!(o.receiver_bytes > 0, "reverse {reverse}: {o:?}");

        let w = Workload::Bulk(BulkParams {
            bytes: 1 << 20,
            send_size: 65536,
            reverse,
        });
        let r = client::run(&t, &plan(w), &|_| {}).expect("bulk");
        let Outcome::Bulk(o) = &r.outcome else {
            panic!("bulk outcome expected")
        };
        assert_eq!(o.receiver_bytes, 1 << 20, "reverse {reverse}");
    }

    let http = client::run(
        &t,
        &plan(Workload::Http(HttpParams { bytes: 10_000 })),
        &|_| {},
    )
    .expect("http");
    let Outcome::Http(o) = &http.outcome else {
        panic!("http outcome expected")
    };
    assert_eq!(o.downloads.len(), 2);
    assert!(o
        .downloads
        .iter()
        .all(|d| d.bytes == 10_000 && d.status == 200));
}

#[test]
fn the_agent_refuses_a_wrong_token_and_undriven_drives() {
    let t = agent("right", false);
    let wrong = Target {
        token: Some("wrong".into()),
        ..t.clone()
    };
    let e = client::remote_env(&wrong).expect_err("wrong token accepted");
    assert!(format!("{e:#}").contains("wrong or missing token"), "{e:#}");
    assert!(client::remote_env(&t).is_ok());
    let e = client::drive(&t, &t, &plan(Workload::rr(1, 1)))
        .expect_err("drive accepted without --allow-drive");
    assert!(format!("{e:#}").contains("does not drive tests"), "{e:#}");
}

#[test]
fn a_driving_agent_runs_the_client_half_and_returns_the_result() {
    let server = agent("s", false);
    let driver = agent("d", true);
    let r = client::drive(&driver, &server, &plan(Workload::rr(1, 1))).expect("drive");
    assert!(matches!(&r.outcome, Outcome::Rr(o) if o.transactions > 0));
}

#[test]
fn the_agent_refuses_an_invalid_workload_in_one_message() {
    let t = agent("v", false);
    let mut p = plan(Workload::rr(1, 1));
    p.server_cpu = Some(100_000);
    let e = client::run(&t, &p, &|_| {}).expect_err("server CPU 100000 accepted");
    assert!(format!("{e:#}").contains("server CPU 100000"), "{e:#}");
}

/// The warning that a trial's numbers cover only the part that ran is the client's, set
/// where the signal ended its measured interval: a run cut at 300 ms of 3 s carries it
/// (once), a whole run does not, and a drive — which the driving agent runs to its end,
/// the signal never reaching it — does not (the runner added it to every trial in flight,
/// a guest's whole trial included).
#[test]
fn only_a_trial_the_signal_ended_early_says_it_was_cut() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let cut_at = |plan: &Plan, run: &dyn Fn(&Plan) -> virtperf_wire::TestResult| {
        let flag = Arc::new(AtomicBool::new(false));
        let raise = flag.clone();
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            raise.store(true, Ordering::SeqCst);
        });
        let plan = Plan {
            cut: Some(flag),
            ..plan.clone()
        };
        let r = run(&plan);
        raiser.join().expect("raiser");
        r
    };
    let cut_warnings = |r: &virtperf_wire::TestResult| {
        r.warnings
            .iter()
            .filter(|w| *w == virtperf_lab::CUT_SHORT)
            .count()
    };
    let t = agent("cut", false);
    let long = Plan::new(Workload::rr(1, 1), Duration::from_secs(3));
    let r = cut_at(&long, &|p| client::run(&t, p, &|_| {}).expect("rr"));
    assert_eq!(cut_warnings(&r), 1, "{:?}", r.warnings);
    let elapsed = |r: &virtperf_wire::TestResult| match &r.outcome {
        Outcome::Rr(o) => o.elapsed_s,
        other => panic!("rr outcome expected: {other:?}"),
    };
    assert!(elapsed(&r) < 2.0, "{:?}", r.outcome);
    let whole = client::run(&t, &plan(Workload::rr(1, 1)), &|_| {}).expect("rr");
    assert_eq!(cut_warnings(&whole), 0, "{:?}", whole.warnings);
    let driver = agent("cut-d", true);
    let short = Plan::new(Workload::rr(1, 1), Duration::from_secs(1));
    let r = cut_at(&short, &|p| client::drive(&driver, &t, p).expect("drive"));
    assert_eq!(cut_warnings(&r), 0, "{:?}", r.warnings);
    assert!(elapsed(&r) >= 0.9, "{:?}", r.outcome);
}
