//! What every workload's role implements.

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_wire::Workload;

use crate::half::{ClientHalf, Handles, ServerHalf};

/// One workload's two halves, over TCP.
pub(crate) trait Role: Sync {
    /// Starts the client half's workers on connections to `c.data`; `meter` makes the
    /// time-series meter of one worker (each worker gets its own).
    fn client(
        &self,
        w: &Workload,
        c: &ClientHalf,
        meter: &mut dyn FnMut() -> Arc<Meter>,
    ) -> Result<Handles>;
    /// Starts the server half's workers on the test's data listener.
    fn server(&self, w: &Workload, s: ServerHalf) -> Result<Handles>;
}
