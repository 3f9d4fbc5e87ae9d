//! crr (netperf TCP_CRR): a new connection per transaction; the client connects inside the
//! measured interval (connecting is the workload), the server accepts on the test's listener.

use std::sync::Arc;

use anyhow::{bail, Result};
use virtperf_load::interval::Meter;
use virtperf_load::sock::prepare_data_socket;
use virtperf_load::{crr, mux};

use virtperf_wire::Workload;

use super::role::Role;
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_mux_worker, spawn_private_worker, spawn_worker};
use crate::DATA_TIMEOUT;

/// crr's two halves.
pub(super) struct Crr;

impl Role for Crr {
    fn client(
        &self,
        w: &Workload,
        c: &ClientHalf,
        meter: &mut dyn FnMut() -> Arc<Meter>,
    ) -> Result<Handles> {
        let (data, sock, side, window) = (c.data, c.sock, c.side, c.window);
        let mut handles = Vec::new();
        match *w {
            Workload::Crr {
                request,
                response,
                flows,
                threads: Some(t),
                ..
            } => {
                // crr connects per transaction: each thread opens its share itself.
                for (i, k) in mux::spread((0..flows).collect(), t.min(flows) as usize)
                    .into_iter()
                    .enumerate()
                {
                    let m = meter();
                    let k = k.len();
                    handles.push(spawn_mux_worker(
                        &format!("crr-mux-{i}"),
                        side,
                        move |c, h| {
                            mux::crr_client(
                                data,
                                k,
                                request as usize,
                                response as usize,
                                &sock,
                                c.gate.span(window),
                                &c.stop,
                                h,
                                &m,
                            )
                        },
                    )?);
                }
            }
            Workload::Crr {
                request,
                response,
                client_wait,
                ..
            } => {
                let m = meter();
                handles.push(spawn_private_worker("crr-client", side, move |c, h| {
                    crr::client(
                        data,
                        request as usize,
                        response as usize,
                        client_wait,
                        DATA_TIMEOUT,
                        &sock,
                        &c.stop,
                        h,
                        &m,
                        &|fd| crate::side::note_applied(c, fd),
                    )
                })?);
            }
            _ => bail!("the crr role was given a {} workload", w.name()),
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
            Workload::Crr {
                request,
                response,
                flows,
                threads: Some(t),
                ..
            } => {
                // Options set on the listener are inherited by every accepted connection.
                prepare_data_socket(&listener, DATA_TIMEOUT, true, &sock)?;
                let l = Arc::new(listener);
                wake.listener = Some(l.clone());
                for i in 0..t.min(flows) {
                    let l = l.clone();
                    handles.push(spawn_mux_worker(
                        &format!("crr-mux-{i}"),
                        side,
                        move |c, _| {
                            mux::crr_server(
                                &l,
                                Some(client),
                                request as usize,
                                response as usize,
                                &c.stop,
                            )
                            .map(|n| vec![n])
                        },
                    )?);
                }
            }
            Workload::Crr {
                request,
                response,
                server_wait,
                ..
            } => {
                let l = Arc::new(listener);
                wake.listener = Some(l.clone());
                handles.push(spawn_worker("crr-server", side, move |c, _| {
                    crr::server(
                        &l,
                        Some(client),
                        server_wait,
                        request as usize,
                        response as usize,
                        DATA_TIMEOUT,
                        &sock,
                        &c.stop,
                        &|fd| crate::side::note_applied(c, fd),
                    )
                })?);
            }
            _ => bail!("the crr role was given a {} workload", w.name()),
        }
        Ok(handles)
    }

    fn outcome(
        &self,
        c: &crate::assemble::Collected,
        server: &virtperf_wire::SideReport,
        warnings: &mut Vec<String>,
    ) -> crate::assemble::Measured {
        crate::assemble::rr_outcome(c, server, warnings)
    }

    fn keys(&self) -> &'static [&'static str] {
        &[
            "size", "cpus", "wait", "flows", "threads", "interval", "trace",
        ]
    }

    fn workload(&self, p: &super::role::Params) -> Workload {
        Workload::Crr {
            request: p.size.0,
            response: p.size.1,
            client_wait: p.wait.0,
            server_wait: p.wait.1,
            flows: p.flows,
            threads: p.threads,
        }
    }
}
