//! Termination signals and exit codes.
//!
//! SIGINT (Ctrl-C), SIGTERM (systemd, `timeout`, CI runners, `kill`) and SIGHUP (a closed
//! terminal or SSH session) all mean "stop, but clean up first": each command that changes
//! the machine (knobs, namespaces, guests) installs one handler for all three, so none of
//! them can leave a change behind that another would have undone.

use std::fmt;
use std::sync::atomic::{AtomicI32, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// The signals that ask a command to stop.
pub const TERMINATION: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

/// Exit codes (the README's table): 0 success; 1 an error, or a run that stored no result;
/// 2 bad arguments or spec; 3 `compare --fail-on-regression` found a regression; 4 a run
/// stored but incomplete (some trials failed or a config's teardown failed); 128 + N stopped
/// by signal N after cleaning up (130 INT, 143 TERM, 129 HUP).
pub mod code {
    /// Bad command-line arguments or spec.
    pub const USAGE: u8 = 2;
    /// `compare --fail-on-regression`: a verdict says the candidate regressed.
    pub const REGRESSION: u8 = 3;
    /// The run was stored but some of it failed.
    pub const INCOMPLETE: u8 = 4;
}

/// An error that carries the process exit code it should produce.
#[derive(Debug)]
pub struct Exit {
    /// Exit status.
    pub code: u8,
    /// One line for stderr.
    pub message: String,
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// Builds an [`Exit`] as an `anyhow::Error`.
pub fn exit(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code,
        message: message.into(),
    })
}

/// Ends the process as one stopped by `sig` does (exit 128 + N), after stopping and
/// reaping every child it started: `exit` runs no drop, and a child left running would
/// outlive us, then stay a zombie wherever PID 1 does not reap.
pub fn exit_now(sig: i32) -> ! {
    virtperf_machine::children::reap_all(std::time::Duration::from_secs(2));
    std::process::exit(i32::from(code_for(sig)));
}

/// On SIGINT, SIGTERM or SIGHUP: removes the namespaces, guests and run directories this
/// process made, says so (`also`: what else the stop means, e.g. "; the battery there was
/// not stored"), and ends the process as stopped by that signal. For every command that
/// boots a guest or builds namespaces.
pub fn remove_own_on_termination(also: &'static str) -> anyhow::Result<()> {
    on_termination(move |sig| {
        let removed = virtperf_place::guest::cleanup_own();
        eprintln!(
            "\nvirtperf: {}: removed {} namespace(s)/guest(s)/run dir(s) this run created{also}",
            name(sig),
            removed.len()
        );
        exit_now(sig);
    })
}

/// The signal received, or 0.
static RECEIVED: AtomicI32 = AtomicI32::new(0);
/// Handlers running now (a cleanup that ends with `exit` never finishes).
static RUNNING: AtomicI32 = AtomicI32::new(0);

/// Waits (at most `limit`) for running signal handlers to finish. A command whose main
/// thread fails *because* of the signal (its QEMU was just killed by the handler) must not
/// exit before the handler has removed what it is removing: the handler exits itself.
pub fn wait_for_handlers(limit: std::time::Duration) {
    let t0 = std::time::Instant::now();
    while RUNNING.load(Ordering::SeqCst) > 0 && t0.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// The first termination signal received so far (0 if none).
pub fn received() -> i32 {
    RECEIVED.load(Ordering::SeqCst)
}

/// Exit code for having been stopped by `sig`, as shells report it.
pub fn code_for(sig: i32) -> u8 {
    (128 + sig).clamp(0, 255) as u8
}

/// Human name of a termination signal.
pub fn name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// A flag raised by the first SIGINT, SIGTERM or SIGHUP (which it says on stderr): a
/// measurement then ends its interval early and keeps what ran. A second signal ends the
/// command at once, as the default action would.
pub fn cut_on_termination() -> anyhow::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = cut.clone();
    on_termination(move |sig| {
        if flag.swap(true, Ordering::SeqCst) {
            exit_now(sig);
        }
        eprintln!(
            "\nvirtperf: {}: stopping the test; what ran is kept (again to quit at once)",
            name(sig)
        );
    })?;
    Ok(cut)
}

/// What each termination signal calls: every command's handlers, in order of registration.
type Handler = Box<dyn Fn(i32) + Send>;
static HANDLERS: std::sync::Mutex<Vec<Handler>> = std::sync::Mutex::new(Vec::new());

/// Takes SIGINT, SIGTERM and SIGHUP from their default action (dying on the spot, which
/// leaves every child this process started to PID 1) for the whole process, first thing in
/// `main`: a signal runs the handlers commands registered with [`on_termination`], or, with
/// none, ends the process at once as the default would, but after reaping its children.
pub fn install() -> anyhow::Result<()> {
    let mut signals = Signals::new(TERMINATION)
        .map_err(|e| anyhow::anyhow!("cannot install signal handlers: {e}"))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                RUNNING.fetch_add(1, Ordering::SeqCst);
                let _ = RECEIVED.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
                let handlers = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
                if handlers.is_empty() {
                    exit_now(sig);
                }
                for h in handlers.iter() {
                    h(sig);
                }
                drop(handlers);
                RUNNING.fetch_sub(1, Ordering::SeqCst);
            }
        })
        .map_err(|e| anyhow::anyhow!("cannot start the signal thread: {e}"))?;
    Ok(())
}

/// Calls `handler` on the signal thread for every SIGINT, SIGTERM and SIGHUP (instead of
/// ending the process at once). The first signal is recorded for [`received`].
pub fn on_termination(handler: impl Fn(i32) + Send + 'static) -> anyhow::Result<()> {
    HANDLERS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(Box::new(handler));
    Ok(())
}
