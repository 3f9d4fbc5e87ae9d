//! Capture file reading: legacy pcap and pcapng through `pcap-parser`'s streaming readers, with
//! the checks the analyzer needs on top (length caps, byte offsets in every error, timestamps
//! normalized to nanoseconds, link types mapped to the decoders this crate has).
//!
//! Memory: one read buffer of [`INITIAL_BUF`] bytes, doubled only when a record or block does
//! not fit, and never beyond [`MAX_BUF`]: a packet longer than [`MAX_CAPLEN`] or a pcapng block
//! longer than [`MAX_BLOCK`] is an error, so no length read from the file sizes an allocation
//! beyond those caps.

use crate::error::PcapError;
use pcap_parser::pcapng::Block;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{LegacyPcapReader, PcapBlockOwned, PcapNGReader};
use std::cell::RefCell;
use std::io::{ErrorKind, Read};
use std::rc::Rc;

/// Initial size of the read buffer: small, so that small inputs (and fuzzing) stay cheap.
pub const INITIAL_BUF: usize = 64 * 1024;
/// Longest pcapng block accepted.
pub const MAX_BLOCK: u32 = 1 << 20;
/// Largest the read buffer grows: the buffer must be strictly larger than a block.
pub const MAX_BUF: usize = 2 * MAX_BLOCK as usize;
/// Largest captured length of one packet accepted (Linux's largest snaplen is 256 KiB).
pub const MAX_CAPLEN: u32 = 256 * 1024;
/// How far a legacy record's caplen may exceed the file's snaplen before the record is taken
/// for garbage: some writers store a smaller snaplen than they use (65535 with 65549-byte
/// loopback frames), so a little slack avoids rejecting real files.
const SNAPLEN_SLACK: u32 = 64 * 1024;
/// Most interfaces accepted in one pcapng section; each costs a few bytes of memory and a file
/// could otherwise declare millions.
const MAX_INTERFACES: usize = 4096;
/// pcapng `if_fcslen` option: FCS bytes at the end of each of the interface's frames.
const IF_FCSLEN: u16 = 13;

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
fn without_fcs(data: &[u8], origlen: u32, fcs: u32) -> &[u8] {
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

/// A `Read` adapter that first returns a few already-read bytes, and fills every buffer
/// completely unless the input ends.
///
/// Needed because `pcap-parser`'s readers parse their file header from the result of one
/// single `read` call: with a pipe or a short-reading reader the header could arrive in pieces
/// and be reported as truncated. It also keeps the text of an I/O error, which `pcap-parser`
/// reduces to a bare `ReadError`.
struct FullRead<R> {
    head: [u8; 12],
    head_pos: usize,
    head_len: usize,
    inner: R,
    err: Rc<RefCell<Option<String>>>,
}

impl<R: Read> Read for FullRead<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        if self.head_pos < self.head_len {
            let k = (self.head_len - self.head_pos).min(buf.len());
            buf[..k].copy_from_slice(&self.head[self.head_pos..self.head_pos + k]);
            self.head_pos += k;
            n = k;
        }
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    *self.err.borrow_mut() = Some(e.to_string());
                    if n > 0 {
                        // Hand over what arrived; the next call fails again (or ends).
                        break;
                    }
                    return Err(e);
                }
            }
        }
        Ok(n)
    }
}

fn read_head<R: Read>(r: &mut R) -> Result<([u8; 12], usize), PcapError> {
    let mut head = [0u8; 12];
    let mut n = 0;
    while n < head.len() {
        match r.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => {
                return Err(PcapError::Io {
                    offset: n as u64,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok((head, n))
}

/// Reads a whole capture, legacy pcap or pcapng, handing every packet to `sink`.
pub fn read_capture<R: Read>(mut r: R, sink: &mut impl Sink) -> Result<(), PcapError> {
    let (head, n) = read_head(&mut r)?;
    if n == 0 {
        return Err(PcapError::Truncated {
            what: "file header",
            offset: 0,
            detail: "the input is empty".into(),
        });
    }
    if n < 4 {
        return Err(PcapError::Truncated {
            what: "file header",
            offset: 0,
            detail: format!("only {n} bytes"),
        });
    }
    let err = Rc::new(RefCell::new(None));
    let full = FullRead {
        head,
        head_pos: 0,
        head_len: n,
        inner: r,
        err: err.clone(),
    };
    let magic = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
    match magic {
        0x0a0d_0d0a => {
            // The reader parses the first block from its first buffer: make room for it.
            let big_endian = head[8..12] == [0x1a, 0x2b, 0x3c, 0x4d];
            let cap = match u32_at(&head[..n], 4, big_endian) {
                Some(blen) if blen > MAX_BLOCK => return Err(block_too_long(0, blen)),
                Some(blen) => buf_for(blen as usize),
                None => INITIAL_BUF,
            };
            read_pcapng(full, cap, &err, sink)
        }
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 | 0xa1b2_cd34 => {
            read_legacy(full, &err, sink)
        }
        _ => Err(PcapError::Invalid {
            what: "file header",
            offset: 0,
            detail: format!(
                "not a pcap or pcapng file (magic bytes {:02x} {:02x} {:02x} {:02x})",
                head[0], head[1], head[2], head[3]
            ),
        }),
    }
}

fn io_err(err: &Rc<RefCell<Option<String>>>, offset: usize) -> PcapError {
    PcapError::Io {
        offset: offset as u64,
        message: err
            .borrow()
            .clone()
            .unwrap_or_else(|| "unknown read error".into()),
    }
}

/// A buffer size that holds `need` bytes with room to spare (pcap-parser wants the buffer
/// strictly larger than a block).
fn buf_for(need: usize) -> usize {
    (need + 1).next_power_of_two().clamp(INITIAL_BUF, MAX_BUF)
}

fn block_too_long(offset: usize, blen: u32) -> PcapError {
    PcapError::Invalid {
        what: "pcapng block",
        offset: offset as u64,
        detail: format!("block length {blen} exceeds the limit of {MAX_BLOCK} bytes"),
    }
}

fn u32_at(data: &[u8], at: usize, big_endian: bool) -> Option<u32> {
    let b: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
    Some(if big_endian {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

fn read_legacy<R: Read>(
    full: FullRead<R>,
    err: &Rc<RefCell<Option<String>>>,
    sink: &mut impl Sink,
) -> Result<(), PcapError> {
    let mut rdr = match LegacyPcapReader::new(INITIAL_BUF, full) {
        Ok(r) => r,
        Err(pcap_parser::PcapError::ReadError) => return Err(io_err(err, 0)),
        Err(pcap_parser::PcapError::Incomplete(_)) => {
            return Err(PcapError::Truncated {
                what: "file header",
                offset: 0,
                detail: "a pcap file header is 24 bytes".into(),
            })
        }
        Err(e) => {
            return Err(PcapError::Invalid {
                what: "file header",
                offset: 0,
                detail: format!("{e:?}"),
            })
        }
    };
    let mut link = Link::Ethernet;
    let mut fcs = 0u32;
    let mut nanos = false;
    let mut big_endian = false;
    // Records are consumed without shifting the buffer (`consume_noshift`): the buffer is
    // compacted only when it runs dry (`refill` moves the partial record left), instead of
    // every half buffer, which copied the whole file once more through memmove.
    let mut limit = MAX_CAPLEN;
    let mut cap = INITIAL_BUF;
    loop {
        let offset = rdr.consumed();
        let before = rdr.data().len();
        match rdr.next() {
            Ok((len, PcapBlockOwned::LegacyHeader(h))) => {
                let (lt, f) = split_linktype(h.network.0 as u32);
                fcs = f;
                sink.link_type(lt);
                link = Link::from_linktype(lt).ok_or(PcapError::UnsupportedLinkType {
                    linktype: lt,
                    offset: 20,
                    context: " (pcap file header)".into(),
                })?;
                nanos = h.is_nanosecond_precision();
                big_endian = h.is_bigendian();
                if h.snaplen > 0 {
                    limit = MAX_CAPLEN.min(h.snaplen.saturating_add(SNAPLEN_SLACK));
                }
                rdr.consume_noshift(len);
            }
            Ok((len, PcapBlockOwned::Legacy(b))) => {
                if b.caplen > limit {
                    return Err(absurd_caplen(offset, b.caplen, limit));
                }
                let frac = if nanos {
                    b.ts_usec as u64
                } else {
                    b.ts_usec as u64 * 1000
                };
                let ts_ns = (b.ts_sec as u64) * 1_000_000_000 + frac;
                sink.packet(RawPacket {
                    ts_ns,
                    link,
                    data: without_fcs(b.data, b.origlen, fcs),
                    offset: offset as u64,
                });
                rdr.consume_noshift(len);
            }
            Ok((len, PcapBlockOwned::NG(_))) => rdr.consume_noshift(len),
            Err(pcap_parser::PcapError::Eof) => return Ok(()),
            Err(pcap_parser::PcapError::Incomplete(_)) => {
                // A full buffer that still does not hold the record: the parser should have
                // said BufferTooSmall; refuse rather than loop.
                if before >= cap {
                    return Err(legacy_len_error(rdr.data(), offset, big_endian, limit));
                }
                if rdr.refill().is_err() {
                    return Err(io_err(err, offset));
                }
            }
            Err(pcap_parser::PcapError::BufferTooSmall) => {
                match u32_at(rdr.data(), 8, big_endian) {
                    Some(caplen) if caplen <= limit && cap < MAX_BUF => {
                        cap = buf_for(16 + caplen as usize).max(cap * 2);
                        rdr.grow(cap);
                        if rdr.refill().is_err() {
                            return Err(io_err(err, offset));
                        }
                    }
                    _ => return Err(legacy_len_error(rdr.data(), offset, big_endian, limit)),
                }
            }
            Err(pcap_parser::PcapError::ReadError) => return Err(io_err(err, offset)),
            Err(_) => return Err(legacy_len_error(rdr.data(), offset, big_endian, limit)),
        }
    }
}

fn absurd_caplen(offset: usize, caplen: u32, limit: u32) -> PcapError {
    PcapError::Invalid {
        what: "packet record",
        offset: offset as u64,
        detail: format!("captured length {caplen} exceeds the limit of {limit} bytes"),
    }
}

/// Explains why a legacy record at `offset` could not be read: too long, or cut short.
fn legacy_len_error(data: &[u8], offset: usize, big_endian: bool, limit: u32) -> PcapError {
    match u32_at(data, 8, big_endian) {
        None => PcapError::Truncated {
            what: "packet record header",
            offset: offset as u64,
            detail: format!("{} of 16 bytes", data.len().min(16)),
        },
        Some(caplen) if caplen > limit => absurd_caplen(offset, caplen, limit),
        Some(caplen) => PcapError::Truncated {
            what: "packet record",
            offset: offset as u64,
            detail: format!(
                "header says {caplen} bytes of packet data, only {} left in the file",
                data.len().saturating_sub(16)
            ),
        },
    }
}

/// One pcapng interface, as its IDB declared it.
struct Iface {
    link: Option<Link>,
    linktype: u32,
    /// FCS bytes at the end of each frame (`if_fcslen`), 0 when absent.
    fcs: u32,
    tsresol: u8,
    tsoffset_s: i64,
    decl_offset: usize,
}

/// Converts a pcapng timestamp in interface units to nanoseconds since the epoch.
fn ng_ts_ns(units: u64, tsresol: u8, tsoffset_s: i64) -> u64 {
    let u = units as u128;
    let ns: u128 = if tsresol & 0x80 != 0 {
        let k = (tsresol & 0x7f) as u32;
        if k >= 128 {
            0
        } else {
            (u * 1_000_000_000) >> k
        }
    } else {
        let k = tsresol as u32;
        if k <= 9 {
            u * 10u128.pow(9 - k)
        } else if k - 9 <= 38 {
            u / 10u128.pow(k - 9)
        } else {
            0
        }
    };
    let ns = ns as i128 + tsoffset_s as i128 * 1_000_000_000;
    ns.clamp(0, u64::MAX as i128) as u64
}

fn read_pcapng<R: Read>(
    full: FullRead<R>,
    mut cap: usize,
    err: &Rc<RefCell<Option<String>>>,
    sink: &mut impl Sink,
) -> Result<(), PcapError> {
    let mut rdr = match PcapNGReader::new(cap, full) {
        Ok(r) => r,
        Err(pcap_parser::PcapError::ReadError) => return Err(io_err(err, 0)),
        Err(pcap_parser::PcapError::Incomplete(_)) => {
            return Err(PcapError::Truncated {
                what: "pcapng section header block",
                offset: 0,
                detail: "the file ends inside its first block".into(),
            })
        }
        Err(e) => {
            return Err(PcapError::Invalid {
                what: "pcapng section header block",
                offset: 0,
                detail: format!("{e:?}"),
            })
        }
    };
    let mut ifaces: Vec<Iface> = Vec::new();
    let mut big_endian = false;
    let mut last_ts = 0u64;
    loop {
        let offset = rdr.consumed();
        let before = rdr.data().len();
        check_block_len(rdr.data(), offset, big_endian)?;
        match rdr.next() {
            Ok((len, PcapBlockOwned::NG(block))) => {
                match block {
                    Block::SectionHeader(shb) => {
                        ifaces.clear();
                        big_endian = shb.big_endian();
                    }
                    Block::InterfaceDescription(idb) => {
                        if ifaces.len() >= MAX_INTERFACES {
                            return Err(PcapError::Invalid {
                                what: "pcapng interface description block",
                                offset: offset as u64,
                                detail: format!("more than {MAX_INTERFACES} interfaces"),
                            });
                        }
                        let lt = idb.linktype.0 as u32;
                        sink.link_type(lt);
                        // pcap-parser reads if_tsoffset as little-endian whatever the section's
                        // byte order; take it from the raw option instead.
                        let tsoffset_s = idb
                            .options
                            .iter()
                            .find(|o| o.code == pcap_parser::pcapng::OptionCode::IfTsoffset)
                            .and_then(|o| o.value.get(..8))
                            .and_then(|v| <[u8; 8]>::try_from(v).ok())
                            .map(|b| {
                                if big_endian {
                                    i64::from_be_bytes(b)
                                } else {
                                    i64::from_le_bytes(b)
                                }
                            })
                            .unwrap_or(0);
                        let fcs = idb
                            .options
                            .iter()
                            .find(|o| o.code.0 == IF_FCSLEN)
                            .and_then(|o| o.value.first())
                            .map_or(0, |&b| b as u32);
                        ifaces.push(Iface {
                            link: Link::from_linktype(lt),
                            linktype: lt,
                            fcs,
                            tsresol: idb.if_tsresol,
                            tsoffset_s,
                            decl_offset: offset,
                        });
                    }
                    Block::EnhancedPacket(epb) => {
                        if epb.caplen > MAX_CAPLEN {
                            return Err(absurd_caplen(offset, epb.caplen, MAX_CAPLEN));
                        }
                        let Some(ifc) = ifaces.get(epb.if_id as usize) else {
                            let n = ifaces.len();
                            sink.warn(|| {
                                format!(
                                    "packet block at byte {offset} names interface {} but the \
                                     section declares {n}; skipped",
                                    epb.if_id
                                )
                            });
                            rdr.consume_noshift(len);
                            continue;
                        };
                        let link = iface_link(ifc, epb.if_id, offset)?;
                        let units = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
                        let ts_ns = ng_ts_ns(units, ifc.tsresol, ifc.tsoffset_s);
                        last_ts = ts_ns;
                        let data = pcap_parser::traits::PcapNGPacketBlock::packet_data(&epb);
                        let data = without_fcs(data, epb.origlen, ifc.fcs);
                        sink.packet(RawPacket {
                            ts_ns,
                            link,
                            data,
                            offset: offset as u64,
                        });
                    }
                    Block::SimplePacket(spb) => {
                        // A simple packet block has no timestamp; it inherits the last one.
                        let Some(ifc) = ifaces.first() else {
                            sink.warn(|| {
                                format!(
                                    "simple packet block at byte {offset} before any interface; \
                                     skipped"
                                )
                            });
                            rdr.consume_noshift(len);
                            continue;
                        };
                        let link = iface_link(ifc, 0, offset)?;
                        let data = pcap_parser::traits::PcapNGPacketBlock::packet_data(&spb);
                        if data.len() > MAX_CAPLEN as usize {
                            return Err(absurd_caplen(offset, data.len() as u32, MAX_CAPLEN));
                        }
                        let data = without_fcs(data, spb.origlen, ifc.fcs);
                        sink.packet(RawPacket {
                            ts_ns: last_ts,
                            link,
                            data,
                            offset: offset as u64,
                        });
                    }
                    _ => {}
                }
                rdr.consume_noshift(len);
            }
            Ok((len, _)) => rdr.consume_noshift(len),
            Err(pcap_parser::PcapError::Eof) => return Ok(()),
            Err(pcap_parser::PcapError::Incomplete(_)) => {
                if before >= cap {
                    return Err(ng_len_error(rdr.data(), offset, big_endian));
                }
                if rdr.refill().is_err() {
                    return Err(io_err(err, offset));
                }
            }
            Err(pcap_parser::PcapError::BufferTooSmall) => {
                match u32_at(rdr.data(), 4, big_endian) {
                    Some(blen) if blen <= MAX_BLOCK && cap < MAX_BUF => {
                        cap = buf_for(blen as usize).max(cap * 2);
                        rdr.grow(cap);
                        if rdr.refill().is_err() {
                            return Err(io_err(err, offset));
                        }
                    }
                    _ => return Err(ng_len_error(rdr.data(), offset, big_endian)),
                }
            }
            Err(pcap_parser::PcapError::ReadError) => return Err(io_err(err, offset)),
            Err(pcap_parser::PcapError::UnexpectedEof) => {
                return Err(ng_len_error(rdr.data(), offset, big_endian))
            }
            Err(e) => {
                let why = describe_parse_error(&e);
                let data = rdr.data();
                let btype = u32_at(data, 0, big_endian).unwrap_or(0);
                let blen = u32_at(data, 4, big_endian).unwrap_or(0);
                return Err(PcapError::Invalid {
                    what: "pcapng block",
                    offset: offset as u64,
                    detail: format!("block type 0x{btype:08x}, length {blen}: {why}"),
                });
            }
        }
    }
}

/// Rejects a pcapng block whose length field is impossible (below the 12 bytes of type and
/// two lengths, or not a multiple of 4) before `pcap-parser` sees it: some of its block parsers
/// subtract 12 from the length after checking a smaller minimum, which panics (debug builds)
/// or wraps (release builds) on such a block.
fn check_block_len(data: &[u8], offset: usize, big_endian: bool) -> Result<(), PcapError> {
    let Some(btype) = u32_at(data, 0, false) else {
        return Ok(());
    };
    let be = if btype == 0x0a0d_0d0a {
        // A section header declares its own byte order, after its length.
        match data.get(8..12) {
            Some(bom) => bom == [0x1a, 0x2b, 0x3c, 0x4d],
            None => return Ok(()),
        }
    } else {
        big_endian
    };
    match u32_at(data, 4, be) {
        Some(blen) if blen < 12 || !blen.is_multiple_of(4) => Err(PcapError::Invalid {
            what: "pcapng block",
            offset: offset as u64,
            detail: format!(
                "block type 0x{:08x}: length {blen} is not a multiple of 4 of at least 12",
                u32_at(data, 0, be).unwrap_or(btype)
            ),
        }),
        _ => Ok(()),
    }
}

fn describe_parse_error(e: &pcap_parser::PcapError<&[u8]>) -> String {
    match e {
        pcap_parser::PcapError::NomError(_, kind) => format!("malformed ({kind:?})"),
        pcap_parser::PcapError::OwnedNomError(_, kind) => format!("malformed ({kind:?})"),
        pcap_parser::PcapError::HeaderNotRecognized => "unrecognized header".into(),
        other => format!("{other:?}"),
    }
}

fn iface_link(ifc: &Iface, if_id: u32, offset: usize) -> Result<Link, PcapError> {
    ifc.link.ok_or_else(|| PcapError::UnsupportedLinkType {
        linktype: ifc.linktype,
        offset: offset as u64,
        context: format!(
            " (packet on interface {if_id}, declared by the interface description block at \
             byte {})",
            ifc.decl_offset
        ),
    })
}

/// Explains why a pcapng block at `offset` could not be read: too long, or cut short.
fn ng_len_error(data: &[u8], offset: usize, big_endian: bool) -> PcapError {
    let Some(blen) = u32_at(data, 4, big_endian) else {
        return PcapError::Truncated {
            what: "pcapng block header",
            offset: offset as u64,
            detail: format!("{} of 8 bytes", data.len().min(8)),
        };
    };
    if blen > MAX_BLOCK {
        return block_too_long(offset, blen);
    }
    if data.len() >= blen as usize {
        // The whole block is there: its content contradicts its length.
        return PcapError::Invalid {
            what: "pcapng block",
            offset: offset as u64,
            detail: format!(
                "block type 0x{:08x}, length {blen}: content does not fit the block",
                u32_at(data, 0, big_endian).unwrap_or(0)
            ),
        };
    }
    PcapError::Truncated {
        what: "pcapng block",
        offset: offset as u64,
        detail: format!(
            "block length {blen}, only {} bytes left in the file",
            data.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcapng_timestamp_resolutions() {
        assert_eq!(ng_ts_ns(1_500_000, 6, 0), 1_500_000_000);
        assert_eq!(ng_ts_ns(1_500_000_000, 9, 0), 1_500_000_000);
        assert_eq!(ng_ts_ns(3, 0x80 | 1, 0), 1_500_000_000);
        assert_eq!(ng_ts_ns(15, 1, 10), 11_500_000_000);
        assert_eq!(ng_ts_ns(123_456_789_012, 12, 0), 123_456_789);
        assert_eq!(ng_ts_ns(u64::MAX, 0, i64::MAX), u64::MAX);
        assert_eq!(ng_ts_ns(5, 0xff, 0), 0);
        assert_eq!(ng_ts_ns(5, 100, 0), 0);
    }
}
