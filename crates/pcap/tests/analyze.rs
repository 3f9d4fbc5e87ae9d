//! End-to-end analysis of hand-written captures with exactly known numbers.

mod common;

use common::*;
use std::io::Cursor;
use virtperf_pcap::{
    render_csv, render_seed0, render_seed0_with, Analyzer, Column, Connection, EndReason, Options,
    PcapError, Summary,
};

const C4: &str = "10.0.6.2:1028";
const S4: &str = "10.0.6.1:8000";
const C6: &str = "[2001:db8::2]:40000";
const S6: &str = "[2001:db8::1]:80";

fn run(bytes: &[u8], opts: Options) -> Result<(Vec<Connection>, Summary), PcapError> {
    let mut conns = Vec::new();
    let s = Analyzer::new(opts).analyze_reader(Cursor::new(bytes), |c| conns.push(c))?;
    Ok((conns, s))
}

fn run_ok(bytes: &[u8]) -> (Vec<Connection>, Summary) {
    match run(bytes, Options::default()) {
        Ok(r) => r,
        Err(e) => panic!("analysis failed: {e}"),
    }
}

fn eth(ip: &[u8]) -> Vec<u8> {
    ethernet(ethertype_of(ip), ip)
}

#[test]
fn ethernet_pcap_all_byte_orders_and_resolutions() {
    let conv = standard_conv(C4, S4);
    for big_endian in [false, true] {
        for nanos in [false, true] {
            let file = pcap_of(&conv, 1, big_endian, nanos, eth);
            let (conns, s) = run_ok(&file);
            assert_eq!(conns.len(), 1, "be={big_endian} ns={nanos}");
            check_standard(&conns[0], C4, S4);
            assert_eq!((s.packets, s.tcp_packets, s.non_tcp_packets), (12, 12, 0));
            assert_eq!(s.skipped_malformed, 0);
            assert_eq!(s.link_types, vec![1]);
            assert_eq!(s.connections, 1);
            let first = s.first_ts.unwrap_or(0.0);
            assert!((first - 1.7e9).abs() < 1e-3, "{first}");
            assert!(s.warnings.is_empty());
        }
    }
}

#[test]
fn nanosecond_timestamps_keep_nanoseconds() {
    let mut conv = Conv::new(C4, S4, 1, 1);
    conv.syn(0);
    conv.synack(0);
    // 1.5 µs apart: lost with microsecond timestamps, kept with nanosecond ones.
    conv.pkts[1].0 = 1_500;
    let (conns, _) = run_ok(&pcap_of(&conv, 1, false, true, eth));
    assert_close(conns[0].handshake.syn_to_synack_s, 1.5e-6);
    let (conns, _) = run_ok(&pcap_of(&conv, 1, false, false, eth));
    assert_close(conns[0].handshake.syn_to_synack_s, 1e-6);
}

#[test]
fn other_link_types() {
    let v4 = standard_conv(C4, S4);
    let mut v6 = Conv::new(C6, S6, 1000, 5000);
    v6.style.v6_hop_by_hop = true;
    standard_script(&mut v6);
    type Frame = fn(&[u8]) -> Vec<u8>;
    let cases: Vec<(&str, u32, Frame)> = vec![
        ("sll", 113, |ip| sll(ethertype_of(ip), ip)),
        ("sll2", 276, |ip| sll2(ethertype_of(ip), ip)),
        ("raw", 101, |ip| ip.to_vec()),
        ("null-le", 0, |ip| {
            null(if ip[0] >> 4 == 6 { 30 } else { 2 }, true, ip)
        }),
        ("null-be", 0, |ip| {
            null(if ip[0] >> 4 == 6 { 24 } else { 2 }, false, ip)
        }),
        ("loop", 108, |ip| {
            loop_(if ip[0] >> 4 == 6 { 24 } else { 2 }, ip)
        }),
        ("vlan", 1, |ip| ethernet_vlan(42, ethertype_of(ip), ip)),
        ("ethernet", 1, eth),
    ];
    for (name, lt, frame) in cases {
        for (conv, c, s) in [(&v4, C4, S4), (&v6, C6, S6)] {
            let (conns, sum) = run_ok(&pcap_of(conv, lt, false, false, frame));
            assert_eq!(conns.len(), 1, "{name}");
            check_standard(&conns[0], c, s);
            assert_eq!(sum.tcp_packets, 12, "{name}");
            assert_eq!(sum.link_types, vec![lt], "{name}");
        }
    }
    // LINKTYPE_IPV4 and LINKTYPE_IPV6.
    let (conns, _) = run_ok(&pcap_of(&v4, 228, true, false, |ip| ip.to_vec()));
    check_standard(&conns[0], C4, S4);
    let (conns, _) = run_ok(&pcap_of(&v6, 229, true, true, |ip| ip.to_vec()));
    check_standard(&conns[0], C6, S6);
}

#[test]
fn ipv4_with_options() {
    let mut conv = Conv::new(C4, S4, 1000, 5000);
    // Record Route (7), length 11, pointer 4, two empty slots; then End of options.
    conv.style.v4_options = vec![7, 11, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    standard_script(&mut conv);
    let (conns, _) = run_ok(&pcap_of(&conv, 1, false, false, eth));
    check_standard(&conns[0], C4, S4);
}

#[test]
fn pcapng_two_interfaces_with_different_resolutions() {
    let conv = standard_conv(C4, S4);
    for big_endian in [false, true] {
        let mut ng = PcapNg::new(big_endian);
        ng.idb(1, None); // interface 0: microseconds (the default)
        ng.idb(113, Some(9)); // interface 1: nanoseconds, Linux cooked
        let base_ns = 1_700_000_000_000_000_000u64;
        for (ts, from_client, ip) in conv.sorted() {
            if from_client {
                ng.epb(0, (base_ns + ts) / 1000, &eth(&ip));
            } else {
                ng.epb(1, base_ns + ts, &sll(ethertype_of(&ip), &ip));
            }
        }
        let (conns, s) = run_ok(&ng.buf);
        assert_eq!(conns.len(), 1);
        check_standard(&conns[0], C4, S4);
        assert_eq!(s.link_types, vec![1, 113]);
        // Binary resolution (2^-10 s) on a third interface, in a second section.
        let mut ng2 = PcapNg::new(!big_endian);
        ng2.idb(101, Some(0x80 | 10));
        for (ts, _, ip) in conv.sorted() {
            ng2.epb(
                0,
                ((base_ns + ts) as u128 * 1024 / 1_000_000_000) as u64,
                &ip,
            );
        }
        let mut both = ng.buf.clone();
        both.extend_from_slice(&ng2.buf);
        let (conns, s) = run_ok(&both);
        assert_eq!(s.link_types, vec![1, 113, 101]);
        assert_eq!(s.packets, 24);
        // The second section replays the same tuple: its SYN reuses the 4-tuple.
        assert_eq!(conns.len(), 2);
        assert_eq!(conns[1].from_a.payload_bytes, 200);
        assert!(!conns[1].partial);
    }
}

#[test]
fn snaplen_truncated_packets_count_declared_bytes() {
    let conv = standard_conv(C4, S4);
    let mut p = Pcap::new(1, false, false, 96);
    for (ts, _, ip) in conv.sorted() {
        // 14 + 20 + 20 = 54 bytes of headers; cut right after them.
        p.record(ts, &eth(&ip), 54);
    }
    let (conns, s) = run_ok(&p.buf);
    check_standard(&conns[0], C4, S4);
    assert_eq!(s.skipped_malformed, 0);
}

#[test]
fn seed_rendering_shape() {
    let conv = standard_conv(C4, S4);
    let (conns, _) = run_ok(&pcap_of(&conv, 1, false, false, eth));
    let text = render_seed0(&conns);
    let mut lines = text.lines();
    // Times with their unit, three significant digits (the seed printed `avg=0.000183`).
    assert_eq!(
        lines.next(),
        Some(
            "10.0.6.2:1028-10.0.6.1:8000 duration=3.06ms bytes_transferred=1200 \
             [10.0.6.2: avg=183µs min=10.0µs max=390µs] \
             [10.0.6.1: avg=45.0µs min=10.0µs max=100µs]"
        )
    );
    assert_eq!(
        lines.next(),
        Some(
            "summary: connections=1 partial=0 bytes_transferred=1200 duration avg=3.06ms \
             min=3.06ms max=3.06ms [A: samples=4 avg=183µs min=10.0µs max=390µs] \
             [B: samples=4 avg=45.0µs min=10.0µs max=100µs]"
        )
    );
    assert_eq!(lines.next(), None);

    // Same address on both ends (loopback): the brackets name address and port.
    let lo = standard_conv("127.0.0.1:40000", "127.0.0.1:5001");
    let (conns, _) = run_ok(&pcap_of(&lo, 1, false, false, eth));
    let text = render_seed0(&conns);
    assert!(text.starts_with(
        "127.0.0.1:40000-127.0.0.1:5001 duration=3.06ms bytes_transferred=1200 \
         [127.0.0.1:40000: avg="
    ));
}

#[test]
fn columns_add_packets_retransmissions_handshake_and_percentiles() {
    let conv = standard_conv(C4, S4);
    let (conns, _) = run_ok(&pcap_of(&conv, 1, false, false, eth));
    // Asked in any order, printed in one.
    let cols = Column::parse_list("p99,packets,handshake,retrans,p50").unwrap();
    let text = render_seed0_with(&conns, &cols);
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some(
            "10.0.6.2:1028-10.0.6.1:8000 duration=3.06ms bytes_transferred=1200 handshake=150µs \
             [10.0.6.2: avg=183µs min=10.0µs max=390µs packets=8 retrans=0 p50=50.0µs p99=390µs] \
             [10.0.6.1: avg=45.0µs min=10.0µs max=100µs packets=4 retrans=0 p50=20.0µs p99=100µs]"
        )
    );
    let summary = lines.next().unwrap();
    assert!(
        summary.ends_with(
            "[A: samples=4 avg=183µs min=10.0µs max=390µs packets=8 retrans=0] \
             [B: samples=4 avg=45.0µs min=10.0µs max=100µs packets=4 retrans=0]"
        ),
        "{summary}"
    );
    let err = Column::parse_list("packets,rtt").unwrap_err();
    assert_eq!(
        err,
        "unknown column \"rtt\": choose from packets,retrans,handshake,p50,p99"
    );
}

#[test]
fn partial_and_idle_split_connections_are_marked_on_their_own_line() {
    // 400 s of silence in the middle of one connection, split at 300 s.
    let mut v = Conv::new(C4, S4, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1020, false, ACK | PSH, 500);
    v.send(400_001_000, true, ACK | PSH, 100);
    v.send(400_001_020, false, ACK | PSH, 500);
    v.send(400_002_000, true, FIN | ACK, 0);
    v.send(400_002_050, false, FIN | ACK, 0);
    let opts = Options {
        idle_timeout_s: Some(300.0),
        ..Options::default()
    };
    let (conns, _) = run(&pcap_of(&v, 1, false, false, eth), opts).unwrap();
    let text = render_seed0(&conns);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].starts_with("10.0.6.2:1028-10.0.6.1:8000 duration=1.02ms "),
        "{text}"
    );
    assert!(
        lines[1].starts_with("  ^ idle split: silent longer than --idle-split"),
        "{text}"
    );
    assert!(
        lines[2].starts_with("10.0.6.2:1028-10.0.6.1:8000 duration=1.05ms "),
        "{text}"
    );
    assert_eq!(
        lines[3],
        "  ^ partial: continues connection 0 after its idle split (no handshake seen)"
    );
    assert!(
        lines[4].starts_with("summary: connections=2 partial=1 "),
        "{text}"
    );

    // Without its handshake a connection was open before the capture began.
    let mut w = Conv::new(C4, S4, 1000, 5000);
    w.send(1000, true, ACK | PSH, 100);
    w.send(1020, false, ACK | PSH, 500);
    let (conns, _) = run_ok(&pcap_of(&w, 1, false, false, eth));
    let text = render_seed0(&conns);
    assert_eq!(
        text.lines().nth(1),
        Some("  ^ partial: already open when the capture began (no handshake seen; earlier bytes not counted)"),
        "{text}"
    );
}

#[test]
fn json_times_have_no_float_noise() {
    // An 877 µs answer: 877000 ns × 1e-9 is 0.0008770000000000001 as a double.
    let mut v = Conv::new(C4, S4, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1877, false, ACK | PSH, 500);
    v.send(3000, true, FIN | ACK, 0);
    v.send(3050, false, FIN | ACK, 0);
    let (conns, summary) = run_ok(&pcap_of(&v, 1, false, false, eth));
    let json = serde_json::to_string(&conns[0]).unwrap();
    let resp =
        serde_json::to_string(&serde_json::to_value(&conns[0]).unwrap()["from_b"]["response"])
            .unwrap();
    assert!(resp.contains("\"max_s\":0.000877,"), "{resp}");
    assert!(resp.contains("\"p99_s\":0.000877"), "{resp}");
    // A mean of whole nanoseconds, to the nanosecond.
    assert!(resp.contains("\"avg_s\":0.000342333,"), "{resp}");
    for noise in ["00000000001", "99999999"] {
        assert!(!json.contains(noise), "{json}");
    }
    let json = serde_json::to_string(&summary).unwrap();
    assert!(
        !json.contains("00000000001") && !json.contains("99999999"),
        "{json}"
    );
}

#[test]
fn csv_and_json() {
    let conv = standard_conv(C4, S4);
    let (conns, summary) = run_ok(&pcap_of(&conv, 1, false, false, eth));
    let csv = render_csv(&conns);
    let rows: Vec<Vec<&str>> = csv.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].len(), rows[1].len());
    let col = |name: &str| {
        let i = rows[0].iter().position(|h| *h == name).expect(name);
        rows[1][i]
    };
    assert_eq!(col("a_ip"), "10.0.6.2");
    assert_eq!(col("b_port"), "8000");
    assert_eq!(col("end"), "fin");
    assert_eq!(col("from_a_packets"), "8");
    assert_eq!(col("from_b_payload_bytes"), "1000");
    assert_eq!(col("handshake_rtt_s"), "0.000150000");
    assert_eq!(col("from_a_response_max_s"), "0.000390000");
    assert_eq!(col("from_a_response_p50_s"), "0.000050000");

    let json = serde_json::to_value(&conns[0]).expect("json");
    assert_eq!(json["a"]["ip"], "10.0.6.2");
    assert_eq!(json["end"], "fin");
    assert_eq!(json["from_b"]["payload_bytes"], 1000);
    let json = serde_json::to_value(&summary).expect("json");
    assert_eq!(json["tcp_packets"], 12);
}

#[test]
fn retransmission_out_of_order_and_zero_window() {
    let mut v = Conv::new(C4, S4, 1000, 5000);
    v.handshake(0, 100, 150);
    let base = v.cseq; // 1001
    let sack = v.sseq;
    v.raw(1000, true, (base, sack), ACK, 65535, 100); // [1001,1101)
    v.raw(1010, true, (base + 100, sack), ACK, 65535, 100); // [1101,1201)
    v.raw(1100, false, (sack, base + 100), ACK, 65535, 0); // acks the first: RTT 100 µs
    v.raw(1500, true, (base + 100, sack), ACK, 65535, 100); // retransmission of the second
    v.raw(1600, false, (sack, base + 200), ACK, 0, 0); // acks it; zero window
    v.raw(2000, true, (base + 200, sack), ACK, 65535, 100); // [1201,1301)
    v.raw(2001, true, (base + 300, sack), ACK, 65535, 100); // [1301,1401)
    v.raw(2002, true, (base + 500, sack), ACK, 65535, 100); // [1501,1601): gap [1401,1501)
    v.raw(2003, true, (base + 400, sack), ACK, 65535, 100); // fills the gap: out of order
    v.raw(2004, true, (base + 450, sack), ACK, 65535, 100); // [1451,1551): all seen before
    v.raw(2100, false, (sack, base + 600), ACK, 65535, 0);
    let (conns, s) = run_ok(&pcap_of(&v, 1, false, false, eth));
    assert_eq!(s.connections, 1);
    let c = &conns[0];
    assert_eq!(c.end, EndReason::Eof);
    let a = &c.from_a;
    assert_eq!(a.payload_bytes, 800);
    assert_eq!(a.unique_bytes, 600);
    assert_eq!(a.retransmitted_bytes, 200);
    assert_eq!(a.retransmitted_packets, 2);
    assert_eq!(a.out_of_order, 1);
    assert_eq!(c.from_b.zero_window, 1);
    assert_eq!(a.zero_window, 0);
    // Samples: the first segment (100 µs); the retransmitted one gives none (Karn); the
    // final ACK covers [1201,1301) and [1301,1401), sent at 2000 and 2001 µs, and
    // [1501,1601), which was partly sent again at 2004 µs (no sample).
    assert_eq!(a.rtt.samples, 3);
    assert_close(a.rtt.max_s, 100e-6);
    assert_close(a.rtt.min_s, 99e-6);
}

#[test]
fn sequence_wraparound() {
    let mut v = Conv::new(C4, S4, u32::MAX - 150, 7);
    standard_script(&mut v);
    let (conns, _) = run_ok(&pcap_of(&v, 1, false, false, eth));
    check_standard(&conns[0], C4, S4);
}

#[test]
fn partial_connection() {
    let mut v = Conv::new(C4, S4, 1000, 5000);
    // Capture starts mid-transfer: the server's data comes first.
    v.send(0, false, ACK, 1000);
    v.send(50, true, ACK, 0);
    v.send(70, false, ACK, 1000);
    v.send(200, true, ACK | PSH, 10);
    let (conns, _) = run_ok(&pcap_of(&v, 1, false, false, eth));
    assert_eq!(conns.len(), 1);
    let c = &conns[0];
    assert!(c.partial);
    assert_eq!(c.a.to_string(), S4, "A is the first sender");
    assert_eq!(c.from_a.payload_bytes, 2000);
    assert_eq!(c.from_a.unique_bytes, 2000);
    assert_eq!(c.from_b.payload_bytes, 10);
    assert_eq!(c.handshake.rtt_s, None);
    assert_eq!(c.from_b.response.count, 2);
    assert_close(c.from_b.response.avg_s, 90e-6);
    assert_eq!(c.from_a.response.count, 1);

    // Capture starts between SYN and SYN/ACK: A is still the connecting side.
    let mut v = Conv::new(C4, S4, 1000, 5000);
    v.cseq += 1;
    v.synack(0);
    v.send(30, true, ACK, 0);
    let (conns, _) = run_ok(&pcap_of(&v, 1, false, false, eth));
    assert!(conns[0].partial);
    assert_eq!(conns[0].a.to_string(), C4);
    assert_close(conns[0].handshake.synack_to_ack_s, 30e-6);
}

#[test]
fn syn_reuse_splits_connections() {
    // Closed, then a new SYN on the same tuple (within the linger time).
    let mut v = standard_conv(C4, S4);
    let mut w = Conv::new(C4, S4, 900_000, 77);
    standard_script(&mut w);
    for (ts, fc, ip) in w.pkts {
        v.pkts.push((ts + 10_000_000_000, fc, ip));
    }
    let (conns, s) = run_ok(&pcap_of(&v, 1, false, false, eth));
    assert_eq!(conns.len(), 2);
    assert_eq!(s.peak_open_connections, 1);
    check_standard(&conns[0], C4, S4);
    check_standard(&conns[1], C4, S4);
    assert_eq!((conns[0].id, conns[1].id), (0, 1));

    // Not closed, but a SYN with another ISN: the old one ends as reused.
    let mut v = Conv::new(C4, S4, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK, 10);
    v.raw(1_000_000, true, (424_242, 0), SYN, 65535, 0);
    // A retransmitted SYN (same ISN) stays in the new connection.
    v.raw(2_000_000, true, (424_242, 0), SYN, 65535, 0);
    let (conns, _) = run_ok(&pcap_of(&v, 1, false, false, eth));
    assert_eq!(conns.len(), 2);
    assert_eq!(conns[0].end, EndReason::Reused);
    assert_eq!(conns[0].from_a.packets, 3);
    assert_eq!(conns[1].from_a.packets, 2);
    assert!(!conns[1].partial);
}

#[test]
fn port_and_host_filters() {
    let mut v = standard_conv(C4, S4);
    let w = standard_conv("10.0.6.3:2000", "10.0.6.1:9000");
    v.pkts.extend(w.pkts);
    let file = pcap_of(&v, 1, false, false, eth);
    let (conns, s) = run_ok(&file);
    assert_eq!(conns.len(), 2);
    assert_eq!(s.peak_open_connections, 2);

    let mut opts = Options::default();
    opts.apply_filter("tcp port 9000").expect("filter");
    assert_eq!(opts.filter_port, Some(9000));
    let (conns, s) = run(&file, opts).expect("analysis");
    assert_eq!(conns.len(), 1);
    assert_eq!(conns[0].b.port, 9000);
    assert_eq!((s.tcp_packets, s.filtered_packets), (24, 12));

    let mut opts = Options::default();
    opts.apply_filter("host 10.0.6.2").expect("filter");
    let (conns, _) = run(&file, opts).expect("analysis");
    assert_eq!(conns.len(), 1);
    check_standard(&conns[0], C4, S4);

    let mut opts = Options::default();
    opts.apply_filter("host 10.0.6.1 and port 8000")
        .expect("filter");
    assert_eq!(run(&file, opts).expect("analysis").0.len(), 1);
    let mut opts = Options::default();
    assert!(opts.apply_filter("udp port 53").is_err());
    assert!(opts.apply_filter("port http").is_err());
    assert!(opts.apply_filter("port 80 and").is_err());
    assert!(opts.apply_filter("port 80 or port 81").is_err());
}

#[test]
fn idle_connections_are_finalized_while_streaming() {
    let mut v = Conv::new(C4, S4, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK, 10);
    // 3 s of silence, then more traffic on the same tuple.
    v.send(3_001_000, false, ACK, 10);
    let other = standard_conv("10.0.6.3:2000", "10.0.6.1:9000");
    for (ts, fc, ip) in other.pkts {
        v.pkts.push((ts + 3_100_000_000, fc, ip));
    }
    let file = pcap_of(&v, 1, false, false, eth);
    let opts = Options {
        idle_timeout_s: Some(1.0),
        ..Options::default()
    };
    let mut order = Vec::new();
    let s = Analyzer::new(opts)
        .analyze_reader(Cursor::new(&file), |c| order.push((c.id, c.end, c.partial)))
        .expect("analysis");
    // The first connection is emitted as idle before the capture ends; the late packet starts
    // a new, partial one.
    assert_eq!(s.connections, 3);
    assert_eq!(order[0], (0, EndReason::Idle, false));
    assert!(order.contains(&(1, EndReason::Eof, true)));
    assert!(order.contains(&(2, EndReason::Fin, false)));
}

#[test]
fn closed_connections_leave_the_table() {
    // 50 short connections one after another: the table never holds more than a few.
    let mut v = Conv::new(C4, S4, 0, 0);
    for i in 0..50u64 {
        let mut w = standard_conv(&format!("10.0.6.2:{}", 2000 + i), S4);
        w.pkts.iter_mut().for_each(|p| p.0 += i * 3_000_000_000);
        v.pkts.extend(w.pkts);
    }
    let (conns, s) = run_ok(&pcap_of(&v, 1, false, false, eth));
    assert_eq!(conns.len(), 50);
    assert!(s.peak_open_connections <= 2, "{}", s.peak_open_connections);
    for c in &conns {
        assert_eq!(c.end, EndReason::Fin);
    }
}

#[test]
fn undecodable_packets_are_warnings() {
    let conv = standard_conv(C4, S4);
    let mut p = Pcap::new(1, false, false, 65535);
    for (ts, _, ip) in conv.sorted() {
        p.packet(ts, &eth(&ip));
    }
    // 30 Ethernet frames claiming IPv4 with a broken header (IHL 2), plus ARP and short frames.
    for i in 0..30 {
        let mut bad = vec![0x42u8; 40];
        bad[0] = 0x42;
        p.packet(5_000_000 + i, &ethernet(0x0800, &bad));
    }
    p.packet(6_000_000, &ethernet(0x0806, &[0; 28]));
    p.packet(6_000_001, &[1, 2, 3]);
    let (conns, s) = run_ok(&p.buf);
    check_standard(&conns[0], C4, S4);
    assert_eq!(s.packets, 12 + 32);
    assert_eq!(s.skipped_malformed, 31);
    assert_eq!(s.non_tcp_packets, 1);
    assert_eq!(s.warnings_total, 31);
    assert_eq!(s.warnings.len(), virtperf_pcap::MAX_WARNINGS + 1);
    assert!(
        s.warnings[0].starts_with("packet record at byte "),
        "{}",
        s.warnings[0]
    );
    assert!(s.warnings[20].contains("11 more"), "{}", s.warnings[20]);
}

#[test]
fn analyze_file_reads_from_disk() {
    let conv = standard_conv(C4, S4);
    let dir = std::env::temp_dir().join(format!("virtperf-pcap-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let path = dir.join("standard.pcap");
    std::fs::write(&path, pcap_of(&conv, 1, false, false, eth)).expect("write");
    let (conns, s) = virtperf_pcap::analyze_file(&path, Options::default()).expect("analysis");
    check_standard(&conns[0], C4, S4);
    assert_eq!(s.packets, 12);
    let err = virtperf_pcap::analyze_file(dir.join("missing.pcap"), Options::default())
        .expect_err("missing file");
    assert!(err.to_string().contains("missing.pcap"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}
