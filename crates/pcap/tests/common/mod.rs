//! Hand-written capture files for the tests: real TCP/IP headers with correct lengths and
//! checksums, wrapped in every link-layer framing and file format the analyzer reads.
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;

fn csum_add(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    sum
}

fn csum_fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// One TCP segment's fields.
#[derive(Clone, Debug)]
pub struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub win: u16,
    pub payload_len: usize,
    /// Raw TCP options (padded to 4 bytes by the builder).
    pub options: Vec<u8>,
}

/// TCP header plus payload (payload bytes are a counting pattern), checksum over the
/// pseudo-header of `src`/`dst`.
pub fn tcp_bytes(src: IpAddr, dst: IpAddr, t: &Tcp) -> Vec<u8> {
    let mut opts = t.options.clone();
    while !opts.len().is_multiple_of(4) {
        opts.push(0);
    }
    let hlen = 20 + opts.len();
    let mut b = Vec::with_capacity(hlen + t.payload_len);
    b.extend_from_slice(&t.sport.to_be_bytes());
    b.extend_from_slice(&t.dport.to_be_bytes());
    b.extend_from_slice(&t.seq.to_be_bytes());
    b.extend_from_slice(&t.ack.to_be_bytes());
    b.push(((hlen / 4) as u8) << 4);
    b.push(t.flags);
    b.extend_from_slice(&t.win.to_be_bytes());
    b.extend_from_slice(&[0, 0, 0, 0]); // checksum, urgent pointer
    b.extend_from_slice(&opts);
    b.extend((0..t.payload_len).map(|i| (i % 251) as u8));
    let mut sum = 0u32;
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            sum = csum_add(sum, &s.octets());
            sum = csum_add(sum, &d.octets());
            sum += 6;
            sum += b.len() as u32;
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            sum = csum_add(sum, &s.octets());
            sum = csum_add(sum, &d.octets());
            sum += b.len() as u32;
            sum += 6;
        }
        _ => panic!("mixed address families"),
    }
    let c = csum_fold(csum_add(sum, &b));
    b[16..18].copy_from_slice(&c.to_be_bytes());
    b
}

/// IPv4 packet with `options` (padded to 4 bytes) and a correct header checksum.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, payload: &[u8], options: &[u8]) -> Vec<u8> {
    let mut opts = options.to_vec();
    while !opts.len().is_multiple_of(4) {
        opts.push(0);
    }
    let hlen = 20 + opts.len();
    let total = hlen + payload.len();
    let mut b = Vec::with_capacity(total);
    b.push(0x40 | (hlen / 4) as u8);
    b.push(0);
    b.extend_from_slice(&(total as u16).to_be_bytes());
    b.extend_from_slice(&[0x12, 0x34, 0x40, 0x00]); // id, DF
    b.push(64);
    b.push(proto);
    b.extend_from_slice(&[0, 0]);
    b.extend_from_slice(&src);
    b.extend_from_slice(&dst);
    b.extend_from_slice(&opts);
    let c = csum_fold(csum_add(0, &b));
    b[10..12].copy_from_slice(&c.to_be_bytes());
    b.extend_from_slice(payload);
    b
}

/// IPv6 packet, optionally with an 8-byte hop-by-hop options header (PadN) before `next`.
pub fn ipv6(src: [u8; 16], dst: [u8; 16], next: u8, payload: &[u8], hop_by_hop: bool) -> Vec<u8> {
    let mut ext = Vec::new();
    let first = if hop_by_hop {
        ext.extend_from_slice(&[next, 0, 1, 4, 0, 0, 0, 0]);
        0
    } else {
        next
    };
    let plen = ext.len() + payload.len();
    let mut b = vec![0x60, 0, 0, 0];
    b.extend_from_slice(&(plen as u16).to_be_bytes());
    b.push(first);
    b.push(64);
    b.extend_from_slice(&src);
    b.extend_from_slice(&dst);
    b.extend_from_slice(&ext);
    b.extend_from_slice(payload);
    b
}

/// How IP packets are built.
#[derive(Clone, Debug, Default)]
pub struct IpStyle {
    pub v4_options: Vec<u8>,
    pub v6_hop_by_hop: bool,
}

pub fn ip_packet(src: IpAddr, dst: IpAddr, t: &Tcp, style: &IpStyle) -> Vec<u8> {
    let seg = tcp_bytes(src, dst, t);
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => ipv4(s.octets(), d.octets(), 6, &seg, &style.v4_options),
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            ipv6(s.octets(), d.octets(), 6, &seg, style.v6_hop_by_hop)
        }
        _ => panic!("mixed address families"),
    }
}

pub fn ethertype_of(ip: &[u8]) -> u16 {
    if ip[0] >> 4 == 6 {
        0x86dd
    } else {
        0x0800
    }
}

pub fn ethernet(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    b.extend_from_slice(&ethertype.to_be_bytes());
    b.extend_from_slice(payload);
    b
}

pub fn ethernet_vlan(vid: u16, ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00];
    b.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    b.extend_from_slice(&ethertype.to_be_bytes());
    b.extend_from_slice(payload);
    b
}

pub fn sll(proto: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0];
    b.extend_from_slice(&proto.to_be_bytes());
    b.extend_from_slice(payload);
    b
}

pub fn sll2(proto: u16, payload: &[u8]) -> Vec<u8> {
    let mut b = proto.to_be_bytes().to_vec();
    b.extend_from_slice(&[0, 0]); // reserved
    b.extend_from_slice(&1u32.to_be_bytes()); // interface index
    b.extend_from_slice(&1u16.to_be_bytes()); // ARPHRD_ETHER
    b.push(0); // packet type
    b.push(6);
    b.extend_from_slice(&[2, 0, 0, 0, 0, 1, 0, 0]);
    b.extend_from_slice(payload);
    b
}

/// LINKTYPE_NULL: address family in the writer's byte order.
pub fn null(af: u32, little_endian: bool, payload: &[u8]) -> Vec<u8> {
    let mut b = if little_endian {
        af.to_le_bytes().to_vec()
    } else {
        af.to_be_bytes().to_vec()
    };
    b.extend_from_slice(payload);
    b
}

/// LINKTYPE_LOOP: address family in network byte order.
pub fn loop_(af: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = af.to_be_bytes().to_vec();
    b.extend_from_slice(payload);
    b
}

/// A scripted TCP conversation between a client and a server.
#[derive(Clone, Debug)]
pub struct Conv {
    pub c: SocketAddr,
    pub s: SocketAddr,
    /// Next sequence number of each side.
    pub cseq: u32,
    pub sseq: u32,
    pub style: IpStyle,
    /// (timestamp ns, from client, IP packet)
    pub pkts: Vec<(u64, bool, Vec<u8>)>,
}

impl Conv {
    pub fn new(c: &str, s: &str, cisn: u32, sisn: u32) -> Conv {
        Conv {
            c: c.parse().expect("client addr"),
            s: s.parse().expect("server addr"),
            cseq: cisn,
            sseq: sisn,
            style: IpStyle::default(),
            pkts: Vec::new(),
        }
    }

    /// Any segment; `(seq, ack)` as given, nothing advanced. One argument per header field
    /// the tests vary, so scripts read like packet listings.
    pub fn raw(
        &mut self,
        us: u64,
        from_client: bool,
        (seq, ack): (u32, u32),
        flags: u8,
        win: u16,
        len: usize,
    ) {
        let (src, dst) = if from_client {
            (self.c, self.s)
        } else {
            (self.s, self.c)
        };
        let t = Tcp {
            sport: src.port(),
            dport: dst.port(),
            seq,
            ack,
            flags,
            win,
            payload_len: len,
            options: Vec::new(),
        };
        let ip = ip_packet(src.ip(), dst.ip(), &t, &self.style);
        self.pkts.push((us * 1000, from_client, ip));
    }

    /// A segment from one side carrying `len` new bytes, acknowledging all the peer sent.
    pub fn send(&mut self, us: u64, from_client: bool, flags: u8, len: usize) {
        let (seq, ack) = if from_client {
            (self.cseq, self.sseq)
        } else {
            (self.sseq, self.cseq)
        };
        self.raw(us, from_client, (seq, ack), flags, 65535, len);
        let adv = len as u32 + (flags & (SYN | FIN) != 0) as u32;
        if from_client {
            self.cseq = self.cseq.wrapping_add(adv);
        } else {
            self.sseq = self.sseq.wrapping_add(adv);
        }
    }

    pub fn syn(&mut self, us: u64) {
        let seq = self.cseq;
        self.raw(us, true, (seq, 0), SYN, 65535, 0);
        self.cseq = seq.wrapping_add(1);
    }

    pub fn synack(&mut self, us: u64) {
        self.send(us, false, SYN | ACK, 0);
    }

    pub fn handshake(&mut self, syn: u64, synack: u64, ack: u64) {
        self.syn(syn);
        self.synack(synack);
        self.send(ack, true, ACK, 0);
    }

    /// Packets in capture order (by timestamp, stable).
    pub fn sorted(&self) -> Vec<(u64, bool, Vec<u8>)> {
        let mut p = self.pkts.clone();
        p.sort_by_key(|x| x.0);
        p
    }
}

/// The reference exchange whose numbers `check_standard` knows:
///
/// ```text
///  t(µs)  from    what                      A sample  B sample
///     0   client  SYN
///   100   server  SYN/ACK                              100
///   150   client  ACK                        50
///  1000   client  100 bytes (req 1)
///  1020   server  ACK + 500 bytes            .          20
///  1300   client  ACK                       280
///  2000   client  100 bytes (req 2)
///  2010   server  ACK + 500 bytes                       10
///  2400   client  ACK                       390
///  3000   client  FIN
///  3050   server  FIN/ACK                               50
///  3060   client  ACK                        10
/// ```
pub fn standard_conv(c: &str, s: &str) -> Conv {
    let mut v = Conv::new(c, s, 1000, 5000);
    standard_script(&mut v);
    v
}

pub fn standard_script(v: &mut Conv) {
    v.handshake(0, 100, 150);
    v.send(1000, true, ACK | PSH, 100);
    v.send(1020, false, ACK | PSH, 500);
    v.send(1300, true, ACK, 0);
    v.send(2000, true, ACK | PSH, 100);
    v.send(2010, false, ACK | PSH, 500);
    v.send(2400, true, ACK, 0);
    v.send(3000, true, FIN | ACK, 0);
    v.send(3050, false, FIN | ACK, 0);
    v.send(3060, true, ACK, 0);
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[track_caller]
pub fn assert_close(got: Option<f64>, want: f64) {
    let g = got.expect("value present");
    assert!(close(g, want), "got {g}, want {want}");
}

/// Checks every number of `standard_conv` on an analyzed connection.
#[track_caller]
pub fn check_standard(c: &virtperf_pcap::Connection, client: &str, server: &str) {
    assert_eq!(c.a.to_string(), client);
    assert_eq!(c.b.to_string(), server);
    assert!(!c.partial);
    assert_eq!(c.end, virtperf_pcap::EndReason::Fin);
    assert!(close(c.duration_s, 3060e-6), "duration {}", c.duration_s);
    assert_eq!(c.from_a.packets, 8);
    assert_eq!(c.from_b.packets, 4);
    assert_eq!(c.from_a.payload_bytes, 200);
    assert_eq!(c.from_b.payload_bytes, 1000);
    assert_eq!(c.from_a.unique_bytes, 200);
    assert_eq!(c.from_b.unique_bytes, 1000);
    assert_eq!(c.from_a.retransmitted_bytes, 0);
    assert_eq!(c.from_b.retransmitted_bytes, 0);
    assert_eq!(c.from_a.out_of_order, 0);
    assert_eq!(c.bytes_transferred(), 1200);
    assert_close(c.handshake.syn_to_synack_s, 100e-6);
    assert_close(c.handshake.synack_to_ack_s, 50e-6);
    assert_close(c.handshake.rtt_s, 150e-6);
    let ra = &c.from_a.response;
    assert_eq!(ra.count, 4);
    assert_close(ra.avg_s, 182.5e-6);
    assert_close(ra.min_s, 10e-6);
    assert_close(ra.max_s, 390e-6);
    assert_close(ra.p50_s, 50e-6);
    assert_close(ra.p99_s, 390e-6);
    let rb = &c.from_b.response;
    assert_eq!(rb.count, 4);
    assert_close(rb.avg_s, 45e-6);
    assert_close(rb.min_s, 10e-6);
    assert_close(rb.max_s, 100e-6);
    // Data→ACK round trips: A's requests were answered after 20 and 10 µs, B's responses
    // acknowledged after 280 and 390 µs.
    assert_eq!(c.from_a.rtt.samples, 2);
    assert_close(c.from_a.rtt.min_s, 10e-6);
    assert_close(c.from_a.rtt.avg_s, 15e-6);
    assert_close(c.from_a.rtt.max_s, 20e-6);
    assert_close(c.from_a.rtt.stdev_s, 50f64.sqrt() * 1e-6);
    assert_eq!(c.from_b.rtt.samples, 2);
    assert_close(c.from_b.rtt.avg_s, 335e-6);
}

/// Legacy pcap writer.
pub struct Pcap {
    pub big_endian: bool,
    pub nanos: bool,
    pub buf: Vec<u8>,
}

impl Pcap {
    pub fn new(linktype: u32, big_endian: bool, nanos: bool, snaplen: u32) -> Pcap {
        let mut p = Pcap {
            big_endian,
            nanos,
            buf: Vec::new(),
        };
        let magic: u32 = if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        p.u32(magic);
        p.u16(2);
        p.u16(4);
        p.u32(0);
        p.u32(0);
        p.u32(snaplen);
        p.u32(linktype);
        p
    }

    fn u32(&mut self, v: u32) {
        let b = if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }

    fn u16(&mut self, v: u16) {
        let b = if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        };
        self.buf.extend_from_slice(&b);
    }

    /// A record holding the first `caplen` bytes of `frame`.
    pub fn record(&mut self, ts_ns: u64, frame: &[u8], caplen: usize) {
        let caplen = caplen.min(frame.len());
        self.u32((ts_ns / 1_000_000_000) as u32);
        let frac = ts_ns % 1_000_000_000;
        self.u32(if self.nanos { frac } else { frac / 1000 } as u32);
        self.u32(caplen as u32);
        self.u32(frame.len() as u32);
        self.buf.extend_from_slice(&frame[..caplen]);
    }

    pub fn packet(&mut self, ts_ns: u64, frame: &[u8]) {
        self.record(ts_ns, frame, frame.len());
    }
}

/// Captures `conv` into a legacy pcap with `frame` wrapping each IP packet.
pub fn pcap_of(
    conv: &Conv,
    linktype: u32,
    big_endian: bool,
    nanos: bool,
    frame: impl Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let mut p = Pcap::new(linktype, big_endian, nanos, 262_144);
    for (ts, _, ip) in conv.sorted() {
        p.packet(1_700_000_000_000_000_000 + ts, &frame(&ip));
    }
    p.buf
}

/// pcapng writer (one section).
pub struct PcapNg {
    pub big_endian: bool,
    pub buf: Vec<u8>,
}

impl PcapNg {
    pub fn new(big_endian: bool) -> PcapNg {
        let mut p = PcapNg {
            big_endian,
            buf: Vec::new(),
        };
        let mut body = Vec::new();
        p.put32(&mut body, 0x1a2b_3c4d);
        p.put16(&mut body, 1);
        p.put16(&mut body, 0);
        body.extend_from_slice(&[0xff; 8]); // section length unknown
        p.block(0x0a0d_0d0a, &body);
        p
    }

    fn put32(&self, b: &mut Vec<u8>, v: u32) {
        b.extend_from_slice(&if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    fn put16(&self, b: &mut Vec<u8>, v: u16) {
        b.extend_from_slice(&if self.big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        });
    }

    pub fn block(&mut self, btype: u32, body: &[u8]) {
        let mut body = body.to_vec();
        while !body.len().is_multiple_of(4) {
            body.push(0);
        }
        let len = (body.len() + 12) as u32;
        let mut b = Vec::new();
        self.put32(&mut b, btype);
        self.put32(&mut b, len);
        b.extend_from_slice(&body);
        self.put32(&mut b, len);
        self.buf.extend_from_slice(&b);
    }

    /// Interface description block; `tsresol` adds the if_tsresol option.
    pub fn idb(&mut self, linktype: u16, tsresol: Option<u8>) {
        let mut body = Vec::new();
        self.put16(&mut body, linktype);
        self.put16(&mut body, 0);
        self.put32(&mut body, 262_144);
        if let Some(r) = tsresol {
            self.put16(&mut body, 9); // if_tsresol
            self.put16(&mut body, 1);
            body.extend_from_slice(&[r, 0, 0, 0]);
            self.put16(&mut body, 0); // opt_endofopt
            self.put16(&mut body, 0);
        }
        self.block(1, &body);
    }

    /// Enhanced packet block with a timestamp in the interface's units.
    pub fn epb(&mut self, if_id: u32, ts_units: u64, frame: &[u8]) {
        let mut body = Vec::new();
        self.put32(&mut body, if_id);
        self.put32(&mut body, (ts_units >> 32) as u32);
        self.put32(&mut body, ts_units as u32);
        self.put32(&mut body, frame.len() as u32);
        self.put32(&mut body, frame.len() as u32);
        body.extend_from_slice(frame);
        self.block(6, &body);
    }
}
