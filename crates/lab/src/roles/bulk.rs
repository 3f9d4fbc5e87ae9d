//! bulk: a fixed number of bytes over one connection, timed.

use std::sync::Arc;

use anyhow::{bail, Result};
use virtperf_load::bulk;
use virtperf_load::interval::Meter;
use virtperf_wire::Workload;

use super::conn::{accept_data, connect_data};
use super::role::Role;
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::spawn_conn_worker;

/// bulk's two halves.
pub(super) struct Bulk;

impl Role for Bulk {
    fn client(
        &self,
        w: &Workload,
        c: &ClientHalf,
        meter: &mut dyn FnMut() -> Arc<Meter>,
    ) -> Result<Handles> {
        let (data, sock, side, key) = (c.data, c.sock, c.side, c.key);
        let mut handles = Vec::new();
        match *w {
            Workload::Bulk {
                bytes,
                send_size,
                reverse,
            } => {
                let s = connect_data(data, false, &sock, &key)?;
                let m = meter();
                handles.push(if reverse {
                    spawn_conn_worker("bulk-client", side, s, move |_, _, s| bulk::receive(s, &m))?
                } else {
                    spawn_conn_worker("bulk-client", side, s, move |_, _, s| {
                        bulk::send(s, bytes, send_size as usize, &m)
                    })?
                });
            }
            _ => bail!("the bulk role was given a {} workload", w.name()),
        }
        Ok(handles)
    }

    fn server(&self, w: &Workload, s: ServerHalf) -> Result<Handles> {
        let ServerHalf {
            listener,
            client,
            sock,
            side,
            key,
            ..
        } = s;
        let mut handles = Vec::new();
        match *w {
            Workload::Bulk {
                bytes,
                send_size,
                reverse,
            } => {
                for s in accept_data(listener, client, 1, false, &sock, &key)? {
                    let m = Meter::new(None);
                    handles.push(if reverse {
                        spawn_conn_worker("bulk-server", side, s, move |_, _, s| {
                            bulk::send(s, bytes, send_size as usize, &m)
                        })?
                    } else {
                        spawn_conn_worker("bulk-server", side, s, move |_, _, s| {
                            bulk::receive(s, &m)
                        })?
                    });
                }
            }
            _ => bail!("the bulk role was given a {} workload", w.name()),
        }
        Ok(handles)
    }

    fn outcome(
        &self,
        c: &crate::assemble::Collected,
        server: &virtperf_wire::SideReport,
        warnings: &mut Vec<String>,
    ) -> crate::assemble::Measured {
        let (bytes, reverse) = match c.plan.workload {
            Workload::Bulk { bytes, reverse, .. } => (bytes, reverse),
            _ => (0, false),
        };
        crate::assemble::bulk_outcome(c, server, bytes, reverse, warnings)
    }

    fn keys(&self) -> &'static [&'static str] {
        &["bytes", "send_size", "reverse", "cpus", "interval", "trace"]
    }

    fn workload(&self, p: &super::role::Params) -> Workload {
        Workload::Bulk {
            bytes: p.bytes.unwrap_or(1),
            send_size: p.send,
            reverse: p.reverse,
        }
    }
}
