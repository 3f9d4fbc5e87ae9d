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

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use virtperf_wire::RrParams;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::json;
use virtperf_report::explain as model;
use virtperf_store::{KnobRecord, NewRun, NewTrial, RunStatus, Store, TrialStatus};
use virtperf_wire::{Env, Wait, Workload};

use virtperf_experiment::runner::{Observer, Recorder, RunOutcome, Tally};
use virtperf_lab::plan::Plan;
use virtperf_machine::knob::{Knob, KnobGuard};
use virtperf_place::Site;

/// The guest's halt-polling window the battery compares with no polling: cpuidle-haltpoll's
/// own default (and KVM's `halt_poll_ns`), long enough to cover a back-to-back round trip.
pub const POLL_WINDOW_NS: u64 = 200_000;
/// The knob.
pub const POLL_KNOB: &str = "haltpoll.guest_halt_poll_ns";

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
    /// The default battery (92 s on this project's 2-CPU guest) or `--quick` (34 s).
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
        let outcome = run(opts, &mut store, &AtomicBool::new(false), &mut log)?;
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
        let mut opts: ExplainOpts =
            serde_json::from_value(params).context("explain options do not parse")?;
        opts.lock_nonce = lock_nonce;
        Ok(serde_json::to_value(run_for_client(&opts)?)?)
    }
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

/// Stores a battery that ran elsewhere as a run of `store`, measured at `placement`, with
/// `tags`. Returns the run id.
pub fn store_battery(
    store: &mut Store,
    b: &Battery,
    placement: &str,
    tags: &virtperf_store::Tags,
) -> Result<i64> {
    let run_id = store.begin_run(&NewRun {
        name: model::RUN_NAME.to_string(),
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

/// One measurement of the battery.
#[derive(Debug, Clone)]
enum Measure {
    /// An rr test; `awake`: with a `SCHED_IDLE` spinner on each of its CPUs, so neither
    /// idles (no idle exit on the path, whatever the cpuidle driver or knobs).
    Rr {
        label: &'static str,
        plan: Box<Plan>,
        awake: bool,
    },
    Wake {
        label: &'static str,
        spin: bool,
    },
    KvmHalt {
        label: &'static str,
        poll_ns: u64,
    },
    KvmExits,
}

impl Measure {
    fn label(&self) -> &'static str {
        match self {
            Measure::Rr { label, .. }
            | Measure::Wake { label, .. }
            | Measure::KvmHalt { label, .. } => label,
            Measure::KvmExits => model::KVM_EXITS,
        }
    }
}

/// The workload name a measurement is stored under, from its label.
fn workload_of(label: &str) -> &'static str {
    if label == model::KVM_EXITS {
        "kvm-exits"
    } else if label.starts_with("kvm halt") {
        "kvm-halt"
    } else if label.starts_with("wake") {
        "wake"
    } else if label.starts_with("unix-rr") {
        "unix-rr"
    } else {
        "rr"
    }
}

/// A trial of the battery before it ran: the parameters every stored measurement has.
fn new_trial(seq: u32, config: &str, label: &str, poll: Option<u64>, rep: u32) -> NewTrial {
    NewTrial {
        seq,
        config: config.into(),
        workload: workload_of(label).into(),
        point: json!({ model::POLL_PARAM: poll }),
        point_label: label.into(),
        repetition: rep,
        status: TrialStatus::Ok,
        error: None,
        result: None,
        detail: None,
        metric: None,
        metric_name: String::new(),
        started_at: virtperf_store::now_rfc3339(),
        duration_s: 0.0,
    }
}

/// A configuration of the battery: the halt-poll window to set (None: leave as is).
#[derive(Debug, Clone)]
struct Config {
    name: String,
    /// The value the knob has during this config (None: no knob here).
    poll_ns: Option<u64>,
    knobs: Vec<(Knob, String)>,
    measures: Vec<Measure>,
}

/// Runs the battery, storing it as one run. Stops between trials when `interrupted` is
/// raised; the knob is restored on every path out (and journaled before it is first
/// written, so even a SIGKILL leaves `virtperf cleanup` able to restore it).
pub fn run(
    opts: &ExplainOpts,
    store: &mut Store,
    interrupted: &AtomicBool,
    obs: &mut dyn Observer,
) -> Result<RunOutcome> {
    check_cpus(opts.cpus)?;
    let knob = Knob::module_param(POLL_KNOB)?;
    let busy_knobs = [
        Knob::sysctl("net.core.busy_poll")?,
        Knob::sysctl("net.core.busy_read")?,
    ];
    let state_dir = virtperf_machine::state::journal_base();
    virtperf_machine::knob::check_leftovers(&state_dir, &[&knob, &busy_knobs[0], &busy_knobs[1]])?;
    let mut guard = KnobGuard::journaled(virtperf_machine::knob::Journal::for_this_process(
        &state_dir,
    ));
    // The original value (if the knob exists) and whether it can be changed.
    let current = knob.read().ok().and_then(|v| v.trim().parse::<u64>().ok());
    let writable = knob.probe();
    let mut configs = configs(opts, current, &knob, writable.as_ref().ok());
    let mut originals: Vec<(Knob, String)> = Vec::new();
    if let Ok(orig) = &writable {
        originals.push((knob.clone(), orig.clone()));
    }
    let busy = busy_poll(&busy_knobs, current, &mut configs, &mut originals);
    for (k, orig) in &originals {
        guard.remember(k, orig.clone());
    }
    let records = knob_records(&configs, &originals);
    let skipped_poll = match (&writable, current) {
        (_, None) => Some(format!(
            "{POLL_KNOB} does not exist here (not a KVM guest with the cpuidle-haltpoll driver)"
        )),
        (Err(e), Some(_)) => Some(format!("{e:#}")),
        (Ok(_), Some(_)) => None,
    };
    let kvm = virtperf_kvm::available().map_err(|e| e.to_string());

    let planned = configs.iter().map(|c| c.measures.len()).sum::<usize>() * opts.tries as usize
        + usize::from(kvm.is_ok());
    let env = virtperf_measure::fingerprint();
    let run_id = store.begin_run(&NewRun {
        name: model::RUN_NAME.to_string(),
        spec_text: describe(opts, &configs),
        git_commit: env.git_commit.clone(),
        tool_version: env.tool_version.clone(),
        host: env.hostname.clone(),
        env,
        pid: std::process::id(),
        planned_trials: planned as u32,
        tags: opts.tags.clone(),
    })?;
    store.set_knobs(run_id, &records)?;
    obs.run_started(run_id);
    let mut rec = Recorder {
        store,
        run_id,
        allow_concurrent: opts.allow_concurrent,
        tally: Tally::default(),
    };
    let seq = store_skipped(&mut rec, obs, skipped_poll.as_deref(), &kvm, &busy, current)?;

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

/// Refuses a CPU pair explain cannot pin to.
fn check_cpus(cpus: (u32, u32)) -> Result<()> {
    let (a, b) = cpus;
    if a == b {
        bail!("explain needs two different CPUs (got {a},{b})");
    }
    for cpu in [a, b] {
        if !virtperf_load::sock::cpu_allowed(cpu) {
            bail!("CPU {cpu} does not exist here (or is not allowed to this process): pick two with --cpus");
        }
    }
    Ok(())
}

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
        for label in [model::RR_CROSS_BLOCK, model::WAKE_BLOCK] {
            seq += 1;
            // Ran under no window: the knob could not be set.
            skip(rec, seq, "guest-poll", label, reason, None)?;
        }
    }
    if let Err(reason) = &kvm {
        obs.config_skipped("kvm", reason);
        for label in [
            model::KVM_EXITS,
            model::KVM_HALT_NO_POLL,
            model::KVM_HALT_POLL,
        ] {
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
        knobs: b
            .iter()
            .map(|(k, _)| (k.clone(), BUSY_POLL_US.to_string()))
            .collect(),
        measures: vec![rr],
    });
    Ok(())
}

/// What each config sets, with the knob's original value, for the store.
fn knob_records(configs: &[Config], originals: &[(Knob, String)]) -> Vec<KnobRecord> {
    let mut records = Vec::new();
    for c in configs {
        for (k, v) in &c.knobs {
            records.push(KnobRecord {
                config: c.name.clone(),
                name: k.name.clone(),
                original: originals
                    .iter()
                    .find(|(o, _)| o == k)
                    .map(|(_, v)| v.clone()),
                applied: v.clone(),
            });
        }
    }
    records
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
        s.push_str(&format!(
            "# config {} ({POLL_KNOB} = {}): {}\n",
            c.name,
            c.poll_ns.map_or("absent".to_string(), |n| n.to_string()),
            labels.join(", ")
        ));
    }
    s
}

fn skip(
    rec: &mut Recorder,
    seq: u32,
    config: &str,
    label: &str,
    reason: &str,
    poll: Option<u64>,
) -> Result<()> {
    let trial = NewTrial {
        status: TrialStatus::Skipped,
        error: Some(reason.into()),
        ..new_trial(seq, config, label, poll, 1)
    };
    rec.store.add_trial_or_keep(rec.run_id, &trial)?;
    Ok(())
}

/// The battery's tries as they run: what each trial needs besides its measurement.
struct Tries<'a, 'r, 's> {
    opts: &'a ExplainOpts,
    site: &'a dyn Site,
    rec: &'a mut Recorder<'r>,
    /// Sequence number of the last trial stored.
    seq: u32,
    planned: usize,
    interrupted: &'a AtomicBool,
    obs: &'a mut (dyn Observer + 's),
}

impl Tries<'_, '_, '_> {
    /// The interleaved tries; `kvm exits` once, after the first.
    fn run(&mut self, configs: &[Config], kvm: bool, guard: &mut KnobGuard) -> Result<()> {
        for t in 0..self.opts.tries {
            // Rotate both the configs and the measurements within each, try by try.
            let n = configs.len();
            for ci in 0..n {
                let cfg = &configs[(ci + t as usize) % n];
                guard.activate(&cfg.knobs)?;
                let m = cfg.measures.len();
                for mi in 0..m {
                    let measure = &cfg.measures[(mi + t as usize) % m];
                    if matches!(measure, Measure::KvmHalt { .. }) && !kvm {
                        continue;
                    }
                    if self.interrupted.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    self.one(measure, cfg, t + 1)?;
                }
            }
            if t == 0 && kvm {
                guard.activate(&[])?;
                self.one(&Measure::KvmExits, &configs[0], 1)?;
            }
        }
        Ok(())
    }

    /// Runs one measurement and stores it.
    fn one(&mut self, measure: &Measure, cfg: &Config, rep: u32) -> Result<()> {
        self.seq += 1;
        let seq = self.seq;
        self.obs
            .trial_started(seq as usize, self.planned, measure.label(), &cfg.name, rep);
        let opts = self.opts;
        let t0 = Instant::now();
        let mut trial = new_trial(seq, &cfg.name, measure.label(), cfg.poll_ns, rep);
        let (a, b) = opts.cpus;
        let res: Result<f64> = match measure {
            Measure::Rr { plan, awake, .. } => awake
                .then(|| crate::awake::Spinners::start(&[a, b]).map_err(|e| anyhow!(e)))
                .transpose()
                // The spinners (if any) live until the test is over.
                .and_then(|_spinners| self.site.run(plan, &|_| {}))
                .map(|mut r| {
                    r.allow_concurrent |= self.rec.allow_concurrent;
                    let m = r.primary_metric();
                    trial.metric_name = m.name.to_string();
                    trial.result = Some(r);
                    m.value
                }),
            Measure::Wake { spin, .. } => virtperf_wake::run(&virtperf_wake::WakeOpts {
                mech: virtperf_wake::Mech::Futex,
                strategy: if *spin {
                    virtperf_wake::Strategy::Spin
                } else {
                    virtperf_wake::Strategy::Block
                },
                placement: virtperf_wake::Placement::Cross(a, b),
                duration: opts.wake_duration,
                gap: Duration::ZERO,
            })
            .map_err(|e| anyhow!(e))
            .and_then(|r| probe_detail(&mut trial, &r, "one_way_p50_us", r.one_way.p50_us)),
            Measure::KvmHalt { poll_ns, .. } => virtperf_kvm::halt(&virtperf_kvm::HaltOpts {
                wakeups: opts.halt_wakeups,
                // Idle gaps like a back-to-back round trip's, so KVM's adaptive window grows.
                delay_min_us: 20,
                delay_max_us: 120,
                halt_poll_ns: Some(*poll_ns),
                vcpu_cpu: Some(b),
                injector_cpu: Some(a),
            })
            .map_err(|e| anyhow!(e.to_string()))
            .and_then(|r| probe_detail(&mut trial, &r, "wakeup_p50_us", r.latency_ns.p50 / 1000.0)),
            Measure::KvmExits => virtperf_kvm::exits(&virtperf_kvm::ExitOpts {
                iterations: 1000,
                warmup: 100,
                cpu: Some(b),
            })
            .map_err(|e| anyhow!(e.to_string()))
            .and_then(|r| {
                let p50 = r
                    .cases
                    .iter()
                    .find(|c| c.name == "pio")
                    .map_or(f64::NAN, |c| c.ns.p50 / 1000.0);
                probe_detail(&mut trial, &r, "pio_exit_p50_us", p50)
            }),
        };
        if self.interrupted.load(Ordering::SeqCst) && res.is_err() {
            // The signal reached the trial: not a failure of the trial.
            return Ok(());
        }
        trial.duration_s = t0.elapsed().as_secs_f64();
        match &res {
            Ok(m) => trial.metric = Some(*m),
            Err(e) => {
                trial.status = TrialStatus::Failed;
                trial.error = Some(format!("{e:#}"));
            }
        }
        self.rec.keep(&trial, res, self.obs)?;
        Ok(())
    }
}

/// Keeps a probe's whole report in the trial and names its primary number.
fn probe_detail<T: serde::Serialize>(
    trial: &mut NewTrial,
    report: &T,
    name: &str,
    value: f64,
) -> Result<f64> {
    if !value.is_finite() {
        bail!("{name} was not measured");
    }
    trial.detail = Some(serde_json::to_value(report)?);
    trial.metric_name = name.into();
    Ok(value)
}
