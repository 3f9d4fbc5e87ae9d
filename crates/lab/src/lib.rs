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
mod cut;
pub mod fds;
mod half;
pub mod host_vm;
pub mod parse;
pub mod plan;
mod ports;
pub mod probe;
pub mod roles;
pub mod series;
mod side;
mod timeline_trial;
pub mod trace;
mod udp_roles;
pub mod under_load;
mod window;

use std::time::Duration;

/// How long a peer may stay silent during connection set-up (hello, prepare, start).
pub const SETUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Receive/send timeout on data connections: a peer silent this long has gone away.
pub const DATA_TIMEOUT: Duration = Duration::from_secs(10);
/// A control connection's peer that stops answering is given up after this (keepalive
/// probes and unacknowledged data both): a holder whose host vanished (its link down, its
/// machine off) frees the agent within a minute, not after `--max-duration` (24 h by
/// default), since a connection nobody answers otherwise stays ESTABLISHED forever.
pub const CONTROL_DEAD_AFTER: Duration = Duration::from_secs(30);

/// Keepalive (first probe after 10 s idle, then every 5 s) and `TCP_USER_TIMEOUT` of
/// [`CONTROL_DEAD_AFTER`] on a control connection, either end. Best effort: a kernel
/// without them leaves the connection as it was.
pub(crate) fn control_keepalive(s: &std::net::TcpStream) {
    let s = socket2::SockRef::from(s);
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(10))
        .with_interval(Duration::from_secs(5))
        .with_retries(4);
    let _ = s.set_tcp_keepalive(&ka);
    let _ = s.set_tcp_user_timeout(Some(CONTROL_DEAD_AFTER));
}

/// Extra time beyond a test's planned duration before the agent gives up on a client that
/// never sends `Stop`.
pub const STOP_GRACE: Duration = Duration::from_secs(30);

pub use cut::CUT_SHORT;
/// Bounds of one HTTP download (`http --url --max-size/--max-time`).
pub use virtperf_load::http::Limits as HttpLimits;
/// Whether this process may run on a CPU (it exists and is in the affinity mask), for the
/// commands that pin outside a plan (the KVM benchmarks).
pub use virtperf_load::sock::cpu_allowed;

/// A test that never began because its agent could not be reached or did not greet (no
/// connection, no welcome within [`SETUP_TIMEOUT`], the connection closed instead): the
/// error's message, unchanged. A run gives up on a config whose agent is unreached in two
/// trials in a row, rather than spend a timeout on each of the rest.
#[derive(Debug)]
pub struct Unreached(pub String);

impl std::fmt::Display for Unreached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreached {}
