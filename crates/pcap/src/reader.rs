//! Capture file reading: legacy pcap and pcapng through `pcap-parser`'s streaming readers, with
//! the checks the analyzer needs on top (length caps, byte offsets in every error, timestamps
//! normalized to nanoseconds, link types mapped to the decoders this crate has).
//!
//! Memory: one read buffer of [`INITIAL_BUF`] bytes, doubled only when a record or block does
//! not fit, and never beyond [`MAX_BUF`]: a packet longer than [`MAX_CAPLEN`] or a pcapng block
//! longer than [`MAX_BLOCK`] is an error, so no length read from the file sizes an allocation
//! beyond those caps.
//!
//! One record loop ([`read_records`]) drives both formats: what differs between them (the
//! header, per-interface state, length limits, error texts) is behind [`Format`], implemented
//! in `legacy.rs` and `pcapng.rs`.

mod legacy;
mod pcapng;
mod record;

use record::{block_too_long, u32_at, Format};
pub use record::{Link, RawPacket, Sink, INITIAL_BUF, MAX_BLOCK, MAX_BUF, MAX_CAPLEN};

use crate::error::PcapError;
use pcap_parser::traits::PcapReaderIterator;
use pcap_parser::{LegacyPcapReader, PcapNGReader};
use std::cell::RefCell;
use std::io::{ErrorKind, Read};
use std::rc::Rc;

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
            let rdr = opened(
                PcapNGReader::new(cap, full),
                "pcapng section header block",
                "the file ends inside its first block",
                &err,
            )?;
            read_records(rdr, cap, &err, &mut pcapng::PcapNg::default(), sink)
        }
        0xa1b2_c3d4 | 0xd4c3_b2a1 | 0xa1b2_3c4d | 0x4d3c_b2a1 | 0xa1b2_cd34 => {
            let rdr = opened(
                LegacyPcapReader::new(INITIAL_BUF, full),
                "file header",
                "a pcap file header is 24 bytes",
                &err,
            )?;
            read_records(rdr, INITIAL_BUF, &err, &mut legacy::Legacy::default(), sink)
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

/// The result of creating a `pcap-parser` reader, which parses the file header (or the first
/// pcapng block, `what`) at once; `cut` says what a file that ends inside it lacks.
fn opened<T>(
    made: Result<T, pcap_parser::PcapError<&'static [u8]>>,
    what: &'static str,
    cut: &str,
    err: &Rc<RefCell<Option<String>>>,
) -> Result<T, PcapError> {
    match made {
        Ok(r) => Ok(r),
        Err(pcap_parser::PcapError::ReadError) => Err(io_err(err, 0)),
        Err(pcap_parser::PcapError::Incomplete(_)) => Err(PcapError::Truncated {
            what,
            offset: 0,
            detail: cut.into(),
        }),
        Err(e) => Err(PcapError::Invalid {
            what,
            offset: 0,
            detail: format!("{e:?}"),
        }),
    }
}

/// The record loop, for both formats: hands each record to `fmt`, grows the buffer (from
/// `cap` bytes, never beyond [`MAX_BUF`]) when a record does not fit, and turns the parser's
/// errors into errors that say where and why.
fn read_records<P: PcapReaderIterator, F: Format>(
    mut rdr: P,
    mut cap: usize,
    err: &Rc<RefCell<Option<String>>>,
    fmt: &mut F,
    sink: &mut impl Sink,
) -> Result<(), PcapError> {
    // Records are consumed without shifting the buffer (`consume_noshift`): the buffer is
    // compacted only when it runs dry (`refill` moves the partial record left), instead of
    // every half buffer, which copied the whole file once more through memmove.
    loop {
        let offset = rdr.consumed();
        let before = rdr.data().len();
        fmt.check(rdr.data(), offset)?;
        match rdr.next() {
            Ok((len, block)) => {
                fmt.record(block, offset, sink)?;
                rdr.consume_noshift(len);
            }
            Err(pcap_parser::PcapError::Eof) => return Ok(()),
            Err(pcap_parser::PcapError::Incomplete(_)) => {
                // A full buffer that still does not hold the record: the parser should have
                // said BufferTooSmall; refuse rather than loop.
                if before >= cap {
                    return Err(fmt.bad_record(rdr.data(), offset, None));
                }
                if rdr.refill().is_err() {
                    return Err(io_err(err, offset));
                }
            }
            Err(pcap_parser::PcapError::BufferTooSmall) => match fmt.needs(rdr.data()) {
                Some(need) if cap < MAX_BUF => {
                    cap = buf_for(need).max(cap * 2);
                    rdr.grow(cap);
                    if rdr.refill().is_err() {
                        return Err(io_err(err, offset));
                    }
                }
                _ => return Err(fmt.bad_record(rdr.data(), offset, None)),
            },
            Err(pcap_parser::PcapError::ReadError) => return Err(io_err(err, offset)),
            Err(e) => {
                let why = match e {
                    pcap_parser::PcapError::UnexpectedEof => None,
                    e => Some(describe_parse_error(&e)),
                };
                return Err(fmt.bad_record(rdr.data(), offset, why));
            }
        }
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
