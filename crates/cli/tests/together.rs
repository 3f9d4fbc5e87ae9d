//! The integration tests that share the machine: each checks behaviour (answers, exit codes,
//! files, processes left) rather than speed, and tolerates other tests running beside it, as
//! libtest runs them (on `RUST_TEST_THREADS` threads). One binary instead of one per file:
//! the files' tests fill each other's idle time (a guest booting, an agent waiting out a
//! timeout) and the crate links once. The tests that must measure alone are in `alone`;
//! `reaping` is a binary of its own because it makes its process a child subreaper.

mod common;
#[path = "../../store/tests/pgserver/mod.rs"]
#[macro_use]
mod pgserver;

mod agent;
mod ansible_fleet;
mod architecture;
mod capabilities;
mod chart_labels;
mod data_ports;
mod db_contention;
mod decisions;
mod errors;
mod experiment;
mod export;
mod fleet;
mod flows;
mod guest;
mod guest_explain;
mod guest_net;
mod help;
mod hostile;
mod interrupted;
mod intervals;
mod layout;
mod lock;
mod missing;
mod netns;
mod omit;
mod own_vm;
mod pcap;
mod security;
mod silent_agent;
mod sockopts;
mod ssh;
mod store_doc;
mod tax_gate;
mod tcpinfo;
mod team;
mod tune_hostile;
mod udp;
mod udp_forged;
mod vm_spec;
mod workloads;

/// Held for a whole test whose batteries change this host's halt-poll knob and busy polling
/// (explain run natively, or in network namespaces that share this kernel). Two such batteries at once
/// each take the other's setting for the knob's original and restore it: the fleet test's
/// 200 µs was left behind once beside the guest explain test's native battery (the
/// namespaces' private /run hides each battery's journal from the other). A failed
/// (panicked) holder does not stop the rest: the lock guards no data. libtest starts tests
/// in the order of their names: the fleet test, the longest holder (80–90 s), is in
/// `ansible_fleet` so that it starts among the first and is done long before the `guest`
/// tests reach the lock; as `fleet_ansible` it began just before them and their thread
/// idled waiting (`together` 413 s against 379–387 s without the lock).
pub fn host_knob() -> std::sync::RwLockWriteGuard<'static, ()> {
    HOST_KNOB.write().unwrap_or_else(|e| e.into_inner())
}

/// Held for a whole test that compares figures those batteries' knobs move (their busy
/// polling makes a blocking receiver spin in its own thread): never beside one of them,
/// beside each other freely. Once (CI, 2026-11-29) the omit test's client read 61.71 µs of
/// its own CPU per transaction without a warm-up against 32.57 with one; the likeliest
/// cause, not proven, a neighbour's `net.core.busy_read` of 50 µs for part of that run
/// (a receiver spinning up to 50 µs before each sleep of a ~95 µs round trip).
pub fn host_knobs_steady() -> std::sync::RwLockReadGuard<'static, ()> {
    HOST_KNOB.read().unwrap_or_else(|e| e.into_inner())
}

/// See [`host_knob`] and [`host_knobs_steady`].
static HOST_KNOB: std::sync::RwLock<()> = std::sync::RwLock::new(());
