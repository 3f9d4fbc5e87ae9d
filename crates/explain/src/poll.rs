//! The guest halt-polling knob both batteries try (the round trip's and the stream's), in a
//! module of its own so that each names it without naming the crate root, which names them.

/// The guest's halt-polling window the battery compares with no polling: cpuidle-haltpoll's
/// own default (and KVM's `halt_poll_ns`), long enough to cover a back-to-back round trip.
pub const POLL_WINDOW_NS: u64 = 200_000;
/// The knob.
pub const POLL_KNOB: &str = "haltpoll.guest_halt_poll_ns";

/// The window the knob holds now, in ns; None where it does not exist (or reads as no
/// number).
pub(crate) fn current(knob: &virtperf_machine::knob::Knob) -> Option<u64> {
    knob.read().ok().and_then(|v| v.trim().parse::<u64>().ok())
}

/// Why a battery cannot try the knob where it does not exist.
pub(crate) fn absent() -> String {
    format!("{POLL_KNOB} does not exist here (not a KVM guest with the cpuidle-haltpoll driver)")
}

/// The knob's original value where the battery may set it: it exists (`current`), the
/// haltpoll governor reads it here ([`virtperf_measure::env::halt_poll_inert_now`]) and
/// this process may write it; else why not.
pub(crate) fn settable(
    knob: &virtperf_machine::knob::Knob,
    current: Option<u64>,
) -> anyhow::Result<String> {
    match (current, virtperf_measure::env::halt_poll_inert_now()) {
        (Some(_), Some(why)) => Err(anyhow::anyhow!("{POLL_KNOB} exists, but {why}")),
        _ => knob.probe(),
    }
}
