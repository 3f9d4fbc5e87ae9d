//! `explain`'s first line: the answer before the table — what a cross-CPU round trip takes
//! here, the largest share of it, the cheapest measured remedy that buys a real part of it
//! back, and how much the model leaves unexplained.

use super::model::{Component, Explanation, Remedy};

/// A remedy counts when it cuts the p50 by at least this much (percent): smaller changes
/// are within what tries of one measurement vary by here.
const MEANINGFUL_PCT: f64 = -20.0;

/// A component's name in words.
fn words(name: &str) -> &str {
    match name {
        "path" => "the path itself (system calls, TCP/IP, the message crossing CPUs)",
        "tcp_ip_stack" => "the TCP/IP stack",
        "socket_path" => "the socket calls",
        "wake_up" => "waking the blocked receivers",
        "idle_exit" => "bringing their CPUs out of idle",
        "wake_up_other" => "sending the wake-ups and scheduling the woken threads",
        other => other,
    }
}

/// The largest top-level component, and its largest part where that part is most of it.
fn largest(e: &Explanation) -> Option<(&Component, Option<&Component>)> {
    let top = e
        .components
        .iter()
        .filter(|c| c.part_of.is_none())
        .max_by(|a, b| a.us.total_cmp(&b.us))?;
    let part = e
        .components
        .iter()
        .filter(|c| c.part_of.as_deref() == Some(top.name.as_str()))
        .max_by(|a, b| a.us.total_cmp(&b.us))
        .filter(|p| p.us > top.us / 2.0);
    Some((top, part))
}

/// What the verdict says of the remedies: the one that cuts the p50 by a real amount for
/// the fewest added busy CPUs; where no such remedy's cost was measured, the largest cut,
/// not called the cheapest (the same rule as `tune`'s: no cheapest without a cost).
enum Pick<'a> {
    Cheapest(&'a Remedy),
    Uncosted(&'a Remedy),
    None,
}

fn pick(e: &Explanation) -> Pick<'_> {
    let added = |r: &Remedy| match (r.cpus_busy, r.cpus_busy_before) {
        (Some(a), Some(b)) => Some(a - b),
        _ => None,
    };
    let real = || {
        e.remedies
            .iter()
            .filter(|r| r.p50_change_pct <= MEANINGFUL_PCT)
    };
    let costed = real().filter_map(|r| Some((added(r)?, r))).min_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.p50_change_pct.total_cmp(&b.1.p50_change_pct))
    });
    if let Some((_, r)) = costed {
        return Pick::Cheapest(r);
    }
    match real().min_by(|a, b| a.p50_change_pct.total_cmp(&b.p50_change_pct)) {
        Some(r) => Pick::Uncosted(r),
        None => Pick::None,
    }
}

/// The verdict line; `None` where nothing was measured.
pub fn verdict(e: &Explanation) -> Option<String> {
    if e.measured_us <= 0.0 {
        return None;
    }
    let mut s = format!(
        "Verdict: a cross-CPU round trip here takes {:.1} µs (p50)",
        e.measured_us
    );
    if let Some((top, part)) = largest(e) {
        let pct = |us: f64| 100.0 * us / e.measured_us;
        s.push_str(&format!(
            "; {:.0}% of it is {}",
            pct(top.us),
            words(&top.name)
        ));
        if let Some(p) = part {
            s.push_str(&format!(
                ", most of that {} ({:.0}%)",
                words(&p.name),
                pct(p.us)
            ));
        }
    }
    let name = |r: &Remedy| r.what.split(" (").next().unwrap_or(&r.what).to_string();
    match pick(e) {
        Pick::Cheapest(r) => {
            let cost = match (r.cpus_busy, r.cpus_busy_before) {
                (Some(a), Some(b)) if (a - b).abs() < 0.05 => " at no added CPU".to_string(),
                (Some(a), Some(b)) => format!(" for {:+.1} busy CPUs", a - b),
                _ => String::new(),
            };
            s.push_str(&format!(
                "; the cheapest measured remedy is {}: p50 {:+.0}%{cost}",
                name(r),
                r.p50_change_pct
            ));
        }
        Pick::Uncosted(r) => s.push_str(&format!(
            "; the largest measured cut is {}: p50 {:+.0}% (no remedy's CPU cost was measured, so none is called the cheapest)",
            name(r),
            r.p50_change_pct
        )),
        Pick::None if !e.remedies.is_empty() => {
            s.push_str("; no measured remedy cuts the p50 by 20% or more")
        }
        Pick::None => {}
    }
    if let Some(r) = e.residual_pct {
        s.push_str(&format!(
            ". The model leaves {:.0}% of it unexplained.",
            r.abs()
        ));
    } else {
        s.push('.');
    }
    Some(s)
}
