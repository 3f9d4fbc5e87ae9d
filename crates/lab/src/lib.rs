//! A test between two ends: the [`agent`] (the server half, `virtperf serve`) and the
//! [`client`] (the half that drives), talking the control protocol; per workload what each
//! half runs ([`roles`]); both sides' measurements assembled into one result ([`assemble`]).
//! Around them: [`plan`] (what to run, against which agent), [`probe`] (measurements an
//! agent runs by name for a client elsewhere), `--trace`/`--timeline`/`--capture` around a
//! measured interval, and [`parse`] (value parsers shared by the CLI and spec files).
//!
//! Dependencies point down: `lab` uses `load` (engines), `measure` (samplers), `machine`
//! (the lock, knobs) and `wire` (protocol and types). Where the ends run is the `place`
//! crate, above this one; nothing here knows a placement, a spec or explain.

pub mod agent;
pub mod assemble;
pub mod capture;
pub mod client;
pub mod fds;
mod half;
pub mod parse;
pub mod plan;
pub mod probe;
pub mod roles;
pub mod series;
mod side;
mod timeline;
pub mod trace;
mod udp_roles;
pub mod under_load;
mod window;

use std::time::Duration;

/// How long a peer may stay silent during connection set-up (hello, prepare, start).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Receive/send timeout on data connections: a peer silent this long has gone away.
pub const DATA_TIMEOUT: Duration = Duration::from_secs(10);
/// Extra time beyond a test's planned duration before the agent gives up on a client that
/// never sends `Stop`.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

/// Bounds of one HTTP download (`http --url --max-size/--max-time`).
pub use virtperf_load::http::Limits as HttpLimits;
