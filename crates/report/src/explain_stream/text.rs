//! The stream explanation as text: the verdict first, then each side's cost per MB, the
//! model's residual, the remedies and what was not tried.

use super::model::{Bound, Estimate, HostView, Remedy, SideCost, StreamExplanation};
use crate::decide::Interval;

/// A rate for people: Gbit/s from 1000 Mbit/s up.
pub(crate) fn rate(mbps: f64) -> String {
    if mbps >= 1000.0 {
        format!("{:.2} Gbit/s", mbps / 1000.0)
    } else {
        format!("{mbps:.0} Mbit/s")
    }
}

fn size(bytes: u32) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes}-byte")
    }
}

fn interval(e: &Estimate, f: impl Fn(f64) -> String) -> String {
    match &e.interval {
        Interval::Bounded { low, high } => {
            // A t-interval of few tries can reach below 0: say what it is.
            let note = if e.n == 2 || *low < 0.0 {
                format!(" (t-interval of {} tries)", e.n)
            } else {
                String::new()
            };
            format!("{} [{}, {}]{note}", f(e.mean), f(*low), f(*high))
        }
        Interval::None { why } => format!("{} ({why})", f(e.mean)),
    }
}

/// A remedy as people read it: its trial label without the workload, and the send size it
/// tried where that is not as-is's ("larger sends (1 MiB)").
pub(crate) fn name(r: &Remedy) -> String {
    let name = r.label.trim_start_matches("stream ");
    match r.send_size {
        Some(s) if s >= 1 << 20 && s.is_multiple_of(1 << 20) => format!("{name} ({} MiB)", s >> 20),
        Some(s) if s >= 1024 && s.is_multiple_of(1024) => format!("{name} ({} KiB)", s >> 10),
        Some(s) => format!("{name} ({s} bytes)"),
        None => name.into(),
    }
}

/// Whether a guest this battery booted ran on this machine, so that its busy CPUs hold
/// the guest's vCPU threads (not where the battery ran inside a VM you run: `both`).
fn guest_on_this_host(e: &StreamExplanation) -> bool {
    e.host_view.as_ref().is_some_and(|h| h.guest_end != "both")
}

/// Whose busy CPUs a remedy's row adds to.
fn whose_cpus(e: &StreamExplanation) -> &'static str {
    if guest_on_this_host(e) {
        "added on this host, the guest's vCPU threads included"
    } else {
        "added on this machine"
    }
}

/// What a remedy adds to this machine's busy CPUs: `+0.53 [+0.40, +0.66]`, or why unknown.
fn added_cpus(r: &Remedy) -> String {
    // -0.001 is printed as +0.00, not -0.00.
    let zeroed = |x: f64| if x.abs() < 0.005 { 0.0 } else { x };
    match (r.added_cpus.map(zeroed), &r.added_cpus_interval) {
        (Some(a), Interval::Bounded { low, high }) => format!("{a:+.2} [{low:+.2}, {high:+.2}]"),
        (Some(a), Interval::None { why }) => format!("{a:+.2} ({why})"),
        (None, Interval::None { why }) => why.clone(),
        (None, _) => "not measured".into(),
    }
}

/// The verdict's last clause, what raises the rate: every remedy whose ratio's interval lies
/// wholly above 1, highest ratio first, each with its interval (none is called the best:
/// that would need the remedies' own intervals apart); else that none was shown to, with
/// how the rest came out, and where some are undecided that more tries may tell.
pub(super) fn what_raises(remedies: &[Remedy]) -> String {
    // A remedy that raises the rate has a ratio: its interval decided so.
    let mut raising: Vec<(f64, &Remedy)> = remedies
        .iter()
        .filter(|r| r.effect == "raises")
        .filter_map(|r| Some((r.ratio?, r)))
        .collect();
    raising.sort_by(|a, b| b.0.total_cmp(&a.0));
    if !raising.is_empty() {
        let each: Vec<String> = raising
            .iter()
            .map(|(x, r)| {
                let i = match &r.ratio_interval {
                    Interval::Bounded { low, high } => format!(" [{low:.2}, {high:.2}]"),
                    Interval::None { .. } => String::new(),
                };
                // Where its trials say it did not do what its name says, the verdict says so.
                let caveat = r
                    .caveat
                    .as_ref()
                    .map_or(String::new(), |c| format!(" ({c})"));
                // A cost the tries show above none is part of the answer.
                let cpus = match (r.added_cpus, &r.added_cpus_interval) {
                    (Some(a), Interval::Bounded { low, high })
                        if *low > crate::explain::NO_COST_BAND =>
                    {
                        format!(" for {a:+.2} busy CPUs [{low:+.2}, {high:+.2}]")
                    }
                    _ => String::new(),
                };
                format!("{} ×{x:.2}{i}{caveat}{cpus}", name(r))
            })
            .collect();
        return format!("; measured to raise it: {}", each.join(", "));
    }
    let count = |e: &str| remedies.iter().filter(|r| r.effect == e).count();
    let parts: Vec<String> = [
        ("lowers", "lower it"),
        ("no measurable effect", "no measurable effect"),
        ("undecided", "undecided"),
    ]
    .iter()
    .filter(|(e, _)| count(e) > 0)
    .map(|(e, words)| format!("{} {words}", count(e)))
    .collect();
    match (parts.is_empty(), count("undecided") > 0) {
        (true, _) => "; no remedy was measured".into(),
        (false, true) => format!(
            "; no measured remedy is shown to raise it ({}: more --tries may tell)",
            parts.join(", ")
        ),
        (false, false) => format!("; no measured remedy raises it ({})", parts.join(", ")),
    }
}

/// The one-line answer: the rate, what bounds it and the figure that shows it.
/// `(send, flows)`: the bytes per send and the parallel flows, whose sum the rate is.
pub(super) fn verdict(
    (send, flows): (u32, u32),
    mbps: &Estimate,
    b: &Bound,
    costs: &[SideCost],
) -> String {
    let of_flows = if flows > 1 {
        format!(" of {flows} flows")
    } else {
        String::new()
    };
    let head = format!(
        "a {} stream{of_flows} runs at {} here",
        size(send),
        rate(mbps.mean)
    );
    match (b.kind, b.side) {
        ("cpu", Some(side)) => {
            let c = costs.iter().find(|c| c.role == side);
            let other = costs.iter().find(|c| c.role != side);
            let split = c.map_or(String::new(), |c| {
                let m = &c.us_per_mb;
                let share = |x: f64| 100.0 * x / m.total.max(f64::MIN_POSITIVE);
                let unsampled = share(m.unsampled);
                let unsampled = if unsampled >= 0.5 {
                    format!(", {unsampled:.0}% of no kind its tick sampled")
                } else {
                    String::new()
                };
                format!(
                    ": {:.0}% sys, {:.0}% softirq, {:.0}% user{unsampled} of its busy time",
                    share(m.sys),
                    share(m.softirq),
                    share(m.user)
                )
            });
            let idle = other.map_or(String::new(), |o| {
                format!(
                    "; the {}'s CPU is {:.0}% idle",
                    o.role,
                    (100.0 - o.busy_pct.mean).max(0.0)
                )
            });
            let calls = match (side, c.and_then(|c| c.calls_per_mb)) {
                ("sender", Some(n)) if b.dominant == Some("sys") && n > 0.0 => {
                    format!(
                        ", {n:.0} sends per MB (one system call per {:.0} bytes)",
                        1e6 / n
                    )
                }
                _ => String::new(),
            };
            let host = b
                .on_host
                .as_ref()
                .map_or(String::new(), |h| format!("; {h}"));
            let window = b
                .full_window
                .as_ref()
                .map_or(String::new(), |w| format!("; {w}"));
            format!(
                "{head}, bound by the {side}'s CPU ({}{split}{calls}{host}){idle}{window}",
                b.figure
            )
        }
        ("flow_control", _) => format!("{head}, bound by flow control: {}", b.figure),
        ("link", _) => format!("{head}, bound by the link: {}", b.figure),
        ("undecided", _) => format!("{head}, its bound undecided: {}", b.figure),
        _ => format!("{head}, with no single bound: {}", b.figure),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or("not measured".into(), |x| format!("{x:.digits$}"))
}

fn side_lines(c: &SideCost) -> String {
    let m = &c.us_per_mb;
    let mut busy = interval(&c.busy_pct, |x| format!("{x:.0}%"));
    // A CPU is at most 100% busy: a t-interval reaching past it is said to be one, as
    // one reaching below 0 is.
    if matches!(c.busy_pct.interval, Interval::Bounded { high, .. } if high > 100.0)
        && !busy.contains("t-interval")
    {
        busy.push_str(&format!(" (t-interval of {} tries)", c.busy_pct.n));
    }
    let mut s = format!("  {} ({} end, CPU {}): busy {busy}\n", c.role, c.end, c.cpu);
    // Busy time no tick charged to a kind is named where there was any, so the sum holds.
    let unsampled = if m.unsampled > 0.0 {
        format!(" + no kind sampled {:.1}", m.unsampled)
    } else {
        String::new()
    };
    s += &format!(
        "    CPU µs per MB: {:.1} = user {:.1} + sys {:.1} + softirq {:.1} + irq {:.1}{unsampled} (steal {:.1})\n",
        m.total, m.user, m.sys, m.softirq, m.irq, m.steal
    );
    s += &format!(
        "    of it the test's own threads: {} µs per MB\n",
        opt(c.threads_us_per_mb, 1)
    );
    let paced = c
        .paced_us_per_mb
        .as_ref()
        .map_or("not measured".into(), |e| {
            interval(e, |x| format!("{x:.1}"))
        });
    let paced_split = c.paced_split.as_ref().map_or(String::new(), |p| {
        let unsampled = if p.unsampled > 0.0 {
            format!(" + no kind sampled {:.1}", p.unsampled)
        } else {
            String::new()
        };
        format!(
            " = user {:.1} + sys {:.1} + softirq {:.1} + irq {:.1}{unsampled}",
            p.user, p.sys, p.softirq, p.irq
        )
    });
    s += &format!("    paced to half the rate: {paced} µs per MB{paced_split}\n");
    let per = |n: Option<f64>| match n.filter(|x| x.is_finite() && *x > 0.0) {
        Some(x) => format!("{x:.0} ({:.0} bytes each)", 1e6 / x),
        None => "not counted".into(),
    };
    s += &format!(
        "    {} per MB: {}; TCP data segments per MB: {}{}\n",
        if c.role == "sender" {
            "sends"
        } else {
            "receives"
        },
        per(c.calls_per_mb),
        per(c.segments_per_mb),
        c.retransmits_per_mb.map_or(String::new(), |r| format!(
            "; retransmitted per MB: {r:.3}{}",
            c.spurious_retransmits_per_mb
                .filter(|_| r > 0.0)
                .map_or(String::new(), |d| format!(
                    " ({d:.3} spurious: D-SACKed, not lost)"
                ))
        ))
    );
    s += &format!(
        "    IPIs received per MB: {}; idle entries per MB: {}\n",
        c.ipis_per_mb
            .map_or("not traced (--trace needs root)".into(), |x| format!(
                "{x:.2}"
            )),
        c.idle_entries_per_mb
            .map_or("not traced".into(), |x| format!("{x:.2}"))
    );
    s + &msr_line(c)
}

/// The side's CPU's MSR writes per MB that are VM exits in a KVM guest without APICv, from
/// the traced trial: what a wake-up or a timer costs it beyond its own kernel time.
fn msr_line(c: &SideCost) -> String {
    let count = |x: Option<f64>| x.map_or("not counted".into(), |x| format!("{x:.2}"));
    if c.icr_writes_per_mb.is_none() && c.tsc_deadline_writes_per_mb.is_none() {
        let traced = c.ipis_per_mb.is_some() || c.idle_entries_per_mb.is_some();
        return format!(
            "    MSR writes per MB: {}\n",
            if traced {
                "not counted (the traced trial has no msr:write_msr counts)"
            } else {
                "not traced"
            }
        );
    }
    format!(
        "    MSR writes per MB, each a VM exit in a KVM guest without APICv/posted interrupts: ICR (IPIs sent) {}, TSC-deadline (timer reprogrammed) {}\n",
        count(c.icr_writes_per_mb),
        count(c.tsc_deadline_writes_per_mb)
    )
}

/// The host's view of the guest end (or of the VM you run): its thread classes and KVM's
/// exits per MB, or why there are none.
fn host_lines(h: &HostView) -> String {
    let mut s = String::new();
    let accel = h.accel.as_deref().unwrap_or("accelerator unknown");
    s += &match h.guest_end {
        "both" => {
            format!("\nHost view (both ends in the VM, {accel}): its threads on its host\n")
        }
        end => {
            format!("\nHost view (the {end} end is a guest, {accel}): its threads on this host\n")
        }
    };
    for c in &h.classes {
        s += &format!(
            "  {:<6} {} thread(s): {:.0}% of a CPU, {:.1} µs per MB\n",
            c.class, c.threads, c.busy_pct, c.us_per_mb
        );
    }
    s += &match (&h.exits_per_mb, &h.exits_why) {
        (Some(x), _) => format!(
            "  VM exits per MB: {}\n",
            x.iter()
                .filter(|(_, v)| **v > 0.0)
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, why) => format!(
            "  VM exits per MB: not measured: {}\n",
            why.as_deref().unwrap_or("no reason given")
        ),
    };
    s
}

/// The explanation as printed by `virtperf explain --workload stream`.
pub fn text(e: &StreamExplanation) -> String {
    let mut s = format!("Verdict: {}.\n\n", e.verdict);
    s += &format!(
        "Rate: {} Mbit/s over {} ({} flow(s), {})\n",
        interval(&e.mbps, |x| format!("{x:.0}")),
        match e.mbps.n {
            1 => "1 try".to_string(),
            n => format!("{n} tries"),
        },
        e.flows,
        if e.reverse {
            "agent sends"
        } else {
            "client sends"
        }
    );
    s += &match e.busy_cpus {
        Some(b) => format!(
            "This machine's busy CPUs: {b:.2} (cpuidle polling included{})\n",
            if guest_on_this_host(e) {
                "; the guest's vCPU threads among them"
            } else {
                ""
            }
        ),
        None => "This machine's busy CPUs: not measured (a try lacks its CPU split or its cpuidle polling time)\n".into(),
    };
    if let (Some(r), Some(sb)) = (e.bound.rwnd_limited_pct, e.bound.sndbuf_limited_pct) {
        s += &format!(
            "Flow control (sender's TCP_INFO): receive-window limited {r:.1}%, send-buffer limited {sb:.1}% of busy time\n"
        );
    }
    s += "\nCost per MB received, each side (its CPU's time, other work on it included):\n";
    for c in &e.sides {
        s += &side_lines(c);
    }
    if let Some(h) = &e.host_view {
        s += &host_lines(h);
    }
    s += match e.bound.kind {
        "link" => {
            "\nModel (the link's rate less each segment's headers, against the measured rate):\n"
        }
        _ => "\nModel (one CPU at the paced cost per MB, against the measured rate):\n",
    };
    match (e.model.predicted_mbps, e.model.residual_pct) {
        (Some(p), Some(r)) => {
            s += &format!(
                "  the {} predicts {p:.0} Mbit/s; measured {:.0}; residual {r:+.1}% ({})\n",
                e.model.side.unwrap_or(match e.bound.kind {
                    "link" => "link",
                    _ => "busier side",
                }),
                e.mbps.mean,
                e.model.note
            )
        }
        _ => s += &format!("  {}\n", e.model.note),
    }
    s += &format!(
        "\nRemedies (each against as-is, interleaved; ratio with its 95% interval; busy CPUs {}):\n",
        whose_cpus(e)
    );
    for r in &e.remedies {
        let ratio = match (&r.ratio, &r.ratio_interval) {
            (Some(x), Interval::Bounded { low, high }) => format!("×{x:.3} [{low:.3}, {high:.3}]"),
            (Some(x), Interval::None { why }) => format!("×{x:.3} ({why})"),
            (None, _) => String::new(),
        };
        let which = if e.bound.side.is_some() {
            "bound"
        } else {
            "busier"
        };
        let mut cost = r.bound_side_us_per_mb.map_or(String::new(), |c| {
            format!("; {which} side {c:.1} µs per MB")
        });
        if r.ratio.is_some() {
            cost += &format!("; busy CPUs {}", added_cpus(r));
        }
        // After a figure, what it lacks follows it; alone in the row (no ratio, no cost), the
        // reason stands in the figure's column.
        let why = match r.why_not.as_ref() {
            Some(w) if ratio.is_empty() && cost.is_empty() => w.clone(),
            Some(w) => format!(": {w}"),
            None => String::new(),
        };
        s += &format!("  {:<30} {:<22} {ratio}{cost}{why}\n", name(r), r.effect);
        if let Some(n) = &r.note {
            s += &format!("  {:<30} {n}\n", "");
        }
    }
    if !e.not_tried.is_empty() {
        s += "\nNot tried here:\n";
        for n in &e.not_tried {
            s += &format!("  {}: {}\n", n.remedy, n.why);
        }
    }
    s
}
