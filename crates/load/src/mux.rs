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
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rustix::event::epoll::{self, CreateFlags, Event, EventData, EventFlags};
use rustix::event::Timespec;
use socket2::{Domain, Protocol, Socket, Type};
use virtperf_wire::SockOpts;

use crate::interval::{Meter, Ticker};
use crate::sock::{describe, prepare_data_socket, recv_raw, send_raw};
use crate::Counts;

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
            Counts {
                bytes_rx: t * rx as u64,
                bytes_tx: t * tx as u64,
                transactions: t,
                active,
                udp: None,
            }
        })
        .collect()
}

/// Client half of rr on `conns`: each flow sends a request, waits for the whole response,
/// records the round trip, and sends the next, back to back, until `stop`; transactions in
/// flight then finish (bounded), so the agent counts the same ones. One clock read per
/// completed transaction (the end of one is the start of the next on that flow).
pub fn rr_client(
    conns: Vec<TcpStream>,
    request: usize,
    response: usize,
    stop: &AtomicBool,
    hist: &mut Histogram<u64>,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    nonblocking(&conns)?;
    let mut p = Poller::over(&conns)?;
    let req = vec![0u8; request];
    let mut buf = vec![0u8; response.min(1 << 20)];
    let k = conns.len();
    let mut sent = vec![0usize; k];
    let mut got = vec![0usize; k];
    let mut n = vec![0u64; k];
    let mut busy = vec![true; k];
    let start = Instant::now();
    let mut t0 = vec![start; k];
    let mut total = 0u64;
    let mut end = start;
    let mut ticks = Ticker::start(meter, start);
    for (i, s) in conns.iter().enumerate() {
        send_some(s, &req, &mut sent[i]).map_err(|e| describe(e, "sending request"))?;
    }
    let mut in_flight = k;
    let mut drain = Drain::default();
    while in_flight > 0 {
        if drain.over(stop) {
            break;
        }
        let ready = p.wait(IDLE_WAIT)?;
        for e in 0..ready {
            let (tok, flags) = p.event(e);
            let i = tok as usize;
            if !busy[i] {
                continue;
            }
            let s = &conns[i];
            if sent[i] < request
                && !send_some(s, &req, &mut sent[i]).map_err(|e| describe(e, "sending request"))?
            {
                continue;
            }
            match recv_some(s, &mut buf, response, &mut got[i])
                .map_err(|e| describe(e, "reading response"))?
            {
                Got::Part => {
                    if flags.contains(EventFlags::ERR) {
                        return Err(describe(
                            s.take_error()?
                                .unwrap_or_else(|| io::ErrorKind::ConnectionReset.into()),
                            "reading response",
                        ));
                    }
                    continue;
                }
                Got::Closed => {
                    return Err(describe(
                        io::ErrorKind::UnexpectedEof.into(),
                        "reading response",
                    ))
                }
                Got::Whole => {}
            }
            let now = Instant::now();
            hist.saturating_record(now.duration_since(t0[i]).as_nanos() as u64);
            n[i] += 1;
            total += 1;
            end = now;
            if ticks.due(now) {
                ticks.tick(now, total, hist);
            }
            t0[i] = now;
            got[i] = 0;
            sent[i] = 0;
            if drain.stopping(stop) {
                busy[i] = false;
                in_flight -= 1;
                continue;
            }
            send_some(s, &req, &mut sent[i]).map_err(|e| describe(e, "sending request"))?;
        }
    }
    ticks.finish(end, total, hist);
    Ok(flow_counts(
        &n,
        request,
        response,
        end.duration_since(start),
        true,
    ))
}

/// Server half of rr on `conns`: answers each request with a response until every client
/// connection closes (or, after `stop`, a bounded drain).
pub fn rr_server(
    conns: Vec<TcpStream>,
    request: usize,
    response: usize,
    stop: &AtomicBool,
) -> io::Result<Vec<Counts>> {
    nonblocking(&conns)?;
    let mut p = Poller::over(&conns)?;
    let resp = vec![0u8; response];
    let mut buf = vec![0u8; request.min(1 << 20)];
    let k = conns.len();
    let mut got = vec![0usize; k];
    // Bytes of the pending response already sent; `response` when none is pending.
    let mut out = vec![response; k];
    let mut n = vec![0u64; k];
    let mut open = vec![true; k];
    let mut left = k;
    let start = Instant::now();
    let mut drain = Drain::default();
    while left > 0 {
        if drain.over(stop) {
            break;
        }
        let ready = p.wait(IDLE_WAIT)?;
        for e in 0..ready {
            let i = p.event(e).0 as usize;
            if !open[i] {
                continue;
            }
            let s = &conns[i];
            // True while the flow stays open.
            let step = (|| -> io::Result<bool> {
                if out[i] < response && !send_some(s, &resp, &mut out[i])? {
                    return Ok(true);
                }
                Ok(match recv_some(s, &mut buf, request, &mut got[i])? {
                    Got::Part => true,
                    Got::Closed => false,
                    Got::Whole => {
                        // Counted once the request is in; a response the socket cannot
                        // take at once goes out on the next EPOLLOUT edge. The client
                        // sends nothing more until it has it.
                        got[i] = 0;
                        out[i] = 0;
                        n[i] += 1;
                        send_some(s, &resp, &mut out[i])?;
                        true
                    }
                })
            })();
            match step {
                Ok(true) => {}
                Ok(false) => {
                    open[i] = false;
                    left -= 1;
                }
                Err(e) if peer_gone(&e) => {
                    open[i] = false;
                    left -= 1;
                }
                Err(e) => return Err(describe(e, "serving a request")),
            }
        }
    }
    Ok(flow_counts(&n, request, response, start.elapsed(), false))
}

/// Most bytes one flow moves in one turn before its thread looks at the stop flag and the
/// other flows again. Without a bound a sender whose receiver keeps up (several cores, the
/// loopback) never sees its socket full and never returns: the stop was never seen and the
/// run overran its duration by seconds, or forever.
const TURN_BYTES: usize = 1 << 20;

/// Flows that were ready when their turn ended (their socket neither full nor empty): with
/// edge-triggered epoll no new event will come for them, so they wait here for their next
/// turn, in order.
#[derive(Default)]
struct Ready {
    queue: std::collections::VecDeque<usize>,
    queued: Vec<bool>,
}

impl Ready {
    fn new(k: usize) -> Ready {
        Ready {
            queue: std::collections::VecDeque::with_capacity(k),
            queued: vec![false; k],
        }
    }

    fn push(&mut self, i: usize) {
        if !std::mem::replace(&mut self.queued[i], true) {
            self.queue.push_back(i);
        }
    }

    /// The flows whose turn it is now (those queued at the call), taken off the queue.
    fn take_round(&mut self) -> Vec<usize> {
        let round: Vec<usize> = self.queue.drain(..).collect();
        for i in &round {
            self.queued[*i] = false;
        }
        round
    }

    /// How long the next epoll wait may block: not at all while flows are waiting here.
    fn wait_for(&self) -> Duration {
        if self.queue.is_empty() {
            IDLE_WAIT
        } else {
            Duration::ZERO
        }
    }
}

/// What a bounded turn on one flow found.
#[derive(PartialEq)]
enum Turn {
    /// The socket is full (sending) or empty (receiving): an edge will say when to go on.
    Blocked,
    /// The turn's budget ran out with the socket still ready.
    More,
    /// The peer closed.
    Closed,
}

/// Sending half of a stream on `conns`: fills every socket, a bounded turn per flow, until
/// `stop`. The stop is seen within one turn of one flow.
pub fn stream_send(
    conns: Vec<TcpStream>,
    send_size: usize,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    nonblocking(&conns)?;
    let mut p = Poller::over(&conns)?;
    let buf = vec![0u8; send_size];
    let k = conns.len();
    let mut sent = vec![0u64; k];
    let mut open = vec![true; k];
    let start = Instant::now();
    let mut last = vec![start; k];
    let mut total = 0u64;
    let mut ready = Ready::new(k);
    // A bounded fill of one socket.
    let fill = |s: &TcpStream, sent: &mut u64, total: &mut u64| -> io::Result<Turn> {
        let mut moved = 0usize;
        while moved < TURN_BYTES {
            match send_raw(s, &buf) {
                Ok(w) => {
                    *sent += w as u64;
                    *total += w as u64;
                    moved += w;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Turn::Blocked),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if peer_gone(&e) => return Ok(Turn::Closed),
                Err(e) => return Err(describe(e, "sending")),
            }
        }
        Ok(Turn::More)
    };
    for i in 0..k {
        ready.push(i);
    }
    while !stop.load(Ordering::Relaxed) {
        let n = p.wait(ready.wait_for())?;
        for e in 0..n {
            ready.push(p.event(e).0 as usize);
        }
        for i in ready.take_round() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            if !open[i] {
                continue;
            }
            match fill(&conns[i], &mut sent[i], &mut total)? {
                Turn::Blocked => {}
                Turn::More => ready.push(i),
                Turn::Closed => open[i] = false,
            }
            last[i] = Instant::now();
        }
        meter.set_bytes(total);
    }
    Ok((0..k)
        .map(|i| Counts {
            bytes_tx: sent[i],
            active: last[i].duration_since(start),
            ..Default::default()
        })
        .collect())
}

/// Receiving half of a stream on `conns`: reads whatever arrives, `recv_size` bytes per
/// call and a bounded turn per flow, until every sender closes (or, after `stop`, a bounded
/// drain). Bytes count while the measured `window` (from this call) lasts; what arrives
/// after it (data still in flight when the sender stopped) is read, so the senders can
/// close cleanly, but not counted. Each flow's `active` is the window, or its first to last
/// byte without one.
pub fn stream_recv(
    conns: Vec<TcpStream>,
    recv_size: usize,
    window: Option<Duration>,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    nonblocking(&conns)?;
    let mut p = Poller::over(&conns)?;
    let mut buf = vec![0u8; recv_size.max(1)];
    let k = conns.len();
    let mut got = vec![0u64; k];
    let mut first: Vec<Option<Instant>> = vec![None; k];
    let start = Instant::now();
    let mut last = vec![start; k];
    let mut open = vec![true; k];
    let mut left = k;
    let mut total = 0u64;
    let mut drain = Drain::default();
    let mut ready = Ready::new(k);
    let mut win = Window::new(start, window);
    while left > 0 {
        if drain.over(stop) {
            break;
        }
        let n = p.wait(win.bound(ready.wait_for()))?;
        win.check(&got);
        for e in 0..n {
            ready.push(p.event(e).0 as usize);
        }
        for i in ready.take_round() {
            if !open[i] {
                continue;
            }
            let before = got[i];
            let turn = drain_some(&conns[i], &mut buf, &mut got[i])?;
            total += got[i] - before;
            if got[i] > before {
                let now = Instant::now();
                first[i].get_or_insert(now);
                last[i] = now;
            }
            match turn {
                Turn::Blocked => {}
                Turn::More => ready.push(i),
                Turn::Closed => {
                    open[i] = false;
                    left -= 1;
                }
            }
        }
        meter.set_bytes(total);
    }
    win.check(&got);
    Ok((0..k)
        .map(|i| match win.counted(i) {
            Some((bytes, active)) => Counts {
                bytes_rx: bytes,
                active,
                ..Default::default()
            },
            None => Counts {
                bytes_rx: got[i],
                active: first[i].map_or(Duration::ZERO, |f| last[i].duration_since(f)),
                ..Default::default()
            },
        })
        .collect())
}

/// Reads one flow for at most [`TURN_BYTES`]: how far it got.
fn drain_some(s: &TcpStream, buf: &mut [u8], got: &mut u64) -> io::Result<Turn> {
    let mut moved = 0usize;
    while moved < TURN_BYTES {
        match recv_raw(s, buf) {
            Ok(0) => return Ok(Turn::Closed),
            Ok(r) => {
                *got += r as u64;
                moved += r;
                // A short read emptied the queue: a later byte raises a new edge.
                if r < buf.len() {
                    return Ok(Turn::Blocked);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Turn::Blocked),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if peer_gone(&e) => return Ok(Turn::Closed),
            Err(e) => return Err(describe(e, "receiving")),
        }
    }
    Ok(Turn::More)
}

/// The measured window of a receiver: the byte counts of every flow at its end, and when
/// that was read (within one wait, which is bounded to end at the window's end).
struct Window {
    end: Option<Instant>,
    start: Instant,
    at_end: Option<(Vec<u64>, Duration)>,
}

impl Window {
    fn new(start: Instant, window: Option<Duration>) -> Window {
        Window {
            end: window.map(|w| start + w),
            start,
            at_end: None,
        }
    }

    /// A wait of at most `d` that does not run past the window's end.
    fn bound(&self, d: Duration) -> Duration {
        match (self.end, &self.at_end) {
            (Some(end), None) => d.min(end.saturating_duration_since(Instant::now())),
            _ => d,
        }
    }

    /// Takes the counts once the window has ended.
    fn check(&mut self, got: &[u64]) {
        if let (Some(end), None) = (self.end, &self.at_end) {
            let now = Instant::now();
            if now >= end {
                self.at_end = Some((got.to_vec(), now.duration_since(self.start)));
            }
        }
    }

    /// Flow `i`'s bytes inside the window and the window's length, when there was one.
    fn counted(&self, i: usize) -> Option<(u64, Duration)> {
        self.at_end.as_ref().map(|(g, d)| (g[i], *d))
    }
}

/// One crr flow's connection and where it is in its transaction.
struct CrrFlow {
    s: Option<Socket>,
    /// Bumped at each new connection, so an event for a closed one is recognised.
    generation: u32,
    connected: bool,
    sent: usize,
    got: usize,
    t0: Instant,
}

/// Client half of crr with `flows` concurrent flows on this thread: each connects
/// (non-blocking), sends its request, reads the response, records the time from the
/// connect, closes and connects again, until `stop`.
#[allow(clippy::too_many_arguments)]
pub fn crr_client(
    addr: SocketAddr,
    flows: usize,
    request: usize,
    response: usize,
    opts: &SockOpts,
    stop: &AtomicBool,
    hist: &mut Histogram<u64>,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    let mut p = Poller::new()?;
    let req = vec![0u8; request];
    let mut buf = vec![0u8; response.min(1 << 20)];
    let start = Instant::now();
    let connect = |p: &Poller, f: &mut CrrFlow, i: usize| -> io::Result<()> {
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        prepare_data_socket(&s, Duration::from_secs(10), true, opts)?;
        s.set_nonblocking(true)?;
        match s.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(describe(e, "connecting for a transaction")),
        }
        f.generation = f.generation.wrapping_add(1);
        p.add(&s, (i as u64) << 32 | u64::from(f.generation))?;
        f.s = Some(s);
        f.connected = false;
        f.sent = 0;
        f.got = 0;
        f.t0 = Instant::now();
        Ok(())
    };
    let mut fl: Vec<CrrFlow> = (0..flows)
        .map(|_| CrrFlow {
            s: None,
            generation: 0,
            connected: false,
            sent: 0,
            got: 0,
            t0: start,
        })
        .collect();
    for (i, f) in fl.iter_mut().enumerate() {
        connect(&p, f, i)?;
    }
    let mut n = vec![0u64; flows];
    let mut total = 0u64;
    let mut end = start;
    let mut ticks = Ticker::start(meter, start);
    let mut in_flight = flows;
    let mut drain = Drain::default();
    while in_flight > 0 {
        if drain.over(stop) {
            break;
        }
        let ready = p.wait(IDLE_WAIT)?;
        for e in 0..ready {
            let (tok, flags) = p.event(e);
            let i = (tok >> 32) as usize;
            let f = &mut fl[i];
            let Some(s) = f.s.as_ref() else { continue };
            if tok as u32 != f.generation {
                continue;
            }
            if !f.connected {
                if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
                    continue;
                }
                if let Some(err) = s.take_error()? {
                    return Err(describe(err, "connecting for a transaction"));
                }
                f.connected = true;
            }
            if f.sent < request
                && !send_some(s, &req, &mut f.sent).map_err(|e| describe(e, "sending request"))?
            {
                continue;
            }
            match recv_some(s, &mut buf, response, &mut f.got)
                .map_err(|e| describe(e, "reading response"))?
            {
                Got::Part => continue,
                Got::Closed => {
                    return Err(describe(
                        io::ErrorKind::UnexpectedEof.into(),
                        "reading response",
                    ))
                }
                Got::Whole => {}
            }
            let now = Instant::now();
            hist.saturating_record(now.duration_since(f.t0).as_nanos() as u64);
            n[i] += 1;
            total += 1;
            end = now;
            if ticks.due(now) {
                ticks.tick(now, total, hist);
            }
            // Closing deregisters the socket from this thread's epoll.
            f.s = None;
            if drain.stopping(stop) {
                in_flight -= 1;
                continue;
            }
            connect(&p, f, i)?;
        }
    }
    ticks.finish(end, total, hist);
    Ok(flow_counts(
        &n,
        request,
        response,
        end.duration_since(start),
        true,
    ))
}

/// One accepted crr connection on the server.
struct CrrConn {
    s: TcpStream,
    got: usize,
    /// Bytes of the response sent; None until the request is in.
    out: Option<usize>,
}

/// Server half of crr, one of several threads sharing `listener` (each registers it with
/// `EPOLLEXCLUSIVE`, so one connection wakes one thread): accepts connections from `peer`
/// only, answers each one's request, closes it; until `stop`. Returns this thread's counts.
pub fn crr_server(
    listener: &TcpListener,
    peer: Option<IpAddr>,
    request: usize,
    response: usize,
    stop: &AtomicBool,
) -> io::Result<Counts> {
    listener.set_nonblocking(true)?;
    let mut p = Poller::new()?;
    const LISTENER: u64 = u64::MAX;
    epoll::add(
        &p.ep,
        listener,
        EventData::new_u64(LISTENER),
        EventFlags::IN | EventFlags::EXCLUSIVE,
    )?;
    let resp = vec![0u8; response];
    let mut buf = vec![0u8; request.min(1 << 20)];
    let mut conns: Vec<Option<CrrConn>> = Vec::new();
    let mut free: Vec<usize> = Vec::new();
    let mut gens: Vec<u32> = Vec::new();
    let mut n = 0u64;
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let ready = p.wait(IDLE_WAIT)?;
        for e in 0..ready {
            let tok = p.event(e).0;
            if tok == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((_, from)) if peer.is_some_and(|p| p != from.ip()) => {}
                        Ok((s, _)) => {
                            s.set_nonblocking(true)?;
                            s.set_nodelay(true)?;
                            let slot = free.pop().unwrap_or_else(|| {
                                conns.push(None);
                                gens.push(0);
                                conns.len() - 1
                            });
                            gens[slot] = gens[slot].wrapping_add(1);
                            p.add(&s, (slot as u64) << 32 | u64::from(gens[slot]))?;
                            conns[slot] = Some(CrrConn {
                                s,
                                got: 0,
                                out: None,
                            });
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        // Shut down by the teardown, or out of descriptors: stop accepting
                        // for this round; the loop looks at the stop flag.
                        Err(_) => break,
                    }
                }
                continue;
            }
            let slot = (tok >> 32) as usize;
            if gens.get(slot) != Some(&(tok as u32)) {
                continue;
            }
            let Some(c) = conns[slot].as_mut() else {
                continue;
            };
            // A client that vanishes mid-transaction costs its connection, not the test.
            let done = (|| -> io::Result<bool> {
                if c.out.is_none() {
                    match recv_some(&c.s, &mut buf, request, &mut c.got)? {
                        Got::Part => return Ok(false),
                        Got::Closed => return Ok(true),
                        Got::Whole => c.out = Some(0),
                    }
                }
                let mut o = c.out.unwrap_or(0);
                let whole = send_some(&c.s, &resp, &mut o)?;
                c.out = Some(o);
                if whole {
                    n += 1;
                }
                Ok(whole)
            })()
            .unwrap_or(true);
            if done {
                conns[slot] = None;
                free.push(slot);
            }
        }
    }
    Ok(Counts {
        bytes_rx: n * request as u64,
        bytes_tx: n * response as u64,
        transactions: n,
        active: start.elapsed(),
        udp: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::stop_after;
    use std::sync::Arc;

    fn pairs(k: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = Vec::new();
        let mut s = Vec::new();
        for _ in 0..k {
            c.push(TcpStream::connect(l.local_addr().unwrap()).unwrap());
            s.push(l.accept().unwrap().0);
        }
        for x in c.iter().chain(s.iter()) {
            x.set_nodelay(true).unwrap();
        }
        (c, s)
    }

    /// 200 flows on one thread a side: every flow completes transactions, both halves count
    /// the same ones per flow, and every round trip is in the histogram.
    #[test]
    fn rr_flows_on_one_thread_count_the_same_on_both_sides() {
        let (c, s) = pairs(200);
        let stop = stop_after(300);
        let st = stop.clone();
        let server = std::thread::spawn(move || rr_server(s, 8, 16, &st));
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        let cc = rr_client(c, 8, 16, &stop, &mut hist, &Meter::new(None)).unwrap();
        let sc = server.join().unwrap().unwrap();
        assert_eq!(cc.len(), 200);
        assert!(cc.iter().all(|f| f.transactions > 0), "a flow starved");
        let ct: Vec<u64> = cc.iter().map(|f| f.transactions).collect();
        let st: Vec<u64> = sc.iter().map(|f| f.transactions).collect();
        assert_eq!(ct, st);
        assert_eq!(hist.len(), ct.iter().sum::<u64>());
    }

    /// Streams on one thread a side: the receiver counts every byte the sender sent, per
    /// flow, and every flow moved data.
    #[test]
    fn stream_flows_on_one_thread_lose_no_bytes() {
        let (c, s) = pairs(20);
        let stop = stop_after(300);
        let st = stop.clone();
        let rx = std::thread::spawn(move || stream_recv(s, 65536, None, &st, &Meter::new(None)));
        let tx = stream_send(c, 4096, &stop, &Meter::new(None)).unwrap();
        let rx = rx.join().unwrap().unwrap();
        for (t, r) in tx.iter().zip(&rx) {
            assert!(t.bytes_tx > 0);
            assert_eq!(t.bytes_tx, r.bytes_rx);
        }
    }

    /// A sender whose receivers keep up (its sockets never fill) still sees the stop
    /// within a turn; a receiver with a window counts only what arrived inside it, over
    /// exactly the window, while still reading to the end of each stream.
    #[test]
    fn stream_stops_on_time_and_counts_its_window() {
        let (c, s) = pairs(4);
        let stop = stop_after(400);
        let st = stop.clone();
        let window = Duration::from_millis(300);
        let rx = std::thread::spawn(move || {
            stream_recv(s, 1 << 20, Some(window), &st, &Meter::new(None))
        });
        let t0 = Instant::now();
        let tx = stream_send(c, 65536, &stop, &Meter::new(None)).unwrap();
        let took = t0.elapsed();
        assert!(
            took < Duration::from_millis(600),
            "the sender stopped {took:?} after its start, asked 400 ms"
        );
        let rx = rx.join().unwrap().unwrap();
        for (t, r) in tx.iter().zip(&rx) {
            assert!(r.bytes_rx > 0, "{r:?}");
            assert!(
                r.bytes_rx < t.bytes_tx,
                "bytes after the window were counted: {r:?} {t:?}"
            );
            let off = r.active.as_secs_f64() - window.as_secs_f64();
            assert!(
                (0.0..0.005).contains(&off),
                "window measured as {:?}",
                r.active
            );
        }
    }

    /// crr on one client thread with 10 flows against two server threads sharing one
    /// listener: transactions complete on every flow and the servers answered them all.
    #[test]
    fn crr_flows_connect_again_and_again() {
        let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let servers: Vec<_> = (0..2)
            .map(|_| {
                let (l, st) = (l.clone(), stop.clone());
                std::thread::spawn(move || crr_server(&l, None, 4, 4, &st))
            })
            .collect();
        let cstop = stop_after(300);
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        let cc = crr_client(
            addr,
            10,
            4,
            4,
            &SockOpts::default(),
            &cstop,
            &mut hist,
            &Meter::new(None),
        )
        .unwrap();
        stop.store(true, Ordering::Relaxed);
        let served: u64 = servers
            .into_iter()
            .map(|h| h.join().unwrap().unwrap().transactions)
            .sum();
        let done: u64 = cc.iter().map(|f| f.transactions).sum();
        assert!(cc.iter().all(|f| f.transactions > 0), "{cc:?}");
        assert_eq!(done, served);
    }
}
