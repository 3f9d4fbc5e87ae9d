//! Every other process's CPU on this machine over an interval: the work beside a test,
//! counted whole. /proc/stat's user and system fields are charged a tick at a time, and
//! where CPUs idle and wake thousands of times a second most busy time goes uncharged
//! (`CpuTimes::unsampled`), so "all user and system time less the test's threads" read
//! 4.7% of a CPU beside a neighbour using 47% in a cross-CPU round trip on a 2-vCPU
//! guest. A process's utime + stime (/proc/PID/stat) add up to its exact runtime (the
//! kernel scales its tick samples to it), so their sum misses nothing that ran.
//!
//! Kernel threads are left out (the network stack's softirq work in `ksoftirqd`, the
//! test's own as much as anyone's), and so are processes that exited inside the interval
//! (their time is gone from /proc): what is counted is a floor.

use std::collections::HashMap;

use crate::cpu::ticks_per_second;

/// The kernel's flag on a kernel thread (`PF_KTHREAD`, include/linux/sched.h).
const PF_KTHREAD: u64 = 0x0020_0000;

/// Each user-space process's CPU so far, but one: (start time, utime + stime) in clock
/// ticks, by PID.
#[derive(Debug, Clone, Default)]
pub struct Processes {
    cpu: HashMap<u32, (u64, u64)>,
}

impl Processes {
    /// Reads every process under /proc now except `exclude` (the caller's own) and
    /// kernel threads. Processes that vanish while read are skipped.
    pub fn read(exclude: u32) -> Processes {
        let mut cpu = HashMap::new();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Processes { cpu };
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if pid == exclude {
                continue;
            }
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            if let Some(c) = user_cpu(&stat) {
                cpu.insert(pid, c);
            }
        }
        Processes { cpu }
    }

    /// CPU seconds the processes read now used since `earlier`: a process in both by the
    /// same start time counts its difference, one started since counts all of its time.
    pub fn cpu_s_since(&self, earlier: &Processes) -> f64 {
        self.split_since(earlier, &[]).0
    }

    /// [`Self::cpu_s_since`] in two parts: every process but `own`, and `own` (the test's
    /// own tools, such as its capture's recorder).
    pub fn split_since(&self, earlier: &Processes, own: &[u32]) -> (f64, f64) {
        let (mut others, mut mine) = (0u64, 0u64);
        for (pid, (start, now)) in &self.cpu {
            let used = match earlier.cpu.get(pid) {
                Some((s, before)) if s == start => now.saturating_sub(*before),
                // A new process (or a reused PID): all of its time is inside the interval.
                _ => *now,
            };
            if own.contains(pid) {
                mine += used;
            } else {
                others += used;
            }
        }
        let secs = |t: u64| t as f64 / ticks_per_second();
        (secs(others), secs(mine))
    }
}

/// (start time, utime + stime) of a user-space process's `/proc/PID/stat` line; None for
/// a kernel thread or a line that does not parse.
fn user_cpu(stat: &str) -> Option<(u64, u64)> {
    let f = crate::cpu::stat_fields(stat)?;
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    // After the name: state 0, flags 6, utime 11, stime 12, starttime 19.
    if n(6)? & PF_KTHREAD != 0 {
        return None;
    }
    Some((n(19)?, n(11)? + n(12)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(name: &str, flags: u64, utime: u64, stime: u64, start: u64) -> String {
        format!(
            "42 ({name}) S 1 42 42 0 -1 {flags} 10 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 1000 10"
        )
    }

    /// A user process gives its start and its utime + stime, whatever its name holds; a
    /// kernel thread and a cut line give nothing.
    #[test]
    fn a_stat_line_gives_a_user_process_its_cpu() {
        assert_eq!(
            user_cpu(&stat("a (b) c", 0x0040_0100, 7, 5, 900)),
            Some((900, 12))
        );
        assert_eq!(user_cpu(&stat("kworker/0:1", 0x0420_8040, 7, 5, 9)), None);
        assert_eq!(user_cpu("42 (cut) S 1 42"), None);
        assert_eq!(user_cpu(""), None);
    }

    /// A process in both reads counts its difference, a new one (or a PID reused by
    /// another start) all of its time, a gone one nothing.
    #[test]
    fn the_interval_counts_differences_and_new_processes_whole() {
        let hz = ticks_per_second();
        let earlier = Processes {
            cpu: HashMap::from([(1, (100, 50)), (2, (100, 10)), (3, (100, 5))]),
        };
        let later = Processes {
            cpu: HashMap::from([(1, (100, 80)), (2, (300, 4)), (4, (400, 6))]),
        };
        assert!((later.cpu_s_since(&earlier) * hz - 40.0).abs() < 1e-9);
    }

    /// This process is left out, and a busy child it starts is counted.
    #[test]
    fn a_spinning_child_is_counted_and_the_reader_is_not() {
        let me = std::process::id();
        let before = Processes::read(me);
        assert!(!before.cpu.contains_key(&me));
        // A loop of a few seconds, killed once read: bounded should this test die first.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("sh");
        let pid = child.id();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let during = Processes::read(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            during.cpu.contains_key(&pid),
            "the child {pid} was not read"
        );
        assert!(during.cpu_s_since(&before) >= 0.05, "{during:?}");
    }
}
