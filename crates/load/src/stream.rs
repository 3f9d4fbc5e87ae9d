//! Unidirectional streaming (netperf TCP_STREAM / TCP_MAERTS, iperf3).

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use crate::buf::PageBuf;
use crate::interval::Meter;
use crate::sock::{describe, recv_raw, send_all};
use crate::Counts;
use virtperf_wire::RecvWait;

/// Receive buffer size: large reads keep the receiver from being the bottleneck, as
/// netperf's default receive size (the socket buffer size) does.
pub const RECV_SIZE: usize = 128 * 1024;

/// Sends `send_size`-byte messages until `stop`, then shuts down the write side so the
/// receiver sees the end of the stream, from a buffer starting `offset` bytes into a page
/// (None: page-aligned). The running count of bytes handed to the kernel is published in
/// `meter` after each send.
pub fn send(
    s: &mut TcpStream,
    send_size: usize,
    offset: Option<u32>,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Counts> {
    let buf = PageBuf::zeroed_at(send_size, offset.unwrap_or(0) as usize);
    let mut sent = 0u64;
    let mut marked = meter.omit().is_none();
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        send_all(s, &buf).map_err(|e| describe(e, "sending data"))?;
        sent += send_size as u64;
        meter.set_bytes(sent);
        meter.mark_sender(&mut marked, sent, start, Some(s.as_raw_fd()));
    }
    let end = Instant::now();
    // The peer may already be gone if it stopped first; that is not a failure of ours.
    let _ = s.shutdown(Shutdown::Write);
    let all = Counts {
        bytes_tx: sent,
        active: end - start,
        ..Counts::default()
    };
    // One `send` per message, so the calls follow from the bytes (also over a trimmed
    // interval): no counter in the loop. On this blocking socket the kernel takes a message
    // whole unless a signal or the send timeout cuts it short (then `send_all` calls again,
    // not counted).
    let mut c = meter.trim(all, end);
    c.calls = c.bytes_tx / send_size.max(1) as u64;
    Ok(c)
}

/// Counts bytes until the sender closes, reading at most `recv_size` bytes per call (None:
/// [`RECV_SIZE`]) into a buffer starting `offset` bytes into a page (None: page-aligned), and
/// waiting for data as `wait` says (None: [`RecvWait::default`], block). `active`
/// runs from the first byte to the end of the stream (the sender shuts down right after its
/// last write, so the end of stream is the last byte's arrival to within one wake-up). A
/// receive timeout is retried while `stop` is not raised (the sender may not have started).
/// The running byte count is published in `meter` after each read.
pub fn receive(
    s: &mut TcpStream,
    recv_size: Option<u32>,
    offset: Option<u32>,
    wait: Option<RecvWait>,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Counts> {
    let recv_size = recv_size.map_or(RECV_SIZE, |r| r as usize);
    let mut buf = PageBuf::zeroed_at(recv_size.max(1), offset.unwrap_or(0) as usize);
    let wait = wait.unwrap_or_default();
    let (got, calls, first) = drain(s, &mut buf, wait, meter, || !stop.load(Ordering::Relaxed))?;
    let end = Instant::now();
    let all = Counts {
        bytes_rx: got,
        calls,
        // No byte: active for no time (a true 0, beside 0 bytes received).
        active: first.map(|f| end - f).unwrap_or_default(),
        ..Counts::default()
    };
    Ok(meter.trim(all, end))
}

/// Reads into `buf` until end of stream and returns the byte count, the `recv` calls that
/// returned data, and the first byte's arrival time.
///
/// [`RecvWait::Block`] (the default) is netperf's loop: blocking `recv` calls that sleep
/// inside the receive. [`RecvWait::Poll`] is iperf3's: the socket is non-blocking, the
/// receiver reads until the queue is empty and then sleeps in `poll(2)`. Where the receiver
/// sleeps changes how often the sender must wake it. Earlier measurements on this project's
/// AMD test guest had `poll` ahead at 128 KiB sends and `block` at 16 KiB; those receivers'
/// buffers started 16 bytes into a page, which made every copy slow there (see
/// [`crate::buf`]). With page-aligned buffers the two loops move the same on that guest and
/// `block` costs the receiver less CPU per KB; on an Intel guest `block` moved ≈ 8 % more
/// (issue 30 §5; bench/RESULTS.md, "buffer alignment"). A blocking `recv` followed by
/// non-blocking drains behaved like `block`.
///
/// Either way the wait honours the socket's receive timeout (`SO_RCVTIMEO`, which every data
/// socket carries): when it expires, `keep_waiting` decides between waiting again and a
/// timed-out error. The socket is left blocking on success.
pub(crate) fn drain(
    s: &TcpStream,
    buf: &mut [u8],
    wait: RecvWait,
    meter: &Meter,
    keep_waiting: impl Fn() -> bool,
) -> io::Result<(u64, u64, Option<Instant>)> {
    let timeout = s.read_timeout()?;
    let timeout_ms = timeout.map_or(-1, |t| {
        i32::try_from(t.as_millis()).unwrap_or(i32::MAX).max(1)
    });
    let polled = wait == RecvWait::Poll;
    s.set_nonblocking(polled)?;
    let (mut got, mut calls) = (0u64, 0u64);
    let mut first: Option<Instant> = None;
    // The end of the warm-up (`--omit`), seen at the next read after it.
    let mut marked = meter.omit().is_none();
    loop {
        match recv_raw(s, buf) {
            Ok(0) => break,
            Ok(n) => {
                // No clock read per call in the loop: only the first byte's time matters.
                if got == 0 {
                    first = Some(Instant::now());
                }
                got += n as u64;
                calls += 1;
                meter.set_bytes(got);
                if !marked && meter.measuring() {
                    marked = true;
                    let so_far = Counts {
                        bytes_rx: got,
                        calls,
                        active: first.map(|f| f.elapsed()).unwrap_or_default(),
                        ..Counts::default()
                    };
                    meter.set_mark(so_far, Some(s.as_raw_fd()));
                }
            }
            // Polled: the queue is empty, so wait. Blocking: SO_RCVTIMEO expired.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                let ready = polled && wait_readable(s, timeout_ms)?;
                if !ready && !keep_waiting() {
                    let secs = timeout.unwrap_or_default().as_secs_f64();
                    let e =
                        io::Error::new(io::ErrorKind::TimedOut, format!("no data for {secs:.1} s"));
                    return Err(describe(e, "receiving data"));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(describe(e, "receiving data")),
        }
    }
    s.set_nonblocking(false)?;
    Ok((got, calls, first))
}

/// Waits until `s` is readable (data, end of stream or an error to collect); false when
/// `timeout_ms` passed first. `-1` waits forever.
fn wait_readable(s: &TcpStream, timeout_ms: i32) -> io::Result<bool> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let timeout = (timeout_ms >= 0).then(|| Timespec {
        tv_sec: i64::from(timeout_ms / 1000),
        tv_nsec: i64::from(timeout_ms % 1000) * 1_000_000,
    });
    let mut pfd = [PollFd::new(s, PollFlags::IN)];
    loop {
        match poll(&mut pfd, timeout.as_ref()) {
            Ok(n) => return Ok(n > 0),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(describe(io::Error::from(e), "waiting for data")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    /// A connected loopback pair: (client, accepted server side).
    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (s, _) = l.accept().expect("accept");
        (c, s)
    }

    #[test]
    fn drain_counts_every_byte_in_odd_sized_writes_and_leaves_the_socket_blocking() {
        for wait in [RecvWait::Poll, RecvWait::Block] {
            counts_every_byte(wait);
        }
    }

    fn counts_every_byte(wait: RecvWait) {
        let (mut tx, rx) = pair();
        rx.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let writer = std::thread::spawn(move || {
            // 1000 writes of 1237 bytes: sizes that never line up with the 4 KiB reads.
            let chunk = vec![7u8; 1237];
            for _ in 0..1000 {
                tx.write_all(&chunk).expect("write");
            }
        });
        let (got, calls, first) =
            drain(&rx, &mut [0u8; 4096], wait, &Meter::default(), || false).expect("drain");
        writer.join().expect("writer");
        assert_eq!(got, 1237 * 1000, "{wait:?}");
        // Each read returns at most the buffer and at least a byte.
        assert!(
            calls >= got.div_ceil(4096) && calls <= got,
            "{calls} reads for {got} bytes ({wait:?})"
        );
        assert!(first.is_some());
        // SAFETY: F_GETFL on a descriptor we own.
        let flags = unsafe { libc::fcntl(rx.as_raw_fd(), libc::F_GETFL) };
        assert!(flags >= 0);
        assert_eq!(
            flags & libc::O_NONBLOCK,
            0,
            "drain left the socket non-blocking"
        );
    }

    #[test]
    fn a_silent_peer_times_out_with_one_line_saying_so() {
        for wait in [RecvWait::Poll, RecvWait::Block] {
            let (_tx, rx) = pair();
            rx.set_read_timeout(Some(Duration::from_millis(100)))
                .expect("timeout");
            let t0 = Instant::now();
            let e = drain(&rx, &mut [0u8; 4096], wait, &Meter::default(), || false)
                .expect_err("silent peer");
            assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{wait:?}");
            assert!(e.to_string().contains("no data for 0.1 s"), "{wait:?}: {e}");
            assert!(t0.elapsed() < Duration::from_secs(5));
        }
    }

    #[test]
    fn keep_waiting_is_asked_at_each_timeout_until_it_gives_up() {
        for wait in [RecvWait::Poll, RecvWait::Block] {
            let (_tx, rx) = pair();
            rx.set_read_timeout(Some(Duration::from_millis(20)))
                .expect("timeout");
            let asked = AtomicUsize::new(0);
            let e = drain(&rx, &mut [0u8; 4096], wait, &Meter::default(), || {
                asked.fetch_add(1, Ordering::Relaxed) < 3
            })
            .expect_err("silent peer");
            assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{wait:?}");
            assert_eq!(asked.load(Ordering::Relaxed), 4, "{wait:?}");
        }
    }
}
