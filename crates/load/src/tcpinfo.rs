//! `TCP_INFO` of a connection: the kernel's view of its congestion window, round-trip time,
//! retransmissions and what limited the sender. Written by hand over `getsockopt`: neither
//! socket2 nor nix exposes `TCP_INFO`, and the struct's length tells which fields the
//! running kernel filled (older kernels return a shorter struct).

use std::mem::{offset_of, size_of};
use std::os::fd::RawFd;

use virtperf_wire::TcpInfo;

/// One reading of a connection's `tcp_info`, with how many bytes the kernel filled.
#[derive(Clone, Copy)]
pub struct Snapshot {
    raw: libc::tcp_info,
    len: usize,
}

/// Shown by size only: the raw struct is the kernel's, and `between` is how it is read.
impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tcp_info ({} bytes)", self.len)
    }
}

impl Snapshot {
    /// Whether the kernel filled the field that ends at byte `end`.
    fn has(&self, end: usize) -> bool {
        self.len >= end
    }
}

/// Reads `TCP_INFO` of socket `fd`; `None` for a socket that is not TCP (UDP flows) or a
/// kernel that refuses it.
pub fn read(fd: RawFd) -> Option<Snapshot> {
    // SAFETY: tcp_info is plain data; all-zero is a valid value.
    let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `raw`, which is that large, and
    // sets `len` to what it wrote.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut raw as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(Snapshot {
        raw,
        len: len as usize,
    })
}

macro_rules! end_of {
    ($f:ident) => {
        offset_of!(libc::tcp_info, $f) + size_of::<u64>()
    };
}

/// The connection's state at `end`, with its growing counters taken over the interval
/// since `start` (both readings of the same socket).
pub fn between(start: &Snapshot, end: &Snapshot) -> TcpInfo {
    let (s, e) = (&start.raw, &end.raw);
    let opt = |have: bool, v: u64| have.then_some(v);
    let busy_end = end_of!(tcpi_busy_time);
    let rwnd_end = end_of!(tcpi_rwnd_limited);
    let sndbuf_end = end_of!(tcpi_sndbuf_limited);
    // Both u32 and adjacent: the later one's end covers the pair.
    let segs_end = offset_of!(libc::tcp_info, tcpi_data_segs_out) + size_of::<u32>();
    let both = |n: usize| start.has(n) && end.has(n);
    // A u32 counter over the interval, where both readings hold it.
    let count32 = |end: usize, s: u32, e: u32| both(end).then(|| u64::from(e.wrapping_sub(s)));
    let u32_end = |offset: usize| offset + size_of::<u32>();
    TcpInfo {
        retransmits: u64::from(e.tcpi_total_retrans),
        retransmits_interval: u64::from(e.tcpi_total_retrans.saturating_sub(s.tcpi_total_retrans)),
        snd_cwnd: e.tcpi_snd_cwnd,
        snd_mss: e.tcpi_snd_mss,
        srtt_us: e.tcpi_rtt,
        rttvar_us: e.tcpi_rttvar,
        delivery_rate_bps: opt(
            end.has(end_of!(tcpi_delivery_rate)),
            e.tcpi_delivery_rate.saturating_mul(8),
        ),
        pacing_rate_bps: opt(
            end.has(end_of!(tcpi_pacing_rate)) && e.tcpi_pacing_rate != u64::MAX,
            e.tcpi_pacing_rate.saturating_mul(8),
        ),
        busy_us: opt(
            both(busy_end),
            e.tcpi_busy_time.saturating_sub(s.tcpi_busy_time),
        ),
        rwnd_limited_us: opt(
            both(rwnd_end),
            e.tcpi_rwnd_limited.saturating_sub(s.tcpi_rwnd_limited),
        ),
        sndbuf_limited_us: opt(
            both(sndbuf_end),
            e.tcpi_sndbuf_limited.saturating_sub(s.tcpi_sndbuf_limited),
        ),
        data_segs_out: opt(
            both(segs_end),
            u64::from(e.tcpi_data_segs_out.wrapping_sub(s.tcpi_data_segs_out)),
        ),
        data_segs_in: opt(
            both(segs_end),
            u64::from(e.tcpi_data_segs_in.wrapping_sub(s.tcpi_data_segs_in)),
        ),
        dsack_dups_interval: count32(
            u32_end(offset_of!(libc::tcp_info, tcpi_dsack_dups)),
            s.tcpi_dsack_dups,
            e.tcpi_dsack_dups,
        ),
        reord_seen_interval: count32(
            u32_end(offset_of!(libc::tcp_info, tcpi_reord_seen)),
            s.tcpi_reord_seen,
            e.tcpi_reord_seen,
        ),
        ooo_received_interval: count32(
            u32_end(offset_of!(libc::tcp_info, tcpi_rcv_ooopack)),
            s.tcpi_rcv_ooopack,
            e.tcpi_rcv_ooopack,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;

    /// A real loopback connection: its state reads back, the counters over an interval
    /// are the difference of two readings, and a UDP socket has none.
    #[test]
    fn a_loopback_connection_reads_back() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut s, _) = l.accept().expect("accept");
        let start = read(c.as_raw_fd()).expect("TCP_INFO on a TCP socket");
        let rx_start = read(s.as_raw_fd()).expect("TCP_INFO");
        let buf = vec![7u8; 1 << 20];
        c.write_all(&buf).expect("write");
        let mut got = vec![0u8; 1 << 20];
        s.read_exact(&mut got).expect("read");
        let end = read(c.as_raw_fd()).expect("TCP_INFO");
        let t = between(&start, &end);
        let rx = between(&rx_start, &read(s.as_raw_fd()).expect("TCP_INFO"));
        // A megabyte is at least a megabyte over the MSS of data segments, counted out by
        // the sender and in by the receiver; the sender receives none.
        let least = (1u64 << 20) / u64::from(t.snd_mss.max(1));
        assert!(t.data_segs_out.is_some_and(|n| n >= least), "{t:?}");
        assert!(rx.data_segs_in.is_some_and(|n| n >= least), "{rx:?}");
        assert_eq!(t.data_segs_in, Some(0), "{t:?}");
        assert!(t.snd_cwnd > 0, "{t:?}");
        assert!(t.snd_mss > 0, "{t:?}");
        assert!(t.srtt_us > 0, "{t:?}");
        // Loopback moves a megabyte in well under a millisecond: busy time may read 0.
        assert!(
            t.busy_us.is_some() && t.delivery_rate_bps.is_some(),
            "{t:?}"
        );
        // The D-SACK, reordering and out-of-order counts are there where the kernel
        // filled them (Linux ≥ 5.4 for the last), absent on an older one.
        let filled = end.has(offset_of!(libc::tcp_info, tcpi_rcv_ooopack) + size_of::<u32>());
        assert_eq!(
            [
                t.dsack_dups_interval,
                t.reord_seen_interval,
                t.ooo_received_interval
            ]
            .map(|c| c.is_some()),
            [filled; 3],
            "{t:?} ({} bytes)",
            end.len
        );
        let u = std::net::UdpSocket::bind("127.0.0.1:0").expect("udp");
        assert!(read(u.as_raw_fd()).is_none());
    }

    /// The interval's retransmissions are the end's total less the start's; the total is
    /// the end's own (the loss test in cli/tests/tcpinfo.rs holds them to the kernel's
    /// count).
    #[test]
    fn retransmits_over_an_interval_are_the_difference_of_two_readings() {
        let snap = |total_retrans: u32| {
            // SAFETY: tcp_info is plain old data; all-zero is a valid value.
            let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
            raw.tcpi_total_retrans = total_retrans;
            Snapshot {
                raw,
                len: size_of::<libc::tcp_info>(),
            }
        };
        let t = between(&snap(5), &snap(12));
        assert_eq!((t.retransmits, t.retransmits_interval), (12, 7));
        // The D-SACKed ones, over the same interval, beside them.
        let (mut a, mut b) = (snap(5), snap(12));
        (a.raw.tcpi_dsack_dups, b.raw.tcpi_dsack_dups) = (2, 6);
        assert_eq!(between(&a, &b).dsack_dups_interval, Some(4));
        // A counter that went backwards (a different socket) is no negative count.
        assert_eq!(between(&snap(9), &snap(3)).retransmits_interval, 0);
    }
}
