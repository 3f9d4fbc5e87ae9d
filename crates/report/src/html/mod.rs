//! Self-contained HTML report: inline SVG plots, inline CSS, no script and no network, so
//! it opens anywhere and can be archived with the results.
//!
//! Plots are written by hand as SVG because they are simple (lines with CI bands, grouped
//! and stacked bars) and a plotting crate would bring a renderer we do not need.

use std::fmt::Write;

use virtperf_store::RunRow;

use crate::compare::Row;
use crate::explain::Explanation;
use crate::render::{num, run_line};
use crate::summary::{ConfigSummary, PointSummary};

mod charts;
mod cost;
mod explained;
mod fleet;
mod stream;
use crate::escape::esc;
use charts::*;
pub use fleet::fleet_page;
pub use stream::stream_page;
// The axes helpers, for the trend chart (crate::trend) to draw like the others.
pub(crate) use charts::{nice_scale, y_ticks};

/// One run's material for the report.
pub struct RunSection<'a> {
    /// The run.
    pub run: &'a RunRow,
    /// Its summaries.
    pub points: &'a [PointSummary],
    /// Config comparisons within the run.
    pub comparisons: &'a [Row],
    /// For an explain run: the decomposition its trials give.
    pub explanation: Option<&'a Explanation>,
    /// Warnings of its trials the figures hide, a line each (`trial_notes`: packets lost,
    /// no transaction, a trial a signal ended early).
    pub notes: Vec<String>,
}

fn configs_of(points: &[PointSummary]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for p in points {
        for c in &p.configs {
            if !v.contains(&c.config) {
                v.push(c.config.clone());
            }
        }
    }
    v
}

/// A metric's title on a chart: its name in words and its unit.
fn title(m: &crate::summary::MetricSummary) -> String {
    format!("{} {}", crate::tax::metric_words(&m.name), m.unit)
}

/// The swept numeric parameter of a workload's points, if there is exactly one.
fn numeric_axis(points: &[&PointSummary]) -> Option<String> {
    let first = points.first()?.params.as_object()?;
    let keys: Vec<&String> = first
        .iter()
        .filter(|(_, v)| v.is_number())
        .map(|(k, _)| k)
        .collect();
    (keys.len() == 1 && points.len() > 1).then(|| keys[0].clone())
}

fn comparison_table(rows: &[Row]) -> String {
    let mut s = String::from("<table class=\"cmp\"><tr><th>point</th><th>metric</th><th>candidate</th><th>baseline</th><th>baseline mean</th><th>candidate mean</th><th>change</th><th>p</th><th>test</th><th>verdict</th></tr>");
    for r in rows {
        let c = &r.comparison;
        let verdict_class = format!("{:?}", c.verdict).to_lowercase();
        let (p, test) = c
            .test
            .as_ref()
            .map(|t| (format!("{:.4}", t.p_value), format!("{:?}", t.test)))
            .unwrap_or(("-".into(), "-".into()));
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:+.1}%</td><td>{p}</td><td>{test}</td><td class=\"{verdict_class}\">{}</td></tr>",
            esc(&r.point), esc(&crate::tax::metric_words(&r.metric)), esc(&r.unit), esc(&r.candidate), esc(&r.baseline),
            num(c.baseline.mean), num(c.candidate.mean), c.pct_change, esc(&c.verdict_text())
        );
    }
    s.push_str("</table>");
    s
}

fn env_table(run: &RunRow) -> String {
    let e = &run.env;
    let mut rows: Vec<(String, String)> = vec![
        ("hostname".into(), e.hostname.clone()),
        ("kernel".into(), format!("{} {}", e.kernel, e.arch)),
        ("cpu".into(), format!("{} × {}", e.cpus, e.cpu_model)),
        (
            "cpu id".into(),
            e.cpu_id
                .as_ref()
                .map_or_else(|| "not recorded".into(), |c| c.text()),
        ),
        (
            "hypervisor".into(),
            e.hypervisor.clone().unwrap_or_else(|| "none".into()),
        ),
        (
            "/dev/kvm".into(),
            e.kvm_platform.clone().unwrap_or_else(|| "no".into()),
        ),
        (
            "clocksource".into(),
            format!("{} ({:.1} ns/read)", e.clocksource, e.clock_read_ns),
        ),
        ("tick".into(), e.nohz.clone()),
        ("idle path".into(), e.idle_explained.clone()),
        (
            "virtperf".into(),
            format!(
                "{} {}",
                e.tool_version,
                e.git_commit.clone().unwrap_or_default()
            ),
        ),
    ];
    rows.extend(e.halt_poll.iter().map(|(k, v)| (k.clone(), v.clone())));
    rows.extend(e.sysctls.iter().map(|(k, v)| (k.clone(), v.clone())));
    rows.extend(
        run.tags
            .iter()
            .map(|(k, v)| (format!("tag {k}"), v.clone())),
    );
    let mut s = String::from("<table class=\"env\">");
    for (k, v) in rows {
        let _ = write!(s, "<tr><th>{}</th><td>{}</td></tr>", esc(&k), esc(&v));
    }
    s.push_str("</table>");
    s
}

/// Each note as a warning paragraph: what qualifies the figures below it.
fn warnings(s: &mut String, notes: &[String]) {
    for n in notes {
        let _ = write!(s, "<p class=\"warning\">{}</p>", esc(n));
    }
}

fn run_section(s: &mut String, sec: &RunSection) {
    let _ = write!(
        s,
        "<section class=\"run\"><h2>{}</h2>",
        esc(&run_line(sec.run))
    );
    warnings(s, &sec.notes);
    if let Some(e) = sec.explanation {
        // An explain run's trials are the model's inputs, not a sweep: the decomposition
        // is the report (`virtperf show --format csv` lists every trial).
        explanation(s, e);
        s.push_str("<h3>environment</h3>");
        s.push_str(&env_table(sec.run));
        s.push_str("</section>");
        return;
    }
    let configs = configs_of(sec.points);
    let mut workloads: Vec<&str> = Vec::new();
    for p in sec.points {
        if !workloads.contains(&p.workload.as_str()) {
            workloads.push(&p.workload);
        }
    }
    for wl in workloads {
        let pts: Vec<&PointSummary> = sec.points.iter().filter(|p| p.workload == wl).collect();
        let _ = write!(s, "<h3>{}</h3>", esc(wl));
        if let Some(axis) = numeric_axis(&pts) {
            s.push_str(&sweep_chart(&pts, &axis, &configs));
        } else {
            let groups: Vec<BarGroup> = pts
                .iter()
                .map(|p| {
                    (
                        p.label.clone(),
                        p.configs
                            .iter()
                            .filter_map(|c| {
                                c.metrics.first().map(|m| Bar {
                                    name: c.config.clone(),
                                    value: m.summary.mean,
                                    ci_half: (m.summary.n >= 2).then_some(m.summary.ci_half),
                                    tries: m.values.clone(),
                                })
                            })
                            .collect(),
                    )
                })
                .collect();
            let unit = pts
                .iter()
                .find_map(|p| p.configs.iter().find_map(|c| c.metrics.first()))
                .map(|m| format!("{} (mean, tries, 95% CI)", title(m)))
                .unwrap_or_default();
            s.push_str(&bars(&unit, &groups));
        }
        // Latency distribution per point and config, merged over repetitions.
        let series: Vec<(String, &[(f64, f64)])> = pts
            .iter()
            .flat_map(|p| {
                p.configs
                    .iter()
                    .filter(|c| !c.latency_distribution.is_empty())
                    .map(move |c| {
                        (
                            format!("{} · {}", p.label, c.config),
                            c.latency_distribution.as_slice(),
                        )
                    })
            })
            .collect();
        if !series.is_empty() {
            s.push_str("<h4>latency by percentile (µs, merged over repetitions)</h4>");
            s.push_str(&percentile_chart(&series));
        }
        s.push_str(&cost::cost_charts(&pts));
        s.push_str(&time_series_charts(&pts));
        for p in &pts {
            for c in p.configs.iter().filter(|c| c.timeline.is_some()) {
                let _ = write!(s, "<h4>{} · {}</h4>", esc(&p.label), esc(&c.config));
                s.push_str(
                    &c.timeline
                        .as_ref()
                        .map(crate::timeline::html)
                        .unwrap_or_default(),
                );
            }
        }
    }
    s.push_str("<h3>CPU split (client machine, % of all CPUs)</h3>");
    s.push_str(&cpu_chart(sec.points));
    s.push_str(&tcp_section(sec.points));
    if !sec.comparisons.is_empty() {
        s.push_str("<h3>comparison</h3>");
        s.push_str(&compare_chart(sec.comparisons));
        s.push_str(&comparison_table(sec.comparisons));
    }
    s.push_str("<h3>environment</h3>");
    s.push_str(&env_table(sec.run));
    s.push_str("</section>");
}

/// Time-series plots (a spec's `interval`): per point and config whose tries kept
/// intervals, the interval metric (Mbit/s or transactions/s) against seconds, one line per
/// try, so a try that collapsed for two seconds shows as a dip instead of vanishing into
/// a mean. Empty when no try has intervals.
fn time_series_charts(points: &[&PointSummary]) -> String {
    let mut out = String::new();
    for p in points {
        for c in p.configs.iter().filter(|c| !c.series.is_empty()) {
            series_chart(&mut out, &p.label, c);
        }
    }
    out
}

/// The senders' TCP state (retransmits, a `--bidir` stream's directions) as a table, a row
/// per point and config that has any; empty when no result carries it.
fn tcp_section(points: &[PointSummary]) -> String {
    let mut rows = String::new();
    for p in points {
        for c in &p.configs {
            let get = |n: &str| c.metrics.iter().find(|m| m.name == n).map(|m| &m.summary);
            let (r, d, a, b) = (
                get("retransmits"),
                get("spurious_retransmits"),
                get("mbps_client_to_server"),
                get("mbps_server_to_client"),
            );
            if r.is_none() && a.is_none() {
                continue;
            }
            let cell = |v: Option<String>| v.unwrap_or_else(|| "—".into());
            let _ = write!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&p.label),
                esc(&c.config),
                cell(r.map(|r| format!("{:.1} (min {:.0}, max {:.0})", r.mean, r.min, r.max))),
                cell(d.map(|d| format!("{:.1}", d.mean))),
                cell(a.map(|a| num(a.mean))),
                cell(b.map(|b| num(b.mean)))
            );
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<h3>TCP (the senders' TCP_INFO; mean of tries)</h3><table><tr><th>point</th><th>config</th><th>retransmits per try</th><th>of them spurious (D-SACKed: reordered, not lost)</th><th>client→server Mbit/s</th><th>server→client Mbit/s</th></tr>{rows}</table>"
    )
}

/// Round ticks: a step of 1, 2 or 5 × 10^k giving four to eight of them up to `max`.
fn nice_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-12);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| max / s <= 8.0)
        .unwrap_or(10.0 * mag)
}

/// A tick label with only the decimals its step needs: `2`, `0.5`, never `2.000`.
fn tick_label(v: f64, step: f64) -> String {
    let d = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.d$}")
}

/// Where a time-series chart draws: its margins, plot size and axis tops.
struct Frame {
    h: f64,
    l: f64,
    t: f64,
    pw: f64,
    ph: f64,
    xtop: f64,
    xstep: f64,
    ymax: f64,
    ystep: f64,
    scale: f64,
}

impl Frame {
    fn px(&self, x: f64) -> f64 {
        self.l + x / self.xtop * self.pw
    }
    fn py(&self, y: f64) -> f64 {
        self.t + self.ph - y * self.scale / self.ymax * self.ph
    }

    /// Grid lines, tick labels, both axes and their titles.
    fn axes(&self, out: &mut String, unit: &str) {
        let Frame {
            l, t, pw, ph, h, ..
        } = *self;
        for j in 0..=((self.ymax / self.ystep).round() as usize) {
            let k = j as f64 * self.ystep;
            let y = t + ph - k / self.ymax * ph;
            let _ = write!(
                out,
                "<line x1=\"{l}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
<text x=\"{}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
                l + pw,
                l - 6.0,
                y + 4.0,
                tick_label(k, self.ystep)
            );
        }
        for j in 0..=((self.xtop / self.xstep).round() as usize) {
            let x = j as f64 * self.xstep;
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                self.px(x),
                t + ph + 16.0,
                tick_label(x, self.xstep)
            );
        }
        let _ = write!(
            out,
            "<line x1=\"{l}\" x2=\"{l}\" y1=\"{t}\" y2=\"{}\" stroke=\"#444\"/>\
<line x1=\"{l}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"#444\"/>\
<text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\">seconds (end of interval)</text>\
<text x=\"14\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{unit}</text>",
            t + ph,
            l + pw,
            t + ph,
            t + ph,
            l + pw / 2.0,
            h - 8.0,
            t + ph / 2.0,
            t + ph / 2.0
        );
    }
}

/// One config's time series: one line per try, its points marked, a legend on the right.
fn series_chart(out: &mut String, label: &str, c: &ConfigSummary) {
    let (w, h, l, r, t, b) = (720.0, 260.0, 80.0, 110.0, 20.0, 45.0);
    let tries: Vec<Vec<(f64, f64)>> = c
        .series
        .iter()
        .map(|iv| {
            iv.iter()
                .filter_map(|i| i.value().map(|v| (i.t_s + i.duration_s, v)))
                .collect()
        })
        .collect();
    let all = || tries.iter().flatten();
    let xmax = all().map(|p| p.0).fold(0.0f64, f64::max).max(1e-9);
    let vmax = all().map(|p| p.1).fold(0.0f64, f64::max);
    let throughput = c.series.iter().flatten().any(|i| i.mbps.is_some());
    // Gbit/s once values pass 1000 Mbit/s, so tick labels stay short.
    let (scale, unit) = match (throughput, vmax >= 1000.0) {
        (true, true) => (1e-3, "Gbit/s"),
        (true, false) => (1.0, "Mbit/s"),
        (false, _) => (1.0, "transactions/s"),
    };
    let ystep = nice_step(vmax * scale);
    let xstep = nice_step(xmax);
    let f = Frame {
        h,
        l,
        t,
        pw: w - l - r,
        ph: h - t - b,
        xtop: (xmax / xstep).ceil() * xstep,
        xstep,
        ymax: ((vmax * scale / ystep).ceil() * ystep).max(ystep),
        ystep,
        scale,
    };
    let _ = write!(
        out,
        "<h4>time series: {} · {} ({unit} per interval, one line per try)</h4>\
<svg class=\"series\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"time series\">",
        esc(label),
        esc(&c.config)
    );
    f.axes(out, unit);
    for (i, pts) in tries.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", f.px(x), f.py(y)))
            .collect();
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>",
            path.join(" ")
        );
        for &(x, y) in pts {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"{color}\"/>",
                f.px(x),
                f.py(y)
            );
        }
        let _ = write!(
            out,
            "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"{color}\">try {}</text>",
            l + f.pw + 10.0,
            t + 12.0 + 15.0 * i as f64,
            i + 1
        );
    }
    out.push_str("</svg>");
}

/// Where the round trip goes: the waterfall, the components with their sources, and the
/// measured remedies.
fn explanation(s: &mut String, e: &Explanation) {
    // The answer first, as the text output gives it.
    if let Some(v) = &e.verdict {
        let _ = write!(s, "<p class=\"verdict\"><b>{}</b></p>", esc(v));
    }
    for w in &e.warnings {
        let _ = write!(s, "<p class=\"warning\">WARNING: {}</p>", esc(w));
    }
    s.push_str("<h3>where the cross-CPU round trip goes (p50, µs)</h3>");
    s.push_str(&waterfall(e));
    s.push_str("<table><tr><th>component</th><th>µs</th><th>source</th></tr>");
    for c in e.components.iter().chain(&e.cross_checks) {
        let name = match &c.part_of {
            Some(p) => format!("{} (part of {p})", c.name),
            None => c.name.clone(),
        };
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&name),
            num(c.us),
            esc(&c.source)
        );
    }
    let maybe = |v: Option<f64>| v.map_or("—".to_string(), num);
    let _ = write!(
        s,
        "<tr><td>predicted</td><td>{}</td><td>{}</td></tr><tr><td>measured</td><td>{}</td><td>rr across CPUs, blocking, p50</td></tr><tr><td>residual</td><td>{}</td><td>{}</td></tr>",
        maybe(e.predicted_us),
        if e.predicted_us.is_some() { "" } else { "not predicted: path and wake-up are both needed" },
        num(e.measured_us),
        maybe(e.residual_us),
        e.residual_pct.map_or("—".to_string(), |p| format!("{p:.0}% of measured, not forced to zero"))
    );
    for m in &e.missing {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>—</td><td>not measured: {}</td></tr>",
            esc(&m.name),
            esc(&m.reason)
        );
    }
    s.push_str("</table>");
    if !e.remedies.is_empty() {
        s.push_str("<h4>what buys it back (measured)</h4><table><tr><th>change</th><th>p50</th><th>p50 change</th><th>p99 change</th><th>CPU µs/transaction change</th><th>CPUs busy (before → with it)</th><th>added CPUs, 95%</th></tr>");
        for r in &e.remedies {
            let _ = write!(
                s,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} → {}</td><td>{}</td></tr>",
                esc(&r.what),
                num(r.p50_us),
                crate::explain::signed_pct(r.p50_change_pct),
                crate::explain::signed_pct(r.p99_change_pct),
                crate::explain::opt(r.cpu_us_per_transaction_change, crate::explain::signed1),
                crate::explain::opt(r.cpus_busy_before, crate::explain::fixed2),
                crate::explain::opt(r.cpus_busy, crate::explain::fixed2),
                esc(&r.added_cpus_interval.words(|x| format!("{x:+.2}")))
            );
        }
        s.push_str("</table>");
    }
    s.push_str(&explained::explained_html(e));
}

/// The waterfall: path, the wake-up's parts and the residual stacked step by step up to the
/// measured round trip, with the measured bar beside them. A negative step (a residual
/// below zero) hangs down from where the previous one ended.
pub fn waterfall(e: &Explanation) -> String {
    let mut steps: Vec<(String, f64)> = Vec::new();
    let split = e.components.iter().any(|c| c.part_of.is_some());
    for c in &e.components {
        let top = c.part_of.is_none();
        // Show a component's parts instead of the component when it has them.
        if top
            && split
            && e.components
                .iter()
                .any(|p| p.part_of.as_deref() == Some(&c.name))
        {
            continue;
        }
        steps.push((c.name.replace('_', " "), c.us));
    }
    if let Some(r) = e.residual_us {
        steps.push(("residual".into(), r));
    }
    let mut level = 0.0f64;
    let mut spans = Vec::new();
    for (name, v) in &steps {
        spans.push((name.clone(), level, level + v));
        level += v;
    }
    let top = spans
        .iter()
        .flat_map(|(_, a, b)| [*a, *b])
        .chain([e.measured_us])
        .chain(e.predicted_us)
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    let ymax = nice_scale(top).0;
    let n = spans.len() + 1;
    let (l, r, t, b, h) = (70.0, 40.0, 20.0, 70.0, 340.0);
    let w = l + r + 90.0 * n as f64;
    let py = |y: f64| t + (1.0 - y.max(0.0) / ymax) * (h - t - b);
    let mut s = format!(
        r#"<svg class="plot waterfall" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    frame(&mut s, (w, h, l, r, t, b), ymax, &py);
    let bar = |s: &mut String, i: usize, name: &str, lo: f64, hi: f64, color: &str| {
        let (y0, y1) = (py(lo.max(hi)), py(lo.min(hi)));
        let x = l + 15.0 + 90.0 * i as f64;
        let _ = write!(
            s,
            r#"<rect class="bar" x="{x:.1}" y="{y0:.1}" width="60" height="{:.1}" fill="{color}"><title>{}: {} µs</title></rect><text x="{:.1}" y="{:.1}" class="tk" text-anchor="middle">{}</text><text x="{:.1}" y="{}" class="tk" text-anchor="end" transform="rotate(-30 {:.1} {})">{}</text>"#,
            (y1 - y0).max(0.5),
            esc(name),
            num(hi - lo),
            x + 30.0,
            y0 - 4.0,
            num(hi - lo),
            x + 45.0,
            h - b + 14.0,
            x + 45.0,
            h - b + 14.0,
            esc(name)
        );
    };
    for (i, (name, lo, hi)) in spans.iter().enumerate() {
        let color = if name == "residual" {
            "#7f7f7f"
        } else {
            PALETTE[i % PALETTE.len()]
        };
        bar(&mut s, i, name, *lo, *hi, color);
    }
    bar(&mut s, spans.len(), "measured", 0.0, e.measured_us, "#222");
    s.push_str("</svg>");
    s
}

/// A page for `compare -o`: the comparison chart and its table.
pub fn comparison_page(title: &str, rows: &[Row], generated: &str) -> String {
    let mut s = page_head();
    let _ = write!(
        s,
        "<h1>{}</h1><p>generated {}</p><section>",
        esc(title),
        esc(generated)
    );
    // The rows of one comparison share their notes (what the compared runs are).
    warnings(&mut s, rows.first().map_or(&[][..], |r| &r.notes[..]));
    s.push_str(&compare_chart(rows));
    s.push_str(&comparison_table(rows));
    s.push_str("</section></body></html>\n");
    s
}

/// The document head every page shares: charset, title, the inline stylesheet.
fn page_head() -> String {
    String::from(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>virtperf report</title><style>\
body{font-family:system-ui,sans-serif;margin:24px;color:#222}h1{font-size:22px}h2{font-size:17px;border-bottom:1px solid #ccc}\
h3{font-size:15px;margin-top:22px}svg.plot{display:block;margin:8px 0}.ax{stroke:#333}.grid{stroke:#ddd}.err{stroke:#000}.try{fill:#111;fill-opacity:0.8}\
.tk{font-size:10px;fill:#444}.change{font-size:10px;fill:#b00}line.change{stroke:#b00;stroke-dasharray:3 3}.ci{stroke-width:1.5}.lb{font-size:12px;fill:#222}.lg{font-size:11px;fill:#222}\
table{border-collapse:collapse;font-size:12px;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 6px;text-align:left}\
ul.legend{list-style:none;padding:0;margin:2px 0 10px 70px;font-size:12px}ul.legend li{margin:2px 0}span.sw{display:inline-block;width:10px;height:10px;margin-right:6px}\
p.warning{color:#b00;font-weight:bold}td.improved{color:#080;font-weight:bold}td.regressed{color:#b00;font-weight:bold}</style></head><body>",
    )
}

/// The whole report. `cross` holds run-vs-run comparisons when several runs are given.
pub fn report(sections: &[RunSection], cross: &[Row], generated: &str) -> String {
    report_with_trend(sections, cross, "", generated)
}

/// [`report`] with a trend section (from [`crate::trend::section`]) first, before the runs.
pub fn report_with_trend(
    sections: &[RunSection],
    cross: &[Row],
    trend: &str,
    generated: &str,
) -> String {
    let mut s = page_head();
    let _ = write!(
        s,
        "<h1>virtperf report</h1><p>generated {}</p>",
        esc(generated)
    );
    s.push_str(trend);
    for sec in sections {
        run_section(&mut s, sec);
    }
    if !cross.is_empty() {
        s.push_str("<section><h2>run against run</h2>");
        s.push_str(&compare_chart(cross));
        s.push_str(&comparison_table(cross));
        s.push_str("</section>");
    }
    s.push_str("</body></html>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_get_round_ticks() {
        assert_eq!(nice_scale(67_000.0), (80_000.0, 20_000.0));
        assert_eq!(nice_scale(22_333.0), (25_000.0, 5_000.0));
        assert_eq!(nice_scale(9.3), (10.0, 2.0));
        assert_eq!(nice_scale(0.0), (1.0, 0.25));
        assert_eq!(nice_scale(f64::NAN), (1.0, 0.25));
        for max in [0.37, 1.0, 64.0, 130.0, 7_000.0, 1.3e9] {
            let (top, step) = nice_scale(max);
            assert!(
                top >= max && top / step <= 6.0 + 1e-9 && top / step >= 2.0,
                "{max}: {top} {step}"
            );
        }
    }

    #[test]
    fn tick_labels_have_no_float_noise() {
        assert_eq!(tick(64.0), "64");
        assert_eq!(tick(2.5), "2.5");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(40_000.0), "40k");
        assert_eq!(tick(2_500_000.0), "2.5M");
        assert_eq!(tick(0.0), "0");
    }

    /// A legend naming only the implicit `default` config is left out; two names get one.
    #[test]
    fn a_lone_default_gets_no_legend() {
        let mut s = String::new();
        charts::legend(&mut s, &["default".to_string()], 0.0, 0.0);
        assert!(s.is_empty(), "{s}");
        charts::legend(
            &mut s,
            &["default".to_string(), "tuned".to_string()],
            0.0,
            0.0,
        );
        assert_eq!(s.matches("class=\"lg\"").count(), 2, "{s}");
    }

    #[test]
    fn the_nines_axis_puts_99_9_at_three() {
        assert!((nines(0.0) - 0.0).abs() < 1e-12);
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(nines(100.0), 5.0);
    }
}
