//! Real `/dev/kvm` micro-benchmarks, without QEMU.
//!
//! Networking inside a VM is slow mostly because of what happens *around* the packets: exits to
//! the hypervisor, and the halt / interrupt / wake-up dance of an idle vCPU (see the KVM Forum
//! 2015 "message passing" talk in `shared/seeds`). This crate measures those two costs directly,
//! on the machine it runs on, with a tiny hand-assembled real-mode guest:
//!
//! - [`exits`]: the round trip of one exit to user space (port I/O, MMIO, HLT) timed from the
//!   host, and the cost of an exit handled inside KVM (CPUID) timed from the guest.
//! - [`halt`]: the latency from "the host raises an interrupt line" to "the halted guest runs its
//!   interrupt handler", with and without per-VM halt polling, plus what the vCPU thread burns
//!   for it and KVM's own per-vCPU counters ([`StatsFd`]).
//!
//! Everything is x86-64 only (real-mode guest code, `rdtsc`).

#![warn(missing_docs)]

mod error;
mod exits;
mod guest;
mod halt;
mod peek;
mod stats;
mod util;

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

pub use error::KvmError;
pub use exits::{exits, ExitCase, ExitOpts, ExitReport, HostTrace};
pub use halt::{halt, halt_until, HaltOpts, HaltReport};
pub use peek::ProcessStats;
pub use stats::StatsFd;

/// `KVM_CAP_HALT_POLL`: per-VM `KVM_ENABLE_CAP` of the maximum halt-poll window (ns).
pub(crate) const KVM_CAP_HALT_POLL: u32 = 182;
/// `KVM_CAP_BINARY_STATS_FD`: the kernel supports `KVM_GET_STATS_FD`.
const KVM_CAP_BINARY_STATS_FD: u64 = 203;

/// Distribution of one measured quantity. Percentiles come from an HdrHistogram with 3
/// significant digits (so they are exact to 0.1 %); `min`, `max` and `mean` are exact.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Smallest sample.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Summary {
    /// Summarises integer samples (ns or cycles); an empty slice gives all zeros rather than
    /// NaN so that JSON output stays valid.
    pub fn from_values(values: &[u64]) -> Summary {
        if values.is_empty() {
            return Summary::default();
        }
        // 3 significant digits: the resolution the rest of virtperf records latencies with.
        let Ok(mut h) = hdrhistogram::Histogram::<u64>::new(3) else {
            return Summary::default();
        };
        let mut min = u64::MAX;
        let mut max = 0u64;
        let mut sum = 0u128;
        for &v in values {
            // Auto-resizing histogram: recording can only fail for values it cannot represent,
            // which u64 nanoseconds/cycles from one run never reach; a miss would only blur a
            // percentile, the exact min/max/mean below still see every sample.
            let _ = h.record(v);
            min = min.min(v);
            max = max.max(v);
            sum += u128::from(v);
        }
        // A histogram quantile is the top of its bucket, which can exceed the exact max (or, in
        // principle, undercut the min); clamp so that min ≤ p50 ≤ p90 ≤ p99 ≤ max always holds.
        let q = |x: f64| h.value_at_quantile(x).clamp(min, max) as f64;
        Summary {
            min: min as f64,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            max: max as f64,
            mean: sum as f64 / values.len() as f64,
        }
    }
}

/// What [`available`] found out about this machine's KVM.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvmInfo {
    /// `KVM_GET_API_VERSION` (12 on every kernel since 2.6.22).
    pub api_version: i32,
    /// Which KVM flavour is loaded, from `/sys/module`: `vmx` (kvm_intel), `svm` (kvm_amd),
    /// `pvm` (kvm_pvm: nested, guest kernel/real mode is emulated), or `unknown`.
    pub platform: String,
    /// Per-VM halt polling can be set (`KVM_CAP_HALT_POLL`), so [`HaltOpts::halt_poll_ns`] works.
    pub halt_poll_cap: bool,
    /// `KVM_GET_STATS_FD` exists, so [`StatsFd`] and [`HaltReport::stats`] work.
    pub stats_fd: bool,
}

/// Opens `/dev/kvm` with the one-line error every entry point uses when it is missing, so a
/// caller sees the same explanation whether it asked for `available`, `exits` or `halt`.
pub(crate) fn open_kvm() -> Result<kvm_ioctls::Kvm, KvmError> {
    kvm_ioctls::Kvm::new().map_err(|e| {
        let errno = e.errno();
        let reason = util::strerror(errno);
        let hint = match errno {
            libc::EACCES | libc::EPERM => "run as root or as a member of the group owning /dev/kvm",
            _ => "run on a host or guest with KVM",
        };
        KvmError::Unavailable(format!("/dev/kvm is not available here ({reason}): {hint}"))
    })
}

/// Checks that `/dev/kvm` can be opened and reports what it supports; the error is one line
/// saying why not, suitable for printing as "skipped: …".
pub fn available() -> Result<KvmInfo, KvmError> {
    let kvm = open_kvm()?;
    let platform = if Path::new("/sys/module/kvm_pvm").exists() {
        "pvm"
    } else if Path::new("/sys/module/kvm_intel").exists() {
        "vmx"
    } else if Path::new("/sys/module/kvm_amd").exists() {
        "svm"
    } else {
        "unknown"
    };
    Ok(KvmInfo {
        api_version: kvm.get_api_version(),
        platform: platform.to_string(),
        halt_poll_cap: kvm.check_extension_raw(u64::from(KVM_CAP_HALT_POLL)) > 0,
        stats_fd: kvm.check_extension_raw(KVM_CAP_BINARY_STATS_FD) > 0,
    })
}

/// One reading of KVM's host-wide debugfs counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DebugfsSample {
    /// The counters read, by file name.
    pub counters: BTreeMap<String, u64>,
    /// The files that could not be read, with why (with debugfs mounted and no VM running,
    /// the vCPU-level files — `exits`, `halt_*` — answer EPERM on some kernels).
    pub refused: BTreeMap<String, String>,
}

/// Host-wide KVM counters from `/sys/kernel/debug/kvm/*` (these include every VM on the
/// machine, unlike [`StatsFd`], which sees only our own vCPU). Per-VM sub-directories are
/// skipped. debugfs is usually root-only or unmounted (and refused inside this project's
/// guests), so expect an `Err` with a one-line reason; a file that cannot be read while
/// others can is named in [`DebugfsSample::refused`], never left out unsaid.
pub fn debugfs_stats() -> Result<DebugfsSample, KvmError> {
    const DIR: &str = "/sys/kernel/debug/kvm";
    let entries = std::fs::read_dir(DIR).map_err(|e| {
        KvmError::Debugfs(format!(
            "cannot read {DIR} ({}): debugfs is not mounted or not readable here",
            util::io_reason(&e)
        ))
    })?;
    let mut out = DebugfsSample::default();
    for entry in entries.flatten() {
        let path = entry.path();
        if !path.is_file() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if let Ok(v) = text.trim().parse::<u64>() {
                    out.counters.insert(name, v);
                }
            }
            Err(e) => {
                out.refused.insert(name, util::io_reason(&e));
            }
        }
    }
    if !out.counters.is_empty() {
        return Ok(out);
    }
    match out.refused.values().next() {
        Some(why) => Err(KvmError::Debugfs(format!(
            "reading the files in {DIR} is refused ({why}): no host-wide KVM counters here"
        ))),
        None => Err(KvmError::Debugfs(format!(
            "{DIR} has no counters: KVM debugfs statistics are not exposed here"
        ))),
    }
}

/// KVM's counters for the VMs process `pid` holds, from its per-VM debugfs directories
/// (`/sys/kernel/debug/kvm/PID-FD/`, one per VM file descriptor `fds`), summed over them:
/// exits by kind and halt polling for that VM alone, even where KVM's tracepoints are
/// silent (PVM). Returns the directories read with the sample; an `Err` says why none
/// could be.
pub fn debugfs_vm_stats(pid: u32, fds: &[u32]) -> Result<(Vec<String>, DebugfsSample), KvmError> {
    const DIR: &str = "/sys/kernel/debug/kvm";
    if fds.is_empty() {
        return Err(KvmError::Debugfs(format!(
            "process {pid} holds no KVM VM (no anon_inode:kvm-vm among its file descriptors)"
        )));
    }
    let mut dirs = Vec::new();
    let mut out = DebugfsSample::default();
    for fd in fds {
        let dir = format!("{DIR}/{pid}-{fd}");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                out.refused.insert(dir, util::io_reason(&e));
                continue;
            }
        };
        dirs.push(dir);
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // vCPU sub-directories (`vcpu0/`) hold other kinds of files: the VM's own
            // files already sum its vCPUs.
            if !entry.path().is_file() {
                continue;
            }
            match std::fs::read_to_string(entry.path()) {
                Ok(text) => {
                    if let Ok(v) = text.trim().parse::<u64>() {
                        *out.counters.entry(name).or_default() += v;
                    }
                }
                Err(e) => {
                    out.refused.insert(name, util::io_reason(&e));
                }
            }
        }
    }
    if dirs.is_empty() {
        let why = out.refused.values().next().cloned().unwrap_or_default();
        return Err(KvmError::Debugfs(format!(
            "cannot read {DIR}/{pid}-* ({why}): debugfs is not mounted or not readable here (mount -t debugfs none /sys/kernel/debug, as root)"
        )));
    }
    Ok((dirs, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_known_values() {
        let v: Vec<u64> = (1..=100).collect();
        let s = Summary::from_values(&v);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 100.0);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p99, 99.0);
        assert!((s.mean - 50.5).abs() < 1e-9);
        assert_eq!(Summary::from_values(&[]), Summary::default());
    }

    #[test]
    fn debugfs_gives_a_value_or_one_line() {
        match debugfs_stats() {
            Ok(m) => assert!(!m.counters.is_empty()),
            Err(e) => assert!(!e.to_string().contains('\n'), "{e}"),
        }
    }

    #[test]
    fn available_error_is_one_line() {
        match available() {
            Ok(info) => assert!(info.api_version > 0),
            Err(e) => {
                let s = e.to_string();
                assert!(!s.contains('\n') && s.contains("/dev/kvm"), "{s}");
            }
        }
    }
}
