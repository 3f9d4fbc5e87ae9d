//! The comparison chart's right-hand labels (`+1.8% change within noise threshold`, the
//! longest verdict) laid out in headless Chromium: none crosses the drawing's edge. A
//! tune report in CI drew one across it at a 190-pixel margin; this draws every verdict
//! with wide changes on purpose, so the check does not depend on what a run measured.

use crate::common;

use virtperf_report::compare::Row;
use virtperf_report::stats::compare;

fn row(point: &str, base: &[f64], cand: &[f64], noise: f64) -> Row {
    Row {
        point: point.into(),
        baseline: "baseline".into(),
        candidate: "a candidate config".into(),
        metric: "p50_us".into(),
        unit: "µs".into(),
        comparison: compare(base, cand, false, 0.05, noise),
        notes: Vec::new(),
    }
}

#[test]
fn every_verdict_label_fits_the_comparison_chart() {
    let base = [100.0, 101.0, 99.0, 100.5, 99.5];
    let rows = vec![
        // Significant but under a 5% noise threshold: "change within noise threshold".
        row(
            "rr within noise",
            &base,
            &[101.8, 102.8, 100.8, 102.3, 101.3],
            0.05,
        ),
        row(
            "rr regressed",
            &base,
            &[-1234.5, -1233.0, -1236.0, -1234.0, -1235.0],
            0.0,
        ),
        row("rr improved", &base, &[51.0, 50.0, 52.0, 51.5, 50.5], 0.0),
        row(
            "rr no change",
            &base,
            &[100.2, 99.1, 101.2, 99.9, 100.4],
            0.0,
        ),
    ];
    let words: Vec<&str> = rows.iter().map(|r| r.comparison.verdict.words()).collect();
    assert!(
        words.contains(&"change within noise threshold"),
        "{words:?}"
    );
    let page = virtperf_report::html::comparison_page("labels", &rows, "now");
    let d = common::TempDir::new("chart-labels");
    let html = d.path("c.html");
    std::fs::write(&html, page).expect("page");
    common::chromium_renders(&html, &d.0, 1);
}
