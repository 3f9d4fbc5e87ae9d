//! bulk: a fixed number of bytes over one connection, timed.

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::bulk;
use virtperf_load::interval::Meter;
use virtperf_wire::{BulkParams, Outcome, SideReport, Workload};

use super::conn::{accept_data, connect_data};
use super::role::Role;
use crate::assemble::outcome::{bulk_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::spawn_conn_worker;

impl Role for BulkParams {
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles> {
        let (data, sock, side, key) = (c.data, c.sock, c.side, c.key);
        let BulkParams {
            bytes,
            send_size,
            reverse,
        } = *self;
        let s = connect_data(data, false, &sock, &key)?;
        let m = meter();
        Ok(vec![if reverse {
            spawn_conn_worker("bulk-client", side, s, move |_, _, s| bulk::receive(s, &m))?
        } else {
            spawn_conn_worker("bulk-client", side, s, move |c, _, s| {
                bulk::send(s, bytes, send_size as usize, &m, &c.stop)
            })?
        }])
    }

    fn server(&self, s: ServerHalf) -> Result<Handles> {
        let ServerHalf {
            listener,
            client,
            sock,
            side,
            key,
            ..
        } = s;
        let BulkParams {
            bytes,
            send_size,
            reverse,
        } = *self;
        let mut handles = Vec::new();
        for s in accept_data(listener, client, 1, false, &sock, &key)? {
            let m = Meter::new(None);
            handles.push(if reverse {
                spawn_conn_worker("bulk-server", side, s, move |c, _, s| {
                    bulk::send(s, bytes, send_size as usize, &m, &c.stop)
                })?
            } else {
                spawn_conn_worker("bulk-server", side, s, move |_, _, s| bulk::receive(s, &m))?
            });
        }
        Ok(handles)
    }

    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        bulk_outcome(c, server, self.bytes, self.reverse, warnings)
    }
}

/// The keys bulk's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `omit`).
pub(super) const KEYS: &[&str] = &["bytes", "send_size", "reverse", "cpus", "interval", "trace"];

/// bulk's `Workload` from a spec point's parameters.
pub fn from_params(p: &super::role::Params) -> Workload {
    Workload::Bulk(BulkParams {
        bytes: p.bytes.unwrap_or(1),
        send_size: p.send,
        reverse: p.reverse,
    })
}
