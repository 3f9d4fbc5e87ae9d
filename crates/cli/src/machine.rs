//! One measurement at a time per machine, from the command line's side: the flags, and
//! taking [`virtperf_machine::lock::MachineLock`] with a message while waiting.

use anyhow::Result;
use clap::Args;
use virtperf_machine::lock::{self, LockError, MachineLock, Mode};

/// Exit code when `--no-wait` finds the machine busy (sysexits' EX_TEMPFAIL: try later).
pub const BUSY: u8 = 75;

/// How a measuring command shares the machine.
#[derive(Debug, Args, Clone, Default)]
pub struct LockArgs {
    /// If another measurement holds this machine, exit at once (code 75) naming it, instead
    /// of waiting for it to finish
    #[arg(long)]
    pub no_wait: bool,
    /// Measure even while another measurement runs on this machine (results record it);
    /// also $VIRTPERF_ALLOW_CONCURRENT=1
    #[arg(long, conflicts_with = "no_wait", env = "VIRTPERF_ALLOW_CONCURRENT",
          value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_concurrent: bool,
}

/// Set when this process measures without the lock, so its results say so.
static CONCURRENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// True when this process took no lock because of `--allow-concurrent`.
pub fn concurrent() -> bool {
    CONCURRENT.load(std::sync::atomic::Ordering::Relaxed)
}

/// `VIRTPERF_ALLOW_CONCURRENT` is set to something other than a false value (`0`, `false`,
/// `no`, `off`, empty), as clap's FalseyValueParser reads it for `--allow-concurrent`.
pub fn allow_concurrent_env() -> bool {
    std::env::var("VIRTPERF_ALLOW_CONCURRENT").is_ok_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "n" | "off" | "f"
        )
    })
}

impl LockArgs {
    fn mode(&self) -> Mode {
        if self.allow_concurrent {
            Mode::Skip
        } else if self.no_wait {
            Mode::NoWait
        } else {
            Mode::Wait
        }
    }
}

/// Takes the machine lock for this command (waiting, with one line saying for whom, unless
/// `--no-wait` or `--allow-concurrent`), and hands it to every process this one starts (its
/// private agent, the client half in a namespace) so they do not wait for their parent.
pub fn take(a: &LockArgs) -> Result<MachineLock> {
    // Others read the lock (waiters, an agent's Waiting): never a password or a token.
    let command = virtperf_machine::command_line();
    let lock = MachineLock::acquire(a.mode(), &command, &mut |msg| {
        eprintln!("virtperf: {msg}");
    })
    .map_err(|e| match e {
        LockError::Busy(_) => crate::signals::exit(BUSY, e.to_string()),
        LockError::Io(_) => anyhow::Error::new(e),
    })?;
    if a.allow_concurrent {
        CONCURRENT.store(true, std::sync::atomic::Ordering::Relaxed);
        // The private agent this command starts must not wait for the lock either.
        std::env::set_var("VIRTPERF_ALLOW_CONCURRENT", "1");
    }
    if lock.held() {
        // Set before any thread that reads the environment starts, and inherited by every
        // child: it tells them (and a local agent, through the hello) that the lock is held
        // for this measurement.
        std::env::set_var(lock::INHERIT_ENV, lock.nonce());
    }
    Ok(lock)
}

/// `virtperf cleanup`'s flags.
#[derive(Debug, Args)]
pub struct CleanupArgs {
    /// Print what was done as JSON: {"done": [...], "failed": [...]}, one line each
    #[arg(long)]
    pub json: bool,
}

/// `virtperf cleanup`: restores dead runs' knobs, removes their namespaces and guest run
/// directories; fails (after trying everything) when an item could not be cleaned up.
pub fn cleanup(a: CleanupArgs) -> Result<()> {
    let rep = virtperf_place::cleanup::cleanup();
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"done": rep.done, "failed": rep.failed})
            )?
        );
    } else {
        if rep.done.is_empty() && rep.failed.is_empty() {
            println!("nothing to clean up");
        }
        for d in &rep.done {
            println!("{d}");
        }
        for f in &rep.failed {
            eprintln!("virtperf: cleanup: {f}");
        }
    }
    if !rep.failed.is_empty() {
        anyhow::bail!(
            "{} item(s) could not be cleaned up ({})",
            rep.failed.len(),
            if a.json {
                "in the JSON's failed list"
            } else {
                "listed above"
            }
        );
    }
    Ok(())
}
