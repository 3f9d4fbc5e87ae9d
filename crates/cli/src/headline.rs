//! The built-in experiment's answer in words (`virtperf run` without a spec): after its
//! tables, the headline ratio with its confidence interval, what this machine is, and the
//! commands that answer "why" and "how much slower in a VM".

use virtperf_report::decide::{self, Interval, Outcome};
use virtperf_report::stats::Summary;
use virtperf_report::summary::PointSummary;
use virtperf_store::TrialRow;

/// The rr point pinned to `cpus`: the summary of its tries' p50s, and the p50 of all their
/// round trips pooled (what its table prints), where the histograms were merged.
fn rr_at<'a>(points: &'a [PointSummary], cpus: &str) -> Option<Trip<'a>> {
    let p = points
        .iter()
        .find(|p| p.workload == "rr" && p.params["cpus"].as_str() == Some(cpus))?;
    let c = p.configs.first()?;
    let tries = c
        .metrics
        .iter()
        .find(|m| m.name == "p50_us")
        .map(|m| &m.summary)
        .filter(|s| s.n > 0)?;
    Some(Trip {
        tries,
        pooled: c.latency.as_ref().map(|l| l.p50_us),
    })
}

/// One rr point's median two ways: the headline's ratio and its interval come from the
/// tries' p50s (each try one sample), the table pools every round trip of the tries.
#[derive(Debug, Clone, Copy)]
struct Trip<'a> {
    tries: &'a Summary,
    pooled: Option<f64>,
}

/// How the cross-CPU round trips' CPUs idled, as measured.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Idle {
    /// cpuidle counted their idle time: this share of it in the POLL state (the idle loop
    /// spinning, as halt polling and `haltpoll.guest_halt_poll_ns` make it).
    Counted(f64),
    /// No cpuidle driver and no `idle=poll`: the kernel's idle loop halts (the one rule
    /// tune's cost uses, `virtperf_measure::events::idle_never_polls`).
    Halts,
    /// Neither could be told.
    Unknown,
}

/// How the cross-CPU rr trials' CPUs idled: their client side's cpuidle counts (one kernel
/// for both sides on loopback), else the machine's idle rule.
fn idle_of(trials: &[TrialRow]) -> Idle {
    let (mut poll, mut all) = (0u64, 0u64);
    let mut never_polls = None;
    for r in trials.iter().filter_map(|t| t.result.as_ref()) {
        let cross = matches!((r.client_cpu, r.server_cpu), (Some(a), Some(b)) if a != b);
        if !cross || !matches!(r.workload, virtperf_wire::Workload::Rr(_)) {
            continue;
        }
        never_polls = Some(virtperf_report::cost::halts_without_cpuidle(&r.env.client));
        let Some(e) = &r.events else { continue };
        for (k, v) in &e.client.deltas {
            if let Some(state) = k.strip_prefix("idle_time_us_") {
                all += v;
                if state == "poll" {
                    poll += v;
                }
            }
        }
    }
    match (all, never_polls) {
        (a, _) if a > 0 => Idle::Counted(poll as f64 / a as f64),
        (_, Some(true)) => Idle::Halts,
        _ => Idle::Unknown,
    }
}

/// A hypervisor's CPUID vendor string in words.
fn hypervisor_name(vendor: &str) -> String {
    match vendor.trim() {
        "KVMKVMKVM" => "KVM".into(),
        "Microsoft Hv" => "Hyper-V".into(),
        "VMwareVMware" => "VMware".into(),
        "XenVMMXenVMM" => "Xen".into(),
        "TCGTCGTCGTCG" => "QEMU's TCG emulator".into(),
        "ACRNACRNACRN" => "ACRN".into(),
        other => format!("\"{other}\""),
    }
}

/// The closing paragraph of the built-in experiment; `None` where its rr points did not
/// both measure (the tables and errors above say why).
pub fn quickstart(points: &[PointSummary], trials: &[TrialRow]) -> Option<String> {
    let same = rr_at(points, "0,0")?;
    let cross = rr_at(points, "0,1")?;
    let hypervisor = trials
        .iter()
        .filter_map(|t| t.result.as_ref())
        .find_map(|r| r.env.client.hypervisor.clone())
        .map(|h| hypervisor_name(&h));
    Some(words(same, cross, idle_of(trials), hypervisor.as_deref()))
}

/// Where the tables' pooled p50s would not read as the headline's figures: which figures
/// they are, so the two do not seem to disagree (the tries' mean weighs each try alike,
/// pooling weighs each round trip, and a fast try holds more of them).
fn pooled_note(same: Trip<'_>, cross: Trip<'_>) -> String {
    let (Some(ps), Some(pc)) = (same.pooled, cross.pooled) else {
        return String::new();
    };
    let shown = |v: f64| format!("{v:.1}");
    if shown(ps) == shown(same.tries.mean) && shown(pc) == shown(cross.tries.mean) {
        return String::new();
    }
    format!(" The table's p50s, {pc:.1} and {ps:.1} µs, pool every round trip of the tries.")
}

/// The two trips are called no different only where the tries rule out a ratio further
/// than this from 1 either way (the band `explain --workload stream` calls no effect).
const SAME_BAND: f64 = virtperf_report::explain_stream::NO_EFFECT_BAND;

/// The headline's sentences from what was measured: the ratio and whether its interval
/// says the cross-CPU trip costs more at all, which idle state the CPUs waited in, and a
/// tune goal only where there is a gap to close.
fn words(same: Trip<'_>, cross: Trip<'_>, idle: Idle, hypervisor: Option<&str>) -> String {
    let (pooled, same, cross) = (pooled_note(same, cross), same.tries, cross.tries);
    let interval = decide::ratio_interval(same, cross, 0.95);
    let gap = decide::bound(&interval, 1.0, false);
    let r = if same.mean > 0.0 {
        cross.mean / same.mean
    } else {
        f64::NAN
    };
    let mut s = format!(
        "Headline: a 1-byte round trip between two CPUs takes {:.1} µs, {r:.1}× the {:.1} µs of one on a single CPU ({}; ",
        cross.mean,
        same.mean,
        match cross.n.min(same.n) {
            1 => "p50s of one try each".to_string(),
            n => format!("p50s, each the mean of {n} tries' p50"),
        }
    );
    s.push_str(&match (&interval, gap) {
        (Interval::Bounded { low, high }, Outcome::Met) => {
            format!("95% interval of the ratio {low:.1}–{high:.1}×).")
        }
        (Interval::Bounded { low, high }, Outcome::NotMet) => format!(
            "95% interval of the ratio {low:.1}–{high:.1}×): here the cross-CPU trip is the faster one."
        ),
        (Interval::Bounded { low, high }, _)
            if decide::ratio_effect(&interval, SAME_BAND) == "no measurable effect" =>
        {
            format!(
                "95% interval of the ratio {low:.2}–{high:.2}×, within ±{:.0}% of 1): no measurable difference between them.",
                SAME_BAND * 100.0
            )
        }
        (Interval::Bounded { low, high }, _) => format!(
            "95% interval of the ratio {low:.2}–{high:.2}×, which holds 1 but reaches past ±{:.0}%): undecided whether they differ (`virtperf run --runs 5` may tell).",
            SAME_BAND * 100.0
        ),
        // One try, or tries too spread to bound the ratio: undecided, and more tries help.
        (Interval::None { why }, _) => {
            format!("{why}: undecided whether they differ; `virtperf run --runs 5` may give an interval).")
        }
    });
    s.push_str(&pooled);
    let vm = hypervisor.map_or_else(
        || "This machine reports no hypervisor (bare metal, or one that hides itself)".to_string(),
        |h| format!("This machine is itself a virtual machine (hypervisor: {h})"),
    );
    let halted = |how: String| {
        match hypervisor {
        Some(_) => format!(
            "\n{vm}, and its idle CPUs halted ({how}): the cross-CPU trip includes waking a halted vCPU, which goes through the hypervisor."
        ),
        None => format!(
            "\n{vm}, and its idle CPUs entered idle states deeper than POLL ({how}): the cross-CPU trip pays the CPUs' own wake-up from idle."
        ),
    }
    };
    s.push_str(&match idle {
        Idle::Counted(p) if p >= 0.5 => format!(
            "\n{vm}, and while waiting its CPUs idled in cpuidle's POLL state ({:.0}% of their idle time): a waiting CPU spins rather than halts, so the cross-CPU trip pays no wake-up from a halt.",
            p * 100.0
        ),
        Idle::Counted(p) => halted(format!("{:.0}% of their idle time outside POLL", (1.0 - p) * 100.0)),
        Idle::Halts => halted("no cpuidle driver and no idle=poll: the kernel's idle loop halts".into()),
        Idle::Unknown => format!(
            "\n{vm}; which idle state its CPUs waited in was not measured (no cpuidle counts), so whether the cross-CPU trip woke a halted CPU is not known."
        ),
    });
    s.push_str(
        "\nWhy it costs that: `virtperf explain` (1.5 to 3 min, more where a halt-poll knob adds configurations; `--quick` about 1 min). How much slower inside a VM: `virtperf vm compare` (boots a guest; root and QEMU), or for a VM you run, docs/own-vm.md.",
    );
    if gap == Outcome::Met {
        // A goal halfway between the two trips: what it takes to bring the cross-CPU one there.
        let goal = ((cross.mean + same.mean) / 2.0).round().max(1.0);
        s.push_str(&format!(
            "\nWhat to change for a latency goal, and at what CPU cost: `virtperf tune --goal 'p50<={goal:.0}us'` (about 1 min; root for the knobs)."
        ));
    } else {
        s.push_str(
            "\nNo gap between the two trips was measured, so no tune goal is proposed here; `virtperf tune --goal 'p50<=Nus'` finds the cheapest measured way to a latency you need.",
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_report::stats::summarize;

    /// A point whose table pooled nothing (no merged histograms).
    fn trip(tries: &Summary) -> Trip<'_> {
        Trip {
            tries,
            pooled: None,
        }
    }

    /// The sentences follow the figures: a gap and a halting VM; a polling one with no
    /// gap (no tune goal offered); one try (no interval claimed); no cpuidle counts.
    #[test]
    fn the_headline_says_what_was_measured() {
        let same = summarize(&[13.0, 13.5, 14.0], 0.95);
        let cross = summarize(&[60.0, 62.0, 64.0], 0.95);
        let halting = words(trip(&same), trip(&cross), Idle::Counted(0.02), Some("KVM"));
        assert!(
            halting.contains("95% interval of the ratio 4."),
            "{halting}"
        );
        assert!(halting.contains("waking a halted vCPU"), "{halting}");
        assert!(halting.contains("tune --goal 'p50<=38us'"), "{halting}");
        // The polling machine: 17.7 µs across against 19.0 µs on one CPU.
        let polled = summarize(&[17.5, 17.7, 17.9], 0.95);
        let one_cpu = summarize(&[18.9, 19.0, 19.1], 0.95);
        let polling = words(
            trip(&one_cpu),
            trip(&polled),
            Idle::Counted(0.97),
            Some("KVM"),
        );
        assert!(polling.contains("POLL state (97%"), "{polling}");
        assert!(
            polling.contains("cross-CPU trip is the faster"),
            "{polling}"
        );
        assert!(
            !polling.contains("halted vCPU") && !polling.contains("--goal 'p50<=1"),
            "{polling}"
        );
        assert!(polling.contains("no tune goal is proposed"), "{polling}");
        let rule = words(trip(&same), trip(&cross), Idle::Halts, Some("KVM"));
        assert!(
            rule.contains("no cpuidle driver and no idle=poll") && rule.contains("halted vCPU"),
            "{rule}"
        );
        // A ratio whose interval holds 1: no difference only where it stays within ±10%.
        let near = words(
            trip(&one_cpu),
            trip(&one_cpu),
            Idle::Counted(0.97),
            Some("KVM"),
        );
        assert!(
            near.contains("within ±10% of 1): no measurable difference"),
            "{near}"
        );
        let wide = words(
            trip(&summarize(&[15.0, 19.0, 23.0], 0.95)),
            trip(&summarize(&[14.0, 20.0, 26.0], 0.95)),
            Idle::Counted(0.97),
            Some("KVM"),
        );
        assert!(
            wide.contains("reaches past ±10%): undecided whether they differ")
                && !wide.contains("no measurable difference"),
            "{wide}"
        );
        // Three tries spread so far the single CPU's mean is not told from 0: no interval
        // of the ratio, undecided.
        let spread = words(
            trip(&summarize(&[10.0, 19.0, 28.0], 0.95)),
            trip(&summarize(&[12.0, 20.0, 27.0], 0.95)),
            Idle::Counted(0.97),
            Some("KVM"),
        );
        assert!(
            spread.contains("the ratio's interval is unbounded: undecided whether they differ"),
            "{spread}"
        );
        let one = words(
            trip(&summarize(&[13.0], 0.95)),
            trip(&cross),
            Idle::Unknown,
            None,
        );
        assert!(
            one.contains("(p50s of one try each; 1 try: no interval"),
            "{one}"
        );
        assert!(one.contains("not measured"), "{one}");
        assert!(!one.contains("--goal 'p50<=3"), "{one}");
        assert_eq!(hypervisor_name("KVMKVMKVM"), "KVM");
        assert!(
            halting.contains("(p50s, each the mean of 3 tries' p50; 95% interval")
                && !halting.contains("pool every round trip"),
            "{halting}"
        );
    }

    /// The quickstart of 2026-11-29 on the Intel machine: the table's pooled 94.14 and
    /// 6.215 µs beside the tries' means 96.0 and 6.9 µs; a table that reads as the headline
    /// gets no note.
    #[test]
    fn the_headline_names_the_tables_pooled_figures_where_they_differ() {
        let same = summarize(&[6.1, 7.6, 7.0], 0.95);
        let cross = summarize(&[92.0, 98.0, 98.0], 0.95);
        let pooled = |tries, p50| Trip {
            tries,
            pooled: Some(p50),
        };
        let s = words(
            pooled(&same, 6.215),
            pooled(&cross, 94.14),
            Idle::Unknown,
            None,
        );
        assert!(
            s.contains("takes 96.0 µs, 13.9× the 6.9 µs")
                && s.contains("The table's p50s, 94.1 and 6.2 µs, pool every round trip"),
            "{s}"
        );
        let s = words(
            pooled(&same, 6.9),
            pooled(&cross, 96.0),
            Idle::Unknown,
            None,
        );
        assert!(!s.contains("pool every round trip"), "{s}");
    }
}
