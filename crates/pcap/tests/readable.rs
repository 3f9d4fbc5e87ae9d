//! Analysing what can be read: captures cut mid-record, link-type fields carrying FCS bits,
//! long silences inside one connection, and timestamps that go backwards.

mod common;

use common::*;
use std::io::Cursor;
use virtperf_pcap::{
    render_csv, render_seed0, Analyzer, Connection, EndReason, Options, PcapError, Summary,
};

const C: &str = "10.0.0.2:40000";
const S: &str = "10.0.0.1:80";
/// Capture time of the first packet: 2023-11-14, as `pcap_of` writes.
const BASE_NS: u64 = 1_700_000_000_000_000_000;

fn run(bytes: &[u8], opts: Options) -> Result<(Vec<Connection>, Summary), PcapError> {
    let mut conns = Vec::new();
    let s = Analyzer::new(opts).analyze_reader(Cursor::new(bytes), |c| conns.push(c))?;
    conns.sort_by_key(|c| c.id);
    Ok((conns, s))
}

fn eth(ip: &[u8]) -> Vec<u8> {
    ethernet(ethertype_of(ip), ip)
}

/// The standard exchange, then a second connection still sending when the capture is cut.
fn two_connections() -> Conv {
    let mut v = standard_conv(C, S);
    let mut w = Conv::new("10.0.0.3:40001", S, 7000, 9000);
    w.handshake(5000, 5100, 5150);
    w.send(6000, true, ACK | PSH, 300);
    w.send(6100, false, ACK | PSH, 700);
    w.send(7000, true, ACK | PSH, 300);
    v.pkts.extend(w.pkts);
    v
}

/// Offsets at which each record of a legacy pcap starts.
fn record_starts(file: &[u8]) -> Vec<usize> {
    let mut at = 24;
    let mut starts = Vec::new();
    while at + 16 <= file.len() {
        starts.push(at);
        let caplen = u32::from_le_bytes([file[at + 8], file[at + 9], file[at + 10], file[at + 11]]);
        at += 16 + caplen as usize;
    }
    starts
}

#[test]
fn a_capture_cut_mid_record_reports_every_connection_before_the_cut() {
    let file = pcap_of(&two_connections(), 1, false, false, eth);
    let starts = record_starts(&file);
    let last = *starts.last().expect("records");
    // tcpdump killed while writing the last record: its header and 10 bytes of its frame.
    let cut = &file[..last + 26];
    let (conns, s) = run(cut, Options::default()).expect("the packets before the cut");
    assert_eq!(conns.len(), 2);
    check_standard(&conns[0], C, S);
    assert_eq!(conns[1].end, EndReason::Eof);
    assert_eq!(
        conns[1].from_a.payload_bytes, 300,
        "the cut request is not counted"
    );
    assert_eq!(conns[1].from_b.payload_bytes, 700);
    assert_eq!(s.packets as usize, starts.len() - 1);
    let st = s.stopped.expect("the cut is reported");
    assert_eq!(st.offset as usize, last);
    assert_eq!(
        st.error,
        format!(
            "truncated packet record at byte {last}: header says 354 bytes of packet data, only \
             10 left in the file"
        )
    );

    // The same in pcapng, cut inside the last enhanced packet block.
    let mut ng = PcapNg::new(false);
    ng.idb(1, Some(9));
    let mut last = 0;
    for (ts, _, ip) in two_connections().sorted() {
        last = ng.buf.len();
        ng.epb(0, ts, &eth(&ip));
    }
    let (conns, s) = run(&ng.buf[..last + 40], Options::default()).expect("pcapng cut");
    assert_eq!(conns.len(), 2);
    check_standard(&conns[0], C, S);
    let st = s.stopped.expect("the cut is reported");
    assert_eq!(st.offset as usize, last);
    assert!(st
        .error
        .starts_with(&format!("truncated pcapng block at byte {last}:")));

    // A complete capture says nothing of the kind.
    let (_, s) = run(&file, Options::default()).expect("whole file");
    assert_eq!(s.stopped, None);
    // Cut inside the first record: nothing was read, and that is an error.
    let err = run(&file[..starts[0] + 20], Options::default()).expect_err("nothing readable");
    assert_eq!(err.offset(), Some(starts[0] as u64));
}

#[test]
fn fcs_bits_in_the_link_type_field_are_masked_and_the_fcs_is_not_payload() {
    // FCS length not declared (bit 26 clear): still Ethernet.
    let file = pcap_of(&standard_conv(C, S), 0x3000_0001, false, false, eth);
    let (conns, s) = run(&file, Options::default()).expect("0x30000001 is Ethernet");
    assert_eq!(s.link_types, vec![1]);
    check_standard(&conns[0], C, S);

    // 4-byte FCS declared (bit 26, two 16-bit units), with IP lengths left at 0 as
    // TSO-offloaded captures have them, so nothing but the FCS length bounds the payload.
    let with_fcs = |ip: &[u8]| {
        let mut ip = ip.to_vec();
        ip[2..4].copy_from_slice(&[0, 0]);
        let mut f = eth(&ip);
        f.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        f
    };
    let file = pcap_of(&standard_conv(C, S), 0x2400_0001, false, false, with_fcs);
    let (conns, s) = run(&file, Options::default()).expect("FCS-length link type");
    assert_eq!(s.link_types, vec![1]);
    assert_eq!(s.skipped_malformed, 0);
    check_standard(&conns[0], C, S);
    assert_eq!(conns[0].from_a.packets, 8);
    assert_eq!(conns[0].bytes_transferred(), 1200, "no FCS byte counted");

    // A snaplen that cuts the frame before its FCS keeps all that was captured.
    let conv = standard_conv(C, S);
    let mut p = Pcap::new(0x2400_0001, false, false, 262_144);
    for (ts, _, ip) in conv.sorted() {
        let f = with_fcs(&ip);
        p.record(BASE_NS + ts, &f, 14 + 20 + 20);
    }
    let (conns, _) = run(&p.buf, Options::default()).expect("snaplen-cut frames");
    assert_eq!(conns[0].from_a.packets, 8);

    // pcapng declares the FCS with the interface's if_fcslen option.
    let mut ng = PcapNg::new(false);
    let mut idb = Vec::new();
    idb.extend_from_slice(&1u16.to_le_bytes()); // Ethernet
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&262_144u32.to_le_bytes());
    idb.extend_from_slice(&9u16.to_le_bytes()); // if_tsresol: nanoseconds
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&[9, 0, 0, 0]);
    idb.extend_from_slice(&13u16.to_le_bytes()); // if_fcslen
    idb.extend_from_slice(&1u16.to_le_bytes());
    idb.extend_from_slice(&[4, 0, 0, 0]);
    idb.extend_from_slice(&[0, 0, 0, 0]); // opt_endofopt
    ng.block(1, &idb);
    for (ts, _, ip) in conv.sorted() {
        ng.epb(0, ts, &with_fcs(&ip));
    }
    let (conns, _) = run(&ng.buf, Options::default()).expect("pcapng with if_fcslen");
    check_standard(&conns[0], C, S);
}

/// A connection that pauses for `pause_s` seconds mid-stream and then carries on with the
/// next sequence numbers.
fn paused(pause_s: u64) -> Vec<u8> {
    let mut v = Conv::new(C, S, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1020, false, ACK | PSH, 500);
    let later = pause_s * 1_000_000;
    v.send(later + 1000, true, ACK | PSH, 100);
    v.send(later + 1020, false, ACK | PSH, 500);
    v.send(later + 2000, true, FIN | ACK, 0);
    v.send(later + 2050, false, FIN | ACK, 0);
    v.send(later + 2060, true, ACK, 0);
    pcap_of(&v, 1, false, false, eth)
}

#[test]
fn silence_does_not_split_a_connection_unless_asked() {
    let file = paused(400);
    let (conns, _) = run(&file, Options::default()).expect("analysis");
    assert_eq!(conns.len(), 1, "{conns:#?}");
    let c = &conns[0];
    assert_eq!(c.end, EndReason::Fin);
    assert!(!c.partial);
    assert_eq!(
        (c.from_a.payload_bytes, c.from_b.payload_bytes),
        (200, 1000)
    );
    assert!((c.duration_s - 400.00206).abs() < 1e-6, "{}", c.duration_s);

    // With an idle timeout, the silence ends the first part and the rest is a partial one.
    let opts = Options {
        idle_timeout_s: Some(300.0),
        ..Options::default()
    };
    let (conns, _) = run(&file, opts).expect("analysis");
    assert_eq!(conns.len(), 2);
    assert_eq!(
        (conns[0].end, conns[1].end),
        (EndReason::Idle, EndReason::Fin)
    );
    assert!(conns[1].partial);
}

#[test]
fn a_sequence_jump_starts_another_connection() {
    // A connection whose end was not captured, then the same 4-tuple again without its SYN:
    // sequence numbers half the space away.
    let mut v = Conv::new(C, S, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1020, false, ACK | PSH, 500);
    v.cseq = v.cseq.wrapping_add(1 << 31);
    v.sseq = v.sseq.wrapping_add(1 << 31);
    v.send(2000, true, ACK | PSH, 100);
    v.send(2020, false, ACK | PSH, 500);
    let file = pcap_of(&v, 1, false, false, eth);
    let (conns, _) = run(&file, Options::default()).expect("analysis");
    assert_eq!(conns.len(), 2, "{conns:#?}");
    assert_eq!(conns[0].end, EndReason::Reused);
    assert!(!conns[0].partial && conns[1].partial);
    assert_eq!(conns[0].from_a.retransmitted_bytes, 0);
    assert_eq!(conns[1].from_a.unique_bytes, 100);
    assert_eq!(conns[1].from_b.unique_bytes, 500);

    // Sequence numbers moving on by less (a big window's worth) do not split.
    let mut v = Conv::new(C, S, 1000, 5000);
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.cseq = v.cseq.wrapping_add(1 << 29);
    v.send(2000, true, ACK | PSH, 100);
    let file = pcap_of(&v, 1, false, false, eth);
    let (conns, _) = run(&file, Options::default()).expect("analysis");
    assert_eq!(conns.len(), 1);
}

#[test]
fn timestamps_going_backwards_are_counted_and_said() {
    // The standard exchange as a loopback capture can record it: the server's first answer
    // stamped 10 µs before the request it answers, though written after it.
    let mut v = standard_conv(C, S);
    let answer = v
        .pkts
        .iter_mut()
        .find(|p| p.0 == 1_020_000)
        .expect("first answer");
    answer.0 = 990_000;
    let mut p = Pcap::new(1, false, true, 262_144);
    for (ts, _, ip) in &v.pkts {
        p.packet(BASE_NS + ts, &eth(ip));
    }
    let (conns, s) = run(&p.buf, Options::default()).expect("analysis");
    assert_eq!(s.backwards_timestamps, 1);
    let c = &conns[0];
    // The server's answer: a negative response gap; the client's request: acknowledged
    // "before" it was sent, a negative round trip. Neither is a sample.
    assert_eq!(c.from_b.response.negative_gaps, 1);
    assert_eq!(c.from_b.response.count, 3);
    assert_eq!(c.from_a.rtt.negative_gaps, 1);
    assert_eq!(c.from_a.rtt.samples, 1);
    assert_eq!(c.from_a.response.negative_gaps, 0);
    assert!(
        s.warnings.iter().any(|w| w.contains(
            "1 packet timestamps are earlier than the packet's before them (usual on loopback); \
             1 negative response gaps and 1 negative round trips"
        )),
        "{:?}",
        s.warnings
    );

    let text = render_seed0(&conns);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with(" negative_gaps=1"), "{text}");
    assert!(lines[1].starts_with("summary:") && lines[1].ends_with(" negative_gaps=1"));

    let csv = render_csv(&conns);
    let mut rows = csv.lines().map(|l| l.split(',').collect::<Vec<_>>());
    let (head, row) = (rows.next().expect("head"), rows.next().expect("row"));
    let n = head.len();
    assert_eq!(
        head[n - 4..],
        [
            "from_a_response_negative_gaps",
            "from_a_rtt_negative_gaps",
            "from_b_response_negative_gaps",
            "from_b_rtt_negative_gaps"
        ]
    );
    assert_eq!(row[n - 4..], ["0", "1", "1", "0"]);
    assert_eq!(row.len(), n);

    let json = serde_json::to_value(&conns[0]).expect("json");
    assert_eq!(json["from_b"]["response"]["negative_gaps"], 1);
    assert_eq!(json["from_a"]["rtt"]["negative_gaps"], 1);
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["backwards_timestamps"], 1);
    assert_eq!(json["stopped"], serde_json::Value::Null);

    // In order, the same capture has none of it and the seed lines keep their old shape.
    let file = pcap_of(&standard_conv(C, S), 1, false, true, eth);
    let (conns, s) = run(&file, Options::default()).expect("analysis");
    assert_eq!(s.backwards_timestamps, 0);
    assert!(s.warnings.is_empty());
    assert!(!render_seed0(&conns).contains("negative_gaps"));
}
