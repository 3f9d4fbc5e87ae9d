//! Thread wake-up latency: two threads pass a token back and forth through a chosen
//! mechanism and wait for it with a chosen strategy.
//!
//! This is the user-space face of seed 4: a blocked thread is woken by its peer, and when the
//! peer's CPU had gone idle (halted, in a VM: exited to the hypervisor) the wake-up pays for
//! an inter-processor interrupt and a schedule; spinning avoids that at the price of a busy
//! CPU, and poll-then-block (the user-space analogue of halt polling) spins for a bounded
//! window before sleeping. The report shows both sides of that trade: latency and CPU time
//! per message.

mod chan;
mod strategy;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rustix::thread::{sched_setaffinity, CpuSet};
use serde::Serialize;
use virtperf_measure::cpu::{thread_cpu, thread_cpu_since};
use virtperf_measure::{new_histogram, summarize};
use virtperf_wire::LatencySummary;

pub use chan::Mech;
pub use strategy::Strategy;

/// Where the two threads run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Placement {
    /// Both pinned to one CPU.
    Same(u32),
    /// Pinned to two CPUs.
    Cross(u32, u32),
    /// Left to the scheduler.
    Unpinned,
}

/// One benchmark's parameters.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct WakeOpts {
    /// Mechanism.
    pub mech: Mech,
    /// Wait strategy.
    pub strategy: Strategy,
    /// Placement.
    pub placement: Placement,
    /// How long to run.
    #[serde(serialize_with = "secs")]
    pub duration: Duration,
    /// Idle time between round trips (the initiator sleeps): the responder's wait then
    /// includes this gap, so a poll window shorter than the gap falls through to blocking
    /// and a longer one burns CPU, as halt polling does with idle gaps between packets.
    #[serde(serialize_with = "secs")]
    pub gap: Duration,
}

fn secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct WakeReport {
    /// Parameters.
    pub opts: WakeOpts,
    /// Round trips completed.
    pub round_trips: u64,
    /// Round trips per second.
    pub round_trips_per_s: f64,
    /// Time from the sender's clock read before signalling to the receiver's clock read after
    /// waking, both directions.
    pub one_way: LatencySummary,
    /// Round-trip time as seen by the initiating thread.
    pub round_trip: LatencySummary,
    /// CPU time of both threads per one-way message, µs.
    pub cpu_us_per_message: f64,
    /// CPU time of both threads over wall time, percent of one CPU (max 200).
    pub cpu_busy_pct: f64,
    /// Times the two threads went to sleep (voluntary context switches) per one-way message:
    /// about 1 when every message wakes its receiver, 0 when they spin.
    pub sleeps_per_message: f64,
}

/// Runs one wake-up benchmark.
pub fn run(opts: &WakeOpts) -> Result<WakeReport, String> {
    run_until(opts, &AtomicBool::new(false))
}

/// [`run`], ending early once `cut` is raised (a signal asked the command to stop): the
/// report then covers the round trips made until then, over the time they took.
pub fn run_until(opts: &WakeOpts, cut: &AtomicBool) -> Result<WakeReport, String> {
    if matches!(opts.mech, Mech::Condvar) && opts.strategy == Strategy::Spin {
        return Err(
            "spinning on a condition variable is spinning on its flag: use --mech futex for spin"
                .into(),
        );
    }
    let (a_cpu, b_cpu) = match opts.placement {
        Placement::Same(c) => (Some(c), Some(c)),
        Placement::Cross(a, b) => (Some(a), Some(b)),
        Placement::Unpinned => (None, None),
    };
    let (end_a, end_b) = chan::pair(opts.mech)?;
    let sh = Arc::new(Shared {
        stop: AtomicBool::new(false),
        base: Instant::now(),
        stamp_ab: AtomicU64::new(0),
        stamp_ba: AtomicU64::new(0),
        barrier: Barrier::new(2),
        responder_failed: AtomicBool::new(false),
    });
    let (stop, base, stamp_ab, stamp_ba) = (&sh.stop, sh.base, &sh.stamp_ab, &sh.stamp_ba);
    let strategy = opts.strategy;
    let responder = {
        let sh = sh.clone();
        std::thread::Builder::new()
            .name("wake-b".into())
            .spawn(move || respond(end_b, b_cpu, strategy, &sh))
            .map_err(|e| format!("cannot start a thread: {e}"))?
    };

    let mut end = end_a;
    let result = (|| -> Result<_, String> {
        let pinned = pin(a_cpu);
        sh.barrier.wait();
        pinned?;
        if sh.responder_failed.load(Ordering::SeqCst) {
            return Err("the responder could not start".into());
        }
        let mut one_way = new_histogram();
        let mut rtt = new_histogram();
        let t0 = thread_cpu()?;
        let start = Instant::now();
        let mut n = 0u64;
        while start.elapsed() < opts.duration && !cut.load(Ordering::Relaxed) {
            if !opts.gap.is_zero() {
                std::thread::sleep(opts.gap);
            }
            let t_send = base.elapsed().as_nanos() as u64;
            stamp_ab.store(t_send, Ordering::Release);
            end.signal()?;
            if !end.wait(strategy, stop)? {
                return Err("the responder went away".into());
            }
            let now = base.elapsed().as_nanos() as u64;
            one_way.saturating_record(now.saturating_sub(stamp_ba.load(Ordering::Acquire)));
            rtt.saturating_record(now.saturating_sub(t_send));
            n += 1;
        }
        Ok((one_way, rtt, thread_cpu_since(t0)?, start.elapsed(), n))
    })();
    // Let the responder out of whatever wait it is in, whatever happened above.
    stop.store(true, Ordering::SeqCst);
    let _ = end.close();
    let joined = responder
        .join()
        .map_err(|_| "responder thread panicked".to_string())?;
    // The responder's failure first: where it failed, this side only saw it go away.
    let (hist_b, cpu_b) = joined?;
    let (mut one_way, rtt, cpu_a, wall, n) = result?;
    let _ = one_way.add(&hist_b);
    let cpu = cpu_a.total_s() + cpu_b.total_s();
    let messages = (2 * n).max(1) as f64;
    Ok(WakeReport {
        opts: *opts,
        round_trips: n,
        round_trips_per_s: n as f64 / wall.as_secs_f64(),
        one_way: summarize(&one_way),
        round_trip: summarize(&rtt),
        cpu_us_per_message: cpu * 1e6 / messages,
        cpu_busy_pct: 100.0 * cpu / wall.as_secs_f64(),
        sleeps_per_message: (cpu_a.voluntary_switches + cpu_b.voluntary_switches) as f64 / messages,
    })
}

/// What the two threads of a run share: the stop flag, the clock both stamp from, each
/// direction's send time (it travels beside the token, so the receiver computes a one-way
/// latency from the same monotonic clock), and their rendezvous.
struct Shared {
    stop: AtomicBool,
    base: Instant,
    stamp_ab: AtomicU64,
    stamp_ba: AtomicU64,
    barrier: Barrier,
    /// Raised before the rendezvous by a responder that could not pin itself.
    responder_failed: AtomicBool,
}

/// The responder: answers every token until stopped; its one-way latencies and CPU time.
fn respond(
    mut end: chan::End,
    cpu: Option<u32>,
    strategy: Strategy,
    sh: &Shared,
) -> Result<
    (
        virtperf_measure::latency::LatencyHistogram,
        virtperf_wire::ThreadCpu,
    ),
    String,
> {
    // Both threads reach the barrier whatever pinning did (one that returned before it
    // left the other waiting there for ever, deaf to signals), and a failure is raised
    // before it, so the sender never starts on it.
    let pinned = pin(cpu);
    if pinned.is_err() {
        sh.responder_failed.store(true, Ordering::SeqCst);
    }
    sh.barrier.wait();
    pinned?;
    let mut hist = new_histogram();
    let t0 = thread_cpu()?;
    loop {
        // The shutdown token (sent after `stop`) is not a message.
        if !end.wait(strategy, &sh.stop)? || sh.stop.load(Ordering::SeqCst) {
            break;
        }
        let now = sh.base.elapsed().as_nanos() as u64;
        hist.saturating_record(now.saturating_sub(sh.stamp_ab.load(Ordering::Acquire)));
        sh.stamp_ba
            .store(sh.base.elapsed().as_nanos() as u64, Ordering::Release);
        end.signal()?;
    }
    Ok((hist, thread_cpu_since(t0)?))
}

fn pin(cpu: Option<u32>) -> Result<(), String> {
    let Some(cpu) = cpu else { return Ok(()) };
    // CpuSet::set panics past the set's size: refuse such a CPU first.
    if cpu as usize >= CpuSet::MAX_CPU {
        return Err(format!("CPU {cpu} does not exist"));
    }
    let mut set = CpuSet::new();
    set.set(cpu as usize);
    // No pid: this thread.
    sched_setaffinity(None, &set)
        .map_err(|e| format!("cannot pin to CPU {cpu}: {}", std::io::Error::from(e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every mechanism, for the tests that try each.
    const MECHS: [Mech; 6] = [
        Mech::Futex,
        Mech::Eventfd,
        Mech::Pipe,
        Mech::Condvar,
        Mech::Unix,
        Mech::Tcp,
    ];

    #[test]
    fn every_mechanism_and_strategy_passes_tokens() {
        for mech in MECHS {
            for strategy in [
                Strategy::Block,
                Strategy::Spin,
                Strategy::Poll(Duration::from_micros(20)),
            ] {
                if mech == Mech::Condvar && strategy == Strategy::Spin {
                    assert!(run(&WakeOpts {
                        mech,
                        strategy,
                        placement: Placement::Unpinned,
                        duration: Duration::from_millis(50),
                        gap: Duration::ZERO
                    })
                    .is_err());
                    continue;
                }
                let r = run(&WakeOpts {
                    mech,
                    strategy,
                    placement: Placement::Unpinned,
                    duration: Duration::from_millis(60),
                    gap: Duration::ZERO,
                })
                .unwrap_or_else(|e| panic!("{mech:?} {strategy:?}: {e}"));
                // Correctness, not speed: two spinners on a busy 2-CPU machine may only get a
                // few time slices.
                assert!(r.round_trips > 0, "{mech:?} {strategy:?}: no round trip");
                assert_eq!(r.one_way.count, 2 * r.round_trips, "{mech:?} {strategy:?}");
                assert_eq!(r.round_trip.count, r.round_trips);
                assert!(r.one_way.p50_us <= r.round_trip.p50_us + 1.0);
                assert!(r.cpu_us_per_message > 0.0);
            }
        }
    }

    /// A CPU either thread cannot be pinned to ends the run with the pinning error, on
    /// either side and for every mechanism: before, the side that failed returned before
    /// the threads' rendezvous and the other waited there for ever (`wake --cpus 0,9`
    /// hung, deaf to SIGTERM). Run on a thread with a deadline, so a regression fails
    /// instead of hanging the suite.
    #[test]
    fn a_cpu_that_cannot_be_pinned_is_an_error_not_a_hang() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for mech in MECHS {
                for placement in [Placement::Cross(0, 4095), Placement::Cross(4095, 0)] {
                    let r = run(&WakeOpts {
                        mech,
                        strategy: Strategy::Block,
                        placement,
                        duration: Duration::from_millis(50),
                        gap: Duration::ZERO,
                    });
                    let _ = tx.send((mech, placement, r.map(|r| r.round_trips)));
                }
            }
        });
        for _ in 0..2 * MECHS.len() {
            let (mech, placement, r) = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("a run with an unpinnable CPU hung");
            let e = r.expect_err("no CPU 4095 to pin to");
            assert!(e.contains("CPU 4095"), "{mech:?} {placement:?}: {e}");
        }
    }

    /// With idle gaps between messages, a poll window longer than the gap keeps the
    /// responder busy through the gap while blocking lets it sleep: CPU per message must be
    /// larger with the long window. (CPU time, not latency, so machine noise cannot flip it.)
    #[test]
    fn a_long_poll_window_costs_cpu_during_idle_gaps() {
        let run_with = |strategy| {
            run(&WakeOpts {
                mech: Mech::Futex,
                strategy,
                placement: Placement::Unpinned,
                duration: Duration::from_millis(150),
                gap: Duration::from_micros(200),
            })
            .unwrap()
        };
        let block = run_with(Strategy::Block);
        let poll = run_with(Strategy::Poll(Duration::from_millis(2)));
        assert!(
            poll.cpu_us_per_message > block.cpu_us_per_message + 20.0,
            "poll {} µs/msg vs block {} µs/msg",
            poll.cpu_us_per_message,
            block.cpu_us_per_message
        );
    }

    #[test]
    fn spinning_threads_never_sleep_and_blocking_ones_do() {
        // Sleeps, not CPU time: on a machine shared with other work a spinner is preempted
        // (its busy % drops), but it still never goes to sleep by itself.
        let run_with = |strategy| {
            run(&WakeOpts {
                mech: Mech::Futex,
                strategy,
                placement: Placement::Unpinned,
                duration: Duration::from_millis(100),
                gap: Duration::ZERO,
            })
            .unwrap()
        };
        let spin = run_with(Strategy::Spin);
        assert!(spin.round_trips > 0);
        assert!(
            spin.sleeps_per_message < 0.01,
            "{}",
            spin.sleeps_per_message
        );
        let block = run_with(Strategy::Block);
        assert!(
            block.sleeps_per_message > 0.5,
            "{}",
            block.sleeps_per_message
        );
    }
}
