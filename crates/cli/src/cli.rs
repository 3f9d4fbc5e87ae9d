//! The command line: every command and the struct of its arguments (each defined beside
//! the command it runs). Only `main` reads this module.

use clap::{Args, Parser, Subcommand};

use crate::serve::{EnvArgs, ServeArgs};

/// virtperf: how much slower is networking and message passing inside a VM than on the
/// host, and why.
#[derive(Debug, Parser)]
#[command(name = "virtperf", version, about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent (server half of every workload)
    Serve(ServeArgs),
    /// Print the environment fingerprint (kernel, CPU, hypervisor, clock, idle path, sysctls)
    Env(EnvArgs),
    #[command(flatten)]
    Workload(Box<crate::commands::WorkloadCommand>),
    /// Thread wake-up latency: futex/eventfd/pipe/condvar/unix/tcp, same vs cross CPU, block/spin/poll
    Wake(crate::wake::WakeArgs),
    /// Analyze pcap/pcapng captures: per TCP connection duration, bytes, retransmissions, RTT, response latency
    Pcap(crate::pcap::PcapArgs),
    /// Undo what killed runs left behind: restore their knobs, remove their namespaces and guest run directories
    Cleanup(crate::machine::CleanupArgs),
    /// Real /dev/kvm guests: exit round-trip cost, halt/wake-up latency with halt-poll sweeps
    Kvm(crate::kvm::KvmArgs),
    /// Where a cross-CPU round trip's time goes (path, wake-ups, idle exits, residual), or what bounds a TCP stream's rate (--workload stream: each side's CPU per MB, flow control), and what buys it back
    Explain(Box<crate::explain::ExplainArgs>),
    /// The cheapest measured configuration that meets a goal: `tune --goal 'p99<=80us'` searches remedies (halt polling, busy polling, cpu_dma_latency, spinning, pinning) and their CPU cost
    Tune(Box<crate::tune::TuneArgs>),
    /// Run an experiment spec (workloads × sweeps × configs × repetitions) into the results store
    Run(crate::experiment::RunArgs),
    /// List stored runs
    Runs(crate::experiment::RunsArgs),
    /// Show a stored run: every try, mean, CI, latency percentiles, CPU split
    Show(crate::experiment::ShowArgs),
    /// Compare configs within a run, or two runs, with significance verdicts
    Compare(crate::compare_cmd::CompareArgs),
    /// Write a self-contained HTML report (SVG plots) of one or more runs
    Report(crate::experiment::ReportArgs),
    /// Export stored runs as a tidy table (CSV or JSON): one row per trial and metric, sweep parameters as columns
    Export(crate::export::ExportArgs),
    /// Copy finished runs into a team's store (--to postgres://…); pushing twice adds nothing
    Push(crate::push::PushArgs),
    /// QEMU guests virtperf boots: `vm compare` prints native vs guest per workload
    Vm(crate::vm::VmArgs),
    /// Print a shell completion script: `virtperf completions bash > /etc/bash_completion.d/virtperf`
    Completions(CompletionsArgs),
    /// Print the man page (roff): `virtperf man > virtperf.1; man ./virtperf.1`; with --dir,
    /// write it and one page per subcommand (virtperf-rr.1, virtperf-vm-compare.1, …) there
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `virtperf man`
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write virtperf.1 and every subcommand's page into this directory (created if
    /// missing) instead of printing the main page
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Values a hostile or unlucky user types where a number belongs.
    const HOSTILE: &[&str] = &[
        "1e30",
        "1e400",
        "-1",
        "NaN",
        "inf",
        "99999999999999999999999",
        "18446744073709551616",
        "",
    ];

    /// Flags whose value is free text (a host, a path, a token, a name): any string is a
    /// valid value there, and what it names is checked when it is used.
    const FREE_TEXT: &[&str] = &[
        "host",
        "dir",
        "token",
        "url",
        "ssh-key",
        "ssh-opt",
        "kernel",
        // A VM's name (`vm initramfs --name`): QEMU's -name or a libvirt domain, any text
        // without a '/'.
        "name",
        "kernel-modules",
        "guest-binary",
        "guest-cmdline",
        "db",
        "to",
        "capture",
        "shape",
        "baseline",
        "output",
        "out",
        "filter",
        "store",
        "file",
        "spec",
        "run",
        "runs",
        "files",
        "token-file",
        "against",
        "skip",
        "only",
        "campaign",
        "campaigns",
        "group-by",
    ];

    /// Every subcommand path and its value-taking arguments.
    fn walk(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<(Vec<String>, clap::Arg)>) {
        for a in cmd.get_arguments() {
            if a.get_action().takes_values() {
                out.push((path.clone(), a.clone()));
            }
        }
        for sub in cmd.get_subcommands() {
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            walk(sub, p, out);
        }
    }

    /// Whatever the flag, a hostile value is an error of the parser (exit 2, one line),
    /// never a panic and never accepted, unless the flag takes free text.
    #[test]
    fn no_flag_accepts_or_panics_on_hostile_numbers() {
        let mut args = Vec::new();
        walk(&Cli::command(), Vec::new(), &mut args);
        assert!(args.len() > 50, "found only {} arguments", args.len());
        let mut accepted = Vec::new();
        for (path, arg) in &args {
            let name = arg.get_id().as_str().replace('_', "-");
            for v in HOSTILE {
                let mut argv = vec!["virtperf".to_string()];
                argv.extend(path.iter().cloned());
                match arg.get_long() {
                    Some(l) => argv.push(format!("--{l}={v}")),
                    None => argv.push((*v).to_string()),
                }
                let res = std::panic::catch_unwind(|| Cli::try_parse_from(&argv));
                let res = res.unwrap_or_else(|_| panic!("{argv:?} panicked"));
                let ok = match &res {
                    Ok(_) => true,
                    // Missing other required arguments means this value passed its parser.
                    Err(e) => matches!(
                        e.kind(),
                        clap::error::ErrorKind::MissingRequiredArgument
                            | clap::error::ErrorKind::ArgumentConflict
                            | clap::error::ErrorKind::MissingSubcommand
                            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    ),
                };
                if ok && !FREE_TEXT.contains(&name.as_str()) && !v.is_empty() {
                    accepted.push(format!("{} --{name}={v}", path.join(" ")));
                }
            }
        }
        assert!(accepted.is_empty(), "accepted: {accepted:#?}");
    }
}
