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

/// How long a cut test's workers may make no progress (none of them runs) before it gives
/// up on them, and how long it then waits for the agent's report. A live agent reports
/// within a second of the stop (0.61 s for 15,000 flows, bench/RESULTS.md), and a transfer
/// still moving (a
/// large download over a slow link) goes on as long as it moves: what is given up on is a
/// peer that answers nothing at all.
pub const CUT_GRACE: Duration = Duration::from_secs(5);

/// The warning of a result whose measured interval the signal ended before its planned end
/// (or, untimed, before its work was done): its numbers cover the part that ran. Set where
/// the interval is measured, so a trial the signal reached only after its interval (while
/// stopping), or one that another machine drove to its end (a guest), does not carry it.
pub const CUT_SHORT: &str =
    "interrupted by a signal: this trial was stopped early and its numbers cover the part that ran";

/// Whether the signal flag `cut` is raised.
pub(crate) fn is_cut(cut: Option<&Arc<AtomicBool>>) -> bool {
    cut.is_some_and(|c| c.load(Ordering::SeqCst))
}

/// Joins the test's workers. Once the test is cut, gives up on them when none has run for
/// [`CUT_GRACE`] (`running_cpu`: their CPU time so far, which stands still while each is
/// blocked on a peer that stopped answering, None where unreadable, which counts as no
/// progress; `peer` names that peer): they are left blocked
/// and end with the process. `grace` is [`CUT_GRACE`] but in tests.
pub(crate) fn join_within(
    handles: crate::half::Handles,
    cut: Option<&Arc<AtomicBool>>,
    running_cpu: impl Fn() -> Option<f64>,
    peer: &str,
    grace: Duration,
) -> Result<Joined> {
    let mut last: Option<(Option<f64>, Instant)> = None;
    while !handles.iter().all(|h| h.is_finished()) {
        if is_cut(cut) {
            let cpu = running_cpu();
            match last {
                Some((was, since)) if was == cpu && since.elapsed() >= grace => {
                    let stuck = handles.iter().filter(|h| !h.is_finished()).count();
                    bail!(
                        "{stuck} of {} data connection(s) made no progress for {} after the signal: {peer} stopped answering (a stopped process or paused guest?), so nothing was kept",
                        handles.len(),
                        humantime::format_duration(grace)
                    );
                }
                Some((was, _)) if was == cpu => {}
                _ => last = Some((cpu, Instant::now())),
            }
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

    /// Cut, a worker blocked on a silent peer is given up on after the grace; one that
    /// keeps running (a transfer still moving) is waited for, and its result kept.
    const GRACE: Duration = Duration::from_millis(300);

    #[test]
    fn a_cut_gives_up_on_workers_that_make_no_progress() {
        let cut = Arc::new(AtomicBool::new(true));
        let ctl = crate::side::Ctl::new(None);
        let blocked = crate::side::spawn_worker("blocked", &ctl, |_, _| {
            std::thread::sleep(Duration::from_secs(5));
            Ok(virtperf_load::Counts::default())
        })
        .expect("spawn");
        ctl.gate.open();
        let t0 = Instant::now();
        let Err(e) = join_within(
            vec![blocked],
            Some(&cut),
            || Some(1.0),
            "the test peer",
            GRACE,
        ) else {
            panic!("a worker that made no progress was waited for");
        };
        let took = t0.elapsed();
        assert!(took >= GRACE && took < GRACE * 4, "{took:?}");
        assert!(
            e.to_string().contains("the test peer stopped answering"),
            "{e}"
        );

        let moving = crate::side::spawn_worker("moving", &ctl, |_, _| {
            std::thread::sleep(GRACE * 2);
            Ok(virtperf_load::Counts::default())
        })
        .expect("spawn");
        let t0 = Instant::now();
        // Its CPU time grows on every look: progress.
        let clock = std::sync::atomic::AtomicU64::new(0);
        let progress = || Some(clock.fetch_add(1, Ordering::SeqCst) as f64);
        assert!(join_within(vec![moving], Some(&cut), progress, "p", GRACE).is_ok());
        assert!(t0.elapsed() > GRACE * 2, "{:?}", t0.elapsed());
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
