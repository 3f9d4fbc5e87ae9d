//! Guest placements for real: QEMU guests booted by virtperf (TCG where KVM cannot run a
//! Linux guest), virtperf as their init and agent, workloads host→guest, guest→host and
//! guest↔guest, `vm compare`, the errors, and nothing left behind.

use crate::common;

use std::time::Duration;

use common::{assert_one_line_error, f, namespaces_of, run_with_timeout, vp};

/// Why guest tests cannot run here, if they cannot.
/// What this machine lacks for guest placements: the capability and why.
pub(crate) fn missing() -> Option<(&'static str, &'static str)> {
    common::guest_placement_missing()
}

/// QEMU processes whose `-name` says run `pid` started them.
pub(crate) fn qemus_of(pid: u32) -> Vec<u32> {
    let needle = format!("vp-{pid}-");
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .map(|c| {
                    let c = String::from_utf8_lossy(&c);
                    c.starts_with("qemu-system") && c.contains(&needle)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// Runs virtperf with `args` (the guest's boot timeout bounds it), returning its PID and
/// output.
pub(crate) fn run(args: &[&str]) -> (u32, std::process::Output) {
    common::run_pid(args)
}

pub(crate) fn assert_nothing_left(pid: u32) {
    assert!(
        namespaces_of(pid).is_empty(),
        "left {:?}",
        namespaces_of(pid)
    );
    assert!(qemus_of(pid).is_empty(), "left QEMU {:?}", qemus_of(pid));
    let dirs: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("tmp")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("vp-{pid}-"))
        })
        .collect();
    assert!(dirs.is_empty(), "left {dirs:?}");
}

/// A client on this host beside the guest it talks to: the guest's QEMU is the test's far
/// end, not other work. Its threads' CPU (the host view, over the window) and the other
/// work fit in the machine's busy time, neighbours or not; counted as other work too
/// (every guest run warned "other work used 95% … expect noise"), they did not.
fn the_guests_qemu_is_not_other_work(v: &serde_json::Value) {
    let (h, c) = (&v["host_vm"], &v["cpu"]["client"]);
    let cpu_s = h["classes"].as_array().expect("the VM's threads").iter();
    let vm = 100.0 * cpu_s.filter_map(|c| c["cpu_s"].as_f64()).sum::<f64>() / f(h, "/window_s");
    let other = f(c, "/other_cpu_pct");
    let cpus = c["system"]["per_cpu_busy_pct"]
        .as_array()
        .map_or(0, |a| a.len()) as f64;
    let busy = f(c, "/system/busy_pct") * cpus;
    let warned = &v["warnings"];
    assert!(
        other + vm <= busy + 10.0,
        "other {other:.0}% + VM {vm:.0}% > busy {busy:.0}%: {warned}"
    );
}

/// A guest's traced counts of APIC register writes: each counted or missing with why, and
/// under TCG (no paravirtual EOI) a CPU that took interrupts wrote EOIs. QEMU 7.2's TCG CPUs
/// have no x2APIC, so those writes were MMIO stores the msr tracepoint never saw: they
/// read 0.00 EOI and ICR writes beside two virtio interrupts a transaction.
fn eoi_writes_are_counted_or_said_missing(v: &serde_json::Value) {
    let t = &v["trace"];
    let missing = t["missing"].to_string();
    let keys = ["msr_write_icr", "msr_write_eoi", "msr_write_apic_timer"];
    for key in keys.into_iter().chain(["msr_write_tsc_deadline"]) {
        let counted = t["per_unit"][key].is_number();
        let said = missing.contains(&format!("{key}:"));
        assert!(
            counted != said,
            "{key}: counted {counted}, missing {said}: {t}"
        );
    }
    // Interrupts not counted are no evidence either way: nothing to hold the EOIs to.
    let irqs = v["events"]["client"]["per_unit"]["net_rx_softirqs"].as_f64();
    if let Some(irqs) = irqs.filter(|&i| v["guest"]["emulated"] == true && i > 0.5) {
        assert_ne!(
            t["per_unit"]["msr_write_eoi"].as_f64(),
            Some(0.0),
            "no EOI written for {irqs:.2} interrupts a transaction: {t}"
        );
    }
}

#[test]
fn rr_and_stream_across_guests_in_every_direction() {
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    for (placement, workload, target_prefix) in [
        ("guest", "rr", "10.99.3.10:"),
        ("guest:guest-host", "rr", "10.99.3.1:"),
        ("guest:guest-guest", "stream", "10.99.3.11:"),
    ] {
        // A driving guest carries --trace (issue 41: Drive used to drop it).
        let trace = placement == "guest:guest-host";
        let mut args = vec![workload, "-l", "1s", "--placement", placement];
        args.extend(["--vcpu-cpus", "0", "--json"]);
        args.extend(trace.then_some("--trace"));
        let (pid, out) = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{placement}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{placement}: not JSON ({e}): {err}"));
        let direction = placement.strip_prefix("guest:").unwrap_or("host-guest");
        if trace {
            assert!(v["trace"].is_object(), "{placement}: --trace dropped: {v}");
            eoi_writes_are_counted_or_said_missing(&v);
        }
        assert_eq!(v["placement"], format!("guest:{direction}"));
        assert_eq!(v["guest"]["direction"], direction);
        // Pinning found QEMU's vCPU threads (it fails when it finds none) and is recorded.
        assert_eq!(v["guest"]["vcpu_cpus"], serde_json::json!([0]));
        // What each guest's QEMU cost the host over the test: one entry per guest, busy.
        let qemu = v["guest"]["qemu_cpu_s"].as_array().expect("qemu_cpu_s");
        let guests = if direction == "guest-guest" { 2 } else { 1 };
        assert_eq!(qemu.len(), guests, "{}", v["guest"]);
        assert!(
            qemu.iter().all(|s| s.as_f64().is_some_and(|s| s > 0.0)),
            "{}",
            v["guest"]
        );
        let accel = v["guest"]["accel"].as_str().expect("accel");
        let emulated = v["guest"]["emulated"].as_bool().expect("emulated");
        assert_eq!(emulated, accel == "tcg", "{v}");
        if emulated {
            // The loud line on stderr and the warning in the stored result.
            assert!(err.contains("TCG emulation"), "{err}");
            assert!(
                v["warnings"].to_string().contains("TCG emulation"),
                "{}",
                v["warnings"]
            );
        }
        assert!(
            v["target"]
                .as_str()
                .expect("target")
                .starts_with(target_prefix),
            "{placement}: target {}",
            v["target"]
        );
        match workload {
            "rr" => assert!(
                v["outcome"]["transactions"].as_u64().expect("transactions") > 10,
                "{placement}: {}",
                v["outcome"]
            ),
            _ => assert!(
                v["outcome"]["mbps"].as_f64().expect("mbps") > 0.0,
                "{placement}: {}",
                v["outcome"]
            ),
        }
        if placement == "guest" {
            the_guests_qemu_is_not_other_work(&v);
        }
        // The guest's own fingerprint: a different kernel from the host's (Debian cloud).
        if placement == "guest" {
            let release = v["env"]["server"]["kernel"].as_str().unwrap_or("");
            assert!(
                release.contains("cloud"),
                "guest kernel {release:?} is not the guest's"
            );
        }
        assert_nothing_left(pid);
    }
    // UDP crosses the guest's device too: its losses are counted (not asserted zero: an
    // emulated guest may be slower than the loss timeout), and the guest counts its kicks.
    let (pid, out) = run(&[
        "rr",
        "--protocol",
        "udp",
        "--loss-timeout",
        "1s",
        "-l",
        "1s",
        "--placement",
        "guest",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "udp: {err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(v["outcome"]["udp"]["lost"].is_u64(), "{}", v["outcome"]);
    assert!(
        v["outcome"]["transactions"].as_u64().unwrap_or(0) > 10,
        "{}",
        v["outcome"]
    );
    assert!(
        v["events"]["server"]["nic"]["kicks_per_packet"]
            .as_f64()
            .is_some(),
        "{}",
        v["events"]["server"]
    );
    assert_nothing_left(pid);
}

/// `rr --under-load` in a guest: the guest's agent runs one test at a time under the
/// guest's own lock, so the lab holds the server's guest for each loaded trial (the first
/// guest; guest-guest: the second, which the first guest's agent drives against).
#[test]
fn rr_under_load_runs_beside_the_streams_in_guests() {
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    for placement in ["guest", "guest:guest-guest"] {
        let (pid, out) = run(&[
            "rr",
            "--under-load",
            "streams=1,pairs=1",
            "-l",
            "1s",
            "--placement",
            placement,
            "--json",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{placement}: {err}");
        assert!(
            !err.contains("waiting for another measurement"),
            "{placement}: the rr queued behind the streams: {err}"
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{placement}: not JSON ({e}): {err}"));
        let direction = placement.strip_prefix("guest:").unwrap_or("host-guest");
        for (what, r) in [
            ("loaded", &v["loaded"][0]),
            ("stream", &v["streams_results"][0]),
        ] {
            assert_eq!(r["placement"], format!("guest:{direction}"), "{what}");
        }
        assert!(
            v["loaded"][0]["outcome"]["transactions"].as_u64() > Some(10),
            "{placement}: {}",
            v["loaded"][0]["outcome"]
        );
        assert!(
            v["stream_mbps"][0].as_f64() > Some(0.0),
            "{}",
            v["stream_mbps"]
        );
        assert_nothing_left(pid);
    }
}

/// Issue 16: a non-default ring size, a kernel argument and module parameters reach the
/// guest (its own driver and kernel say so, not our echo of the flags), and the guest side
/// counts its virtio-net device's kicks and interrupts.
#[test]
fn device_options_kernel_arguments_and_module_parameters_reach_the_guest() {
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    let (pid, out) = run(&[
        "rr",
        "-l",
        "1s",
        "--placement",
        "guest",
        "--virtio",
        "rx_queue_size=1024",
        "--virtio",
        "mrg_rxbuf=off",
        // Two queue pairs: a multiqueue tap, mq=on and the vectors for it.
        "--virtio",
        "queues=2",
        "--vcpus",
        "2",
        "--guest-cmdline",
        "nohz=off",
        // Passed at virtio_net's load (it reads napi_tx when it probes the device), and a
        // built-in module's parameter written to /sys.
        "--guest-module",
        "virtio_net.napi_tx=N",
        "--guest-module",
        "printk.time=1",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["guest"]["virtio"]["rx_queue_size"], "1024",
        "{}",
        v["guest"]
    );
    assert_eq!(v["guest"]["virtio"]["mrg_rxbuf"], "off");
    assert_eq!(v["guest"]["cmdline"], "nohz=off");
    // The guest's side of the fingerprint: its driver's view of the device.
    let g = &v["env"]["server"];
    let nic = &g["virtio_net"][0];
    assert_eq!(nic["interface"], "eth0", "{g}");
    assert_eq!(
        nic["rx_ring"], 1024,
        "the driver sees the ring asked for: {nic}"
    );
    let features: Vec<&str> = nic["feature_names"]
        .as_array()
        .expect("feature names")
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(features.contains(&"version_1"), "{features:?}");
    assert!(features.contains(&"mq"), "{features:?}");
    assert_eq!(nic["queue_pairs"], 2, "{nic}");
    assert!(
        !features.contains(&"mrg_rxbuf"),
        "mrg_rxbuf=off: the feature was not negotiated: {features:?}"
    );
    // The kernel argument arrived, and the tick mode it sets is what the guest reports.
    assert!(
        g["cmdline"]
            .as_str()
            .expect("cmdline")
            .ends_with(" nohz=off"),
        "{}",
        g["cmdline"]
    );
    assert!(
        g["nohz"].as_str().expect("nohz").starts_with("periodic"),
        "{}",
        g["nohz"]
    );
    // Module parameters, read back by the guest from /sys/module.
    assert_eq!(
        g["module_params"]["virtio_net.napi_tx"], "N",
        "{}",
        g["module_params"]
    );
    assert_eq!(
        g["module_params"]["printk.time"], "Y",
        "{}",
        g["module_params"]
    );
    // The guest counted its device: every 1-byte transaction is a packet in and out of
    // eth0, each sent packet a kick (a VM exit) and each received one an interrupt.
    let n = &v["events"]["server"]["nic"];
    assert_eq!(n["interface"], "eth0", "{}", v["events"]["server"]);
    let per = |k: &str| n["per_unit"][k].as_f64().unwrap_or(-1.0);
    assert!(per("rx_packets") >= 0.9 && per("tx_packets") >= 0.9, "{n}");
    let kicks = n["kicks_per_packet"].as_f64().expect("kicks per packet");
    let irqs = n["irqs_per_packet"].as_f64().expect("irqs per packet");
    assert!(kicks > 0.0 && kicks <= 2.0, "{n}");
    assert!(irqs > 0.0 && irqs <= 2.0, "{n}");
    // The host's end of the connection is the bridge: no virtio device there.
    assert!(
        v["events"]["client"]["nic"].is_null(),
        "{}",
        v["events"]["client"]
    );
    assert_nothing_left(pid);

    // Both ends inside one guest, across its two vCPUs (seed 4's TCP_RR): traffic stays on
    // the guest's loopback, so there is no device to count.
    let (pid, out) = run(&[
        "rr",
        "-l",
        "1s",
        "--placement",
        "guest:loopback",
        "--vcpus",
        "2",
        "--cpus",
        "0,1",
        "--json",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["placement"], "guest:loopback");
    assert!(
        v["outcome"]["transactions"].as_u64().expect("transactions") > 10,
        "{}",
        v["outcome"]
    );
    for side in ["client", "server"] {
        let e = &v["env"][side];
        assert!(
            e["cmdline"].as_str().unwrap_or("").contains("virtperf.ip="),
            "{side} ran in the guest: {}",
            e["cmdline"]
        );
        assert_eq!(e["cpus"], 2, "{side}");
        assert!(
            v["events"][side]["nic"].is_null(),
            "{side}: {}",
            v["events"][side]
        );
    }
    assert_eq!(v["client_cpu"], 0);
    assert_eq!(v["server_cpu"], 1);
    assert_nothing_left(pid);

    // A module parameter the guest kernel does not have fails the boot, naming it.
    let (pid, out) = run(&[
        "rr",
        "-l",
        "1s",
        "--placement",
        "guest",
        "--guest-module",
        "virtio_net.no_such_knob=1",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("virtio_net") && err.contains("no_such_knob"),
        "{err}"
    );
    assert_nothing_left(pid);

    // In an experiment the same guest is a config this machine cannot run: skipped with the
    // reason (stored), like a knob the machine lacks, and the run is complete.
    let dir = common::TempDir::new("guest-lacks");
    let spec = dir.path("lacks.toml");
    std::fs::write(
        &spec,
        "name = \"lacks\"\nduration = \"300ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n\
         [[config]]\nname = \"native\"\n\
         [[config]]\nname = \"lacking\"\nplacement = \"guest\"\n\
         guest = { modules = { \"virtio_net.no_such_knob\" = 1 } }\n",
    )
    .expect("spec");
    let db = dir.path("r.db");
    let (pid, out) = run(&[
        "run",
        spec.to_str().expect("utf-8"),
        "--db",
        db.to_str().expect("utf-8"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("config lacking skipped") && err.contains("no_such_knob"),
        "{err}"
    );
    let shown = common::run_db_ok(&["show", "last"], &db);
    assert!(shown.contains("complete"), "{shown}");
    assert!(
        shown.contains("lacking") && shown.contains("skipped: "),
        "{shown}"
    );
    assert_nothing_left(pid);
}

/// A device option QEMU would refuse is refused before anything boots, in one line naming
/// the key and what is allowed; so are options without a guest.
#[test]
fn bad_device_options_fail_before_booting() {
    if std::process::Command::new("qemu-system-x86_64")
        .arg("--version")
        .output()
        .is_err()
    {
        virtperf_testkit::skip("qemu", "qemu-system-x86_64 is not installed");
        return;
    }
    for (flag, needles) in [
        (
            "rx_queue_size=1000",
            &["rx_queue_size=1000", "power of 2"][..],
        ),
        ("rx_queue_siz=1024", &["rx_queue_siz", "rx_queue_size"][..]),
        ("mrg_rxbuf=maybe", &["mrg_rxbuf", "on or off"][..]),
        ("netdev=x", &["netdev", "sets this itself"][..]),
        ("rx_queue_size=1e30", &["rx_queue_size", "whole number"][..]),
    ] {
        let (pid, out) = run(&["rr", "-l", "1s", "--placement", "guest", "--virtio", flag]);
        assert!(!out.status.success(), "{flag} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_one_line_error(&err, needles[0]);
        for n in needles {
            assert!(err.contains(n), "{flag}: {err}");
        }
        assert!(!err.contains("booting"), "{flag}: nothing boots: {err}");
        assert!(qemus_of(pid).is_empty());
    }
    let (code, err) = common::run_fail(&["rr", "--virtio", "rx_queue_size=1024"]);
    assert_ne!(code, 0);
    assert_one_line_error(&err, "--placement guest");
    let (code, err) = common::run_fail(&["rr", "--placement", "guest", "--virtio", "1024"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("KEY=VALUE"), "{err}");
}

#[test]
fn guest_errors_are_one_line_and_leave_nothing() {
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    // An rr across a guest with `extra` flags must fail, leave nothing, and say `needles`.
    let fails = |extra: &[&str], needles: &[&str]| {
        let mut args = vec!["rr", "-l", "1s", "--placement", "guest"];
        args.extend_from_slice(extra);
        let (pid, out) = run(&args);
        assert!(!out.status.success(), "{extra:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        for n in needles {
            assert!(err.contains(n), "{extra:?}: {err}");
        }
        assert_nothing_left(pid);
        err.into_owned()
    };
    let err = fails(&["--kernel", "/nonexistent/bzImage"], &["does not exist"]);
    assert_one_line_error(&err, "does not exist");

    // A file that is no kernel: QEMU refuses it, and we say what QEMU said.
    let scratch = common::TempDir::new("bogus-kernel");
    let bogus = scratch.path("bzImage");
    std::fs::write(&bogus, b"not a kernel").expect("write");
    fails(
        &["--kernel", bogus.to_str().expect("utf-8")],
        &["exited", "before the guest was ready"],
    );

    // A guest that cannot be ready in time: the console tail is shown.
    fails(
        &["--boot-timeout", "200ms"],
        &["did not report ready within", "console tail"],
    );

    // vhost-net asked for where the host has none.
    if !std::path::Path::new("/dev/vhost-net").exists() {
        let err = fails(&["--vhost", "on"], &["/dev/vhost-net does not exist"]);
        assert_one_line_error(&err, "/dev/vhost-net does not exist");
    }

    // QEMU absent (as far as this PATH goes): one line saying what to install.
    let out = vp()
        .args(["rr", "-l", "1s", "--placement", "guest"])
        .env("PATH", "/nonexistent")
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert_one_line_error(
        &String::from_utf8_lossy(&out.stderr),
        "apt-get install qemu-system-x86",
    );

    // Not root: said in one line before anything is created (run as nobody where runuser
    // exists and nobody can reach the binary).
    let bin = env!("CARGO_BIN_EXE_virtperf");
    if let Ok(out) = std::process::Command::new("runuser")
        .args([
            "-u",
            "nobody",
            "--",
            bin,
            "rr",
            "-l",
            "1s",
            "--placement",
            "guest",
        ])
        .output()
    {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("virtperf: error:") {
            assert!(!out.status.success());
            assert_one_line_error(&err, "need root");
        } else {
            virtperf_testkit::skip(
                "root",
                &format!("not-root case: nobody cannot run {bin}: {err}"),
            );
        }
    }

    // A field a driving guest cannot carry: refused before any boot (issue 41: dropped before).
    let (pid, out) = run(&["rr", "--placement", "guest:guest-host", "--capture", "/x"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_one_line_error(&err, "--capture is not carried");
    assert!(
        !out.status.success() && err.contains("guest:guest-host"),
        "{err}"
    );
    assert_nothing_left(pid);

    let (code, err) = common::run_fail(&["rr", "--placement", "guest:sideways"]);
    assert_eq!(code, 2);
    assert!(err.contains("guest:guest-host"), "{err}");
}

#[test]
fn vm_compare_stores_native_and_guest_side_by_side() {
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    let dir = common::TempDir::new("vmcmp");
    let db = dir.path("r.db");
    let out = run_with_timeout(
        vp().args([
            "vm",
            "compare",
            "--workloads",
            "rr",
            "--runs",
            "2",
            "-l",
            "500ms",
            "--json",
            "--db",
            db.to_str().expect("utf-8"),
        ]),
        Duration::from_secs(240),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let rows = v["rows"].as_array().expect("rows");
    let rate = rows
        .iter()
        .find(|r| r["metric"] == "rate_per_s")
        .expect("rate row");
    let (native, guest) = (
        rate["native"].as_f64().expect("native"),
        rate["guest"].as_f64().expect("guest"),
    );
    assert!(native > 0.0 && guest > 0.0, "{rate}");
    let ratio = rate["ratio"].as_f64().expect("ratio");
    assert!((ratio - guest / native).abs() < 1e-9, "{rate}");
    assert_eq!(v["guest"]["direction"], "host-guest");
    // The run is an ordinary stored experiment.
    let show = vp()
        .args(["show", "1", "--db", db.to_str().expect("utf-8")])
        .output()
        .expect("show");
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("native") && text.contains("guest"), "{text}");
}

#[test]
fn ctrl_c_during_a_guest_run_leaves_nothing() {
    if let Some((need, why)) = missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    let mut child = vp()
        .args(["rr", "-l", "60s", "--placement", "guest", "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn virtperf");
    let pid = child.id();
    // Wait until the guest is up (its QEMU exists), then interrupt as a terminal would.
    let t0 = std::time::Instant::now();
    while qemus_of(pid).is_empty() || namespaces_of(pid).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(120), "no guest appeared");
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "virtperf ended early"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
    let out = common::wait_output(child, Duration::from_secs(30));
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // QEMU gets SIGKILL; give the kernel a moment to reap it.
    let t0 = std::time::Instant::now();
    while !qemus_of(pid).is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_nothing_left(pid);
}

#[test]
fn cleanup_removes_run_directories_of_dead_runs_only() {
    use virtperf_machine::state::{write_durably, Owned, Owner, Resource};
    // Run directories recorded by a killed run (PID of a reaped child) and by a live one
    // (this test), and one that looks like a run directory but was never recorded.
    let state = std::env::temp_dir().join(format!("vp-guest-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state);
    let mut dead = std::process::Command::new("true").spawn().expect("spawn");
    let dead_pid = dead.id();
    dead.wait().expect("wait");
    let stale = std::env::temp_dir().join(format!("vp-{dead_pid}-0"));
    let unmarked = std::env::temp_dir().join(format!("vp-{dead_pid}-1"));
    let live = std::env::temp_dir().join(format!("vp-{}-77", std::process::id()));
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .expect("boot id")
        .trim()
        .to_string();
    for (d, owner) in [
        (
            &stale,
            Some(Owner {
                pid: dead_pid,
                start: 1,
                boot_id,
            }),
        ),
        (&live, Some(Owner::me())),
        (&unmarked, None),
    ] {
        std::fs::create_dir_all(d).expect("dir");
        std::fs::write(d.join("initramfs.cpio"), b"x").expect("file");
        if let Some(owner) = owner {
            let rec = Owned {
                owner,
                resource: Resource::Dir { path: d.clone() },
            };
            let name = d.file_name().unwrap().to_string_lossy().into_owned();
            write_durably(&state.join("owned").join(format!("{name}.json")), &rec).expect("marker");
        }
    }
    let out = vp()
        .env("VIRTPERF_STATE_DIR", &state)
        .arg("cleanup")
        .output()
        .expect("cleanup");
    let text = String::from_utf8_lossy(&out.stdout);
    let (live_kept, unmarked_kept) = (live.exists(), unmarked.exists());
    let _ = std::fs::remove_dir_all(&live);
    let _ = std::fs::remove_dir_all(&unmarked);
    let _ = std::fs::remove_dir_all(&state);
    common::assert_ok(&out);
    assert!(text.contains(&stale.display().to_string()), "{text}");
    assert!(!stale.exists(), "stale run directory kept");
    assert!(
        live_kept && unmarked_kept,
        "removed a live or unrecorded directory: {text}"
    );
    assert!(!text.contains(&live.display().to_string()), "{text}");
}
