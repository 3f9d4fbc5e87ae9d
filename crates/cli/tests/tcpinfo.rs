//! TCP state in stream results (issue 30 §2): each flow's `TCP_INFO` over the measured
//! interval, and retransmissions that rise when packets are lost. The loss is real: an
//! nftables rule dropping a share of arriving TCP segments, on the loopback of a network namespace
//! this test creates (so nothing outside it is touched), with virtperf run inside it.

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::run_with_timeout;

/// A network namespace this test made, deleted when dropped (also when the test fails).
struct Ns(String);

impl Drop for Ns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

fn ok(cmd: &mut Command) -> bool {
    cmd.status().map(|s| s.success()).unwrap_or(false)
}

/// Why this machine cannot run the test, if it cannot.
/// What the loss test needs and this machine lacks: the capability and why.
fn cannot() -> Option<(&'static str, String)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(("root", "needs root (network namespaces, nftables)".into()));
    }
    for tool in ["ip", "nft"] {
        if !ok(Command::new(tool)
            .arg("-V")
            .stdout(std::process::Stdio::null()))
        {
            return Some((
                if tool == "nft" { "nft" } else { "iproute2" },
                format!("needs `{tool}` (apt-get install iproute2 nftables)"),
            ));
        }
    }
    None
}

/// The kernel's count of retransmitted TCP segments in namespace `ns` (`Tcp: RetransSegs`
/// of its /proc/net/snmp).
fn retrans_segs(ns: &str) -> u64 {
    kernel_count(ns, "/proc/net/snmp", "Tcp:", "RetransSegs")
}

/// The segments the namespace's senders were told by D-SACK their peer had twice
/// (`TcpExt: TCPDSACKRecvSegs`, the sum of the sockets' `tcpi_dsack_dups`).
fn dsack_recv_segs(ns: &str) -> u64 {
    kernel_count(ns, "/proc/net/netstat", "TcpExt:", "TCPDSACKRecvSegs")
}

/// Counter `name` of the `prefix` lines (names, then values) of `file` in namespace `ns`.
fn kernel_count(ns: &str, file: &str, prefix: &str, name: &str) -> u64 {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", file])
        .output()
        .expect("ip netns exec");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut tcp = text.lines().filter(|l| l.starts_with(prefix));
    let (names, values) = (
        tcp.next().expect("counter names"),
        tcp.next().expect("counter values"),
    );
    let at = names
        .split_whitespace()
        .position(|n| n == name)
        .expect("the counter's name");
    values
        .split_whitespace()
        .nth(at)
        .and_then(|v| v.parse().ok())
        .expect("a count")
}

/// `virtperf stream` inside `ns`, its JSON.
fn stream_in(ns: &str) -> serde_json::Value {
    let out = run_with_timeout(
        Command::new("ip")
            .args(["netns", "exec", ns, env!("CARGO_BIN_EXE_virtperf")])
            .args(["stream", "-l", "2s", "-i", "500ms", "--json"])
            .env("VIRTPERF_ALLOW_CONCURRENT", "1")
            .env_remove("VIRTPERF_TOKEN"),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "stream in {ns}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn stream_flows_carry_tcp_state_and_loss_raises_retransmits() {
    if let Some((need, why)) = cannot() {
        virtperf_testkit::skip(need, &why);
        return;
    }
    let ns = Ns(format!("vp-t-tcpinfo-{}", std::process::id()));
    assert!(ok(Command::new("ip").args(["netns", "add", &ns.0])));
    assert!(ok(
        Command::new("ip").args(["-n", &ns.0, "link", "set", "lo", "up"])
    ));

    let clean = stream_in(&ns.0);
    let o = &clean["outcome"];
    let tcp = &o["flows"][0]["tcp"];
    for k in [
        "retransmits",
        "retransmits_interval",
        "snd_cwnd",
        "srtt_us",
        "snd_mss",
    ] {
        assert!(tcp[k].is_u64(), "flows[0].tcp.{k} missing: {tcp}");
    }
    assert!(tcp["snd_cwnd"].as_u64() > Some(0), "{tcp}");
    assert!(tcp["srtt_us"].as_u64() > Some(0), "{tcp}");
    let before = o["retransmits"].as_u64().expect("retransmits");

    // Drop 2 % of the namespace's TCP segments as they arrive, control connection
    // included (TCP carries it through). On the input hook: a drop on output is reported
    // back to the sending socket, which sends the segment again as if nothing was lost, so
    // only a drop after the packet left is loss. The namespace goes away with the rule.
    for rule in [
        "add table inet vploss",
        "add chain inet vploss in { type filter hook input priority 0 ; }",
        "add rule inet vploss in meta l4proto tcp numgen random mod 100 < 2 drop",
    ] {
        let args: Vec<&str> = rule.split(' ').collect();
        assert!(
            ok(Command::new("ip")
                .args(["netns", "exec", &ns.0, "nft"])
                .args(&args)),
            "nft {rule}"
        );
    }
    let (kernel_before, dsack_before) = (retrans_segs(&ns.0), dsack_recv_segs(&ns.0));
    let lossy = stream_in(&ns.0);
    let kernel = retrans_segs(&ns.0) - kernel_before;
    let dsack_kernel = dsack_recv_segs(&ns.0) - dsack_before;
    let after = lossy["outcome"]["retransmits"]
        .as_u64()
        .expect("retransmits");
    assert!(
        after > 2 * before + 20,
        "2% loss should raise retransmits well past a clean run's: {before} without, {after} with"
    );
    // Against the kernel's own count over the namespace (every socket in it: the data
    // flows, and the control connection the tool does not count): never more, and the
    // data flows carry nearly all of it.
    assert!(
        after <= kernel && after * 10 >= kernel * 8,
        "the flows' retransmits {after} against the namespace's RetransSegs {kernel}"
    );
    // The spurious ones (D-SACKed by the receiver) are part of them, and nearly all of the
    // kernel's count of D-SACKed segments over the namespace (by hand: 5 of 5, 19 of 19).
    for (run, total) in [(&clean, before), (&lossy, after)] {
        let o = &run["outcome"];
        let spurious = o["spurious_retransmits"]
            .as_u64()
            .unwrap_or_else(|| panic!("spurious_retransmits missing: {o}"));
        let per_flow: u64 = o["flows"]
            .as_array()
            .expect("flows")
            .iter()
            .map(|f| {
                f["tcp"]["dsack_dups_interval"]
                    .as_u64()
                    .expect("dsack_dups")
            })
            .sum();
        assert_eq!(spurious, per_flow, "{o}");
        assert!(spurious <= total, "{spurious} spurious of {total}: {o}");
    }
    let spurious = lossy["outcome"]["spurious_retransmits"].as_u64();
    assert!(
        // The kernel's count also holds what the flows D-SACKed outside the measured
        // interval (their start and end) and the control connection's: a few, so the
        // slack is a few plus a fifth (3 of 4 seen with three test threads).
        spurious.is_some_and(|s| s <= dsack_kernel && dsack_kernel - s <= 2 + dsack_kernel / 5),
        "the flows' spurious retransmits {spurious:?} against the namespace's TCPDSACKRecvSegs {dsack_kernel}"
    );
    // Per interval (-i): every interval carries the sender's TCP state, read by the series
    // from the socket itself, so a sender blocked in `send` by a retransmission timeout at
    // a boundary leaves no gap; the intervals' retransmits are the run's, spread over time.
    for (run, total, loss) in [(&clean, before, false), (&lossy, after, true)] {
        let intervals = run["intervals"].as_array().expect("intervals");
        assert!(intervals.len() >= 4, "{}", run["intervals"]);
        let with: Vec<&serde_json::Value> = intervals
            .iter()
            .filter(|i| i["retransmits"].is_u64())
            .collect();
        assert_eq!(
            with.len(),
            intervals.len(),
            "intervals without TCP state (loss: {loss}): {}",
            run["intervals"]
        );
        for i in &with {
            let t = &i["flow_tcp"][0];
            assert!(
                t["snd_cwnd"].as_u64() > Some(0) && t["srtt_us"].as_u64() > Some(0),
                "{i}"
            );
            assert_eq!(i["retransmits"], t["retransmits_interval"], "{i}");
        }
        let sum: u64 = with.iter().filter_map(|i| i["retransmits"].as_u64()).sum();
        assert!(
            sum <= total,
            "intervals' {sum} retransmits exceed the run's {total}"
        );
        if loss {
            assert!(
                sum > 0,
                "2% loss and no interval retransmitted: {}",
                run["intervals"]
            );
        }
    }
}

/// A stored stream's retransmissions are shown by `show` beside its table (and compared
/// as a metric: lower is better).
#[test]
fn show_prints_the_stored_tcp_state() {
    let dir = std::env::temp_dir().join(format!("vp-t-tcpshow-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let spec = dir.join("s.toml");
    let db = dir.join("r.db");
    std::fs::write(
        &spec,
        "name = \"tcp\"\nduration = \"300ms\"\nrepetitions = 2\n[[workload]]\nkind = \"stream\"\nbidir = true\n",
    )
    .expect("spec");
    let run = run_with_timeout(
        common::vp().args([
            "run",
            spec.to_str().unwrap_or(""),
            "--db",
            db.to_str().unwrap_or(""),
        ]),
        Duration::from_secs(120),
    );
    common::assert_ok(&run);
    let show = run_with_timeout(
        common::vp().args(["show", "1", "--db", db.to_str().unwrap_or("")]),
        Duration::from_secs(60),
    );
    common::assert_ok(&show);
    let text = String::from_utf8_lossy(&show.stdout).into_owned();
    // `--json` as on every reporting command: the stored retransmits among the metrics.
    let json = run_with_timeout(
        common::vp().args(["show", "1", "--json", "--db", db.to_str().unwrap_or("")]),
        Duration::from_secs(60),
    );
    common::assert_ok(&json);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("show --json");
    assert!(v.to_string().contains("\"retransmits\""), "{v}");
    // Of them, the D-SACKed ones, both directions' (a `--bidir` stream), stored beside.
    assert!(v.to_string().contains("\"spurious_retransmits\""), "{v}");
    let html = dir.join("r.html");
    let report = run_with_timeout(
        common::vp().args([
            "report",
            "1",
            "--db",
            db.to_str().unwrap_or(""),
            "-o",
            html.to_str().unwrap_or(""),
        ]),
        Duration::from_secs(60),
    );
    common::assert_ok(&report);
    let page = std::fs::read_to_string(&html).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        page.contains("<h3>TCP (the senders")
            && page.contains("retransmits")
            && page.contains("of them spurious"),
        "the report has TCP state too"
    );
    assert!(
        text.contains("TCP (") && text.contains("retransmits"),
        "{text}"
    );
    // The spurious share is named where there were retransmissions to share: a run whose
    // tries retransmitted nothing (it happens on loopback) has no "0.0 of them".
    let none = text.contains("retransmits 0.0 per try");
    assert_eq!(text.contains("of them spurious"), !none, "{text}");
    assert!(
        text.contains("client→server") && text.contains("server→client"),
        "{text}"
    );
}
