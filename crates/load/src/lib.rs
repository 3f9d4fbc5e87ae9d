//! Workload engines: the data-plane halves of each workload, client and server.
//!
//! Each engine runs on the calling thread over sockets it is given, stops when a shared flag
//! is raised (or its byte count is reached), and returns what it counted. Engines know nothing
//! of the control protocol, of CPU accounting or of storage: `lab` wraps them. Keeping the
//! inner loops here, apart, keeps them short enough to read for what they cost per
//! iteration: one atomic load, the syscalls, and for rr/crr one clock read and one histogram
//! increment per transaction.

pub mod buf;
pub mod bulk;
mod counts;
pub mod crr;
pub mod http;
pub mod http_conn;
pub mod interval;
pub mod mux;
pub mod rr;
pub mod sock;
pub mod stream;
pub mod tcpinfo;
pub mod udp;
pub mod zerocopy;

pub use counts::Counts;

/// Helpers shared by the engines' tests.
#[cfg(test)]
mod test_util {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// A stop flag raised `ms` milliseconds from now, from another thread.
    pub fn stop_after(ms: u64) -> Arc<AtomicBool> {
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            st.store(true, Ordering::Relaxed);
        });
        stop
    }
}

use std::time::{Duration, Instant};

/// A side's measured interval: from its gate opening (`start`) for `length` (None: until
/// the stop, for byte-count workloads). Engines that keep flows in flight past the stop
/// (so both sides finish the same transactions) count only what completes inside it, and
/// report its length as their time, so a rate is never divided by a drain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    /// When the gate opened.
    pub start: Instant,
    /// How long the interval lasts.
    pub length: Option<Duration>,
}

impl Span {
    /// An interval starting now.
    pub fn now(length: Option<Duration>) -> Span {
        Span {
            start: Instant::now(),
            length,
        }
    }

    /// When it ends, if it has a length.
    pub fn end(&self) -> Option<Instant> {
        self.length.map(|l| self.start + l)
    }
}

/// One transaction's shape as one side sees it: the request and response sizes, and how
/// this side waits for the other's message. Engines take it whole rather than three
/// arguments, so every request/response engine reads the same three names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Exchange {
    /// Request size, bytes.
    pub request: usize,
    /// Response size, bytes.
    pub response: usize,
    /// How this side waits for the peer's message.
    pub wait: virtperf_wire::Wait,
}

impl Exchange {
    /// `request` and `response` bytes, this side waiting as `wait` says.
    pub fn new(request: u32, response: u32, wait: virtperf_wire::Wait) -> Exchange {
        Exchange {
            request: request as usize,
            response: response as usize,
            wait,
        }
    }
}

/// Where a client loop reports: the stop flag it checks, the histogram its latency
/// samples go to and its time-series meter.
pub struct Sink<'a> {
    /// Raised when the test ends.
    pub stop: &'a std::sync::atomic::AtomicBool,
    /// Latency samples, ns.
    pub hist: &'a mut hdrhistogram::Histogram<u64>,
    /// Progress for the time series.
    pub meter: &'a interval::Meter,
}

/// A connected stream socket an engine runs on: TCP, or AF_UNIX (`unix-rr`, whose stream
/// and seqpacket sockets are both held as a `UnixStream`). Besides its descriptor an engine
/// needs its receive timeout: how long a spinning receive waits for data.
pub trait Conn: std::os::fd::AsFd {
    /// The socket's receive timeout (`SO_RCVTIMEO`), if any.
    fn read_timeout(&self) -> std::io::Result<Option<Duration>>;
}

impl Conn for std::net::TcpStream {
    fn read_timeout(&self) -> std::io::Result<Option<Duration>> {
        std::net::TcpStream::read_timeout(self)
    }
}

impl Conn for std::os::unix::net::UnixStream {
    fn read_timeout(&self) -> std::io::Result<Option<Duration>> {
        std::os::unix::net::UnixStream::read_timeout(self)
    }
}

/// How long a spinning receive waits for data when its socket has no receive timeout.
pub const SPIN_TIMEOUT: Duration = Duration::from_secs(10);
