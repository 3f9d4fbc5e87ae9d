//! Legacy pcap: one file header (link type, FCS length, timestamp precision, byte order,
//! snaplen), then packet records.

use super::record::{
    absurd_caplen, split_linktype, u32_at, without_fcs, Format, Link, RawPacket, Sink, MAX_CAPLEN,
};
use crate::error::PcapError;
use pcap_parser::{PcapBlockOwned, PcapHeader};

/// How far a legacy record's caplen may exceed the file's snaplen before the record is taken
/// for garbage: some writers store a smaller snaplen than they use (65535 with 65549-byte
/// loopback frames), so a little slack avoids rejecting real files.
const SNAPLEN_SLACK: u32 = 64 * 1024;

/// What the file header said, for reading its records.
pub(super) struct Legacy {
    link: Link,
    /// FCS bytes at the end of each frame, 0 when the header declares none.
    fcs: u32,
    nanos: bool,
    big_endian: bool,
    /// Largest caplen accepted: the snaplen with some slack, at most [`MAX_CAPLEN`].
    limit: u32,
}

impl Default for Legacy {
    fn default() -> Self {
        Legacy {
            link: Link::Ethernet,
            fcs: 0,
            nanos: false,
            big_endian: false,
            limit: MAX_CAPLEN,
        }
    }
}

impl Legacy {
    fn header(&mut self, h: &PcapHeader, sink: &mut impl Sink) -> Result<(), PcapError> {
        let (lt, f) = split_linktype(h.network.0 as u32);
        self.fcs = f;
        sink.link_type(lt);
        self.link = Link::from_linktype(lt).ok_or(PcapError::UnsupportedLinkType {
            linktype: lt,
            offset: 20,
            context: " (pcap file header)".into(),
        })?;
        self.nanos = h.is_nanosecond_precision();
        self.big_endian = h.is_bigendian();
        if h.snaplen > 0 {
            self.limit = MAX_CAPLEN.min(h.snaplen.saturating_add(SNAPLEN_SLACK));
        }
        Ok(())
    }
}

impl Format for Legacy {
    #[inline]
    fn record(
        &mut self,
        block: PcapBlockOwned<'_>,
        offset: usize,
        sink: &mut impl Sink,
    ) -> Result<(), PcapError> {
        match block {
            PcapBlockOwned::LegacyHeader(h) => self.header(&h, sink),
            PcapBlockOwned::Legacy(b) => {
                if b.caplen > self.limit {
                    return Err(absurd_caplen(offset, b.caplen, self.limit));
                }
                let frac = if self.nanos {
                    b.ts_usec as u64
                } else {
                    b.ts_usec as u64 * 1000
                };
                let ts_ns = (b.ts_sec as u64) * 1_000_000_000 + frac;
                sink.packet(RawPacket {
                    ts_ns,
                    link: self.link,
                    data: without_fcs(b.data, b.origlen, self.fcs),
                    offset: offset as u64,
                });
                Ok(())
            }
            PcapBlockOwned::NG(_) => Ok(()),
        }
    }

    fn needs(&self, data: &[u8]) -> Option<usize> {
        // 16 bytes of record header, then the captured bytes.
        u32_at(data, 8, self.big_endian)
            .filter(|&caplen| caplen <= self.limit)
            .map(|caplen| 16 + caplen as usize)
    }

    /// Too long, or cut short; a legacy record has no structure beyond its lengths, so the
    /// parser's complaint adds nothing.
    fn bad_record(&self, data: &[u8], offset: usize, _why: Option<String>) -> PcapError {
        let limit = self.limit;
        match u32_at(data, 8, self.big_endian) {
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
}
