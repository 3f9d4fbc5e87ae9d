//! The table of roles: per workload, what the client half and the server half run (neper's
//! `client_fn` and `server_fn`), one module per workload implementing [`Role`]. The client
//! (`client::run`) and the agent (`agent`'s test) speak the control protocol the same way
//! for every workload and ask this table only which workers to start on their side's data
//! connections; a new workload adds its engine (in `load`), its module here and one row of
//! [`TABLE`] (docs/adding-a-workload.md).
//!
//! Workers are started before the gate opens, so connection set-up stays outside the
//! measured interval (except crr, whose client connects per transaction: connecting is
//! the workload). UDP rr and stream are `udp_roles`' (the protocol picks them).

mod bulk;
mod conn;
mod crr;
mod http;
mod role;
mod rr;
mod stream;

use std::sync::Arc;

use anyhow::{anyhow, Result};
use virtperf_load::interval::Meter;
use virtperf_wire::{SideReport, Workload};

use crate::assemble::{Collected, Measured};

use crate::half::{ClientHalf, Handles, ServerHalf};

pub(crate) use http::{client_agent, download_series};
pub use role::Params;
use role::Role;

/// Every workload's role, by the workload's name (`Workload::name`).
const TABLE: &[(&str, &dyn Role)] = &[
    ("rr", &rr::Rr),
    ("crr", &crr::Crr),
    ("stream", &stream::Stream),
    ("bulk", &bulk::Bulk),
    ("http", &http::Http),
];

/// The workloads there are, by the name users type.
pub fn names() -> Vec<&'static str> {
    TABLE.iter().map(|(n, _)| *n).collect()
}

/// The spec keys workload `kind` takes; `None` for a kind there is not.
pub fn keys(kind: &str) -> Option<&'static [&'static str]> {
    TABLE
        .iter()
        .find(|(n, _)| *n == kind)
        .map(|(_, r)| r.keys())
}

/// Workload `kind` with parameters `p`; `None` for a kind there is not.
pub fn workload(kind: &str, p: &Params) -> Option<Workload> {
    TABLE
        .iter()
        .find(|(n, _)| *n == kind)
        .map(|(_, r)| r.workload(p))
}

/// The role of `w`.
fn role(w: &Workload) -> Result<&'static dyn Role> {
    TABLE
        .iter()
        .find(|(name, _)| *name == w.name())
        .map(|(_, r)| *r)
        .ok_or_else(|| anyhow!("no role for workload {}", w.name()))
}

/// Starts the client half of `w`; returns its workers and one [`Meter`] per worker, where
/// each publishes its progress for the time series.
pub(crate) fn client(w: &Workload, c: &ClientHalf) -> Result<(Handles, Vec<Arc<Meter>>)> {
    let mut meters = Vec::new();
    let mut meter = || {
        let m = Arc::new(Meter::new(c.interval));
        meters.push(m.clone());
        m
    };
    let handles = if w.protocol().is_tcp() {
        role(w)?.client(w, c, &mut meter)?
    } else {
        crate::udp_roles::client(w, c, &mut meter)?
    };
    Ok((handles, meters))
}

/// Starts the server half of `w`: takes its data connections (or hands the listener to the
/// engine that takes its own) and starts its workers.
pub(crate) fn server(w: &Workload, s: ServerHalf) -> Result<Handles> {
    if !w.protocol().is_tcp() {
        return crate::udp_roles::server(w, s.listener, s.client, &s.sock, s.side, &s.key);
    }
    role(w)?.server(w, s)
}

/// Both sides' counts as `c`'s workload's outcome, the units of its service demand and
/// their name.
pub(crate) fn outcome(
    c: &Collected,
    server: &SideReport,
    warnings: &mut Vec<String>,
) -> Result<Measured> {
    Ok(role(&c.plan.workload)?.outcome(c, server, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload the wire knows has exactly one row in the table.
    #[test]
    fn every_workload_has_one_role() {
        let all = [
            Workload::rr(1, 1),
            Workload::crr(1, 1),
            Workload::Stream {
                send_size: 1,
                flows: 1,
                reverse: false,
                recv_size: None,
                recv_wait: None,
                protocol: Default::default(),
                rate_bps: None,
                gso: false,
                gro: false,
                bidir: false,
                zerocopy: None,
                threads: None,
                buf_offset: None,
            },
            Workload::Bulk {
                bytes: 1,
                send_size: 1,
                reverse: false,
            },
            Workload::Http { bytes: 1 },
        ];
        for w in &all {
            assert!(role(w).is_ok(), "{} has no role", w.name());
            let rows = TABLE.iter().filter(|(n, _)| *n == w.name()).count();
            assert_eq!(rows, 1, "{}: {rows} rows", w.name());
        }
        assert_eq!(
            TABLE.len(),
            all.len(),
            "a row for a workload the wire lacks"
        );
    }
}
