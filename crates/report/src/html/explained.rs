//! `explain`'s exits by cause and in-situ figures in the HTML report: here, above both
//! `explain` and `timeline`, so neither has to know the other's HTML.

use std::fmt::Write;

use crate::escape::esc;
use crate::timeline::html;

/// `explain`'s exits by cause and in-situ figures beside the model, as HTML.
pub(super) fn explained_html(e: &crate::explain::Explanation) -> String {
    let mut s = String::new();
    if !e.exits_by_cause.is_empty() {
        s.push_str("<h4>VM exits per transaction by cause (traced rr)</h4><table><tr><th>cause</th><th>per transaction</th><th>in a guest</th></tr>");
        for (k, label, cost) in virtperf_wire::EXIT_CAUSES {
            if let Some(v) = e.exits_by_cause.get(*k) {
                let _ = write!(
                    s,
                    "<tr><td>{}</td><td>{v:.2}</td><td>{}</td></tr>",
                    esc(label),
                    esc(cost)
                );
            }
        }
        if let Some(v) = e.exits_by_cause.get("likely_exits") {
            let _ = write!(s, "<tr><td>likely exits</td><td>{v:.2}</td><td></td></tr>");
        }
        s.push_str("</table>");
    }
    if let Some(i) = &e.in_situ {
        let model = |n: &str| e.components.iter().find(|c| c.name == n).map(|c| c.us);
        let f = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
        s.push_str("<h4>in situ beside the model (µs per round trip)</h4><table><tr><th>term</th><th>in situ</th><th>model</th><th>how</th></tr>");
        for (n, x, src) in [
            ("wake_up", i.wake_up_us, &i.wake_up_source),
            ("idle_exit", i.idle_exit_us, &i.idle_exit_source),
        ] {
            let _ = write!(
                s,
                "<tr><td>{n}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                f(x),
                f(model(n)),
                esc(src)
            );
        }
        s.push_str("</table>");
        for d in &e.disagreements {
            let _ = write!(s, "<p class=\"warning\">DISAGREES: {}</p>", esc(d));
        }
        for d in &e.undecided_in_situ {
            let _ = write!(s, "<p>undecided: {}</p>", esc(d));
        }
        s.push_str(&html(&i.timeline));
    }
    if let Some(h) = &e.host {
        host_html(&mut s, h);
    }
    s
}

/// The hypervisor's view of the VM (`explain --host … --vm`) as a table per thread class,
/// KVM's counters per round trip, and what was not measured with why.
fn host_html(s: &mut String, h: &virtperf_wire::HostVm) {
    let _ = write!(
        s,
        "<h4>on the VM's host: {} ({}, pid {}, {}) over {}, per round trip</h4>",
        esc(&h.spec),
        esc(&h.vmm),
        h.pid,
        esc(h.accel.as_deref().unwrap_or("accelerator unknown")),
        crate::host_vm::window_words(h.window_s)
    );
    s.push_str("<table><tr><th>threads</th><th>count</th><th>CPU µs</th><th>run-queue wait µs</th><th>switches</th></tr>");
    let f = |v: Option<&f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
    for c in &h.classes {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&c.class),
            c.threads,
            f(c.per_unit.get("cpu_us")),
            f(c.per_unit.get("run_delay_us")),
            c.per_unit
                .get("switches")
                .map_or("—".to_string(), |v| format!("{v:.2}"))
        );
    }
    s.push_str("</table>");
    if let Some(k) = &h.kvm {
        s.push_str("<table><tr><th>KVM counter</th><th>per round trip</th></tr>");
        for (name, v) in &k.per_unit {
            let _ = write!(s, "<tr><td>{}</td><td>{v:.2}</td></tr>", esc(name));
        }
        s.push_str("</table>");
    }
    for (what, why) in &h.missing {
        let _ = write!(s, "<p>{}: {}</p>", esc(what), esc(why));
    }
}
