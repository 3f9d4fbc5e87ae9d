//! Native against guest, term by term (`vm compare --explain --workloads stream`): both
//! stream explanations' terms side by side, the difference of each, and the term that
//! carries the tax.

use serde::Serialize;

use super::model::StreamExplanation;
use super::CONFIDENCE;
use crate::decide::{difference_interval, Interval};
use crate::stats::summarize;

/// One term of both explanations.
#[derive(Debug, Clone, Serialize)]
pub struct Term {
    /// What it is: `rate Mbit/s`, `receiver sys µs per MB`, `host vcpu threads µs per MB`.
    pub term: String,
    /// Natively (None: that side has no such term).
    pub native: Option<f64>,
    /// With the guest.
    pub guest: Option<f64>,
    /// guest − native, where both have it.
    pub difference: Option<f64>,
}

/// Both explanations side by side.
#[derive(Debug, Clone, Serialize)]
pub struct SideBySide {
    /// Every term.
    pub terms: Vec<Term>,
    /// The guest's rate ÷ the native rate − 1, percent (the tax on the rate).
    pub rate_change_pct: Option<f64>,
    /// Which term carries the tax, in words: the side whose CPU per MB grew most, where its
    /// growth's 95% interval lies above 0 and above the other side's; else why undecided.
    pub carrier: Option<String>,
    /// That side (`sender`/`receiver`) where its growth decided it; None when undecided.
    pub carrier_side: Option<&'static str>,
}

fn term(name: String, native: Option<f64>, guest: Option<f64>) -> Term {
    Term {
        difference: native.zip(guest).map(|(n, g)| g - n),
        term: name,
        native,
        guest,
    }
}

/// The terms of `native` and `guest`, their differences and the carrier of the tax.
pub fn side_by_side(native: &StreamExplanation, guest: &StreamExplanation) -> SideBySide {
    let mut terms = vec![term(
        "rate Mbit/s".into(),
        Some(native.mbps.mean),
        Some(guest.mbps.mean),
    )];
    for role in ["sender", "receiver"] {
        let side = |e: &StreamExplanation| e.sides.iter().find(|s| s.role == role).cloned();
        let (n, g) = (side(native), side(guest));
        type Pick = fn(&super::model::SideCost) -> f64;
        let picks: [(&str, Pick); 5] = [
            ("CPU", |s| s.us_per_mb.total),
            ("user", |s| s.us_per_mb.user),
            ("sys", |s| s.us_per_mb.sys),
            ("softirq", |s| s.us_per_mb.softirq),
            ("irq", |s| s.us_per_mb.irq),
        ];
        for (name, f) in picks {
            terms.push(term(
                format!("{role} {name} µs per MB"),
                n.as_ref().map(f),
                g.as_ref().map(f),
            ));
        }
    }
    if let Some(h) = &guest.host_view {
        for c in &h.classes {
            terms.push(term(
                format!("host {} threads µs per MB", c.class),
                None,
                Some(c.us_per_mb),
            ));
        }
    }
    let rate_change_pct =
        (native.mbps.mean > 0.0).then(|| 100.0 * (guest.mbps.mean / native.mbps.mean - 1.0));
    let (carrier_side, carrier) = match carrier(native, guest) {
        Some((side, words)) => (side, Some(words)),
        None => (None, None),
    };
    SideBySide {
        carrier,
        carrier_side,
        terms,
        rate_change_pct,
    }
}

/// A side's growth in CPU µs per MB, guest − native, with its interval over the tries.
struct Growth {
    role: &'static str,
    mean: f64,
    interval: Interval,
}

impl Growth {
    fn words(&self) -> String {
        let i = self.interval.words(|v| format!("{v:+.1}"));
        format!("{:+.1} {i}", self.mean)
    }
}

fn growths(native: &StreamExplanation, guest: &StreamExplanation) -> Vec<Growth> {
    let tries = |e: &StreamExplanation, role: &str| {
        let s = e.sides.iter().find(|s| s.role == role)?;
        let sum = summarize(&s.total_us_per_mb_tries, CONFIDENCE);
        (sum.n > 0).then_some(sum)
    };
    ["sender", "receiver"]
        .into_iter()
        .filter_map(|role| {
            let (n, g) = (tries(native, role)?, tries(guest, role)?);
            Some(Growth {
                role,
                mean: g.mean - n.mean,
                interval: difference_interval(&n, &g, CONFIDENCE),
            })
        })
        .collect()
}

/// The side whose CPU per MB grew most, named only where its growth's interval lies above
/// 0 and above the other side's growth's (the tries tell them apart), with the guest's vCPU
/// threads on this host beside; otherwise what was measured and why it is undecided.
fn carrier(
    native: &StreamExplanation,
    guest: &StreamExplanation,
) -> Option<(Option<&'static str>, String)> {
    let all = growths(native, guest);
    let grew = all.iter().max_by(|a, b| a.mean.total_cmp(&b.mean))?;
    let other = all.iter().find(|g| g.role != grew.role);
    let low = grew.interval.ends().map(|(low, _)| low);
    let apart = match (low, other.map(|o| o.interval.ends())) {
        (Some(low), Some(Some((_, high)))) => low > 0.0 && low > high,
        (Some(low), None) => low > 0.0,
        _ => false,
    };
    if !apart {
        let each = all
            .iter()
            .map(|g| format!("the {}'s CPU {} µs per MB", g.role, g.words()))
            .collect::<Vec<_>>()
            .join(", ");
        return Some((
            None,
            format!("undecided: {each}; no side's growth lies above 0 and above the other's (more --runs)"),
        ));
    }
    let role = grew.role;
    let mut s = format!(
        "the guest pays {} µs per MB on the {role}'s CPU",
        grew.words()
    );
    if let Some(h) = &guest.host_view {
        let vcpu = h.classes.iter().find(|c| c.class == "vcpu");
        let end = guest.sides.iter().find(|x| x.role == role).map(|x| x.end);
        if let (Some(v), Some(end)) = (vcpu, end) {
            if end == h.guest_end {
                s += &format!(
                    ", the guest end: its vCPU threads on this host used {:.1} µs per MB",
                    v.us_per_mb
                );
            }
        }
        if h.accel.as_deref() == Some("tcg") {
            s += "; under TCG QEMU emulates the guest's CPU: no VM exits to count";
        }
    }
    Some((Some(role), s))
}

/// The side-by-side table as printed.
pub fn side_by_side_text(s: &SideBySide, native: &str, guest: &str) -> String {
    let f = |v: Option<f64>| v.map_or("—".to_string(), |x| format!("{x:.1}"));
    let mut out = format!(
        "{:<34} {:>12} {:>12} {:>12}\n",
        "term", native, guest, "difference"
    );
    for t in &s.terms {
        out += &format!(
            "{:<34} {:>12} {:>12} {:>12}\n",
            t.term,
            f(t.native),
            f(t.guest),
            t.difference.map_or("—".into(), |d| format!("{d:+.1}"))
        );
    }
    if let Some(p) = s.rate_change_pct {
        out += &format!("\nThe rate with the guest: {p:+.1}% against {native}.\n");
    }
    if let Some(c) = &s.carrier {
        out += &format!("What carries it: {c}.\n");
    }
    out
}
