//! `--timeline` (issue 28, sampling mode) measured: the sampled trial's stages against
//! its own median, alone and beside a neighbour that sends more often than the round trip
//! on the same CPU. In `alone`: these assert latencies, and the neighbour loads CPU 0. (Beside
//! `flows`' many-flow streams the timeline was once "not taken": the busiest sender of each
//! CPU was taken for the rr's engine; now the pair that answers each other is.) The
//! refusals and the counting mode stay in `trace.rs`.

use crate::common;

/// Root and two CPUs, which sampling tracepoints on a client and a server CPU needs; a
/// printed skip otherwise.
fn can_sample() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() == 0 };
    if !root || std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        virtperf_testkit::skip("root", "sampling tracepoints needs root and two CPUs");
        return false;
    }
    true
}

/// `--timeline`: the sampled trial's stages add up to the order of its own measured p50
/// (within 20% on a quiet machine: bench/timeline.sh), every transaction is accounted as
/// analyzed or skipped, and the text output draws the stage table.
#[test]
fn the_timeline_stages_add_up_to_the_measured_median() {
    let _alone = crate::alone();
    if !can_sample() {
        return;
    }
    let v = common::run_json(&["rr", "--cpus", "0,1", "-l", "300ms", "--timeline"]);
    let t = &v["timeline"];
    assert!(t.is_object(), "no timeline: {}", v["warnings"]);
    assert!(t["transactions"].as_u64().unwrap() > 100, "{t}");
    let stages = t["stages"].as_array().unwrap();
    assert_eq!(stages.len(), 10);
    // A stage that never occurred is null, not 0, and adds nothing.
    for st in stages {
        assert_eq!(
            st["p50_us"].is_null(),
            st["seen"].as_f64() == Some(0.0),
            "{st}"
        );
    }
    let sum: f64 = stages.iter().filter_map(|s| s["p50_us"].as_f64()).sum();
    let rr = t["rr_p50_us"].as_f64().unwrap();
    assert!((sum - t["sum_p50_us"].as_f64().unwrap()).abs() < 1e-6);
    // A sum of medians matches the median of sums only where the stages are steady: on a
    // loaded machine one trial can miss the 20% of issue 28 without any defect, so that
    // figure is a benchmark (bench/timeline.sh, recorded in bench/RESULTS.md), not a check
    // that would turn itself off here. What holds on any machine: both medians are of the
    // same sampled transactions, so they are of one order (a stage table that lost a stage
    // or counted one twice would be off by far more than a factor of two).
    assert!(
        rr > 0.0 && sum > 0.5 * rr && sum < 2.0 * rr,
        "stages {sum:.1} µs vs rr p50 {rr:.1} µs"
    );
    assert!(t["headline_p50_us"].as_f64().is_some());
    assert!(!t["example"].as_array().unwrap().is_empty());
}

/// A neighbour on the client's CPU that enters `sendto` far more often than the round trip
/// (UDP datagrams to a socket of its own on loopback, until `stop` or 30 s): the sampled
/// trial's client is not the CPU's busiest sender. Returns its sends per second.
fn sendto_neighbour_on_cpu0(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<f64> {
    std::thread::spawn(move || {
        // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread only.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
        }
        let sink = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind the sink");
        let to = sink.local_addr().expect("its address");
        let src = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind the source");
        let t0 = std::time::Instant::now();
        let mut n = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst)
            && t0.elapsed() < std::time::Duration::from_secs(30)
        {
            // A full sink drops the datagram; the send itself is what is sampled.
            let _ = src.send_to(b"x", to);
            n += 1;
        }
        n as f64 / t0.elapsed().as_secs_f64()
    })
}

/// Raises its flag when dropped, on every way out of a test.
struct StopOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Beside a neighbour that sends more often than the round trip on the client's CPU, the
/// timeline is still the round trip's: its client and server are the two threads whose
/// sends answer each other, not the busiest sender of each CPU (which built a timeline of
/// a few dozen "transactions" out of the neighbour's sends and the server's).
#[test]
fn a_busier_sender_on_the_cpu_does_not_become_the_timelines_client() {
    let _alone = crate::alone();
    if !can_sample() {
        return;
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let neighbour = sendto_neighbour_on_cpu0(stop.clone());
    // A failed run (a panic below) still stops the neighbour at once: the next test in
    // `alone` must not find CPU 0 loaded for the rest of its 30 s.
    let _stops = StopOnDrop(stop.clone());
    std::thread::sleep(std::time::Duration::from_millis(200));
    let v = common::run_json(&["rr", "--cpus", "0,1", "-l", "300ms", "--timeline"]);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let sends_per_s = neighbour.join().expect("the neighbour");
    let rate = v["outcome"]["rate_per_s"].as_f64().expect("rr rate");
    assert!(
        sends_per_s > 2.0 * rate,
        "the neighbour sent {sends_per_s:.0}/s, the rr {rate:.0}/s: not the busier sender"
    );
    let t = &v["timeline"];
    assert!(t.is_object(), "no timeline: {}", v["warnings"]);
    // Transactions back to back for the trial: their count times their median spans a
    // good part of it (the median is below the mean of a tailed distribution, and beside
    // the neighbour on CPU 0 some cycles are skipped: 0.22 and 0.25 in two CI runs). A few
    // dozen cycles pieced together from the neighbour's sends span almost none (under
    // 0.01), so a tenth tells the two apart.
    let n = t["transactions"].as_f64().expect("transactions");
    let p50 = t["rr_p50_us"].as_f64().expect("the trial's median");
    let covered = n * p50 * 1e-6 / t["trial_s"].as_f64().expect("trial_s");
    assert!(
        covered > 0.1,
        "{n} transactions of {p50} µs cover {covered:.2} of the trial: {t}"
    );
    let sum = t["sum_p50_us"].as_f64().expect("sum");
    assert!(
        sum > 0.5 * p50 && sum < 2.0 * p50,
        "stages {sum:.1} µs vs rr p50 {p50:.1} µs"
    );
}
