//! `virtperf explain --workload stream` for real (issue 54): streams on loopback, each
//! verdict checked against the figures of the JSON it names, and `show` reading the run
//! back to the same answer. The batteries run alone ([`crate::alone`]): two at once would
//! each find the other's work on their CPUs (which the answer counts, rightly).

use crate::common;

use std::time::Duration;

use common::{run_with_timeout, vp, TempDir};
use virtperf_report::explain_stream::{FLOW_LIMITED_SHARE, FLOW_SHARE_WITH_EVIDENCE};

fn explain(db: &std::path::Path, extra: &[&str]) -> serde_json::Value {
    let out = run_with_timeout(
        vp().args([
            "explain",
            "--workload",
            "stream",
            "--quick",
            "--tries",
            "2",
            "-l",
            "1s",
            "--json",
            "--db",
        ])
        .arg(db)
        .args(extra),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{extra:?}: {err}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{extra:?}: JSON: {e}: {err}"))
}

/// Whether the battery's halt-polling remedy can set this machine's knob, which reads
/// `before`: the haltpoll governor reads it, it polls less than 200 µs, and this is root.
fn halt_poll_settable(before: Option<&str>) -> bool {
    virtperf_measure::env::halt_poll_inert_now().is_none()
        && before
            .and_then(|v| v.trim().parse::<u64>().ok())
            .is_some_and(|v| v < 200_000)
        // SAFETY: geteuid has no preconditions.
        && unsafe { libc::geteuid() } == 0
}

fn f(v: &serde_json::Value, ptr: &str) -> f64 {
    common::f(v, ptr)
}

#[test]
fn each_bound_is_named_with_the_figure_of_its_json() {
    let _alone = crate::alone();
    let d = TempDir::new("explain-stream");
    let db = d.path("x.db");

    // 64-byte sends: one system call per 64 bytes keeps the sender's CPU busy in the kernel.
    let rps_file = "/sys/class/net/lo/queues/rx-0/rps_cpus";
    let poll_file = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let rps_before = std::fs::read_to_string(rps_file).ok();
    let poll_before = std::fs::read_to_string(poll_file).ok();
    let small = explain(&db, &["-r", "64"]);
    // The RPS and halt-polling remedies' knobs are back as they were.
    assert_eq!(std::fs::read_to_string(rps_file).ok(), rps_before);
    assert_eq!(std::fs::read_to_string(poll_file).ok(), poll_before);
    let verdict = small["verdict"].as_str().expect("verdict");
    let sender = &small["sides"][0];
    assert_eq!(sender["role"], "sender");
    let calls = f(sender, "/calls_per_mb");
    // The sender's CPU is the bound where its tries' interval clears 90%; two tries near
    // 100% can still reach under it (99% [80%, 117%] in a CI here): undecided, said with
    // that interval.
    let busy = f(sender, "/busy_pct/mean");
    let low = f(sender, "/busy_pct/interval/bounded/low");
    if low < 90.0 {
        assert_eq!(small["bound"]["kind"], "undecided", "{verdict}");
        let high = f(sender, "/busy_pct/interval/bounded/high");
        let figure = format!(
            "the sender's CPU {} {busy:.0}% busy [{low:.0}%, {high:.0}%]",
            sender["cpu"]
        );
        assert!(
            verdict.contains(&figure) && verdict.contains("at its limit (90%) or not"),
            "{verdict} lacks {figure}"
        );
    } else {
        assert_eq!(small["bound"]["kind"], "cpu", "{verdict}");
        assert_eq!(small["bound"]["side"], "sender", "{verdict}");
        assert_eq!(small["bound"]["dominant"], "sys", "{verdict}");
        let figure = format!("CPU {} {busy:.0}% busy", sender["cpu"]);
        assert!(verdict.contains(&figure), "{verdict} lacks {figure}");
        assert!(
            verdict.contains(&format!("{calls:.0} sends per MB")),
            "{verdict}"
        );
    }
    // Counted by the sender's loop, per MB the receiver counted (its interval is the
    // sender's to within a wake-up): one send per 64 bytes.
    assert!((calls / (1e6 / 64.0) - 1.0).abs() < 0.02, "{calls}");
    // TCP coalesced the sends into segments (never more segments than sends), each at
    // most one MSS of loopback's 64 KiB.
    let segs = f(sender, "/segments_per_mb");
    assert!(
        segs <= calls * 1.02 && segs >= 1e6 / 65536.0,
        "{segs} vs {calls}"
    );
    // The receiver's reads: at least one per 128 KiB read buffer.
    let receiver = &small["sides"][1];
    assert!(f(receiver, "/calls_per_mb") >= 1e6 / 131072.0, "{receiver}");
    assert!(busy >= 90.0, "{busy}");
    // The model's prediction and residual are published as they come out (or say why not).
    match small["model"]["predicted_mbps"].as_f64() {
        Some(p) => {
            let r = f(&small, "/model/residual_pct");
            let measured = f(&small, "/mbps/mean");
            assert!((r - 100.0 * (measured / p - 1.0)).abs() < 1e-6, "{r}");
        }
        None => assert!(small["model"]["note"]
            .as_str()
            .unwrap_or("")
            .starts_with("not measured")),
    }
    // The paced tries' own split and counts, which the model's note compares: a paced
    // 64-byte sender still sends 64 bytes a call.
    if sender["paced_us_per_mb"].is_object() {
        assert!(sender["paced_split"]["total"].is_number(), "{sender}");
        let paced_calls = f(sender, "/paced_calls_per_mb");
        assert!(
            (paced_calls / (1e6 / 64.0) - 1.0).abs() < 0.02,
            "{paced_calls}"
        );
    }
    // Halt polling is measured where this machine polls less than 200 µs and root may
    // write the knob, with the CPUs it adds (its polling included), else says why not.
    let poll = small["remedies"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["label"] == "stream guest halt polling 200 µs")
        })
        .expect("the halt-polling remedy");
    if halt_poll_settable(poll_before.as_deref()) {
        assert!(poll["ratio"].is_number(), "{poll}");
        assert!(poll["added_cpus"].is_number(), "{poll}");
    } else {
        assert!(poll["why_not"].is_string(), "{poll}");
    }
    // Larger sends are 1 MiB ones, and say so.
    let larger = small["remedies"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["label"] == "stream larger sends"))
        .expect("the larger sends remedy");
    if larger["ratio"].is_number() {
        assert_eq!(larger["send_size"], 1 << 20, "{larger}");
    }
    // Every remedy was measured (a ratio) or says why not; RPS is measured where this
    // process may write the loopback device's steering file (root).
    for r in small["remedies"].as_array().expect("remedies") {
        assert!(r["ratio"].is_number() || r["why_not"].is_string(), "{r}");
    }
    // On loopback the kernel copies every MSG_ZEROCOPY send all the same: the remedy says
    // so from its trials' own counts, and a verdict that names it as raising the rate
    // says so too (it once read "MSG_ZEROCOPY ×2.35" as if copies were avoided).
    let zc = small["remedies"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["label"] == "stream MSG_ZEROCOPY"))
        .expect("the MSG_ZEROCOPY remedy");
    if zc["ratio"].is_number() {
        let note = zc["note"].as_str().unwrap_or("");
        assert!(note.contains("the kernel copied every one of its"), "{zc}");
        if zc["effect"] == "raises" {
            assert!(
                verdict.contains("its sends copied by the kernel all the same"),
                "{verdict}"
            );
        }
    }
    let rps = small["remedies"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["label"].as_str().is_some_and(|l| l.contains("RPS")))
        })
        .expect("the RPS remedy");
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(rps["ratio"].is_number(), "{rps}");
    } else {
        virtperf_testkit::skip(
            "root",
            "the RPS remedy writes the loopback device's rps_cpus",
        );
        assert!(
            rps["why_not"]
                .as_str()
                .is_some_and(|w| w.contains("rps_cpus")),
            "{rps}"
        );
    }

    // A 4 KiB receive buffer: the sender waits on the receive window most of its time.
    let html = d.path("w.html");
    let html_arg = html.to_string_lossy().into_owned();
    let windowed = explain(&db, &["--window", "4K", "-o", &html_arg]);
    let verdict = windowed["verdict"].as_str().expect("verdict");
    let rwnd = f(&windowed, "/bound/rwnd_limited_pct");
    let buffers = windowed["remedies"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["label"] == "stream 4 MiB socket buffers")
        })
        .expect("the buffers remedy");
    match windowed["bound"]["kind"].as_str() {
        Some("flow_control") => {
            assert!(
                verdict.contains(&format!("receive window {rwnd:.0}%")),
                "{verdict}"
            );
            if rwnd < 100.0 * FLOW_LIMITED_SHARE {
                // A smaller share counts only with the counterfactual measured: larger
                // buffers raise the rate beyond their interval, and the verdict says by
                // how much (15–19% of its time seen here, the sender's CPU 81–90% busy).
                assert!(rwnd >= 100.0 * FLOW_SHARE_WITH_EVIDENCE, "{rwnd}");
                assert_eq!(buffers["effect"], "raises", "{buffers}");
                let x = f(buffers, "/ratio");
                assert!(
                    verdict.contains(&format!("raise the rate ×{x:.2}")),
                    "{verdict}"
                );
            }
            assert!(windowed["model"]["predicted_mbps"].is_null());
        }
        // The sender waited on the window long enough to count, under half of its time,
        // and two tries of larger buffers could not tell whether it set the rate (their
        // interval holds 1 and reaches past the no-effect band): the answer says so
        // instead of a bound.
        // Or a CPU whose two tries' interval straddles 90% (the receiver 74% [49%, 100%]
        // once here): whether it is at its limit is not decided either, and said.
        Some("undecided") => {
            let counts = 100.0 * FLOW_SHARE_WITH_EVIDENCE..100.0 * FLOW_LIMITED_SHARE;
            let cpu_open = verdict.contains("at its limit (90%) or not");
            let window_open = counts.contains(&rwnd) && buffers["effect"] == "undecided";
            assert!(window_open || cpu_open, "{rwnd}: {verdict}");
            assert!(verdict.contains("its bound undecided"), "{verdict}");
            // The window in doubt: the buffers' tries could not tell.
            if window_open {
                assert!(
                    verdict.contains(&format!("receive window {rwnd:.0}%"))
                        && verdict.contains("undecided (more --tries)"),
                    "{verdict}"
                );
            }
        }
        other => panic!("a 4 KiB window: {other:?}: {verdict}"),
    }

    // `show` recomputes the same answer from the store.
    let runs: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["runs", "--json"], &db)).expect("runs");
    let id = runs[0]["id"].as_i64().expect("id").to_string();
    let shown: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["show", &id, "--json"], &db)).expect("show");
    assert_eq!(shown["verdict"], windowed["verdict"], "run {id}");
    // The page: its verdict, a bar per side and a row per remedy, laid out cleanly.
    let page = std::fs::read_to_string(&html).expect("the report");
    assert!(page.contains("flow control"), "the verdict is on the page");
    assert_eq!(page.matches("<svg").count(), 2);
    common::chromium_renders(&html, &d.0, 2);
}

/// Between two namespaces over a veth (MTU 1500) shaped to 200 Mbit/s: the link bounds
/// the stream, with the figure its JSON holds and a model from TCP's segment count; TCP's
/// data segments per MB show the device's MSS (at least a megabyte over 1460 bytes, where
/// loopback's 64 KiB MSS needs a fortieth of that); GRO on and TSO off on the veth are
/// measured as remedies; no namespace is left behind.
#[test]
fn a_stream_across_a_veth_is_explained_with_its_segments() {
    let _alone = crate::alone();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        virtperf_testkit::skip("root", "namespace placements need root");
        return;
    }
    let d = TempDir::new("explain-stream-netns");
    // Shaped to 200 Mbit/s: the link bounds the stream, and its model is the link's rate
    // less each segment's headers, the segment size from TCP's own count.
    let v = explain(
        &d.path("n.db"),
        &["--placement", "netns:veth", "--link-rate", "200mbit"],
    );
    let verdict = v["verdict"].as_str().expect("verdict");
    assert_eq!(v["bound"]["kind"], "link", "{verdict}");
    let rate = f(&v, "/mbps/mean");
    let figure = format!("{:.0}% of the link's stated 200 Mbit/s", rate / 2.0);
    assert!(verdict.contains(&figure), "{verdict} lacks {figure}");
    let per_seg = 1e6 / f(&v, "/sides/1/segments_per_mb");
    let predicted = f(&v, "/model/predicted_mbps");
    assert!(
        (predicted - 200.0 * per_seg / (per_seg + 66.0)).abs() < 1e-6,
        "{predicted}"
    );
    let residual = f(&v, "/model/residual_pct");
    assert!(
        (residual - 100.0 * (rate / predicted - 1.0)).abs() < 1e-6,
        "{residual}"
    );
    // The receiver counts its segments over the interval of the bytes it counts; the
    // sender stops counting while the shaped queue still holds its last segments, so its
    // count per MB received is a little lower (measured: 668 against the receiver's 691).
    let (sender, receiver) = (&v["sides"][0], &v["sides"][1]);
    assert!(
        f(receiver, "/segments_per_mb") >= 1e6 / 1460.0,
        "{receiver}"
    );
    assert!(f(sender, "/segments_per_mb") >= 0.9e6 / 1460.0, "{sender}");
    // Both toggles measured against as-is, interleaved.
    for label in ["stream GRO on on the veth", "stream TSO off on the veth"] {
        let r = v["remedies"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["label"] == label))
            .unwrap_or_else(|| panic!("no {label}: {}", v["remedies"]));
        assert!(r["ratio"].is_number(), "{r}");
    }
    let out = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns");
    let left = String::from_utf8_lossy(&out.stdout);
    assert!(!left.contains("vp-"), "namespaces left: {left}");
}

#[test]
fn what_a_stream_explanation_does_not_take_is_refused_in_one_line() {
    let _beside = crate::beside();
    for (args, needle) in [
        (
            &[
                "explain",
                "--workload",
                "stream",
                "--placement",
                "guest:guest-guest",
            ][..],
            "drop --placement",
        ),
        (
            &["explain", "--workload", "stream", "-r", "1,2"][..],
            "one size",
        ),
        (&["explain", "--flows", "2"][..], "add --workload stream"),
        (
            &[
                "explain",
                "--workload",
                "stream",
                "--link-rate",
                "1gbit",
                "--placement",
                "guest",
            ][..],
            "add --placement netns",
        ),
        (
            &["explain", "--workload", "stream", "--vm", "pid:1"][..],
            "give the agent in it with --host",
        ),
        (
            &[
                "explain",
                "--workload",
                "stream",
                "--host",
                "127.0.0.1",
                "--placement",
                "guest",
            ][..],
            "cannot be used with",
        ),
    ] {
        let (code, err) = common::run_fail(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        common::assert_one_line_error(&err, needle);
    }
}

/// Into a guest (TCG here), beside this host's loopback (`vm compare --explain
/// --workloads stream`): the guest's bound is named on this host too, by its vCPU threads'
/// CPU in the host view, with the figure of the JSON; the side-by-side terms are the two
/// explanations' own, their differences guest − native, and the carrier is the side whose
/// CPU per MB grew most, where the tries tell it.
#[test]
fn a_stream_into_a_guest_is_bound_on_the_hosts_vcpu_threads_and_compared_term_by_term() {
    let _alone = crate::alone();
    if let Some((need, why)) = common::guest_placement_missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    let d = TempDir::new("explain-stream-guest");
    let out = run_with_timeout(
        vp().args([
            "vm",
            "compare",
            "--explain",
            "--workloads",
            "stream",
            "--runs",
            "2",
            "-l",
            "1s",
            "--json",
            "--db",
        ])
        .arg(d.path("g.db")),
        Duration::from_secs(300),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let v = &all["elsewhere"];
    let verdict = v["verdict"].as_str().expect("verdict");
    assert_eq!(v["host_view"]["guest_end"], "server", "{verdict}");
    let vcpu = v["host_view"]["classes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["class"] == "vcpu"))
        .expect("the vCPU threads in the host view");
    let busy = f(vcpu, "/busy_pct");
    let vcpu_per_mb = f(vcpu, "/us_per_mb");
    assert!(vcpu_per_mb > 0.0, "{vcpu}");
    let buffers = v["remedies"]
        .as_array()
        .and_then(|r| {
            r.iter()
                .find(|r| r["label"] == "stream 4 MiB socket buffers")
        })
        .expect("the buffers remedy");
    match v["bound"]["kind"].as_str() {
        Some("cpu") => {
            assert_eq!(v["bound"]["side"], "receiver", "{verdict}");
            // The guest's receiver drains the window no faster than its vCPU allows:
            // where the sender waited on it past the flow-control share, the verdict names
            // it as the busy receiver's symptom (in about one run of six here).
            if f(v, "/bound/rwnd_limited_pct") >= 50.0 {
                let full = v["bound"]["full_window"].as_str().expect("the full window");
                assert!(verdict.ends_with(full), "{verdict}");
            }
            let on_host = v["bound"]["on_host"].as_str().expect("named on the host");
            assert!(
                on_host.contains(&format!("used {busy:.0}% of a CPU")),
                "{on_host}"
            );
            assert!(verdict.contains(on_host), "{verdict}");
        }
        // Unless larger buffers measurably raised the rate: then the window's size was
        // binding too (docs/explain.md), and the verdict says so beside both CPUs' busy
        // shares (once in a CI here: waited 33%, buffers ×1.22 [1.12, 1.37], the
        // receiver 99% busy).
        Some("flow_control") => {
            assert_eq!(buffers["effect"], "raises", "{verdict}");
            let x = f(buffers, "/ratio");
            assert!(
                verdict.contains(&format!("4 MiB socket buffers raise the rate ×{x:.2}"))
                    && verdict.contains("receiver "),
                "{verdict}"
            );
        }
        // Two tries of the guest's receiver whose interval reaches under 90% (its own
        // accounting is 100% in both here, so this is rare): its bound is not decided.
        Some("undecided") if f(&v["sides"][1], "/busy_pct/interval/bounded/low") < 90.0 => {
            assert!(verdict.contains("at its limit (90%) or not"), "{verdict}");
        }
        other => panic!("a stream into a TCG guest: {other:?}: {verdict}"),
    }
    assert!(v["not_tried"].to_string().contains("vhost-net"));
    // Term by term, from the two explanations' own numbers.
    let native = &all["native"];
    let terms = all["side_by_side"]["terms"].as_array().expect("terms");
    let by = |name: &str| {
        terms
            .iter()
            .find(|t| t["term"] == name)
            .unwrap_or_else(|| panic!("no term {name}"))
    };
    let rate = by("rate Mbit/s");
    assert_eq!(f(rate, "/native"), f(native, "/mbps/mean"));
    assert_eq!(f(rate, "/guest"), f(v, "/mbps/mean"));
    let mut grew = ("", f64::MIN);
    for role in ["sender", "receiver"] {
        let t = by(&format!("{role} CPU µs per MB"));
        let i = if role == "sender" { 0 } else { 1 };
        assert_eq!(f(t, "/native"), f(&native["sides"][i], "/us_per_mb/total"));
        assert_eq!(f(t, "/guest"), f(&v["sides"][i], "/us_per_mb/total"));
        let diff = f(t, "/difference");
        assert!((diff - (f(t, "/guest") - f(t, "/native"))).abs() < 1e-9);
        if diff > grew.1 {
            grew = (role, diff);
        }
    }
    assert_eq!(f(by("host vcpu threads µs per MB"), "/guest"), vcpu_per_mb);
    // The carrier is named where the two tries tell the sides' growths apart (under TCG
    // the receiver's is thousands of µs per MB), else said to be undecided with both.
    let carrier = all["side_by_side"]["carrier"].as_str().expect("a carrier");
    match all["side_by_side"]["carrier_side"].as_str() {
        Some(side) => {
            assert_eq!(side, grew.0, "{carrier}");
            assert!(
                carrier.contains(&format!("pays {:+.1} [", grew.1))
                    && carrier.contains(&format!("µs per MB on the {}'s CPU", grew.0)),
                "{carrier}"
            );
        }
        None => assert!(
            carrier.starts_with("undecided: ") && carrier.ends_with("(more --runs)"),
            "{carrier}"
        ),
    }
}

/// SIGTERM mid-battery: the trial running finishes, the run is stored as incomplete with
/// the trials already done, and the command exits 143.
#[test]
fn a_stopped_battery_keeps_what_it_measured() {
    let _alone = crate::alone();
    let d = TempDir::new("explain-stream-stop");
    let db = d.path("s.db");
    let child = vp()
        .args([
            "explain",
            "--workload",
            "stream",
            "--quick",
            "-l",
            "1s",
            "--db",
        ])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // Where the halt-polling remedy can set this machine's knob, stopped while it is set:
    // the knob goes back on the way out. Else past the calibration and a few trials.
    let poll_file = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";
    let poll_before = std::fs::read_to_string(poll_file).ok();
    if halt_poll_settable(poll_before.as_deref()) {
        let t0 = std::time::Instant::now();
        while std::fs::read_to_string(poll_file).ok() == poll_before {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "the battery never set {poll_file}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    } else {
        std::thread::sleep(Duration::from_secs(6));
    }
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = common::wait_output(child, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(143), "{err}");
    assert_eq!(
        std::fs::read_to_string(poll_file).ok(),
        poll_before,
        "the halt-poll knob after the stop"
    );
    let runs: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["runs", "--json"], &db)).expect("runs");
    assert_eq!(runs[0]["status"], "incomplete", "{runs}");
    assert!(runs[0]["trials_ok"].as_u64().unwrap_or(0) >= 2, "{runs}");
}
