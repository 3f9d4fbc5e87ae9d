//! Fixed-size transfer (seed 2: "time to send 1 GiB").
//!
//! The sender writes exactly `bytes` bytes and shuts down its write side; the receiver counts
//! until end of stream and answers with its 8-byte count, so the sender's clock stops when
//! the last byte has arrived at the receiver, not when it left the send buffer.

use std::io::{self, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Instant;

use crate::buf::PageBuf;
use crate::interval::Meter;
use crate::sock::{describe, recv_full, send_all};
use crate::stream::{drain, RECV_SIZE};
use crate::Counts;
use virtperf_wire::RecvWait;

/// Sends `bytes` bytes, then waits for the receiver's acknowledgement. `active` is the time
/// from the first write to the acknowledgement; `bytes_rx` carries the receiver's count.
/// The running count of bytes handed to the kernel is published in `meter`. Raising `stop`
/// (only a signal's cut does: an untimed transfer's stop comes after it) ends the transfer
/// early, as if `bytes` had been what was sent so far; `bytes_tx` says how much.
pub fn send(
    s: &mut TcpStream,
    bytes: u64,
    send_size: usize,
    meter: &Meter,
    stop: &std::sync::atomic::AtomicBool,
) -> io::Result<Counts> {
    let buf = PageBuf::zeroed(send_size);
    let start = Instant::now();
    let mut left = bytes;
    while left > 0 && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let n = left.min(send_size as u64) as usize;
        send_all(s, &buf[..n]).map_err(|e| describe(e, "sending data"))?;
        left -= n as u64;
        meter.set_bytes(bytes - left);
    }
    s.shutdown(Shutdown::Write)
        .map_err(|e| describe(e, "closing the send side"))?;
    let mut ack = [0u8; 8];
    if !recv_full(s, &mut ack).map_err(|e| describe(e, "waiting for the receiver's count"))? {
        return Err(describe(
            io::ErrorKind::UnexpectedEof.into(),
            "waiting for the receiver's count",
        ));
    }
    Ok(Counts {
        bytes_tx: bytes - left,
        bytes_rx: u64::from_be_bytes(ack),
        transactions: 1,
        active: start.elapsed(),
        ..Counts::default()
    })
}

/// Receives until end of stream, then sends the 8-byte big-endian count back. The running
/// byte count is published in `meter`.
pub fn receive(s: &mut TcpStream, meter: &Meter) -> io::Result<Counts> {
    // A receive timeout ends the transfer with an error: a fixed-size transfer has no
    // stop flag to wait for. The stream's default loop: for 2 GiB transfers it moved the same
    // as the polling one with 5 % less receiver CPU per KB (bench/RESULTS.md, session 13).
    let mut buf = PageBuf::zeroed(RECV_SIZE);
    let (got, _calls, first) = drain(s, &mut buf, RecvWait::default(), meter, || false)?;
    // No byte: active for no time (a true 0, beside 0 bytes received).
    let active = first.map(|f: Instant| f.elapsed()).unwrap_or_default();
    s.write_all(&got.to_be_bytes())
        .map_err(|e| describe(e, "acknowledging the transfer"))?;
    Ok(Counts {
        bytes_rx: got,
        transactions: 1,
        active,
        ..Counts::default()
    })
}
