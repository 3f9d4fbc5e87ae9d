//! A side's counters at the two edges of its measured interval: system CPU (/proc/stat),
//! kernel events (with the virtio-net device's, in a guest) and its workers' own CPU. Both
//! sides close their window when the interval ends (the client on its clock, the agent on
//! the client's `End`), before either drains its last transactions, closes thousands of
//! connections or reports: what a unit of work costs is counted over the same interval its
//! units were (issue 39; at 15,000 flows the stop took 0.6 s of a 2 s test).

use std::time::{Duration, Instant};

use anyhow::Result;
use virtperf_measure::events::EventSnapshot;
use virtperf_measure::procs::Processes;
use virtperf_measure::ProcStat;
use virtperf_wire::{CpuDelta, EventCounts};

use crate::side::Ctl;

/// The start of a side's measured interval.
pub(crate) struct Window {
    nic: Option<String>,
    ev0: EventSnapshot,
    t0: ProcStat,
    others0: Processes,
    /// The side's own tools' processes (a `--capture` recorder), counted apart.
    tools: Vec<u32>,
    started: Instant,
}

/// What a side used over its measured interval.
pub(crate) struct Closed {
    pub elapsed: Duration,
    pub cpu: CpuDelta,
    pub events: EventCounts,
    /// The side's workers' CPU seconds over the interval (see [`Ctl::window_cpu_s`]).
    pub workers_cpu_s: Option<f64>,
    /// Every other user-space process's CPU seconds over the interval.
    pub others_cpu_s: f64,
    /// The side's own tools' CPU seconds over the interval; None without any.
    pub tools_cpu_s: Option<f64>,
}

impl Closed {
    /// This side's report of a test: the interval's counters, its joined workers' counts
    /// and CPU, what the kernel applied to its sockets. Both halves build theirs here (the
    /// client keeps its own, the agent sends its `Report`), so they cannot drift apart.
    pub(crate) fn report(
        self,
        joined: &crate::side::Joined,
        side: &Ctl,
        setup_s: Option<f64>,
    ) -> virtperf_wire::SideReport {
        virtperf_wire::SideReport {
            elapsed_s: self.elapsed.as_secs_f64(),
            cpu: self.cpu,
            threads: joined.cpu,
            window_cpu_s: self.workers_cpu_s,
            flows: joined.flow_stats(),
            transactions: joined.transactions(),
            events: Some(self.events),
            setup_s,
            sock: side.applied.lock().ok().and_then(|a| a.clone()),
            zerocopy: side.zerocopy.lock().ok().and_then(|z| *z),
            others_cpu_s: Some(self.others_cpu_s),
            capture_cpu_s: self.tools_cpu_s,
        }
    }
}

impl Window {
    /// Reads the counters now; `nic` is the interface the side's traffic crosses, `tools`
    /// the processes the side started for the test itself (its capture's recorder), whose
    /// CPU is not other work. Events bracket the CPU snapshot, so reading them costs the
    /// CPU figures nothing.
    pub(crate) fn open(nic: Option<String>, tools: Vec<u32>) -> Result<Window> {
        let ev0 = EventSnapshot::read_with_nic(nic.as_deref());
        // Outside the CPU snapshots, as the events are: scanning /proc costs them nothing.
        let others0 = Processes::read(std::process::id());
        let t0 = ProcStat::read()?;
        Ok(Window {
            nic,
            ev0,
            t0,
            others0,
            tools,
            started: Instant::now(),
        })
    }

    /// The window opened again now, on the same interface: the warm-up (`--omit`) before
    /// it is left out.
    pub(crate) fn reopen(self) -> Result<Window> {
        Window::open(self.nic, self.tools)
    }

    /// When the interval started.
    pub(crate) fn started(&self) -> Instant {
        self.started
    }

    /// Reads the counters again, at the interval's end: `workers` worker threads of `side`,
    /// pinned (for the events over one CPU) to `pinned`.
    pub(crate) fn close(self, side: &Ctl, workers: usize, pinned: Option<u32>) -> Result<Closed> {
        let workers_cpu_s = side.window_cpu_s(workers);
        let t1 = ProcStat::read()?;
        let elapsed = self.started.elapsed();
        let (others_cpu_s, tools_cpu_s) =
            Processes::read(std::process::id()).split_since(&self.others0, &self.tools);
        let events = self
            .ev0
            .delta(&EventSnapshot::read_with_nic(self.nic.as_deref()))
            .counts(pinned);
        Ok(Closed {
            elapsed,
            cpu: self.t0.delta(&t1),
            events,
            workers_cpu_s,
            others_cpu_s,
            tools_cpu_s: (!self.tools.is_empty()).then_some(tools_cpu_s),
        })
    }
}
