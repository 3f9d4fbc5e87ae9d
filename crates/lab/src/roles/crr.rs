//! crr (netperf TCP_CRR): a new connection per transaction; the client connects inside the
//! measured interval (connecting is the workload), the server accepts on the test's listener.

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_load::sock::prepare_data_socket;
use virtperf_load::{crr, mux};

use virtperf_wire::{CrrParams, Outcome, SideReport, Workload};

use super::role::Role;
use crate::assemble::outcome::{rr_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_mux_worker, spawn_private_worker, spawn_worker};
use crate::DATA_TIMEOUT;

impl Role for CrrParams {
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles> {
        let (data, sock, side, window) = (c.data, c.sock, c.side, c.window);
        let mut handles = Vec::new();
        match *self {
            CrrParams {
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
                                virtperf_load::Exchange {
                                    request: request as usize,
                                    response: response as usize,
                                    wait: virtperf_wire::Wait::Block,
                                },
                                &sock,
                                c.span(window),
                                virtperf_load::Sink {
                                    stop: &c.stop,
                                    hist: h,
                                    meter: &m,
                                },
                            )
                        },
                    )?);
                }
            }
            CrrParams {
                request,
                response,
                client_wait,
                ..
            } => {
                let m = meter();
                handles.push(spawn_private_worker("crr-client", side, move |c, h| {
                    crr::client(
                        data,
                        virtperf_load::Exchange {
                            request: request as usize,
                            response: response as usize,
                            wait: client_wait,
                        },
                        DATA_TIMEOUT,
                        &sock,
                        virtperf_load::Sink {
                            stop: &c.stop,
                            hist: h,
                            meter: &m,
                        },
                        &|fd| crate::side::note_applied(c, fd),
                    )
                })?);
            }
        }
        Ok(handles)
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
        let mut handles = Vec::new();
        match *self {
            CrrParams {
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
            CrrParams {
                request,
                response,
                server_wait,
                ..
            } => {
                // Before the gate, as for the multiplexed server: a connection the client
                // opens the moment the gate opens inherits the listener's options at its
                // SYN, before the worker could set them (it once got the default
                // congestion control).
                prepare_data_socket(&listener, DATA_TIMEOUT, true, &sock)?;
                let l = Arc::new(listener);
                wake.listener = Some(l.clone());
                handles.push(spawn_worker("crr-server", side, move |c, _| {
                    crr::server(
                        &l,
                        Some(client),
                        virtperf_load::Exchange {
                            request: request as usize,
                            response: response as usize,
                            wait: server_wait,
                        },
                        DATA_TIMEOUT,
                        &sock,
                        &c.stop,
                        &|fd| crate::side::note_applied(c, fd),
                    )
                })?);
            }
        }
        Ok(handles)
    }

    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        Outcome::Crr(rr_outcome(c, server, warnings))
    }
}

/// The keys crr's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `omit`).
pub(super) const KEYS: &[&str] = &[
    "size", "cpus", "wait", "flows", "threads", "interval", "trace",
];

/// crr's `Workload` from a spec point's parameters.
pub fn from_params(p: &super::role::Params) -> Workload {
    Workload::Crr(CrrParams {
        request: p.size.0,
        response: p.size.1,
        client_wait: p.wait.0,
        server_wait: p.wait.1,
        flows: p.flows,
        threads: p.threads,
    })
}
