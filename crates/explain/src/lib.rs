//! `virtperf explain`'s battery: the measurements the model in `virtperf_report::explain`
//! is built from, run interleaved (every try runs each measurement once, in a rotated order,
//! so drift hits them alike), each stored as a trial of one run as it finishes.
//!
//! Per try, under the machine's own settings (config `as-is`):
//! - rr across CPUs, blocking (what is explained), on one CPU, and with both sides spinning;
//! - unix-rr across CPUs spinning (the path without the TCP/IP stack);
//! - `wake` (futex) across CPUs, blocking and spinning;
//! - `kvm halt` without and with per-VM halt polling, where `/dev/kvm` opens.
//!
//! And where `haltpoll.guest_halt_poll_ns` can be written (a KVM guest with cpuidle-haltpoll,
//! as root): the blocking rr and wake again with polling off and with a window, the knob
//! restored afterwards through the same journal as `virtperf run`'s knobs. `kvm exits` runs
//! once. A measurement this machine cannot make is stored as a skipped trial with the
//! reason, so the model can say why a component is missing.

mod awake;
mod opts;
mod poll;
mod stream;
mod tries;

pub use opts::ExplainOpts;
pub use stream::{run_stream, StreamOpts};
use tries::{begin_run, check_cpus, knob_records, new_trial, skip, Config, Measure, Tries};

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use virtperf_wire::RrParams;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use virtperf_report::explain as model;
use virtperf_store::{KnobRecord, NewRun, NewTrial, RunStatus, Store, TrialStatus};
use virtperf_wire::{Env, Wait, Workload};

use virtperf_experiment::runner::{Observer, Recorder, RunOutcome};
use virtperf_lab::plan::Plan;
use virtperf_machine::knob::{Knob, KnobGuard};
use virtperf_place::Site;

pub use poll::{POLL_KNOB, POLL_WINDOW_NS};

/// A battery run on another machine (an agent's: a guest's, a remote host's), as it comes
/// back to be stored by the client.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Battery {
    /// That machine's environment.
    pub env: Env,
    /// The battery as planned there.
    pub spec_text: String,
    /// Knobs it changed (and restored).
    pub knobs: Vec<KnobRecord>,
    /// How it ended.
    pub status: RunStatus,
    /// Every measurement, in order.
    pub trials: Vec<NewTrial>,
}

/// An [`Observer`] for an agent running a battery for a client: one line per trial on
/// the agent's standard error (a guest's console), so its operator sees it progress.
struct AgentLog {
    current: String,
}

impl Observer for AgentLog {
    fn config_skipped(&mut self, config: &str, reason: &str) {
        eprintln!("virtperf agent: explain: {config} skipped: {reason}");
    }
    fn trial_started(&mut self, index: usize, planned: usize, point: &str, config: &str, rep: u32) {
        self.current = format!("[{index}/{planned}] {point} · {config} · try {rep}");
    }
    fn trial_done(&mut self, result: &Result<f64>) {
        match result {
            Ok(v) => eprintln!("virtperf agent: explain: {} … {v:.4}", self.current),
            Err(e) => eprintln!("virtperf agent: explain: {} … failed: {e:#}", self.current),
        }
    }
}

/// Runs the battery on this machine for an agent's client: into a scratch database that is
/// removed afterwards, the client keeping the result.
pub fn run_for_client(opts: &ExplainOpts) -> Result<Battery> {
    opts.validate()?;
    in_scratch(|store, log| run(opts, store, &Default::default(), log))
}

/// Runs the stream battery on this machine for an agent's client, as [`run_for_client`].
fn run_stream_for_client(opts: &StreamOpts) -> Result<Battery> {
    in_scratch(|store, log| run_stream(opts, store, &Default::default(), log))
}

/// Runs a battery (`battery`) into a scratch database that is removed afterwards, and
/// returns what it stored.
fn in_scratch(
    battery: impl FnOnce(&mut Store, &mut AgentLog) -> Result<RunOutcome>,
) -> Result<Battery> {
    let dir = std::env::temp_dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let path = dir.join(format!(
        "virtperf-explain-{}-{nanos}.db",
        std::process::id()
    ));
    let result = (|| {
        let mut store = Store::open(&path)?;
        let mut log = AgentLog {
            current: String::new(),
        };
        let outcome = battery(&mut store, &mut log)?;
        let row = store.run(outcome.run_id)?;
        let trials = store.trials(outcome.run_id)?;
        Ok(Battery {
            env: row.env.clone(),
            spec_text: row.spec_text.clone(),
            knobs: store.knobs(outcome.run_id)?,
            status: outcome.status,
            trials: trials.into_iter().map(|t| t.trial).collect(),
        })
    })();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.clone().into_os_string();
        p.push(suffix);
        let _ = std::fs::remove_file(p);
    }
    result
}

/// The battery as a probe (`virtperf_lab::probe`), so an agent runs it for a client elsewhere
/// without knowing what it is: registered by the program that starts agents.
struct BatteryProbe;

impl virtperf_lab::probe::Probe for BatteryProbe {
    fn name(&self) -> &'static str {
        virtperf_lab::probe::EXPLAIN
    }

    fn bound(&self, params: &serde_json::Value) -> Result<Duration> {
        if let Some(s) = stream_params(params)? {
            return Ok(s.bound());
        }
        let opts: ExplainOpts =
            serde_json::from_value(params.clone()).context("explain options do not parse")?;
        opts.validate()?;
        Ok(opts.bound())
    }

    fn run(
        &self,
        params: serde_json::Value,
        lock_nonce: Option<String>,
    ) -> Result<serde_json::Value> {
        if let Some(mut s) = stream_params(&params)? {
            s.lock_nonce = lock_nonce;
            return Ok(serde_json::to_value(run_stream_for_client(&s)?)?);
        }
        let mut opts: ExplainOpts =
            serde_json::from_value(params).context("explain options do not parse")?;
        opts.lock_nonce = lock_nonce;
        Ok(serde_json::to_value(run_for_client(&opts)?)?)
    }
}

/// The stream battery's options, where `params` ask for it (`{"stream": …}`), checked.
fn stream_params(params: &serde_json::Value) -> Result<Option<StreamOpts>> {
    let Some(s) = params.get("stream") else {
        return Ok(None);
    };
    let r: stream::Remote =
        serde_json::from_value(s.clone()).context("explain's stream options do not parse")?;
    Ok(Some(r.opts()?))
}

/// Runs the stream battery at `site` (on its agent's machine, its loopback) and returns
/// what it measured.
pub fn stream_at_site(site: &dyn Site, opts: &StreamOpts) -> Result<Battery> {
    let params = serde_json::json!({ "stream": opts.remote() });
    let out = site.probe(params, opts.bound())?;
    serde_json::from_value(out)
        .context("the agent's battery does not parse (a different virtperf version?)")
}

/// Lets this process's agents run the battery for clients elsewhere (`explain --host`,
/// `--placement guest`, `ssh:`): call once, before any agent starts.
pub fn register_probe() {
    virtperf_lab::probe::register(&BatteryProbe);
}

/// Runs the battery at `site` (on its agent's machine) and returns what it measured.
pub fn at_site(site: &dyn Site, opts: &ExplainOpts) -> Result<Battery> {
    let out = site.probe(serde_json::to_value(opts)?, opts.bound())?;
    serde_json::from_value(out)
        .context("the agent's battery does not parse (a different virtperf version?)")
}

/// Stores a battery that ran elsewhere as a run of `store` named `name` (the round trip's
/// or the stream's run name), measured at `placement`, with `tags`. Returns the run id.
pub fn store_battery(
    store: &mut Store,
    b: &Battery,
    name: &str,
    placement: &str,
    tags: &virtperf_store::Tags,
) -> Result<i64> {
    let run_id = store.begin_run(&NewRun {
        name: name.to_string(),
        spec_text: format!("{}# measured at {placement}\n", b.spec_text),
        env: b.env.clone(),
        tool_version: b.env.tool_version.clone(),
        git_commit: b.env.git_commit.clone(),
        // This process writes the run, so this host and pid tell a reader whether it is live.
        host: virtperf_measure::fingerprint().hostname,
        pid: std::process::id(),
        planned_trials: b.trials.len() as u32,
        tags: tags.clone(),
    })?;
    store.set_knobs(run_id, &b.knobs)?;
    for t in &b.trials {
        store.add_trial(run_id, t)?;
    }
    store.finish_run(run_id, b.status)?;
    Ok(run_id)
}

/// Runs the battery, storing it as one run. When `interrupted` is raised the rr try in
/// flight ends there and no other starts; the knob is restored on every path out (and journaled before it is first
/// written, so even a SIGKILL leaves `virtperf cleanup` able to restore it).
pub fn run(
    opts: &ExplainOpts,
    store: &mut Store,
    interrupted: &std::sync::Arc<AtomicBool>,
    obs: &mut dyn Observer,
) -> Result<RunOutcome> {
    check_cpus(opts.cpus)?;
    let knob = Knob::module_param(POLL_KNOB)?;
    let busy_knobs = [
        Knob::sysctl("net.core.busy_poll")?,
        Knob::sysctl("net.core.busy_read")?,
    ];
    let governor = Knob::cpuidle_governor();
    let state_dir = virtperf_machine::state::journal_base();
    virtperf_machine::knob::check_leftovers(
        &state_dir,
        &[&knob, &busy_knobs[0], &busy_knobs[1], &governor],
    )?;
    let mut guard = KnobGuard::journaled(virtperf_machine::knob::Journal::for_this_process(
        &state_dir,
    ));
    // The original value (if the knob exists) and whether it can be changed: a knob nothing
    // reads is not, since its two configurations would measure one idle path twice.
    let current = poll::current(&knob);
    let writable = poll::settable(&knob, current);
    let mut configs = configs(opts, current, &knob, writable.as_ref().ok());
    let mut originals: Vec<(Knob, String)> = Vec::new();
    if let Ok(orig) = &writable {
        originals.push((knob.clone(), orig.clone()));
    }
    let busy = busy_poll(&busy_knobs, current, &mut configs, &mut originals);
    governor_config(&knob, current, &mut configs, &mut originals);
    for (k, orig) in &originals {
        guard.remember(k, orig.clone());
    }
    let records = knob_records(&configs, &originals);
    let skipped_poll = match (&writable, current) {
        (_, None) => Some(poll::absent()),
        (Err(e), Some(_)) => Some(format!("{e:#}")),
        (Ok(_), Some(_)) => None,
    };
    let kvm = virtperf_kvm::available().map_err(|e| e.to_string());

    // Skipped measurements are stored as trials too (and numbered with them): counted, so
    // the progress ends at [n/n], not [n+1/n].
    let skipped = POLL_SKIPS.len() * usize::from(skipped_poll.is_some())
        + KVM_SKIPS.len() * usize::from(kvm.is_err())
        + usize::from(busy.is_err());
    // Without /dev/kvm the halt measurements are not run (they are among the skipped).
    let measured = configs
        .iter()
        .flat_map(|c| &c.measures)
        .filter(|m| kvm.is_ok() || !matches!(m, Measure::KvmHalt { .. }))
        .count();
    let planned = measured * opts.tries as usize + usize::from(kvm.is_ok()) + skipped;
    let run_id = begin_run(
        store,
        model::RUN_NAME,
        describe(opts, &configs),
        planned,
        &opts.tags,
    )?;
    store.set_knobs(run_id, &records)?;
    obs.run_started(run_id);
    let mut rec = Recorder::new(store, run_id, opts.allow_concurrent);
    let seq = store_skipped(&mut rec, obs, skipped_poll.as_deref(), &kvm, &busy, current)?;
    debug_assert_eq!(seq as usize, skipped, "skipped trials stored vs counted");

    let site = virtperf_place::local::LocalSite::open_holding(opts.lock_nonce.as_deref())?;
    let mut b = Tries {
        opts,
        site: &site,
        rec: &mut rec,
        seq,
        planned,
        interrupted,
        obs,
    };
    let result = b.run(&configs, kvm.is_ok(), &mut guard);
    drop(site);
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
        skipped: skipped_poll
            .into_iter()
            .map(|r| ("halt polling".to_string(), r))
            .chain(kvm.err().map(|r| ("kvm".to_string(), r)))
            .collect(),
        restore_errors,
    })
}

/// What a battery stores as skipped where the halt-poll knob cannot be set.
const POLL_SKIPS: [&str; 2] = [model::RR_CROSS_BLOCK, model::WAKE_BLOCK];
/// What it stores as skipped without /dev/kvm.
const KVM_SKIPS: [&str; 3] = [
    model::KVM_EXITS,
    model::KVM_HALT_NO_POLL,
    model::KVM_HALT_POLL,
];

/// Stores what this machine cannot measure once, as skipped trials with the reason (halt
/// polling, /dev/kvm, busy polling); the number of trials stored.
fn store_skipped(
    rec: &mut Recorder,
    obs: &mut dyn Observer,
    skipped_poll: Option<&str>,
    kvm: &std::result::Result<virtperf_kvm::KvmInfo, String>,
    busy: &std::result::Result<(), String>,
    current: Option<u64>,
) -> Result<u32> {
    let mut seq = 0u32;
    // What this machine cannot measure is stored once, as skipped trials with the reason.
    if let Some(reason) = skipped_poll {
        obs.config_skipped("halt polling", reason);
        for label in POLL_SKIPS {
            seq += 1;
            // Ran under no window: the knob could not be set.
            skip(rec, seq, "guest-poll", label, reason, None)?;
        }
    }
    if let Err(reason) = &kvm {
        obs.config_skipped("kvm", reason);
        for label in KVM_SKIPS {
            seq += 1;
            skip(rec, seq, model::AS_IS, label, reason, current)?;
        }
    }

    if let Err(reason) = &busy {
        obs.config_skipped("busy polling", reason);
        seq += 1;
        skip(
            rec,
            seq,
            model::BUSY_POLL,
            model::RR_CROSS_BLOCK,
            reason,
            current,
        )?;
    }
    Ok(seq)
}

/// The battery's rr between `cpus` (client, server), both sides waiting as `wait`.
fn rr_plan(opts: &ExplainOpts, cpus: (u32, u32), wait: Wait) -> Plan {
    let workload = Workload::Rr(RrParams {
        request: opts.size.0,
        response: opts.size.1,
        client_wait: wait,
        server_wait: wait,
        gap_us: None,
        rate_per_s: None,
        flows: 1,
        threads: None,
        protocol: Default::default(),
        loss_timeout_ms: None,
    });
    Plan {
        client_cpu: Some(cpus.0),
        server_cpu: Some(cpus.1),
        ..Plan::new(workload, opts.rr_duration)
    }
}

/// The spinning cross-CPU round trip over an AF_UNIX socket: `path` without the TCP/IP
/// stack.
fn unix_plan(opts: &ExplainOpts, cpus: (u32, u32)) -> Plan {
    let workload = Workload::UnixRr(virtperf_wire::UnixRrParams {
        request: opts.size.0,
        response: opts.size.1,
        client_wait: Wait::Spin,
        server_wait: Wait::Spin,
        seqpacket: false,
    });
    Plan {
        client_cpu: Some(cpus.0),
        server_cpu: Some(cpus.1),
        ..Plan::new(workload, opts.rr_duration)
    }
}

/// A remedy that needs a reboot (`model::BOOT_REMEDIES`), measured at `site` (a guest
/// booted with its kernel argument): the battery's blocking cross-CPU rr `opts.tries`
/// times under config `config`, numbered after `seq`. `site` is `Err` (why) when that guest
/// could not be booted: one skipped trial says so.
pub fn boot_remedy_trials(
    opts: &ExplainOpts,
    site: Result<&dyn Site, String>,
    config: &str,
    seq: u32,
) -> Vec<NewTrial> {
    let site = match site {
        Ok(s) => s,
        Err(why) => {
            return vec![NewTrial {
                status: TrialStatus::Skipped,
                error: Some(why),
                ..new_trial(seq + 1, config, model::RR_CROSS_BLOCK, None, 1)
            }]
        }
    };
    let plan = rr_plan(opts, opts.cpus, Wait::Block);
    (1..=opts.tries)
        .map(|rep| {
            let mut trial = new_trial(seq + rep, config, model::RR_CROSS_BLOCK, None, rep);
            let t0 = Instant::now();
            match site.run(&plan, &|_| {}) {
                Ok(r) => {
                    let m = r.primary_metric();
                    trial.metric_name = m.name.to_string();
                    trial.metric = Some(m.value);
                    trial.result = Some(r);
                }
                Err(e) => {
                    trial.status = TrialStatus::Failed;
                    trial.error = Some(format!("{e:#}"));
                }
            }
            trial.duration_s = t0.elapsed().as_secs_f64();
            trial
        })
        .collect()
}

/// The configs: as-is always; polling off and on where the knob can be written (each
/// skipped when it is what as-is already has).
fn configs(
    opts: &ExplainOpts,
    current: Option<u64>,
    knob: &Knob,
    writable: Option<&String>,
) -> Vec<Config> {
    let (a, b) = opts.cpus;
    let rr = |label, cpus: (u32, u32), wait: Wait| Measure::Rr {
        label,
        awake: false,
        plan: Box::new(rr_plan(opts, cpus, wait)),
    };
    let mut out = vec![Config {
        name: model::AS_IS.into(),
        poll_ns: current,
        offloads: None,
        knobs: Vec::new(),
        measures: vec![
            rr(model::RR_CROSS_BLOCK, (a, b), Wait::Block),
            rr(model::RR_SAME_BLOCK, (a, a), Wait::Block),
            rr(model::RR_CROSS_SPIN, (a, b), Wait::Spin),
            Measure::Rr {
                label: model::UNIX_RR_CROSS_SPIN,
                awake: false,
                plan: Box::new(unix_plan(opts, (a, b))),
            },
            traced(rr(model::RR_CROSS_TRACED, (a, b), Wait::Block)),
            awake(rr(model::RR_CROSS_AWAKE, (a, b), Wait::Block)),
            Measure::Wake {
                label: model::WAKE_BLOCK,
                spin: false,
            },
            Measure::Wake {
                label: model::WAKE_SPIN,
                spin: true,
            },
            Measure::KvmHalt {
                label: model::KVM_HALT_NO_POLL,
                poll_ns: 0,
            },
            Measure::KvmHalt {
                label: model::KVM_HALT_POLL,
                poll_ns: POLL_WINDOW_NS,
            },
        ],
    }];
    if writable.is_some() {
        for (name, ns) in [("guest-poll-off", 0), ("guest-poll-200us", POLL_WINDOW_NS)] {
            if current == Some(ns) {
                continue;
            }
            out.push(Config {
                name: name.into(),
                poll_ns: Some(ns),
                offloads: None,
                knobs: vec![(knob.clone(), ns.to_string())],
                measures: vec![
                    rr(model::RR_CROSS_BLOCK, (a, b), Wait::Block),
                    Measure::Wake {
                        label: model::WAKE_BLOCK,
                        spin: false,
                    },
                ],
            });
        }
    }
    out
}

/// Busy polling (the receiver polls its socket before it sleeps), a remedy to measure:
/// its config added to `configs` and its knobs' originals to `originals` where both
/// sysctls can be written, else why not.
fn busy_poll(
    knobs: &[Knob],
    current: Option<u64>,
    configs: &mut Vec<Config>,
    originals: &mut Vec<(Knob, String)>,
) -> Result<(), String> {
    let b: Vec<(Knob, String)> = knobs
        .iter()
        .map(|k| {
            k.probe()
                .map(|o| (k.clone(), o))
                .map_err(|e| format!("{e:#}"))
        })
        .collect::<Result<_, _>>()?;
    originals.extend(b.iter().cloned());
    let rr = configs[0].measures[0].clone();
    configs.push(Config {
        name: model::BUSY_POLL.into(),
        poll_ns: current,
        offloads: None,
        knobs: b
            .iter()
            .map(|(k, _)| (k.clone(), BUSY_POLL_US.to_string()))
            .collect(),
        measures: vec![rr],
    });
    Ok(())
}

/// The governor switches the battery measures as remedies, their configs added to
/// `configs` and the knobs' originals to `originals`: menu where haltpoll runs
/// ([`poll::menu_remedy`]), and the haltpoll governor with a window where only the
/// governor keeps the window from acting ([`poll::governor_remedy`]). Its trials record no window
/// ([`model::GOVERNOR_POLL`]): they ran under another governor than as-is, so they are no
/// term of the decomposition.
fn governor_config(
    knob: &Knob,
    current: Option<u64>,
    configs: &mut Vec<Config>,
    originals: &mut Vec<(Knob, String)>,
) {
    let rr = configs[0].measures[0].clone();
    if let Some((governor, orig)) = poll::menu_remedy() {
        configs.push(Config {
            name: model::MENU_GOVERNOR.into(),
            poll_ns: None,
            offloads: None,
            knobs: vec![(governor.clone(), "menu".into())],
            measures: vec![rr.clone()],
        });
        originals.push((governor, orig));
    }
    let Some(both) = poll::governor_remedy(knob, current) else {
        return;
    };
    configs.push(Config {
        name: model::GOVERNOR_POLL.into(),
        poll_ns: None,
        offloads: None,
        knobs: both
            .iter()
            .map(|(k, _)| {
                let v = if k.kind == virtperf_machine::knob::KnobKind::CpuidleGovernor {
                    "haltpoll".to_string()
                } else {
                    model::GOVERNOR_POLL_NS.to_string()
                };
                (k.clone(), v)
            })
            .collect(),
        measures: vec![rr],
    });
    originals.extend(both);
}

/// `net.core.busy_poll` and `busy_read` in the busy-polling config, µs.
const BUSY_POLL_US: u32 = 50;

/// `m` counting tracepoints (`--trace`) and followed by a sampled trial (`--timeline`):
/// the exits by cause and the in-situ latencies the model is set beside.
fn traced(mut m: Measure) -> Measure {
    if let Measure::Rr { plan, .. } = &mut m {
        plan.trace = true;
        plan.timeline = true;
    }
    m
}

/// `m` with both CPUs kept out of idle.
fn awake(mut m: Measure) -> Measure {
    if let Measure::Rr { awake, .. } = &mut m {
        *awake = true;
    }
    m
}

/// What the run's `spec_text` records: the battery as it was planned.
fn describe(opts: &ExplainOpts, configs: &[Config]) -> String {
    let mut s = format!(
        "# virtperf explain: {} tries, rr {:?} per trial, wake {:?}, size {},{}, cpus {},{}\n",
        opts.tries,
        opts.rr_duration,
        opts.wake_duration,
        opts.size.0,
        opts.size.1,
        opts.cpus.0,
        opts.cpus.1
    );
    for c in configs {
        let labels: Vec<&str> = c.measures.iter().map(Measure::label).collect();
        // What the config sets; as-is sets nothing and runs under the window found.
        let set = if c.knobs.is_empty() {
            format!(
                "{POLL_KNOB} = {}",
                c.poll_ns.map_or("absent".to_string(), |n| n.to_string())
            )
        } else {
            c.knobs
                .iter()
                .map(|(k, v)| format!("{} = {v}", k.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        s.push_str(&format!(
            "# config {} ({set}): {}\n",
            c.name,
            labels.join(", ")
        ));
    }
    s
}
