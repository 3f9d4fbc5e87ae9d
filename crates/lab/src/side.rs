//! The half of a test that runs on one side: threads wrapping an engine, each measuring its
//! own CPU, started together through a gate and joined into a per-side report.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Result};
use virtperf_load::Counts;
use virtperf_measure::cpu::thread_cpu_since;
use virtperf_measure::{new_histogram, thread_cpu, LatencyHistogram};
use virtperf_wire::{FlowStats, ThreadCpu};

/// A one-shot start signal: threads block in [`Gate::wait`] until [`Gate::open`] (or its
/// timeout), so connection set-up stays outside the measured interval.
#[derive(Default)]
pub(crate) struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    pub(crate) fn open(&self) {
        if let Ok(mut g) = self.open.lock() {
            *g = true;
        }
        self.cv.notify_all();
    }

    /// Waits until opened; false if `timeout` passed first.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let Ok(g) = self.open.lock() else {
            return false;
        };
        match self.cv.wait_timeout_while(g, timeout, |open| !*open) {
            Ok((g, _)) => *g,
            Err(_) => false,
        }
    }
}

/// What one worker thread returns.
pub(crate) struct WorkerOut {
    pub counts: Counts,
    pub cpu: ThreadCpu,
    pub hist: Option<LatencyHistogram>,
}

/// Shared state of one side's workers.
#[derive(Clone)]
pub(crate) struct Ctl {
    pub stop: Arc<AtomicBool>,
    pub gate: Arc<Gate>,
    pub cpu: Option<u32>,
}

impl Ctl {
    pub(crate) fn new(cpu: Option<u32>) -> Ctl {
        Ctl {
            stop: Arc::new(AtomicBool::new(false)),
            gate: Arc::new(Gate::default()),
            cpu,
        }
    }
}

/// Spawns a worker: pins it, waits for the gate, runs `body`, and measures the thread's CPU
/// from the gate opening to its end.
pub(crate) fn spawn_worker<F>(
    name: &str,
    ctl: &Ctl,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    F: FnOnce(&Ctl, &mut LatencyHistogram) -> std::io::Result<Counts> + Send + 'static,
{
    let ctl = ctl.clone();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if let Some(cpu) = ctl.cpu {
                virtperf_load::sock::pin_current_thread(cpu)?;
            }
            if !ctl.gate.wait(crate::SETUP_TIMEOUT * 3) {
                return Err(anyhow!("the test never started"));
            }
            let mut hist = new_histogram();
            let t0 = thread_cpu();
            let counts = body(&ctl, &mut hist)?;
            Ok(WorkerOut {
                counts,
                cpu: thread_cpu_since(t0),
                hist: (!hist.is_empty()).then_some(hist),
            })
        })
        .map_err(|e| anyhow!("cannot start a worker thread: {e}"))
}

/// Accepts exactly `n` data connections on `listener`, giving up after `timeout`.
pub(crate) fn accept_n(
    listener: &TcpListener,
    n: usize,
    timeout: Duration,
) -> Result<Vec<TcpStream>> {
    listener.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + timeout;
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match listener.accept() {
            Ok((s, _)) => {
                s.set_nonblocking(false)?;
                out.push(s);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(anyhow!(
                        "only {} of {n} data connections arrived within {}s",
                        out.len(),
                        timeout.as_secs()
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(anyhow!("accepting data connection: {e}")),
        }
    }
    listener.set_nonblocking(false)?;
    Ok(out)
}

/// Joined outputs of one side.
#[derive(Default)]
pub(crate) struct Joined {
    pub flows: Vec<Counts>,
    pub cpu: ThreadCpu,
    pub hist: Option<LatencyHistogram>,
}

impl Joined {
    pub(crate) fn flow_stats(&self) -> Vec<FlowStats> {
        self.flows
            .iter()
            .map(|c| FlowStats {
                bytes_rx: c.bytes_rx,
                bytes_tx: c.bytes_tx,
                active_s: c.active.as_secs_f64(),
            })
            .collect()
    }

    pub(crate) fn transactions(&self) -> u64 {
        self.flows.iter().map(|c| c.transactions).sum()
    }
}

/// Joins workers; the first error wins, but every thread is joined first.
pub(crate) fn join_all(handles: Vec<JoinHandle<Result<WorkerOut>>>) -> Result<Joined> {
    let mut j = Joined::default();
    let mut first_err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(w)) => {
                j.flows.push(w.counts);
                j.cpu.add(w.cpu);
                if let Some(h) = w.hist {
                    match &mut j.hist {
                        Some(acc) => {
                            let _ = acc.add(&h);
                        }
                        None => j.hist = Some(h),
                    }
                }
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(anyhow!("a worker thread panicked"));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(j),
    }
}
