//! Turns both sides' raw measurements into one [`TestResult`]: rates, throughput, latency
//! summary, CPU split and service demand per side. Which outcome a workload's counts become
//! is its role's choice (`Role::outcome`); the shapes are in [`outcome`].

use virtperf_measure::split;
use virtperf_wire::{
    CpuAccounting, Envs, Events, NicEvents, PinnedEvents, SideCpu, SideEvents, SideReport,
    SockApplied, TestResult, Unit, RESULT_SCHEMA,
};

pub(crate) mod outcome;
mod own_vm;

pub use outcome::Collected;
pub use own_vm::attach_vm;

/// Above this much CPU used by other work (percent of one CPU) a result carries a warning.
pub const OTHER_LOAD_WARN_PCT: f64 = 10.0;

/// The warning for other work on `side`'s machine (`pct` of a CPU, above
/// [`OTHER_LOAD_WARN_PCT`]).
pub(crate) fn other_work_warning(side: &str, pct: f64, loadavg_1m: Option<f64>) -> String {
    format!(
        "other work used {pct:.0}% of a CPU on the {side}'s machine during the test{}: expect noise",
        loadavg_1m
            .map(|l| format!(" (load average {l:.2})"))
            .unwrap_or_default()
    )
}

/// `test_threads_s`: CPU seconds of every test thread on that side's machine.
fn side_cpu(r: &SideReport, units: f64, test_threads_s: f64) -> SideCpu {
    // No unit of work: no demand per unit (not 0 µs per unit).
    let per = |secs: f64| (units > 0.0).then(|| secs * 1e6 / units);
    let t = &r.cpu.total;
    // Every other process's whole CPU, where the side counted it, less the far side's
    // threads where both share this machine (its process is among the others); else
    // /proc/stat's user and system time less the test's threads, which misses what no
    // tick sampled.
    let other_s = match r.others_cpu_s {
        Some(others) => others - (test_threads_s - window_threads_s(r)),
        None => t.host_user() + t.system - test_threads_s,
    }
    .max(0.0);
    let wall = if r.elapsed_s > 0.0 {
        r.elapsed_s
    } else {
        r.cpu.wall_s
    };
    SideCpu {
        system: split(&r.cpu),
        process_user_s: r.threads.user_s,
        process_system_s: r.threads.system_s,
        // Over the measured interval where the side could read its workers' clocks there,
        // else (older agents, untimed workloads) over the workers' whole run.
        service_demand_us: per(window_threads_s(r)),
        system_service_demand_us: per(r.cpu.total.busy()),
        other_cpu_pct: if wall > 0.0 {
            100.0 * other_s / wall
        } else {
            0.0
        },
        loadavg_1m: None,
        threads_busy_pct: None,
        capture_cpu_pct: r
            .capture_cpu_s
            .filter(|_| wall > 0.0)
            .map(|s| 100.0 * s / wall),
    }
}

/// Events per unit of work for both sides: per transaction, or per MB where the unit is KB.
fn events_of(c: &Collected, unit: Unit, work: f64) -> Option<Events> {
    let divisor = unit.in_events_units(work);
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
            virtperf_wire::counter::THREAD_VOLUNTARY_SWITCHES.into(),
            r.threads.voluntary_switches,
        );
        deltas.insert(
            virtperf_wire::counter::THREAD_INVOLUNTARY_SWITCHES.into(),
            r.threads.involuntary_switches,
        );
        if let Some(d) = r.threads.run_delay_s {
            deltas.insert(
                virtperf_wire::counter::THREAD_RUN_DELAY_US.into(),
                (d * 1e6).round() as u64,
            );
        }
        if let Some(m) = r.threads.migrations {
            deltas.insert(virtperf_wire::counter::THREAD_MIGRATIONS.into(), m);
        }
        let pinned = cpu.zip(e.pinned.as_ref()).map(|(cpu, d)| PinnedEvents {
            cpu,
            per_unit: per(d),
            deltas: d.clone(),
        });
        let nic = e.nic.as_ref().map(|n| {
            // Unread counts stay unread: a ratio needs both of its terms.
            let ratio = |a: Option<u64>, b: Option<u64>| {
                let (a, b) = (a?, b?);
                (b > 0).then(|| a as f64 / b as f64)
            };
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
        unit: unit.events_name().to_string(),
        client: side(&c.client, c.plan.client_cpu)?,
        server: c.server.as_ref().and_then(|s| side(s, c.plan.server_cpu)),
    })
}

/// Builds the result.
pub fn assemble(c: Collected) -> anyhow::Result<TestResult> {
    let empty = SideReport::default();
    let server = c.server.as_ref().unwrap_or(&empty);
    let mut warnings = Vec::new();
    let outcome = crate::roles::outcome(&c, server, &mut warnings);
    let (unit, work) = outcome.work();
    if let virtperf_wire::Outcome::Bulk(b) = &outcome {
        // A transfer takes time: 0 s is one its sender never reported.
        if b.elapsed_s <= 0.0 {
            anyhow::bail!("the bulk transfer's sender reported no flow: its time was not measured");
        }
    }
    if let virtperf_wire::Outcome::Http(h) = &outcome {
        // Only a signal ends a series before its first download: a mean of none is no 0 s.
        if h.downloads.is_empty() {
            anyhow::bail!("no download completed before the stop: nothing was measured");
        }
    }
    let steal = split(&c.client.cpu).steal_pct;
    if steal > 5.0 {
        warnings.push(format!(
            "{steal:.1}% of CPU time was stolen by the hypervisor during the run: expect noise"
        ));
    }
    let cpu = cpu_accounting(&c, unit, work, &mut warnings);
    let events = events_of(&c, unit, work);
    backlog_drops(events.as_ref(), cpu.same_host, &mut warnings);
    let sock_applied = sock_applied(&c, &mut warnings);
    Ok(TestResult {
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
        sock_applied,
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
        load: None,
        host_vm: None,
        omit_s: c.plan.omit.map(|o| o.as_secs_f64()),
        host_cpu: None,
        link_rate_bps: None,
    })
}

/// Packets a side's machine dropped from its network input backlog over the interval: on
/// loopback or veth each is a lost segment, which TCP recovers by retransmitting (a lone
/// one, as in a round trip, after 200 ms or more): a stall a figure should not hide. The
/// count is the machine's (every namespace's traffic), once where both sides share it.
fn backlog_drops(events: Option<&Events>, same_host: bool, warnings: &mut Vec<String>) {
    let Some(e) = events else { return };
    let server = e.server.as_ref().filter(|_| !same_host);
    for (side, s) in std::iter::once(("client", &e.client)).chain(server.map(|s| ("server", s))) {
        if let Some(n) = s
            .deltas
            .get(virtperf_wire::counter::BACKLOG_DROPS)
            .filter(|n| **n > 0)
        {
            warnings.push(format!(
                "the {side}'s machine dropped {n} packet(s) from its network input backlog during the test (/proc/net/softnet_stat; net.core.netdev_max_backlog): each is a lost segment TCP retransmits, a lone one after 200 ms or more: expect stalls"
            ));
        }
    }
}

/// At or above this share of the CPU its threads could use, a side is called CPU-bound
/// (not 100: steal and interrupt time on a guest's CPUs is charged to no thread).
pub const CPU_BOUND_PCT: f64 = 90.0;

/// Worker threads per side: the multiplexing threads, else one per flow.
fn workers(c: &Collected) -> u32 {
    c.plan.workload.kind().workers()
}

/// A side's test threads' CPU time in percent of `workers` threads (at most one per CPU of
/// its machine) over its elapsed time.
fn threads_busy(r: &SideReport, workers: u32) -> Option<f64> {
    let cpus = r.cpu.ncpus.max(1).min(workers.max(1));
    let room = r.elapsed_s * f64::from(cpus);
    // The threads' CPU time runs to the end of their work, past the interval (closing
    // thousands of connections): capped, so it never reads as more than all of it.
    (room > 0.0).then(|| (100.0 * window_threads_s(r) / room).min(100.0))
}

/// A side's test threads' CPU seconds over the measured interval where it read them there,
/// else over their whole run: a warm-up (`--omit`) or a drain is not the interval's.
fn window_threads_s(r: &SideReport) -> f64 {
    r.window_cpu_s.unwrap_or_else(|| r.threads.total_s())
}

/// A side waits by spinning or polling: its threads are busy by choice, which says nothing
/// of a CPU limit.
fn spins(c: &Collected) -> bool {
    c.plan.workload.kind().spins()
}

/// Both sides on one machine: whether their threads together kept the CPUs they could use
/// busy (each side alone may look idle while the other takes the rest).
fn machine_bound(c: &Collected, warnings: &mut Vec<String>) {
    let Some(s) = c.server.as_ref() else { return };
    let cpus = c.client.cpu.ncpus.max(1).min(2 * workers(c));
    let room = c.client.elapsed_s * f64::from(cpus);
    let used = window_threads_s(&c.client) + window_threads_s(s);
    let pct = (100.0 * used / room).min(100.0);
    if room > 0.0 && pct >= CPU_BOUND_PCT {
        warnings.push(format!(
            "both sides share this machine and their test threads kept {pct:.0}% of its {cpus} CPU(s) busy: this result is the machine's CPU limit, not the network's"
        ));
    }
}

/// An unpinned round trip's threads the scheduler moved between CPUs inside the measured
/// interval: its transactions ran on more than one placement (both ends on one CPU, or
/// one each), whose round trips can differ tenfold (a 2-vCPU Intel PVM guest: 130 000
/// against 10 000 a second; unpinned, the first quarter second ran at the first rate and
/// the rest at the second), so its figures mix them. One flow only: many flows' threads
/// share the CPUs by design.
fn moved(c: &Collected, warnings: &mut Vec<String>) {
    let k = c.plan.workload.kind();
    if k.unit() != virtperf_wire::Unit::Transactions || k.connections() != 1 {
        return;
    }
    let sides = [
        ("client", Some(&c.client), c.plan.client_cpu),
        ("server", c.server.as_ref(), c.plan.server_cpu),
    ];
    let moves: Vec<String> = sides
        .into_iter()
        .filter(|(_, _, pinned)| pinned.is_none())
        .filter_map(|(side, r, _)| Some((side, r?.threads.migrations?)))
        .filter(|(_, n)| *n > 0)
        .map(|(side, n)| format!("{side} {n}"))
        .collect();
    // Both ends on one machine: the move changes whether they share a CPU (measured
    // tenfold apart); on two machines it only says the side ran from more than one CPU.
    let placements = if same_host(c) {
        "on more than one placement (one CPU for both ends, or one each)"
    } else {
        "from more than one CPU of the moved side's machine"
    };
    if !moves.is_empty() {
        warnings.push(format!(
            "the scheduler moved the unpinned threads between CPUs inside the measured interval (moves: {}): its round trips ran {placements}, and its figures mix them; pin both ends (--cpus CLIENT,SERVER) for one",
            moves.join(", ")
        ));
    }
}

/// What the kernel applied on each side, with a warning where it is not what was asked:
/// a buffer below twice the request (the kernel doubles it, then clamps it to
/// net.core.[rw]mem_max), another congestion control, a larger MSS.
fn sock_applied(c: &Collected, warnings: &mut Vec<String>) -> Option<SockApplied> {
    let client = c.client.sock.clone();
    let server = c.server.as_ref().and_then(|s| s.sock.clone());
    if client.is_none() && server.is_none() {
        return None;
    }
    let want = &c.plan.sock;
    for (side, a) in [("client", &client), ("server", &server)] {
        let Some(a) = a else { continue };
        for (what, asked, got, max) in [
            ("SO_SNDBUF", want.sndbuf, a.sndbuf, "net.core.wmem_max"),
            ("SO_RCVBUF", want.rcvbuf, a.rcvbuf, "net.core.rmem_max"),
        ] {
            if let Some(asked) = asked.filter(|x| u64::from(got) < 2 * u64::from(*x)) {
                warnings.push(format!(
                    "the {side}'s {what}: {asked} bytes asked, the kernel holds {got} (it doubles a request, then clamps it to {max}): raise {max} for more"
                ));
            }
        }
        if let (Some(cc), Some(got)) = (want.congestion, &a.congestion) {
            if got != cc.as_str() {
                warnings.push(format!(
                    "the {side}'s congestion control is {got} although {cc} was asked"
                ));
            }
        }
        if let (Some(m), Some(got)) = (want.mss, a.mss) {
            if got > m {
                warnings.push(format!("the {side}'s MSS is {got} although {m} was asked"));
            }
        }
        if want.mptcp == Some(true) && !a.mptcp {
            warnings.push(format!(
                "the {side}'s data connection is plain TCP although --mptcp was asked"
            ));
        }
    }
    Some(SockApplied { client, server })
}

/// Both sides ran on one machine (one boot id, read on each).
fn same_host(c: &Collected) -> bool {
    c.server_env
        .as_ref()
        .is_some_and(|s| !s.boot_id.is_empty() && s.boot_id == c.client_env.boot_id)
}

/// Each side's CPU: system-wide split, its own threads, service demand per unit, and the
/// other work on its machine (warned about above [`OTHER_LOAD_WARN_PCT`]).
fn cpu_accounting(
    c: &Collected,
    unit: Unit,
    work: f64,
    warnings: &mut Vec<String>,
) -> CpuAccounting {
    let units = unit.in_demand_units(work);
    let same_host = same_host(c);
    // Other work on each machine: when both sides share one, both sides' threads are the
    // test's; the load average is read here, on the client's machine.
    let both = window_threads_s(&c.client) + c.server.as_ref().map_or(0.0, window_threads_s);
    let mut client = side_cpu(
        &c.client,
        units,
        if same_host {
            both
        } else {
            window_threads_s(&c.client)
        },
    );
    client.loadavg_1m = virtperf_measure::loadavg_1m();
    client.threads_busy_pct = threads_busy(&c.client, workers(c));
    // The client's capture recorder is the test's too: on a shared machine the server side
    // counted it among the other processes.
    let tool_s = c.client.capture_cpu_s.unwrap_or(0.0);
    let server_cpu = c.server.as_ref().map(|s| {
        let theirs = if same_host {
            both + tool_s
        } else {
            window_threads_s(s)
        };
        let mut sc = side_cpu(s, units, theirs);
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
            warnings.push(other_work_warning(side, sc.other_cpu_pct, sc.loadavg_1m));
        }
        if let Some(pct) = sc.capture_cpu_pct.filter(|p| *p > OTHER_LOAD_WARN_PCT) {
            warnings.push(format!(
                "--capture's tcpdump used {pct:.0}% of a CPU on the {side}'s machine during the test: the figures include what recording every packet costs (run without --capture for the test alone)"
            ));
        }
    }
    if same_host && !spins(c) {
        machine_bound(c, warnings);
    }
    moved(c, warnings);
    CpuAccounting {
        unit: unit.demand_name().to_string(),
        same_host,
        client,
        server: server_cpu,
    }
}

#[cfg(test)]
mod tests;
