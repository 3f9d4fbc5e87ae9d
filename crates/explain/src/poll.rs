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

/// Why the knob reaches no idle loop on this machine now (its cpuidle driver and governor,
/// [`virtperf_wire::model::halt_poll_knob_inert`]), or None where it acts.
pub(crate) fn inert_here() -> Option<String> {
    virtperf_wire::model::halt_poll_knob_inert(
        virtperf_measure::env::cpuidle_driver().as_deref(),
        virtperf_measure::env::cpuidle_governor().as_deref(),
    )
}

/// The knob's original value where the battery may set it: it exists (`current`), the
/// haltpoll governor reads it here ([`inert_here`]) and this process may write it; else why
/// not.
pub(crate) fn settable(
    knob: &virtperf_machine::knob::Knob,
    current: Option<u64>,
) -> anyhow::Result<String> {
    match (current, inert_here()) {
        (Some(_), Some(why)) => Err(anyhow::anyhow!("{POLL_KNOB} exists, but {why}")),
        _ => knob.probe(),
    }
}
