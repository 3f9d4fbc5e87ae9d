//! pcapng: sections, each declaring interfaces (link type, FCS length, timestamp resolution
//! and offset), and packet blocks that name their interface.

use super::record::{
    absurd_caplen, block_too_long, u32_at, without_fcs, Format, Link, RawPacket, Sink, MAX_BLOCK,
    MAX_CAPLEN,
};
use crate::error::PcapError;
use pcap_parser::pcapng::{
    Block, EnhancedPacketBlock, InterfaceDescriptionBlock, OptionCode, SimplePacketBlock,
};
use pcap_parser::traits::PcapNGPacketBlock;
use pcap_parser::PcapBlockOwned;

/// Most interfaces accepted in one pcapng section; each costs a few bytes of memory and a file
/// could otherwise declare millions.
const MAX_INTERFACES: usize = 4096;
/// pcapng `if_fcslen` option: FCS bytes at the end of each of the interface's frames.
const IF_FCSLEN: u16 = 13;

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

/// The current section's state, for reading its blocks.
#[derive(Default)]
pub(super) struct PcapNg {
    ifaces: Vec<Iface>,
    big_endian: bool,
    /// The last enhanced packet's timestamp, which simple packets inherit.
    last_ts: u64,
}

impl Format for PcapNg {
    #[inline]
    fn check(&self, data: &[u8], offset: usize) -> Result<(), PcapError> {
        check_block_len(data, offset, self.big_endian)
    }

    #[inline]
    fn record(
        &mut self,
        block: PcapBlockOwned<'_>,
        offset: usize,
        sink: &mut impl Sink,
    ) -> Result<(), PcapError> {
        let PcapBlockOwned::NG(block) = block else {
            return Ok(());
        };
        match block {
            Block::SectionHeader(shb) => {
                self.ifaces.clear();
                self.big_endian = shb.big_endian();
                Ok(())
            }
            Block::InterfaceDescription(idb) => self.interface(&idb, offset, sink),
            Block::EnhancedPacket(epb) => self.enhanced(&epb, offset, sink),
            Block::SimplePacket(spb) => self.simple(&spb, offset, sink),
            _ => Ok(()),
        }
    }

    fn needs(&self, data: &[u8]) -> Option<usize> {
        u32_at(data, 4, self.big_endian)
            .filter(|&blen| blen <= MAX_BLOCK)
            .map(|blen| blen as usize)
    }

    fn bad_record(&self, data: &[u8], offset: usize, why: Option<String>) -> PcapError {
        let big_endian = self.big_endian;
        match why {
            None => ng_len_error(data, offset, big_endian),
            Some(why) => {
                let btype = u32_at(data, 0, big_endian).unwrap_or(0);
                let blen = u32_at(data, 4, big_endian).unwrap_or(0);
                PcapError::Invalid {
                    what: "pcapng block",
                    offset: offset as u64,
                    detail: format!("block type 0x{btype:08x}, length {blen}: {why}"),
                }
            }
        }
    }
}

impl PcapNg {
    fn interface(
        &mut self,
        idb: &InterfaceDescriptionBlock<'_>,
        offset: usize,
        sink: &mut impl Sink,
    ) -> Result<(), PcapError> {
        if self.ifaces.len() >= MAX_INTERFACES {
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
        let big_endian = self.big_endian;
        let tsoffset_s = idb
            .options
            .iter()
            .find(|o| o.code == OptionCode::IfTsoffset)
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
        self.ifaces.push(Iface {
            link: Link::from_linktype(lt),
            linktype: lt,
            fcs,
            tsresol: idb.if_tsresol,
            tsoffset_s,
            decl_offset: offset,
        });
        Ok(())
    }

    #[inline]
    fn enhanced(
        &mut self,
        epb: &EnhancedPacketBlock<'_>,
        offset: usize,
        sink: &mut impl Sink,
    ) -> Result<(), PcapError> {
        if epb.caplen > MAX_CAPLEN {
            return Err(absurd_caplen(offset, epb.caplen, MAX_CAPLEN));
        }
        let Some(ifc) = self.ifaces.get(epb.if_id as usize) else {
            let n = self.ifaces.len();
            sink.warn(|| {
                format!(
                    "packet block at byte {offset} names interface {} but the \
                     section declares {n}; skipped",
                    epb.if_id
                )
            });
            return Ok(());
        };
        let link = iface_link(ifc, epb.if_id, offset)?;
        let units = ((epb.ts_high as u64) << 32) | epb.ts_low as u64;
        let ts_ns = ng_ts_ns(units, ifc.tsresol, ifc.tsoffset_s);
        self.last_ts = ts_ns;
        let data = without_fcs(epb.packet_data(), epb.origlen, ifc.fcs);
        sink.packet(RawPacket {
            ts_ns,
            link,
            data,
            offset: offset as u64,
        });
        Ok(())
    }

    fn simple(
        &mut self,
        spb: &SimplePacketBlock<'_>,
        offset: usize,
        sink: &mut impl Sink,
    ) -> Result<(), PcapError> {
        // A simple packet block has no timestamp; it inherits the last one.
        let Some(ifc) = self.ifaces.first() else {
            sink.warn(|| {
                format!("simple packet block at byte {offset} before any interface; skipped")
            });
            return Ok(());
        };
        let link = iface_link(ifc, 0, offset)?;
        let data = spb.packet_data();
        if data.len() > MAX_CAPLEN as usize {
            return Err(absurd_caplen(offset, data.len() as u32, MAX_CAPLEN));
        }
        let data = without_fcs(data, spb.origlen, ifc.fcs);
        sink.packet(RawPacket {
            ts_ns: self.last_ts,
            link,
            data,
            offset: offset as u64,
        });
        Ok(())
    }
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
