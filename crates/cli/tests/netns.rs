//! Namespace placements for real: namespaces, veth pairs, a bridge and a NAT router created
//! by virtperf, a workload across them, and nothing left behind.

use crate::common;

use common::{assert_one_line_error, namespaces_of, vp};

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn rr_across_veth_bridge_and_nat_then_nothing_is_left() {
    if !root() {
        virtperf_testkit::skip("root", "namespace placements need root");
        return;
    }
    for placement in ["netns:veth", "netns:bridge", "netns:nat"] {
        let (pid, out) = common::run_pid(&["rr", "-l", "0.3", "--placement", placement, "--json"]);
        let err = String::from_utf8_lossy(&out.stderr);
        if placement == "netns:nat" && !out.status.success() && err.contains("nftables") {
            virtperf_testkit::skip("netns", &format!("{placement}: {err}"));
            continue;
        }
        assert!(out.status.success(), "{placement}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["placement"], placement);
        assert!(
            v["outcome"]["transactions"].as_u64().unwrap() > 10,
            "{placement}"
        );
        assert!(
            v["target"].as_str().unwrap().starts_with("10.99."),
            "{}",
            v["target"]
        );
        assert!(
            namespaces_of(pid).is_empty(),
            "{placement} left {:?}",
            namespaces_of(pid)
        );
    }
}

#[test]
fn a_failing_run_in_namespaces_cleans_up_too() {
    if !root() {
        virtperf_testkit::skip("root", "namespace placements need root");
        return;
    }
    let (pid, out) = common::run_pid(&[
        "rr",
        "-l",
        "0.3",
        "--placement",
        "netns:veth",
        "--cpus",
        "0,4000",
    ]);
    assert!(!out.status.success());
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "cpu 4000");
    assert!(namespaces_of(pid).is_empty());
}

#[test]
fn cleanup_removes_what_a_killed_run_made_and_nothing_unmarked() {
    if !root() {
        virtperf_testkit::skip("root", "needs root to create namespaces");
        return;
    }
    let state = std::env::temp_dir().join(format!("vp-netns-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    // A run killed mid-test: nothing of it could clean up.
    let mut run = vp()
        .env("VIRTPERF_STATE_DIR", &state)
        .args(["rr", "-l", "30s", "--placement", "netns:veth"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = run.id();
    let t0 = std::time::Instant::now();
    while namespaces_of(pid).len() < 2 {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "no namespaces made"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    run.kill().unwrap();
    run.wait().unwrap();
    let left = namespaces_of(pid);
    assert!(!left.is_empty());
    // Named like ours, but virtperf did not make it (no marker): not ours to delete.
    let foreign = format!("vp-{pid}-999-cli");
    assert!(std::process::Command::new("ip")
        .args(["netns", "add", &foreign])
        .status()
        .unwrap()
        .success());
    let out = vp()
        .env("VIRTPERF_STATE_DIR", &state)
        .arg("cleanup")
        .output()
        .unwrap();
    let still = namespaces_of(pid);
    let _ = std::process::Command::new("ip")
        .args(["netns", "del", &foreign])
        .status();
    let _ = std::fs::remove_dir_all(&state);
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    for ns in &left {
        if ns != &foreign {
            assert!(text.contains(ns.as_str()), "{ns} not reported: {text}");
        }
    }
    assert_eq!(
        still,
        vec![foreign.clone()],
        "only the unmarked namespace is left"
    );
    assert!(!text.contains(&foreign), "{text}");
}

#[test]
fn experiment_configs_can_place_the_ends_in_namespaces() {
    if !root() {
        virtperf_testkit::skip("root", "namespace placements need root");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vp-netns-exp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let spec = dir.join("s.toml");
    std::fs::write(
        &spec,
        "name = \"paths\"\nduration = \"300ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n\
         [[config]]\nname = \"loopback\"\n[[config]]\nname = \"bridge\"\nplacement = \"netns:bridge\"\n",
    )
    .unwrap();
    let db = dir.join("r.db");
    let (pid, out) =
        common::run_pid(&["run", spec.to_str().unwrap(), "--db", db.to_str().unwrap()]);
    common::assert_ok(&out);
    assert!(
        namespaces_of(pid).is_empty(),
        "left {:?}",
        namespaces_of(pid)
    );
    let show = vp()
        .args(["show", "last", "--format", "json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let cells = v["points"][0]["configs"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert_eq!(c["ok"], 1, "{c}");
    }
    let csv = vp()
        .args(["show", "last", "--format", "csv", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&csv.stdout).contains(",bridge,"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn netem_delay_works_or_says_in_one_line_that_the_kernel_lacks_it() {
    if !root() {
        virtperf_testkit::skip("root", "namespace placements need root");
        return;
    }
    let out = vp()
        .args([
            "rr",
            "-l",
            "0.3",
            "--placement",
            "netns:veth",
            "--delay",
            "2ms",
            "--json",
        ])
        .output()
        .unwrap();
    if out.status.success() {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // 2 ms one way on the client's egress: every round trip takes at least that.
        assert!(v["outcome"]["latency"]["min_us"].as_f64().unwrap() >= 2000.0);
    } else {
        assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "netem");
    }
}
