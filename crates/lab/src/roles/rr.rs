//! rr (netperf TCP_RR): one request and one response per transaction on each flow; with
//! `--threads`, flows multiplexed on epoll threads (neper's design).

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_load::{mux, rr};
use virtperf_wire::{Outcome, RrParams, SideReport, Workload};

use super::conn::{accept_data, connect_all, connect_data};
use super::role::Role;
use crate::assemble::outcome::{rr_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_conn_worker, spawn_mux_worker};

impl Role for RrParams {
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles> {
        if !self.protocol.is_tcp() {
            return crate::udp_roles::rr_client(self, c, meter);
        }
        let (data, sock, side, window, key) = (c.data, c.sock, c.side, c.window, c.key);
        let mut handles = Vec::new();
        match *self {
            RrParams {
                request,
                response,
                flows,
                threads: Some(t),
                ..
            } => {
                let conns = connect_all(data, flows, true, &sock, &key)?;
                // Multiplexed flows share the options: the first shows what the kernel applied.
                super::conn::note_first(side, &conns);
                for (i, share) in mux::spread(conns, t.min(flows) as usize)
                    .into_iter()
                    .enumerate()
                {
                    let m = meter();
                    handles.push(spawn_mux_worker(
                        &format!("rr-mux-{i}"),
                        side,
                        move |c, h| {
                            let span = c.gate.span(window);
                            mux::rr_client(
                                share,
                                request as usize,
                                response as usize,
                                span,
                                &c.stop,
                                h,
                                &m,
                            )
                        },
                    )?);
                }
            }
            RrParams {
                request,
                response,
                client_wait,
                gap_us,
                rate_per_s,
                flows,
                ..
            } => {
                // Flows share an open loop's rate, their schedules staggered evenly so the
                // requests do not leave in bursts of `flows`.
                let per_flow = rate_per_s.map(|r| f64::from(r) / f64::from(flows));
                for i in 0..flows {
                    let pace = match (per_flow, gap_us) {
                        (Some(r), _) => rr::Pace::Rate(
                            r,
                            std::time::Duration::from_secs_f64(f64::from(i) / r / f64::from(flows)),
                        ),
                        (None, Some(g)) => rr::Pace::Gap(std::time::Duration::from_micros(g)),
                        (None, None) => rr::Pace::BackToBack,
                    };
                    let s = connect_data(data, true, &sock, &key)?;
                    let m = meter();
                    handles.push(spawn_conn_worker(
                        &format!("rr-client-{i}"),
                        side,
                        s,
                        move |c, h, s| {
                            rr::client_paced(
                                s,
                                virtperf_load::Exchange {
                                    request: request as usize,
                                    response: response as usize,
                                    wait: client_wait,
                                },
                                pace,
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
        }
        Ok(handles)
    }

    fn server(&self, s: ServerHalf) -> Result<Handles> {
        if !self.protocol.is_tcp() {
            return crate::udp_roles::rr_server(self, s);
        }
        let ServerHalf {
            listener,
            client,
            sock,
            side,
            key,
            ..
        } = s;
        let mut handles = Vec::new();
        match *self {
            RrParams {
                request,
                response,
                flows,
                threads: Some(t),
                ..
            } => {
                let conns = accept_data(listener, client, flows as usize, true, &sock, &key)?;
                // Multiplexed flows share the options: the first shows what the kernel applied.
                super::conn::note_first(side, &conns);
                for (i, share) in mux::spread(conns, t.min(flows) as usize)
                    .into_iter()
                    .enumerate()
                {
                    handles.push(spawn_mux_worker(
                        &format!("rr-mux-{i}"),
                        side,
                        move |c, _| {
                            mux::rr_server(share, request as usize, response as usize, &c.stop)
                        },
                    )?);
                }
            }
            RrParams {
                request,
                response,
                server_wait,
                flows,
                ..
            } => {
                for s in accept_data(listener, client, flows as usize, true, &sock, &key)? {
                    handles.push(spawn_conn_worker("rr-server", side, s, move |c, _, s| {
                        rr::server_waiting(
                            s,
                            request as usize,
                            response as usize,
                            server_wait,
                            &c.stop,
                        )
                    })?);
                }
            }
        }
        Ok(handles)
    }

    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        Outcome::Rr(rr_outcome(c, server, warnings))
    }
}

/// The keys rr's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `warmup`).
pub(super) const KEYS: &[&str] = &[
    "size",
    "cpus",
    "wait",
    "gap",
    "rate",
    "flows",
    "threads",
    "interval",
    "protocol",
    "loss_timeout",
    "trace",
    "timeline",
];

/// rr's `Workload` from a spec point's parameters.
pub fn from_params(p: &super::role::Params) -> Workload {
    Workload::Rr(RrParams {
        request: p.size.0,
        response: p.size.1,
        client_wait: p.wait.0,
        server_wait: p.wait.1,
        gap_us: p.gap_us,
        rate_per_s: p.rate_per_s,
        flows: p.flows,
        threads: p.threads,
        protocol: p.protocol,
        loss_timeout_ms: p.loss_timeout_ms,
    })
}
