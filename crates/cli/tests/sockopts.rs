//! Socket options on the command line (issue 30 §1): each is set on the real data
//! connections, read back from the kernel and recorded (`sock_applied`); a value the kernel
//! changed says so; a bad value is a usage error in one line.

use crate::common;

use common::{run_fail, run_json};

/// Every option set on a stream, an rr, a crr and an http download (a connection per
/// transaction or download: the first one is read back) round-trips: asked in `sock`, applied in `sock_applied` on both sides
/// as the kernel holds it.
#[test]
fn options_round_trip_through_the_kernel() {
    for workload in ["stream", "rr", "crr", "http"] {
        let length: &[&str] = match workload {
            // A download per connection (ureq speaks the HTTP, over our connection).
            "http" => &["-n", "1MB", "-c", "2"],
            _ => &["-l", "300ms"],
        };
        let opts = [
            "-s", "64K", "-S", "128K", "-C", "reno", "--mss", "1400", "--dscp", "46", "-D",
        ];
        let r = run_json(&[&[workload][..], length, &opts].concat());
        let asked = &r["sock"];
        assert_eq!(asked["congestion"], "reno", "{asked}");
        assert_eq!(asked["tos"], 184, "DSCP 46 is TOS 0xb8: {asked}");
        for side in ["client", "server"] {
            let a = &r["sock_applied"][side];
            assert_eq!(a["congestion"], "reno", "{workload} {side}: {a}");
            // The kernel doubles a buffer request (below the default limits here).
            assert_eq!(a["sndbuf"], 2 * 65536, "{workload} {side}: {a}");
            assert_eq!(a["rcvbuf"], 2 * 131072, "{workload} {side}: {a}");
            assert_eq!(a["nodelay"], true, "{workload} {side}: {a}");
            assert_eq!(a["tos"], 184, "{workload} {side}: {a}");
            let mss = a["mss"].as_u64().expect("mss");
            assert!((1300..=1400).contains(&mss), "{workload} {side}: {a}");
        }
        // The connection's own TCP state agrees: it sent with that MSS (crr's connections
        // are gone by the end: no TCP_INFO to compare).
        let tcp = match workload {
            "crr" | "http" => continue,
            "rr" => &r["outcome"]["tcp"],
            _ => &r["outcome"]["flows"][0]["tcp"],
        };
        let mss = tcp["snd_mss"].as_u64().expect("snd_mss");
        assert!((1300..=1400).contains(&mss), "{workload}: {tcp}");
    }
}

/// A buffer the kernel clamps (above net.core.wmem_max) is reported, not hidden.
#[test]
fn a_clamped_buffer_is_warned_about() {
    let max: u64 = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
        .ok()
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    if max == 0 || max >= 1 << 29 {
        virtperf_testkit::skip(
            "wmem",
            &format!("net.core.wmem_max is {max}: 1GiB would not be clamped"),
        );
        return;
    }
    let r = run_json(&["stream", "-l", "300ms", "-s", "1G"]);
    let got = r["sock_applied"]["client"]["sndbuf"]
        .as_u64()
        .expect("sndbuf");
    assert!(got < 2 << 30, "{got}");
    let w = r["warnings"].to_string();
    assert!(w.contains("SO_SNDBUF") && w.contains("wmem_max"), "{w}");
}

/// Bad values: exit 2, one line that says what is wrong.
#[test]
fn bad_socket_options_are_usage_errors() {
    for (args, says) in [
        (&["stream", "-l", "1s", "-C", "nosuchcc"][..], "offers"),
        (&["stream", "-l", "1s", "--sndbuf", "-1"], "sndbuf"),
        (&["stream", "-l", "1s", "--rcvbuf", "0"], "rcvbuf"),
        (&["rr", "-l", "1s", "--mss", "10"], "MSS"),
        (&["rr", "-l", "1s", "--tos", "300"], "TOS"),
        (&["rr", "-l", "1s", "--dscp", "64"], "DSCP"),
        (&["rr", "-l", "1s", "--busy-poll", "1e30"], "busy-poll"),
        (
            &["rr", "-l", "1s", "--tos", "1", "--dscp", "1"],
            "cannot be used with",
        ),
    ] {
        let (code, err) = run_fail(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        let lines = err.lines().filter(|l| !l.trim().is_empty()).count();
        assert!(lines <= 3, "{args:?}: one message, not a page: {err}");
    }
}

/// `--mptcp`: Multipath TCP connections on both ends where the kernel enables it; a clear
/// usage error where it does not (tried in a namespace of this test's own with
/// net.mptcp.enabled = 0, a per-namespace setting) and on workloads it does not apply to.
#[test]
fn mptcp_where_enabled_and_a_clear_error_elsewhere() {
    let (code, err) = run_fail(&["crr", "-l", "1s", "--mptcp"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("rr, stream and bulk"), "{err}");
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").ok();
    if enabled.as_deref().map(str::trim) != Some("1") {
        let (code, err) = run_fail(&["stream", "-l", "1s", "--mptcp"]);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("net.mptcp") || err.contains("CONFIG_MPTCP"),
            "{err}"
        );
        virtperf_testkit::skip(
            "mptcp",
            &format!("the MPTCP round trip: net.mptcp.enabled is {enabled:?} here"),
        );
        return;
    }
    let r = run_json(&["stream", "-l", "300ms", "--mptcp"]);
    assert_eq!(r["sock"]["mptcp"], true);
    for side in ["client", "server"] {
        assert_eq!(
            r["sock_applied"][side]["mptcp"], true,
            "{side}: {}",
            r["sock_applied"]
        );
    }
    assert!(r["outcome"]["mbps"].as_f64() > Some(0.0));
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        virtperf_testkit::skip("root", "the disabled case: needs root for a namespace");
        return;
    }
    let ns = format!("vp-t-mptcp-{}", std::process::id());
    let ip = |args: &[&str]| {
        std::process::Command::new("ip")
            .args(args)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    };
    if !ip(&["netns", "add", &ns]) {
        virtperf_testkit::skip("netns", "the disabled case: cannot create a namespace");
        return;
    }
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &ns, "sh", "-c"])
        .arg(format!(
            "ip link set lo up && sysctl -qw net.mptcp.enabled=0 && {} stream -l 1s --mptcp --allow-concurrent",
            env!("CARGO_BIN_EXE_virtperf")
        ))
        .output();
    ip(&["netns", "delete", &ns]);
    let out = out.expect("run in the namespace");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("net.mptcp.enabled = 0"), "{err}");
}

/// `-6` runs over IPv6 loopback (a private agent on ::1, the TOS set as the IPv6 traffic
/// class), `-4` over IPv4; asking both is a usage error.
#[test]
fn address_families() {
    let six = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
    if six.trim().is_empty() {
        virtperf_testkit::skip("ipv6", "no IPv6 here (/proc/net/if_inet6 is empty)");
        return;
    }
    let r = run_json(&["stream", "-6", "-l", "300ms", "--tos", "0x10"]);
    assert!(
        r["target"].as_str().is_some_and(|t| t.starts_with("[::1]")),
        "{}",
        r["target"]
    );
    assert_eq!(
        r["sock_applied"]["client"]["tos"], 16,
        "{}",
        r["sock_applied"]
    );
    let r = run_json(&["rr", "-4", "-l", "300ms"]);
    assert!(
        r["target"].as_str().is_some_and(|t| t.starts_with("127.")),
        "{}",
        r["target"]
    );
    let (code, err) = run_fail(&["rr", "-4", "-6", "-l", "1s"]);
    assert_eq!(code, 2, "{err}");
    // The same in a spec: a config's family, on this host's loopback.
    let dir = common::TempDir::new("family");
    let (spec, db) = (dir.path("s.toml"), dir.path("r.db"));
    let text = "name = \"f\"\nduration = \"300ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n\
                [[config]]\nname = \"v4\"\nfamily = \"ipv4\"\n[[config]]\nname = \"v6\"\nfamily = \"ipv6\"\n";
    std::fs::write(&spec, text).unwrap();
    common::run_db_ok(&["run", spec.to_str().unwrap()], &db);
    let store = virtperf_store::Store::open(&db).expect("store");
    for t in store.trials(1).expect("trials") {
        let target = t
            .trial
            .result
            .as_ref()
            .map(|r| r.target.clone())
            .unwrap_or_default();
        let v6 = t.trial.config == "v6";
        assert_eq!(
            target.starts_with("[::1]"),
            v6,
            "{}: {target}",
            t.trial.config
        );
        assert_eq!(
            target.starts_with("127."),
            !v6,
            "{}: {target}",
            t.trial.config
        );
    }
    std::fs::write(&spec, text.replace("\"ipv6\"", "\"ipv7\"")).unwrap();
    let (code, err) = run_fail(&["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ipv7"), "{err}");
}

/// Flows multiplexed on threads share one set of options: the first flow's connection on
/// each side shows what the kernel applied.
#[test]
fn multiplexed_flows_record_what_the_kernel_applied() {
    for workload in ["rr", "stream"] {
        let r = run_json(&[
            workload,
            "-P",
            "4",
            "--threads",
            "2",
            "-l",
            "300ms",
            "-s",
            "64K",
            "-D",
        ]);
        for side in ["client", "server"] {
            let a = &r["sock_applied"][side];
            assert_eq!(a["sndbuf"], 2 * 65536, "{workload} {side}: {a}");
            assert_eq!(a["nodelay"], true, "{workload} {side}: {a}");
        }
    }
}
