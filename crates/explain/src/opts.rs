//! What the round trip's battery runs: its options, sent as JSON to an agent that runs it
//! on its own machine.

use std::time::Duration;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// What to run. Sent as JSON to an agent that runs the battery on its own machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExplainOpts {
    /// Request and response size, bytes.
    pub size: (u32, u32),
    /// The two CPUs of the cross-CPU measurements (the first also for same-CPU).
    pub cpus: (u32, u32),
    /// Tries of every measurement.
    pub tries: u32,
    /// Length of each rr trial.
    pub rr_duration: Duration,
    /// Length of each wake trial.
    pub wake_duration: Duration,
    /// Wake-ups per `kvm halt` trial.
    pub halt_wakeups: u32,
    /// Measured without the machine lock: every result says so.
    pub allow_concurrent: bool,
    /// The machine lock's nonce when this process holds the lock without having it in its
    /// environment (an agent running the battery for a client): handed to the private
    /// agent so it does not wait for the lock held for it. Never sent over the wire.
    #[serde(skip)]
    pub lock_nonce: Option<String>,
    /// Tags stored with the run (`--tag`): this machine's business, never sent over the wire.
    #[serde(skip)]
    pub tags: virtperf_store::Tags,
}

impl ExplainOpts {
    /// The default battery (92 s on this project's 2-CPU Intel guest without a halt-poll
    /// knob, 160 s on its AMD one whose knob adds configurations) or `--quick` (34 s, 63 s).
    pub fn new(quick: bool) -> ExplainOpts {
        ExplainOpts {
            size: (1, 1),
            cpus: (0, 1),
            tries: if quick { 3 } else { 5 },
            rr_duration: Duration::from_secs(if quick { 2 } else { 3 }),
            wake_duration: Duration::from_secs(if quick { 1 } else { 2 }),
            halt_wakeups: if quick { 300 } else { 1000 },
            allow_concurrent: false,
            lock_nonce: None,
            tags: Default::default(),
        }
    }

    /// Most tries an agent runs for a client: the answer carries every trial in one
    /// control frame, which is bounded.
    pub const MAX_REMOTE_TRIES: u32 = 10;

    /// Checks the options a client sent (an agent trusts nothing on the wire).
    pub fn validate(&self) -> Result<()> {
        if self.tries == 0 || self.tries > Self::MAX_REMOTE_TRIES {
            bail!(
                "explain at an agent runs 1 to {} tries (asked for {})",
                Self::MAX_REMOTE_TRIES,
                self.tries
            );
        }
        let long = Duration::from_secs(60);
        if self.rr_duration > long || self.wake_duration > long {
            bail!("explain trials last at most 60 s each");
        }
        if self.halt_wakeups == 0 || self.halt_wakeups > 100_000 {
            bail!("explain's kvm halt trials take 1 to 100000 wake-ups");
        }
        let max = virtperf_wire::MAX_IO_SIZE;
        if self.size.0 == 0 || self.size.1 == 0 || self.size.0.max(self.size.1) > max {
            bail!("explain's request and response sizes must be 1 to {max} bytes");
        }
        Ok(())
    }

    /// An upper bound on the battery's length (every config, every measurement, set-up
    /// included), for an agent's `--max-duration` and a client's patience.
    pub fn bound(&self) -> Duration {
        // Per try at most: 8 rr (5 as-is, 2 halt-poll configs, busy polling), 5 wake, and
        // for each of its ~15 measurements up to 2 s of set-up (a private agent started,
        // a debug build on a busy 2-CPU machine), plus the traced rr's timeline trial and
        // the two `kvm halt` probes.
        (self.rr_duration * 8 + self.wake_duration * 5 + Duration::from_secs(36)) * self.tries
            + Duration::from_secs(60)
    }
}
