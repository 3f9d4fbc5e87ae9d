//! The roles: per workload, what the client half and the server half run (neper's
//! `client_fn` and `server_fn`), one module per workload implementing [`Role`] on its
//! parameter struct. The client (`client::run`) and the agent (`agent`'s test) speak the
//! control protocol the same way for every workload and ask [`role_of`] only which workers
//! to start on their side's data connections; a new workload adds its module here, its arm
//! of [`role_of`] and of [`spec_kind`] (docs/adding-a-workload.md).
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
mod threads;
mod unix_rr;

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_wire::{Outcome, SideReport, Workload};

use crate::assemble::outcome::Collected;

use crate::half::{ClientHalf, Handles, ServerHalf};

pub(crate) use http::{client_agent, download_series};
pub use role::Params;
use role::Role;

/// The role of `w`: the one match over every workload (no catch-all arm, so a workload
/// without a role does not compile).
fn role_of(w: &Workload) -> &dyn Role {
    match w {
        Workload::Rr(p) => p,
        Workload::Crr(p) => p,
        Workload::Stream(p) => p,
        Workload::Bulk(p) => p,
        Workload::Http(p) => p,
        Workload::UnixRr(p) => p,
    }
}

/// What a spec file's `kind = "…"` names: the keys its table takes and how a spec point's
/// parameters become its workload.
pub struct SpecKind {
    /// The keys its `[[workload]]` table takes (besides `kind`, `label`, `duration`,
    /// `omit`).
    pub keys: &'static [&'static str],
    /// Its workload from a spec point's parameters.
    pub build: fn(&Params) -> Workload,
}

/// The workload a spec file's (or a command line's) `kind` names; `None` for a kind there
/// is not. Text a user typed, so matched as text: the one place a workload is found by name.
pub fn spec_kind(kind: &str) -> Option<SpecKind> {
    let (keys, build): (&'static [&'static str], fn(&Params) -> Workload) = match kind {
        "rr" => (rr::KEYS, rr::from_params),
        "crr" => (crr::KEYS, crr::from_params),
        "stream" => (stream::KEYS, stream::from_params),
        "bulk" => (bulk::KEYS, bulk::from_params),
        "http" => (http::KEYS, http::from_params),
        "unix-rr" => (unix_rr::KEYS, unix_rr::from_params),
        _ => return None,
    };
    Some(SpecKind { keys, build })
}

/// Each workload from a spec point's (or the command line's) [`Params`], typed: the
/// command line calls these by name in code, so its walk to a workload crosses no string
/// match; [`spec_kind`] maps the names a spec file gives onto the same functions.
pub mod build {
    pub use super::bulk::from_params as bulk;
    pub use super::crr::from_params as crr;
    pub use super::http::from_params as http;
    pub use super::rr::from_params as rr;
    pub use super::stream::from_params as stream;
    pub use super::unix_rr::from_params as unix_rr;
}

/// The workloads there are, by the name users type.
pub fn names() -> Vec<&'static str> {
    NAMES.to_vec()
}

/// Every name [`spec_kind`] knows (a test checks each builds the workload of that name).
const NAMES: &[&str] = &["rr", "crr", "stream", "bulk", "http", "unix-rr"];

/// Starts the client half of `w`; returns its workers and one [`Meter`] per worker, where
/// each publishes its progress for the time series.
pub(crate) fn client(w: &Workload, c: &ClientHalf) -> Result<(Handles, Vec<Arc<Meter>>)> {
    let mut meters = Vec::new();
    let mut meter = || {
        let m = c.side.meter(c.interval);
        meters.push(m.clone());
        m
    };
    let handles = role_of(w).client(c, &mut meter)?;
    Ok((handles, meters))
}

/// Starts the server half of `w`: takes its data connections (or hands the listener to the
/// engine that takes its own) and starts its workers.
pub(crate) fn server(w: &Workload, s: ServerHalf) -> Result<Handles> {
    role_of(w).server(s)
}

/// Both sides' counts as `c`'s workload's outcome.
pub(crate) fn outcome(c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
    role_of(&c.plan.workload).outcome(c, server, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name a spec file may give builds the workload of that name, with the keys it
    /// says it takes (a name without a workload, or the wrong one, fails here).
    #[test]
    fn every_kind_builds_its_own_workload() {
        let p = Params {
            size: (1, 1),
            send: 1,
            flows: 1,
            bytes: Some(1),
            ..Params::default()
        };
        for n in names() {
            let k = spec_kind(n).unwrap_or_else(|| panic!("{n} has no spec kind"));
            let w = (k.build)(&p);
            assert_eq!(w.name(), n);
            assert!(w.validate().is_ok(), "{n}: {:?}", w.validate());
            assert!(!k.keys.is_empty());
        }
        assert!(spec_kind("nosuch").is_none());
    }
}
