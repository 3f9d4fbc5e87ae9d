//! Kernel tracepoints counted per CPU around a measured interval (issue 28, counting mode):
//! the events that are VM exits in a guest without APICv or posted interrupts — timer MSR
//! writes (TSC deadline), IPIs sent through the x2APIC ICR, idle entries — and the
//! interrupts and wake-ups around them, each filtered in the kernel
//! (`PERF_EVENT_IOC_SET_FILTER`, e.g. `msr==0x830`), as `perf stat -e msr:write_msr
//! --filter 'msr==0x830'` counts them.
//!
//! On the raw `perf_event_open(2)` system call (`crate::perf` says why); no `perf` child
//! process is involved.
//!
//! A counter that cannot be opened (the kernel lacks the tracepoint, tracefs is not
//! mounted and cannot be, the caller lacks the privilege) is named in `missing` with the
//! reason, and its key is absent from every reading: never a zero.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::perf::{open_tracepoint, tracepoint_id, Attr};

/// One counted event: its key in results, its tracepoint (`system/name`) and the filter
/// the kernel applies before counting.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spec {
    /// Key in results (`msr_write_icr`).
    pub key: &'static str,
    /// Tracepoint as `system/name` under tracefs' `events/`.
    pub event: &'static str,
    /// Kernel filter expression on the tracepoint's fields, if any.
    pub filter: Option<&'static str>,
}

const fn spec(key: &'static str, event: &'static str, filter: Option<&'static str>) -> Spec {
    Spec { key, event, filter }
}

/// What `--trace` counts: the events that are VM exits in a guest without APICv, posted
/// interrupts or halt polling, and nothing `/proc` already counts (interrupts, softirqs,
/// context switches are in a result's `events`). The MSR numbers are the x2APIC and timer
/// registers whose writes trap: 0x6e0 IA32_TSC_DEADLINE (the tickless timer
/// reprogrammed), 0x830 the ICR (an IPI sent), 0x80b EOI, 0x838 the APIC timer's initial
/// count. Few tracepoints on purpose: each one hit costs every transaction time
/// (bench/trace.sh measures it); IPIs are counted where they arrive, from
/// /proc/interrupts, for free (`ipis_received`).
pub const EXITS: &[Spec] = &[
    spec(
        virtperf_wire::counter::MSR_WRITE_TSC_DEADLINE,
        "msr/write_msr",
        Some("msr==0x6e0"),
    ),
    spec(
        virtperf_wire::counter::MSR_WRITE_ICR,
        "msr/write_msr",
        Some("msr==0x830"),
    ),
    spec(
        virtperf_wire::counter::MSR_WRITE_EOI,
        "msr/write_msr",
        Some("msr==0x80b"),
    ),
    spec(
        virtperf_wire::counter::MSR_WRITE_APIC_TIMER,
        "msr/write_msr",
        Some("msr==0x838"),
    ),
    spec("msr_writes", "msr/write_msr", None),
    // power:cpu_idle fires on entry with the state's index and on exit with -1.
    spec(
        virtperf_wire::counter::IDLE_ENTRIES,
        "power/cpu_idle",
        Some("state!=4294967295"),
    ),
    // The entries that halt: a polling entry (state 0, POLL) spins in the guest and exits
    // nothing, so counting it as a HLT made halt polling look like more exits.
    spec(
        virtperf_wire::counter::IDLE_HALTS,
        "power/cpu_idle",
        Some("state!=4294967295 && state!=0"),
    ),
    spec(virtperf_wire::counter::KVM_EXITS, "kvm/kvm_exit", None),
];

/// What `--trace-all` adds: KVM's paravirtual MSRs by name, MSR reads, interrupts by
/// vector, softirqs by vector, wake-ups and switches.
pub const MORE: &[Spec] = &[
    // KVM's paravirtual MSRs (arch/x86/include/uapi/asm/kvm_para.h), by name.
    spec(
        "msr_write_kvm_system_time",
        "msr/write_msr",
        Some("msr==0x4b564d01"),
    ),
    spec(
        "msr_write_kvm_steal_time",
        "msr/write_msr",
        Some("msr==0x4b564d03"),
    ),
    spec(
        "msr_write_kvm_pv_eoi",
        "msr/write_msr",
        Some("msr==0x4b564d04"),
    ),
    spec(
        "msr_write_kvm_poll_control",
        "msr/write_msr",
        Some("msr==0x4b564d05"),
    ),
    spec(
        "msr_write_kvm_async_pf",
        "msr/write_msr",
        Some("msr==0x4b564d02 || msr==0x4b564d06 || msr==0x4b564d07"),
    ),
    spec("msr_reads", "msr/read_msr", None),
    spec(
        "msr_read_kvm_pv",
        "msr/read_msr",
        Some("msr>=0x4b564d00 && msr<=0x4b564dff"),
    ),
    spec("ipi_send_cpu", "ipi/ipi_send_cpu", None),
    spec("ipi_send_cpumask", "ipi/ipi_send_cpumask", None),
    spec(
        "call_function_single_irqs",
        "irq_vectors/call_function_single_entry",
        None,
    ),
    spec("reschedule_irqs", "irq_vectors/reschedule_entry", None),
    spec("local_timer_irqs", "irq_vectors/local_timer_entry", None),
    // Softirqs by vector (include/linux/interrupt.h): TIMER 1, NET_TX 2, NET_RX 3,
    // SCHED 7, HRTIMER 8, RCU 9.
    spec("softirq_timer", "irq/softirq_entry", Some("vec==1")),
    spec("softirq_net_tx", "irq/softirq_entry", Some("vec==2")),
    spec("softirq_net_rx", "irq/softirq_entry", Some("vec==3")),
    spec("softirq_sched", "irq/softirq_entry", Some("vec==7")),
    spec("softirq_hrtimer", "irq/softirq_entry", Some("vec==8")),
    spec("softirq_rcu", "irq/softirq_entry", Some("vec==9")),
    spec("softirqs", "irq/softirq_entry", None),
    spec("sched_wakeups", "sched/sched_wakeup", None),
    spec("sched_switches", "sched/sched_switch", None),
];

/// tracefs, found or mounted for as long as this value lives: a mount virtperf made is
/// taken away again when it is dropped (lazily: `MNT_DETACH`), since tracepoints once
/// opened need it no more. A mount that was there before stays. (A process killed in the
/// few milliseconds between the two leaves it mounted, as `mount -t tracefs` would.)
#[derive(Debug)]
pub struct Tracefs {
    path: PathBuf,
    ours: bool,
}

impl Tracefs {
    /// Its mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.ours {
            let _ = rustix::mount::unmount(&self.path, rustix::mount::UnmountFlags::DETACH);
        }
    }
}

/// Where tracefs is, mounting it at its usual place when it is not mounted and we may.
pub fn tracefs() -> Result<Tracefs, String> {
    tracefs_in(
        &[
            Path::new("/sys/kernel/tracing"),
            Path::new("/sys/kernel/debug/tracing"),
        ],
        Path::new("/sys/kernel/tracing"),
    )
}

/// [`tracefs`] over these candidate mount points, mounting at `target` if none holds it.
fn tracefs_in(candidates: &[&Path], target: &Path) -> Result<Tracefs, String> {
    for p in candidates {
        match std::fs::metadata(p.join("events")) {
            Ok(m) if m.is_dir() => {
                return Ok(Tracefs {
                    path: p.to_path_buf(),
                    ours: false,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(format!(
                    "tracefs at {} is not readable by this user (needs root or CAP_PERFMON)",
                    p.display()
                ))
            }
            _ => {}
        }
    }
    rustix::mount::mount(
        "nodev",
        target,
        "tracefs",
        rustix::mount::MountFlags::empty(),
        None,
    )
    .map_err(|e| {
        format!(
            "tracefs is not mounted and cannot be ({e}): as root, `mount -t tracefs nodev {}`",
            target.display()
        )
    })?;
    Ok(Tracefs {
        path: target.to_path_buf(),
        ours: true,
    })
}

/// `kvm:kvm_exit` on a KVM host, in all and by the exit reasons a `kvm exits` probe makes:
/// the codes differ between Intel (VMX basic exit reasons) and AMD (SVM exit codes), so
/// both are counted and the kernel's `isa` field (1 VMX, 2 SVM) keeps them apart.
pub const KVM_EXIT: &[Spec] = &[
    spec(virtperf_wire::counter::KVM_EXITS, "kvm/kvm_exit", None),
    spec(
        "kvm_exit_io",
        "kvm/kvm_exit",
        Some("isa==1 && exit_reason==30 || isa==2 && exit_reason==0x7b"),
    ),
    spec(
        "kvm_exit_hlt",
        "kvm/kvm_exit",
        Some("isa==1 && exit_reason==12 || isa==2 && exit_reason==0x78"),
    ),
    spec(
        "kvm_exit_cpuid",
        "kvm/kvm_exit",
        Some("isa==1 && exit_reason==10 || isa==2 && exit_reason==0x72"),
    ),
    spec(
        "kvm_exit_npf",
        "kvm/kvm_exit",
        Some("isa==1 && exit_reason==48 || isa==2 && exit_reason==0x400"),
    ),
];

/// The x2APIC and timer register writes `--trace` always counts, parts of `msr_writes`.
const X2APIC_WRITES: &[&str] = &[
    virtperf_wire::counter::MSR_WRITE_TSC_DEADLINE,
    virtperf_wire::counter::MSR_WRITE_ICR,
    virtperf_wire::counter::MSR_WRITE_EOI,
    virtperf_wire::counter::MSR_WRITE_APIC_TIMER,
];

/// The APIC registers a kernel writes as MSRs only in x2APIC mode: in xAPIC mode they are
/// memory-mapped, and the msr tracepoint never sees a write to them (the TSC deadline is an
/// MSR in either mode).
const X2APIC_ONLY: &[&str] = &[
    virtperf_wire::counter::MSR_WRITE_ICR,
    virtperf_wire::counter::MSR_WRITE_EOI,
    virtperf_wire::counter::MSR_WRITE_APIC_TIMER,
];

/// Why this machine's kernel drives its local APIC in xAPIC mode, where ICR, EOI and
/// APIC-timer writes are MMIO stores no msr tracepoint sees (so a count of them would read
/// 0 however many there were); None where it may use x2APIC, and off x86.
pub fn xapic_mode() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    xapic_reason(&cpuinfo, &cmdline)
}

/// [`xapic_mode`] on given texts. A CPU without the `x2apic` flag has no x2APIC mode (QEMU
/// 7.2's TCG CPUs, for one), and Linux clears the flag where `nox2apic` turns it off.
fn xapic_reason(cpuinfo: &str, cmdline: &str) -> Option<String> {
    let x2apic = has_flag(cpuinfo, "x2apic")?;
    let why = if cmdline.split_whitespace().any(|w| w == "nox2apic") {
        "the kernel command line has nox2apic"
    } else if !x2apic {
        "this CPU has no x2APIC (no x2apic flag in /proc/cpuinfo)"
    } else {
        return None;
    };
    Some(format!(
        "{why}: the local APIC runs in xAPIC mode, where ICR, EOI and APIC-timer writes are \
         MMIO stores the msr tracepoint does not see"
    ))
}

/// Why this CPU has no TSC-deadline timer (no `tsc_deadline_timer` flag, as QEMU 7.2's TCG
/// CPUs): the kernel then reprograms the local APIC's own timer, so a count of 0x6e0
/// writes is 0 however often the tick was reprogrammed. None where it has one, and off x86.
pub fn no_tsc_deadline() -> Option<String> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    no_tsc_deadline_in(&cpuinfo)
}

fn no_tsc_deadline_in(cpuinfo: &str) -> Option<String> {
    (!has_flag(cpuinfo, "tsc_deadline_timer")?).then(|| {
        "this CPU has no TSC-deadline timer (no tsc_deadline_timer flag in /proc/cpuinfo): \
         the kernel reprograms the local APIC timer instead (its APIC-timer writes)"
            .to_string()
    })
}

/// Whether /proc/cpuinfo's first `flags` line holds `flag`; None without one (not x86,
/// where there are no such MSRs to count).
fn has_flag(cpuinfo: &str, flag: &str) -> Option<bool> {
    let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
    Some(flags.split_whitespace().any(|f| f == flag))
}

/// The paravirtual MSR writes `--trace-all` adds, parts of `msr_writes` too.
const PV_WRITES: &[&str] = &[
    "msr_write_kvm_system_time",
    "msr_write_kvm_steal_time",
    "msr_write_kvm_pv_eoi",
    "msr_write_kvm_poll_control",
    "msr_write_kvm_async_pf",
];

/// Adds `msr_write_other` (all writes minus the named ones) to `counts` when all writes,
/// the four x2APIC/timer registers and every paravirtual register were counted: "other"
/// is defined only against the full list, else it would hold whichever named writes
/// happened not to be counted. Returns why it is absent when all writes were counted but
/// a named one was not.
pub fn add_other_writes(counts: &mut BTreeMap<String, u64>) -> Option<String> {
    let all = counts.get("msr_writes").copied()?;
    let named: Vec<&str> = X2APIC_WRITES.iter().chain(PV_WRITES).copied().collect();
    let uncounted: Vec<&str> = named
        .iter()
        .filter(|k| !counts.contains_key(**k))
        .copied()
        .collect();
    if !uncounted.is_empty() {
        let hint = if uncounted.iter().any(|k| PV_WRITES.contains(k)) {
            " (the paravirtual ones need --trace-all)"
        } else {
            ""
        };
        return Some(format!(
            "msr_write_other: not derived, {} not counted{hint}",
            uncounted.join(", ")
        ));
    }
    let named: u64 = named.iter().filter_map(|k| counts.get(*k)).sum();
    counts.insert(
        virtperf_wire::counter::MSR_WRITE_OTHER.into(),
        all.saturating_sub(named),
    );
    None
}

/// Counters of [`Spec`]s on a set of CPUs, opened once, read around an interval.
pub struct Counters {
    open: Vec<(&'static str, u32, OwnedFd)>,
    /// Counters that could not be opened, with why (their keys are absent from readings).
    pub missing: Vec<String>,
}

impl Counters {
    /// Opens every spec on every CPU of `cpus`. Never fails: what cannot be counted is in
    /// `missing`, and a key is kept only if it opened on every CPU asked for.
    pub fn open(specs: &[Spec], cpus: &[u32]) -> Counters {
        let mut c = Counters {
            open: Vec::new(),
            missing: Vec::new(),
        };
        let root = match tracefs() {
            Ok(r) => r,
            Err(e) => {
                c.missing.push(e);
                return c;
            }
        };
        let (xapic, no_deadline) = (xapic_mode(), no_tsc_deadline());
        for s in specs {
            // Not counted rather than counted as 0: in xAPIC mode these writes bypass MSRs,
            // and without a TSC-deadline timer the tick is never written there.
            let blind = match s.key {
                k if X2APIC_ONLY.contains(&k) => xapic.as_deref(),
                virtperf_wire::counter::MSR_WRITE_TSC_DEADLINE => no_deadline.as_deref(),
                _ => None,
            };
            if let Some(why) = blind {
                c.missing.push(format!("{}: {why}", s.key));
                continue;
            }
            let id = tracepoint_id(root.path(), s.event);
            let fds = id.and_then(|id| {
                cpus.iter()
                    .map(|cpu| open_tracepoint(&Attr::counting(id), *cpu, s.filter))
                    .collect::<Result<Vec<_>, _>>()
            });
            match fds {
                Ok(fds) => c
                    .open
                    .extend(fds.into_iter().zip(cpus).map(|(f, cpu)| (s.key, *cpu, f))),
                Err(e) => c.missing.push(format!("{}: {e}", s.key)),
            }
        }
        c
    }

    /// Zeroes and starts every counter: the start of the measured interval.
    pub fn start(&self) {
        crate::perf::start(self.open.iter().map(|(_, _, fd)| fd));
    }

    /// Stops every counter and reads them, summed over the CPUs: the end of the interval.
    /// A counter whose read fails is left out (and named in the returned `missing`).
    pub fn stop(&self) -> (BTreeMap<String, u64>, Vec<String>) {
        let (total, _, failed) = self.stop_per_cpu();
        (total, failed)
    }

    /// [`Counters::stop`], with each CPU's own counts beside the sums.
    pub fn stop_per_cpu(&self) -> (BTreeMap<String, u64>, PerCpu, Vec<String>) {
        crate::perf::stop(self.open.iter().map(|(_, _, fd)| fd));
        let mut out: BTreeMap<String, u64> = BTreeMap::new();
        let mut per_cpu = PerCpu::new();
        let mut failed: Vec<String> = Vec::new();
        let mut unread: Vec<&str> = Vec::new();
        for (key, cpu, fd) in &self.open {
            let mut v = [0u8; 8];
            match rustix::io::read(fd, &mut v) {
                Ok(8) => {
                    let n = u64::from_ne_bytes(v);
                    *out.entry((*key).to_string()).or_default() += n;
                    per_cpu
                        .entry(*cpu)
                        .or_default()
                        .insert((*key).to_string(), n);
                }
                other => {
                    failed.push(format!(
                        "{key} on CPU {cpu}: reading the counter gave {other:?}"
                    ));
                    unread.push(key);
                }
            }
        }
        // A sum over CPUs with one CPU unread is no count of them all.
        for k in unread {
            out.remove(k);
        }
        (out, per_cpu, failed)
    }
}

/// Every CPU of this machine (its `cpuN` directories): what is counted when a test's
/// sides are not pinned.
pub fn all_cpus() -> Vec<u32> {
    crate::events::cpu_numbers(Path::new("/sys/devices/system/cpu")).unwrap_or_default()
}

/// Counts by CPU, then by key.
pub type PerCpu = BTreeMap<u32, BTreeMap<String, u64>>;

#[cfg(test)]
mod tests {
    #[test]
    fn xapic_mode_is_read_from_the_x2apic_flag_and_nox2apic() {
        let x2 = "processor\t: 0\nflags\t\t: fpu apic x2apic tsc_deadline_timer\n";
        let tcg = "processor\t: 0\nflags\t\t: fpu apic sse2 hypervisor\n";
        assert_eq!(super::xapic_reason(x2, "quiet"), None);
        let why = super::xapic_reason(tcg, "quiet").expect("no x2apic flag: xAPIC");
        assert!(
            why.contains("no x2apic flag") && why.contains("MMIO"),
            "{why}"
        );
        let off = super::xapic_reason(x2, "quiet nox2apic").expect("nox2apic: xAPIC");
        assert!(
            off.starts_with("the kernel command line has nox2apic"),
            "{off}"
        );
        // Not x86: no flags line, no such MSRs, nothing to say.
        assert_eq!(super::xapic_reason("Features\t: fp asimd\n", ""), None);
        // The TSC-deadline timer, by its own flag.
        assert_eq!(super::no_tsc_deadline_in(x2), None);
        let why = super::no_tsc_deadline_in(tcg).expect("no tsc_deadline_timer flag");
        assert!(why.contains("APIC timer"), "{why}");
        assert_eq!(super::no_tsc_deadline_in("Features\t: fp\n"), None);
    }

    use super::*;

    /// "Other" writes only against the full list of named registers: with a paravirtual
    /// counter missing it is absent and says why (it used to subtract whichever opened).
    #[test]
    fn other_writes_need_every_named_register() {
        let mut c: BTreeMap<String, u64> = X2APIC_WRITES
            .iter()
            .chain(PV_WRITES)
            .map(|k| ((*k).to_string(), 10))
            .collect();
        c.insert("msr_writes".into(), 100);
        let mut all = c.clone();
        assert_eq!(add_other_writes(&mut all), None);
        let named = (X2APIC_WRITES.len() + PV_WRITES.len()) as u64 * 10;
        assert_eq!(all.get("msr_write_other"), Some(&(100 - named)));
        c.remove("msr_write_kvm_pv_eoi");
        let why = add_other_writes(&mut c).expect("a reason");
        assert!(why.contains("msr_write_kvm_pv_eoi"), "{why}");
        assert!(!c.contains_key("msr_write_other"), "{c:?}");
        // Nothing to say when all writes were not counted either.
        let mut none = BTreeMap::new();
        assert_eq!(add_other_writes(&mut none), None);
    }

    /// Counts on this machine for real (root): a thread pinned to CPU 0 that switches
    /// context a known number of times is seen by `sched_switch` at least that often, and
    /// a tracepoint that does not exist is missing with its name, not zero.
    #[test]
    fn counts_real_tracepoints_or_says_why_not() {
        let specs = [
            spec("sched_switches", "sched/sched_switch", None),
            spec("made_up", "nosuch/tracepoint", None),
            spec("icr_writes", "msr/write_msr", Some("msr==0x830")),
        ];
        let c = Counters::open(&specs, &[0]);
        assert!(
            c.missing.iter().any(|m| m.starts_with("made_up:")),
            "{:?}",
            c.missing
        );
        if c.open.is_empty() {
            // Not root, or no tracefs: every counter says why.
            virtperf_testkit::skip("tracefs", &format!("the counting half: {:?}", c.missing));
            assert!(c.missing.len() >= 2, "{:?}", c.missing);
            return;
        }
        c.start();
        let t = std::thread::spawn(|| {
            let _ = rustix::thread::sched_setaffinity(None, &{
                let mut s = rustix::thread::CpuSet::new();
                s.set(0);
                s
            });
            for _ in 0..200 {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        });
        let _ = t.join();
        let (got, failed) = c.stop();
        assert!(failed.is_empty(), "{failed:?}");
        assert!(!got.contains_key("made_up"));
        let switches = got.get("sched_switches").copied().unwrap_or_default();
        assert!(
            switches >= 200,
            "200 sleeps on CPU 0, {switches} switches counted"
        );
    }

    /// No tracefs where it is looked for, and nowhere to mount it: one line naming the
    /// mount command, and every counter of a set missing with it (no zero anywhere).
    #[test]
    fn tracefs_absent_is_named_with_the_command() {
        let dir = std::env::temp_dir().join(format!("vp-notracefs-{}", std::process::id()));
        let err = tracefs_in(&[&dir], &dir.join("not-a-directory")).unwrap_err();
        assert!(err.contains("mount -t tracefs nodev"), "{err}");
        assert!(err.contains("not-a-directory"), "{err}");
        assert_eq!(err.lines().count(), 1);
    }

    /// A filter the kernel cannot parse is refused with its text, not silently dropped.
    #[test]
    fn a_bad_filter_is_named() {
        let c = Counters::open(&[spec("bad", "msr/write_msr", Some("msr=="))], &[0]);
        if c.missing
            .iter()
            .any(|m| m.contains("perf_event_open") || m.contains("tracefs"))
        {
            virtperf_testkit::skip("tracefs", &format!("{:?}", c.missing));
            return;
        }
        assert!(
            c.missing.iter().any(|m| m.contains("refused the filter")),
            "{:?}",
            c.missing
        );
    }
}
