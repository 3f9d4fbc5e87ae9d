//! Streaming TCP analysis of packet captures.
//!
//! Reads legacy pcap (either byte order, microsecond or nanosecond timestamps) and pcapng
//! (several interfaces, per-interface timestamp resolution and offset), decodes Ethernet
//! (with 802.1Q/802.1ad tags), Linux cooked (SLL, SLL2), raw IPv4/IPv6 and BSD loopback
//! frames, IPv4 with options and IPv6 with extension headers, and reports per TCP connection:
//! packets and payload bytes each way, unique vs retransmitted bytes, out-of-order and
//! zero-window counts, handshake timing, tcptrace-style data→ACK round trips and the response
//! latency of each endpoint as gPXE's `tcp_stats.py` measured it (see [`render_seed0`]).
//!
//! # Memory bound
//!
//! Memory is bounded by the number of connections open at once, not by the capture's size:
//!
//! - one read buffer of [`INITIAL_BUF`] (64 KiB), doubled only while a record does not
//!   fit and never beyond [`MAX_BUF`] (2 MiB): a packet longer than
//!   [`MAX_CAPLEN`] or a pcapng block longer than [`MAX_BLOCK`] is an error, so
//!   no length read from the file sizes an allocation beyond those caps;
//! - per connection in the table, a fixed part of a few hundred bytes, plus at most
//!   [`PENDING_CAP`] unacknowledged segments per direction (24 bytes each) and two
//!   latency recorders of at most [`EXACT_SAMPLES`] `u64` or 15 KiB of histogram each: under
//!   150 KiB in the worst case, typically under 1 KiB;
//! - a connection leaves the table, and is handed to the caller, when it has been closed (FIN
//!   both ways or RST) and quiet for [`Options::close_linger_s`] (capture time), when a new
//!   SYN or a sequence jump shows another connection on its 4-tuple, when it has been idle for
//!   [`Options::idle_timeout_s`] if that is set, or at the end of the capture.
//!
//! Without an idle timeout (the default, as in tshark and tcptrace: a quiet connection is
//! still the same connection) a connection that never closes stays in the table to the end,
//! so a capture of very many unclosed connections (a SYN scan) holds all of them; an idle
//! timeout bounds that. [`Summary::peak_open_connections`] reports the high-water mark of the
//! table.
//!
//! # Captures cut short
//!
//! A capture that ends mid-record (tcpdump killed, disk full) or turns to garbage is analyzed
//! up to that record: [`Analyzer::analyze_reader`] returns the summary with
//! [`Summary::stopped`] saying where and why, and fails only when not one packet could be read.
//!
//! # Example
//!
//! ```no_run
//! let (conns, summary) = virtperf_pcap::analyze_file("trace.pcap", Default::default())?;
//! print!("{}", virtperf_pcap::render_seed0(&conns));
//! eprintln!("{} packets, {} TCP", summary.packets, summary.tcp_packets);
//! # Ok::<(), virtperf_pcap::PcapError>(())
//! ```

#![warn(missing_docs)]

mod decode;
mod error;
mod flow;
mod hist;
mod model;
mod reader;
mod render;

pub use error::{FilterError, PcapError};
pub use flow::PENDING_CAP;
pub use hist::{EXACT_SAMPLES, MAX_BUCKETS};
pub use model::{
    round_ns, Connection, EndReason, Endpoint, Handshake, LatencyStats, RttStats, SideStats,
    Stopped, Summary,
};
pub use reader::{INITIAL_BUF, MAX_BLOCK, MAX_BUF, MAX_CAPLEN};
pub use render::{duration, render_csv, render_seed0, render_seed0_with, Column};

use decode::{decode, Decoded, Segment, ACK, RST, SYN};
use flow::{Conn, Key};
use reader::{RawPacket, Sink};
use rustc_hash::FxHashMap;
use std::io::Read;
use std::net::IpAddr;
use std::path::Path;

/// Warnings kept verbatim in [`Summary::warnings`]; the rest are only counted.
pub const MAX_WARNINGS: usize = 20;

/// What to analyze and when to let go of connections.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Keep only connections with this port on either side.
    pub filter_port: Option<u16>,
    /// Keep only connections with this address on either side.
    pub filter_host: Option<IpAddr>,
    /// A connection with no packet for this long (capture time, seconds) is finalized as idle
    /// and a later packet starts a new one. `None` (the default): silence never splits a
    /// connection, only a new SYN after FIN/RST or a sequence jump does.
    pub idle_timeout_s: Option<f64>,
    /// A closed connection (FIN both ways, or RST) stays in the table this long after its last
    /// packet, so the final ACK or a retransmitted FIN still lands in it rather than starting
    /// a new, partial connection.
    pub close_linger_s: f64,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            filter_port: None,
            filter_host: None,
            idle_timeout_s: None,
            close_linger_s: 1.0,
        }
    }
}

impl Options {
    /// Sets the filters from a small subset of tcpdump's syntax: `port N`, `host ADDR`, both
    /// joined by `and`, optionally preceded by `tcp`. An empty expression clears nothing and
    /// is accepted.
    pub fn apply_filter(&mut self, expr: &str) -> Result<(), FilterError> {
        let bad = |reason: String| FilterError {
            expr: expr.to_string(),
            reason,
        };
        let mut words = expr.split_whitespace().peekable();
        if words.peek() == Some(&"tcp") {
            words.next();
            if words.peek() == Some(&"and") {
                words.next();
            }
        }
        let mut expect_term = true;
        while let Some(w) = words.next() {
            if !expect_term {
                if w != "and" {
                    return Err(bad(format!("expected `and`, found `{w}`")));
                }
                expect_term = true;
                continue;
            }
            let arg = words
                .next()
                .ok_or_else(|| bad(format!("`{w}` needs a value")))?;
            match w {
                "port" => {
                    self.filter_port = Some(
                        arg.parse()
                            .map_err(|_| bad(format!("`{arg}` is not a port number")))?,
                    )
                }
                "host" => {
                    self.filter_host = Some(
                        arg.parse()
                            .map_err(|_| bad(format!("`{arg}` is not an IP address")))?,
                    )
                }
                _ => {
                    return Err(bad(format!(
                        "unsupported primitive `{w}` (only `port N` and `host ADDR`)"
                    )))
                }
            }
            expect_term = false;
        }
        if expect_term && expr.split_whitespace().count() > 1 {
            return Err(bad("dangling `and`".into()));
        }
        Ok(())
    }
}

fn secs_to_ns(s: f64) -> u64 {
    // NaN and negatives become 0; +inf saturates.
    (s.max(0.0) * 1e9) as u64
}

/// The streaming analyzer. One instance can analyze several captures, one after the other;
/// each call starts from an empty connection table.
#[derive(Debug)]
pub struct Analyzer {
    opts: Options,
    host: Option<(u128, bool)>,
    idle_ns: u64,
    linger_ns: u64,
    sweep_every_ns: u64,
    /// Boxed: a `Conn` is several hundred bytes, and the table, sweeps and sorts move entries.
    table: FxHashMap<Key, Box<Conn>>,
    next_id: u64,
    /// Latest packet timestamp so far (capture time "now"), ns.
    now: u64,
    /// Earliest packet timestamp so far, ns.
    first_ts: u64,
    /// The previous record's timestamp, ns.
    prev_ts: u64,
    next_sweep: u64,
    summary: Summary,
    /// Negative response gaps and round trips over the connections emitted so far.
    neg_resp: u64,
    neg_rtt: u64,
}

impl Analyzer {
    /// An analyzer with these options.
    pub fn new(opts: Options) -> Self {
        let host = opts.filter_host.map(|ip| match ip {
            IpAddr::V4(v4) => (u32::from(v4) as u128, false),
            IpAddr::V6(v6) => (u128::from(v6), true),
        });
        // No timeout: a quiet time above u64::MAX ns never happens.
        let idle_ns = opts.idle_timeout_s.map_or(u64::MAX, secs_to_ns);
        let linger_ns = secs_to_ns(opts.close_linger_s);
        Analyzer {
            // A sweep is a pass over the table: run one per quarter of the shorter timeout of
            // capture time (but not more often than every millisecond), so the table holds at
            // most ~1.25 timeouts' worth of finished connections.
            sweep_every_ns: (idle_ns.min(linger_ns) / 4).max(1_000_000),
            opts,
            host,
            idle_ns,
            linger_ns,
            table: FxHashMap::default(),
            next_id: 0,
            now: 0,
            first_ts: u64::MAX,
            prev_ts: 0,
            next_sweep: 0,
            summary: Summary::default(),
            neg_resp: 0,
            neg_rtt: 0,
        }
    }

    /// The options this analyzer was made with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Analyzes a capture read from `r`, calling `on_conn` for each connection as it is
    /// finalized (closed, idle, reused) and for every remaining one at the end, in creation
    /// order within each batch.
    ///
    /// A capture that cannot be read to its end (cut mid-record, garbage, a read error) is
    /// analyzed up to the record that failed: the connections still open are flushed to
    /// `on_conn` (ended `eof`) and the summary says where and why in [`Summary::stopped`]. An
    /// error is returned only when not a single packet could be read (not a capture, a broken
    /// file header, the first record cut); the connections flushed are then none.
    pub fn analyze_reader<R: Read>(
        &mut self,
        r: R,
        mut on_conn: impl FnMut(Connection),
    ) -> Result<Summary, PcapError> {
        self.table.clear();
        self.next_id = 0;
        self.now = 0;
        self.first_ts = u64::MAX;
        self.prev_ts = 0;
        self.next_sweep = 0;
        self.summary = Summary::default();
        self.neg_resp = 0;
        self.neg_rtt = 0;
        let result = {
            let mut run = Run {
                an: self,
                on_conn: &mut on_conn,
            };
            reader::read_capture(r, &mut run)
        };
        self.flush(model::EndReason::Eof, &mut on_conn);
        let result = match result {
            Err(e) if self.summary.packets > 0 => {
                self.summary.stopped = Some(model::Stopped {
                    offset: e.offset().unwrap_or(0),
                    error: e.to_string(),
                });
                Ok(())
            }
            r => r,
        };
        if self.summary.backwards_timestamps > 0 {
            let (n, resp, rtt) = (
                self.summary.backwards_timestamps,
                self.neg_resp,
                self.neg_rtt,
            );
            self.warn(|| {
                format!(
                    "{n} packet timestamps are earlier than the packet's before them (usual on \
                     loopback); {resp} negative response gaps and {rtt} negative round trips \
                     were left out of the statistics"
                )
            });
        }
        if self.summary.packets > 0 {
            self.summary.first_ts = Some(self.first_ts as f64 * 1e-9);
            self.summary.last_ts = Some(self.now as f64 * 1e-9);
        }
        if self.summary.warnings_total > self.summary.warnings.len() as u64 {
            let more = self.summary.warnings_total - self.summary.warnings.len() as u64;
            self.summary
                .warnings
                .push(format!("… and {more} more warnings"));
        }
        result.map(|()| std::mem::take(&mut self.summary))
    }

    fn flush(&mut self, cause: EndReason, on_conn: &mut impl FnMut(Connection)) {
        let mut rest: Vec<Box<Conn>> = self.table.drain().map(|(_, c)| c).collect();
        rest.sort_unstable_by_key(|c| c.id);
        for c in rest {
            self.emit(c.finish(cause), on_conn);
        }
    }

    fn emit(&mut self, c: Connection, on_conn: &mut impl FnMut(Connection)) {
        self.summary.connections += 1;
        self.neg_resp += c.from_a.response.negative_gaps + c.from_b.response.negative_gaps;
        self.neg_rtt += c.from_a.rtt.negative_gaps + c.from_b.rtt.negative_gaps;
        on_conn(c);
    }

    fn warn(&mut self, msg: impl FnOnce() -> String) {
        self.summary.warnings_total += 1;
        if self.summary.warnings.len() < MAX_WARNINGS {
            self.summary.warnings.push(msg());
        }
    }

    /// Finalizes connections that are closed and lingered, or idle.
    fn sweep(&mut self, on_conn: &mut impl FnMut(Connection)) {
        let now = self.now;
        let (idle, linger) = (self.idle_ns, self.linger_ns);
        let mut done: Vec<Box<Conn>> = self
            .table
            .extract_if(|_, c| expired(c, now, idle, linger))
            .map(|(_, c)| c)
            .collect();
        done.sort_unstable_by_key(|c| c.id);
        for c in done {
            self.emit(c.finish(EndReason::Idle), on_conn);
        }
    }

    #[inline]
    fn keep(&self, s: &Segment) -> bool {
        if let Some(p) = self.opts.filter_port {
            if s.sport != p && s.dport != p {
                return false;
            }
        }
        if let Some((ip, v6)) = self.host {
            if s.v6 != v6 || (s.src != ip && s.dst != ip) {
                return false;
            }
        }
        true
    }

    #[inline]
    fn segment(&mut self, s: &Segment, ts: u64, on_conn: &mut impl FnMut(Connection)) {
        let from_lo = Key::from_lo(s);
        let key = Key::of(s, from_lo);
        let syn_only = s.flags & (SYN | ACK | RST) == SYN;
        let (idle, linger) = (self.idle_ns, self.linger_ns);
        if let Some(c) = self.table.get_mut(&key) {
            // Sweeps run only every so often: check this connection's timeouts exactly.
            if expired(c, ts, idle, linger) {
                let id = self.next_id;
                self.next_id += 1;
                let old = std::mem::replace(&mut **c, Conn::new(id, key, from_lo, s, ts));
                let side = c.side(from_lo);
                c.update(side, s, ts);
                self.emit(old.finish(EndReason::Idle), on_conn);
                return;
            }
            let side = c.side(from_lo);
            let reused = if syn_only {
                c.reused_by(side, s.seq)
            } else {
                s.flags & RST == 0 && c.jumped(side, s.seq)
            };
            if reused {
                let id = self.next_id;
                self.next_id += 1;
                let old = std::mem::replace(&mut **c, Conn::new(id, key, from_lo, s, ts));
                let side = c.side(from_lo);
                c.update(side, s, ts);
                self.emit(old.finish(EndReason::Reused), on_conn);
            } else {
                c.update(side, s, ts);
            }
            return;
        }
        let id = self.next_id;
        self.next_id += 1;
        let mut c = Box::new(Conn::new(id, key, from_lo, s, ts));
        let side = c.side(from_lo);
        c.update(side, s, ts);
        self.table.insert(key, c);
        let n = self.table.len() as u64;
        if n > self.summary.peak_open_connections {
            self.summary.peak_open_connections = n;
        }
    }
}

/// Whether a connection is done at capture time `now`: idle too long, or closed and quiet for
/// the linger time.
#[inline]
fn expired(c: &Conn, now: u64, idle: u64, linger: u64) -> bool {
    let quiet = now.saturating_sub(c.last_ts);
    quiet > idle || (c.closed() && quiet > linger)
}

/// The reader's view of an analysis in progress.
struct Run<'a, F: FnMut(Connection)> {
    an: &'a mut Analyzer,
    on_conn: &'a mut F,
}

impl<F: FnMut(Connection)> Sink for Run<'_, F> {
    fn link_type(&mut self, lt: u32) {
        if !self.an.summary.link_types.contains(&lt) {
            self.an.summary.link_types.push(lt);
        }
    }

    fn warn(&mut self, msg: impl FnOnce() -> String) {
        self.an.warn(msg);
    }

    #[inline]
    fn packet(&mut self, p: RawPacket<'_>) {
        let an = &mut *self.an;
        let ts = p.ts_ns;
        an.summary.packets += 1;
        if ts < an.prev_ts {
            an.summary.backwards_timestamps += 1;
        }
        an.prev_ts = ts;
        if ts < an.first_ts {
            an.first_ts = ts;
        }
        if ts > an.now {
            an.now = ts;
        }
        if an.next_sweep == 0 {
            an.next_sweep = an.now.saturating_add(an.sweep_every_ns);
        } else if an.now >= an.next_sweep {
            // Before this packet is accounted, so a connection idle past its timeout is
            // finalized rather than revived by it.
            an.sweep(self.on_conn);
            an.next_sweep = an.now.saturating_add(an.sweep_every_ns);
        }
        let mut seg = Segment::default();
        match decode(p.link, p.data, &mut seg) {
            Decoded::Tcp => {
                an.summary.tcp_packets += 1;
                if an.keep(&seg) {
                    an.segment(&seg, ts, self.on_conn);
                } else {
                    an.summary.filtered_packets += 1;
                }
            }
            Decoded::Other => an.summary.non_tcp_packets += 1,
            Decoded::Malformed(why) => {
                an.summary.skipped_malformed += 1;
                let offset = p.offset;
                an.warn(|| format!("packet record at byte {offset}: {why}; skipped"));
            }
        }
    }
}

/// Analyzes the capture at `path` and returns its connections in creation order, with the
/// summary.
pub fn analyze_file(
    path: impl AsRef<Path>,
    opts: Options,
) -> Result<(Vec<Connection>, Summary), PcapError> {
    analyze_file_progress(path.as_ref(), opts, &mut |_, _| {})
}

/// [`analyze_file`], calling `progress(bytes read, file size)` every 16 MiB read (a
/// progress bar for captures of many GB). Not generic on purpose: the record loop is
/// instantiated here, in this crate's optimized build, not in a caller's.
pub fn analyze_file_progress(
    path: &Path,
    opts: Options,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(Vec<Connection>, Summary), PcapError> {
    let file = std::fs::File::open(path).map_err(|error| PcapError::Open {
        path: path.to_path_buf(),
        error,
    })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let counted = Counted {
        inner: file,
        read: 0,
        next: PROGRESS_EVERY,
        size,
        progress,
    };
    let mut conns = Vec::new();
    let summary = Analyzer::new(opts).analyze_reader(counted, |c| conns.push(c))?;
    conns.sort_by_key(|c| c.id);
    Ok((conns, summary))
}

/// How often [`analyze_file_progress`] reports.
const PROGRESS_EVERY: u64 = 16 << 20;

/// A reader that reports how far into its file it is.
struct Counted<'a> {
    inner: std::fs::File,
    read: u64,
    next: u64,
    size: u64,
    progress: &'a mut dyn FnMut(u64, u64),
}

impl Read for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        if self.read >= self.next {
            self.next = self.read + PROGRESS_EVERY;
            (self.progress)(self.read, self.size);
        }
        Ok(n)
    }
}
