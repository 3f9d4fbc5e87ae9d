//! Data that crosses the wire or is stored: workloads, measurements, fingerprints, results.
//!
//! The JSON field names here are the stable schema documented in `docs/json.md`; rename
//! nothing without bumping [`RESULT_SCHEMA`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Identifier of the JSON result schema emitted by `--json`.
pub const RESULT_SCHEMA: &str = "virtperf.result/1";

/// Largest request, response or send size a workload accepts (one I/O, 64 MiB): larger
/// ones only measure memory allocation. Not the control protocol's frame cap
/// ([`crate::MAX_CONTROL_FRAME`]).
pub const MAX_IO_SIZE: u32 = 64 << 20;
/// Most parallel flows in one test with a thread per flow (no `threads`).
pub const MAX_FLOWS: u32 = 256;
/// Most flows in one test multiplexed on worker threads (`threads`): each is a socket on
/// both sides, so the file-descriptor limit usually binds first.
pub const MAX_MUX_FLOWS: u32 = 100_000;
/// Most worker threads per side (`threads`).
pub const MAX_THREADS: u32 = 256;
/// The page size data buffers are aligned to: a stream's `buf_offset` is below it.
pub const PAGE_BYTES: u32 = 4096;
/// Largest byte count for bulk and http transfers (1 TiB).
pub const MAX_TRANSFER: u64 = 1 << 40;
fn one_flow() -> u32 {
    1
}

fn is_one_flow(n: &u32) -> bool {
    *n == 1
}

/// Highest open-loop request rate (`rr --rate`), per second.
pub const MAX_RATE: u32 = 1_000_000;
/// Longest test duration accepted (24 h).
pub const MAX_DURATION_MS: u64 = 24 * 3600 * 1000;

/// Largest UDP payload over IPv4 (65,535 − 8 UDP header − 20 IP header bytes): the most one
/// datagram carries, so the largest UDP request, response or send size.
pub const MAX_UDP_PAYLOAD: u32 = 65_507;
/// Smallest UDP stream datagram: its sequence number and send timestamp (8 bytes each),
/// which loss, reordering and jitter are computed from (iperf3 needs the same).
pub const MIN_UDP_STREAM_SIZE: u32 = 16;

/// serde: leave out a false flag.
fn is_false(b: &bool) -> bool {
    !*b
}

/// serde: leave out a zero count.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

mod env;
mod host_vm;
mod measure;
mod parts;
mod result;
mod sock;
mod unit;
mod workload;
pub use env::*;
pub use host_vm::{HostVm, ThreadClass, VmKvmCounters};
pub use measure::*;
pub use parts::{bytes_text, Protocol, RecvWait, UdpCounts, Wait, Warmup, ZeroCopy};
pub use result::*;
pub use sock::*;
pub use unit::Unit;
pub use workload::*;
