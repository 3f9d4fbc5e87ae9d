//! Orchestration, in three parts:
//! - the test protocol: [`plan`] (what to run, against which agent), [`client`] and
//!   [`agent`] (the two halves behind the control protocol), [`roles`] (per workload, what
//!   each half runs), [`assemble`] (both sides' measurements into one result);
//! - where the two ends run: [`place`] (one `Placement`, one `Site` per placement: local,
//!   netns, ssh, remote, guest);
//! - what experiments stand on (the specs and their runner are the `experiment` crate):
//!   [`parse`], [`knob`]s, the machine [`lock`], the [`state`] directory and [`cleanup`].
//!
//! Dependencies point down: `lab` uses `load` (engines), `measure` (samplers) and `wire`
//! (protocol and types); nothing below knows about `lab`.

pub mod agent;
pub mod assemble;
pub mod capture;
pub mod cleanup;
pub mod client;
pub mod fds;
mod half;
pub mod knob;
pub mod lock;
pub mod parse;
pub mod place;
pub mod plan;
pub mod probe;
mod roles;
pub mod series;
mod side;
pub mod state;
mod timeline;
mod trace;
mod udp_roles;

use std::time::Duration;

/// How long a peer may stay silent during connection set-up (hello, prepare, start).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Receive/send timeout on data connections: a peer silent this long has gone away.
pub const DATA_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra time beyond a test's planned duration before the agent gives up on a client that
/// never sends `Stop`.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// Whether this process runs as root (namespace and guest placements, and the machine-wide
/// lock under /run, need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Bounds of one HTTP download (`http --url --max-size/--max-time`).
pub use virtperf_load::http::Limits as HttpLimits;
