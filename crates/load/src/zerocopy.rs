//! Zero-copy stream senders (`stream --zerocopy`):
//! - `sendfile`: `sendfile(2)` from an in-memory file holding one message, what iperf3 -Z
//!   does: the kernel moves page references instead of copying user memory;
//! - `msg`: `send(MSG_ZEROCOPY)` on a socket with `SO_ZEROCOPY`: the kernel pins the user
//!   pages and reports when it is done with them on the socket's error queue, which this
//!   reaps (the notifications would otherwise fill the socket's option memory and sends
//!   would fail with ENOBUFS). Where the path copies anyway (loopback, a device without
//!   scatter-gather) each notification says so: counted in [`ZcStats::copied`].
//!
//! Written over libc: neither socket2 nor rustix wraps `SO_ZEROCOPY` or the error-queue
//! notifications (`sock_extended_err`), and nix's cmsg types do not cover them either.

use std::io;
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use virtperf_wire::ZeroCopy;

use crate::buf::PageBuf;
use crate::interval::Meter;
use crate::sock::describe;
use crate::Counts;

/// `SO_ZEROCOPY` (asm-generic/socket.h; not exported by the libc crate for x86).
const SO_ZEROCOPY: libc::c_int = 60;
/// `SO_EE_ORIGIN_ZEROCOPY` (linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
/// `SO_EE_CODE_ZEROCOPY_COPIED`: the kernel copied the data after all.
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// What the `msg` sender learned from the kernel's notifications.
pub type ZcStats = virtperf_wire::ZeroCopyCounts;

/// Sends `send_size`-byte messages the zero-copy way `mode` says until `stop`, then shuts
/// down the write side; like [`crate::stream::send`] otherwise.
pub fn send(
    s: &mut TcpStream,
    send_size: usize,
    mode: ZeroCopy,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<(Counts, ZcStats)> {
    let start = Instant::now();
    let (sent, stats) = match mode {
        ZeroCopy::Sendfile => (
            sendfile_loop(s, send_size, start, stop, meter)?,
            ZcStats::default(),
        ),
        ZeroCopy::Msg => msg_loop(s, send_size, start, stop, meter)?,
    };
    let end = Instant::now();
    let _ = s.shutdown(Shutdown::Write);
    let all = Counts {
        bytes_tx: sent,
        active: end - start,
        ..Counts::default()
    };
    Ok((meter.trim(all, end), stats))
}

fn sendfile_loop(
    s: &TcpStream,
    send_size: usize,
    start: Instant,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<u64> {
    let file = rustix::fs::memfd_create("virtperf-zerocopy", rustix::fs::MemfdFlags::CLOEXEC)?;
    let mut f = std::fs::File::from(file);
    io::Write::write_all(&mut f, &vec![0u8; send_size])?;
    let mut sent = 0u64;
    let mut marked = meter.omit().is_none();
    while !stop.load(Ordering::Relaxed) {
        let mut off = 0u64;
        while (off as usize) < send_size {
            let n = rustix::fs::sendfile(s.as_fd(), f.as_fd(), Some(&mut off), send_size)
                .map_err(|e| describe(e.into(), "sendfile"))?;
            if n == 0 {
                return Err(describe(io::ErrorKind::WriteZero.into(), "sendfile"));
            }
        }
        sent += send_size as u64;
        meter.set_bytes(sent);
        meter.mark_sender(&mut marked, sent, start, Some(s.as_raw_fd()));
    }
    Ok(sent)
}

fn msg_loop(
    s: &TcpStream,
    send_size: usize,
    start: Instant,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<(u64, ZcStats)> {
    let fd = s.as_raw_fd();
    let one: libc::c_int = 1;
    // SAFETY: setsockopt reads an int from a valid pointer of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(describe(io::Error::last_os_error(), "setting SO_ZEROCOPY"));
    }
    // The pages stay pinned until the kernel's notification: the buffer is never written
    // after this, so reusing it for every send is safe.
    let buf = PageBuf::zeroed(send_size);
    let (mut sent, mut issued, mut stats) = (0u64, 0u64, ZcStats::default());
    let mut marked = meter.omit().is_none();
    while !stop.load(Ordering::Relaxed) {
        let mut done = 0;
        while done < send_size {
            // SAFETY: send reads at most the given length from a live buffer.
            let n = unsafe {
                libc::send(
                    fd,
                    buf[done..].as_ptr().cast(),
                    send_size - done,
                    libc::MSG_ZEROCOPY,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    // Notification memory is full: reap some and send again.
                    Some(libc::ENOBUFS) => {
                        reap(fd, &mut stats, Some(Duration::from_millis(10)))?;
                        continue;
                    }
                    _ => return Err(describe(e, "sending data (MSG_ZEROCOPY)")),
                }
            }
            done += n as usize;
            issued += 1;
        }
        sent += send_size as u64;
        meter.set_bytes(sent);
        meter.mark_sender(&mut marked, sent, start, Some(fd));
        reap(fd, &mut stats, None)?;
    }
    // Every send's pages back before the buffer is freed; a peer that stopped reading may
    // leave some: give up after a second.
    let deadline = Instant::now() + Duration::from_secs(1);
    while stats.completed < issued && Instant::now() < deadline {
        reap(fd, &mut stats, Some(Duration::from_millis(50)))?;
    }
    Ok((sent, stats))
}

/// Reads the zero-copy notifications waiting on `fd`'s error queue into `stats`; with
/// `wait`, first waits up to that long for one.
fn reap(fd: libc::c_int, stats: &mut ZcStats, wait: Option<Duration>) -> io::Result<()> {
    if let Some(w) = wait {
        let mut p = libc::pollfd {
            fd,
            events: 0, // POLLERR is always reported.
            revents: 0,
        };
        // SAFETY: poll reads and writes one pollfd we own.
        unsafe { libc::poll(&mut p, 1, w.as_millis() as libc::c_int) };
    }
    loop {
        let mut control = [0u64; 16];
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        // SAFETY: recvmsg writes at most msg_controllen bytes into `control`.
        let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return match e.raw_os_error() {
                Some(libc::EAGAIN) => Ok(()),
                Some(libc::EINTR) => continue,
                _ => Err(describe(e, "reading zero-copy notifications")),
            };
        }
        // SAFETY: CMSG_FIRSTHDR/NXTHDR walk the control buffer recvmsg filled, bounded by
        // msg_controllen; each data pointer is read only when its header says it holds a
        // sock_extended_err.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let recverr = ((*c).cmsg_level == libc::SOL_IP
                    && (*c).cmsg_type == libc::IP_RECVERR)
                    || ((*c).cmsg_level == libc::SOL_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR);
                if recverr {
                    let ee = std::ptr::read_unaligned(
                        libc::CMSG_DATA(c).cast::<libc::sock_extended_err>(),
                    );
                    if ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                        // Sends ee_info..=ee_data completed (a 32-bit counter).
                        let n = u64::from(ee.ee_data.wrapping_sub(ee.ee_info)) + 1;
                        stats.completed += n;
                        if ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                            stats.copied += n;
                        }
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
    }
}
