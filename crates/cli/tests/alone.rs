//! The integration tests that need this machine to themselves while they measure: they
//! assert CPU bounds, idle entries or stop times that any neighbour's work would move, or
//! they change machine-wide knobs (halt polling, busy polling, sysctls) that another run
//! would journal or read (a battery refuses to start while another live one changes the
//! same knob). Cargo runs test binaries one after another, so nothing in `together` runs
//! beside this binary; inside it, a test takes [`alone`] (nothing else of this binary runs
//! meanwhile) or [`beside`] (it shares the machine with other `beside` tests only: usage
//! errors, refusals, a run that reads the knobs without changing them).

mod common;

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

mod demand;
mod events;
mod explain;
mod explain_stream;
mod knobs;
mod quickstart;
mod stop;
mod timeline;
mod trace;
mod tune;

/// Taken exclusively by a test that must run alone, shared by the others.
static MACHINE: RwLock<()> = RwLock::new(());

/// Held for a whole test that must be the only one running. A failed (panicked) holder
/// does not stop the rest: the lock guards no data.
pub fn alone() -> RwLockWriteGuard<'static, ()> {
    MACHINE.write().unwrap_or_else(|e| e.into_inner())
}

/// Held for a whole test that may run beside other such tests, never beside one that runs
/// [`alone`].
pub fn beside() -> RwLockReadGuard<'static, ()> {
    MACHINE.read().unwrap_or_else(|e| e.into_inner())
}
