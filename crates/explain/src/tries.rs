//! The battery's tries as they run: every measurement of every config, interleaved, each
//! stored as a trial as it finishes (shared by the round trip's battery and the stream's).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use virtperf_experiment::runner::{Observer, Recorder};
use virtperf_machine::knob::KnobGuard;
use virtperf_place::Site;
use virtperf_store::{NewTrial, TrialStatus};

use serde_json::json;
use virtperf_lab::plan::Plan;
use virtperf_machine::knob::Knob;
use virtperf_report::explain as model;

use crate::opts::ExplainOpts;

/// One measurement of the battery.
#[derive(Debug, Clone)]
pub(crate) enum Measure {
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
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Measure::Rr { label, .. }
            | Measure::Wake { label, .. }
            | Measure::KvmHalt { label, .. } => label,
            Measure::KvmExits => model::KVM_EXITS,
        }
    }
}

/// The workload name a measurement is stored under, from its label.
pub(crate) fn workload_of(label: &str) -> &'static str {
    if label == model::KVM_EXITS {
        "kvm-exits"
    } else if label.starts_with("kvm halt") {
        "kvm-halt"
    } else if label.starts_with("wake") {
        "wake"
    } else if label.starts_with("stream") {
        "stream"
    } else if label.starts_with("unix-rr") {
        "unix-rr"
    } else {
        "rr"
    }
}

/// A trial of the battery before it ran: the parameters every stored measurement has.
pub(crate) fn new_trial(
    seq: u32,
    config: &str,
    label: &str,
    poll: Option<u64>,
    rep: u32,
) -> NewTrial {
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
pub(crate) struct Config {
    pub(crate) name: String,
    /// The value the knob has during this config (None: no knob here).
    pub(crate) poll_ns: Option<u64>,
    pub(crate) knobs: Vec<(Knob, String)>,
    /// The site's own devices' offloads during this config (None: as the site made them).
    pub(crate) offloads: Option<virtperf_place::offload::Offloads>,
    pub(crate) measures: Vec<Measure>,
}

/// Refuses a CPU pair explain cannot pin to.
pub(crate) fn check_cpus(cpus: (u32, u32)) -> Result<()> {
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

/// Opens a battery's run in `store`, stamped with this machine's fingerprint and this
/// process as its writer.
pub(crate) fn begin_run(
    store: &mut virtperf_store::Store,
    name: &str,
    spec_text: String,
    planned: usize,
    tags: &virtperf_store::Tags,
) -> Result<i64> {
    let env = virtperf_measure::fingerprint();
    Ok(store.begin_run(&virtperf_store::NewRun {
        name: name.to_string(),
        spec_text,
        git_commit: env.git_commit.clone(),
        tool_version: env.tool_version.clone(),
        host: env.hostname.clone(),
        env,
        pid: std::process::id(),
        planned_trials: planned as u32,
        tags: tags.clone(),
    })?)
}

pub(crate) fn skip(
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
pub(crate) struct Tries<'a, 'r, 's> {
    pub(crate) opts: &'a ExplainOpts,
    pub(crate) site: &'a dyn Site,
    pub(crate) rec: &'a mut Recorder<'r>,
    /// Sequence number of the last trial stored.
    pub(crate) seq: u32,
    pub(crate) planned: usize,
    /// Raised by a signal: an rr try in flight ends its measured interval there (its
    /// plan's `cut`), and no other starts.
    pub(crate) interrupted: &'a std::sync::Arc<AtomicBool>,
    pub(crate) obs: &'a mut (dyn Observer + 's),
}

impl Tries<'_, '_, '_> {
    /// The interleaved tries; `kvm exits` once, after the first.
    pub(crate) fn run(
        &mut self,
        configs: &[Config],
        kvm: bool,
        guard: &mut KnobGuard,
    ) -> Result<()> {
        // Only a battery that switches a device asks the site to (others may have none).
        let devices = configs.iter().any(|c| c.offloads.is_some());
        let result = self.each_try(configs, kvm, guard, devices);
        if devices {
            // As made, also after a failure (the devices go with the site, but a site
            // may outlive this battery).
            let back = self.site.set_offloads(Default::default());
            return result.and(back);
        }
        result
    }

    fn each_try(
        &mut self,
        configs: &[Config],
        kvm: bool,
        guard: &mut KnobGuard,
        devices: bool,
    ) -> Result<()> {
        for t in 0..self.opts.tries {
            // Rotate both the configs and the measurements within each, try by try.
            let n = configs.len();
            for ci in 0..n {
                let cfg = &configs[(ci + t as usize) % n];
                guard.activate(&cfg.knobs)?;
                if devices {
                    self.site.set_offloads(cfg.offloads.unwrap_or_default())?;
                }
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
    pub(crate) fn one(&mut self, measure: &Measure, cfg: &Config, rep: u32) -> Result<()> {
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
                .and_then(|_spinners| {
                    let plan = Plan {
                        cut: Some(self.interrupted.clone()),
                        ..(**plan).clone()
                    };
                    self.site.run(&plan, &|_| {})
                })
                .map(|mut r| {
                    // A try the signal ended early says so itself (the client's CUT_SHORT).
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
                    .and_then(|c| c.ns.as_ref())
                    .map_or(f64::NAN, |ns| ns.p50 / 1000.0);
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

/// What each config sets, with the knob's original value, for the store.
pub(crate) fn knob_records(
    configs: &[Config],
    originals: &[(Knob, String)],
) -> Vec<virtperf_store::KnobRecord> {
    let mut records = Vec::new();
    for c in configs {
        for (k, v) in &c.knobs {
            records.push(virtperf_store::KnobRecord {
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
