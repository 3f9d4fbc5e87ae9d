//! The events, trace and host lines of a result's text: what a round trip or a megabyte
//! cost in kernel events per side, what `--trace` counted (here and on a guest's host),
//! and the virtio-net line. Apart from `render` (which calls [`events_lines`] and
//! [`traced`]) so neither file grows past the size limit.

use std::fmt::Write;

use virtperf_wire::TestResult;

/// What `--trace` counted (here and, with guests, on the host) and `--timeline` saw.
pub(crate) fn traced(r: &TestResult) -> String {
    let mut s = trace_line(r);
    if let Some(h) = &r.host_trace {
        s.push_str(&host_line(h));
        // Under TCG the host's zeros are true but say nothing of the guest's halts and
        // interrupts: QEMU emulated them, no KVM was there to exit to.
        if r.guest.as_ref().is_some_and(|g| g.emulated) {
            s.push_str("    (the guest ran under TCG: QEMU emulated its CPU, so it made no KVM exits to count)\n");
        }
    }
    if let Some(t) = &r.timeline {
        s.push_str(&virtperf_report::timeline::text(t));
    }
    s
}

/// The host's exits around a guest's test: per unit of work where they were counted over
/// the measured interval, else the whole test's counts under that name (never divided by
/// the interval's units).
fn host_line(h: &virtperf_wire::TraceCounts) -> String {
    let (what, parts): (String, Vec<String>) = match h.whole_test_s {
        Some(secs) => (
            format!("whole test ({secs:.1} s, set-up and stop included)"),
            h.deltas
                .iter()
                .map(|(k, v)| format!("{v} {}", k.replace('_', " ")))
                .collect(),
        ),
        None => (
            format!("per {}", h.unit),
            h.per_unit
                .iter()
                .map(|(k, v)| format!("{v:.2} {}", k.replace('_', " ")))
                .collect(),
        ),
    };
    format!(
        "  host, {what} on CPU {:?}: {}\n",
        h.cpus,
        if parts.is_empty() {
            "nothing counted".into()
        } else {
            parts.join(", ")
        }
    )
}

/// `--trace`: the counted events that are VM exits in a guest without APICv or posted
/// interrupts, per unit of work, on the CPUs counted; what could not be counted, named.
fn trace_line(r: &TestResult) -> String {
    let Some(t) = &r.trace else {
        return String::new();
    };
    let cpus: Vec<String> = t.cpus.iter().map(u32::to_string).collect();
    let mut parts = Vec::new();
    for (k, label) in [
        (
            virtperf_wire::counter::MSR_WRITE_TSC_DEADLINE,
            "TSC-deadline writes",
        ),
        (
            virtperf_wire::counter::MSR_WRITE_ICR,
            "ICR writes (IPIs sent)",
        ),
        (virtperf_wire::counter::MSR_WRITE_EOI, "EOI writes"),
        (virtperf_wire::counter::IDLE_ENTRIES, "idle entries"),
        (virtperf_wire::counter::IDLE_HALTS, "of them halts"),
        (virtperf_wire::counter::IPIS_RECEIVED, "IPIs received"),
        ("call_function_single_irqs", "call-function IPIs"),
        ("reschedule_irqs", "reschedule IPIs"),
        ("local_timer_irqs", "timer irqs"),
        ("sched_wakeups", "wake-ups"),
    ] {
        if let Some(v) = t.per_unit.get(k) {
            parts.push(format!("{v:.2} {label}"));
        }
    }
    let mut s = format!(
        "  traced per {} on CPU {}: {}\n",
        t.unit,
        cpus.join(","),
        if parts.is_empty() {
            "nothing counted".to_string()
        } else {
            parts.join(", ")
        }
    );
    if let Some(x) = t.likely_exits() {
        let _ = writeln!(
            s,
            "    likely VM exits per {} in a guest: {x:.2} (TSC-deadline + ICR + EOI + APIC-timer writes + idle entries that halt)",
            t.unit
        );
        for r in virtperf_wire::exit_remedies(&r.env.client.interrupt_virt) {
            let _ = writeln!(s, "      {r}");
        }
    }
    for m in grouped(&t.missing) {
        let _ = writeln!(s, "    not counted: {m}");
    }
    for m in &t.substituted {
        let _ = writeln!(s, "    counted another way: {m}");
    }
    s
}

/// One compact line per side: events per unit of work, over the side's pinned CPU when it
/// was pinned (the CPU the round trip runs on), else over the whole machine.
pub(crate) fn events_lines(r: &TestResult) -> String {
    let Some(e) = &r.events else {
        return String::new();
    };
    let mut out = String::new();
    let mut sides = vec![("client", &e.client)];
    if let Some(sv) = &e.server {
        sides.push(("server", sv));
    }
    for (name, side) in sides {
        out.push_str(&side_events(&e.unit, name, side));
    }
    out
}

/// [`events_lines`] for one side (and its virtio-net line, when its traffic crossed one).
fn side_events(unit: &str, name: &str, side: &virtperf_wire::SideEvents) -> String {
    let mut out = String::new();
    let (per, place) = match &side.pinned {
        Some(p) => (&p.per_unit, format!("CPU {}", p.cpu)),
        None => (&side.per_unit, "all CPUs".to_string()),
    };
    let mut parts = Vec::new();
    if let Some(own) = side
        .per_unit
        .get(virtperf_wire::counter::THREAD_VOLUNTARY_SWITCHES)
    {
        parts.push(format!("{own:.2} ctx sw (own threads)"));
    }
    // How long the side's threads stood runnable without a CPU: other work taking it.
    if let Some(us) = side
        .per_unit
        .get(virtperf_wire::counter::THREAD_RUN_DELAY_US)
    {
        parts.push(format!("{us:.2} µs waiting for a CPU (own threads)"));
    }
    if per.contains_key(virtperf_wire::counter::IDLE_ENTRIES) {
        let states: Vec<String> = per
            .iter()
            .filter(|(k, v)| k.starts_with("idle_entries_") && **v >= 0.005)
            .map(|(k, v)| format!("{} {v:.2}", &k["idle_entries_".len()..]))
            .collect();
        let detail = if states.is_empty() {
            String::new()
        } else {
            format!(" ({})", states.join(", "))
        };
        parts.push(format!(
            "{:.2} idle entries{detail}",
            per[virtperf_wire::counter::IDLE_ENTRIES]
        ));
    }
    for (k, label) in [
        (virtperf_wire::counter::IPI_RESCHED, "IPI resched"),
        (virtperf_wire::counter::IPI_CALL, "IPI call"),
        (virtperf_wire::counter::TIMER_IRQS, "timer"),
        ("net_rx_softirqs", "NET_RX"),
    ] {
        if let Some(v) = per.get(k) {
            parts.push(format!("{v:.2} {label}"));
        }
    }
    let missing = if side.missing.is_empty() {
        String::new()
    } else {
        format!("  (not counted: {})", side.missing.join("; "))
    };
    // Nothing per unit (no unit of work, or no counter read): said, never 0.00.
    let counted = if parts.is_empty() && side.deltas.is_empty() {
        "not measured: no counter was read".to_string()
    } else if parts.is_empty() {
        format!("not measured: no {unit} to divide by")
    } else {
        parts.join(", ")
    };
    let _ = writeln!(out, "  per {unit} {name} ({place}): {counted}{missing}");
    if let Some(n) = &side.nic {
        let _ = writeln!(out, "  {}", nic_line(name, unit, n));
    }
    out
}

/// A side's virtio-net device path in one line: kicks (exits) and interrupts (injections)
/// per packet, NAPI batching, and the same per unit of work.
fn nic_line(side: &str, unit: &str, n: &virtperf_wire::NicEvents) -> String {
    let f = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
    let per = |k: &str| n.per_unit.get(k).copied();
    let both = |a: &str, b: &str| Some(per(a)? + per(b)?);
    let irqs = virtperf_wire::nic_irqs(per);
    format!(
        "{side} virtio-net {} ({}): {} kicks/packet, {} irqs/packet, {} packets/irq; per {unit}: {} packets, {} kicks, {} irqs",
        n.interface,
        n.device,
        f(n.kicks_per_packet),
        f(n.irqs_per_packet),
        f(n.packets_per_irq),
        f(both(virtperf_wire::counter::RX_PACKETS, virtperf_wire::counter::TX_PACKETS)),
        f(both(virtperf_wire::counter::RX_KICKS, virtperf_wire::counter::TX_KICKS)),
        f(irqs),
    )
}

/// `KEY: why` entries with one reason said once, its keys joined ("msr_write_icr,
/// msr_write_eoi: …" rather than the same sentence per register), in first-seen order.
fn grouped(missing: &[String]) -> Vec<String> {
    let mut groups: Vec<(Vec<&str>, &str)> = Vec::new();
    for m in missing {
        let Some((key, why)) = m.split_once(": ") else {
            groups.push((Vec::new(), m));
            continue;
        };
        match groups.iter_mut().find(|(k, w)| !k.is_empty() && *w == why) {
            Some((keys, _)) => keys.push(key),
            None => groups.push((vec![key], why)),
        }
    }
    groups
        .into_iter()
        .map(|(keys, why)| {
            if keys.is_empty() {
                why.to_string()
            } else {
                format!("{}: {why}", keys.join(", "))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_wire::SideEvents;

    /// One reason for several counters is said once, with their keys; others stay apart.
    #[test]
    fn one_reason_for_several_counters_is_said_once() {
        let why = "no x2APIC: MMIO";
        let missing = [
            format!("msr_write_icr: {why}"),
            "kvm_exits: no tracepoint".to_string(),
            format!("msr_write_eoi: {why}"),
        ];
        assert_eq!(
            grouped(&missing),
            [
                format!("msr_write_icr, msr_write_eoi: {why}"),
                "kvm_exits: no tracepoint".to_string()
            ]
        );
    }

    /// Host exits counted over the whole test are printed as counts, never per
    /// transaction of the interval (they used to be divided by its transactions).
    #[test]
    fn whole_test_host_exits_are_not_per_transaction() {
        let mut h = virtperf_wire::TraceCounts {
            cpus: vec![1],
            unit: virtperf_wire::Unit::Transactions.events_name().into(),
            deltas: [("kvm_exits".to_string(), 5000)].into_iter().collect(),
            per_unit: Default::default(),
            per_side: Default::default(),
            missing: vec![],
            substituted: vec![],
            whole_test_s: Some(2.4),
        };
        let line = host_line(&h);
        assert!(
            line.contains("whole test (2.4 s") && line.contains("5000 kvm exits"),
            "{line}"
        );
        assert!(!line.contains("per transaction"), "{line}");
        h.whole_test_s = None;
        h.per_unit = [("kvm_exits".to_string(), 2.5)].into_iter().collect();
        let line = host_line(&h);
        assert!(
            line.contains("per transaction") && line.contains("2.50 kvm exits"),
            "{line}"
        );
    }

    /// The side's threads' wait for a CPU per transaction is on its line when it was read,
    /// and absent (not 0) when the kernel keeps no schedstat.
    #[test]
    fn the_threads_wait_for_a_cpu_is_printed_when_read() {
        let mut side = SideEvents {
            per_unit: [
                ("thread_voluntary_switches".to_string(), 1.0),
                (
                    virtperf_wire::counter::THREAD_RUN_DELAY_US.to_string(),
                    0.304,
                ),
            ]
            .into_iter()
            .collect(),
            ..Default::default()
        };
        let unit = virtperf_wire::Unit::Transactions.events_name();
        let text = side_events(unit, "client", &side);
        assert!(
            text.contains("1.00 ctx sw (own threads), 0.30 µs waiting for a CPU (own threads)"),
            "{text}"
        );
        side.per_unit
            .remove(virtperf_wire::counter::THREAD_RUN_DELAY_US);
        let text = side_events(unit, "client", &side);
        assert!(!text.contains("waiting for a CPU"), "{text}");
    }

    /// A side whose events were counted but divided by no unit of work prints no
    /// "0.00 ctx sw (own threads)": it says there was nothing to divide by.
    #[test]
    fn events_with_no_unit_of_work_are_not_zeros() {
        let side = SideEvents {
            deltas: [("thread_voluntary_switches".to_string(), 4)]
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let text = side_events(
            virtperf_wire::Unit::Transactions.events_name(),
            "client",
            &side,
        );
        assert!(!text.contains("0.00"), "{text}");
        assert!(text.contains("not measured: no transaction"), "{text}");
    }
}
