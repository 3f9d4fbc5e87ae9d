//! Request/response over one connection (netperf TCP_RR).

use std::io;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;

use crate::sock::{describe, recv_full, send_all};
use crate::Counts;

/// Client half: send a request, wait for the whole response, record the round trip; repeat
/// until `stop`. The clock is read once per transaction: the end of one is the start of the
/// next, so the only work outside the two syscalls is that read and a histogram increment.
pub fn client(
    s: &mut TcpStream,
    request: usize,
    response: usize,
    stop: &AtomicBool,
    hist: &mut Histogram<u64>,
) -> io::Result<Counts> {
    let req = vec![0u8; request];
    let mut resp = vec![0u8; response];
    let mut n = 0u64;
    let start = Instant::now();
    let mut t0 = start;
    while !stop.load(Ordering::Relaxed) {
        send_all(s, &req).map_err(|e| describe(e, "sending request"))?;
        if !recv_full(s, &mut resp).map_err(|e| describe(e, "reading response"))? {
            return Err(describe(
                io::ErrorKind::UnexpectedEof.into(),
                "reading response",
            ));
        }
        let t1 = Instant::now();
        hist.saturating_record(t1.duration_since(t0).as_nanos() as u64);
        t0 = t1;
        n += 1;
    }
    Ok(Counts {
        bytes_rx: n * response as u64,
        bytes_tx: n * request as u64,
        transactions: n,
        active: t0.duration_since(start),
    })
}

/// Server half: answer each request with a response until the client closes.
pub fn server(
    s: &mut TcpStream,
    request: usize,
    response: usize,
    stop: &AtomicBool,
) -> io::Result<Counts> {
    let mut req = vec![0u8; request];
    let resp = vec![0u8; response];
    let mut n = 0u64;
    let start = Instant::now();
    loop {
        match recv_full(s, &mut req) {
            Ok(true) => {}
            Ok(false) => break,
            // The receive timeout fires while the client is idle; keep serving unless told
            // to stop.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && !stop.load(Ordering::Relaxed) =>
            {
                continue
            }
            Err(e) => return Err(describe(e, "reading request")),
        }
        send_all(s, &resp).map_err(|e| describe(e, "sending response"))?;
        n += 1;
    }
    Ok(Counts {
        bytes_rx: n * request as u64,
        bytes_tx: n * response as u64,
        transactions: n,
        active: start.elapsed(),
    })
}
