//! Small host-side helpers: TSC, CPU pinning, thread CPU time, and kicking a vCPU thread out of
//! `KVM_RUN` when something goes wrong.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use crate::error::KvmError;

/// Reads the time-stamp counter. Not serialised (`lfence`/`rdtscp`): every interval we time
/// brackets a system call, which already orders the surrounding instructions far more than the
/// few cycles of skew an unserialised `rdtsc` can have.
#[inline]
pub(crate) fn rdtsc() -> u64 {
    // SAFETY: `rdtsc` has no memory effects; every x86-64 CPU has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Cycles → nanoseconds at `tsc_khz` (rounded to the nearest ns).
pub(crate) fn cycles_to_ns(cycles: u64, tsc_khz: u64) -> u64 {
    if tsc_khz == 0 {
        return 0;
    }
    let ns = (u128::from(cycles) * 1_000_000 + u128::from(tsc_khz) / 2) / u128::from(tsc_khz);
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Measures the TSC rate against the monotonic clock, for kernels without `KVM_GET_TSC_KHZ`
/// and as a cross-check of it.
pub(crate) fn measure_tsc_khz(over: Duration) -> u64 {
    let (i0, t0) = (Instant::now(), rdtsc());
    std::thread::sleep(over);
    let (i1, t1) = (Instant::now(), rdtsc());
    let ns = (i1 - i0).as_nanos().max(1);
    // Cannot fail: a u64 of kHz is far beyond any clock, so the 0 is never produced.
    u64::try_from(u128::from(t1.wrapping_sub(t0)) * 1_000_000 / ns).unwrap_or(0)
}

/// The text of an errno without Rust's " (os error N)" suffix, for one-line messages.
pub(crate) fn strerror(errno: i32) -> String {
    io_reason(&std::io::Error::from_raw_os_error(errno))
}

/// Like [`strerror`] for an `io::Error`.
pub(crate) fn io_reason(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Pins the calling thread to one CPU (the benchmark threads pin themselves, so the caller's own
/// affinity is never changed).
pub(crate) fn pin_current_thread(cpu: u32) -> Result<(), KvmError> {
    let idx = usize::try_from(cpu).unwrap_or(usize::MAX);
    if idx >= libc::CPU_SETSIZE as usize {
        return Err(KvmError::Options(format!("CPU {cpu} is out of range")));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET is bounds-checked above.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(idx, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        return Err(KvmError::os("sched_setaffinity"));
    }
    Ok(())
}

/// CPU time (user + system) of the calling thread in ns: what the vCPU thread really cost,
/// including halt polling inside `KVM_RUN`, which `Instant` cannot tell from sleeping.
pub(crate) fn thread_cpu_ns() -> Result<u64, KvmError> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Err(KvmError::os("clock_gettime(CLOCK_THREAD_CPUTIME_ID)"));
    }
    // A CPU-time clock is never negative: the conversions cannot fail.
    let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
    Ok(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// Sets this thread's timer slack to 1 ns so that short `nanosleep`s are not rounded up by the
/// default 50 µs slack (which would make every "50 µs" delay ≈100 µs).
pub(crate) fn tight_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer; failure only means coarser sleeps.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// xorshift64*: random delays between wake-ups without a `rand` dependency; quality is ample for
/// de-synchronising the injector from any periodic host activity.
pub(crate) struct Rng(u64);

impl Rng {
    /// Seeds from the TSC (never zero, which xorshift cannot leave).
    pub(crate) fn new() -> Rng {
        Rng(rdtsc() | 1)
    }

    /// Uniform in `lo..=hi` (assumes `lo <= hi`).
    pub(crate) fn between(&mut self, lo: u64, hi: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let span = hi.saturating_sub(lo).saturating_add(1);
        lo + r % span
    }
}

/// The real-time signal used to kick a vCPU thread out of a blocking `KVM_RUN` (the way
/// QEMU and Firecracker do it): a handler that does nothing, installed without `SA_RESTART`,
/// makes the ioctl return `EINTR`.
fn kick_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

extern "C" fn on_kick(_: libc::c_int) {}

static KICK_INSTALL: Once = Once::new();
static KICK_OK: AtomicBool = AtomicBool::new(false);

/// Installs the no-op handler once per process, and only if nobody else uses the signal
/// (a library must not steal a signal its host program handles).
fn install_kick_handler() -> bool {
    KICK_INSTALL.call_once(|| {
        // SAFETY: plain sigaction calls with zeroed, then filled, structs.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(kick_signal(), std::ptr::null(), &mut old) != 0 {
                return;
            }
            if old.sa_sigaction != libc::SIG_DFL {
                return;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_kick as *const () as usize;
            act.sa_flags = 0;
            libc::sigemptyset(&mut act.sa_mask);
            if libc::sigaction(kick_signal(), &act, std::ptr::null_mut()) == 0 {
                KICK_OK.store(true, Ordering::Release);
            }
        }
    });
    KICK_OK.load(Ordering::Acquire)
}

/// Shared state between the vCPU thread, the interrupt injector and the watchdog.
pub(crate) struct Ctl {
    /// Set by whoever gives up; the vCPU thread checks it before every `KVM_RUN`.
    pub stop: AtomicBool,
    /// The vCPU thread's `pthread_t`, valid while `alive` (scoped threads are joined later).
    tid: AtomicU64,
    /// True while the vCPU thread is inside its loop.
    alive: AtomicBool,
}

impl Ctl {
    pub(crate) fn new() -> Ctl {
        install_kick_handler();
        Ctl {
            stop: AtomicBool::new(false),
            tid: AtomicU64::new(0),
            alive: AtomicBool::new(false),
        }
    }

    /// Called first thing on the vCPU thread; the returned guard clears `alive` on any exit path.
    /// Names the thread as QEMU names its vCPUs (`CPU 0/KVM`), so a host view of this process
    /// (`vm watch --vm pid:N`, `top -H`, `perf`) tells the vCPU from the threads around it.
    pub(crate) fn enter_vcpu_thread(&self) -> AliveGuard<'_> {
        // SAFETY: PR_SET_NAME copies at most 16 bytes from a NUL-terminated string that
        // outlives the call; a failure only leaves the old name.
        unsafe { libc::prctl(libc::PR_SET_NAME, c"CPU 0/KVM".as_ptr()) };
        // SAFETY: pthread_self never fails.
        let me = unsafe { libc::pthread_self() };
        self.tid.store(me as u64, Ordering::Release);
        self.alive.store(true, Ordering::Release);
        AliveGuard(self)
    }

    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Stops the run: sets `stop`, then signals the vCPU thread every millisecond until it has
    /// left its loop (a single signal could land while it is outside `KVM_RUN` and be lost).
    /// Gives up after 5 s; the scoped join will then wait, which beats killing the process.
    pub(crate) fn abort(&self) {
        self.stop.store(true, Ordering::Release);
        self.kick_until_gone();
    }

    /// Signals the vCPU thread every millisecond until it has left its loop (it decides
    /// why it leaves: `stop`, or an end its caller set). Gives up after 5 s.
    pub(crate) fn kick_until_gone(&self) {
        let kick = install_kick_handler();
        let until = Instant::now() + Duration::from_secs(5);
        while self.alive.load(Ordering::Acquire) && Instant::now() < until {
            if kick {
                let tid = self.tid.load(Ordering::Acquire) as libc::pthread_t;
                // SAFETY: the thread is alive-flagged and, being a scoped thread that has not
                // been joined yet, its pthread_t is still valid.
                unsafe {
                    libc::pthread_kill(tid, kick_signal());
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Clears [`Ctl`]'s `alive` flag when the vCPU thread leaves its loop, however it leaves.
pub(crate) struct AliveGuard<'a>(&'a Ctl);

impl Drop for AliveGuard<'_> {
    fn drop(&mut self) {
        self.0.alive.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(cycles_to_ns(3_000, 3_000_000), 1_000);
        assert_eq!(cycles_to_ns(1, 0), 0);
        assert_eq!(strerror(libc::ENOENT), "No such file or directory");
        let mut r = Rng::new();
        for _ in 0..1000 {
            let v = r.between(5, 40);
            assert!((5..=40).contains(&v));
        }
        assert_eq!(r.between(7, 7), 7);
    }
}
