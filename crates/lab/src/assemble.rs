//! Turns both sides' raw measurements into one [`TestResult`]: rates, throughput, latency
//! summary, CPU split and service demand per side.

use virtperf_load::http::Fetched;
use virtperf_measure::{latency, split, LatencyHistogram};
use virtperf_wire::{
    BulkOutcome, CpuAccounting, Download, Env, Envs, Events, FlowSpread, HttpOutcome, NicEvents,
    Outcome, PinnedEvents, Protocol, RrOutcome, SideCpu, SideEvents, SideReport, StreamFlow,
    StreamOutcome, TestResult, UdpCounts, UdpRr, UdpStream, Workload, RESULT_SCHEMA,
};

use crate::plan::Plan;

/// Everything collected during a test.
pub struct Collected<'a> {
    /// What was run.
    pub plan: &'a Plan,
    /// Agent address or URL.
    pub target: String,
    /// Client measurement.
    pub client: SideReport,
    /// Client latency histogram (rr, crr).
    pub client_hist: Option<LatencyHistogram>,
    /// Agent measurement, if there was an agent.
    pub server: Option<SideReport>,
    /// Client fingerprint.
    pub client_env: Env,
    /// Agent fingerprint.
    pub server_env: Option<Env>,
    /// HTTP downloads in order.
    pub downloads: Vec<Fetched>,
    /// URL for HTTP tests.
    pub url: String,
}

fn direction(reverse: bool) -> String {
    if reverse {
        "server_to_client"
    } else {
        "client_to_server"
    }
    .to_string()
}

fn mbps(bytes: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        0.0
    }
}

/// Above this much CPU used by other work (percent of one CPU) a result carries a warning.
pub const OTHER_LOAD_WARN_PCT: f64 = 10.0;

/// `test_threads_s`: CPU seconds of every test thread on that side's machine.
fn side_cpu(r: &SideReport, units: f64, test_threads_s: f64) -> SideCpu {
    let per = |secs: f64| if units > 0.0 { secs * 1e6 / units } else { 0.0 };
    let t = &r.cpu.total;
    let other_s = (t.host_user() + t.system - test_threads_s).max(0.0);
    let wall = if r.elapsed_s > 0.0 {
        r.elapsed_s
    } else {
        r.cpu.wall_s
    };
    SideCpu {
        system: split(&r.cpu),
        process_user_s: r.threads.user_s,
        process_system_s: r.threads.system_s,
        service_demand_us: per(r.threads.total_s()),
        system_service_demand_us: per(r.cpu.total.busy()),
        other_cpu_pct: if wall > 0.0 {
            100.0 * other_s / wall
        } else {
            0.0
        },
        loadavg_1m: None,
        threads_busy_pct: None,
    }
}

/// Events per unit of work for both sides: per transaction, or per MB where the unit is KB.
fn events_of(c: &Collected, units: f64, unit: &str) -> Option<Events> {
    let (divisor, unit) = if unit == "KB" {
        (units * 1024.0 / 1e6, "MB")
    } else {
        (units, unit)
    };
    // No work done: there is nothing to divide by, so no per-unit figure (not 0 per unit).
    let per = |d: &std::collections::BTreeMap<String, u64>| {
        d.iter()
            .filter(|_| divisor > 0.0)
            .map(|(k, v)| (k.clone(), *v as f64 / divisor))
            .collect()
    };
    let side = |r: &SideReport, cpu: Option<u32>| -> Option<SideEvents> {
        let e = r.events.as_ref()?;
        let mut deltas = e.all.clone();
        deltas.insert(
            "thread_voluntary_switches".into(),
            r.threads.voluntary_switches,
        );
        deltas.insert(
            "thread_involuntary_switches".into(),
            r.threads.involuntary_switches,
        );
        let pinned = cpu.zip(e.pinned.as_ref()).map(|(cpu, d)| PinnedEvents {
            cpu,
            per_unit: per(d),
            deltas: d.clone(),
        });
        let nic = e.nic.as_ref().map(|n| {
            let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
            NicEvents {
                interface: n.interface.clone(),
                device: n.device.clone(),
                per_unit: per(&n.deltas),
                deltas: n.deltas.clone(),
                kicks_per_packet: ratio(n.kicks(), n.packets()),
                irqs_per_packet: ratio(n.irqs(), n.packets()),
                packets_per_irq: ratio(n.packets(), n.irqs()),
            }
        });
        Some(SideEvents {
            per_unit: per(&deltas),
            deltas,
            pinned,
            missing: e.missing.clone(),
            nic,
        })
    };
    Some(Events {
        unit: unit.to_string(),
        client: side(&c.client, c.plan.client_cpu)?,
        server: c.server.as_ref().and_then(|s| side(s, c.plan.server_cpu)),
    })
}

/// Builds the result.
pub fn assemble(c: Collected) -> TestResult {
    let empty = SideReport::default();
    let server = c.server.as_ref().unwrap_or(&empty);
    let mut warnings = Vec::new();
    let (outcome, units, unit) = match c.plan.workload {
        Workload::Rr { .. } | Workload::Crr { .. } => rr_outcome(&c, server, &mut warnings),
        Workload::Stream { reverse, .. } => stream_outcome(&c, server, reverse, &mut warnings),
        Workload::Bulk { bytes, reverse, .. } => {
            bulk_outcome(&c, server, bytes, reverse, &mut warnings)
        }
        Workload::Http { bytes } => http_outcome(&c, bytes, &mut warnings),
    };
    let steal = split(&c.client.cpu).steal_pct;
    if steal > 5.0 {
        warnings.push(format!(
            "{steal:.1}% of CPU time was stolen by the hypervisor during the run: expect noise"
        ));
    }
    let cpu = cpu_accounting(&c, units, unit, &mut warnings);
    let events = events_of(&c, units, unit);
    TestResult {
        schema: RESULT_SCHEMA.to_string(),
        workload: c.plan.workload.clone(),
        duration_s: if c.plan.workload.is_timed() {
            c.plan.duration.as_secs_f64()
        } else {
            0.0
        },
        client_cpu: c.plan.client_cpu,
        server_cpu: c.plan.server_cpu,
        target: c.target,
        sock: c.plan.sock,
        capture: c.plan.capture.as_ref().map(|p| p.display().to_string()),
        kvm: None,
        placement: None,
        guest: None,
        outcome,
        cpu,
        env: Envs {
            client: c.client_env,
            server: c.server_env,
        },
        warnings,
        events,
        allow_concurrent: false,
        trace: None,
        timeline: None,
        host_trace: None,
        stop_s: None,
        intervals: Vec::new(),
    }
}

/// Per outcome: the outcome, the units its service demand is per, and their name.
type Measured = (Outcome, f64, &'static str);

/// rr and crr: transactions counted and timed by the client, latency from its histogram.
fn rr_outcome(c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Measured {
    let n = c.client.transactions;
    // With several flows, the test lasted as long as its longest flow.
    let elapsed = c
        .client
        .flows
        .iter()
        .map(|f| f.active_s)
        .fold(0.0, f64::max);
    let (lat, hist) = match &c.client_hist {
        Some(h) => (latency::summarize(h), latency::encode(h)),
        None => Default::default(),
    };
    if n < 1000 {
        warnings.push(format!(
            "only {n} transactions: tail percentiles (p99.9) are not meaningful; run longer"
        ));
    }
    let o = RrOutcome {
        transactions: n,
        server_transactions: server.transactions,
        elapsed_s: elapsed,
        rate_per_s: if elapsed > 0.0 {
            n as f64 / elapsed
        } else {
            0.0
        },
        latency: lat,
        histogram: hist,
        flow_spread: c.plan.workload.multiplexed().and_then(|(_, t)| {
            // Every flow over the same interval: the test's, so a flow that started late
            // or stalled shows as slow rather than as short.
            let rates: Vec<f64> = c
                .client
                .flows
                .iter()
                .map(|f| {
                    if elapsed > 0.0 {
                        f.transactions as f64 / elapsed
                    } else {
                        0.0
                    }
                })
                .collect();
            FlowSpread::of(&rates).map(|s| FlowSpread {
                // crr's agent serves connections, not flows: it counts none.
                server_flows: if matches!(c.plan.workload, Workload::Rr { .. }) {
                    server.flows.len() as u32
                } else {
                    0
                },
                threads: t,
                unit: "transactions/s".into(),
                setup_s: c.client.setup_s,
                ..s
            })
        }),
        udp: udp_rr(c, n, warnings),
    };
    if let Workload::Rr {
        rate_per_s: Some(want),
        ..
    } = c.plan.workload
    {
        // An open loop's achieved rate is the schedule's unless a side could not keep up.
        if o.rate_per_s < 0.98 * f64::from(want) {
            warnings.push(format!(
                "asked for {want} requests/s, achieved {:.0}/s: the target was missed (latency is still measured from each request's intended send time)",
                o.rate_per_s
            ));
        }
    }
    let o = if matches!(c.plan.workload, Workload::Rr { .. }) {
        Outcome::Rr(o)
    } else {
        Outcome::Crr(o)
    };
    (o, n as f64, "transaction")
}

/// UDP rr: the client's lost transactions, said in a warning too when there were any.
fn udp_rr(c: &Collected, completed: u64, warnings: &mut Vec<String>) -> Option<UdpRr> {
    if c.plan.workload.protocol() != Protocol::Udp {
        return None;
    }
    let (lost, late) = c
        .client
        .flows
        .iter()
        .filter_map(|f| f.udp)
        .fold((0, 0), |(l, t), u| (l + u.lost, t + u.late));
    let Workload::Rr {
        loss_timeout_ms, ..
    } = c.plan.workload
    else {
        return None;
    };
    let timeout_ms = crate::udp_roles::loss_timeout(loss_timeout_ms).as_secs_f64() * 1e3;
    let tried = completed + lost;
    let lost_pct = if tried > 0 {
        100.0 * lost as f64 / tried as f64
    } else {
        0.0
    };
    if lost > 0 {
        warnings.push(format!(
            "{lost} of {tried} UDP transactions ({lost_pct:.3}%) had no response within {timeout_ms} ms and were restarted ({late} responses came later: slow, not lost); the rate and latency count completed transactions only"
        ));
    }
    // A late response answers a transaction given up on: there are never more of them than
    // transactions lost. More means datagrams that were not the agent's answers were taken
    // for answers (a 1-byte request carries a 1-byte tag: one stranger's datagram in 256
    // matches), which made transactions complete early.
    if late > lost {
        warnings.push(format!(
            "{late} responses arrived for transactions already answered, more than the {lost} given up on: someone other than the agent is answering this test's requests (forged datagrams?); the rate and latency are not trustworthy"
        ));
    }
    Some(UdpRr {
        lost,
        lost_pct,
        late,
        timeout_ms,
    })
}

/// One UDP stream flow's accounting from its receiver's and its sender's counts.
fn udp_flow(rx: &UdpCounts, tx: &UdpCounts) -> UdpStream {
    UdpStream {
        datagrams_sent: tx.datagrams_tx,
        datagrams_received: rx.datagrams_rx,
        lost: rx.lost,
        lost_pct: pct(rx.lost, rx.highest_seq),
        out_of_order: rx.out_of_order,
        jitter_ms: rx.jitter_ms,
        gso: tx.gso,
        gro: rx.gro,
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        100.0 * part as f64 / whole as f64
    } else {
        0.0
    }
}

/// All flows of a UDP stream: sums, loss over all sequence numbers, jitter the flows' mean
/// (iperf3's summary), and warnings for offloads asked for that the kernel refused.
fn udp_total(
    c: &Collected,
    rx: &SideReport,
    tx: &SideReport,
    warnings: &mut Vec<String>,
) -> UdpStream {
    let mut rxs: Vec<UdpCounts> = rx.flows.iter().map(|f| f.udp.unwrap_or_default()).collect();
    let txs: Vec<UdpCounts> = tx.flows.iter().map(|f| f.udp.unwrap_or_default()).collect();
    check_udp_flows(&mut rxs, &txs, warnings);
    let highest: u64 = rxs.iter().map(|u| u.highest_seq).sum();
    let lost: u64 = rxs.iter().map(|u| u.lost).sum();
    let t = UdpStream {
        datagrams_sent: txs.iter().map(|u| u.datagrams_tx).sum(),
        datagrams_received: rxs.iter().map(|u| u.datagrams_rx).sum(),
        lost,
        lost_pct: pct(lost, highest),
        out_of_order: rxs.iter().map(|u| u.out_of_order).sum(),
        jitter_ms: if rxs.is_empty() {
            0.0
        } else {
            rxs.iter().map(|u| u.jitter_ms).sum::<f64>() / rxs.len() as f64
        },
        gso: !txs.is_empty() && txs.iter().all(|u| u.gso),
        gro: !rxs.is_empty() && rxs.iter().all(|u| u.gro),
    };
    if let Workload::Stream { gso, gro, .. } = c.plan.workload {
        if gso && !t.gso {
            warnings.push("GSO (UDP_SEGMENT) was asked for but the sender's kernel refused it: one datagram per send".into());
        }
        if gro && !t.gro {
            warnings.push("GRO (UDP_GRO) was asked for but the receiver's kernel refused it: one datagram per receive".into());
        }
    }
    t
}

/// Holds each UDP stream flow's receiver to what its sender sent: a sequence number past
/// the sender's last, or more datagrams than it sent, cannot be true (forged or corrupt
/// datagrams that passed the receiver's own checks). Such a flow's loss is recomputed from
/// the sender's numbering, and every such case is a warning.
fn check_udp_flows(rxs: &mut [UdpCounts], txs: &[UdpCounts], warnings: &mut Vec<String>) {
    let implausible: u64 = rxs.iter().map(|u| u.implausible).sum();
    if implausible > 0 {
        warnings.push(format!(
            "{implausible} datagrams carried sequence numbers no sender of this test gave (forged or corrupt): counted apart, in no other count"
        ));
    }
    for (i, (r, t)) in rxs.iter_mut().zip(txs).enumerate() {
        // Senders from before `highest_seq` was reported give 0: nothing to hold to.
        if t.highest_seq > 0 && r.highest_seq > t.highest_seq {
            warnings.push(format!(
                "flow {i}: a datagram numbered {} arrived, but the sender numbered only {}: loss is computed from the sender's numbering instead",
                r.highest_seq, t.highest_seq
            ));
            r.highest_seq = t.highest_seq;
            r.lost = t.highest_seq.saturating_sub(r.datagrams_rx);
        }
        if r.datagrams_rx > t.datagrams_tx {
            warnings.push(format!(
                "flow {i}: {} datagrams received but only {} sent: the counts cannot both be true (datagrams from someone else?)",
                r.datagrams_rx, t.datagrams_tx
            ));
        }
    }
}

/// stream: the receivers' bytes over the longest receiver interval, checked against the
/// senders' count.
fn stream_outcome(
    c: &Collected,
    server: &SideReport,
    reverse: bool,
    warnings: &mut Vec<String>,
) -> Measured {
    let (rx, tx) = if reverse {
        (&c.client, server)
    } else {
        (server, &c.client)
    };
    if tx.flows.len() != rx.flows.len() && c.server.is_some() {
        warnings.push(format!(
            "the sender reported {} flows and the receiver {}: per-flow sender bytes of the flows it did not report read 0",
            tx.flows.len(),
            rx.flows.len()
        ));
    }
    let flows: Vec<StreamFlow> = rx
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| StreamFlow {
            mbps: mbps(f.bytes_rx, f.active_s),
            receiver_bytes: f.bytes_rx,
            sender_bytes: tx.flows.get(i).map(|t| t.bytes_tx).unwrap_or(0),
            active_s: f.active_s,
            udp: f
                .udp
                .map(|r| udp_flow(&r, &tx.flows.get(i).and_then(|t| t.udp).unwrap_or_default())),
        })
        .collect();
    let receiver_bytes: u64 = flows.iter().map(|f| f.receiver_bytes).sum();
    let sender_bytes: u64 = tx.flows.iter().map(|f| f.bytes_tx).sum();
    // Flows start together at the gate; the longest receiver interval spans them all.
    let elapsed = flows.iter().map(|f| f.active_s).fold(0.0, f64::max);
    let udp = (c.plan.workload.protocol() == Protocol::Udp).then(|| udp_total(c, rx, tx, warnings));
    // UDP loses datagrams by design: its loss is counted above, not a broken connection.
    // Multiplexed receivers count only the measured window (the sender's last bytes arrive
    // after it), so for them an early end shows as a flow whose time is short of it.
    let windowed = c.plan.workload.multiplexed().is_some();
    if windowed && udp.is_none() {
        let short: Vec<usize> = (0..flows.len())
            .filter(|i| flows[*i].active_s < 0.98 * elapsed)
            .collect();
        if let Some(first) = short.first() {
            warnings.push(format!(
                "{} of {} connections ended before the measured {elapsed:.3} s were over (flow {first} after {:.3} s)",
                short.len(),
                flows.len(),
                flows[*first].active_s
            ));
        }
        if receiver_bytes > sender_bytes {
            warnings.push(format!(
                "receiver counted {receiver_bytes} bytes but the sender sent only {sender_bytes}: the counts cannot both be true"
            ));
        }
    } else if receiver_bytes != sender_bytes && c.server.is_some() && udp.is_none() {
        warnings.push(format!(
            "receiver counted {receiver_bytes} bytes but sender sent {sender_bytes}: a connection ended early"
        ));
    }
    let flow_spread = c.plan.workload.multiplexed().and_then(|(_, t)| {
        let rates: Vec<f64> = flows.iter().map(|f| f.mbps).collect();
        FlowSpread::of(&rates).map(|s| FlowSpread {
            server_flows: server.flows.len() as u32,
            threads: t,
            unit: "Mbit/s".into(),
            setup_s: c.client.setup_s,
            ..s
        })
    });
    let o = StreamOutcome {
        direction: direction(reverse),
        mbps: mbps(receiver_bytes, elapsed),
        receiver_bytes,
        sender_bytes,
        elapsed_s: elapsed,
        flows,
        flow_spread,
        udp,
    };
    (Outcome::Stream(o), receiver_bytes as f64 / 1024.0, "KB")
}

/// bulk: the byte count over the sender's time to the receiver's acknowledgement.
fn bulk_outcome(
    c: &Collected,
    server: &SideReport,
    bytes: u64,
    reverse: bool,
    warnings: &mut Vec<String>,
) -> Measured {
    // The sender's clock runs from its first write to the receiver's acknowledgement.
    let (sender, receiver_bytes) = if reverse {
        (
            server,
            // No flow record: nothing was received (the transfer failed before its
            // connection was counted), which the byte-count warning below says.
            c.client.flows.first().map_or(0, |f| f.bytes_rx),
        )
    } else {
        (&c.client, c.client.flows.first().map_or(0, |f| f.bytes_rx))
    };
    let elapsed = sender.flows.first().map(|f| f.active_s).unwrap_or(0.0);
    if receiver_bytes != bytes {
        warnings.push(format!(
            "receiver counted {receiver_bytes} of {bytes} bytes"
        ));
    }
    let o = BulkOutcome {
        direction: direction(reverse),
        bytes,
        receiver_bytes,
        elapsed_s: elapsed,
        mib_per_s: if elapsed > 0.0 {
            receiver_bytes as f64 / elapsed / (1 << 20) as f64
        } else {
            0.0
        },
        mbps: mbps(receiver_bytes, elapsed),
    };
    (Outcome::Bulk(o), receiver_bytes as f64 / 1024.0, "KB")
}

/// http: every download's size, status, time to first byte and duration.
fn http_outcome(c: &Collected, bytes: u64, warnings: &mut Vec<String>) -> Measured {
    let downloads: Vec<Download> = c
        .downloads
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let d = f.total.as_secs_f64();
            Download {
                index: i as u32 + 1,
                bytes: f.bytes,
                status: f.status,
                ttfb_s: f.ttfb.as_secs_f64(),
                duration_s: d,
                mb_per_s: if d > 0.0 {
                    f.bytes as f64 / d / 1e6
                } else {
                    0.0
                },
            }
        })
        .collect();
    for d in &downloads {
        if d.status != 200 {
            warnings.push(format!("download {} answered HTTP {}", d.index, d.status));
        }
        if c.server.is_some() && d.bytes != bytes {
            warnings.push(format!(
                "download {} received {} of {bytes} bytes",
                d.index, d.bytes
            ));
        }
    }
    let total_bytes: u64 = downloads.iter().map(|d| d.bytes).sum();
    let total_s: f64 = downloads.iter().map(|d| d.duration_s).sum();
    let o = HttpOutcome {
        url: c.url.clone(),
        mean_duration_s: if downloads.is_empty() {
            0.0
        } else {
            total_s / downloads.len() as f64
        },
        mb_per_s: if total_s > 0.0 {
            total_bytes as f64 / total_s / 1e6
        } else {
            0.0
        },
        downloads,
    };
    (Outcome::Http(o), total_bytes as f64 / 1024.0, "KB")
}

/// At or above this share of the CPU its threads could use, a side is called CPU-bound
/// (not 100: steal and interrupt time on a guest's CPUs is charged to no thread).
pub const CPU_BOUND_PCT: f64 = 90.0;

/// Worker threads per side: the multiplexing threads, else one per flow.
fn workers(c: &Collected) -> u32 {
    match (&c.plan.workload, c.plan.workload.multiplexed()) {
        (_, Some((_, t))) => t,
        (Workload::Rr { flows, .. } | Workload::Stream { flows, .. }, None) => *flows,
        _ => 1,
    }
}

/// A side's test threads' CPU time in percent of `workers` threads (at most one per CPU of
/// its machine) over its elapsed time.
fn threads_busy(r: &SideReport, workers: u32) -> Option<f64> {
    let cpus = r.cpu.ncpus.max(1).min(workers.max(1));
    let room = r.elapsed_s * f64::from(cpus);
    // The threads' CPU time runs to the end of their work, past the interval (closing
    // thousands of connections): capped, so it never reads as more than all of it.
    (room > 0.0).then(|| (100.0 * r.threads.total_s() / room).min(100.0))
}

/// A side waits by spinning or polling: its threads are busy by choice, which says nothing
/// of a CPU limit.
fn spins(c: &Collected) -> bool {
    match &c.plan.workload {
        Workload::Rr {
            client_wait,
            server_wait,
            ..
        }
        | Workload::Crr {
            client_wait,
            server_wait,
            ..
        } => !client_wait.is_block() || !server_wait.is_block(),
        _ => false,
    }
}

/// Both sides on one machine: whether their threads together kept the CPUs they could use
/// busy (each side alone may look idle while the other takes the rest).
fn machine_bound(c: &Collected, warnings: &mut Vec<String>) {
    let Some(s) = c.server.as_ref() else { return };
    let cpus = c.client.cpu.ncpus.max(1).min(2 * workers(c));
    let room = c.client.elapsed_s * f64::from(cpus);
    let used = c.client.threads.total_s() + s.threads.total_s();
    let pct = (100.0 * used / room).min(100.0);
    if room > 0.0 && pct >= CPU_BOUND_PCT {
        warnings.push(format!(
            "both sides share this machine and their test threads kept {pct:.0}% of its {cpus} CPU(s) busy: this result is the machine's CPU limit, not the network's"
        ));
    }
}

/// Each side's CPU: system-wide split, its own threads, service demand per unit, and the
/// other work on its machine (warned about above [`OTHER_LOAD_WARN_PCT`]).
fn cpu_accounting(
    c: &Collected,
    units: f64,
    unit: &str,
    warnings: &mut Vec<String>,
) -> CpuAccounting {
    let same_host = c
        .server_env
        .as_ref()
        .is_some_and(|s| !s.boot_id.is_empty() && s.boot_id == c.client_env.boot_id);
    // Other work on each machine: when both sides share one, both sides' threads are the
    // test's; the load average is read here, on the client's machine.
    let both = c.client.threads.total_s() + c.server.as_ref().map_or(0.0, |s| s.threads.total_s());
    let mut client = side_cpu(
        &c.client,
        units,
        if same_host {
            both
        } else {
            c.client.threads.total_s()
        },
    );
    client.loadavg_1m = virtperf_measure::loadavg_1m();
    client.threads_busy_pct = threads_busy(&c.client, workers(c));
    let server_cpu = c.server.as_ref().map(|s| {
        let mut sc = side_cpu(s, units, if same_host { both } else { s.threads.total_s() });
        sc.threads_busy_pct = threads_busy(s, workers(c));
        if same_host {
            // One machine: the same other work, measured over nearly the same interval.
            sc.loadavg_1m = client.loadavg_1m;
        }
        sc
    });
    for (side, sc) in [("client", Some(&client)), ("server", server_cpu.as_ref())] {
        let Some(sc) = sc else { continue };
        if let Some(busy) = sc
            .threads_busy_pct
            .filter(|b| *b >= CPU_BOUND_PCT && !spins(c))
        {
            warnings.push(format!(
                "the {side}'s test threads were busy {busy:.0}% of the CPU they could use: this result is the {side}'s CPU limit, not the network's"
            ));
        }
        if sc.other_cpu_pct > OTHER_LOAD_WARN_PCT && !(same_host && side == "server") {
            warnings.push(format!(
                "other work used {:.0}% of a CPU on the {side}'s machine during the test{}: expect noise",
                sc.other_cpu_pct,
                sc.loadavg_1m
                    .map(|l| format!(" (load average {l:.2})"))
                    .unwrap_or_default()
            ));
        }
    }
    if same_host && !spins(c) {
        machine_bound(c, warnings);
    }
    CpuAccounting {
        unit: unit.to_string(),
        same_host,
        client,
        server: server_cpu,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::time::Duration;

    use virtperf_wire::{EventCounts, FlowStats};

    use super::*;

    fn plan(client_cpu: Option<u32>) -> Plan {
        Plan {
            client_cpu,
            server_cpu: Some(1),
            ..Plan::new(Workload::rr(1, 1), Duration::from_secs(2))
        }
    }

    fn side(transactions: u64, active_s: f64, events: &[(&str, u64)], pinned: bool) -> SideReport {
        let counts: BTreeMap<String, u64> =
            events.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        SideReport {
            elapsed_s: active_s,
            transactions,
            flows: vec![FlowStats {
                active_s,
                transactions,
                ..Default::default()
            }],
            events: Some(EventCounts {
                pinned: pinned.then(|| counts.clone()),
                all: counts,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn collected(plan: &Plan, client: SideReport, server: SideReport) -> Collected<'_> {
        let mut h = latency::new_histogram();
        for ns in [10_000u64, 20_000, 30_000] {
            h.record(ns).expect("in range");
        }
        Collected {
            plan,
            target: "127.0.0.1:1".into(),
            client,
            client_hist: Some(h),
            server: Some(server),
            client_env: Env::default(),
            server_env: None,
            downloads: vec![],
            url: String::new(),
        }
    }

    #[test]
    fn rr_rate_latency_and_events_per_transaction() {
        let p = plan(Some(0));
        let ev = [("ipi_call", 2000), ("timer_irqs", 500)];
        let r = assemble(collected(
            &p,
            side(1000, 2.0, &ev, true),
            side(1000, 2.0, &ev, true),
        ));
        let Outcome::Rr(o) = &r.outcome else {
            panic!("rr gives an rr outcome: {:?}", r.outcome)
        };
        assert_eq!(o.transactions, 1000);
        assert!((o.rate_per_s - 500.0).abs() < 1e-9, "{}", o.rate_per_s);
        assert!((o.latency.p50_us - 20.0).abs() < 0.1, "{:?}", o.latency);
        let e = r.events.expect("events were counted");
        assert_eq!(e.unit, "transaction");
        assert!((e.client.per_unit["ipi_call"] - 2.0).abs() < 1e-9);
        let pinned = e.client.pinned.expect("the client was pinned");
        assert_eq!(pinned.cpu, 0);
        assert!((pinned.per_unit["timer_irqs"] - 0.5).abs() < 1e-9);
        assert!(
            e.client.per_unit.contains_key("thread_voluntary_switches"),
            "the side's own threads' switches are counted too"
        );
    }

    /// No transaction: nothing to divide by, so no per-transaction figure at all.
    #[test]
    fn zero_transactions_give_no_per_unit_numbers() {
        let p = plan(Some(0));
        let ev = [("ipi_call", 7)];
        let r = assemble(collected(
            &p,
            side(0, 2.0, &ev, true),
            side(0, 2.0, &ev, true),
        ));
        let e = r.events.expect("events were counted");
        assert!(e.client.per_unit.is_empty(), "{:?}", e.client.per_unit);
        assert_eq!(e.client.deltas["ipi_call"], 7, "the raw count stays");
        assert!(
            e.metrics().is_empty(),
            "no per-transaction metric: {:?}",
            e.metrics()
        );
    }

    /// A receiver that saw a number past the sender's last, or more datagrams than were
    /// sent: warned about, and the flow's loss recomputed from the sender's numbering.
    #[test]
    fn udp_counts_are_held_to_the_sender() {
        let tx = UdpCounts {
            datagrams_tx: 1000,
            highest_seq: 1000,
            ..Default::default()
        };
        let mut rx = vec![UdpCounts {
            datagrams_rx: 990,
            highest_seq: 1 << 40,
            lost: (1 << 40) - 990,
            implausible: 3,
            ..Default::default()
        }];
        let mut w = Vec::new();
        check_udp_flows(&mut rx, &[tx], &mut w);
        assert_eq!(rx[0].highest_seq, 1000);
        assert_eq!(rx[0].lost, 10);
        assert!(w.iter().any(|x| x.contains("3 datagrams carried")), "{w:?}");
        assert!(w.iter().any(|x| x.contains("numbered only 1000")), "{w:?}");
        let mut more = vec![UdpCounts {
            datagrams_rx: 1001,
            highest_seq: 1000,
            ..Default::default()
        }];
        let mut w = Vec::new();
        check_udp_flows(&mut more, &[tx], &mut w);
        assert!(w.iter().any(|x| x.contains("cannot both be true")), "{w:?}");
        let mut honest = vec![UdpCounts {
            datagrams_rx: 990,
            highest_seq: 1000,
            lost: 10,
            ..Default::default()
        }];
        let mut w = Vec::new();
        check_udp_flows(&mut honest, &[tx], &mut w);
        assert!(w.is_empty(), "{w:?}");
    }

    /// An unpinned side has no pinned block, whatever its machine counted.
    #[test]
    fn unpinned_side_has_no_pinned_events() {
        let p = plan(None);
        let ev = [("ipi_call", 10)];
        let r = assemble(collected(
            &p,
            side(10, 1.0, &ev, true),
            side(10, 1.0, &ev, true),
        ));
        let e = r.events.expect("events");
        assert!(e.client.pinned.is_none());
        assert!(
            e.server.and_then(|s| s.pinned).is_some(),
            "the server was pinned to 1"
        );
    }
}
