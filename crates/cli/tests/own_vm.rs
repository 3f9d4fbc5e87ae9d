//! A VM virtperf did not boot, seen from its host: a QEMU the test starts by hand with a
//! plain command line (virtperf's initramfs from `vm initramfs`, user networking), measured
//! with `rr --host … --vm pid:N`; and `vm watch` on a process that holds a KVM VM (`virtperf
//! kvm halt`). Each figure is checked against what the test reads itself.

use crate::common;
#[path = "own_vm_libvirt/mod.rs"]
mod own_vm_libvirt;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{run_with_timeout, vp};

/// Kills and reaps a child the test started, however the test ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// User plus system clock ticks of process `pid`'s threads whose name starts with `prefix`.
fn thread_ticks(pid: u32, prefix: &str) -> u64 {
    let mut sum = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task dir")
        .flatten()
    {
        let p = t.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let stat = std::fs::read_to_string(p.join("stat")).expect("stat");
        let rest = &stat[stat.rfind(')').expect("comm end") + 1..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        sum += f[11].parse::<u64>().expect("utime") + f[12].parse::<u64>().expect("stime");
    }
    sum
}

/// `vm watch --vm SPEC -l LEN --json`, which must succeed.
fn watched(spec: &str, len: &str) -> serde_json::Value {
    let out = run_with_timeout(
        vp().args(["vm", "watch", "--vm", spec, "-l", len, "--json"]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// A host view's vCPU thread class (the test fails without one).
fn vcpu_class(h: &serde_json::Value) -> &serde_json::Value {
    h["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .find(|c| c["class"] == "vcpu")
        .unwrap_or_else(|| panic!("no vcpu class: {h}"))
}

/// Boots QEMU by hand (TCG, user networking forwarding the agent's ports) with the image
/// `vm initramfs` wrote, and waits for its agent. Returns QEMU and the control port.
fn qemu_by_hand(dir: &common::TempDir, name: &str) -> (Reaped, u16) {
    qemu_by_hand_with(dir, name, 1, "")
}

/// [`qemu_by_hand`] with `vcpus` vCPUs and `extra` kernel arguments.
fn qemu_by_hand_with(dir: &common::TempDir, name: &str, vcpus: u32, extra: &str) -> (Reaped, u16) {
    let initrd = dir.path("init.cpio");
    let out = run_with_timeout(
        vp().args(["vm", "initramfs", "-o"])
            .arg(&initrd)
            .arg("--json"),
        Duration::from_secs(300),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let kernel = v["kernel"].as_str().expect("kernel");
    let ready = v["ready_line"].as_str().expect("ready line").to_string();
    let port = common::free_port_block(5);
    let (first, last) = (port + 1, port + 4);
    let append = format!("console=ttyS0 quiet panic=-1 virtperf.ip=10.0.2.15/24 virtperf.port={port} virtperf.data_ports={first}-{last} {extra}");
    let mut net = format!("user,id=n0,hostfwd=tcp:127.0.0.1:{port}-:{port}");
    for p in first..=last {
        net.push_str(&format!(",hostfwd=tcp:127.0.0.1:{p}-:{p}"));
    }
    let console = dir.path("console.log");
    let child = Command::new("qemu-system-x86_64")
        .args(["-name", &format!("{name},debug-threads=on")])
        .args([
            "-machine",
            "pc",
            "-accel",
            "tcg",
            "-m",
            "512",
            "-nodefaults",
            "-smp",
            &vcpus.to_string(),
        ])
        .args([
            "-display",
            "none",
            "-no-reboot",
            "-kernel",
            kernel,
            "-initrd",
        ])
        .arg(&initrd)
        .args(["-append", &append, "-serial"])
        .arg(format!("file:{}", console.display()))
        .args([
            "-netdev",
            &net,
            "-device",
            "virtio-net-pci,netdev=n0,romfile=",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start QEMU");
    let qemu = Reaped(child);
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        if text.contains(&ready) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(150),
            "guest not ready: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    (qemu, port)
}

/// A QEMU started by hand as [`qemu_by_hand_with`] does, in its own directory named after
/// `tag`; None (the skip printed) where this machine cannot boot one.
fn booted(tag: &str, vcpus: u32, extra: &str) -> Option<(common::TempDir, Reaped, u16)> {
    if let Some((need, why)) = common::guest_tools_missing() {
        virtperf_testkit::skip(need, why);
        return None;
    }
    let dir = common::TempDir::new(&format!("own-vm-{tag}"));
    let name = format!("{tag}{}", std::process::id());
    let (qemu, port) = qemu_by_hand_with(&dir, &name, vcpus, extra);
    Some((dir, qemu, port))
}

/// `rr --host … --vm pid:N` against a QEMU started by hand: the vCPU threads' CPU over
/// virtperf's window lies between what /proc says they used over a window inside it
/// (intervals 2–9, marked as their lines arrive) and that plus one vCPU's worth of the part
/// it misses (or, if less, /proc over the whole command), and its per-transaction figure is that CPU over the trial's transactions.
/// A bracket, not a ratio: comparing per-transaction figures over intervals 2–9 against the
/// whole window failed at 0.949 on a loaded CI machine, where the first second (which /proc
/// cannot bracket from here) cost less per transaction than the rest. Run-queue wait per
/// transaction is there; exits are absent with TCG's reason; and `qemu:NAME` finds the same
/// process.
#[test]
fn rr_with_vm_pid_agrees_with_proc_for_a_qemu_started_by_hand() {
    if let Some((need, why)) = common::guest_tools_missing() {
        virtperf_testkit::skip(need, why);
        return;
    }
    let dir = common::TempDir::new("own-vm");
    let name = format!("byhand{}", std::process::id());
    let (qemu, port) = qemu_by_hand(&dir, &name);
    let pid = qemu.0.id();
    let spec = format!("pid:{pid}");
    let port = port.to_string();
    let before = thread_ticks(pid, "CPU ");
    let mut rr = vp()
        .args([
            "rr",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "-l",
            "9s",
            "-i",
            "1s",
        ])
        .args(["--json-stream", "--vm", &spec])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("rr");
    let lines = BufReader::new(rr.stdout.take().expect("stdout"));
    let (mut marks, mut result) = (Vec::new(), None);
    for line in lines.lines() {
        let e: serde_json::Value = serde_json::from_str(&line.expect("line")).expect("JSON line");
        match e["event"].as_str() {
            Some("interval") => marks.push((Instant::now(), thread_ticks(pid, "CPU "))),
            Some("end") => result = Some(e["data"].clone()),
            _ => {}
        }
    }
    let status = rr.wait().expect("wait");
    let after = thread_ticks(pid, "CPU ");
    assert!(status.success(), "rr failed");
    let r = result.expect("an end event");
    assert!(marks.len() >= 4, "{} intervals", marks.len());
    let h = &r["host_vm"];
    assert_eq!(h["pid"], pid, "{h}");
    assert_eq!(h["vmm"], "qemu");
    assert_eq!(h["accel"], "tcg", "{h}");
    assert_eq!(h["unit"], "transaction");
    let vcpu = vcpu_class(h);
    assert!(vcpu["names"].to_string().contains("CPU 0/TCG"), "{vcpu}");
    let window_cpu_s = vcpu["cpu_s"].as_f64().expect("cpu_s");
    // /proc's figures are clock ticks (USER_HZ 100 on Linux x86_64), each read up to one
    // tick short; utime + stime add up to the thread's exact run time (cputime_adjust).
    let tick_s = 0.01;
    let (first, last) = (marks[0], marks[marks.len() - 1]);
    let inside = (last.1 - first.1) as f64 * tick_s;
    let around = (after - before) as f64 * tick_s;
    // The part of the window the inner marks miss is about its first interval; its one vCPU
    // ran at most that long. The marks are taken as their lines arrive, after the intervals
    // end: the last may fall past the window's end by that lag, 3% of the window allowed.
    let window_s = h["window_s"].as_f64().expect("window_s");
    let lag_s = 0.03 * window_s;
    let unseen_s = (window_s - (last.0 - first.0).as_secs_f64()).max(0.0) + lag_s;
    let high = around.min(inside + unseen_s) + 2.0 * tick_s;
    let low = inside - lag_s - 2.0 * tick_s;
    let seen = format!(
        "vCPU CPU: virtperf's window {window_cpu_s:.3} s of {window_s:.2} s; /proc inside it {inside:.3} s, \
         around it {around:.3} s: within [{low:.3}, {high:.3}] s expected"
    );
    eprintln!("{seen}");
    assert!((low..=high).contains(&window_cpu_s), "{seen}");
    let tx = r["outcome"]["transactions"].as_f64().expect("transactions");
    let ours = vcpu["per_unit"]["cpu_us"].as_f64().expect("cpu_us");
    let ratio = ours * tx / (window_cpu_s * 1e6);
    assert!(
        (0.999..=1.001).contains(&ratio),
        "per transaction {ours:.2} µs × {tx} transactions against {window_cpu_s:.4} s: {ratio:.4}"
    );
    assert!(
        vcpu["per_unit"]["run_delay_us"].as_f64().is_some(),
        "{vcpu}"
    );
    assert!(
        h["missing"]["exits"]
            .as_str()
            .is_some_and(|w| w.contains("TCG")),
        "{h}"
    );
    // The same QEMU by its -name.
    let w = watched(&format!("qemu:{name}"), "200ms");
    assert_eq!(w["pid"], pid, "{w}");
    assert!(w["unit"].is_null(), "no test, no unit: {w}");
    drop(qemu);
}

/// Voluntary switches of each thread of `pid`, by TID.
fn switches(pid: u32) -> Vec<(String, u64)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| {
                    let s = std::fs::read_to_string(t.path().join("status")).ok()?;
                    let v = s
                        .lines()
                        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
                        .trim()
                        .parse()
                        .ok()?;
                    Some((t.file_name().to_string_lossy().into_owned(), v))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `virtperf kvm halt` (halt polling off) started and running: its vCPU made (the
/// statistics descriptor open). None, the skip printed, without a usable /dev/kvm or root.
fn kvm_halt_running() -> Option<Reaped> {
    if let Err(e) = virtperf_kvm::available() {
        virtperf_testkit::skip("kvm", &format!("no usable /dev/kvm: {e}"));
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        virtperf_testkit::skip(
            "root",
            "reading another process's KVM statistics needs ptrace access",
        );
        return None;
    }
    let halt = vp()
        .args([
            "kvm",
            "halt",
            "--wakeups",
            "100000",
            "--halt-poll",
            "0",
            "--json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("kvm halt");
    let halt = Reaped(halt);
    let pid = halt.0.id();
    let t0 = Instant::now();
    while !std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|d| {
        d.flatten().any(|e| {
            std::fs::read_link(e.path())
                .is_ok_and(|l| l.to_string_lossy().starts_with("anon_inode:kvm-vcpu-stats"))
        })
    }) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "kvm halt made no vCPU"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Some(halt)
}

/// Issue 52: a watch whose VM exits part-way fails (exit 1) naming it, its window ending
/// where the process did (about 1 s of the 10 s asked); a process that is no VM (a
/// `sleep`) is refused before watching, naming why.
#[test]
fn vm_watch_fails_on_a_vm_that_exits_and_on_what_is_no_vm() {
    let Some(mut halt) = kvm_halt_running() else {
        return;
    };
    let pid = halt.0.id();
    let watch = vp()
        .args([
            "vm",
            "watch",
            "--vm",
            &format!("pid:{pid}"),
            "-l",
            "10s",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vm watch");
    std::thread::sleep(Duration::from_millis(1000));
    let _ = halt.0.kill();
    let _ = halt.0.wait();
    let t0 = Instant::now();
    let out = common::wait_output(watch, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the watch ran on for {:?}",
        t0.elapsed()
    );
    common::assert_one_line_error(&err, "the VM's process exited");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let w = v["window_s"].as_f64().expect("window");
    assert!((0.5..3.0).contains(&w), "window {w} s: {v}");
    // The figures up to its exit are there (not zeros from a sample compared with itself).
    let vcpu = v["classes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["class"] == "vcpu"))
        .unwrap_or_else(|| panic!("no vCPU class: {v}"));
    assert!(
        vcpu["voluntary_switches"].as_u64().is_some_and(|n| n > 0),
        "{vcpu}"
    );
    let sleep = Reaped(
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep"),
    );
    let (code, err) = common::run_fail(&[
        "vm",
        "watch",
        "--vm",
        &format!("pid:{}", sleep.0.id()),
        "-l",
        "1s",
    ]);
    assert_eq!(code, 1, "{err}");
    common::assert_one_line_error(&err, "is not a VM");
}

/// A signal ends a watch where it is and prints the part watched, exit 130 (the command
/// died at once with nothing printed: a long watch stopped with Ctrl-C was lost).
#[test]
fn a_signal_ends_a_vm_watch_with_what_it_watched() {
    let Some(halt) = kvm_halt_running() else {
        return;
    };
    let watch = vp()
        .args(["vm", "watch", "--vm", &format!("pid:{}", halt.0.id())])
        .args(["-l", "60s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("vm watch");
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill(2) on the child this test started, by its PID.
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    let t0 = Instant::now();
    let out = common::wait_output(watch, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert!(
        err.contains("s watched of the 60.0 s asked are printed"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let w = v["window_s"].as_f64().expect("window");
    assert!((0.5..5.0).contains(&w), "window {w} s: {v}");
    vcpu_class(&v);
}

/// `vm watch` on a process holding a KVM VM (`kvm halt` with halt polling off): KVM's
/// count of halts over the watch agrees within 5% with the vCPU thread's voluntary
/// switches in the same window (each halt, unpolled, blocks the thread once): two
/// independent sources, KVM's statistics and the scheduler's. The switches the watch
/// reports are bounded by what the test reads from /proc around the whole command.
#[test]
fn vm_watch_counts_a_kvm_vms_halts_as_its_vcpu_thread_blocks() {
    if let Err(e) = virtperf_kvm::available() {
        virtperf_testkit::skip("kvm", &format!("no usable /dev/kvm: {e}"));
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        virtperf_testkit::skip(
            "root",
            "reading another process's KVM statistics needs ptrace access",
        );
        return;
    }
    let Some(halt) = kvm_halt_running() else {
        return;
    };
    let pid = halt.0.id();
    std::thread::sleep(Duration::from_millis(300));
    let before = switches(pid);
    let out = run_with_timeout(
        vp().args([
            "vm",
            "watch",
            "--vm",
            &format!("pid:{pid}"),
            "-l",
            "4s",
            "--json",
        ]),
        Duration::from_secs(30),
    );
    let after = switches(pid);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let w: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(w["accel"], "kvm", "{w}");
    // Its vCPU thread is named as QEMU names one, so the watch classes it a vCPU.
    let vcpu = vcpu_class(&w);
    assert!(vcpu["names"].to_string().contains("CPU 0/KVM"), "{vcpu}");
    let k = &w["kvm"];
    assert!(!k.is_null(), "KVM counters: {}", w["missing"]);
    let halts = k["counts"]["halt_exits"].as_u64().expect("halt_exits");
    // The scheduler's count in the watch's own window (the command's start-up and exit lie
    // outside it: under CI's load they held a third of the blocks counted around it).
    let in_window = vcpu["voluntary_switches"]
        .as_u64()
        .expect("voluntary_switches");
    let around = after
        .iter()
        .filter_map(|(tid, a)| Some(a - before.iter().find(|(t, _)| t == tid)?.1))
        .max()
        .expect("threads");
    assert!(
        in_window > 0 && in_window <= around,
        "the watch counted {in_window} blocks in its window, the test {around} around it: {vcpu}"
    );
    let ratio = halts as f64 / in_window as f64;
    assert!(
        halts > 1000 && (0.95..=1.05).contains(&ratio),
        "KVM counted {halts} halts, the vCPU thread blocked {in_window} times in the window \
         ({}): {k}",
        k["source"]
    );
    drop(halt);
}

/// `explain --host … --vm pid:N` against a QEMU started by hand with two vCPUs: the battery
/// runs in the guest in one piece while this host samples the VM, and the explained round
/// trip carries the host's view over its own measured window (found from the trial's times
/// on the guest's clock): a window as long as the trial measured, not the battery's, and no
/// more vCPU time in it than two vCPUs can run.
#[test]
fn explain_with_vm_shows_the_hosts_share_of_the_round_trip() {
    let Some((dir, qemu, port)) = booted("explain", 2, "virtperf.token=sesame") else {
        return;
    };
    let pid = qemu.0.id();
    let out = run_with_timeout(
        vp().args([
            "explain",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ])
        .args(["--token", "sesame", "--vm", &format!("pid:{pid}")])
        .args(["--quick", "--tries", "1", "-l", "1s", "--json", "--db"])
        .arg(dir.path("e.db"))
        .arg("-o")
        .arg(dir.path("explain.html")),
        Duration::from_secs(400),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let h = &v["host"];
    assert_eq!(h["pid"], pid, "{h}");
    assert_eq!(h["accel"], "tcg", "{h}");
    assert_eq!(h["unit"], "transaction", "{h}");
    let window = h["window_s"].as_f64().expect("window");
    // The trial measured 1 s; the battery around it ran far longer.
    assert!(
        (0.7..1.4).contains(&window),
        "host window {window} s for a 1 s trial: {h}"
    );
    let vcpu = vcpu_class(h);
    let cpu_s = vcpu["cpu_s"].as_f64().expect("cpu_s");
    assert!(
        cpu_s > 0.0 && cpu_s <= 2.0 * window * 1.05,
        "{cpu_s} s of vCPU time in a {window} s window"
    );
    assert!(
        vcpu["per_unit"]["cpu_us"].as_f64().is_some_and(|c| c > 0.0),
        "{vcpu}"
    );
    assert!(h["missing"]["window"]
        .as_str()
        .is_some_and(|w| w.contains("sampled every")));
    // Every round trip of the battery has the host's view over its own window — the
    // remedies' and modes' too, so `show` and `compare` judge them on the host's figures.
    let db = rusqlite::Connection::open(dir.path("e.db")).expect("db");
    let mut q = db
        .prepare(
            "SELECT config, json_extract(result_json, '$.host_vm.window_s') FROM trials \
             WHERE status = 'ok' AND json_extract(result_json, '$.outcome.kind') = 'rr'",
        )
        .expect("query");
    let rr: Vec<(String, Option<f64>)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(rr.len() > 2, "{rr:?}");
    assert!(rr.iter().all(|(_, w)| w.is_some_and(|w| w > 0.0)), "{rr:?}");
    assert!(rr.iter().any(|(c, _)| c != "as-is"), "{rr:?}");
    // The report shows it too, laid out cleanly in a browser.
    let html = dir.path("explain.html");
    let page = std::fs::read_to_string(&html).expect("report");
    assert!(page.contains("on the VM's host"), "no host section");
    common::chromium_renders(&html, &dir.0, 1);
    drop(qemu);
}

/// `explain --workload stream --host … --vm pid:N` against a QEMU started by hand with two
/// vCPUs: the stream battery runs on the guest's loopback in one piece, each of its stream
/// trials carries this host's view over its own measured window, the explanation's host
/// view says both ends are in the VM, and a CPU bound is named on the host with the
/// figure the JSON's host view holds.
#[test]
fn explain_stream_with_vm_shows_the_vcpu_threads_per_mb() {
    let Some((dir, qemu, port)) = booted("xstream", 2, "virtperf.token=sesame") else {
        return;
    };
    let pid = qemu.0.id();
    let db_path = dir.path("s.db");
    let out = run_with_timeout(
        vp().args(["explain", "--workload", "stream", "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "--token", "sesame"])
            .args(["--vm", &format!("pid:{pid}")])
            .args(["--quick", "--tries", "1", "-l", "1s", "--json", "--db"])
            .arg(&db_path),
        Duration::from_secs(400),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let h = &v["host_view"];
    assert_eq!(h["guest_end"], "both", "{h}");
    assert_eq!(h["accel"], "tcg", "{h}");
    // TCG makes no VM exits: none per MB, and the view says why.
    assert!(h["exits_per_mb"].is_null(), "{h}");
    assert!(
        h["exits_why"].as_str().is_some_and(|w| w.contains("TCG")),
        "{h}"
    );
    let vcpu = h["classes"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["class"] == "vcpu"))
        .unwrap_or_else(|| panic!("no vcpu class: {h}"));
    let busy = vcpu["busy_pct"].as_f64().expect("busy_pct");
    // Two vCPU threads: at most two CPUs' worth of the window.
    assert!(busy > 0.0 && busy <= 2.0 * 100.0 * 1.05, "{vcpu}");
    assert!(
        vcpu["us_per_mb"].as_f64().is_some_and(|x| x > 0.0),
        "{vcpu}"
    );
    if v["bound"]["kind"] == "cpu" {
        let figure = format!("its 2 vCPU threads used {busy:.0}% of a CPU");
        let on_host = v["bound"]["on_host"].as_str().unwrap_or("");
        assert!(on_host.contains(&figure), "{on_host} lacks {figure}");
        assert!(
            v["verdict"].as_str().is_some_and(|s| s.contains(&figure)),
            "{v}"
        );
    }
    // Every stream trial has the host's view over its own window: the trial's length
    // (1 s), not the battery's.
    let db = rusqlite::Connection::open(&db_path).expect("db");
    let mut q = db
        .prepare(
            "SELECT point_label, json_extract(result_json, '$.host_vm.window_s') FROM trials \
             WHERE status = 'ok' AND json_extract(result_json, '$.outcome.kind') = 'stream'",
        )
        .expect("query");
    let rows: Vec<(String, Option<f64>)> = q
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert!(rows.len() > 5, "{rows:?}");
    for (label, w) in &rows {
        let calibration = label.contains("calibration");
        let w = w.unwrap_or_else(|| panic!("{label}: no host window"));
        // The calibration trial is a third as long, at least 1 s: 1 s here too.
        assert!(
            (0.7..1.4).contains(&w),
            "{label}: host window {w} s ({calibration})"
        );
    }
    drop(qemu);
}

/// `tune --placement remote:… --vm pid:N` against a QEMU started by hand: every
/// configuration's trials carry the host's view of the VM, and its cost is this host's
/// busy CPUs once — the VM's threads are in them already, so the agent's own figures from
/// inside the guest are not added (they would be counted twice, above the CPUs this host
/// has) — with the VM's share beside it.
#[test]
fn tune_with_vm_counts_the_vms_host_threads_once() {
    let Some((dir, qemu, port)) = booted("tune", 2, "") else {
        return;
    };
    let pid = qemu.0.id();
    let out = run_with_timeout(
        vp().args(["tune", "--goal", "p50<=1s", "--placement"])
            .arg(format!("remote:127.0.0.1:{port}"))
            .args(["--vm", &format!("pid:{pid}")])
            .args([
                "-l", "300ms", "--runs", "2", "--budget", "3m", "--json", "--db",
            ])
            .arg(dir.path("t.db")),
        Duration::from_secs(400),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let configs = v["measured"].as_array().expect("measured configurations");
    let measured: Vec<&serde_json::Value> = configs
        .iter()
        .filter(|c| c["cpus_busy"].is_number())
        .collect();
    assert!(!measured.is_empty(), "no configuration has a cost: {v}");
    for c in measured {
        let busy = c["cpus_busy"].as_f64().expect("busy");
        let vm = c["vm_cpus"]
            .as_f64()
            .unwrap_or_else(|| panic!("no VM share: {c}"));
        assert!(
            vm > 0.0 && vm <= busy * 1.05,
            "VM {vm} of {busy} busy CPUs: {c}"
        );
        // Polling in idle may add a little; the guest's own view added twice would not fit.
        assert!(
            busy <= host_cpus * 1.1,
            "{busy} busy CPUs on a {host_cpus}-CPU host: {c}"
        );
    }
    // Every measured trial of round 1 has the host's view of the VM, per transaction.
    let run = v["rounds"][0]["run_id"].as_i64().expect("round 1's run");
    let out = run_with_timeout(
        vp().args(["export", &run.to_string(), "--format", "json", "--db"])
            .arg(dir.path("t.db")),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).expect("JSON rows");
    let seqs = |pick: &dyn Fn(&serde_json::Value) -> bool| -> std::collections::BTreeSet<u64> {
        rows.iter()
            .filter(|r| pick(r))
            .filter_map(|r| r["seq"].as_u64())
            .collect()
    };
    let ok = seqs(&|r| r["status"] == "ok");
    let viewed =
        seqs(&|r| r["metric"] == "host_vcpu_us" && r["value"].as_f64().is_some_and(|v| v > 0.0));
    assert!(!ok.is_empty());
    assert_eq!(ok, viewed, "trials without the host's view of the VM");
    drop(qemu);
}
