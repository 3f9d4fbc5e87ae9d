//! What the two record formats share: limits, the link type, a raw packet and where it
//! goes (a [`Sink`]), and the one place each format plugs into the record loop ([`Format`]).

use pcap_parser::PcapBlockOwned;

use crate::error::PcapError;

/// Initial size of the read buffer: small, so that small inputs (and fuzzing) stay cheap.
pub const INITIAL_BUF: usize = 64 * 1024;

/// Longest pcapng block accepted.
pub const MAX_BLOCK: u32 = 1 << 20;

/// Largest the read buffer grows: the buffer must be strictly larger than a block.
pub const MAX_BUF: usize = 2 * MAX_BLOCK as usize;

/// Largest captured length of one packet accepted (Linux's largest snaplen is 256 KiB).
pub const MAX_CAPLEN: u32 = 256 * 1024;

/// The LINKTYPE_ number and the FCS length in bytes of a legacy pcap header's link-type
/// field, split as libpcap's `LT_LINKTYPE` (pcap-common.h), `LT_FCS_LENGTH_PRESENT` and
/// `LT_FCS_LENGTH` do, and as the pcap file format draft defines it: the link type is the
/// low 16 bits; bits 16–25 are reserved; bit 26 says an FCS length is present in bits 28–31
/// (in 16-bit units).
pub fn split_linktype(field: u32) -> (u32, u32) {
    let lt = field & 0x0000_FFFF;
    let fcs = if field & 0x0400_0000 != 0 {
        ((field & 0xF000_0000) >> 28) * 2
    } else {
        0
    };
    (lt, fcs)
}

/// The captured bytes of a frame without its FCS trailer: the last `fcs` bytes of the frame
/// on the wire (`origlen` long) are the FCS, so only bytes before `origlen - fcs` are frame.
/// A capture cut by its snaplen before the trailer keeps all it has.
#[inline]
pub(crate) fn without_fcs(data: &[u8], origlen: u32, fcs: u32) -> &[u8] {
    if fcs == 0 {
        return data;
    }
    let keep = (origlen.saturating_sub(fcs) as usize).min(data.len());
    &data[..keep]
}

/// Link-layer framings this crate decodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// LINKTYPE_ETHERNET (1), with optional 802.1Q/802.1ad tags.
    Ethernet,
    /// LINKTYPE_LINUX_SLL (113): 16-byte cooked header.
    Sll,
    /// LINKTYPE_LINUX_SLL2 (276): 20-byte cooked header.
    Sll2,
    /// LINKTYPE_RAW (101), LINKTYPE_IPV4 (228), LINKTYPE_IPV6 (229): the packet is an IP packet.
    RawIp,
    /// LINKTYPE_NULL (0): 4-byte address family in the writer's byte order.
    Null,
    /// LINKTYPE_LOOP (108): 4-byte address family in network byte order.
    Loop,
}

impl Link {
    /// The decoder for a LINKTYPE_ number, if there is one.
    pub fn from_linktype(lt: u32) -> Option<Link> {
        Some(match lt {
            1 => Link::Ethernet,
            113 => Link::Sll,
            276 => Link::Sll2,
            101 | 228 | 229 => Link::RawIp,
            0 => Link::Null,
            108 => Link::Loop,
            _ => return None,
        })
    }
}

/// One packet record, borrowed from the read buffer.
pub struct RawPacket<'a> {
    /// Capture timestamp, nanoseconds since the epoch.
    pub ts_ns: u64,
    /// How to decode `data`.
    pub link: Link,
    /// The captured bytes.
    pub data: &'a [u8],
    /// Byte offset of the record in the capture.
    pub offset: u64,
}

/// What the reader hands to its consumer.
pub trait Sink {
    /// A new link type was declared (file header or pcapng interface).
    fn link_type(&mut self, lt: u32);
    /// A packet record.
    fn packet(&mut self, p: RawPacket<'_>);
    /// A recoverable problem (the record is skipped).
    fn warn(&mut self, msg: impl FnOnce() -> String);
}

pub(crate) fn block_too_long(offset: usize, blen: u32) -> PcapError {
    PcapError::Invalid {
        what: "pcapng block",
        offset: offset as u64,
        detail: format!("block length {blen} exceeds the limit of {MAX_BLOCK} bytes"),
    }
}

pub(crate) fn u32_at(data: &[u8], at: usize, big_endian: bool) -> Option<u32> {
    let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

/// What differs between legacy pcap and pcapng inside the one record loop, [`read_records`].
pub(crate) trait Format {
    /// Refuses the record at the start of `data` before the parser sees it, when parsing it
    /// could misbehave.
    #[inline]
    fn check(&self, _data: &[u8], _offset: usize) -> Result<(), PcapError> {
        Ok(())
    }

    /// Handles one parsed record (a header, a packet, or something to skip).
    fn record(
        &mut self,
        block: PcapBlockOwned<'_>,
        offset: usize,
        sink: &mut impl Sink,
    ) -> Result<(), PcapError>;

    /// The bytes the record at the start of `data` needs in the buffer, as its header says,
    /// or `None` when the header is not all there or the length is over the format's limit.
    fn needs(&self, data: &[u8]) -> Option<usize>;

    /// Explains why the record at `offset` (at the start of `data`) could not be read: too
    /// long, cut short, or (`why`, the parser's complaint) malformed.
    fn bad_record(&self, data: &[u8], offset: usize, why: Option<String>) -> PcapError;
}

pub(crate) fn absurd_caplen(offset: usize, caplen: u32, limit: u32) -> PcapError {
    PcapError::Invalid {
        what: "packet record",
        offset: offset as u64,
        detail: format!("captured length {caplen} exceeds the limit of {limit} bytes"),
    }
}
