//! Probes: measurements an agent runs on its own machine, by name, for a client elsewhere
//! (today `explain`'s battery inside a guest or on a remote host). The agent knows only this
//! trait; what a probe measures is registered by the program that starts the agent, so
//! nothing below the probe's own module knows it exists.

use std::sync::Mutex;
use std::time::Duration;

use anyhow::Result;
use serde_json::Value;

/// The probe the protocol's `Explain` message names (its `battery` are the parameters).
pub const EXPLAIN: &str = "explain";

/// A measurement an agent runs on its machine with the parameters a client sends.
pub trait Probe: Send + Sync {
    /// The name clients ask for it by.
    fn name(&self) -> &'static str;
    /// Checks `params` and returns the longest the probe may take with them (the agent
    /// holds it to its `--max-duration`, the client waits that long).
    fn bound(&self, params: &Value) -> Result<Duration>;
    /// Runs it. `lock_nonce`: the machine lock is held for this probe (agents it starts
    /// are told so and do not wait for it).
    fn run(&self, params: Value, lock_nonce: Option<String>) -> Result<Value>;
}

static PROBES: Mutex<Vec<&'static dyn Probe>> = Mutex::new(Vec::new());

/// Makes `p` available to every agent this process runs; a second one of the same name
/// replaces the first.
pub fn register(p: &'static dyn Probe) {
    if let Ok(mut v) = PROBES.lock() {
        v.retain(|q| q.name() != p.name());
        v.push(p);
    }
}

/// The probe registered under `name`.
pub fn find(name: &str) -> Option<&'static dyn Probe> {
    PROBES
        .lock()
        .ok()
        .and_then(|v| v.iter().find(|p| p.name() == name).copied())
}
