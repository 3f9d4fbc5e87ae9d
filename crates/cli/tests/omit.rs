//! `--omit` (iperf3's `-O`): the engines run a warm-up first and every figure covers only
//! the measured interval after it, on real loopback sockets with a real agent process.
//! Each check here fails if the warm-up leaked into a count, a histogram, a CPU window or
//! the two sides' byte check.

use crate::common;

use common::{assert_one_line_error, f, run_fail, run_json, u, vp};

fn warnings(v: &serde_json::Value) -> Vec<String> {
    v["warnings"]
        .as_array()
        .map(|w| {
            w.iter()
                .filter_map(|x| x.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// rr after a 1 s warm-up: 1 s measured, the histogram and the intervals hold only the
/// measured transactions, and the agent served exactly those plus the warm-up's.
#[test]
fn rr_counts_only_what_follows_the_warm_up() {
    let v = run_json(&["rr", "-l", "1s", "--omit", "1s", "-i", "250ms"]);
    assert_eq!(f(&v, "/omit_s"), 1.0);
    let n = u(&v, "/outcome/transactions");
    let warm = u(&v, "/outcome/warmup_transactions");
    assert!(n > 100 && warm > 100, "measured {n}, warm-up {warm}");
    common::served_and_in_flight(&v, warm, 1);
    assert_eq!(u(&v, "/outcome/latency/count"), n, "warm-up latencies kept");
    let el = f(&v, "/outcome/elapsed_s");
    assert!((0.95..1.1).contains(&el), "measured {el} s, not 1 s");
    let iv = v["intervals"].as_array().expect("intervals");
    assert!((3..=4).contains(&iv.len()), "{} intervals", iv.len());
    assert!(
        f(&iv[0], "/t_s") < 0.01,
        "the first interval starts the measured one"
    );
    let in_iv: u64 = iv.iter().map(|i| u(i, "/transactions")).sum();
    assert!(in_iv <= n, "intervals hold {in_iv} of {n}");
}

/// The CPU the test's threads used is counted over the measured interval too: with the
/// warm-up in its window and not in its transactions, the service demand would double.
/// So would the threads' sleeps per transaction (each side of a blocking round trip
/// across CPUs sleeps about once per transaction), which after a 1 s warm-up read two.
/// (The machine-wide one counts neighbours' work too: checked alone, in demand.rs.)
/// Pinned, both runs keep one placement throughout (see demand.rs), and the threads are
/// moved to their CPUs before they count: no migrations, and no warning of any.
#[test]
fn service_demand_leaves_the_warm_up_out() {
    let _steady = crate::host_knobs_steady();
    let cpus = match std::thread::available_parallelism() {
        Ok(n) if n.get() >= 2 => "0,1",
        _ => "0,0",
    };
    // A leak moves every pair (×2 with the warm-up's CPU counted, ×0.5 with its
    // transactions counted); a neighbour's burst in `together` moves one run (33.41 with
    // a warm-up vs 57.04 without, once): a second pair is made where the first is out.
    let key = "service_demand_us";
    let mut pairs = Vec::new();
    let (plain, omitted) = loop {
        let plain = run_json(&["rr", "--cpus", cpus, "-l", "1s"]);
        let omitted = run_json(&["rr", "--cpus", cpus, "-l", "1s", "--omit", "1s"]);
        let a = f(&plain, &format!("/cpu/client/{key}"));
        let b = f(&omitted, &format!("/cpu/client/{key}"));
        pairs.push(format!("{b:.2} with a warm-up vs {a:.2} without"));
        if (0.6..1.5).contains(&(b / a)) {
            break (plain, omitted);
        }
        assert!(pairs.len() < 2, "{key}: {pairs:?}");
    };
    for side in ["client", "server"] {
        let sleeps = |v: &serde_json::Value| {
            f(
                v,
                &format!("/events/{side}/per_unit/thread_voluntary_switches"),
            )
        };
        let (a, b) = (sleeps(&plain), sleeps(&omitted));
        assert!(
            (0.6..1.5).contains(&(b / a)),
            "{side}: {b:.2} sleeps per transaction with a warm-up vs {a:.2} without"
        );
        for v in [&plain, &omitted] {
            if let Some(m) = v["events"][side]["deltas"]["thread_migrations"].as_u64() {
                assert_eq!(m, 0, "{side}: pinned threads moved");
            }
            assert!(
                !warnings(v).iter().any(|w| w.contains("between CPUs")),
                "{:?}",
                warnings(v)
            );
        }
    }
}

/// Streams both ways: the sender and the receiver end their warm-ups at different
/// moments (the agent on the client's `Measure`), so only their whole-run counts must
/// agree, and they do (no "a connection ended early" warning).
#[test]
fn stream_both_ways_holds_the_whole_run_to_itself() {
    for dir in [&[][..], &["--reverse"][..]] {
        let mut args = vec!["stream", "-l", "1s", "--omit", "500ms"];
        args.extend_from_slice(dir);
        let v = run_json(&args);
        let w = warnings(&v);
        assert!(
            !w.iter().any(|x| x.contains("sender sent")),
            "{dir:?}: {w:?}"
        );
        let el = f(&v, "/outcome/elapsed_s");
        assert!((0.95..1.1).contains(&el), "{dir:?}: measured {el} s");
        let rx = u(&v, "/outcome/receiver_bytes") as f64;
        let tx = u(&v, "/outcome/sender_bytes") as f64;
        // Both measured over about the same second: within a tenth of each other.
        assert!((rx / tx - 1.0).abs() < 0.1, "{dir:?}: rx {rx} tx {tx}");
    }
}

/// Engines that count a window themselves (flows multiplexed on threads) start it after
/// the warm-up: the agent served about twice what the client counted in rr, and the
/// stream's senders (counting the whole run) sent about twice what the receivers counted.
#[test]
fn multiplexed_flows_count_from_the_end_of_the_warm_up() {
    let v = run_json(&[
        "rr",
        "-P",
        "4",
        "--threads",
        "2",
        "-l",
        "1s",
        "--omit",
        "1s",
    ]);
    let (n, served) = (
        u(&v, "/outcome/transactions"),
        u(&v, "/outcome/server_transactions"),
    );
    assert!(n > 100, "{n}");
    assert!(
        served as f64 > 1.4 * n as f64,
        "served {served}, counted {n}: the warm-up was counted"
    );
    let s = run_json(&[
        "stream",
        "-P",
        "2",
        "--threads",
        "1",
        "-l",
        "1s",
        "--omit",
        "1s",
    ]);
    let (rx, tx) = (
        u(&s, "/outcome/receiver_bytes"),
        u(&s, "/outcome/sender_bytes"),
    );
    assert!(
        tx as f64 > 1.4 * rx as f64,
        "sent {tx}, received {rx}: the receivers counted the warm-up"
    );
    assert!((0.95..1.1).contains(&f(&s, "/outcome/elapsed_s")));
}

/// The header says what was measured after what.
#[test]
fn the_header_says_measured_after() {
    let out = vp()
        .args(["rr", "-l", "500ms", "--omit", "500ms"])
        .output()
        .expect("spawn");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0.5 s measured after 0.5 s"), "{text}");
}

/// A byte-count workload has no time to leave out; a warm-up over an hour, negative or
/// not a number is refused in one line before anything runs.
#[test]
fn a_warm_up_that_cannot_be_is_refused() {
    let (code, err) = run_fail(&["bulk", "--bytes", "1M", "--omit", "1s"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "--omit applies to timed workloads");
    for bad in ["2h", "-1", "1e30", "soon"] {
        let (code, err) = run_fail(&["rr", "-l", "1s", "--omit", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        assert!(err.contains("--omit"), "{bad}: {err}");
    }
}
