//! HTTP/1.1 downloads (seed 0: five 100 MB downloads). The client is `ureq`, a real HTTP
//! implementation, so `--url` can time any web server. The agent's server is the small
//! responder below.

use std::io::{self, Read};
use std::net::{IpAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::buf::PageBuf;
use crate::sock::{recv_raw, send_all, wake_listener};

/// Longest request head the server reads; a download request is a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;

/// The agent's HTTP server for one test.
///
/// Hand-written rather than `tiny_http` (which it replaced) because the agent's data port
/// must not be a resource anyone can exhaust: `tiny_http` starts a thread per connection
/// for whoever connects (400 connections gave 398 threads) and its accept thread panics
/// when descriptors run out. This one runs on the calling thread only, serves one
/// connection at a time (the client downloads one file after another), closes at once
/// every connection that does not come from the test's client, gives a request head one
/// deadline, and answers the one request a download makes: `GET` with a body of zeros,
/// `Connection: close`. That is all the workload needs of a server; the client side, where
/// HTTP parsing is part of what is measured, stays a full implementation (`ureq`).
pub struct HttpServer {
    listener: TcpListener,
    allow: Option<IpAddr>,
    stop: AtomicBool,
    /// The socket options the kernel applied to the first connection served.
    applied: std::sync::OnceLock<virtperf_wire::AppliedSockOpts>,
}

impl HttpServer {
    /// Serves on `listener`, accepting connections only from `allow` (any when `None`).
    pub fn new(listener: TcpListener, allow: Option<IpAddr>) -> HttpServer {
        HttpServer {
            listener,
            allow,
            stop: AtomicBool::new(false),
            applied: std::sync::OnceLock::new(),
        }
    }

    /// The socket options the kernel applied to the first connection served, read back.
    pub fn first_applied(&self) -> Option<virtperf_wire::AppliedSockOpts> {
        self.applied.get().cloned()
    }

    /// Answers requests with a `bytes`-byte body until [`HttpServer::unblock`]; each
    /// connection's reads and writes time out after `io_timeout`, and its request head must
    /// arrive within it. Returns the number of responses sent whole.
    pub fn serve(&self, bytes: u64, io_timeout: Duration) -> u64 {
        let mut n = 0;
        let zeros = PageBuf::zeroed(256 * 1024);
        while !self.stop.load(Ordering::SeqCst) {
            let (s, peer) = match self.listener.accept() {
                Ok(x) => x,
                Err(_) if self.stop.load(Ordering::SeqCst) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // EMFILE and friends: back off, never spin or panic; the client's
                    // download fails with its own timeout if this persists.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
            };
            if self.allow.is_some_and(|a| a != peer.ip()) {
                continue; // dropped: closed at once
            }
            if self.applied.get().is_none() {
                if let Ok(a) = crate::sock::applied(&s) {
                    let _ = self.applied.set(a);
                }
            }
            if respond(&s, bytes, io_timeout, &zeros).unwrap_or(false) {
                n += 1;
            }
        }
        n
    }

    /// Makes [`HttpServer::serve`] return (from another thread).
    pub fn unblock(&self) {
        self.stop.store(true, Ordering::SeqCst);
        wake_listener(&self.listener);
    }
}

/// Reads one request head and answers it; true when a whole body went out.
fn respond(s: &TcpStream, bytes: u64, io_timeout: Duration, zeros: &[u8]) -> io::Result<bool> {
    s.set_write_timeout(Some(io_timeout))?;
    let _ = s.set_nodelay(true);
    let deadline = Instant::now() + io_timeout;
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || head.len() > MAX_HEAD {
            return Ok(false);
        }
        s.set_read_timeout(Some(left))?;
        match recv_raw(s, &mut buf) {
            Ok(0) => return Ok(false),
            Ok(k) => head.extend_from_slice(&buf[..k]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Ok(false),
        }
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or(&[]);
    if !line.starts_with(b"GET ") {
        send_all(
            s,
            b"HTTP/1.1 405 Method Not Allowed\r\nAllow: GET\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(false);
    }
    let header = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {bytes}\r\nConnection: close\r\n\r\n"
    );
    send_all(s, header.as_bytes())?;
    let mut left = bytes;
    while left > 0 {
        let k = (zeros.len() as u64).min(left) as usize;
        send_all(s, &zeros[..k])?;
        left -= k as u64;
    }
    Ok(true)
}

/// One timed download.
#[derive(Debug, Clone, Copy)]
pub struct Fetched {
    /// HTTP status.
    pub status: u16,
    /// Body bytes read.
    pub bytes: u64,
    /// Request to response head.
    pub ttfb: Duration,
    /// Request to last body byte.
    pub total: Duration,
}

/// The HTTP client type (ureq's), for callers that make clients without naming ureq.
pub type Client = ureq::Agent;

/// Makes an HTTP client whose every read times out after `io_timeout`.
pub fn agent(io_timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(io_timeout))
        .timeout_per_read(Some(io_timeout))
        .timeout_per_write(Some(io_timeout))
        .http_status_as_error(false)
        .build()
        .new_agent()
}

/// Like [`agent`], its connections opened with the test's socket options `opts` (see
/// [`crate::http_conn`]), `on_connect` called with each.
pub fn agent_with(
    io_timeout: Duration,
    opts: virtperf_wire::SockOpts,
    on_connect: crate::http_conn::OnConnect,
) -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .timeout_connect(Some(io_timeout))
        .timeout_per_read(Some(io_timeout))
        .timeout_per_write(Some(io_timeout))
        .http_status_as_error(false)
        .build();
    ureq::Agent::with_parts(
        config,
        crate::http_conn::SockConnector::new(opts, io_timeout, on_connect),
        ureq::unversioned::resolver::DefaultResolver::default(),
    )
}

/// Bounds of one download: a server that never ends a body (no Content-Length, no close),
/// or trickles it, must not hold a test forever.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most body bytes read before the download fails.
    pub max_bytes: u64,
    /// Most time one download may take, request to last byte.
    pub max_time: Duration,
}

impl Default for Limits {
    /// 64 GiB and 10 minutes: far beyond any download a benchmark times, well short of
    /// forever.
    fn default() -> Limits {
        Limits {
            max_bytes: 64 << 30,
            max_time: Duration::from_secs(600),
        }
    }
}

/// Downloads `url` once, discarding the body. A status outside 2xx is an error (a 404 page
/// is not the file being timed) unless `accept` lists it; so is a body longer than
/// `limits.max_bytes` or a download longer than `limits.max_time`. Raising `stop` abandons
/// the download at its next read (an error): a download in flight when the measured
/// interval ends is not one of its downloads.
pub fn fetch(
    agent: &ureq::Agent,
    url: &str,
    accept: &[u16],
    limits: &Limits,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Fetched, String> {
    let t0 = Instant::now();
    let mut resp = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let ttfb = t0.elapsed();
    let status = resp.status().as_u16();
    if !(200..300).contains(&status) && !accept.contains(&status) {
        let reason = resp.status().canonical_reason().unwrap_or("");
        return Err(format!(
            "GET {url}: HTTP {status} {reason}; only 2xx counts as a download (--accept-status {status} to time it anyway)"
        ));
    }
    let mut reader = resp.body_mut().as_reader();
    let mut buf = PageBuf::zeroed(256 * 1024);
    let mut bytes = 0u64;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("GET {url}: reading body after {bytes} bytes: {e}")),
        }
        if bytes > limits.max_bytes {
            return Err(format!(
                "GET {url}: the body went past {} bytes without ending (a server that never ends it?); --max-size raises the limit",
                limits.max_bytes
            ));
        }
        if t0.elapsed() > limits.max_time {
            return Err(format!(
                "GET {url}: still downloading after {:?} ({bytes} bytes); --max-time raises the limit",
                limits.max_time
            ));
        }
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(format!(
                "GET {url}: abandoned at the stop after {bytes} bytes"
            ));
        }
    }
    Ok(Fetched {
        status,
        bytes,
        ttfb,
        total: t0.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;

    /// The body goes out as a static file server sends it: `Content-Length` and exactly that
    /// many bytes after the head, no chunk framing (which a pcap would count as payload:
    /// seed 0's 100 MB download carried ≈ 98 KB of it). Read raw from the socket, since an
    /// HTTP client would hide chunking.
    #[test]
    fn the_body_is_content_length_framed_with_nothing_else_on_the_wire() {
        const BODY: u64 = 300_001; // more than one 256 KiB write, not a round number
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = Arc::new(HttpServer::new(listener, None));
        let srv = server.clone();
        let t = std::thread::spawn(move || srv.serve(BODY, Duration::from_secs(10)));

        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut wire = Vec::new();
        s.read_to_end(&mut wire).unwrap();
        server.unblock();
        assert_eq!(t.join().unwrap(), 1, "one whole response");

        let end = wire.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        let head = String::from_utf8_lossy(&wire[..end]).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        assert!(
            head.contains(&format!("content-length: {BODY}\r\n")),
            "{head}"
        );
        assert!(!head.contains("transfer-encoding"), "{head}");
        // The payload after the head is the body, byte for byte: zeros, nothing more.
        let payload = &wire[end..];
        assert_eq!(payload.len() as u64, BODY);
        assert!(payload.iter().all(|&b| b == 0));
    }
}
