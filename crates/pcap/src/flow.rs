//! Per-connection TCP state: sequence tracking (unique, retransmitted and out-of-order bytes),
//! handshake timing, data→ACK round trips and response latency.
//!
//! Sequence numbers are compared with serial arithmetic (RFC 1982 style, on `u32`), so a
//! connection that wraps its sequence space is tracked like any other.

use crate::decode::{Segment, ACK, FIN, RST, SYN};
use crate::hist::{Latency, Rtt};
use crate::model::{Connection, EndReason, Endpoint, Handshake, LatencyStats, RttStats, SideStats};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Data segments awaiting an ACK, per direction. Beyond this many in flight new segments are
/// not timed (they are still counted), which bounds the memory of one connection.
pub const PENDING_CAP: usize = 2048;
/// Sequence gaps remembered per direction, to tell a late (out-of-order) segment from a
/// retransmission.
const MAX_HOLES: usize = 4;
/// A segment this far (a quarter of the sequence space) before or after the highest sequence
/// number its side has sent belongs to another connection on the same 4-tuple: no window
/// reaches that far (the largest scaled window is 2^30 bytes), so no live stream jumps so far.
const SEQ_JUMP: u32 = 1 << 30;

/// `a < b` in sequence space.
#[inline]
fn lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a <= b` in sequence space.
#[inline]
fn le(a: u32, b: u32) -> bool {
    a == b || lt(a, b)
}

/// Connection-table key: the 4-tuple in canonical order (lower address/port first), so both
/// directions find the same entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    lo_ip: u128,
    hi_ip: u128,
    lo_port: u16,
    hi_port: u16,
    v6: bool,
}

impl std::hash::Hash for Key {
    /// Hashes as few words as the key needs (two for IPv4), since a lookup per packet makes
    /// the hash a visible part of the analyzer's cost. Equal keys hash equally.
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        if self.v6 {
            h.write_u128(self.lo_ip);
            h.write_u128(self.hi_ip);
        } else {
            h.write_u64(((self.lo_ip as u64) << 32) | (self.hi_ip as u64 & 0xffff_ffff));
        }
        h.write_u64(((self.lo_port as u64) << 16) | self.hi_port as u64 | ((self.v6 as u64) << 32));
    }
}

impl Key {
    /// Whether a segment travels from its key's low side.
    #[inline]
    pub fn from_lo(s: &Segment) -> bool {
        (s.src, s.sport) <= (s.dst, s.dport)
    }

    /// The key of a segment (`from_lo` as computed by [`Key::from_lo`]).
    #[inline(always)]
    pub fn of(s: &Segment, from_lo: bool) -> Key {
        if from_lo {
            Key {
                lo_ip: s.src,
                hi_ip: s.dst,
                lo_port: s.sport,
                hi_port: s.dport,
                v6: s.v6,
            }
        } else {
            Key {
                lo_ip: s.dst,
                hi_ip: s.src,
                lo_port: s.dport,
                hi_port: s.sport,
                v6: s.v6,
            }
        }
    }

    fn endpoint(&self, lo: bool) -> Endpoint {
        let (ip, port) = if lo {
            (self.lo_ip, self.lo_port)
        } else {
            (self.hi_ip, self.hi_port)
        };
        let ip = if self.v6 {
            IpAddr::V6(Ipv6Addr::from(ip))
        } else {
            IpAddr::V4(Ipv4Addr::from(ip as u32))
        };
        Endpoint { ip, port }
    }
}

/// A data segment whose ACK has not been seen yet.
#[derive(Debug, Clone, Copy)]
struct Pending {
    start: u32,
    end: u32,
    ts: u64,
    /// Some of its bytes were sent again: an ACK cannot tell which copy it answers.
    ambiguous: bool,
}

/// What one endpoint sent.
#[derive(Debug, Clone, Default)]
struct Side {
    packets: u64,
    payload: u64,
    unique: u64,
    retrans: u64,
    retrans_pkts: u64,
    ooo: u64,
    zero_win: u64,
    /// Initial sequence number, from this side's SYN.
    isn: Option<u32>,
    /// One past the highest sequence number sent (`None` until the first segment).
    high: Option<u32>,
    holes: [(u32, u32); MAX_HOLES],
    nholes: usize,
    pending: VecDeque<Pending>,
    rtt: Rtt,
    resp: Latency,
    /// Response gaps that came out negative (timestamps going backwards): not samples.
    neg_resp: u64,
    /// Data segments whose covering ACK is timestamped before them: not samples.
    neg_rtt: u64,
}

impl Side {
    fn add_hole(&mut self, s: u32, e: u32) {
        if self.nholes == MAX_HOLES {
            // Forget the oldest gap: a segment filling it later counts as retransmitted.
            self.holes.copy_within(1.., 0);
            self.nholes -= 1;
        }
        self.holes[self.nholes] = (s, e);
        self.nholes += 1;
    }

    fn remove_hole(&mut self, i: usize) {
        self.holes.copy_within(i + 1..self.nholes, i);
        self.nholes -= 1;
    }

    /// Bytes of `[s, e)` that fall in remembered gaps; those gaps shrink accordingly.
    fn fill_holes(&mut self, s: u32, e: u32) -> u32 {
        let mut filled = 0u32;
        let mut i = 0;
        while i < self.nholes {
            let (hs, he) = self.holes[i];
            let is = if lt(s, hs) { hs } else { s };
            let ie = if lt(e, he) { e } else { he };
            if lt(is, ie) {
                filled = filled.wrapping_add(ie.wrapping_sub(is));
                match (lt(hs, is), lt(ie, he)) {
                    (false, false) => {
                        self.remove_hole(i);
                        continue;
                    }
                    (true, false) => self.holes[i] = (hs, is),
                    (false, true) => self.holes[i] = (ie, he),
                    (true, true) => {
                        self.holes[i] = (hs, is);
                        if self.nholes < MAX_HOLES {
                            self.holes[self.nholes] = (ie, he);
                            self.nholes += 1;
                        }
                    }
                }
            }
            i += 1;
        }
        filled
    }

    fn track(&mut self, start: u32, end: u32, ts: u64) {
        if self.pending.len() < PENDING_CAP {
            self.pending.push_back(Pending {
                start,
                end,
                ts,
                ambiguous: false,
            });
        }
    }

    /// Classifies payload `[s, s+len)` as unique, retransmitted or out of order.
    fn data(&mut self, s: u32, len: u32, ts: u64) {
        let e = s.wrapping_add(len);
        self.payload += len as u64;
        let Some(h) = self.high else {
            self.high = Some(e);
            self.unique += len as u64;
            self.track(s, e, ts);
            return;
        };
        if le(h, s) {
            // Sequence space skipped: remember the gap. A jump of a quarter of the sequence
            // space is no gap but a broken or foreign stream, and holes that large would make
            // the serial comparisons of later segments meaningless.
            if s != h && s.wrapping_sub(h) < 1 << 30 {
                self.add_hole(h, s);
            }
            self.unique += len as u64;
            self.high = Some(e);
            self.track(s, e, ts);
            return;
        }
        // Starts below the highest sequence sent.
        let old_end = if lt(h, e) { h } else { e };
        let old_len = old_end.wrapping_sub(s);
        let new_len = len - old_len;
        // Holes cannot overlap in a sane stream; clamp so that a garbage one cannot count a
        // byte twice.
        let filled = self.fill_holes(s, old_end).min(old_len);
        let again = old_len - filled;
        self.unique += (new_len + filled) as u64;
        self.retrans += again as u64;
        if filled > 0 {
            self.ooo += 1;
        }
        if again > 0 {
            self.retrans_pkts += 1;
            // Karn: an ACK of these bytes may answer either copy.
            for p in self.pending.iter_mut() {
                if lt(p.start, old_end) && lt(s, p.end) {
                    p.ambiguous = true;
                }
            }
        }
        if new_len > 0 {
            self.high = Some(e);
            self.track(h, e, ts);
        }
    }

    /// The peer acknowledged everything below `ack` at `ts`.
    #[inline]
    fn acked(&mut self, ack: u32, ts: u64) {
        while let Some(p) = self.pending.front() {
            if !le(p.end, ack) {
                break;
            }
            if !p.ambiguous {
                if ts >= p.ts {
                    self.rtt.record(ts - p.ts);
                } else {
                    self.neg_rtt += 1;
                }
            }
            self.pending.pop_front();
        }
    }

    fn stats(&self) -> SideStats {
        SideStats {
            packets: self.packets,
            payload_bytes: self.payload,
            unique_bytes: self.unique,
            retransmitted_bytes: self.retrans,
            retransmitted_packets: self.retrans_pkts,
            out_of_order: self.ooo,
            zero_window: self.zero_win,
            rtt: RttStats {
                negative_gaps: self.neg_rtt,
                ..self.rtt.stats()
            },
            response: LatencyStats {
                negative_gaps: self.neg_resp,
                ..self.resp.stats()
            },
        }
    }
}

/// One connection in the table.
#[derive(Debug, Clone)]
pub struct Conn {
    /// Creation order.
    pub id: u64,
    key: Key,
    /// True when A (index 0 of `sides`) is the key's low side.
    a_is_lo: bool,
    partial: bool,
    first_ts: u64,
    /// Latest packet timestamp (drives the idle and linger timeouts).
    pub last_ts: u64,
    /// Side (0 = A, 1 = B) of the previous packet, or 2 before the first.
    last_side: u8,
    last_pkt_ts: u64,
    syn_ts: Option<u64>,
    synack_ts: Option<u64>,
    hs_ack_ts: Option<u64>,
    fin: [bool; 2],
    rst: bool,
    sides: [Side; 2],
}

impl Conn {
    /// A connection whose first packet is `seg`.
    pub fn new(id: u64, key: Key, from_lo: bool, seg: &Segment, ts: u64) -> Conn {
        let syn = seg.flags & (SYN | ACK | RST) == SYN;
        let synack = seg.flags & (SYN | ACK | RST) == SYN | ACK;
        Conn {
            id,
            key,
            // The receiver of a first-seen SYN/ACK is the side that connected.
            a_is_lo: if synack { !from_lo } else { from_lo },
            partial: !syn,
            first_ts: ts,
            last_ts: ts,
            last_side: 2,
            last_pkt_ts: ts,
            syn_ts: None,
            synack_ts: None,
            hs_ack_ts: None,
            fin: [false; 2],
            rst: false,
            sides: [Side::default(), Side::default()],
        }
    }

    /// Index into `sides` of a packet travelling from the key's low side or not.
    #[inline]
    pub fn side(&self, from_lo: bool) -> usize {
        (from_lo != self.a_is_lo) as usize
    }

    /// FIN from both sides, or RST from either.
    pub fn closed(&self) -> bool {
        self.rst || (self.fin[0] && self.fin[1])
    }

    /// Whether a SYN (without ACK) from `side` starts a new connection on this 4-tuple: yes if
    /// this one is closed or the SYN carries another ISN than the side's known one; no for a
    /// retransmitted SYN.
    pub fn reused_by(&self, side: usize, seq: u32) -> bool {
        self.closed() || self.sides[side].isn != Some(seq)
    }

    /// Whether a segment (not a SYN, not a RST) from `side` with sequence number `seq` belongs
    /// to another connection on this 4-tuple: it is [`SEQ_JUMP`] or more away from the highest
    /// sequence number the side has sent, either way. A reset may carry any sequence number,
    /// and SYNs are judged by [`Conn::reused_by`].
    #[inline]
    pub fn jumped(&self, side: usize, seq: u32) -> bool {
        match self.sides[side].high {
            Some(h) => {
                let d = seq.wrapping_sub(h);
                d >= SEQ_JUMP && d <= SEQ_JUMP.wrapping_neg()
            }
            None => false,
        }
    }

    /// Accounts one segment from `side` at `ts`.
    #[inline]
    pub fn update(&mut self, side: usize, seg: &Segment, ts: u64) {
        let other = 1 - side;
        if ts < self.first_ts {
            self.first_ts = ts;
        }
        if ts > self.last_ts {
            self.last_ts = ts;
        }
        // Response latency: this side answers the peer's previous packet.
        if self.last_side as usize == other {
            if ts >= self.last_pkt_ts {
                self.sides[side].resp.record(ts - self.last_pkt_ts);
            } else {
                self.sides[side].neg_resp += 1;
            }
        }
        self.last_side = side as u8;
        self.last_pkt_ts = ts;

        let f = seg.flags;
        let sd = &mut self.sides[side];
        sd.packets += 1;
        if seg.window == 0 && f & RST == 0 {
            sd.zero_win += 1;
        }
        if f & RST != 0 {
            // A reset's sequence number need not be in the window: keep it out of tracking.
            sd.payload += seg.payload_len as u64;
            self.rst = true;
            if f & ACK != 0 {
                self.sides[other].acked(seg.ack, ts);
            }
            return;
        }
        let mut data_seq = seg.seq;
        if f & SYN != 0 {
            data_seq = seg.seq.wrapping_add(1);
            if sd.isn.is_none() || sd.isn == Some(seg.seq) {
                sd.isn = Some(seg.seq);
                if sd.high.is_none_or(|h| lt(h, data_seq)) {
                    sd.high = Some(data_seq);
                }
            }
            if f & ACK == 0 {
                if side == 0 {
                    // The latest SYN is the one a SYN/ACK answers (earlier ones were lost).
                    if self.synack_ts.is_none() {
                        self.syn_ts = Some(ts);
                    }
                }
            } else if side == 1 && self.synack_ts.is_none() {
                let a_isn = self.sides[0].isn;
                if a_isn.is_none_or(|i| i.wrapping_add(1) == seg.ack) {
                    self.synack_ts = Some(ts);
                    if a_isn.is_none() {
                        // Capture began after the SYN: infer A's ISN so a retransmitted SYN
                        // is recognized as such.
                        self.sides[0].isn = Some(seg.ack.wrapping_sub(1));
                    }
                }
            }
        } else if side == 0 && f & ACK != 0 && self.hs_ack_ts.is_none() {
            if let (Some(_), Some(b_isn)) = (self.synack_ts, self.sides[1].isn) {
                if seg.ack == b_isn.wrapping_add(1) {
                    self.hs_ack_ts = Some(ts);
                }
            }
        }
        let sd = &mut self.sides[side];
        if seg.payload_len > 0 {
            sd.data(data_seq, seg.payload_len, ts);
        } else if sd.high.is_none() {
            sd.high = Some(data_seq);
        }
        if f & FIN != 0 {
            let fin_end = data_seq.wrapping_add(seg.payload_len).wrapping_add(1);
            if sd.high.is_none_or(|h| lt(h, fin_end)) {
                sd.high = Some(fin_end);
            }
            self.fin[side] = true;
        }
        if f & ACK != 0 {
            self.sides[other].acked(seg.ack, ts);
        }
    }

    /// The report of this connection.
    pub fn finish(&self, cause: EndReason) -> Connection {
        let end = if self.rst {
            EndReason::Rst
        } else if self.fin[0] && self.fin[1] {
            EndReason::Fin
        } else {
            cause
        };
        let secs = |ns: u64| ns as f64 * 1e-9;
        let span = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) if b >= a => Some(secs(b - a)),
            _ => None,
        };
        Connection {
            id: self.id,
            a: self.key.endpoint(self.a_is_lo),
            b: self.key.endpoint(!self.a_is_lo),
            partial: self.partial,
            end,
            start_ts: secs(self.first_ts),
            end_ts: secs(self.last_ts),
            duration_s: secs(self.last_ts - self.first_ts),
            handshake: Handshake {
                syn_to_synack_s: span(self.syn_ts, self.synack_ts),
                synack_to_ack_s: span(self.synack_ts, self.hs_ack_ts),
                rtt_s: span(self.syn_ts, self.hs_ack_ts),
            },
            from_a: self.sides[0].stats(),
            from_b: self.sides[1].stats(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_compare_wraps() {
        assert!(lt(u32::MAX - 5, 3));
        assert!(!lt(3, u32::MAX - 5));
        assert!(le(7, 7));
    }

    #[test]
    fn holes_fill_and_split() {
        let mut s = Side::default();
        s.data(1000, 100, 1); // [1000,1100)
        s.data(1300, 100, 2); // gap [1100,1300)
        assert_eq!((s.nholes, s.holes[0]), (1, (1100, 1300)));
        s.data(1150, 50, 3); // middle of the gap: splits it
        assert_eq!(s.nholes, 2);
        assert_eq!((s.unique, s.retrans, s.ooo), (250, 0, 1));
        s.data(1000, 200, 4); // 150 bytes seen before, 50 bytes fill [1100,1150)
        assert_eq!((s.unique, s.retrans, s.retrans_pkts), (300, 150, 1));
        assert_eq!((s.nholes, s.holes[0]), (1, (1200, 1300)));
    }

    #[test]
    fn wraparound_is_not_retransmission() {
        let mut s = Side::default();
        s.data(u32::MAX - 99, 100, 1);
        s.data(0, 100, 2);
        s.data(100, 100, 3);
        assert_eq!((s.unique, s.retrans, s.nholes), (300, 0, 0));
        s.data(u32::MAX - 49, 100, 4);
        assert_eq!((s.unique, s.retrans), (300, 100));
    }
}
