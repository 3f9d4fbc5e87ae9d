//! The remedies found on machines described by hand.

use super::*;

fn machine(halt: Result<&str, &str>, busy: &str, dma: Result<u64, &str>) -> Machine {
    let mut knobs = BTreeMap::new();
    knobs.insert(
        "haltpoll.guest_halt_poll_ns".to_string(),
        halt.map(str::to_string).map_err(str::to_string),
    );
    for n in ["net.core.busy_read", "net.core.busy_poll"] {
        knobs.insert(n.to_string(), Ok(busy.to_string()));
    }
    Machine {
        knobs,
        dma_latency: dma.map_err(str::to_string),
        cpuidle_driver: Some("haltpoll".into()),
        cpuidle_governor: Some("haltpoll".into()),
        governors: Ok(vec!["menu".into(), "haltpoll".into()]),
        online_cpus: vec![0, 1],
        vhost_net: Err("no /dev/vhost-net".into()),
    }
}

/// The target the tests of this crate tune: a 1-byte rr across CPUs 0 and 1.
pub(crate) fn rr() -> Target {
    Target {
        kind: "rr".into(),
        size: Some("1,1".into()),
        cpus: Some((0, 1)),
        placement: None,
    }
}

/// The machine's current values are not candidates; what cannot be tried says why.
#[test]
fn candidates_come_from_what_the_machine_has() {
    let (c, not) = discover(&machine(Ok("200000"), "0", Ok(2_000_000_000)), &rr());
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "halt-poll-off",
            "halt-poll-50us",
            "menu-governor",
            "busy-poll-50us",
            "dma-latency-0",
            "spin",
            "poll-50us",
            "same-cpu"
        ]
    );
    assert!(
        not.iter().any(|n| n.why.contains("no receive queues")),
        "{not:?}"
    );
    let (c, not) = discover(
        &machine(
            Err("module parameter haltpoll.guest_halt_poll_ns does not exist"),
            "50",
            Err("cannot open /dev/cpu_dma_latency (it needs root)"),
        ),
        &Target {
            kind: "stream".into(),
            cpus: None,
            ..rr()
        },
    );
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    // A stream's socket buffers are the application's: always a candidate.
    assert_eq!(names, ["busy-poll-off", "socket-buffers-4m"]);
    let whys: Vec<&str> = not.iter().map(|n| n.why.as_str()).collect();
    assert!(
        whys.iter().any(|w| w.contains("explain --workload stream")),
        "{whys:?}"
    );
    assert!(
        whys.iter().any(|w| w.contains("does not exist")),
        "{whys:?}"
    );
    assert!(whys.iter().any(|w| w.contains("needs root")), "{whys:?}");
    assert!(whys.iter().any(|w| w.contains("--cpus")), "{whys:?}");
}

/// A writable knob that nothing reads (the haltpoll driver under the menu governor,
/// where 200 µs of it left the halts per round trip unchanged) is no candidate alone:
/// its trials would measure noise, and noise can be picked. Where the governor can be
/// switched, the window comes with the switch; where it cannot, the reason says why.
#[test]
fn an_inert_halt_poll_knob_is_not_tried() {
    let m = Machine {
        cpuidle_governor: Some("menu".into()),
        ..machine(Ok("0"), "0", Ok(2_000_000_000))
    };
    let (c, _) = discover(&m, &rr());
    assert!(!c.iter().any(|c| c.name.starts_with("halt-poll")), "{c:?}");
    let gov: Vec<&Candidate> = c
        .iter()
        .filter(|c| c.name.starts_with("haltpoll-gov-"))
        .collect();
    assert_eq!(gov.len(), 2, "{c:?}");
    assert!(gov.iter().all(|c| c.settings[0]
        == Setting::Governor {
            name: "haltpoll".into()
        }
        && matches!(&c.settings[1], Setting::Module { value, .. } if value != "0")));
    let m = Machine {
        governors: Ok(vec!["menu".into()]),
        ..m
    };
    let (c, not) = discover(&m, &rr());
    assert!(!c.iter().any(|c| c.name.contains("halt")), "{c:?}");
    let why = &not
        .iter()
        .find(|n| n.what == "guest halt polling")
        .expect("said why")
        .why;
    assert!(
        why.contains("governor is menu") && why.contains("no haltpoll cpuidle governor"),
        "{why}"
    );
}

/// Without a cpuidle driver nothing honours the latency bound: the candidate stays (its
/// trials decide) but does not promise polling.
#[test]
fn the_latency_bound_promises_polling_only_where_a_driver_honours_it() {
    let what = |driver: Option<&str>| {
        let m = Machine {
            cpuidle_driver: driver.map(str::to_string),
            ..machine(Ok("0"), "0", Ok(2_000_000_000))
        };
        let (c, _) = discover(&m, &rr());
        c.into_iter()
            .find(|c| c.name == "dma-latency-0")
            .expect("offered")
            .what
    };
    assert!(what(Some("haltpoll")).contains("only poll when idle"));
    let none = what(Some("none"));
    assert!(
        none.contains("no cpuidle driver") && !none.contains("never halt"),
        "{none}"
    );
}

/// Both ends pinned to one CPU: the remedy the other way is each on its own CPU.
#[test]
fn one_shared_cpu_offers_two() {
    let m = machine(Ok("0"), "0", Ok(0));
    let (c, _) = discover(
        &m,
        &Target {
            cpus: Some((1, 1)),
            ..rr()
        },
    );
    let x = c.iter().find(|c| c.name == "cross-cpu").expect("cross-cpu");
    assert_eq!(
        x.settings,
        [Setting::Cpus {
            client: 1,
            server: 0
        }]
    );
    assert!(!c.iter().any(|c| c.name == "same-cpu"));
}

/// Loopback's steering files, where they are there and writable, become RPS/RFS
/// remedies written through the journal (the files) and as a sysctl (RFS's table).
#[test]
fn loopback_steering_becomes_netdev_settings() {
    let mut m = machine(Ok("0"), "0", Ok(0));
    for (k, v) in [
        ("lo/queues/rx-0/rps_cpus", "0"),
        ("lo/queues/rx-0/rps_flow_cnt", "0"),
        (crate::steer::FLOW_ENTRIES, "0"),
    ] {
        m.knobs.insert(k.into(), Ok(v.into()));
    }
    let (c, _) = discover(&m, &rr());
    let rps = c.iter().find(|c| c.name == "rps-cpu1").expect("rps-cpu1");
    assert_eq!(rps.family, "rps");
    assert!(rps.settings.contains(&Setting::NetDev {
        name: "lo/queues/rx-0/rps_cpus".into(),
        value: "2".into()
    }));
    assert!(rps.settings.contains(&Setting::Sysctl {
        name: crate::steer::FLOW_ENTRIES.into(),
        value: "0".into()
    }));
    assert!(c.iter().any(|c| c.name == "rfs"));
}

/// A guest placement adds the guest's boot, module and NIC options; vhost-net only
/// where the host has it.
#[test]
fn a_guest_placement_adds_the_guests_own_remedies() {
    let guest = Target {
        placement: Some("guest:host-guest".into()),
        ..rr()
    };
    let mut m = machine(Ok("0"), "0", Ok(0));
    let (c, not) = discover(&m, &guest);
    let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
    for n in [
        "guest-idle-poll",
        "guest-nohz-off",
        "guest-halt-poll-200us",
        "guest-rx-ring-1024",
    ] {
        assert!(names.contains(&n), "{names:?}");
    }
    assert!(!names.contains(&"guest-vhost"));
    assert!(not.iter().any(|n| n.what.contains("vhost-net")));
    m.vhost_net = Ok(());
    let (c, _) = discover(&m, &guest);
    let vhost = c
        .iter()
        .find(|c| c.name == "guest-vhost")
        .expect("guest-vhost");
    assert_eq!(
        vhost.settings,
        [Setting::GuestVirtio {
            name: "vhost".into(),
            value: "on".into()
        }]
    );
}

/// Under haltpoll the menu governor is a candidate of the window's family (under menu
/// no window acts, so they never combine); not where menu already runs, where the
/// kernel lacks it, or for a stream (no wake-ups to speed up).
#[test]
fn the_menu_governor_is_offered_only_under_haltpoll() {
    let m = machine(Ok("0"), "0", Ok(2_000_000_000));
    let (c, _) = discover(&m, &rr());
    let menu = c
        .iter()
        .find(|c| c.name == "menu-governor")
        .expect("offered");
    assert_eq!(menu.family, "haltpoll.guest_halt_poll_ns");
    assert_eq!(
        menu.settings,
        vec![Setting::Governor {
            name: "menu".into()
        }]
    );
    let offered =
        |m: &Machine, t: &Target| discover(m, t).0.iter().any(|c| c.name == "menu-governor");
    let under_menu = Machine {
        cpuidle_governor: Some("menu".into()),
        ..m.clone()
    };
    assert!(!offered(&under_menu, &rr()));
    let no_menu = Machine {
        governors: Ok(vec!["haltpoll".into()]),
        ..m.clone()
    };
    assert!(!offered(&no_menu, &rr()));
    let stream = Target {
        kind: "stream".into(),
        ..rr()
    };
    assert!(!offered(&m, &stream));
}
