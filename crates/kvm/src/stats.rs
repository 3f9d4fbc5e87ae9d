//! KVM's binary statistics (`KVM_GET_STATS_FD`, Linux 5.14+): per-VM and per-vCPU counters
//! such as `exits`, `halt_exits`, `halt_successful_poll`, read without debugfs (which is
//! root-only and, in this project's guests, refused).
//!
//! File layout (Documentation/virt/kvm/api.rst, "KVM_GET_STATS_FD"): a 24-byte header
//! `{flags, name_size, num_desc, id_offset, desc_offset, data_offset}` (u32 each); at
//! `desc_offset`, `num_desc` descriptors of `16 + name_size` bytes
//! `{flags u32, exponent i16, size u16, offset u32, bucket_size u32, name[name_size]}`; the
//! values of descriptor d are `d.size` u64s at `data_offset + d.offset`.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use kvm_ioctls::VcpuFd;

use crate::KvmError;

/// `KVM_GET_STATS_FD` = `_IO(KVMIO, 0xce)`; kvm-ioctls has no wrapper for it.
const KVM_GET_STATS_FD: u64 = 0xAECE;
const HEADER_LEN: usize = 24;
const DESC_FIXED_LEN: usize = 16;
const TYPE_MASK: u32 = 0xF;
const TYPE_CUMULATIVE: u32 = 0;
const TYPE_INSTANT: u32 = 1;
const TYPE_PEAK: u32 = 2;
/// The stats "file" of a vCPU is a few KiB; anything claiming more is corrupt and must not make
/// us allocate without bound.
const MAX_FILE: usize = 16 << 20;

/// One scalar statistic: its name, whether it only ever grows (so a difference of two reads is
/// meaningful), and its value (summed when the descriptor holds several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub name: String,
    pub cumulative: bool,
    pub value: u64,
}

/// An open binary-statistics file descriptor of one vCPU (or VM).
#[derive(Debug)]
pub struct StatsFd {
    fd: OwnedFd,
    buf: Vec<u8>,
}

impl StatsFd {
    /// Opens the statistics of a vCPU (`KVM_GET_STATS_FD` on the vCPU fd).
    pub fn open_vcpu(vcpu: &VcpuFd) -> Result<StatsFd, KvmError> {
        Self::open_raw(vcpu.as_raw_fd())
    }

    /// Reads an already open statistics descriptor (a duplicate of another process's, see
    /// [`crate::ProcessStats`]).
    pub(crate) fn from_stats(fd: OwnedFd) -> StatsFd {
        StatsFd {
            fd,
            buf: Vec::new(),
        }
    }

    fn open_raw(fd: i32) -> Result<StatsFd, KvmError> {
        // SAFETY: KVM_GET_STATS_FD takes no argument and returns a new fd or -1.
        let rc = unsafe { libc::ioctl(fd, KVM_GET_STATS_FD as _, 0) };
        if rc < 0 {
            return Err(KvmError::Ioctl {
                what: "KVM_GET_STATS_FD",
                error: std::io::Error::last_os_error(),
            });
        }
        // SAFETY: the kernel just gave us this fd and nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(rc) };
        Ok(StatsFd {
            fd,
            buf: Vec::new(),
        })
    }

    /// Reads every scalar statistic now: multi-value statistics are summed, histograms
    /// (`*_hist`) are skipped.
    pub fn read(&mut self) -> Result<BTreeMap<String, u64>, KvmError> {
        Ok(self
            .read_entries()?
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect())
    }

    /// Like [`StatsFd::read`], keeping whether each statistic is cumulative.
    pub(crate) fn read_entries(&mut self) -> Result<Vec<Entry>, KvmError> {
        self.fill()?;
        parse_entries(&self.buf)
    }

    /// Parses a whole statistics file image (as read from offset 0) into scalar statistics.
    /// Public so that a saved image can be decoded; never panics, whatever the bytes: every
    /// offset and length is bounds-checked and a malformed image is an `Err`.
    pub fn parse(buf: &[u8]) -> Result<BTreeMap<String, u64>, KvmError> {
        Ok(parse_entries(buf)?
            .into_iter()
            .map(|e| (e.name, e.value))
            .collect())
    }

    /// Reads the whole file with `pread` from offset 0 (the kernel regenerates the data part on
    /// every read, so re-reading the same fd gives fresh values).
    fn fill(&mut self) -> Result<(), KvmError> {
        self.buf.clear();
        if self.buf.capacity() < 4096 {
            self.buf.reserve(4096);
        }
        loop {
            if self.buf.len() == self.buf.capacity() {
                if self.buf.len() >= MAX_FILE {
                    return Err(KvmError::Stats(format!(
                        "statistics file is larger than {MAX_FILE} bytes"
                    )));
                }
                self.buf.reserve(self.buf.len());
            }
            let len = self.buf.len();
            let spare = self.buf.capacity() - len;
            // SAFETY: we read into the vector's spare capacity and only extend `len` by what
            // the kernel reports it wrote.
            let n = unsafe {
                libc::pread(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().add(len).cast(),
                    spare,
                    len as libc::off_t,
                )
            };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(KvmError::Stats(format!("read: {e}")));
            }
            if n == 0 {
                return Ok(());
            }
            let n = usize::try_from(n).unwrap_or(0).min(spare);
            // SAFETY: the kernel initialised these `n` bytes.
            unsafe { self.buf.set_len(len + n) };
        }
    }
}

fn u32_at(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn u16_at(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_ne_bytes([b[0], b[1]]))
}

fn u64_at(buf: &[u8], at: usize) -> Option<u64> {
    let b = buf.get(at..at.checked_add(8)?)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    Some(u64::from_ne_bytes(a))
}

fn corrupt(what: impl std::fmt::Display) -> KvmError {
    KvmError::Stats(format!("malformed statistics: {what}"))
}

/// The parser proper; see the module docs for the layout.
pub(crate) fn parse_entries(buf: &[u8]) -> Result<Vec<Entry>, KvmError> {
    if buf.len() < HEADER_LEN {
        return Err(corrupt(format!(
            "{} bytes, header needs {HEADER_LEN}",
            buf.len()
        )));
    }
    let field = |i: usize| u32_at(buf, i * 4).map(|v| v as usize).unwrap_or(0);
    let (name_size, num_desc, desc_offset, data_offset) = (field(1), field(2), field(4), field(5));
    let desc_len = DESC_FIXED_LEN
        .checked_add(name_size)
        .ok_or_else(|| corrupt("name size overflows"))?;
    let mut out = Vec::new();
    for i in 0..num_desc {
        let start = i
            .checked_mul(desc_len)
            .and_then(|o| o.checked_add(desc_offset))
            .ok_or_else(|| corrupt(format!("descriptor {i} offset overflows")))?;
        let desc = start
            .checked_add(desc_len)
            .and_then(|end| buf.get(start..end))
            .ok_or_else(|| {
                corrupt(format!(
                    "descriptor {i} lies past the end ({} bytes)",
                    buf.len()
                ))
            })?;
        // `desc` is exactly desc_len >= 16 bytes long, so these fixed offsets are in bounds;
        // the `ok_or` keeps it so even if that reasoning ever breaks.
        let flags = u32_at(desc, 0).ok_or_else(|| corrupt("short descriptor"))?;
        let size = u16_at(desc, 6).ok_or_else(|| corrupt("short descriptor"))?;
        let offset = u32_at(desc, 8).ok_or_else(|| corrupt("short descriptor"))?;
        let raw_name = desc.get(DESC_FIXED_LEN..).unwrap_or(&[]);
        let name_end = raw_name
            .iter()
            .position(|&b| b == 0)
            .unwrap_or(raw_name.len());
        let name = String::from_utf8_lossy(&raw_name[..name_end]).into_owned();
        let kind = flags & TYPE_MASK;
        // Histograms (linear / log) are bucket arrays, not one quantity; unknown future types
        // are skipped rather than guessed at.
        if !matches!(kind, TYPE_CUMULATIVE | TYPE_INSTANT | TYPE_PEAK) || name.is_empty() {
            continue;
        }
        let mut value = 0u64;
        for k in 0..usize::from(size) {
            let at = data_offset
                .checked_add(offset as usize)
                .and_then(|a| a.checked_add(k * 8));
            let v = at
                .and_then(|a| u64_at(buf, a))
                .ok_or_else(|| corrupt(format!("value of {name} lies past the end")))?;
            value = value.saturating_add(v);
        }
        out.push(Entry {
            name,
            cumulative: kind == TYPE_CUMULATIVE,
            value,
        });
    }
    Ok(out)
}

/// `after − before` for cumulative statistics, the latest value for instant/peak ones
/// (a difference of two gauges means nothing).
pub(crate) fn delta(before: &[Entry], after: &[Entry]) -> BTreeMap<String, u64> {
    let old: BTreeMap<&str, u64> = before.iter().map(|e| (e.name.as_str(), e.value)).collect();
    after
        .iter()
        .filter_map(|e| {
            // A counter absent from the first reading has no start: left out, not counted
            // from 0 (its whole value would read as this interval's).
            let v = if e.cumulative {
                e.value.saturating_sub(*old.get(e.name.as_str())?)
            } else {
                e.value
            };
            Some((e.name.clone(), v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Builds a stats image the way the kernel lays it out: header, id, descriptors, data.
    fn image(name_size: usize, descs: &[(u32, u16, u32, &str)], data: &[u64]) -> Vec<u8> {
        let id_offset = HEADER_LEN;
        let desc_offset = id_offset + 48; // KVM_STATS_NAME_SIZE id string
        let desc_len = DESC_FIXED_LEN + name_size;
        let data_offset = desc_offset + descs.len() * desc_len;
        let mut b = Vec::new();
        for v in [
            0u32,
            name_size as u32,
            descs.len() as u32,
            id_offset as u32,
            desc_offset as u32,
            data_offset as u32,
        ] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.resize(desc_offset, 0);
        for &(flags, size, offset, name) in descs {
            b.extend_from_slice(&flags.to_ne_bytes());
            b.extend_from_slice(&0i16.to_ne_bytes());
            b.extend_from_slice(&size.to_ne_bytes());
            b.extend_from_slice(&offset.to_ne_bytes());
            b.extend_from_slice(&0u32.to_ne_bytes());
            let mut n = name.as_bytes().to_vec();
            n.resize(name_size, 0);
            b.extend_from_slice(&n);
        }
        for v in data {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b
    }

    fn sample() -> Vec<u8> {
        image(
            16,
            &[
                (TYPE_CUMULATIVE, 1, 0, "exits"),
                (TYPE_CUMULATIVE, 1, 8, "halt_exits"),
                (4 /* log histogram */, 2, 16, "halt_wait_hist"),
                (TYPE_PEAK, 1, 32, "max_mmu_pages"),
                (TYPE_CUMULATIVE, 2, 40, "two_values"),
            ],
            &[100, 7, 1, 2, 9, 3, 4],
        )
    }

    #[test]
    fn parses_a_hand_built_image() {
        let m = StatsFd::parse(&sample()).expect("well-formed image");
        assert_eq!(m.get("exits"), Some(&100));
        assert_eq!(m.get("halt_exits"), Some(&7));
        assert_eq!(m.get("max_mmu_pages"), Some(&9));
        assert_eq!(m.get("two_values"), Some(&7));
        assert!(!m.contains_key("halt_wait_hist"));
        assert_eq!(m.len(), 4);
    }

    #[test]
    fn delta_only_subtracts_cumulative() {
        let a = parse_entries(&sample()).expect("ok");
        let mut b = a.clone();
        for e in &mut b {
            e.value += 5;
        }
        let d = delta(&a, &b);
        assert_eq!(d["exits"], 5);
        assert_eq!(d["max_mmu_pages"], 14);
        // A counter the first reading lacked has no delta (not its whole value).
        let without_exits: Vec<Entry> = a.iter().filter(|e| e.name != "exits").cloned().collect();
        let d = delta(&without_exits, &b);
        assert!(!d.contains_key("exits"), "{d:?}");
        assert_eq!(d["max_mmu_pages"], 14);
    }

    #[test]
    fn truncated_and_garbage_images_do_not_panic() {
        let good = sample();
        // Every truncation: Ok or Err, never a panic.
        for len in 0..good.len() {
            let _ = StatsFd::parse(&good[..len]);
        }
        assert!(StatsFd::parse(&good[..good.len() - 1]).is_err());
        assert!(StatsFd::parse(&[]).is_err());

        // Huge name size / descriptor count / offsets.
        for (field, value) in [(1, u32::MAX), (2, u32::MAX), (4, u32::MAX), (5, u32::MAX)] {
            let mut bad = good.clone();
            bad[field * 4..field * 4 + 4].copy_from_slice(&value.to_ne_bytes());
            let _ = StatsFd::parse(&bad);
        }
        // A descriptor whose value offset and size point far away.
        let far = image(8, &[(TYPE_CUMULATIVE, u16::MAX, u32::MAX, "x")], &[1]);
        assert!(StatsFd::parse(&far).is_err());
        // Names without a terminating NUL and non-UTF-8 bytes.
        let mut odd = image(4, &[(TYPE_CUMULATIVE, 1, 0, "abcd")], &[3]);
        let name_at = HEADER_LEN + 48 + DESC_FIXED_LEN;
        odd[name_at] = 0xFF;
        let m = StatsFd::parse(&odd).expect("odd name is still parseable");
        assert_eq!(m.values().copied().collect::<Vec<_>>(), vec![3]);

        // Pseudo-random garbage, with a plausible small header to reach the descriptor code.
        let mut rng = crate::util::Rng::new();
        for _ in 0..2000 {
            let len = rng.between(0, 300) as usize;
            let mut g: Vec<u8> = (0..len).map(|_| rng.between(0, 255) as u8).collect();
            if g.len() >= HEADER_LEN && rng.between(0, 1) == 0 {
                for (i, v) in [
                    0,
                    rng.between(0, 40),
                    rng.between(0, 20),
                    24,
                    24,
                    rng.between(0, 300),
                ]
                .into_iter()
                .enumerate()
                {
                    g[i * 4..i * 4 + 4].copy_from_slice(&(v as u32).to_ne_bytes());
                }
            }
            let _ = StatsFd::parse(&g);
        }
    }
}
