//! The idle-exit term from the guest's halt-poll knob: when it is the term (the haltpoll
//! cpuidle governor reads it), when it is only a cross-check (no such governor, or no
//! cpuidle driver: the knob reaches no idle loop), and why it is missing.

use super::tests::{as_is, component, haltpoll_env, probe, rr, rr_trial, skipped, EVENTS};
use super::*;

#[test]
fn idle_exit_when_as_is_polls_off() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let idle = component(&e, "idle_exit").expect("measured");
    assert!((idle.us - 2.0 * (25.0 - 18.0)).abs() < 1e-9, "{idle:?}");
    assert!(idle.source.contains("guest-poll-200us"), "{}", idle.source);
}

/// The bug this replaces: with polling already on as-is, the model compared as-is with
/// itself and printed 0.0 as a measured part.
#[test]
fn idle_exit_when_as_is_already_polls() {
    let mut t = as_is(Some(200_000));
    t.push(probe("guest-poll-off", WAKE_BLOCK, Some(0), 31.0));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let idle = component(&e, "idle_exit").expect("measured");
    assert!((idle.us - 2.0 * (31.0 - 25.0)).abs() < 1e-9, "{idle:?}");
    assert!(idle.source.contains("guest-poll-off") && idle.source.contains("as-is"));
    let other = component(&e, "wake_up_other").expect("the rest of the wake-up");
    assert!((other.us - (40.0 - 12.0)).abs() < 1e-9, "{other:?}");
}

#[test]
fn idle_exit_missing_without_the_knob() {
    let mut t = as_is(None);
    t.push(skipped(
        "guest-poll",
        WAKE_BLOCK,
        "haltpoll.guest_halt_poll_ns does not exist here",
    ));
    let e = explain(1, &Env::default(), &t).expect("explains");
    assert!(component(&e, "idle_exit").is_none());
    // Without cpuidle-haltpoll the knob is never the term: why it gave nothing is on
    // record under its own name, beside the kept-awake trial's absence.
    let m = e
        .missing
        .iter()
        .find(|m| m.name == "idle_exit_knob")
        .expect("named");
    assert!(m.reason.contains("no guest halt-polling knob"), "{m:?}");
    assert!(e
        .missing
        .iter()
        .any(|m| m.name == "idle_exit (CPUs kept awake)"));
}

#[test]
fn idle_exit_missing_when_the_knob_cannot_be_written() {
    let mut t = as_is(Some(200_000));
    t.push(skipped(
        "guest-poll",
        WAKE_BLOCK,
        "haltpoll.guest_halt_poll_ns: Permission denied (run as root)",
    ));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    assert!(
        component(&e, "idle_exit").is_none(),
        "one side is not a measurement"
    );
    let m = e
        .missing
        .iter()
        .find(|m| m.name == "idle_exit")
        .expect("named");
    assert!(
        m.reason.contains("polling off was not measured") && m.reason.contains("Permission denied"),
        "{m:?}"
    );
}

#[test]
fn an_inert_knob_is_named_in_the_source() {
    let mut t = as_is(Some(200_000));
    t.push(probe("guest-poll-off", WAKE_BLOCK, Some(0), 25.5));
    let e = explain(1, &Env::default(), &t).expect("explains");
    // Measured both ways, but an inert knob is a cross-check, never the term.
    assert!(component(&e, "idle_exit").is_none(), "{:?}", e.components);
    let idle = e
        .cross_checks
        .iter()
        .find(|c| c.name == "idle_exit_knob")
        .expect("measured both ways");
    assert!(idle.source.contains("no cpuidle driver"), "{}", idle.source);
}

/// The as-is trials with polling on, the knob's polling-off probe at 25.1 µs, and the
/// cross-CPU rr with both CPUs kept awake at `awake_p50` µs.
fn knob_and_awake(awake_p50: f64) -> Vec<TrialRow> {
    let mut t = as_is(Some(200_000));
    t.push(probe("guest-poll-off", WAKE_BLOCK, Some(0), 25.1));
    t.push(rr_trial(
        AS_IS,
        RR_CROSS_AWAKE,
        None,
        rr(awake_p50, (1, 1), (0, 1), EVENTS),
    ));
    t
}

/// An inert knob (no haltpoll cpuidle driver) gives way to the awake measurement; its
/// difference stays as a cross-check. Where the knob works, the awake figure is the check.
#[test]
fn an_inert_knob_gives_way_to_cpus_kept_awake() {
    let t = knob_and_awake(55.0);
    let e = explain(1, &Env::default(), &t).expect("explains");
    let idle = component(&e, "idle_exit").expect("awake");
    assert!((idle.us - 5.0).abs() < 0.1, "{idle:?}");
    assert!(e.cross_checks.iter().any(|c| c.name == "idle_exit_knob"));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    assert!(component(&e, "idle_exit")
        .expect("knob")
        .source
        .contains("guest_halt_poll_ns"));
    assert!(e.cross_checks.iter().any(|c| c.name == "idle_exit_awake"));
}

/// An inert knob is never the idle exit, even where keeping the CPUs awake gave none
/// (the spinners made the round trip slower, as on a machine whose vCPUs share host CPUs):
/// the knob's difference is a cross-check, the idle exit missing with both figures.
#[test]
fn an_inert_knob_is_no_idle_exit_where_awake_gives_none() {
    let t = knob_and_awake(70.0);
    let e = explain(1, &Env::default(), &t).expect("explains");
    assert!(component(&e, "idle_exit").is_none(), "{:?}", e.components);
    assert!(
        component(&e, "wake_up_other").is_none(),
        "{:?}",
        e.components
    );
    assert!(e.cross_checks.iter().any(|c| c.name == "idle_exit_knob"));
    let m = e
        .missing
        .iter()
        .find(|m| m.name == "idle_exit (CPUs kept awake)")
        .expect("named missing");
    assert!(
        m.reason.contains("(70.0") && m.reason.contains("is no faster than as-is"),
        "{m:?}"
    );
    // Where the knob reaches the idle loop, it stays the term.
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    assert!(component(&e, "idle_exit").is_some(), "{:?}", e.components);
}

/// The haltpoll *driver* with another governor (switched in `current_governor`): nothing
/// reads the knob, so its difference is a cross-check and the CPUs kept awake give the
/// term; the governor switch is named as the remedy, the driver's reboot is not.
#[test]
fn the_haltpoll_driver_under_another_governor_is_an_inert_knob() {
    let t = knob_and_awake(55.0);
    let env = Env {
        cpuidle_governor: Some("menu".into()),
        halt_poll: [(
            "haltpoll.guest_halt_poll_ns".to_string(),
            "200000".to_string(),
        )]
        .into(),
        ..haltpoll_env()
    };
    let e = explain(1, &env, &t).expect("explains");
    let idle = component(&e, "idle_exit").expect("awake");
    assert!(idle.source.contains("SCHED_IDLE"), "{idle:?}");
    let knob = e
        .cross_checks
        .iter()
        .find(|c| c.name == "idle_exit_knob")
        .expect("measured both ways");
    assert!(knob.source.contains("governor is menu"), "{}", knob.source);
    let named = e.remedies_named.join("\n");
    assert!(named.contains("haltpoll cpuidle governor"), "{named}");
    assert!(!named.contains("cpuidle_haltpoll.force"), "{named}");
    // With the governor that reads it, the knob is the term again.
    let env = Env {
        cpuidle_governor: Some("haltpoll".into()),
        ..env
    };
    let e = explain(1, &env, &t).expect("explains");
    assert!(component(&e, "idle_exit")
        .expect("knob")
        .source
        .contains("guest_halt_poll_ns"));
}

/// Where the battery switched to the haltpoll governor with a window (only the governor
/// kept the window from acting), that is a measured remedy against as-is, with its own
/// words, and no longer named among those not tried; its trials carry no window, so the
/// idle-exit term is still the CPUs kept awake. Tried and failed: missing, with why.
#[test]
fn the_governor_switch_is_a_measured_remedy_not_a_term() {
    let env = Env {
        cpuidle_governor: Some("menu".into()),
        halt_poll: [("haltpoll.guest_halt_poll_ns".to_string(), "0".to_string())].into(),
        ..haltpoll_env()
    };
    let mut t = knob_and_awake(55.0);
    t.push(rr_trial(
        GOVERNOR_POLL,
        RR_CROSS_BLOCK,
        None,
        rr(15.0, (1, 1), (0, 1), EVENTS),
    ));
    let e = explain(1, &env, &t).expect("explains");
    let r = e
        .remedies
        .iter()
        .find(|r| {
            r.what
                .starts_with("the haltpoll cpuidle governor with guest halt polling 200 µs")
        })
        .unwrap_or_else(|| panic!("not a remedy: {:?}", e.remedies));
    assert!((r.p50_us - 15.0).abs() < 0.1, "{r:?}");
    assert!(r.p50_change_pct < -50.0, "{r:?}");
    let named = e.remedies_named.join("\n");
    assert!(!named.contains("haltpoll cpuidle governor"), "{named}");
    let idle = component(&e, "idle_exit").expect("awake");
    assert!(idle.source.contains("SCHED_IDLE"), "{idle:?}");
    // Tried, but its trial failed: missing with the reason, not silently gone.
    let mut t = knob_and_awake(55.0);
    t.push(skipped(
        GOVERNOR_POLL,
        RR_CROSS_BLOCK,
        "cannot set cpuidle.governor",
    ));
    let e = explain(1, &env, &t).expect("explains");
    assert!(!e.remedies.iter().any(|r| r.what.contains("governor")));
    let m = e
        .missing
        .iter()
        .find(|m| m.name == GOVERNOR_POLL)
        .unwrap_or_else(|| panic!("{:?}", e.missing));
    assert!(m.reason.contains("cannot set cpuidle.governor"), "{m:?}");
}

/// Under the haltpoll governor, the battery's switch to menu is a measured remedy in its
/// own words, never a window of the decomposition (its trials carry none).
#[test]
fn the_menu_switch_is_a_measured_remedy() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    t.push(rr_trial(
        MENU_GOVERNOR,
        RR_CROSS_BLOCK,
        None,
        rr(45.0, (1, 1), (0, 1), EVENTS),
    ));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let r = e
        .remedies
        .iter()
        .find(|r| r.what.starts_with("the menu cpuidle governor"))
        .unwrap_or_else(|| panic!("not a remedy: {:?}", e.remedies));
    assert!((r.p50_us - 45.0).abs() < 0.1, "{r:?}");
    let idle = component(&e, "idle_exit").expect("the knob's term");
    assert!(
        idle.source.contains("guest-poll-200us") && !idle.source.contains(MENU_GOVERNOR),
        "{}",
        idle.source
    );
}
