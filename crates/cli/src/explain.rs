//! `virtperf explain`: where a cross-CPU round trip's time goes. Runs the battery in
//! `virtperf_explain`, stores it as a run, and prints the model of
//! `virtperf_report::explain` with its residual.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use virtperf_explain::ExplainOpts;
use virtperf_place::Placement;
use virtperf_report::explain::{self as model, Explanation};
use virtperf_report::html;
use virtperf_store::{RunRow, TrialRow};

use crate::experiment::DbArg;

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// What to explain: rr (the 1-byte cross-CPU round trip) or stream (what bounds a TCP
    /// stream, its CPU per MB on each side, and what raises it)
    #[arg(long, value_enum, default_value = "rr")]
    pub workload: crate::args::ExplainKind,
    #[command(flatten)]
    pub stream: crate::args::ExplainStreamArgs,
    /// A shorter battery: 3 tries of 2 s trials (about 1 min on a 2-CPU guest, rr or stream, against 1.5–3 min without)
    #[arg(long)]
    pub quick: bool,
    /// Request and response sizes in bytes: `REQ,RESP`, or one size for both (default 1,1);
    /// with --workload stream, the send size (default 16K)
    #[arg(long, short = 'r', value_parser = virtperf_lab::parse::size_pair)]
    pub size: Option<(u32, u32)>,
    /// The two CPUs of the cross-CPU measurements (the first also hosts the same-CPU one)
    #[arg(long, short = 'T', default_value = "0,1", value_parser = virtperf_lab::parse::cpus)]
    pub cpus: (Option<u32>, Option<u32>),
    /// Tries of every measurement (default 5, with --quick 3)
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub tries: Option<u32>,
    /// Length of each rr trial (default 3s, with --quick 2s); wake trials take half of it
    #[arg(long, short = 'l', value_parser = parse_trial)]
    pub duration: Option<Duration>,
    /// Also explain another machine, side by side with this one: guest[:…] (a QEMU guest
    /// virtperf boots, with at least 2 vCPUs; needs root), ssh:USER@HOST, remote:HOST[:PORT]
    /// (an agent started with `serve --allow-drive`). Its battery runs there, in-process,
    /// and is stored as a second run
    #[arg(long, value_parser = <Placement as std::str::FromStr>::from_str)]
    pub placement: Option<Placement>,
    /// With --placement: explain this placement on the left instead of this machine
    /// (ssh:…, remote:…, guest…), e.g. two VMs side by side
    #[arg(long, value_name = "PLACEMENT", requires = "placement", value_parser = <Placement as std::str::FromStr>::from_str)]
    pub native: Option<Placement>,
    /// Explain the machine of the agent at HOST (started with `serve --allow-drive`)
    #[arg(long, short = 'H', conflicts_with = "placement")]
    pub host: Option<String>,
    /// With --host (or a remote:/ssh: placement) on the VM's host: the hypervisor's view of
    /// that VM (pid:N, qemu:NAME, libvirt:DOMAIN, firecracker:PID) over its cross-CPU round
    /// trip, beside the in-guest terms: vCPU CPU and run-queue wait, exits by kind
    #[arg(long, value_name = "SPEC", value_parser = clap::value_parser!(virtperf_measure::vm::VmSpec))]
    pub vm: Option<virtperf_measure::vm::VmSpec>,
    #[command(flatten)]
    pub conn: crate::args::ConnArgs,
    #[command(flatten)]
    pub guest: crate::args::GuestArgs,
    /// With --placement guest: do not boot a guest per boot-time remedy (idle=poll,
    /// nohz=off) to measure its blocking cross-CPU rr beside the battery's
    #[arg(long, help_heading = "Guest placement")]
    pub no_boot_remedies: bool,
    /// Print the explanation as JSON (docs/json.md)
    #[arg(long)]
    pub json: bool,
    /// Also write an HTML report with the waterfall chart to this file
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub lock: crate::machine::LockArgs,
    #[command(flatten)]
    pub tags: crate::args::TagArgs,
}

/// Trial lengths: 100 ms (too short to mean much, but fine for a smoke test) to 60 s.
fn parse_trial(s: &str) -> Result<Duration> {
    crate::args::trial_length(s, Duration::from_millis(100))
}

/// The battery's options from the command line.
fn options(a: &ExplainArgs) -> Result<ExplainOpts> {
    use crate::signals::{code, exit};
    let (Some(c0), Some(c1)) = a.cpus else {
        return Err(exit(code::USAGE, "--cpus needs two CPUs, e.g. --cpus 0,1"));
    };
    let mut opts = ExplainOpts::new(a.quick);
    opts.size = a.size.unwrap_or((1, 1));
    opts.cpus = (c0, c1);
    opts.allow_concurrent = a.lock.allow_concurrent;
    // A malformed $VIRTPERF_TAGS is a usage error before anything runs.
    opts.tags = a.tags.resolve()?;
    if let Some(n) = a.tries {
        opts.tries = n;
    }
    if let Some(d) = a.duration {
        opts.rr_duration = d;
        opts.wake_duration = (d / 2).max(Duration::from_millis(100));
    }
    Ok(opts)
}

/// This machine's battery pins to `cpus`: the same CPU twice, or one it lacks, is the
/// command line's error (exit 2), said before anything starts.
fn check_local_cpus(cpus: (u32, u32)) -> Result<()> {
    if cpus.0 == cpus.1 {
        return Err(crate::signals::exit(
            crate::signals::code::USAGE,
            format!(
                "explain needs two different CPUs (got {},{}): pick two with --cpus",
                cpus.0, cpus.1
            ),
        ));
    }
    match [cpus.0, cpus.1]
        .into_iter()
        .find(|c| !virtperf_lab::cpu_allowed(*c))
    {
        Some(c) => Err(crate::signals::exit(
            crate::signals::code::USAGE,
            format!("--cpus: CPU {c} does not exist here (or is not allowed to this process): pick two with --cpus"),
        )),
        None => Ok(()),
    }
}

/// `virtperf explain`
pub fn explain(a: ExplainArgs) -> Result<()> {
    let opts = options(&a)?;
    let elsewhere = elsewhere(&a)?;
    crate::explain_host::check_vm(a.vm.is_some(), elsewhere.as_ref())?;
    // An agent elsewhere (--host) is explained alone; a guest or an SSH host beside this
    // machine, whose battery runs first.
    let left = a
        .native
        .clone()
        .filter(|p| *p != Placement::Local)
        .map(|p| configured(&a, p))
        .transpose()?;
    let native = if matches!(elsewhere, Some(Placement::Remote { .. })) && a.host.is_some() {
        None
    } else if let Some(p) = &left {
        Some(explain_at(&a, p, &opts)?)
    } else {
        check_local_cpus(opts.cpus)?;
        Some(crate::experiment::execute_with(
            &a.db,
            a.json,
            &a.lock,
            |store, stop, obs| virtperf_explain::run(&opts, store, stop, obs),
        )?)
    };
    let native_name = left
        .as_ref()
        .map_or_else(|| "this machine".to_string(), |p| p.to_string());
    let far = match &elsewhere {
        Some(p) => Some(explain_at(&a, p, &opts)?),
        None => None,
    };
    let native_e = native
        .as_ref()
        .map(|d| explanation(&d.row, &d.trials))
        .transpose()?;
    let far_e = far
        .as_ref()
        .map(|d| explanation(&d.row, &d.trials))
        .transpose()?;
    let far_name = elsewhere
        .as_ref()
        .map(|p| p.to_string())
        .unwrap_or_default();
    if a.json {
        let v = match (&native_e, &far_e) {
            (Some(n), Some(f)) => serde_json::json!({
                "native": n,
                "native_placement": native_name,
                "elsewhere": f,
                "placement": far_name,
            }),
            (Some(n), None) => serde_json::to_value(n)?,
            (None, Some(f)) => serde_json::to_value(f)?,
            (None, None) => serde_json::Value::Null,
        };
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (e, d, name) in [
            (&native_e, &native, native_name.as_str()),
            (&far_e, &far, far_name.as_str()),
        ] {
            if let (Some(e), Some(d)) = (e, d) {
                if native.is_some() && far.is_some() {
                    println!("== {name}");
                }
                print!("{}", model::text(e));
                println!(
                    "\nstored as run {} in {} ({}); see `virtperf show {}`\n",
                    d.row.id,
                    d.store.path().display(),
                    d.row.effective_status(),
                    d.row.id
                );
            }
        }
        if let (Some(n), Some(f)) = (&native_e, &far_e) {
            println!("== side by side: the difference is what {far_name} adds");
            print!("{}", model::side_by_side(n, &native_name, f, &far_name));
        }
    }
    if let Some(path) = &a.output {
        let mut sections = Vec::new();
        for (d, e) in [(&native, &native_e), (&far, &far_e)] {
            if let (Some(d), Some(e)) = (d, e) {
                sections.push((d, e));
            }
        }
        write_report(path, &sections)?;
        if !a.json {
            println!("wrote {}", path.display());
        }
    }
    // Exit as the runs ended (stopped, incomplete, …), this machine's first.
    for d in [&native, &far].into_iter().flatten() {
        crate::decision::run_exit(&d.row, d.ok, d.interrupted)?;
    }
    Ok(())
}

/// The other machine to explain, with the settings its flags give it; `None`: this one.
pub(crate) fn elsewhere(a: &ExplainArgs) -> Result<Option<Placement>> {
    let p = match (&a.placement, &a.host) {
        (_, Some(host)) => Placement::Remote {
            host: host.clone(),
            port: None,
            token: None,
        },
        (Some(Placement::Local) | None, None) => return Ok(None),
        (Some(p), None) => p.clone(),
    };
    Ok(Some(configured(a, p)?))
}

/// `p` with the settings the flags give it (the agent's port and token, the guest's
/// options); namespaces are refused (they share this machine's kernel and CPUs).
fn configured(a: &ExplainArgs, mut p: Placement) -> Result<Placement> {
    use crate::signals::{code, exit};
    match &mut p {
        Placement::Netns(..) => {
            return Err(exit(
                code::USAGE,
                "namespaces share this machine's kernel and CPUs: run explain without --placement to explain them",
            ))
        }
        Placement::Remote { port, token, .. } => {
            port.get_or_insert(a.conn.port);
            *token = a.conn.token()?;
        }
        Placement::Guest(_, g) => {
            **g = a.guest.opts(a.json);
            // Cross-CPU measurements need two vCPUs.
            g.vcpus = g.vcpus.max(2);
        }
        Placement::Local | Placement::Ssh(_) => {}
    }
    Ok(p)
}

/// Runs the battery at `p` (booting, starting or reaching its agent) and stores it as a run.
fn explain_at(
    a: &ExplainArgs,
    p: &Placement,
    opts: &ExplainOpts,
) -> Result<crate::experiment::Executed> {
    let mut opts = opts.clone();
    opts.tries = opts.tries.min(ExplainOpts::MAX_REMOTE_TRIES);
    crate::experiment::execute_with(&a.db, a.json, &a.lock, |store, _stop, obs| {
        let _ = obs;
        if p.needs_root() {
            // The battery there cannot be stopped between trials from here, and its result
            // is stored only when it is whole: a signal removes the guests and namespaces this
            // run made and ends the command at once, as for any guest test.
            crate::signals::remove_own_on_termination("; the battery there was not stored")?;
        }
        // Progress, like the bar of this machine's battery: on a terminal only.
        if !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!(
                "virtperf: running the battery at {p} (at most {} s; its progress is not shown)",
                opts.bound().as_secs()
            );
        }
        let site = virtperf_place::open(p)?;
        let host = crate::explain_host::Recorder::start(a.vm.as_ref())?;
        let mut b = virtperf_explain::at_site(site.as_ref(), &opts)?;
        drop(site);
        host.attach(&mut b.trials);
        if let (Placement::Guest(_, g), false) = (p, a.no_boot_remedies) {
            boot_remedies(g, &opts, &mut b, a.json);
        }
        keep(store, &b, model::RUN_NAME, p, &opts.tags)
    })
}

/// Stores battery `b` (run at `p`) as a run named `name` and gives the runner its account.
pub(crate) fn keep(
    store: &mut virtperf_store::Store,
    b: &virtperf_explain::Battery,
    name: &str,
    p: &Placement,
    tags: &virtperf_store::Tags,
) -> Result<virtperf_experiment::runner::RunOutcome> {
    let run_id = virtperf_explain::store_battery(store, b, name, &p.to_string(), tags)?;
    let count = |s: virtperf_store::TrialStatus| b.trials.iter().filter(|t| t.status == s).count();
    Ok(virtperf_experiment::runner::RunOutcome {
        run_id,
        status: b.status,
        ok: count(virtperf_store::TrialStatus::Ok),
        failed: count(virtperf_store::TrialStatus::Failed),
        skipped: Vec::new(),
        restore_errors: Vec::new(),
    })
}

/// Measures the remedies that need a reboot (`model::BOOT_REMEDIES`), each in a guest
/// booted like `g` with its kernel argument added, both ends inside it; their trials join
/// the battery `b`. A remedy already on `g`'s command line is the baseline itself: skipped,
/// saying so. One that cannot boot is a skipped trial with why, not a failed explain.
fn boot_remedies(
    g: &virtperf_place::guest::GuestOpts,
    opts: &ExplainOpts,
    b: &mut virtperf_explain::Battery,
    json: bool,
) {
    use virtperf_place::guest::Direction;
    let mut measured = Vec::new();
    for (config, arg, _) in model::BOOT_REMEDIES {
        let seq = b.trials.len() as u32;
        let own = g.cmdline.as_deref().unwrap_or_default();
        let site = if own.split_whitespace().any(|w| w == *arg) {
            Err(format!(
                "{arg} is already on --guest-cmdline: the battery's guest has it"
            ))
        } else {
            if !json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                eprintln!("virtperf: booting a guest with {arg} to measure it as a remedy…");
            }
            let mut g2 = g.clone();
            g2.cmdline = Some(format!("{own} {arg}").trim().to_string());
            let p2 = Placement::Guest(Direction::Loopback, Box::new(g2));
            virtperf_place::open(&p2)
                .map_err(|e| format!("a guest with {arg} did not start: {e:#}"))
        };
        if site.is_ok() {
            measured.push(*arg);
        }
        let trials = virtperf_explain::boot_remedy_trials(
            opts,
            site.as_ref().map(|s| s.as_ref()).map_err(Clone::clone),
            config,
            seq,
        );
        drop(site);
        b.trials.extend(trials);
    }
    if !measured.is_empty() {
        b.spec_text.push_str(&format!(
            "# boot-time remedies, each in a guest booted with it: {}\n",
            measured.join(", ")
        ));
    }
}

/// The explanation of a stored explain run.
pub fn explanation(row: &RunRow, trials: &[TrialRow]) -> Result<Explanation> {
    model::explain(row.id, &row.env, trials).map_err(|e| anyhow!(e))
}

fn write_report(
    path: &std::path::Path,
    runs: &[(&crate::experiment::Executed, &Explanation)],
) -> Result<()> {
    let sections: Vec<html::RunSection> = runs
        .iter()
        .map(|(d, e)| html::RunSection {
            run: &d.row,
            points: &d.points,
            comparisons: &[],
            explanation: Some(e),
            notes: Vec::new(),
        })
        .collect();
    let page = html::report(&sections, &[], &virtperf_store::now_rfc3339());
    std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))
}
