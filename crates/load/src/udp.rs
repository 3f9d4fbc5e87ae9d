//! UDP engines: request/response datagrams (netperf UDP_RR, sockperf ping-pong) and paced
//! datagram streams (netperf UDP_STREAM, iperf3 `-u`), on connected UDP sockets.
//!
//! UDP does not retransmit, so the engines count what it loses instead of hiding it:
//! - rr: each request carries a tag (the low bytes of its sequence number, as many as the
//!   request and response both hold, up to 8) that the server echoes. A response that does
//!   not come within the loss timeout counts one lost transaction, and the client restarts
//!   with a new request; a response that then arrives with an old tag is discarded (`late`).
//!   Lost transactions are in no latency sample and in no rate (they are reported beside).
//! - stream: each datagram starts with its sequence number (from 1) and the sender's
//!   monotonic send time, both little-endian `u64`; the receiver counts loss, reordering
//!   and jitter exactly as iperf3's `iperf_udp_recv` does (see [`Seq`]).
//!
//! Neither end sees an end of stream: servers and receivers stop on the stop flag, noticed
//! at least every [`STOP_POLL`] (their sockets' receive timeout).

use std::io;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use virtperf_wire::{UdpCounts, Wait};

use crate::buf::PageBuf;
use crate::interval::{Meter, Ticker};
use crate::sock::{describe, recv_full_wait};
use crate::Counts;

/// How often a UDP server or receiver blocked in `recv` looks at the stop flag: its
/// socket's receive timeout (there is no end of stream to wake it).
pub const STOP_POLL: Duration = Duration::from_millis(50);

/// Default wait for an rr response before the transaction counts as lost: far above any
/// loopback, LAN or emulated-guest round trip (tens of µs to a few ms), short enough that
/// a lost datagram costs a 2 s test little.
pub const LOSS_TIMEOUT: Duration = Duration::from_millis(50);

/// Largest buffer one receive needs: a whole datagram, or a GRO batch (at most 64 KiB).
const RECV_BUF: usize = 65_536;

/// Most datagrams per GSO send: the kernel's UDP_MAX_SEGMENTS (64 before Linux 6.x raised
/// it to 128), and at most one 64 KiB UDP payload in all.
const GSO_MAX_SEGMENTS: usize = 64;

/// `send(2)` of one datagram: retried on `EINTR`; a short send cannot happen on UDP.
#[inline]
fn send_dgram(s: &UdpSocket, buf: &[u8]) -> io::Result<()> {
    loop {
        match crate::sock::send_raw(s, buf) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// The tag length for `request`/`response`-byte datagrams: the bytes both carry, up to 8.
fn tag_len(request: usize, response: usize) -> usize {
    request.min(response).min(8)
}

/// rr client: sends a tagged request, waits for the response with the same tag as `wait`
/// says, records the round trip; a request unanswered within `loss_timeout` is counted lost
/// and the transaction restarted. The clock is read once per transaction, as TCP rr does.
pub fn rr_client(
    s: &UdpSocket,
    x: crate::Exchange,
    loss_timeout: Duration,
    out: crate::Sink<'_>,
) -> io::Result<Counts> {
    let crate::Exchange {
        request,
        response,
        wait,
    } = x;
    let crate::Sink { stop, hist, meter } = out;
    s.set_read_timeout(Some(loss_timeout))?;
    let tag = tag_len(request, response);
    let mut req = PageBuf::zeroed(request);
    let mut resp = PageBuf::zeroed(response);
    let (mut n, mut seq, mut lost, mut late) = (0u64, 0u64, 0u64, 0u64);
    // `n` answered of `seq` requests, `lost` given up on, `late` answers discarded.
    let counts = |n: u64, seq: u64, lost: u64, late: u64, active| Counts {
        bytes_rx: n * response as u64,
        bytes_tx: seq * request as u64,
        transactions: n,
        calls: 0,
        active,
        udp: Some(UdpCounts {
            datagrams_rx: n + late,
            datagrams_tx: seq,
            lost,
            late,
            ..UdpCounts::default()
        }),
        warmup: None,
    };
    let start = Instant::now();
    let mut t0 = start;
    let mut ticks = Ticker::start(meter, start);
    'transactions: while !stop.load(Ordering::Relaxed) {
        seq += 1;
        req[..tag].copy_from_slice(&seq.to_le_bytes()[..tag]);
        send_dgram(s, &req).map_err(|e| describe(e, "sending request"))?;
        loop {
            match recv_full_wait(s, &mut resp, wait, loss_timeout) {
                Ok(true) if resp[..tag] == req[..tag] => break,
                // An answer to a request already given up on.
                Ok(true) => late += 1,
                Ok(false) => late += 1, // an empty datagram: not ours
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    // Lost: its time is no latency sample; the next request starts now.
                    lost += 1;
                    t0 = Instant::now();
                    continue 'transactions;
                }
                Err(e) => return Err(describe(e, "reading response")),
            }
        }
        t0 = ticks.record(t0, n, hist);
        if ticks.passed_omit() {
            // `seq` already counts this transaction's request.
            meter.set_mark(counts(n, seq - 1, lost, late, t0 - start), None);
            t0 = Instant::now();
        }
        n += 1;
    }
    ticks.finish(t0, n, hist);
    Ok(meter.trim(counts(n, seq, lost, late, t0 - start), t0))
}

/// rr server: answers each request with a response carrying the request's tag, until
/// `stop`. Sets the socket's receive timeout to [`STOP_POLL`].
pub fn rr_server(
    s: &UdpSocket,
    request: usize,
    response: usize,
    wait: Wait,
    stop: &AtomicBool,
) -> io::Result<Counts> {
    s.set_read_timeout(Some(STOP_POLL))?;
    let tag = tag_len(request, response);
    let mut req = PageBuf::zeroed(request);
    let mut resp = PageBuf::zeroed(response);
    let mut n = 0u64;
    let start = Instant::now();
    loop {
        match recv_full_wait(s, &mut req, wait, STOP_POLL) {
            Ok(true) => {}
            Ok(false) => continue,
            // Idle, or the client's socket is gone (an ICMP port unreachable for an earlier
            // response): keep serving until told to stop.
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                continue;
            }
            Err(e) => return Err(describe(e, "reading request")),
        }
        resp[..tag].copy_from_slice(&req[..tag]);
        match send_dgram(s, &resp) {
            Ok(()) => n += 1,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(describe(e, "sending response")),
        }
    }
    Ok(Counts {
        bytes_rx: n * request as u64,
        bytes_tx: n * response as u64,
        transactions: n,
        calls: 0,
        active: start.elapsed(),
        udp: Some(UdpCounts {
            datagrams_rx: n,
            datagrams_tx: n,
            ..UdpCounts::default()
        }),
        warmup: None,
    })
}

/// Asks for UDP_SEGMENT (GSO) with `size`-byte segments; false where the kernel refuses it.
pub fn try_gso(s: &UdpSocket, size: usize) -> bool {
    let Ok(size) = i32::try_from(size) else {
        return false;
    };
    nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::UdpGsoSegment, &size).is_ok()
}

/// Asks for UDP_GRO; false where the kernel refuses it.
pub fn try_gro(s: &UdpSocket) -> bool {
    nix::sys::socket::setsockopt(s, nix::sys::socket::sockopt::UdpGroSegment, &true).is_ok()
}

/// stream sender: `size`-byte datagrams, each stamped with its sequence number and send
/// time, until `stop`; paced to `rate_bps` bits per second of payload when given (0 or None:
/// unpaced). With `gso` (UDP_SEGMENT already set on the socket, see [`try_gso`]) one send
/// carries up to 64 datagrams, each stamped. The running byte count goes to `meter`.
pub fn stream_send(
    s: &UdpSocket,
    size: usize,
    rate_bps: Option<u64>,
    gso: bool,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Counts> {
    let per_send = if gso {
        (65_507 / size).clamp(1, GSO_MAX_SEGMENTS)
    } else {
        1
    };
    let mut buf = PageBuf::zeroed(size * per_send);
    let rate = rate_bps.filter(|r| *r > 0).map(|r| r as f64);
    if rate.is_some() {
        // This thread's timer slack only: the default 50 µs would make paced sends bursty.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    }
    // `seq` numbers every datagram tried, `sent` those the kernel took.
    let (mut seq, mut sent) = (0u64, 0u64);
    let counts = |seq: u64, sent: u64, active| Counts {
        bytes_tx: sent * size as u64,
        active,
        udp: Some(UdpCounts {
            datagrams_tx: sent,
            // The numbers given out: what the receiver's highest may not exceed.
            highest_seq: seq,
            gso,
            ..UdpCounts::default()
        }),
        ..Counts::default()
    };
    let mut marked = meter.omit().is_none();
    let start = Instant::now();
    let mut now = start;
    while !stop.load(Ordering::Relaxed) {
        if let Some(r) = rate {
            // Pacing as iperf3 does: ahead of the rate, sleep until the bits sent so far
            // are due. The send-time stamp needs the clock anyway.
            let due = start + Duration::from_secs_f64((seq * size as u64 * 8) as f64 / r);
            if due > now {
                std::thread::sleep(due - now);
            }
        }
        now = Instant::now();
        let ts = now.duration_since(start).as_nanos() as u64;
        for d in buf.chunks_exact_mut(size) {
            seq += 1;
            d[..8].copy_from_slice(&seq.to_le_bytes());
            d[8..16].copy_from_slice(&ts.to_le_bytes());
        }
        match send_dgram(s, &buf) {
            Ok(()) => sent += per_send as u64,
            // The receiver's socket is not there (yet, or any more): this send failed, so its
            // datagrams count as neither sent nor received (a gap in the sequence numbers).
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(describe(e, "sending datagrams")),
        }
        meter.set_bytes(sent * size as u64);
        if !marked && meter.measuring() {
            marked = true;
            meter.set_mark(counts(seq, sent, now - start), None);
        }
    }
    let end = Instant::now();
    Ok(meter.trim(counts(seq, sent, end - start), end))
}

/// iperf3's receive-side accounting of sequence numbers and transit times
/// (`iperf_udp_recv` in iperf3's src/iperf_udp.c).
#[derive(Debug, Default, Clone, Copy)]
pub struct Seq {
    /// Highest sequence number seen (iperf3's `packet_count`).
    pub highest: u64,
    /// Datagrams whose number no sender could have given them (see [`MAX_JUMP`]): not in
    /// any other count.
    pub implausible: u64,
    /// Lost datagrams (iperf3's `cnt_error`).
    pub lost: u64,
    /// Datagrams below the highest seen (iperf3's `outoforder_packets`).
    pub out_of_order: u64,
    /// Smoothed transit-time variation, seconds (iperf3's `jitter`).
    pub jitter_s: f64,
    prev_transit: Option<f64>,
}

/// The largest jump past the highest sequence number seen that a datagram may make and
/// still count: 2^24 datagrams lost in one run (seconds of a 10 Gbit/s stream). A number
/// beyond (one forged datagram numbered 2^63 made the loss 2^63) is not a sequence number
/// any sender of this test gave; the end of the test checks the rest against the
/// sender's own count.
pub const MAX_JUMP: u64 = 1 << 24;

impl Seq {
    /// Accounts one datagram: its sequence number and its transit time (arrival minus send
    /// stamp, in seconds; the two clocks' offset cancels in the differences).
    pub fn record(&mut self, seq: u64, transit_s: f64) {
        if seq == 0 || seq - self.highest.min(seq) > MAX_JUMP {
            self.implausible += 1;
            return;
        }
        if seq > self.highest {
            // A gap counts as lost until (if ever) its datagrams arrive late.
            self.lost += seq - self.highest - 1;
            self.highest = seq;
        } else {
            self.out_of_order += 1;
            // A late arrival fills a gap counted as lost.
            self.lost = self.lost.saturating_sub(1);
        }
        // RFC 1889 section 6.3.1 and A.8: J += (|D(i-1,i)| - J) / 16. The first datagram
        // only sets the reference transit (iperf3 does the same: its D is then 0, and J
        // stays 0), since its transit includes the two clocks' offset.
        if let Some(prev) = self.prev_transit {
            let d = (transit_s - prev).abs();
            self.jitter_s += (d - self.jitter_s) / 16.0;
        }
        self.prev_transit = Some(transit_s);
    }
}

/// stream receiver: counts datagrams, bytes, loss, reordering and jitter until `stop`
/// (then drains what is already queued). With `gro` (UDP_GRO set, see [`try_gro`]) a
/// receive may hold several `size`-byte datagrams, split here. `active` runs from the first
/// datagram to the last. Sets the socket's receive timeout to [`STOP_POLL`].
pub fn stream_receive(
    s: &UdpSocket,
    size: usize,
    gro: bool,
    stop: &AtomicBool,
    meter: &Meter,
) -> io::Result<Counts> {
    s.set_read_timeout(Some(STOP_POLL))?;
    let mut buf = PageBuf::zeroed(RECV_BUF);
    let mut seq = Seq::default();
    let (mut bytes, mut dgrams) = (0u64, 0u64);
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    // The sender's stamps count from its own start: only differences of transit matter.
    let origin = Instant::now();
    let mut draining = false;
    let counts = |bytes: u64, dgrams: u64, seq: &Seq, active| Counts {
        bytes_rx: bytes,
        active,
        udp: Some(UdpCounts {
            datagrams_rx: dgrams - seq.implausible,
            lost: seq.lost,
            out_of_order: seq.out_of_order,
            highest_seq: seq.highest,
            implausible: seq.implausible,
            jitter_ms: seq.jitter_s * 1e3,
            gro,
            ..UdpCounts::default()
        }),
        ..Counts::default()
    };
    let mut marked = meter.omit().is_none();
    loop {
        let got = if draining {
            crate::sock::recv_nowait(s, &mut buf)
        } else {
            crate::sock::recv_raw(s, &mut buf)
        };
        match got {
            Ok(n) => {
                last = Instant::now();
                first.get_or_insert(last);
                let arrival = last.duration_since(origin).as_nanos() as i128;
                let chunk = if gro { size } else { n.max(1) };
                for d in buf[..n].chunks(chunk) {
                    dgrams += 1;
                    bytes += d.len() as u64;
                    if d.len() >= 16 {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(&d[..8]);
                        let sq = u64::from_le_bytes(b);
                        b.copy_from_slice(&d[8..16]);
                        let sent = i128::from(u64::from_le_bytes(b));
                        seq.record(sq, (arrival - sent) as f64 / 1e9);
                    }
                }
                meter.set_bytes(bytes);
                if !marked && meter.measuring() {
                    marked = true;
                    let active = first.map(|f| last - f).unwrap_or_default();
                    meter.set_mark(counts(bytes, dgrams, &seq, active), None);
                }
                if !draining && stop.load(Ordering::Relaxed) {
                    draining = true;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::ConnectionRefused
                ) =>
            {
                if draining {
                    break;
                }
                if stop.load(Ordering::Relaxed) {
                    draining = true;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(describe(e, "receiving datagrams")),
        }
    }
    // No datagram: active for no time (a true 0, beside 0 bytes received).
    let active = first.map(|f| last.duration_since(f)).unwrap_or_default();
    Ok(meter.trim(counts(bytes, dgrams, &seq, active), last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::stop_after;
    use hdrhistogram::Histogram;

    /// A connected loopback pair of UDP sockets.
    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let b = UdpSocket::bind("127.0.0.1:0").expect("bind");
        a.connect(b.local_addr().expect("addr")).expect("connect");
        b.connect(a.local_addr().expect("addr")).expect("connect");
        (a, b)
    }

    /// One forged datagram numbered 2^63 (or 0) among honest ones: counted apart, and the
    /// loss, order and highest number are the honest datagrams' (it made the loss 2^63).
    #[test]
    fn an_implausible_sequence_number_is_counted_apart() {
        let mut s = Seq::default();
        for q in [1, 2, 1 << 63, 3, 0, 5] {
            s.record(q, 0.01);
        }
        assert_eq!(s.implausible, 2);
        assert_eq!(s.highest, 5);
        assert_eq!(s.lost, 1, "4 never came");
        assert_eq!(s.out_of_order, 0);
    }

    /// iperf3's arithmetic on a known sequence: 1 2 4 3 6 (5 never comes) and transit times
    /// whose differences are known.
    #[test]
    fn sequence_accounting_is_iperf3s() {
        let mut s = Seq::default();
        for (q, t) in [(1, 0.010), (2, 0.012), (4, 0.011), (3, 0.015), (6, 0.015)] {
            s.record(q, t);
        }
        assert_eq!(s.highest, 6);
        assert_eq!(s.out_of_order, 1, "3 after 4");
        // Gaps 3 and 5 counted, 3 came late: one lost.
        assert_eq!(s.lost, 1);
        // J over D = 2, 1, 4, 0 ms: each step J += (|D| - J) / 16.
        let mut j = 0.0f64;
        for d in [0.002, 0.001, 0.004, 0.0] {
            j += (d - j) / 16.0;
        }
        assert!((s.jitter_s - j).abs() < 1e-12, "{} vs {j}", s.jitter_s);
    }

    /// Real datagrams on loopback: every transaction answered, both ends agree, no loss.
    #[test]
    fn rr_completes_transactions_on_loopback_with_each_wait() {
        for wait in [Wait::Block, Wait::Spin, Wait::Poll { window_us: 20 }] {
            let (c, s) = pair();
            let stop = stop_after(200);
            let st = stop.clone();
            let server = std::thread::spawn(move || rr_server(&s, 1, 1, wait, &st));
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
            let cc = rr_client(
                &c,
                crate::Exchange {
                    request: 1,
                    response: 1,
                    wait,
                },
                LOSS_TIMEOUT,
                crate::Sink {
                    stop: &stop,
                    hist: &mut hist,
                    meter: &Meter::new(None),
                },
            )
            .unwrap();
            let sc = server.join().unwrap().unwrap();
            let u = cc.udp.unwrap();
            assert!(cc.transactions > 10, "{wait:?}: {cc:?}");
            assert_eq!(u.lost, 0, "{wait:?}: loopback lost a datagram: {u:?}");
            assert_eq!(cc.transactions, sc.transactions, "{wait:?}");
            assert_eq!(hist.len(), cc.transactions, "{wait:?}");
        }
    }

    /// A server that drops every 10th request: each drop is one lost transaction, counted,
    /// and the client goes on after the timeout.
    #[test]
    fn an_unanswered_request_is_counted_lost_and_restarted() {
        let (c, s) = pair();
        let stop = stop_after(300);
        std::thread::spawn(move || {
            let mut b = [0u8; 8];
            let mut i = 0u64;
            while let Ok(n) = s.recv(&mut b) {
                i += 1;
                if !i.is_multiple_of(10) {
                    let _ = s.send(&b[..n]);
                }
            }
        });
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        let cc = rr_client(
            &c,
            crate::Exchange {
                request: 8,
                response: 8,
                wait: Wait::Block,
            },
            Duration::from_millis(10),
            crate::Sink {
                stop: &stop,
                hist: &mut hist,
                meter: &Meter::new(None),
            },
        )
        .unwrap();
        let u = cc.udp.unwrap();
        assert!(u.lost >= 5, "{u:?}");
        // Every request is either answered or lost (the last may be cut by the stop).
        assert!(u.datagrams_tx - cc.transactions - u.lost <= 1, "{cc:?}");
        assert!(
            cc.transactions >= 9 * u.lost - 9,
            "{} answered, {} lost",
            cc.transactions,
            u.lost
        );
    }

    /// A paced stream keeps its rate and arrives whole and in order on loopback.
    #[test]
    fn a_paced_stream_keeps_its_rate_and_loses_nothing_on_loopback() {
        let (tx, rx) = pair();
        let stop = stop_after(500);
        // The receiver stops after the sender (see the stranger test below).
        let rstop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = rstop.clone();
        let recv =
            std::thread::spawn(move || stream_receive(&rx, 1000, false, &st, &Meter::new(None)));
        std::thread::sleep(Duration::from_millis(20));
        let sc = stream_send(&tx, 1000, Some(8_000_000), false, &stop, &Meter::new(None)).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        rstop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rc = recv.join().unwrap().unwrap();
        let (su, ru) = (sc.udp.unwrap(), rc.udp.unwrap());
        let mbps = sc.bytes_tx as f64 * 8.0 / sc.active.as_secs_f64() / 1e6;
        assert!(
            (7.0..=8.3).contains(&mbps),
            "asked 8 Mbit/s, sent {mbps:.2}"
        );
        assert_eq!(ru.datagrams_rx, su.datagrams_tx, "{ru:?} {su:?}");
        assert_eq!((ru.lost, ru.out_of_order), (0, 0));
        assert_eq!(ru.highest_seq, su.datagrams_tx);
        assert!(ru.jitter_ms >= 0.0 && ru.jitter_ms < 50.0, "{ru:?}");
    }

    /// A stranger aiming datagrams at the receiver mid-stream (forged sequence numbers near
    /// u64::MAX, runts, a full-size one) changes nothing: the socket is connected to its
    /// sender, so the kernel drops what comes from anywhere else.
    #[test]
    fn datagrams_from_a_stranger_are_not_counted() {
        let (tx, rx) = pair();
        let target = rx.local_addr().expect("addr");
        let stop = stop_after(400);
        // The receiver stops after the sender has, as in a test (the client stops its
        // side first): sharing one flag, the sender's last datagram could leave after the
        // receiver's final drain, which is a race of this test, not a count.
        let rstop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = rstop.clone();
        let recv =
            std::thread::spawn(move || stream_receive(&rx, 1000, false, &st, &Meter::new(None)));
        let stranger = UdpSocket::bind("127.0.0.1:0").expect("bind");
        let spray = std::thread::spawn(move || {
            let mut forged = vec![0xffu8; 1000];
            forged[..8].copy_from_slice(&(u64::MAX - 1).to_be_bytes());
            for i in 0..300 {
                let _ = stranger.send_to(&forged[..(i % 3) * 499 + 1], target);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        let sc = stream_send(&tx, 1000, Some(8_000_000), false, &stop, &Meter::new(None)).unwrap();
        spray.join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        rstop.store(true, std::sync::atomic::Ordering::Relaxed);
        let rc = recv.join().unwrap().unwrap();
        let (su, ru) = (sc.udp.unwrap(), rc.udp.unwrap());
        assert_eq!(ru.datagrams_rx, su.datagrams_tx, "{ru:?} {su:?}");
        assert_eq!(ru.highest_seq, su.datagrams_tx, "{ru:?}");
        assert_eq!((ru.lost, ru.out_of_order), (0, 0), "{ru:?}");
        assert_eq!(rc.bytes_rx, sc.bytes_tx);
    }
}
