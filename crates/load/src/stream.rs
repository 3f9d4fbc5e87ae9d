//! Unidirectional streaming (netperf TCP_STREAM / TCP_MAERTS, iperf3).

use std::io;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::sock::{describe, recv_raw, send_all};
use crate::Counts;

/// Receive buffer size: large reads keep the receiver from being the bottleneck, as
/// netperf's default receive size (the socket buffer size) does.
pub const RECV_SIZE: usize = 128 * 1024;

/// Sends `send_size`-byte messages until `stop`, then shuts down the write side so the
/// receiver sees the end of the stream.
pub fn send(s: &mut TcpStream, send_size: usize, stop: &AtomicBool) -> io::Result<Counts> {
    let buf = vec![0u8; send_size];
    let mut sent = 0u64;
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        send_all(s, &buf).map_err(|e| describe(e, "sending data"))?;
        sent += send_size as u64;
    }
    let active = start.elapsed();
    // The peer may already be gone if it stopped first; that is not a failure of ours.
    let _ = s.shutdown(Shutdown::Write);
    Ok(Counts {
        bytes_tx: sent,
        active,
        ..Counts::default()
    })
}

/// Counts bytes until the sender closes, reading `recv_size` bytes at most per call. `active` runs from the first byte to the end of
/// the stream (the sender shuts down right after its last write, so the end of stream is
/// the last byte's arrival to within one wake-up). A receive timeout is retried while
/// `stop` is not raised (the sender may not have started yet).
pub fn receive(s: &mut TcpStream, recv_size: usize, stop: &AtomicBool) -> io::Result<Counts> {
    let mut buf = vec![0u8; recv_size.max(1)];
    let mut got = 0u64;
    let mut first: Option<Instant> = None;
    loop {
        match recv_raw(s, &mut buf) {
            Ok(0) => break,
            Ok(n) => {
                // No clock read per call in the loop: only the first byte's time matters.
                if got == 0 {
                    first = Some(Instant::now());
                }
                got += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) && !stop.load(Ordering::Relaxed) =>
            {
                continue
            }
            Err(e) => return Err(describe(e, "receiving data")),
        }
    }
    Ok(Counts {
        bytes_rx: got,
        active: first.map(|f| f.elapsed()).unwrap_or_default(),
        ..Counts::default()
    })
}
