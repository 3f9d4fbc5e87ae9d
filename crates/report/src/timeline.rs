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

/// Samples below which a p90 is said not to be one: of 4 it is the largest (a server
/// wake-up seen 4 times in 7573 transactions printed "p90 849.0 µs").
const MIN_FOR_P90: u64 = 10;

fn pct(p: &Option<Pct>) -> String {
    p.map_or("not seen".into(), |p| {
        if p.n < MIN_FOR_P90 {
            format!("p50 {:.1} µs (n={}: too few for a p90)", p.p50_us, p.n)
        } else {
            format!("p50 {:.1} µs, p90 {:.1} µs (n={})", p.p50_us, p.p90_us, p.n)
        }
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
    let _ = writeln!(
        s,
        "  in situ: server wake-up {}{}",
        pct(&i.server_wakeup),
        few(&i.server_wakeup, t.transactions)
    );
    let _ = writeln!(
        s,
        "           client wake-up {}{}",
        pct(&i.client_wakeup),
        few(&i.client_wakeup, t.transactions)
    );
    let _ = writeln!(
        s,
        "           idle exit (IPI sent → CPU leaves idle) {}",
        pct(&i.idle_exit)
    );
    for (what, p) in [
        (
            "of which IPI sent → ICR write done (the sender's exit)",
            &i.ipi_to_icr,
        ),
        (
            "of which ICR write done → IPI entry on the halted vCPU (the host's delivery)",
            &i.ipi_delivery,
        ),
        (
            "of which IPI entry → CPU leaves idle (in the guest)",
            &i.idle_exit_in_guest,
        ),
        (
            "then CPU leaves idle → its tick restarted (TSC-deadline write done)",
            &i.tick_restart,
        ),
    ] {
        if p.is_some() {
            let _ = writeln!(s, "             {what} {}", pct(p));
        }
    }
    let _ = writeln!(
        s,
        "           idle exit → thread runs {}",
        pct(&i.idle_to_run)
    );
    let _ = writeln!(s, "           per transaction: {}", per_transaction(i));
    let _ = writeln!(s, "           {}", net_rx(i));
    for u in &t.unseen {
        let _ = writeln!(s, "  note: {}", virtperf_wire::printable(u));
    }
    s
}

/// A side's wake-up happens once a transaction: timed in under half of them (its CPU's
/// tracepoints silent most of the time), its figures are of the few where they fired, not
/// a sample of every wake-up, and say so (a server wake-up "p50 97.9 µs (n=12)" beside a
/// client's 46.7 µs over 4708 read as the server's own).
fn few(p: &Option<Pct>, transactions: u64) -> String {
    match p {
        Some(p) if transactions > 0 && 2 * p.n < transactions => format!(
            ": timed in only {} of {transactions} transactions, not a sample of them",
            p.n
        ),
        _ => String::new(),
    }
}

/// The in-situ counts per transaction, each named with its count or with why it has none.
fn per_transaction(i: &virtperf_wire::InSitu) -> String {
    let count = |k: Option<f64>, what: &str, unseen: &str| {
        k.map_or_else(|| format!("{what} {unseen}"), |k| format!("{k:.2} {what}"))
    };
    [
        count(
            i.idle_wakeups_per_transaction,
            "sides woken from idle",
            "not known",
        ),
        count(
            i.icr_writes_per_transaction,
            "ICR writes",
            "not seen (xAPIC)",
        ),
        count(
            i.tsc_deadline_writes_per_transaction,
            "TSC-deadline writes",
            "not seen (no TSC-deadline timer)",
        ),
    ]
    .join(", ")
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

/// Width of a label at font-size 10 (sans-serif), generously: labels are laid out by it.
fn label_w(text: &str) -> f64 {
    6.0 * text.chars().count() as f64 + 4.0
}

/// Rows for labels on one lane, placed left to right: each goes in the first row where it
/// does not run into the label before it; returns each label's row and its x and anchor
/// (a label that would leave the drawing on the right ends at its tick instead).
fn label_rows(ticks: &[(f64, String)], right: f64) -> Vec<(usize, f64, &'static str)> {
    let mut ends: Vec<f64> = Vec::new();
    ticks
        .iter()
        .map(|(xx, text)| {
            let w = label_w(text);
            let (from, x, anchor) = if xx + 2.0 + w <= right {
                (xx + 2.0, xx + 2.0, "start")
            } else {
                (xx - 2.0 - w, xx - 2.0, "end")
            };
            let row = match ends.iter().position(|e| *e + 4.0 <= from) {
                Some(r) => r,
                None => {
                    ends.push(f64::NEG_INFINITY);
                    ends.len() - 1
                }
            };
            ends[row] = from + w;
            (row, x, anchor)
        })
        .collect()
}

/// A label laid out on a lane: its row, where its text starts or ends (`anchor`), and the
/// tick it names.
struct Placed {
    row: usize,
    x: f64,
    anchor: &'static str,
    tick: f64,
    text: String,
}

/// The labels of the example's events on `cpu`'s lane, in time order, in rows.
fn lane_labels(t: &Timeline, cpu: u32, x: &dyn Fn(f64) -> f64, right: f64) -> Vec<Placed> {
    let mut ticks: Vec<(f64, String)> = t
        .example
        .iter()
        .filter(|m| m.cpu == cpu)
        .map(|m| (x(m.t_us), format!("{} ({:.1})", m.what, m.t_us)))
        .collect();
    ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
    label_rows(&ticks, right)
        .into_iter()
        .zip(ticks)
        .map(|((row, lx, anchor), (tick, text))| Placed {
            row,
            x: lx,
            anchor,
            tick,
            text,
        })
        .collect()
}

/// The typical transaction as a swimlane: a lane per CPU, the stages' medians laid end to
/// end as bars on the lane of the CPU each runs on (named in a legend), and the example
/// transaction's events as ticks with their names, laid out in rows so none overlaps.
pub fn swimlane(t: &Timeline) -> String {
    let (w, left, top, row_h) = (980.0, 110.0, 30.0, 12.0);
    let right = w - 10.0;
    let span = t
        .example
        .iter()
        .map(|m| m.t_us)
        .fold(t.sum_p50_us, f64::max)
        .max(1.0);
    let x = |us: f64| left + us / span * (right - left - 10.0);
    let lanes = [t.client_cpu, t.server_cpu];
    // Each lane's labels, in time order, and the rows they need.
    let placed: Vec<Vec<Placed>> = lanes
        .iter()
        .map(|cpu| lane_labels(t, *cpu, &x, right))
        .collect();
    let lane_h = |i: usize| {
        let rows = placed[i].iter().map(|p| p.row + 1).max().unwrap_or(0);
        34.0 + row_h * rows as f64
    };
    let lane_y = [top, top + lane_h(0)];
    let bottom = lane_y[1] + lane_h(1);
    let stages: Vec<_> = t
        .stages
        .iter()
        .filter(|st| st.p50_us.is_some() && st.p90_us.is_some())
        .collect();
    let legend_rows = stages.len().div_ceil(3);
    let h = bottom + 24.0 + 14.0 * legend_rows as f64;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"10\">"
    );
    for (i, cpu) in lanes.iter().enumerate() {
        let yy = lane_y[i];
        let role = if i == 0 { "client" } else { "server" };
        let _ = write!(
            s,
            "<line x1=\"{left}\" y1=\"{yy}\" x2=\"{right}\" y2=\"{yy}\" stroke=\"#999\"/><text x=\"4\" y=\"{}\">CPU {cpu} ({role})</text>",
            yy + 14.0
        );
    }
    let lane_of = |cpu: u32| usize::from(cpu != t.client_cpu);
    let mut at = 0.0;
    for (i, st) in t.stages.iter().enumerate() {
        // A stage that never occurred has no bar.
        let (Some(p50), Some(p90)) = (st.p50_us, st.p90_us) else {
            continue;
        };
        let yy = lane_y[lane_of(st.cpu)] + 4.0;
        let _ = write!(
            s,
            "<rect x=\"{:.1}\" y=\"{yy:.1}\" width=\"{:.1}\" height=\"16\" fill=\"{}\"><title>{}: p50 {:.2} µs, p90 {:.2} µs</title></rect>",
            x(at),
            (x(at + p50) - x(at)).max(0.5),
            hue(i),
            esc(&st.name),
            p50,
            p90
        );
        at += p50;
    }
    for (i, lane) in placed.iter().enumerate() {
        let y0 = lane_y[i] + 24.0;
        for Placed {
            row,
            x: lx,
            anchor,
            tick: xx,
            text,
        } in lane
        {
            let ty = y0 + 10.0 + row_h * *row as f64;
            let _ = write!(
                s,
                // A short tick under the lane, and a faint guide down to its label.
                "<line x1=\"{xx:.1}\" y1=\"{:.1}\" x2=\"{xx:.1}\" y2=\"{y0:.1}\" stroke=\"#333\"/><line x1=\"{xx:.1}\" y1=\"{y0:.1}\" x2=\"{xx:.1}\" y2=\"{:.1}\" stroke=\"#bbb\" stroke-dasharray=\"1,2\"/><text x=\"{lx:.1}\" y=\"{ty:.1}\" text-anchor=\"{anchor}\">{}</text>",
                y0 - 4.0,
                ty - 8.0,
                esc(text)
            );
        }
    }
    let _ = write!(
        s,
        "<text x=\"{left}\" y=\"{}\">µs since the client's send (bars: stage medians laid end to end; ticks: the transaction nearest the median)</text>",
        bottom + 12.0
    );
    legend(&mut s, t, left, bottom);
    s.push_str("</svg>");
    s
}

/// The legend under the lanes: which colour is which stage, three to a row.
fn legend(s: &mut String, t: &Timeline, left: f64, bottom: f64) {
    for (k, (i, st)) in t
        .stages
        .iter()
        .enumerate()
        .filter(|(_, st)| st.p50_us.is_some() && st.p90_us.is_some())
        .enumerate()
    {
        let (lx, ly) = (
            left + 290.0 * (k % 3) as f64,
            bottom + 26.0 + 14.0 * (k / 3) as f64,
        );
        let _ = write!(
            s,
            "<rect x=\"{lx}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/><text x=\"{}\" y=\"{ly:.1}\">{}</text>",
            ly - 9.0,
            hue(i),
            lx + 14.0,
            esc(&format!("{} (CPU {})", st.name, st.cpu))
        );
    }
}

/// Stage `i`'s bar colour.
fn hue(i: usize) -> String {
    format!("hsl({},60%,70%)", (i * 37) % 360)
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
        // Writes the sampled MSR tracepoint cannot see (xAPIC, no TSC-deadline timer) are
        // said unseen, not 0; counted ones are printed.
        assert!(txt.contains("ICR writes not seen (xAPIC)"), "{txt}");
        assert!(
            txt.contains("TSC-deadline writes not seen (no TSC-deadline timer)"),
            "{txt}"
        );
        let mut counted = t.clone();
        counted.in_situ.icr_writes_per_transaction = Some(2.0);
        counted.in_situ.tsc_deadline_writes_per_transaction = Some(0.5);
        let txt = text(&counted);
        assert!(
            txt.contains("2.00 ICR writes, 0.50 TSC-deadline writes"),
            "{txt}"
        );
    }

    /// A side's wake-up timed in under half the transactions says its few are not a sample.
    #[test]
    fn a_wake_up_timed_in_few_transactions_says_so() {
        let mut t = Timeline {
            transactions: 4726,
            ..Timeline::default()
        };
        t.in_situ.server_wakeup = Some(Pct {
            p50_us: 97.9,
            p90_us: 172.4,
            n: 12,
        });
        t.in_situ.client_wakeup = Some(Pct {
            p50_us: 46.7,
            p90_us: 60.1,
            n: 4708,
        });
        let txt = text(&t);
        let line = |who: &str| {
            txt.lines()
                .find(|l| l.contains(&format!("{who} wake-up")))
                .unwrap_or_default()
                .to_string()
        };
        assert!(
            line("server")
                .ends_with(": timed in only 12 of 4726 transactions, not a sample of them"),
            "{txt}"
        );
        assert!(line("client").ends_with("(n=4708)"), "{txt}");
    }

    /// A p90 of fewer than ten samples is said to be none; of ten it is given.
    #[test]
    fn a_p90_needs_ten_samples() {
        let few = Some(Pct {
            p50_us: 47.3,
            p90_us: 849.0,
            n: 4,
        });
        assert_eq!(pct(&few), "p50 47.3 µs (n=4: too few for a p90)");
        let ten = Some(Pct {
            p50_us: 47.3,
            p90_us: 82.0,
            n: 10,
        });
        assert_eq!(pct(&ten), "p50 47.3 µs, p90 82.0 µs (n=10)");
    }
}
