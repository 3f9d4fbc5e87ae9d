//! Every field of a plan is honoured on both ways a test's client half runs: in this
//! process (`client::run`: local, netns, ssh, remote and host-guest placements) and on an
//! agent that drives it (`client::drive`: guest-host, guest-guest and loopback in a guest),
//! or refused there in one line that names the field. Issue 41: `Drive` used to carry 7 of
//! the plan's 14 fields and drop `trace`, `timeline`, `family`, … without a word.

use std::time::Duration;

use virtperf_lab::client;
use virtperf_lab::plan::{Family, Plan};
use virtperf_wire::{HttpParams, TestResult, Workload};

mod common;

/// The two ways a client half runs, with a name for messages.
fn both(plan: &Plan) -> Vec<(&'static str, anyhow::Result<TestResult>)> {
    let server = common::agent("s", false);
    let driver = common::agent("d", true);
    vec![
        ("run", client::run(&server, plan, &|_| {})),
        ("drive", client::drive(&driver, &server, plan)),
    ]
}

fn rr(ms: u64) -> Plan {
    Plan::new(Workload::rr(1, 1), Duration::from_millis(ms))
}

/// Each path's result, or a failure naming the path.
fn ok(plan: &Plan) -> Vec<(&'static str, TestResult)> {
    both(plan)
        .into_iter()
        .map(|(how, r)| (how, r.unwrap_or_else(|e| panic!("{how}: {e:#}"))))
        .collect()
}

#[test]
fn interval_count_sockets_and_cpus_travel() {
    let p = Plan {
        interval: Some(Duration::from_millis(100)),
        client_cpu: Some(0),
        server_cpu: Some(0),
        sock: virtperf_wire::SockOpts {
            nodelay: Some(true),
            ..Default::default()
        },
        ..rr(400)
    };
    for (how, r) in ok(&p) {
        assert!(
            r.intervals.len() >= 3,
            "{how}: {} intervals",
            r.intervals.len()
        );
        assert_eq!((r.client_cpu, r.server_cpu), (Some(0), Some(0)), "{how}");
        assert_eq!(r.sock.nodelay, Some(true), "{how}");
    }
    let http = Plan {
        count: 3,
        ..Plan::new(
            Workload::Http(HttpParams { bytes: 1000 }),
            Duration::from_secs(1),
        )
    };
    for (how, r) in ok(&http) {
        let virtperf_wire::Outcome::Http(o) = &r.outcome else {
            panic!("{how}: not http")
        };
        assert_eq!(o.downloads.len(), 3, "{how}");
    }
}

/// `-6` against an IPv4-only agent address fails on both paths: the family was honoured,
/// not dropped (a dropped `-6` would connect over IPv4 and pass).
#[test]
fn family_travels() {
    for (how, r) in ok(&Plan {
        family: Some(Family::V4),
        ..rr(200)
    }) {
        assert!(r.target.starts_with("127.0.0.1:"), "{how}: {}", r.target);
    }
    for (how, r) in both(&Plan {
        family: Some(Family::V6),
        ..rr(200)
    }) {
        let e = r.expect_err(how);
        assert!(format!("{e:#}").contains("IPv6"), "{how}: {e:#}");
    }
}

/// The host's KVM counters are read by this process on both paths (a driving guest has
/// none of the host's): present, or absent with the reason said.
#[test]
fn kvm_stats_are_read_here_on_both_paths() {
    for (how, r) in ok(&Plan {
        kvm_stats: true,
        ..rr(200)
    }) {
        let said = r
            .warnings
            .iter()
            .any(|w| w.contains("KVM exit counters are not visible"));
        assert!(
            r.kvm.is_some() || said,
            "{how}: neither counters nor a reason"
        );
    }
}

/// A capture would be written by whichever machine runs the client half: a driving agent
/// never writes a file a peer names, so the drive is refused in one line naming the field.
#[test]
fn capture_is_refused_on_a_drive_in_one_line() {
    let p = Plan {
        capture: Some(std::env::temp_dir().join("never-written.pcap")),
        ..rr(200)
    };
    let server = common::agent("s", false);
    let driver = common::agent("d", true);
    let e = client::drive(&driver, &server, &p).expect_err("capture accepted on a drive");
    let text = format!("{e:#}");
    assert!(text.contains("--capture") && !text.contains('\n'), "{text}");
}

/// `--trace`, `--trace-all` and `--timeline` count on the machine that runs the client
/// half: both paths bring the counts back (root reads tracepoints).
#[test]
fn trace_trace_all_and_timeline_travel() {
    if !virtperf_testkit::need_root("tracepoints are readable by root") {
        return;
    }
    let plain = ok(&Plan {
        trace: true,
        ..rr(300)
    });
    for (how, r) in &plain {
        assert!(r.trace.is_some(), "{how}: no trace");
    }
    for ((how, all), (_, plain)) in ok(&Plan {
        trace: true,
        trace_all: true,
        ..rr(300)
    })
    .iter()
    .zip(&plain)
    {
        let n = |r: &TestResult| r.trace.as_ref().map_or(0, |t| t.deltas.len());
        assert!(
            n(all) > n(plain),
            "{how}: {} keys, {} without --trace-all",
            n(all),
            n(plain)
        );
    }
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        virtperf_testkit::skip("two-cpus", "--timeline needs two CPUs");
        return;
    }
    for (how, r) in ok(&Plan {
        timeline: true,
        client_cpu: Some(0),
        server_cpu: Some(1),
        ..rr(300)
    }) {
        assert!(r.timeline.is_some(), "{how}: no timeline");
    }
}

/// A warm-up (`--omit`) travels to a driving agent: on both paths the result says it and
/// the agent served the warm-up's transactions besides the measured ones.
#[test]
fn omit_travels() {
    for (how, r) in ok(&Plan {
        omit: Some(Duration::from_millis(300)),
        ..rr(300)
    }) {
        assert_eq!(r.omit_s, Some(0.3), "{how}");
        let virtperf_wire::Outcome::Rr(o) = &r.outcome else {
            panic!("{how}: not rr")
        };
        let warm = o
            .warmup_transactions
            .unwrap_or_else(|| panic!("{how}: no warm-up"));
        assert!(warm > 0, "{how}");
        // The agent served the warm-up's and the measured ones, and the one in flight
        // when the interval ended (completed after it: the client's rule leaves it out).
        let counted = o.transactions + warm;
        assert!(
            (counted..=counted + 1).contains(&o.server_transactions),
            "{how}: {o:?}"
        );
    }
}
