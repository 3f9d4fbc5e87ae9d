//! `explain --host … --vm SPEC`: the hypervisor's view of the VM whose battery runs there.
//! The battery runs on the far machine in one piece, so this host samples the VM in the
//! background while it runs, and afterwards gives each round-trip trial the host's
//! figures over its measured interval, found from the trial's own times.

use std::time::{Duration, SystemTime};

use anyhow::Result;
use virtperf_lab::host_vm::{Recording, Watch};
use virtperf_measure::vm::VmSpec;
use virtperf_store::NewTrial;

/// How often the VM is sampled: a window's edges are within half of it (±0.05 s on a
/// trial of seconds); each sample reads the VM's threads and its KVM statistics.
const EVERY: Duration = Duration::from_millis(100);

/// `--vm` needs the agent in that VM as the machine explained elsewhere.
pub(crate) fn check_vm(vm: bool, elsewhere: Option<&virtperf_place::Placement>) -> Result<()> {
    if vm
        && !matches!(
            elsewhere,
            Some(virtperf_place::Placement::Remote { .. } | virtperf_place::Placement::Ssh(_))
        )
    {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            "--vm watches a VM you run from its host: give the agent in it with --host ADDR (or --placement remote:…/ssh:…)",
        ));
    }
    Ok(())
}

/// The VM being recorded, when `--vm` was given.
pub(crate) struct Recorder(Option<(Watch, Recording)>);

impl Recorder {
    /// Finds the VM (an error now when it cannot be read) and starts sampling it.
    pub(crate) fn start(vm: Option<&VmSpec>) -> Result<Recorder> {
        let Some(spec) = vm else {
            return Ok(Recorder(None));
        };
        let w = Watch::open(spec)?;
        let r = w.record(EVERY);
        Ok(Recorder(Some((w, r))))
    }

    /// Stops sampling and gives each round-trip or stream trial (the as-is one explain
    /// shows beside its terms, and every remedy's and mode's, which `show` and `compare`
    /// then judge on the host's figures too) the host's view over its measured interval,
    /// per transaction or per byte.
    pub(crate) fn attach(self, trials: &mut [NewTrial]) {
        let Some((w, mut rec)) = self.0 else { return };
        rec.stop();
        for t in trials.iter_mut().filter(|t| {
            t.result.as_ref().is_some_and(|r| {
                matches!(
                    r.outcome,
                    virtperf_wire::Outcome::Rr(_) | virtperf_wire::Outcome::Stream(_)
                )
            })
        }) {
            let window = window(t);
            let Some(r) = t.result.as_mut() else { continue };
            let work = Some(r.outcome.work());
            let h = match window {
                Some((from, to)) => w.between(&rec, from, to, work),
                None => w.unread_window(),
            };
            virtperf_lab::assemble::attach_vm(r, h);
        }
    }
}

/// A trial's measured interval on the far machine's wall clock: it ends `stop_s` before the
/// trial does and lasts the outcome's `elapsed_s`.
fn window(t: &NewTrial) -> Option<(SystemTime, SystemTime)> {
    let start = virtperf_store::parse_rfc3339(&t.started_at)?;
    let r = t.result.as_ref()?;
    let end = start + Duration::try_from_secs_f64(t.duration_s).ok()?;
    // Without its stop time the interval's end is not known: no window (said so).
    let to = end.checked_sub(Duration::try_from_secs_f64(r.stop_s?).ok()?)?;
    let elapsed = match &r.outcome {
        virtperf_wire::Outcome::Rr(o) => o.elapsed_s,
        virtperf_wire::Outcome::Stream(o) => o.elapsed_s,
        _ => return None,
    };
    Some((
        to.checked_sub(Duration::try_from_secs_f64(elapsed).ok()?)?,
        to,
    ))
}
