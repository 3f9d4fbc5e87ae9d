//! The `perf_event_open(2)` plumbing shared by tracepoint counting (`trace`) and sampling
//! (`timeline`): the attribute struct, opening one tracepoint on one CPU with a kernel
//! filter, and the ioctls.
//!
//! Written on the raw system call: a tracepoint counter or sampler needs one attribute
//! struct, a few ioctls and a read or an mmap, which is less than wrapping a crate whose
//! tracepoint-filter and clock-id support this project could not check.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// The first 96 bytes of `struct perf_event_attr` (`PERF_ATTR_SIZE_VER3`, Linux 4.1+: up
/// to `clockid`); the fields past them stay zero.
#[repr(C)]
#[derive(Default)]
pub(crate) struct Attr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    /// Bit 0 `disabled` (created stopped), bit 25 `use_clockid`.
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
    config2: u64,
    branch_sample_type: u64,
    sample_regs_user: u64,
    sample_stack_user: u32,
    clockid: i32,
}

const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
const FLAG_DISABLED: u64 = 1;
const FLAG_USE_CLOCKID: u64 = 1 << 25;
/// `PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_RAW`.
pub(crate) const SAMPLE_TID_TIME_CPU_RAW: u64 = (1 << 1) | (1 << 2) | (1 << 7) | (1 << 10);

impl Attr {
    /// Counts tracepoint `id`, created stopped.
    pub(crate) fn counting(id: u64) -> Attr {
        Attr {
            kind: PERF_TYPE_TRACEPOINT,
            size: std::mem::size_of::<Attr>() as u32,
            config: id,
            flags: FLAG_DISABLED,
            ..Attr::default()
        }
    }

    /// Records every hit of tracepoint `id` with its thread, CPU, raw fields and a
    /// `CLOCK_MONOTONIC` timestamp (comparable across CPUs and with `Instant`), created
    /// stopped.
    pub(crate) fn sampling(id: u64) -> Attr {
        Attr {
            sample_period: 1,
            sample_type: SAMPLE_TID_TIME_CPU_RAW,
            flags: FLAG_DISABLED | FLAG_USE_CLOCKID,
            clockid: libc::CLOCK_MONOTONIC,
            ..Attr::counting(id)
        }
    }
}

// _IO('$', n) and _IOW('$', n, …) on Linux (the request's type differs between glibc and
// musl: cast at each call).
const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_RESET: libc::c_ulong = 0x2403;
pub(crate) const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
const IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;

/// Opens `attr` on `cpu` for every task there, with the kernel `filter` if any.
pub(crate) fn open_tracepoint(
    attr: &Attr,
    cpu: u32,
    filter: Option<&str>,
) -> Result<OwnedFd, String> {
    // SAFETY: `attr` is a valid, initialized perf_event_attr prefix whose `size` says how
    // long it is; the kernel only reads it. pid -1 with a CPU counts all tasks there.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const Attr,
            -1 as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => {
                " (needs root or CAP_PERFMON, or kernel.perf_event_paranoid at -1)"
            }
            _ => "",
        };
        return Err(format!("perf_event_open on CPU {cpu}: {e}{hint}"));
    }
    // SAFETY: a descriptor the kernel just returned to us, owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    if let Some(f) = filter {
        let c = CString::new(f).map_err(|_| format!("filter {f:?} has a NUL byte"))?;
        // SAFETY: our descriptor and a NUL-terminated string that outlives the call.
        if unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_FILTER as _, c.as_ptr()) } < 0 {
            return Err(format!(
                "the kernel refused the filter {f:?}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(fd)
}

/// An ioctl without an argument (enable, disable, reset) on `fd`.
fn ioctl0(fd: &OwnedFd, request: libc::c_ulong) {
    // SAFETY: an ioctl whose argument the kernel ignores, on a descriptor we own.
    unsafe { libc::ioctl(fd.as_raw_fd(), request as _, 0) };
}

/// Zeroes and starts every event of `fds`: the start of an interval.
pub(crate) fn start<'a>(fds: impl IntoIterator<Item = &'a OwnedFd>) {
    for fd in fds {
        ioctl0(fd, IOC_RESET);
        ioctl0(fd, IOC_ENABLE);
    }
}

/// Stops every event of `fds`: the end of an interval.
pub(crate) fn stop<'a>(fds: impl IntoIterator<Item = &'a OwnedFd>) {
    for fd in fds {
        ioctl0(fd, IOC_DISABLE);
    }
}

/// The id of tracepoint `event` (`system/name`) under the tracefs at `root`.
pub(crate) fn tracepoint_id(root: &std::path::Path, event: &str) -> Result<u64, String> {
    let t = std::fs::read_to_string(root.join("events").join(event).join("id"))
        .map_err(|e| format!("tracepoint {event}: {e} (not in this kernel?)"))?;
    t.trim()
        .parse()
        .map_err(|_| format!("tracepoint {event}: unreadable id {t:?}"))
}
