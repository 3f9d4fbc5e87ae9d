//! A VM seen from its host: which process runs it (`--vm pid:N | qemu:NAME |
//! libvirt:DOMAIN | firecracker:PID`), its threads by class (vCPU, vhost, I/O, main loop),
//! and each thread's CPU time, run-queue wait and switches from `/proc`, so the host's share
//! of a guest's cost is counted over exactly a test's window.
//!
//! No libvirt or QMP library: libvirt writes its QEMU's PID to `/run/libvirt/qemu/DOM.pid`
//! and starts QEMU with `-name guest=DOM,debug-threads=on`, which names the vCPU threads
//! `CPU n/KVM` (or `/TCG`); Firecracker names its `fc_vcpu n`. That is all this needs.

use std::collections::BTreeMap;
use std::path::Path;

/// How the user named the VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmSpec {
    /// Any process that runs a VM.
    Pid(u32),
    /// The QEMU whose `-name` (or libvirt's `-name guest=NAME`) is this.
    Qemu(String),
    /// A libvirt domain (its PID from `/run/libvirt/qemu/DOMAIN.pid`).
    Libvirt(String),
    /// A Firecracker microVM's process.
    Firecracker(u32),
}

impl std::str::FromStr for VmSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let usage = "give pid:N, qemu:NAME, libvirt:DOMAIN or firecracker:PID";
        let (kind, rest) = s.split_once(':').ok_or_else(|| format!("{s:?}: {usage}"))?;
        let pid = |r: &str| {
            r.parse::<u32>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{s:?}: {r:?} is not a process ID ({usage})"))
        };
        let name = |r: &str| {
            if r.is_empty() {
                Err(format!("{s:?}: give a name after the colon ({usage})"))
            } else if r.contains('/') || r == "." || r == ".." {
                Err(format!(
                    "{s:?}: {r:?} is not a name (a libvirt domain or QEMU -name holds no '/'; for a process, pid:N)"
                ))
            } else {
                Ok(r.to_string())
            }
        };
        match kind {
            "pid" => pid(rest).map(VmSpec::Pid),
            "firecracker" => pid(rest).map(VmSpec::Firecracker),
            "qemu" => name(rest).map(VmSpec::Qemu),
            "libvirt" => name(rest).map(VmSpec::Libvirt),
            _ => Err(format!("{s:?}: unknown kind {kind:?} ({usage})")),
        }
    }
}

impl std::fmt::Display for VmSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VmSpec::Pid(p) => write!(f, "pid:{p}"),
            VmSpec::Qemu(n) => write!(f, "qemu:{n}"),
            VmSpec::Libvirt(d) => write!(f, "libvirt:{d}"),
            VmSpec::Firecracker(p) => write!(f, "firecracker:{p}"),
        }
    }
}

/// The VM's process on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmProcess {
    /// The VM process's PID.
    pub pid: u32,
    /// `qemu`, `firecracker`, or the process's own name.
    pub vmm: String,
    /// Kernel threads serving it from outside its thread group (vhost workers on kernels
    /// before 6.4 are `vhost-PID` kernel threads).
    pub helpers: Vec<u32>,
}

/// Where libvirt's QEMU driver records each running domain's PID.
const LIBVIRT_RUN: &str = "/run/libvirt/qemu";

/// Finds the VM `spec` names, or says in one line why it cannot.
pub fn find(spec: &VmSpec) -> Result<VmProcess, String> {
    let pid = match spec {
        VmSpec::Pid(p) | VmSpec::Firecracker(p) => *p,
        VmSpec::Libvirt(d) => {
            let path = format!("{LIBVIRT_RUN}/{d}.pid");
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!("libvirt:{d}: cannot read {path} ({e}): is the domain running here (virsh list), and are you root?")
            })?;
            text.trim()
                .parse()
                .map_err(|_| format!("libvirt:{d}: {path} holds no PID"))?
        }
        VmSpec::Qemu(n) => qemu_named(n)?,
    };
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).map_err(|_| {
        format!("{spec}: no process {pid} here (it exited, or runs on another host)")
    })?;
    let comm = comm.trim().to_string();
    let vmm = if comm.starts_with("qemu") {
        "qemu".to_string()
    } else if comm.starts_with("firecracker") {
        "firecracker".to_string()
    } else {
        comm
    };
    if matches!(spec, VmSpec::Firecracker(_)) && vmm != "firecracker" {
        return Err(format!(
            "{spec}: process {pid} is {vmm:?}, not Firecracker (use pid:{pid})"
        ));
    }
    if !alive(pid) {
        return Err(format!("{spec}: process {pid} has exited"));
    }
    // Watching a process that runs no VM would report a window with nothing in it.
    if vmm != "qemu" && vmm != "firecracker" && kvm_vm_fds(pid).is_empty() {
        return Err(format!(
            "{spec}: process {pid} ({vmm}) is not a VM: it holds no KVM VM and is neither QEMU nor Firecracker (give the VMM's PID, e.g. `pgrep -f qemu-system`; as root to see another user's descriptors)"
        ));
    }
    Ok(VmProcess {
        pid,
        vmm,
        helpers: vhost_kthreads(pid),
    })
}

/// Whether process `pid` still runs: it exists and is not a zombie (exited, not yet
/// reaped), whose /proc entries outlive it.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        // The state follows the parenthesised command name, which may hold spaces.
        s.rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|st| st != "Z" && st != "X")
    })
}

/// The PID of the one QEMU whose `-name` is `name` (`-name NAME,…` or libvirt's `-name
/// guest=NAME,…`).
fn qemu_named(name: &str) -> Result<u32, String> {
    let mut found = Vec::new();
    for pid in pids() {
        let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = raw.split(|b| *b == 0).collect();
        let is_qemu = args.first().is_some_and(|a| {
            Path::new(&*String::from_utf8_lossy(a))
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("qemu"))
        });
        if !is_qemu {
            continue;
        }
        let named = args.windows(2).any(|w| {
            w[0] == b"-name" && {
                let v = String::from_utf8_lossy(w[1]);
                let first = v.split(',').next().unwrap_or("");
                first == name || first.strip_prefix("guest=") == Some(name)
            }
        });
        if named {
            found.push(pid);
        }
    }
    match found.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!("qemu:{name}: no QEMU process here has -name {name} (ps -ef | grep qemu; or give pid:N)")),
        many => Err(format!("qemu:{name}: {} QEMU processes have -name {name} ({many:?}): give pid:N", many.len())),
    }
}

fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `vhost-PID` kernel threads outside the process (kernels before 6.4 ran vhost workers
/// as kernel threads; since, they are threads of the VM process and found with it).
fn vhost_kthreads(pid: u32) -> Vec<u32> {
    let want = format!("vhost-{pid}");
    pids()
        .into_iter()
        .filter(|p| {
            *p != pid
                && std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == want)
        })
        .collect()
}

/// The class of a VM process's thread by its name: `vcpu` (`CPU 0/KVM`, `CPU 1/TCG`,
/// `fc_vcpu 0`), `vhost` (`vhost-PID`), `io` (QEMU's `IO …` iothreads and `worker` pool,
/// `iou-wrk`), `main` (the process's first thread: QEMU's main loop, Firecracker's VMM),
/// else `other`.
pub fn class_of(comm: &str, tid: u32, pid: u32) -> &'static str {
    let vcpu = (comm.starts_with("CPU ")
        && (comm.ends_with("/KVM") || comm.ends_with("/TCG") || comm.ends_with("/HVF")))
        || comm.starts_with("fc_vcpu");
    if vcpu {
        "vcpu"
    } else if comm.starts_with("vhost-") {
        "vhost"
    } else if comm.starts_with("IO ") || comm == "worker" || comm.starts_with("iou-wrk") {
        "io"
    } else if tid == pid {
        "main"
    } else {
        "other"
    }
}

/// One thread's counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ThreadSample {
    /// Thread ID.
    pub tid: u32,
    /// Its name.
    pub comm: String,
    /// Its class ([`class_of`]).
    pub class: &'static str,
    /// User and system time, clock ticks (`stat` fields 14 and 15).
    pub utime: u64,
    /// See `utime`.
    pub stime: u64,
    /// Nanoseconds on a CPU and waiting in a run queue (`schedstat`); `None` without it.
    pub exec_ns: Option<u64>,
    /// See `exec_ns`.
    pub run_delay_ns: Option<u64>,
    /// Voluntary and involuntary context switches (`status`).
    pub voluntary: u64,
    /// See `voluntary`.
    pub involuntary: u64,
    /// CPU migrations (`sched`'s `se.nr_migrations`), where the kernel shows them.
    pub migrations: Option<u64>,
    /// When it started, clock ticks since boot (`stat` field 22); `None` where unread.
    pub start_ticks: Option<u64>,
}

/// Clock ticks since boot now (`/proc/uptime`), to compare with a thread's start.
pub fn uptime_ticks() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/uptime").ok()?;
    let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some((secs * crate::cpu::ticks_per_second()) as u64)
}

/// Every thread of the VM process (and its vhost kernel threads) now. A thread that exits
/// while being read is left out; the process gone is an error.
pub fn sample(vm: &VmProcess) -> Result<Vec<ThreadSample>, String> {
    // An exited process its parent has not reaped yet (a zombie) still has /proc entries,
    // frozen: it has exited all the same.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", vm.pid)).unwrap_or_default();
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    if matches!(state, Some("Z" | "X")) {
        return Err(format!("process {} has exited", vm.pid));
    }
    let dir = format!("/proc/{}/task", vm.pid);
    let tasks = std::fs::read_dir(&dir)
        .map_err(|e| format!("cannot read {dir} ({e}): the VM process exited?"))?;
    let mut out: Vec<ThreadSample> = tasks
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(|tid| thread(vm.pid, tid, vm.pid))
        .collect();
    out.extend(vm.helpers.iter().filter_map(|k| thread(*k, *k, vm.pid)));
    Ok(out)
}

fn thread(pid: u32, tid: u32, vm_pid: u32) -> Option<ThreadSample> {
    let base = format!("/proc/{pid}/task/{tid}");
    let comm = std::fs::read_to_string(format!("{base}/comm")).ok()?;
    let comm = comm.trim().to_string();
    let stat = std::fs::read_to_string(format!("{base}/stat")).ok()?;
    // Fields after the command name, which may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): utime is field 14, stime 15.
    let utime = f.get(11)?.parse().ok()?;
    let stime = f.get(12)?.parse().ok()?;
    let start_ticks = f.get(19).and_then(|v| v.parse().ok());
    let (exec_ns, _) = crate::cpu::schedstat_ns(&format!("{base}/schedstat"));
    // A thread whose switches cannot be read is left out like one whose times cannot.
    let sched = crate::cpu::sched_counts_at(&base)?;
    let class = if pid == vm_pid {
        class_of(&comm, tid, vm_pid)
    } else {
        "vhost"
    };
    Some(ThreadSample {
        tid,
        class,
        utime,
        stime,
        exec_ns,
        run_delay_ns: sched.run_delay_ns,
        voluntary: sched.voluntary,
        involuntary: sched.involuntary,
        migrations: sched.migrations,
        comm,
        start_ticks,
    })
}

/// The accelerator the process runs its VM with: `kvm` where it holds a KVM VM file
/// descriptor, `tcg` where its vCPU threads are named so; `None` where neither tells.
pub fn accel(vm: &VmProcess, threads: &[ThreadSample]) -> Option<&'static str> {
    if !kvm_vm_fds(vm.pid).is_empty() {
        return Some("kvm");
    }
    threads
        .iter()
        .any(|t| t.class == "vcpu" && t.comm.ends_with("/TCG"))
        .then_some("tcg")
}

/// The process's KVM VM file descriptors (`anon_inode:kvm-vm`): KVM's debugfs names each
/// VM's directory `PID-FD`.
pub fn kvm_vm_fds(pid: u32) -> Vec<u32> {
    fd_links(pid)
        .into_iter()
        .filter(|(_, l)| l == "anon_inode:kvm-vm")
        .map(|(fd, _)| fd)
        .collect()
}

/// Process `pid`'s open descriptors and what each names (`socket:[123]`,
/// `anon_inode:kvm-vm`, a path), in no particular order; empty where /proc does not show
/// them (the process is gone, or not ours to read).
pub fn fd_links(pid: u32) -> Vec<(u32, String)> {
    let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    d.flatten()
        .filter_map(|e| {
            let fd = e.file_name().to_string_lossy().parse().ok()?;
            let link = std::fs::read_link(e.path()).ok()?;
            Some((fd, link.to_string_lossy().into_owned()))
        })
        .collect()
}

/// Whether a thread absent from the opening sample was born after it (taken at
/// `opened`, clock ticks since boot): only then is its whole life inside the window.
fn born_inside(t: &ThreadSample, opened: Option<u64>) -> bool {
    matches!((t.start_ticks, opened), (Some(s), Some(o)) if s >= o)
}

/// Per-class totals of the change from `before` (taken at `opened`, clock ticks since
/// boot) to `after`. A thread born in between counts from zero; one that was alive before
/// the opening sample but missing from it (or whose start is unknown) is left out, its CPU
/// before the window unknown ([`unseen_at_open`] names them); one gone is dropped (its last
/// figures are unknown).
pub fn by_class(
    before: &[ThreadSample],
    after: &[ThreadSample],
    opened: Option<u64>,
) -> BTreeMap<&'static str, ClassDelta> {
    let mut out: BTreeMap<&'static str, ClassDelta> = BTreeMap::new();
    for a in after {
        let b = before.iter().find(|b| b.tid == a.tid);
        if b.is_none() && !born_inside(a, opened) {
            continue;
        }
        let zero = ThreadSample::default();
        let b = b.unwrap_or(&zero);
        let d = out.entry(a.class).or_default();
        d.names.push(a.comm.clone());
        d.utime += a.utime.saturating_sub(b.utime);
        d.stime += a.stime.saturating_sub(b.stime);
        d.exec_ns = add(d.exec_ns, a.exec_ns, b.exec_ns.or(Some(0)));
        d.run_delay_ns = add(d.run_delay_ns, a.run_delay_ns, b.run_delay_ns.or(Some(0)));
        d.voluntary += a.voluntary.saturating_sub(b.voluntary);
        d.involuntary += a.involuntary.saturating_sub(b.involuntary);
        d.migrations = add(d.migrations, a.migrations, b.migrations.or(Some(0)));
    }
    out
}

/// The threads [`by_class`] leaves out: in `after`, not in `before`, and not born after
/// `opened` (their whole life's CPU would otherwise land in one window).
pub fn unseen_at_open<'a>(
    before: &[ThreadSample],
    after: &'a [ThreadSample],
    opened: Option<u64>,
) -> Vec<&'a ThreadSample> {
    after
        .iter()
        .filter(|a| !before.iter().any(|b| b.tid == a.tid) && !born_inside(a, opened))
        .collect()
}

/// Clock ticks (`stat`'s times) in seconds.
pub fn ticks_s(ticks: u64) -> f64 {
    ticks as f64 / crate::cpu::ticks_per_second()
}

/// `sum + (after − before)`, unknown as soon as one figure is.
fn add(sum: Option<u64>, after: Option<u64>, before: Option<u64>) -> Option<u64> {
    Some(sum? + after?.saturating_sub(before?))
}

/// One class's change over a window.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassDelta {
    /// Thread names, one per thread.
    pub names: Vec<String>,
    /// Clock ticks of user and system time.
    pub utime: u64,
    /// See `utime`.
    pub stime: u64,
    /// Nanoseconds on a CPU, and runnable but waiting for one.
    pub exec_ns: Option<u64>,
    /// See `exec_ns`.
    pub run_delay_ns: Option<u64>,
    /// Context switches.
    pub voluntary: u64,
    /// See `voluntary`.
    pub involuntary: u64,
    /// CPU migrations.
    pub migrations: Option<u64>,
}

impl Default for ClassDelta {
    fn default() -> Self {
        ClassDelta {
            names: Vec::new(),
            utime: 0,
            stime: 0,
            exec_ns: Some(0),
            run_delay_ns: Some(0),
            voluntary: 0,
            involuntary: 0,
            migrations: Some(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way of naming a VM parses, and a bad one is refused saying what to give.
    #[test]
    fn specs_parse_or_say_what_to_give() {
        assert_eq!("pid:42".parse(), Ok(VmSpec::Pid(42)));
        assert_eq!("qemu:web1".parse(), Ok(VmSpec::Qemu("web1".into())));
        assert_eq!("libvirt:db".parse(), Ok(VmSpec::Libvirt("db".into())));
        assert_eq!("firecracker:7".parse(), Ok(VmSpec::Firecracker(7)));
        for bad in ["42", "pid:0", "pid:x", "qemu:", "libvirt:../etc", "xen:3"] {
            let e = bad.parse::<VmSpec>().expect_err(bad);
            assert!(e.contains("pid:N"), "{bad}: {e}");
        }
        assert_eq!(VmSpec::Qemu("a".into()).to_string(), "qemu:a");
        // A path is not "no name": it is said to be no name (issue 53).
        let e = "libvirt:../../etc/passwd"
            .parse::<VmSpec>()
            .expect_err("path");
        assert!(
            e.contains("is not a name") && !e.contains("give a name after"),
            "{e}"
        );
    }

    /// A thread first seen at the close counts from zero only when it was born after the
    /// opening sample; one alive before it (missed by it) is left out and named, not
    /// charged its whole life's CPU (issue 52).
    #[test]
    fn a_thread_missed_at_the_open_is_not_charged_its_whole_life() {
        let t = |tid: u32, utime: u64, start: Option<u64>| ThreadSample {
            tid,
            comm: format!("CPU {tid}/KVM"),
            class: "vcpu",
            utime,
            start_ticks: start,
            ..ThreadSample::default()
        };
        let before = vec![t(1, 100, Some(10))];
        let after = vec![
            t(1, 150, Some(10)),
            t(2, 40, Some(1000)),
            t(3, 9000, Some(20)),
        ];
        let d = by_class(&before, &after, Some(500));
        assert_eq!(d["vcpu"].utime, 50 + 40, "{d:?}");
        let unseen: Vec<u32> = unseen_at_open(&before, &after, Some(500))
            .iter()
            .map(|t| t.tid)
            .collect();
        assert_eq!(unseen, [3]);
        // Without the opening's time no new thread can be placed: none counted.
        assert_eq!(by_class(&before, &after, None)["vcpu"].utime, 50);
    }

    /// Thread names map to classes as QEMU, libvirt and Firecracker name them.
    #[test]
    fn threads_are_classed_by_the_names_vmms_give_them() {
        assert_eq!(class_of("CPU 0/KVM", 11, 10), "vcpu");
        assert_eq!(class_of("CPU 3/TCG", 11, 10), "vcpu");
        assert_eq!(class_of("fc_vcpu 1", 11, 10), "vcpu");
        assert_eq!(class_of("vhost-10", 12, 10), "vhost");
        assert_eq!(class_of("IO mon_iothread", 13, 10), "io");
        assert_eq!(class_of("worker", 14, 10), "io");
        assert_eq!(class_of("qemu-system-x86", 10, 10), "main");
        assert_eq!(class_of("call_rcu", 15, 10), "other");
    }

    /// This process's own threads sample with real counters, and the change over some
    /// work is attributed to the class of the thread that did it.
    #[test]
    fn samples_this_process_and_attributes_the_change() {
        let me = VmProcess {
            pid: std::process::id(),
            vmm: "test".into(),
            helpers: Vec::new(),
        };
        let before = sample(&me).expect("own threads");
        assert!(!before.is_empty());
        let t0 = std::time::Instant::now();
        let mut x = 0u64;
        while t0.elapsed() < std::time::Duration::from_millis(200) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        std::hint::black_box(x);
        let after = sample(&me).expect("own threads");
        let d = by_class(&before, &after, None);
        let ticks: u64 = d.values().map(|c| c.utime + c.stime).sum();
        if before.iter().all(|t| t.exec_ns.is_some()) {
            // A spinning thread is on a CPU or waiting for one: the two cover its 200 ms
            // whatever else the machine runs.
            let ran: u64 = d.values().filter_map(|c| c.exec_ns).sum();
            let waited: u64 = d.values().filter_map(|c| c.run_delay_ns).sum();
            assert!(ran + waited >= 190_000_000, "{d:?}");
            // The scheduler's exact runtime and stat's ticks tell the same story.
            let ticks_ns = ticks_s(ticks) * 1e9;
            assert!((ticks_ns - ran as f64).abs() <= 40e6, "{d:?}");
        }
        assert!(
            ticks >= 1,
            "200 ms of spinning shows in stat's ticks: {d:?}"
        );
    }
}
