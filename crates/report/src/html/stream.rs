//! `explain --workload stream -o FILE`: the stream's explanation as a page — the verdict,
//! a stacked bar per side of CPU µs per MB by kind with the bound side marked (and, into a
//! guest, the guest's threads on this host), and each remedy's rate against as-is with its
//! 95% interval. Plain inline SVG, no script, like the run report.

use std::fmt::Write;

use crate::decide::Interval;
use crate::escape::esc;
use crate::explain_stream::{remedy_name, text, StreamExplanation};

/// The kinds of CPU time, in stacking order, with their colours.
const KINDS: [(&str, &str); 7] = [
    ("user", "#4c78a8"),
    ("sys", "#f58518"),
    ("softirq", "#54a24b"),
    ("irq", "#e45756"),
    ("steal", "#9d755d"),
    ("no kind sampled", "#bab0ac"),
    ("a guest's threads on this host (whole)", "#999999"),
];
/// The host view's kind in [`KINDS`].
const HOST: &str = "a guest's threads on this host (whole)";

/// Width of the drawings and of the label column on their left.
const W: f64 = 900.0;
const LABEL: f64 = 220.0;
const ROW: f64 = 34.0;

/// One bar: its label, its parts (kind, µs per MB), whether it is the bound side.
type Bar<'a> = (String, Vec<(&'a str, f64)>, bool);

/// The page.
pub fn stream_page(e: &StreamExplanation, generated: &str) -> String {
    let mut s = super::page_head();
    let _ = write!(
        s,
        "<h1>virtperf explain --workload stream</h1><p>{}</p><p><b>{}</b></p>",
        esc(generated),
        esc(&e.verdict)
    );
    s.push_str("<h2>CPU µs per MB received, by kind</h2>");
    s.push_str(&cost_bars(e));
    s.push_str("<ul class=\"legend\">");
    for (k, c) in KINDS {
        let _ = write!(
            s,
            "<li><span class=\"sw\" style=\"background:{c}\"></span>{k}</li>"
        );
    }
    s.push_str("</ul><h2>Remedies: rate ÷ as-is, 95% interval</h2>");
    s.push_str(&remedy_bars(e));
    let _ = write!(
        s,
        "<h2>The whole answer</h2><pre style=\"white-space:pre-wrap\">{}</pre>",
        esc(&text(e))
    );
    s.push_str("</body></html>");
    s
}

/// One bar per side (and per host thread class of a guest), stacked by kind.
fn cost_bars(e: &StreamExplanation) -> String {
    let mut rows: Vec<Bar> = e
        .sides
        .iter()
        .map(|c| {
            let m = &c.us_per_mb;
            let bound = e.bound.side == Some(c.role);
            let label = format!(
                "{} (CPU {}){}",
                c.role,
                c.cpu,
                if bound { " ◀ bound" } else { "" }
            );
            let parts = vec![
                ("user", m.user),
                ("sys", m.sys),
                ("softirq", m.softirq),
                ("irq", m.irq),
                ("steal", m.steal),
                ("no kind sampled", m.unsampled),
            ];
            (label, parts, bound)
        })
        .collect();
    if let Some(h) = &e.host_view {
        for c in &h.classes {
            if c.us_per_mb > 0.0 {
                // The host sees its threads' CPU whole: one colour.
                rows.push((
                    format!("host: {} threads", c.class),
                    vec![(HOST, c.us_per_mb)],
                    false,
                ));
            }
        }
    }
    let max = rows
        .iter()
        .map(|(_, p, _)| p.iter().map(|(_, v)| v.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot = W - LABEL - 90.0;
    let h = ROW * rows.len() as f64 + 10.0;
    let mut s = format!("<svg class=\"plot\" width=\"{W}\" height=\"{h}\" role=\"img\">");
    for (i, (label, parts, bound)) in rows.iter().enumerate() {
        let y = 5.0 + ROW * i as f64;
        let _ = write!(
            s,
            "<text class=\"lb\" x=\"4\" y=\"{:.1}\"{}>{}</text>",
            y + 17.0,
            if *bound { " font-weight=\"bold\"" } else { "" },
            esc(label)
        );
        let mut x = LABEL;
        for (kind, v) in parts {
            let wd = v.max(0.0) / max * plot;
            let colour = KINDS
                .iter()
                .find(|(k, _)| k == kind)
                .map_or("#999", |(_, c)| c);
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{wd:.1}\" height=\"24\" fill=\"{colour}\"><title>{kind}: {v:.1} µs per MB</title></rect>"
            );
            x += wd;
        }
        let total: f64 = parts.iter().map(|(_, v)| v.max(0.0)).sum();
        let _ = write!(
            s,
            "<text class=\"tk\" x=\"{:.1}\" y=\"{:.1}\">{total:.1}</text>",
            x + 4.0,
            y + 16.0
        );
    }
    s.push_str("</svg>");
    s
}

/// One row per remedy: its ratio as a dot, its interval as a line, 1.0 marked.
fn remedy_bars(e: &StreamExplanation) -> String {
    let measured: Vec<_> = e.remedies.iter().filter(|r| r.ratio.is_some()).collect();
    let ends = measured
        .iter()
        .flat_map(|r| match (&r.ratio_interval, r.ratio) {
            (Interval::Bounded { low, high }, _) => vec![*low, *high],
            (_, Some(x)) => vec![x],
            _ => vec![],
        });
    let (lo, hi) = ends.fold((1.0f64, 1.0f64), |(a, b), v| (a.min(v), b.max(v)));
    let (lo, hi) = ((lo.max(0.0) - 0.05).max(0.0), hi.min(10.0) + 0.05);
    // Remedy labels carry their effect: a wider label column.
    let left = LABEL + 120.0;
    let plot = W - left - 30.0;
    let x = |v: f64| left + (v.clamp(lo, hi) - lo) / (hi - lo) * plot;
    let h = ROW * e.remedies.len().max(1) as f64 + 30.0;
    let mut s = format!("<svg class=\"plot\" width=\"{W}\" height=\"{h}\" role=\"img\">");
    let one = x(1.0);
    let _ = write!(
        s,
        "<line class=\"grid\" x1=\"{one:.1}\" y1=\"0\" x2=\"{one:.1}\" y2=\"{:.1}\"/><text class=\"tk\" x=\"{:.1}\" y=\"{:.1}\">×1 (as-is)</text>",
        h - 18.0,
        one - 20.0,
        h - 4.0
    );
    for (i, r) in e.remedies.iter().enumerate() {
        let y = 5.0 + ROW * i as f64;
        let label = format!("{} — {}", remedy_name(r), r.effect);
        let _ = write!(
            s,
            "<text class=\"lb\" x=\"4\" y=\"{:.1}\">{}</text>",
            y + 17.0,
            esc(&label)
        );
        if let Interval::Bounded { low, high } = &r.ratio_interval {
            let _ = write!(
                s,
                "<line class=\"err ci\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\"/>",
                x(*low),
                y + 12.0,
                x(*high),
                y + 12.0
            );
        }
        if let Some(v) = r.ratio {
            let _ = write!(
                s,
                "<circle class=\"try\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\"><title>×{v:.3}</title></circle>",
                x(v),
                y + 12.0
            );
        }
    }
    s.push_str("</svg>");
    s
}
