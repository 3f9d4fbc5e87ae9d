//! A PM QoS CPU latency request (`/dev/cpu_dma_latency`): what tuned's `force_latency`
//! and `cpu_dma_latency`-holding daemons do. The bound holds only while the device stays
//! open; the kernel drops it when the file is closed, also when the process dies by
//! SIGKILL. So, unlike a sysctl, it needs no journal: nothing outlives its holder.

use std::fs::File;
use std::io::Write;

use anyhow::{Context, Result};

/// The device.
pub const DEVICE: &str = "/dev/cpu_dma_latency";

/// A held CPU latency bound; released when dropped.
#[derive(Debug)]
pub struct LatencyHold {
    _file: File,
    /// The bound, µs.
    pub us: u32,
}

impl LatencyHold {
    /// Holds CPUs to wake-up latencies of at most `us` µs (0: no cpuidle state but
    /// polling) until dropped.
    pub fn new(us: u32) -> Result<LatencyHold> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(DEVICE)
            .with_context(|| format!("cannot open {DEVICE} (it needs root)"))?;
        // The device takes the bound as a 32-bit integer in the machine's byte order.
        let v = i32::try_from(us).unwrap_or(i32::MAX);
        f.write_all(&v.to_ne_bytes())
            .with_context(|| format!("cannot write a latency bound to {DEVICE}"))?;
        Ok(LatencyHold { _file: f, us })
    }
}

/// Whether this process may hold a bound (root, and a kernel with PM QoS), or why not:
/// asked by holding a bound that constrains nothing, at once released.
pub fn can_hold() -> Result<(), String> {
    LatencyHold::new(i32::MAX as u32)
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

/// The bound in force now (the lowest of every holder's; 2000000000 µs when none holds
/// one), as the device reads back.
pub fn current_us() -> Option<u64> {
    let mut f = File::open(DEVICE).ok()?;
    let mut b = [0u8; 4];
    std::io::Read::read_exact(&mut f, &mut b).ok()?;
    u64::try_from(i32::from_ne_bytes(b)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A held bound is in force while held and gone once dropped (the kernel's own
    /// aggregate, read back from the device).
    #[test]
    fn a_bound_holds_while_held_and_is_gone_when_dropped() {
        if !virtperf_testkit::need_root(&format!("{DEVICE} is root's")) {
            return;
        }
        let Some(before) = current_us() else {
            virtperf_testkit::skip("pm-qos", &format!("{DEVICE} cannot be read here"));
            return;
        };
        let h = match LatencyHold::new(7) {
            Ok(h) => h,
            Err(e) => {
                virtperf_testkit::skip("pm-qos", &format!("{e:#}"));
                return;
            }
        };
        assert_eq!(current_us(), Some(before.min(7)));
        drop(h);
        assert_eq!(current_us(), Some(before));
    }
}
