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
        };
        for &cpu in cpus {
            let (tx, rx) = std::sync::mpsc::channel();
            let stop = stop.clone();
            let t = std::thread::Builder::new()
                .name(format!("awake-{cpu}"))
                .spawn(move || {
                    let ready = idle_priority_on(cpu);
                    let ok = ready.is_ok();
                    let _ = tx.send(ready);
                    while ok && !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
                .map_err(|e| format!("starting a spinner: {e}"))?;
            s.threads.push(t);
            rx.recv()
                .map_err(|_| "a spinner died before it started".to_string())??;
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

    /// A spinner keeps its CPU out of idle yet yields it: a thread pinned there still
    /// gets most of the CPU, and the spinner's thread runs at SCHED_IDLE.
    #[test]
    fn spinners_yield_to_real_work() {
        let s = match Spinners::start(&[0]) {
            Ok(s) => s,
            Err(e) => {
                let _ = std::io::Write::write_fmt(
                    &mut std::io::stderr(),
                    format_args!("skipped: {e}\n"),
                );
                return;
            }
        };
        let work = std::thread::spawn(|| {
            let mut set = rustix::thread::CpuSet::new();
            set.set(0);
            let _ = rustix::thread::sched_setaffinity(None, &set);
            let t0 = std::time::Instant::now();
            let c0 = virtperf_measure::thread_cpu()
                .map(|c| c.user_s + c.system_s)
                .unwrap_or(0.0);
            while t0.elapsed() < std::time::Duration::from_millis(300) {
                std::hint::spin_loop();
            }
            let c1 = virtperf_measure::thread_cpu()
                .map(|c| c.user_s + c.system_s)
                .unwrap_or(0.0);
            (c1 - c0) / t0.elapsed().as_secs_f64()
        });
        let share = work.join().unwrap_or(0.0);
        drop(s);
        assert!(
            share > 0.8,
            "the pinned worker got {share:.2} of CPU 0 beside a SCHED_IDLE spinner"
        );
    }
}
