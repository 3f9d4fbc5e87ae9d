//! Runs an experiment: probes knobs, plans trials (interleaved so drift cannot masquerade as
//! a difference), applies each config's knobs and hooks, runs every trial against a private
//! agent, stores each trial as it finishes, and restores every knob however the run ends.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use virtperf_store::{KnobRecord, NewRun, NewTrial, RunStatus, Saved, Store, TrialStatus};
use virtperf_wire::TestResult;

use crate::client::{self, Plan, Target};
use crate::guest::GuestLab;
use crate::knob::KnobGuard;
use crate::local::LocalAgent;
use crate::netns::Topology;
use crate::remote::RemoteAgent;
use crate::spec::{Config, Point, Repeat, Spec, SpecPlacement};

/// What the runner tells its caller as it goes (progress bars, logs).
pub trait Observer {
    /// A config cannot run on this machine and is skipped.
    fn config_skipped(&mut self, config: &str, reason: &str);
    /// A trial is about to start: `index` of at most `planned`.
    fn trial_started(&mut self, index: usize, planned: usize, point: &str, config: &str, rep: u32);
    /// A trial finished (Ok: its primary metric).
    fn trial_done(&mut self, result: &std::result::Result<f64, String>);
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
        let wanted = cfg.map(|c| c.knobs.clone()).unwrap_or_default();
        self.guard.activate(&wanted).map_err(|e| anyhow!(e))?;
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

/// Runs `spec`, storing into `store`. Stops between trials when `interrupted` is raised.
pub fn run(
    spec: &Spec,
    store: &mut Store,
    opts: &RunOptions,
    interrupted: &AtomicBool,
    obs: &mut dyn Observer,
) -> Result<RunOutcome> {
    // Probe every knob of every config before any trial: a config whose knob cannot be set
    // is skipped as a whole, with its reason, and the others still run.
    // A dead run's leftover knobs would be read as "originals" below and so made
    // permanent: refuse until `virtperf cleanup` has put them back.
    let state_dir = crate::state::dir();
    let all_knobs: Vec<&crate::knob::Knob> = spec
        .configs
        .iter()
        .flat_map(|c| c.knobs.iter().map(|(k, _)| k))
        .collect();
    crate::knob::check_leftovers(&state_dir, &all_knobs).map_err(|e| anyhow!(e))?;
    let mut active = Active {
        guard: KnobGuard::journaled(crate::knob::Journal::for_this_process(&state_dir)),
        current: None,
    };
    let mut runnable: Vec<&Config> = Vec::new();
    let mut skipped = Vec::new();
    let mut records = Vec::new();
    for cfg in &spec.configs {
        let mut reason = None;
        let mut originals = Vec::new();
        for (knob, value) in &cfg.knobs {
            match knob.probe() {
                Ok(orig) => originals.push((knob, orig, value)),
                Err(e) => {
                    reason = Some(e);
                    break;
                }
            }
        }
        let needs_root = matches!(
            cfg.placement,
            Some(SpecPlacement::Netns(_) | SpecPlacement::Guest(..))
        );
        if needs_root && !crate::is_root() && reason.is_none() {
            reason = Some("namespace and guest placements need root".to_string());
        }
        if let Some(cpu) = cfg.cpus.and_then(|c| c.0) {
            if !virtperf_load::sock::cpu_allowed(cpu) && reason.is_none() {
                reason = Some(format!("CPU {cpu} does not exist here"));
            }
        }
        match reason {
            Some(r) => {
                obs.config_skipped(&cfg.name, &r);
                skipped.push((cfg.name.clone(), r));
            }
            None => {
                for (knob, orig, value) in originals {
                    active.guard.remember(knob, orig.clone());
                    records.push(KnobRecord {
                        config: cfg.name.clone(),
                        name: knob.name.clone(),
                        original: Some(orig),
                        applied: value.clone(),
                    });
                }
                runnable.push(cfg);
            }
        }
    }
    if runnable.is_empty() {
        bail!(
            "no config of {:?} can run here: {}",
            spec.name,
            skipped
                .iter()
                .map(|(c, r)| format!("{c}: {r}"))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
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
    // Every trial's plan is checked before the first one runs, so a spec that cannot run
    // here fails now, in one line, instead of storing a run of failed trials.
    for point in &spec.points {
        for cfg in &runnable {
            plan_for(point, cfg)
                .validate()
                .with_context(|| format!("point {:?} in config {}", point.label, cfg.name))?;
        }
    }

    let agent = LocalAgent::start()?;
    let target = Target {
        host: agent.addr.ip().to_string(),
        port: agent.addr.port(),
        token: Some(agent.token.clone()),
    };
    // Namespace topologies and their agents, made when a config first needs one and kept
    // until the run ends (dropped, and so removed, on every exit path).
    let mut placed: Vec<(String, Topology, LocalAgent)> = Vec::new();
    let mut guests: Vec<(String, Result<GuestLab, String>)> = Vec::new();
    let mut remotes: Vec<(String, Result<RemoteAgent, String>)> = Vec::new();
    let env = virtperf_measure::fingerprint();
    let run_id = store.begin_run(&NewRun {
        name: spec.name.clone(),
        spec_text: spec.text.clone(),
        git_commit: env.git_commit.clone(),
        tool_version: env.tool_version.clone(),
        host: env.hostname.clone(),
        env,
        pid: std::process::id(),
        planned_trials: planned as u32,
    })?;
    store.set_knobs(run_id, &records)?;
    obs.run_started(run_id);

    // Per (point, config): the primary metric of every successful trial, for until-ci.
    let mut values: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); runnable.len()]; spec.points.len()];
    let (mut ok, mut failed, mut seq) = (0usize, 0usize, 0u32);
    let mut fatal: Option<anyhow::Error> = None;
    // Trials the database refused that went to the side file: the run is then incomplete.
    let mut unsaved = 0usize;
    'rounds: for rep in 1..=max_reps {
        for (pi, point) in spec.points.iter().enumerate() {
            for (ci, cfg) in runnable.iter().enumerate() {
                if rep > min_reps {
                    let Repeat::UntilCi { level, width, .. } = repeat else {
                        continue;
                    };
                    if virtperf_report::stats::ci_within(
                        &virtperf_report::stats::summarize(&values[pi][ci], level),
                        width,
                    ) {
                        continue;
                    }
                }
                if interrupted.load(Ordering::SeqCst) {
                    break 'rounds;
                }
                if let Err(e) = active.switch_to(Some(cfg)) {
                    fatal = Some(e);
                    break 'rounds;
                }
                seq += 1;
                obs.trial_started(
                    seq as usize,
                    planned.max(seq as usize),
                    &point.label,
                    &cfg.name,
                    rep,
                );
                let started_at = virtperf_store::now_rfc3339();
                let t0 = Instant::now();
                let plan = plan_for(point, cfg);
                let res = match &cfg.placement {
                    None => client::run(&target, &plan, &|_| {}),
                    Some(SpecPlacement::Netns(kind)) => {
                        run_placed(&mut placed, &cfg.name, *kind, plan)
                    }
                    Some(SpecPlacement::Guest(direction, opts)) => {
                        run_guest(&mut guests, &cfg.name, *direction, opts, &plan)
                    }
                    Some(SpecPlacement::Ssh(t)) => run_ssh(&mut remotes, &cfg.name, t, &plan),
                    Some(SpecPlacement::Remote(t)) => {
                        client::run(t, &plan, &|_| {}).map(|mut r| {
                            r.placement = Some(format!("remote:{}", t.host));
                            r
                        })
                    }
                };
                if interrupted.load(Ordering::SeqCst) && res.is_err() {
                    // Ctrl-C reached the trial (or its agent): not a failure of the trial.
                    break 'rounds;
                }
                let res = res.map(|mut r| {
                    r.allow_concurrent |= opts.allow_concurrent;
                    r
                });
                let metric = res.as_ref().ok().map(|r| r.primary_metric());
                let trial = NewTrial {
                    seq,
                    config: cfg.name.clone(),
                    workload: point.workload.name().to_string(),
                    point: point.params.clone(),
                    point_label: point.label.clone(),
                    repetition: rep,
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
                    started_at,
                    duration_s: t0.elapsed().as_secs_f64(),
                };
                if let Saved::Kept { side_file, error } = store.add_trial_or_keep(run_id, &trial)? {
                    unsaved += 1;
                    eprintln!(
                        "virtperf: warning: trial {seq} was not stored ({error}); it is kept in {}, and the next `virtperf run` with this database imports it",
                        side_file.display()
                    );
                }
                match res {
                    Ok(r) => {
                        ok += 1;
                        let m = r.primary_metric().value;
                        values[pi][ci].push(m);
                        obs.trial_done(&Ok(m));
                    }
                    Err(e) => {
                        failed += 1;
                        obs.trial_done(&Err(format!("{e:#}")));
                    }
                }
            }
        }
    }
    // Undo the last config (teardown hook), then every knob; both also happen if a hook
    // failed above. The guard would restore on drop too; doing it here lets us report.
    let teardown = active.switch_to(None);
    let restore_errors = active.guard.restore_all();
    drop(agent);
    drop(placed);
    drop(guests);
    drop(remotes);
    let status = if fatal.is_some() && ok == 0 {
        RunStatus::Failed
    } else if interrupted.load(Ordering::SeqCst)
        || failed > 0
        || fatal.is_some()
        || teardown.is_err()
        || unsaved > 0
    {
        RunStatus::Incomplete
    } else {
        RunStatus::Complete
    };
    if let Saved::Kept { side_file, error } = store.finish_run_or_keep(run_id, status)? {
        eprintln!(
            "virtperf: warning: the end of run {run_id} ({status}) was not stored ({error}); it is kept in {}, and the next `virtperf run` with this database imports it",
            side_file.display()
        );
    }
    if let Some(e) = fatal {
        return Err(e.context(format!("run {run_id} stopped ({ok} trials kept)")));
    }
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

/// Runs one trial with both ends in namespaces: the config's topology (made on first use),
/// its agent in the server namespace, and the client half on a thread inside the client
/// namespace.
fn run_placed(
    placed: &mut Vec<(String, Topology, LocalAgent)>,
    config: &str,
    kind: crate::netns::Kind,
    plan: Plan,
) -> Result<TestResult> {
    if !placed.iter().any(|(c, _, _)| c == config) {
        let topo = Topology::create(kind)?;
        let agent = LocalAgent::start_at(Some(&topo.server_ns), topo.server_ip)?;
        placed.push((config.to_string(), topo, agent));
    }
    let (_, topo, agent) = placed
        .iter()
        .find(|(c, _, _)| c == config)
        .ok_or_else(|| anyhow!("placement for {config} vanished"))?;
    let target = Target {
        host: agent.addr.ip().to_string(),
        port: agent.addr.port(),
        token: Some(agent.token.clone()),
    };
    let mut r = topo.run_in_client(move || client::run(&target, &plan, &|_| {}))?;
    r.placement = Some(Topology::name(kind).to_string());
    Ok(r)
}

/// Runs one trial across a guest placement: the config's guests are booted on first use
/// and kept for its later trials (a boot under TCG takes seconds). A config whose guests
/// failed to boot fails each of its trials with that reason rather than rebooting.
fn run_guest(
    guests: &mut Vec<(String, Result<GuestLab, String>)>,
    config: &str,
    direction: crate::guest::Direction,
    opts: &crate::guest::GuestOpts,
    plan: &Plan,
) -> Result<TestResult> {
    if !guests.iter().any(|(c, _)| c == config) {
        let lab = GuestLab::boot(direction, opts).map_err(|e| format!("{e:#}"));
        guests.push((config.to_string(), lab));
    }
    match guests.iter().find(|(c, _)| c == config) {
        Some((_, Ok(lab))) => lab.run(plan),
        Some((_, Err(e))) => Err(anyhow!("{e}")),
        None => Err(anyhow!("guests for {config} vanished")),
    }
}

/// Runs one trial against the config's agent started over SSH (on first use; stopped and
/// removed when the run ends).
fn run_ssh(
    remotes: &mut Vec<(String, Result<RemoteAgent, String>)>,
    config: &str,
    target: &crate::remote::SshTarget,
    plan: &Plan,
) -> Result<TestResult> {
    if !remotes.iter().any(|(c, _)| c == config) {
        let agent = RemoteAgent::start(target).map_err(|e| format!("{e:#}"));
        remotes.push((config.to_string(), agent));
    }
    match remotes.iter().find(|(c, _)| c == config) {
        Some((_, Ok(agent))) => {
            let t = Target {
                host: agent.addr.ip().to_string(),
                port: agent.addr.port(),
                token: Some(agent.token.clone()),
            };
            let mut r = client::run(&t, plan, &|_| {})?;
            r.placement = Some(format!("ssh:{}", target.dest));
            Ok(r)
        }
        Some((_, Err(e))) => Err(anyhow!("{e}")),
        None => Err(anyhow!("agent for {config} vanished")),
    }
}

/// The client plan for one trial: the point's workload under the config's settings.
pub fn plan_for(point: &Point, cfg: &Config) -> Plan {
    let (client_cpu, server_cpu) = cfg.cpus.unwrap_or(point.cpus);
    Plan {
        workload: point.workload.clone(),
        duration: point.duration,
        client_cpu,
        server_cpu,
        count: point.count,
        sock: cfg.sock,
        capture: None,
        kvm_stats: false,
    }
}

/// Primary metric of a stored result, for callers that only have the result.
pub fn metric_of(r: &TestResult) -> f64 {
    r.primary_metric().value
}
