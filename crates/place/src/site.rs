//! What every placement implements (a [`Site`]), and the link shaping a namespace
//! placement applies.

use anyhow::Result;
use virtperf_wire::TestResult;

use virtperf_lab::plan::{Plan, ProgressFn, Target};

/// Emulated link properties of the client's side of a namespace placement (`--link-rate`,
/// `--delay`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Shaping {
    /// Token-bucket rate (`tc … tbf rate`), e.g. `1gbit`.
    pub rate: Option<String>,
    /// One-way delay (netem), e.g. `1ms`.
    pub delay: Option<String>,
}

/// A place where the two ends of a plan run, opened once and handed any number of plans;
/// torn down (agents stopped, namespaces and guests removed) when dropped.
pub trait Site: Sync {
    /// The agent this site's client half talks to (for guests that drive the test, the
    /// driving guest's agent).
    fn target(&self) -> Target;

    /// Runs one test of `plan` across the site; the result names the placement.
    fn run(&self, plan: &Plan, progress: ProgressFn) -> Result<TestResult>;

    /// Runs a probe (`virtperf_lab::probe`) on the machine of this site's agent (which must allow
    /// it: `serve --allow-drive`, as virtperf's guests do), waiting up to `bound`.
    fn probe(
        &self,
        params: serde_json::Value,
        bound: std::time::Duration,
    ) -> Result<serde_json::Value> {
        virtperf_lab::client::probe(&self.target(), params, bound)
    }
}
