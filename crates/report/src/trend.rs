//! Many runs as a trend: one point per run, ordered by date, for every point and config
//! the runs share, with what changed in the environment between consecutive runs (the
//! kernel release, the host, a knob) named on the plot, so "did 6.19 regress cross-vCPU
//! RR on host type X?" reads off one chart.

use std::collections::BTreeMap;
use std::fmt::Write;

use virtperf_store::RunRow;
use virtperf_wire::Env;

use crate::escape::esc;
use crate::summary::PointSummary;

/// One run's material for the trend.
pub struct TrendRun<'a> {
    /// The run.
    pub run: &'a RunRow,
    /// Its summaries.
    pub points: &'a [PointSummary],
}

/// What differs between two environments, one short phrase each (`kernel 6.1.0 → 6.19.0`),
/// in a fixed order: the things that explain a change in a network number first.
pub fn env_changes(a: &Env, b: &Env) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = |name: &str, x: &str, y: &str| {
        if x != y {
            out.push(format!("{name} {x} → {y}"));
        }
    };
    field("kernel", &a.kernel, &b.kernel);
    field("host", &a.hostname, &b.hostname);
    field("cpu", &a.cpu_model, &b.cpu_model);
    let id = |e: &Env| e.cpu_id.as_ref().map_or("unknown".into(), |c| c.text());
    if a.cpu_id.is_some() && b.cpu_id.is_some() {
        // Older results have no id: only two known ids can differ.
        field("cpu id", &id(a), &id(b));
    }
    field("cpus", &a.cpus.to_string(), &b.cpus.to_string());
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "none".into());
    field("hypervisor", &opt(&a.hypervisor), &opt(&b.hypervisor));
    field("clocksource", &a.clocksource, &b.clocksource);
    field("cmdline", &a.cmdline, &b.cmdline);
    field("virtperf", &a.tool_version, &b.tool_version);
    let maps =
        |x: &BTreeMap<String, String>, y: &BTreeMap<String, String>, out: &mut Vec<String>| {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (p, q) = (x.get(k), y.get(k));
                if p != q {
                    let show = |v: Option<&String>| v.cloned().unwrap_or_else(|| "unset".into());
                    out.push(format!("{k} {} → {}", show(p), show(q)));
                }
            }
        };
    maps(&a.halt_poll, &b.halt_poll, &mut out);
    maps(&a.sysctls, &b.sysctls, &mut out);
    out
}

/// The trend section: runs sorted by start time; one chart per (point, config) present in
/// at least two runs, its primary metric's mean per run with the 95% CI as a whisker, and
/// each environment change written at the run where it first appears. Empty when fewer
/// than two runs share a cell.
pub fn section(runs: &[TrendRun]) -> String {
    let mut runs: Vec<&TrendRun> = runs.iter().collect();
    runs.sort_by(|a, b| (&a.run.started_at, a.run.id).cmp(&(&b.run.started_at, b.run.id)));
    // Cells in order of first appearance: (point label, config).
    let mut cells: Vec<(String, String)> = Vec::new();
    for r in &runs {
        for p in r.points {
            for c in &p.configs {
                let k = (p.label.clone(), c.config.clone());
                if !cells.contains(&k) {
                    cells.push(k);
                }
            }
        }
    }
    let changes: Vec<Vec<String>> = runs
        .iter()
        .enumerate()
        .map(|(i, r)| match i {
            0 => Vec::new(),
            _ => env_changes(&runs[i - 1].run.env, &r.run.env),
        })
        .collect();
    let mut s = String::new();
    for (label, config) in &cells {
        // (run index, mean, ci low, ci high, metric name, unit)
        let mut pts = Vec::new();
        let mut metric = None;
        for (i, r) in runs.iter().enumerate() {
            let m = r
                .points
                .iter()
                .filter(|p| &p.label == label)
                .flat_map(|p| &p.configs)
                .find(|c| &c.config == config)
                .and_then(|c| c.metrics.first());
            if let Some(m) = m.filter(|m| m.summary.n > 0 && m.summary.mean.is_finite()) {
                metric.get_or_insert((m.name.clone(), m.unit.clone()));
                pts.push((i, m.summary.mean, m.summary.ci_low, m.summary.ci_high));
            }
        }
        let Some((name, unit)) = metric else { continue };
        if pts.len() < 2 {
            continue;
        }
        let _ = write!(
            s,
            "<h3>{} · {} · {} ({})</h3>",
            esc(label),
            esc(config),
            esc(&crate::tax::metric_words(&name)),
            esc(&unit)
        );
        s.push_str(&chart(&runs, &pts, &changes));
    }
    if s.is_empty() {
        return s;
    }
    format!(
        "<section><h2>trend over {} runs</h2><p>one point per run, by start time; the mean with its 95% CI, and what changed in the environment since the run before</p>{s}</section>",
        runs.len()
    )
}

/// One trend chart: x is the run's place in time order (labelled with its id and date),
/// y from 0 to a round top.
fn chart(runs: &[&TrendRun], pts: &[(usize, f64, f64, f64)], changes: &[Vec<String>]) -> String {
    // Room above the plot only for the environment changes' labels, when there are any.
    let t = if changes.iter().any(|c| !c.is_empty()) {
        60.0
    } else {
        20.0
    };
    let (w, h, l, r, b) = (760.0, 260.0 + t, 70.0, 20.0, 50.0);
    let n = runs.len().max(2) as f64;
    let px = |i: usize| l + (w - l - r) * i as f64 / (n - 1.0);
    let ymax = pts
        .iter()
        .map(|p| p.3.max(p.1))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max)
        * 1.1;
    // A round top and round ticks, with grid lines, as the run report's charts have.
    let (ymax, step) = crate::html::nice_scale(if ymax > 0.0 { ymax } else { 1.0 });
    let py = |v: f64| h - b - (h - t - b) * (v / ymax).clamp(0.0, 1.0);
    let mut s = format!(
        r#"<svg class="plot trend" viewBox="0 0 {w} {h}" width="{w}" height="{h}" xmlns="http://www.w3.org/2000/svg">"#
    );
    let _ = write!(
        s,
        r#"<line x1="{l}" y1="{}" x2="{}" y2="{}" class="ax"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" class="ax"/>"#,
        h - b,
        w - r,
        h - b,
        h - b,
    );
    crate::html::y_ticks(&mut s, (l, w - r), (ymax, step), &py);
    // The first and last points' labels run inward, so they stay inside the drawing.
    let anchor = |i: usize| match (i, runs.len()) {
        (_, n) if n < 2 => "middle",
        (0, _) => "start",
        (i, n) if i + 1 == n => "end",
        _ => "middle",
    };
    for (i, run) in runs.iter().enumerate() {
        let date = run.run.started_at.get(..10).unwrap_or(&run.run.started_at);
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" class="tk" text-anchor="{}">run {} · {}</text>"#,
            px(i),
            h - b + 18.0,
            anchor(i),
            run.run.id,
            esc(date)
        );
        if let Some(c) = changes.get(i).filter(|c| !c.is_empty()) {
            let text = c.join("; ");
            let _ = write!(
                s,
                r#"<line x1="{x}" y1="{t}" x2="{x}" y2="{}" class="grid change"/><text x="{x}" y="{}" class="change" text-anchor="{}">{}</text>"#,
                h - b,
                t - 8.0 - 12.0 * (i % 3) as f64,
                anchor(i),
                esc(&text),
                x = px(i)
            );
        }
    }
    let line: Vec<String> = pts
        .iter()
        .map(|(i, m, _, _)| format!("{:.1},{:.1}", px(*i), py(*m)))
        .collect();
    let _ = write!(
        s,
        r##"<polyline points="{}" fill="none" stroke="#1f77b4" stroke-width="2"/>"##,
        line.join(" ")
    );
    for (i, m, lo, hi) in pts {
        if lo.is_finite() && hi.is_finite() && hi > lo {
            let _ = write!(
                s,
                r##"<line x1="{x}" y1="{}" x2="{x}" y2="{}" stroke="#1f77b4" class="ci"/>"##,
                py(*lo),
                py(*hi),
                x = px(*i)
            );
        }
        let _ = write!(
            s,
            r##"<circle cx="{}" cy="{}" r="4" fill="#1f77b4" class="trend-point"><title>{}</title></circle>"##,
            px(*i),
            py(*m),
            crate::render::num(*m)
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_name_what_differs_and_nothing_else() {
        let a = Env {
            kernel: "6.1.0".into(),
            hostname: "x1".into(),
            sysctls: BTreeMap::from([("net.core.busy_poll".into(), "0".into())]),
            ..Env::default()
        };
        assert!(env_changes(&a, &a).is_empty());
        let mut b = a.clone();
        b.kernel = "6.19.0".into();
        b.sysctls.insert("net.core.busy_poll".into(), "50".into());
        b.boot_id = "another boot".into();
        assert_eq!(
            env_changes(&a, &b),
            ["kernel 6.1.0 → 6.19.0", "net.core.busy_poll 0 → 50"]
        );
        // CPU identities: named when both runs have one and they differ.
        let amd = virtperf_wire::CpuId {
            vendor: "AuthenticAMD".into(),
            family: Some(25),
            ..Default::default()
        };
        let (mut c, mut d) = (a.clone(), a.clone());
        c.cpu_id = Some(amd.clone());
        assert!(env_changes(&a, &c).is_empty(), "an old run has no id");
        d.cpu_id = Some(virtperf_wire::CpuId {
            vendor: "GenuineIntel".into(),
            family: Some(6),
            ..amd
        });
        assert_eq!(
            env_changes(&c, &d),
            ["cpu id AuthenticAMD family 25 → GenuineIntel family 6"]
        );
    }
}
