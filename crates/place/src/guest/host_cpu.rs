//! This host's CPUs over a test a guest drives: what the host paid for it.

/// This host's CPU and idle counters at one moment, for [`virtperf_wire::HostCpu`].
pub(super) struct HostSample {
    at: std::time::Instant,
    stat: virtperf_measure::cpu::ProcStat,
    events: virtperf_measure::events::EventSnapshot,
}

impl HostSample {
    /// Now; None where /proc/stat cannot be read.
    pub(super) fn take() -> Option<HostSample> {
        Some(HostSample {
            events: virtperf_measure::events::EventSnapshot::read(),
            stat: virtperf_measure::cpu::ProcStat::read().ok()?,
            at: std::time::Instant::now(),
        })
    }

    /// The host's CPUs from this sample to now.
    pub(super) fn finish(self) -> Option<virtperf_wire::HostCpu> {
        let stat = virtperf_measure::cpu::ProcStat::read().ok()?;
        let window_s = self.at.elapsed().as_secs_f64();
        let idle = self
            .events
            .delta(&virtperf_measure::events::EventSnapshot::read())
            .totals(None);
        let poll_s = match idle.get("idle_time_us_poll") {
            Some(us) => Some(*us as f64 / 1e6),
            None if idle.contains_key(virtperf_wire::counter::IDLE_ENTRIES) => Some(0.0),
            None if virtperf_measure::events::this_machine_never_polls() => Some(0.0),
            None => None,
        };
        Some(virtperf_wire::HostCpu {
            window_s,
            system: virtperf_measure::cpu::split(&self.stat.delta(&stat)),
            poll_s,
        })
    }
}
