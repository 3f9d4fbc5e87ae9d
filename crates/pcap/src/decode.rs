//! Packet decoding: the link-layer prefix here, then IP and TCP headers through `etherparse`'s
//! lax IP slicer and TCP slicer (lax, so that packets cut short by a snaplen still yield their
//! TCP header and the payload length the IP header declares).

use crate::reader::Link;
use etherparse::{LaxIpSlice, TcpSlice};

/// TCP flag bits as in byte 13 of the TCP header.
pub const FIN: u8 = 0x01;
/// SYN flag.
pub const SYN: u8 = 0x02;
/// RST flag.
pub const RST: u8 = 0x04;
/// ACK flag.
pub const ACK: u8 = 0x10;

/// The fields of one TCP segment that the analysis needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Segment {
    /// Source address; an IPv4 address is held in the low 32 bits.
    pub src: u128,
    /// Destination address.
    pub dst: u128,
    /// True for IPv6 addresses.
    pub v6: bool,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number (meaningful when `flags & ACK`).
    pub ack: u32,
    /// Flags byte (FIN, SYN, RST, PSH, ACK, URG, ECE, CWR).
    pub flags: u8,
    /// Advertised window (unscaled).
    pub window: u16,
    /// Payload length as declared by the IP header.
    pub payload_len: u32,
}

/// What one packet turned out to be.
pub enum Decoded {
    /// A TCP segment, written to the caller's [`Segment`].
    Tcp,
    /// Something other than TCP (ARP, UDP, ICMP, unknown ether types).
    Other,
    /// Headers that claim TCP (or IP) but cannot be decoded; the text says why.
    Malformed(Reason),
}

/// Why a packet could not be decoded. Formatting is deferred until a warning is really kept.
pub enum Reason {
    /// A fixed message.
    Static(&'static str),
    /// An etherparse IP header error, formatted on demand.
    Ip(etherparse::err::ip::LaxHeaderSliceError),
    /// An etherparse IPv6 extension header error, formatted on demand.
    Ext(etherparse::err::ipv6_exts::HeaderSliceError),
    /// An etherparse TCP header error, formatted on demand.
    Tcp(etherparse::err::tcp::HeaderSliceError),
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reason::Static(s) => f.write_str(s),
            Reason::Ip(e) => write!(f, "{e}"),
            Reason::Ext(e) => write!(f, "{e}"),
            Reason::Tcp(e) => write!(f, "{e}"),
        }
    }
}

/// Address families seen in the 4-byte header of LINKTYPE_NULL and LINKTYPE_LOOP: AF_INET is 2
/// everywhere, AF_INET6 is 10 on Linux, 24 on NetBSD/OpenBSD, 28 on FreeBSD, 30 on macOS.
fn af_is_ip(af: u32) -> bool {
    matches!(af, 2 | 10 | 24 | 28 | 30)
}

const ETH_IPV4: u16 = 0x0800;
const ETH_IPV6: u16 = 0x86dd;

/// Finds the IP packet in a frame: `Ok(None)` for frames that carry something else.
///
/// Written here rather than left to etherparse: its lax slicer has no entry for Linux cooked
/// captures and it knows neither SLL2 nor the BSD loopback header; and its `LaxSlicedPacket`,
/// which would handle Ethernet and VLAN tags, is a large struct copied several times per packet
/// (a fifth of the analyzer's time in profiles). Each of these prefixes is a fixed-size header
/// with the protocol at a fixed place, so stripping them is a few lines.
#[inline]
fn by_ethertype(et: u16, rest: &[u8]) -> Option<&[u8]> {
    (et == ETH_IPV4 || et == ETH_IPV6).then_some(rest)
}

#[inline]
fn ip_of(link: Link, data: &[u8]) -> Result<Option<&[u8]>, &'static str> {
    match link {
        Link::Ethernet => {
            if data.len() < 14 {
                return Err("frame shorter than an Ethernet header");
            }
            let mut et = u16::from_be_bytes([data[12], data[13]]);
            let mut at = 14;
            // 802.1Q, 802.1ad and the old QinQ tag: 4 bytes each, ether type after.
            while matches!(et, 0x8100 | 0x88a8 | 0x9100) {
                if data.len() < at + 4 {
                    return Err("frame ends inside a VLAN tag");
                }
                et = u16::from_be_bytes([data[at + 2], data[at + 3]]);
                at += 4;
            }
            Ok(by_ethertype(et, &data[at..]))
        }
        Link::Sll => {
            if data.len() < 16 {
                return Err("frame shorter than a Linux SLL header");
            }
            Ok(by_ethertype(
                u16::from_be_bytes([data[14], data[15]]),
                &data[16..],
            ))
        }
        Link::Sll2 => {
            if data.len() < 20 {
                return Err("frame shorter than a Linux SLL2 header");
            }
            Ok(by_ethertype(
                u16::from_be_bytes([data[0], data[1]]),
                &data[20..],
            ))
        }
        Link::RawIp => Ok(Some(data)),
        Link::Null | Link::Loop => {
            if data.len() < 4 {
                return Err("frame shorter than a loopback header");
            }
            let b = [data[0], data[1], data[2], data[3]];
            // NULL is in the writer's byte order: accept either.
            let af = if link == Link::Loop {
                u32::from_be_bytes(b)
            } else if u32::from_le_bytes(b) < 0x1_0000 {
                u32::from_le_bytes(b)
            } else {
                u32::from_be_bytes(b)
            };
            Ok(af_is_ip(af).then_some(&data[4..]))
        }
    }
}

/// Decodes one captured frame; a TCP segment's fields go to `out`.
///
/// An out-parameter rather than a returned enum: moving the segment through a return value
/// made the compiler copy it piecewise through the stack, with store-forwarding stalls that
/// cost more than the decoding.
#[inline]
pub fn decode(link: Link, data: &[u8], out: &mut Segment) -> Decoded {
    let ip = match ip_of(link, data) {
        Ok(Some(ip)) => ip,
        Ok(None) => return Decoded::Other,
        Err(why) => return Decoded::Malformed(Reason::Static(why)),
    };
    // Matched by reference: moving the (large) result out of its slot costs a stall.
    let res = LaxIpSlice::from_slice(ip);
    let (ip, ext_err) = match &res {
        Ok((ip, ext_err)) => (ip, ext_err),
        Err(e) => return Decoded::Malformed(Reason::Ip(e.clone())),
    };
    let (src, dst, v6, payload, declared) = match ip {
        LaxIpSlice::Ipv4(s) => {
            let h = s.header();
            let declared = (h.total_len() as usize)
                .saturating_sub(h.slice().len())
                .saturating_sub(s.extensions().auth.map_or(0, |a| a.slice().len()));
            (
                u32::from_be_bytes(h.source()) as u128,
                u32::from_be_bytes(h.destination()) as u128,
                false,
                s.payload(),
                declared,
            )
        }
        LaxIpSlice::Ipv6(s) => {
            let h = s.header();
            let declared =
                (h.payload_length() as usize).saturating_sub(s.extensions().slice().len());
            (
                u128::from_be_bytes(h.source()),
                u128::from_be_bytes(h.destination()),
                true,
                s.payload(),
                declared,
            )
        }
    };
    if payload.ip_number != etherparse::IpNumber::TCP {
        // A stop inside the extension headers leaves the upper protocol unknown: the packet is
        // broken, not merely something other than TCP.
        return match ext_err {
            Some((e, _)) => Decoded::Malformed(Reason::Ext(e.clone())),
            None => Decoded::Other,
        };
    }
    if payload.fragmented {
        return Decoded::Malformed(Reason::Static(
            "fragmented IP packet carrying TCP (fragments are not reassembled)",
        ));
    }
    let tcp = match TcpSlice::from_slice(payload.payload) {
        Ok(t) => t,
        Err(e) => return Decoded::Malformed(Reason::Tcp(e)),
    };
    // Cut short by the snaplen: the IP header still says how long the packet was.
    let ip_payload_len = if payload.incomplete {
        declared
    } else {
        payload.payload.len()
    };
    let hdr = tcp.header_slice();
    out.src = src;
    out.dst = dst;
    out.v6 = v6;
    out.sport = tcp.source_port();
    out.dport = tcp.destination_port();
    out.seq = tcp.sequence_number();
    out.ack = tcp.acknowledgment_number();
    out.flags = hdr[13];
    out.window = tcp.window_size();
    out.payload_len = ip_payload_len.saturating_sub(hdr.len()) as u32;
    Decoded::Tcp
}
