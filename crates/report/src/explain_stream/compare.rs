//! Native against guest, term by term (`vm compare --explain --workloads stream`): both
//! stream explanations' terms side by side, the difference of each, and the term that
//! carries the tax.

use serde::Serialize;

use super::model::StreamExplanation;

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
    /// Which term carries the tax, in words (the side whose CPU per MB grew most).
    pub carrier: Option<String>,
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
    SideBySide {
        carrier: carrier(&terms, guest),
        terms,
        rate_change_pct,
    }
}

/// The side whose CPU per MB grew most, with the guest's vCPU threads on this host beside.
fn carrier(terms: &[Term], guest: &StreamExplanation) -> Option<String> {
    let grew = terms
        .iter()
        .filter(|t| t.term.ends_with(" CPU µs per MB"))
        .filter_map(|t| t.difference.map(|d| (t, d)))
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let role = grew.0.term.split(' ').next().unwrap_or("");
    let mut s = format!(
        "the guest pays {:+.1} µs per MB on the {role}'s CPU",
        grew.1
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
    Some(s)
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
