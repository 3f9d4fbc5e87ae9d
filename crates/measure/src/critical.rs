//! The critical path of request/response transactions rebuilt from sampled tracepoints
//! (`crate::sampling`): each cycle from one client `send` to the next is cut at the hits
//! that mark its stages — the server woken, its CPU leaving idle, the server running, its
//! `recv` returning, its `send`, and the same back on the client — so the stages of one
//! transaction add up to exactly its cycle. Percentiles are then taken per stage.

use virtperf_wire::{InSitu, Mark, Pct, Stage, Timeline};

use crate::sampling::{Event, What};

/// The stages, in path order: (name, on the server's CPU).
const STAGES: [(&str, bool); 10] = [
    ("client send → server woken", false),
    ("server CPU leaves idle", true),
    ("server thread switched in", true),
    ("server recv returns", true),
    ("server turns around", true),
    ("server send → client woken", true),
    ("client CPU leaves idle", false),
    ("client thread switched in", false),
    ("client recv returns", false),
    ("client turns around", false),
];

/// One side's wake-up inside a cycle: woken, left idle (if it was idle), switched in,
/// the IPI that woke its CPU, the sender's ICR write that sent it and the IPI's arrival
/// on the woken CPU.
#[derive(Default, Clone, Copy)]
struct Wake {
    woken: Option<u64>,
    idle_exit: Option<u64>,
    running: Option<u64>,
    ipi: Option<u64>,
    icr: Option<u64>,
    entry: Option<u64>,
    /// The woken CPU's TSC-deadline write after it left idle, before the thread ran: the
    /// tick restarted, which a deep idle state stopped (a VM exit without APICv).
    tick: Option<u64>,
}

/// One cycle's boundaries (ns).
struct Cycle {
    start: u64,
    server: Wake,
    server_recv: u64,
    server_send: u64,
    client: Wake,
    client_recv: u64,
    end: u64,
    icr: u32,
    tsc: u32,
    /// NET_RX softirq time inside the two deliveries (send → peer's recv returns), ns.
    net_rx_ns: u64,
    /// NET_RX softirq runs that overlapped them.
    net_rx_runs: u32,
}

impl Cycle {
    /// Stage lengths, ns; a stage whose closing event is absent has length 0 (its time
    /// falls to the next stage), so they always add up to the cycle.
    fn stages(&self) -> ([u64; 10], [bool; 10]) {
        let points = [
            self.server.woken,
            self.server.idle_exit,
            self.server.running,
            Some(self.server_recv),
            Some(self.server_send),
            self.client.woken,
            self.client.idle_exit,
            self.client.running,
            Some(self.client_recv),
            Some(self.end),
        ];
        let mut out = [0u64; 10];
        let mut seen = [false; 10];
        let mut prev = self.start;
        for (i, p) in points.iter().enumerate() {
            if let Some(t) = p {
                out[i] = t.saturating_sub(prev);
                seen[i] = true;
                prev = *t;
            }
        }
        (out, seen)
    }
}

/// Per-CPU lookups built once over all events, so each cycle asks them in O(log n)
/// instead of scanning every earlier event (a 0.5 s trial has ~10^5 events and 10^4
/// cycles: a scan per cycle took minutes in a debug build).
#[derive(Default)]
struct Index {
    /// Per CPU: its idle entries (`true`) and exits, in time order.
    idle: std::collections::HashMap<u32, Vec<(u64, bool)>>,
    /// Per CPU: its NET_RX softirq runs (entry, exit), in time order (they do not nest,
    /// so their ends are in order too).
    net_rx: std::collections::HashMap<u32, Vec<(u64, u64)>>,
}

impl Index {
    fn new(all: &[Event]) -> Index {
        let mut ix = Index::default();
        let mut open: std::collections::HashMap<u32, u64> = Default::default();
        for e in all {
            match e.what {
                What::IdleEnter(_) => ix.idle.entry(e.cpu).or_default().push((e.t_ns, true)),
                What::IdleExit => ix.idle.entry(e.cpu).or_default().push((e.t_ns, false)),
                What::NetRx(true) => {
                    open.insert(e.cpu, e.t_ns);
                }
                What::NetRx(false) => {
                    if let Some(from) = open.remove(&e.cpu) {
                        ix.net_rx.entry(e.cpu).or_default().push((from, e.t_ns));
                    }
                }
                _ => {}
            }
        }
        ix
    }

    /// Whether `cpu`'s last idle event at or before `t` was an entry.
    fn idle_at(&self, cpu: u32, t: u64) -> bool {
        self.idle.get(&cpu).is_some_and(|v| {
            let i = v.partition_point(|(x, _)| *x <= t);
            i > 0 && v[i - 1].1
        })
    }

    /// NET_RX softirq time (ns) inside `windows`, and the runs that overlapped them.
    fn net_rx_in(&self, windows: [(u64, u64); 2]) -> (u64, u32) {
        let (mut ns, mut runs) = (0u64, 0u32);
        let lo = windows[0].0.min(windows[1].0);
        let hi = windows[0].1.max(windows[1].1);
        for v in self.net_rx.values() {
            for (from, to) in v[v.partition_point(|r| r.1 <= lo)..]
                .iter()
                .take_while(|r| r.0 < hi)
            {
                let inside: u64 = windows
                    .iter()
                    .map(|(a, b)| (*to).min(*b).saturating_sub((*from).max(*a)))
                    .sum();
                if inside > 0 {
                    ns += inside;
                    runs += 1;
                }
            }
        }
        (ns, runs)
    }
}

/// How many engine threads per CPU are tried as a transaction's side: the few that
/// entered `send` most often there.
const CANDIDATES: usize = 4;

/// The threads on `cpu` that entered `send`, most often first (at most [`CANDIDATES`]).
/// The busiest is not always the rr's engine: a neighbour's stream on the same CPU sends
/// more often than a round trip does.
fn senders(ev: &[Event], cpu: u32) -> Vec<i32> {
    let mut n: std::collections::HashMap<i32, u32> = Default::default();
    for e in ev
        .iter()
        .filter(|e| e.cpu == cpu && e.what == What::SendEnter)
    {
        *n.entry(e.tid).or_default() += 1;
    }
    let mut v: Vec<(i32, u32)> = n.into_iter().collect();
    v.sort_by_key(|&(t, c)| (std::cmp::Reverse(c), t));
    v.into_iter().take(CANDIDATES).map(|(t, _)| t).collect()
}

/// The transactions in `ev` between client `ids.0` and server `ids.1`: the cycles from
/// one client send to the next that are complete, and how many were not.
fn transactions(ix: &Index, ev: &[Event], ids: (i32, i32), cpus: (u32, u32)) -> (Vec<Cycle>, u64) {
    let starts: Vec<usize> = (0..ev.len())
        .filter(|&i| ev[i].tid == ids.0 && ev[i].what == What::SendEnter)
        .collect();
    let mut cycles = Vec::new();
    let mut skipped = 0u64;
    for w in starts.windows(2) {
        match cycle(ix, &ev[w[0]..w[1]], ids, cpus, ev[w[1]].t_ns) {
            Some(c) => cycles.push(c),
            None => skipped += 1,
        }
    }
    (cycles, skipped)
}

/// The client and server threads whose sends answer each other most often, among each
/// CPU's busiest senders, with their transactions; `Err` says what was tried.
fn pair(
    ix: &Index,
    ev: &[Event],
    cpus: (u32, u32),
    lost: u64,
) -> Result<(Vec<Cycle>, u64), String> {
    let (clients, servers) = (senders(ev, cpus.0), senders(ev, cpus.1));
    let silent: Vec<String> = [(cpus.0, &clients), (cpus.1, &servers)]
        .iter()
        .filter(|(_, t)| t.is_empty())
        .map(|(c, _)| format!("CPU {c}"))
        .collect();
    if !silent.is_empty() {
        return Err(format!(
            "no sends sampled on {}: the engines did not run there",
            silent.join(" and ")
        ));
    }
    let best = clients
        .iter()
        .flat_map(|&c| servers.iter().map(move |&s| (c, s)))
        .filter(|(c, s)| c != s)
        .map(|ids| transactions(ix, ev, ids, cpus))
        .max_by_key(|(cycles, _)| cycles.len());
    match best {
        Some(found) if !found.0.is_empty() => Ok(found),
        _ => Err(format!(
            "no complete transaction among {} sampled events: no thread sending on CPU {} ({:?}) and on CPU {} ({:?}, the busiest first) answered the other in turn{}",
            ev.len(),
            cpus.0,
            clients,
            cpus.1,
            servers,
            if lost > 0 {
                format!("; {lost} records were lost (full buffers, or the kernel throttled the sampling): other traffic on these CPUs?")
            } else {
                String::new()
            }
        )),
    }
}

/// Finds one side's wake-up in `ev` (one cycle's events, from `from` on, before the
/// side's `recv` returns at `until`).
fn wake_of(ix: &Index, ev: &[Event], tid: i32, cpu: u32, from: u64, until: u64) -> Wake {
    let window = ev.iter().filter(|e| e.t_ns >= from && e.t_ns <= until);
    let Some(woken) = window
        .clone()
        .find(|e| matches!(e.what, What::Waking { tid: t, .. } if t == tid))
        .map(|e| e.t_ns)
    else {
        return Wake::default();
    };
    let running = window
        .clone()
        .find(|e| e.t_ns >= woken && e.cpu == cpu && e.what == What::SwitchIn { next: tid })
        .map(|e| e.t_ns);
    let stop = running.unwrap_or(until);
    // Idle at the wake-up: the CPU's last idle event before it (perhaps in an earlier
    // cycle) was an entry.
    let was_idle = ix.idle_at(cpu, woken);
    let idle_exit = was_idle
        .then(|| {
            window
                .clone()
                .find(|e| {
                    e.t_ns >= woken && e.t_ns <= stop && e.cpu == cpu && e.what == What::IdleExit
                })
                .map(|e| e.t_ns)
        })
        .flatten();
    let sent = idle_exit.and_then(|x| {
        window
            .clone()
            .find(|e| e.t_ns >= woken && e.t_ns <= x && e.what == What::IpiSend { cpu })
    });
    let ipi = sent.map(|e| e.t_ns);
    // The IPI's way to the halted CPU: the sender's ICR write (a VM exit without IPI
    // virtualization), then its arrival on the woken CPU, both before that CPU leaves idle.
    let icr = sent.and_then(|s| {
        let x = idle_exit?;
        window
            .clone()
            .find(|e| {
                e.t_ns >= s.t_ns && e.t_ns <= x && e.cpu == s.cpu && e.what == What::MsrWrite(0x830)
            })
            .map(|e| e.t_ns)
    });
    let entry = icr.and_then(|i| {
        let x = idle_exit?;
        window
            .clone()
            .find(|e| {
                e.t_ns >= i && e.t_ns <= x && e.cpu == cpu && matches!(e.what, What::IpiEntry(_))
            })
            .map(|e| e.t_ns)
    });
    let tick = idle_exit.and_then(|x| {
        window
            .clone()
            .find(|e| {
                e.t_ns >= x && e.t_ns <= stop && e.cpu == cpu && e.what == What::MsrWrite(0x6e0)
            })
            .map(|e| e.t_ns)
    });
    Wake {
        woken: Some(woken),
        idle_exit,
        running,
        ipi,
        icr,
        entry,
        tick,
    }
}

/// The first hit in `ev` at or after `from` that `f` accepts.
fn first(ev: &[Event], from: u64, f: impl Fn(&Event) -> bool) -> Option<u64> {
    ev.iter().find(|e| e.t_ns >= from && f(e)).map(|e| e.t_ns)
}

/// One cycle from the client's send at `ev[0]` to the next at `end`, or `None` when an
/// event is missing or out of order.
fn cycle(ix: &Index, ev: &[Event], ids: (i32, i32), cpus: (u32, u32), end: u64) -> Option<Cycle> {
    let (client, server) = ids;
    let start = ev.first()?.t_ns;
    let recv_by =
        |tid: i32| move |e: &Event| e.tid == tid && matches!(e.what, What::RecvExit(n) if n > 0);
    let server_recv = first(ev, start, recv_by(server))?;
    let server_send = first(ev, server_recv, |e| {
        e.tid == server && e.what == What::SendEnter
    })?;
    let client_recv = first(ev, server_send, recv_by(client))?;
    let s = wake_of(ix, ev, server, cpus.1, start, server_recv);
    let c = wake_of(ix, ev, client, cpus.0, server_send, client_recv);
    let count = |msr: u32| ev.iter().filter(|e| e.what == What::MsrWrite(msr)).count() as u32;
    let (net_rx_ns, net_rx_runs) = ix.net_rx_in([(start, server_recv), (server_send, client_recv)]);
    Some(Cycle {
        start,
        server: s,
        server_recv,
        server_send,
        client: c,
        client_recv,
        end,
        icr: count(0x830),
        tsc: count(0x6e0),
        net_rx_ns,
        net_rx_runs,
    })
}

/// Nearest-rank percentile of sorted, non-empty `v` (ns) in µs.
fn pct_us(v: &[u64], q: f64) -> f64 {
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i] as f64 / 1000.0
}

/// Median and 90th percentile of `v` (ns), None when it is empty.
fn pct(mut v: Vec<u64>) -> Option<Pct> {
    v.sort_unstable();
    (!v.is_empty()).then(|| Pct {
        p50_us: pct_us(&v, 0.5),
        p90_us: pct_us(&v, 0.9),
        n: v.len() as u64,
    })
}

/// Rebuilds the transactions in `ev` (sorted by time) between the client on `cpus.0` and
/// the server on `cpus.1`. `rr_p50_us` is the engine's own median in the same trial.
pub fn analyze(
    ev: &[Event],
    cpus: (u32, u32),
    lost: u64,
    trial_s: f64,
    rr_p50_us: Option<f64>,
) -> Result<Timeline, String> {
    let ix = Index::new(ev);
    let (cycles, skipped) = pair(&ix, ev, cpus, lost)?;
    let n = cycles.len() as f64;
    let per: Vec<([u64; 10], [bool; 10])> = cycles.iter().map(Cycle::stages).collect();
    let stages: Vec<Stage> = STAGES
        .iter()
        .enumerate()
        .map(|(i, (name, on_server))| {
            // Never empty: there is at least one cycle.
            let p = pct(per.iter().map(|(d, _)| d[i]).collect()).unwrap_or_default();
            let seen = per.iter().filter(|(_, s)| s[i]).count() as f64 / n;
            // A stage that never occurred has no length to report: missing, not 0.
            let occurred = seen > 0.0;
            Stage {
                name: (*name).into(),
                cpu: if *on_server { cpus.1 } else { cpus.0 },
                p50_us: occurred.then_some(p.p50_us),
                p90_us: occurred.then_some(p.p90_us),
                seen,
            }
        })
        .collect();
    let sum_p50_us: f64 = stages.iter().filter_map(|s| s.p50_us).sum();
    let mut unseen = unseen(&stages);
    // A CPU with no idle event at all in the trace: never idle, or idling untraced; either
    // way none of its wake-ups can be said to be (or not be) from idle.
    let mut untraced: Vec<u32> = vec![cpus.0, cpus.1];
    untraced.dedup();
    untraced.retain(|c| !ix.idle.contains_key(c));
    for c in &untraced {
        unseen.push(format!(
            "CPU {c}: no idle tracepoint fired in the sampled trial (never idle, or an idle loop without tracepoints): its wake-ups from idle are not known"
        ));
    }
    let in_situ = in_situ(&cycles, untraced);
    let example = example(ev, &cycles, cpus);
    Ok(Timeline {
        client_cpu: cpus.0,
        server_cpu: cpus.1,
        trial_s,
        transactions: cycles.len() as u64,
        skipped,
        lost_records: lost,
        stages,
        sum_p50_us,
        rr_p50_us,
        gap_pct: rr_p50_us
            .filter(|p| *p > 0.0)
            .map(|p| (sum_p50_us - p) / p * 100.0),
        in_situ,
        example,
        unseen,
        headline_p50_us: None,
    })
}

/// Stages whose closing event almost never fired although the wake-up before them did:
/// a CPU whose idle loop runs untraced (some hypervisors' guests idle in a path with no
/// tracepoints), whose time then falls to the next stage.
fn unseen(stages: &[Stage]) -> Vec<String> {
    let mut out = Vec::new();
    for side in [0usize, 5] {
        let woken = &stages[side];
        // The event that closes each: leaving idle is power:cpu_idle's exit, being switched
        // in is sched:sched_switch to the woken thread.
        let closing = [
            "power:cpu_idle (exit)",
            "sched:sched_switch (to the woken thread)",
        ];
        for (s, event) in stages[side + 1..side + 3].iter().zip(closing) {
            if woken.seen > 0.5 && s.seen < 0.05 {
                out.push(format!(
                    "CPU {}: \"{}\" seen in {:.1}% of transactions ({event} did not fire there: an idle loop without tracepoints?); its time is in the next stage",
                    s.cpu,
                    s.name,
                    s.seen * 100.0
                ));
            }
        }
    }
    out
}

fn in_situ(cycles: &[Cycle], idle_untraced_cpus: Vec<u32>) -> InSitu {
    let n = cycles.len() as f64;
    let wake = |w: fn(&Cycle) -> Wake| {
        pct(cycles
            .iter()
            .filter_map(|c| Some(w(c).running? - w(c).woken?))
            .collect())
    };
    let sides = || cycles.iter().flat_map(|c| [c.server, c.client]);
    InSitu {
        server_wakeup: wake(|c| c.server),
        client_wakeup: wake(|c| c.client),
        idle_exit: pct(sides()
            .filter_map(|w| Some(w.idle_exit? - w.ipi?))
            .collect()),
        idle_to_run: pct(sides()
            .filter_map(|w| Some(w.running? - w.idle_exit?))
            .collect()),
        ipi_to_icr: pct(sides().filter_map(|w| Some(w.icr? - w.ipi?)).collect()),
        ipi_delivery: pct(sides().filter_map(|w| Some(w.entry? - w.icr?)).collect()),
        idle_exit_in_guest: pct(sides()
            .filter_map(|w| Some(w.idle_exit? - w.entry?))
            .collect()),
        tick_restart: pct(sides()
            .filter_map(|w| Some(w.tick? - w.idle_exit?))
            .collect()),
        idle_exit_with_tick: pct(sides().filter_map(|w| Some(w.tick? - w.ipi?)).collect()),
        request_delivery: pct(cycles.iter().map(|c| c.server_recv - c.start).collect()),
        response_delivery: pct(cycles
            .iter()
            .map(|c| c.client_recv - c.server_send)
            .collect()),
        idle_wakeups_per_transaction: idle_untraced_cpus
            .is_empty()
            .then(|| sides().filter(|w| w.idle_exit.is_some()).count() as f64 / n),
        idle_untraced_cpus,
        icr_writes_per_transaction: Some(cycles.iter().map(|c| f64::from(c.icr)).sum::<f64>() / n),
        tsc_deadline_writes_per_transaction: Some(
            cycles.iter().map(|c| f64::from(c.tsc)).sum::<f64>() / n,
        ),
        net_rx_on_path: pct(cycles.iter().map(|c| c.net_rx_ns).collect()),
        net_rx_runs_per_transaction: Some(
            cycles.iter().map(|c| f64::from(c.net_rx_runs)).sum::<f64>() / n,
        ),
    }
}

/// The events of the cycle nearest the median length, labelled, relative to its start.
fn example(ev: &[Event], cycles: &[Cycle], cpus: (u32, u32)) -> Vec<Mark> {
    let mut lens: Vec<u64> = cycles.iter().map(|c| c.end - c.start).collect();
    lens.sort_unstable();
    let median = lens[lens.len() / 2];
    let Some(c) = cycles
        .iter()
        .min_by_key(|c| (c.end - c.start).abs_diff(median))
    else {
        return Vec::new();
    };
    ev.iter()
        .filter(|e| e.t_ns >= c.start && e.t_ns <= c.end && (e.cpu == cpus.0 || e.cpu == cpus.1))
        .filter_map(|e| {
            let what = match e.what {
                What::SendEnter => "send".to_string(),
                What::RecvExit(n) if n > 0 => "recv returns".to_string(),
                What::RecvExit(_) => return None,
                What::Waking { target_cpu, .. } => format!("wake (→ CPU {target_cpu})"),
                What::SwitchIn { next: 0 } => "idle task".to_string(),
                What::SwitchIn { .. } => "switch in".to_string(),
                What::IpiSend { cpu } => format!("IPI → CPU {cpu}"),
                What::IdleEnter(s) => format!("idle enter (state {s})"),
                What::IdleExit => "idle exit".to_string(),
                What::IpiEntry(true) => "call-function IPI".to_string(),
                What::IpiEntry(false) => "reschedule IPI".to_string(),
                What::MsrWrite(0x830) => "ICR write".to_string(),
                What::MsrWrite(_) => "TSC-deadline write".to_string(),
                What::NetRx(true) => "NET_RX softirq".to_string(),
                What::NetRx(false) => "NET_RX done".to_string(),
            };
            Some(Mark {
                t_us: (e.t_ns - c.start) as f64 / 1000.0,
                cpu: e.cpu,
                what,
            })
        })
        .take(80)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(t_ns: u64, cpu: u32, tid: i32, what: What) -> Event {
        Event {
            t_ns,
            cpu,
            tid,
            what,
        }
    }

    /// Two made-up transactions between a client (tid 10, CPU 0) and a server (tid 20,
    /// CPU 1), both sleeping in idle between messages; the stages are cut where the events
    /// say and add up to each cycle.
    fn two_cycles() -> Vec<Event> {
        // The client's CPU idled once before the test (its idle loop is traced); the
        // server went idle before the first request (in an earlier cycle).
        let mut v = vec![
            e(100, 0, 0, What::IdleEnter(0)),
            e(500, 0, 0, What::IdleExit),
            e(1_000, 1, 0, What::IdleEnter(0)),
        ];
        for (k, base) in [10_000u64, 110_000, 210_000].iter().enumerate() {
            v.push(e(*base, 0, 10, What::SendEnter));
            if k == 2 {
                break;
            }
            v.push(e(
                base + 5_000,
                0,
                10,
                What::Waking {
                    tid: 20,
                    target_cpu: 1,
                },
            ));
            v.push(e(base + 6_000, 0, 10, What::IpiSend { cpu: 1 }));
            v.push(e(base + 6_100, 0, 10, What::MsrWrite(0x830)));
            v.push(e(base + 15_000, 1, 0, What::IpiEntry(true)));
            v.push(e(base + 16_000, 1, 0, What::IdleExit));
            v.push(e(base + 17_500, 1, 0, What::MsrWrite(0x6e0)));
            v.push(e(base + 19_000, 1, 20, What::SwitchIn { next: 20 }));
            v.push(e(base + 21_000, 1, 20, What::RecvExit(1)));
            v.push(e(base + 22_000, 1, 20, What::SendEnter));
            v.push(e(base + 23_000, 1, 0, What::IdleEnter(0)));
            // The client was not idle: no idle exit on its side.
            v.push(e(
                base + 30_000,
                1,
                20,
                What::Waking {
                    tid: 10,
                    target_cpu: 0,
                },
            ));
            v.push(e(base + 33_000, 0, 10, What::SwitchIn { next: 10 }));
            v.push(e(base + 35_000, 0, 10, What::RecvExit(1)));
        }
        v
    }

    /// A CPU whose idle loop fired no tracepoint in the whole trace: whether its side was
    /// woken from idle is unknown, not "never" (it used to count as 0 wake-ups from idle).
    #[test]
    fn an_untraced_idle_loop_leaves_idle_wakeups_unknown() {
        let ev: Vec<Event> = two_cycles().into_iter().filter(|x| x.t_ns > 600).collect();
        let t = analyze(&ev, (0, 1), 0, 1.0, Some(100.0)).expect("analyzes");
        assert_eq!(t.in_situ.idle_wakeups_per_transaction, None);
        assert_eq!(t.in_situ.idle_untraced_cpus, [0]);
        assert!(
            t.unseen
                .iter()
                .any(|u| u.starts_with("CPU 0: no idle tracepoint")),
            "{:?}",
            t.unseen
        );
    }

    /// A stage whose closing event never fired names that event (this machine's CPU 1:
    /// no power:cpu_idle exit, no sched_switch to the woken server, 0.0% and 0.3%).
    #[test]
    fn an_unseen_stage_names_the_event_that_did_not_fire() {
        let stages: Vec<Stage> = STAGES
            .iter()
            .enumerate()
            .map(|(i, (name, server))| Stage {
                name: (*name).into(),
                cpu: u32::from(*server),
                p50_us: Some(1.0),
                p90_us: Some(2.0),
                seen: match i {
                    1 => 0.0,
                    2 => 0.003,
                    _ => 1.0,
                },
            })
            .collect();
        let u = unseen(&stages);
        assert_eq!(u.len(), 2, "{u:?}");
        assert!(u[0].starts_with("CPU 1: \"server CPU leaves idle\" seen in 0.0% of transactions (power:cpu_idle (exit) did not fire there"), "{u:?}");
        assert!(u[1].contains("seen in 0.3% of transactions (sched:sched_switch (to the woken thread) did not fire there"), "{u:?}");
    }

    #[test]
    fn stages_add_up_to_each_cycle_and_name_the_idle_exit() {
        let t = analyze(&two_cycles(), (0, 1), 0, 1.0, Some(100.0)).expect("analyzes");
        assert_eq!(t.transactions, 2);
        assert_eq!(t.skipped, 0);
        let p50: Vec<Option<f64>> = t.stages.iter().map(|s| s.p50_us).collect();
        let at = |v: f64| Some(v);
        assert_eq!(
            p50,
            vec![
                at(5.0),
                at(11.0),
                at(3.0),
                at(2.0),
                at(1.0),
                at(8.0),
                None,
                at(3.0),
                at(2.0),
                at(65.0)
            ],
            "the client's idle exit never occurred: missing, not 0"
        );
        assert!((t.sum_p50_us - 100.0).abs() < 1e-9);
        assert_eq!(t.gap_pct, Some(0.0));
        assert_eq!(t.stages[6].seen, 0.0, "the client never left idle");
        let i = &t.in_situ;
        assert_eq!(i.server_wakeup.map(|p| p.p50_us), Some(14.0));
        assert_eq!(
            i.idle_exit.map(|p| p.p50_us),
            Some(10.0),
            "IPI at 6 µs, idle exit at 16"
        );
        // Its parts: IPI sent → ICR write 0.1, ICR write → IPI entry 8.9 (the host's
        // delivery), IPI entry → idle exit 1.0 (the guest's).
        let parts =
            [i.ipi_to_icr, i.ipi_delivery, i.idle_exit_in_guest].map(|p| p.map(|p| p.p50_us));
        assert_eq!(parts, [Some(0.1), Some(8.9), Some(1.0)]);
        // The tick restarted 1.5 µs after the idle exit: IPI → restart 11.5 µs.
        assert_eq!(i.tick_restart.map(|p| p.p50_us), Some(1.5));
        assert_eq!(i.idle_exit_with_tick.map(|p| p.p50_us), Some(11.5));
        assert_eq!(i.idle_wakeups_per_transaction, Some(1.0));
        assert!(i.idle_untraced_cpus.is_empty());
        assert_eq!(i.request_delivery.map(|p| p.p50_us), Some(21.0));
        assert_eq!(i.response_delivery.map(|p| p.p50_us), Some(13.0));
        assert_eq!(i.icr_writes_per_transaction, Some(1.0));
        assert!(t
            .example
            .iter()
            .any(|m| m.what == "IPI → CPU 1" && m.t_us == 6.0));
    }

    #[test]
    fn net_rx_time_is_clipped_to_the_deliveries_and_a_run_begun_earlier_counts() {
        let mut v = two_cycles();
        // Cycle 1: NET_RX on the client's CPU inside its send (request delivery, 2 µs),
        // and one on the server's CPU while it turns around (outside both deliveries).
        v.push(e(12_000, 0, 10, What::NetRx(true)));
        v.push(e(14_000, 0, 10, What::NetRx(false)));
        v.push(e(31_200, 1, 20, What::NetRx(true)));
        v.push(e(31_500, 1, 20, What::NetRx(false)));
        // Cycle 2: a run that began before its send (at 109 µs) and ends 3 µs into it.
        v.push(e(109_000, 1, 0, What::NetRx(true)));
        v.push(e(113_000, 1, 0, What::NetRx(false)));
        v.sort_by_key(|x| x.t_ns);
        let t = analyze(&v, (0, 1), 0, 1.0, None).expect("analyzes");
        let i = &t.in_situ;
        let on_path = i.net_rx_on_path.expect("measured");
        assert_eq!((on_path.n, on_path.p50_us, on_path.p90_us), (2, 2.0, 3.0));
        assert_eq!(i.net_rx_runs_per_transaction, Some(1.0));
        // Softirq time overlaps the stages: they still add up to each cycle.
        assert!((t.sum_p50_us - 100.0).abs() < 1e-9);
    }

    #[test]
    fn a_cycle_with_a_missing_event_is_skipped_not_guessed() {
        let mut v = two_cycles();
        // The server's second send was lost.
        v.retain(|x| x.t_ns != 132_000);
        let t = analyze(&v, (0, 1), 1, 1.0, None).expect("analyzes");
        assert_eq!((t.transactions, t.skipped, t.lost_records), (1, 1, 1));
        assert_eq!(t.gap_pct, None);
    }

    /// A neighbour's stream on the client's CPU sends far more often than the round trip
    /// (its sender tid 30; its receiver, tid 40 on CPU 1, only reads): the pair that
    /// answers each other is still the rr's, and its cycles are the same two.
    #[test]
    fn a_busier_sender_beside_the_round_trip_is_not_taken_for_its_client() {
        let mut v = two_cycles();
        for k in 0..50u64 {
            v.push(e(2_000 + k * 4_000 + 7, 0, 30, What::SendEnter));
            v.push(e(2_000 + k * 4_000 + 9, 1, 40, What::RecvExit(64)));
        }
        v.sort_by_key(|x| x.t_ns);
        let t = analyze(&v, (0, 1), 0, 1.0, Some(100.0)).expect("analyzes");
        assert_eq!((t.transactions, t.skipped), (2, 0));
        assert!((t.sum_p50_us - 100.0).abs() < 1e-9);
        // The stream alone: no pair answers in turn, and the error names who was tried.
        v.retain(|x| x.tid == 30 || x.tid == 40);
        let err = analyze(&v, (0, 1), 3, 1.0, None).unwrap_err();
        assert!(err.contains("no sends sampled on CPU 1:"), "{err}");
        v.push(e(3_001, 1, 40, What::SendEnter));
        v.sort_by_key(|x| x.t_ns);
        let err = analyze(&v, (0, 1), 3, 1.0, None).unwrap_err();
        assert!(
            err.contains("CPU 0 ([30])") && err.contains("CPU 1 ([40]"),
            "{err}"
        );
        assert!(err.contains("3 records were lost"), "{err}");
    }

    #[test]
    fn no_sends_on_a_cpu_is_an_error_with_the_cpus() {
        let err = analyze(&two_cycles(), (0, 3), 0, 1.0, None).unwrap_err();
        assert!(err.contains("CPU 3"), "{err}");
    }
}
