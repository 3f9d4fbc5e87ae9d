//! The child processes this process started and must reap on every way out.
//!
//! A child that outlives its parent is re-parented to PID 1, and where PID 1 does not reap
//! (a container whose first process is a shell, some sandboxes) it stays a `<defunct>`
//! zombie for as long as the machine runs. Owners reap their children when dropped, but a
//! termination handler ends the process with `exit`, which runs no drop: it calls
//! [`reap_all`] first. A virtperf killed with SIGKILL reaps nothing; its children die with
//! it (parent-death signal, or EOF on the agent's stdin) and are PID 1's to reap.
//!
//! Every child is stopped and reaped under one lock, so an owner's drop and a handler's
//! [`reap_all`] never both signal one PID (the second could hit a PID the kernel reused).

use std::process::{Child, Command, ExitStatus};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, WaitOptions};

/// PIDs of the children started and not yet reaped, with what each is.
static LIVE: Mutex<Vec<(u32, &'static str)>> = Mutex::new(Vec::new());

fn live() -> MutexGuard<'static, Vec<(u32, &'static str)>> {
    // A panic while holding the list leaves it as it was: still the truth.
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A child process registered for reaping: use it as the [`Child`] it holds; dropping it
/// kills and reaps the child unless it was waited for already.
pub struct Tracked {
    child: Child,
    what: &'static str,
}

impl Tracked {
    /// Starts `cmd` and registers the child (`what` names it in [`reap_all`]'s account) in
    /// one step, under the lock [`reap_all`]
    /// holds: a termination handler that runs meanwhile (on its own thread) waits for the
    /// child to be registered, then reaps it. Spawning first and registering after left a
    /// window in which a SIGTERM's handler reaped everything else and exited, and the
    /// child, never registered, became an orphaned zombie.
    pub fn spawn(cmd: &mut Command, what: &'static str) -> std::io::Result<Tracked> {
        let mut list = live();
        let child = cmd.spawn()?;
        list.push((child.id(), what));
        Ok(Tracked { child, what })
    }

    /// Waits for the child to exit (and unregisters it).
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        let r = self.child.wait();
        forget(self.child.id());
        r
    }

    /// Whether the child exited (then reaped and unregistered).
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        let r = self.child.try_wait();
        if matches!(r, Ok(Some(_))) {
            forget(self.child.id());
        }
        r
    }

    /// Kills and reaps the child, unless a termination handler did so already.
    pub fn stop(&mut self) {
        let mut list = live();
        let pid = self.child.id();
        if let Some(i) = list.iter().position(|(p, _)| *p == pid) {
            // kill() on a child std has reaped signals nothing (it keeps the status).
            let _ = self.child.kill();
            let _ = self.child.wait();
            list.remove(i);
        }
    }
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (pid {})", self.what, self.child.id())
    }
}

impl std::ops::Deref for Tracked {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for Tracked {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.stop();
    }
}

fn forget(pid: u32) {
    live().retain(|(p, _)| *p != pid);
}

/// The children started and not reaped yet: (PID, what).
pub fn running() -> Vec<(u32, &'static str)> {
    live().clone()
}

/// Asks every registered child to stop (SIGTERM: QEMU, passt, tcpdump and an agent each
/// end cleanly on it), gives them `grace` to exit, kills the rest, and reaps them all.
/// The lock stays held, so no owner reaps one of them meanwhile; children registered later
/// wait for it. Returns what was reaped. For termination handlers, before `exit`.
pub fn reap_all(grace: Duration) -> Vec<String> {
    let mut list = live();
    let pids: Vec<(Pid, &'static str)> = list
        .iter()
        .filter_map(|(p, w)| Pid::from_raw(*p as i32).map(|pid| (pid, *w)))
        .collect();
    for (pid, _) in &pids {
        // Ours and unreaped (a zombie at worst): the PID cannot have been reused.
        let _ = rustix::process::kill_process(*pid, Signal::TERM);
    }
    let t0 = Instant::now();
    let mut left: Vec<(Pid, &'static str)> = pids;
    let mut reaped = Vec::new();
    loop {
        left.retain(|(pid, what)| match reap(*pid, WaitOptions::NOHANG) {
            true => {
                reaped.push(format!("{what} pid {}", pid.as_raw_nonzero()));
                false
            }
            false => true,
        });
        if left.is_empty() || t0.elapsed() >= grace {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for (pid, what) in left {
        let _ = rustix::process::kill_process(pid, Signal::KILL);
        reap(pid, WaitOptions::empty());
        reaped.push(format!("{what} pid {} (killed)", pid.as_raw_nonzero()));
    }
    list.clear();
    reaped
}

/// Whether `pid` is reaped now (exited, or not our child any more).
fn reap(pid: Pid, opts: WaitOptions) -> bool {
    match rustix::process::waitpid(Some(pid), opts) {
        Ok(Some(_)) => true,
        Ok(None) => false,
        // ECHILD: reaped already. EINTR: try again in the next round.
        Err(e) => e != rustix::io::Errno::INTR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// `reap_all` reaps every registered child: tests that register children take turns.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn reap_all_stops_children_that_ignore_sigterm_and_reaps_them() {
        let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let polite = Tracked::spawn(Command::new("sleep").arg("30"), "sleep").unwrap();
        let mut stubborn = Tracked::spawn(
            Command::new("sh")
                .args(["-c", "trap '' TERM; echo ready; sleep 30 & wait"])
                .stdout(std::process::Stdio::piped()),
            "sh",
        )
        .unwrap();
        // Signalled only once its trap is set.
        let mut ready = String::new();
        let out = stubborn.stdout.take().unwrap();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut ready).unwrap();
        assert_eq!(ready.trim(), "ready");
        let pids = [polite.id(), stubborn.id()];
        let reaped = reap_all(Duration::from_millis(300));
        assert_eq!(reaped.len(), 2, "{reaped:?}");
        assert!(reaped.iter().any(|r| r.ends_with("(killed)")), "{reaped:?}");
        for pid in pids {
            // Reaped: no /proc entry at all, not even a zombie.
            assert!(
                !std::path::Path::new(&format!("/proc/{pid}")).exists(),
                "pid {pid} left behind"
            );
        }
        assert!(running().iter().all(|(p, _)| !pids.contains(p)));
        // The owners' drops after the handler signal nothing.
        drop(polite);
        drop(stubborn);
    }

    #[test]
    fn an_owner_that_waited_unregisters_and_a_drop_reaps() {
        let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        let mut done = Tracked::spawn(&mut Command::new("true"), "true").unwrap();
        assert!(done.wait().unwrap().success());
        assert!(!running().iter().any(|(p, _)| *p == done.id()));
        let live = Tracked::spawn(Command::new("sleep").arg("30"), "sleep").unwrap();
        let pid = live.id();
        drop(live);
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "pid {pid} left"
        );
    }
}
