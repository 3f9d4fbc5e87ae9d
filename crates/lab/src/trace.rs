//! `--trace`: tracepoint counts around a test's measured interval, on the CPUs the test
//! runs on (both sides pinned: those two; otherwise every online CPU), per unit of work.
//! The counting itself is `virtperf_measure::trace`.

use virtperf_measure::trace::{Counters, DEFAULT};
use virtperf_wire::{Outcome, TraceCounts};

use crate::plan::Plan;

/// Counters opened for one test.
pub(crate) struct Tracer {
    counters: Counters,
    cpus: Vec<u32>,
}

/// What the counters read at the stop.
pub(crate) struct Traced {
    cpus: Vec<u32>,
    deltas: std::collections::BTreeMap<String, u64>,
    missing: Vec<String>,
}

impl Tracer {
    /// Opens the default counters on the plan's CPUs.
    pub(crate) fn open(plan: &Plan) -> Tracer {
        let mut cpus: Vec<u32> = match (plan.client_cpu, plan.server_cpu) {
            (Some(a), Some(b)) => vec![a, b],
            _ => virtperf_measure::events::cpu_numbers(std::path::Path::new(
                "/sys/devices/system/cpu",
            ))
            .unwrap_or_default(),
        };
        cpus.sort_unstable();
        cpus.dedup();
        Tracer {
            counters: Counters::open(DEFAULT, &cpus),
            cpus,
        }
    }

    /// The start of the measured interval.
    pub(crate) fn start(&self) {
        self.counters.start();
    }

    /// The end of the measured interval.
    pub(crate) fn stop(self) -> Traced {
        let (deltas, failed) = self.counters.stop();
        let mut missing = self.counters.missing;
        missing.extend(failed);
        Traced {
            cpus: self.cpus,
            deltas,
            missing,
        }
    }
}

impl Traced {
    /// The counts per transaction (rr, crr) or per MB received (the rest).
    pub(crate) fn per_unit_of(self, o: &Outcome) -> TraceCounts {
        let (units, unit) = match o {
            Outcome::Rr(r) | Outcome::Crr(r) => (r.transactions as f64, "transaction"),
            Outcome::Stream(s) => (s.receiver_bytes as f64 / 1e6, "MB"),
            Outcome::Bulk(b) => (b.receiver_bytes as f64 / 1e6, "MB"),
            Outcome::Http(h) => (
                h.downloads.iter().map(|d| d.bytes).sum::<u64>() as f64 / 1e6,
                "MB",
            ),
        };
        TraceCounts {
            cpus: self.cpus,
            unit: unit.into(),
            per_unit: self
                .deltas
                .iter()
                .filter(|_| units > 0.0)
                .map(|(k, v)| (k.clone(), *v as f64 / units))
                .collect(),
            deltas: self.deltas,
            missing: self.missing,
        }
    }
}
