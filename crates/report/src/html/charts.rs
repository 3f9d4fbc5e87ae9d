//! The SVG charts of the report: sweeps, bars with their tries, percentile curves,
//! comparisons and the CPU split, on shared axes helpers.

use std::fmt::Write;

use crate::compare::Row;
use crate::escape::esc;
use crate::render::num;
use crate::summary::{ConfigSummary, PointSummary};

/// One bar: its name, value, the half-width of its 95% CI (None: no interval, as from one
/// try), and the individual tries drawn over it as dots.
pub(super) struct Bar {
    pub(super) name: String,
    pub(super) value: f64,
    pub(super) ci_half: Option<f64>,
    pub(super) tries: Vec<f64>,
}

/// A labelled group of bars.
pub(super) type BarGroup = (String, Vec<Bar>);

/// Line and bar colours, one per config in order.
pub(super) const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];
/// The CPU split's parts and their colours.
pub(super) const CPU_PARTS: [(&str, &str); 7] = [
    ("user", "#1f77b4"),
    ("sys", "#d62728"),
    ("irq", "#9467bd"),
    ("softirq", "#ff7f0e"),
    ("steal", "#7f7f7f"),
    ("guest", "#2ca02c"),
    // Busy time the kernel's tick never charged to a kind (`CpuTimes::unsampled`).
    ("no kind sampled", "#c7c7c7"),
];

/// The legend: one swatch per name, unless the only name is the spec's implicit `default`
/// config (a legend of one entry that names nothing the user wrote says nothing).
pub(super) fn legend(s: &mut String, names: &[String], x: f64, y: f64) {
    if names.len() == 1 && names[0] == "default" {
        return;
    }
    for (i, n) in names.iter().enumerate() {
        let yy = y + 16.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{}"/><text x="{}" y="{}" class="lg">{}</text>"#,
            yy - 9.0,
            PALETTE[i % PALETTE.len()],
            x + 14.0,
            yy,
            esc(n)
        );
    }
}

/// A round top for an axis from 0 to `max`, and its tick step (1, 2, 2.5 or 5 × 10ⁿ, four
/// to six ticks), so labels read 0, 20 000, 40 000 rather than 22333, 44667.
pub(crate) fn nice_scale(max: f64) -> (f64, f64) {
    if !max.is_finite() || max <= 0.0 {
        return (1.0, 0.25);
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    ((max / step).ceil() * step, step)
}

/// The y axis's round ticks from 0 to `top` every `step`, with grid lines from `x.0` to
/// `x.1`.
pub(crate) fn y_ticks(
    s: &mut String,
    x: (f64, f64),
    (top, step): (f64, f64),
    py: &dyn Fn(f64) -> f64,
) {
    let mut v = 0.0;
    while v <= top * (1.0 + 1e-9) {
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" class="tk" text-anchor="end">{}</text><line x1="{}" y1="{y:.1}" x2="{}" y2="{y:.1}" class="grid"/>"#,
            x.0 - 6.0,
            py(v) + 4.0,
            tick(v),
            x.0,
            x.1,
            y = py(v)
        );
        v += step;
    }
}

/// The axes' titles: `x` centred under the plot (none for bars, whose groups are named),
/// `y` upright along the left edge. Both escaped here.
pub(super) fn axis_titles(
    s: &mut String,
    (w, h, l, r, t, b): (f64, f64, f64, f64, f64, f64),
    x: Option<&str>,
    y: &str,
) {
    if let Some(x) = x {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="lb" text-anchor="middle">{}</text>"#,
            (l + w - r) / 2.0,
            h - 10.0,
            esc(x)
        );
    }
    let _ = write!(
        s,
        r#"<text x="14" y="{}" class="lb" transform="rotate(-90 14 {})" text-anchor="middle">{}</text>"#,
        (t + h - b) / 2.0,
        (t + h - b) / 2.0,
        esc(y)
    );
}

/// A tick label: no trailing zeros ("64", "2.5", "0.25"), thousands as "k" and millions as
/// "M" once they get long.
pub(crate) fn tick(v: f64) -> String {
    let short = |x: f64| {
        let t = format!("{x:.3}");
        let t = t.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    };
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", short(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", short(v / 1e3))
    } else {
        short(v)
    }
}

/// Axes and a horizontal grid with round ticks from 0 to `ymax` (a top from
/// [`nice_scale`]), for the charts that share that frame.
pub(super) fn frame(
    s: &mut String,
    (w, h, l, r, t, b): (f64, f64, f64, f64, f64, f64),
    ymax: f64,
    py: &dyn Fn(f64) -> f64,
) {
    let _ = write!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" class="ax"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" class="ax"/>"#,
        h - b,
        w - r,
        h - b,
        h - b
    );
    let (_, step) = nice_scale(ymax);
    y_ticks(s, (l, w - r), (ymax, step), &py);
}

/// Line chart: primary metric against the swept parameter (log2 x axis), one line per
/// config, 95% CI band around each.
pub(super) fn sweep_chart(points: &[&PointSummary], axis: &str, configs: &[String]) -> String {
    let (w, h, l, r, t, b) = (720.0, 360.0, 70.0, 170.0, 20.0, 50.0);
    let xs: Vec<f64> = points
        .iter()
        .filter_map(|p| p.params.get(axis).and_then(|v| v.as_f64()))
        .collect();
    let (xmin, xmax) = (
        xs.iter().cloned().fold(f64::MAX, f64::min).max(1e-9).log2(),
        xs.iter().cloned().fold(f64::MIN, f64::max).max(1e-9).log2(),
    );
    let mut ymax: f64 = 0.0;
    let mut unit = String::new();
    for p in points {
        for c in &p.configs {
            if let Some(m) = c.metrics.first() {
                ymax = ymax.max(m.summary.ci_high.max(m.summary.mean));
                unit = format!("{} {}", crate::tax::metric_words(&m.name), m.unit);
            }
        }
    }
    let ymax = nice_scale(ymax).0;
    let px = |x: f64| {
        let span = (xmax - xmin).max(1e-9);
        l + (x.max(1e-9).log2() - xmin) / span * (w - l - r)
    };
    let py = |y: f64| t + (1.0 - y / ymax) * (h - t - b);
    let mut s = format!(
        r#"<svg class="plot sweep" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    frame(&mut s, (w, h, l, r, t, b), ymax, &py);
    for x in &xs {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="tk" text-anchor="middle">{}</text>"#,
            px(*x),
            h - b + 16.0,
            // Sweep values are what the user wrote (16384, not 16.384k).
            if x.fract() == 0.0 {
                format!("{x:.0}")
            } else {
                tick(*x)
            }
        );
    }
    axis_titles(&mut s, (w, h, l, r, t, b), Some(axis), &unit);
    for (ci, cfg) in configs.iter().enumerate() {
        let color = PALETTE[ci % PALETTE.len()];
        let pts: Vec<(f64, f64, f64, f64)> = points
            .iter()
            .filter_map(|p| {
                let x = p.params.get(axis)?.as_f64()?;
                let m = p
                    .configs
                    .iter()
                    .find(|c| &c.config == cfg)?
                    .metrics
                    .first()?;
                Some((x, m.summary.mean, m.summary.ci_low, m.summary.ci_high))
            })
            .collect();
        if pts.is_empty() {
            continue;
        }
        sweep_line(&mut s, &pts, color, cfg, &px, &py);
    }
    legend(&mut s, configs, w - r + 12.0, t + 12.0);
    s.push_str("</svg>");
    s
}

/// One config's line of a sweep chart: its 95% CI band, the means joined, a dot per point
/// with its value as a tooltip. `pts`: (x, mean, CI low, CI high).
fn sweep_line(
    s: &mut String,
    pts: &[(f64, f64, f64, f64)],
    color: &str,
    cfg: &str,
    px: &dyn Fn(f64) -> f64,
    py: &dyn Fn(f64) -> f64,
) {
    let upper: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.3)))
        .collect();
    let lower: Vec<String> = pts
        .iter()
        .rev()
        .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.2.max(0.0))))
        .collect();
    let _ = write!(
        s,
        r#"<polygon class="band" points="{} {}" fill="{color}" fill-opacity="0.18"/>"#,
        upper.join(" "),
        lower.join(" ")
    );
    let line: Vec<String> = pts
        .iter()
        .map(|p| format!("{:.1},{:.1}", px(p.0), py(p.1)))
        .collect();
    let _ = write!(
        s,
        r#"<polyline class="line" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
        line.join(" ")
    );
    for p in pts {
        let _ = write!(
            s,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"><title>{}: {} = {}</title></circle>"#,
            px(p.0),
            py(p.1),
            esc(cfg),
            num(p.0),
            num(p.1)
        );
    }
}

/// Grouped bars: one group per entry, one bar per config: the mean as the bar, each try as
/// a dot over it, and the 95% CI as a whisker (none from one try: its tooltip says "CI n/a").
pub(super) fn bars(title_unit: &str, groups: &[BarGroup]) -> String {
    let nbars = groups.iter().map(|g| g.1.len()).max().unwrap_or(1).max(1);
    let gw = 26.0 * nbars as f64 + 24.0;
    let (l, r, t, b, h) = (70.0, 170.0, 20.0, 70.0, 320.0);
    let w = (l + r + gw * groups.len() as f64).max(420.0);
    let top = groups
        .iter()
        .flat_map(|g| {
            g.1.iter().flat_map(|bar| {
                std::iter::once(bar.value + bar.ci_half.unwrap_or(0.0))
                    .chain(bar.tries.iter().copied())
            })
        })
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = nice_scale(top).0;
    let py = |y: f64| t + (1.0 - y.max(0.0) / ymax) * (h - t - b);
    let mut s = format!(
        r#"<svg class="plot bars" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    frame(&mut s, (w, h, l, r, t, b), ymax, &py);
    axis_titles(&mut s, (w, h, l, r, t, b), None, title_unit);
    let mut names: Vec<String> = Vec::new();
    for (gi, (gname, vals)) in groups.iter().enumerate() {
        let x0 = l + 12.0 + gw * gi as f64;
        for (bi, bar) in vals.iter().enumerate() {
            if !names.contains(&bar.name) {
                names.push(bar.name.clone());
            }
            let color_i = names.iter().position(|n| n == &bar.name).unwrap_or(0);
            let x = x0 + 26.0 * bi as f64;
            let ci = match bar.ci_half {
                Some(e) => format!("± {} (95% CI)", num(e)),
                None => "CI n/a (one try)".to_string(),
            };
            let _ = write!(
                s,
                r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="22" height="{:.1}" fill="{}" fill-opacity="0.75"><title>{}: {} mean {} {ci}, {} tries</title></rect>"#,
                py(bar.value),
                (h - b - py(bar.value)).max(0.0),
                PALETTE[color_i % PALETTE.len()],
                esc(gname),
                esc(&bar.name),
                num(bar.value),
                bar.tries.len()
            );
            whisker_and_tries(&mut s, bar, x + 11.0, &py);
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" class="tk" text-anchor="end" transform="rotate(-30 {:.1} {})">{}</text>"#,
            x0 + gw / 2.0,
            h - b + 14.0,
            x0 + gw / 2.0,
            h - b + 14.0,
            esc(gname)
        );
    }
    legend(&mut s, &names, w - r + 12.0, t + 12.0);
    s.push_str("</svg>");
    s
}

/// A bar's 95% CI whisker (when it has one) and its tries as dots, spread across the bar
/// (centred at `cx`) so equal values stay visible.
fn whisker_and_tries(s: &mut String, bar: &Bar, cx: f64, py: &dyn Fn(f64) -> f64) {
    if let Some(e) = bar.ci_half {
        let _ = write!(
            s,
            r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" class="err"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="err"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" class="err"/>"#,
            py(bar.value + e),
            py(bar.value - e),
            cx - 4.0,
            py(bar.value + e),
            cx + 4.0,
            py(bar.value + e),
            cx - 4.0,
            py(bar.value - e),
            cx + 4.0,
            py(bar.value - e)
        );
    }
    // The tries, spread across the bar so equal values stay visible.
    let n = bar.tries.len().max(1) as f64;
    for (i, v) in bar.tries.iter().enumerate() {
        let dx = if n > 1.0 {
            -7.0 + 14.0 * i as f64 / (n - 1.0)
        } else {
            0.0
        };
        let _ = write!(
            s,
            r#"<circle class="try" cx="{:.1}" cy="{:.1}" r="2.2"><title>try {}: {}</title></circle>"#,
            cx + dx,
            py(*v),
            i + 1,
            num(*v)
        );
    }
}

/// x position of a percentile on the "nines" axis: 0 at 0 %, 1 at 90 %, 2 at 99 %, 3 at
/// 99.9 % … (−log₁₀ of the fraction above it), capped at 5 (99.999 %); 100 % sits at the cap.
pub(super) fn nines(p: f64) -> f64 {
    let above = (1.0 - p / 100.0).max(1e-5);
    (-above.log10()).min(5.0)
}

/// Latency against percentile, one line per (point, config), from the merged HDR
/// histograms, as HdrHistogram and wrk2 plot it: the x axis in "nines", the latency axis
/// logarithmic when the values span more than a decade.
pub(super) fn percentile_chart(series: &[(String, &[(f64, f64)])]) -> String {
    let (w, h, l, r, t, b) = (720.0, 360.0, 70.0, 220.0, 20.0, 50.0);
    let all: Vec<f64> = series
        .iter()
        .flat_map(|(_, d)| d.iter().map(|p| p.1))
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = all.iter().copied().fold(f64::MAX, f64::min);
    let hi = all.iter().copied().fold(0.0, f64::max);
    let log = hi > 0.0 && lo > 0.0 && hi / lo > 10.0;
    let xmax = series
        .iter()
        .flat_map(|(_, d)| d.iter().map(|p| nines(p.0)))
        .fold(1.0, f64::max)
        .ceil();
    let px = |x: f64| l + x / xmax * (w - l - r);
    let (ylo, yhi) = if log {
        (lo.log10().floor(), hi.log10().ceil())
    } else {
        (0.0, nice_scale(hi).0)
    };
    let py = |v: f64| {
        let y = if log { v.max(1e-9).log10() } else { v };
        t + (1.0 - (y - ylo) / (yhi - ylo).max(1e-9)) * (h - t - b)
    };
    let mut s = format!(
        r#"<svg class="plot percentiles" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    let _ = write!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" class="ax"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" class="ax"/>"#,
        h - b,
        w - r,
        h - b,
        h - b
    );
    let yticks = latency_ticks(log, ylo, yhi, hi);
    for v in yticks {
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="tk" text-anchor="end">{}</text><line x1="{l}" y1="{}" x2="{}" y2="{}" class="grid"/>"#,
            l - 6.0,
            py(v) + 4.0,
            tick(v),
            py(v),
            w - r,
            py(v)
        );
    }
    let labels = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"];
    for (i, lab) in labels.iter().enumerate().take(xmax as usize + 1) {
        let x = px(i as f64);
        let _ = write!(
            s,
            r#"<text x="{x:.1}" y="{}" class="tk" text-anchor="middle">{lab}</text><line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" class="grid"/>"#,
            h - b + 16.0,
            h - b
        );
    }
    let y = if log {
        "latency µs (log scale)"
    } else {
        "latency µs"
    };
    axis_titles(&mut s, (w, h, l, r, t, b), Some("percentile"), y);
    let mut names = Vec::new();
    for (i, (name, d)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let pts: Vec<String> = d
            .iter()
            .map(|(p, v)| format!("{:.1},{:.1}", px(nines(*p)), py(*v)))
            .collect();
        let _ = write!(
            s,
            r#"<polyline class="line" points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            pts.join(" ")
        );
        for (p, v) in d.iter() {
            let _ = write!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="2" fill="{color}"><title>{}: p{} = {} µs</title></circle>"#,
                px(nines(*p)),
                py(*v),
                esc(name),
                tick(*p),
                num(*v)
            );
        }
        names.push(name.clone());
    }
    legend(&mut s, &names, w - r + 12.0, t + 12.0);
    s.push_str("</svg>");
    s
}

/// Latency ticks: decades on a log axis (with 2 and 5 between when there are few), else
/// round steps up to `hi`. `ylo`/`yhi`: the axis ends (log10 of them on a log axis).
fn latency_ticks(log: bool, ylo: f64, yhi: f64, hi: f64) -> Vec<f64> {
    if log {
        let decades = (yhi - ylo) as i32;
        (ylo as i32..=yhi as i32)
            .flat_map(|d| {
                let base = 10f64.powi(d);
                if decades <= 2 {
                    vec![base, 2.0 * base, 5.0 * base]
                } else {
                    vec![base]
                }
            })
            .filter(|v| v.log10() <= yhi + 1e-9)
            .collect()
    } else {
        let (top, step) = nice_scale(hi);
        (0..=((top / step).round() as usize))
            .map(|i| i as f64 * step)
            .collect()
    }
}

/// The comparison chart's ticks over [-lim, lim] on a plot `width` px wide: round steps,
/// 0 among them, and no two so close that their labels (10 px type, 6.2 px a character)
/// touch — a wide right margin and a ±2500% row put eleven labels in 350 px, on top of each
/// other (the layout check caught it in CI).
fn compare_ticks(lim: f64, width: f64) -> Vec<f64> {
    let ticks = |step: f64| -> Vec<f64> {
        let k = (lim / step + 1e-9).floor() as i64;
        (-k..=k).map(|i| i as f64 * step).collect()
    };
    let mut step = nice_scale(lim).1;
    loop {
        let t = ticks(step);
        let widest = t.iter().map(|v| tick_label_px(*v)).fold(0.0, f64::max);
        if width * step / (2.0 * lim) >= widest + 6.0 || t.len() <= 3 {
            return t;
        }
        // The next round step above this one.
        step = nice_scale(step * 5.0 * 1.0001).1;
    }
}

/// Width of a comparison tick's label ("-2500%") at 10 px type, 6.2 px a character.
fn tick_label_px(v: f64) -> f64 {
    TEXT_PX * (tick(v).chars().count() + 1) as f64
}

/// Width of one character at the charts' 10 px type: a little over the widest measured.
const TEXT_PX: f64 = 6.2;

/// The comparison chart's right margin, which holds each row's "+1.8% change within noise
/// threshold": as wide as the longest at 10 px type (6.2 px a character, a little over the
/// widest measured), at least 190 px, so no label crosses the drawing's edge (the layout
/// check caught one at 190 px).
fn label_margin(rows: &[&Row]) -> f64 {
    rows.iter()
        .map(|x| {
            let c = &x.comparison;
            format!("{:+.1}% {}", c.pct_change, c.verdict.words())
                .chars()
                .count()
        })
        .max()
        .map_or(0.0, |n| n as f64 * TEXT_PX + 12.0)
        .max(190.0)
}

/// Comparisons as a chart: one horizontal bar per row, its % change of the candidate against
/// the baseline, coloured by the verdict (green improved, red regressed, grey otherwise),
/// with the candidate's CI relative to the baseline mean as a whisker.
pub(super) fn compare_chart(rows: &[Row]) -> String {
    // The headline metrics only (each point's primary metric, p50 and p99); the table below
    // the chart lists every metric.
    let mut primary: Vec<(&str, &str)> = Vec::new();
    for r in rows {
        if !primary.iter().any(|(p, _)| *p == r.point) {
            primary.push((&r.point, &r.metric));
        }
    }
    let rows: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            primary.contains(&(r.point.as_str(), r.metric.as_str()))
                || r.metric == "p50_us"
                || r.metric == "p99_us"
        })
        .collect();
    let rowh = 22.0;
    let (l, r, t, b) = (330.0, label_margin(&rows), 24.0, 30.0);
    let w = 900.0;
    let h = t + b + rowh * rows.len() as f64;
    let lim = rows
        .iter()
        .map(|x| x.comparison.pct_change.abs())
        .filter(|v| v.is_finite())
        .fold(1.0, f64::max);
    let lim = nice_scale(lim).0;
    let px = |v: f64| l + (v.clamp(-lim, lim) + lim) / (2.0 * lim) * (w - l - r);
    let mut s = format!(
        r#"<svg class="plot compare" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    for v in compare_ticks(lim, w - l - r) {
        let _ = write!(
            s,
            r#"<line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" class="grid"/><text x="{x:.1}" y="{}" class="tk" text-anchor="middle">{}%</text>"#,
            h - b,
            h - b + 14.0,
            tick(v),
            x = px(v)
        );
    }
    let _ = write!(
        s,
        r#"<line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" class="ax"/><text x="{x:.1}" y="14" class="lb" text-anchor="middle">change of the candidate against the baseline (mean, %)</text>"#,
        h - b,
        x = px(0.0)
    );
    for (i, row) in rows.iter().enumerate() {
        let c = &row.comparison;
        let y = t + rowh * i as f64;
        let color = match c.verdict.words() {
            "improved" => "#2ca02c",
            "regressed" => "#d62728",
            _ => "#9a9a9a",
        };
        let pc = if c.pct_change.is_finite() {
            c.pct_change
        } else {
            0.0
        };
        let (x0, x1) = (px(0.0).min(px(pc)), px(0.0).max(px(pc)));
        let _ = write!(
            s,
            r#"<text x="{}" y="{:.1}" class="tk" text-anchor="end">{} · {} · {} vs {}</text><rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{:+.1}%: {}</title></rect><text x="{}" y="{:.1}" class="tk">{:+.1}% {}</text>"#,
            l - 6.0,
            y + rowh * 0.65,
            esc(&row.point),
            esc(&crate::tax::metric_words(&row.metric)),
            esc(&row.candidate),
            esc(&row.baseline),
            y + 4.0,
            (x1 - x0).max(1.0),
            rowh - 8.0,
            c.pct_change,
            c.verdict.words(),
            w - r + 6.0,
            y + rowh * 0.65,
            c.pct_change,
            c.verdict.words()
        );
        let base = c.baseline.mean;
        if c.candidate.n >= 2 && base.abs() > f64::EPSILON {
            let lo = (c.candidate.ci_low - base) / base.abs() * 100.0;
            let hi = (c.candidate.ci_high - base) / base.abs() * 100.0;
            let ym = y + rowh / 2.0;
            let _ = write!(
                s,
                r#"<line x1="{:.1}" y1="{ym:.1}" x2="{:.1}" y2="{ym:.1}" class="err"/>"#,
                px(lo),
                px(hi)
            );
        }
    }
    s.push_str("</svg>");
    s
}

/// Stacked bars of the CPU split per (point, config).
pub(super) fn cpu_chart(points: &[PointSummary]) -> String {
    let cells: Vec<(String, &ConfigSummary)> = points
        .iter()
        .flat_map(|p| {
            p.configs
                .iter()
                .map(move |c| (format!("{} · {}", p.label, c.config), c))
        })
        .collect();
    // Names are written upright (-90°), one under each bar: the longest decides how far
    // they reach below the axis (6 px a character at this size, generously).
    let longest = cells
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0) as f64;
    let reach = 6.0 * longest + 10.0;
    let bw = 30.0;
    let (t, r, plot) = (20.0, 130.0, 210.0);
    let l = 60.0;
    let b = (reach + 20.0).max(60.0);
    let h = t + plot + b;
    let w = (l + r + (bw + 12.0) * cells.len() as f64).max(420.0);
    let py = |y: f64| t + (1.0 - y / 100.0) * (h - t - b);
    let mut s = format!(
        r#"<svg class="plot cpu" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    let _ = write!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" class="ax"/>"#,
        h - b,
        w - r,
        h - b
    );
    for i in 0..=4 {
        let v = 25.0 * i as f64;
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="tk" text-anchor="end">{v}%</text><line x1="{l}" y1="{}" x2="{}" y2="{}" class="grid"/>"#,
            l - 6.0,
            py(v) + 4.0,
            py(v),
            w - r,
            py(v)
        );
    }
    for (i, (name, c)) in cells.iter().enumerate() {
        let x = l + 8.0 + (bw + 12.0) * i as f64;
        // A config without a CPU split (probes) has no bar, not an empty one.
        let Some(cpu) = &c.cpu else { continue };
        let parts = [
            cpu.user_pct,
            cpu.system_pct,
            cpu.irq_pct,
            cpu.softirq_pct,
            cpu.steal_pct,
            cpu.guest_pct,
            cpu.unsampled_pct,
        ];
        let mut acc = 0.0;
        for (v, (pname, color)) in parts.iter().zip(CPU_PARTS) {
            if *v <= 0.0 {
                continue;
            }
            let _ = write!(
                s,
                r#"<rect class="bar" x="{x:.1}" y="{:.1}" width="{bw}" height="{:.1}" fill="{color}"><title>{}: {pname} {:.1}%</title></rect>"#,
                py(acc + v),
                py(acc) - py(acc + v),
                esc(name),
                v
            );
            acc += v;
        }
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" class="tk" text-anchor="end" transform="rotate(-90 {:.1} {})">{}</text>"#,
            x + bw / 2.0 + 4.0,
            h - b + 8.0,
            x + bw / 2.0 + 4.0,
            h - b + 8.0,
            esc(name)
        );
    }
    for (i, (n, color)) in CPU_PARTS.iter().enumerate() {
        let yy = t + 12.0 + 16.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect x="{}" y="{}" width="10" height="10" fill="{color}"/><text x="{}" y="{yy}" class="lg">{n}</text>"#,
            w - r + 12.0,
            yy - 9.0,
            w - r + 26.0
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// However wide the range and narrow the plot, the comparison chart's tick labels keep
    /// apart, 0 is a tick, and the ticks stay inside [-lim, lim].
    #[test]
    fn compare_ticks_never_put_labels_on_each_other() {
        for (max, width) in [
            (2500.0, 350.0),
            (2400.0, 300.0),
            (37.0, 540.0),
            (1.0, 100.0),
        ] {
            let lim = nice_scale(max).0;
            let ticks = compare_ticks(lim, width);
            assert!(ticks.contains(&0.0), "{ticks:?}");
            assert!(
                ticks.iter().all(|t| t.abs() <= lim * (1.0 + 1e-9)),
                "{ticks:?}"
            );
            let px = |v: f64| (v + lim) / (2.0 * lim) * width;
            for pair in ticks.windows(2) {
                let need = pair.iter().map(|v| tick_label_px(*v)).fold(0.0, f64::max);
                assert!(
                    px(pair[1]) - px(pair[0]) >= need,
                    "{max}% in {width} px: {ticks:?}"
                );
            }
        }
    }
}
