//! A real libvirt (issue 55): Debian's libvirtd, started by the test where none answers
//! (as CI starts its PostgreSQL servers) and stopped after, runs a TCG domain defined from
//! `vm initramfs --libvirt-xml`; then the commands docs/own-vm.md gives a libvirt user,
//! typed as there, each checked against what the test reads itself: libvirt's PID file,
//! its QEMU's thread names, /proc.
//!
//! Where libvirt is installed but cannot start, the test fails (it never skips then).
//!
//! A module of `own_vm.rs` (not a test binary of its own), so its domain boots while the
//! other own-VM tests run instead of after them.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::common::{run_with_timeout, vp};

const URI: &str = "qemu:///system";

/// Daemons this test started (none where a libvirtd already answered), stopped by PID.
struct Daemons(Vec<Child>);

impl Drop for Daemons {
    fn drop(&mut self) {
        // libvirtd first: it may still write through virtlogd while it stops.
        for c in self.0.iter_mut().rev() {
            // SAFETY: kill on a PID this test started and has not reaped yet.
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let t0 = Instant::now();
            while c.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn virsh(args: &[&str]) -> Output {
    run_with_timeout(
        Command::new("virsh").args(["-c", URI]).args(args),
        Duration::from_secs(60),
    )
}

/// `tool` on PATH, else in /usr/sbin (where Debian puts libvirt's daemons, and which a
/// non-login PATH may lack).
fn sbin(tool: &str) -> Option<std::path::PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(tool))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain([std::path::Path::new("/usr/sbin").join(tool)])
        .find(|p| p.is_file())
}

/// A daemon in the foreground, ended with the test even if the test is killed.
fn daemon(cmd: &std::path::Path, log: &std::path::Path) -> Child {
    let err = std::fs::File::create(log).expect("daemon log");
    let mut c = Command::new(cmd);
    c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(err);
    // SAFETY: prctl is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        c.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
    c.spawn().unwrap_or_else(|e| {
        panic!(
            "libvirt is installed but {} does not start: {e}",
            cmd.display()
        )
    })
}

/// libvirt's system daemon answering on [`URI`]: the one running, or virtlogd and libvirtd
/// started here. None (skip printed) where libvirt is not installed or we are not root.
fn libvirt(dir: &common::TempDir) -> Option<Daemons> {
    let (Some(libvirtd), Some(virtlogd), Some(_)) =
        (sbin("libvirtd"), sbin("virtlogd"), sbin("virsh"))
    else {
        virtperf_testkit::skip(
            "libvirt",
            "libvirtd and virsh are not installed (apt-get install libvirt-daemon-system libvirt-clients)",
        );
        return None;
    };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        virtperf_testkit::skip(
            "root",
            "libvirt's system daemon (qemu:///system) needs root",
        );
        return None;
    }
    if virsh(&["version"]).status.success() {
        return Some(Daemons(Vec::new()));
    }
    let mut started = Daemons(Vec::new());
    started.0.push(daemon(&virtlogd, &dir.path("virtlogd.log")));
    started.0.push(daemon(&libvirtd, &dir.path("libvirtd.log")));
    let t0 = Instant::now();
    while !virsh(&["version"]).status.success() {
        let log = std::fs::read_to_string(dir.path("libvirtd.log")).unwrap_or_default();
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "libvirt is installed but libvirtd does not answer on {URI} after 30 s: {log}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    Some(started)
}

/// A domain this test defined and started, destroyed and undefined however the test ends.
struct Domain(String);

impl Drop for Domain {
    fn drop(&mut self) {
        let _ = virsh(&["destroy", &self.0]);
        let _ = virsh(&["undefine", &self.0]);
    }
}

/// `vm initramfs --libvirt-xml` for a domain `name` whose agent listens on `port` (data
/// range the next four), then `virsh define` and `virsh start` as the user would; waits
/// for the agent's ready line in the console log the definition names.
fn start_domain(dir: &common::TempDir, name: &str, port: u16) -> Domain {
    let out = run_with_timeout(
        vp().args(["vm", "initramfs", "-o"])
            .arg(dir.path("vp.cpio"))
            .args(["--name", name, "--port", &port.to_string(), "--data-ports"])
            .arg(format!("{}-{}", port + 1, port + 4))
            .args(["--libvirt-xml", "--json"]),
        Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let xml = dir.path(&format!("{name}.xml"));
    std::fs::write(&xml, v["libvirt_xml"].as_str().expect("libvirt_xml")).expect("xml");
    let ready = v["ready_line"].as_str().expect("ready line");
    let log = dir.path("vp.console.log");
    let defined = virsh(&["define", &xml.display().to_string()]);
    assert!(defined.status.success(), "virsh define: {defined:?}");
    let domain = Domain(name.to_string());
    let started = virsh(&["start", name]);
    assert!(started.status.success(), "virsh start: {started:?}");
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(ready) {
            return domain;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(150),
            "domain not ready: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// `rr --vm libvirt:NAME`: the PID is libvirt's (its PID file), the vCPU thread is found
/// by the name libvirt's `-name guest=…,debug-threads=on` gives it, the window is the
/// trial's, and the vCPU time in it fits in what /proc counted around the command.
fn rr_sees_the_domain(name: &str, port: &str, pid: u32) {
    let before = super::thread_ticks(pid, "CPU ");
    let spec = format!("libvirt:{name}");
    let out = run_with_timeout(
        vp().args(["rr", "--host", "127.0.0.1", "--port", port, "-l", "3s"])
            .args(["--vm", &spec, "--json"]),
        Duration::from_secs(120),
    );
    let proc_s = (super::thread_ticks(pid, "CPU ") - before) as f64 / 100.0; // USER_HZ on x86_64 Linux
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_of(&out);
    let h = &r["host_vm"];
    assert_eq!(h["spec"], spec.as_str(), "{h}");
    assert_eq!(h["pid"], pid, "{h}");
    assert_eq!(
        (h["vmm"].as_str(), h["accel"].as_str()),
        (Some("qemu"), Some("tcg")),
        "{h}"
    );
    let window = h["window_s"].as_f64().expect("window");
    let elapsed = r["outcome"]["elapsed_s"].as_f64().expect("elapsed");
    assert!(
        (window - elapsed).abs() < 0.05 * elapsed,
        "window {window} s, trial {elapsed} s"
    );
    let vcpu = h["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .find(|c| c["class"] == "vcpu")
        .unwrap_or_else(|| panic!("no vcpu class: {h}"));
    assert_eq!(vcpu["names"], serde_json::json!(["CPU 0/TCG"]), "{vcpu}");
    let cpu_s = vcpu["cpu_s"].as_f64().expect("cpu_s");
    assert!(
        cpu_s > 0.1 && cpu_s <= proc_s + 0.05,
        "vCPU {cpu_s} s in the window, /proc {proc_s} s around the command"
    );
    let per_tr = vcpu["per_unit"]["cpu_us"].as_f64().expect("cpu_us");
    let tx = r["outcome"]["transactions"].as_f64().expect("transactions");
    assert!(
        (per_tr * tx / 1e6 - cpu_s).abs() < 0.01 * cpu_s,
        "{vcpu} over {tx} transactions"
    );
    assert!(vcpu["per_unit"]["run_delay_us"].is_number(), "{vcpu}");
}

/// `vm compare --vm libvirt:NAME`: exit 3 over a gate the TCG guest's round trip cannot
/// meet, exit 0 under one no throughput tax reaches; the guest side's trials carry the
/// host view, the native side's none.
fn vm_compare_gates_with_the_host_view(name: &str, port: &str, db: &std::path::Path) {
    // Five tries each: three leave a slow native try able to stretch the baseline's
    // interval to 0, where the tax has no interval and the gate is rightly undecided.
    let run = |workload: &str, max: &str| {
        let out = run_with_timeout(
            vp().args(["vm", "compare", "--native", "local", "--guest"])
                .arg(format!("remote:127.0.0.1:{port}"))
                .args(["--vm", &format!("libvirt:{name}"), "--workloads", workload])
                .args([
                    "--max-tax",
                    max,
                    "-l",
                    "1s",
                    "--runs",
                    "5",
                    "--json",
                    "--db",
                ])
                .arg(db),
            Duration::from_secs(180),
        );
        let v = json_of(&out);
        (
            out.status.code(),
            v,
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let (code, v, err) = run("rr", "rr=5%");
    assert_eq!(code, Some(3), "{err}");
    common::assert_one_line_error(&err, "over --max-tax");
    let rows = v["host_vm"]["rows"].as_array().expect("host_vm rows");
    let vcpu = rows
        .iter()
        .find(|r| r["metric"] == "host_vcpu_us")
        .unwrap_or_else(|| panic!("no vCPU row: {v}"));
    assert_eq!(vcpu["n"], 5, "{vcpu}");
    assert!(vcpu["mean"].as_f64().is_some_and(|m| m > 0.0), "{vcpu}");
    let (code, v, err) = run("stream", "stream=1000%");
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(v["gate"]["outcome"], "met", "{v}");
    let run_id = v["run_id"].as_i64().expect("run id").to_string();
    let out = run_with_timeout(
        vp().args(["export", &run_id, "--format", "json", "--db"])
            .arg(db),
        Duration::from_secs(60),
    );
    let rows = json_of(&out);
    let watched: std::collections::BTreeSet<&str> = rows
        .as_array()
        .expect("rows")
        .iter()
        .filter(|r| r["metric"] == "host_vcpu_us")
        .filter_map(|r| r["config"].as_str())
        .collect();
    assert_eq!(
        watched,
        ["guest"].into(),
        "host view stored on: {watched:?}"
    );
}

/// The libvirt section of docs/own-vm.md, against a real libvirtd and a domain defined
/// from `vm initramfs --libvirt-xml`: `rr --vm libvirt:NAME`, `vm watch`, `vm compare`
/// with a gate both ways, `tune --vm` with the VM's share in the cost.
#[test]
fn a_libvirt_domain_end_to_end() {
    let dir = common::TempDir::new("libvirt");
    let Some(_daemons) = libvirt(&dir) else {
        return;
    };
    if let Some((need, why)) = common::guest_tools_missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    let name = format!("vp-e2e-{}", std::process::id());
    let base = common::free_port_block(5);
    let domain = start_domain(&dir, &name, base);
    let pid: u32 = std::fs::read_to_string(format!("/run/libvirt/qemu/{name}.pid"))
        .expect("libvirt's PID file")
        .trim()
        .parse()
        .expect("PID");
    let port = base.to_string();
    rr_sees_the_domain(&name, &port, pid);

    let w = super::watched(&format!("libvirt:{name}"), "1s");
    assert_eq!(w["pid"], pid, "{w}");
    assert!(w["classes"].to_string().contains("CPU 0/TCG"), "{w}");

    vm_compare_gates_with_the_host_view(&name, &port, &dir.path("compare.db"));

    let out = run_with_timeout(
        vp().args(["tune", "--goal", "p50<=1s", "--placement"])
            .arg(format!("remote:127.0.0.1:{port}"))
            .args(["--vm", &format!("libvirt:{name}"), "--only", "spin"])
            // 1 s trials: a 300 ms spin trial once completed no transaction beside three
            // test threads (bench/RESULTS.md, tenth part), as the fleet battery's did.
            .args(["-l", "1s", "--runs", "2", "--json", "--db"])
            .arg(dir.path("tune.db")),
        Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json_of(&out);
    let measured = v["measured"].as_array().expect("measured");
    assert!(!measured.is_empty(), "{v}");
    for c in measured {
        let (busy, vm) = (c["cpus_busy"].as_f64(), c["vm_cpus"].as_f64());
        // The trials' warnings are on tune's stderr: a trial that completed no
        // transaction (seen once with a third test thread) has no busy CPUs, and says why.
        assert!(
            matches!((busy, vm), (Some(b), Some(m)) if m > 0.0 && m <= b * 1.05),
            "no VM share in the cost: {c}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    drop(domain);
    let gone = virsh(&["dominfo", &name]);
    assert!(!gone.status.success(), "domain {name} still defined");
}
