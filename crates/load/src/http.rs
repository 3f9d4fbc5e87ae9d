//! HTTP/1.1 downloads (seed 0: five 100 MB downloads). The server is `tiny_http`, the client
//! `ureq`: real HTTP implementations, so the numbers include real header parsing and
//! framing, and `--url` can time any web server.

use std::io::{self, Read};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// A body of `left` bytes of zeros, produced without allocating the whole thing.
struct Zeros {
    left: u64,
}

impl Read for Zeros {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = (buf.len() as u64).min(self.left) as usize;
        buf[..n].fill(0);
        self.left -= n as u64;
        Ok(n)
    }
}

/// Wraps an accepted-for-HTTP listener in a `tiny_http` server.
pub fn server(listener: TcpListener) -> io::Result<tiny_http::Server> {
    tiny_http::Server::from_listener(listener, None).map_err(io::Error::other)
}

/// Answers every request on `srv` with a `bytes`-byte body until
/// [`tiny_http::Server::unblock`] is called. Returns the number of responses sent whole.
pub fn serve(srv: &tiny_http::Server, bytes: u64) -> u64 {
    let mut n = 0;
    for rq in srv.incoming_requests() {
        let header =
            tiny_http::Header::from_bytes(&b"Content-Type"[..], &b"application/octet-stream"[..])
                .ok();
        let resp = tiny_http::Response::new(
            tiny_http::StatusCode(200),
            header.into_iter().collect(),
            Zeros { left: bytes },
            Some(bytes as usize),
            None,
        );
        if rq.respond(resp).is_ok() {
            n += 1;
        }
    }
    n
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

/// Downloads `url` once, discarding the body.
pub fn fetch(agent: &ureq::Agent, url: &str) -> Result<Fetched, String> {
    let t0 = Instant::now();
    let mut resp = agent
        .get(url)
        .call()
        .map_err(|e| format!("GET {url}: {e}"))?;
    let ttfb = t0.elapsed();
    let status = resp.status().as_u16();
    let mut reader = resp.body_mut().as_reader();
    let mut buf = vec![0u8; 256 * 1024];
    let mut bytes = 0u64;
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => bytes += n as u64,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("GET {url}: reading body after {bytes} bytes: {e}")),
        }
    }
    Ok(Fetched {
        status,
        bytes,
        ttfb,
        total: t0.elapsed(),
    })
}

/// The HTTP server type the agent runs (re-exported so `lab` need not name the crate).
pub use tiny_http::Server as HttpServer;
