//! Kernel events around a test: interrupts (local timer, rescheduling and function-call
//! IPIs, TLB shootdowns, hypervisor lines), softirqs, context switches and cpuidle entries
//! and residency, per CPU. In a guest without posted interrupts each IPI sent, each idle
//! entry (HLT) and each timer reprogram is a VM exit, so these counts are the part of a
//! round trip's cost that is visible from inside any Linux machine without host access.
//!
//! Sampled like the CPU split: a [`EventSnapshot`] at the start and at the end of the
//! measured interval, and their [`EventDelta`]. Files a machine lacks (no cpuidle in a
//! container, no /proc/softirqs) are named in `missing`, never read as zeros.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Counters of one source, per CPU: name → one count per CPU.
pub type PerCpu = BTreeMap<String, Vec<u64>>;

/// Everything read at one instant.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventSnapshot {
    /// `/proc/interrupts`: named lines (`LOC`, `RES`, `CAL`, `TLB`, `HYP`, …) and numbered
    /// device lines under their device name (`virtio2-input.0`).
    pub interrupts: PerCpu,
    /// The CPU number of each column of `interrupts` (offline CPUs have no column).
    pub interrupt_cpus: Vec<u32>,
    /// `/proc/softirqs`: `NET_RX`, `TIMER`, `SCHED`, …
    pub softirqs: PerCpu,
    /// The CPU number of each column of `softirqs`.
    pub softirq_cpus: Vec<u32>,
    /// `/proc/net/softnet_stat`: `dropped` (packets the per-CPU input backlog had no room
    /// for, `net.core.netdev_max_backlog`) and `time_squeeze` per CPU.
    pub softnet: PerCpu,
    /// The CPU number of each column of `softnet`.
    pub softnet_cpus: Vec<u32>,
    /// `ctxt` of `/proc/stat`: context switches since boot, all CPUs.
    pub context_switches: Option<u64>,
    /// cpuidle per CPU and state: `usage` (entries) under `STATE`, and `time` (µs) under
    /// `STATE/time_us`; state names lowercased (`poll`, `haltpoll`, `c1`).
    pub idle: PerCpu,
    /// The CPU number of each column of `idle`: the CPUs whose cpuidle could be read.
    pub idle_cpus: Vec<u32>,
    /// CPUs whose cpuidle directory could not be read while others' could: their idle
    /// counts are unknown, so no total over them is given.
    pub idle_unreadable: Vec<u32>,
    /// Sources that could not be read, with the reason.
    pub missing: Vec<String>,
    /// The virtio-net interface the side's traffic crosses, when it is one.
    pub nic: Option<crate::nic::NicSnapshot>,
}

/// The difference between two snapshots. A table whose CPUs changed between the two
/// (hotplug) is left empty and named in `missing`, never differenced column by column.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventDelta {
    /// As in [`EventSnapshot`], increases over the interval.
    pub interrupts: PerCpu,
    /// CPU number of each column of `interrupts`.
    pub interrupt_cpus: Vec<u32>,
    /// Softirq increases.
    pub softirqs: PerCpu,
    /// CPU number of each column of `softirqs`.
    pub softirq_cpus: Vec<u32>,
    /// Backlog drops and squeezes per CPU (`/proc/net/softnet_stat`).
    pub softnet: PerCpu,
    /// CPU number of each column of `softnet`.
    pub softnet_cpus: Vec<u32>,
    /// Context switches during the interval.
    pub context_switches: Option<u64>,
    /// cpuidle increases.
    pub idle: PerCpu,
    /// CPU number of each column of `idle`.
    pub idle_cpus: Vec<u32>,
    /// CPUs whose cpuidle could not be read at either end.
    pub idle_unreadable: Vec<u32>,
    /// Sources missing at either end.
    pub missing: Vec<String>,
    /// The virtio-net interface's counters, when both ends read the same one.
    pub nic: Option<virtio_nic::Delta>,
}

mod virtio_nic {
    /// A virtio-net interface's counter increases (before its interrupts are added).
    #[derive(Debug, Clone, Default, PartialEq)]
    pub struct Delta {
        pub interface: String,
        pub device: String,
        pub counters: std::collections::BTreeMap<String, u64>,
    }
}

/// The CPU numbers of a per-CPU table's header (`CPU0 CPU1 CPU3`: CPU 2 is offline and has
/// no column), in column order.
pub fn header_cpus(text: &str) -> Vec<u32> {
    text.lines()
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter_map(|c| c.strip_prefix("CPU")?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Parses a per-CPU table with a header of `CPUn` columns (`/proc/interrupts`,
/// `/proc/softirqs`). Lines whose name is a number (device interrupts) are named after their
/// last column (the device's action name, e.g. `virtio2-input.0`) so that they stay stable
/// across boots where the number changes.
pub fn parse_per_cpu(text: &str) -> PerCpu {
    let ncpu = header_cpus(text).len();
    let mut lines = text.lines().skip(1);
    let mut out = PerCpu::new();
    for line in lines.by_ref() {
        let Some((name, rest)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let counts: Vec<u64> = fields
            .iter()
            .take(ncpu)
            .map_while(|f| f.parse().ok())
            .collect();
        if counts.is_empty() {
            continue;
        }
        let key = if name.chars().all(|c| c.is_ascii_digit()) {
            match fields.last() {
                Some(dev) if fields.len() > counts.len() => (*dev).to_string(),
                _ => name.to_string(),
            }
        } else {
            name.to_string()
        };
        // Two device lines can share an action name (shared names across devices): add.
        let slot = out.entry(key).or_insert_with(|| vec![0; counts.len()]);
        for (i, c) in counts.iter().enumerate() {
            if let Some(s) = slot.get_mut(i) {
                *s += c;
            }
        }
    }
    out
}

fn ctxt(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether a machine's idle loop cannot be polling: it has no cpuidle driver (so no POLL
/// state to count) and its kernel was not booted with `idle=poll`, so its idle CPUs halt.
/// Its polling time is then 0 by reading, not unknown. The one rule for tune's cost and
/// explain's CPU per transaction (`virtperf_report::cost::poll_us`) and the host's own
/// sample of a guest-driven test.
pub fn idle_never_polls(driver: Option<&str>, idle_states: usize, cmdline: &str) -> bool {
    matches!(driver, None | Some("none"))
        && idle_states == 0
        && !cmdline.split_whitespace().any(|a| a == "idle=poll")
}

/// [`idle_never_polls`] for this machine, read now; false where its command line cannot
/// be read (whether it was told `idle=poll` is then unknown, not "no").
pub fn this_machine_never_polls() -> bool {
    let Ok(cmdline) = std::fs::read_to_string("/proc/cmdline") else {
        return false;
    };
    let driver = std::fs::read_to_string("/sys/devices/system/cpu/cpuidle/current_driver").ok();
    // No cpuidle directory for CPU 0: no idle states (a kernel or driver without them).
    let states = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cpuidle").map_or(0, |d| d.count());
    idle_never_polls(driver.as_deref().map(str::trim), states, &cmdline)
}

/// The CPUs under `root` (`/sys/devices/system/cpu`: its `cpuN` directories), in order.
pub fn cpu_numbers(root: &Path) -> std::io::Result<Vec<u32>> {
    let mut cpus: Vec<u32> = fs::read_dir(root)?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("cpu"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    cpus.sort_unstable();
    Ok(cpus)
}

/// cpuidle's per-state counters of the CPUs under `root` whose cpuidle could be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IdleTable {
    /// As [`EventSnapshot::idle`].
    pub counts: PerCpu,
    /// CPU number of each column.
    pub cpus: Vec<u32>,
    /// CPUs whose cpuidle directory could not be read.
    pub unreadable: Vec<u32>,
}

/// Reads cpuidle's per-state counters under `root` (`/sys/devices/system/cpu`). A CPU whose
/// directory cannot be read while others' can is listed in `unreadable`, not read as zeros.
pub fn read_idle(root: &Path) -> Result<IdleTable, String> {
    let all = cpu_numbers(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let mut read: Vec<(u32, Vec<IdleCount>)> = Vec::new();
    let mut unreadable = Vec::new();
    for cpu in all {
        match idle_states_of(&root.join(format!("cpu{cpu}/cpuidle"))) {
            Some(states) => read.push((cpu, states)),
            None => unreadable.push(cpu),
        }
    }
    if read.is_empty() {
        return Err(format!(
            "no cpuidle states under {} (no cpuidle driver, or a container)",
            root.display()
        ));
    }
    let n = read.len();
    let mut counts = PerCpu::new();
    for (i, (_, states)) in read.iter().enumerate() {
        for (name, usage, time) in states {
            counts.entry(name.clone()).or_insert_with(|| vec![0; n])[i] += usage;
            counts
                .entry(format!("{name}/time_us"))
                .or_insert_with(|| vec![0; n])[i] += time;
        }
    }
    Ok(IdleTable {
        counts,
        cpus: read.iter().map(|(c, _)| *c).collect(),
        unreadable,
    })
}

/// One cpuidle state's reading: lowercased name, entries, µs.
type IdleCount = (String, u64, u64);

/// One CPU's cpuidle states: (lowercased name, entries, µs), or None when its directory
/// cannot be read or holds no readable state.
fn idle_states_of(dir: &Path) -> Option<Vec<IdleCount>> {
    let mut out = Vec::new();
    for st in fs::read_dir(dir).ok()?.flatten() {
        let p = st.path();
        let read = |f: &str| fs::read_to_string(p.join(f)).ok();
        let (Some(name), Some(usage), Some(time)) = (read("name"), read("usage"), read("time"))
        else {
            continue;
        };
        let (Ok(usage), Ok(time)) = (usage.trim().parse::<u64>(), time.trim().parse::<u64>())
        else {
            continue;
        };
        out.push((
            name.trim().to_ascii_lowercase().replace(' ', "_"),
            usage,
            time,
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// Where counters are read from. Tests point these at files they write (`VIRTPERF_TEST_PROC`
/// for `interrupts`, `softirqs` and `stat`; `VIRTPERF_TEST_SYS_CPU` for the cpuidle tree)
/// to show what a machine without some of them gets.
fn sources() -> (std::path::PathBuf, std::path::PathBuf) {
    let var = |k: &str, d: &str| std::env::var_os(k).map_or_else(|| d.into(), Into::into);
    (
        var("VIRTPERF_TEST_PROC", "/proc"),
        var("VIRTPERF_TEST_SYS_CPU", "/sys/devices/system/cpu"),
    )
}

impl EventSnapshot {
    /// Reads this machine's counters now.
    pub fn read() -> EventSnapshot {
        Self::read_with_nic(None)
    }

    /// Reads this machine's counters now, and those of interface `nic` when it is a
    /// virtio-net interface (see [`crate::nic`]; the interface of a side's connection,
    /// from [`crate::nic::interface_of`]).
    pub fn read_with_nic(nic: Option<&str>) -> EventSnapshot {
        let mut s = EventSnapshot {
            nic: nic.and_then(crate::nic::snapshot),
            ..EventSnapshot::default()
        };
        let (proc, sys_cpu) = sources();
        let read = |f: &str| {
            let p = proc.join(f);
            fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))
        };
        match read("interrupts") {
            Ok(t) => (s.interrupts, s.interrupt_cpus) = (parse_per_cpu(&t), header_cpus(&t)),
            Err(e) => s.missing.push(e),
        }
        match read("softirqs") {
            Ok(t) => (s.softirqs, s.softirq_cpus) = (parse_per_cpu(&t), header_cpus(&t)),
            Err(e) => s.missing.push(e),
        }
        match read("stat") {
            Ok(t) => s.context_switches = ctxt(&t),
            Err(e) => s.missing.push(e),
        }
        match read("net/softnet_stat") {
            Ok(t) => (s.softnet, s.softnet_cpus) = parse_softnet(&t),
            Err(e) => s.missing.push(e),
        }
        match read_idle(&sys_cpu) {
            Ok(i) => {
                if !i.unreadable.is_empty() {
                    s.missing.push(format!(
                        "cpuidle of CPU {} unreadable under {}: idle counts over those CPUs not taken",
                        join(&i.unreadable),
                        sys_cpu.display()
                    ));
                }
                (s.idle, s.idle_cpus, s.idle_unreadable) = (i.counts, i.cpus, i.unreadable);
            }
            Err(e) => s.missing.push(e),
        }
        s
    }

    /// What happened between `self` and `later`.
    pub fn delta(&self, later: &EventSnapshot) -> EventDelta {
        let mut missing = self.missing.clone();
        for m in &later.missing {
            if !missing.contains(m) {
                missing.push(m.clone());
            }
        }
        let mut table = |what: &str, a: (&PerCpu, &[u32]), b: (&PerCpu, &[u32])| {
            if a.1 != b.1 {
                missing.push(format!(
                    "{what}: the CPUs changed during the interval (CPU {} before, {} after)",
                    join(a.1),
                    join(b.1)
                ));
                return (PerCpu::new(), Vec::new());
            }
            (sub(a.0, b.0), b.1.to_vec())
        };
        let (interrupts, interrupt_cpus) = table(
            "/proc/interrupts",
            (&self.interrupts, &self.interrupt_cpus),
            (&later.interrupts, &later.interrupt_cpus),
        );
        let (softirqs, softirq_cpus) = table(
            "/proc/softirqs",
            (&self.softirqs, &self.softirq_cpus),
            (&later.softirqs, &later.softirq_cpus),
        );
        let (softnet, softnet_cpus) = table(
            "/proc/net/softnet_stat",
            (&self.softnet, &self.softnet_cpus),
            (&later.softnet, &later.softnet_cpus),
        );
        let (idle, idle_cpus) = table(
            "cpuidle",
            (&self.idle, &self.idle_cpus),
            (&later.idle, &later.idle_cpus),
        );
        let mut idle_unreadable = self.idle_unreadable.clone();
        idle_unreadable.extend(
            later
                .idle_unreadable
                .iter()
                .filter(|c| !self.idle_unreadable.contains(c)),
        );
        let nic = match (&self.nic, &later.nic) {
            (Some(a), Some(b)) if a.interface == b.interface => {
                for m in a.missing.iter().chain(&b.missing) {
                    if !missing.contains(m) {
                        missing.push(m.clone());
                    }
                }
                Some(virtio_nic::Delta {
                    interface: b.interface.clone(),
                    device: b.device.clone(),
                    counters: b
                        .counters
                        .iter()
                        .filter_map(|(k, v)| {
                            Some((k.clone(), v.saturating_sub(*a.counters.get(k)?)))
                        })
                        .collect(),
                })
            }
            _ => None,
        };
        EventDelta {
            interrupts,
            interrupt_cpus,
            softirqs,
            softirq_cpus,
            softnet,
            softnet_cpus,
            context_switches: self
                .context_switches
                .zip(later.context_switches)
                .map(|(a, b)| b.saturating_sub(a)),
            idle,
            idle_cpus,
            idle_unreadable,
            missing,
            nic,
        }
    }
}

/// Increases of each line present at both ends (a line that appeared during the interval,
/// a new device's, has no start value and is left out rather than counted from 0).
fn sub(a: &PerCpu, b: &PerCpu) -> PerCpu {
    b.iter()
        .filter_map(|(k, after)| {
            let before = a.get(k)?;
            let d = after
                .iter()
                .zip(before)
                .map(|(v, b)| v.saturating_sub(*b))
                .collect();
            Some((k.clone(), d))
        })
        .collect()
}

fn join(cpus: &[u32]) -> String {
    cpus.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The stable keys of the events block and where each comes from.
pub const KEYS: &[(&str, &str)] = &[
    (virtperf_wire::counter::TIMER_IRQS, "interrupts LOC"),
    (virtperf_wire::counter::IPI_RESCHED, "interrupts RES"),
    (virtperf_wire::counter::IPI_CALL, "interrupts CAL"),
    ("tlb_shootdowns", "interrupts TLB"),
    ("net_rx_softirqs", "softirqs NET_RX"),
    ("net_tx_softirqs", "softirqs NET_TX"),
    ("timer_softirqs", "softirqs TIMER"),
    ("hrtimer_softirqs", "softirqs HRTIMER"),
    ("sched_softirqs", "softirqs SCHED"),
    ("rcu_softirqs", "softirqs RCU"),
    (virtperf_wire::counter::BACKLOG_DROPS, "softnet dropped"),
    ("time_squeezes", "softnet time_squeeze"),
];

/// Parses `/proc/net/softnet_stat`: one line of hexadecimal fields per CPU, the second
/// `dropped` and the third `time_squeeze`; the CPU is the thirteenth field where the kernel
/// prints it (5.10 and later), else the line's position (older kernels skip offline CPUs
/// there, so the position is only a guess: such lines are kept under their position).
pub fn parse_softnet(text: &str) -> (PerCpu, Vec<u32>) {
    let mut dropped = Vec::new();
    let mut squeezed = Vec::new();
    let mut cpus = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let f: Vec<u64> = line
            .split_whitespace()
            .map_while(|x| u64::from_str_radix(x, 16).ok())
            .collect();
        if f.len() < 3 {
            continue;
        }
        dropped.push(f[1]);
        squeezed.push(f[2]);
        cpus.push(f.get(12).map_or(i as u32, |c| *c as u32));
    }
    let mut t = PerCpu::new();
    if !cpus.is_empty() {
        t.insert("dropped".into(), dropped);
        t.insert("time_squeeze".into(), squeezed);
    }
    (t, cpus)
}

impl EventDelta {
    /// The side's counts as they travel and are stored: totals over all CPUs and over the
    /// pinned CPU, and what was missing.
    pub fn counts(&self, pinned: Option<u32>) -> virtperf_wire::EventCounts {
        let mut missing = self.missing.clone();
        if let Some(c) = pinned {
            for (what, cpus) in [
                ("/proc/interrupts", &self.interrupt_cpus),
                ("/proc/softirqs", &self.softirq_cpus),
            ] {
                if !cpus.is_empty() && !cpus.contains(&c) {
                    missing.push(format!("{what} has no column for CPU {c} (offline?)"));
                }
            }
        }
        let nic = self.nic.as_ref().map(|n| {
            let mut deltas = n.counters.clone();
            let irqs = crate::nic::irq_totals(&n.device, &self.interrupts);
            if irqs.is_empty() {
                // No line of the device, or no table at all: its interrupts were not
                // counted, which is not the same as none having fired.
                missing.push(format!(
                    "/proc/interrupts has no line of {} ({}): its interrupts not counted",
                    n.device, n.interface
                ));
            }
            deltas.extend(irqs);
            virtperf_wire::NicCounts {
                interface: n.interface.clone(),
                device: n.device.clone(),
                deltas,
            }
        });
        virtperf_wire::EventCounts {
            all: self.totals(None),
            pinned: pinned.map(|c| self.totals(Some(c))),
            missing,
            nic,
        }
    }

    /// Totals under the stable keys over CPU `cpu` (all CPUs when None): the keys of
    /// [`KEYS`], `context_switches` (system-wide only), `idle_entries` (all states),
    /// `idle_entries_<state>` and `idle_time_us_<state>` per cpuidle state, and
    /// `irq_<NAME>` for hypervisor lines (`HYP`, `HVS`, `PIN`, `PIW`, `NPI`) that moved. A
    /// key whose counter was not read over those CPUs is absent, never 0.
    pub fn totals(&self, cpu: Option<u32>) -> BTreeMap<String, u64> {
        // The column of `cpu` in a table (None: that CPU has no column there).
        let column = |cpus: &[u32]| cpu.map(|c| cpus.iter().position(|x| *x == c));
        let sum = |v: &Vec<u64>, col: Option<Option<usize>>| -> Option<u64> {
            match col {
                None => Some(v.iter().sum()),
                Some(Some(i)) => v.get(i).copied(),
                Some(None) => None,
            }
        };
        let mut out = BTreeMap::new();
        let (irq_col, soft_col) = (column(&self.interrupt_cpus), column(&self.softirq_cpus));
        let net_col = column(&self.softnet_cpus);
        for (key, src) in KEYS {
            let (table, name) = src.split_once(' ').unwrap_or(("", ""));
            let (t, col) = match table {
                "interrupts" => (&self.interrupts, irq_col),
                "softnet" => (&self.softnet, net_col),
                _ => (&self.softirqs, soft_col),
            };
            if let Some(n) = t.get(name).and_then(|v| sum(v, col)) {
                out.insert((*key).to_string(), n);
            }
        }
        for hyp in ["HYP", "HVS", "PIN", "PIW", "NPI"] {
            if let Some(n) = self.interrupts.get(hyp).and_then(|v| sum(v, irq_col)) {
                if n > 0 {
                    out.insert(format!("irq_{hyp}"), n);
                }
            }
        }
        if cpu.is_none() {
            if let Some(c) = self.context_switches {
                out.insert(virtperf_wire::counter::CONTEXT_SWITCHES.into(), c);
            }
        }
        // Idle totals only where every CPU asked about was read.
        let idle_col = column(&self.idle_cpus);
        let idle_known = match cpu {
            None => self.idle_unreadable.is_empty(),
            Some(_) => matches!(idle_col, Some(Some(_))),
        };
        if !self.idle.is_empty() && idle_known {
            let mut entries = 0;
            for (name, v) in &self.idle {
                let Some(n) = sum(v, idle_col) else { continue };
                match name.strip_suffix("/time_us") {
                    Some(state) => {
                        out.insert(format!("idle_time_us_{state}"), n);
                    }
                    None => {
                        entries += n;
                        out.insert(format!("idle_entries_{name}"), n);
                    }
                }
            }
            out.insert(virtperf_wire::counter::IDLE_ENTRIES.into(), entries);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No cpuidle driver and no `idle=poll`: the idle loop halts, polling is 0 by reading;
    /// a driver with states, or `idle=poll`, leaves it to be counted.
    #[test]
    fn an_idle_loop_without_cpuidle_never_polls_unless_told_to() {
        assert!(idle_never_polls(Some("none"), 0, "quiet console=ttyS0"));
        assert!(idle_never_polls(None, 0, ""));
        assert!(!idle_never_polls(Some("none"), 0, "quiet idle=poll"));
        assert!(!idle_never_polls(Some("haltpoll"), 2, ""));
        assert!(!idle_never_polls(Some("none"), 1, ""));
    }

    /// softnet_stat as kernel 6.18 prints it (this machine's): the thirteenth field is the
    /// CPU; an older kernel's 11 fields leave the line's position.
    #[test]
    fn softnet_stat_gives_drops_and_squeezes_per_cpu() {
        let now = "1af3110b 000000ed 00000084 00000000 00000000 00000000 00000000 00000000 00000000 000da57b 00000000 00000000 00000000 00000000 00000000
177f0bf2 0000001f 0000008d 00000000 00000000 00000000 00000000 00000000 00000000 0071de50 00000000 00000000 00000002 00000000 00000000
";
        let (t, cpus) = parse_softnet(now);
        assert_eq!(cpus, [0, 2]);
        assert_eq!(t["dropped"], [0xed, 0x1f]);
        assert_eq!(t["time_squeeze"], [0x84, 0x8d]);
        let old = "00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n";
        assert_eq!(parse_softnet(old).1, [0]);
        assert!(parse_softnet("").0.is_empty());
        assert!(parse_softnet("zz\n").1.is_empty());
        // Through the totals: the machine's and the pinned CPU's drops.
        let later = "1af3110b 000000f0 00000084 0 0 0 0 0 0 0 0 0 00000000\n177f0bf2 0000001f 0000008d 0 0 0 0 0 0 0 0 0 00000002\n";
        let (a, b) = (parse_softnet(now), parse_softnet(later));
        let before = EventSnapshot {
            softnet: a.0,
            softnet_cpus: a.1,
            ..Default::default()
        };
        let after = EventSnapshot {
            softnet: b.0,
            softnet_cpus: b.1,
            ..Default::default()
        };
        let d = before.delta(&after);
        assert_eq!(d.totals(None)[virtperf_wire::counter::BACKLOG_DROPS], 3);
        assert_eq!(d.totals(Some(2))[virtperf_wire::counter::BACKLOG_DROPS], 0);
        assert!(!d
            .totals(Some(1))
            .contains_key(virtperf_wire::counter::BACKLOG_DROPS));
    }

    const INTERRUPTS: &str = "           CPU0       CPU1       
 24:          1          0  IO-APIC   5-edge      ACPI:Ged
 38:          0      10702 PCI-MSIX-0000:00:03.0   1-edge      virtio2-input.0
 39:       7214          0 PCI-MSIX-0000:00:03.0   2-edge      virtio2-output.0
NMI:          0          0   Non-maskable interrupts
LOC:     567504     595282   Local timer interrupts
RES:     201585     172093   Rescheduling interrupts
CAL:    1814025    1824001   Function call interrupts
TLB:     166793     168873   TLB shootdowns
HYP:         78         35   Hypervisor callback interrupts
ERR:          0
";

    #[test]
    fn interrupts_parse_by_name_and_device() {
        let t = parse_per_cpu(INTERRUPTS);
        assert_eq!(t["LOC"], vec![567504, 595282]);
        assert_eq!(t["RES"], vec![201585, 172093]);
        assert_eq!(t["virtio2-input.0"], vec![0, 10702]);
        assert_eq!(t["ERR"], vec![0], "single-column lines keep what they have");
        assert!(!t.contains_key("38"));
    }

    #[test]
    fn deltas_and_totals() {
        let a = EventSnapshot {
            interrupts: parse_per_cpu(INTERRUPTS),
            interrupt_cpus: vec![0, 1],
            softirqs: parse_per_cpu("  CPU0 CPU1\nNET_RX: 10 20\nTIMER: 5 5\n"),
            softirq_cpus: vec![0, 1],
            context_switches: Some(100),
            idle: [
                ("haltpoll".to_string(), vec![10, 20]),
                ("haltpoll/time_us".to_string(), vec![1000, 2000]),
                ("poll".to_string(), vec![0, 1]),
            ]
            .into_iter()
            .collect(),
            idle_cpus: vec![0, 1],
            ..EventSnapshot::default()
        };
        let mut b = a.clone();
        b.interrupts.get_mut("RES").unwrap()[1] += 7;
        b.interrupts.get_mut("LOC").unwrap()[0] += 3;
        b.softirqs.get_mut("NET_RX").unwrap()[0] += 4;
        b.context_switches = Some(150);
        b.idle.get_mut("haltpoll").unwrap()[1] += 9;
        b.idle.get_mut("poll").unwrap()[1] += 2;
        let d = a.delta(&b);
        let all = d.totals(None);
        assert_eq!(all["ipi_resched"], 7);
        assert_eq!(all["timer_irqs"], 3);
        assert_eq!(all["net_rx_softirqs"], 4);
        assert_eq!(all["context_switches"], 50);
        assert_eq!(all["idle_entries"], 11);
        assert_eq!(all["idle_entries_haltpoll"], 9);
        assert_eq!(all["idle_entries_poll"], 2);
        assert!(
            !all.contains_key("irq_HYP"),
            "hypervisor lines appear when they move"
        );
        let cpu0 = d.totals(Some(0));
        assert_eq!(cpu0["ipi_resched"], 0);
        assert_eq!(cpu0["timer_irqs"], 3);
        assert!(
            !cpu0.contains_key("context_switches"),
            "ctxt is system-wide only"
        );
    }

    #[test]
    fn a_virtio_nics_counters_and_interrupts_travel_together() {
        let nic = |rx: u64, kicks: u64| crate::nic::NicSnapshot {
            interface: "eth0".into(),
            device: "virtio2".into(),
            counters: [
                ("rx_packets".to_string(), rx),
                ("tx_packets".to_string(), rx),
                ("rx_kicks".to_string(), 1),
                ("tx_kicks".to_string(), kicks),
            ]
            .into_iter()
            .collect(),
            missing: Vec::new(),
        };
        let a = EventSnapshot {
            interrupts: parse_per_cpu(INTERRUPTS),
            interrupt_cpus: header_cpus(INTERRUPTS),
            nic: Some(nic(100, 40)),
            ..EventSnapshot::default()
        };
        let mut b = a.clone();
        b.nic = Some(nic(130, 45));
        b.interrupts.get_mut("virtio2-input.0").unwrap()[1] += 12;
        b.interrupts.get_mut("virtio2-output.0").unwrap()[0] += 2;
        let c = a.delta(&b).counts(None);
        let n = c.nic.expect("both ends read eth0");
        assert_eq!(n.interface, "eth0");
        assert_eq!(n.deltas["rx_packets"], 30);
        assert_eq!(n.deltas["tx_kicks"], 5);
        assert_eq!(n.deltas["rx_irqs"], 12);
        assert_eq!(n.deltas["tx_irqs"], 2);
        assert_eq!(
            (n.packets(), n.kicks(), n.irqs()),
            (Some(60), Some(5), Some(14))
        );
        assert!(c.missing.is_empty(), "{:?}", c.missing);
        // An interface that changed between the two readings is not differenced.
        let mut other = b.clone();
        other.nic.as_mut().unwrap().interface = "eth1".into();
        assert!(a.delta(&other).counts(None).nic.is_none());
    }

    /// A driver whose ethtool statistics could not be read, on a machine whose
    /// /proc/interrupts has no line of the device: kicks and interrupts are unknown, named
    /// in `missing`, and no ratio is made of them (they used to read as 0 kicks/packet).
    #[test]
    fn unread_kicks_and_interrupts_are_absent_not_zero() {
        let snap = |rx: u64| crate::nic::NicSnapshot {
            interface: "eth0".into(),
            device: "virtio7".into(),
            counters: [
                ("rx_packets".to_string(), rx),
                ("tx_packets".to_string(), rx),
            ]
            .into_iter()
            .collect(),
            missing: vec!["eth0: ethtool statistics unreadable (EPERM): kicks not counted".into()],
        };
        let a = EventSnapshot {
            interrupts: parse_per_cpu(INTERRUPTS),
            interrupt_cpus: header_cpus(INTERRUPTS),
            nic: Some(snap(10)),
            ..EventSnapshot::default()
        };
        let mut b = a.clone();
        b.nic = Some(snap(20));
        let c = a.delta(&b).counts(None);
        let n = c.nic.expect("both ends read eth0");
        assert_eq!(n.packets(), Some(20));
        assert_eq!(n.kicks(), None, "{n:?}");
        assert_eq!(n.irqs(), None, "{n:?}");
        assert!(!n.deltas.contains_key("rx_kicks"), "{n:?}");
        assert!(
            c.missing.iter().any(|m| m.contains("kicks not counted")),
            "{:?}",
            c.missing
        );
        assert!(
            c.missing
                .iter()
                .any(|m| m.contains("no line of virtio7") && m.contains("not counted")),
            "{:?}",
            c.missing
        );
    }

    /// CPU 2 offline: the table has columns for CPUs 0, 1 and 3, and CPU 3's counts are in
    /// the third column, not the fourth (which does not exist).
    #[test]
    fn an_offline_cpu_shifts_the_columns() {
        let t = "   CPU0 CPU1 CPU3\nLOC: 1 2 3\nRES: 10 20 30\nCAL: 0 0 0\n";
        let after = "   CPU0 CPU1 CPU3\nLOC: 1 2 8\nRES: 10 20 37\nCAL: 0 0 1\n";
        let snap = |t: &str| EventSnapshot {
            interrupts: parse_per_cpu(t),
            interrupt_cpus: header_cpus(t),
            ..EventSnapshot::default()
        };
        assert_eq!(header_cpus(t), vec![0, 1, 3]);
        let d = snap(t).delta(&snap(after));
        let cpu3 = d.totals(Some(3));
        assert_eq!(cpu3["timer_irqs"], 5);
        assert_eq!(cpu3["ipi_resched"], 7);
        let cpu2 = d.counts(Some(2));
        assert!(
            cpu2.pinned
                .as_ref()
                .is_some_and(|p| !p.contains_key("timer_irqs")),
            "an offline CPU has no count, not 0: {cpu2:?}"
        );
        assert!(cpu2
            .missing
            .iter()
            .any(|m| m.contains("no column for CPU 2")));
    }

    /// One CPU's cpuidle directory cannot be read: no idle total over it or over all CPUs.
    #[test]
    fn an_unreadable_cpuidle_directory_is_no_zero() {
        let root = std::env::temp_dir().join(format!("vp-idle-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let state = root.join("cpu0/cpuidle/state0");
        fs::create_dir_all(&state).expect("temp dir");
        for (f, v) in [("name", "POLL"), ("usage", "5"), ("time", "70")] {
            fs::write(state.join(f), v).expect("write");
        }
        fs::create_dir_all(root.join("cpu1")).expect("cpu1 without cpuidle");
        let t = read_idle(&root).expect("cpu0 reads");
        assert_eq!((t.cpus.clone(), t.unreadable.clone()), (vec![0], vec![1]));
        let snap = EventSnapshot {
            idle: t.counts.clone(),
            idle_cpus: t.cpus.clone(),
            idle_unreadable: t.unreadable.clone(),
            ..EventSnapshot::default()
        };
        let d = snap.delta(&snap);
        assert_eq!(d.totals(Some(0))["idle_entries"], 0, "cpu0 was read");
        assert!(!d.totals(Some(1)).contains_key("idle_entries"));
        assert!(!d.totals(None).contains_key("idle_entries"));
        let _ = fs::remove_dir_all(&root);
    }

    /// A line that appears during the interval has no start value: left out, not counted
    /// from zero; CPUs that change between the readings void that table.
    #[test]
    fn new_lines_and_hotplug_are_not_differenced() {
        let a = "  CPU0 CPU1\nLOC: 5 5\n";
        let b = "  CPU0 CPU1\nLOC: 6 7\nRES: 100 100\n";
        let snap = |t: &str| EventSnapshot {
            interrupts: parse_per_cpu(t),
            interrupt_cpus: header_cpus(t),
            ..EventSnapshot::default()
        };
        let d = snap(a).delta(&snap(b)).totals(None);
        assert_eq!(d["timer_irqs"], 3);
        assert!(!d.contains_key("ipi_resched"));
        let c = "  CPU0\nLOC: 9\n";
        let d = snap(a).delta(&snap(c));
        assert!(d.interrupts.is_empty());
        assert!(d.missing.iter().any(|m| m.contains("CPUs changed")));
    }

    /// The real files of this machine: whatever is there parses, and what is not is named.
    #[test]
    fn this_machine_reads_or_says_what_is_missing() {
        let a = EventSnapshot::read();
        // Work that certainly switches context: a child process.
        let _ = std::process::Command::new("true").status();
        let b = EventSnapshot::read();
        let d = a.delta(&b);
        if Path::new("/proc/interrupts").exists() {
            assert!(
                a.interrupts.contains_key("LOC") || a.interrupts.len() > 1,
                "{a:?}"
            );
        } else {
            assert!(a.missing.iter().any(|m| m.contains("/proc/interrupts")));
        }
        match d.context_switches {
            Some(n) => assert!(n > 0, "spawning a process switched no context"),
            None => assert!(a.missing.iter().any(|m| m.contains("/proc/stat"))),
        }
        if a.idle.is_empty() {
            assert!(
                a.missing.iter().any(|m| m.contains("cpuidle")),
                "{:?}",
                a.missing
            );
        }
    }
}
