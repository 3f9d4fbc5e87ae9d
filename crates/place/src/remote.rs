//! `--placement remote:HOST[:PORT]` (and `--host`): an agent someone else started; the
//! client half runs here. Nothing to set up or tear down.

use anyhow::Result;
use virtperf_wire::TestResult;

use virtperf_lab::client;
use virtperf_lab::plan::{Plan, ProgressFn, Target};

/// An agent someone started.
pub struct RemoteSite {
    target: Target,
    label: Option<String>,
}

impl RemoteSite {
    /// The agent at `target`; results carry `label` as their placement (none for `--host`,
    /// which results have always shown as a plain target).
    pub fn new(target: Target, label: Option<String>) -> RemoteSite {
        RemoteSite { target, label }
    }
}

impl super::Site for RemoteSite {
    fn target(&self) -> Target {
        self.target.clone()
    }

    fn run(&self, plan: &Plan, progress: ProgressFn) -> Result<TestResult> {
        let mut r = client::run(&self.target, plan, progress)?;
        r.placement.clone_from(&self.label);
        Ok(r)
    }

    /// The agent runs one test at a time under its machine's lock: hold it for the pair.
    fn run_beside(
        &self,
        background: &Plan,
        foreground: &Plan,
        lead: std::time::Duration,
    ) -> Result<(TestResult, Result<TestResult>)> {
        let hold = client::Hold::take(&self.target)?;
        let held = RemoteSite::new(hold.target(&self.target), self.label.clone());
        super::site::beside(&|p| held.run(p, &|_| {}), background, foreground, lead)
    }
}
