//! What each half of a workload is given (the client's and the server's side of a test),
//! shared by the TCP roles (`roles`) and the UDP ones (`udp_roles`).

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::Result;
use virtperf_load::http::{self, Fetched};
use virtperf_wire::SockOpts;

use crate::side::{Ctl, DataKey, WorkerOut};

/// One side's worker threads, joined after the test.
pub(crate) type Handles = Vec<JoinHandle<Result<WorkerOut>>>;

/// What the client half of a workload is given.
pub(crate) struct ClientHalf<'a> {
    /// The agent's data port.
    pub data: SocketAddr,
    /// Socket options for data connections.
    pub sock: SockOpts,
    /// Downloads (http), one per request.
    pub count: u32,
    /// This side's workers' stop flag, gate and CPU.
    pub side: &'a Ctl,
    /// Where http downloads are recorded, for the result.
    pub downloads: &'a Arc<Mutex<Vec<Fetched>>>,
    /// Time-series interval (`--interval`), if any.
    pub interval: Option<std::time::Duration>,
    /// The measured interval of a timed workload: receivers count the bytes that arrive
    /// inside it, from the gate.
    pub window: Option<std::time::Duration>,
    /// The test's key, presented first on every data connection.
    pub key: DataKey,
}

/// What the server half of a workload is given.
pub(crate) struct ServerHalf<'a> {
    /// The test's data listener, on the address the client used for control.
    pub listener: TcpListener,
    /// The only address data connections are taken from.
    pub client: IpAddr,
    /// Socket options for data connections.
    pub sock: SockOpts,
    /// This side's workers' stop flag, gate and CPU.
    pub side: &'a Ctl,
    /// What must be woken if the test ends early (set before the worker blocks on it).
    pub wake: &'a mut Wake,
    /// The measured interval of a timed workload (see [`ClientHalf::window`]).
    pub window: Option<std::time::Duration>,
    /// The test's key: data connections that do not present it are closed.
    pub key: DataKey,
    /// The agent's data port range (`serve --data-ports`), which UDP data sockets bind in
    /// too; None: any port.
    pub ports: Option<(u16, u16)>,
}

/// Objects a server worker may block on outside the stop flag's reach: the teardown wakes
/// them.
#[derive(Default)]
pub(crate) struct Wake {
    /// crr's listener (its worker blocks in `accept`).
    pub listener: Option<Arc<TcpListener>>,
    /// http's server (it blocks serving).
    pub http: Option<Arc<http::HttpServer>>,
}

impl Wake {
    /// Unblocks whatever was registered.
    pub(crate) fn wake(&self) {
        if let Some(l) = &self.listener {
            virtperf_load::sock::wake_listener(&**l);
        }
        if let Some(h) = &self.http {
            h.unblock();
        }
    }
}
