//! Halt / wake-up latency: the cost an idle vCPU pays for every interrupt (the heart of the
//! "message passing" slowdown), with and without KVM's per-VM halt polling.
//!
//! Design (shared/notes/kvm-probes.md): an in-kernel irqchip, so HLT blocks (or polls) inside
//! KVM; a real-mode guest that idles in `sti; hlt`; an injector thread that waits a random
//! delay, reads the TSC and pulses IRQ 4 with `KVM_IRQ_LINE`; the guest's handler reads the TSC
//! as its first instruction and reports it through a port. Guest and host TSC are the same
//! counter (checked at start-up by a calibration loop), so latency = guest TSC − host TSC.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use kvm_ioctls::{VcpuFd, VmFd};
use serde::Serialize;

use crate::guest::{
    self, Exit, GuestMem, Machine, Setup, CAL_ROUNDS, CODE, HALT_HANDLER, HALT_MAIN, HANDLER,
    PORT_CALIBRATE, PORT_REPORT, PORT_SPURIOUS, TSC_SLOT,
};
use crate::stats::{self, StatsFd};
use crate::util::{self, Ctl, Rng};
use crate::{KvmError, Summary};

/// The IRQ line pulsed (routed to the master 8259, vector 0x24 once the guest programs it).
const IRQ: u32 = 4;
/// How long the injector waits for the guest to report one wake-up before declaring it lost.
const REPORT_TIMEOUT: Duration = Duration::from_secs(2);
/// The injector spins (rather than sleeps) this long for each report, so that short delays
/// between wake-ups are not stretched by its own wake-up latency.
const SPIN_FOR_REPORT: Duration = Duration::from_millis(2);

/// Options of [`halt`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HaltOpts {
    /// Measured wake-ups (a further 10 %, at most 50, run first as warm-up: KVM's adaptive
    /// poll window needs a few halts to grow).
    pub wakeups: u32,
    /// Shortest idle gap between the guest's previous wake-up and the next interrupt, µs.
    pub delay_min_us: u32,
    /// Longest idle gap, µs (uniformly random in between).
    pub delay_max_us: u32,
    /// `None`: leave the VM's halt polling at the kvm module default; `Some(n)`:
    /// `KVM_ENABLE_CAP(KVM_CAP_HALT_POLL, n)` (0 disables polling for this VM).
    pub halt_poll_ns: Option<u64>,
    /// Pin the vCPU thread (the one in `KVM_RUN`) to this CPU.
    pub vcpu_cpu: Option<u32>,
    /// Pin the interrupt-injecting thread to this CPU.
    pub injector_cpu: Option<u32>,
}

impl Default for HaltOpts {
    /// 2000 wake-ups, 50–500 µs apart, polling untouched, unpinned.
    fn default() -> Self {
        HaltOpts {
            wakeups: 2000,
            delay_min_us: 50,
            delay_max_us: 500,
            halt_poll_ns: None,
            vcpu_cpu: None,
            injector_cpu: None,
        }
    }
}

/// Result of [`halt`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HaltReport {
    /// Measured wake-ups.
    pub wakeups: u32,
    /// The per-VM halt-poll setting used (`None`: module default, untouched).
    pub halt_poll_ns: Option<u64>,
    /// Host `rdtsc` just before `KVM_IRQ_LINE` → first instruction of the guest's handler, ns.
    /// Includes the `KVM_IRQ_LINE` ioctl itself (see `irq_line_ns`).
    pub latency_ns: Summary,
    /// Duration of the `KVM_IRQ_LINE` (level high) ioctl as seen by the injector, ns: the part
    /// of the latency spent before KVM even kicks the vCPU.
    pub irq_line_ns: Summary,
    /// CPU time of the vCPU thread (user + system, so halt polling counts) per wake-up, ns.
    pub vcpu_cpu_ns_per_wakeup: f64,
    /// vCPU thread CPU time / wall time over the measured part, % (100 = never slept).
    pub vcpu_busy_pct: f64,
    /// vCPU statistics from `KVM_GET_STATS_FD` over the measured part: differences for
    /// counters (`exits`, `halt_exits`, `halt_successful_poll`, `halt_attempted_poll`,
    /// `halt_wakeup`, `irq_injections`, `insn_emulation`, `halt_poll_success_ns` …), current
    /// values for gauges. Empty if the kernel has no binary stats.
    pub stats: BTreeMap<String, u64>,
    /// `stats["exits"] / wakeups`: 2 = one for HLT, one for the report. None without
    /// KVM's binary stats (not read, so not 0).
    pub exits_per_wakeup: Option<f64>,
    /// Wake-ups whose latency came out negative (a wrong TSC offset): an anomaly counted
    /// here and left out of `latency_ns`, never recorded as 0 ns (which would pull the
    /// percentiles down).
    pub negative_latencies: u64,
    /// TSC rate used to turn cycles into ns.
    pub tsc_khz: u64,
    /// Guest TSC − host TSC as established by the calibration loop, in cycles (0 when the two
    /// counters are one, as under PVM and on hosts that leave the offset at 0).
    pub tsc_offset_cycles: i64,
    /// Interrupts the guest took on a vector other than IRQ 4 (spurious IRQ 7 …).
    pub spurious: u64,
    /// Caveats: TSC offset uncertainty, negative latencies, missing stats, platform.
    pub note: Option<String>,
}

/// State shared between the vCPU thread and the injector.
struct Shared {
    ctl: Ctl,
    /// Number of the next interrupt the injector may send: set to 1 once the guest has
    /// calibrated, then to k + 1 once wake-up k was reported.
    ready_for: AtomicU64,
    /// Host TSC read just before the latest `KVM_IRQ_LINE`.
    inject_tsc: AtomicU64,
    /// The last wake-up of the run: all of them, or fewer once the injector was cut.
    end: AtomicU64,
}

/// Measures interrupt → halted-guest wake-up latency (see the module docs for the method).
pub fn halt(opts: &HaltOpts) -> Result<HaltReport, KvmError> {
    halt_until(opts, &AtomicBool::new(false))
}

/// [`halt`], ending early once `cut` is set (a signal, say): no interrupt is sent after
/// it, the warm-up (at most 50 wake-ups) and one measured wake-up always run, and the
/// report covers the wake-ups measured, its note saying how many of how many.
pub fn halt_until(opts: &HaltOpts, cut: &AtomicBool) -> Result<HaltReport, KvmError> {
    check_opts(opts)?;
    let kvm = crate::open_kvm()?;
    let program = [(CODE, HALT_MAIN), (HANDLER, HALT_HANDLER)];
    let mut m = Machine::new(
        &kvm,
        &Setup {
            irqchip: true,
            halt_poll_ns: opts.halt_poll_ns,
            program: &program,
            ds: 0,
            ivt: true,
        },
    )?;
    let warmup = (opts.wakeups / 10).clamp(1, 50);
    let total = u64::from(opts.wakeups) + u64::from(warmup);
    let sh = Shared {
        ctl: Ctl::new(),
        ready_for: AtomicU64::new(0),
        inject_tsc: AtomicU64::new(0),
        end: AtomicU64::new(total),
    };
    let tsc_khz = m.tsc_khz;
    let Machine { vcpu, vm, mem, .. } = &mut m;
    let (vm, mem, sh) = (&*vm, &*mem, &sh);

    let (vcpu_result, inj_result) = std::thread::scope(|s| {
        let vcpu_thread = s.spawn(move || {
            let _alive = sh.ctl.enter_vcpu_thread();
            let r = vcpu_loop(vcpu, mem, sh, opts, u64::from(warmup), total);
            if r.is_err() {
                sh.ctl.stop.store(true, Ordering::Release);
            }
            r
        });
        let injector = s.spawn(move || {
            let r = inject_loop(vm, sh, opts, u64::from(warmup), cut);
            if r.is_err() {
                sh.ctl.abort();
            }
            r
        });
        let inj = injector
            .join()
            .unwrap_or_else(|_| Err(KvmError::Guest("the injector thread panicked".into())));
        if inj.is_err() {
            sh.ctl.abort();
        }
        let vc = vcpu_thread
            .join()
            .unwrap_or_else(|_| Err(KvmError::Guest("the vCPU thread panicked".into())));
        (vc, inj)
    });
    // Report the root cause, not the other thread's "aborted".
    let (v, irq_line_cycles) = match (vcpu_result, inj_result) {
        (Ok(v), Ok(i)) => (v, i),
        (Err(e), Err(KvmError::Aborted(_))) | (Err(e), Ok(_)) => return Err(e),
        (_, Err(e)) => return Err(e),
    };

    let to_ns =
        |c: &[u64]| -> Vec<u64> { c.iter().map(|&x| util::cycles_to_ns(x, tsc_khz)).collect() };
    // Every wake-up asked for, or those measured before the cut.
    let measured = u32::try_from(v.measured).unwrap_or(opts.wakeups);
    let w = f64::from(measured);
    let exits_per_wakeup = v.stats.get("exits").map(|&e| e as f64 / w);
    if v.latency_cycles.is_empty() {
        return Err(KvmError::Guest(format!(
            "all {} wake-ups had a negative latency: the guest's and host's TSCs disagree (TSC offset {} cycles); no latency can be measured here",
            v.negative, v.offset
        )));
    }
    let mut notes = v.notes;
    if measured < opts.wakeups {
        notes.push(format!(
            "cut short: {measured} of {} wake-ups measured",
            opts.wakeups
        ));
    }
    let note = report_notes(opts, &v.stats, notes);
    Ok(HaltReport {
        wakeups: measured,
        halt_poll_ns: opts.halt_poll_ns,
        latency_ns: Summary::from_values(&to_ns(&v.latency_cycles)),
        irq_line_ns: Summary::from_values(&to_ns(&irq_line_cycles)),
        vcpu_cpu_ns_per_wakeup: v.cpu_ns as f64 / w,
        vcpu_busy_pct: if v.wall.is_zero() {
            0.0
        } else {
            v.cpu_ns as f64 / v.wall.as_nanos() as f64 * 100.0
        },
        stats: v.stats,
        exits_per_wakeup,
        negative_latencies: v.negative,
        tsc_khz,
        tsc_offset_cycles: v.offset,
        spurious: v.spurious,
        note,
    })
}

/// What the run's figures need said beside them: stats not read, PVM's emulation, and a
/// poll window that caught nothing.
fn report_notes(
    opts: &HaltOpts,
    stats: &BTreeMap<String, u64>,
    mut notes: Vec<String>,
) -> Option<String> {
    if stats.is_empty() {
        notes.push("no KVM binary stats (KVM_GET_STATS_FD) on this kernel".into());
    }
    if std::path::Path::new("/sys/module/kvm_pvm").exists() {
        notes.push(
            "PVM: the guest's real-mode handler and idle loop are emulated instruction by \
             instruction, which adds a few µs to every wake-up"
                .into(),
        );
    }
    // Polling on, and not one wake-up caught: KVM's own window, not the cap, was short.
    if opts.halt_poll_ns.is_some_and(|ns| ns > 0) && stats.get("halt_successful_poll") == Some(&0) {
        let start = std::fs::read_to_string("/sys/module/kvm/parameters/halt_poll_ns_grow_start")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or_else(String::new, |ns| format!(" ({} µs here)", ns / 1000));
        notes.push(format!(
            "no wake-up was caught by polling: KVM polls a halted vCPU for a window of its own, which starts at halt_poll_ns_grow_start{start} and doubles only after a halt shorter than the cap (shrinking after a longer one), so idle gaps of {}–{} µs can keep it short of them (shorter gaps, --delay 5us..40us, show polling at work)",
            opts.delay_min_us, opts.delay_max_us
        ));
    }
    (!notes.is_empty()).then(|| notes.join("; "))
}

/// Refuses options that cannot run: no wake-ups, a delay range upside down.
fn check_opts(opts: &HaltOpts) -> Result<(), KvmError> {
    if opts.wakeups == 0 {
        return Err(KvmError::Options("wakeups must be > 0".into()));
    }
    if opts.delay_min_us > opts.delay_max_us {
        return Err(KvmError::Options(format!(
            "delay_min_us {} > delay_max_us {}",
            opts.delay_min_us, opts.delay_max_us
        )));
    }
    Ok(())
}

/// What the vCPU thread measured.
struct VcpuSide {
    latency_cycles: Vec<u64>,
    cpu_ns: u64,
    wall: Duration,
    stats: BTreeMap<String, u64>,
    offset: i64,
    spurious: u64,
    /// Samples left out because their latency was negative.
    negative: u64,
    /// Wake-ups after the warm-up: all asked for, or fewer when the run was cut.
    measured: u64,
    notes: Vec<String>,
}

/// Keeps one wake-up's latency in cycles, or counts it as an anomaly when negative: a
/// negative sample is a wrong TSC offset, not a 0-cycle wake-up.
fn keep_sample(latency: &mut Vec<u64>, negative: &mut u64, lat: i64) {
    match u64::try_from(lat) {
        Ok(l) => latency.push(l),
        Err(_) => *negative += 1,
    }
}

/// Snapshot at the start of the measured part.
struct Mark {
    at: Instant,
    cpu_ns: u64,
    stats: Option<Vec<stats::Entry>>,
}

/// The guest's TSC against the host's, from `CAL_ROUNDS` rounds: in each, guest TSC − host
/// TSC lies in [g − t_exit, g − t_enter]; the rounds' bounds intersect.
struct Calibration {
    lo: i64,
    hi: i64,
    rounds: u8,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            lo: i64::MIN,
            hi: i64::MAX,
            rounds: 0,
        }
    }
}

impl Calibration {
    /// Adds one round (the guest's TSC `g`, read between host TSCs `t_enter` and
    /// `t_exit`); true when this was the last round.
    fn add(&mut self, g: i64, t_enter: u64, t_exit: u64) -> bool {
        self.lo = self.lo.max(g.wrapping_sub(t_exit as i64));
        self.hi = self.hi.min(g.wrapping_sub(t_enter as i64));
        self.rounds += 1;
        self.rounds == CAL_ROUNDS
    }

    /// The offset to subtract from guest TSC readings (0 when the clocks agree), with a
    /// note when it is not 0 or the rounds disagree.
    fn offset(&self, notes: &mut Vec<String>) -> i64 {
        let (lo, hi) = (self.lo, self.hi);
        if lo <= 0 && 0 <= hi {
            0
        } else if lo <= hi {
            let mid = lo / 2 + hi / 2;
            notes.push(format!(
                "guest TSC is offset from host TSC by {mid} ± {} cycles; \
                 latencies corrected by it",
                (hi - lo) / 2
            ));
            mid
        } else {
            notes.push(format!(
                "guest and host TSC disagree between calibration rounds \
                 (bounds {lo}..{hi}); latencies may be off"
            ));
            lo / 2 + hi / 2
        }
    }
}

fn vcpu_loop(
    vcpu: &mut VcpuFd,
    mem: &GuestMem,
    sh: &Shared,
    opts: &HaltOpts,
    warmup: u64,
    total: u64,
) -> Result<VcpuSide, KvmError> {
    if let Some(cpu) = opts.vcpu_cpu {
        util::pin_current_thread(cpu)?;
    }
    let mut stats_fd = StatsFd::open_vcpu(vcpu).ok();
    let mut notes = Vec::new();
    let mut cal = Calibration::default();
    let mut offset = 0i64;
    let mut reports = 0u64;
    let mut spurious = 0u64;
    let mut negative = 0u64;
    let mut latency = Vec::with_capacity(opts.wakeups as usize);
    let mut mark: Option<Mark> = None;
    loop {
        if sh.ctl.stopped() {
            return Err(KvmError::Aborted("the vCPU loop was stopped".into()));
        }
        // A cut run ends after the last wake-up it reported (the injector kicks this
        // thread out of the halted guest's KVM_RUN until it gets here).
        if reports > warmup && reports >= sh.end.load(Ordering::Acquire) {
            break;
        }
        let t_enter = util::rdtsc();
        let exit = guest::run_once(vcpu)?;
        let t_exit = util::rdtsc();
        match exit {
            Exit::Out { port, .. } if port == PORT_CALIBRATE => {
                let g = mem.read_u64(TSC_SLOT)? as i64;
                if cal.add(g, t_enter, t_exit) {
                    offset = cal.offset(&mut notes);
                    sh.ready_for.store(1, Ordering::Release);
                }
            }
            Exit::Out { port, .. } if port == PORT_REPORT => {
                reports += 1;
                let g = mem.read_u64(TSC_SLOT)? as i64;
                let inj = sh.inject_tsc.load(Ordering::Acquire) as i64;
                let lat = g.wrapping_sub(offset).wrapping_sub(inj);
                if reports > warmup {
                    keep_sample(&mut latency, &mut negative, lat);
                }
                if reports == warmup {
                    mark = Some(Mark {
                        at: Instant::now(),
                        cpu_ns: util::thread_cpu_ns()?,
                        stats: stats_fd.as_mut().and_then(|s| s.read_entries().ok()),
                    });
                }
                if reports == total {
                    break;
                }
                sh.ready_for.store(reports + 1, Ordering::Release);
            }
            Exit::Out { port, value } if port == PORT_SPURIOUS => {
                if value < 0x20 {
                    return Err(KvmError::Guest(format!("CPU exception, vector {value:#x}")));
                }
                spurious += 1;
            }
            Exit::Intr => {}
            e => return Err(KvmError::Guest(format!("unexpected exit {e:?}"))),
        }
    }
    let end_cpu = util::thread_cpu_ns()?;
    let end_at = Instant::now();
    let end_stats = stats_fd.as_mut().and_then(|s| s.read_entries().ok());
    let Some(mark) = mark else {
        return Err(KvmError::Guest("no warm-up mark (internal)".into()));
    };
    if negative > 0 {
        notes.push(format!(
            "{negative} wake-ups had a negative latency (TSC offset wrong?): left out of the percentiles, counted in negative_latencies"
        ));
    }
    let stats = match (mark.stats, end_stats) {
        (Some(b), Some(a)) => stats::delta(&b, &a),
        _ => BTreeMap::new(),
    };
    Ok(VcpuSide {
        latency_cycles: latency,
        cpu_ns: end_cpu.saturating_sub(mark.cpu_ns),
        wall: end_at - mark.at,
        stats,
        offset,
        spurious,
        negative,
        measured: reports - warmup,
        notes,
    })
}

/// Waits until the vCPU thread allows interrupt number `n`: spinning at first (so short
/// delays stay short), then sleeping, giving up after [`REPORT_TIMEOUT`].
fn wait_ready(sh: &Shared, n: u64) -> Result<(), KvmError> {
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        if sh.ready_for.load(Ordering::Acquire) >= n {
            return Ok(());
        }
        if sh.ctl.stopped() {
            return Err(KvmError::Aborted("injector stopped".into()));
        }
        spins = spins.wrapping_add(1);
        if !spins.is_multiple_of(64) {
            std::hint::spin_loop();
            continue;
        }
        let waited = start.elapsed();
        if waited > REPORT_TIMEOUT {
            return Err(KvmError::Guest(if n == 1 {
                "the guest did not finish its set-up (PIC, TSC calibration) within 2 s".into()
            } else {
                format!("the guest did not report wake-up {} within 2 s", n - 1)
            }));
        }
        if waited > SPIN_FOR_REPORT {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// Waits `d` precisely: sleeps all but the last 100 µs (timer slack is 1 ns on this thread),
/// then spins, because a sleeping thread's own wake-up takes tens of µs in a VM.
fn pause(d: Duration) {
    let deadline = Instant::now() + d;
    if d > Duration::from_micros(150) {
        std::thread::sleep(d - Duration::from_micros(100));
    }
    while Instant::now() < deadline {
        std::hint::spin_loop();
    }
}

/// The injector: for each wake-up, wait for the previous report, wait a random delay, stamp the
/// TSC and pulse the IRQ line (edge: high then low). Returns `KVM_IRQ_LINE` durations (cycles).
/// Once `cut` is set (and a wake-up was measured) it sends no more and ends the vCPU's run.
fn inject_loop(
    vm: &VmFd,
    sh: &Shared,
    opts: &HaltOpts,
    warmup: u64,
    cut: &AtomicBool,
) -> Result<Vec<u64>, KvmError> {
    let total = sh.end.load(Ordering::Acquire);
    util::tight_timer_slack();
    if let Some(cpu) = opts.injector_cpu {
        util::pin_current_thread(cpu)?;
    }
    let mut rng = Rng::new();
    let (lo, hi) = (
        u64::from(opts.delay_min_us) * 1000,
        u64::from(opts.delay_max_us) * 1000,
    );
    let mut irq_line = Vec::with_capacity(opts.wakeups as usize);
    for n in 1..=total {
        wait_ready(sh, n)?;
        if n - 1 > warmup && cut.load(Ordering::Relaxed) {
            sh.end.store(n - 1, Ordering::Release);
            sh.ctl.kick_until_gone();
            break;
        }
        pause(Duration::from_nanos(rng.between(lo, hi)));
        let t0 = util::rdtsc();
        sh.inject_tsc.store(t0, Ordering::Release);
        vm.set_irq_line(IRQ, true)
            .map_err(|e| KvmError::ioctl("KVM_IRQ_LINE (high)", e))?;
        let t1 = util::rdtsc();
        vm.set_irq_line(IRQ, false)
            .map_err(|e| KvmError::ioctl("KVM_IRQ_LINE (low)", e))?;
        if n > warmup {
            irq_line.push(t1.wrapping_sub(t0));
        }
    }
    Ok(irq_line)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A negative sample is counted apart and leaves the percentiles alone (it used to be
    /// recorded as 0 ns, which pulled the p50 that explain's halt-exit term uses down).
    #[test]
    fn negative_samples_are_counted_not_recorded_as_zero() {
        let (mut kept, mut negative) = (Vec::new(), 0u64);
        for lat in [5_000i64, -40, 6_000, -3, 7_000] {
            keep_sample(&mut kept, &mut negative, lat);
        }
        assert_eq!(negative, 2);
        assert_eq!(kept, [5_000, 6_000, 7_000]);
        let s = Summary::from_values(&kept);
        assert!(s.min >= 5_000.0 && (s.p50 - 6_000.0).abs() < 10.0, "{s:?}");
    }

    /// Polling on and not one wake-up caught (this machine, 50–500 µs gaps, every window up
    /// to 200 µs: 0.00 polls per wake-up, no word why) is explained; polling off, or a
    /// window that caught some, says nothing of it.
    #[test]
    fn a_poll_window_that_caught_nothing_is_explained() {
        let with = |poll: Option<u64>, ok: u64| {
            let opts = HaltOpts {
                halt_poll_ns: poll,
                ..HaltOpts::default()
            };
            let stats = BTreeMap::from([("halt_successful_poll".to_string(), ok)]);
            report_notes(&opts, &stats, Vec::new()).unwrap_or_default()
        };
        let n = with(Some(200_000), 0);
        assert!(
            n.contains("no wake-up was caught by polling") && n.contains("idle gaps of 50–500 µs"),
            "{n}"
        );
        // Shown split on "; " (one line a note): the note holds none of its own.
        assert!(
            n.split("; ")
                .any(|p| p.starts_with("no wake-up was caught by polling")
                    && p.ends_with("show polling at work)")),
            "{n}"
        );
        for (poll, ok) in [(Some(200_000), 300), (Some(0), 0), (None, 0)] {
            assert!(
                !with(poll, ok).contains("caught by polling"),
                "{poll:?} {ok}"
            );
        }
    }
}
