//! Helpers for the integration tests: run the real binary, start a real agent.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The virtperf binary under test (without a token a developer may have in the
/// environment: tests say which token they use).
///
/// Tests run in parallel and check behaviour, not speed: they measure beside each other
/// (`VIRTPERF_ALLOW_CONCURRENT`) instead of queueing on the machine lock, whose own tests
/// (tests/lock.rs) remove the variable.
pub fn vp() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_virtperf"));
    c.env_remove("VIRTPERF_TOKEN");
    c.env_remove("VIRTPERF_LOCK_NONCE");
    c.env("VIRTPERF_ALLOW_CONCURRENT", "1");
    c
}

/// Runs virtperf with `args`, asserts success, parses stdout as JSON.
pub fn run_json(args: &[&str]) -> serde_json::Value {
    let out = vp()
        .args(args)
        .arg("--json")
        .output()
        .expect("spawn virtperf");
    assert!(
        out.status.success(),
        "virtperf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout of {args:?} is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Runs virtperf expecting failure; returns (exit code, stderr).
pub fn run_fail(args: &[&str]) -> (i32, String) {
    let out = run_with_timeout(vp().args(args), Duration::from_secs(60));
    assert!(
        !out.status.success(),
        "virtperf {args:?} unexpectedly succeeded"
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs a command, killing it (it is ours) if it outlives `limit`.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    wait_output(child, limit)
}

/// Waits for a child we spawned, killing it if it outlives `limit`. Its output is read
/// while it runs: a child that writes more than a pipe holds (64 KiB: a page's DOM)
/// would otherwise block in `write` and look like a hang.
pub fn wait_output(mut child: Child, limit: Duration) -> Output {
    use std::io::Read;
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            panic!("command did not finish within {limit:?} (hang)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Asserts a finished command succeeded, showing its stderr when it did not.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts an error message is a single line naming the problem.
pub fn assert_one_line_error(stderr: &str, needle: &str) {
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {stderr:?}");
    assert!(
        lines[0].starts_with("virtperf: error: "),
        "not an error line: {stderr:?}"
    );
    assert!(
        lines[0].to_lowercase().contains(&needle.to_lowercase()),
        "error does not mention {needle:?}: {stderr:?}"
    );
}

/// A command prefix that runs the program after it with a machine lock of its own: in a
/// mount namespace whose /run/virtperf is a fresh tmpfs, as on another machine. Root only.
#[allow(dead_code)]
pub const OWN_LOCK: [&str; 7] = [
    "unshare",
    "--mount",
    "--propagation",
    "private",
    "sh",
    "-c",
    "mkdir -p /run/virtperf && mount -t tmpfs tmpfs /run/virtperf && exec \"$0\" \"$@\"",
];

/// A `virtperf serve` process on a free loopback port; killed on drop.
pub struct Agent {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Agent {
    pub fn start(extra: &[&str]) -> Agent {
        Agent::start_from(vp(), extra)
    }

    /// Like [`Agent::start`], from a command the caller prepared (its environment).
    pub fn start_from(mut base: Command, extra: &[&str]) -> Agent {
        base.args([
            "serve",
            "--bind",
            "127.0.0.1",
            "--port",
            "0",
            "--announce",
            "--quiet",
        ])
        .args(extra);
        Agent::start_raw(base)
    }

    /// An agent from a whole command line the caller wrote (`serve … --announce`).
    #[allow(dead_code)]
    pub fn start_raw(mut c: Command) -> Agent {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn agent");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("agent announces");
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("bad announce line {line:?}"));
        Agent { child, addr }
    }

    /// A `virtperf serve` whose machine lock is its own (a tmpfs over /run/virtperf in a
    /// mount namespace of its own): an agent on "another machine", which runs one test at a
    /// time under that lock. Needs root.
    #[allow(dead_code)]
    pub fn with_its_own_lock(extra: &[&str]) -> Agent {
        let mut c = Command::new(OWN_LOCK[0]);
        c.args(&OWN_LOCK[1..]).arg(env!("CARGO_BIN_EXE_virtperf"));
        Agent::start_from(c, extra)
    }

    /// The agent's process id.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn port(&self) -> String {
        self.addr.port().to_string()
    }

    /// True while the agent process is alive.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads a float at a JSON pointer.
pub fn f(v: &serde_json::Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(|x| x.as_f64())
        .unwrap_or_else(|| panic!("no number at {ptr} in {v}"))
}

/// Reads an unsigned integer at a JSON pointer.
pub fn u(v: &serde_json::Value, ptr: &str) -> u64 {
    v.pointer(ptr)
        .and_then(|x| x.as_u64())
        .unwrap_or_else(|| panic!("no integer at {ptr} in {v}"))
}

/// Runs virtperf with `args` to completion and returns its PID (to look for what it may
/// have left behind, named after it) and its output.
pub fn run_pid(args: &[&str]) -> (u32, Output) {
    let child = vp()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn virtperf");
    let pid = child.id();
    (pid, child.wait_with_output().expect("wait"))
}

/// What this machine lacks to boot a guest virtperf builds (the capability and why): QEMU,
/// and Debian's archive for the default kernel. Root and a tap are asked by those who need
/// them.
pub fn guest_tools_missing() -> Option<(&'static str, &'static str)> {
    let runs = |tool: &str| Command::new(tool).arg("--version").output().is_ok();
    if !runs("qemu-system-x86_64") {
        return Some((
            "qemu",
            "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)",
        ));
    }
    if !runs("apt-cache") {
        return Some((
            "apt",
            "the default guest kernel comes from Debian's archive (no apt-cache here)",
        ));
    }
    None
}

/// What this machine lacks for a guest placement (root, a tap device, QEMU, the kernel's
/// source): the capability and why.
pub fn guest_placement_missing() -> Option<(&'static str, &'static str)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some(("root", "guest placements need root"));
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        return Some(("tun", "no /dev/net/tun here (guests need a tap device)"));
    }
    guest_tools_missing()
}

/// Network namespaces named after run `pid` (`vp-<pid>-…`): what that run created.
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("vp-{pid}-")))
        .map(str::to_string)
        .collect()
}

/// Renders the report in headless Chromium when it is installed: a screenshot is taken, the
/// DOM has at least `min_plots` plots, and the page logs no console errors.
pub fn chromium_renders(html: &std::path::Path, scratch: &std::path::Path, min_plots: usize) {
    let Some(chromium) = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find(|c| {
            std::process::Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        virtperf_testkit::skip(
            "chromium",
            "chromium not installed (apt-get install chromium): HTML not rendered",
        );
        return;
    };
    let flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--enable-logging=stderr",
        "--v=0",
    ];
    let profile = scratch.join("chromium-profile");
    let shot = scratch.join("shot.png");
    let url = format!("file://{}", html.display());
    let out = run_with_timeout(
        std::process::Command::new(chromium)
            .args(flags)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg(format!("--screenshot={}", shot.display()))
            .arg("--window-size=1280,2400")
            .arg(&url),
        Duration::from_secs(90),
    );
    let png = std::fs::read(&shot).unwrap_or_default();
    assert!(
        png.starts_with(b"\x89PNG"),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_with_timeout(
        std::process::Command::new(chromium)
            .args(flags)
            .arg(format!("--user-data-dir={}", profile.display()))
            .arg("--dump-dom")
            .arg(&url),
        Duration::from_secs(90),
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.matches("<svg").count() >= min_plots,
        "plots missing from the rendered DOM"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("CONSOLE"), "console messages: {stderr}");
    let bad = layout_faults(chromium, &flags, html, scratch);
    assert!(bad.is_empty(), "{}: {bad:#?}", html.display());
}

/// Measured in the page, after layout: every text of every chart inside its drawing and
/// no two texts of one chart on top of each other (by more than a pixel's antialiasing
/// sideways and two pixels of line spacing). Returns one line per fault.
fn layout_faults(
    chromium: &str,
    flags: &[&str],
    html: &std::path::Path,
    scratch: &std::path::Path,
) -> Vec<String> {
    const CHECK: &str = r#"<script>
window.addEventListener('load', () => {
  const bad = [];
  document.querySelectorAll('svg').forEach((svg, i) => {
    const sr = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim() !== '');
    const rs = texts.map(t => t.getBoundingClientRect());
    const name = (t) => JSON.stringify(t.textContent.trim());
    rs.forEach((r, j) => {
      if (r.width === 0) return;
      if (r.left < sr.left - 0.5 || r.right > sr.right + 0.5 || r.top < sr.top - 0.5 || r.bottom > sr.bottom + 0.5)
        bad.push('chart ' + i + ': ' + name(texts[j]) + ' crosses the drawing edge');
    });
    for (let a = 0; a < rs.length; a++) for (let b = a + 1; b < rs.length; b++) {
      const x = Math.min(rs[a].right, rs[b].right) - Math.max(rs[a].left, rs[b].left);
      const y = Math.min(rs[a].bottom, rs[b].bottom) - Math.max(rs[a].top, rs[b].top);
      if (x > 1 && y > 2) bad.push('chart ' + i + ': ' + name(texts[a]) + ' overlaps ' + name(texts[b]));
    }
  });
  const p = document.createElement('pre');
  p.id = 'vp-layout';
  p.textContent = JSON.stringify(bad);
  document.body.appendChild(p);
});
</script>"#;
    let page = std::fs::read_to_string(html).expect("the report");
    let checked = scratch.join("layout-check.html");
    std::fs::write(
        &checked,
        page.replace("</body>", &format!("{CHECK}</body>")),
    )
    .expect("write the checked copy");
    let out = run_with_timeout(
        std::process::Command::new(chromium)
            .args(flags)
            .arg(format!(
                "--user-data-dir={}",
                scratch.join("chromium-layout").display()
            ))
            .arg("--window-size=1280,2400")
            .arg("--virtual-time-budget=3000")
            .arg("--dump-dom")
            .arg(format!("file://{}", checked.display())),
        Duration::from_secs(90),
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    let Some(at) = dom.find("<pre id=\"vp-layout\">") else {
        return vec!["the layout check did not run in the page".into()];
    };
    let rest = &dom[at + "<pre id=\"vp-layout\">".len()..];
    let json = rest.split("</pre>").next().unwrap_or("[]");
    let json = json
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    serde_json::from_str(&json)
        .unwrap_or_else(|e| vec![format!("unreadable verdict ({e}): {json}")])
}

/// A scratch directory `vp-{name}-{pid}-{n}` under the system temp dir, emptied first and
/// removed when dropped (also when the test fails). `n` counts this process's directories:
/// the tests of many files share one process, and two may pick the same name.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("vp-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
    pub fn path(&self, name: &str) -> std::path::PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs virtperf with `args` against database `db`, asserts success, returns stdout.
pub fn run_db_ok(args: &[&str], db: &std::path::Path) -> String {
    let out = vp().args(args).arg("--db").arg(db).output().unwrap();
    assert!(
        out.status.success(),
        "virtperf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// cpuidle-haltpoll's window on this machine (a KVM guest's idle loop polls this long
/// before it halts).
pub const HALT_POLL: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

/// A sysfs file set to a value for a test and put back as found when dropped (also when
/// the test fails).
pub struct SysfsAt {
    path: &'static str,
    orig: String,
}

impl SysfsAt {
    /// Sets `path` to `value`; None (the skip printed) where the file is absent (`absent`:
    /// the capability it stands for and why) or this process may not write it.
    pub fn set(path: &'static str, value: &str, absent: (&str, &str)) -> Option<SysfsAt> {
        let Some(orig) = std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_string())
        else {
            virtperf_testkit::skip(absent.0, absent.1);
            return None;
        };
        if std::fs::write(path, value).is_err() {
            virtperf_testkit::skip("root", &format!("needs root to write {path}"));
            return None;
        }
        Some(SysfsAt { path, orig })
    }
}

impl Drop for SysfsAt {
    fn drop(&mut self) {
        let _ = std::fs::write(self.path, &self.orig);
    }
}

/// The cpuidle governor in charge (writable by root).
#[allow(dead_code)]
pub const GOVERNOR: &str = "/sys/devices/system/cpu/cpuidle/current_governor";

/// Whether this kernel has cpuidle governor `g` (the tool's own reader of
/// `available_governors`).
#[allow(dead_code)]
pub fn has_governor(g: &str) -> bool {
    virtperf_measure::env::available_governors().is_some_and(|a| a.iter().any(|x| x == g))
}

/// The cpuidle governor switched to an available one other than haltpoll (the only reader
/// of the guest halt-poll knob), put back as found when dropped; None (the skip printed)
/// where there is no other or it cannot be switched.
#[allow(dead_code)]
pub fn governor_other_than_haltpoll() -> Option<SysfsAt> {
    let avail = virtperf_measure::env::available_governors().unwrap_or_default();
    let Some(other) = avail.iter().find(|g| *g != "haltpoll") else {
        virtperf_testkit::skip("cpuidle", "no cpuidle governor other than haltpoll here");
        return None;
    };
    SysfsAt::set(GOVERNOR, other, ("cpuidle", "no cpuidle governor here"))
}

/// The halt-poll window set to `ns` for a test, put back as found when dropped.
#[allow(dead_code)]
pub fn halt_poll_at(ns: &str) -> Option<SysfsAt> {
    SysfsAt::set(
        HALT_POLL,
        ns,
        ("haltpoll", "no cpuidle-haltpoll guest_halt_poll_ns here"),
    )
}

/// The agent answered every transaction the client counted (beyond `already`: a
/// warm-up's), and at most the one per flow in flight when the interval ended, which
/// completed after it and so is the agent's alone: a client, whether a thread per flow or
/// flows multiplexed on threads, starts none after its interval.
pub fn served_and_in_flight(v: &serde_json::Value, already: u64, flows: u64) {
    let n = u(v, "/outcome/transactions") + already;
    let served = u(v, "/outcome/server_transactions");
    assert!(
        served >= n && served - n <= flows,
        "client counted {n}, agent served {served}, {flows} flows: {}",
        v["outcome"]
    );
}

/// A loopback TCP port nothing listens on (bound, then let go): an agent that is not there.
pub fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a loopback port")
        .port()
}

/// `vm compare --native NATIVE --guest GUEST --workloads W --runs N -l 300ms --json
/// --max-tax GATE --db DB` (token `t` for an agent that wants one): its exit code, JSON and
/// standard error.
pub fn vm_compare_gated(
    native: &str,
    guest: &str,
    workloads: &str,
    runs: &str,
    gate: &str,
    db: &std::path::Path,
) -> (Option<i32>, serde_json::Value, String) {
    vm_compare_gated_for(native, guest, workloads, (runs, "300ms"), gate, db)
}

/// [`vm_compare_gated`] with tries of `len` each (`runs`, `len`).
pub fn vm_compare_gated_for(
    native: &str,
    guest: &str,
    workloads: &str,
    (runs, len): (&str, &str),
    gate: &str,
    db: &std::path::Path,
) -> (Option<i32>, serde_json::Value, String) {
    let out = run_with_timeout(
        vp().args(["vm", "compare", "--native", native, "--guest", guest])
            .args([
                "--workloads",
                workloads,
                "--runs",
                runs,
                "-l",
                len,
                "--json",
            ])
            .args(["--max-tax", gate, "--db"])
            .arg(db)
            .env("VIRTPERF_TOKEN", "t"),
        Duration::from_secs(180),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {err}"));
    (out.status.code(), v, err)
}

/// A block of `n` free TCP and UDP ports on loopback, for the test's own forwards.
///
/// Looked for below the kernel's ephemeral range (`net.ipv4.ip_local_port_range`), where
/// only explicit binds take ports: inside it, the TIME-WAIT sockets a crr-heavy test
/// leaves (32 513 seen, a minute each) can fill every block, and a port handed out by
/// `bind(0)` was seen with no free neighbours. The start varies with the process and the
/// time, so tests running at once rarely try the same block first.
pub fn free_port_block(n: u16) -> u16 {
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let (low, high) = (10_000u16, ephemeral_low.saturating_sub(n));
    assert!(
        high > low,
        "no room below the ephemeral range ({ephemeral_low})"
    );
    let span = u32::from(high - low);
    let seed = std::process::id()
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
    for k in 0..span / u32::from(n) {
        let first = low + ((seed.wrapping_add(k * u32::from(n))) % span) as u16;
        let free = (first..first + n).all(|p| {
            std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, p)).is_ok()
                && std::net::UdpSocket::bind((std::net::Ipv4Addr::LOCALHOST, p)).is_ok()
        });
        if free {
            return first;
        }
    }
    panic!("no {n} free ports on loopback between {low} and {high}");
}
