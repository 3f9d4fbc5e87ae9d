//! Length-prefixed framing of [`Message`]s.
//!
//! Written by hand because it is twelve lines: a `u32` length and a JSON body. The interesting
//! part is what it refuses (oversized, empty, non-JSON frames) and that it never allocates
//! before checking the length against the cap.

use std::io::{self, Read, Write};

use crate::message::Message;

/// Largest control-protocol frame (its payload) a peer may send. Control messages are small
/// (a result with two environment fingerprints is a few KiB); 1 MiB leaves room while
/// bounding memory per connection. Not the workloads' I/O size cap ([`crate::MAX_IO_SIZE`]).
pub const MAX_CONTROL_FRAME: u32 = 1 << 20;

/// Why a frame could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The peer closed the connection cleanly before a frame started.
    #[error("connection closed by peer")]
    Closed,
    /// The announced length exceeds [`MAX_CONTROL_FRAME`].
    #[error("message of {len} bytes exceeds the {max}-byte limit")]
    TooLarge {
        /// Announced payload length.
        len: u32,
        /// The cap in force.
        max: u32,
    },
    /// A zero-length frame: never produced by a correct peer.
    #[error("empty message")]
    Empty,
    /// The payload is not a valid message.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The transport failed (includes read timeouts, reported as `WouldBlock`/`TimedOut`).
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl WireError {
    /// True when the error is a receive timeout on the underlying socket.
    pub fn is_timeout(&self) -> bool {
        matches!(self, WireError::Io(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }
}

/// Encodes a message as one frame (length prefix included).
pub fn encode(msg: &Message) -> Vec<u8> {
    // Serializing our own enum to a Vec cannot fail: no maps with non-string keys, no I/O.
    let body = serde_json::to_vec(msg).unwrap_or_else(|e| {
        format!("{{\"type\":\"error\",\"message\":\"encode failed: {e}\"}}").into_bytes()
    });
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Decodes one frame from the front of `buf`.
///
/// Returns `Ok(None)` when `buf` holds only part of a frame, otherwise the message and the
/// number of bytes consumed. This is the pure core shared by [`read_message`] and the fuzz
/// target.
pub fn decode_frame(buf: &[u8]) -> Result<Option<(Message, usize)>, WireError> {
    let Some(head) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
    check_len(len)?;
    let end = 4 + len as usize;
    let Some(body) = buf.get(4..end) else {
        return Ok(None);
    };
    Ok(Some((parse_body(body)?, end)))
}

fn check_len(len: u32) -> Result<(), WireError> {
    check_len_max(len, MAX_CONTROL_FRAME)
}

fn check_len_max(len: u32, max: u32) -> Result<(), WireError> {
    if len == 0 {
        return Err(WireError::Empty);
    }
    if len > max {
        return Err(WireError::TooLarge { len, max });
    }
    Ok(())
}

/// Bytes a side's report may take per flow of the test on top of [`MAX_CONTROL_FRAME`]: a
/// flow's counts are well under this (a UDP flow's, the largest, about 250 bytes of JSON).
pub const REPORT_BYTES_PER_FLOW: u32 = 512;

/// The largest frame a side's report of a test with `flows` flows may take: a client
/// reading an agent's report allows this much, and an agent never sends more. It grows
/// with the flows the client itself asked for, so a stranger's frame stays bounded.
pub fn report_limit(flows: u32) -> u32 {
    MAX_CONTROL_FRAME.saturating_add(flows.saturating_mul(REPORT_BYTES_PER_FLOW))
}

fn parse_body(body: &[u8]) -> Result<Message, WireError> {
    serde_json::from_slice(body).map_err(|e| WireError::Malformed(e.to_string()))
}

/// Reads exactly one message. A clean EOF before the first byte is [`WireError::Closed`].
pub fn read_message<R: Read>(r: &mut R) -> Result<Message, WireError> {
    read_message_max(r, MAX_CONTROL_FRAME)
}

/// Like [`read_message`], with a frame of up to `max` bytes allowed (see [`report_limit`]).
pub fn read_message_max<R: Read>(r: &mut R, max: u32) -> Result<Message, WireError> {
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Err(WireError::Closed),
            Ok(0) => return Err(WireError::Io(io::ErrorKind::UnexpectedEof.into())),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    let len = u32::from_be_bytes(head);
    check_len_max(len, max)?;
    let mut body = vec![0u8; len as usize];
    r.read_exact(&mut body)?;
    parse_body(&body)
}

/// Reads one message of at most `max` bytes from `s`, all of which must arrive within
/// `timeout`: the socket's receive timeout is set to the time left before every read, so a
/// peer that trickles bytes (one every few seconds) cannot stretch the wait the way a
/// per-read timeout lets it. Past the deadline: a timeout ([`WireError::is_timeout`]).
pub fn read_message_within(
    s: &std::net::TcpStream,
    timeout: std::time::Duration,
    max: u32,
) -> Result<Message, WireError> {
    let mut r = ByDeadline {
        s,
        deadline: std::time::Instant::now() + timeout,
    };
    read_message_max(&mut r, max)
}

/// A reader that gives a whole message one deadline (see [`read_message_within`]).
struct ByDeadline<'a> {
    s: &'a std::net::TcpStream,
    deadline: std::time::Instant,
}

impl Read for ByDeadline<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self
            .deadline
            .saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        self.s.set_read_timeout(Some(left))?;
        let mut s = self.s;
        s.read(buf)
    }
}

/// Writes one message as a single frame.
pub fn write_message<W: Write>(w: &mut W, msg: &Message) -> Result<(), WireError> {
    write_message_max(w, msg, MAX_CONTROL_FRAME)
}

/// Writes one message of at most `max` bytes; a larger one is not sent (the peer would
/// refuse it as another protocol) but fails here with [`WireError::TooLarge`].
pub fn write_message_max<W: Write>(w: &mut W, msg: &Message, max: u32) -> Result<(), WireError> {
    let frame = encode(msg);
    let len = u32::try_from(frame.len() - 4).unwrap_or(u32::MAX);
    if len > max {
        return Err(WireError::TooLarge { len, max });
    }
    w.write_all(&frame)?;
    w.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_through_reader() {
        let msgs = [
            Message::Start,
            Message::Ready {
                data_port: 4242,
                key: "00".repeat(16),
            },
            Message::Error {
                message: "nope".into(),
            },
        ];
        let mut buf = Vec::new();
        for m in &msgs {
            write_message(&mut buf, m).unwrap();
        }
        let mut r = &buf[..];
        for m in &msgs {
            assert_eq!(&read_message(&mut r).unwrap(), m);
        }
        assert!(matches!(read_message(&mut r), Err(WireError::Closed)));
    }

    #[test]
    fn partial_frames_need_more_bytes() {
        let frame = encode(&Message::Stop);
        for cut in 0..frame.len() {
            assert!(decode_frame(&frame[..cut]).unwrap().is_none(), "cut {cut}");
        }
        let (m, used) = decode_frame(&frame).unwrap().unwrap();
        assert_eq!(m, Message::Stop);
        assert_eq!(used, frame.len());
    }

    #[test]
    fn oversized_length_is_refused_before_allocation() {
        let buf = [0xff, 0xff, 0xff, 0xff];
        assert!(matches!(
            read_message(&mut &buf[..]),
            Err(WireError::TooLarge { len: u32::MAX, .. })
        ));
        assert!(matches!(
            decode_frame(&buf),
            Err(WireError::TooLarge { .. })
        ));
    }

    #[test]
    fn garbage_and_unknown_types_are_malformed() {
        for body in [
            &b"not json"[..],
            br#"{"type":"launch_missiles"}"#,
            b"{}",
            b"[1,2]",
        ] {
            let mut buf = (body.len() as u32).to_be_bytes().to_vec();
            buf.extend_from_slice(body);
            assert!(
                matches!(read_message(&mut &buf[..]), Err(WireError::Malformed(_))),
                "{body:?}"
            );
        }
        assert!(matches!(decode_frame(&[0, 0, 0, 0]), Err(WireError::Empty)));
    }

    #[test]
    fn truncated_body_is_an_io_error_not_a_hang() {
        let mut frame = encode(&Message::Start);
        frame.truncate(frame.len() - 1);
        assert!(matches!(
            read_message(&mut &frame[..]),
            Err(WireError::Io(_))
        ));
    }
}

/// Every file kept by the fuzzer (corpus seeds and crash reproducers) must still decode
/// without panicking: crashes found once stay fixed.
#[cfg(test)]
mod fuzz_regressions {
    use super::*;

    #[test]
    fn fuzz_corpus_and_regressions_decode_without_panic() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
        let mut seen = 0;
        for dir in ["corpus/wire_decode", "regressions/wire_decode"] {
            let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
                continue;
            };
            for e in entries.flatten() {
                let data = std::fs::read(e.path()).unwrap();
                let mut rest = &data[..];
                while let Ok(Some((_, used))) = decode_frame(rest) {
                    rest = &rest[used..];
                }
                let mut r = &data[..];
                while read_message(&mut r).is_ok() {}
                seen += 1;
            }
        }
        assert!(seen >= 8, "fuzz corpus missing: only {seen} files");
    }

    #[test]
    fn corpus_seeds_are_valid_messages() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/wire_decode");
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            if e.file_name().to_string_lossy().starts_with("seed") {
                let data = std::fs::read(e.path()).unwrap();
                assert!(decode_frame(&data).unwrap().is_some(), "{:?}", e.path());
            }
        }
    }

    /// A peer that trickles a frame (a byte every 100 ms) gets one deadline for all of it:
    /// the read times out at 300 ms, where a per-read timeout of 300 ms would wait as long
    /// as the trickle lasts. A whole frame within the deadline is read.
    #[test]
    fn a_trickled_frame_gets_one_deadline() {
        use std::time::{Duration, Instant};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut a, _) = l.accept().expect("accept");
        let frame = encode(&Message::Start);
        let writer = std::thread::spawn(move || {
            a.write_all(&frame).expect("whole frame");
            a.write_all(&100u32.to_be_bytes()).expect("head");
            for _ in 0..30 {
                if a.write_all(b"{").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let max = MAX_CONTROL_FRAME;
        let got = read_message_within(&c, Duration::from_secs(5), max).expect("whole frame");
        assert_eq!(got, Message::Start);
        let t0 = Instant::now();
        let e = read_message_within(&c, Duration::from_millis(300), max).expect_err("trickle");
        let took = t0.elapsed();
        assert!(e.is_timeout(), "{e}");
        assert!(took < Duration::from_millis(1500), "{took:?}");
        drop(c);
        writer.join().expect("writer");
    }
}
