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
    /// `/proc/softirqs`: `NET_RX`, `TIMER`, `SCHED`, …
    pub softirqs: PerCpu,
    /// `ctxt` of `/proc/stat`: context switches since boot, all CPUs.
    pub context_switches: Option<u64>,
    /// cpuidle per CPU and state: `usage` (entries) under `STATE`, and `time` (µs) under
    /// `STATE/time_us`; state names lowercased (`poll`, `haltpoll`, `c1`).
    pub idle: PerCpu,
    /// Sources that could not be read, with the reason.
    pub missing: Vec<String>,
    /// The virtio-net interface the side's traffic crosses, when it is one.
    pub nic: Option<crate::nic::NicSnapshot>,
}

/// The difference between two snapshots (counter wrap or a CPU going away counts as 0).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventDelta {
    /// As in [`EventSnapshot`], increases over the interval.
    pub interrupts: PerCpu,
    /// Softirq increases.
    pub softirqs: PerCpu,
    /// Context switches during the interval.
    pub context_switches: Option<u64>,
    /// cpuidle increases.
    pub idle: PerCpu,
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

/// Parses a per-CPU table with a header of `CPUn` columns (`/proc/interrupts`,
/// `/proc/softirqs`). Lines whose name is a number (device interrupts) are named after their
/// last column (the device's action name, e.g. `virtio2-input.0`) so that they stay stable
/// across boots where the number changes.
pub fn parse_per_cpu(text: &str) -> PerCpu {
    let mut lines = text.lines();
    let ncpu = lines
        .next()
        .map(|h| {
            h.split_whitespace()
                .filter(|c| c.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    let mut out = PerCpu::new();
    for line in lines {
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

/// Reads cpuidle's per-state counters under `root` (`/sys/devices/system/cpu`).
pub fn read_idle(root: &Path) -> Result<PerCpu, String> {
    let cpus = cpu_numbers(root).map_err(|e| format!("{}: {e}", root.display()))?;
    let ncpu = cpus.len();
    let mut out = PerCpu::new();
    let mut any = false;
    for (i, cpu) in cpus.iter().enumerate() {
        let dir = root.join(format!("cpu{cpu}/cpuidle"));
        let Ok(states) = fs::read_dir(&dir) else {
            continue;
        };
        for st in states.flatten() {
            let p = st.path();
            let read = |f: &str| fs::read_to_string(p.join(f)).ok();
            let (Some(name), Some(usage), Some(time)) = (read("name"), read("usage"), read("time"))
            else {
                continue;
            };
            let name = name.trim().to_ascii_lowercase().replace(' ', "_");
            let (Ok(usage), Ok(time)) = (usage.trim().parse::<u64>(), time.trim().parse::<u64>())
            else {
                continue;
            };
            any = true;
            out.entry(name.clone()).or_insert_with(|| vec![0; ncpu])[i] += usage;
            out.entry(format!("{name}/time_us"))
                .or_insert_with(|| vec![0; ncpu])[i] += time;
        }
    }
    if any {
        Ok(out)
    } else {
        Err(format!(
            "no cpuidle states under {} (no cpuidle driver, or a container)",
            root.display()
        ))
    }
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
        match fs::read_to_string("/proc/interrupts") {
            Ok(t) => s.interrupts = parse_per_cpu(&t),
            Err(e) => s.missing.push(format!("/proc/interrupts: {e}")),
        }
        match fs::read_to_string("/proc/softirqs") {
            Ok(t) => s.softirqs = parse_per_cpu(&t),
            Err(e) => s.missing.push(format!("/proc/softirqs: {e}")),
        }
        match fs::read_to_string("/proc/stat") {
            Ok(t) => s.context_switches = ctxt(&t),
            Err(e) => s.missing.push(format!("/proc/stat: {e}")),
        }
        match read_idle(Path::new("/sys/devices/system/cpu")) {
            Ok(i) => s.idle = i,
            Err(e) => s.missing.push(e),
        }
        s
    }

    /// What happened between `self` and `later`.
    pub fn delta(&self, later: &EventSnapshot) -> EventDelta {
        let sub = |a: &PerCpu, b: &PerCpu| -> PerCpu {
            b.iter()
                .map(|(k, after)| {
                    let before = a.get(k);
                    let d = after
                        .iter()
                        .enumerate()
                        .map(|(i, v)| {
                            v.saturating_sub(before.and_then(|b| b.get(i)).copied().unwrap_or(*v))
                        })
                        .collect();
                    (k.clone(), d)
                })
                .collect()
        };
        let mut missing = self.missing.clone();
        for m in &later.missing {
            if !missing.contains(m) {
                missing.push(m.clone());
            }
        }
        EventDelta {
            interrupts: sub(&self.interrupts, &later.interrupts),
            softirqs: sub(&self.softirqs, &later.softirqs),
            context_switches: self
                .context_switches
                .zip(later.context_switches)
                .map(|(a, b)| b.saturating_sub(a)),
            idle: sub(&self.idle, &later.idle),
            missing,
            nic: match (&self.nic, &later.nic) {
                (Some(a), Some(b)) if a.interface == b.interface => Some(virtio_nic::Delta {
                    interface: b.interface.clone(),
                    device: b.device.clone(),
                    counters: b
                        .counters
                        .iter()
                        .filter_map(|(k, v)| {
                            Some((k.clone(), v.saturating_sub(*a.counters.get(k)?)))
                        })
                        .collect(),
                }),
                _ => None,
            },
        }
    }
}

/// The stable keys of the events block and where each comes from.
pub const KEYS: &[(&str, &str)] = &[
    ("timer_irqs", "interrupts LOC"),
    ("ipi_resched", "interrupts RES"),
    ("ipi_call", "interrupts CAL"),
    ("tlb_shootdowns", "interrupts TLB"),
    ("net_rx_softirqs", "softirqs NET_RX"),
    ("net_tx_softirqs", "softirqs NET_TX"),
    ("timer_softirqs", "softirqs TIMER"),
    ("hrtimer_softirqs", "softirqs HRTIMER"),
    ("sched_softirqs", "softirqs SCHED"),
    ("rcu_softirqs", "softirqs RCU"),
];

impl EventDelta {
    /// The side's counts as they travel and are stored: totals over all CPUs and over the
    /// pinned CPU, and what was missing.
    pub fn counts(&self, pinned: Option<u32>) -> virtperf_wire::EventCounts {
        virtperf_wire::EventCounts {
            all: self.totals(None),
            pinned: pinned.map(|c| self.totals(Some(&[c as usize]))),
            missing: self.missing.clone(),
            nic: self.nic.as_ref().map(|n| {
                let mut deltas = n.counters.clone();
                deltas.extend(crate::nic::irq_totals(&n.device, &self.interrupts));
                virtperf_wire::NicCounts {
                    interface: n.interface.clone(),
                    device: n.device.clone(),
                    deltas,
                }
            }),
        }
    }

    /// Totals under the stable keys over `cpus` (all CPUs when None): the keys of
    /// [`KEYS`], `context_switches` (system-wide only), `idle_entries` (all states),
    /// `idle_entries_<state>` and `idle_time_us_<state>` per cpuidle state, and
    /// `irq_<NAME>` for hypervisor lines (`HYP`, `HVS`, `PIN`, `PIW`, `NPI`) that moved.
    pub fn totals(&self, cpus: Option<&[usize]>) -> BTreeMap<String, u64> {
        let sum = |v: &Vec<u64>| -> u64 {
            match cpus {
                Some(c) => c.iter().filter_map(|i| v.get(*i)).sum(),
                None => v.iter().sum(),
            }
        };
        let mut out = BTreeMap::new();
        for (key, src) in KEYS {
            let (table, name) = src.split_once(' ').unwrap_or(("", ""));
            let t = if table == "interrupts" {
                &self.interrupts
            } else {
                &self.softirqs
            };
            if let Some(v) = t.get(name) {
                out.insert((*key).to_string(), sum(v));
            }
        }
        for hyp in ["HYP", "HVS", "PIN", "PIW", "NPI"] {
            if let Some(v) = self.interrupts.get(hyp) {
                let n = sum(v);
                if n > 0 {
                    out.insert(format!("irq_{hyp}"), n);
                }
            }
        }
        if cpus.is_none() {
            if let Some(c) = self.context_switches {
                out.insert("context_switches".into(), c);
            }
        }
        if !self.idle.is_empty() {
            let mut entries = 0;
            for (name, v) in &self.idle {
                match name.strip_suffix("/time_us") {
                    Some(state) => {
                        out.insert(format!("idle_time_us_{state}"), sum(v));
                    }
                    None => {
                        entries += sum(v);
                        out.insert(format!("idle_entries_{name}"), sum(v));
                    }
                }
            }
            out.insert("idle_entries".into(), entries);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            softirqs: parse_per_cpu("  CPU0 CPU1\nNET_RX: 10 20\nTIMER: 5 5\n"),
            context_switches: Some(100),
            idle: [
                ("haltpoll".to_string(), vec![10, 20]),
                ("haltpoll/time_us".to_string(), vec![1000, 2000]),
                ("poll".to_string(), vec![0, 1]),
            ]
            .into_iter()
            .collect(),
            missing: vec![],
            nic: None,
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
        let cpu0 = d.totals(Some(&[0]));
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
                ("tx_kicks".to_string(), kicks),
            ]
            .into_iter()
            .collect(),
        };
        let a = EventSnapshot {
            interrupts: parse_per_cpu(INTERRUPTS),
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
        assert_eq!((n.packets(), n.kicks(), n.irqs()), (30, 5, 14));
        // An interface that changed between the two readings is not differenced.
        let mut other = b.clone();
        other.nic.as_mut().unwrap().interface = "eth1".into();
        assert!(a.delta(&other).counts(None).nic.is_none());
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
