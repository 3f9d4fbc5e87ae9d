//! `virtperf`: how much slower is networking and message passing inside a virtual machine
//! than on the host, and why.
//!
//! This crate is the command line only: argument parsing, progress, and rendering. The work
//! happens in `virtperf-lab` (orchestration), `virtperf-load` (engines), `virtperf-measure`
//! (samplers) and `virtperf-wire` (protocol and types).

mod args;
mod cli;
mod commands;
mod compare_cmd;
mod decision;
mod experiment;
mod explain;
mod explain_host;
mod explain_stream;
mod export;
mod fleet;
mod headline;
mod keep;
mod kvm;
mod libvirt_xml;
mod machine;
mod out_file;
mod pcap;
mod progress;
mod push;
mod recipes;
mod render;
mod render_events;
mod serve;
mod signals;
mod tune;
mod tune_answer;
mod tune_render;
mod tune_search;
mod under_load;
mod vm;
mod vm_own;
mod wake;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser};

use cli::{Cli, Command};

fn main() -> ExitCode {
    // Every agent this process runs (serve, a guest's init, a private agent) can run
    // explain's battery for a client elsewhere.
    virtperf_explain::register_probe();
    // Inside a guest virtperf booted, this binary is the initramfs's /init.
    if virtperf_place::guest::init::is_guest_init() {
        virtperf_place::guest::init::run();
    }
    // Before any child is started: a signal never leaves one behind unreaped.
    if let Err(e) = signals::install() {
        eprintln!("virtperf: error: {e:#}");
        return ExitCode::FAILURE;
    }
    // Behave like other command-line tools when stdout is closed early (`virtperf … | head`):
    // die quietly from SIGPIPE instead of panicking in println!. Sockets are unaffected: every
    // socket write uses MSG_NOSIGNAL.
    // SAFETY: setting a signal disposition to the default has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e),
    };
    quiet_stdout_panics();
    // `println!` panics when standard output cannot be written (`> /dev/full`, a closed
    // file): unwinding runs every guard (knobs restored, guests removed) and ends here as
    // one line and exit 1 instead of a panic message and exit 101.
    let outcome = match std::panic::catch_unwind(|| run(cli)) {
        Ok(r) => r,
        Err(payload) => match stdout_failure(payload.as_ref()) {
            Some(why) => {
                eprintln!("virtperf: error: cannot write to standard output: {why}");
                return ExitCode::FAILURE;
            }
            None => std::panic::resume_unwind(payload),
        },
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let sig = signals::received();
            if sig != 0 {
                // The failure may be the signal's doing (the handler killed our QEMU):
                // let the handler finish its cleanup, and end as a stopped command does.
                signals::wait_for_handlers(std::time::Duration::from_secs(60));
                if e.downcast_ref::<signals::Exit>().is_none() {
                    eprintln!("virtperf: stopped by {}: {e:#}", signals::name(sig));
                    return ExitCode::from(signals::code_for(sig));
                }
            }
            // `{:#}` joins the context chain on one line: "what failed: why".
            eprintln!("virtperf: error: {e:#}");
            match e.downcast_ref::<signals::Exit>() {
                Some(x) => ExitCode::from(x.code),
                None => ExitCode::FAILURE,
            }
        }
    }
}

/// The reason in a panic that `print!`/`println!` raised because standard output failed.
fn stdout_failure(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    let msg = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())?;
    msg.strip_prefix("failed printing to stdout: ")
        .map(str::to_string)
}

/// Keeps the default panic message for real bugs, but not for a failed write to standard
/// output, which `main` reports in one line.
fn quiet_stdout_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if stdout_failure(info.payload()).is_none() {
            default(info);
        }
    }));
}

/// Help and version go out as clap renders them; a usage error becomes one line (what is
/// wrong, with clap's own wording), then clap's tips if it has any, and exit code 2, like
/// every other error of ours.
fn usage_error(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            return ExitCode::from(2);
        }
        _ => {}
    }
    // clap's message is its first paragraph (a list of missing arguments continues on the
    // following lines); fold it into one line.
    let text = e.render().to_string();
    let para: Vec<&str> = text
        .lines()
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .collect();
    let msg = para.join(" ");
    let msg = msg.strip_prefix("error: ").unwrap_or(&msg);
    // A count clap parses as an integer fails with Rust's own words for the parse
    // ("invalid digit found in string" for 1e30 or 2.5): say what the option takes.
    let msg = msg
        .replace(": invalid digit found in string", ": not a whole number")
        .replace(
            ": number too large to fit in target type",
            ": too large a number",
        );
    eprintln!("virtperf: error: {msg} (see --help)");
    // clap's tips ("a similar argument exists: '--duration'") are the fix for a typo: keep
    // each as a line of its own after the error.
    for tip in text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("tip: "))
    {
        eprintln!("{tip}");
    }
    ExitCode::from(2)
}

/// Writes generated text to stdout. Generated into a buffer first: clap_complete panics when
/// its writer fails, and `virtperf completions bash | head` closes the pipe early.
fn write_stdout(buf: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(buf).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(anyhow::anyhow!("cannot write to standard output: {e}"))
        }
        _ => Ok(()),
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(a) => serve::serve(a),
        Command::Env(a) => serve::env(a),
        Command::Workload(w) => w.run(),
        Command::Wake(a) => wake::wake(a),
        Command::Kvm(a) => kvm::kvm(a),
        Command::Pcap(a) => pcap::pcap(a),
        Command::Cleanup(a) => machine::cleanup(a),
        Command::Completions(a) => {
            let mut buf = Vec::new();
            clap_complete::generate(a.shell, &mut Cli::command(), "virtperf", &mut buf);
            write_stdout(&buf)
        }
        Command::Man(a) => match a.dir {
            Some(dir) => {
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                // The main page refers to `virtperf-rr(1)` and the like: these are they.
                clap_mangen::generate_to(Cli::command(), &dir).with_context(|| {
                    format!("cannot write the man pages into {}", dir.display())
                })?;
                println!("wrote the man pages into {}", dir.display());
                Ok(())
            }
            None => {
                let mut buf = Vec::new();
                clap_mangen::Man::new(Cli::command()).render(&mut buf)?;
                write_stdout(&buf)
            }
        },
        Command::Explain(a) => explain_stream::dispatch(*a),
        Command::Tune(a) => tune::tune(*a),
        Command::Run(a) => experiment::run(a),
        Command::Runs(a) => experiment::runs(a),
        Command::Show(a) => experiment::show(a),
        Command::Compare(a) if !a.campaigns.is_empty() => fleet::compare(a),
        Command::Compare(a) => compare_cmd::compare(a),
        Command::Report(a) if a.campaign.is_some() || !a.filters.is_empty() => fleet::report(&a),
        Command::Report(a) => experiment::report(a),
        Command::Export(a) => export::export(a),
        Command::Push(a) => push::push(a),
        Command::Vm(a) => vm::vm(a),
    }
}
