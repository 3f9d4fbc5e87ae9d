//! A test cut short by a signal (SIGINT, SIGTERM, SIGHUP) ends within a bounded time, even
//! when the agent has stopped answering (a stopped process, a paused guest, a dead link).
//!
//! Without these bounds a cut waited out every timeout in turn: the data connections' 10 s,
//! then 20 s for the agent's report (29 s after a Ctrl-C, measured), and a client waiting for
//! the agent's machine waited for the other measurement to end before it noticed the signal.

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use crate::side::{join_all, Joined};

/// How long a cut test waits for its workers and the agent's report together before it
/// gives up on them. A live agent reports within milliseconds of the stop (10,000 flows
/// included); what takes longer is an agent that will not report at all.
pub const CUT_GRACE: Duration = Duration::from_secs(5);

/// Whether the signal flag `cut` is raised.
pub(crate) fn is_cut(cut: Option<&Arc<AtomicBool>>) -> bool {
    cut.is_some_and(|c| c.load(Ordering::SeqCst))
}

/// The end of a cut test's grace: set the first time the cut is seen.
#[derive(Debug, Default)]
pub(crate) struct Grace(Option<Instant>);

impl Grace {
    /// Time left before giving up on the agent, if the test is cut (None: not cut, no
    /// bound beyond the usual timeouts).
    pub(crate) fn left(&mut self, cut: Option<&Arc<AtomicBool>>) -> Option<Duration> {
        if !is_cut(cut) {
            return None;
        }
        let end = *self.0.get_or_insert_with(|| Instant::now() + CUT_GRACE);
        Some(end.saturating_duration_since(Instant::now()))
    }
}

/// Joins the test's workers; once the test is cut, waits at most the rest of the grace for
/// them, then gives up (they are left blocked on a peer that stopped answering, and end
/// with the process).
pub(crate) fn join_within(
    handles: crate::half::Handles,
    cut: Option<&Arc<AtomicBool>>,
    grace: &mut Grace,
) -> Result<Joined> {
    while !handles.iter().all(|h| h.is_finished()) {
        if grace.left(cut).is_some_and(|l| l.is_zero()) {
            let stuck = handles.iter().filter(|h| !h.is_finished()).count();
            bail!(
                "{stuck} of {} data connection(s) did not end within {} s of the signal: the agent stopped answering (a stopped process or paused guest?), so nothing was kept",
                handles.len(),
                CUT_GRACE.as_secs()
            );
        }
        // Short naps: the stop's own time is measured (`stop_s`) and must not grow by them.
        std::thread::sleep(Duration::from_millis(2));
    }
    join_all(handles)
}

/// Waits until `s` has something to read, at most `limit`, and fails at once when `cut`
/// is raised meanwhile (`what`: what the wait was for). A wait for the agent's machine can
/// last as long as another measurement; a signal must end it, not the wait's end.
pub(crate) fn readable_unless_cut(
    s: &TcpStream,
    limit: Duration,
    cut: Option<&Arc<AtomicBool>>,
    what: &str,
) -> Result<()> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let t0 = Instant::now();
    loop {
        if is_cut(cut) {
            bail!("the signal came while {what}: nothing was measured");
        }
        let left = limit.saturating_sub(t0.elapsed());
        if left.is_zero() {
            // The read that follows times out and says so in its own words.
            return Ok(());
        }
        let nap = left.min(Duration::from_millis(100));
        let ts = Timespec {
            tv_sec: 0,
            tv_nsec: i64::from(nap.subsec_nanos()),
        };
        let mut fds = [PollFd::new(s, PollFlags::IN)];
        if poll(&mut fds, Some(&ts)).is_ok_and(|n| n > 0) {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grace starts when the cut is first seen and only runs down from there.
    #[test]
    fn the_grace_starts_at_the_cut() {
        let cut = Arc::new(AtomicBool::new(false));
        let mut g = Grace::default();
        assert_eq!(g.left(Some(&cut)), None);
        assert_eq!(g.left(None), None);
        cut.store(true, Ordering::SeqCst);
        let first = g.left(Some(&cut)).expect("cut");
        assert!(first <= CUT_GRACE && first > CUT_GRACE - Duration::from_secs(1));
        std::thread::sleep(Duration::from_millis(20));
        let later = g.left(Some(&cut)).expect("cut");
        assert!(later < first, "{later:?} vs {first:?}");
    }

    /// A wait for a message ends at once on the cut, with what it waited for; without one
    /// it ends when the peer's bytes are there.
    #[test]
    fn a_wait_for_the_agent_ends_on_the_cut() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (mut a, _) = l.accept().expect("accept");
        let cut = Arc::new(AtomicBool::new(false));
        let flag = cut.clone();
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            flag.store(true, Ordering::SeqCst);
        });
        let t0 = Instant::now();
        let e = readable_unless_cut(&c, Duration::from_secs(30), Some(&cut), "waiting for X")
            .expect_err("cut");
        assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
        assert!(e.to_string().contains("waiting for X"), "{e}");
        raiser.join().expect("join");
        std::io::Write::write_all(&mut a, b"x").expect("write");
        readable_unless_cut(&c, Duration::from_secs(5), None, "y").expect("readable");
    }
}
