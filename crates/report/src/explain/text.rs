//! `virtperf explain`'s answer for people: the text `explain` prints and the native vs
//! elsewhere table of `vm compare --explain`.

use std::fmt::Write;

use super::model::Explanation;

fn us(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1} µs")
    } else {
        "—".into()
    }
}

/// A value that may not have been measured: "—" when absent (or not finite), else `fmt`
/// of it.
pub fn opt(v: Option<f64>, fmt: fn(f64) -> String) -> String {
    v.filter(|v| v.is_finite()).map_or("—".into(), fmt)
}

/// `+1.2`: a change, to one decimal.
pub fn signed1(v: f64) -> String {
    format!("{v:+.1}")
}

/// `1.23`: two decimals.
pub fn fixed2(v: f64) -> String {
    format!("{v:.2}")
}

/// `+12%`, `-0.3%` (a change under 1% keeps a decimal: rounding it gave "-0%"), `0%`.
pub(crate) fn signed_pct(v: f64) -> String {
    match v {
        v if !v.is_finite() => "—".into(),
        v if v.abs() < 0.05 => "0%".into(),
        v if v.abs() < 1.0 => format!("{v:+.1}%"),
        v => format!("{v:+.0}%"),
    }
}

/// "1-byte request/response round trip", or the sizes the explained rr used.
fn what_was_measured(e: &Explanation) -> String {
    match (e.request_bytes, e.response_bytes) {
        (Some(a), Some(b)) if a == b => format!("{a}-byte request/response round trip"),
        (Some(a), Some(b)) => format!("{a}-byte request / {b}-byte response round trip"),
        _ => "request/response round trip".to_string(),
    }
}

fn cpu_pair(cpus: (Option<u32>, Option<u32>)) -> String {
    match cpus {
        (Some(a), Some(b)) => format!(" ({a} → {b})"),
        _ => String::new(),
    }
}

/// The explanation for people.
pub fn text(e: &Explanation) -> String {
    let mut s = String::new();
    // The answer first, the evidence after it.
    if let Some(v) = &e.verdict {
        let _ = writeln!(s, "{v}\n");
    }
    let _ = writeln!(
        s,
        "virtperf explain (run {}, {} tries per measurement)",
        e.run_id, e.tries
    );
    for w in &e.warnings {
        let _ = writeln!(s, "WARNING: {w}");
    }
    let _ = writeln!(s, "\nMeasured: {}", what_was_measured(e));
    let _ = writeln!(
        s,
        "  across CPUs{}, blocking   p50 {}  (mean {}, p99 {})",
        cpu_pair(e.cpus),
        us(e.measured_us),
        us(e.measured_mean_us),
        us(e.measured_p99_us)
    );
    if let Some(same) = e.same_cpu_us {
        let on = e.same_cpu.map_or(String::new(), |c| format!(" ({c})"));
        let _ = writeln!(s, "  on one CPU{on}, blocking    p50 {}", us(same));
    }
    model(&mut s, e);
    if !e.events_per_transaction.is_empty() {
        let _ = writeln!(s);
    }
    for (what, ev) in [
        ("across CPUs (both CPUs)", &e.events_per_transaction),
        (
            "on one CPU (that CPU, both sides)",
            &e.events_per_transaction_same_cpu,
        ),
    ] {
        if ev.is_empty() {
            continue;
        }
        let get = |k: &str| ev.get(k).copied();
        let n = |v: Option<f64>| v.map_or("— (not counted)".to_string(), |v| format!("{v:.2}"));
        let ipis = get(virtperf_wire::counter::IPI_RESCHED)
            .zip(get(virtperf_wire::counter::IPI_CALL))
            .map(|(a, b)| a + b);
        let _ = writeln!(
            s,
            "Events per transaction {what}: {} sleeps, {} idle entries, {} IPIs, {} timer interrupts",
            n(get(virtperf_wire::counter::THREAD_VOLUNTARY_SWITCHES)),
            n(get(virtperf_wire::counter::IDLE_ENTRIES)),
            n(ipis),
            n(get(virtperf_wire::counter::TIMER_IRQS))
        );
    }
    seen(&mut s, e);
    remedies(&mut s, e);
    let _ = writeln!(s, "\nEnvironment:");
    for (k, v) in &e.environment {
        let _ = writeln!(s, "  {k:<44} {v}");
    }
    s
}

/// The model's terms with their sources, the prediction and its residual, the
/// cross-checks and what was not measured.
fn model(s: &mut String, e: &Explanation) {
    let _ = writeln!(s, "\nModel, from independent measurements:");
    for x in &e.components {
        let indent = if x.part_of.is_some() {
            "    of which "
        } else {
            "  "
        };
        let _ = writeln!(s, "{indent}{:<14} {:>10}   {}", x.name, us(x.us), x.source);
    }
    match (e.predicted_us, e.residual_us) {
        (Some(p), Some(r)) => {
            let _ = writeln!(s, "  {:<14} {:>10}", "predicted", us(p));
            let _ = writeln!(
                s,
                "  {:<14} {:>10}   ({} of measured; not forced to zero)",
                "residual",
                us(r),
                e.residual_pct
                    .map_or("—".to_string(), |v| format!("{v:.0}%"))
            );
        }
        _ => {
            let _ = writeln!(
                s,
                "  {:<14} {:>10}   not predicted: path and wake-up are both needed (see below)",
                "predicted", "—"
            );
        }
    }
    for x in &e.cross_checks {
        let _ = writeln!(s, "  check: {:<14} {:>10}   {}", x.name, us(x.us), x.source);
    }
    for m in &e.missing {
        let _ = writeln!(s, "  not measured: {}: {}", m.name, m.reason);
    }
}

/// The remedies measured against the as-is cross-CPU rr, and those named but not tried.
fn remedies(s: &mut String, e: &Explanation) {
    if !e.remedies.is_empty() {
        let _ = writeln!(
            s,
            "\nWhat buys it back (measured against the as-is cross-CPU rr):"
        );
        for r in &e.remedies {
            let _ = writeln!(
                s,
                "  {:<70} p50 {:>5} ({}, {}), p99 {:>5}, CPU {} µs/transaction, {} → {} CPUs busy (added {})",
                r.what,
                signed_pct(r.p50_change_pct),
                us(r.p50_us),
                super::verdict::ratio_words(&r.p50_ratio_interval),
                signed_pct(r.p99_change_pct),
                opt(r.cpu_us_per_transaction_change, signed1),
                opt(r.cpus_busy_before, fixed2),
                opt(r.cpus_busy, fixed2),
                r.added_cpus_interval.words(|x| format!("{x:+.2}"))
            );
        }
    }
    for r in &e.remedies_named {
        let _ = writeln!(s, "  not tried here: {r}");
    }
}

/// Exits by cause and what the sampled round trip showed, beside the model.
fn seen(s: &mut String, e: &Explanation) {
    if !e.exits_by_cause.is_empty() {
        let _ = writeln!(s, "\nVM exits per transaction by cause (counted in the traced rr; each is an exit in a guest without APICv/posted interrupts or halt polling):");
        for (k, label, cost) in virtperf_wire::EXIT_CAUSES {
            if let Some(v) = e.exits_by_cause.get(*k) {
                let _ = writeln!(s, "  {label:<42} {v:>6.2}   {cost}");
            }
        }
        if let Some(v) = e.exits_by_cause.get("likely_exits") {
            let _ = writeln!(s, "  {:<42} {v:>6.2}", "likely exits per transaction");
        }
    }
    if let Some(i) = &e.in_situ {
        let model = |n: &str| e.components.iter().find(|c| c.name == n).map(|c| c.us);
        let _ = writeln!(
            s,
            "\nIn situ (a sampled trial of the same round trip) beside the model:"
        );
        for (name, x, src) in [
            ("wake_up", i.wake_up_us, &i.wake_up_source),
            ("idle_exit", i.idle_exit_us, &i.idle_exit_source),
        ] {
            let _ = writeln!(
                s,
                "  {name:<14} in situ {:>10}   model {:>10}   {src}",
                opt(x, |v| format!("{v:.1} µs")),
                opt(model(name), |v| format!("{v:.1} µs"))
            );
        }
        s.push_str(&crate::timeline::text(&i.timeline));
    }
    for d in &e.disagreements {
        let _ = writeln!(s, "  DISAGREES: {d}");
    }
    for d in &e.undecided_in_situ {
        let _ = writeln!(s, "  undecided: {d}");
    }
    host(s, e);
}

/// The host's view of the VM (`--vm`) beside what the guest saw of the same round trip.
fn host(s: &mut String, e: &Explanation) {
    let Some(h) = &e.host else { return };
    let _ = writeln!(
        s,
        "\nOn the VM's host, over the explained round trip's measured window (what the guest cannot see of its cost):"
    );
    s.push_str(&crate::host_vm::host_vm(h));
    let vcpu = h
        .classes
        .iter()
        .find(|c| c.class == "vcpu")
        .and_then(|c| c.per_unit.get("cpu_us"));
    if let Some(v) = vcpu {
        let _ = writeln!(
            s,
            "  the round trip takes {:.1} µs in the guest; its vCPU threads ran {v:.1} µs per round trip on the host",
            e.measured_us
        );
    }
}

/// Two explanations side by side (native and in a guest): every component, the measured
/// and predicted round trips, and the difference: the virtualization tax, broken down.
pub fn side_by_side(a: &Explanation, a_name: &str, b: &Explanation, b_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<22} {:>14} {:>20} {:>14}",
        "p50 µs per round trip", a_name, b_name, "difference"
    );
    let mut names: Vec<String> = vec!["measured".into()];
    for c in a.components.iter().chain(&b.components) {
        if !names.contains(&c.name) {
            names.push(c.name.clone());
        }
    }
    names.extend(["predicted".to_string(), "residual".to_string()]);
    let value = |e: &Explanation, n: &str| -> Option<f64> {
        match n {
            "measured" => Some(e.measured_us),
            "predicted" => e.predicted_us,
            "residual" => e.residual_us,
            _ => e.components.iter().find(|c| c.name == n).map(|c| c.us),
        }
    };
    let cell = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("{v:.1}"));
    for n in &names {
        let (x, y) = (value(a, n), value(b, n));
        let d = x.zip(y).map(|(x, y)| y - x);
        let _ = writeln!(
            s,
            "{:<22} {:>14} {:>20} {:>14}",
            n,
            cell(x),
            cell(y),
            d.map_or("—".to_string(), |d| format!("{d:+.1}"))
        );
    }
    for w in &b.warnings {
        let _ = writeln!(s, "WARNING ({b_name}): {w}");
    }
    s
}
