//! http: HTTP/1.1 downloads of an N-byte body from the agent's own server, one connection
//! per download.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Result};
use virtperf_load::http::{self as http_load, Fetched};
use virtperf_load::http_conn;
use virtperf_load::interval::Meter;
use virtperf_load::Counts;

use virtperf_wire::Workload;

use super::role::Role;
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_private_worker, spawn_worker};
use crate::DATA_TIMEOUT;

/// http's two halves.
pub(super) struct Http;

impl Role for Http {
    fn client(
        &self,
        w: &Workload,
        c: &ClientHalf,
        // Downloads keep no time series: their result is each download's own timing.
        _meter: &mut dyn FnMut() -> Arc<Meter>,
    ) -> Result<Handles> {
        let (data, side, sock) = (c.data, c.side, c.sock);
        let mut handles = Vec::new();
        match *w {
            Workload::Http { bytes } => {
                let url = format!("http://{data}/");
                let (out, count) = (c.downloads.clone(), c.count);
                // The agent's body is exactly `bytes` long: anything past it is not ours.
                let limits = http_load::Limits {
                    max_bytes: bytes,
                    ..http_load::Limits::default()
                };
                let agent = client_agent(sock, side);
                handles.push(spawn_private_worker("http-client", side, move |c, _| {
                    // The agent's own server answers 200 or nothing: accept no other status.
                    download_series(&agent, &url, count, &c.stop, &out, &[], &limits)
                })?);
            }
            _ => bail!("the http role was given a {} workload", w.name()),
        }
        Ok(handles)
    }

    fn server(&self, w: &Workload, s: ServerHalf) -> Result<Handles> {
        let ServerHalf {
            listener,
            client,
            sock,
            side,
            wake,
            ..
        } = s;
        let mut handles = Vec::new();
        match *w {
            Workload::Http { bytes } => {
                // Accepted connections inherit the listener's options.
                virtperf_load::sock::prepare_data_socket(&listener, DATA_TIMEOUT, true, &sock)?;
                let srv = Arc::new(http_load::HttpServer::new(listener, Some(client)));
                wake.http = Some(srv.clone());
                handles.push(spawn_worker("http-server", side, move |c, _| {
                    let n = srv.serve(bytes, DATA_TIMEOUT);
                    if let (Some(a), Ok(mut into)) = (srv.first_applied(), c.applied.lock()) {
                        into.get_or_insert(a);
                    }
                    Ok(virtperf_load::Counts {
                        transactions: n,
                        bytes_tx: n * bytes,
                        ..Default::default()
                    })
                })?);
            }
            _ => bail!("the http role was given a {} workload", w.name()),
        }
        Ok(handles)
    }

    fn outcome(
        &self,
        c: &crate::assemble::Collected,
        _server: &virtperf_wire::SideReport,
        warnings: &mut Vec<String>,
    ) -> crate::assemble::Measured {
        let bytes = match c.plan.workload {
            Workload::Http { bytes } => bytes,
            _ => 0,
        };
        crate::assemble::http_outcome(c, bytes, warnings)
    }

    fn keys(&self) -> &'static [&'static str] {
        &["bytes", "count", "cpus", "trace"]
    }

    fn workload(&self, p: &super::role::Params) -> Workload {
        Workload::Http {
            bytes: p.bytes.unwrap_or(1),
        }
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
        let f = http_load::fetch(&agent(), url, accept, limits).map_err(std::io::Error::other)?;
        c.bytes_rx += f.bytes;
        c.transactions += 1;
        if let Ok(mut v) = out.lock() {
            v.push(f);
        }
    }
    c.active = start.elapsed();
    Ok(c)
}
