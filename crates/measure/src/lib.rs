//! Samplers that wrap a trial: system-wide CPU from /proc/stat, per-thread CPU from
//! getrusage, latency histograms, clock cost, and the environment fingerprint.
//!
//! Nothing here opens a socket; every function reads the kernel's view of this machine.

pub mod cpu;
pub mod critical;
pub mod env;
pub mod events;
pub mod latency;
pub mod nic;
mod perf;
pub mod procs;
pub mod sampling;
pub mod trace;
pub mod vm;
pub use cpu::thread_cpu_since;

pub use cpu::{loadavg_1m, process_cpu_s, split, thread_cpu, ProcStat};
pub use env::fingerprint;
pub use latency::{new_histogram, summarize, LatencyHistogram};
