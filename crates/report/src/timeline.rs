//! A `--timeline` trial for people: its stages as a table with their medians against the
//! measured median, the in-situ latencies, and the typical transaction as a swimlane SVG
//! (one lane per CPU, each stage a bar on the CPU it runs on, each event a tick).

use std::fmt::Write;

use crate::escape::esc;
use virtperf_wire::{Pct, Timeline};

/// `1.23 µs`, or `—` for a stage that never occurred.
fn us2(v: Option<f64>) -> String {
    v.map_or("—".into(), |v| format!("{v:.2} µs"))
}

fn pct(p: &Option<Pct>) -> String {
    p.map_or("not seen".into(), |p| {
        format!("p50 {:.1} µs, p90 {:.1} µs (n={})", p.p50_us, p.p90_us, p.n)
    })
}

/// The stage table and in-situ figures as indented text lines.
pub fn text(t: &Timeline) -> String {
    let mut s = format!(
        "  critical path ({} transactions sampled in a separate {:.1} s trial on CPU {} → {}; {} skipped, {} records lost):\n",
        t.transactions, t.trial_s, t.client_cpu, t.server_cpu, t.skipped, t.lost_records
    );
    for st in &t.stages {
        let _ = writeln!(
            s,
            "    {:<30} CPU {:<3} p50 {:>10}  p90 {:>10}  seen {:>5.1}%",
            st.name,
            st.cpu,
            us2(st.p50_us),
            us2(st.p90_us),
            st.seen * 100.0
        );
    }
    let rr = t
        .rr_p50_us
        .map_or("not measured".into(), |p| format!("{p:.2} µs"));
    let gap = t
        .gap_pct
        .map_or(String::new(), |g| format!(" (gap {g:+.1}%)"));
    let _ = writeln!(
        s,
        "    sum of stage medians {:.2} µs vs the trial's rr p50 {rr}{gap}",
        t.sum_p50_us
    );
    if let (Some(h), Some(p)) = (t.headline_p50_us, t.rr_p50_us) {
        let _ = writeln!(
            s,
            "    sampling cost: the test's own p50 was {h:.2} µs, the sampled trial's {p:.2} µs ({:+.0}%)",
            (p - h) / h * 100.0
        );
    }
    let i = &t.in_situ;
    let _ = writeln!(s, "  in situ: server wake-up {}", pct(&i.server_wakeup));
    let _ = writeln!(s, "           client wake-up {}", pct(&i.client_wakeup));
    let _ = writeln!(
        s,
        "           idle exit (IPI sent → CPU leaves idle) {}",
        pct(&i.idle_exit)
    );
    let _ = writeln!(
        s,
        "           idle exit → thread runs {}",
        pct(&i.idle_to_run)
    );
    let _ = writeln!(
        s,
        "           per transaction: {} sides woken from idle, {:.2} ICR writes, {:.2} TSC-deadline writes",
        i.idle_wakeups_per_transaction
            .map_or_else(|| "(not known)".to_string(), |k| format!("{k:.2}")),
        i.icr_writes_per_transaction,
        i.tsc_deadline_writes_per_transaction
    );
    let _ = writeln!(s, "           {}", net_rx(i));
    for u in &t.unseen {
        let _ = writeln!(s, "  note: {}", virtperf_wire::printable(u));
    }
    s
}

/// The NET_RX softirq time on the path, or why it is not there.
fn net_rx(i: &virtperf_wire::InSitu) -> String {
    match (i.net_rx_on_path, i.net_rx_runs_per_transaction) {
        (Some(p), Some(r)) => format!(
            "NET_RX softirq on the path (inside the deliveries) {} in {r:.2} runs per transaction",
            pct(&Some(p))
        ),
        _ => "NET_RX softirq on the path: not measured (a result recorded before it was sampled)"
            .into(),
    }
}

/// The typical transaction as a swimlane: a lane per CPU, the stages' medians laid end to
/// end as bars on the lane of the CPU each runs on, and the example transaction's events
/// as ticks with their names.
pub fn swimlane(t: &Timeline) -> String {
    let (w, lane_h, left, top) = (860.0, 150.0, 90.0, 30.0);
    let span = t
        .example
        .iter()
        .map(|m| m.t_us)
        .fold(t.sum_p50_us, f64::max)
        .max(1.0);
    let x = |us: f64| left + us / span * (w - left - 20.0);
    let lanes = [t.client_cpu, t.server_cpu];
    let y = |cpu: u32| top + if cpu == t.client_cpu { 0.0 } else { lane_h };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{}\" font-family=\"sans-serif\" font-size=\"10\">",
        top + 2.0 * lane_h + 30.0
    );
    for (i, cpu) in lanes.iter().enumerate() {
        let yy = y(*cpu);
        let role = if i == 0 { "client" } else { "server" };
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{yy}\" x2=\"{}\" y2=\"{yy}\" stroke=\"#999\"/><text x=\"4\" y=\"{}\">CPU {cpu} ({role})</text>",
            w - 20.0,
            yy + 14.0
        );
    }
    let mut at = 0.0;
    for (i, st) in t.stages.iter().enumerate() {
        // A stage that never occurred has no bar.
        let (Some(p50), Some(p90)) = (st.p50_us, st.p90_us) else {
            continue;
        };
        let yy = y(st.cpu) + 4.0;
        let hue = (i * 37) % 360;
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{yy:.1}\" width=\"{:.1}\" height=\"16\" fill=\"hsl({hue},60%,70%)\"><title>{}: p50 {:.2} µs, p90 {:.2} µs</title></rect>",
            x(at),
            (x(at + p50) - x(at)).max(0.5),
            esc(&st.name),
            p50,
            p90
        );
        at += p50;
    }
    for (k, m) in t.example.iter().enumerate() {
        let xx = x(m.t_us);
        let yy = y(m.cpu) + 24.0;
        let dy = 10.0 * (k % 10) as f64;
        let _ = write!(
            s,
            "<line x1=\"{xx:.1}\" y1=\"{yy:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#333\"/><text x=\"{:.1}\" y=\"{:.1}\">{} ({:.1})</text>",
            yy + 6.0 + dy,
            xx + 2.0,
            yy + 14.0 + dy,
            esc(&m.what),
            m.t_us
        );
    }
    let _ = write!(
        s,
        "<text x=\"{left}\" y=\"{}\">µs since the client's send (bars: stage medians laid end to end; ticks: the transaction nearest the median)</text></svg>",
        top + 2.0 * lane_h + 20.0
    );
    s
}

/// The stage table and the swimlane, as HTML.
pub fn html(t: &Timeline) -> String {
    let mut s = format!(
        "<h4>critical path of a transaction ({} sampled in a separate {:.1} s trial, CPU {} → {})</h4><table><tr><th>stage</th><th>CPU</th><th>p50 µs</th><th>p90 µs</th><th>seen</th></tr>",
        t.transactions, t.trial_s, t.client_cpu, t.server_cpu
    );
    for st in &t.stages {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            esc(&st.name),
            st.cpu,
            us2(st.p50_us),
            us2(st.p90_us),
            st.seen * 100.0
        );
    }
    let _ = write!(
        s,
        "<tr><td>sum of medians</td><td></td><td>{:.2}</td><td></td><td>{}</td></tr></table>",
        t.sum_p50_us,
        esc(&match (t.rr_p50_us, t.gap_pct) {
            (Some(p), Some(g)) => format!("the trial's rr p50 {p:.2} µs, gap {g:+.1}%"),
            _ => "the trial's rr p50 not measured".into(),
        })
    );
    let _ = write!(s, "<p>{}</p>", esc(&net_rx(&t.in_situ)));
    for u in &t.unseen {
        let _ = write!(s, "<p>note: {}</p>", esc(u));
    }
    s.push_str(&swimlane(t));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_wire::{Mark, Stage};

    #[test]
    fn the_swimlane_puts_each_stage_on_its_cpu_and_escapes_names() {
        let t = Timeline {
            client_cpu: 0,
            server_cpu: 3,
            stages: vec![
                Stage {
                    name: "a<b".into(),
                    cpu: 0,
                    p50_us: Some(2.0),
                    p90_us: Some(3.0),
                    seen: 1.0,
                },
                Stage {
                    name: "srv".into(),
                    cpu: 3,
                    p50_us: Some(8.0),
                    p90_us: Some(9.0),
                    seen: 1.0,
                },
            ],
            sum_p50_us: 10.0,
            rr_p50_us: Some(12.5),
            gap_pct: Some(-20.0),
            example: vec![Mark {
                t_us: 4.0,
                cpu: 3,
                what: "IPI → CPU 3".into(),
            }],
            ..Timeline::default()
        };
        let svg = swimlane(&t);
        assert!(svg.contains("a&lt;b: p50 2.00"), "{svg}");
        assert!(svg.contains("CPU 3 (server)"));
        let txt = text(&t);
        assert!(txt.contains("gap -20.0%"), "{txt}");
        assert!(
            txt.contains("not seen"),
            "in-situ figures never seen say so: {txt}"
        );
    }
}
