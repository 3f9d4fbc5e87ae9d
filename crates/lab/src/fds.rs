//! The open-file limit, for tests with thousands of flows: each flow is a socket on each
//! side, and the usual soft limit (1024) is far below what 10,000 flows need.

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use virtperf_wire::Workload;

/// Descriptors a process needs beside its data connections: stdio, the control
/// connection, epoll instances, /proc files read around the test, a capture's pipes.
const SPARE: u64 = 64;

/// Makes room for `w`'s data connections in this process: raises the soft open-file limit
/// to the hard one when it is lower than needed (what any process may do for itself), and
/// refuses in one line, naming both numbers and the way out, when even the hard limit is
/// too low. `who` names the side in the message (`this process`, `the agent`).
pub fn make_room(w: &Workload, who: &str) -> Result<(), String> {
    let flows = u64::from(w.connections());
    let need = flows + SPARE;
    let lim = getrlimit(Resource::Nofile);
    // None means unlimited.
    let soft = lim.current.unwrap_or(u64::MAX);
    if soft >= need {
        return Ok(());
    }
    let hard = lim.maximum.unwrap_or(u64::MAX);
    if hard > soft {
        // Up to the hard limit at once: cheap, and later tests in this process need not ask.
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: lim.maximum,
                maximum: lim.maximum,
            },
        );
    }
    let now = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
    if now >= need {
        return Ok(());
    }
    Err(format!(
        "{} with {flows} flows needs {need} open files, but {who} may open only {now} (hard limit {hard}): raise it (`ulimit -n {need}` as root, LimitNOFILE={need} for a service) or use fewer flows",
        w.name()
    ))
}

/// Whether this process may hold a duplicate of every one of `w`'s data connections beside
/// them (the time series reads the senders' TCP state through duplicates): without room,
/// the duplicates would take the descriptors the test needs later.
pub(crate) fn room_for_duplicates(w: &dyn virtperf_wire::Kind) -> bool {
    let need = 2 * u64::from(w.connections()) + SPARE;
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX) >= need
}
