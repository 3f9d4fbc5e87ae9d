//! The outcome shapes a workload's counts become (rr and crr share one; UDP rr and stream
//! have their own parts inside), chosen by each workload's role ([`crate::roles`]).

use virtperf_load::http::Fetched;
use virtperf_measure::{latency, LatencyHistogram};
use virtperf_wire::Env;
use virtperf_wire::{
    Bidir, BulkOutcome, DirectionTotals, Download, FlowSpread, HttpOutcome, Outcome, Protocol,
    RrOutcome, RrParams, SideReport, StreamFlow, StreamOutcome, StreamParams, TcpInfo, UdpCounts,
    UdpRr, UdpStream, Workload,
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

/// What each side counted around a window that completed nothing: the warm-up's
/// transactions on the same connection (whether it ever carried one: a connection that
/// never worked, or one that stopped), the server's in its own window, and how long the
/// client's threads ran and waited for a CPU (threads that did neither slept: on data
/// that did not come; a long wait is a CPU taken by other work).
fn stall_counts(c: &Collected, server: &SideReport) -> String {
    let warm = warmup_sum(&c.client, |w| w.transactions)
        .map_or_else(|| "none run".to_string(), |n| format!("{n} transactions"));
    let t = &c.client.threads;
    let waited = t.run_delay_s.map_or_else(
        || ", their wait for a CPU not measured (no schedstat)".to_string(),
        |d| format!(" and waited {:.1} ms for a CPU", d * 1e3),
    );
    format!(
        " (warm-up: {warm}; the server answered {} in its window; the client's threads ran {:.1} ms{waited})",
        server.transactions,
        t.total_s() * 1e3
    )
}

/// rr and crr: transactions counted and timed by the client, latency from its histogram.
/// What a round trip that completed nothing in its window shows of why: TCP segments its
/// connection retransmitted (either side's view; a lost 1-byte segment waits out the
/// retransmission timeout, 200 ms at the least), or nothing where none were.
fn stall_cause(c: &Collected, server: &SideReport) -> String {
    let sum = |flows: &[virtperf_wire::FlowStats], part: fn(&TcpInfo) -> u64| {
        flows
            .iter()
            .filter_map(|f| f.tcp.as_ref())
            .map(part)
            .sum::<u64>()
    };
    let side = |flows: &[virtperf_wire::FlowStats]| sum(flows, |t| t.retransmits);
    let (client, server_n) = (side(&c.client.flows), side(&server.flows));
    if client + server_n == 0 {
        return String::new();
    }
    // Retransmissions the peer reported it had already: the first copy was late, not lost
    // (it waited somewhere: a queue, a CPU that did not run).
    let dup =
        |flows: &[virtperf_wire::FlowStats]| sum(flows, |t| t.dsack_dups_interval.unwrap_or(0));
    let dups = dup(&c.client.flows) + dup(&server.flows);
    let late = if dups > 0 {
        format!("; {dups} of them D-SACKed in the window: delayed, not lost")
    } else {
        String::new()
    };
    format!(
        " ({client} segments retransmitted by the client, {server_n} by the server: a lost segment waits out TCP's retransmission timeout, 200 ms or more{late})"
    )
}

pub(crate) fn rr_outcome(
    c: &Collected,
    server: &SideReport,
    warnings: &mut Vec<String>,
) -> RrOutcome {
    let n = c.client.transactions;
    // With several flows, the test lasted as long as its longest flow.
    let elapsed = c
        .client
        .flows
        .iter()
        .map(|f| f.active_s)
        .fold(0.0, f64::max);
    let (lat, hist) = match &c.client_hist {
        Some(h) if !h.is_empty() => (Some(latency::summarize(h)), latency::encode(h)),
        _ => (None, String::new()),
    };
    if n == 0 {
        warnings.push(format!(
            "no transaction completed in the measured window: latency and service demand not measured{}{}",
            stall_counts(c, server),
            stall_cause(c, server)
        ));
    } else if n < 1000 {
        warnings.push(format!(
            "only {n} transactions: tail percentiles (p99.9) are not meaningful; run longer"
        ));
    }
    let o = RrOutcome {
        transactions: n,
        server_transactions: server.transactions,
        warmup_transactions: warmup_sum(&c.client, |w| w.transactions),
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
                server_flows: if matches!(c.plan.workload, Workload::Rr(_)) {
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
        tcp: c.client.flows.first().and_then(|f| f.tcp),
    };
    if let Workload::Rr(RrParams {
        rate_per_s: Some(want),
        ..
    }) = c.plan.workload
    {
        // An open loop's achieved rate is the schedule's unless a side could not keep up.
        if o.rate_per_s < 0.98 * f64::from(want) {
            warnings.push(format!(
                "asked for {want} requests/s, achieved {:.0}/s: the target was missed (latency is still measured from each request's intended send time)",
                o.rate_per_s
            ));
        }
    }
    o
}

/// A side's flows' warm-up counts (`--omit`) summed by `part`; None when no flow had one.
fn warmup_sum(side: &SideReport, part: impl Fn(&virtperf_wire::Warmup) -> u64) -> Option<u64> {
    let w: Vec<_> = side
        .flows
        .iter()
        .filter_map(|f| f.warmup.as_ref())
        .collect();
    (!w.is_empty()).then(|| w.into_iter().map(part).sum())
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
    let Workload::Rr(RrParams {
        loss_timeout_ms, ..
    }) = c.plan.workload
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
/// One UDP flow's accounting; `tx` is None where the sender reported no such flow.
fn udp_flow(rx: &UdpCounts, tx: Option<&UdpCounts>) -> UdpStream {
    UdpStream {
        datagrams_sent: tx.map(|t| t.datagrams_tx),
        datagrams_received: rx.datagrams_rx,
        lost: rx.lost,
        lost_pct: pct(rx.lost, rx.highest_seq),
        out_of_order: rx.out_of_order,
        jitter_ms: rx.jitter_ms,
        gso: tx.is_some_and(|t| t.gso),
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
        datagrams_sent: Some(txs.iter().map(|u| u.datagrams_tx).sum()),
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
    if let Workload::Stream(StreamParams { gso, gro, .. }) = c.plan.workload {
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
pub(super) fn check_udp_flows(
    rxs: &mut [UdpCounts],
    txs: &[UdpCounts],
    warnings: &mut Vec<String>,
) {
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
pub(crate) fn stream_outcome(
    c: &Collected,
    server: &SideReport,
    reverse: bool,
    warnings: &mut Vec<String>,
) -> Outcome {
    let (rx, tx) = if reverse {
        (&c.client, server)
    } else {
        (server, &c.client)
    };
    if tx.flows.len() != rx.flows.len() && c.server.is_some() {
        warnings.push(format!(
            "the sender reported {} flows and the receiver {}: the flows it did not report have no sender bytes",
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
            sender_bytes: tx.flows.get(i).map(|t| t.bytes_tx),
            active_s: f.active_s,
            udp: f
                .udp
                .map(|r| udp_flow(&r, tx.flows.get(i).and_then(|t| t.udp).as_ref())),
            tcp: tx.flows.get(i).and_then(|t| t.tcp),
            direction: None,
            sender_calls: tx.flows.get(i).and_then(|t| t.calls),
            receiver_calls: f.calls,
            receiver_segs: f.tcp.and_then(|t| t.data_segs_in),
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
    let windowed =
        c.plan.workload.multiplexed().is_some() && !c.plan.workload.one_connection_per_thread();
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
    } else if c.server.is_some() && udp.is_none() {
        // Over the whole run: each side's warm-up (`--omit`) ended at its own moment.
        let whole_rx = receiver_bytes + warmup_sum(rx, |w| w.bytes_rx).unwrap_or(0);
        let whole_tx = sender_bytes + warmup_sum(tx, |w| w.bytes_tx).unwrap_or(0);
        if whole_rx != whole_tx {
            warnings.push(format!(
                "receiver counted {whole_rx} bytes but sender sent {whole_tx}: a connection ended early"
            ));
        }
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
    zerocopy_warning(tx, warnings);
    Outcome::Stream(StreamOutcome {
        direction: direction(reverse),
        mbps: mbps(receiver_bytes, elapsed),
        receiver_bytes,
        sender_bytes,
        elapsed_s: elapsed,
        flows,
        flow_spread,
        udp,
        retransmits: retransmits(tx),
        spurious_retransmits: spurious_retransmits(tx),
        bidir: None,
        zerocopy: tx.zerocopy,
    })
}

/// bulk: the byte count over the sender's time to the receiver's acknowledgement.
pub(crate) fn bulk_outcome(
    c: &Collected,
    server: &SideReport,
    bytes: u64,
    reverse: bool,
    warnings: &mut Vec<String>,
) -> Outcome {
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
    // The sender's one flow times the transfer. Without it (an agent's report that lacks
    // it) the time was not measured: 0 here, and `assemble` refuses such a result rather
    // than store 0 s as the fastest transfer.
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
        tcp: sender.flows.first().and_then(|f| f.tcp),
    };
    Outcome::Bulk(o)
}

/// http: every download's size, status, time to first byte and duration.
pub(crate) fn http_outcome(c: &Collected, bytes: u64, warnings: &mut Vec<String>) -> Outcome {
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
    Outcome::Http(o)
}

/// TCP segments the sender's flows retransmitted in the interval; `None` unless every
/// flow's TCP state was read (a partial sum would read as a total).
fn retransmits(tx: &SideReport) -> Option<u64> {
    flows_sum(tx, |t| Some(t.retransmits_interval))
}

/// Of the retransmitted segments, those the receivers reported as duplicates (D-SACK);
/// `None` unless every flow's count was read.
fn spurious_retransmits(tx: &SideReport) -> Option<u64> {
    flows_sum(tx, |t| t.dsack_dups_interval)
}

/// A sum over the sender's flows' TCP state; `None` unless every flow gave its part.
fn flows_sum(tx: &SideReport, part: impl Fn(&TcpInfo) -> Option<u64>) -> Option<u64> {
    if tx.flows.is_empty() {
        return None;
    }
    tx.flows
        .iter()
        .map(|f| f.tcp.as_ref().and_then(&part))
        .sum()
}

/// A warning when the kernel copied `MSG_ZEROCOPY` sends after all.
fn zerocopy_warning(tx: &SideReport, warnings: &mut Vec<String>) {
    if let Some(z) = tx.zerocopy.filter(|z| z.copied > 0) {
        warnings.push(format!(
            "the kernel copied {} of {} MSG_ZEROCOPY sends (a loopback, or a device without scatter-gather): no copy was avoided, so what this rate gains or loses against plain sends is not from copying less",
            z.copied, z.completed
        ));
    }
}

/// `--bidir` stream: the client's even connections sent and the agent's odd ones (each flow
/// is a pair), so each direction is a stream outcome of its own connections; the totals
/// are their sums, each direction apart in `bidir`, each flow tagged with its direction.
pub(crate) fn bidir_outcome(
    c: &Collected,
    server: &SideReport,
    warnings: &mut Vec<String>,
) -> Outcome {
    let pick = |r: &SideReport, odd: bool| SideReport {
        flows: r
            .flows
            .iter()
            .enumerate()
            .filter(|(i, _)| (i % 2 == 1) == odd)
            .map(|(_, f)| *f)
            .collect(),
        ..r.clone()
    };
    let half = |odd: bool| Collected {
        plan: c.plan,
        target: c.target.clone(),
        client: pick(&c.client, odd),
        client_hist: None,
        server: c.server.as_ref().map(|s| pick(s, odd)),
        client_env: c.client_env.clone(),
        server_env: c.server_env.clone(),
        downloads: Vec::new(),
        url: c.url.clone(),
    };
    let (fwd_c, rev_c) = (half(false), half(true));
    let (fwd_s, rev_s) = (pick(server, false), pick(server, true));
    let Outcome::Stream(f) = stream_outcome(&fwd_c, &fwd_s, false, warnings) else {
        return stream_outcome(c, server, false, warnings);
    };
    let Outcome::Stream(r) = stream_outcome(&rev_c, &rev_s, true, warnings) else {
        return stream_outcome(c, server, false, warnings);
    };
    // A direction's threads: its senders on one side, its receivers on the other.
    let cpu = |r: &SideReport| -> Option<f64> {
        r.flows.iter().map(|f| f.thread_cpu_s).sum::<Option<f64>>()
    };
    let totals = |o: &StreamOutcome, snd: &SideReport, rcv: &SideReport| DirectionTotals {
        mbps: o.mbps,
        receiver_bytes: o.receiver_bytes,
        sender_bytes: o.sender_bytes,
        elapsed_s: o.elapsed_s,
        retransmits: o.retransmits,
        sender_cpu_s: cpu(snd),
        receiver_cpu_s: cpu(rcv),
    };
    let tag = |o: &StreamOutcome| {
        let d = o.direction.clone();
        o.flows.clone().into_iter().map(move |mut fl| {
            fl.direction = Some(d.clone());
            fl
        })
    };
    let flows: Vec<StreamFlow> = tag(&f).zip(tag(&r)).flat_map(|(a, b)| [a, b]).collect();
    let receiver_bytes = f.receiver_bytes + r.receiver_bytes;
    let o = StreamOutcome {
        direction: "bidirectional".into(),
        mbps: f.mbps + r.mbps,
        receiver_bytes,
        sender_bytes: f.sender_bytes + r.sender_bytes,
        elapsed_s: f.elapsed_s.max(r.elapsed_s),
        flows,
        flow_spread: None,
        udp: None,
        retransmits: f.retransmits.zip(r.retransmits).map(|(a, b)| a + b),
        spurious_retransmits: f
            .spurious_retransmits
            .zip(r.spurious_retransmits)
            .map(|(a, b)| a + b),
        bidir: Some(Bidir {
            client_to_server: totals(&f, &fwd_c.client, &fwd_s),
            server_to_client: totals(&r, &rev_s, &rev_c.client),
        }),
        zerocopy: match (f.zerocopy, r.zerocopy) {
            (None, None) => None,
            // A direction without zero-copy senders sent nothing by MSG_ZEROCOPY: its 0 is
            // a true count.
            (a, b) => {
                let mut z = a.unwrap_or_default();
                z.add(b.unwrap_or_default());
                Some(z)
            }
        },
    };
    Outcome::Stream(o)
}
