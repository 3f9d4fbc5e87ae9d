//! Small socket and thread helpers shared by the engines.

use std::io::{self, Read};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Pins the calling thread to one CPU (netperf `-T` semantics).
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond CPU_SETSIZE"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; CPU_SET stays in bounds (checked above);
    // sched_setaffinity(0, …) applies to the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu as usize, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("cannot pin to CPU {cpu}: {e}"),
            ));
        }
    }
    Ok(())
}

/// True if `cpu` is in the calling thread's allowed set (so pinning to it can succeed).
pub fn cpu_allowed(cpu: u32) -> bool {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: sched_getaffinity fills the zeroed set we own; CPU_ISSET stays in bounds.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return false;
        }
        libc::CPU_ISSET(cpu as usize, &set)
    }
}

/// Applies the options every data connection gets: receive and send timeouts so that a
/// vanished peer ends the test with an error instead of a hang, and optionally TCP_NODELAY.
pub fn prepare_data_socket(s: &TcpStream, io_timeout: Duration, nodelay: bool) -> io::Result<()> {
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    if nodelay {
        s.set_nodelay(true)?;
    }
    Ok(())
}

/// Shuts down a listening socket so that a thread blocked in `accept` on it returns.
///
/// Linux wakes `accept` with EINVAL when its listening socket is shut down; that is cheaper
/// and more reliable than connecting to ourselves.
pub fn wake_listener<T: AsRawFd>(l: &T) {
    // SAFETY: shutdown on a valid fd we borrow; failure is harmless (already closed).
    unsafe {
        libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR);
    }
}

/// Fills `buf` completely. Returns `Ok(false)` on a clean end of stream before the first
/// byte, and an `UnexpectedEof` error if the stream ends part-way.
pub fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "peer closed the connection in the middle of a message",
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Turns a socket error into one that says which peer and phase failed.
pub fn describe(e: io::Error, what: &str) -> io::Error {
    let hint = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            " (timed out: peer stopped responding)"
        }
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => " (the peer went away)",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}
