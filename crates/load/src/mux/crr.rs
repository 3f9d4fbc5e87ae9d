//! crr on many flows per thread: each flow connects, asks, reads, closes and connects
//! again; the server side accepts on a listener shared by its threads.

use std::io;
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, EventData, EventFlags};

use super::*;
use crate::buf::PageBuf;

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
/// connect, closes and connects again, until `stop` or the end of `span`; only
/// transactions completed inside `span` are counted.
pub fn crr_client(
    addr: SocketAddr,
    flows: usize,
    x: crate::Exchange,
    opts: &SockOpts,
    span: Span,
    out: crate::Sink<'_>,
) -> io::Result<Vec<Counts>> {
    // Multiplexed flows wait in epoll: `x.wait` is not theirs to choose.
    let (request, response) = (x.request, x.response);
    let crate::Sink { stop, hist, meter } = out;
    let mut p = Poller::new()?;
    let req = PageBuf::zeroed(request);
    let mut buf = PageBuf::zeroed(response.min(1 << 20));
    let start = span.start;
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
        connect_flow(&p, f, i, addr, opts)?;
    }
    let mut n = vec![0u64; flows];
    let mut total = 0u64;
    let mut end = start;
    let mut ticks = Ticker::measured_from(meter, start);
    let mut in_flight = flows;
    let mut drain = Drain::default();
    let closes = span.end();
    while in_flight > 0 {
        if drain.over(stop) {
            break;
        }
        let ready = p.wait(IDLE_WAIT)?;
        for e in 0..ready {
            let (tok, flags) = p.event(e);
            let i = (tok >> 32) as usize;
            let f = &mut fl[i];
            if tok as u32 != f.generation || !step(f, flags, &req, &mut buf, response)? {
                continue;
            }
            let now = Instant::now();
            if inside(&span, now) {
                hist.saturating_record(now.duration_since(f.t0).as_nanos() as u64);
                n[i] += 1;
                total += 1;
                end = now;
                if ticks.due(now) {
                    ticks.tick(now, total, hist);
                }
            }
            // Closing deregisters the socket from this thread's epoll.
            f.s = None;
            if drain.stopping(stop) || past(closes, now) {
                in_flight -= 1;
                continue;
            }
            connect_flow(&p, f, i, addr, opts)?;
        }
    }
    ticks.finish(end, total, hist);
    Ok(flow_counts(
        &n,
        request,
        response,
        measured(&span, end),
        true,
    ))
}

/// Opens flow `f`'s next connection (non-blocking) and registers it under a token that
/// carries the flow's index and a fresh generation, so events of its closed predecessor
/// are told apart.
fn connect_flow(
    p: &Poller,
    f: &mut CrrFlow,
    i: usize,
    addr: SocketAddr,
    opts: &SockOpts,
) -> io::Result<()> {
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
}

/// Moves flow `f`'s transaction on after an event: connected, request sent, response
/// read. True when the whole response is in.
#[inline]
fn step(
    f: &mut CrrFlow,
    flags: EventFlags,
    req: &[u8],
    buf: &mut [u8],
    response: usize,
) -> io::Result<bool> {
    let Some(s) = f.s.as_ref() else {
        return Ok(false);
    };
    if !f.connected {
        if !flags.intersects(EventFlags::OUT | EventFlags::ERR | EventFlags::HUP) {
            return Ok(false);
        }
        if let Some(err) = s.take_error()? {
            return Err(describe(err, "connecting for a transaction"));
        }
        f.connected = true;
    }
    if f.sent < req.len()
        && !send_some(s, req, &mut f.sent).map_err(|e| describe(e, "sending request"))?
    {
        return Ok(false);
    }
    match recv_some(s, buf, response, &mut f.got).map_err(|e| describe(e, "reading response"))? {
        Got::Part => Ok(false),
        Got::Closed => Err(describe(
            io::ErrorKind::UnexpectedEof.into(),
            "reading response",
        )),
        Got::Whole => Ok(true),
    }
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
    let resp = PageBuf::zeroed(response);
    let mut buf = PageBuf::zeroed(request.min(1 << 20));
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
    Ok(Counts::of_transactions(
        n,
        request,
        response,
        start.elapsed(),
    ))
}
