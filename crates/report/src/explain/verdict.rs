//! `explain`'s first line: the answer before the table — what a cross-CPU round trip takes
//! here, the largest share of it, the cheapest measured remedy that buys a real part of it
//! back, and how much the model leaves unexplained.

use super::model::{Component, Explanation, Remedy};
use super::tries_difference;
use crate::decide::{bound, Interval, Outcome};

/// A remedy counts when it cuts the p50 by at least this much (percent): smaller changes
/// are within what tries of one measurement vary by here.
const MEANINGFUL_PCT: f64 = -20.0;

/// A component's name in words. The idle exit measured with the halt-poll knob (halting
/// against polling; its source names the knob) holds the IPI a polling CPU is never sent
/// as well as the way out of idle (`awake_ipis`: about a third of it on this project's
/// Intel guest); the one measured by keeping the CPUs awake holds only the latter.
fn component_words(c: &Component) -> &str {
    if c.name == "idle_exit" && c.source.contains("guest_halt_poll_ns") {
        return "their CPUs halting instead of polling";
    }
    words(&c.name)
}

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

/// The largest top-level component, and its largest part where that part is most of it by
/// their medians, with whether their tries show it: the part's lowest figure above half
/// the whole's highest, where both have a spread (one try a side has none to hold it to).
fn largest(e: &Explanation) -> Option<(&Component, Option<(&Component, bool)>)> {
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
        .filter(|p| p.us > top.us / 2.0)
        .map(|p| {
            let shown = match (p.spread_us, top.spread_us) {
                (Some([low, _]), Some([_, high])) => low > high / 2.0,
                _ => true,
            };
            (p, shown)
        });
    Some((top, part))
}

/// What the verdict says of the remedies: the one that cuts the p50 by a real amount for
/// the fewest added busy CPUs; where no such remedy's cost was measured, the largest cut,
/// not called the cheapest (the same rule as `tune`'s: no cheapest without a cost). A cut
/// is real when the whole interval of its p50 ratio over the tries lies at or below
/// 1 + [`MEANINGFUL_PCT`]; the largest cut whose interval cannot tell is named undecided.
/// A remedy is the cheapest only where every other real one's tries show it dearer (the
/// interval of their busy CPUs' difference lies above 0); the rest are tied with it. Where
/// some real cut's cost was not measured, none is the cheapest: all are named.
enum Pick<'a> {
    Cheapest(&'a Remedy),
    /// The lowest mean cost first, then those whose tries do not show them dearer.
    Tied(Vec<&'a Remedy>),
    /// Real cuts, some with no measured cost: none can be called the cheapest (costed first,
    /// lowest mean cost first, then the uncosted by their cut).
    PartlyCosted(Vec<&'a Remedy>),
    Uncosted(&'a Remedy),
    Undecided(&'a Remedy),
    /// None shown; `true` where every remedy's interval rules such a cut out.
    None(bool),
}

/// Whether `r`'s tries show a cut of at least [`MEANINGFUL_PCT`] (met), rule it out (not
/// met), or cannot tell (undecided, also with one try).
fn cut(r: &Remedy) -> Outcome {
    bound(&r.p50_ratio_interval, 1.0 + MEANINGFUL_PCT / 100.0, true)
}

/// The busy CPUs `r` adds to the as-is rr, where both were measured.
fn added(r: &Remedy) -> Option<f64> {
    Some(r.cpus_busy? - r.cpus_busy_before?)
}

/// Whether `rival`'s tries show it keeping more CPUs busy than `low`'s (the difference's
/// interval lies wholly above 0); not with a try short of an interval.
fn dearer(low: &Remedy, rival: &Remedy) -> bool {
    let (Some(a), Some(b)) = (&low.cpus_busy_tries, &rival.cpus_busy_tries) else {
        return false;
    };
    matches!(tries_difference(a, b), Interval::Bounded { low, .. } if low > 0.0)
}

fn pick(e: &Explanation) -> Pick<'_> {
    let real = || e.remedies.iter().filter(|r| cut(r) == Outcome::Met);
    let mut costed: Vec<(f64, &Remedy)> = real().filter_map(|r| Some((added(r)?, r))).collect();
    costed.sort_by(|a, b| {
        a.0.total_cmp(&b.0)
            .then(a.1.p50_change_pct.total_cmp(&b.1.p50_change_pct))
    });
    let mut uncosted: Vec<&Remedy> = real().filter(|r| added(r).is_none()).collect();
    if !costed.is_empty() && !uncosted.is_empty() {
        uncosted.sort_by(|a, b| a.p50_change_pct.total_cmp(&b.p50_change_pct));
        let mut all: Vec<&Remedy> = costed.iter().map(|c| c.1).collect();
        all.extend(uncosted);
        return Pick::PartlyCosted(all);
    }
    if let Some(&(_, low)) = costed.first() {
        let tied: Vec<&Remedy> = costed
            .iter()
            .map(|c| c.1)
            .filter(|r| std::ptr::eq(*r, low) || !dearer(low, r))
            .collect();
        return if tied.len() == 1 {
            Pick::Cheapest(low)
        } else {
            Pick::Tied(tied)
        };
    }
    if let Some(r) = real().min_by(|a, b| a.p50_change_pct.total_cmp(&b.p50_change_pct)) {
        return Pick::Uncosted(r);
    }
    let unsure = e
        .remedies
        .iter()
        .filter(|r| cut(r) == Outcome::Undecided && r.p50_change_pct <= MEANINGFUL_PCT)
        .min_by(|a, b| a.p50_change_pct.total_cmp(&b.p50_change_pct));
    match unsure {
        Some(r) => Pick::Undecided(r),
        None => Pick::None(e.remedies.iter().all(|r| cut(r) == Outcome::NotMet)),
    }
}

/// Busy CPUs a remedy may add or save and still be said to cost none: a twentieth of a CPU.
pub(crate) const NO_COST_BAND: f64 = 0.05;

/// A remedy's cut and cost in words: `p50 -78% for +1.10 busy CPUs [+0.95, +1.25]` (the
/// point in the interval's digits: "+0.2 [+0.17, +0.19]" read as a point outside it), and
/// `… at no added CPU [-0.02, +0.03]` only where the tries' interval of what it adds lies
/// within [`NO_COST_BAND`] of 0 (a mean near 0 with a wide interval is not "no cost").
fn cut_and_cost(r: &Remedy) -> String {
    let cost = match (added(r), &r.added_cpus_interval) {
        (Some(_), Interval::Bounded { low, high })
            if low.abs() <= NO_COST_BAND && high.abs() <= NO_COST_BAND =>
        {
            format!(" at no added CPU [{low:+.2}, {high:+.2}]")
        }
        (Some(a), Interval::Bounded { low, high }) => {
            format!(" for {a:+.2} busy CPUs [{low:+.2}, {high:+.2}]")
        }
        (Some(a), Interval::None { .. }) => format!(" for {a:+.2} busy CPUs (no interval)"),
        (None, _) => " (its CPU cost not measured)".to_string(),
    };
    format!("p50 {:+.0}%{cost}", r.p50_change_pct)
}

/// A remedy's p50 ratio interval in words: `×[0.12, 0.35]`, or why there is none.
pub(super) fn ratio_words(i: &Interval) -> String {
    match i {
        Interval::Bounded { low, high } => format!("×[{low:.2}, {high:.2}]"),
        Interval::None { why } => format!("no interval ({why})"),
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
            component_words(top)
        ));
        match part {
            Some((p, true)) => s.push_str(&format!(
                ", most of that {} ({:.0}%)",
                component_words(p),
                pct(p.us)
            )),
            Some((p, false)) => s.push_str(&format!(
                ", of that {} {:.0}% (whether that is most of it, the spread of their tries leaves undecided)",
                component_words(p),
                pct(p.us)
            )),
            None => {}
        }
    }
    let name = |r: &Remedy| r.what.split(" (").next().unwrap_or(&r.what).to_string();
    match pick(e) {
        // One real cut is no comparison: "cheapest" would claim one.
        Pick::Cheapest(r) if e.remedies.iter().filter(|x| cut(x) == Outcome::Met).count() == 1 => {
            s.push_str(&format!(
                "; the one measured remedy that cuts it by {:.0}% or more is {}: {}",
                -MEANINGFUL_PCT,
                name(r),
                cut_and_cost(r)
            ))
        }
        Pick::Cheapest(r) => s.push_str(&format!(
            "; the cheapest measured remedy is {}: {}",
            name(r),
            cut_and_cost(r)
        )),
        Pick::Tied(rs) => s.push_str(&format!(
            "; {} measured remedies cut it by a real amount, and their tries cannot tell which costs less CPU (more --tries): {}",
            rs.len(),
            rs.iter()
                .map(|r| format!("{}: {}", name(r), cut_and_cost(r)))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        Pick::PartlyCosted(rs) => s.push_str(&format!(
            "; {} measured remedies cut it by a real amount, and not every one's CPU cost was measured, so none is called the cheapest: {}",
            rs.len(),
            rs.iter()
                .map(|r| format!("{}: {}", name(r), cut_and_cost(r)))
                .collect::<Vec<_>>()
                .join("; ")
        )),
        Pick::Uncosted(r) => s.push_str(&format!(
            "; the largest measured cut is {}: p50 {:+.0}% (no remedy's CPU cost was measured, so none is called the cheapest)",
            name(r),
            r.p50_change_pct
        )),
        Pick::Undecided(r) => s.push_str(&format!(
            "; the largest measured cut, {}: p50 {:+.0}%, is undecided: its tries' p50 ratio {} does not rule out a cut under {:.0}% (more --tries)",
            name(r),
            r.p50_change_pct,
            ratio_words(&r.p50_ratio_interval),
            -MEANINGFUL_PCT
        )),
        Pick::None(_) if e.remedies.is_empty() => {}
        Pick::None(true) => s.push_str("; no measured remedy cuts the p50 by 20% or more"),
        Pick::None(false) => {
            s.push_str("; no measured remedy is shown to cut the p50 by 20% or more (more --tries could tell)")
        }
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
