//! Time series (`--interval`, a spec's `interval`): real tests on loopback, the JSON's
//! `intervals`, the live lines, the store and the report's plot.

use crate::common;

use std::time::Duration;

use common::{assert_one_line_error, run_fail, run_json, run_with_timeout, vp};

fn intervals(r: &serde_json::Value) -> Vec<serde_json::Value> {
    r["intervals"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("no intervals in {r}"))
}

/// iperf3's `-i 1s -l 3s`: three one-second intervals, each with traffic.
#[test]
fn stream_keeps_an_interval_per_second() {
    let r = run_json(&["stream", "-i", "1s", "-l", "3s"]);
    let iv = intervals(&r);
    assert!(iv.len() >= 3, "{iv:?}");
    let mut last_t = -1.0;
    for i in &iv {
        assert!(i["mbps"].as_f64().unwrap() > 0.0, "{i}");
        assert!(i["bytes"].as_u64().unwrap() > 0, "{i}");
        let t = i["t_s"].as_f64().unwrap();
        assert!(t > last_t, "intervals out of order: {iv:?}");
        last_t = t;
    }
    // Full intervals last about a second (the control thread samples at the boundary).
    let d = iv[1]["duration_s"].as_f64().unwrap();
    assert!((0.9..1.5).contains(&d), "{d}");
    // Their bytes are what the client handed to the kernel: at most the sender's total.
    let sum: u64 = iv.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    let sent = r["outcome"]["sender_bytes"].as_u64().unwrap();
    assert!(
        sum <= sent && sum as f64 >= 0.8 * sent as f64,
        "{sum} of {sent}"
    );
}

/// rr at half-second intervals: each has its own rate and latency percentiles, and their
/// transactions add up to (almost all of) the test's.
#[test]
fn rr_intervals_have_rates_and_percentiles() {
    let r = run_json(&["rr", "-i", "500ms", "-l", "2s", "-P", "2"]);
    let iv = intervals(&r);
    assert!(iv.len() >= 3, "{iv:?}");
    for i in &iv {
        assert!(i["rate_per_s"].as_f64().unwrap() > 0.0, "{i}");
        let p50 = i["p50_us"].as_f64().unwrap();
        let p99 = i["p99_us"].as_f64().unwrap();
        assert!(p50 > 0.0 && p99 >= p50, "{i}");
        assert!(i.get("mbps").is_none(), "{i}");
    }
    let sum: u64 = iv.iter().map(|i| i["transactions"].as_u64().unwrap()).sum();
    let total = r["outcome"]["transactions"].as_u64().unwrap();
    assert!(
        sum <= total && sum as f64 >= 0.9 * total as f64,
        "{sum} of {total}"
    );
    // The whole test's histogram still holds every transaction.
    assert_eq!(r["outcome"]["latency"]["count"].as_u64().unwrap(), total);
}

/// crr and a reverse stream and bulk (the client receives) keep intervals too.
#[test]
fn crr_reverse_stream_and_bulk_keep_intervals() {
    let r = run_json(&["crr", "-i", "200ms", "-l", "1s"]);
    let iv = intervals(&r);
    assert!(iv.len() >= 4, "{iv:?}");
    assert!(iv.iter().all(|i| i["transactions"].as_u64().unwrap() > 0));

    let r = run_json(&["stream", "-R", "-i", "250ms", "-l", "1s", "-P", "2"]);
    let iv = intervals(&r);
    assert!(iv.len() >= 3, "{iv:?}");
    assert_eq!(iv[0]["flow_mbps"].as_array().unwrap().len(), 2, "{iv:?}");

    let r = run_json(&["bulk", "-n", "256MiB", "-R", "-i", "100ms"]);
    let iv = intervals(&r);
    assert!(!iv.is_empty(), "{r}");
    let sum: u64 = iv.iter().map(|i| i["bytes"].as_u64().unwrap()).sum();
    assert!(sum <= 256 << 20, "{sum}");
}

/// Without --json each interval is printed on stderr as it ends, iperf3-style, and the
/// result table still goes to stdout.
#[test]
fn intervals_are_printed_live_on_stderr() {
    let out = run_with_timeout(
        vp().args(["rr", "-i", "250ms", "-l", "1s"]),
        Duration::from_secs(60),
    );
    common::assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("tr/s")).collect();
    assert!(lines.len() >= 3, "{err}");
    assert!(lines[0].starts_with("[  0.0-  0.2 s]"), "{err}");
    assert!(
        lines[0].contains("p50 ") && lines[0].contains("p99 "),
        "{err}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("virtperf rr"));
}

/// Out-of-range intervals are usage errors of one line, before any traffic.
#[test]
fn intervals_out_of_range_are_refused() {
    let (code, err) = run_fail(&["stream", "-i", "50ms", "-l", "1s"]);
    assert_eq!(code, 2);
    assert!(err.contains("at least 100ms"), "{err}");
    let (code, err) = run_fail(&["rr", "-i", "5s", "-l", "1s"]);
    assert_eq!(code, 2, "{err}");
    assert_one_line_error(&err, "longer than the test");
}

/// A spec's `interval` stores each trial's series; `show` keeps it per try, `report`
/// draws it (checked in headless Chromium when installed).
#[test]
fn a_spec_with_interval_stores_and_plots_the_series() {
    let d = common::TempDir::new("iv");
    let spec = d.0.join("s.toml");
    std::fs::write(
        &spec,
        "name = \"series\"\nduration = \"1s\"\nrepetitions = 2\n[[workload]]\nkind = \"stream\"\ninterval = \"250ms\"\n[[workload]]\nkind = \"rr\"\ninterval = \"250ms\"\n[[config]]\nname = \"plain\"\n",
    )
    .unwrap();
    let db = d.0.join("r.db");
    let run = |args: &[&str]| {
        let out = run_with_timeout(
            vp().args(args).arg("--db").arg(&db),
            Duration::from_secs(120),
        );
        common::assert_ok(&out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    run(&["run", spec.to_str().unwrap()]);
    let show: serde_json::Value =
        serde_json::from_str(&run(&["show", "last", "--format", "json"])).unwrap();
    for p in show["points"].as_array().unwrap() {
        let series = p["configs"][0]["series"].as_array().unwrap();
        assert_eq!(series.len(), 2, "one series per try: {p}");
        assert!(
            series.iter().all(|s| s.as_array().unwrap().len() >= 3),
            "{p}"
        );
    }
    let html = d.0.join("report.html");
    run(&["report", "last", "-o", html.to_str().unwrap()]);
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("class=\"series\"").count(),
        2,
        "one plot per cell"
    );
    assert!(
        page.contains("time series: stream"),
        "no stream series plot"
    );
    assert!(page.contains("transactions/s per interval"));
    common::chromium_renders(&html, &d.0, 4);
}

/// A driving agent (a guest's, with `--allow-drive`) records intervals when the client asks
/// for them: `Drive` carries the interval, and the outcome comes back with its series.
#[test]
fn a_driving_agent_keeps_the_intervals_it_was_asked_for() {
    use virtperf_wire::{read_message, write_message, DriveTarget, Message, Workload};
    let driver = common::Agent::start(&["--allow-drive", "--token", "d"]);
    let target = common::Agent::start(&[]);
    let mut s = std::net::TcpStream::connect(driver.addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write_message(
        &mut s,
        &Message::Hello {
            version: virtperf_wire::PROTOCOL_VERSION,
            token: Some("d".into()),
            lock: None,
        },
    )
    .unwrap();
    assert!(matches!(read_message(&mut s), Ok(Message::Welcome { .. })));
    write_message(
        &mut s,
        &Message::Drive {
            to: DriveTarget {
                host: "127.0.0.1".into(),
                port: target.addr.port(),
                token: None,
                lock: None,
            },
            plan: virtperf_wire::DrivePlan {
                interval_ms: Some(250),

                ..virtperf_wire::DrivePlan::new(Workload::rr(1, 1), 1000)
            },
        },
    )
    .unwrap();
    let result = match read_message(&mut s) {
        Ok(Message::Outcome { result }) => result,
        other => panic!("expected an outcome, got {other:?}"),
    };
    assert!(
        result.intervals.len() >= 3,
        "{} intervals: {:?}",
        result.intervals.len(),
        result.intervals
    );
}

/// `--json-stream`: one JSON object per line, each interval as it ends (read here as it
/// arrives, so a stream printed all at the end would fail), then the result.
#[test]
fn json_stream_prints_a_line_per_interval_as_it_ends() {
    use std::io::{BufRead, BufReader};
    use std::time::Instant;
    for workload in ["stream", "rr"] {
        let mut child = vp()
            .args([workload, "-i", "500ms", "-l", "2s", "--json-stream"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn virtperf");
        let t0 = Instant::now();
        let out = child.stdout.take().expect("stdout");
        let mut lines = Vec::new();
        for line in BufReader::new(out).lines() {
            let line = line.expect("utf-8 line");
            let v: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("{workload}: not one JSON object ({e}): {line}"));
            lines.push((t0.elapsed(), v));
        }
        assert!(child.wait().expect("wait").success(), "{workload}");
        let (ivs, end): (Vec<_>, Vec<_>) =
            lines.iter().partition(|(_, v)| v["event"] == "interval");
        assert_eq!(end.len(), 1, "{workload}: one end line: {lines:?}");
        assert_eq!(end[0].1["event"], "end");
        assert_eq!(end[0].1["data"]["workload"]["kind"], workload);
        assert!((3..=5).contains(&ivs.len()), "{workload}: {lines:?}");
        for (_, v) in &ivs {
            assert!(v["data"]["t_s"].is_number(), "{workload}: {v}");
        }
        // Live: the first interval arrived well before the result.
        let (first, last) = (ivs[0].0, end[0].0);
        assert!(
            last.saturating_sub(first) >= Duration::from_millis(1000),
            "{workload}: intervals came at {first:?}, the result at {last:?}"
        );
    }
}
