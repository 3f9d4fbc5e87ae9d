//! `--timeline` (issue 28, sampling mode) measured: the sampled trial's stages against
//! its own median. In `alone`: every network event on the test's two CPUs is sampled, so
//! a neighbour's traffic there (the many-flow streams of `flows`) floods the buffers and
//! leaves no complete transaction to draw ("not taken", as the run says). The refusals
//! and the counting mode stay in `trace.rs`.

use crate::common;

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `--timeline`: the sampled trial's stages add up to the order of its own measured p50
/// (within 20% on a quiet machine: bench/timeline.sh), every transaction is accounted as
/// analyzed or skipped, and the text output draws the stage table.
#[test]
fn the_timeline_stages_add_up_to_the_measured_median() {
    let _alone = crate::alone();
    if !root() || std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        virtperf_testkit::skip("root", "sampling tracepoints needs root and two CPUs");
        return;
    }
    let v = common::run_json(&["rr", "--cpus", "0,1", "-l", "300ms", "--timeline"]);
    let t = &v["timeline"];
    assert!(t.is_object(), "no timeline: {}", v["warnings"]);
    assert!(t["transactions"].as_u64().unwrap() > 100, "{t}");
    let stages = t["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 10);
    // A stage that never occurred is null, not 0, and adds nothing.
    for st in stages {
        assert_eq!(
            st["p50_us"].is_null(),
            st["seen"].as_f64() == Some(0.0),
            "{st}"
        );
    }
    let sum: f64 = stages.iter().filter_map(|s| s["p50_us"].as_f64()).sum();
    let rr = t["rr_p50_us"].as_f64().unwrap();
    assert!((sum - t["sum_p50_us"].as_f64().unwrap()).abs() < 1e-6);
    // A sum of medians matches the median of sums only where the stages are steady: on a
    // loaded machine one trial can miss the 20% of issue 28 without any defect, so that
    // figure is a benchmark (bench/timeline.sh, recorded in bench/RESULTS.md), not a check
    // that would turn itself off here. What holds on any machine: both medians are of the
    // same sampled transactions, so they are of one order (a stage table that lost a stage
    // or counted one twice would be off by far more than a factor of two).
    assert!(
        rr > 0.0 && sum > 0.5 * rr && sum < 2.0 * rr,
        "stages {sum:.1} µs vs rr p50 {rr:.1} µs"
    );
    assert!(t["headline_p50_us"].as_f64().is_some());
    assert!(!t["example"].as_array().unwrap().is_empty());
}
