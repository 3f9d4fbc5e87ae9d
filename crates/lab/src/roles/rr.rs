//! rr (netperf TCP_RR): one request and one response per transaction on each flow; with
//! `--threads`, flows multiplexed on epoll threads (neper's design).

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_load::{mux, rr, Exchange, Sink};
use virtperf_wire::{Outcome, RrParams, SideReport, Workload};

use super::role::Role;
use super::threads::{self, Flows};
use crate::assemble::outcome::{rr_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_conn_worker, spawn_metered_conn_worker, spawn_mux_worker};

impl Role for RrParams {
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles> {
        if !self.protocol.is_tcp() {
            return crate::udp_roles::rr_client(self, c, meter);
        }
        let RrParams {
            request,
            response,
            client_wait,
            gap_us,
            rate_per_s,
            flows,
            threads,
            ..
        } = *self;
        let (side, window) = (c.side, c.window);
        // Flows share an open loop's rate, their schedules staggered evenly so the requests
        // do not leave in bursts of `flows`.
        let per_flow = rate_per_s.map(|r| f64::from(r) / f64::from(flows));
        let pace = move |i: usize| match (per_flow, gap_us) {
            (Some(r), _) => {
                rr::Pace::Rate(r, Duration::from_secs_f64(i as f64 / r / f64::from(flows)))
            }
            (None, Some(g)) => rr::Pace::Gap(Duration::from_micros(g)),
            (None, None) => rr::Pace::BackToBack,
        };
        let x = Exchange::new(request, response, client_wait);
        threads::client(
            c,
            meter,
            Flows {
                conns: flows,
                threads,
                nodelay: true,
                per_conn: |i, s, m: Arc<Meter>| {
                    let pace = pace(i);
                    let name = format!("rr-client-{i}");
                    spawn_metered_conn_worker(&name, side, s, Some(m.clone()), move |c, hist, s| {
                        let out = Sink {
                            stop: &c.stop,
                            hist,
                            meter: &m,
                        };
                        rr::client_paced(s, x, pace, out)
                    })
                },
                per_share: |i, share, m: Arc<Meter>| {
                    spawn_mux_worker(&format!("rr-mux-{i}"), side, move |c, h| {
                        let span = c.span(window);
                        mux::rr_client(share, x.request, x.response, span, &c.stop, h, &m)
                    })
                },
            },
        )
    }

    fn server(&self, s: ServerHalf) -> Result<Handles> {
        if !self.protocol.is_tcp() {
            return crate::udp_roles::rr_server(self, s);
        }
        let side = s.side;
        let x = Exchange::new(self.request, self.response, self.server_wait);
        threads::server(
            s,
            Flows {
                conns: self.flows,
                threads: self.threads,
                nodelay: true,
                per_conn: |_, s, _| {
                    spawn_conn_worker("rr-server", side, s, move |c, _, s| {
                        rr::server_waiting(s, x.request, x.response, x.wait, &c.stop)
                    })
                },
                per_share: |i, share, _| {
                    spawn_mux_worker(&format!("rr-mux-{i}"), side, move |c, _| {
                        mux::rr_server(share, x.request, x.response, &c.stop)
                    })
                },
            },
        )
    }

    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        Outcome::Rr(rr_outcome(c, server, warnings))
    }
}

/// The keys rr's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `omit`).
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
