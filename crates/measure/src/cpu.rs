//! CPU accounting: system-wide /proc/stat deltas and per-thread rusage.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use nix::sys::resource::{getrusage, UsageWho};
use nix::sys::time::TimeVal;
use virtperf_wire::{CpuDelta, CpuShares, CpuSplit, CpuTimes, ThreadCpu};

/// Raw /proc/stat counters (clock ticks) for every CPU, with the instant they were read.
#[derive(Debug, Clone)]
pub struct ProcStat {
    at: Instant,
    /// Per CPU: user nice system idle iowait irq softirq steal guest guest_nice.
    cpus: Vec<[u64; 10]>,
}

impl ProcStat {
    /// Reads /proc/stat now.
    pub fn read() -> Result<ProcStat> {
        let text = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
        Self::parse(&text)
    }

    /// Parses the text of /proc/stat (the per-CPU `cpuN` lines).
    pub fn parse(text: &str) -> Result<ProcStat> {
        let mut cpus = Vec::new();
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let Some(name) = it.next() else { continue };
            // Skip the aggregate "cpu" line: we sum per-CPU lines ourselves so the total and
            // the parts always agree.
            if !name.starts_with("cpu") || name == "cpu" {
                continue;
            }
            let mut v = [0u64; 10];
            for (slot, field) in v.iter_mut().zip(it) {
                *slot = field
                    .parse()
                    .with_context(|| format!("bad /proc/stat field {field:?} in {name}"))?;
            }
            cpus.push(v);
        }
        if cpus.is_empty() {
            bail!("/proc/stat lists no CPUs");
        }
        Ok(ProcStat {
            at: Instant::now(),
            cpus,
        })
    }

    /// CPU time between `self` (earlier) and `later`, in seconds. Where a CPU's fields
    /// fall short of the wall clock by more than [`RESOLUTION_TICKS`], the rest is its
    /// [`CpuTimes::unsampled`] busy time.
    pub fn delta(&self, later: &ProcStat) -> CpuDelta {
        let tick = ticks_per_second();
        let wall_s = later.at.saturating_duration_since(self.at).as_secs_f64();
        let per_cpu: Vec<CpuTimes> = self
            .cpus
            .iter()
            .zip(&later.cpus)
            .map(|(a, b)| {
                let d = |i: usize| b[i].saturating_sub(a[i]) as f64 / tick;
                let mut c = CpuTimes {
                    user: d(0),
                    nice: d(1),
                    system: d(2),
                    idle: d(3),
                    iowait: d(4),
                    irq: d(5),
                    softirq: d(6),
                    steal: d(7),
                    guest: d(8),
                    guest_nice: d(9),
                    unsampled: 0.0,
                };
                c.unsampled = unsampled_s(wall_s, c.total(), tick);
                c
            })
            .collect();
        let mut total = CpuTimes::default();
        for c in &per_cpu {
            total.user += c.user;
            total.nice += c.nice;
            total.system += c.system;
            total.idle += c.idle;
            total.iowait += c.iowait;
            total.irq += c.irq;
            total.softirq += c.softirq;
            total.steal += c.steal;
            total.guest += c.guest;
            total.guest_nice += c.guest_nice;
            total.unsampled += c.unsampled;
        }
        CpuDelta {
            wall_s,
            ncpus: per_cpu.len() as u32,
            total,
            per_cpu,
        }
    }
}

/// How far, in clock ticks, one CPU's /proc/stat fields may fall short of the wall clock
/// before the shortfall counts as busy time: each field is its kernel time cut to whole
/// ticks at both reads, so an idle or a fully busy CPU reads up to ±2 ticks off (±1 in 40
/// idle 300 ms windows and −2…+1 beside a busy loop on a 2-vCPU guest, 2026-11-29), while
/// a CPU waking 10 000 times a second fell short by 17–22 ticks a second.
pub const RESOLUTION_TICKS: f64 = 2.0;

/// The busy time one CPU's tick never sampled: the wall clock less what its fields
/// accounted, where that exceeds [`RESOLUTION_TICKS`]; 0 otherwise. The kernel (`NO_HZ`,
/// tick-based accounting) times idle exactly and charges busy time a tick at a time, so
/// a shortfall is busy time no tick landed in.
fn unsampled_s(wall_s: f64, accounted_s: f64, ticks_per_s: f64) -> f64 {
    let short = wall_s - accounted_s;
    if short > RESOLUTION_TICKS / ticks_per_s {
        short
    } else {
        0.0
    }
}

/// /proc/stat's and /proc/PID/stat's unit, ticks per second (`USER_HZ`, 100 on Linux);
/// 100 where sysconf does not say.
pub fn ticks_per_second() -> f64 {
    // sysconf(_SC_CLK_TCK): the kernel's AT_CLKTCK from the auxiliary vector.
    let t = rustix::param::clock_ticks_per_second();
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// User plus system CPU seconds process `pid` has used so far (`/proc/PID/stat`, all its
/// threads), for processes that are not ours to `getrusage`, such as a QEMU we started.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f = stat_fields(&stat)?;
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the name.
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / ticks_per_second())
}

/// The fields of a `/proc/PID/stat` line after the command name (state first). The name
/// may hold spaces and parentheses: the fields start after the last ')'.
pub(crate) fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    Some(
        stat.get(stat.rfind(')')? + 2..)?
            .split_whitespace()
            .collect(),
    )
}

/// The 1-minute load average (`/proc/loadavg`), or None where it cannot be read.
pub fn loadavg_1m() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn pct(part: f64, whole: f64) -> f64 {
    if whole > 0.0 {
        100.0 * part / whole
    } else {
        0.0
    }
}

/// `c`'s time by kind, in percent of its whole.
fn shares(c: &CpuTimes) -> CpuShares {
    let all = c.total();
    CpuShares {
        user_pct: pct(c.host_user(), all),
        system_pct: pct(c.system, all),
        irq_pct: pct(c.irq, all),
        softirq_pct: pct(c.softirq, all),
        steal_pct: pct(c.steal, all),
        guest_pct: pct(c.guest + c.guest_nice, all),
        idle_pct: pct(c.idle + c.iowait, all),
        unsampled_pct: pct(c.unsampled, all),
    }
}

/// Percent split of a system-wide delta. Percentages are of all CPUs' time as counted by
/// the kernel, the unsampled busy time included (so of the wall clock × CPUs, to the
/// counters' resolution).
pub fn split(d: &CpuDelta) -> CpuSplit {
    let t = shares(&d.total);
    CpuSplit {
        user_pct: t.user_pct,
        system_pct: t.system_pct,
        irq_pct: t.irq_pct,
        softirq_pct: t.softirq_pct,
        steal_pct: t.steal_pct,
        guest_pct: t.guest_pct,
        idle_pct: t.idle_pct,
        unsampled_pct: t.unsampled_pct,
        busy_pct: pct(d.total.busy(), d.total.total()),
        per_cpu_busy_pct: d.per_cpu.iter().map(|c| pct(c.busy(), c.total())).collect(),
        per_cpu: d.per_cpu.iter().map(shares).collect(),
        wall_s: d.wall_s,
    }
}

/// CPU time consumed so far by the calling thread. An error (getrusage refused) fails the
/// caller's measurement rather than reporting a thread that used no CPU.
pub fn thread_cpu() -> Result<ThreadCpu, String> {
    let ru = getrusage(UsageWho::RUSAGE_THREAD).map_err(|e| {
        format!("getrusage(RUSAGE_THREAD): {e}: the thread's CPU time cannot be read")
    })?;
    Ok(ThreadCpu {
        user_s: secs(ru.user_time()),
        system_s: secs(ru.system_time()),
        voluntary_switches: ru.voluntary_context_switches() as u64,
        involuntary_switches: ru.involuntary_context_switches() as u64,
        run_delay_s: own_run_delay_s(),
        migrations: migrations_in("/proc/thread-self/sched"),
    })
}

/// What the scheduler has counted for one thread since it started: the counters of
/// [`ThreadCpu`] that another thread can read too (from `/proc`), so that a control thread
/// can take them where a worker's measured interval starts (the end of a warm-up).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SchedCounts {
    /// Voluntary context switches (`status`; the same counter as getrusage's).
    pub voluntary: u64,
    /// Involuntary context switches.
    pub involuntary: u64,
    /// Nanoseconds runnable but waiting for a CPU (`schedstat`); None without schedstat.
    pub run_delay_ns: Option<u64>,
    /// Moves between CPUs (`sched`'s `se.nr_migrations`); None where the kernel shows none.
    pub migrations: Option<u64>,
}

/// [`SchedCounts`] of the thread whose `/proc` directory is `base` (`/proc/PID/task/TID`);
/// None where its switches cannot be read (a zero would read as "never switched").
pub fn sched_counts_at(base: &str) -> Option<SchedCounts> {
    let status = std::fs::read_to_string(format!("{base}/status")).ok()?;
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    Some(SchedCounts {
        voluntary: field("voluntary_ctxt_switches:")?,
        involuntary: field("nonvoluntary_ctxt_switches:")?,
        run_delay_ns: schedstat_ns(&format!("{base}/schedstat")).1,
        migrations: migrations_in(&format!("{base}/sched")),
    })
}

/// [`SchedCounts`] of thread `tid` of this process, now.
pub fn sched_counts_of(tid: i32) -> Option<SchedCounts> {
    sched_counts_at(&format!("/proc/self/task/{tid}"))
}

/// `se.nr_migrations` from a thread's `sched` file; None where the kernel has no such file.
fn migrations_in(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok().and_then(|s| {
        s.lines()
            .find(|l| l.trim_start().starts_with("se.nr_migrations"))
            .and_then(|l| l.rsplit(':').next())
            .and_then(|v| v.trim().parse().ok())
    })
}

/// Seconds the calling thread has been runnable but waited for a CPU; None where the
/// kernel keeps no schedstat.
fn own_run_delay_s() -> Option<f64> {
    let (_, wait_ns) = schedstat_ns("/proc/thread-self/schedstat");
    Some(wait_ns? as f64 / 1e9)
}

/// A thread's schedstat file (`/proc/…/task/TID/schedstat`): nanoseconds on a CPU and
/// nanoseconds runnable but waiting in a run queue, each None where unreadable.
pub(crate) fn schedstat_ns(path: &str) -> (Option<u64>, Option<u64>) {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut nums = text.split_whitespace().map(|n| n.parse::<u64>().ok());
    (nums.next().flatten(), nums.next().flatten())
}

fn secs(tv: TimeVal) -> f64 {
    tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6
}

/// Thread CPU used since `start` (a value from [`thread_cpu`] on the same thread).
pub fn thread_cpu_since(start: ThreadCpu) -> Result<ThreadCpu, String> {
    Ok(thread_cpu_between(start, thread_cpu()?))
}

/// What a thread used from `start` to `now`, two [`thread_cpu`] readings of it.
pub fn thread_cpu_between(start: ThreadCpu, now: ThreadCpu) -> ThreadCpu {
    ThreadCpu {
        user_s: (now.user_s - start.user_s).max(0.0),
        system_s: (now.system_s - start.system_s).max(0.0),
        voluntary_switches: now
            .voluntary_switches
            .saturating_sub(start.voluntary_switches),
        involuntary_switches: now
            .involuntary_switches
            .saturating_sub(start.involuntary_switches),
        run_delay_s: now
            .run_delay_s
            .zip(start.run_delay_s)
            .map(|(b, a)| (b - a).max(0.0)),
        migrations: now
            .migrations
            .zip(start.migrations)
            .map(|(b, a)| b.saturating_sub(a)),
    }
}

/// This thread's kernel id (for [`thread_clock_s`] from another thread).
pub fn current_tid() -> i32 {
    rustix::thread::gettid().as_raw_nonzero().get()
}

/// CPU seconds thread `tid` of this process has used (user and system), read now from its
/// CPU-time clock; None once it has exited.
///
/// Written by hand: neither libc's `pthread_getcpuclockid` nor nix covers this safely. glibc
/// builds the clock id from the thread's kernel id, which it clears when the thread exits,
/// and id 0 then names the *calling* thread: a finished worker would silently be read as
/// the reader. Built from a kernel id kept by the caller, the clock of a thread that has
/// exited is refused (EINVAL) instead. The id's layout is the kernel's ABI
/// (`MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)` in include/linux/posix-timers.h).
pub fn thread_clock_s(tid: i32) -> Option<f64> {
    const CPUCLOCK_PERTHREAD_MASK: i32 = 4;
    const CPUCLOCK_SCHED: i32 = 2;
    if tid <= 0 {
        return None;
    }
    let id: libc::clockid_t = ((!tid) << 3) | CPUCLOCK_PERTHREAD_MASK | CPUCLOCK_SCHED;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which `ts` is; a bad id is an error return.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    (rc == 0).then(|| ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Another thread's clock follows its spinning, stops when it sleeps, and is refused
    /// once it has exited (never read as the caller's own).
    #[test]
    fn another_threads_cpu_clock_reads_its_work_and_refuses_the_dead() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let tid = current_tid();
            let start = thread_clock_s(tid).expect("own clock");
            while thread_clock_s(tid).expect("own clock") - start < 0.05 {}
            tx.send(tid).expect("send");
            let _ = wait.recv();
        });
        let tid = rx.recv().expect("tid");
        let a = thread_clock_s(tid).expect("a live thread's clock");
        assert!(a >= 0.05, "{a}");
        std::thread::sleep(std::time::Duration::from_millis(30));
        let b = thread_clock_s(tid).expect("a live thread's clock");
        assert!(b - a < 0.02, "a blocked thread used {} s", b - a);
        go.send(()).expect("go");
        t.join().expect("joined");
        // A join returns once the thread has cleared its id, which can be a moment before
        // the kernel has let go of the task: its clock must be refused soon after.
        let t0 = std::time::Instant::now();
        while thread_clock_s(tid).is_some() && t0.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(thread_clock_s(tid), None, "an exited thread's clock");
        assert_eq!(thread_clock_s(0), None);
    }

    /// Two threads spinning on one CPU take turns: each waits for it about as long as it
    /// runs, and its run delay says so; a thread alone that sleeps waits for nothing.
    #[test]
    fn threads_sharing_a_cpu_each_wait_for_it() {
        if std::fs::read_to_string("/proc/thread-self/schedstat").is_err() {
            virtperf_testkit::skip("schedstat", "this kernel keeps no schedstat");
            return;
        }
        let spin = || {
            std::thread::spawn(|| {
                let mut set = rustix::thread::CpuSet::new();
                set.set(0);
                rustix::thread::sched_setaffinity(None, &set).expect("pinning to CPU 0");
                let t0 = thread_cpu().expect("own CPU");
                let start = std::time::Instant::now();
                while start.elapsed() < std::time::Duration::from_millis(400) {
                    std::hint::spin_loop();
                }
                thread_cpu_since(t0).expect("own CPU")
            })
        };
        let (a, b) = (spin(), spin());
        for t in [a.join().expect("a"), b.join().expect("b")] {
            let d = t.run_delay_s.expect("schedstat was readable");
            // 400 ms of wall time shared: each ran about half of it and waited the rest
            // (more where other work shares CPU 0 too).
            assert!(d > 0.1, "waited {d} s, ran {} s", t.total_s());
            assert!(d + t.total_s() < 1.0, "waited {d} s, ran {} s", t.total_s());
        }
        let t0 = thread_cpu().expect("own CPU");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let slept = thread_cpu_since(t0).expect("own CPU");
        assert!(slept.run_delay_s.expect("readable") < 0.04, "{slept:?}");
    }

    /// A thread moved from CPU 0 to CPU 1 and back counts two migrations, by its own
    /// reading and by another thread's (`/proc/self/task/TID`), whose switches agree with
    /// getrusage's; one that stays counts none.
    #[test]
    fn a_thread_moved_between_cpus_counts_its_migrations() {
        if std::thread::available_parallelism().map_or(true, |n| n.get() < 2) {
            virtperf_testkit::skip("two-cpus", "one CPU: nowhere to move a thread to");
            return;
        }
        if std::fs::read_to_string("/proc/thread-self/sched").is_err() {
            virtperf_testkit::skip("sched-debug", "this kernel shows no /proc/…/sched");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::spawn(move || {
            let on = |cpu: usize| {
                let mut set = rustix::thread::CpuSet::new();
                set.set(cpu);
                rustix::thread::sched_setaffinity(None, &set).expect("pinning");
            };
            on(0);
            let t0 = thread_cpu().expect("own CPU");
            on(1);
            on(0);
            let moved = thread_cpu_since(t0).expect("own CPU");
            let stayed0 = thread_cpu().expect("own CPU");
            std::thread::sleep(std::time::Duration::from_millis(20));
            let stayed = thread_cpu_since(stayed0).expect("own CPU");
            tx.send((current_tid(), thread_cpu().expect("own CPU")))
                .expect("send");
            let _ = done_rx.recv();
            (moved, stayed)
        });
        let (tid, own) = rx.recv().expect("the worker's reading");
        let seen = sched_counts_of(tid).expect("a live thread's counts");
        done_tx.send(()).expect("release");
        let (moved, stayed) = worker.join().expect("worker");
        assert_eq!(moved.migrations, Some(2), "{moved:?}");
        assert_eq!(stayed.migrations, Some(0), "{stayed:?}");
        assert_eq!(seen.migrations, own.migrations);
        // The worker blocked on the channel since its reading: one sleep more at most.
        assert!(
            (own.voluntary_switches..=own.voluntary_switches + 1).contains(&seen.voluntary),
            "{seen:?} vs {own:?}"
        );
        assert_eq!(sched_counts_of(0), None, "no thread 0");
    }

    /// Our own user+system seconds from getrusage, the reference for /proc's view.
    fn rusage_self_s() -> f64 {
        let ru = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage(RUSAGE_SELF)");
        secs(ru.user_time()) + secs(ru.system_time())
    }

    #[test]
    fn process_cpu_agrees_with_getrusage_and_refuses_absent_processes() {
        let pid = std::process::id();
        let before = process_cpu_s(pid).expect("own /proc stat");
        let r0 = rusage_self_s();
        // Burn 0.3 s of CPU as the kernel counts it, however long that takes in wall time.
        let mut x = 0u64;
        while rusage_self_s() - r0 < 0.3 {
            for i in 0..100_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
        }
        std::hint::black_box(x);
        let burned = rusage_self_s() - r0;
        let seen = process_cpu_s(pid).expect("own /proc stat") - before;
        // /proc counts in clock ticks (10 ms); other test threads may add a little.
        assert!(
            seen >= burned - 0.05,
            "/proc saw {seen} s, getrusage {burned} s"
        );
        assert!(
            seen < burned + 1.0,
            "/proc saw {seen} s, getrusage {burned} s"
        );
        assert_eq!(process_cpu_s(u32::MAX), None);
    }

    const A: &str = "cpu  30 0 10 100 0 0 0 0 0 0\n\
        cpu0 10 0 5 50 0 0 0 0 0 0\n\
        cpu1 20 0 5 50 0 0 0 0 0 0\nintr 1 2 3\n";
    const B: &str = "cpu  0 0 0 0 0 0 0 0 0 0\n\
        cpu0 110 0 55 50 0 10 20 5 40 0\n\
        cpu1 20 0 5 150 0 0 0 0 0 0\n";

    #[test]
    fn delta_and_split_match_hand_computation() {
        let a = ProcStat::parse(A).unwrap();
        let b = ProcStat::parse(B).unwrap();
        let d = a.delta(&b);
        let hz = ticks_per_second();
        assert_eq!(d.ncpus, 2);
        // cpu0: user +100 (40 of it guest), system +50, irq +10, softirq +20, steal +5.
        assert!((d.per_cpu[0].user * hz - 100.0).abs() < 1e-9);
        assert!((d.total.idle * hz - 100.0).abs() < 1e-9);
        let s = split(&d);
        // All time = 100+50+10+20+5 (cpu0) + 100 idle (cpu1) = 285 ticks.
        let all = 285.0;
        assert!((s.user_pct - 100.0 * 60.0 / all).abs() < 1e-9);
        assert!((s.guest_pct - 100.0 * 40.0 / all).abs() < 1e-9);
        assert!((s.busy_pct - 100.0 * 180.0 / all).abs() < 1e-9);
        assert!((s.per_cpu_busy_pct[1]).abs() < 1e-9);
        assert!((s.per_cpu_busy_pct[0] - 100.0 * 180.0 / 185.0).abs() < 1e-9);
    }

    /// A CPU whose fields account 0.6 s of a 1 s window: the 0.4 s no tick charged is
    /// busy (its kind unknown), the idle time stays as the kernel timed it, and every
    /// share is of the whole second.
    #[test]
    fn a_shortfall_beyond_the_resolution_is_unsampled_busy_time() {
        let hz = ticks_per_second();
        let t = |s: f64| (s * hz).round() as u64;
        let b = ProcStat::parse(B).unwrap();
        let mut later = b.clone();
        // cpu1: +0.2 s system, +0.4 s idle over 1 s; cpu0 accounts the whole second.
        later.cpus[0] = b.cpus[0];
        later.cpus[0][3] += t(1.0);
        later.cpus[1][2] += t(0.2);
        later.cpus[1][3] += t(0.4);
        let earlier = ProcStat {
            at: later.at - Duration::from_secs(1),
            cpus: b.cpus.clone(),
        };
        let d = earlier.delta(&later);
        assert!(d.per_cpu[0].unsampled == 0.0, "{:?}", d.per_cpu[0]);
        assert!(
            (d.per_cpu[1].unsampled - 0.4).abs() < 1e-9,
            "{:?}",
            d.per_cpu[1]
        );
        assert!((d.per_cpu[1].busy() - 0.6).abs() < 1e-9);
        assert!((d.total.unsampled - 0.4).abs() < 1e-9);
        let s = split(&d);
        assert!((s.per_cpu_busy_pct[1] - 60.0).abs() < 1e-6, "{s:?}");
        assert!((s.per_cpu[1].unsampled_pct - 40.0).abs() < 1e-6);
        assert!((s.per_cpu[1].idle_pct - 40.0).abs() < 1e-6);
        assert!((s.unsampled_pct - 20.0).abs() < 1e-6);
    }

    /// Inside the counters' resolution a shortfall is rounding, not busy time; past it,
    /// all of it counts.
    #[test]
    fn a_shortfall_within_the_resolution_is_rounding() {
        let hz = 100.0;
        assert_eq!(unsampled_s(1.0, 1.0 - 1.5 / hz, hz), 0.0);
        assert_eq!(unsampled_s(1.0, 1.01, hz), 0.0);
        assert!((unsampled_s(1.0, 0.97, hz) - 0.03).abs() < 1e-9);
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(ProcStat::parse("cpu0 1 x 3").is_err());
        assert!(ProcStat::parse("intr 1 2").is_err());
    }

    #[test]
    fn live_proc_stat_and_thread_cpu_advance() {
        let a = ProcStat::read().unwrap();
        let t0 = thread_cpu().expect("getrusage");
        // Spin until rusage says 30 ms of CPU (bounded by 10 s of wall time): a fixed
        // wall-clock spin gets little CPU when other processes share the cores.
        let mut x = 0u64;
        let started = Instant::now();
        let mut used = thread_cpu_since(t0).expect("getrusage");
        while used.total_s() < 0.03 && started.elapsed().as_secs() < 10 {
            for _ in 0..100_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
            used = thread_cpu_since(t0).expect("getrusage");
        }
        std::hint::black_box(x);
        let d = a.delta(&ProcStat::read().unwrap());
        assert!(used.total_s() >= 0.03, "spun 10 s, rusage says {used:?}");
        assert!(d.wall_s >= 0.03, "{d:?}");
        assert!(d.ncpus >= 1);
    }
}
