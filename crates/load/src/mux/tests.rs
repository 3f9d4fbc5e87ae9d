use super::*;
use crate::test_util::stop_after;
use crate::Span;
use hdrhistogram::Histogram;
use std::sync::Arc;

fn pairs(k: usize) -> (Vec<TcpStream>, Vec<TcpStream>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut c = Vec::new();
    let mut s = Vec::new();
    for _ in 0..k {
        c.push(TcpStream::connect(l.local_addr().unwrap()).unwrap());
        s.push(l.accept().unwrap().0);
    }
    for x in c.iter().chain(s.iter()) {
        x.set_nodelay(true).unwrap();
    }
    (c, s)
}

/// 200 flows on one thread a side: every flow completes transactions, both halves count
/// the same ones per flow, and every round trip is in the histogram.
#[test]
fn rr_flows_on_one_thread_count_the_same_on_both_sides() {
    let (c, s) = pairs(200);
    let stop = stop_after(300);
    let st = stop.clone();
    let server = std::thread::spawn(move || rr_server(s, 8, 16, &st));
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let cc = rr_client(
        c,
        8,
        16,
        Span::now(None),
        &stop,
        &mut hist,
        &Meter::new(None),
    )
    .unwrap();
    let sc = server.join().unwrap().unwrap();
    assert_eq!(cc.len(), 200);
    assert!(cc.iter().all(|f| f.transactions > 0), "a flow starved");
    let ct: Vec<u64> = cc.iter().map(|f| f.transactions).collect();
    let st: Vec<u64> = sc.iter().map(|f| f.transactions).collect();
    assert_eq!(ct, st);
    assert_eq!(hist.len(), ct.iter().sum::<u64>());
}

/// With a measured interval, the client counts only what completed inside it and reports
/// exactly its length, though its flows go on until the stop, 10 ms later, and finish what
/// is in flight then (the server answers and counts them all).
#[test]
fn rr_counts_its_interval_only() {
    let (c, s) = pairs(50);
    let span = Span::now(Some(Duration::from_millis(190)));
    let stop = stop_after(200);
    let st = stop.clone();
    let server = std::thread::spawn(move || rr_server(s, 8, 16, &st));
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let cc = rr_client(c, 8, 16, span, &stop, &mut hist, &Meter::new(None)).unwrap();
    let sc = server.join().unwrap().unwrap();
    let (client, served): (u64, u64) = (
        cc.iter().map(|f| f.transactions).sum(),
        sc.iter().map(|f| f.transactions).sum(),
    );
    assert!(
        client > 0 && client < served,
        "client {client}, server {served}"
    );
    assert!(
        served - client < client,
        "a 10 ms tail against 190 ms: client {client}, server {served}"
    );
    assert!(
        cc.iter().all(|f| f.active == Duration::from_millis(190)),
        "{cc:?}"
    );
    assert_eq!(
        hist.len(),
        client,
        "only the counted round trips are in the histogram"
    );
}

/// Streams on one thread a side: the receiver counts every byte the sender sent, per
/// flow, and every flow moved data.
#[test]
fn stream_flows_on_one_thread_lose_no_bytes() {
    let (c, s) = pairs(20);
    let stop = stop_after(300);
    let st = stop.clone();
    let rx =
        std::thread::spawn(move || stream_recv(&s, 65536, Span::now(None), &st, &Meter::new(None)));
    let tx = stream_send(&c, 4096, &stop, &Meter::new(None)).unwrap();
    let rx = rx.join().unwrap().unwrap();
    for (t, r) in tx.iter().zip(&rx) {
        assert!(t.bytes_tx > 0);
        assert_eq!(t.bytes_tx, r.bytes_rx);
    }
}

/// A sender whose receivers keep up (its sockets never fill) still sees the stop
/// within a turn; a receiver with a window counts only what arrived inside it, over
/// exactly the window, while still reading to the end of each stream.
#[test]
fn stream_stops_on_time_and_counts_its_window() {
    let (c, s) = pairs(4);
    let stop = stop_after(400);
    let st = stop.clone();
    let window = Duration::from_millis(300);
    let rx = std::thread::spawn(move || {
        stream_recv(&s, 1 << 20, Span::now(Some(window)), &st, &Meter::new(None))
    });
    let t0 = Instant::now();
    let tx = stream_send(&c, 65536, &stop, &Meter::new(None)).unwrap();
    let took = t0.elapsed();
    assert!(
        took < Duration::from_millis(600),
        "the sender stopped {took:?} after its start, asked 400 ms"
    );
    let rx = rx.join().unwrap().unwrap();
    for (t, r) in tx.iter().zip(&rx) {
        assert!(r.bytes_rx > 0, "{r:?}");
        assert!(
            r.bytes_rx < t.bytes_tx,
            "bytes after the window were counted: {r:?} {t:?}"
        );
        let off = r.active.as_secs_f64() - window.as_secs_f64();
        assert!(
            (0.0..0.005).contains(&off),
            "window measured as {:?}",
            r.active
        );
    }
}

/// crr on one client thread with 10 flows against two server threads sharing one
/// listener: transactions complete on every flow and the servers answered them all.
#[test]
fn crr_flows_connect_again_and_again() {
    let l = Arc::new(TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = l.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let servers: Vec<_> = (0..2)
        .map(|_| {
            let (l, st) = (l.clone(), stop.clone());
            std::thread::spawn(move || crr_server(&l, None, 4, 4, &st))
        })
        .collect();
    let cstop = stop_after(300);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
    let cc = crr_client(
        addr,
        10,
        crate::Exchange {
            request: 4,
            response: 4,
            wait: virtperf_wire::Wait::Block,
        },
        &SockOpts::default(),
        Span::now(None),
        crate::Sink {
            stop: &cstop,
            hist: &mut hist,
            meter: &Meter::new(None),
        },
    )
    .unwrap();
    stop.store(true, Ordering::Relaxed);
    let served: u64 = servers
        .into_iter()
        .map(|h| h.join().unwrap().unwrap().transactions)
        .sum();
    let done: u64 = cc.iter().map(|f| f.transactions).sum();
    assert!(cc.iter().all(|f| f.transactions > 0), "{cc:?}");
    assert_eq!(done, served);
}
