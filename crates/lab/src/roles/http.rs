//! http: HTTP/1.1 downloads of an N-byte body from the agent's own server, one connection
//! per download.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Result;
use virtperf_load::http::{self as http_load, Fetched};
use virtperf_load::http_conn;
use virtperf_load::interval::Meter;
use virtperf_load::Counts;

use virtperf_wire::{HttpParams, Outcome, SideReport, Workload};

use super::role::Role;
use crate::assemble::outcome::{http_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_private_worker, spawn_worker};
use crate::DATA_TIMEOUT;

impl Role for HttpParams {
    fn client(
        &self,
        c: &ClientHalf,
        // Downloads keep no time series: their result is each download's own timing.
        _meter: &mut dyn FnMut() -> Arc<Meter>,
    ) -> Result<Handles> {
        let (data, side, sock) = (c.data, c.side, c.sock);
        let url = format!("http://{data}/");
        let (out, count) = (c.downloads.clone(), c.count);
        // The agent's body is exactly `bytes` long: anything past it is not ours.
        let limits = http_load::Limits {
            max_bytes: self.bytes,
            ..http_load::Limits::default()
        };
        let agent = client_agent(sock, side);
        Ok(vec![spawn_private_worker(
            "http-client",
            side,
            move |c, _| {
                // The agent's own server answers 200 or nothing: accept no other status.
                download_series(&agent, &url, count, &c.stop, &out, &[], &limits)
            },
        )?])
    }

    fn server(&self, s: ServerHalf) -> Result<Handles> {
        let ServerHalf {
            listener,
            client,
            sock,
            side,
            wake,
            ..
        } = s;
        let bytes = self.bytes;
        // Accepted connections inherit the listener's options.
        virtperf_load::sock::prepare_data_socket(&listener, DATA_TIMEOUT, true, &sock)?;
        let srv = Arc::new(http_load::HttpServer::new(listener, Some(client)));
        wake.http = Some(srv.clone());
        Ok(vec![spawn_worker("http-server", side, move |c, _| {
            let n = srv.serve(bytes, DATA_TIMEOUT);
            if let (Some(a), Ok(mut into)) = (srv.first_applied(), c.applied.lock()) {
                into.get_or_insert(a);
            }
            Ok(virtperf_load::Counts {
                transactions: n,
                bytes_tx: n * bytes,
                ..Default::default()
            })
        })?])
    }

    fn outcome(&self, c: &Collected, _server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        http_outcome(c, self.bytes, warnings)
    }
}

/// Makes the download clients of a side: each download's connection carries the test's
/// socket options `sock`, and the first one's, as the kernel applied them, are recorded
/// in `side` for the result.
pub(crate) fn client_agent(
    sock: virtperf_wire::SockOpts,
    side: &crate::side::Ctl,
) -> impl Fn() -> http_load::Client + Send + 'static {
    let applied = side.applied.clone();
    let on_connect: http_conn::OnConnect = Arc::new(move |s| {
        if let Ok(mut a) = applied.lock() {
            if a.is_none() {
                *a = virtperf_load::sock::applied(s).ok();
            }
        }
    });
    move || http_load::agent_with(DATA_TIMEOUT, sock, on_connect.clone())
}

/// Downloads `url` `count` times, one connection each, recording every download in `out`.
pub(crate) fn download_series(
    agent: &dyn Fn() -> http_load::Client,
    url: &str,
    count: u32,
    stop: &std::sync::atomic::AtomicBool,
    out: &Mutex<Vec<Fetched>>,
    accept: &[u16],
    limits: &http_load::Limits,
) -> std::io::Result<Counts> {
    let mut c = Counts::default();
    let start = Instant::now();
    for _ in 0..count {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break;
        }
        // A fresh client per download: each download is its own TCP connection, as a
        // browser or boot loader fetching one file does (seed 0's captures show one
        // connection per download), and the time includes the connection set-up.
        let f = match http_load::fetch(&agent(), url, accept, limits, stop) {
            Ok(f) => f,
            // Failed or abandoned after the measured interval ended (a signal's cut): not
            // one of its downloads, and no reason to lose those that completed.
            Err(_) if stop.load(std::sync::atomic::Ordering::Relaxed) => break,
            Err(e) => return Err(std::io::Error::other(e)),
        };
        c.bytes_rx += f.bytes;
        c.transactions += 1;
        if let Ok(mut v) = out.lock() {
            v.push(f);
        }
    }
    c.active = start.elapsed();
    Ok(c)
}

/// The keys http's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `omit`).
pub(super) const KEYS: &[&str] = &["bytes", "count", "cpus", "trace"];

/// http's `Workload` from a spec point's parameters.
pub fn from_params(p: &super::role::Params) -> Workload {
    Workload::Http(HttpParams {
        bytes: p.bytes.unwrap_or(1),
    })
}
