//! `vm compare --trace` (issue 41): the spec it writes asks every workload for tracepoint
//! counts, and that spec is one `virtperf run` accepts as it is. That a guest which drives
//! the test carries `trace` into its result is `guest.rs`'s (rr across `guest:guest-host`
//! with `--trace`) and `lab/tests/plan_travels.rs`'s.

use crate::common;

use common::vp;

#[test]
fn vm_compare_trace_and_gate_travel_in_the_spec_it_writes() {
    let out = vp()
        .args([
            "vm",
            "compare",
            "--direction",
            "guest-host",
            "--workloads",
            "rr,crr,stream",
            "--trace",
            "--max-tax",
            "rr=30%,stream=10%",
            "--omit",
            "2s",
            "--print-spec",
        ])
        .output()
        .expect("run");
    let spec = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(spec.matches("[[workload]]").count(), 3, "{spec}");
    assert_eq!(spec.matches("trace = true").count(), 3, "{spec}");
    assert!(spec.contains("guest:guest-host"), "{spec}");
    // Each trial's warm-up too (`--omit`), for every workload.
    assert!(spec.contains("\nomit = \"2s\"\n"), "{spec}");
    // The gate travels with the spec, so `virtperf run` of it gates as vm compare did.
    assert!(
        spec.contains("[compare]\nmax_tax = \"rr=30%,stream=10%\""),
        "{spec}"
    );
    let file = std::env::temp_dir().join(format!("vp-vm-spec-{}.toml", std::process::id()));
    std::fs::write(&file, spec.as_bytes()).expect("write");
    let check = vp()
        .args(["run", file.to_str().expect("utf-8"), "--dry-run"])
        .output()
        .expect("run --dry-run");
    let _ = std::fs::remove_file(&file);
    assert!(
        check.status.success(),
        "the written spec does not parse: {}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// `--direction` places the ends of a guest virtperf boots: with `--guest guest` it is
/// that guest's, and where `--guest` places the ends itself it is refused, not ignored.
#[test]
fn vm_compare_direction_applies_to_its_own_guest_only() {
    let spec = |extra: &[&str]| {
        vp().args(["vm", "compare", "--workloads", "rr", "--print-spec"])
            .args(extra)
            .output()
            .expect("run")
    };
    let out = spec(&["--guest", "guest", "--direction", "guest-host"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("placement = \"guest:guest-host\""),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    for (extra, says) in [
        (
            &[
                "--guest",
                "remote:127.0.0.1:7150",
                "--direction",
                "guest-host",
            ][..],
            "drop --direction",
        ),
        (
            &["--guest", "guest:loopback", "--direction", "guest-host"][..],
            "give one",
        ),
    ] {
        let out = spec(extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        common::assert_one_line_error(&String::from_utf8_lossy(&out.stderr), says);
    }
}

/// `vm compare --vm` needs a guest placement of the user's (`--guest remote:…`), and
/// `--explain` (no workloads to watch) refuses it; `vm initramfs` refuses a control port
/// inside its own data range and a VM name with a '/'. Each a usage error, one line.
#[test]
fn vm_options_that_cannot_work_are_refused_before_anything_runs() {
    let (code, err) = common::run_fail(&["vm", "compare", "--vm", "pid:1"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--guest"), "{err}");
    let (code, err) = common::run_fail(&[
        "vm",
        "compare",
        "--guest",
        "remote:127.0.0.1:1",
        "--vm",
        "pid:1",
        "--explain",
    ]);
    assert_eq!(code, 2, "{err}");
    common::assert_one_line_error(&err, "--explain runs no workloads");
    let out = std::env::temp_dir().join(format!("vp-initrd-{}.cpio", std::process::id()));
    let out = out.to_str().expect("utf-8");
    for (port, range, said) in [
        ("17152", "17151-17166", "inside --data-ports"),
        ("80", "1024-65535", "forward at most 64"),
    ] {
        let (code, err) = common::run_fail(&[
            "vm",
            "initramfs",
            "-o",
            out,
            "--port",
            port,
            "--data-ports",
            range,
        ]);
        assert_eq!(code, 2, "{err}");
        common::assert_one_line_error(&err, said);
    }
    let (code, err) = common::run_fail(&["vm", "initramfs", "-o", out, "--name", "a/b"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not a name"), "{err}");
    // Characters QEMU's -name or the printed shell commands would misread.
    for bad in ["a,b", "a<b>", "my vm", "a;rm"] {
        let (code, err) = common::run_fail(&["vm", "initramfs", "-o", out, "--name", bad]);
        assert_eq!(code, 2, "{bad}: {err}");
        common::assert_one_line_error(&err, "is not allowed in a VM name");
    }
    assert!(!std::path::Path::new(out).exists(), "an image was written");
}

/// `vm compare`'s latency rows are the mean of each try's own percentile, `show` pools
/// every round trip: for one run the two printed different p50s with no word why. Where
/// they would differ, the pooled figures are printed under the table, and they are
/// `show`'s.
#[test]
fn vm_compare_names_the_pooled_latencies_show_prints() {
    let dir = common::TempDir::new("vm-pooled");
    let db = dir.0.join("r.db");
    let out = vp()
        .args(["vm", "compare", "--native", "local", "--guest", "local"])
        .args(["--workloads", "rr", "-l", "200ms", "--runs", "3", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    // What `show` reads back of the last run.
    let show_last = || -> serde_json::Value {
        let show = vp()
            .args(["show", "last", "--format", "json", "--db"])
            .arg(&db)
            .output()
            .unwrap();
        common::assert_ok(&show);
        serde_json::from_slice(&show.stdout).unwrap()
    };
    let v = show_last();
    let p50 = |config: &str| {
        let configs = v["points"][0]["configs"].as_array().expect("configs");
        let c = configs
            .iter()
            .find(|c| c["config"] == config)
            .expect(config);
        c["latency"]["p50_us"].as_f64().expect("pooled p50")
    };
    let (n, g) = (p50("native"), p50("guest"));
    let shown = |x: f64| {
        if x >= 100.0 {
            format!("{x:.0}")
        } else {
            format!("{x:.2}")
        }
    };
    let row = text
        .lines()
        .find(|l| l.starts_with("rr") && l.contains("p50 µs"))
        .expect("the p50 row");
    // `compare` of the same run tests the tries' own percentiles, and says so.
    let cmp = vp()
        .args(["compare", "last", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    common::assert_ok(&cmp);
    let cmp = String::from_utf8_lossy(&cmp.stdout);
    assert!(
        cmp.contains("the mean of each try's own percentile"),
        "{cmp}"
    );
    match text.lines().find(|l| l.contains("every round trip pooled")) {
        Some(line) => assert!(
            line.contains(&format!("rr p50 native {} guest {}", shown(n), shown(g))),
            "{line}\nshow: native {n} guest {g}"
        ),
        // No line: the row's own figures print as show's.
        None => assert!(
            row.contains(&shown(n)) && row.contains(&shown(g)),
            "{row}\nshow: native {n} guest {g}"
        ),
    }
    // `--json` carries the pooled figures too, each as `show` reads them from the store.
    let out = vp()
        .args([
            "vm", "compare", "--native", "local", "--guest", "local", "--json",
        ])
        .args(["--workloads", "rr", "-l", "200ms", "--runs", "2", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("vm compare JSON");
    let v = show_last();
    let configs = v["points"][0]["configs"].as_array().expect("configs");
    let pooled = j["pooled"].as_array().expect("pooled");
    for metric in ["p50_us", "p99_us"] {
        let p = pooled
            .iter()
            .find(|p| p["metric"] == metric)
            .unwrap_or_else(|| panic!("{metric} in {pooled:?}"));
        for side in ["native", "guest"] {
            let c = configs.iter().find(|c| c["config"] == side).expect(side);
            assert_eq!(p[side], c["latency"][metric], "{metric} {side}");
        }
    }
}
