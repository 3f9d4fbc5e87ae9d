//! The host's view of a VM (`--vm`, `vm watch`) as text: one line per thread class, KVM's
//! per-VM counters, and what could not be measured with why.

use std::fmt::Write;

use virtperf_wire::HostVm;

/// The classes in the order a reader looks for them.
const ORDER: [&str; 5] = ["vcpu", "vhost", "io", "main", "other"];

fn class_name(c: &str) -> &str {
    match c {
        "vcpu" => "vCPU threads",
        "vhost" => "vhost",
        "io" => "I/O threads",
        "main" => "main loop",
        _ => "other threads",
    }
}

/// The window's length in words: `3.00 s`, or why there is none.
pub fn window_words(w: Option<f64>) -> String {
    w.map_or_else(
        || "no window (not measured)".into(),
        |w| format!("{w:.2} s"),
    )
}

/// The lines for `h`: per unit of work where it has a unit, per second of the window
/// otherwise.
pub fn host_vm(h: &HostVm) -> String {
    let mut s = String::new();
    let accel = h.accel.as_deref().unwrap_or("accelerator unknown");
    let _ = writeln!(
        s,
        "  host view of {} ({}, pid {}, {accel}) over {}:",
        h.spec,
        h.vmm,
        h.pid,
        window_words(h.window_s)
    );
    let per = h.unit.as_deref();
    let mut classes: Vec<_> = h.classes.iter().collect();
    classes.sort_by_key(|c| {
        ORDER
            .iter()
            .position(|o| *o == c.class)
            .unwrap_or(ORDER.len())
    });
    for c in classes {
        // A class that did nothing over the window (QEMU's RCU thread) is in the JSON only.
        if c.cpu_s == 0.0 && c.voluntary_switches + c.involuntary_switches == 0 {
            continue;
        }
        let wait = match (per, c.per_unit.get("run_delay_us"), c.run_delay_s) {
            (Some(_), Some(w), _) => format!(", waited {w:.1} µs in the run queue"),
            (None, _, Some(w)) => format!(", waited {:.1} ms in the run queue", w * 1e3),
            _ => ", run-queue wait not measured".to_string(),
        };
        let head = format!("    {:<14} x{:<3}", class_name(&c.class), c.threads);
        let _ = match (per, c.per_unit.get("cpu_us")) {
            (Some(u), Some(cpu)) => writeln!(
                s,
                "{head} {cpu:>9.1} µs CPU per {u}{wait}{}",
                c.per_unit
                    .get("switches")
                    .map(|n| format!(", {n:.2} switches per {u}"))
                    .unwrap_or_default()
            ),
            _ => writeln!(
                s,
                "{head} {} of a CPU{wait}, {} + {} switches",
                h.window_s
                    .filter(|w| *w > 0.0)
                    .map_or("(no window)".to_string(), |w| format!(
                        "{:>9.1}%",
                        100.0 * c.cpu_s / w
                    )),
                c.voluntary_switches,
                c.involuntary_switches
            ),
        };
    }
    if let Some(k) = &h.kvm {
        let mut top: Vec<(&String, &u64)> = k.counts.iter().filter(|(_, v)| **v > 0).collect();
        top.sort_by(|a, b| b.1.cmp(a.1));
        let shown: Vec<String> = top
            .iter()
            .take(8)
            .map(|(name, v)| match (per, k.per_unit.get(*name)) {
                (Some(_), Some(p)) => format!("{name} {p:.2}"),
                _ => format!("{name} {v}"),
            })
            .collect();
        let _ = writeln!(
            s,
            "    KVM ({}){}: {}",
            if k.source == "debugfs" {
                "debugfs"
            } else {
                "vCPU statistics"
            },
            per.map(|u| format!(" per {u}")).unwrap_or_default(),
            if shown.is_empty() {
                "no counter moved".to_string()
            } else {
                shown.join(", ")
            }
        );
    }
    for (what, why) in &h.missing {
        let _ = writeln!(s, "    not measured: {what}: {why}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An unmeasured window is said, never printed as 0.00 s.
    #[test]
    fn an_unmeasured_window_is_said() {
        assert_eq!(window_words(Some(3.0)), "3.00 s");
        assert!(window_words(None).contains("not measured"));
        let mut h = HostVm::default();
        assert!(
            host_vm(&h).contains("no window (not measured)"),
            "{}",
            host_vm(&h)
        );
        // A class's share of a CPU needs the window's length: without one, no percentage.
        h.classes.push(virtperf_wire::ThreadClass {
            class: "vcpu".into(),
            threads: 1,
            cpu_s: 0.5,
            ..Default::default()
        });
        let text = host_vm(&h);
        assert!(
            text.contains("(no window) of a CPU") && !text.contains('%'),
            "{text}"
        );
        h.window_s = Some(1.0);
        assert!(host_vm(&h).contains("50.0% of a CPU"), "{}", host_vm(&h));
    }
}
