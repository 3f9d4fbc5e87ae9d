//! The remedies' rows: each against as-is, with what its own trials say of it (the send
//! size it used, the copies the kernel made all the same).

use virtperf_store::TrialRow;
use virtperf_wire::{Outcome, Workload};

use super::labels::{GRO_ON, REMEDIES, TSO_OFF};
use super::model::{Bound, Estimate, Remedy, SideCost};
use super::predict::{mean, CONFIDENCE};
use super::trials::{rate_summary, side_totals, stream_trials, why_missing, Effect, Trial};
use crate::decide::Interval;
use crate::stats::{summarize, Summary};

/// Every remedy's row against the as-is tries (`base`): its rate's ratio and what the
/// interval decides, the bound (or busier) side's CPU per MB under it, its added busy CPUs,
/// and what its trials say of it; a remedy not measured says why.
pub(super) fn remedies(
    trials: &[TrialRow],
    base: &[Trial],
    bound: &Bound,
    costs: &[SideCost],
) -> Vec<Remedy> {
    let b = rate_summary(base);
    let side = costs
        .iter()
        .find(|c| Some(c.role) == bound.side)
        .or_else(|| {
            costs
                .iter()
                .max_by(|a, b| a.busy_pct.mean.total_cmp(&b.busy_pct.mean))
        });
    REMEDIES
        .iter()
        // The veth's toggles are planned between namespaces only: elsewhere, with no trial
        // or skip of theirs, they are not listed (every other remedy is, measured or not).
        .filter(|label| {
            ![GRO_ON, TSO_OFF].contains(*label)
                || trials.iter().any(|t| t.trial.point_label == **label)
        })
        .map(|label| {
            let ts = stream_trials(trials, label);
            let rates: Vec<f64> = ts.iter().map(|t| t.mbps).collect();
            let r: Summary = summarize(&rates, CONFIDENCE);
            let cost = side.and_then(|s| mean(&side_totals(&ts, s.end, s.cpu)));
            if r.n == 0 {
                return Remedy {
                    label: (*label).into(),
                    mbps: None,
                    ratio: None,
                    ratio_interval: Interval::None {
                        why: "not measured".into(),
                    },
                    effect: "not measured",
                    bound_side_us_per_mb: None,
                    why_not: Some(why_missing(trials, label)),
                    note: None,
                    caveat: None,
                    send_size: None,
                    busy_cpus: None,
                    added_cpus: None,
                    added_cpus_interval: Interval::None {
                        why: "not measured".into(),
                    },
                };
            }
            let Effect {
                ratio,
                interval,
                effect,
            } = Effect::of(&b, &r);
            let (note, caveat) = copied_note(&ts).unzip();
            let (busy_cpus, added_cpus, added_cpus_interval) = added_cpus(base, &ts);
            Remedy {
                label: (*label).into(),
                mbps: Estimate::of(&rates),
                ratio,
                ratio_interval: interval,
                effect,
                bound_side_us_per_mb: cost,
                why_not: None,
                note,
                caveat,
                send_size: send_size(&ts).filter(|s| Some(*s) != send_size(base)),
                busy_cpus,
                added_cpus,
                added_cpus_interval,
            }
        })
        .collect()
}

/// Each trial's busy CPUs on this machine (cpuidle polling included), only where every
/// one of `ts` has its figure.
pub(super) fn busy_cpus_each(ts: &[Trial]) -> Option<Vec<f64>> {
    crate::cost::each_busy_cpus(&ts.iter().map(|t| t.r).collect::<Vec<_>>())
}

/// A remedy's busy CPUs, what it adds to as-is's and that difference's interval (the
/// cost side of "what raises it": halt polling buys its rate with a polling CPU).
fn added_cpus(base: &[Trial], ts: &[Trial]) -> (Option<f64>, Option<f64>, Interval) {
    let (Some(b), Some(r)) = (busy_cpus_each(base), busy_cpus_each(ts)) else {
        let why = "not measured: a try lacks this machine's busy CPUs (its CPU split or its cpuidle polling time)";
        return (
            busy_cpus_each(ts).and_then(|v| mean(&v)),
            None,
            Interval::None { why: why.into() },
        );
    };
    let (b, r) = (summarize(&b, CONFIDENCE), summarize(&r, CONFIDENCE));
    (
        Some(r.mean),
        Some(r.mean - b.mean),
        crate::decide::difference_interval(&b, &r, CONFIDENCE),
    )
}

/// What the kernel said of `MSG_ZEROCOPY` sends, where it copied some all the same: on
/// loopback it copies every one, yet the rate can change (fewer wake-ups per MB, other
/// segment sizes), and the verdict must not credit copies avoided that were not. The note
/// for the remedy's row, and the verdict's caveat, each saying as many as were copied.
fn copied_note(ts: &[Trial]) -> Option<(String, String)> {
    let mut z = virtperf_wire::ZeroCopyCounts::default();
    for t in ts {
        if let Outcome::Stream(o) = &t.r.outcome {
            z.add(o.zerocopy?);
        }
    }
    (z.copied > 0).then(|| {
        if z.copied == z.completed {
            (
                format!(
                    "the kernel copied every one of its {} sends all the same (a loopback, or a device without scatter-gather): not a copy avoided",
                    z.completed
                ),
                "its sends copied by the kernel all the same".into(),
            )
        } else {
            (
                format!(
                    "the kernel copied {} of its {} sends all the same (a device without scatter-gather on part of the path?)",
                    z.copied, z.completed
                ),
                format!(
                    "{} of its {} sends copied by the kernel all the same",
                    z.copied, z.completed
                ),
            )
        }
    })
}

/// The bytes per send of these trials (the first's: a label's trials share one plan).
fn send_size(ts: &[Trial]) -> Option<u32> {
    match &ts.first()?.r.workload {
        Workload::Stream(p) => Some(p.send_size),
        _ => None,
    }
}
