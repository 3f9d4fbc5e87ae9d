//! What every workload's role implements, and the parameters a spec point (or any other
//! front end) gives a workload before it becomes its variant of `Workload`.

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_wire::Workload;

use virtperf_wire::{Protocol, RecvWait, SideReport, Wait};

use crate::assemble::{Collected, Measured};
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
    /// Its result: which outcome both sides' counts become, the units its service demand is
    /// per, and their name (`crate::assemble`'s outcome shapes).
    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Measured;
    /// The keys its `[[workload]]` table in a spec file takes (besides `kind`, `label`,
    /// `duration`, `warmup`).
    fn keys(&self) -> &'static [&'static str];
    /// Its variant of `Workload` from a spec point's parameters.
    fn workload(&self, p: &Params) -> Workload;
}

/// A workload's parameters as a spec point gives them: every key any workload takes, each
/// role reading its own ([`Role::workload`]). Keys a workload does not take are refused
/// before this is built ([`Role::keys`]).
#[derive(Debug, Clone, Default)]
pub struct Params {
    /// Request and response sizes (rr, crr).
    pub size: (u32, u32),
    /// Send size (stream, bulk).
    pub send: u32,
    /// Parallel flows.
    pub flows: u32,
    /// Data from the server to the client (stream, bulk).
    pub reverse: bool,
    /// Gap between transactions, µs (rr, closed loop).
    pub gap_us: Option<u64>,
    /// Transport of the data path.
    pub protocol: Protocol,
    /// How the client and the server wait (rr, crr).
    pub wait: (Wait, Wait),
    /// Open-loop request rate per second (rr).
    pub rate_per_s: Option<u32>,
    /// UDP rr's loss timeout, ms.
    pub loss_timeout_ms: Option<u32>,
    /// UDP stream pacing, bits/s.
    pub rate_bps: Option<u64>,
    /// UDP generic segmentation offload on the sender.
    pub gso: bool,
    /// UDP generic receive offload on the receiver.
    pub gro: bool,
    /// Receive size (stream).
    pub recv_size: Option<u32>,
    /// How a stream receiver waits.
    pub recv_wait: Option<RecvWait>,
    /// Bytes to move (bulk, http).
    pub bytes: Option<u64>,
    /// Worker threads multiplexing the flows.
    pub threads: Option<u32>,
    /// Both directions at once (stream).
    pub bidir: bool,
    /// Zero-copy senders (stream).
    pub zerocopy: Option<virtperf_wire::ZeroCopy>,
    /// Where a stream's buffers start within their page (stream).
    pub buf_offset: Option<u32>,
}
