//! Streams on many flows per thread: bounded turns per flow, so a thread sees its stop
//! and serves every flow, and receivers that count the measured window only.

use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::*;
use crate::buf::PageBuf;

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
    conns: &[TcpStream],
    send_size: usize,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    nonblocking(conns)?;
    let mut p = Poller::over(conns)?;
    let buf = PageBuf::zeroed(send_size);
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
/// drain). Bytes count while the measured interval `span` lasts; what arrives
/// after it (data still in flight when the sender stopped) is read, so the senders can
/// close cleanly, but not counted. Each flow's `active` is the window, or its first to last
/// byte without one.
pub fn stream_recv(
    conns: &[TcpStream],
    recv_size: usize,
    span: Span,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    nonblocking(conns)?;
    let mut p = Poller::over(conns)?;
    let mut buf = PageBuf::zeroed(recv_size.max(1));
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
    let mut win = Window::new(span.start, span.length);
    while left > 0 {
        // Once the window is counted, what is still in flight after the stop is not: leave
        // at once rather than read it (the senders have stopped; their sockets may reset).
        if drain.over(stop) || (win.done() && drain.stopping(stop)) {
            break;
        }
        let n = p.wait(win.bound(ready.wait_for()))?;
        for e in 0..n {
            ready.push(p.event(e).0 as usize);
        }
        for i in ready.take_round() {
            // A round over many flows can outlast the window's end: look at each turn.
            win.check(&got);
            if !open[i] {
                continue;
            }
            let before = got[i];
            let turn = drain_some(&conns[i], &mut buf, &mut got[i], win.open_end())?;
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
                    win.closed(i);
                }
            }
        }
        win.check(&got);
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

/// Reads one flow for at most [`TURN_BYTES`], and no read begun at or after `until` (the
/// measured window's end, while its counts are not yet taken): how far it got.
fn drain_some(
    s: &TcpStream,
    buf: &mut [u8],
    got: &mut u64,
    until: Option<Instant>,
) -> io::Result<Turn> {
    let mut moved = 0usize;
    while moved < TURN_BYTES {
        // The window's counts must be taken before a read that begins after its end: a
        // thread that lost its CPU across the end resumes here and would otherwise count
        // what queued up meanwhile. The flow stays ready; its next turn reads on.
        if until.is_some_and(|e| Instant::now() >= e) {
            return Ok(Turn::More);
        }
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

/// The measured window of a receiver: the byte counts of every flow at its end. Its length
/// is the one asked for, on every thread however late it looked: no read begun after the
/// end is counted ([`drain_some`] stops there), so a thread that lost its CPU across the
/// end counts what it read inside the window, over the window. (A read begun just before
/// the end and preempted inside may return after it: one read's bytes at most.)
struct Window {
    end: Option<Instant>,
    start: Instant,
    /// The byte counts as the window opened: none yet while a warm-up (`--omit`) runs,
    /// empty (all zero) when it opened with the engine.
    at_start: Option<Vec<u64>>,
    at_end: Option<(Vec<u64>, Duration)>,
    /// When each flow's sender closed, if it did inside the window: that flow's share of
    /// the window ends there (a connection that ended early says so by its shorter time).
    closed_at: Vec<Option<Duration>>,
}

impl Window {
    fn new(start: Instant, window: Option<Duration>) -> Window {
        Window {
            end: window.map(|w| start + w),
            start,
            at_start: (start <= Instant::now()).then(Vec::new),
            at_end: None,
            closed_at: Vec::new(),
        }
    }

    /// Flow `i`'s sender closed now.
    fn closed(&mut self, i: usize) {
        if self.end.is_some() && self.at_end.is_none() {
            if self.closed_at.len() <= i {
                self.closed_at.resize(i + 1, None);
            }
            self.closed_at[i] = Some(self.start.elapsed());
        }
    }

    /// A wait of at most `d` that does not run past the window's end.
    fn bound(&self, d: Duration) -> Duration {
        let now = Instant::now();
        if self.at_start.is_none() {
            return d.min(self.start.saturating_duration_since(now));
        }
        match (self.end, &self.at_end) {
            (Some(end), None) => d.min(end.saturating_duration_since(now)),
            _ => d,
        }
    }

    /// Takes the counts as the window opens and once it has ended.
    fn check(&mut self, got: &[u64]) {
        let now = Instant::now();
        if self.at_start.is_none() && now >= self.start {
            self.at_start = Some(got.to_vec());
        }
        if let (Some(end), None) = (self.end, &self.at_end) {
            if now >= end {
                self.at_end = Some((got.to_vec(), end.duration_since(self.start)));
            }
        }
    }

    /// The window's end while its counts are still to be taken.
    fn open_end(&self) -> Option<Instant> {
        self.end.filter(|_| self.at_end.is_none())
    }

    /// Whether the window has ended and its counts are taken.
    fn done(&self) -> bool {
        self.at_end.is_some()
    }

    /// Flow `i`'s bytes inside the window and the window's length (or the part of it
    /// before its sender closed), when there was one.
    fn counted(&self, i: usize) -> Option<(u64, Duration)> {
        let closed = self.closed_at.get(i).copied().flatten();
        self.at_end
            .as_ref()
            // Every flow has a count in the window's snapshot (one per flow): the default
            // is never taken.
            .map(|(g, d)| {
                let from = self.at_start.as_ref().and_then(|s| s.get(i).copied());
                let bytes = g.get(i).copied().unwrap_or_default();
                (bytes - from.unwrap_or(0).min(bytes), closed.unwrap_or(*d))
            })
    }
}
