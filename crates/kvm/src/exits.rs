//! Exit costs: how long one guest → KVM → (user space) → guest round trip takes.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use kvm_ioctls::Kvm;
use serde::Serialize;

use crate::guest::{
    self, Exit, Machine, Setup, BATCH, CODE, CPUID, HLT, MMIO, MMIO_ADDR, MOV_BX_BX, PIO, PORT_PIO,
    PORT_REPORT, SAMPLES, TIMED, TIMED_SLOT,
};
use crate::stats::{self, StatsFd};
use crate::util::{self, Ctl};
use crate::{KvmError, Summary};

/// Options of [`exits`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExitOpts {
    /// Measured exits per case.
    pub iterations: u32,
    /// Exits run first and thrown away (page faults, caches, CPU frequency).
    pub warmup: u32,
    /// Pin the vCPU thread to this CPU (`None`: leave it to the scheduler).
    pub cpu: Option<u32>,
}

impl Default for ExitOpts {
    /// 2000 measured iterations after 100 of warm-up, unpinned.
    fn default() -> Self {
        ExitOpts {
            iterations: 2000,
            warmup: 100,
            cpu: None,
        }
    }
}

/// Result of [`exits`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExitReport {
    /// Guest (= host here) TSC rate used to turn cycles into ns (`KVM_GET_TSC_KHZ`).
    pub tsc_khz: u64,
    /// One entry per exit kind: `pio`, `mmio`, `hlt`, `cpuid`.
    pub cases: Vec<ExitCase>,
    /// What the host's `kvm:kvm_exit` tracepoint counted while the probe ran, by exit
    /// reason, beside the exits the probe made (filled in by the caller that counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host_trace: Option<HostTrace>,
}

/// `kvm:kvm_exit` counted around a probe.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostTrace {
    /// Exits the probe itself made (every iteration and warm-up of every case).
    pub probe_exits: u64,
    /// Counts by key (`kvm_exits` all reasons, `kvm_exit_io`, `kvm_exit_hlt`, …).
    pub counted: std::collections::BTreeMap<String, u64>,
    /// What the counts mean here (silent tracepoint, counters that could not be opened).
    pub note: Option<String>,
}

/// The cost of one kind of exit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExitCase {
    /// `pio` (port write → KVM_EXIT_IO to user space), `mmio` (store to unmapped guest memory
    /// → KVM_EXIT_MMIO), `hlt` (HLT without in-kernel irqchip → KVM_EXIT_HLT), `cpuid` (handled
    /// inside KVM, timed by the guest).
    pub name: String,
    /// Samples behind the summaries (0 when the case could not be measured; see `note`).
    pub iterations: u32,
    /// Round-trip time in ns; None (JSON null) where the case could not be measured: no
    /// time rather than a time of 0.
    pub ns: Option<Summary>,
    /// The same in TSC cycles (ns = cycles × 10⁶ / tsc_khz); None with `ns`.
    pub cycles: Option<Summary>,
    /// How it was measured and what inflates it on this platform.
    pub note: Option<String>,
}

/// Measures exit round trips with a tiny real-mode guest per case (pio, mmio, hlt, cpuid).
///
/// User-space exits are timed from the host: `rdtsc` around each `KVM_RUN`, while the guest
/// loops on the exiting instruction and a jump, so each `KVM_RUN` returns exactly one exit.
/// CPUID never leaves the kernel, so the guest times it itself (`rdtsc; cpuid; rdtsc`) and
/// hands batches of deltas to the host through a port; the same loop with an ordinary
/// instruction in place of CPUID is reported in the note as the floor to subtract.
/// `pio` and `mmio` failing is an error; `hlt` and `cpuid` failing yields a case with
/// `iterations: 0` and the reason in `note`.
pub fn exits(opts: &ExitOpts) -> Result<ExitReport, KvmError> {
    if opts.iterations == 0 {
        return Err(KvmError::Options("iterations must be > 0".into()));
    }
    let kvm = crate::open_kvm()?;
    let ctl = Ctl::new();
    let total = u64::from(opts.iterations) + u64::from(opts.warmup);
    // Watchdog: far above any plausible run (PVM emulation ≈ 10 µs per exit), so only a guest
    // that runs away (a bug) or a wedged host trips it.
    let limit = Duration::from_secs(10) + Duration::from_millis(4 * total);
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<()>();
        let (kvm, ctl) = (&kvm, &ctl);
        let worker = s.spawn(move || {
            let _alive = ctl.enter_vcpu_thread();
            let r = run_cases(kvm, opts, ctl);
            let _ = tx.send(());
            r
        });
        if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
            ctl.abort();
        }
        worker
            .join()
            .map_err(|_| KvmError::Guest("the vCPU thread panicked".into()))?
    })
}

fn run_cases(kvm: &Kvm, opts: &ExitOpts, ctl: &Ctl) -> Result<ExitReport, KvmError> {
    if let Some(cpu) = opts.cpu {
        util::pin_current_thread(cpu)?;
    }
    let pvm = std::path::Path::new("/sys/module/kvm_pvm").exists();
    let emulated = if pvm {
        "; PVM emulates real-mode guest code one instruction at a time, so the round trip \
         includes the emulation of the loop's other instructions (their count follows; the `cpuid` \
         case's window of ordinary instructions measures what they cost here)"
    } else {
        ""
    };
    let mut cases = Vec::new();
    let mut tsc_khz = 0;

    // pio: out dx, al; jmp.
    let mut m = Machine::new(kvm, &plain(&[(CODE, PIO)], 0))?;
    tsc_khz = tsc_khz.max(m.tsc_khz);
    let r = host_timed(
        &mut m,
        opts,
        ctl,
        |e| matches!(e, Exit::Out { port, .. } if *port == PORT_PIO),
    )?;
    cases.push(r.into_case(
        "pio",
        &format!(
            "host rdtsc around KVM_RUN; guest loops `out dx, al; jmp` → KVM_EXIT_IO{emulated}"
        ),
        m.tsc_khz,
    ));

    // mmio: mov [ds:0], al with DS pointing past guest memory; jmp.
    let mut m = Machine::new(kvm, &plain(&[(CODE, MMIO)], (MMIO_ADDR >> 4) as u16))?;
    let r = host_timed(
        &mut m,
        opts,
        ctl,
        |e| matches!(e, Exit::MmioWrite { addr } if *addr == MMIO_ADDR),
    )?;
    cases.push(r.into_case(
        "mmio",
        &format!(
            "host rdtsc around KVM_RUN; guest loops a byte store to unmapped GPA {MMIO_ADDR:#x} \
             → KVM_EXIT_MMIO (instruction decode included){emulated}"
        ),
        m.tsc_khz,
    ));

    // hlt without an irqchip: every HLT goes to user space.
    let hlt = Machine::new(kvm, &plain(&[(CODE, HLT)], 0))
        .and_then(|mut m| host_timed(&mut m, opts, ctl, |e| *e == Exit::Hlt).map(|r| (r, m)));
    cases.push(match hlt {
        Ok((r, m)) => r.into_case(
            "hlt",
            &format!(
                "host rdtsc around KVM_RUN; no in-kernel irqchip, so HLT exits to user space \
                 (KVM_EXIT_HLT); with an irqchip HLT blocks in the kernel: see `halt`{emulated}"
            ),
            m.tsc_khz,
        ),
        Err(KvmError::Aborted(why)) => return Err(KvmError::Aborted(why)),
        Err(e) => unmeasurable("hlt", &e),
    });

    // cpuid, timed inside the guest, and the same window around an ordinary instruction.
    let cpuid = guest_timed(kvm, opts, ctl, CPUID)
        .and_then(|c| guest_timed(kvm, opts, ctl, MOV_BX_BX).map(|b| (c, b)));
    cases.push(match cpuid {
        Ok(((c, khz), (base, _))) => {
            let mut r = c;
            r.note_extra = cpuid_note(&base.cycles, &r.cycles, khz, pvm);
            r.into_case("cpuid", "", khz)
        }
        Err(KvmError::Aborted(why)) => return Err(KvmError::Aborted(why)),
        Err(e) => unmeasurable("cpuid", &e),
    });

    Ok(ExitReport {
        tsc_khz,
        cases,
        host_trace: None,
    })
}

/// A VM without irqchip running `program` at `CODE` with the given DS.
fn plain<'a>(program: &'a [(usize, &'a [u8])], ds: u16) -> Setup<'a> {
    Setup {
        irqchip: false,
        halt_poll_ns: None,
        program,
        ds,
        ivt: false,
    }
}

/// How the cpuid case was timed, and what CPUID adds over the same window around an
/// ordinary instruction (`floor`), both p50s in cycles.
fn cpuid_note(floor: &[u64], cpuid: &[u64], khz: u64, pvm: bool) -> String {
    let floor = Summary::from_values(floor).p50 as u64;
    let cpuid = Summary::from_values(cpuid).p50 as u64;
    let diff = cpuid as i64 - floor as i64;
    let diff_ns = util::cycles_to_ns(diff.unsigned_abs(), khz) as i64 * diff.signum();
    // A window no slower than its floor says CPUID costs nothing it can resolve, not that
    // CPUID takes negative time.
    let adds = if diff_ns > 0 {
        format!("CPUID itself adds about {diff_ns} ns at p50")
    } else {
        format!(
            "CPUID itself adds nothing this window resolves (its p50 is {} ns under the floor's)",
            -diff_ns
        )
    };
    format!(
        "timed in the guest: `rdtsc; mov esi, eax; xor eax, eax; cpuid; rdtsc` (CPUID is \
         handled inside KVM, never in user space); the same window with `mov bx, bx` in \
         place of cpuid has p50 {} ns ({floor} cycles), so {adds}{}",
        util::cycles_to_ns(floor, khz),
        if pvm {
            " — under PVM the whole window is emulated, so this is an emulator cost \
             (within its noise), not a hardware VM exit"
        } else {
            ""
        }
    )
}

fn unmeasurable(name: &str, e: &KvmError) -> ExitCase {
    ExitCase {
        name: name.to_string(),
        iterations: 0,
        ns: None,
        cycles: None,
        note: Some(format!("not measurable here: {e}")),
    }
}

/// Raw samples of one case plus KVM's counters over the measured part.
struct CaseRun {
    cycles: Vec<u64>,
    stats: Option<BTreeMap<String, u64>>,
    /// Samples the `stats` delta covers (warm-up included for in-guest timing).
    stats_span: u64,
    /// Wall time and TSC over the measured loop, to cross-check `tsc_khz`.
    wall: Option<(Duration, u64)>,
    note_extra: String,
}

impl CaseRun {
    fn into_case(self, name: &str, how: &str, tsc_khz: u64) -> ExitCase {
        let ns: Vec<u64> = self
            .cycles
            .iter()
            .map(|&c| util::cycles_to_ns(c, tsc_khz))
            .collect();
        let mut note = format!("{how}{}", self.note_extra);
        if let Some(st) = &self.stats {
            let per = |k: &str| st.get(k).map(|&v| v as f64 / self.stats_span.max(1) as f64);
            if let (Some(e), Some(i)) = (per("exits"), per("insn_emulation")) {
                note.push_str(&format!(
                    "; per iteration KVM counted {e:.2} exits, {i:.1} emulated instructions"
                ));
            }
        }
        if let Some((wall, tsc)) = self.wall {
            let expect = wall.as_nanos() as f64 * tsc_khz as f64 / 1e6;
            if expect > 0.0 && ((tsc as f64 / expect) - 1.0).abs() > 0.02 {
                note.push_str(&format!(
                    "; WARNING: TSC ran {:.1}% off {tsc_khz} kHz against the monotonic clock",
                    (tsc as f64 / expect - 1.0) * 100.0
                ));
            }
        }
        ExitCase {
            name: name.to_string(),
            iterations: u32::try_from(self.cycles.len()).unwrap_or(u32::MAX),
            ns: Some(Summary::from_values(&ns)),
            cycles: Some(Summary::from_values(&self.cycles)),
            note: Some(note),
        }
    }
}

/// Runs `KVM_RUN` `warmup + iterations` times, timing each with the host TSC; each run must end
/// in an exit accepted by `expect`.
fn host_timed(
    m: &mut Machine,
    opts: &ExitOpts,
    ctl: &Ctl,
    expect: impl Fn(&Exit) -> bool,
) -> Result<CaseRun, KvmError> {
    let mut stats_fd = StatsFd::open_vcpu(&m.vcpu).ok();
    let mut one = |record: bool, out: &mut Vec<u64>| -> Result<(), KvmError> {
        loop {
            if ctl.stopped() {
                return Err(KvmError::Aborted("watchdog stopped the exit loop".into()));
            }
            let t0 = util::rdtsc();
            let e = guest::run_once(&mut m.vcpu)?;
            let t1 = util::rdtsc();
            if e == Exit::Intr {
                continue; // a stray signal: retry, do not record
            }
            if !expect(&e) {
                return Err(KvmError::Guest(format!("unexpected exit {e:?}")));
            }
            if record {
                out.push(t1.wrapping_sub(t0));
            }
            return Ok(());
        }
    };
    let mut cycles = Vec::with_capacity(opts.iterations as usize);
    for _ in 0..opts.warmup {
        one(false, &mut cycles)?;
    }
    let before = stats_fd.as_mut().and_then(|s| s.read_entries().ok());
    let (i0, c0) = (Instant::now(), util::rdtsc());
    for _ in 0..opts.iterations {
        one(true, &mut cycles)?;
    }
    let (i1, c1) = (Instant::now(), util::rdtsc());
    let after = stats_fd.as_mut().and_then(|s| s.read_entries().ok());
    Ok(CaseRun {
        cycles,
        stats: before.zip(after).map(|(b, a)| stats::delta(&b, &a)),
        stats_span: u64::from(opts.iterations),
        wall: Some((i1 - i0, c1.wrapping_sub(c0))),
        note_extra: String::new(),
    })
}

/// Runs the in-guest timing loop with `slot` as the timed instruction and collects
/// `warmup + iterations` TSC deltas (the first `warmup` are dropped). Returns the run and the
/// TSC rate.
fn guest_timed(
    kvm: &Kvm,
    opts: &ExitOpts,
    ctl: &Ctl,
    slot: [u8; 2],
) -> Result<(CaseRun, u64), KvmError> {
    let mut code = TIMED.to_vec();
    code[TIMED_SLOT..TIMED_SLOT + 2].copy_from_slice(&slot);
    let program = [(CODE, code.as_slice())];
    let mut m = Machine::new(kvm, &plain(&program, 0))?;
    let mut stats_fd = StatsFd::open_vcpu(&m.vcpu).ok();
    let before = stats_fd.as_mut().and_then(|s| s.read_entries().ok());
    let need = opts.iterations as usize + opts.warmup as usize;
    let mut all = Vec::with_capacity(need + BATCH);
    while all.len() < need {
        if ctl.stopped() {
            return Err(KvmError::Aborted("watchdog stopped the cpuid loop".into()));
        }
        match guest::run_once(&mut m.vcpu)? {
            Exit::Out { port, .. } if port == PORT_REPORT => {
                for k in 0..BATCH {
                    all.push(u64::from(m.mem.read_u32(SAMPLES + 4 * k)?));
                }
            }
            Exit::Intr => continue,
            e => return Err(KvmError::Guest(format!("unexpected exit {e:?}"))),
        }
    }
    let after = stats_fd.as_mut().and_then(|s| s.read_entries().ok());
    let span = all.len() as u64;
    all.truncate(need);
    let cycles = all.split_off(opts.warmup as usize);
    Ok((
        CaseRun {
            cycles,
            stats: before.zip(after).map(|(b, a)| stats::delta(&b, &a)),
            stats_span: span,
            wall: None,
            note_extra: String::new(),
        },
        m.tsc_khz,
    ))
}
