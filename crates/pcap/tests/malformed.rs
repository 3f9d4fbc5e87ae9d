//! Broken input: every failure is an error with a byte offset or a warning, never a panic, a
//! hang or a huge allocation.

mod common;

use common::*;
use std::io::Cursor;
use std::path::Path;
use virtperf_pcap::{Analyzer, Options, PcapError, Summary};

fn run(bytes: &[u8]) -> Result<(usize, Summary), PcapError> {
    let mut n = 0;
    let s = Analyzer::new(Options::default()).analyze_reader(Cursor::new(bytes), |_| n += 1)?;
    Ok((n, s))
}

/// Where and why reading ended early: the analysis's error when not one packet could be read,
/// else the summary's `stopped` (the packets before it were analyzed).
#[track_caller]
fn failure(bytes: &[u8]) -> (u64, String) {
    match run(bytes) {
        Err(e) => (e.offset().expect("offset"), e.to_string()),
        Ok((_, s)) => {
            let st = s.stopped.expect("reading stopped early");
            (st.offset, st.error)
        }
    }
}

fn eth(ip: &[u8]) -> Vec<u8> {
    ethernet(ethertype_of(ip), ip)
}

fn small_pcap() -> Vec<u8> {
    pcap_of(
        &standard_conv("10.0.0.2:1234", "10.0.0.1:80"),
        1,
        false,
        false,
        eth,
    )
}

fn small_pcapng() -> Vec<u8> {
    let conv = standard_conv("10.0.0.2:1234", "10.0.0.1:80");
    let mut ng = PcapNg::new(false);
    ng.idb(1, Some(9));
    for (ts, _, ip) in conv.sorted() {
        ng.epb(0, ts, &eth(&ip));
    }
    ng.buf
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
fn every_prefix_of_a_pcap() {
    let file = small_pcap();
    let starts = record_starts(&file);
    for len in 0..=file.len() {
        // Records wholly inside the prefix.
        let whole = starts
            .iter()
            .enumerate()
            .filter(|&(i, _)| starts.get(i + 1).map_or(file.len(), |&n| n) <= len)
            .count();
        match run(&file[..len]) {
            Ok((conns, s)) if s.stopped.is_none() => {
                // Only prefixes that end on a record boundary are complete captures.
                assert!(
                    len == 24 || starts.contains(&len) || len == file.len(),
                    "len {len}"
                );
                assert_eq!(s.packets as usize, whole);
                assert_eq!(conns, usize::from(whole > 0));
            }
            r => {
                // A cut record: the records before it are analyzed and the cut reported,
                // unless there were none (then the cut is the error).
                let (at, msg) = match r {
                    Ok((conns, s)) => {
                        assert!(whole > 0, "len {len}");
                        assert_eq!(s.packets as usize, whole, "len {len}");
                        assert_eq!(conns, 1, "len {len}");
                        let st = s.stopped.expect("stopped");
                        (st.offset, st.error)
                    }
                    Err(e) => {
                        assert_eq!(whole, 0, "len {len}: {e}");
                        (e.offset().expect("offset"), e.to_string())
                    }
                };
                assert!(msg.starts_with("truncated "), "len {len}: {msg}");
                if len < 24 {
                    assert_eq!(at, 0, "{msg}");
                } else {
                    // The offset is that of the record cut short.
                    let rec = starts.iter().rev().find(|&&st| st < len).expect("record");
                    assert_eq!(at as usize, *rec, "len {len}: {msg}");
                    assert!(msg.contains(&format!("at byte {rec}:")), "{msg}");
                }
            }
        }
    }
}

#[test]
fn every_prefix_of_a_pcapng() {
    let file = small_pcapng();
    let mut ok = 0;
    let mut analyzed_then_stopped = 0;
    for len in 0..=file.len() {
        match run(&file[..len]) {
            Ok((_, s)) if s.stopped.is_none() => ok += 1,
            Ok((conns, s)) => {
                analyzed_then_stopped += 1;
                assert!(s.packets > 0 && conns == 1, "len {len}");
                let st = s.stopped.expect("stopped");
                assert!(
                    st.error.starts_with("truncated "),
                    "len {len}: {}",
                    st.error
                );
                assert!(st.error.contains(&format!("at byte {}:", st.offset)));
            }
            Err(e) => {
                let msg = e.to_string();
                assert!(msg.starts_with("truncated "), "len {len}: {msg}");
                assert!(e.offset().is_some());
            }
        }
    }
    assert!(analyzed_then_stopped > 0);
    // SHB, IDB and each of the 12 packets end a valid prefix.
    assert_eq!(ok, 1 + 1 + 12);
}

#[test]
fn truncated_record_message() {
    let file = small_pcap();
    let starts = record_starts(&file);
    let cut = &file[..starts[3] + 20];
    let (_, err) = failure(cut);
    assert_eq!(
        err,
        format!(
            "truncated packet record at byte {}: header says 154 bytes of packet data, only 4 \
             left in the file",
            starts[3]
        )
    );
}

#[test]
fn garbage() {
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let magics: [&[u8]; 5] = [
        &[0xd4, 0xc3, 0xb2, 0xa1],
        &[0xa1, 0xb2, 0xc3, 0xd4],
        &[0x4d, 0x3c, 0xb2, 0xa1],
        &[0x0a, 0x0d, 0x0d, 0x0a],
        &[],
    ];
    for round in 0..400 {
        let len = (rnd() % 2000) as usize;
        let mut buf: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
        let magic = magics[round % magics.len()];
        if buf.len() >= magic.len() {
            buf[..magic.len()].copy_from_slice(magic);
        }
        let _ = run(&buf);
    }
    // Random bytes after a valid header and a few valid records.
    let good = small_pcap();
    for cut in [24usize, 200, 500] {
        for _ in 0..50 {
            let mut buf = good[..cut.min(good.len())].to_vec();
            buf.extend((0..300).map(|_| rnd() as u8));
            let _ = run(&buf);
        }
    }
    let err = run(b"hello, world, this is not a capture").expect_err("garbage");
    assert_eq!(
        err.to_string(),
        "invalid file header at byte 0: not a pcap or pcapng file (magic bytes 68 65 6c 6c)"
    );
    let err = run(b"").expect_err("empty");
    assert_eq!(
        err.to_string(),
        "truncated file header at byte 0: the input is empty"
    );
}

#[test]
fn huge_caplen() {
    let mut file = small_pcap();
    let at = record_starts(&file)[2];
    file[at + 8..at + 12].copy_from_slice(&0x7fff_fff0u32.to_le_bytes());
    let (_, err) = failure(&file);
    assert_eq!(
        err,
        format!(
            "invalid packet record at byte {at}: captured length 2147483632 exceeds the limit \
             of 262144 bytes"
        )
    );
    // Above the file's snaplen (plus slack) but under the global cap.
    let mut p = Pcap::new(1, true, false, 128);
    p.packet(0, &vec![0u8; 200_000]);
    let err = run(&p.buf).expect_err("caplen over snaplen");
    assert!(
        err.to_string()
            .contains("captured length 200000 exceeds the limit of 65664"),
        "{err}"
    );
}

#[test]
fn huge_pcapng_block() {
    let mut file = small_pcapng();
    // The IDB follows the 28-byte SHB: claim it is 3 GiB long.
    file[32..36].copy_from_slice(&0xc000_0000u32.to_le_bytes());
    let err = run(&file).expect_err("huge block");
    assert_eq!(
        err.to_string(),
        "invalid pcapng block at byte 28: block length 3221225472 exceeds the limit of 1048576 bytes"
    );
    // A packet block whose caplen is beyond its block.
    let mut file = small_pcapng();
    let epb = 28 + 32;
    file[epb + 20..epb + 24].copy_from_slice(&5000u32.to_le_bytes());
    let err = run(&file).expect_err("caplen beyond block");
    assert_eq!(err.offset(), Some(epb as u64), "{err}");
}

#[test]
fn unknown_link_type() {
    let mut p = Pcap::new(147, false, false, 65535);
    p.packet(0, &[0u8; 60]);
    let err = run(&p.buf).expect_err("unknown link type");
    assert_eq!(
        err.to_string(),
        "unsupported link type 147 at byte 20 (pcap file header)"
    );
    assert!(matches!(
        err,
        PcapError::UnsupportedLinkType {
            linktype: 147,
            offset: 20,
            ..
        }
    ));

    // pcapng: an interface of an unknown type is fine until a packet uses it.
    let mut ng = PcapNg::new(true);
    ng.idb(1, None);
    ng.idb(249, None);
    ng.epb(
        0,
        1,
        &eth(&standard_conv("10.0.0.2:1", "10.0.0.1:2").pkts[0].2),
    );
    let at = ng.buf.len();
    ng.epb(1, 2, &[0u8; 40]);
    let (_, err) = failure(&ng.buf);
    assert_eq!(
        err,
        format!(
            "unsupported link type 249 at byte {at} (packet on interface 1, declared by the \
             interface description block at byte 48)"
        )
    );
}

#[test]
fn packet_on_undeclared_interface_is_a_warning() {
    let mut ng = PcapNg::new(false);
    ng.idb(1, None);
    ng.epb(7, 1, &[0u8; 60]);
    let (_, s) = run(&ng.buf).expect("analysis");
    assert_eq!(s.packets, 0);
    assert_eq!(s.warnings_total, 1);
    assert!(s.warnings[0].contains("interface 7"), "{}", s.warnings[0]);
}

/// A reader that returns one byte per call, then fails.
struct Dribble<'a> {
    data: &'a [u8],
    fail: bool,
}

impl std::io::Read for Dribble<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.data.is_empty() {
            if self.fail {
                return Err(std::io::Error::other("device on fire"));
            }
            return Ok(0);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        buf[0] = self.data[0];
        self.data = &self.data[1..];
        Ok(1)
    }
}

#[test]
fn short_reads_and_io_errors() {
    let file = small_pcapng();
    let mut n = 0;
    let s = Analyzer::new(Options::default())
        .analyze_reader(
            Dribble {
                data: &file,
                fail: false,
            },
            |_| n += 1,
        )
        .expect("byte-at-a-time reads");
    assert_eq!((n, s.packets), (1, 12));
    let err = Analyzer::new(Options::default())
        .analyze_reader(
            Dribble {
                data: &file[..100],
                fail: true,
            },
            |_| (),
        )
        .expect_err("I/O error");
    assert!(err.to_string().contains("device on fire"), "{err}");
}

/// Every seed and every crash reproducer of the fuzz target stays harmless.
#[test]
fn fuzz_corpus_and_regressions() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut seen = 0;
    for dir in ["corpus/pcap_analyze", "regressions/pcap_analyze"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            // A running fuzzer adds and removes corpus files: skip any that just vanished.
            let Ok(data) = std::fs::read(e.path()) else {
                continue;
            };
            let _ = run(&data);
            seen += 1;
        }
    }
    assert!(seen > 0, "no fuzz corpus found under {}", root.display());
}

#[test]
fn large_records_grow_the_buffer() {
    // A 200 000-byte frame: larger than the initial read buffer, within the caps.
    let mut conv = Conv::new("10.0.0.2:1234", "10.0.0.1:80", 1, 1);
    conv.syn(0);
    conv.synack(10);
    conv.send(20, true, ACK, 0);
    conv.send(30, true, ACK, 60_000);
    let mut p = Pcap::new(1, false, true, 262_144);
    let mut ng = PcapNg::new(false);
    ng.idb(1, None);
    for (ts, _, ip) in conv.sorted() {
        let mut frame = eth(&ip);
        if frame.len() > 1000 {
            frame.resize(200_000, 0); // Ethernet padding past the IP packet
        }
        p.packet(ts, &frame);
        ng.epb(0, ts / 1000, &frame);
    }
    for file in [p.buf, ng.buf] {
        let (n, s) = run(&file).expect("analysis");
        assert_eq!((n, s.packets, s.tcp_packets), (1, 4, 4));
    }
}

/// Writes the fuzz target's seed corpus (tiny valid captures of each format and framing).
/// Run by hand when the seeds should change:
/// `cargo test --test malformed -- --ignored write_fuzz_seeds`.
#[test]
#[ignore = "writes fuzz/corpus/pcap_analyze/seed-*"]
fn write_fuzz_seeds() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/pcap_analyze");
    std::fs::create_dir_all(&dir).expect("corpus dir");
    let tiny = |c: &str, s: &str, style: IpStyle| {
        let mut v = Conv::new(c, s, 100, 200);
        v.style = style;
        v.handshake(0, 10, 20);
        v.send(30, true, ACK | PSH, 5);
        v.send(40, false, ACK | PSH, 7);
        v.send(50, true, FIN | ACK, 0);
        v.send(60, false, FIN | ACK, 0);
        v.send(70, true, ACK, 0);
        v
    };
    let v4 = tiny("10.0.0.2:1234", "10.0.0.1:80", IpStyle::default());
    let v4opt = tiny(
        "10.0.0.2:1234",
        "10.0.0.1:80",
        IpStyle {
            v4_options: vec![1, 1, 1, 0],
            v6_hop_by_hop: false,
        },
    );
    let v6 = tiny(
        "[2001:db8::2]:1234",
        "[2001:db8::1]:80",
        IpStyle {
            v4_options: Vec::new(),
            v6_hop_by_hop: true,
        },
    );
    let mut files: Vec<(&str, Vec<u8>)> = vec![
        ("seed-pcap-le-ethernet", pcap_of(&v4, 1, false, false, eth)),
        (
            "seed-pcap-be-ns-sll",
            pcap_of(&v4, 113, true, true, |ip| sll(ethertype_of(ip), ip)),
        ),
        (
            "seed-pcap-null-ipv6-hbh",
            pcap_of(&v6, 0, false, false, |ip| null(30, true, ip)),
        ),
        (
            "seed-pcap-vlan-ipv4-options",
            pcap_of(&v4opt, 1, false, true, |ip| {
                ethernet_vlan(7, ethertype_of(ip), ip)
            }),
        ),
    ];
    let mut ng = PcapNg::new(false);
    ng.idb(276, Some(9));
    ng.idb(101, None);
    for (ts, from_client, ip) in v6.sorted() {
        if from_client {
            ng.epb(0, ts, &sll2(ethertype_of(&ip), &ip));
        } else {
            ng.epb(1, ts / 1000, &ip);
        }
    }
    files.push(("seed-pcapng-sll2-raw", ng.buf));
    for (name, data) in files {
        run(&data).expect("seed analyzes");
        std::fs::write(dir.join(name), data).expect("write seed");
    }
}

#[test]
fn impossible_pcapng_block_lengths() {
    // A process information block claiming 5 bytes (found by fuzzing: pcap-parser subtracts 12).
    let mut file = small_pcapng();
    file.truncate(28);
    file.extend_from_slice(&0x8000_0001u32.to_le_bytes());
    file.extend_from_slice(&5u32.to_le_bytes());
    file.extend_from_slice(&[0; 8]);
    let err = run(&file).expect_err("short block");
    assert_eq!(
        err.to_string(),
        "invalid pcapng block at byte 28: block type 0x80000001: length 5 is not a multiple of 4 \
         of at least 12"
    );
    // Not a multiple of 4.
    let mut file = small_pcapng();
    file[32..36].copy_from_slice(&33u32.to_le_bytes());
    assert_eq!(run(&file).expect_err("odd length").offset(), Some(28));
}
