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

/// The originals of the cpuidle governor switch and the knob where only the governor keeps
/// the window from acting here (the haltpoll driver under `menu`, `ladder`, `teo`) and the
/// kernel has the haltpoll governor: the battery then measures switching to it with a
/// window ([`virtperf_report::explain::GOVERNOR_POLL`]) as a remedy. None elsewhere, or
/// where either cannot be written.
pub(crate) fn governor_remedy(
    knob: &virtperf_machine::knob::Knob,
    current: Option<u64>,
) -> Option<Vec<(virtperf_machine::knob::Knob, String)>> {
    use virtperf_measure::env;
    current?;
    env::halt_poll_inert_now()?;
    let driver = env::cpuidle_driver();
    if virtperf_wire::model::halt_poll_knob_inert(driver.as_deref(), Some("haltpoll")).is_some() {
        return None;
    }
    if !env::available_governors()?.iter().any(|g| g == "haltpoll") {
        return None;
    }
    let governor = virtperf_machine::knob::Knob::cpuidle_governor();
    let gov_orig = governor.probe().ok()?;
    let window_orig = knob.probe().ok()?;
    Some(vec![(governor, gov_orig), (knob.clone(), window_orig)])
}

/// The original of the cpuidle governor switch where the haltpoll governor runs and the
/// kernel has menu: the battery then measures the switch to menu as a remedy
/// ([`virtperf_report::explain::MENU_GOVERNOR`]: haltpoll with no window stops and restarts
/// the tick on every idle entry, menu keeps it through short ones). None elsewhere, or
/// where the switch cannot be written.
pub(crate) fn menu_remedy() -> Option<(virtperf_machine::knob::Knob, String)> {
    use virtperf_measure::env;
    if env::cpuidle_governor()? != "haltpoll"
        || !env::available_governors()?.iter().any(|g| g == "menu")
    {
        return None;
    }
    let governor = virtperf_machine::knob::Knob::cpuidle_governor();
    let orig = governor.probe().ok()?;
    Some((governor, orig))
}
