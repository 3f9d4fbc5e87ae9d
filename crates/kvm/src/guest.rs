//! The guest: 64 KiB of memory at guest-physical 0, one vCPU in 16-bit real mode, and the
//! hand-assembled programs it runs.
//!
//! Why hand-assembled byte arrays: the programs are a few dozen bytes; an assembler crate or a
//! build-time `as` step would add a dependency and a toolchain requirement for ~40 bytes, and as
//! bytes they ship inside the binary, so the benchmark runs anywhere /dev/kvm does. Every line
//! below is one instruction with its mnemonic; jump displacements are written out with their
//! arithmetic (`target − address of the next instruction`). The unit tests re-check the jumps.
//!
//! Why real mode: no page tables, GDT or mode switch to set up, so the guest is tiny. On
//! VMX/SVM hosts it runs natively (unrestricted guest); under PVM it is emulated one
//! instruction at a time (`kvm exits`' cpuid floor, a window of three ordinary instructions
//! and an `rdtsc`, took 1.9 µs at p50 on a 2026-11-30 PVM host: about 0.5 µs each), which is
//! why every measured path is a handful of instructions.

use kvm_bindings::{kvm_enable_cap, kvm_segment, kvm_userspace_memory_region};
use kvm_ioctls::{Kvm, VcpuExit, VcpuFd, VmFd};

use crate::{KvmError, KVM_CAP_HALT_POLL};

/// Guest memory size: one slot at guest-physical 0 (real mode can address 1 MiB, we need 64 KiB).
pub(crate) const MEM_SIZE: usize = 0x1_0000;
/// Where every program starts (CS = 0, IP = 0x1000).
pub(crate) const CODE: usize = 0x1000;
/// Real-mode stack top (SS = 0): interrupts push FLAGS, CS, IP here.
const STACK_TOP: u64 = 0x8000;

/// Port the halt guest's interrupt handler writes to after storing its TSC ("report").
pub(crate) const PORT_REPORT: u16 = 0xE9;
/// Port the unexpected-vector stubs write the vector number to.
pub(crate) const PORT_SPURIOUS: u16 = 0xEA;
/// Port the halt guest's TSC calibration loop writes to.
pub(crate) const PORT_CALIBRATE: u16 = 0xEB;
/// Port the `pio` case writes to: COM1, as in the probes in shared/notes.
pub(crate) const PORT_PIO: u16 = 0x3F8;
/// Where the halt guest stores EDX:EAX of `rdtsc` (little endian, so a u64 at this address).
pub(crate) const TSC_SLOT: usize = 0x0500;
/// Sample buffer of the in-guest timed programs (cpuid): `BATCH` u32 TSC deltas.
pub(crate) const SAMPLES: usize = 0x2000;
/// Samples per batch, i.e. per report exit of the in-guest timed programs.
pub(crate) const BATCH: usize = 64;
/// First guest-physical address past the memory slot: stores there become KVM_EXIT_MMIO.
pub(crate) const MMIO_ADDR: u64 = MEM_SIZE as u64;
/// Rounds of the halt guest's TSC calibration loop.
pub(crate) const CAL_ROUNDS: u8 = 8;
/// Interrupt vector of IRQ 4 once the guest has programmed the PIC with vector base 0x20.
const IRQ4_VECTOR: usize = 0x24;
/// Address of the IRQ 4 handler.
pub(crate) const HANDLER: usize = 0x1100;
/// Per-vector stubs for every other vector, 8 bytes apart.
const STUBS: usize = 0x3000;

/// `pio`: one port write per iteration; each is one KVM_EXIT_IO to user space.
pub(crate) const PIO: &[u8] = &[
    0xBA, 0xF8, 0x03, // 0x1000  mov dx, 0x3f8
    0xEE, //             0x1003  out dx, al          ; → KVM_EXIT_IO
    0xEB, 0xFD, //       0x1004  jmp 0x1003          ; 0x1003 − 0x1006 = −3
];

/// `mmio`: a byte store to DS:0 with DS = 0x1000, i.e. guest-physical 0x10000, just past the only
/// memory slot, so KVM finds no memory there and exits with KVM_EXIT_MMIO.
pub(crate) const MMIO: &[u8] = &[
    0xA2, 0x00, 0x00, // 0x1000  mov [0x0000], al    ; DS:0 = 0x10000 → KVM_EXIT_MMIO
    0xEB, 0xFB, //       0x1003  jmp 0x1000          ; 0x1000 − 0x1005 = −5
];

/// `hlt` without an in-kernel irqchip: KVM hands every HLT to user space (KVM_EXIT_HLT).
pub(crate) const HLT: &[u8] = &[
    0xF4, //             0x1000  hlt                 ; → KVM_EXIT_HLT
    0xEB, 0xFD, //       0x1001  jmp 0x1000          ; 0x1000 − 0x1003 = −3
];

/// Offset in [`TIMED`] of the 2-byte instruction being timed.
pub(crate) const TIMED_SLOT: usize = 0x0E;
/// `cpuid` encoding for the slot.
pub(crate) const CPUID: [u8; 2] = [0x0F, 0xA2];
/// Baseline for the slot: `mov bx, bx`, one ordinary (no-exit) instruction of the same length,
/// so baseline and cpuid programs differ only in the timed instruction.
pub(crate) const MOV_BX_BX: [u8; 2] = [0x89, 0xDB];

/// In-guest timing: `rdtsc; <slot>; rdtsc`, the 32-bit difference stored in a buffer; after
/// `BATCH` samples one port write lets the host copy them. The low 32 bits suffice: a delta
/// wraps only after 2^32 cycles (> 1 s). CPUID clobbers EAX–EDX, so the start time lives in
/// ESI, the buffer pointer in DI and the counter in BP.
pub(crate) const TIMED: &[u8] = &[
    0xBF,
    0x00,
    0x20, //       0x1000  mov di, 0x2000      ; SAMPLES
    0xBD,
    BATCH as u8,
    0x00, // 0x1003  mov bp, 64          ; BATCH
    0x0F,
    0x31, //             0x1006  rdtsc               ; loop:
    0x66,
    0x89,
    0xC6, //       0x1008  mov esi, eax
    0x66,
    0x31,
    0xC0, //       0x100B  xor eax, eax        ; CPUID leaf 0
    0x0F,
    0xA2, //             0x100E  cpuid               ; TIMED_SLOT (or mov bx, bx)
    0x0F,
    0x31, //             0x1010  rdtsc
    0x66,
    0x29,
    0xF0, //       0x1012  sub eax, esi
    0x66,
    0x89,
    0x05, //       0x1015  mov [di], eax
    0x83,
    0xC7,
    0x04, //       0x1018  add di, 4
    0x4D, //                   0x101B  dec bp
    0x75,
    0xE8, //             0x101C  jnz 0x1006          ; 0x1006 − 0x101E = −0x18
    0xE6,
    PORT_REPORT as u8, // 0x101E  out 0xE9, al        ; batch full → KVM_EXIT_IO
    0xEB,
    0xDE, //             0x1020  jmp 0x1000          ; 0x1000 − 0x1022 = −0x22
];

/// Halt guest set-up and idle loop. Programs the master 8259 (vector base 0x20, only IRQ 4
/// unmasked), reports `rdtsc` `CAL_ROUNDS` times so the host can check that guest and host TSC
/// agree, then idles in `sti; hlt` (STI's one-instruction interrupt shadow makes the pair
/// atomic: an interrupt cannot slip in between and be missed until the next one).
pub(crate) const HALT_MAIN: &[u8] = &[
    0xB0,
    0x11, //             0x1000  mov al, 0x11        ; ICW1: edge, cascade, ICW4 follows
    0xE6,
    0x20, //             0x1002  out 0x20, al
    0xB0,
    0x20, //             0x1004  mov al, 0x20        ; ICW2: IRQ0–7 → vectors 0x20–0x27
    0xE6,
    0x21, //             0x1006  out 0x21, al
    0xB0,
    0x04, //             0x1008  mov al, 0x04        ; ICW3: slave PIC on IRQ 2
    0xE6,
    0x21, //             0x100A  out 0x21, al
    0xB0,
    0x01, //             0x100C  mov al, 0x01        ; ICW4: 8086 mode, normal EOI
    0xE6,
    0x21, //             0x100E  out 0x21, al
    0xB0,
    0xEF, //             0x1010  mov al, 0xEF        ; OCW1: mask all but IRQ 4
    0xE6,
    0x21, //             0x1012  out 0x21, al
    0xB9,
    CAL_ROUNDS,
    0x00, // 0x1014  mov cx, CAL_ROUNDS
    0x0F,
    0x31, //             0x1017  rdtsc               ; calibrate:
    0x66,
    0xA3,
    0x00,
    0x05, // 0x1019  mov [0x0500], eax
    0x66,
    0x89,
    0x16,
    0x04,
    0x05, // 0x101D mov [0x0504], edx
    0xE6,
    PORT_CALIBRATE as u8, // 0x1022 out 0xEB, al      ; → KVM_EXIT_IO
    0xE2,
    0xF1, //             0x1024  loop 0x1017         ; 0x1017 − 0x1026 = −0x0F
    0xFB, //                   0x1026  sti                 ; idle:
    0xF4, //                   0x1027  hlt                 ; KVM blocks/polls here
    0xEB,
    0xFC, //             0x1028  jmp 0x1026          ; 0x1026 − 0x102A = −4
];

/// IRQ 4 handler (vector 0x24). Its first instruction reads the TSC: the latency measured is
/// host `rdtsc` before `KVM_IRQ_LINE` → this `rdtsc`. It clobbers EAX/EDX without saving
/// them: the idle loop it interrupts uses no registers.
pub(crate) const HALT_HANDLER: &[u8] = &[
    0x0F,
    0x31, //             0x1100  rdtsc
    0x66,
    0xA3,
    0x00,
    0x05, // 0x1102  mov [0x0500], eax
    0x66,
    0x89,
    0x16,
    0x04,
    0x05, // 0x1106 mov [0x0504], edx
    0xB0,
    0x20, //             0x110B  mov al, 0x20
    0xE6,
    0x20, //             0x110D  out 0x20, al        ; non-specific EOI to the PIC
    0xE6,
    PORT_REPORT as u8, // 0x110F out 0xE9, al        ; → KVM_EXIT_IO: host reads 0x500
    0xCF,              //                   0x1111  iret
];

// Memory map, checked at compile time: IVT 0–0x3FF, TSC slot 0x500, code 0x1000, handler
// 0x1100, samples 0x2000, stubs 0x3000–0x37FF, stack below 0x8000. Nothing may overlap.
const _: () = {
    assert!(TSC_SLOT >= 0x400 && TSC_SLOT + 8 <= CODE);
    assert!(CODE + HALT_MAIN.len() <= HANDLER);
    assert!(CODE + TIMED.len() <= HANDLER);
    assert!(HANDLER + HALT_HANDLER.len() <= SAMPLES);
    assert!(SAMPLES + 4 * BATCH <= STUBS);
    assert!(STUBS + 8 * 256 <= STACK_TOP as usize - 0x100);
    assert!(BATCH <= 255);
};

/// Stub for an unexpected vector `v` (exception, spurious IRQ 7 …): report `v`, return.
fn stub(v: u8) -> [u8; 5] {
    [
        0xB0,
        v, //                        mov al, v
        0xE6,
        PORT_SPURIOUS as u8, //      out 0xEA, al
        0xCF,                //                           iret
    ]
}

/// Guest RAM: an anonymous mapping handed to KVM as slot 0.
pub(crate) struct GuestMem {
    ptr: *mut u8,
}

// SAFETY: the mapping is plain memory owned by this struct; all access goes through
// bounds-checked volatile reads/writes, and the guest writing concurrently cannot make a
// byte-wise read unsound.
unsafe impl Send for GuestMem {}
// SAFETY: see above.
unsafe impl Sync for GuestMem {}

impl GuestMem {
    fn new() -> Result<GuestMem, KvmError> {
        // SAFETY: fresh anonymous mapping, checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEM_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(KvmError::os("mmap guest memory"));
        }
        Ok(GuestMem { ptr: p.cast() })
    }

    /// Copies `bytes` to guest-physical `at`.
    pub(crate) fn write(&self, at: usize, bytes: &[u8]) -> Result<(), KvmError> {
        let end = at.checked_add(bytes.len()).filter(|&e| e <= MEM_SIZE);
        if end.is_none() {
            return Err(KvmError::Guest(format!(
                "write of {} bytes at {at:#x} is outside guest memory",
                bytes.len()
            )));
        }
        for (i, &b) in bytes.iter().enumerate() {
            // SAFETY: at + i < MEM_SIZE, checked above.
            unsafe { std::ptr::write_volatile(self.ptr.add(at + i), b) };
        }
        Ok(())
    }

    /// Reads `N` bytes at guest-physical `at` (volatile: the guest writes this memory).
    pub(crate) fn read<const N: usize>(&self, at: usize) -> Result<[u8; N], KvmError> {
        if at.checked_add(N).is_none_or(|e| e > MEM_SIZE) {
            return Err(KvmError::Guest(format!(
                "read at {at:#x} is outside guest memory"
            )));
        }
        // SAFETY: in bounds (checked); [u8; N] has alignment 1.
        Ok(unsafe { std::ptr::read_volatile(self.ptr.add(at).cast::<[u8; N]>()) })
    }

    pub(crate) fn read_u64(&self, at: usize) -> Result<u64, KvmError> {
        Ok(u64::from_le_bytes(self.read::<8>(at)?))
    }

    pub(crate) fn read_u32(&self, at: usize) -> Result<u32, KvmError> {
        Ok(u32::from_le_bytes(self.read::<4>(at)?))
    }
}

impl Drop for GuestMem {
    fn drop(&mut self) {
        // SAFETY: we own the mapping; the VM using it is dropped before (field order in Machine).
        unsafe { libc::munmap(self.ptr.cast(), MEM_SIZE) };
    }
}

/// How to build a [`Machine`].
pub(crate) struct Setup<'a> {
    /// Create the in-kernel PIC/IOAPIC/LAPIC: HLT is then handled inside KVM and interrupts
    /// come from `KVM_IRQ_LINE`.
    pub irqchip: bool,
    /// `Some(n)`: per-VM `KVM_CAP_HALT_POLL` = n ns.
    pub halt_poll_ns: Option<u64>,
    /// (guest-physical address, bytes) to load.
    pub program: &'a [(usize, &'a [u8])],
    /// Real-mode DS selector (the mmio case points DS past guest memory).
    pub ds: u16,
    /// Fill the IVT: vector 0x24 → [`HALT_HANDLER`], every other vector → a reporting stub.
    pub ivt: bool,
}

/// One VM with one vCPU. Field order is drop order: vCPU, then VM, then the memory it maps.
pub(crate) struct Machine {
    pub vcpu: VcpuFd,
    pub vm: VmFd,
    pub mem: GuestMem,
    pub tsc_khz: u64,
}

impl Machine {
    pub(crate) fn new(kvm: &Kvm, s: &Setup<'_>) -> Result<Machine, KvmError> {
        let vm = kvm
            .create_vm()
            .map_err(|e| KvmError::ioctl("KVM_CREATE_VM", e))?;
        // Intel without unrestricted guest needs a TSS page for real mode; elsewhere (PVM, SVM)
        // the call is harmless or unsupported, so its failure is not fatal.
        let _ = vm.set_tss_address(0xfffb_d000);
        if let Some(ns) = s.halt_poll_ns {
            let mut cap = kvm_enable_cap {
                cap: KVM_CAP_HALT_POLL,
                ..Default::default()
            };
            cap.args[0] = ns;
            vm.enable_cap(&cap)
                .map_err(|e| KvmError::ioctl("KVM_ENABLE_CAP(KVM_CAP_HALT_POLL)", e))?;
        }
        if s.irqchip {
            // Must precede vCPU creation, or the vCPU gets no in-kernel LAPIC.
            vm.create_irq_chip()
                .map_err(|e| KvmError::ioctl("KVM_CREATE_IRQCHIP", e))?;
        }
        let mem = GuestMem::new()?;
        if s.ivt {
            for v in 0..=255u8 {
                let target = if usize::from(v) == IRQ4_VECTOR {
                    HANDLER
                } else {
                    let at = STUBS + 8 * usize::from(v);
                    mem.write(at, &stub(v))?;
                    at
                };
                // IVT entry: offset, then segment 0.
                let off = u16::try_from(target).unwrap_or(0).to_le_bytes();
                mem.write(4 * usize::from(v), &[off[0], off[1], 0, 0])?;
            }
        }
        for &(at, bytes) in s.program {
            mem.write(at, bytes)?;
        }
        let region = kvm_userspace_memory_region {
            slot: 0,
            flags: 0,
            guest_phys_addr: 0,
            memory_size: MEM_SIZE as u64,
            userspace_addr: mem.ptr as u64,
        };
        // SAFETY: the region is our live mapping of MEM_SIZE bytes; `Machine` keeps it mapped
        // for as long as the VM exists (drop order).
        unsafe { vm.set_user_memory_region(region) }
            .map_err(|e| KvmError::ioctl("KVM_SET_USER_MEMORY_REGION", e))?;
        let vcpu = vm
            .create_vcpu(0)
            .map_err(|e| KvmError::ioctl("KVM_CREATE_VCPU", e))?;

        let mut sregs = vcpu
            .get_sregs()
            .map_err(|e| KvmError::ioctl("KVM_GET_SREGS", e))?;
        // Real mode: base = selector × 16. Keep the reset attributes (limit 0xffff, present).
        let real = |seg: &mut kvm_segment, sel: u16| {
            seg.selector = sel;
            seg.base = u64::from(sel) << 4;
        };
        real(&mut sregs.cs, 0);
        real(&mut sregs.ss, 0);
        real(&mut sregs.ds, s.ds);
        real(&mut sregs.es, 0);
        real(&mut sregs.fs, 0);
        real(&mut sregs.gs, 0);
        vcpu.set_sregs(&sregs)
            .map_err(|e| KvmError::ioctl("KVM_SET_SREGS", e))?;
        let mut regs = vcpu
            .get_regs()
            .map_err(|e| KvmError::ioctl("KVM_GET_REGS", e))?;
        regs.rip = CODE as u64;
        regs.rflags = 2; // bit 1 is reserved-one; IF = 0 until the guest says `sti`
        regs.rsp = STACK_TOP;
        vcpu.set_regs(&regs)
            .map_err(|e| KvmError::ioctl("KVM_SET_REGS", e))?;

        // Guest TSC runs at this rate; fall back to measuring it if the ioctl is missing.
        let tsc_khz = match vcpu.get_tsc_khz() {
            Ok(k) if k > 0 => u64::from(k),
            _ => crate::util::measure_tsc_khz(std::time::Duration::from_millis(20)),
        };
        Ok(Machine {
            vcpu,
            vm,
            mem,
            tsc_khz,
        })
    }
}

/// One `KVM_RUN` outcome, copied out of the `kvm_run` page so the vCPU borrow ends at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Exit {
    /// `out` to `port` with first data byte `value`.
    Out { port: u16, value: u8 },
    /// MMIO write to `addr`.
    MmioWrite { addr: u64 },
    /// KVM_EXIT_HLT (only without an in-kernel irqchip).
    Hlt,
    /// The ioctl returned EINTR / KVM_EXIT_INTR: a signal (our kick) arrived.
    Intr,
    /// Anything else, described for the error message.
    Other(String),
}

/// Runs the vCPU until its next exit to user space.
pub(crate) fn run_once(vcpu: &mut VcpuFd) -> Result<Exit, KvmError> {
    match vcpu.run() {
        Ok(VcpuExit::IoOut(port, data)) => Ok(Exit::Out {
            port,
            value: data.first().copied().unwrap_or(0),
        }),
        Ok(VcpuExit::MmioWrite(addr, _)) => Ok(Exit::MmioWrite { addr }),
        Ok(VcpuExit::Hlt) => Ok(Exit::Hlt),
        Ok(VcpuExit::Intr) => Ok(Exit::Intr),
        Ok(other) => Ok(Exit::Other(format!("{other:?}"))),
        Err(e) if e.errno() == libc::EINTR || e.errno() == libc::EAGAIN => Ok(Exit::Intr),
        Err(e) => Err(KvmError::ioctl("KVM_RUN", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Target of a short jump (EB/75/E2 rel8) at `code[at]` in a program loaded at `base`.
    fn rel8_target(code: &[u8], base: usize, at: usize) -> usize {
        let rel = code[at + 1] as i8 as isize;
        (base as isize + at as isize + 2 + rel) as usize
    }

    /// The watchdog path: a vCPU blocked in HLT forever (irqchip, IF = 0) must come back out of
    /// `KVM_RUN` when `Ctl::abort` signals its thread.
    #[test]
    fn abort_kicks_a_blocked_vcpu_out_of_kvm_run() {
        let kvm = match crate::open_kvm() {
            Ok(k) => k,
            Err(e) => {
                virtperf_testkit::skip("kvm", &e.to_string());
                return;
            }
        };
        let program = [(CODE, HLT)];
        let setup = Setup {
            irqchip: true,
            halt_poll_ns: Some(0),
            program: &program,
            ds: 0,
            ivt: false,
        };
        let mut m = Machine::new(&kvm, &setup).expect("machine");
        let ctl = crate::util::Ctl::new();
        let vcpu = &mut m.vcpu;
        let started = std::time::Instant::now();
        let exit = std::thread::scope(|s| {
            let t = s.spawn(|| {
                let _alive = ctl.enter_vcpu_thread();
                run_once(vcpu)
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            ctl.abort();
            t.join().expect("vCPU thread")
        });
        assert_eq!(exit.expect("KVM_RUN"), Exit::Intr);
        let took = started.elapsed();
        assert!(
            took >= std::time::Duration::from_millis(40)
                && took < std::time::Duration::from_secs(2)
        );
    }

    #[test]
    fn jumps_land_on_instruction_starts() {
        assert_eq!(rel8_target(PIO, CODE, 4), 0x1003);
        assert_eq!(PIO[3], 0xEE);
        assert_eq!(rel8_target(MMIO, CODE, 3), 0x1000);
        assert_eq!(rel8_target(HLT, CODE, 1), 0x1000);
        assert_eq!(rel8_target(TIMED, CODE, 0x1C), 0x1006); // jnz → rdtsc
        assert_eq!(&TIMED[6..8], &[0x0F, 0x31]);
        assert_eq!(rel8_target(TIMED, CODE, 0x20), 0x1000);
        assert_eq!(&TIMED[TIMED_SLOT..TIMED_SLOT + 2], &CPUID);
        assert_eq!(rel8_target(HALT_MAIN, CODE, 0x24), 0x1017); // loop → rdtsc
        assert_eq!(&HALT_MAIN[0x17..0x19], &[0x0F, 0x31]);
        assert_eq!(rel8_target(HALT_MAIN, CODE, 0x28), 0x1026); // jmp → sti
        assert_eq!(HALT_MAIN[0x26], 0xFB);
        assert_eq!(HALT_MAIN.len(), 0x2A);
        assert_eq!(HALT_HANDLER.last(), Some(&0xCF));
        assert_eq!(TIMED.len(), 0x22);
    }
}
