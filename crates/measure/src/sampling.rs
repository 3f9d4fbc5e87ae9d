//! Tracepoints sampled with timestamps into perf ring buffers (issue 28, `--timeline`):
//! every hit of a few scheduler, IPI, idle and syscall tracepoints on the test's CPUs,
//! with its thread, CPU, `CLOCK_MONOTONIC` time and raw fields, decoded into [`Event`]s
//! from which `crate::critical` rebuilds each transaction's path.
//!
//! One buffer per CPU (the other events of that CPU are redirected into it with
//! `PERF_EVENT_IOC_SET_OUTPUT`), read once after the trial: nothing drains it while the
//! test runs, so reading costs the measured CPUs nothing. A buffer that fills keeps its
//! oldest records and counts the rest as lost (the kernel's `PERF_RECORD_LOST`).

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};

use crate::perf::{open_tracepoint, tracepoint_id, Attr, IOC_SET_OUTPUT};

/// What happened, decoded from one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum What {
    /// The sampled thread entered `sendto` (a `send` on a socket).
    SendEnter,
    /// The sampled thread returned from `recvfrom` with this many bytes (negative: error).
    RecvExit(i64),
    /// Thread `tid` was woken, to run on `target_cpu`.
    Waking { tid: i32, target_cpu: i32 },
    /// Thread `next` was switched in (0: the idle task).
    SwitchIn { next: i32 },
    /// An IPI was sent to `cpu`.
    IpiSend { cpu: u32 },
    /// This CPU entered idle state `state`.
    IdleEnter(u32),
    /// This CPU left idle.
    IdleExit,
    /// An IPI arrived: call-function-single (`true`) or reschedule (`false`).
    IpiEntry(bool),
    /// The MSR `msr` was written (the x2APIC ICR, the TSC deadline).
    MsrWrite(u32),
    /// The NET_RX softirq began (`true`) or ended (`false`) on this CPU: where loopback
    /// and virtio receive processing runs.
    NetRx(bool),
}

/// One sampled tracepoint hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// `CLOCK_MONOTONIC`, nanoseconds.
    pub t_ns: u64,
    /// The CPU it happened on.
    pub cpu: u32,
    /// The thread that was running.
    pub tid: i32,
    /// What it was.
    pub what: What,
}

/// The tracepoints sampled, with their kernel filters.
const SAMPLED: &[(&str, Option<&str>)] = &[
    ("syscalls/sys_enter_sendto", None),
    ("syscalls/sys_exit_recvfrom", None),
    ("sched/sched_waking", None),
    ("sched/sched_switch", None),
    ("ipi/ipi_send_cpu", None),
    ("power/cpu_idle", None),
    ("irq_vectors/call_function_single_entry", None),
    ("irq_vectors/reschedule_entry", None),
    ("msr/write_msr", Some("msr==0x830 || msr==0x6e0")),
    ("irq/softirq_entry", Some("vec==3")),
    ("irq/softirq_exit", Some("vec==3")),
];

/// Field offsets of one tracepoint's raw record, from its tracefs `format` file.
#[derive(Debug, Default, Clone)]
struct Format {
    fields: HashMap<String, (usize, usize)>,
}

impl Format {
    fn parse(text: &str) -> Format {
        let mut fields = HashMap::new();
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';').map(str::trim);
            let decl = parts.next().unwrap_or_default();
            let num = |p: Option<&str>, k: &str| {
                p.and_then(|p| p.strip_prefix(k))
                    .and_then(|v| v.parse::<usize>().ok())
            };
            let (Some(off), Some(size)) =
                (num(parts.next(), "offset:"), num(parts.next(), "size:"))
            else {
                continue;
            };
            let name = decl.rsplit(' ').next().unwrap_or_default();
            let name = name.split('[').next().unwrap_or_default();
            fields.insert(name.to_string(), (off, size));
        }
        Format { fields }
    }

    /// Field `name` of `raw` as a signed integer (sign-extended from its size).
    fn int(&self, raw: &[u8], name: &str) -> Option<i64> {
        let (off, size) = *self.fields.get(name)?;
        let b = raw.get(off..off + size)?;
        Some(match size {
            1 => i64::from(b[0] as i8),
            2 => i64::from(i16::from_ne_bytes([b[0], b[1]])),
            4 => i64::from(i32::from_ne_bytes(b.try_into().ok()?)),
            8 => i64::from_ne_bytes(b.try_into().ok()?),
            _ => return None,
        })
    }
}

/// One CPU's ring buffer: the mapping and the descriptors that write into it.
struct Ring {
    base: *mut libc::c_void,
    len: usize,
    page: usize,
    fds: Vec<OwnedFd>,
}

// SAFETY: the mapping is only read through `&self` after the events are disabled, and
// unmapped once, in `drop`; the pointer is not shared outside this struct.
unsafe impl Send for Ring {}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `Sampler::open`, unmapped once.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Samplers on a set of CPUs, opened before a trial, started and stopped at its edges.
pub struct Sampler {
    rings: Vec<Ring>,
    /// Tracepoint id → (index in `SAMPLED`, its format).
    kinds: HashMap<u16, (usize, Format)>,
}

/// Data pages per CPU buffer (a power of two): 16 MiB, about 15,000 cross-CPU
/// transactions' worth of samples on each CPU.
const DATA_PAGES: usize = 4096;

impl Sampler {
    /// Opens every sampled tracepoint on every CPU in `cpus`. Unlike counting, a timeline
    /// needs them all: any that cannot be opened fails the whole, with why.
    pub fn open(cpus: &[u32]) -> Result<Sampler, String> {
        let root = crate::trace::tracefs()?;
        let mut kinds = HashMap::new();
        let mut ids = Vec::new();
        for (i, (ev, _)) in SAMPLED.iter().enumerate() {
            let id = tracepoint_id(root.path(), ev)?;
            let fmt = std::fs::read_to_string(root.path().join("events").join(ev).join("format"))
                .map_err(|e| format!("tracepoint {ev}: format: {e}"))?;
            kinds.insert(id as u16, (i, Format::parse(&fmt)));
            ids.push(id);
        }
        let page = rustix::param::page_size();
        let mut rings = Vec::new();
        for &cpu in cpus {
            let mut fds = Vec::new();
            for (id, (ev, filter)) in ids.iter().zip(SAMPLED) {
                let fd = open_tracepoint(&Attr::sampling(*id), cpu, *filter)
                    .map_err(|e| format!("{ev}: {e}"))?;
                fds.push(fd);
            }
            let len = page * (DATA_PAGES + 1);
            // SAFETY: a fresh shared mapping of a perf descriptor we own, at a length the
            // kernel accepts (1 + 2^n pages); checked for failure below.
            let base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fds[0].as_raw_fd(),
                    0,
                )
            };
            if base == libc::MAP_FAILED {
                return Err(format!(
                    "mapping a {} MiB perf buffer on CPU {cpu}: {} (root is exempt from kernel.perf_event_mlock_kb)",
                    len >> 20,
                    std::io::Error::last_os_error()
                ));
            }
            for fd in &fds[1..] {
                // SAFETY: redirects this descriptor's records into the first one's buffer;
                // both are ours, on the same CPU, with the same clock.
                if unsafe { libc::ioctl(fd.as_raw_fd(), IOC_SET_OUTPUT as _, fds[0].as_raw_fd()) }
                    < 0
                {
                    // SAFETY: the mapping just made.
                    unsafe { libc::munmap(base, len) };
                    return Err(format!(
                        "redirecting samples on CPU {cpu}: {}",
                        std::io::Error::last_os_error()
                    ));
                }
            }
            rings.push(Ring {
                base,
                len,
                page,
                fds,
            });
        }
        Ok(Sampler { rings, kinds })
    }

    /// Starts sampling: the start of the trial.
    pub fn start(&self) {
        crate::perf::start(self.rings.iter().flat_map(|r| &r.fds));
    }

    /// Stops sampling: the end of the trial.
    pub fn pause(&self) {
        crate::perf::stop(self.rings.iter().flat_map(|r| &r.fds));
    }

    /// Stops sampling and decodes every buffer: the events sorted by time, and how many
    /// records the full buffers lost (a throttled stretch counts one: its size is unknown).
    pub fn stop(&self) -> (Vec<Event>, u64) {
        self.pause();
        let mut events = Vec::new();
        let mut lost = 0;
        for r in &self.rings {
            lost += self.decode(r.bytes(), &mut events);
        }
        events.sort_by_key(|e| e.t_ns);
        (events, lost)
    }

    /// Decodes the records in `data` into `out`; returns the count of lost records.
    fn decode(&self, data: &[u8], out: &mut Vec<Event>) -> u64 {
        let mut lost = 0;
        let mut at = 0;
        while let Some(h) = data.get(at..at + 8) {
            let kind = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]);
            let size = usize::from(u16::from_ne_bytes([h[6], h[7]]));
            // A record shorter than its header (an empty range) or running past the data
            // ends the read.
            let Some(body) = data.get(at + 8..at + size) else {
                break;
            };
            match kind {
                // PERF_RECORD_SAMPLE: pid, tid, time, cpu, res, raw size, raw.
                9 => {
                    if let Some(e) = self.sample(body) {
                        out.push(e);
                    }
                }
                // PERF_RECORD_LOST: id, count.
                2 => {
                    lost += body
                        .get(8..16)
                        .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])))
                }
                // PERF_RECORD_THROTTLE: the kernel dropped samples until the matching
                // unthrottle, how many it does not say: at least one is missing.
                5 => lost += 1,
                _ => {}
            }
            at += size;
        }
        lost
    }

    fn sample(&self, b: &[u8]) -> Option<Event> {
        let u32_at = |o: usize| {
            b.get(o..o + 4)
                .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
        };
        let tid = u32_at(4)? as i32;
        let t_ns = u64::from_ne_bytes(b.get(8..16)?.try_into().ok()?);
        let cpu = u32_at(16)?;
        let raw_len = u32_at(24)? as usize;
        let raw = b.get(28..28 + raw_len)?;
        let id = u16::from_ne_bytes([*raw.first()?, *raw.get(1)?]);
        let (idx, f) = self.kinds.get(&id)?;
        let what = match idx {
            0 => What::SendEnter,
            1 => What::RecvExit(f.int(raw, "ret")?),
            2 => What::Waking {
                tid: f.int(raw, "pid")? as i32,
                target_cpu: f.int(raw, "target_cpu")? as i32,
            },
            3 => What::SwitchIn {
                next: f.int(raw, "next_pid")? as i32,
            },
            4 => What::IpiSend {
                cpu: f.int(raw, "cpu")? as u32,
            },
            5 => match f.int(raw, "state")? as u32 {
                u32::MAX => What::IdleExit,
                s => What::IdleEnter(s),
            },
            6 => What::IpiEntry(true),
            7 => What::IpiEntry(false),
            8 => What::MsrWrite(f.int(raw, "msr")? as u32),
            9 => What::NetRx(true),
            10 => What::NetRx(false),
            _ => return None,
        };
        Some(Event {
            t_ns,
            cpu,
            tid,
            what,
        })
    }
}

impl Ring {
    /// The records written so far. Nothing advances the tail, so the kernel never wraps:
    /// the data runs from the start of the data area to the head.
    fn bytes(&self) -> &[u8] {
        // SAFETY: the control page is the first page of our live mapping; data_head is a
        // u64 at offset 1024 that the kernel updates, read volatile and fenced before the
        // data it covers is read.
        let head = unsafe {
            let p = (self.base as *const u8).add(1024) as *const u64;
            std::ptr::read_volatile(p)
        };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let size = self.len - self.page;
        let n = (head as usize).min(size);
        // SAFETY: `n` bytes from the start of the data area, inside the mapping; the
        // events are disabled, so the kernel no longer writes them.
        unsafe { std::slice::from_raw_parts((self.base as *const u8).add(self.page), n) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_give_fields_by_name_with_their_sign() {
        let f = Format::parse(
            "name: x\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\tfield:long ret;\toffset:16;\tsize:8;\tsigned:1;\n",
        );
        let mut raw = vec![0u8; 24];
        raw[16..24].copy_from_slice(&(-11i64).to_ne_bytes());
        assert_eq!(f.int(&raw, "ret"), Some(-11));
        assert!(f.fields.contains_key("prev_comm"));
        assert_eq!(f.int(&raw[..20], "ret"), None, "a cut record gives nothing");
        assert_eq!(f.int(&raw, "absent"), None);
    }

    /// Records the kernel writes besides samples: LOST gives its count, THROTTLE at least
    /// one missing, others (UNTHROTTLE) nothing; a record cut short ends the read.
    #[test]
    fn lost_and_throttled_records_are_counted() {
        let s = Sampler {
            rings: Vec::new(),
            kinds: HashMap::new(),
        };
        let rec = |kind: u32, body: &[u8]| {
            let mut r = kind.to_ne_bytes().to_vec();
            r.extend_from_slice(&0u16.to_ne_bytes());
            r.extend_from_slice(&(8 + body.len() as u16).to_ne_bytes());
            r.extend_from_slice(body);
            r
        };
        let mut data = rec(
            2,
            &[&7u64.to_ne_bytes()[..], &3u64.to_ne_bytes()[..]].concat(),
        );
        data.extend(rec(5, &[0; 24]));
        data.extend(rec(6, &[0; 24]));
        let mut out = Vec::new();
        assert_eq!(s.decode(&data, &mut out), 4);
        let cut = rec(2, &[0; 16]);
        data.extend_from_slice(&cut[..12]);
        assert_eq!(s.decode(&data, &mut out), 4);
        assert!(out.is_empty());
    }

    /// On this machine for real (root): a thread that sleeps on CPU 0 is seen switched in
    /// there after each of its voluntary switches (the kernel's own count, getrusage), with
    /// times that increase; without the privilege, one reason. A sleep whose timer fired
    /// before the thread reached `schedule()` (a vCPU preempted for 300 µs under load) does
    /// not switch at all, so the reference is the switches the kernel counted, not the 50
    /// sleeps asked for.
    #[test]
    fn samples_real_wakeups_or_says_why_not() {
        let s = match Sampler::open(&[0]) {
            Ok(s) => s,
            Err(e) => {
                virtperf_testkit::skip("tracefs", &e.to_string());
                assert!(!e.is_empty());
                return;
            }
        };
        s.start();
        let voluntary = || {
            nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_THREAD)
                .expect("getrusage(RUSAGE_THREAD)")
                .voluntary_context_switches()
        };
        let (me, switched) = std::thread::spawn(move || {
            let mut c = rustix::thread::CpuSet::new();
            c.set(0);
            let _ = rustix::thread::sched_setaffinity(None, &c);
            let before = voluntary();
            for _ in 0..50 {
                std::thread::sleep(std::time::Duration::from_micros(300));
            }
            let tid = rustix::thread::gettid().as_raw_nonzero().get();
            (tid, voluntary() - before)
        })
        .join()
        .expect("the sleeping thread");
        let (ev, lost) = s.stop();
        assert_eq!(lost, 0);
        let ins = ev
            .iter()
            .filter(|e| e.what == What::SwitchIn { next: me } && e.cpu == 0)
            .count();
        assert!(switched >= 25, "only {switched} of 50 sleeps switched");
        assert!(
            ins as i64 >= switched,
            "{ins} switches to the sleeper of {} events, the kernel counted {switched}",
            ev.len()
        );
        assert!(ev.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    }
}
