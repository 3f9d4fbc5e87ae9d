//! KVM's binary statistics of a VM another process runs, where that process holds them
//! open: its statistics descriptors (`anon_inode:kvm-vcpu-stats:N`) are duplicated into
//! this process with `pidfd_getfd(2)` (Linux 5.8+; needs ptrace access: root, or the same
//! user where Yama allows) and read like our own. Asking for new ones is not possible from
//! outside: KVM answers every vCPU ioctl from another process with EIO (the VM belongs to
//! the process whose memory it maps). Per-vCPU counters (`exits`, `halt_exits`,
//! `halt_successful_poll`, `halt_wait_ns`, …) of one VM where debugfs is refused (this
//! project's machines refuse it).

use std::collections::BTreeMap;
use std::os::fd::{FromRawFd, OwnedFd};

use crate::stats::StatsFd;
use crate::KvmError;

/// The statistics of every vCPU of the VMs process `pid` holds, kept open between reads.
#[derive(Debug)]
pub struct ProcessStats {
    vcpus: Vec<StatsFd>,
}

impl ProcessStats {
    /// Duplicates process `pid`'s vCPU descriptors (`anon_inode:kvm-vcpu:N`) and opens
    /// their statistics. An `Err` says in one line why none could be.
    pub fn open(pid: u32) -> Result<ProcessStats, KvmError> {
        let (vcpus, stats) = (
            fds_named(pid, "anon_inode:kvm-vcpu:"),
            fds_named(pid, "anon_inode:kvm-vcpu-stats:"),
        );
        if stats.is_empty() {
            return Err(KvmError::Stats(if vcpus.is_empty() {
                format!("process {pid} holds no KVM vCPU (none among its file descriptors, or /proc/{pid}/fd is not readable)")
            } else {
                format!("process {pid} holds {} vCPU{} but no statistics descriptor to share (KVM gives one only to the VM's own process: KVM_GET_STATS_FD from another answers EIO)", vcpus.len(), if vcpus.len() == 1 { "" } else { "s" })
            }));
        }
        let pidfd = pidfd_open(pid)?;
        let vcpus = stats
            .into_iter()
            .map(|fd| pidfd_getfd(&pidfd, fd).map(StatsFd::from_stats))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ProcessStats { vcpus })
    }

    /// vCPUs read.
    pub fn vcpus(&self) -> usize {
        self.vcpus.len()
    }

    /// The cumulative counters now, summed over the vCPUs.
    pub fn read(&mut self) -> Result<BTreeMap<String, u64>, KvmError> {
        let mut sum = BTreeMap::new();
        for v in &mut self.vcpus {
            for e in v.read_entries()? {
                if e.cumulative {
                    *sum.entry(e.name).or_default() += e.value;
                }
            }
        }
        Ok(sum)
    }
}

/// Process `pid`'s file descriptors whose link is `prefix` and a number (`anon_inode:
/// kvm-vcpu:0`).
fn fds_named(pid: u32, prefix: &str) -> Vec<i32> {
    let Ok(d) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    let mut fds: Vec<i32> = d
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|l| {
                l.to_string_lossy()
                    .strip_prefix(prefix)
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
        })
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    fds.sort_unstable();
    fds
}

fn pidfd_open(pid: u32) -> Result<OwnedFd, KvmError> {
    // SAFETY: pidfd_open takes a PID and flags and returns a new fd or -1. libc has the
    // syscall number but no wrapper on every target, so it is called directly.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if rc < 0 {
        return Err(KvmError::Stats(format!(
            "pidfd_open({pid}): {}",
            std::io::Error::last_os_error()
        )));
    }
    // SAFETY: the kernel just returned this descriptor; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
}

fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, KvmError> {
    use std::os::fd::AsRawFd;
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number in that process and flags
    // (0), and returns a new descriptor here or -1.
    let rc = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return Err(KvmError::Stats(format!(
            "pidfd_getfd: {e}{}",
            if e.raw_os_error() == Some(libc::EPERM) {
                " (reading another process's vCPU needs ptrace access to it: run as root)"
            } else {
                ""
            }
        )));
    }
    // SAFETY: as in pidfd_open.
    Ok(unsafe { OwnedFd::from_raw_fd(rc as i32) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that holds no vCPU is refused, saying so.
    #[test]
    fn a_process_without_a_vcpu_is_refused_by_name() {
        let e = ProcessStats::open(std::process::id()).expect_err("no vCPU here");
        assert!(e.to_string().contains("holds no KVM vCPU"), "{e}");
    }
}
