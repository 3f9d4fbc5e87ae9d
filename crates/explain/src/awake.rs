//! CPUs kept out of idle for a measurement: one spinning thread per CPU at `SCHED_IDLE`
//! priority, which the scheduler runs only when nothing else wants the CPU and preempts
//! at once when a thread is woken there. The CPU never halts, so a wake-up sent to it
//! costs no idle exit — the experiment that measures the idle exit on machines without a
//! halt-polling knob (issue 28), and the remedy "peer CPU kept awake" (`idle=poll` for
//! two CPUs, at run time).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The spinners; dropping them stops and joins them.
pub(crate) struct Spinners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    /// The spinners' thread ids.
    #[cfg_attr(not(test), allow(dead_code))]
    tids: Vec<i32>,
}

impl Spinners {
    /// One spinner per CPU of `cpus`, each pinned there at `SCHED_IDLE`. Fails (and
    /// starts none) when a spinner cannot be pinned or made `SCHED_IDLE`: at normal
    /// priority it would take half the CPU from the test instead.
    pub(crate) fn start(cpus: &[u32]) -> Result<Spinners, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut s = Spinners {
            stop: stop.clone(),
            threads: Vec::new(),
            tids: Vec::new(),
        };
        for &cpu in cpus {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = stop.clone();
            let t = std::thread::Builder::new()
                .name(format!("awake-{cpu}"))
                .spawn(move || {
                    let ready = idle_priority_on(cpu)
                        .map(|()| rustix::thread::gettid().as_raw_nonzero().get());
                    let ok = ready.is_ok();
                    let _ = tx.send(ready);
                    while ok && !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .map_err(|e| format!("starting a spinner: {e}"))?;
            s.threads.push(t);
            let tid = rx
                .recv()
                .map_err(|_| "a spinner died before it started".to_string())??;
            s.tids.push(tid);
        }
        Ok(s)
    }
}

/// Pins the calling thread to `cpu` and gives it `SCHED_IDLE`.
fn idle_priority_on(cpu: u32) -> Result<(), String> {
    let mut set = rustix::thread::CpuSet::new();
    set.set(cpu as usize);
    rustix::thread::sched_setaffinity(None, &set)
        .map_err(|e| format!("pinning a spinner to CPU {cpu}: {e}"))?;
    // SAFETY: sched_param is plain integers (more of them on musl), for which all zeroes is
    // valid; priority 0 is the only one SCHED_IDLE takes.
    let param: libc::sched_param = unsafe { std::mem::zeroed() };
    // SAFETY: sets this thread's own policy from a valid, initialized parameter struct.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(format!(
            "making a spinner SCHED_IDLE: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

impl Drop for Spinners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each spinner runs at SCHED_IDLE on its own CPU only (the scheduler then gives the
    /// CPU to any normal thread that wants it: not timed here, since a test machine's other
    /// load would decide a timing) and stops when dropped.
    #[test]
    fn spinners_run_at_idle_priority_on_their_cpu() {
        let s = match Spinners::start(&[0]) {
            Ok(s) => s,
            Err(e) => {
                virtperf_testkit::skip("root", &e.to_string());
                return;
            }
        };
        assert_eq!(s.tids.len(), 1);
        let tid = s.tids[0];
        // SAFETY: queries a thread of this process by id; no memory is passed.
        let policy = unsafe { libc::sched_getscheduler(tid) };
        assert_eq!(policy, libc::SCHED_IDLE, "spinner {tid}");
        let status =
            std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap_or_default();
        let allowed = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(str::trim)
            .unwrap_or_default()
            .to_string();
        assert_eq!(allowed, "0", "{status}");
        drop(s);
        assert!(
            !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists(),
            "the spinner still runs after drop"
        );
    }
}
