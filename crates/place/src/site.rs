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

    /// Runs `background` and, `lead` after it started, `foreground`, at once through this
    /// site, the same path (`rr --under-load`, a spec's `load`). Returns the foreground's
    /// result and the background's (its failure is the caller's to judge; the
    /// foreground's fails the call). Here both tests share this process's machine lock
    /// with the site's agents; sites whose agent runs elsewhere hold its machine for the
    /// pair ([`virtperf_lab::client::Hold`]).
    fn run_beside(
        &self,
        background: &Plan,
        foreground: &Plan,
        lead: std::time::Duration,
    ) -> Result<(TestResult, Result<TestResult>)> {
        beside(&|p| self.run(p, &|_| {}), background, foreground, lead)
    }

    /// Switches the offloads of the devices this site made for its path (a namespace
    /// placement's veth ends); [`Offloads::default`] puts back what they had when first
    /// switched. Err: this site made no device of its own (loopback, a guest, another
    /// machine).
    fn set_offloads(&self, _o: crate::offload::Offloads) -> Result<()> {
        anyhow::bail!("this placement made no device whose offloads virtperf can switch")
    }

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

/// Runs `background` on a thread and, `lead` later, `foreground` here, with `run`; waits
/// for both. Returns the foreground's result and the background's.
pub fn beside(
    run: &(dyn Fn(&Plan) -> Result<TestResult> + Sync),
    background: &Plan,
    foreground: &Plan,
    lead: std::time::Duration,
) -> Result<(TestResult, Result<TestResult>)> {
    std::thread::scope(|sc| {
        let bg = sc.spawn(|| run(background));
        std::thread::sleep(lead);
        let fg = run(foreground);
        let bg = bg
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the background test's thread panicked")));
        Ok((fg?, bg))
    })
}
