//! rr on many flows per thread: the client keeps one request in flight per flow, the
//! server answers whichever flow is ready.

use std::io;
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use hdrhistogram::Histogram;
use rustix::event::epoll::EventFlags;

use super::*;
use crate::buf::PageBuf;

/// Client half of rr on `conns`: each flow sends a request, waits for the whole response,
/// records the round trip, and sends the next, back to back, until `stop` or the end of
/// `span`; transactions in flight then finish (bounded), so the agent answers every request
/// it was sent, but only those completed inside `span` are counted and timed. One clock
/// read per completed transaction (the end of one is the start of the next on that flow).
pub fn rr_client(
    conns: Vec<TcpStream>,
    request: usize,
    response: usize,
    span: Span,
    stop: &AtomicBool,
    hist: &mut Histogram<u64>,
    meter: &Meter,
) -> io::Result<Vec<Counts>> {
    nonblocking(&conns)?;
    let mut p = Poller::over(&conns)?;
    let req = PageBuf::zeroed(request);
    let mut buf = PageBuf::zeroed(response.min(1 << 20));
    let k = conns.len();
    let mut sent = vec![0usize; k];
    let mut got = vec![0usize; k];
    let mut n = vec![0u64; k];
    let mut busy = vec![true; k];
    let start = span.start;
    let mut t0 = vec![Instant::now(); k];
    let mut total = 0u64;
    let mut end = start;
    let mut ticks = Ticker::measured_from(meter, start);
    for (i, s) in conns.iter().enumerate() {
        send_some(s, &req, &mut sent[i]).map_err(|e| describe(e, "sending request"))?;
    }
    let mut in_flight = k;
    let mut drain = Drain::default();
    let closes = span.end();
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
            if inside(&span, now) {
                hist.saturating_record(now.duration_since(t0[i]).as_nanos() as u64);
                n[i] += 1;
                total += 1;
                end = now;
                if ticks.due(now) {
                    ticks.tick(now, total, hist);
                }
            }
            t0[i] = now;
            got[i] = 0;
            sent[i] = 0;
            if drain.stopping(stop) || past(closes, now) {
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
        measured(&span, end),
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
    let resp = PageBuf::zeroed(response);
    let mut buf = PageBuf::zeroed(request.min(1 << 20));
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
