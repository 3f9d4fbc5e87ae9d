//! Request/response over one connection (netperf TCP_RR; the same loops run `unix-rr` over
//! an AF_UNIX socket: they need a descriptor and a receive timeout, [`Conn`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use hdrhistogram::Histogram;

use virtperf_wire::Wait;

use crate::buf::PageBuf;
use crate::interval::{Meter, Ticker};
#[cfg(test)]
use crate::sock::recv_full;
use crate::sock::{describe, recv_full_wait, send_all};
use crate::{Conn, Counts};

/// Client half: send a request, wait for the whole response, record the round trip; repeat
/// until `stop`. The clock is read once per transaction: the end of one is the start of the
/// next, so the only work outside the two syscalls is that read and a histogram increment.
pub fn client<S: Conn>(
    s: &mut S,
    request: usize,
    response: usize,
    stop: &AtomicBool,
    hist: &mut Histogram<u64>,
) -> io::Result<Counts> {
    client_waiting(
        s,
        request,
        response,
        Wait::Block,
        stop,
        hist,
        &Meter::new(None),
    )
}

/// [`client`] waiting for each response as `wait` says (spinning: no wake-up on the
/// critical path). A spinner gives up after the socket's receive timeout without data.
/// Intervals go to `meter` (if it has an interval), decided on the clock reading each
/// transaction already takes.
pub fn client_waiting<S: Conn>(
    s: &mut S,
    request: usize,
    response: usize,
    wait: Wait,
    stop: &AtomicBool,
    hist: &mut Histogram<u64>,
    meter: &Meter,
) -> io::Result<Counts> {
    let timeout = s.read_timeout()?.unwrap_or(crate::SPIN_TIMEOUT);
    let req = PageBuf::zeroed(request);
    let mut resp = PageBuf::zeroed(response);
    let mut n = 0u64;
    let start = Instant::now();
    let mut t0 = start;
    let mut ticks = Ticker::start(meter, start);
    while !stop.load(Ordering::Relaxed) {
        send_all(s, &req).map_err(|e| describe(e, "sending request"))?;
        if !recv_full_wait(s, &mut resp, wait, timeout)
            .map_err(|e| describe(e, "reading response"))?
        {
            return Err(describe(
                io::ErrorKind::UnexpectedEof.into(),
                "reading response",
            ));
        }
        // Completed after the measured interval ended: not the interval's (the rule the
        // multiplexed engines keep; a 64 MiB response of 643 ms is no transaction of a
        // 200 ms test). The agent served it, so it counts one more than the client.
        if stop.load(Ordering::Relaxed) {
            break;
        }
        t0 = ticks.record(t0, n, hist);
        if ticks.passed_omit() {
            let so_far = Counts::of_transactions(n, response, request, t0 - start);
            meter.set_mark(so_far, Some(s.as_fd().as_raw_fd()));
            // The mark's own cost is charged to no transaction.
            t0 = Instant::now();
        }
        n += 1;
    }
    ticks.finish(t0, n, hist);
    let all = Counts::of_transactions(n, response, request, t0.duration_since(start));
    Ok(meter.trim(all, t0))
}

/// When the client sends its next request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Pace {
    /// As soon as the previous response is in (netperf's TCP_RR): a closed loop.
    BackToBack,
    /// This long after the previous response: a closed loop with think time, so the
    /// receiving side goes idle between messages as a real RPC server does.
    Gap(std::time::Duration),
    /// At fixed intended times, this many per second, the first `phase` after the start: an
    /// open loop. Latency is measured from each request's *intended* send time, so a stall
    /// is charged to every request it delayed (no coordinated omission: wrk2's and
    /// HdrHistogram's corrected recording). Flows sharing a rate get staggered phases.
    Rate(f64, std::time::Duration),
}

/// [`client_waiting`] with pacing. Sleeps between requests use a 1 ns timer slack for this
/// thread (the default 50 µs would blur a 100 µs gap by half).
pub fn client_paced<S: Conn>(
    s: &mut S,
    x: crate::Exchange,
    pace: Pace,
    out: crate::Sink<'_>,
) -> io::Result<Counts> {
    let crate::Exchange {
        request,
        response,
        wait,
    } = x;
    let crate::Sink { stop, hist, meter } = out;
    if pace == Pace::BackToBack {
        return client_waiting(s, request, response, wait, stop, hist, meter);
    }
    // This thread's timer slack only; failing leaves the default slack (50 µs), which
    // only makes paced sends later.
    let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
    let timeout = s.read_timeout()?.unwrap_or(crate::SPIN_TIMEOUT);
    let req = PageBuf::zeroed(request);
    let mut resp = PageBuf::zeroed(response);
    let mut n = 0u64;
    let start = Instant::now();
    let mut end = start;
    // An open loop charges the few µs of closing an interval to the requests it delays,
    // as it would any other stall of the client.
    let mut ticks = Ticker::start(meter, start);
    let interval = match pace {
        Pace::Rate(r, _) if r > 0.0 && r.is_finite() => std::time::Duration::from_secs_f64(1.0 / r),
        Pace::Rate(..) => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "rate must be a positive number of requests per second",
            ))
        }
        _ => std::time::Duration::ZERO,
    };
    while !stop.load(Ordering::Relaxed) {
        // The time this request should leave: for a rate, on the schedule; for a gap, the
        // gap after the last response.
        let intended = match pace {
            Pace::Gap(g) if n > 0 => end + g,
            Pace::Gap(_) => start,
            Pace::Rate(_, phase) => start + phase + interval.mul_f64(n as f64),
            Pace::BackToBack => start,
        };
        // Wait for the intended time in slices, looking at the stop between them: a slow
        // rate (1 request/s) must not carry the test a whole period past its end.
        if !sleep_until(intended, stop) {
            // The interval ended while waiting: it lasted until now, not until the last
            // response (a rate over the latter would be one request's worth of nothing).
            end = Instant::now();
            break;
        }
        let sent = Instant::now();
        send_all(s, &req).map_err(|e| describe(e, "sending request"))?;
        if !recv_full_wait(s, &mut resp, wait, timeout)
            .map_err(|e| describe(e, "reading response"))?
        {
            return Err(describe(
                io::ErrorKind::UnexpectedEof.into(),
                "reading response",
            ));
        }
        if stop.load(Ordering::Relaxed) {
            // As in `client_waiting`: completed after the interval, not counted; the
            // interval is timed to the last response that counts.
            break;
        }
        end = Instant::now();
        let from = match pace {
            Pace::Rate(..) => intended,
            _ => sent,
        };
        if ticks.due(end) {
            ticks.tick(end, n, hist);
        }
        hist.saturating_record(end.duration_since(from).as_nanos() as u64);
        if ticks.passed_omit() {
            let so_far = Counts::of_transactions(n, response, request, end - start);
            meter.set_mark(so_far, Some(s.as_fd().as_raw_fd()));
        }
        n += 1;
    }
    ticks.finish(end, n, hist);
    let all = Counts::of_transactions(n, response, request, end.duration_since(start));
    Ok(meter.trim(all, end))
}

/// Sleeps until `t` unless `stop` is raised first (looked at every 10 ms at most); whether
/// `t` was reached.
fn sleep_until(t: Instant, stop: &AtomicBool) -> bool {
    const SLICE: std::time::Duration = std::time::Duration::from_millis(10);
    loop {
        let now = Instant::now();
        if now >= t {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep((t - now).min(SLICE));
    }
}

/// Server half: answer each request with a response until the client closes.
pub fn server<S: Conn>(
    s: &mut S,
    request: usize,
    response: usize,
    stop: &AtomicBool,
) -> io::Result<Counts> {
    server_waiting(s, request, response, Wait::Block, stop)
}

/// [`server`] waiting for each request as `wait` says.
pub fn server_waiting<S: Conn>(
    s: &mut S,
    request: usize,
    response: usize,
    wait: Wait,
    stop: &AtomicBool,
) -> io::Result<Counts> {
    let timeout = s.read_timeout()?.unwrap_or(crate::SPIN_TIMEOUT);
    let mut req = PageBuf::zeroed(request);
    let resp = PageBuf::zeroed(response);
    let mut n = 0u64;
    let start = Instant::now();
    loop {
        match recv_full_wait(s, &mut req, wait, timeout) {
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
    Ok(Counts::of_transactions(
        n,
        request,
        response,
        start.elapsed(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;
    use std::net::TcpStream;
    use std::sync::Arc;
    use std::time::Duration;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        c.set_nodelay(true).unwrap();
        s.set_nodelay(true).unwrap();
        (c, s)
    }

    /// Real transactions over loopback with each wait mode on both sides: every request
    /// gets its response, and the client counts what completed inside the interval: all
    /// the server answered but the one in flight at the stop, if any.
    #[test]
    fn every_wait_mode_completes_transactions() {
        for wait in [Wait::Block, Wait::Spin, Wait::Poll { window_us: 20 }] {
            let (mut c, mut s) = pair();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            let server = std::thread::spawn(move || server_waiting(&mut s, 8, 16, wait, &st));
            let st = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                st.store(true, Ordering::Relaxed);
            });
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
            let cc =
                client_waiting(&mut c, 8, 16, wait, &stop, &mut hist, &Meter::new(None)).unwrap();
            drop(c);
            let sc = server.join().unwrap().unwrap();
            assert!(cc.transactions > 10, "{wait:?}: {}", cc.transactions);
            assert!(
                (cc.transactions..=cc.transactions + 1).contains(&sc.transactions),
                "{wait:?}: client {}, server {}",
                cc.transactions,
                sc.transactions
            );
            assert_eq!(hist.len(), cc.transactions, "{wait:?}");
        }
    }

    /// A slow open loop ends with its interval, not a period later: at 1 request/s over
    /// 300 ms, one request (at 0) and the end at the stop (the wait for the next used to
    /// run on to 1 s and send it).
    #[test]
    fn a_slow_rate_stops_with_the_interval() {
        let t0 = Instant::now();
        let (cc, _) = run_paced(Pace::Rate(1.0, Duration::ZERO), 300);
        assert_eq!(cc.transactions, 1);
        assert!(
            t0.elapsed() < Duration::from_millis(800),
            "{:?}",
            t0.elapsed()
        );
        // Its time is the interval's, so its rate is one request over 300 ms.
        assert!(cc.active >= Duration::from_millis(290), "{:?}", cc.active);
    }

    fn run_paced(pace: Pace, ms: u64) -> (Counts, Histogram<u64>) {
        let (mut c, mut s) = pair();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let server = std::thread::spawn(move || server(&mut s, 1, 1, &st));
        let st = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            st.store(true, Ordering::Relaxed);
        });
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        let cc = client_paced(
            &mut c,
            crate::Exchange {
                request: 1,
                response: 1,
                wait: Wait::Block,
            },
            pace,
            crate::Sink {
                stop: &stop,
                hist: &mut hist,
                meter: &Meter::new(None),
            },
        )
        .unwrap();
        drop(c);
        server.join().unwrap().unwrap();
        (cc, hist)
    }

    /// An open loop keeps its rate; a gap spaces transactions by at least the gap.
    #[test]
    fn paced_clients_keep_their_rate_and_their_gaps() {
        let (c, h) = run_paced(Pace::Rate(2000.0, Duration::ZERO), 1000);
        let rate = c.transactions as f64 / c.active.as_secs_f64();
        assert!(
            (1900.0..=2050.0).contains(&rate),
            "asked 2000/s, got {rate:.0}/s"
        );
        assert_eq!(h.len(), c.transactions);
        let (c, _) = run_paced(Pace::Gap(Duration::from_millis(2)), 300);
        let per = c.active.as_secs_f64() / c.transactions as f64;
        assert!(
            per >= 0.002,
            "transactions {per:.4} s apart with a 2 ms gap"
        );
        assert!(
            c.transactions >= 50,
            "{} transactions in 300 ms",
            c.transactions
        );
    }

    /// A stall is charged to every request it delayed: with the server stalled 50 ms once,
    /// an open loop at 1000/s records ~50 requests at up to 50 ms, not one.
    #[test]
    fn an_open_loop_charges_a_stall_to_every_delayed_request() {
        let (mut c, s) = pair();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        std::thread::spawn(move || {
            let mut b = [0u8; 1];
            let mut n = 0;
            while recv_full(&s, &mut b).unwrap_or(false) {
                n += 1;
                if n == 100 {
                    std::thread::sleep(Duration::from_millis(50));
                }
                if send_all(&s, &b).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            st.store(true, Ordering::Relaxed);
        });
        let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        client_paced(
            &mut c,
            crate::Exchange {
                request: 1,
                response: 1,
                wait: Wait::Block,
            },
            Pace::Rate(1000.0, Duration::ZERO),
            crate::Sink {
                stop: &stop,
                hist: &mut hist,
                meter: &Meter::new(None),
            },
        )
        .unwrap();
        let over_10ms = hist.len() - hist.count_between(0, 10_000_000);
        assert!(
            over_10ms >= 30,
            "only {over_10ms} of {} requests charged with the stall (max {} ns)",
            hist.len(),
            hist.max()
        );
        assert!(hist.max() >= 45_000_000, "max {} ns", hist.max());
    }

    /// A spinner on a silent peer gives up after its timeout instead of spinning forever;
    /// a poll window falls back to blocking and still gets data that comes late.
    #[test]
    fn spinning_is_bounded_and_polling_falls_back_to_blocking() {
        let (c, s) = pair();
        let t0 = std::time::Instant::now();
        let mut b = [0u8; 4];
        let e = recv_full_wait(&s, &mut b, Wait::Spin, Duration::from_millis(100)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() >= Duration::from_millis(100));
        assert!(t0.elapsed() < Duration::from_secs(5));

        let mut w = c.try_clone().unwrap();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            w.write_all(b"ab").unwrap();
            std::thread::sleep(Duration::from_millis(30));
            w.write_all(b"cd").unwrap();
        });
        let poll = Wait::Poll { window_us: 10 };
        assert!(recv_full_wait(&s, &mut b, poll, Duration::from_secs(5)).unwrap());
        assert_eq!(&b, b"abcd");

        // A peer that closes mid-message is an error; before a message, the end.
        let mut w = c.try_clone().unwrap();
        w.write_all(b"xy").unwrap();
        drop(w);
        drop(c);
        let e = recv_full_wait(&s, &mut b, Wait::Spin, Duration::from_secs(5)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        assert!(!recv_full_wait(&s, &mut b, Wait::Spin, Duration::from_secs(5)).unwrap());
    }
}
