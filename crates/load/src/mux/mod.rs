//! Many flows on few threads (neper's design, `--flows N --threads T`): each worker thread
//! owns a share of the test's connections, all non-blocking, registered once in its own
//! epoll instance (edge-triggered), and serves whichever are ready, up to [`BATCH`] per
//! `epoll_wait`. One receive buffer per thread serves all its flows, so 10,000 flows cost
//! their sockets and a few dozen bytes of state each, not a thread stack each.
//!
//! Unlike neper, which re-arms each socket with `EPOLL_CTL_MOD` at every state change
//! (EPOLLOUT to send, EPOLLIN to receive), a flow here is registered once for both and a
//! send is tried at once after each completed receive: a small request fits the socket
//! buffer, so the common transaction costs `send`, `epoll_wait` and `recv`, no `epoll_ctl`.
//! Edge-triggered readiness is safe with short reads: a read that returns less than asked
//! leaves the queue empty, and any byte arriving later raises a new edge.
//!
//! Each engine returns one [`Counts`] per flow, so callers can report how evenly the flows
//! were served, not only their total.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::event::Timespec;
use socket2::{Domain, Protocol, Socket, Type};
use virtperf_wire::SockOpts;

use crate::interval::{Meter, Ticker};
use crate::sock::{describe, prepare_data_socket, recv_raw, send_raw};
use crate::{Counts, Span};

/// Most events taken per `epoll_wait`: large enough that a busy thread makes one call per
/// few hundred transactions, small enough that its array stays in cache.
pub const BATCH: usize = 256;

/// How long a thread waits for events before it looks at the stop flag again.
const IDLE_WAIT: Duration = Duration::from_millis(20);

/// After the stop flag, how long transactions already in flight may take to finish (so
/// both sides count the same transactions) and receivers may take to see their peers
/// close.
const DRAIN: Duration = Duration::from_secs(2);

/// One thread's epoll instance and its event array.
struct Poller {
    ep: OwnedFd,
    events: Vec<Event>,
}

impl Poller {
    fn new() -> io::Result<Poller> {
        Ok(Poller {
            ep: epoll::create(CreateFlags::CLOEXEC)?,
            events: Vec::with_capacity(BATCH),
        })
    }

    /// A poller with every connection of `conns` registered under its index.
    fn over<S: AsFd>(conns: &[S]) -> io::Result<Poller> {
        let p = Poller::new()?;
        for (i, s) in conns.iter().enumerate() {
            p.add(s, i as u64)?;
        }
        Ok(p)
    }

    /// Registers `s` edge-triggered for reading and writing under `token`.
    fn add<S: AsFd>(&self, s: &S, token: u64) -> io::Result<()> {
        let flags = EventFlags::IN | EventFlags::OUT | EventFlags::RDHUP | EventFlags::ET;
        epoll::add(&self.ep, s, EventData::new_u64(token), flags)?;
        Ok(())
    }

    /// Waits up to `timeout` for events; returns how many are in `self.events`.
    fn wait(&mut self, timeout: Duration) -> io::Result<usize> {
        let ts = Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        self.events.clear();
        match epoll::wait(
            &self.ep,
            rustix::buffer::spare_capacity(&mut self.events),
            Some(&ts),
        ) {
            Ok(n) => Ok(n),
            Err(rustix::io::Errno::INTR) => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// The `i`th event of the last wait: its token and flags.
    fn event(&self, i: usize) -> (u64, EventFlags) {
        let e = self.events[i];
        (e.data.u64(), e.flags)
    }
}

/// After stop: a short grace (`DRAIN`) in which flows finish the message in flight.
#[derive(Default)]
struct Drain {
    until: Option<Instant>,
}

impl Drain {
    /// Starts the grace when stop is first seen; true once it has run out.
    fn over(&mut self, stop: &AtomicBool) -> bool {
        if self.until.is_none() && stop.load(Ordering::Relaxed) {
            self.until = Some(Instant::now() + DRAIN);
        }
        self.until.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether stop was asked: no new message may start.
    fn stopping(&self, stop: &AtomicBool) -> bool {
        self.until.is_some() || stop.load(Ordering::Relaxed)
    }
}

/// Sends the rest of a message: `Ok(true)` once all of `buf[*done..]` is in the socket,
/// `Ok(false)` when the socket is full (an EPOLLOUT edge will say when to go on).
fn send_some(s: &impl AsFd, buf: &[u8], done: &mut usize) -> io::Result<bool> {
    while *done < buf.len() {
        match send_raw(s, &buf[*done..]) {
            Ok(k) => *done += k,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// What a receive of the rest of a message found.
enum Got {
    /// The message is complete.
    Whole,
    /// Part of it; the socket is drained for now.
    Part,
    /// The peer closed the connection before (or in the middle of) the message.
    Closed,
}

/// Receives the rest of a `want`-byte message into `buf`, counting in `got`.
fn recv_some(s: &impl AsFd, buf: &mut [u8], want: usize, got: &mut usize) -> io::Result<Got> {
    while *got < want {
        let ask = (want - *got).min(buf.len());
        match recv_raw(s, &mut buf[..ask]) {
            Ok(0) => return Ok(Got::Closed),
            Ok(k) => {
                *got += k;
                // A short read drained the queue: a later byte raises a new edge.
                if k < ask && *got < want {
                    return Ok(Got::Part);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Got::Part),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Got::Whole)
}

/// True for errors that mean the peer went away (which ends a flow, not the test).
fn peer_gone(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

/// Waits until `s` is readable (a listener: a connection is queued) or `timeout` passes;
/// true if readable. Accepting thousands of connections must not sleep between them, or
/// the listen backlog overflows and connects stall for a SYN retransmit (1 s).
pub fn wait_readable(s: &impl AsFd, timeout: Duration) -> io::Result<bool> {
    let ts = Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    let mut fds = [rustix::event::PollFd::new(s, rustix::event::PollFlags::IN)];
    match rustix::event::poll(&mut fds, Some(&ts)) {
        Ok(n) => Ok(n > 0),
        Err(rustix::io::Errno::INTR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Lets `l` queue up to `n` connections (capped by `net.core.somaxconn`): the default
/// backlog (128) overflows while thousands of flows connect faster than a busy agent
/// accepts, and each dropped SYN stalls its connect for a retransmit (1 s). Linux takes a
/// second `listen` on a listening socket as a new backlog.
pub fn deepen_backlog(l: &TcpListener, n: u32) -> io::Result<()> {
    rustix::net::listen(l, n.min(i32::MAX as u32) as i32)?;
    Ok(())
}

/// Splits `items` round-robin into `parts` shares whose sizes differ by at most one.
pub fn spread<T>(items: Vec<T>, parts: usize) -> Vec<Vec<T>> {
    let parts = parts.max(1);
    let mut out: Vec<Vec<T>> = (0..parts)
        .map(|_| Vec::with_capacity(items.len() / parts + 1))
        .collect();
    for (i, x) in items.into_iter().enumerate() {
        out[i % parts].push(x);
    }
    out
}

/// Whether a completion at `now` falls inside the measured interval `span` (which starts
/// after the warm-up, `--omit`, where there is one).
fn inside(span: &Span, now: Instant) -> bool {
    now >= span.start && span.end().is_none_or(|e| now <= e)
}

/// Whether the measured interval, closing at `closes` (`Span::end`, taken once before a
/// client's loop), has run out at `now`: a client starts no new transaction then, so the
/// agent serves at most the one in flight per flow beyond what the client counts, however
/// late the stop comes (a loaded machine may see it tens of milliseconds after the
/// interval, in which flows would go on uncounted).
fn past(closes: Option<Instant>, now: Instant) -> bool {
    closes.is_some_and(|e| now > e)
}

/// The time a client's counts are over: the interval's length once it has run out, else
/// (stopped early, by a signal or a failing peer) up to its last counted completion.
fn measured(span: &Span, last: Instant) -> Duration {
    match (span.end(), span.length) {
        (Some(e), Some(l)) if Instant::now() >= e => l,
        _ => last.saturating_duration_since(span.start),
    }
}

/// Makes each connection non-blocking, as the engines here need.
fn nonblocking(conns: &[TcpStream]) -> io::Result<()> {
    for s in conns {
        s.set_nonblocking(true)?;
    }
    Ok(())
}

/// Per-flow counts from each flow's transactions and bytes.
fn flow_counts(
    n: &[u64],
    request: usize,
    response: usize,
    active: Duration,
    client: bool,
) -> Vec<Counts> {
    n.iter()
        .map(|&t| {
            let (rx, tx) = if client {
                (response, request)
            } else {
                (request, response)
            };
            Counts::of_transactions(t, rx, tx, active)
        })
        .collect()
}

mod crr;
mod rr;
mod stream;

pub use crr::{crr_client, crr_server};
pub use rr::{rr_client, rr_server};
pub use stream::{stream_recv, stream_send};

#[cfg(test)]
mod tests;
