//! The cost and latency plot: per config of one sweep point, its busy CPUs (cpuidle polling
//! included) against its latency (or primary metric) with the 95% interval, so what a
//! faster configuration costs is one look (what `tune` ranks by). The names are an HTML
//! legend below the drawing: a config name is as long as its remedies' names together,
//! and a label beside each dot would collide with its neighbours'.

use std::fmt::Write;

use super::charts::{nice_scale, tick, PALETTE};
use crate::escape::esc;
use crate::summary::PointSummary;

/// Every point's plot (with its heading), for the points that have one.
pub(super) fn cost_charts(points: &[&PointSummary]) -> String {
    let mut s = String::new();
    for p in points {
        if let Some(c) = cost_chart(p) {
            let _ = write!(
                s,
                "<h4>{}: cost and latency (mean busy CPUs; mean and 95% CI)</h4>",
                esc(&p.label)
            );
            s.push_str(&c);
        }
    }
    s
}

/// One dot: config name, busy CPUs, mean, CI low, CI high.
type Dot = (String, f64, f64, f64, f64);

/// The metric plotted (p50 where the point has it, else its primary metric) and each
/// config's dot.
fn dots_of(p: &PointSummary) -> Option<(&str, Vec<Dot>)> {
    let metric = p
        .configs
        .iter()
        .find_map(|c| c.metric("p50_us").map(|_| "p50_us"))
        .or_else(|| {
            p.configs
                .iter()
                .find_map(|c| c.metrics.first().map(|m| m.name.as_str()))
        })?;
    let dots = p
        .configs
        .iter()
        .filter_map(|c| {
            let m = c.metric(metric)?;
            let x = c.cpus_busy?;
            let s = &m.summary;
            let (lo, hi) = if s.n >= 2 {
                (s.ci_low, s.ci_high)
            } else {
                (s.mean, s.mean)
            };
            Some((c.config.clone(), x, s.mean, lo, hi))
        })
        .collect();
    Some((metric, dots))
}

/// The plot for `p`, when at least three of its configs have both figures; None otherwise.
fn cost_chart(p: &PointSummary) -> Option<String> {
    let (metric, dots) = dots_of(p)?;
    if dots.len() < 3 {
        return None;
    }
    let unit = p
        .configs
        .iter()
        .find_map(|c| c.metric(metric))
        .map(|m| format!("{} ({})", crate::tax::metric_words(&m.name), m.unit))
        .unwrap_or_default();
    let (w, h, l, r, t, b) = (720.0, 340.0, 70.0, 30.0, 20.0, 50.0);
    let (xmax, xstep) = nice_scale(dots.iter().map(|d| d.1).fold(0.0, f64::max) * 1.05);
    let (ymax, ystep) = nice_scale(dots.iter().map(|d| d.4).fold(0.0, f64::max) * 1.05);
    let px = |x: f64| l + x / xmax * (w - l - r);
    let py = |y: f64| t + (1.0 - y.max(0.0) / ymax) * (h - t - b);
    let mut s = format!(
        r#"<svg class="plot cost" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg"><line x1="{l}" y1="{}" x2="{}" y2="{}" class="ax"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" class="ax"/>"#,
        h - b,
        w - r,
        h - b,
        h - b
    );
    let steps = |max: f64, step: f64| {
        (0..)
            .map(move |i| i as f64 * step)
            .take_while(move |v| *v <= max + 1e-9)
    };
    super::charts::y_ticks(&mut s, (l, w - r), (ymax, ystep), &py);
    for v in steps(xmax, xstep) {
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{}" class="tk" text-anchor="middle">{}</text>"#,
            px(v),
            h - b + 16.0,
            tick(v)
        );
    }
    super::charts::axis_titles(
        &mut s,
        (w, h, l, r, t, b),
        Some("busy CPUs (cpuidle polling included)"),
        &unit,
    );
    draw_dots(&mut s, &dots, &px, &py);
    Some(s)
}

/// The dots with their intervals, then the legend naming them.
fn draw_dots(s: &mut String, dots: &[Dot], px: &dyn Fn(f64) -> f64, py: &dyn Fn(f64) -> f64) {
    for (i, (name, x, mean, lo, hi)) in dots.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        let (cx, cy) = (px(*x), py(*mean));
        let _ = write!(
            s,
            r#"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="{c}" stroke-width="2"/>"#,
            py(*lo),
            py(*hi),
        );
        let title = format!(
            "<title>{}: {x:.2} busy CPUs, {}</title>",
            esc(name),
            tick(*mean)
        );
        // Past the palette, squares: two configs never share colour and shape.
        if square(i) {
            let _ = write!(
                s,
                r#"<rect x="{:.1}" y="{:.1}" width="10" height="10" fill="{c}">{title}</rect>"#,
                cx - 5.0,
                cy - 5.0
            );
        } else {
            let _ = write!(
                s,
                r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{c}">{title}</circle>"#
            );
        }
    }
    s.push_str("</svg><ul class=\"legend\">");
    for (i, (name, x, mean, _, _)) in dots.iter().enumerate() {
        let _ = write!(
            s,
            r#"<li><span class="sw" style="background:{};border-radius:{}"></span>{} — {x:.2} CPUs, {}</li>"#,
            PALETTE[i % PALETTE.len()],
            if square(i) { "0" } else { "50%" },
            esc(name),
            tick(*mean)
        );
    }
    s.push_str("</ul>");
}

/// Whether config `i` is drawn as a square (its colour is a circle's already).
fn square(i: usize) -> bool {
    (i / PALETTE.len()) % 2 == 1
}
