//! The stream model's prediction and its residual, decided against the goal on the
//! residual's interval: one CPU at the bound side's paced cost per MB, or a shaped link's
//! payload rate. It names its siblings only, never the parent module, which calls it: the
//! dependency runs one way.

use super::model::{Bound, Model, PerMb, SideCost};
use crate::decide::Interval;
use crate::stats::summarize;

/// The model's goal on the residual, percent (issue 54), said when missed.
pub const RESIDUAL_GOAL_PCT: f64 = 10.0;
/// A remedy has "no measurable effect" only where its ratio's whole interval lies within
/// this share of ×1 either way (the model's own goal): the tries then rule out a larger
/// change. An interval that holds 1 but reaches past this band is "undecided": the tries
/// cannot tell a real change from none (two tries of a 17× gain gave [−8.3, 44.7]).
pub const NO_EFFECT_BAND: f64 = RESIDUAL_GOAL_PCT / 100.0;
/// The level of every interval of the stream explanation.
pub(super) const CONFIDENCE: f64 = 0.95;
/// Bytes a TCP segment costs on the wire of a veth beyond its payload: Ethernet 14, IPv4
/// 20, TCP 20 with timestamps 12.
const HEADER_BYTES: f64 = 66.0;

/// The mean of `xs`; None for none.
pub(super) fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// No prediction, and why (`note`): no interval either.
fn unpredicted(side: Option<&'static str>, note: String) -> Model {
    Model {
        side,
        predicted_mbps: None,
        residual_pct: None,
        ratio_interval: Interval::None {
            why: "no prediction".into(),
        },
        note,
    }
}

/// A link-bound stream's rate: the link's less each segment's headers, the segment size
/// from TCP's own count (not from the rate it predicts): the receiver's, over the same
/// interval as the bytes it counted (the sender stops counting while a shaped queue still
/// holds its last segments), else the sender's.
pub(super) fn link_model(link: f64, costs: &[SideCost], mbps_each: &[f64]) -> Model {
    let measured = mean(mbps_each).unwrap_or(f64::NAN);
    let count = |role: &str| {
        costs
            .iter()
            .find(|c| c.role == role)
            .and_then(|c| c.segments_per_mb)
    };
    let Some(per_seg) = count("receiver")
        .or_else(|| count("sender"))
        .filter(|s| *s > 0.0)
        .map(|s| 1e6 / s)
    else {
        return unpredicted(None, "not measured: TCP did not count the stream's segments, which the link's payload share needs".into());
    };
    let predicted = link * per_seg / (per_seg + HEADER_BYTES);
    let residual = 100.0 * (measured / predicted - 1.0);
    // The link's rate is set, not measured: the interval is the measured rate's alone.
    let ratio_interval = match crate::decide::interval_of(&summarize(mbps_each, CONFIDENCE)) {
        Interval::Bounded { low, high } => Interval::Bounded {
            low: low / predicted,
            high: high / predicted,
        },
        none => none,
    };
    Model {
        side: None,
        predicted_mbps: Some(predicted),
        residual_pct: Some(residual),
        note: format!(
            "the link at {link:.0} Mbit/s less {HEADER_BYTES:.0} header bytes per {per_seg:.0}-byte segment; {}",
            goal_note(&ratio_interval, "")
        ),
        ratio_interval,
    }
}

/// The prediction for the bound (or, unbound, the busier) side: one CPU at its paced cost
/// per MB, or the link's payload rate; with the residual and what its interval says.
pub(super) fn model(bound: &Bound, costs: &[SideCost], mbps_each: &[f64]) -> Model {
    let measured = mean(mbps_each).unwrap_or(f64::NAN);
    if let (true, Some(link)) = (bound.kind == "link", bound.link_mbps) {
        return link_model(link, costs, mbps_each);
    }
    let side = match bound.kind {
        "cpu" => costs.iter().find(|c| Some(c.role) == bound.side),
        "none" | "undecided" => costs
            .iter()
            .max_by(|a, b| a.busy_pct.mean.total_cmp(&b.busy_pct.mean)),
        _ => None,
    };
    let Some(side) = side else {
        return unpredicted(
            None,
            "not measured: flow control bounds this stream; the model predicts CPU bounds only"
                .into(),
        );
    };
    let Some(paced) = side.paced_us_per_mb.as_ref().filter(|e| e.mean > 0.0) else {
        return unpredicted(
            Some(side.role),
            format!(
                "not measured: no paced trial gave the {}'s cost per MB",
                side.role
            ),
        );
    };
    // One CPU-second is 1e6 µs: at `paced` µs per MB, one CPU moves 1e6 / paced MB/s.
    let predicted = 8.0 * 1e6 / paced.mean;
    let residual = 100.0 * (measured / predicted - 1.0);
    let each: Vec<f64> = side
        .paced_us_per_mb_tries
        .iter()
        .filter(|c| **c > 0.0)
        .map(|c| 8.0 * 1e6 / c)
        .collect();
    let ratio_interval = crate::decide::ratio_interval(
        &summarize(&each, CONFIDENCE),
        &summarize(mbps_each, CONFIDENCE),
        CONFIDENCE,
    );
    let why_outside = what_differs(side, paced.mean);
    Model {
        side: Some(side.role),
        predicted_mbps: Some(predicted),
        residual_pct: Some(residual),
        note: goal_note(&ratio_interval, &why_outside),
        ratio_interval,
    }
}

/// Where a side's cost per MB at the limit differs from its cost paced to half the rate, as
/// measured: the kinds of CPU time that moved most, and the counts per MB that changed (the
/// model's premise is that the cost per MB stays; this says which part did not).
fn what_differs(side: &SideCost, paced: f64) -> String {
    let m = &side.us_per_mb;
    let mut s = format!(
        ": the {}'s CPU per MB at the limit, {:.0} µs, against {paced:.0} µs at half rate",
        side.role, m.total
    );
    let Some(p) = &side.paced_split else {
        return s + " (its split by kind at half rate was not sampled)" + &counts_that_moved(side);
    };
    // The tick charges busy time to a kind by sampling: where it missed a tenth or more of
    // either window's busy time, the kinds' differences are mostly the misses'.
    let missed = |x: &PerMb| 100.0 * x.unsampled / x.total.max(f64::MIN_POSITIVE);
    let (at, off) = (missed(m), missed(p));
    if at >= 10.0 || off >= 10.0 {
        s += &format!(
            " (by kind not comparable: the tick charged no kind to {at:.0}% of the busy time at the limit, {off:.0}% at half rate)"
        );
        return s + &counts_that_moved(side);
    }
    let mut kinds = [
        ("sys", m.sys, p.sys),
        ("softirq", m.softirq, p.softirq),
        ("user", m.user, p.user),
        ("irq", m.irq, p.irq),
    ];
    kinds.sort_by(|a, b| (b.1 - b.2).abs().total_cmp(&(a.1 - a.2).abs()));
    let moved: Vec<String> = kinds
        .iter()
        .take(2)
        .filter(|(_, at, off)| (at - off).abs() >= 0.1 * (m.total - paced).abs().max(1.0))
        .map(|(k, at, off)| format!("{k} {at:.0} against {off:.0}"))
        .collect();
    if !moved.is_empty() {
        s += &format!(": {}", moved.join(", "));
    }
    s + &counts_that_moved(side)
}

/// The counts per MB at the limit against half rate's: a count that moved by a tenth or
/// more is part of what changed; one that held is said too, as ruled out.
fn counts_that_moved(side: &SideCost) -> String {
    let calls = if side.role == "sender" {
        "sends"
    } else {
        "receives"
    };
    let mut s = String::new();
    for (what, at, off) in [
        (calls, side.calls_per_mb, side.paced_calls_per_mb),
        (
            "TCP data segments",
            side.segments_per_mb,
            side.paced_segments_per_mb,
        ),
    ] {
        if let (Some(at), Some(off)) = (at, off.filter(|x| *x > 0.0)) {
            s += &if (at / off - 1.0).abs() >= 0.1 {
                format!("; {what} per MB {at:.0} against {off:.0}")
            } else {
                format!("; {what} per MB {at:.0} at both rates")
            };
        }
    }
    s
}

/// What the residual's interval says of the goal: within it where measured ÷ predicted lies
/// wholly within ±[`RESIDUAL_GOAL_PCT`], outside it (and `why`) where wholly past it,
/// undecided otherwise: a point residual inside the band with a paced cost that varied
/// ±45% over two tries is no evidence of a model within 10%.
pub(super) fn goal_note(i: &Interval, why_outside: &str) -> String {
    let band = RESIDUAL_GOAL_PCT / 100.0;
    match i {
        Interval::Bounded { low, high } if *low >= 1.0 - band && *high <= 1.0 + band => {
            format!("within the {RESIDUAL_GOAL_PCT:.0}% goal")
        }
        Interval::Bounded { low, high } if *high < 1.0 - band || *low > 1.0 + band => {
            format!("outside the {RESIDUAL_GOAL_PCT:.0}% goal{why_outside}")
        }
        Interval::Bounded { low, high } => format!(
            "undecided against the {RESIDUAL_GOAL_PCT:.0}% goal: the tries put the residual between {:+.0}% and {:+.0}% (more --tries may tell)",
            100.0 * (low - 1.0),
            100.0 * (high - 1.0)
        ),
        Interval::None { why } => {
            format!("undecided against the {RESIDUAL_GOAL_PCT:.0}% goal: no interval ({why})")
        }
    }
}
