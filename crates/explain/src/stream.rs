//! The stream battery (`explain --workload stream`): the stream as it is, the same stream
//! paced to half its rate (each side's cost per MB off its limit, which the model predicts
//! from), and each remedy, interleaved try by try through the same [`Tries`] as the round
//! trip's battery, stored as trials of one run that
//! [`virtperf_report::explain_stream`] reads back.
//!
//! A short calibration trial first measures the as-is rate the paced trials are set from.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};
use virtperf_experiment::runner::{Observer, Recorder, RunOutcome};
use virtperf_lab::plan::Plan;
use virtperf_machine::knob::{Knob, KnobGuard};
use virtperf_place::Site;
use virtperf_report::explain_stream as model;
use virtperf_store::{Store, TrialStatus};
use virtperf_wire::{StreamParams, Workload, ZeroCopy};

use crate::opts::ExplainOpts;
use crate::tries::{begin_run, check_cpus, knob_records, new_trial, skip, Config, Measure, Tries};

/// What to run.
#[derive(Debug, Clone)]
pub struct StreamOpts {
    /// Bytes per send.
    pub send_size: u32,
    /// Parallel flows.
    pub flows: u32,
    /// The agent sends.
    pub reverse: bool,
    /// SO_RCVBUF of both ends (`--window`; None: the kernel's autotuning).
    pub window: Option<u32>,
    /// Where the two ends run (None: this machine's loopback): a guest placement streams
    /// between this host and a QEMU guest, whose host view (its threads' CPU) each trial
    /// carries.
    pub placement: Option<virtperf_place::Placement>,
    /// Client and server CPUs (each side's data threads pinned there; a guest end's CPU is
    /// its vCPU).
    pub cpus: (u32, u32),
    /// Tries of every measurement.
    pub tries: u32,
    /// Length of each trial.
    pub duration: Duration,
    /// Measured without the machine lock: every result says so.
    pub allow_concurrent: bool,
    /// The machine lock's nonce for the private agent (see [`ExplainOpts::lock_nonce`]).
    pub lock_nonce: Option<String>,
    /// Tags stored with the run.
    pub tags: virtperf_store::Tags,
}

/// What an agent is sent to run the stream battery on its own machine (`explain --workload
/// stream --host`): the battery's shape only; tags, placement and the lock stay with the
/// client. Inside the probe's parameters as `{"stream": …}`, which the round trip's
/// options (`deny_unknown_fields`) refuse, so an agent that predates it says so.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Remote {
    send_size: u32,
    flows: u32,
    reverse: bool,
    window: Option<u32>,
    cpus: (u32, u32),
    tries: u32,
    duration: Duration,
    allow_concurrent: bool,
}

impl Remote {
    /// The options an agent runs, checked (it trusts nothing on the wire).
    pub(crate) fn opts(self) -> Result<StreamOpts> {
        if self.tries == 0 || self.tries > ExplainOpts::MAX_REMOTE_TRIES {
            bail!(
                "explain at an agent runs 1 to {} tries (asked for {})",
                ExplainOpts::MAX_REMOTE_TRIES,
                self.tries
            );
        }
        if self.duration.is_zero() || self.duration > Duration::from_secs(60) {
            bail!("explain's stream trials last 1 ms to 60 s each");
        }
        if self.flows == 0 || self.flows > 64 {
            bail!("explain's stream runs 1 to 64 flows");
        }
        if self.send_size == 0 || self.send_size > virtperf_wire::MAX_IO_SIZE {
            bail!(
                "the send size must be 1 to {} bytes",
                virtperf_wire::MAX_IO_SIZE
            );
        }
        Ok(StreamOpts {
            send_size: self.send_size,
            flows: self.flows,
            reverse: self.reverse,
            window: self.window,
            placement: None,
            cpus: self.cpus,
            tries: self.tries,
            duration: self.duration,
            allow_concurrent: self.allow_concurrent,
            lock_nonce: None,
            tags: Default::default(),
        })
    }
}

/// The calibration trial's label: the as-is rate the paced trials are set from.
pub const CALIBRATION: &str = "stream calibration";
/// The send the "larger sends" remedy tries: the largest a user would pick, not a step up.
/// Four times 16 KiB missed it here: a 16 KiB loopback stream ran at 10.7–11.8 Gbit/s, with
/// 64 KiB sends 10.8–10.9, 128 KiB 17.0–17.4, 1 MiB 38.0–39.6 (2026-11-30, bench/RESULTS.md):
/// what per-send cost bounds shows at the largest send, and the sizes between are a sweep's
/// question (`run` with a send-size sweep).
const LARGER_SEND: u32 = 1 << 20;
/// Socket buffers of the buffers remedy.
const BIG_BUFFER: u32 = 4 << 20;

impl StreamOpts {
    /// The default battery, or `--quick` (3 tries of 2 s: about 45 s on a 2-CPU guest).
    pub fn new(quick: bool) -> StreamOpts {
        StreamOpts {
            send_size: 16 * 1024,
            flows: 1,
            reverse: false,
            window: None,
            placement: None,
            cpus: (0, 1),
            tries: if quick { 3 } else { 5 },
            duration: Duration::from_secs(if quick { 2 } else { 3 }),
            allow_concurrent: false,
            lock_nonce: None,
            tags: Default::default(),
        }
    }

    /// What an agent is sent to run this battery on its machine.
    pub(crate) fn remote(&self) -> Remote {
        Remote {
            send_size: self.send_size,
            flows: self.flows,
            reverse: self.reverse,
            window: self.window,
            cpus: self.cpus,
            tries: self.tries,
            duration: self.duration,
            allow_concurrent: self.allow_concurrent,
        }
    }

    /// The longest the battery may take (an agent holds it to its `--max-duration`, the
    /// client waits that long): per try its eight measurements (RPS's included) with up to
    /// 3 s of set-up each (a private agent started by a debug build on a busy 2-CPU
    /// machine), the calibration, and a minute to spare.
    pub fn bound(&self) -> Duration {
        (self.duration + Duration::from_secs(3)) * 8 * self.tries
            + self.duration
            + Duration::from_secs(60)
    }

    fn plan(&self, send: u32, flows: u32) -> Plan {
        let mut p = StreamParams::new(send);
        p.flows = flows;
        p.reverse = self.reverse;
        let mut plan = Plan {
            client_cpu: Some(self.cpus.0),
            server_cpu: Some(self.cpus.1),
            ..Plan::new(Workload::Stream(p), self.duration)
        };
        plan.sock.rcvbuf = self.window;
        plan
    }

    /// The tries' common settings, as the round trip's battery names them.
    fn tries(&self) -> ExplainOpts {
        ExplainOpts {
            cpus: self.cpus,
            tries: self.tries,
            rr_duration: self.duration,
            allow_concurrent: self.allow_concurrent,
            ..ExplainOpts::new(true)
        }
    }

    fn describe(&self) -> String {
        format!(
            "# virtperf explain --workload stream: {} tries of {:?}, send size {}, {} flow(s){}{}, cpus {},{}{}\n# measures: {}, {}, {}, {}\n",
            self.tries,
            self.duration,
            self.send_size,
            self.flows,
            if self.reverse { ", reverse" } else { "" },
            self.window.map_or(String::new(), |w| format!(", window {w}")),
            self.cpus.0,
            self.cpus.1,
            self.placement
                .as_ref()
                .map_or(String::new(), |p| format!(", at {p}")),
            model::AS_IS,
            model::TRACED,
            model::PACED,
            model::REMEDIES.join(", ")
        )
    }
}

fn measure(label: &'static str, plan: Plan) -> Measure {
    Measure::Rr {
        label,
        plan: Box::new(plan),
        awake: false,
    }
}

/// The measurements, the paced one set to half of `calibrated` Mbit/s.
fn measures(o: &StreamOpts, calibrated: f64) -> Vec<Measure> {
    let as_is = o.plan(o.send_size, o.flows);
    // IPIs and idle entries per MB, in a trial of their own, so the as-is trials carry no
    // probes. (A traced trial's CPU window also held the counters' teardown until lab
    // closed them after the window: a 64-byte sender showed 89% busy, not 100%.)
    let mut traced = o.plan(o.send_size, o.flows);
    traced.trace = true;
    let mut paced = o.plan(o.send_size, o.flows);
    if let Workload::Stream(p) = &mut paced.workload {
        // Per flow: the flows share the half.
        p.rate_bps = Some((calibrated * 1e6 / 2.0 / f64::from(o.flows)).max(1e6) as u64);
    }
    let mut zc = o.plan(o.send_size, o.flows);
    if let Workload::Stream(p) = &mut zc.workload {
        p.zerocopy = Some(ZeroCopy::Msg);
    }
    let mut buffers = o.plan(o.send_size, o.flows);
    buffers.sock.sndbuf = Some(BIG_BUFFER);
    buffers.sock.rcvbuf = Some(BIG_BUFFER);
    let mut out = vec![
        measure(model::AS_IS, as_is),
        measure(model::TRACED, traced),
        measure(model::PACED, paced),
        measure(model::SECOND_FLOW, o.plan(o.send_size, o.flows + 1)),
        measure(model::ZEROCOPY, zc),
        measure(model::BIG_BUFFERS, buffers),
    ];
    if o.send_size < LARGER_SEND {
        out.push(measure(model::LARGER_SENDS, o.plan(LARGER_SEND, o.flows)));
    }
    out
}

/// Runs the stream battery on this machine's loopback, storing it as one run.
pub fn run_stream(
    opts: &StreamOpts,
    store: &mut Store,
    interrupted: &std::sync::Arc<AtomicBool>,
    obs: &mut dyn Observer,
) -> Result<RunOutcome> {
    if !matches!(opts.placement, Some(virtperf_place::Placement::Guest(..))) {
        // Both ends on this machine's CPUs (loopback, namespaces).
        check_cpus(opts.cpus)?;
    }
    if opts.send_size == 0 || opts.send_size > virtperf_wire::MAX_IO_SIZE {
        bail!(
            "the send size must be 1 to {} bytes",
            virtperf_wire::MAX_IO_SIZE
        );
    }
    let tries = opts.tries();
    let state_dir = virtperf_machine::state::journal_base();
    let mut guard = KnobGuard::journaled(virtperf_machine::knob::Journal::for_this_process(
        &state_dir,
    ));
    let knobbed = knob_remedies(opts, &state_dir, &mut guard);
    // The calibration, every measurement each try, each knob remedy's each try (or its
    // skip once), and the device switches' each try.
    let planned = 1
        + (measures(opts, 1.0).len() + offload_configs(opts).len()) * opts.tries as usize
        + knobbed
            .iter()
            .map(|(_, r)| if r.is_ok() { opts.tries as usize } else { 1 })
            .sum::<usize>();
    let run_id = begin_run(store, model::RUN_NAME, opts.describe(), planned, &opts.tags)?;
    let knob_cfgs = knob_configs(opts, &knobbed);
    let originals: Vec<(Knob, String)> = knobbed
        .iter()
        .filter_map(|(_, r)| r.as_ref().ok().map(|(k, o, _)| (k.clone(), o.clone())))
        .collect();
    let records = knob_records(&knob_cfgs, &originals);
    if !records.is_empty() {
        store.set_knobs(run_id, &records)?;
    }
    obs.run_started(run_id);
    let mut rec = Recorder::new(store, run_id, opts.allow_concurrent);
    let mut seq = 1;
    for (label, r) in &knobbed {
        if let Err(why) = r {
            seq += 1;
            obs.config_skipped(label, why);
            skip(&mut rec, seq, label, label, why, None)?;
        }
    }
    let owned: Box<dyn Site> = match &opts.placement {
        None => Box::new(virtperf_place::local::LocalSite::open_holding(
            opts.lock_nonce.as_deref(),
        )?),
        Some(p) => virtperf_place::open(&away_from_the_host_end(p, opts.cpus))?,
    };
    let site = owned.as_ref();
    let result = calibrate(opts, site, &mut rec, obs, planned).and_then(|rate| {
        let as_is = measures(opts, rate);
        let mut configs = vec![Config {
            name: virtperf_report::explain::AS_IS.into(),
            poll_ns: None,
            knobs: Vec::new(),
            offloads: None,
            measures: as_is,
        }];
        configs.extend(knob_cfgs);
        configs.extend(offload_configs(opts));
        Tries {
            opts: &tries,
            site,
            rec: &mut rec,
            seq,
            planned,
            interrupted,
            obs,
        }
        .run(&configs, false, &mut guard)
    });
    // The guest (if any) goes before the run is closed.
    drop(owned);
    if let Err(e) = result {
        rec.tally.fatal = Some(e);
    }
    let restore_errors = guard.restore_all();
    let (status, ok, failed) = rec.close(interrupted, !restore_errors.is_empty())?;
    Ok(RunOutcome {
        run_id,
        status,
        ok,
        failed,
        skipped: knobbed
            .into_iter()
            .filter_map(|(label, r)| r.err().map(|why| (label.to_string(), why)))
            .collect(),
        restore_errors,
    })
}

/// Between namespaces: the path's veth ends with GRO on, and with TSO off (each a config
/// of one measurement, the as-is stream), which only a namespace placement's site made
/// devices for.
fn offload_configs(opts: &StreamOpts) -> Vec<Config> {
    use virtperf_place::offload::Offloads;
    if !matches!(opts.placement, Some(virtperf_place::Placement::Netns(..))) {
        return Vec::new();
    }
    [
        (
            model::GRO_ON,
            Offloads {
                gro: Some(true),
                tso: None,
            },
        ),
        (
            model::TSO_OFF,
            Offloads {
                gro: None,
                tso: Some(false),
            },
        ),
    ]
    .into_iter()
    .map(|(label, o)| Config {
        name: label.into(),
        poll_ns: None,
        knobs: Vec::new(),
        offloads: Some(o),
        measures: vec![measure(label, opts.plan(opts.send_size, opts.flows))],
    })
    .collect()
}

/// A remedy that sets one knob of this machine for its trials: the knob, its original value
/// and the value tried (remembered in the guard, journaled before it is first written), or
/// why it cannot be tried here (one line).
type KnobRemedy = (
    &'static str,
    std::result::Result<(Knob, String, String), String>,
);

/// The knob remedies, in the order reported: RPS, then guest halt polling.
fn knob_remedies(
    opts: &StreamOpts,
    state_dir: &std::path::Path,
    guard: &mut KnobGuard,
) -> Vec<KnobRemedy> {
    vec![
        (model::RPS, rps(opts, state_dir, guard)),
        (model::HALT_POLL, halt_poll(state_dir, guard)),
    ]
}

/// This machine's guest halt polling at [`crate::poll::POLL_WINDOW_NS`], where the knob exists,
/// the haltpoll cpuidle governor reads it, it can be written and polls less now: a
/// stream's receiver (and on loopback its sender's softirq) wakes CPUs that idle between
/// its segments, and in a KVM guest each halt and each IPI to a halted CPU is a VM exit
/// (`tune` measured 200 µs raising a 16 KiB loopback stream ×2.2 on a PVM guest whose
/// `explain` named no remedy of the kind).
fn halt_poll(
    state_dir: &std::path::Path,
    guard: &mut KnobGuard,
) -> std::result::Result<(Knob, String, String), String> {
    let knob = Knob::module_param(crate::poll::POLL_KNOB).map_err(|e| format!("{e:#}"))?;
    virtperf_machine::knob::check_leftovers(state_dir, &[&knob]).map_err(|e| format!("{e:#}"))?;
    let Some(current) = crate::poll::current(&knob) else {
        return Err(crate::poll::absent());
    };
    // The knob is the haltpoll governor's: under another governor (or without a driver) it
    // reads a value that nothing acts on (an AMD guest here read 200000 with no driver).
    if let Some(why) = virtperf_measure::env::halt_poll_inert_now() {
        return Err(format!("{} exists, but {why}", crate::poll::POLL_KNOB));
    }
    if current >= crate::poll::POLL_WINDOW_NS {
        return Err(format!(
            "{} is {current} here already: a 200 µs window polls no longer",
            crate::poll::POLL_KNOB
        ));
    }
    let original = knob.probe().map_err(|e| format!("{e:#}"))?;
    guard.remember(&knob, original.clone());
    Ok((knob, original, crate::poll::POLL_WINDOW_NS.to_string()))
}

/// The loopback device's receive steering file: where its receive softirq runs.
const LO_RPS: &str = "lo/queues/rx-0/rps_cpus";

/// The RPS remedy, where it can be tried: the loopback device's receive processing
/// steered to the receiving end's CPU (by default it runs on the sender's, in the softirq
/// its send raises), remembered in `guard` (journaled before it is first written). Err:
/// why not, one line.
fn rps(
    opts: &StreamOpts,
    state_dir: &std::path::Path,
    guard: &mut KnobGuard,
) -> std::result::Result<(Knob, String, String), String> {
    if opts.placement.is_some() {
        return Err("RPS is tried on this host's loopback only: a namespace's veth and a guest's NIC are made for the run, after the battery is planned (`tune --placement netns:…` steers a veth)".into());
    }
    let knob = Knob::netdev(LO_RPS).map_err(|e| format!("{e:#}"))?;
    virtperf_machine::knob::check_leftovers(state_dir, &[&knob]).map_err(|e| format!("{e:#}"))?;
    let original = knob.probe().map_err(|e| format!("{e:#}"))?;
    let receiver = if opts.reverse {
        opts.cpus.0
    } else {
        opts.cpus.1
    };
    if receiver >= 64 {
        return Err(format!(
            "CPU {receiver} is beyond the 64-CPU mask virtperf writes"
        ));
    }
    guard.remember(&knob, original.clone());
    Ok((knob, original, format!("{:x}", 1u64 << receiver)))
}

/// A config of one measurement, the as-is stream, per knob remedy that can be tried.
fn knob_configs(opts: &StreamOpts, knobbed: &[KnobRemedy]) -> Vec<Config> {
    knobbed
        .iter()
        .filter_map(|(label, r)| {
            let (knob, _, value) = r.as_ref().ok()?;
            Some(Config {
                name: (*label).into(),
                poll_ns: (*label == model::HALT_POLL).then_some(crate::poll::POLL_WINDOW_NS),
                knobs: vec![(knob.clone(), value.clone())],
                offloads: None,
                measures: vec![measure(label, opts.plan(opts.send_size, opts.flows))],
            })
        })
        .collect()
}

/// A guest placement whose vCPU threads are pinned off the host end's CPU (unless the user
/// pinned them): that CPU's share is then the host end's own work, not QEMU's emulation
/// landing on it. Where this host has no other CPU, as given.
fn away_from_the_host_end(
    p: &virtperf_place::Placement,
    cpus: (u32, u32),
) -> virtperf_place::Placement {
    let mut p = p.clone();
    if let virtperf_place::Placement::Guest(d, g) = &mut p {
        let host_cpu = if d.name() == "guest-host" {
            cpus.1
        } else {
            cpus.0
        };
        let other = (0..64u32).find(|c| *c != host_cpu && virtperf_load::sock::cpu_allowed(*c));
        if let (true, Some(other)) = (g.vcpu_cpus.is_empty(), other) {
            g.vcpu_cpus = vec![other];
        }
    }
    p
}

/// One short as-is trial (a third of a trial's length, at least 1 s), stored: its rate
/// sets the paced trials'.
fn calibrate(
    opts: &StreamOpts,
    site: &dyn Site,
    rec: &mut Recorder,
    obs: &mut dyn Observer,
    planned: usize,
) -> Result<f64> {
    let mut plan = opts.plan(opts.send_size, opts.flows);
    plan.duration = (opts.duration / 3).max(Duration::from_secs(1));
    obs.trial_started(1, planned, CALIBRATION, virtperf_report::explain::AS_IS, 1);
    let mut trial = new_trial(1, virtperf_report::explain::AS_IS, CALIBRATION, None, 1);
    let t0 = Instant::now();
    let res = site.run(&plan, &|_| {}).map(|mut r| {
        r.allow_concurrent |= opts.allow_concurrent;
        let m = r.primary_metric();
        trial.metric_name = m.name.to_string();
        trial.result = Some(r);
        m.value
    });
    trial.duration_s = t0.elapsed().as_secs_f64();
    match &res {
        Ok(v) => trial.metric = Some(*v),
        Err(e) => {
            trial.status = TrialStatus::Failed;
            trial.error = Some(format!("{e:#}"));
        }
    }
    match rec.keep(&trial, res, obs)? {
        Some(r) if r > 0.0 => Ok(r),
        Some(_) => {
            bail!("the calibration stream moved nothing: the battery cannot set its paced rate")
        }
        None => bail!(
            "the calibration stream failed ({}): the battery cannot set its paced rate",
            trial.error.as_deref().unwrap_or("no reason given")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What an agent is sent is checked before anything runs: out-of-range tries,
    /// durations, flows and send sizes (huge, zero, a number like 1e30 seconds) are
    /// refused, unknown fields too (an older client's or an attacker's), and a sane
    /// battery goes through with its shape intact.
    #[test]
    fn an_agent_refuses_a_stream_battery_out_of_range() {
        let good = serde_json::json!({
            "send_size": 16384, "flows": 1, "reverse": false, "window": null,
            "cpus": [0, 1], "tries": 3, "duration": {"secs": 2, "nanos": 0},
            "allow_concurrent": false
        });
        let parse = |v: serde_json::Value| -> Result<StreamOpts> {
            serde_json::from_value::<Remote>(v)
                .map_err(anyhow::Error::from)
                .and_then(Remote::opts)
        };
        let o = parse(good.clone()).expect("a sane battery");
        assert_eq!(
            (o.send_size, o.tries, o.duration),
            (16384, 3, Duration::from_secs(2))
        );
        assert!(o.placement.is_none() && o.lock_nonce.is_none());
        for (field, value) in [
            ("tries", serde_json::json!(0)),
            ("tries", serde_json::json!(1000)),
            ("flows", serde_json::json!(0)),
            ("flows", serde_json::json!(65)),
            ("send_size", serde_json::json!(0)),
            ("send_size", serde_json::json!(u32::MAX)),
            ("duration", serde_json::json!({"secs": 0, "nanos": 0})),
            ("duration", serde_json::json!({"secs": 1e30, "nanos": 0})),
            ("duration", serde_json::json!({"secs": 61, "nanos": 0})),
            ("surprise", serde_json::json!(1)),
        ] {
            let mut v = good.clone();
            v[field] = value.clone();
            assert!(parse(v).is_err(), "{field} = {value} was taken");
        }
    }
}
