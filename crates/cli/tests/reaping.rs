//! Every child virtperf starts is reaped on every way out (issue 53): a `[virtperf]
//! <defunct>` re-parented to PID 1 was seen after stopped runs, because a termination
//! handler ends the process with `exit`, which runs no drop.
//!
//! This test process makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so an
//! orphan of the virtperf it runs becomes *its* child, whatever PID 1 does: a child
//! virtperf left behind is then found here, alive or a zombie, instead of vanishing into a
//! PID 1 that happens to reap. (A separate test binary: the subreaper is process-wide.)

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{vp, wait_output};

fn become_subreaper() {
    // SAFETY: prctl with an integer argument; affects only this process's orphans.
    let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    assert_eq!(
        rc,
        0,
        "PR_SET_CHILD_SUBREAPER: {}",
        std::io::Error::last_os_error()
    );
}

/// (parent PID, state) of `pid`, from /proc/PID/stat.
fn stat(pid: u32) -> Option<(u32, char)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ppid …": comm may hold spaces and parentheses; the last ')' ends it.
    let rest = s.get(s.rfind(')')? + 1..)?;
    let mut f = rest.split_whitespace();
    let state = f.next()?.chars().next()?;
    Some((f.next()?.parse().ok()?, state))
}

/// Every process below `root` now (children, their children, …).
fn descendants(root: u32) -> BTreeSet<u32> {
    let all: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(|p| stat(p).map(|(pp, _)| (p, pp)))
                .collect()
        })
        .unwrap_or_default();
    let mut found = BTreeSet::from([root]);
    loop {
        let before = found.len();
        for (p, pp) in &all {
            if found.contains(pp) {
                found.insert(*p);
            }
        }
        if found.len() == before {
            found.remove(&root);
            return found;
        }
    }
}

/// Watches a running virtperf: every process it starts is recorded as it appears.
struct Watched {
    child: Child,
    seen: BTreeSet<u32>,
}

impl Watched {
    fn spawn(args: &[&str]) -> Watched {
        let child = vp()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn virtperf");
        Watched {
            child,
            seen: BTreeSet::new(),
        }
    }

    fn look(&mut self) {
        let d = descendants(self.child.id());
        self.seen.extend(d);
    }

    /// Records children for `d`.
    fn watch(&mut self, d: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < d {
            self.look();
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn signal(&mut self, sig: i32) {
        self.look();
        // SAFETY: kill(2) on the child this test started, by its PID, not yet waited for.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Waits for virtperf to end and returns its exit code and stderr, then the processes
    /// it started that are still there (alive or zombie, now this test's orphans), after
    /// reaping them so that none outlives the test.
    fn finish(mut self) -> (Option<i32>, String, Vec<String>) {
        self.look();
        let out = wait_output(self.child, Duration::from_secs(60));
        // An agent on --exit-on-eof that outlived us needs a moment to see the EOF.
        std::thread::sleep(Duration::from_millis(500));
        let me = std::process::id();
        let mut left = Vec::new();
        for pid in self.seen {
            if let Some((ppid, state)) = stat(pid) {
                if ppid == me {
                    let cmd = std::fs::read(format!("/proc/{pid}/comm")).unwrap_or_default();
                    left.push(format!(
                        "{pid} {} ({state})",
                        String::from_utf8_lossy(&cmd).trim()
                    ));
                    // SAFETY: kill and waitpid on an orphan re-parented to this process.
                    unsafe {
                        libc::kill(pid as i32, libc::SIGKILL);
                        libc::waitpid(pid as i32, std::ptr::null_mut(), 0);
                    }
                }
            }
        }
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            left,
        )
    }
}

/// A local rr (private agent as a child) stopped at each phase of its life: while it
/// starts (signals before the agent, while it starts, right after), mid-measurement by one
/// signal (the interval is cut and the run ends normally) and by two (the command ends at
/// once). Each way, the agent is reaped before virtperf exits.
#[test]
fn a_stopped_local_run_leaves_no_child_behind() {
    become_subreaper();
    let args = ["rr", "-l", "20s", "-i", "200ms", "--json-stream"];
    // Around 20 ms the agent is being spawned: a SIGTERM between its spawn and its
    // registration once left it an orphaned zombie (CI); spawn and registration are now
    // one step under the reaper's lock.
    for delay_ms in [0u64, 20, 60, 150, 400] {
        let mut w = Watched::spawn(&args);
        w.watch(Duration::from_millis(delay_ms));
        w.signal(libc::SIGTERM);
        let (code, err, left) = w.finish();
        assert!(
            left.is_empty(),
            "SIGTERM after {delay_ms} ms left {left:?}; {err}"
        );
        assert!(
            code == Some(143) || code.is_none(),
            "SIGTERM after {delay_ms} ms: exit {code:?}: {err}"
        );
    }
    for second in [None, Some(libc::SIGINT)] {
        let mut w = Watched::spawn(&args);
        // Mid-measurement: its second interval is out.
        let mut lines = BufReader::new(w.child.stdout.take().expect("stdout")).lines();
        for _ in 0..2 {
            assert!(
                matches!(lines.next(), Some(Ok(_))),
                "the stream ended early"
            );
        }
        assert!(!descendants(w.child.id()).is_empty(), "no agent seen");
        w.signal(libc::SIGTERM);
        if let Some(s) = second {
            w.signal(s);
        }
        std::thread::spawn(move || lines.for_each(drop));
        let (code, err, left) = w.finish();
        assert!(left.is_empty(), "{second:?}: left {left:?}; {err}");
        assert!(
            matches!(code, Some(130) | Some(143)),
            "{second:?}: exit {code:?}: {err}"
        );
        // Two signals pending at once reach the handler in signal-number order: SIGINT's
        // message may be the one printed.
        assert!(err.contains("SIGTERM") || err.contains("SIGINT"), "{err}");
    }
}

/// The guest placement's QEMU (and its netns agent) reaped when a signal ends the run:
/// the handler removes the guest, then reaps before `exit`.
#[test]
fn a_stopped_guest_run_leaves_no_qemu_behind() {
    if let Some((need, why)) = common::guest_placement_missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    become_subreaper();
    let mut w = Watched::spawn(&["rr", "-l", "60s", "--placement", "guest", "--json"]);
    // Until QEMU runs, then two seconds into the boot or the test.
    let t0 = Instant::now();
    while !w.seen.iter().any(|p| {
        std::fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.starts_with("qemu"))
    }) {
        assert!(t0.elapsed() < Duration::from_secs(120), "no QEMU appeared");
        assert!(
            w.child.try_wait().expect("try_wait").is_none(),
            "virtperf ended early"
        );
        w.watch(Duration::from_millis(50));
    }
    w.watch(Duration::from_secs(2));
    w.signal(libc::SIGINT);
    let (code, err, left) = w.finish();
    assert_eq!(code, Some(130), "{err}");
    assert!(left.is_empty(), "left {left:?}; {err}");
}
