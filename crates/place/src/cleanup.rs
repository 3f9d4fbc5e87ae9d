//! `virtperf cleanup`: puts the machine back the way dead runs found it.
//!
//! Only what virtperf recorded in its state directory is touched: knobs from the journals
//! of dead runs ([`virtperf_machine::knob::restore_leftovers`]), and namespaces and guest run
//! directories whose markers name a dead owner. A namespace that merely looks like ours
//! (`vp-<pid>-…`) but has no marker belongs to someone else and is left alone. Every item
//! is attempted; failures are listed, never a reason to stop.

use std::path::Path;

use anyhow::{anyhow, Result};

use crate::netns;
use virtperf_machine::knob;
use virtperf_machine::state::{self, Liveness, Owned, Resource};

/// What a cleanup did.
#[derive(Debug, Default)]
pub struct Report {
    /// One line per thing put back or removed.
    pub done: Vec<String>,
    /// One line per thing that could not be.
    pub failed: Vec<String>,
}

/// Restores dead runs' knobs and removes their namespaces and run directories.
pub fn cleanup() -> Report {
    let mut rep = Report::default();
    let k = knob::restore_leftovers(&state::journal_base());
    rep.done.extend(k.restored);
    rep.failed.extend(k.failed);
    rep.done.extend(
        k.stale
            .into_iter()
            .map(|s| format!("dropped a journal from before the last reboot: {s}")),
    );
    for rec in state::read_all::<Owned>("owned") {
        let owned = match rec {
            Ok((_, o)) => o,
            Err(e) => {
                rep.failed.push(e.to_string());
                continue;
            }
        };
        if owned.owner.liveness() == Liveness::Alive {
            continue;
        }
        match remove(&owned.resource) {
            Ok(true) => {
                state::unmark(&owned.resource);
                rep.done.push(format!(
                    "removed {} (left by pid {})",
                    owned.resource, owned.owner.pid
                ));
            }
            // Already gone (a reboot, or someone removed it): only the marker was left.
            Ok(false) => state::unmark(&owned.resource),
            Err(e) => rep
                .failed
                .push(format!("could not remove {}: {e:#}", owned.resource)),
        }
    }
    rep
}

/// Removes a resource; Ok(false) when it no longer existed. A marker can only name things
/// virtperf makes (`vp-…` namespaces, `vp-…` directories), so a damaged or planted one
/// cannot make cleanup delete anything else.
fn remove(r: &Resource) -> Result<bool> {
    let ours = |n: Option<&str>| {
        n.is_some_and(|n| n.starts_with(netns::PREFIX) && !n.contains('/') && n != netns::PREFIX)
    };
    match r {
        Resource::Netns { name } if !ours(Some(name)) => {
            Err(anyhow!("not a name virtperf gives its namespaces"))
        }
        Resource::Dir { path }
            if !path.is_absolute() || !ours(path.file_name().and_then(|n| n.to_str())) =>
        {
            Err(anyhow!("not a directory virtperf makes"))
        }
        Resource::Netns { name } => {
            if !Path::new("/var/run/netns").join(name).exists() {
                return Ok(false);
            }
            netns::delete_namespace(name)?;
            Ok(true)
        }
        Resource::Dir { path } => {
            if !path.exists() {
                return Ok(false);
            }
            std::fs::remove_dir_all(path)?;
            Ok(true)
        }
    }
}
