//! Runs an experiment: probes knobs, plans trials (interleaved so drift cannot masquerade as
//! a difference), applies each config's knobs and hooks, runs every trial against a private
//! agent, stores each trial as it finishes, and restores every knob however the run ends.

use std::net::Ipv6Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use virtperf_store::{KnobRecord, NewRun, NewTrial, RunStatus, Saved, Store, TrialStatus};
use virtperf_wire::TestResult;

use crate::spec::{Config, Point, Repeat, Spec};
use virtperf_lab::plan::{Family, Plan};
use virtperf_machine::knob::KnobGuard;
use virtperf_place::{Placement, Site};

/// What the runner tells its caller as it goes (progress bars, logs).
pub trait Observer {
    /// A config cannot run on this machine and is skipped.
    fn config_skipped(&mut self, config: &str, reason: &str);
    /// A trial is about to start: `index` of at most `planned`.
    fn trial_started(&mut self, index: usize, planned: usize, point: &str, config: &str, rep: u32);
    /// A trial finished (Ok: its primary metric; Err: why it failed, causes included when
    /// printed with `{:#}`, as the store records it).
    fn trial_done(&mut self, result: &Result<f64>);
    /// The run is stored under this id (before its first trial).
    fn run_started(&mut self, _run_id: i64) {}
}

/// Overrides from the command line.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// `--runs N` or `--until-ci` instead of the spec's policy.
    pub repeat: Option<Repeat>,
    /// Measured without the machine lock (`--allow-concurrent`): every result says so.
    pub allow_concurrent: bool,
    /// Stored with the run (`--tag`, `$VIRTPERF_TAGS`).
    pub tags: virtperf_store::Tags,
    /// A VM on this host that the trials' server runs in (`--vm pid:N|qemu:NAME|…`): each
    /// trial's result gets the host's view of it over its measured window.
    pub vm: Option<virtperf_measure::vm::VmSpec>,
    /// Only this config's trials are watched (`vm compare`'s guest side: the native
    /// side's trials do not run in the VM); every config's where None.
    pub vm_config: Option<String>,
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// Run id in the store.
    pub run_id: i64,
    /// Final status.
    pub status: RunStatus,
    /// Trials that produced a result.
    pub ok: usize,
    /// Trials that failed.
    pub failed: usize,
    /// Configs skipped, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Knobs that could not be restored (should be empty).
    pub restore_errors: Vec<String>,
}

/// Where a config's state stands: knobs and hooks are applied when a config becomes active
/// and undone when another one does (and at the end), so interleaving A B A B works with any
/// mix of knobs.
struct Active<'a> {
    guard: KnobGuard,
    current: Option<&'a Config>,
    /// The active config's CPU latency bound, held while it is active.
    latency: Option<virtperf_machine::qos::LatencyHold>,
}

impl<'a> Active<'a> {
    fn switch_to(&mut self, cfg: Option<&'a Config>) -> Result<()> {
        if self.current.map(|c| &c.name) == cfg.map(|c| &c.name) {
            return Ok(());
        }
        if let Some(old) = self.current.take() {
            if let Some(t) = &old.teardown {
                hook(t, "teardown", &old.name)?;
            }
        }
        self.latency = None;
        let wanted = cfg.map(|c| c.knobs.clone()).unwrap_or_default();
        self.guard.activate(&wanted)?;
        if let Some(us) = cfg.and_then(|c| c.cpu_dma_latency) {
            self.latency = Some(virtperf_machine::qos::LatencyHold::new(us)?);
        }
        if let Some(c) = cfg {
            if let Some(s) = &c.setup {
                hook(s, "setup", &c.name)?;
            }
        }
        self.current = cfg;
        Ok(())
    }
}

fn hook(cmd: &str, what: &str, config: &str) -> Result<()> {
    let status = Command::new("sh")
        .args(["-c", cmd])
        .status()
        .with_context(|| format!("config {config}: cannot run {what} hook"))?;
    if !status.success() {
        bail!("config {config}: {what} hook `{cmd}` failed ({status})");
    }
    Ok(())
}

/// The warning a trial a signal ended early carries (set by the client that measured it).
pub use virtperf_lab::CUT_SHORT;

/// Runs `spec`, storing into `store`. When `interrupted` is raised (a signal) the trial in
/// flight ends its measured interval there, as a single workload does, and no other starts.
pub fn run(
    spec: &Spec,
    store: &mut Store,
    opts: &RunOptions,
    interrupted: &Arc<AtomicBool>,
    obs: &mut dyn Observer,
) -> Result<RunOutcome> {
    // A dead run's leftover knobs would be read as "originals" below and so made
    // permanent: refuse until `virtperf cleanup` has put them back.
    let state_dir = virtperf_machine::state::journal_base();
    let all_knobs: Vec<&virtperf_machine::knob::Knob> = spec
        .configs
        .iter()
        .flat_map(|c| c.knobs.iter().map(|(k, _)| k))
        .collect();
    virtperf_machine::knob::check_leftovers(&state_dir, &all_knobs)?;
    let mut active = Active {
        guard: KnobGuard::journaled(virtperf_machine::knob::Journal::for_this_process(
            &state_dir,
        )),
        current: None,
        latency: None,
    };
    let probed = probe(spec, &mut active.guard, obs)?;
    let schedule = Schedule::new(spec, probed.runnable, opts)?;

    let mut sites = Sites {
        local: virtperf_place::open(&Placement::Local)?,
        placed: Vec::new(),
        skipped: Vec::new(),
        vm: opts.vm.clone(),
        vm_config: opts.vm_config.clone(),
    };
    let env = virtperf_measure::fingerprint();
    let run_id = store.begin_run(&NewRun {
        name: spec.name.clone(),
        spec_text: spec.text.clone(),
        git_commit: env.git_commit.clone(),
        tool_version: env.tool_version.clone(),
        host: env.hostname.clone(),
        env,
        pid: std::process::id(),
        planned_trials: schedule.planned as u32,
        tags: opts.tags.clone(),
    })?;
    store.set_knobs(run_id, &probed.records)?;
    obs.run_started(run_id);

    let mut rec = Recorder::new(store, run_id, opts.allow_concurrent);
    schedule.run(&mut active, &mut sites, &mut rec, interrupted, obs)?;
    // Undo the last config (teardown hook), then every knob; both also happen if a hook
    // failed above. The guard would restore on drop too; doing it here lets us report.
    let teardown = active.switch_to(None);
    let restore_errors = active.guard.restore_all();
    let mut skipped = probed.skipped;
    skipped.append(&mut sites.skipped);
    drop(sites);
    let (status, ok, failed) = rec.close(interrupted, teardown.is_err())?;
    teardown?;
    Ok(RunOutcome {
        run_id,
        status,
        ok,
        failed,
        skipped,
        restore_errors,
    })
}

/// What probing found: the configs that can run here (their knobs' originals remembered by
/// the guard) and those that cannot, with the reason.
struct Probed<'a> {
    runnable: Vec<&'a Config>,
    skipped: Vec<(String, String)>,
    records: Vec<KnobRecord>,
}

/// Probes every knob of every config before any trial: a config whose knob cannot be set
/// (or whose placement or CPUs this machine lacks) is skipped as a whole, with its reason,
/// and the others still run.
fn probe<'a>(spec: &'a Spec, guard: &mut KnobGuard, obs: &mut dyn Observer) -> Result<Probed<'a>> {
    let mut p = Probed {
        runnable: Vec::new(),
        skipped: Vec::new(),
        records: Vec::new(),
    };
    for cfg in &spec.configs {
        // The governor the config's trials run under: its own, else the one in charge now.
        let governor = config_governor(cfg).or_else(virtperf_measure::env::cpuidle_governor);
        let mut reason = unavailable_governor(cfg, virtperf_measure::env::available_governors())
            .or_else(|| inert_cpuidle_switches(cfg, governor.as_deref()))
            .or_else(|| {
                let driver = virtperf_measure::env::cpuidle_driver();
                inert_halt_polling(cfg, driver.as_deref(), governor.as_deref())
            });
        let mut originals = Vec::new();
        for (knob, value) in cfg.knobs.iter().filter(|_| reason.is_none()) {
            match knob.probe() {
                Ok(orig) => originals.push((knob, orig, value)),
                Err(e) => {
                    reason = Some(e.to_string());
                    break;
                }
            }
        }
        // A guest's device options are checked against QEMU now, not at the config's
        // first trial hours later: a value QEMU refuses is the spec's error, not a skip.
        // And its network backend's tools (passt), before any config's trial runs.
        if let Some(Placement::Guest(d, g)) = &cfg.placement {
            virtperf_place::guest::preflight(*d, g)
                .map_err(|e| anyhow::anyhow!("config {:?}: {e:#}", cfg.name))?;
        }
        if let (Some(us), None) = (cfg.cpu_dma_latency, &reason) {
            if let Err(e) = virtperf_machine::qos::LatencyHold::new(us) {
                reason = Some(format!("{e:#}"));
            }
        }
        let needs_root = cfg.placement.as_ref().is_some_and(Placement::needs_root);
        if needs_root && !virtperf_machine::is_root() && reason.is_none() {
            reason = Some("namespace placements and guests on a tap need root (a guest with net = \"user\" does not)".to_string());
        }
        if let Some(cpu) = cfg.cpus.and_then(|c| c.0) {
            if !virtperf_load::sock::cpu_allowed(cpu) && reason.is_none() {
                reason = Some(format!("CPU {cpu} does not exist here"));
            }
        }
        match reason {
            Some(r) => {
                obs.config_skipped(&cfg.name, &r);
                p.skipped.push((cfg.name.clone(), r));
            }
            None => {
                for (knob, orig, value) in originals {
                    guard.remember(knob, orig.clone());
                    p.records.push(KnobRecord {
                        config: cfg.name.clone(),
                        name: knob.name.clone(),
                        original: Some(orig),
                        applied: value.clone(),
                    });
                }
                if let Some(us) = cfg.cpu_dma_latency {
                    // Held, not written: nothing to restore, but the run says it was held.
                    p.records.push(KnobRecord {
                        config: cfg.name.clone(),
                        name: format!("{} (held)", virtperf_machine::qos::DEVICE),
                        original: virtperf_machine::qos::current_us().map(|v| v.to_string()),
                        applied: us.to_string(),
                    });
                }
                p.runnable.push(cfg);
            }
        }
    }
    if p.runnable.is_empty() {
        bail!(
            "no config of {:?} can run here: {}",
            spec.name,
            p.skipped
                .iter()
                .map(|(c, r)| format!("{c}: {r}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    Ok(p)
}

/// Why a config's cpuidle switches (`cpuidle_disable`) would change nothing here: the
/// haltpoll governor never reads them. It picks the halting state whenever its poll window
/// is 0 or has run out (drivers/cpuidle/governors/haltpoll.c, `haltpoll_select`), so the
/// config would measure the idle path unchanged under its own name (traced here with state
/// 1 disabled: 1.99 idle entries per round trip, every one a halt; bench/RESULTS.md).
fn inert_cpuidle_switches(cfg: &Config, governor: Option<&str>) -> Option<String> {
    use virtperf_machine::knob::KnobKind;
    if !cfg
        .knobs
        .iter()
        .any(|(k, _)| k.kind == KnobKind::CpuidleDisable)
    {
        return None;
    }
    (governor? == "haltpoll").then(|| {
        "cpuidle_disable has no effect under the cpuidle governor haltpoll, which never reads the states' disable switches (it halts whenever its poll window is 0 or runs out): keep the CPUs from halting with cpu_dma_latency = 0 or haltpoll.guest_halt_poll_ns instead, or run the config under a governor that reads them (cpuidle_governor = \"menu\")".to_string()
    })
}

/// The cpuidle governor a config switches to (`cpuidle_governor = "haltpoll"`), if any.
fn config_governor(cfg: &Config) -> Option<String> {
    use virtperf_machine::knob::KnobKind;
    cfg.knobs
        .iter()
        .find(|(k, _)| k.kind == KnobKind::CpuidleGovernor)
        .map(|(_, v)| v.trim().to_string())
}

/// Why a config's governor cannot be switched to here: this kernel was built without it
/// (the Debian 6.1 kernels lack haltpoll), or without cpuidle at all. Said before any knob
/// is written, where the kernel's EINVAL would stop the run at the config's first trial.
fn unavailable_governor(cfg: &Config, available: Option<Vec<String>>) -> Option<String> {
    let wanted = config_governor(cfg)?;
    match available {
        None => Some(format!(
            "cpuidle_governor = {wanted:?} cannot be set: this kernel has no cpuidle (no /sys/devices/system/cpu/cpuidle/available_governors)"
        )),
        Some(a) if !a.contains(&wanted) => Some(format!(
            "cpuidle governor {wanted:?} is not in this kernel (available: {})",
            a.join(" ")
        )),
        Some(_) => None,
    }
}

/// Why a config's guest halt-polling window would change nothing here: the knob is read
/// by the haltpoll cpuidle governor alone, so without it (another governor, or no cpuidle
/// driver) a nonzero window measures the as-is idle path under the config's name (under
/// `menu`, 200 µs of it left 2.01 halting idle entries per round trip against 0.0007 under
/// haltpoll; bench/RESULTS.md). A window of 0 is kept: no polling is what the idle loop
/// does here anyway, so the config is what it says.
fn inert_halt_polling(
    cfg: &Config,
    driver: Option<&str>,
    governor: Option<&str>,
) -> Option<String> {
    use virtperf_machine::knob::KnobKind;
    cfg.knobs
        .iter()
        .filter(|(k, _)| k.kind == KnobKind::ModuleParam)
        .find_map(|(k, v)| {
            let why = virtperf_wire::model::inert_module_setting(&k.name, v, driver, governor)?;
            Some(format!(
                "{} = {} has no effect here: {why}; the config would measure the idle path unchanged",
                k.name,
                v.trim()
            ))
        })
}

/// The order of trials: rounds of every point × config (interleaved A B A B …), `min`
/// rounds for every cell, then (until-ci) more only for cells whose CI is still too wide.
struct Schedule<'a> {
    spec: &'a Spec,
    runnable: Vec<&'a Config>,
    repeat: Repeat,
    min_reps: u32,
    max_reps: u32,
    /// Trials the fixed part of the schedule runs.
    planned: usize,
}

impl<'a> Schedule<'a> {
    /// Bounds the schedule and checks every trial's plan before the first one runs, so a
    /// spec that cannot run here fails now, in one line, instead of storing a run of failed
    /// trials.
    fn new(spec: &'a Spec, runnable: Vec<&'a Config>, opts: &RunOptions) -> Result<Self> {
        let repeat = opts.repeat.clone().unwrap_or_else(|| spec.repeat.clone());
        let (min_reps, max_reps) = match repeat {
            Repeat::Fixed(n) => (n, n),
            Repeat::UntilCi { min, max, .. } => (min, max),
        };
        let planned = spec.points.len() * runnable.len() * min_reps as usize;
        let most = crate::spec::planned_trials(spec.points.len(), runnable.len(), &repeat);
        if most > crate::spec::MAX_TRIALS {
            bail!(
                "{:?} would plan up to {most} trials, more than {}: use fewer repetitions or split the spec",
                spec.name,
                crate::spec::MAX_TRIALS
            );
        }
        for point in &spec.points {
            for cfg in &runnable {
                plan_for(point, cfg)
                    .validate()
                    .with_context(|| format!("point {:?} in config {}", point.label, cfg.name))?;
            }
        }
        Ok(Schedule {
            spec,
            runnable,
            repeat,
            min_reps,
            max_reps,
            planned,
        })
    }

    /// Whether the cell (point `pi`, config `ci`) still needs a trial in round `rep`.
    fn wanted(&self, rep: u32, values: &[f64]) -> bool {
        if rep <= self.min_reps {
            return true;
        }
        let Repeat::UntilCi { level, width, .. } = self.repeat else {
            return false;
        };
        !virtperf_report::stats::ci_within(&virtperf_report::stats::summarize(values, level), width)
    }

    /// Runs the trials in order, switching configs as it goes, until done, interrupted, or
    /// a config cannot be switched to (kept in the tally as fatal).
    fn run(
        &self,
        active: &mut Active<'a>,
        sites: &mut Sites,
        rec: &mut Recorder,
        interrupted: &Arc<AtomicBool>,
        obs: &mut dyn Observer,
    ) -> Result<()> {
        // Per (point, config): the primary metric of every successful trial, for until-ci.
        let mut values: Vec<Vec<Vec<f64>>> =
            vec![vec![Vec::new(); self.runnable.len()]; self.spec.points.len()];
        let mut seq = 0u32;
        let mut streaks = crate::unreached::Streaks::default();
        for rep in 1..=self.max_reps {
            for (pi, point) in self.spec.points.iter().enumerate() {
                for (ci, cfg) in self.runnable.iter().enumerate() {
                    if !self.wanted(rep, &values[pi][ci]) {
                        continue;
                    }
                    // A guest that did not boot (a module parameter its kernel lacks, …)
                    // failed one trial with the reason; its other trials are skipped.
                    if sites.failed_to_open(&cfg.name) {
                        continue;
                    }
                    if interrupted.load(Ordering::SeqCst) {
                        return Ok(());
                    }
                    if let Err(e) = active.switch_to(Some(cfg)) {
                        rec.tally.fatal = Some(e);
                        return Ok(());
                    }
                    seq += 1;
                    obs.trial_started(
                        seq as usize,
                        self.planned.max(seq as usize),
                        &point.label,
                        &cfg.name,
                        rep,
                    );
                    let trial = Trial {
                        seq,
                        point,
                        cfg,
                        rep,
                    };
                    let started_at = virtperf_store::now_rfc3339();
                    let t0 = Instant::now();
                    // A signal ends the trial's measured interval where it finds it (waiting
                    // out a 60 s trial, or a frozen agent's timeouts, made Ctrl-C wait).
                    let plan = virtperf_lab::plan::Plan {
                        cut: Some(interrupted.clone()),
                        ..plan_for(point, cfg)
                    };
                    let res = sites.run(cfg, &plan);
                    if interrupted.load(Ordering::SeqCst) {
                        // Ctrl-C reached the trial (or its agent): not a failure of the
                        // trial; what it measured is kept, said to be a part where the
                        // signal ended its interval (the client's CUT_SHORT warning).
                        if let Ok(r) = res {
                            rec.record(&trial, Ok(r), started_at, t0, obs)?;
                        }
                        return Ok(());
                    }
                    let unopened = sites
                        .open_failure(&cfg.name)
                        .or_else(|| Some((streaks.after(&cfg.name, &res)?, false)));
                    match &unopened {
                        // Its guest lacks a capability the config needs: skipped, like a
                        // knob this machine lacks, with the reason stored.
                        Some((why, true)) => rec.skip(&trial, why, started_at, t0)?,
                        _ => {
                            if let Some(m) = rec.record(&trial, res, started_at, t0, obs)? {
                                values[pi][ci].push(m);
                            }
                        }
                    }
                    if let Some((why, _)) = unopened {
                        obs.config_skipped(&cfg.name, &why);
                        sites.skipped.push((cfg.name.clone(), why));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The sites configs run on: the private local agent, started before the run, and each
/// placed config's own, opened at its first trial and kept until the run ends (dropped,
/// and so removed, on every exit path).
struct Sites {
    local: Box<dyn Site>,
    placed: Vec<(String, Opened)>,
    /// Configs whose site could not be opened, with the reason (reported once each).
    skipped: Vec<(String, String)>,
    /// The VM watched over every trial's window ([`RunOptions::vm`]).
    vm: Option<virtperf_measure::vm::VmSpec>,
    /// The one config whose trials it is watched over, if not all ([`RunOptions::vm_config`]).
    vm_config: Option<String>,
}

/// A placed config's site, or why it could not be opened.
type Opened = Result<Box<dyn Site>>;

impl Sites {
    /// Whether `config`'s site failed to open and that was already reported.
    fn failed_to_open(&self, config: &str) -> bool {
        self.skipped.iter().any(|(c, _)| c == config)
    }

    /// Why `config`'s site failed to open, the first time it is asked, and whether it
    /// failed because its guest lacks a capability the config needs.
    fn open_failure(&self, config: &str) -> Option<(String, bool)> {
        if self.failed_to_open(config) {
            return None;
        }
        let (_, opened) = self.placed.iter().find(|(c, _)| c == config)?;
        let e = opened.as_ref().err()?;
        let lacks = e
            .downcast_ref::<virtperf_place::guest::GuestLacks>()
            .is_some();
        Some((format!("{e:#}"), lacks))
    }

    /// Runs one trial of `cfg` on its site, with the host's view of the watched VM over
    /// its window where the run watches one.
    fn run(&mut self, cfg: &Config, plan: &Plan) -> Result<TestResult> {
        let watched = self.vm_config.as_ref().is_none_or(|c| c == &cfg.name);
        let Some(spec) = self.vm.as_ref().filter(|_| watched) else {
            return self.run_placed(cfg, plan);
        };
        // Opened per trial: a VM that went away fails this trial with why, not the run.
        let watch = virtperf_lab::host_vm::Watch::open(spec)?;
        let mut plan = plan.clone();
        watch.attach(&mut plan);
        let mut r = self.run_placed(cfg, &plan)?;
        let h = watch.finish(Some(r.outcome.work()));
        virtperf_lab::assemble::attach_vm(&mut r, h);
        Ok(r)
    }

    /// Runs one trial of `cfg` on its site (beside its load's streams, if it has one).
    fn run_placed(&mut self, cfg: &Config, plan: &Plan) -> Result<TestResult> {
        let v6_here = cfg.placement.is_none() && cfg.family == Some(Family::V6);
        if cfg.placement.is_none() && !v6_here {
            return run_on(self.local.as_ref(), cfg, plan);
        }
        if !self.placed.iter().any(|(c, _)| c == &cfg.name) {
            let opened = match &cfg.placement {
                Some(p) => virtperf_place::open(p),
                // IPv6 on this host: a private agent of its own, listening on ::1.
                None => virtperf_place::local::LocalSite::open_at(Ipv6Addr::LOCALHOST.into())
                    .map(|s| Box::new(s) as Box<dyn Site>),
            };
            match opened {
                Ok(site) => self.placed.push((cfg.name.clone(), Ok(site))),
                // Namespaces are cheap to try again at the config's next trial. Guests (a
                // boot under TCG takes seconds) and SSH agents are not: a config whose site
                // failed to open fails its first trial with that reason, and the runner
                // skips the rest of its trials.
                Err(e) if matches!(cfg.placement, Some(Placement::Netns(..))) => return Err(e),
                Err(e) => self.placed.push((cfg.name.clone(), Err(e))),
            }
        }
        match self.placed.iter().find(|(c, _)| c == &cfg.name) {
            Some((_, Ok(site))) => run_on(site.as_ref(), cfg, plan),
            Some((_, Err(e))) => Err(anyhow!("{e:#}")),
            None => Err(anyhow!("placement for {} vanished", cfg.name)),
        }
    }
}

/// Runs `plan` on `site`; with the config's `load`, beside its streams (started
/// [`LEAD`](virtperf_lab::under_load::LEAD) before it, ending as long after), the streams'
/// throughput recorded in the result. The rr's result stands if the streams fail: it ran
/// beside whatever load there was, and `load.error` says what happened.
fn run_on(site: &dyn Site, cfg: &Config, plan: &Plan) -> Result<TestResult> {
    let Some(load) = cfg.load else {
        return site.run(plan, &|_| {});
    };
    let stream = virtperf_lab::under_load::stream_plan(plan, load)?;
    let (mut r, s) = site.run_beside(&stream, plan, virtperf_lab::under_load::LEAD)?;
    r.load = Some(virtperf_wire::BesideLoad {
        streams: load.streams,
        reverse: load.reverse,
        mbps: s.as_ref().ok().and_then(|s| match &s.outcome {
            virtperf_wire::Outcome::Stream(o) => Some(o.mbps),
            _ => None,
        }),
        error: s.err().map(|e| format!("{e:#}")),
    });
    virtperf_lab::under_load::note_beside(&mut r, load.streams);
    Ok(r)
}

/// A stored row for trial `t` with nothing measured yet (failed, no result): what every
/// outcome of it shares.
fn row(t: &Trial, started_at: String, t0: Instant) -> NewTrial {
    NewTrial {
        seq: t.seq,
        config: t.cfg.name.clone(),
        workload: t.point.workload.name().to_string(),
        point: t.point.params.clone(),
        point_label: t.point.label.clone(),
        repetition: t.rep,
        status: TrialStatus::Failed,
        error: None,
        metric: None,
        metric_name: String::new(),
        result: None,
        detail: None,
        started_at,
        duration_s: t0.elapsed().as_secs_f64(),
    }
}

/// Which trial this is.
struct Trial<'a> {
    seq: u32,
    point: &'a Point,
    cfg: &'a Config,
    rep: u32,
}

/// What the trials came to.
#[derive(Default)]
pub struct Tally {
    ok: usize,
    failed: usize,
    /// Trials the database refused that went to the side file: the run is then incomplete.
    unsaved: usize,
    /// Why the run stopped before its schedule ended.
    pub fatal: Option<anyhow::Error>,
}

/// Stores each trial as it finishes.
pub struct Recorder<'s> {
    pub store: &'s mut Store,
    pub run_id: i64,
    pub allow_concurrent: bool,
    pub tally: Tally,
}

impl<'s> Recorder<'s> {
    /// Records the trials of run `run_id` into `store`, counting from nothing.
    pub fn new(store: &'s mut Store, run_id: i64, allow_concurrent: bool) -> Recorder<'s> {
        Recorder {
            store,
            run_id,
            allow_concurrent,
            tally: Tally::default(),
        }
    }

    /// Stores one trial (in one transaction, or in the side file) and counts it. Returns its
    /// primary metric when it succeeded.
    fn record(
        &mut self,
        t: &Trial,
        res: Result<TestResult>,
        started_at: String,
        t0: Instant,
        obs: &mut dyn Observer,
    ) -> Result<Option<f64>> {
        let res = res.map(|mut r| {
            r.allow_concurrent |= self.allow_concurrent;
            r
        });
        let metric = res.as_ref().ok().map(|r| r.primary_metric());
        let trial = NewTrial {
            status: if res.is_ok() {
                TrialStatus::Ok
            } else {
                TrialStatus::Failed
            },
            error: res.as_ref().err().map(|e| format!("{e:#}")),
            metric: metric.as_ref().map(|m| m.value),
            metric_name: metric
                .as_ref()
                .map(|m| m.name.to_string())
                .unwrap_or_default(),
            result: res.as_ref().ok().cloned(),
            ..row(t, started_at, t0)
        };
        let res = res.map(|r| r.primary_metric().value);
        self.keep(&trial, res, obs)
    }

    /// Stores `t` as skipped, with the reason (not counted as a failure).
    fn skip(&mut self, t: &Trial, why: &str, started_at: String, t0: Instant) -> Result<()> {
        let trial = NewTrial {
            status: TrialStatus::Skipped,
            error: Some(why.to_string()),
            ..row(t, started_at, t0)
        };
        self.store_or_keep(&trial)
    }

    /// Ends the run in the store: complete, or incomplete when it was interrupted, a trial
    /// failed or went unsaved, or `troubled` (a hook failed); failed when it stopped before
    /// any trial succeeded. Returns the status and the ok and failed counts, or the error
    /// that stopped the run early.
    pub fn close(
        self,
        interrupted: &AtomicBool,
        troubled: bool,
    ) -> Result<(RunStatus, usize, usize)> {
        let Tally {
            ok,
            failed,
            unsaved,
            fatal,
        } = self.tally;
        let run_id = self.run_id;
        let status = if fatal.is_some() && ok == 0 {
            RunStatus::Failed
        } else if interrupted.load(Ordering::SeqCst)
            || failed > 0
            || fatal.is_some()
            || troubled
            || unsaved > 0
        {
            RunStatus::Incomplete
        } else {
            RunStatus::Complete
        };
        if let Saved::Kept { side_file, error } = self.store.finish_run_or_keep(run_id, status)? {
            eprintln!(
                "virtperf: warning: the end of run {run_id} ({status}) was not stored ({error}); it is kept in {}, and the next `virtperf run` with this database imports it",
                side_file.display()
            );
        }
        if let Some(e) = fatal {
            return Err(e.context(format!("run {run_id} stopped ({ok} trials kept)")));
        }
        Ok((status, ok, failed))
    }

    /// Stores one trial in one transaction, or in the side file (counted as unsaved, with
    /// a warning) when the database refuses it.
    fn store_or_keep(&mut self, trial: &NewTrial) -> Result<()> {
        if let Saved::Kept { side_file, error } =
            self.store.add_trial_or_keep(self.run_id, trial)?
        {
            self.tally.unsaved += 1;
            eprintln!(
                "virtperf: warning: trial {} was not stored ({error}); it is kept in {}, and the next `virtperf run` with this database imports it",
                trial.seq,
                side_file.display()
            );
        }
        Ok(())
    }

    /// Stores one finished trial (in one transaction, or in the side file) and counts it:
    /// `res` is its primary metric, or why it failed. Returns the metric when it succeeded.
    pub fn keep(
        &mut self,
        trial: &NewTrial,
        res: Result<f64>,
        obs: &mut dyn Observer,
    ) -> Result<Option<f64>> {
        self.store_or_keep(trial)?;
        match res {
            Ok(m) => {
                self.tally.ok += 1;
                obs.trial_done(&Ok(m));
                Ok(Some(m))
            }
            Err(e) => {
                self.tally.failed += 1;
                obs.trial_done(&Err(e));
                Ok(None)
            }
        }
    }
}

pub use crate::spec::plan_for;

#[cfg(test)]
mod tests {
    use super::{config_governor, inert_halt_polling, unavailable_governor};

    fn spec() -> crate::spec::Spec {
        crate::spec::parse(
            r#"
name = "hp"
[[workload]]
kind = "rr"
[[config]]
name = "no-poll"
module = { "haltpoll.guest_halt_poll_ns" = 0 }
[[config]]
name = "poll-50us"
module = { "haltpoll.guest_halt_poll_ns" = 50000 }
[[config]]
name = "busy"
sysctl = { "net.core.busy_poll" = 50 }
"#,
        )
        .expect("parses")
    }

    /// A nonzero window is skipped where nothing reads it, with the reason; a window of 0
    /// (what such an idle loop does anyway) and configs without the knob are kept; under
    /// the haltpoll governor every config runs.
    #[test]
    fn a_halt_poll_window_nothing_reads_is_skipped() {
        let s = spec();
        let [off, on, busy] = [&s.configs[0], &s.configs[1], &s.configs[2]];
        let why = inert_halt_polling(on, Some("haltpoll"), Some("menu")).expect("inert");
        assert!(
            why.contains("= 50000 has no effect here") && why.contains("governor is menu"),
            "{why}"
        );
        let why = inert_halt_polling(on, Some("none"), None).expect("no driver");
        assert!(why.contains("no cpuidle driver"), "{why}");
        assert_eq!(
            inert_halt_polling(off, Some("haltpoll"), Some("menu")),
            None
        );
        assert_eq!(inert_halt_polling(busy, None, None), None);
        assert_eq!(
            inert_halt_polling(on, Some("haltpoll"), Some("haltpoll")),
            None
        );
    }

    /// A config that switches to the haltpoll governor makes its own window act, so the
    /// window is judged under the config's governor; a governor this kernel lacks, or a
    /// kernel without cpuidle, is a skip with the available names, not a failed write.
    #[test]
    fn a_config_runs_under_its_own_governor() {
        let s = crate::spec::parse(
            r#"
name = "gov"
[[workload]]
kind = "rr"
[[config]]
name = "haltpoll-200us"
cpuidle_governor = "haltpoll"
module = { "haltpoll.guest_halt_poll_ns" = 200000 }
"#,
        )
        .expect("parses");
        let cfg = &s.configs[0];
        let gov = config_governor(cfg);
        assert_eq!(gov.as_deref(), Some("haltpoll"));
        assert_eq!(
            inert_halt_polling(cfg, Some("haltpoll"), gov.as_deref()),
            None
        );
        let have = |a: &[&str]| Some(a.iter().map(|s| s.to_string()).collect());
        assert_eq!(unavailable_governor(cfg, have(&["menu", "haltpoll"])), None);
        let why = unavailable_governor(cfg, have(&["ladder", "menu"])).expect("missing");
        assert!(
            why.contains("\"haltpoll\" is not in this kernel (available: ladder menu)"),
            "{why}"
        );
        assert!(unavailable_governor(cfg, None)
            .expect("no cpuidle")
            .contains("no cpuidle"));
        let bad = crate::spec::parse(
            "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"x\"\ncpuidle_governor = \"../menu\"\n",
        )
        .expect_err("a path is no governor");
        assert!(
            bad.to_string().contains("invalid cpuidle governor"),
            "{bad}"
        );
    }
}
