//! UDP for real: `rr --protocol udp` and `stream --protocol udp` over loopback with the
//! JSON checked, the datagram size limit, and real loss (a namespace whose nftables drop
//! every tenth UDP datagram) counted while the run still completes.

use crate::common;

use common::{assert_one_line_error, f, run_fail, run_json, u};

/// UDP rr: transactions with latency percentiles, and its loss accounting present and sane.
#[test]
fn udp_rr_on_loopback_reports_latency_and_losses() {
    let v = run_json(&["rr", "--protocol", "udp", "-l", "1s", "--cpus", "0,0"]);
    typed(&v);
    assert_eq!(v["workload"]["protocol"], "udp");
    // The side framework's figures apply as for TCP: CPU split and events per transaction.
    assert!(f(&v, "/cpu/client/service_demand_us") > 0.0);
    assert!(f(&v, "/cpu/server/service_demand_us") > 0.0);
    assert!(
        v["events"]["client"]["pinned"]["per_unit"].is_object(),
        "{}",
        v["events"]
    );
    assert!(v["events"]["server"]["per_unit"]["thread_voluntary_switches"].is_number());
    let n = u(&v, "/outcome/transactions");
    assert!(n > 100, "{n} transactions");
    let lost = u(&v, "/outcome/udp/lost");
    let pct = f(&v, "/outcome/udp/lost_pct");
    assert!((0.0..=100.0).contains(&pct), "{pct}");
    assert!(
        (pct - 100.0 * lost as f64 / (n + lost) as f64).abs() < 1e-9,
        "lost_pct {pct} for {lost} lost of {n} + {lost}"
    );
    assert!(u(&v, "/outcome/udp/late") <= lost);
    assert!(f(&v, "/outcome/udp/timeout_ms") > 0.0);
    let p50 = f(&v, "/outcome/latency/p50_us");
    assert!(p50 > 0.0 && p50 <= f(&v, "/outcome/latency/p99_us"));
}

/// A paced UDP stream: receiver-counted throughput near the asked rate, and iperf3's loss,
/// out-of-order and jitter figures present and sane.
#[test]
fn udp_stream_on_loopback_reports_loss_jitter_and_order() {
    let v = run_json(&[
        "stream",
        "--protocol",
        "udp",
        "--rate",
        "100mbit",
        "-l",
        "1s",
    ]);
    typed(&v);
    assert_eq!(v["workload"]["send_size"], 1472, "UDP's default datagram");
    assert_eq!(v["workload"]["rate_bps"], 100_000_000);
    // The sender keeps the pace (it catches up after a stall); the receiver's count is that
    // less what a busy machine drops, so only its upper bound is tight.
    let sent_mbps = u(&v, "/outcome/sender_bytes") as f64 * 8.0 / 1e6 / f(&v, "/duration_s");
    assert!(
        (90.0..=105.0).contains(&sent_mbps),
        "sent {sent_mbps} Mbit/s at 100mbit"
    );
    let mbps = f(&v, "/outcome/mbps");
    assert!((50.0..=105.0).contains(&mbps), "{mbps} Mbit/s at 100mbit");
    let sent = u(&v, "/outcome/udp/datagrams_sent");
    let got = u(&v, "/outcome/udp/datagrams_received");
    let lost = u(&v, "/outcome/udp/lost");
    assert!(got > 1000 && got <= sent, "{got} of {sent}");
    assert!(
        got + lost <= sent,
        "{got} received + {lost} lost > {sent} sent"
    );
    // One flow on loopback arrives in order.
    assert_eq!(u(&v, "/outcome/udp/out_of_order"), 0);
    let j = f(&v, "/outcome/udp/jitter_ms");
    assert!((0.0..100.0).contains(&j), "jitter {j} ms");
    assert_eq!(v["outcome"]["udp"]["gso"], false);
    assert!(v["outcome"]["flows"][0]["udp"].is_object());
}

/// The largest datagram runs; one byte more fails before any traffic, in one line, exit 2.
#[test]
fn sizes_beyond_one_datagram_fail_before_any_traffic() {
    let v = run_json(&["rr", "--protocol", "udp", "-r", "65507", "-l", "0.3"]);
    assert!(u(&v, "/outcome/transactions") > 0);
    for args in [
        &["rr", "--protocol", "udp", "-r", "1,65508", "-l", "1"][..],
        &["stream", "--protocol", "udp", "-m", "64K", "-l", "1"][..],
    ] {
        let (code, err) = run_fail(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert_one_line_error(&err, "at most 65507 bytes");
        assert!(!err.contains("agent"), "traffic was attempted: {err}");
    }
    let (code, err) = run_fail(&[
        "rr",
        "--protocol",
        "udp",
        "-l",
        "1",
        "--capture",
        "/tmp/vp-never.pcap",
    ]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "--capture records TCP tests");
    let (code, err) = run_fail(&["stream", "--protocol", "udp", "--recv-wait", "block"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "TCP-only");
    let (code, err) = run_fail(&["rr", "--loss-timeout", "10ms", "-l", "1"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "applies to --protocol udp");
    // GSO is UDP's (a TCP stream takes --rate: the kernel paces it, workloads.rs).
    let (code, err) = run_fail(&["stream", "--gso", "-l", "1"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "--protocol udp");
}

/// The JSON deserializes into the documented result type (docs/json.md).
fn typed(v: &serde_json::Value) -> virtperf_wire::TestResult {
    serde_json::from_value(v.clone()).expect("JSON matches virtperf_wire::TestResult")
}

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A network namespace of this test's own, removed on drop.
struct Ns(String);

impl Ns {
    fn ip(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new("ip")
            .args(["netns", "exec", &self.0])
            .args(args)
            .output()
            .expect("run ip netns exec")
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .status();
    }
}

/// Real loss: inside a namespace of its own, nftables drops every tenth UDP datagram on
/// loopback (netem is missing on this project's machines; a kernel drop is as real). The
/// runs complete, and the losses are counted: rr restarts each lost transaction, the
/// stream's sequence numbers show the gaps.
#[test]
fn lost_datagrams_are_counted_and_the_run_completes() {
    if !root() {
        virtperf_testkit::skip(
            "root",
            "dropping datagrams in a network namespace needs root",
        );
        return;
    }
    let name = format!("vp-udptest-{}", std::process::id());
    let made = std::process::Command::new("ip")
        .args(["netns", "add", &name])
        .status();
    if !made.is_ok_and(|s| s.success()) {
        virtperf_testkit::skip("netns", "cannot create a network namespace");
        return;
    }
    let ns = Ns(name);
    assert!(ns.ip(&["ip", "link", "set", "lo", "up"]).status.success());
    match ns.ip(&["nft", "add", "table", "inet", "vploss"]) {
        o if o.status.success() => {}
        o => {
            // No nftables in this kernel (or no nft): a missing capability, not a failure.
            virtperf_testkit::skip(
                "nft",
                &format!(
                    "nftables is not available here: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            );
            return;
        }
    }
    for rule in [
        "add chain inet vploss in { type filter hook input priority 0 ; }",
        "add rule inet vploss in meta l4proto udp numgen inc mod 10 == 0 drop",
    ] {
        let o = ns.ip(&["nft", rule]);
        assert!(
            o.status.success(),
            "nft {rule}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let bin = env!("CARGO_BIN_EXE_virtperf");
    let run = |args: &[&str]| -> serde_json::Value {
        // `ip netns exec` runs the binary inside the namespace, with vp()'s environment.
        let mut cmd = std::process::Command::new("ip");
        cmd.args(["netns", "exec", &ns.0, bin])
            .args(args)
            .arg("--json")
            .env_remove("VIRTPERF_TOKEN")
            .env_remove("VIRTPERF_LOCK_NONCE")
            .env("VIRTPERF_ALLOW_CONCURRENT", "1");
        let o = common::run_with_timeout(&mut cmd, std::time::Duration::from_secs(60));
        assert!(
            o.status.success(),
            "{args:?} did not complete under loss: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).expect("JSON result")
    };

    let v = run(&[
        "rr",
        "--protocol",
        "udp",
        "-l",
        "1s",
        "--loss-timeout",
        "10ms",
    ]);
    assert_eq!(f(&v, "/outcome/udp/timeout_ms"), 10.0);
    let (n, lost) = (u(&v, "/outcome/transactions"), u(&v, "/outcome/udp/lost"));
    // Every tenth datagram dropped, two per transaction: about one transaction in five.
    assert!(n > 20, "{n} transactions completed");
    assert!(lost > 0, "no loss counted: {}", v["outcome"]);
    let pct = f(&v, "/outcome/udp/lost_pct");
    assert!(
        (8.0..=30.0).contains(&pct),
        "lost {pct}% with one datagram in ten dropped"
    );
    assert!(
        v["warnings"].as_array().is_some_and(|w| w.iter().any(|w| w
            .as_str()
            .unwrap_or("")
            .contains("had no response within 10 ms"))),
        "the loss is not said: {}",
        v["warnings"]
    );

    let v = run(&[
        "stream",
        "--protocol",
        "udp",
        "--rate",
        "50mbit",
        "-l",
        "1s",
    ]);
    let pct = f(&v, "/outcome/udp/lost_pct");
    // One in ten dropped before the receiver, none otherwise (paced far below loopback).
    assert!(
        (9.0..=11.0).contains(&pct),
        "lost {pct}%: {}",
        v["outcome"]["udp"]
    );
    let sent = u(&v, "/outcome/udp/datagrams_sent");
    let got = u(&v, "/outcome/udp/datagrams_received");
    assert!(got < sent, "{got} of {sent}");
}

/// A spec sweeping `protocol` runs both, stores both, and `compare` judges UDP's own
/// metrics (loss, jitter) like any other.
#[test]
fn a_spec_sweeps_the_protocol_and_compare_judges_udp_metrics() {
    let dir = common::TempDir::new("udp-spec");
    let spec = dir.path("u.toml");
    std::fs::write(
        &spec,
        r#"
name = "udp"
duration = "0.3s"
repetitions = 2
[[workload]]
kind = "rr"
protocol = ["tcp", "udp"]
[[workload]]
kind = "stream"
protocol = "udp"
send_size = 1472
rate = "50mbit"
[[config]]
name = "a"
[[config]]
name = "b"
"#,
    )
    .unwrap();
    let db = dir.path("u.db");
    let spec = spec.to_str().unwrap();
    common::run_db_ok(&["run", spec], &db);
    let shown = common::run_db_ok(&["show", "last"], &db);
    assert!(shown.contains("UDP (mean of tries):"), "{shown}");
    assert!(shown.contains("rr protocol=udp · a: lost "), "{shown}");
    assert!(!shown.contains("rr protocol=tcp · a: lost"), "{shown}");
    let cmp: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["compare", "last", "--json"], &db))
            .expect("compare --json");
    let text = cmp.to_string();
    assert!(text.contains("rr protocol=udp"), "{text}");
    assert!(text.contains("rr protocol=tcp"), "{text}");
    for metric in ["lost_pct", "jitter_ms", "out_of_order"] {
        assert!(
            text.contains(&format!("\"{metric}\"")),
            "{metric} not compared: {text}"
        );
    }
}
