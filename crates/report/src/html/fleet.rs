//! The fleet page (`report --group-by TAG`): per group a stacked bar per host of its
//! explain terms (path, wake-up outside the idle exit, idle exit, residual), the terms as a
//! table, the metrics' median and spread across hosts, then what differs between groups
//! and, when two campaigns are compared, their table.

use std::fmt::Write;

use crate::compare::Row;
use crate::escape::esc;
use crate::fleet::{Fleet, Group, HostTerms};
use crate::render::num;

/// Colours of the stacked terms, in bar order.
const TERM_COLOURS: [(&str, &str); 4] = [
    ("path", "#4c78a8"),
    ("wake-up (rest)", "#f58518"),
    ("idle exit", "#e45756"),
    ("residual", "#9d9d9d"),
];

/// The whole fleet page.
pub fn fleet_page(f: &Fleet, campaigns: &[Row], title: &str, generated: &str) -> String {
    let mut s = super::page_head();
    let _ = write!(
        s,
        "<h1>{}</h1><p>generated {}; grouped by tag <b>{}</b></p>",
        esc(title),
        esc(generated),
        esc(&f.group_by)
    );
    for g in &f.groups {
        group_section(&mut s, &f.group_by, g);
    }
    if !f.env_differences.is_empty() {
        s.push_str("<section><h2>what differs between the groups</h2><table><tr><th>field</th><th>values by group</th></tr>");
        for d in &f.env_differences {
            let per: Vec<String> = d
                .by_group
                .iter()
                .map(|(g, vs)| format!("{}: {}", esc(g), esc(&vs.join(" | "))))
                .collect();
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(&d.field),
                per.join("<br>")
            );
        }
        s.push_str("</table></section>");
    }
    if !campaigns.is_empty() {
        s.push_str("<section><h2>campaign against campaign</h2>");
        s.push_str(&super::compare_chart(campaigns));
        s.push_str(&super::comparison_table(campaigns));
        s.push_str("</section>");
    }
    s.push_str("</body></html>\n");
    s
}

fn group_section(s: &mut String, tag: &str, g: &Group) {
    let _ = write!(
        s,
        "<section><h2>{}={}</h2><p>{} run(s) on {} host(s): {}</p>",
        esc(tag),
        esc(&g.name),
        g.runs.len(),
        g.hosts.len(),
        esc(&g.hosts.join(", "))
    );
    if !g.explain.is_empty() {
        s.push_str("<h3>where a cross-CPU round trip goes, per host (µs)</h3>");
        s.push_str(&terms_chart(&g.explain));
        s.push_str("<table><tr><th>host</th><th>run</th><th>measured</th><th>path</th><th>wake-up</th><th>idle exit</th><th>residual</th></tr>");
        let cell = |v: Option<f64>| v.map_or_else(|| "not measured".to_string(), num);
        for t in &g.explain {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&t.host), t.run_id, num(t.measured_us), cell(t.path_us),
                cell(t.wake_up_us), cell(t.idle_exit_us), cell(t.residual_us)
            );
        }
        s.push_str("</table>");
    }
    for why in &g.unexplained {
        let _ = write!(s, "<p class=\"warning\">not explained: {}</p>", esc(why));
    }
    if !g.metrics.is_empty() {
        s.push_str("<h3>across hosts (each host's mean; median and range; events per transaction and service demand in --json)</h3><table><tr><th>point</th><th>config</th><th>metric</th><th>hosts</th><th>median</th><th>min</th><th>max</th><th>per host</th></tr>");
        for m in g
            .metrics
            .iter()
            .filter(|m| crate::fleet::headline(&m.metric))
        {
            let per: Vec<String> = m
                .per_host
                .iter()
                .map(|(h, v)| format!("{} {}", esc(h), num(*v)))
                .collect();
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&m.point), esc(&m.config), esc(&crate::tax::metric_words(&m.metric)), esc(&m.unit), m.per_host.len(),
                num(m.median), num(m.min), num(m.max), per.join(", ")
            );
        }
        s.push_str("</table>");
    }
    s.push_str("</section>");
}

/// The stacked pieces of one host's bar; a term not measured is None (no bar is drawn for
/// it and the bar's label names it, as the table says "not measured"), a negative residual
/// is drawn as nothing past the prediction. Without the idle exit the wake-up is drawn
/// whole.
fn pieces(t: &HostTerms) -> [Option<f64>; 4] {
    let idle = t.idle_exit_us.map(|v| v.max(0.0));
    let wake_rest = t.wake_up_us.map(|w| (w - idle.unwrap_or(0.0)).max(0.0));
    [
        t.path_us.map(|v| v.max(0.0)),
        wake_rest,
        idle,
        t.residual_us.map(|v| v.max(0.0)),
    ]
}

fn terms_chart(rows: &[HostTerms]) -> String {
    // The label after each bar ("44.80 µs measured; not measured: …") needs room on the
    // right of the longest bar: the drawing widens for it (6 px a character, generously).
    let label = |t: &HostTerms| {
        let missing: Vec<&str> = pieces(t)
            .iter()
            .zip(TERM_COLOURS)
            .filter(|(v, _)| v.is_none())
            .map(|(_, (name, _))| name)
            .collect();
        match missing.is_empty() {
            true => format!("{} µs measured", num(t.measured_us)),
            false => format!(
                "{} µs measured; not measured: {}",
                num(t.measured_us),
                missing.join(", ")
            ),
        }
    };
    let room = rows
        .iter()
        .map(|t| 6.0 * label(t).chars().count() as f64 + 10.0)
        .fold(0.0_f64, f64::max);
    let (left, bar_h) = (140.0, 18.0);
    let w = left + 480.0 + room;
    let top = 20.0;
    let h = top + rows.len() as f64 * (bar_h + 8.0) + 10.0;
    let max = rows
        .iter()
        .map(|t| pieces(t).iter().flatten().sum::<f64>().max(t.measured_us))
        .fold(0.0_f64, f64::max)
        .max(1e-9);
    let scale = 480.0 / max;
    let mut s = format!("<svg class=\"plot\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"explain terms per host\">");
    let mut lx = left;
    for (name, colour) in TERM_COLOURS {
        let _ = write!(s, "<rect x=\"{lx}\" y=\"4\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text class=\"lg\" x=\"{}\" y=\"13\">{name}</text>", lx + 14.0);
        lx += 110.0;
    }
    for (i, t) in rows.iter().enumerate() {
        let y = top + i as f64 * (bar_h + 8.0);
        let _ = write!(
            s,
            "<text class=\"lb\" x=\"4\" y=\"{}\">{}</text>",
            y + 13.0,
            esc(&t.host)
        );
        let mut x = left;
        for (v, (_, colour)) in pieces(t).iter().zip(TERM_COLOURS) {
            let Some(v) = v else {
                continue;
            };
            let wd = v * scale;
            let _ = write!(
                s,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{wd:.1}\" height=\"{bar_h}\" fill=\"{colour}\"/>"
            );
            x += wd;
        }
        let mx = left + t.measured_us * scale;
        // After whichever ends later, the bars or the measured line.
        let lx = mx.max(x) + 3.0;
        let _ = write!(
            s,
            "<line class=\"err\" x1=\"{mx:.1}\" x2=\"{mx:.1}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"tk\" x=\"{lx:.1}\" y=\"{:.1}\">{}</text>",
            y - 2.0, y + bar_h + 2.0, y + 13.0, esc(&label(t))
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A term a host could not measure draws no bar (it used to be a zero-width one, read
    /// as "costs nothing") and the bar's label names it.
    #[test]
    fn unmeasured_terms_draw_no_bar_and_are_named() {
        let t = |host: &str, path: Option<f64>| HostTerms {
            run_id: 1,
            host: host.into(),
            measured_us: 60.0,
            path_us: path,
            wake_up_us: Some(30.0),
            idle_exit_us: None,
            residual_us: Some(5.0),
        };
        let whole = terms_chart(&[t("a", Some(25.0))]);
        let partial = terms_chart(&[t("b", None)]);
        let bars = |svg: &str| svg.matches("height=\"18\"").count();
        assert_eq!(bars(&whole), 3, "{whole}");
        assert_eq!(bars(&partial), 2, "{partial}");
        assert!(!partial.contains("width=\"0.0\""), "{partial}");
        assert!(
            partial.contains("not measured: path, idle exit"),
            "{partial}"
        );
        assert!(whole.contains("not measured: idle exit"), "{whole}");
    }
}
