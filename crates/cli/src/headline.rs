//! The built-in experiment's answer in words (`virtperf run` without a spec): after its
//! tables, the headline ratio with its confidence interval, what this machine is, and the
//! commands that answer "why" and "how much slower in a VM".

use virtperf_report::stats::Summary;
use virtperf_report::summary::PointSummary;
use virtperf_store::TrialRow;

/// `metric`'s summary over the tries at the rr point pinned to `cpus`.
fn rr_at<'a>(points: &'a [PointSummary], cpus: &str, metric: &str) -> Option<&'a Summary> {
    let p = points
        .iter()
        .find(|p| p.workload == "rr" && p.params["cpus"].as_str() == Some(cpus))?;
    let c = p.configs.first()?;
    c.metrics
        .iter()
        .find(|m| m.name == metric)
        .map(|m| &m.summary)
        .filter(|s| s.n > 0)
}

/// The ratio `a / b`, and its interval from the two means' intervals (the widest the
/// ratio can be with both means inside theirs) where both have one; `None` where `b`'s
/// mean or interval reaches 0.
fn ratio(a: &Summary, b: &Summary) -> Option<(f64, Option<(f64, f64)>)> {
    if b.mean <= 0.0 {
        return None;
    }
    let r = a.mean / b.mean;
    if a.n < 2 || b.n < 2 {
        return Some((r, None));
    }
    (b.ci_low > 0.0).then(|| {
        (
            r,
            Some((a.ci_low.max(0.0) / b.ci_high, a.ci_high / b.ci_low)),
        )
    })
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
    let same = rr_at(points, "0,0", "p50_us")?;
    let cross = rr_at(points, "0,1", "p50_us")?;
    let mut s = match ratio(cross, same) {
        Some((r, interval)) => format!(
            "Headline: a 1-byte round trip between two CPUs takes {:.1} µs (p50), {r:.1}× the {:.1} µs of one on a single CPU ({}).",
            cross.mean,
            same.mean,
            match interval {
                Some((lo, hi)) => format!("95% interval of the ratio {lo:.1}–{hi:.1}×"),
                None => "one try each: no interval; `virtperf run --runs 5` gives one".into(),
            }
        ),
        None => format!(
            "Headline: a 1-byte round trip between two CPUs takes {:.1} µs (p50), against {:.1} µs on a single CPU.",
            cross.mean, same.mean
        ),
    };
    let hypervisor = trials
        .iter()
        .filter_map(|t| t.result.as_ref())
        .find_map(|r| r.env.client.hypervisor.clone());
    s.push_str(&match hypervisor {
        Some(h) => format!(
            "\nThis machine is itself a virtual machine (hypervisor: {}): the cross-CPU trip includes waking a halted vCPU, which goes through the hypervisor.",
            hypervisor_name(&h)
        ),
        None => "\nThis machine reports no hypervisor (bare metal, or one that hides itself): the cross-CPU trip pays the CPUs' own wake-up from idle.".to_string(),
    });
    s.push_str(
        "\nWhy it costs that: `virtperf explain` (about 1.5 min). How much slower inside a VM: `virtperf vm compare` (boots a guest; root and QEMU), or for a VM you run, docs/own-vm.md.",
    );
    // A goal halfway between the two trips: what it takes to bring the cross-CPU one there.
    let goal = ((cross.mean + same.mean) / 2.0).round().max(1.0);
    s.push_str(&format!(
        "\nWhat to change for a latency goal, and at what CPU cost: `virtperf tune --goal 'p50<={goal:.0}us'` (about 1 min; root for the knobs)."
    ));
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_report::stats::summarize;

    /// The ratio's interval holds its point estimate and widens with either mean's.
    #[test]
    fn the_ratio_interval_brackets_the_ratio() {
        let a = summarize(&[60.0, 62.0, 64.0], 0.95);
        let b = summarize(&[13.0, 13.5, 14.0], 0.95);
        let (r, interval) = ratio(&a, &b).expect("positive");
        let (lo, hi) = interval.expect("three tries each");
        assert!(lo < r && r < hi, "{lo} {r} {hi}");
        assert!((r - 62.0 / 13.5).abs() < 1e-9);
        // One try: no interval is claimed.
        let one = summarize(&[13.0], 0.95);
        assert_eq!(ratio(&a, &one).map(|(_, i)| i), Some(None));
        assert!(ratio(&a, &summarize(&[0.0, 0.0], 0.95)).is_none());
        assert_eq!(hypervisor_name("KVMKVMKVM"), "KVM");
    }
}
