//! The verdict's words for remedies: costs said with their intervals, and no cheapest
//! where a real cut's cost was not measured.

use super::tests::{as_is, haltpoll_env, probe, remedy, rr, rr_trial, EVENTS};
use super::*;

/// "At no added CPU" rests on the tries' interval of what a remedy adds, not its mean: a
/// mean of +0.01 whose interval reaches +0.4 is said with that interval; one inside
/// ±0.05 is "no added CPU"; a remedy without an interval says so.
#[test]
fn no_added_cpu_is_said_only_where_the_interval_shows_it() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    let mut wide = remedy(
        "spinning receivers (rr --wait spin)",
        -60.0,
        Some((0.5, 0.51)),
    );
    wide.added_cpus_interval = crate::decide::Interval::Bounded {
        low: -0.38,
        high: 0.40,
    };
    e.remedies = vec![wide.clone()];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("spinning receivers: p50 -60% for +0.01 busy CPUs [-0.38, +0.40]")
            && !v.contains("no added CPU"),
        "{v}"
    );
    wide.added_cpus_interval = crate::decide::Interval::Bounded {
        low: -0.03,
        high: 0.04,
    };
    e.remedies = vec![wide.clone()];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("spinning receivers: p50 -60% at no added CPU [-0.03, +0.04]"),
        "{v}"
    );
    wide.added_cpus_interval = crate::decide::Interval::None {
        why: "one try".into(),
    };
    e.remedies = vec![wide];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("p50 -60% for +0.01 busy CPUs (no interval)"),
        "{v}"
    );
}

/// A real cut whose CPU cost was not read (idle=poll in a guest: its polling counts as idle)
/// beside a costed one: neither is called the cheapest, both are named, the uncosted saying
/// so (seen: "the cheapest measured remedy is both ends on one CPU" while idle=poll's -49%
/// had no cost).
#[test]
fn no_cheapest_where_a_real_cut_has_no_measured_cost() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    let mut idle_poll = remedy(
        "idle=poll on the guest's kernel command line (…)",
        -49.0,
        None,
    );
    idle_poll.added_cpus_interval = crate::decide::Interval::None {
        why: "some try's CPU time was not read".into(),
    };
    e.remedies = vec![
        remedy(
            "both ends on one CPU (rr --cpus 0,0)",
            -97.0,
            Some((1.25, 1.0)),
        ),
        idle_poll,
    ];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("2 measured remedies cut it by a real amount, and not every one's CPU cost was measured, so none is called the cheapest: both ends on one CPU: p50 -97% for -0.25 busy CPUs [-0.30, -0.20]; idle=poll on the guest's kernel command line: p50 -49% (its CPU cost not measured)")
            && !v.contains("the cheapest measured"),
        "{v}"
    );
}

/// One real cut is named as the one, not "the cheapest" (no other to be cheaper than).
#[test]
fn one_real_cut_is_the_one_not_the_cheapest() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 18.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    e.remedies = vec![
        remedy(
            "both ends on one CPU (rr --cpus 0,0)",
            -97.0,
            Some((1.25, 1.0)),
        ),
        remedy("busy polling (net.core…)", -5.0, Some((1.25, 1.3))),
    ];
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("; the one measured remedy that cuts it by 20% or more is both ends on one CPU: p50 -97% for -0.25 busy CPUs [-0.30, -0.20]")
            && !v.contains("cheapest"),
        "{v}"
    );
}

/// "Most of that" rests on the tries: said where the part's lowest figure exceeds half the
/// whole's highest; where their spreads overlap that half, the share is given and whether
/// it is most is left undecided.
#[test]
fn most_of_the_wake_up_is_said_only_where_the_tries_show_it() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 12.0));
    let mut e = explain(1, &haltpoll_env(), &t).expect("explains");
    let us = |e: &Explanation, n: &str| {
        e.components
            .iter()
            .find(|c| c.name == n)
            .map(|c| c.us)
            .expect("component")
    };
    let (top, part) = (us(&e, "wake_up"), us(&e, "idle_exit"));
    assert!(part > top / 2.0, "the fixture's idle exit {part} of {top}");
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("most of that their CPUs halting instead of polling"),
        "{v}"
    );
    let spread = |e: &mut Explanation, name: &str, lo: f64, hi: f64| {
        if let Some(c) = e.components.iter_mut().find(|c| c.name == name) {
            c.spread_us = Some([lo, hi]);
        }
    };
    // Tight tries: still most.
    spread(&mut e, "wake_up", top * 0.98, top * 1.02);
    spread(&mut e, "idle_exit", part * 0.98, part * 1.02);
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("most of that their CPUs halting instead of polling"),
        "{v}"
    );
    // The part's lowest try below half the whole's highest: undecided.
    spread(&mut e, "wake_up", top * 0.5, top * 2.0);
    spread(&mut e, "idle_exit", part * 0.3, part * 1.5);
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        !v.contains("most of that")
            && v.contains("of that their CPUs halting instead of polling")
            && v.contains("the spread of their tries leaves undecided"),
        "{v}"
    );
}

/// The idle exit in words by how it was measured: the knob's (halting against polling)
/// holds the IPI a polling CPU is never sent, the kept-awake one only the way out of idle.
#[test]
fn the_idle_exit_is_worded_by_how_it_was_measured() {
    let mut t = as_is(Some(0));
    t.push(probe("guest-poll-200us", WAKE_BLOCK, Some(200_000), 12.0));
    let e = explain(1, &haltpoll_env(), &t).expect("explains");
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(v.contains("their CPUs halting instead of polling"), "{v}");
    // No knob: the idle exit from keeping the CPUs awake (60 − 20 = 40 µs of a 40 µs wake-up).
    let mut t = as_is(None);
    t.push(rr_trial(
        AS_IS,
        RR_CROSS_AWAKE,
        None,
        rr(20.0, (1, 1), (0, 1), EVENTS),
    ));
    let e = explain(1, &Env::default(), &t).expect("explains");
    let v = crate::explain::verdict(&e).expect("a verdict");
    assert!(
        v.contains("bringing their CPUs out of idle") && !v.contains("halting instead"),
        "{v}"
    );
}
