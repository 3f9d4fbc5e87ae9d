//! `virtperf explain --workload stream`: what bounds a TCP stream on this machine's
//! loopback (or an agent's, `--host`, with the host's view of its VM, `--vm`), each side's
//! CPU per MB, the model's residual and the measured remedies. Runs the battery in
//! `virtperf_explain`, stores it, and prints
//! `virtperf_report::explain_stream`'s answer, which `show` recomputes from the store.

use anyhow::{Context, Result};
use virtperf_explain::StreamOpts;
use virtperf_report::explain_stream as model;

use crate::args::ExplainKind as Kind;
use crate::explain::ExplainArgs;
use crate::signals::{code, exit};

/// The battery's options from the command line; what the stream explanation does not do
/// (yet) is refused before anything runs.
fn options(a: &ExplainArgs) -> Result<StreamOpts> {
    use virtperf_place::Placement;
    // A stream between namespaces crosses a veth (or a bridge, NAT) of this kernel, on
    // this machine's CPUs: explained as loopback's is, its device's path included.
    let here = matches!(&a.placement, Some(Placement::Guest(d, _)) if matches!(d.name(), "host-guest" | "guest-host"))
        || matches!(&a.placement, Some(Placement::Netns(..) | Placement::Local));
    let not_yet = [
        (
            a.placement.is_some() && !here,
            "--placement (other than netns:…, guest, guest:host-guest, guest:guest-host)",
        ),
        (a.native.is_some(), "--native"),
        (a.no_boot_remedies, "--no-boot-remedies"),
    ];
    if let Some((_, flag)) = not_yet.iter().find(|(given, _)| *given) {
        return Err(exit(
            code::USAGE,
            format!(
                "explain --workload stream runs on this machine's loopback, into a guest, or at an agent (--host) only (yet): drop {flag}"
            ),
        ));
    }
    if a.vm.is_some() {
        crate::explain_host::check_vm(true, crate::explain::elsewhere(a)?.as_ref())?;
    }
    let (Some(c0), Some(c1)) = a.cpus else {
        return Err(exit(code::USAGE, "--cpus needs two CPUs, e.g. --cpus 0,1"));
    };
    let mut o = StreamOpts::new(a.quick);
    if let Some((send, other)) = a.size {
        if send != other {
            return Err(exit(
                code::USAGE,
                "--workload stream takes one size, the send size (-r 16K), not REQ,RESP",
            ));
        }
        o.send_size = send;
    }
    o.flows = a.stream.flows.unwrap_or(1);
    o.reverse = a.stream.reverse;
    o.window = a.stream.window;
    if a.stream.link_rate.is_some() && !matches!(a.placement, Some(Placement::Netns(..))) {
        return Err(exit(
            code::USAGE,
            "--link-rate shapes a namespace's link: add --placement netns:veth (or bridge, nat)",
        ));
    }
    o.placement = a
        .placement
        .clone()
        .filter(|p| *p != Placement::Local)
        .map(|mut p| {
            if let Placement::Netns(_, shaping) = &mut p {
                shaping.rate.clone_from(&a.stream.link_rate);
            }
            if let Placement::Guest(_, g) = &mut p {
                **g = a.guest.opts(a.json);
                // `-T 0,1` names a CPU of each end: the guest needs a second vCPU for it.
                g.vcpus = g.vcpus.max(2);
            }
            p
        });
    o.cpus = (c0, c1);
    o.allow_concurrent = a.lock.allow_concurrent;
    o.tags = a.tags.resolve()?;
    if let Some(n) = a.tries {
        o.tries = n;
    }
    if let Some(d) = a.duration {
        o.duration = d;
    }
    Ok(o)
}

/// A signal must not leave a guest, its namespace or run directory behind.
fn guard(opts: &StreamOpts) -> Result<()> {
    if opts.placement.as_ref().is_some_and(|p| p.needs_root()) {
        crate::signals::remove_own_on_termination("")?;
    }
    Ok(())
}

/// Runs the battery into the store and explains it.
fn run(
    opts: &StreamOpts,
    db: &crate::experiment::DbArg,
    json: bool,
    lock: &crate::machine::LockArgs,
) -> Result<(crate::experiment::Executed, model::StreamExplanation)> {
    let d = crate::experiment::execute_with(db, json, lock, |store, stop, obs| {
        virtperf_explain::run_stream(opts, store, stop, obs)
    })?;
    explained(d)
}

/// The explanation of a stored stream battery; a run without one exits INCOMPLETE.
fn explained(
    d: crate::experiment::Executed,
) -> Result<(crate::experiment::Executed, model::StreamExplanation)> {
    let e = model::explain(d.row.id, &d.trials).map_err(|why| {
        exit(
            code::INCOMPLETE,
            format!("run {}: the stream could not be explained: {why}", d.row.id),
        )
    })?;
    Ok((d, e))
}

/// Runs the battery at the agent `--host` names (on its machine's loopback, in one piece),
/// this host sampling the VM `--vm` names meanwhile, and explains it.
fn run_at(
    a: &ExplainArgs,
    opts: &StreamOpts,
) -> Result<(crate::experiment::Executed, model::StreamExplanation)> {
    let Some(p) = crate::explain::elsewhere(a)? else {
        anyhow::bail!("no agent to run the stream battery at: give --host");
    };
    let mut opts = opts.clone();
    opts.tries = opts
        .tries
        .min(virtperf_explain::ExplainOpts::MAX_REMOTE_TRIES);
    let d = crate::experiment::execute_with(&a.db, a.json, &a.lock, |store, _stop, _obs| {
        // Progress, like the bar of this machine's battery: on a terminal only.
        if !a.json && std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!(
                "virtperf: running the stream battery at {p} (at most {} s; its progress is not shown)",
                opts.bound().as_secs()
            );
        }
        let site = virtperf_place::open(&p)?;
        let host = crate::explain_host::Recorder::start(a.vm.as_ref())?;
        let mut b = virtperf_explain::stream_at_site(site.as_ref(), &opts)?;
        drop(site);
        host.attach(&mut b.trials);
        crate::explain::keep(store, &b, model::RUN_NAME, &p, &opts.tags)
    })?;
    explained(d)
}

fn stored(d: &crate::experiment::Executed) -> String {
    format!(
        "stored as run {} in {} ({}); see `virtperf show {}`",
        d.row.id,
        d.store.path().display(),
        d.row.effective_status(),
        d.row.id
    )
}

/// `virtperf explain --workload stream`
pub fn explain(a: &ExplainArgs) -> Result<()> {
    let opts = options(a)?;
    guard(&opts)?;
    let (d, e) = match a.host {
        Some(_) => run_at(a, &opts)?,
        None => run(&opts, &a.db, a.json, &a.lock)?,
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&e)?);
    } else {
        print!("{}", model::text(&e));
        println!("\n{}", stored(&d));
    }
    if let Some(path) = &a.output {
        let page = virtperf_report::html::stream_page(&e, &virtperf_store::now_rfc3339());
        std::fs::write(path, page).with_context(|| format!("cannot write {}", path.display()))?;
        if !a.json {
            println!("wrote {}", path.display());
        }
    }
    crate::decision::run_exit(&d.row, d.ok, d.interrupted)
}

/// `vm compare --explain --workloads stream`: the stream battery natively and with
/// `guest` (a guest placement), both stored, then the two explanations term by term.
pub fn compare(
    native: StreamOpts,
    guest: StreamOpts,
    db: &crate::experiment::DbArg,
    json: bool,
    lock: &crate::machine::LockArgs,
) -> Result<()> {
    guard(&guest)?;
    let (nd, ne) = run(&native, db, json, lock)?;
    let (gd, ge) = run(&guest, db, json, lock)?;
    let guest_name = guest
        .placement
        .as_ref()
        .map_or("guest".to_string(), |p| p.to_string());
    let sbs = model::side_by_side(&ne, &ge);
    if json {
        let v = serde_json::json!({
            "native": ne,
            "native_placement": "local",
            "elsewhere": ge,
            "placement": guest_name,
            "side_by_side": sbs,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for (name, d, e) in [("this machine", &nd, &ne), (guest_name.as_str(), &gd, &ge)] {
            println!("== {name}");
            print!("{}", model::text(e));
            println!("\n{}\n", stored(d));
        }
        println!("== side by side: the difference is what {guest_name} adds");
        print!("{}", model::side_by_side_text(&sbs, "native", "guest"));
    }
    for d in [&nd, &gd] {
        crate::decision::run_exit(&d.row, d.ok, d.interrupted)?;
    }
    Ok(())
}

/// `virtperf explain`: the battery, model and verdict are chosen here, once, from the
/// workload. The stream's own options with `--workload rr` are refused, not ignored.
pub fn dispatch(a: ExplainArgs) -> Result<()> {
    match a.workload {
        Kind::Stream => explain(&a),
        Kind::Rr
            if a.stream.flows.is_some()
                || a.stream.reverse
                || a.stream.window.is_some()
                || a.stream.link_rate.is_some() =>
        {
            Err(exit(
                code::USAGE,
                "--flows, --reverse, --window and --link-rate shape a stream: add --workload stream",
            ))
        }
        Kind::Rr => crate::explain::explain(a),
    }
}
