//! Small socket and thread helpers shared by the engines.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::Duration;

use virtperf_wire::{AppliedSockOpts, SockOpts, Wait};

/// Pins the calling thread to one CPU (netperf `-T` semantics).
pub fn pin_current_thread(cpu: u32) -> io::Result<()> {
    use rustix::thread::{sched_setaffinity, CpuSet};
    // CpuSet::set panics past the set's size: refuse such a CPU first.
    if cpu as usize >= CpuSet::MAX_CPU {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("CPU {cpu} is beyond CPU_SETSIZE"),
        ));
    }
    let mut set = CpuSet::new();
    set.set(cpu as usize);
    // No pid: the calling thread only.
    sched_setaffinity(None, &set).map_err(|e| {
        let e = io::Error::from(e);
        io::Error::new(e.kind(), format!("cannot pin to CPU {cpu}: {e}"))
    })
}

/// True if `cpu` is in the calling thread's allowed set (so pinning to it can succeed).
pub fn cpu_allowed(cpu: u32) -> bool {
    use rustix::thread::{sched_getaffinity, CpuSet};
    if cpu as usize >= CpuSet::MAX_CPU {
        return false;
    }
    sched_getaffinity(None).is_ok_and(|set| set.is_set(cpu as usize))
}

/// Applies the options every data connection gets: receive and send timeouts so that a
/// vanished peer ends the test with an error instead of a hang (on Linux the send timeout
/// also bounds a blocking `connect`); TCP_NODELAY (the workload's default unless `opts` says
/// otherwise); and the experiment's socket options. Works on listeners too: accepted sockets
/// inherit all of these, which saves the per-connection system calls in crr.
pub fn prepare_data_socket<S: AsFd>(
    s: &S,
    io_timeout: Duration,
    nodelay: bool,
    opts: &SockOpts,
) -> io::Result<()> {
    let s = socket2::SockRef::from(s);
    s.set_read_timeout(Some(io_timeout))?;
    s.set_write_timeout(Some(io_timeout))?;
    if opts.nodelay.unwrap_or(nodelay) {
        s.set_tcp_nodelay(true)?;
    }
    if let Some(us) = opts.busy_poll_us {
        s.set_busy_poll(us)
            .map_err(|e| io::Error::new(e.kind(), format!("setting SO_BUSY_POLL={us}: {e}")))?;
    }
    set_buffers(&s, opts)?;
    if let Some(cc) = opts.congestion {
        s.set_tcp_congestion(cc.as_str().as_bytes()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "setting TCP_CONGESTION={cc}: {e} (this machine offers: {})",
                    available_congestion().join(", ")
                ),
            )
        })?;
    }
    if let Some(t) = opts.tos {
        let r = match s.local_addr().ok().and_then(|a| a.as_socket()) {
            Some(std::net::SocketAddr::V6(_)) => s.set_tclass_v6(u32::from(t)),
            _ => s.set_tos_v4(u32::from(t)),
        };
        r.map_err(|e| io::Error::new(e.kind(), format!("setting IP_TOS={t:#x}: {e}")))?;
    }
    Ok(())
}

/// The options that must be in place before a connection is made: TCP_MAXSEG (the MSS
/// the SYN announces) and the buffers (the receive buffer sets the window scale the SYN
/// announces). For a connecting socket before `connect`, for a listener before `accept`
/// (accepted sockets inherit them).
pub fn prepare_before_connect<S: AsFd>(s: &S, opts: &SockOpts) -> io::Result<()> {
    let s = socket2::SockRef::from(s);
    if let Some(m) = opts.mss {
        s.set_tcp_mss(m)
            .map_err(|e| io::Error::new(e.kind(), format!("setting TCP_MAXSEG={m}: {e}")))?;
    }
    set_buffers(&s, opts)?;
    Ok(())
}

/// Whether this machine (this network namespace) lets programs open Multipath TCP
/// sockets: `Err` says why not, in words a user can act on.
pub fn mptcp_available() -> Result<(), String> {
    match std::fs::read_to_string("/proc/sys/net/mptcp/enabled") {
        Ok(v) if v.trim() == "1" => Ok(()),
        Ok(v) => Err(format!(
            "--mptcp: Multipath TCP is disabled here (net.mptcp.enabled = {}): sysctl -w net.mptcp.enabled=1, or drop --mptcp",
            v.trim()
        )),
        Err(_) => Err("--mptcp: this kernel has no Multipath TCP (no /proc/sys/net/mptcp; CONFIG_MPTCP): drop --mptcp".into()),
    }
}

/// The protocol of a data socket: MPTCP when `opts` asks for it, else TCP.
pub fn data_protocol(opts: &SockOpts) -> socket2::Protocol {
    if opts.mptcp == Some(true) {
        socket2::Protocol::MPTCP
    } else {
        socket2::Protocol::TCP
    }
}

/// SO_SNDBUF and SO_RCVBUF as `opts` asks (set before connecting and again after: an
/// accepted socket inherits its listener's, a connected one keeps what it had).
fn set_buffers(s: &socket2::SockRef<'_>, opts: &SockOpts) -> io::Result<()> {
    if let Some(b) = opts.sndbuf {
        s.set_send_buffer_size(b as usize)
            .map_err(|e| io::Error::new(e.kind(), format!("setting SO_SNDBUF={b}: {e}")))?;
    }
    if let Some(b) = opts.rcvbuf {
        s.set_recv_buffer_size(b as usize)
            .map_err(|e| io::Error::new(e.kind(), format!("setting SO_RCVBUF={b}: {e}")))?;
    }
    Ok(())
}

/// The congestion-control algorithms this machine offers
/// (`net.ipv4.tcp_available_congestion_control`); empty where it cannot be read.
pub fn available_congestion() -> Vec<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .map(|t| t.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

/// What the kernel applied to a TCP (or MPTCP) connection, read back with `getsockopt`;
/// an option the socket does not answer (MPTCP sockets answer fewer) is absent.
pub fn applied<S: AsFd>(s: &S) -> io::Result<AppliedSockOpts> {
    let s = socket2::SockRef::from(s);
    let v6 = matches!(
        s.local_addr().ok().and_then(|a| a.as_socket()),
        Some(std::net::SocketAddr::V6(_))
    );
    let tos = if v6 { s.tclass_v6() } else { s.tos_v4() };
    let cc = s.tcp_congestion().ok();
    Ok(AppliedSockOpts {
        sndbuf: s.send_buffer_size()? as u32,
        rcvbuf: s.recv_buffer_size()? as u32,
        nodelay: s.tcp_nodelay().ok(),
        congestion: cc.map(|c| {
            String::from_utf8_lossy(&c)
                .trim_end_matches('\0')
                .to_string()
        }),
        mss: s.tcp_mss().ok(),
        tos: tos.ok().map(|t| t as u8),
        busy_poll_us: s.busy_poll().ok(),
        mptcp: s.protocol().ok().flatten() == Some(socket2::Protocol::MPTCP),
    })
}

/// Caps a TCP sender at `bits_per_s` (`SO_MAX_PACING_RATE`, in bytes per second; TCP
/// paces itself since Linux 4.13, no fq qdisc needed): a stream at a given offered load
/// (iperf3 `--fq-rate`). Neither socket2, rustix nor nix wraps this option, hence the
/// `setsockopt` here.
pub fn set_max_pacing_rate<S: AsFd>(s: &S, bits_per_s: u64) -> io::Result<()> {
    let rate: u64 = bits_per_s / 8;
    // SAFETY: a descriptor borrowed for the call, and a pointer to a u64 with its exact
    // size as the option's length; the kernel copies at most that many bytes.
    let rc = unsafe {
        libc::setsockopt(
            s.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MAX_PACING_RATE,
            (&rate as *const u64).cast(),
            std::mem::size_of::<u64>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Shuts down a listening socket so that a thread blocked in `accept` on it returns.
///
/// Linux wakes `accept` with EINVAL when its listening socket is shut down; that is cheaper
/// and more reliable than connecting to ourselves.
pub fn wake_listener<T: AsFd>(l: &T) {
    // Failure is harmless: the listener is already shut down or closed.
    let _ = rustix::net::shutdown(l, rustix::net::Shutdown::Both);
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

/// `send(2)` on a connected socket, issued as a raw system call.
///
/// Why not `Write::write`: in a multi-threaded process glibc wraps `send`/`recv` in
/// pthread-cancellation bookkeeping (enable/disable async cancel around the syscall), which
/// single-threaded tools like netperf skip. For 64-byte sends that is a measurable share of
/// the loop (seen in `perf record`); virtperf never cancels threads. rustix's Linux backend
/// issues the system call itself (no libc in between), safely, at the cost of a
/// `libc::syscall` (bench/RESULTS.md compares the two builds). `MSG_NOSIGNAL` turns a
/// vanished peer into `EPIPE` rather than a signal.
#[inline]
pub fn send_raw<T: AsFd>(s: &T, buf: &[u8]) -> io::Result<usize> {
    rustix::net::send(s, buf, rustix::net::SendFlags::NOSIGNAL).map_err(io::Error::from)
}

/// `recv(2)` as a raw system call; see [`send_raw`] for why.
#[inline]
pub fn recv_raw<T: AsFd>(s: &T, buf: &mut [u8]) -> io::Result<usize> {
    recvfrom(s, buf, rustix::net::RecvFlags::empty())
}

/// `recv(2)` with `MSG_DONTWAIT`: `WouldBlock` at once when nothing is queued (spinning
/// waits, and the UDP receiver's drain at the end of a stream).
#[inline]
pub fn recv_nowait<T: AsFd>(s: &T, buf: &mut [u8]) -> io::Result<usize> {
    recvfrom(s, buf, rustix::net::RecvFlags::DONTWAIT)
}

#[inline]
fn recvfrom<T: AsFd>(s: &T, buf: &mut [u8], flags: rustix::net::RecvFlags) -> io::Result<usize> {
    // Without TRUNC the received length never exceeds the buffer: the first count is it.
    rustix::net::recv(s, buf, flags)
        .map(|(n, _)| n)
        .map_err(io::Error::from)
}

/// Fills `buf` completely, waiting as `wait` says: [`Wait::Block`] is [`recv_full`];
/// [`Wait::Spin`] retries a non-blocking receive without ever sleeping; [`Wait::Poll`]
/// spins for its window and then blocks for the rest. A spinner gives up with `TimedOut`
/// after `timeout` without data, as a blocking receive with `SO_RCVTIMEO` does, so a
/// silent peer cannot hold it forever.
#[inline]
pub fn recv_full_wait<T: AsFd>(
    s: &T,
    buf: &mut [u8],
    wait: Wait,
    timeout: std::time::Duration,
) -> io::Result<bool> {
    let window = match wait {
        Wait::Block => return recv_full(s, buf),
        Wait::Spin => None,
        Wait::Poll { window_us } => Some(std::time::Duration::from_micros(u64::from(window_us))),
    };
    let start = std::time::Instant::now();
    let mut got = 0;
    let mut spins = 0u32;
    while got < buf.len() {
        match recv_nowait(s, &mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(mid_message_eof()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                spins = spins.wrapping_add(1);
                // The clock is read every 64 empty polls: often enough for a 10 µs window,
                // rarely enough to leave the loop to the syscall.
                if spins.is_multiple_of(64) {
                    let waited = start.elapsed();
                    if window.is_some_and(|w| waited >= w) {
                        return recv_full(s, &mut buf[got..]).and_then(|more| {
                            if !more && got > 0 {
                                Err(mid_message_eof())
                            } else {
                                Ok(more || got > 0)
                            }
                        });
                    }
                    if waited >= timeout {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                }
                std::hint::spin_loop();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

/// Sends all of `buf` with [`send_raw`], retrying on partial sends and `EINTR`.
#[inline]
pub fn send_all<T: AsFd>(s: &T, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match send_raw(s, buf) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The peer closed after part of a message.
fn mid_message_eof() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "peer closed the connection in the middle of a message",
    )
}

/// Fills `buf` completely with [`recv_raw`]. Returns `Ok(false)` on a clean end of stream
/// before the first byte, and an `UnexpectedEof` error if the stream ends part-way.
#[inline]
pub fn recv_full<T: AsFd>(s: &T, buf: &mut [u8]) -> io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match recv_raw(s, &mut buf[got..]) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(mid_message_eof()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}
