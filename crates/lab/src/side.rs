//! The half of a test that runs on one side: threads wrapping an engine, each measuring its
//! own CPU, started together through a gate and joined into a per-side report.

use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use virtperf_load::Counts;
use virtperf_measure::cpu::{
    current_tid, sched_counts_of, thread_clock_s, thread_cpu_between, SchedCounts,
};
use virtperf_measure::{new_histogram, thread_cpu, LatencyHistogram};
use virtperf_wire::{AppliedSockOpts, FlowStats, TcpInfo, ThreadCpu, ZeroCopyCounts};

/// What a worker's body returns: its flows' counts and, where it read them, their TCP state.
type Flows = (Vec<Counts>, Vec<Option<TcpInfo>>);

/// A one-shot start signal: threads block in [`Gate::wait`] until [`Gate::open`] (or its
/// timeout), so connection set-up stays outside the measured interval.
#[derive(Default)]
pub(crate) struct Gate {
    /// When it opened: the start of the side's measured interval.
    open: Mutex<Option<Instant>>,
    cv: Condvar,
}

impl Gate {
    pub(crate) fn open(&self) {
        if let Ok(mut g) = self.open.lock() {
            g.get_or_insert_with(Instant::now);
        }
        self.cv.notify_all();
    }

    /// Waits until opened; false if `timeout` passed first.
    pub(crate) fn wait(&self, timeout: Duration) -> bool {
        let Ok(g) = self.open.lock() else {
            return false;
        };
        match self
            .cv
            .wait_timeout_while(g, timeout, |open| open.is_none())
        {
            Ok((g, _)) => g.is_some(),
            Err(_) => false,
        }
    }

    /// The measured interval of a workload lasting `length` (None: untimed), from the
    /// opening (now, if it has not opened, which a worker past its gate cannot see).
    pub(crate) fn span(&self, length: Option<Duration>) -> virtperf_load::Span {
        let start = self.open.lock().ok().and_then(|g| *g);
        virtperf_load::Span {
            start: start.unwrap_or_else(Instant::now),
            length,
        }
    }
}

/// What one worker thread returns.
pub(crate) struct WorkerOut {
    /// One entry per flow the worker served (one, unless it multiplexes flows).
    pub flows: Vec<Counts>,
    /// Each flow's TCP state over the measured interval, where the worker owns one TCP
    /// connection (`spawn_conn_worker`); empty otherwise.
    pub tcp: Vec<Option<TcpInfo>>,
    pub cpu: ThreadCpu,
    pub hist: Option<LatencyHistogram>,
}

/// Shared state of one side's workers.
#[derive(Clone)]
pub(crate) struct Ctl {
    pub stop: Arc<AtomicBool>,
    pub gate: Arc<Gate>,
    pub cpu: Option<u32>,
    /// The socket options the kernel applied to this side's first TCP data connection
    /// (read where a worker is handed one: `spawn_conn_worker`).
    pub applied: Arc<Mutex<Option<AppliedSockOpts>>>,
    /// This side's `MSG_ZEROCOPY` senders' notifications, summed.
    pub zerocopy: Arc<Mutex<Option<ZeroCopyCounts>>>,
    /// Each worker's CPU-time clock at the gate and at its end: what it used inside the
    /// measured interval, read by [`Ctl::window_cpu_s`] when the interval ends.
    clocks: Arc<Mutex<Vec<WorkerClock>>>,
    /// The warm-up before the measured interval (`--omit`): the engines run from the gate,
    /// the interval starts this much later.
    pub omit: Option<Duration>,
    /// Every meter this side's engines count in, to end their warm-up together.
    meters: Arc<Mutex<Vec<Arc<virtperf_load::interval::Meter>>>>,
    /// The warm-up has ended (set by [`Ctl::begin_measuring`]).
    measuring: Arc<AtomicBool>,
}

/// One worker's CPU-time clock (see [`Ctl::window_cpu_s`]).
#[derive(Debug, Clone, Copy)]
struct WorkerClock {
    tid: i32,
    at_gate: f64,
    at_end: Option<f64>,
    /// Its scheduler's counts where the warm-up ended (`--omit`; see [`Ctl::clock_end`]).
    warm_up: WarmUp,
}

/// Where a worker's scheduler counts (switches, wait for a CPU, migrations) start.
#[derive(Debug, Clone, Copy)]
enum WarmUp {
    /// No warm-up, or it has not ended yet.
    Running,
    /// The worker passed the gate after the warm-up ended: from the gate.
    StartedAfter,
    /// From the worker's counts as the warm-up ended.
    EndedAt(SchedCounts),
    /// The worker ended during the warm-up (or its counts could not be read then): none
    /// of its counts fall in the measured interval.
    OutlivedBy,
}

impl Ctl {
    /// The CPU time so far of this side's workers still running, summed: it stands still
    /// while every one of them is blocked (on a peer that stopped answering). None where
    /// the workers' clocks cannot be read (a worker panicked holding their lock).
    pub(crate) fn running_cpu_s(&self) -> Option<f64> {
        self.clocks.lock().ok().map(|c| {
            c.iter()
                .filter(|w| w.at_end.is_none())
                .filter_map(|w| thread_clock_s(w.tid))
                .sum()
        })
    }

    pub(crate) fn new(cpu: Option<u32>) -> Ctl {
        Ctl {
            stop: Arc::new(AtomicBool::new(false)),
            gate: Arc::new(Gate::default()),
            cpu,
            applied: Arc::default(),
            zerocopy: Arc::default(),
            clocks: Arc::default(),
            omit: None,
            meters: Arc::default(),
            measuring: Arc::default(),
        }
    }

    /// This side, first running `omit` unmeasured (None or zero: no warm-up).
    pub(crate) fn with_omit(mut self, omit: Option<Duration>) -> Ctl {
        self.omit = omit.filter(|o| !o.is_zero());
        self
    }

    /// A meter for one of this side's engines, closing intervals every `every`, that
    /// knows the side's warm-up.
    pub(crate) fn meter(&self, every: Option<Duration>) -> Arc<virtperf_load::interval::Meter> {
        let m = Arc::new(virtperf_load::interval::Meter::with_omit(every, self.omit));
        if let Ok(mut all) = self.meters.lock() {
            all.push(m.clone());
        }
        m
    }

    /// The measured interval of a workload lasting `length`, for engines that count only
    /// what completes inside it: from the gate's opening plus the warm-up.
    pub(crate) fn span(&self, length: Option<Duration>) -> virtperf_load::Span {
        let s = self.gate.span(length);
        virtperf_load::Span {
            start: s.start + self.omit.unwrap_or_default(),
            ..s
        }
    }

    /// Ends the warm-up (`--omit`) on this side: every engine marks its counts at its
    /// next step (transaction engines already did, on their own clock), and each worker's
    /// CPU is counted from now.
    pub(crate) fn begin_measuring(&self) {
        if let Ok(all) = self.meters.lock() {
            for m in all.iter() {
                m.begin_measuring();
            }
        }
        if let Ok(mut clocks) = self.clocks.lock() {
            // Set under the lock, so a worker passing the gate now is either in `clocks`
            // already or sees it set.
            self.measuring
                .store(true, std::sync::atomic::Ordering::SeqCst);
            for c in clocks.iter_mut() {
                // A worker that already ended used nothing inside the interval; one whose
                // clock cannot be read here has no known start: NaN, so its window's CPU
                // is not measured rather than its warm-up's kept.
                c.at_gate = c
                    .at_end
                    .or_else(|| thread_clock_s(c.tid))
                    .unwrap_or(f64::NAN);
                // Read under the lock: a worker cannot end (record its end) meanwhile.
                c.warm_up = match c.at_end.map_or_else(|| sched_counts_of(c.tid), |_| None) {
                    Some(at) => WarmUp::EndedAt(at),
                    None => WarmUp::OutlivedBy,
                };
            }
        }
    }

    /// CPU seconds this side's `workers` used from the gate to now: a running worker's
    /// clock read now, a finished one's at its end. What a drain, a teardown or a report
    /// costs after the measured interval is then not charged to its units of work. None
    /// unless every worker's clock was read.
    pub(crate) fn window_cpu_s(&self, workers: usize) -> Option<f64> {
        let clocks = self.clocks.lock().ok()?.clone();
        if clocks.len() != workers {
            return None;
        }
        let mut total = 0.0;
        for c in clocks {
            // A worker that ends between the two reads has its end recorded by then.
            let now = c.at_end.or_else(|| thread_clock_s(c.tid)).or_else(|| {
                let again = self.clocks.lock().ok()?;
                again.iter().find(|x| x.tid == c.tid)?.at_end
            })?;
            if !c.at_gate.is_finite() {
                return None;
            }
            total += (now - c.at_gate).max(0.0);
        }
        Some(total)
    }

    /// Records the calling worker's clock as it passes the gate; its index for
    /// [`Ctl::clock_end`].
    fn clock_start(&self) -> Option<usize> {
        let tid = current_tid();
        let at_gate = thread_clock_s(tid)?;
        let mut c = self.clocks.lock().ok()?;
        let warm_up = if self.measuring.load(std::sync::atomic::Ordering::SeqCst) {
            WarmUp::StartedAfter
        } else {
            WarmUp::Running
        };
        c.push(WorkerClock {
            tid,
            at_gate,
            at_end: None,
            warm_up,
        });
        Some(c.len() - 1)
    }

    /// Records the calling worker's clock as it ends, and makes `cpu` (its use from the
    /// gate to `end`, its reading now) count its switches, wait for a CPU and migrations
    /// from the warm-up's end, as every other figure of the interval does: after a warm-up
    /// of 1 s, a 1 s rr's threads counted two sleeps per transaction, not one. Its CPU
    /// seconds stay its whole run's (`process_user_s`, `process_system_s`).
    fn clock_end(&self, i: Option<usize>, cpu: &mut ThreadCpu, end: &ThreadCpu) {
        let now = thread_clock_s(current_tid());
        let Ok(mut c) = self.clocks.lock() else {
            return;
        };
        let Some(w) = i.and_then(|i| c.get_mut(i)) else {
            return;
        };
        w.at_end = now;
        if self.omit.is_none() {
            return;
        }
        let from = match w.warm_up {
            WarmUp::StartedAfter => return,
            WarmUp::EndedAt(at) => at,
            // Ended before the warm-up did: all it counted was warm-up.
            WarmUp::Running | WarmUp::OutlivedBy => SchedCounts {
                voluntary: end.voluntary_switches,
                involuntary: end.involuntary_switches,
                run_delay_ns: end.run_delay_s.map(|s| (s * 1e9) as u64),
                migrations: end.migrations,
            },
        };
        cpu.voluntary_switches = end.voluntary_switches.saturating_sub(from.voluntary);
        cpu.involuntary_switches = end.involuntary_switches.saturating_sub(from.involuntary);
        cpu.run_delay_s = end
            .run_delay_s
            .zip(from.run_delay_ns)
            .map(|(e, f)| (e - f as f64 / 1e9).max(0.0));
        cpu.migrations = end
            .migrations
            .zip(from.migrations)
            .map(|(e, f)| e.saturating_sub(f));
    }
}

/// How a worker's descriptor table relates to the process's.
enum Table {
    /// Shared with every thread (it uses objects other threads also hold, e.g. a listener
    /// in an `Arc`).
    Shared,
    /// Its own copy (`unshare(CLONE_FILES)`), holding only what it opens itself and the
    /// connection handed to it, which the spawner then closes in the shared table. The copy
    /// starts as a duplicate of the whole table, so the worker closes every other
    /// descriptor in it at once: otherwise it would keep *other* tests' sockets open (no
    /// EOF reaches their peers until this worker ends; with two agents in one process, a
    /// server waited its full timeout for a client socket that its own table held).
    Private(Option<RawFd>),
}

/// Records the socket options the kernel applied to `fd`, this side's first TCP data
/// connection (a later call, or a UDP socket, changes nothing).
pub(crate) fn note_applied(ctl: &Ctl, fd: std::os::fd::BorrowedFd<'_>) {
    if let Ok(mut a) = ctl.applied.lock() {
        if a.is_none() {
            *a = virtperf_load::sock::applied(&fd).ok();
        }
    }
}

/// Starts a worker thread that pins itself (if asked), waits for the gate, runs `body`, and
/// measures its own CPU time. The descriptor table is shared with the process.
pub(crate) fn spawn_worker<F>(
    name: &str,
    ctl: &Ctl,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    F: FnOnce(&Ctl, &mut LatencyHistogram) -> std::io::Result<Counts> + Send + 'static,
{
    spawn(name, ctl, Table::Shared, move |c, h| {
        body(c, h).map(|n| (vec![n], Vec::new()))
    })
}

/// Like [`spawn_worker`], for a worker that serves many flows (`--threads`) and returns
/// one count per flow. Its table stays shared: a private copy would hold every other
/// thread's thousands of sockets until each closed them one by one.
pub(crate) fn spawn_mux_worker<F>(
    name: &str,
    ctl: &Ctl,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    F: FnOnce(&Ctl, &mut LatencyHistogram) -> std::io::Result<Vec<Counts>> + Send + 'static,
{
    spawn(name, ctl, Table::Shared, move |c, h| {
        body(c, h).map(|n| (n, Vec::new()))
    })
}

/// Like [`spawn_mux_worker`], for a worker that serves the connections `conns` itself:
/// each one's TCP state over the measured interval is read when the gate opens and when
/// the engine returns (one `getsockopt` per flow at each end, outside the loop), then the
/// connections close.
pub(crate) fn spawn_mux_conns_worker<F>(
    name: &str,
    ctl: &Ctl,
    conns: Vec<std::net::TcpStream>,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    F: FnOnce(&Ctl, &[std::net::TcpStream]) -> std::io::Result<Vec<Counts>> + Send + 'static,
{
    use virtperf_load::tcpinfo::{between, read};
    spawn(name, ctl, Table::Shared, move |c, _| {
        let start: Vec<_> = conns.iter().map(|s| read(s.as_raw_fd())).collect();
        let n = body(c, &conns)?;
        let tcp = conns
            .iter()
            .zip(start)
            .map(|(s, st)| Some(between(&st?, &read(s.as_raw_fd())?)))
            .collect();
        Ok((n, tcp))
    })
}

/// Like [`spawn_worker`], for a worker that owns data connection `s`: the worker runs with a
/// private descriptor table. Why: in a process with several threads every socket system
/// call takes and drops a reference on the file (`fdget` cannot use its single-owner fast
/// path while the table is shared), and on this project's VMs that costs a 64-byte stream
/// ≈ 13% of its rate (bench/RESULTS.md). netperf and iperf3 are single-threaded, so they
/// never pay it.
pub(crate) fn spawn_conn_worker<S, F>(
    name: &str,
    ctl: &Ctl,
    s: S,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    S: AsRawFd + Send + 'static,
    F: FnOnce(&Ctl, &mut LatencyHistogram, &mut S) -> std::io::Result<Counts> + Send + 'static,
{
    spawn_metered_conn_worker(name, ctl, s, None, body)
}

/// [`spawn_conn_worker`] for an engine counting in `meter`: after a warm-up (`--omit`)
/// the connection's TCP state is taken from the engine's mark, where the measured interval
/// starts for it, instead of from the gate.
pub(crate) fn spawn_metered_conn_worker<S, F>(
    name: &str,
    ctl: &Ctl,
    mut s: S,
    meter: Option<Arc<virtperf_load::interval::Meter>>,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    S: AsRawFd + Send + 'static,
    F: FnOnce(&Ctl, &mut LatencyHistogram, &mut S) -> std::io::Result<Counts> + Send + 'static,
{
    let fd = s.as_raw_fd();
    // SAFETY: `fd` is `s`'s, open for as long as this borrow.
    note_applied(ctl, unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) });
    spawn(name, ctl, Table::Private(Some(fd)), move |c, h| {
        // The connection's TCP state from the gate (or the warm-up's end) to the engine's
        // end: the measured interval (None for UDP sockets).
        let at_gate = virtperf_load::tcpinfo::read(s.as_raw_fd());
        let n = body(c, h, &mut s)?;
        let start = match meter.as_ref().filter(|m| m.omit().is_some()) {
            // No mark: the engine ended during its warm-up, and measured nothing.
            Some(m) => m.mark().and_then(|k| k.tcp),
            None => at_gate,
        };
        let tcp = start.and_then(|st| {
            virtperf_load::tcpinfo::read(s.as_raw_fd())
                .map(|end| virtperf_load::tcpinfo::between(&st, &end))
        });
        Ok((vec![n], vec![tcp]))
    })
}

/// Like [`spawn_worker`], with a private descriptor table for a worker that opens its own
/// connections (crr, http clients) and uses nothing another thread holds.
pub(crate) fn spawn_private_worker<F>(
    name: &str,
    ctl: &Ctl,
    body: F,
) -> Result<JoinHandle<Result<WorkerOut>>>
where
    F: FnOnce(&Ctl, &mut LatencyHistogram) -> std::io::Result<Counts> + Send + 'static,
{
    spawn(name, ctl, Table::Private(None), move |c, h| {
        body(c, h).map(|n| (vec![n], Vec::new()))
    })
}

/// In a private descriptor table: closes every descriptor above stderr except `keep`.
fn close_all_but(keep: Option<RawFd>) {
    let close_range = |first: RawFd, last: RawFd| {
        if first <= last {
            // SAFETY: close_range(2) on this thread's private table only closes
            // descriptors; nothing in this thread uses the ones closed.
            unsafe {
                libc::syscall(libc::SYS_close_range, first as u32, last as u32, 0u32);
            }
        }
    };
    match keep {
        Some(fd) => {
            close_range(3, fd - 1);
            close_range(fd + 1, RawFd::MAX);
        }
        None => close_range(3, RawFd::MAX),
    }
}

fn spawn<F>(name: &str, ctl: &Ctl, table: Table, body: F) -> Result<JoinHandle<Result<WorkerOut>>>
where
    F: FnOnce(&Ctl, &mut LatencyHistogram) -> std::io::Result<Flows> + Send + 'static,
{
    let ctl = ctl.clone();
    let private = matches!(table, Table::Private(_));
    let keep = match table {
        Table::Private(fd) => fd,
        Table::Shared => None,
    };
    let (tx, rx) = std::sync::mpsc::channel::<bool>();
    let handle = std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if private {
                // SAFETY: unshare(CLONE_FILES) copies this thread's descriptor table; it
                // affects no memory. On failure the thread keeps the shared table.
                let ok = unsafe { libc::unshare(libc::CLONE_FILES) } == 0;
                if ok {
                    close_all_but(keep);
                }
                let _ = tx.send(ok);
            }
            drop(tx);
            if let Some(cpu) = ctl.cpu {
                virtperf_load::sock::pin_current_thread(cpu)?;
            }
            if !ctl.gate.wait(crate::SETUP_TIMEOUT * 3) {
                return Err(anyhow!("the test never started"));
            }
            let mut hist = new_histogram();
            let t0 = thread_cpu().map_err(|e| anyhow!(e))?;
            let clock = ctl.clock_start();
            let out = body(&ctl, &mut hist);
            let end = thread_cpu().map_err(|e| anyhow!(e))?;
            let mut cpu = thread_cpu_between(t0, end);
            ctl.clock_end(clock, &mut cpu, &end);
            let (flows, tcp) = out?;
            Ok(WorkerOut {
                flows,
                tcp,
                cpu,
                hist: (!hist.is_empty()).then_some(hist),
            })
        })
        .map_err(|e| anyhow!("cannot start a worker thread: {e}"))?;
    // The worker's copy of the table now holds the connection; close the shared table's
    // entry (its Rust owner moved into the worker, so nothing here closes it again). If
    // the worker could not unshare, the entry is its own and stays open.
    // Only a handed-over connection needs the worker's answer; nothing else waits for it.
    if let Table::Private(Some(fd)) = table {
        if rx.recv() == Ok(true) {
            // SAFETY: fd's owner moved into the worker, which now uses its private copy.
            unsafe { libc::close(fd) };
        }
    }
    Ok(handle)
}

/// A test's data-connection key: random, sent to the client on the authenticated control
/// connection, and presented first on every data connection. Without it anyone who
/// reached the data port first took a flow's place (the real client's flow was refused).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct DataKey(pub [u8; virtperf_wire::DATA_KEY_LEN]);

impl DataKey {
    /// A fresh key from the kernel's random source.
    pub(crate) fn random() -> Result<DataKey> {
        let mut k = [0u8; virtperf_wire::DATA_KEY_LEN];
        let mut got = 0;
        while got < k.len() {
            got += rustix::rand::getrandom(&mut k[got..], rustix::rand::GetRandomFlags::empty())
                .map_err(|e| anyhow!("cannot make a data-connection key: {e}"))?;
        }
        Ok(DataKey(k))
    }

    /// As the `Ready` message carries it.
    pub(crate) fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// From the `Ready` message.
    pub(crate) fn from_hex(s: &str) -> Result<DataKey> {
        let mut k = [0u8; virtperf_wire::DATA_KEY_LEN];
        if s.len() != 2 * k.len() {
            return Err(anyhow!("the agent's data key is not {} hex bytes", k.len()));
        }
        for (i, b) in k.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
                .map_err(|_| anyhow!("the agent's data key is not hex"))?;
        }
        Ok(DataKey(k))
    }

    /// Presents the key on a data connection just opened (TCP, or a local socket).
    pub(crate) fn present(&self, s: &mut impl std::io::Write) -> std::io::Result<()> {
        s.write_all(&self.0)
    }

    /// Whether `got` is this key (what a data connection presented).
    pub(crate) fn is(&self, got: &[u8]) -> bool {
        got == self.0
    }
}

/// How long a data connection has to present its key once accepted.
const KEY_WAIT: Duration = Duration::from_secs(2);

/// A connection accepted, its key not yet read in full.
struct Pending {
    s: TcpStream,
    got: [u8; virtperf_wire::DATA_KEY_LEN],
    len: usize,
    since: std::time::Instant,
}

impl Pending {
    /// Reads what has arrived of the key: Some(true) when it is complete and right,
    /// Some(false) when it is wrong, the peer closed, or time ran out; None to wait more.
    fn check(&mut self, key: &DataKey) -> Option<bool> {
        use std::io::Read;
        while self.len < self.got.len() {
            match self.s.read(&mut self.got[self.len..]) {
                Ok(0) => return Some(false),
                Ok(n) => self.len += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return (self.since.elapsed() > KEY_WAIT).then_some(false)
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return Some(false),
            }
        }
        Some(key.is(&self.got))
    }
}

/// Accepts exactly `n` data connections from address `from` on `listener` that present
/// `key` first, giving up after `timeout`. Connections from any other address, and those
/// that do not present the key within [`KEY_WAIT`], are closed and take no place.
pub(crate) fn accept_n(
    listener: &TcpListener,
    n: usize,
    timeout: Duration,
    from: std::net::IpAddr,
    key: &DataKey,
) -> Result<Vec<TcpStream>> {
    listener.set_nonblocking(true)?;
    let deadline = std::time::Instant::now() + timeout;
    let mut out = Vec::with_capacity(n);
    let mut pending: Vec<Pending> = Vec::new();
    while out.len() < n {
        // Keys still arriving: the right ones join, the rest are dropped (closed).
        let mut still = Vec::with_capacity(pending.len());
        for mut p in pending.drain(..) {
            match p.check(key) {
                Some(true) => {
                    p.s.set_nonblocking(false)?;
                    out.push(p.s);
                }
                Some(false) => {}
                None => still.push(p),
            }
        }
        pending = still;
        if out.len() == n {
            break;
        }
        match listener.accept() {
            Ok((_, peer)) if peer.ip() != from => {} // dropped: closed at once
            Ok((s, _)) => {
                s.set_nonblocking(true)?;
                pending.push(Pending {
                    s,
                    got: [0; virtperf_wire::DATA_KEY_LEN],
                    len: 0,
                    since: std::time::Instant::now(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if std::time::Instant::now() > deadline {
                    return Err(anyhow!(
                        "only {} of {n} data connections arrived within {}s",
                        out.len(),
                        timeout.as_secs()
                    ));
                }
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                // While keys are on their way, look again soon.
                let nap = if pending.is_empty() { 100 } else { 1 };
                virtperf_load::mux::wait_readable(listener, left.min(Duration::from_millis(nap)))?;
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
    /// Per flow, in the order of `flows`: its TCP state, where it was read.
    pub tcp: Vec<Option<TcpInfo>>,
    /// Per flow: its thread's CPU seconds, where one thread served it alone.
    pub flow_cpu: Vec<Option<f64>>,
    pub cpu: ThreadCpu,
    pub hist: Option<LatencyHistogram>,
}

impl Joined {
    pub(crate) fn flow_stats(&self) -> Vec<FlowStats> {
        self.flows
            .iter()
            .enumerate()
            .map(|(i, c)| FlowStats {
                tcp: self.tcp.get(i).copied().flatten(),
                thread_cpu_s: self.flow_cpu.get(i).copied().flatten(),
                bytes_rx: c.bytes_rx,
                bytes_tx: c.bytes_tx,
                active_s: c.active.as_secs_f64(),
                transactions: c.transactions,
                calls: (c.calls > 0).then_some(c.calls),
                udp: c.udp,
                warmup: c.warmup,
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
                // Keep `tcp` aligned with `flows`: a worker that read none pads with None.
                j.tcp.resize(j.flows.len(), None);
                let n = w.flows.len();
                j.tcp
                    .extend(w.tcp.into_iter().chain(std::iter::repeat(None)).take(n));
                j.flow_cpu.resize(j.flows.len(), None);
                let alone = (n == 1).then(|| w.cpu.total_s());
                j.flow_cpu.extend(std::iter::repeat_n(alone, n));
                j.flows.extend(w.flows);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    /// Spins until this thread has used `s` more CPU seconds.
    fn burn(s: f64) {
        let tid = current_tid();
        let start = thread_clock_s(tid).expect("own clock");
        while thread_clock_s(tid).expect("own clock") - start < s {}
    }

    /// The workers' CPU over the measured interval leaves out what they spend after its
    /// end (a drain, closing thousands of connections): two workers that each burn 0.1 s
    /// of CPU inside the interval and 0.3 s after the stop count about 0.2 s, where their
    /// whole run (what service demand used to divide) is about 0.8 s.
    #[test]
    fn the_window_leaves_the_teardown_out() {
        let ctl = Ctl::new(None);
        let (tx, rx) = std::sync::mpsc::channel();
        let handles: Vec<_> = (0..2)
            .map(|i| {
                let tx = tx.clone();
                spawn_worker(&format!("window-{i}"), &ctl, move |c, _| {
                    burn(0.1);
                    let _ = tx.send(());
                    while !c.stop.load(std::sync::atomic::Ordering::SeqCst) {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    burn(0.3); // the teardown
                    Ok(Counts::default())
                })
                .expect("spawned")
            })
            .collect();
        assert_eq!(ctl.window_cpu_s(2), None, "no worker past the gate yet");
        ctl.gate.open();
        for _ in 0..2 {
            rx.recv().expect("a worker's interval work");
        }
        ctl.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let window = ctl.window_cpu_s(2).expect("both clocks read");
        let joined = join_all(handles).expect("joined");
        assert!((0.19..0.35).contains(&window), "window {window:.3} s");
        assert!(
            joined.cpu.total_s() > 0.75,
            "whole {:.3} s",
            joined.cpu.total_s()
        );
        // After the workers ended, their recorded ends stand in for their clocks.
        let after = ctl.window_cpu_s(2).expect("ends recorded");
        assert!(after > 0.75, "{after:.3}");
        assert_eq!(ctl.window_cpu_s(3), None, "a worker's clock missing");
    }

    /// A worker with a private table holds its own connection and nothing another test
    /// holds: a socket opened elsewhere in the process is not in the worker's table, so
    /// closing it there reaches its peer as EOF at once.
    #[test]
    fn a_private_worker_holds_only_its_own_connection() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mine = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let other = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (other_fd, mine_fd) = (other.as_raw_fd(), mine.as_raw_fd());
        let ctl = Ctl::new(None);
        let h = spawn_conn_worker("fd-check", &ctl, mine, move |_, _, s| {
            let fds: Vec<i32> = std::fs::read_dir("/proc/thread-self/fd")?
                .flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
                .collect();
            assert!(
                fds.contains(&s.as_raw_fd()),
                "own connection missing: {fds:?}"
            );
            assert!(
                !fds.contains(&other_fd),
                "the worker holds another socket ({other_fd}): {fds:?}"
            );
            Ok(Counts::default())
        })
        .unwrap();
        ctl.gate.open();
        h.join().unwrap().unwrap();
        drop(other);
        let _ = mine_fd;
    }
}
