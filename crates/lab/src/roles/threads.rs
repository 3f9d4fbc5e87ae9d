//! The two thread models a TCP role runs its connections on, written once (neper's
//! `thread.c`): a thread per connection, each with a private descriptor table
//! (`spawn_conn_worker`), or the connections spread over `--threads` epoll threads. A role
//! gives only its steps — what a thread does with one connection, and what one does with a
//! share of them — and both halves open or accept their connections here.

use std::net::TcpStream;
use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_load::mux;

use super::conn::{accept_data, connect_all, note_first};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{Ctl, WorkerOut};

/// One worker thread of a side.
pub(crate) type Worker = std::thread::JoinHandle<Result<WorkerOut>>;

/// What a role's thread does with connection `i`, given its meter: starts it.
pub(crate) trait ConnStep: FnMut(usize, TcpStream, Arc<Meter>) -> Result<Worker> {}
impl<F: FnMut(usize, TcpStream, Arc<Meter>) -> Result<Worker>> ConnStep for F {}

/// What a role's thread does with share `i` of the connections, given its meter.
pub(crate) trait ShareStep:
    FnMut(usize, Vec<TcpStream>, Arc<Meter>) -> Result<Worker>
{
}
impl<F: FnMut(usize, Vec<TcpStream>, Arc<Meter>) -> Result<Worker>> ShareStep for F {}

/// A side's data connections and what runs on them.
pub(crate) struct Flows<F, M> {
    /// Connections on this side (flows; two per flow with `--bidir`).
    pub conns: u32,
    /// `--threads`: the connections spread over this many epoll threads (never more than
    /// there are connections); `None`: a thread per connection.
    pub threads: Option<u32>,
    /// `TCP_NODELAY` on the connections (request/response: yes; streams: no).
    pub nodelay: bool,
    /// The thread for connection `i`, with its meter.
    pub per_conn: F,
    /// The thread for share `i` of the connections, with its meter.
    pub per_share: M,
}

/// The client half: opens the connections (each presents the test's key) and starts their
/// threads.
pub(crate) fn client<F, M>(
    c: &ClientHalf,
    meter: &mut dyn FnMut() -> Arc<Meter>,
    f: Flows<F, M>,
) -> Result<Handles>
where
    F: ConnStep,
    M: ShareStep,
{
    let conns = connect_all(c.data, f.conns, f.nodelay, &c.sock, &c.key)?;
    start(c.side, conns, f, meter)
}

/// The server half: accepts the connections from the client (each with the test's key)
/// and starts their threads. The agent keeps no time series: its meters are written and
/// never read.
pub(crate) fn server<F, M>(s: ServerHalf, f: Flows<F, M>) -> Result<Handles>
where
    F: ConnStep,
    M: ShareStep,
{
    let n = f.conns as usize;
    let conns = accept_data(s.listener, s.client, n, f.nodelay, &s.sock, &s.key)?;
    let side = s.side;
    start(side, conns, f, &mut || side.meter(None))
}

fn start<F, M>(
    side: &Ctl,
    conns: Vec<TcpStream>,
    mut f: Flows<F, M>,
    meter: &mut dyn FnMut() -> Arc<Meter>,
) -> Result<Handles>
where
    F: ConnStep,
    M: ShareStep,
{
    match f.threads {
        Some(t) => {
            // Multiplexed flows share the options: the first shows what the kernel applied.
            note_first(side, &conns);
            let t = (t as usize).clamp(1, conns.len().max(1));
            // Threads with one connection each run the thread-per-connection step: waiting in
            // epoll_wait for the only socket there is costs a system call per receive on
            // top of the receive itself, and the shared descriptor table every epoll thread
            // keeps costs each socket call a file reference (issue 45; bench/RESULTS.md:
            // `rr -P 2 --threads 2` went from 0.87 of two netperf processes to 0.98; a
            // non-blocking receive before epoll_wait, the other way, was not measured).
            // All or none, so one test never mixes the two engines' counting (the epoll
            // receivers count the measured window, the others to the end of the stream):
            // `Workload::one_connection_per_thread` says which the result holds.
            if t >= conns.len() {
                return conns
                    .into_iter()
                    .enumerate()
                    .map(|(i, s)| (f.per_conn)(i, s, meter()))
                    .collect();
            }
            mux::spread(conns, t)
                .into_iter()
                .enumerate()
                .map(|(i, share)| (f.per_share)(i, share, meter()))
                .collect()
        }
        None => conns
            .into_iter()
            .enumerate()
            .map(|(i, s)| (f.per_conn)(i, s, meter()))
            .collect(),
    }
}
