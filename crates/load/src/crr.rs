//! Connect/request/response: a new TCP connection per transaction (netperf TCP_CRR).
//!
//! The server closes first after answering, so TIME_WAIT lands on the server's single
//! listening port rather than exhausting the client's ephemeral ports; the client reads to
//! end of stream before closing for the same reason.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use virtperf_wire::SockOpts;

use crate::buf::PageBuf;
use crate::interval::Ticker;
use crate::sock::{describe, prepare_data_socket, recv_full_wait, recv_raw, send_all};
use crate::Counts;

/// Client half: connect, send the request, read the response (latency sample ends here),
/// read the server's close, close; repeat until `stop`. `wait` is how it waits for the
/// response (the connect itself always blocks). Intervals go to `meter` (if it has an
/// interval), decided on the clock reading that ends each transaction. `first` is shown the
/// first connection (to read back the socket options the kernel applied).
pub fn client(
    addr: SocketAddr,
    x: crate::Exchange,
    io_timeout: Duration,
    opts: &SockOpts,
    out: crate::Sink<'_>,
    first: &dyn Fn(BorrowedFd<'_>),
) -> io::Result<Counts> {
    let crate::Exchange {
        request,
        response,
        wait,
    } = x;
    let crate::Sink { stop, hist, meter } = out;
    let mut first = Some(first);
    let req = PageBuf::zeroed(request);
    let mut resp = PageBuf::zeroed(response);
    let mut n = 0u64;
    let start = Instant::now();
    let mut end = start;
    let mut ticks = Ticker::start(meter, start);
    while !stop.load(Ordering::Relaxed) {
        let t0 = Instant::now();
        // A plain blocking connect bounded by SO_SNDTIMEO: `TcpStream::connect_timeout`
        // would add four system calls (non-blocking mode on and off, poll, SO_ERROR) to
        // every transaction, several percent of a loopback crr.
        let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        prepare_data_socket(&s, io_timeout, true, opts)?;
        s.connect(&addr.into())
            .map_err(|e| describe(e, "connecting for a transaction"))?;
        // The first connection shows what the kernel applied to them all (same options).
        if let Some(f) = first.take() {
            f(s.as_fd());
        }
        send_all(&s, &req).map_err(|e| describe(e, "sending request"))?;
        if !recv_full_wait(&s, &mut resp, wait, io_timeout)
            .map_err(|e| describe(e, "reading response"))?
        {
            return Err(describe(
                io::ErrorKind::UnexpectedEof.into(),
                "reading response",
            ));
        }
        end = Instant::now();
        // The next transaction reads its own start, so closing an interval here is
        // charged to none.
        if ticks.due(end) {
            ticks.tick(end, n, hist);
        }
        hist.saturating_record(end.duration_since(t0).as_nanos() as u64);
        if ticks.passed_omit() {
            // Each transaction has its own connection: no TCP state spans the test.
            meter.set_mark(
                Counts::of_transactions(n, response, request, end - start),
                None,
            );
        }
        n += 1;
        let mut tail = [0u8; 1];
        // Wait for the server's FIN; any extra bytes would be a protocol error of the peer,
        // which we ignore here since the transaction is already complete.
        let _ = recv_raw(&s, &mut tail);
    }
    ticks.finish(end, n, hist);
    let all = Counts::of_transactions(n, response, request, end.duration_since(start));
    Ok(meter.trim(all, end))
}

/// Server half: accept, read the request, answer, close; until `stop` and the listener is
/// woken (see [`crate::sock::wake_listener`]). Connections from any address but `peer` (the
/// test's client, when given) are closed unanswered: a stranger can neither add
/// transactions nor hold the server up. `wait` is how it waits for each request (accepting
/// always blocks). `first` is shown the first accepted connection.
pub fn server(
    listener: &TcpListener,
    peer: Option<std::net::IpAddr>,
    x: crate::Exchange,
    io_timeout: Duration,
    opts: &SockOpts,
    stop: &AtomicBool,
    first: &dyn Fn(BorrowedFd<'_>),
) -> io::Result<Counts> {
    let crate::Exchange {
        request,
        response,
        wait,
    } = x;
    let mut first = Some(first);
    let mut req = PageBuf::zeroed(request);
    let resp = PageBuf::zeroed(response);
    let mut n = 0u64;
    // Options set on the listener are inherited by every accepted connection.
    prepare_data_socket(listener, io_timeout, true, opts)?;
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let s = match listener.accept() {
            Ok((_, from)) if peer.is_some_and(|p| p != from.ip()) => continue,
            Ok((s, _)) => {
                if let Some(f) = first.take() {
                    f(s.as_fd());
                }
                s
            }
            Err(_) if stop.load(Ordering::Relaxed) => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(describe(e, "accepting a connection")),
        };
        // A client that vanishes mid-transaction costs one connection, not the test.
        if let Ok(true) = recv_full_wait(&s, &mut req, wait, io_timeout) {
            if send_all(&s, &resp).is_ok() {
                n += 1;
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
