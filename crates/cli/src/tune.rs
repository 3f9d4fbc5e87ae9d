//! `virtperf tune`: the cheapest measured configuration that meets latency or throughput
//! goals. `virtperf_tune` finds the remedies this machine can try and judges the figures;
//! this module runs its rounds as ordinary specs (the runner applies and restores every
//! knob through its journal, interleaves the trials and stores each round as a run) within
//! a time budget, and prints the answer.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::Args;
use virtperf_report::decide::Outcome;
use virtperf_tune::candidate::{discover, Candidate, Machine, NotHere, Target};
use virtperf_tune::config::{spec_text, Configuration};
use virtperf_tune::goal::Goal;
use virtperf_tune::search;

use crate::experiment::DbArg;
use crate::signals::{code, exit};
use crate::tune_search::{secs, Round, Search};

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// A goal on a metric of the workload's results: METRIC<=VALUE or METRIC>=VALUE
    /// (p50, p99, mean in µs unless a unit is given: 'p99<=80us'; rate in trans/s:
    /// 'rate>=30k'; mbps: 'mbps>=2gbit'); repeat for several, all must be met
    #[arg(long = "goal", required = true, value_parser = parse_goal)]
    pub goals: Vec<Goal>,
    /// The workload to tune: rr, crr, udp-rr or stream
    #[arg(long, short = 'w', default_value = "rr", value_parser = ["rr", "crr", "udp-rr", "stream"])]
    pub workload: String,
    /// Request and response sizes for rr kinds (`REQ,RESP`), or the send size of a stream
    #[arg(long, short = 'r', value_parser = parse_size)]
    pub size: Option<String>,
    /// Client and server CPUs (default on this host's loopback 0,1: a cross-CPU round
    /// trip, where remedies matter; elsewhere unpinned, as the server's CPUs are another
    /// machine's)
    #[arg(long, short = 'T', value_parser = virtperf_lab::parse::cpus)]
    pub cpus: Option<(Option<u32>, Option<u32>)>,
    /// Where the two ends run (netns…, guest…, ssh:…, remote:…); default this host's loopback
    #[arg(long, value_parser = <virtperf_place::Placement as std::str::FromStr>::from_str)]
    pub placement: Option<virtperf_place::Placement>,
    /// The VM on this host that the server runs in (pid:N, qemu:NAME, libvirt:DOMAIN,
    /// firecracker:PID), with a remote:/ssh: placement into it: every configuration's cost
    /// is then this host's busy CPUs, the VM's threads included (their share shown)
    #[arg(long, value_name = "SPEC", requires = "placement", value_parser = clap::value_parser!(virtperf_measure::vm::VmSpec))]
    pub vm: Option<virtperf_measure::vm::VmSpec>,
    /// How long the whole search may take; rounds are planned to fit it
    #[arg(long, default_value = "10m", value_parser = parse_budget)]
    pub budget: Duration,
    /// Leave out configurations that keep more than this many CPUs busy
    #[arg(long, value_name = "CPUS", value_parser = parse_max_cpu)]
    pub max_cpu: Option<f64>,
    /// Length of each trial
    #[arg(long, short = 'l', default_value = "2s", value_parser = parse_trial)]
    pub duration: Duration,
    /// Tries of every configuration (its confidence interval rests on them)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=20))]
    pub runs: u32,
    /// Leave a remedy out of the search, by name (`same-cpu` where the two ends cannot
    /// share a CPU, `spin`, `halt-poll-200us`, …); repeatable
    #[arg(long = "skip", value_name = "REMEDY")]
    pub skip: Vec<String>,
    /// Search only these remedies, by name (as the table names them; repeatable, or
    /// comma-separated): the baseline is always measured
    #[arg(
        long = "only",
        value_name = "REMEDY",
        value_delimiter = ',',
        conflicts_with = "skip"
    )]
    pub only: Vec<String>,
    /// Measure a tuned profile's run-time settings as one more configuration:
    /// tuned:NAME (from /etc/tuned or /usr/lib/tuned) or tuned:/path/to/tuned.conf
    #[arg(long, value_name = "tuned:PROFILE")]
    pub against: Option<String>,
    /// Write the pick as a sysctl.d snippet, a tuned profile or a virtperf spec (to --out,
    /// else standard output); nothing is applied or kept otherwise
    #[arg(long, value_name = "sysctl.d|tuned|spec", value_parser = |s: &str| s.parse::<virtperf_tune::emit::Format>())]
    pub emit: Option<virtperf_tune::emit::Format>,
    /// File for --emit: created new (never through a symlink); an existing one is
    /// refused unless --force
    #[arg(long, value_name = "FILE", requires = "emit")]
    pub out: Option<PathBuf>,
    /// Replace --out's file if it exists (a symlink there is replaced, not followed)
    #[arg(long, requires = "out")]
    pub force: bool,
    /// Print the search as JSON (docs/json.md)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
    #[command(flatten)]
    pub tags: crate::args::TagArgs,
}

fn parse_goal(s: &str) -> Result<Goal, String> {
    Goal::parse(s)
}

/// A size as the workloads take it (`1,1`, `64`, `16KiB`), kept as written for the spec.
fn parse_size(s: &str) -> Result<String> {
    virtperf_lab::parse::size_pair(s)?;
    Ok(s.to_string())
}

fn parse_budget(s: &str) -> Result<Duration> {
    let d = virtperf_lab::parse::duration_up_to(s, Duration::from_secs(24 * 3600), "24h")?;
    anyhow::ensure!(
        d >= Duration::from_secs(10),
        "a budget under 10s measures nothing: give at least 10s"
    );
    Ok(d)
}

fn parse_trial(s: &str) -> Result<Duration> {
    crate::args::trial_length(s, Duration::from_millis(200))
}

fn parse_max_cpu(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number of CPUs (e.g. 1.5)"))?;
    if !v.is_finite() || v <= 0.0 || v > 4096.0 {
        return Err(format!("{s:?} is not a number of CPUs (0 < CPUS ≤ 4096)"));
    }
    Ok(v)
}

/// What each trial costs beyond its measured seconds (a private agent, knob switches,
/// connection set-up), for planning a round into the budget before any was timed.
const TRIAL_OVERHEAD: Duration = Duration::from_millis(1500);

/// What one guest's boot costs a guest placement's configuration, for planning round 1:
/// a TCG boot of virtperf's initramfs guest takes 5–10 s here, a KVM one less.
const GUEST_BOOT: Duration = Duration::from_secs(10);

/// Refuses a budget round 1 (`configs` configurations) cannot fit, before anything runs.
fn check_budget(a: &TuneArgs, configs: usize) -> Result<()> {
    let per_trial = a.duration + TRIAL_OVERHEAD;
    let mut need = per_trial * (configs as u32 * a.runs);
    if matches!(a.placement, Some(virtperf_place::Placement::Guest(..))) {
        // Each configuration boots its own guest once, at its first trial.
        need += GUEST_BOOT * configs as u32;
    }
    if need <= a.budget {
        return Ok(());
    }
    Err(exit(
        code::USAGE,
        format!(
            "the budget {} is too short: round 1 measures {configs} configurations × {} tries of {} (≈ {} with set-up); give --budget {} or a shorter --duration",
            secs(a.budget),
            a.runs,
            secs(a.duration),
            secs(need),
            secs(need + need / 2)
        ),
    ))
}

/// `virtperf tune`
pub fn tune(a: TuneArgs) -> Result<()> {
    for g in &a.goals {
        g.check_for(&a.workload).map_err(|m| exit(code::USAGE, m))?;
    }
    if a.json && a.emit.is_some() && a.out.is_none() {
        return Err(exit(
            code::USAGE,
            "--json and --emit both write to standard output: give --out FILE for --emit",
        ));
    }
    check_vm(&a)?;
    if let Some(p) = &a.out {
        // A bad --out is found before the search, not after it.
        crate::out_file::check(p, a.force).map_err(|m| exit(code::USAGE, m))?;
    }
    let target = target_of(&a)?;
    let tags = a.tags.resolve()?;
    let before = Machine::read();
    let (mut singles, mut not_here) = discover(&before, &target);
    skip(&mut singles, &mut not_here, &a.skip, "--skip")?;
    if !a.only.is_empty() {
        // A name --only gives that is no remedy here is refused as --skip's would be.
        let unknown: Vec<String> = a
            .only
            .iter()
            .filter(|n| !singles.iter().any(|c| &c.name == *n))
            .cloned()
            .collect();
        skip(&mut singles.clone(), &mut Vec::new(), &unknown, "--only")?;
        let others: Vec<String> = singles
            .iter()
            .map(|c| c.name.clone())
            .filter(|n| !a.only.contains(n))
            .collect();
        skip(&mut singles, &mut not_here, &others, "--only")?;
    }
    if let Some(t) = &a.against {
        let (c, left) = against(t)?;
        singles.push(c);
        not_here.extend(left);
    }
    let t0 = Instant::now();
    let mut round1 = vec![Configuration::baseline()];
    round1.extend(singles.iter().cloned().map(|c| Configuration::of(vec![c])));
    // Round 2 combines round 1's parts: these are every host knob the search may write.
    let written = || round1.iter().flat_map(|c| c.settings());
    let written_before = virtperf_tune::candidate::read_written(written());
    check_budget(&a, round1.len())?;
    let mut rounds = Vec::new();
    let (r1, interrupted) = run_round(&a, &target, 1, &round1, tags.clone())?;
    rounds.push(r1);
    let stopped = if interrupted {
        "stopped by a signal".to_string()
    } else {
        match second_round(&a, &rounds[0], t0) {
            // Round 1 is stored and its answer stands: a round 2 that fails is said, not
            // allowed to take round 1's table with it.
            Ok(configs) => match run_round(&a, &target, 2, &configs, tags) {
                Ok((r2, interrupted)) => {
                    let n = r2.measured.len() - 1;
                    rounds.push(r2);
                    if interrupted {
                        "stopped by a signal in round 2".into()
                    } else {
                        format!("every combination planned was measured ({n}); combinations of more remedies are not searched")
                    }
                }
                Err(e) => format!("round 2 failed: {e:#}"),
            },
            Err(why) => why,
        }
    };
    let after = Machine::read();
    let search = Search {
        target,
        goals: a.goals.clone(),
        max_cpu: a.max_cpu,
        rounds,
        not_here,
        stopped,
        against: a.against.clone(),
        restored: restored(
            &written_before,
            &virtperf_tune::candidate::read_written(written()),
            &before,
            &after,
        ),
        took: t0.elapsed(),
    };
    finish(&a, &search, &before)
}

/// Prints the search, writes `--emit`, and ends as the answer says: exit 1 when no
/// configuration meets the goals.
fn finish(a: &TuneArgs, s: &Search, before: &Machine) -> Result<()> {
    let all = s.all();
    let comparable = s.comparable();
    let decided = search::pick(&comparable, &s.goals, s.max_cpu);
    let pick = decided.config();
    if a.json {
        println!("{}", crate::tune_render::json(s, &all));
    } else {
        print!("{}", crate::tune_render::text(s, &all));
        if a.emit.is_none() {
            print!("{}", crate::tune_render::NOTHING_KEPT);
        }
    }
    let sig = crate::signals::received();
    emit(a, s, pick, before, sig)?;
    if let Err(e) = &s.restored {
        eprintln!("virtperf: warning: {e}");
    }
    if sig != 0 {
        return Err(exit(
            crate::signals::code_for(sig),
            format!(
                "stopped by {}: the rounds measured so far are stored",
                crate::signals::name(sig)
            ),
        ));
    }
    // One decision, the exit codes every command uses: 3 nothing meets the goals, 4
    // nothing was measured at all, 5 configurations meet them but none's cost is known.
    let goals: Vec<String> = s.goals.iter().map(|g| g.words()).collect();
    match decided {
        search::Pick::Cheapest { .. } => Ok(()),
        search::Pick::NoCost { meeting } => Err(exit(
            Outcome::Undecided.exit_code(),
            crate::tune_answer::no_cost(&goals.join(" and "), &meeting),
        )),
        search::Pick::Unsure { unsure } => Err(exit(
            Outcome::Undecided.exit_code(),
            crate::tune_answer::undecided(s, &unsure),
        )),
        search::Pick::Cut { cut } => Err(exit(
            Outcome::Undecided.exit_code(),
            crate::tune_answer::cut_short(s, &cut),
        )),
        search::Pick::Nothing if all.iter().all(|m| m.figures.is_empty()) => Err(exit(
            Outcome::NotMeasured.exit_code(),
            crate::tune_answer::no_answer(s, &all),
        )),
        search::Pick::Nothing => Err(exit(
            Outcome::NotMet.exit_code(),
            crate::tune_answer::no_answer(s, &comparable),
        )),
    }
}

/// Writes `--emit`'s file for `pick`, or says why none is written: no pick, or a signal
/// (`sig`) stopped the search.
fn emit(
    a: &TuneArgs,
    s: &Search,
    pick: Option<&search::Measured>,
    before: &Machine,
    sig: i32,
) -> Result<()> {
    let Some(f) = a.emit else {
        return Ok(());
    };
    let w = match (pick, sig) {
        (Some(w), 0) => w,
        // Asked for a file and given none: said, not left to be noticed missing.
        (None, 0) => {
            eprintln!(
                "virtperf: --emit not written: no configuration was picked (the answer says why)"
            );
            return Ok(());
        }
        // The user asked it to stop: a file written now would hold a pick made short of
        // what was planned, to be installed by whoever finds it.
        (w, sig) => {
            eprintln!(
                "virtperf: --emit not written: {} stopped the search before it was done{}; run tune again to write one",
                crate::signals::name(sig),
                w.map(|w| format!(" ({} was the pick among what was measured)", w.config.name))
                    .unwrap_or_default()
            );
            return Ok(());
        }
    };
    let text = virtperf_tune::emit::emit(f, &w.config, &s.target, &s.goals, before);
    if f == virtperf_tune::emit::Format::Spec {
        // What `virtperf run` will be given, parsed by the parser it will use.
        virtperf_experiment::spec::parse(&text).map_err(|e| {
            anyhow::anyhow!("tune wrote a spec its own parser refuses ({e}): not written")
        })?;
    }
    match &a.out {
        Some(p) => {
            crate::out_file::write(p, &text, a.force).map_err(|m| exit(1, m))?;
            eprintln!("virtperf: wrote {} ({})", p.display(), w.config.name);
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// Takes the remedies named out of the search (listed as not tried, left out by `flag`:
/// `--skip`, or `--only` for those it did not name); a name that is no remedy here is a
/// usage error naming those that are.
fn skip(
    singles: &mut Vec<Candidate>,
    not_here: &mut Vec<NotHere>,
    names: &[String],
    flag: &str,
) -> Result<()> {
    for n in names {
        let Some(i) = singles.iter().position(|c| &c.name == n) else {
            let have: Vec<&str> = singles.iter().map(|c| c.name.as_str()).collect();
            return Err(exit(
                code::USAGE,
                format!(
                    "{flag} {n:?}: no such remedy here (the search has {})",
                    have.join(", ")
                ),
            ));
        };
        let c = singles.remove(i);
        not_here.push(NotHere {
            what: c.what,
            why: format!("left out by {flag}"),
        });
    }
    Ok(())
}

/// `--vm` names the VM on this host that a remote:/ssh: placement's agent runs in, and
/// must be found before any round runs.
fn check_vm(a: &TuneArgs) -> Result<()> {
    let Some(vm) = &a.vm else {
        return Ok(());
    };
    if !matches!(
        a.placement,
        Some(virtperf_place::Placement::Remote { .. } | virtperf_place::Placement::Ssh(_))
    ) {
        return Err(exit(
            code::USAGE,
            "--vm watches a VM you run on this host: give the agent in it with --placement remote:ADDR:PORT (or ssh:…)",
        ));
    }
    virtperf_lab::host_vm::Watch::open(vm).map_err(|e| exit(code::USAGE, format!("{e:#}")))?;
    Ok(())
}

/// The workload and where it runs, from the arguments.
fn target_of(a: &TuneArgs) -> Result<Target> {
    let here = matches!(a.placement, None | Some(virtperf_place::Placement::Local));
    let cpus = match (a.cpus, here) {
        // On this host both CPUs are ours to check: a default pair it lacks pins nothing.
        (None, true) => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            (n > 1).then_some((0, 1))
        }
        // The server's CPUs are another machine's (a guest, a remote agent): pinned only
        // when asked, and its agent refuses a CPU it lacks.
        (None, false) | (Some((None, None)), _) => None,
        (Some((Some(c), Some(s))), true) => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
            if c.max(s) >= n {
                return Err(exit(
                    code::USAGE,
                    format!("--cpus {c},{s}: this host has CPUs 0 to {}", n - 1),
                ));
            }
            Some((c, s))
        }
        (Some((Some(c), Some(s))), false) => Some((c, s)),
        _ => return Err(exit(code::USAGE, "--cpus takes two CPUs, e.g. --cpus 0,1")),
    };
    Ok(Target {
        kind: a.workload.clone(),
        size: a.size.clone(),
        cpus,
        placement: a.placement.as_ref().map(|p| p.to_string()),
    })
}

/// `--against tuned:PROFILE` as one configuration's remedy, and what it leaves out here.
fn against(t: &str) -> Result<(Candidate, Vec<NotHere>)> {
    let Some(name) = t.strip_prefix("tuned:") else {
        return Err(exit(
            code::USAGE,
            format!("--against takes tuned:PROFILE (got {t:?})"),
        ));
    };
    let p = virtperf_tune::tuned::load(name).map_err(|m| exit(code::USAGE, m))?;
    let writable = |k: &str, v: &str| -> Result<(), String> {
        let now = virtperf_machine::knob::Knob::sysctl(k)
            .and_then(|k| k.probe())
            .map_err(|e| format!("{e:#}"))?;
        virtperf_tune::tuned::value_fits(&now, v)
    };
    let hold = virtperf_machine::qos::can_hold();
    Ok(virtperf_tune::tuned::candidate(
        &p,
        &writable,
        &virtperf_tune::tuned::cpuidle_states(),
        hold,
    ))
}

/// Runs one round's configurations as a spec; whether a signal stopped it.
fn run_round(
    a: &TuneArgs,
    target: &Target,
    round: u32,
    configs: &[Configuration],
    tags: virtperf_store::Tags,
) -> Result<(Round, bool)> {
    let goals: Vec<String> = a.goals.iter().map(Goal::words).collect();
    let text = spec_text(
        &format!("virtperf tune round {round}: {}", goals.join(", ")),
        target,
        &format!("{}ms", a.duration.as_millis()),
        a.runs,
        configs,
    );
    let spec = virtperf_experiment::spec::parse(&text)
        .map_err(|e| exit(code::USAGE, format!("tune's spec does not parse: {e}")))?;
    if !a.json {
        eprintln!(
            "virtperf: tune round {round}: {} configurations × {} tries of {}",
            configs.len(),
            a.runs,
            secs(a.duration)
        );
    }
    let t0 = Instant::now();
    let opts = virtperf_experiment::runner::RunOptions {
        tags,
        vm: a.vm.clone(),
        ..Default::default()
    };
    let ex = crate::experiment::execute_spec(&spec, &a.db, a.json, &a.lock, opts)?;
    let measured = search::measure(
        configs,
        ex.points.first(),
        &ex.trials,
        &a.goals,
        (round, ex.row.id),
        &search::Unrun {
            skipped: ex.skipped.clone(),
            cut: ex.interrupted,
        },
    );
    Ok((
        Round {
            run_id: ex.row.id,
            measured,
            trials: ex.trials.len(),
            took: t0.elapsed(),
        },
        ex.interrupted,
    ))
}

/// Round 2's configurations (the baseline again, then the combinations that fit the
/// budget left), or why there is no round 2.
fn second_round(a: &TuneArgs, r1: &Round, t0: Instant) -> Result<Vec<Configuration>, String> {
    let combos = search::combinations(&r1.measured, &a.goals, a.max_cpu)?;
    let per_trial = r1.took / (r1.trials.max(1) as u32);
    let left = a.budget.saturating_sub(t0.elapsed());
    let fit = (left.as_secs_f64() / (per_trial.as_secs_f64() * f64::from(a.runs))).floor() as usize;
    // The baseline is measured again beside them: drift between rounds shows.
    if fit < 2 {
        return Err(format!(
            "the budget left ({}) does not fit a round of combinations ({} each)",
            secs(left),
            secs(per_trial * a.runs)
        ));
    }
    let mut configs = vec![Configuration::baseline()];
    configs.extend(combos.into_iter().take(fit - 1));
    Ok(configs)
}

/// Whether every knob the search wrote, and every knob `tune` may touch, is back where
/// it was: read again, value for value (a knob read before that cannot be read after is
/// not "back"). Ok says what was checked.
fn restored(
    written: &BTreeMap<String, Result<String, String>>,
    written_after: &BTreeMap<String, Result<String, String>>,
    before: &Machine,
    after: &Machine,
) -> Result<String, String> {
    let mut checked = 0;
    let mut changed = Vec::new();
    for (k, v) in written.iter().chain(&before.knobs) {
        let now = written_after.get(k).or_else(|| after.knobs.get(k));
        match (v, now) {
            (Ok(b), Some(Ok(a))) if a != b => changed.push(format!("{k} was {b}, is {a}")),
            (Ok(_), Some(Ok(_))) => checked += 1,
            (Ok(b), Some(Err(e))) => changed.push(format!("{k} was {b}, cannot be read now ({e})")),
            (Ok(b), None) => changed.push(format!("{k} was {b}, not read again")),
            (Err(_), _) => {}
        }
    }
    if changed.is_empty() {
        Ok(format!(
            "{checked} knobs read again just now, the {} the search wrote among them",
            written.values().filter(|v| v.is_ok()).count()
        ))
    } else {
        Err(format!(
            "knobs not back to their values before the search: {} (`virtperf cleanup` restores a killed run's)",
            changed.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use virtperf_tune::candidate::{Setting, Target};

    /// Every kind of setting `tune` writes into its round specs parses as a spec, guest
    /// tables included, and a combination keeps both parts' settings.
    #[test]
    fn round_specs_parse() {
        let part = |name: &str, family: &str, s: Setting| Candidate {
            name: name.into(),
            family: family.into(),
            what: name.into(),
            settings: vec![s],
        };
        let configs = vec![
            Configuration::baseline(),
            Configuration::of(vec![
                part(
                    "bp",
                    "b",
                    Setting::Sysctl {
                        name: "net.core.busy_read".into(),
                        value: "50".into(),
                    },
                ),
                part(
                    "hp",
                    "h",
                    Setting::Module {
                        name: "haltpoll.guest_halt_poll_ns".into(),
                        value: "200000".into(),
                    },
                ),
                part("dma", "d", Setting::DmaLatency { us: 0 }),
                part(
                    "gov",
                    "h",
                    Setting::Governor {
                        name: "haltpoll".into(),
                    },
                ),
                part(
                    "rps",
                    "r",
                    Setting::NetDev {
                        name: "lo/queues/rx-0/rps_cpus".into(),
                        value: "2".into(),
                    },
                ),
                part(
                    "spin",
                    "w",
                    Setting::Wait {
                        mode: "spin".into(),
                    },
                ),
                part(
                    "one",
                    "c",
                    Setting::Cpus {
                        client: 0,
                        server: 0,
                    },
                ),
            ]),
            Configuration::of(vec![
                part(
                    "idle",
                    "g",
                    Setting::GuestCmdline {
                        words: "idle=poll".into(),
                    },
                ),
                part(
                    "ghp",
                    "gh",
                    Setting::GuestModule {
                        name: "haltpoll.guest_halt_poll_ns".into(),
                        value: "200000".into(),
                    },
                ),
                part(
                    "ring",
                    "gv",
                    Setting::GuestVirtio {
                        name: "rx_queue_size".into(),
                        value: "1024".into(),
                    },
                ),
            ]),
        ];
        let t = Target {
            kind: "rr".into(),
            size: Some("1,1".into()),
            cpus: Some((0, 1)),
            placement: Some("guest".into()),
        };
        let text = spec_text("t", &t, "500ms", 3, &configs);
        let spec =
            virtperf_experiment::spec::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(spec.configs.len(), 3);
        let c = &spec.configs[1];
        assert_eq!(c.cpu_dma_latency, Some(0));
        assert_eq!(
            c.wait,
            Some((virtperf_wire::Wait::Spin, virtperf_wire::Wait::Spin))
        );
        assert_eq!(c.knobs.len(), 4);
        assert!(c
            .knobs
            .iter()
            .any(|(k, v)| k.name == "lo/queues/rx-0/rps_cpus" && v == "2"));
        assert!(c
            .knobs
            .iter()
            .any(|(k, v)| k.name == "cpuidle.governor" && v == "haltpoll"));
        match &spec.configs[2].placement {
            Some(virtperf_place::Placement::Guest(_, o)) => {
                assert_eq!(
                    o.virtio.get("rx_queue_size").map(String::as_str),
                    Some("1024")
                );
                assert_eq!(o.cmdline.as_deref(), Some("idle=poll"));
            }
            other => panic!("not a guest placement: {other:?}"),
        }
        assert_eq!(secs(Duration::from_millis(500)), "500ms");
        assert_eq!(secs(Duration::from_secs(150)), "2m30s");
    }

    /// A stream's socket-buffer remedy reaches the spec as both buffers of the config.
    #[test]
    fn a_streams_socket_buffers_reach_the_spec() {
        let t = Target {
            kind: "stream".into(),
            size: Some("16K".into()),
            cpus: Some((0, 1)),
            placement: None,
        };
        // A machine with nothing to write: the stream's remedies do not depend on knobs.
        let m = virtperf_tune::candidate::Machine {
            knobs: Default::default(),
            dma_latency: Err("not here".into()),
            cpuidle_driver: None,
            cpuidle_governor: None,
            governors: Err("not here".into()),
            online_cpus: vec![0, 1],
            vhost_net: Err("not here".into()),
        };
        let (cands, not) = virtperf_tune::candidate::discover(&m, &t);
        let buf = cands
            .iter()
            .find(|c| c.name == "socket-buffers-4m")
            .expect("a stream's socket buffers are a remedy");
        assert!(
            not.iter().any(|n| n.what.contains("MSG_ZEROCOPY")),
            "{not:?}"
        );
        let configs = [
            Configuration::baseline(),
            Configuration::of(vec![buf.clone()]),
        ];
        let text = spec_text("t", &t, "1s", 2, &configs);
        let spec =
            virtperf_experiment::spec::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let sock = &spec.configs[1].sock;
        assert_eq!((sock.sndbuf, sock.rcvbuf), (Some(4 << 20), Some(4 << 20)));
    }
}
