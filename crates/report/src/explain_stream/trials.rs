//! The stored trials as the model reads them: one stream trial's figures, each side's CPU
//! split and counts per MB, and a remedy's effect on the rate. Shared by the model (the
//! parent) and the remedies' rows ([`super::remedy`]); it names no module that uses it.

use virtperf_store::TrialRow;
use virtperf_wire::{CpuShares, Outcome, SideCpu, TestResult};

use super::model::PerMb;
use super::predict::{mean, CONFIDENCE, NO_EFFECT_BAND};
use crate::decide::{ratio_effect, ratio_interval, Interval};
use crate::stats::{summarize, Summary};

/// One stored stream trial, read for the model.
pub(super) struct Trial<'a> {
    pub(super) r: &'a TestResult,
    pub(super) mb: f64,
    pub(super) window_s: f64,
    pub(super) mbps: f64,
}

pub(super) fn stream_trials<'a>(trials: &'a [TrialRow], label: &str) -> Vec<Trial<'a>> {
    trials
        .iter()
        .filter(|t| t.trial.point_label == label)
        .filter_map(|t| t.trial.result.as_ref())
        .filter_map(|r| match &r.outcome {
            Outcome::Stream(o) if o.receiver_bytes > 0 && o.elapsed_s > 0.0 => Some(Trial {
                r,
                mb: o.receiver_bytes as f64 / 1e6,
                window_s: o.elapsed_s,
                mbps: o.mbps,
            }),
            _ => None,
        })
        .collect()
}

/// Why the trials of `label` are missing: the first skipped or failed trial's reason.
pub(super) fn why_missing(trials: &[TrialRow], label: &str) -> String {
    let rows: Vec<&TrialRow> = trials
        .iter()
        .filter(|t| t.trial.point_label == label)
        .collect();
    if rows.is_empty() {
        // A run stored before the battery had this measurement, or stopped before it.
        return "not in this run: its battery did not plan it (an older virtperf's) or was stopped first".into();
    }
    rows.iter()
        .find_map(|t| t.trial.error.clone())
        .unwrap_or_else(|| format!("its {} trial(s) measured no stream", rows.len()))
}

/// (role, end, cpu) of the two sides: the sender first.
pub(super) fn sides_of(
    r: &TestResult,
    reverse: bool,
) -> Option<[(&'static str, &'static str, u32); 2]> {
    let (c, s) = (r.client_cpu?, r.server_cpu?);
    Some(if reverse {
        [("sender", "server", s), ("receiver", "client", c)]
    } else {
        [("sender", "client", c), ("receiver", "server", s)]
    })
}

pub(super) fn side_cpu<'a>(r: &'a TestResult, end: &str) -> Option<&'a SideCpu> {
    match end {
        "client" => Some(&r.cpu.client),
        _ => r.cpu.server.as_ref(),
    }
}

pub(super) fn shares(r: &TestResult, end: &str, cpu: u32) -> Option<CpuShares> {
    side_cpu(r, end)?.system.per_cpu.get(cpu as usize).copied()
}

/// µs per MB of `pct` percent of one CPU over the trial's window.
pub(super) fn per_mb(t: &Trial, pct: f64) -> f64 {
    pct / 100.0 * t.window_s * 1e6 / t.mb
}

pub(super) fn busy(s: &CpuShares) -> f64 {
    s.user_pct + s.system_pct + s.irq_pct + s.softirq_pct + s.unsampled_pct
}

/// A side's CPU µs per MB by kind, each the mean over the trials of `ts` with a split of
/// its CPU (one without is left out, not paired with another's); None where none has.
pub(super) fn split(ts: &[Trial], end: &str, cpu: u32) -> Option<PerMb> {
    let each: Vec<(&Trial, CpuShares)> = ts
        .iter()
        .filter_map(|t| shares(t.r, end, cpu).map(|s| (t, s)))
        .collect();
    let avg = |f: fn(&CpuShares) -> f64| {
        mean(
            &each
                .iter()
                .map(|(t, s)| per_mb(t, f(s)))
                .collect::<Vec<_>>(),
        )
    };
    Some(PerMb {
        total: avg(busy)?,
        user: avg(|s| s.user_pct)?,
        sys: avg(|s| s.system_pct)?,
        softirq: avg(|s| s.softirq_pct)?,
        irq: avg(|s| s.irq_pct)?,
        steal: avg(|s| s.steal_pct)?,
        unsampled: avg(|s| s.unsampled_pct)?,
    })
}

/// The data-moving system calls a side's loop counted: the sender's sends, the receiver's
/// receives.
pub(super) fn calls(role: &str) -> fn(&virtperf_wire::StreamFlow) -> Option<u64> {
    match role {
        "sender" => |f| f.sender_calls,
        _ => |f| f.receiver_calls,
    }
}

/// The TCP data segments a side counted (sender: out, receiver: in).
pub(super) fn segments(role: &str) -> fn(&virtperf_wire::StreamFlow) -> Option<u64> {
    match role {
        "sender" => |f| f.tcp.and_then(|t| t.data_segs_out),
        _ => |f| f.receiver_segs,
    }
}

/// A side's total CPU µs per MB in each of `ts`.
pub(super) fn side_totals(ts: &[Trial], end: &str, cpu: u32) -> Vec<f64> {
    ts.iter()
        .filter_map(|t| shares(t.r, end, cpu).map(|s| per_mb(t, busy(&s))))
        .collect()
}

/// A count every flow of every trial in `ts` carries, per MB received; None where a flow
/// lacks it (not counted there: said so, never read as 0).
pub(super) fn flow_count_per_mb(
    ts: &[Trial],
    count: impl Fn(&virtperf_wire::StreamFlow) -> Option<u64>,
) -> Option<f64> {
    let (mut n, mut mb) = (0u64, 0.0);
    for t in ts {
        let Outcome::Stream(o) = &t.r.outcome else {
            return None;
        };
        for f in &o.flows {
            n += count(f)?;
        }
        mb += t.mb;
    }
    (mb > 0.0).then(|| n as f64 / mb)
}

/// A remedy's rate against as-is: the ratio of means, its interval, and what the interval
/// decides (one rule for the remedies' table and the bound's counterfactual).
#[derive(Debug, Clone)]
pub(super) struct Effect {
    pub(super) ratio: Option<f64>,
    pub(super) interval: Interval,
    pub(super) effect: &'static str,
}

impl Effect {
    pub(super) fn of(base: &Summary, remedy: &Summary) -> Effect {
        let interval = ratio_interval(base, remedy, CONFIDENCE);
        let effect = ratio_effect(&interval, NO_EFFECT_BAND);
        Effect {
            ratio: (base.mean > 0.0).then(|| remedy.mean / base.mean),
            interval,
            effect,
        }
    }

    /// The ratio with its interval (or why none) and the decision, as the notes print it.
    pub(super) fn words(&self) -> String {
        let x = self
            .ratio
            .map_or("not measured".into(), |x| format!("×{x:.2}"));
        let i = self.interval.words(|v| format!("{v:.2}"));
        format!("{x} {i}, {}", self.effect)
    }
}

pub(super) fn rate_summary(ts: &[Trial]) -> Summary {
    summarize(&ts.iter().map(|t| t.mbps).collect::<Vec<_>>(), CONFIDENCE)
}

/// The 4 MiB buffers' effect on the rate, where any of their trials measured.
pub(super) fn effect_of(trials: &[TrialRow], base: &[Trial], label: &str) -> Option<Effect> {
    let r = rate_summary(&stream_trials(trials, label));
    (r.n > 0).then(|| Effect::of(&rate_summary(base), &r))
}
