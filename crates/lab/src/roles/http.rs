//! http: HTTP/1.1 downloads of an N-byte body from the agent's own server, one connection
//! per download.

use std::sync::Arc;

use anyhow::{bail, Result};
use virtperf_load::http;
use virtperf_load::interval::Meter;

use virtperf_wire::Workload;

use super::{download_series, ClientHalf, Handles, Role, ServerHalf};
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
        let (data, side) = (c.data, c.side);
        let mut handles = Vec::new();
        match *w {
            Workload::Http { bytes } => {
                let url = format!("http://{data}/");
                let (out, count) = (c.downloads.clone(), c.count);
                // The agent's body is exactly `bytes` long: anything past it is not ours.
                let limits = http::Limits {
                    max_bytes: bytes,
                    ..http::Limits::default()
                };
                handles.push(spawn_private_worker("http-client", side, move |c, _| {
                    // The agent's own server answers 200 or nothing: accept no other status.
                    download_series(&url, count, &c.stop, &out, &[], &limits)
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
            side,
            wake,
            ..
        } = s;
        let mut handles = Vec::new();
        match *w {
            Workload::Http { bytes } => {
                let srv = Arc::new(http::HttpServer::new(listener, Some(client)));
                wake.http = Some(srv.clone());
                handles.push(spawn_worker("http-server", side, move |_, _| {
                    let n = srv.serve(bytes, DATA_TIMEOUT);
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
}
