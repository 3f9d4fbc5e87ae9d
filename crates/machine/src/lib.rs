//! What a run holds on this machine and must give back: the machine-wide [`lock`] (one
//! measurement at a time), the [`state`] directory (who is running, what they left), and
//! kernel [`knob`]s applied through a journal so that a crashed run's changes are restored
//! by the next one.
//!
//! Below the test protocol (`lab`), the placements and the experiment runner, which all
//! take the lock or apply knobs; it knows none of them.

pub mod knob;
pub mod lock;
pub mod state;

/// Whether this process runs as root (namespace and guest placements, knobs, and the
/// machine-wide lock under /run, need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
