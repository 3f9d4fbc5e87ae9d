//! What every workload's role implements, and the parameters a spec point (or any other
//! front end) gives a workload before it becomes its variant of `Workload`.

use std::sync::Arc;

use anyhow::Result;
use virtperf_load::interval::Meter;
use virtperf_wire::{Outcome, Protocol, RecvWait, SideReport, Wait};

use crate::assemble::outcome::Collected;
use crate::half::{ClientHalf, Handles, ServerHalf};

/// One workload's two halves, implemented by its parameter struct (`RrParams`, …): the
/// client half, the server half and which outcome both sides' counts become. The one
/// `match` over `Workload` that picks it is [`super::role_of`].
pub(crate) trait Role: Sync {
    /// Starts the client half's workers on connections to `c.data`; `meter` makes the
    /// time-series meter of one worker (each worker gets its own).
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles>;
    /// Starts the server half's workers on the test's data listener.
    fn server(&self, s: ServerHalf) -> Result<Handles>;
    /// Its result: the outcome both sides' counts become (the shapes are in
    /// `crate::assemble::outcome`); its unit of work is the outcome's
    /// (`Outcome::work`).
    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome;
}

/// A workload's parameters as a spec point gives them: every key any workload takes, each
/// workload's `from_params` reading its own. Keys a workload does not take are refused
/// before this is built (its `KEYS`).
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
    /// `SOCK_SEQPACKET` instead of `SOCK_STREAM` (unix-rr).
    pub seqpacket: bool,
}
