//! Human-readable output: compact tables. (Machine-readable output is the `TestResult`
//! serialized as JSON; see docs/json.md.)

use std::fmt::Write;

use virtperf_wire::{Env, Outcome, SideCpu, TestResult};

fn header(r: &TestResult, local: bool) -> String {
    let what = r.workload.describe();
    let mut s = format!("virtperf {}  {what}", r.workload.name());
    if r.duration_s > 0.0 {
        let _ = write!(s, "  {:.1} s", r.duration_s);
        if let Some(o) = r.omit_s {
            let _ = write!(s, " measured after {o:.1} s");
        }
    }
    let _ = write!(
        s,
        "  agent {}{}",
        r.target,
        if local { " (local)" } else { "" }
    );
    if let Some(p) = &r.placement {
        let _ = write!(s, "  placement {p}");
    }
    if r.client_cpu.is_some() || r.server_cpu.is_some() {
        let c = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "-".into());
        let _ = write!(s, "  cpus {},{}", c(r.client_cpu), c(r.server_cpu));
    }
    s.push('\n');
    if let Some(g) = &r.guest {
        let _ = writeln!(s, "  guest: {}", guest(g));
    }
    s
}

fn cpu_table(r: &TestResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  {:<7} {:>6} {:>6} {:>5} {:>6} {:>6} {:>6} {:>6} │ {:>8} {:>8} │ {:>10} {:>10}",
        "CPU %",
        "user",
        "sys",
        "irq",
        "soft",
        "steal",
        "guest",
        "busy",
        "own usr",
        "own sys",
        // Service demand: the side's own threads, and the whole machine's busy time.
        format!("own µs/{}", short_unit(&r.cpu.unit)),
        format!("all µs/{}", short_unit(&r.cpu.unit))
    );
    let row = |s: &mut String, name: &str, c: &SideCpu| {
        let x = &c.system;
        let _ = writeln!(
            s,
            "  {:<7} {:>6.1} {:>6.1} {:>5.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1} │ {:>7.2}s {:>7.2}s │ {:>10} {:>10}",
            name,
            x.user_pct,
            x.system_pct,
            x.irq_pct,
            x.softirq_pct,
            x.steal_pct,
            x.guest_pct,
            x.busy_pct,
            c.process_user_s,
            c.process_system_s,
            demand(c.service_demand_us),
            demand(c.system_service_demand_us)
        );
    };
    row(&mut s, "client", &r.cpu.client);
    if let Some(sv) = &r.cpu.server {
        row(&mut s, "server", sv);
    }
    if r.cpu.same_host {
        let _ = writeln!(
            s,
            "  (one kernel for both sides: the system-wide split is the same machine; the `own` columns are each side's own threads, `all µs/{}` the machine's busy time)",
            short_unit(&r.cpu.unit)
        );
    }
    s += &unsampled_note(r);
    s += &coarse_note(&r.cpu);
    s
}

/// Where the interval is short enough that one /proc/stat tick is a point or more of a
/// side's split (an 80 ms `http` download on 2 CPUs: 6 points), the line that says so,
/// so "user 15.0" is not read to a tenth; empty otherwise (a 1 s test on 2 CPUs: 0.5).
fn coarse_note(cpu: &virtperf_wire::CpuAccounting) -> String {
    let ticks = virtperf_measure::cpu::ticks_per_second();
    let point = |c: &SideCpu| {
        let (wall, n) = (c.system.wall_s, c.system.per_cpu_busy_pct.len().max(1));
        (wall > 0.0).then(|| (wall, 100.0 / (ticks * wall * n as f64)))
    };
    let sides = match &cpu.server {
        Some(sv) if !cpu.same_host => vec![("client", &cpu.client), ("server", sv)],
        _ => vec![("client", &cpu.client)],
    };
    let coarse: Vec<String> = sides
        .into_iter()
        .filter_map(|(name, c)| point(c).map(|(w, p)| (name, w, p)))
        .filter(|(_, _, p)| *p >= 1.0)
        .map(|(name, w, p)| format!("{name}: {:.0} ms, a tick {p:.1} points", w * 1000.0))
        .collect();
    if coarse.is_empty() {
        return String::new();
    }
    format!(
        "  the split covers a short interval ({}): /proc/stat counts each kind in whole ticks of {:.0} ms, so its columns are that coarse\n",
        coarse.join("; "),
        1000.0 / ticks
    )
}

/// The line under the CPU table where part of `busy` is time the kernel's tick never
/// charged to a kind, so the kind columns add up to less than `busy`; empty otherwise.
fn unsampled_note(r: &TestResult) -> String {
    let of = |c: &SideCpu| c.system.unsampled_pct;
    let named = match &r.cpu.server {
        // One kernel: one split, said once.
        Some(_) if r.cpu.same_host => vec![("the machine", of(&r.cpu.client))],
        Some(sv) => vec![("client", of(&r.cpu.client)), ("server", of(sv))],
        None => vec![("client", of(&r.cpu.client))],
    };
    let named: Vec<String> = named
        .into_iter()
        .filter(|(_, u)| *u >= 0.05)
        .map(|(n, u)| format!("{n} {u:.1}%"))
        .collect();
    if named.is_empty() {
        return String::new();
    }
    format!(
        "  `busy` includes CPU time no tick charged to a kind ({}): the kernel times idle exactly but samples busy time at its tick, which missed these busy periods, so the kind columns add up to less\n",
        named.join(", ")
    )
}

fn short_unit(u: &str) -> &str {
    if virtperf_wire::Unit::is_transactions(u) {
        "tr"
    } else {
        u
    }
}

/// Three significant digits: `71.2`, `130`, `9.41`.
fn sig3(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A service demand to three places, or "-" when there was no unit of work to divide by.
fn demand(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |v| format!("{v:.3}"))
}

/// A latency in µs, or ms from 1 ms on: `71.2 µs`, `1.25 ms`.
fn latency(us: f64) -> String {
    if us >= 1000.0 {
        format!("{} ms", sig3(us / 1000.0))
    } else {
        format!("{} µs", sig3(us))
    }
}

/// One interval of a time series as iperf3 prints it, for live output:
/// `[  1.0-  2.0 s]  9.41 Gbit/s` or `[  1.0-  2.0 s]  13542 tr/s  p50 71.2 µs  p99 130 µs`.
pub fn interval_line(i: &virtperf_wire::Interval) -> String {
    let mut s = format!("[{:5.1}-{:5.1} s]", i.t_s, i.t_s + i.duration_s);
    let bidir = i.mbps_client_to_server.zip(i.mbps_server_to_client);
    if let Some(mbps) = i.mbps {
        let (per, unit) = if mbps >= 1000.0 {
            (1000.0, "Gbit/s")
        } else if mbps >= 1.0 {
            (1.0, "Mbit/s")
        } else {
            (0.001, "Kbit/s")
        };
        let _ = write!(s, " {:>6} {unit}", sig3(mbps / per));
        // Each direction in the same unit; the TCP columns that follow are c→s's.
        if let Some((tx, rx)) = bidir {
            let _ = write!(s, "  (c→s {}, s→c {})", sig3(tx / per), sig3(rx / per));
        }
    }
    // iperf3's Retr and Cwnd columns: the interval's retransmits, the sending flows'
    // windows (their range when there are many).
    if let Some(r) = i.retransmits {
        let mut cwnd: Vec<u64> = i
            .flow_tcp
            .iter()
            .map(|t| u64::from(t.snd_cwnd) * u64::from(t.snd_mss) / 1024)
            .collect();
        cwnd.sort_unstable();
        let shown = match cwnd.as_slice() {
            [lo, .., hi] if cwnd.len() > 4 => format!("{lo}K–{hi}K ({} flows)", cwnd.len()),
            c => c
                .iter()
                .map(|k| format!("{k}K"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let dir = if bidir.is_some() { "  c→s" } else { "" };
        // Of them, the receivers' D-SACKed ones (late, not lost), where every flow said.
        let dup: Option<u64> = i.flow_tcp.iter().map(|t| t.dsack_dups_interval).sum();
        let retr = match dup {
            Some(d) if d > 0 => format!("{r:>4} ({d} dup)"),
            _ => format!("{r:>4}"),
        };
        let _ = write!(s, "{dir}  retr {retr}  cwnd {shown}");
    }
    if let Some(rate) = i.rate_per_s {
        let _ = write!(s, " {rate:>8.0} tr/s");
        match (i.p50_us, i.p99_us) {
            (Some(p50), Some(p99)) => {
                let _ = write!(s, "  p50 {}  p99 {}", latency(p50), latency(p99));
            }
            _ => s.push_str("  (no transaction completed)"),
        }
    }
    s
}

/// How evenly flows multiplexed on threads were served, and what setting them up took:
/// `1000 flows on 2 threads (agent: 1000) │ per flow trans/s min 94.8 p50 95.8 max 113,
/// Jain's fairness 0.993 │ set-up 0.060 s, outside the measured interval`.
fn spread_line(f: &virtperf_wire::FlowSpread, crr: bool) -> String {
    let agent = if crr {
        String::new()
    } else {
        format!(" (agent: {})", f.server_flows)
    };
    let setup = match (crr, f.setup_s) {
        (true, _) => "connects are the workload".to_string(),
        (false, Some(s)) => format!("set-up {s:.3} s, outside the measured interval"),
        (false, None) => "set-up not timed".to_string(),
    };
    format!(
        "  {} flows on {} thread{}{agent} │ per flow {} min {} p50 {} max {}, Jain's fairness {:.3} │ {setup}\n",
        f.flows,
        f.threads,
        if f.threads == 1 { "" } else { "s" },
        f.unit.replace("transactions", "trans"),
        sig3(f.min),
        sig3(f.p50),
        sig3(f.max),
        f.jain,
    )
}

/// Renders a test result.
pub fn result(r: &TestResult, local: bool) -> String {
    let mut s = header(r, local);
    match &r.outcome {
        Outcome::Rr(o) | Outcome::Crr(o) => {
            rr_lines(&mut s, o, matches!(r.outcome, Outcome::Crr(_)));
        }
        Outcome::Stream(o) => {
            stream_lines(&mut s, o);
        }
        Outcome::Bulk(o) => {
            let _ = writeln!(
                s,
                "  {:>16} {:>10} {:>10} {:>10}",
                "bytes received", "secs", "MiB/s", "Mbit/s"
            );
            let _ = writeln!(
                s,
                "  {:>16} {:>10.3} {:>10.1} {:>10.1}",
                o.receiver_bytes, o.elapsed_s, o.mib_per_s, o.mbps
            );
        }
        Outcome::Http(o) => {
            http_lines(&mut s, o);
        }
    }
    s.push_str(&cpu_table(r));
    s.push_str(&crate::render_events::events_lines(r));
    s.push_str(&crate::render_events::traced(r));
    if let Some(h) = &r.host_vm {
        s.push_str(&virtperf_report::host_vm::host_vm(h));
    }
    let load = r
        .cpu
        .client
        .loadavg_1m
        .map(|l| format!("; load average {l:.2} (runnable threads over the last minute, the test's own included)"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "  other work on the client's machine during the test: {:.1}% of a CPU (processes besides the test's){}{load}{}",
        r.cpu.client.other_cpu_pct,
        r.cpu
            .client
            .capture_cpu_pct
            .map(|p| format!("; --capture's tcpdump apart from it: {p:.1}%"))
            .unwrap_or_default(),
        if r.allow_concurrent {
            " (measured with --allow-concurrent)"
        } else {
            ""
        }
    );
    for w in &r.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}

/// rr and crr: rate, latency percentiles, flow spread, UDP losses.
fn rr_lines(s: &mut String, o: &virtperf_wire::RrOutcome, crr: bool) {
    let _ = writeln!(
        s,
        "  {:>12} {:>12} │ latency µs {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "trans/s", "transactions", "mean", "min", "p50", "p90", "p99", "p99.9", "max"
    );
    if let Some(l) = &o.latency {
        let _ = writeln!(
            s,
            "  {:>12.1} {:>12} │ {:>19.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>8.2} {:>9.2}",
            o.rate_per_s,
            o.transactions,
            l.mean_us,
            l.min_us,
            l.p50_us,
            l.p90_us,
            l.p99_us,
            l.p999_us,
            l.max_us
        );
    } else {
        let _ = writeln!(
            s,
            "  {:>12.1} {:>12} │ not measured: no transaction completed",
            o.rate_per_s, o.transactions
        );
    }
    if let Some(f) = &o.flow_spread {
        s.push_str(&spread_line(f, crr));
    }
    if let Some(u) = &o.udp {
        let _ = writeln!(
            s,
            "  UDP: {} lost ({:.3}% of transactions tried, each restarted after {} ms), {} late responses discarded",
            u.lost, u.lost_pct, u.timeout_ms, u.late
        );
    }
}

/// stream: per flow (when few), total, flow spread, UDP datagrams.
fn stream_lines(s: &mut String, o: &virtperf_wire::StreamOutcome) {
    let _ = writeln!(
        s,
        "  {:<6} {:>12} {:>16} {:>16} {:>9}",
        "flow", "Mbit/s", "receiver bytes", "sender bytes", "secs"
    );
    // Thousands of multiplexed flows: their spread below, each one in the JSON.
    if o.flows.len() > 1 && o.flow_spread.is_none() {
        for (i, f) in o.flows.iter().enumerate() {
            let _ = writeln!(
                s,
                "  {:<6} {:>12.2} {:>16} {:>16} {:>9.3}",
                i,
                f.mbps,
                f.receiver_bytes,
                f.sender_bytes
                    .map_or_else(|| "-".to_string(), |b| b.to_string()),
                f.active_s
            );
        }
    }
    let _ = writeln!(
        s,
        "  {:<6} {:>12.2} {:>16} {:>16} {:>9.3}",
        "total", o.mbps, o.receiver_bytes, o.sender_bytes, o.elapsed_s
    );
    if let Some(b) = &o.bidir {
        for (name, d) in [("c→s", &b.client_to_server), ("s→c", &b.server_to_client)] {
            let cpu = match (d.sender_cpu_s, d.receiver_cpu_s) {
                (Some(a), Some(b)) => format!("  CPU: sender {a:.2} s, receiver {b:.2} s"),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "  {:<6} {:>12.2} {:>16} {:>16} {:>9.3}{cpu}",
                name, d.mbps, d.receiver_bytes, d.sender_bytes, d.elapsed_s
            );
        }
    }
    if let Some(f) = &o.flow_spread {
        s.push_str(&spread_line(f, false));
    }
    tcp_lines(s, o);
    if let Some(u) = &o.udp {
        let onoff = |b: bool| if b { "on" } else { "off" };
        let _ = writeln!(
            s,
            "  UDP datagrams: {} sent, {} received, {} lost ({:.3}%), {} out of order, jitter {:.3} ms (iperf3's); GSO {}, GRO {}",
            u.datagrams_sent
                .map_or_else(|| "-".to_string(), |n| n.to_string()),
            u.datagrams_received,
            u.lost,
            u.lost_pct,
            u.out_of_order,
            u.jitter_ms,
            onoff(u.gso),
            onoff(u.gro)
        );
    }
}

/// The senders' TCP state per flow (as `ss -ti` shows it), when it was read.
fn tcp_lines(s: &mut String, o: &virtperf_wire::StreamOutcome) {
    let read: Vec<(usize, &virtperf_wire::TcpInfo)> = o
        .flows
        .iter()
        .enumerate()
        .filter_map(|(i, f)| f.tcp.as_ref().map(|t| (i, t)))
        .collect();
    if read.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  {:<6} {:>12} {:>10} {:>16} {:>22}",
        "TCP", "retransmits", "cwnd", "srtt ± rttvar µs", "rwnd/sndbuf-limited"
    );
    let pct = |part: Option<u64>, t: &virtperf_wire::TcpInfo| match (part, t.busy_us) {
        (Some(p), Some(b)) if b > 0 => format!("{:.0}%", 100.0 * p as f64 / b as f64),
        _ => "—".to_string(),
    };
    // Thousands of flows would drown the table: the first 16, the total below.
    for (i, t) in read.iter().take(16) {
        // "3 (2 dup)": of three retransmitted, two the receiver had already (D-SACK).
        let retransmits = match t.dsack_dups_interval {
            Some(d) if d > 0 => format!("{} ({d} dup)", t.retransmits_interval),
            _ => t.retransmits_interval.to_string(),
        };
        let _ = writeln!(
            s,
            "  {:<6} {:>12} {:>10} {:>16} {:>22}",
            i,
            retransmits,
            t.snd_cwnd,
            format!("{} ± {}", t.srtt_us, t.rttvar_us),
            format!(
                "{} / {}",
                pct(t.rwnd_limited_us, t),
                pct(t.sndbuf_limited_us, t)
            )
        );
    }
    if let Some(r) = o.retransmits {
        let _ = writeln!(
            s,
            "  retransmitted segments in the interval, all flows: {r}{}",
            spurious_words(r, o.spurious_retransmits)
        );
    }
}

/// What a stream's retransmissions were, where the receivers' D-SACKs tell: of `r`
/// retransmitted segments, the ones the receiver had already were reordered or resent too
/// early, not lost. On this project's loopback they are most of the retransmissions, also
/// with both sides pinned (bench/RESULTS.md): a loopback segment waits in the backlog of
/// the CPU that sent it, and TCP sends from the sender's calls and from the ACKs it
/// processes, on whichever CPU those arrive, so two backlogs can deliver out of order.
pub(crate) fn spurious_words(r: u64, spurious: Option<u64>) -> String {
    match spurious {
        Some(d) if r > 0 => format!(
            ", {d} of them spurious (the receiver had them already: D-SACK; reordered or resent too early, not lost)"
        ),
        None if r > 0 => ", how many were spurious is not measured (no D-SACK count from this kernel)".into(),
        _ => String::new(),
    }
}

/// http: one line per download and the mean.
fn http_lines(s: &mut String, o: &virtperf_wire::HttpOutcome) {
    let _ = writeln!(s, "  {}", o.url);
    let _ = writeln!(
        s,
        "  {:<4} {:>6} {:>14} {:>10} {:>10} {:>8}",
        "#", "status", "bytes", "ttfb ms", "secs", "MB/s"
    );
    for d in &o.downloads {
        let _ = writeln!(
            s,
            "  {:<4} {:>6} {:>14} {:>10.2} {:>10.3} {:>8.1}",
            d.index,
            d.status,
            d.bytes,
            d.ttfb_s * 1e3,
            d.duration_s,
            d.mb_per_s
        );
    }
    let _ = writeln!(
        s,
        "  mean {:.3} s per download, {:.1} MB/s overall",
        o.mean_duration_s, o.mb_per_s
    );
}

/// Renders an environment fingerprint.
pub fn env(e: &Env) -> String {
    let mut s = String::new();
    let mut kv = |k: &str, v: &str| {
        let _ = writeln!(s, "{k:<18} {v}");
    };
    kv("host", &e.hostname);
    kv("kernel", &format!("{} {}", e.kernel, e.arch));
    kv("cpu", &format!("{} × {}", e.cpus, e.cpu_model));
    if let Some(id) = &e.cpu_id {
        kv("cpu id", &id.text());
    }
    kv(
        "hypervisor",
        &match (&e.hypervisor, &e.hypervisor_sys, &e.dmi) {
            (None, None, None) => "none detected (bare metal?)".to_string(),
            (h, sys, dmi) => [h.as_deref(), sys.as_deref(), dmi.as_deref()]
                .iter()
                .flatten()
                .copied()
                .collect::<Vec<_>>()
                .join(", "),
        },
    );
    kv(
        "/dev/kvm",
        &if e.kvm_available {
            format!("yes ({})", e.kvm_platform.as_deref().unwrap_or("unknown"))
        } else {
            "no".into()
        },
    );
    kv(
        "clock",
        &format!("{} ({:.1} ns per read)", e.clocksource, e.clock_read_ns),
    );
    kv("tick", &e.nohz);
    kv(
        "cpuidle",
        &format!(
            "driver {}, governor {}",
            e.cpuidle_driver.as_deref().unwrap_or("none"),
            e.cpuidle_governor.as_deref().unwrap_or("none")
        ),
    );
    if let Some(g) = &e.cpufreq_governor {
        kv("cpufreq", g);
    }
    for (k, v) in &e.halt_poll {
        kv(k, v);
    }
    for (k, v) in &e.sysctls {
        kv(k, v);
    }
    for n in &e.virtio_net {
        let ring = |r: Option<u32>| r.map_or("?".to_string(), |r| r.to_string());
        kv(
            &format!("virtio-net {}", n.interface),
            &format!(
                "{}: rings rx {} / tx {}, {} queue pair(s); features {}",
                n.device,
                ring(n.rx_ring),
                ring(n.tx_ring),
                ring(n.queue_pairs),
                n.feature_names.join(",")
            ),
        );
    }
    for (k, v) in &e.module_params {
        kv(k, v);
    }
    kv("version", &e.tool_version);
    let _ = writeln!(s, "\nidle path: {}", e.idle_explained);
    s
}

/// One line describing the guest(s) a result's ends ran in.
pub fn guest(g: &virtperf_wire::GuestInfo) -> String {
    let pinned = if g.vcpu_cpus.is_empty() {
        String::new()
    } else {
        format!(" on CPUs {:?}", g.vcpu_cpus)
    };
    let qemu = if g.qemu_cpu_s.is_empty() {
        String::new()
    } else {
        let each: Vec<String> = g.qemu_cpu_s.iter().map(|s| format!("{s:.2}")).collect();
        // The whole test, set-up included: not the measured window the host view below
        // is read over, so the two are not one figure.
        format!(
            "; QEMU used {} s of host CPU over the whole test",
            each.join(" + ")
        )
    };
    let mut extra = String::new();
    if !g.virtio.is_empty() {
        let opts: Vec<String> = g.virtio.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = write!(extra, "; virtio-net {}", opts.join(","));
    }
    if let Some(c) = &g.cmdline {
        let _ = write!(extra, "; kernel args \"{c}\"");
    }
    if !g.modules.is_empty() {
        let m: Vec<String> = g.modules.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = write!(extra, "; {}", m.join(","));
    }
    format!(
        "{}{}, kernel {}, {} vCPU{pinned}, {} MiB, {}{extra}{qemu}",
        g.accel,
        if g.emulated { " (EMULATED)" } else { "" },
        g.kernel,
        g.vcpus,
        g.mem_mib,
        match (g.net.as_str(), g.vhost) {
            ("user", _) => "user networking (SLIRP)",
            ("passt", _) => "passt",
            (_, true) => "tap, vhost on",
            _ => "tap, vhost off",
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An interval's live line gives iperf3's Retr with its D-SACKed share beside it.
    #[test]
    fn an_interval_line_names_the_dsacked_retransmissions() {
        let tcp = |retr: u64, dup: Option<u64>| virtperf_wire::TcpInfo {
            retransmits_interval: retr,
            dsack_dups_interval: dup,
            snd_cwnd: 10,
            snd_mss: 1024,
            ..Default::default()
        };
        let mut i = virtperf_wire::Interval {
            mbps: Some(100.0),
            retransmits: Some(3),
            flow_tcp: vec![tcp(2, Some(1)), tcp(1, Some(1))],
            ..Default::default()
        };
        let line = interval_line(&i);
        assert!(line.contains("retr    3 (2 dup)  cwnd 10K 10K"), "{line}");
        // One flow without the count: no share claimed.
        i.flow_tcp[1].dsack_dups_interval = None;
        let line = interval_line(&i);
        assert!(
            line.contains("retr    3  cwnd") && !line.contains("dup"),
            "{line}"
        );
    }

    /// Retransmissions are told apart where D-SACK counted the spurious ones, said not
    /// measured where the kernel gave no count, and nothing is added where none happened.
    #[test]
    fn spurious_retransmits_are_named_or_said_unmeasured() {
        assert!(spurious_words(3, Some(2)).starts_with(", 2 of them spurious"));
        assert!(spurious_words(3, None).contains("not measured"));
        assert_eq!(spurious_words(0, Some(0)), "");
        assert_eq!(spurious_words(0, None), "");
    }

    /// A split over 80 ms of 2 CPUs is 6.2 points a tick and said so; over 1 s it is 0.5
    /// and not; an old result without the interval's length claims nothing.
    #[test]
    fn a_short_intervals_split_is_called_coarse() {
        let over = |wall_s: f64| {
            let mut cpu = virtperf_wire::CpuAccounting::default();
            cpu.client.system.wall_s = wall_s;
            cpu.client.system.per_cpu_busy_pct = vec![50.0, 50.0];
            coarse_note(&cpu)
        };
        let ticks = virtperf_measure::cpu::ticks_per_second();
        let note = over(0.08);
        if ticks == 100.0 {
            assert!(note.contains("client: 80 ms, a tick 6.2 points"), "{note}");
        }
        assert!(!note.is_empty());
        assert_eq!(over(1.0), "");
        assert_eq!(over(0.0), "");
    }
}
