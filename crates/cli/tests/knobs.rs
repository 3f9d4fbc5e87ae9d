//! Knobs survive any death of the run that changed them: SIGTERM and SIGHUP restore them
//! like Ctrl-C does; after a SIGKILL the journal in the state directory lets `virtperf
//! cleanup` restore them, and `virtperf run` refuses to start until it has.
//! Each test changes its own sysctl (as root; skipped otherwise) and uses a private state
//! directory, and puts the sysctl back itself if an assertion fails half-way.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{assert_one_line_error, vp};

/// A run of a one-config spec that sets `sysctl` to a value other than its current one,
/// with trials of 300 ms, in a private directory (spec, database, state). A test with a
/// case runs [`crate::alone`]: root's knob journal is the machine's, so a case's killed run
/// (a dead journal, on purpose) makes every other run refuse until its cleanup.
struct Case {
    path: String,
    sysctl: String,
    orig: String,
    want: String,
    dir: PathBuf,
}

impl Case {
    fn new(sysctl: &str, tag: &str, a: &str, b: &str) -> Option<Case> {
        let path = format!("/proc/sys/{}", sysctl.replace('.', "/"));
        let orig = std::fs::read_to_string(&path).ok()?.trim().to_string();
        if std::fs::write(&path, &orig).is_err() {
            virtperf_testkit::skip("root", &format!("needs root to write {path}"));
            return None;
        }
        let want = if orig == a { b } else { a }.to_string();
        let dir = std::env::temp_dir().join(format!("vp-knobs-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("s.toml"),
            format!(
                "name = \"knobs\"\nduration = \"300ms\"\nrepetitions = 40\n[[workload]]\nkind = \"rr\"\n\
                 [[config]]\nname = \"changed\"\nsysctl = {{ \"{sysctl}\" = \"{want}\" }}\n"
            ),
        )
        .unwrap();
        Some(Case {
            path,
            sysctl: sysctl.to_string(),
            orig,
            want,
            dir,
        })
    }

    fn now(&self) -> String {
        std::fs::read_to_string(&self.path)
            .unwrap()
            .trim()
            .to_string()
    }

    fn state(&self) -> PathBuf {
        self.dir.join("state")
    }

    fn db(&self) -> PathBuf {
        self.dir.join("r.db")
    }

    /// virtperf with this case's state directory.
    fn vp(&self) -> Command {
        let mut c = vp();
        c.env("VIRTPERF_STATE_DIR", self.state());
        c
    }

    fn start_run(&self) -> Child {
        self.vp()
            .arg("run")
            .arg(self.dir.join("s.toml"))
            .arg("--db")
            .arg(self.db())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Waits until the run has changed the knob and stored `trials` trials.
    fn wait_for_trials(&self, trials: u64) {
        let t0 = Instant::now();
        loop {
            let out = vp()
                .args(["runs", "--json", "--db"])
                .arg(self.db())
                .output()
                .unwrap();
            let n = serde_json::from_slice::<serde_json::Value>(&out.stdout)
                .ok()
                .and_then(|v| v[0]["trials_ok"].as_u64())
                .unwrap_or(0);
            if n >= trials && self.now() == self.want {
                return;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "run made no progress"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The journals naming this case's knob: the machine's (root's journal, issue 53)
    /// and this case's state directory's.
    fn journals(&self) -> Vec<PathBuf> {
        [
            PathBuf::from("/run/virtperf/knobs"),
            self.state().join("knobs"),
        ]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter(|p| {
            std::fs::read_to_string(p).is_ok_and(|t| t.contains(&format!("\"{}\"", self.sysctl)))
        })
        .collect()
    }
}

impl Drop for Case {
    fn drop(&mut self) {
        // Whatever the test asserted, the machine keeps its original value.
        let _ = std::fs::write(&self.path, &self.orig);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn kill(child: &Child, sig: i32) {
    // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

fn wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let t0 = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(t0.elapsed() < limit, "run did not stop within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn runs_json(db: &Path) -> serde_json::Value {
    let out = vp()
        .args(["runs", "--json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap()
}

/// SIGTERM and SIGHUP stop the run like Ctrl-C: between trials, knobs restored, trials
/// kept, run marked incomplete, exit code 128 + the signal's number, journal removed.
fn stops_cleanly_on(sig: i32, sysctl: &str, tag: &str, a: &str, b: &str) {
    let Some(case) = Case::new(sysctl, tag, a, b) else {
        return;
    };
    let mut child = case.start_run();
    case.wait_for_trials(2);
    assert_eq!(
        case.journals().len(),
        1,
        "originals journaled while changed"
    );
    kill(&child, sig);
    let status = wait(&mut child, Duration::from_secs(30));
    assert_eq!(
        status.code(),
        Some(128 + sig),
        "exit code after signal {sig}"
    );
    assert_eq!(
        case.now(),
        case.orig,
        "{sysctl} not restored after signal {sig}"
    );
    assert!(
        case.journals().is_empty(),
        "journal left after a clean stop"
    );
    let v = runs_json(&case.db());
    assert_eq!(v[0]["status"], "incomplete");
    let kept = v[0]["trials_ok"].as_u64().unwrap();
    assert!((2..40).contains(&kept), "kept {kept} trials");
}

#[test]
fn sigterm_restores_knobs_and_keeps_trials() {
    let _alone = crate::alone();
    stops_cleanly_on(libc::SIGTERM, "net.ipv4.tcp_retries1", "term", "4", "5");
}

#[test]
fn sighup_restores_knobs_and_keeps_trials() {
    let _alone = crate::alone();
    stops_cleanly_on(libc::SIGHUP, "net.ipv4.tcp_orphan_retries", "hup", "1", "2");
}

#[test]
fn after_sigkill_run_refuses_until_cleanup_restores_the_knob() {
    let _alone = crate::alone();
    let Some(case) = Case::new("net.ipv4.tcp_max_syn_backlog", "kill", "4097", "4098") else {
        return;
    };
    let mut child = case.start_run();
    case.wait_for_trials(1);
    kill(&child, libc::SIGKILL);
    wait(&mut child, Duration::from_secs(10));
    // Nothing could run on the way out: the knob is still changed, the journal says so.
    assert_eq!(case.now(), case.want);
    assert_eq!(case.journals().len(), 1);

    // A new run would read the leaked value as the original: it refuses, naming the knob
    // and the way out, and changes nothing.
    let out = case
        .vp()
        .arg("run")
        .arg(case.dir.join("s.toml"))
        .arg("--db")
        .arg(case.db())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_one_line_error(&err, &case.sysctl);
    assert!(err.contains("virtperf cleanup"), "{err}");
    assert!(err.contains(&format!("was \"{}\"", case.orig)), "{err}");
    assert_eq!(case.now(), case.want);
    assert_eq!(
        runs_json(&case.db()).as_array().unwrap().len(),
        1,
        "no new run stored"
    );

    // A single test measures, but says it measured with the leaked knob.
    let out = case
        .vp()
        .args(["rr", "-l", "100ms", "--json"])
        .output()
        .unwrap();
    common::assert_ok(&out);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("killed virtperf run") && warnings.contains(&case.sysctl),
        "{warnings}"
    );

    // cleanup puts it back and forgets the journal.
    let out = case.vp().arg("cleanup").output().unwrap();
    common::assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("restored {}", case.sysctl)),
        "{text}"
    );
    assert_eq!(case.now(), case.orig, "cleanup did not restore the knob");
    assert!(case.journals().is_empty());
    let out = case.vp().arg("cleanup").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to clean up"));
}

#[test]
fn a_damaged_journal_is_reported_not_ignored() {
    let _beside = crate::beside();
    let dir = std::env::temp_dir().join(format!("vp-knobs-junk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("knobs")).unwrap();
    std::fs::write(dir.join("knobs/123-456.json"), "{\"owner\": {\"pid\"").unwrap();
    let out = vp()
        .env("VIRTPERF_STATE_DIR", &dir)
        .arg("cleanup")
        .output()
        .unwrap();
    let json = vp()
        .env("VIRTPERF_STATE_DIR", &dir)
        .args(["cleanup", "--json"])
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("123-456.json"), "{err}");
    // --json: the same, as data; still a failure.
    assert_eq!(json.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        v["failed"][0].as_str().unwrap().contains("123-456.json"),
        "{v}"
    );
    assert!(v["done"].as_array().is_some(), "{v}");
}

/// Under a governor that does not read it, a config's nonzero halt-poll window would
/// measure the as-is idle path under its own name: it is skipped saying so, before the knob
/// is written, while the window of 0 (what such an idle loop does anyway) runs, and so does
/// the same window in a config that switches to the haltpoll governor itself (its setup
/// hook sees haltpoll in charge; the governor found is back after the run).
#[test]
fn a_halt_poll_window_no_governor_reads_is_skipped() {
    let _alone = crate::alone();
    let Some(before) = std::fs::read_to_string(common::HALT_POLL).ok() else {
        virtperf_testkit::skip("haltpoll", "no haltpoll.guest_halt_poll_ns here");
        return;
    };
    let Some(gov) = common::governor_other_than_haltpoll() else {
        return;
    };
    let d = common::TempDir::new("knob-inert-poll");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        "name = \"s\"\nduration = \"200ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\n\
         [[config]]\nname = \"no-poll\"\nmodule = { \"haltpoll.guest_halt_poll_ns\" = 0 }\n\
         [[config]]\nname = \"poll-50us\"\nmodule = { \"haltpoll.guest_halt_poll_ns\" = 50000 }\n\
         [[config]]\nname = \"switched\"\ncpuidle_governor = \"haltpoll\"\n\
         module = { \"haltpoll.guest_halt_poll_ns\" = 50000 }\n\
         setup = \"cat /sys/devices/system/cpu/cpuidle/current_governor > SEEN\"\n",
    )
    .unwrap();
    let seen = d.path("seen");
    let text = std::fs::read_to_string(&spec).unwrap();
    std::fs::write(&spec, text.replace("SEEN", seen.to_str().unwrap())).unwrap();
    let out = vp()
        .args(["run", spec.to_str().unwrap(), "--db"])
        .arg(d.path("r.db"))
        .output()
        .unwrap();
    let now = std::fs::read_to_string(common::GOVERNOR).unwrap_or_default();
    drop(gov);
    common::assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config poll-50us skipped")
            && err.contains("haltpoll.guest_halt_poll_ns = 50000 has no effect here")
            && err.contains(&format!("governor is {}", now.trim())),
        "{err}"
    );
    assert!(!err.contains("config no-poll skipped"), "{err}");
    assert!(!err.contains("config switched skipped"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&seen)
            .ok()
            .as_deref()
            .map(str::trim),
        Some("haltpoll"),
        "the switched config's trials ran under another governor"
    );
    assert_ne!(
        now.trim(),
        "haltpoll",
        "the governor found was not put back"
    );
    assert_eq!(
        std::fs::read_to_string(common::HALT_POLL).ok().as_deref(),
        Some(before.as_str()),
        "the knob is not as found"
    );
}

/// Switching off every halting cpuidle state does what it says under a governor that reads
/// the switches: a config that runs under `menu` with them off (as seed 4's
/// `no-halt-state` now does) leaves its CPUs polling, so its wake-ups need no IPI (0.01
/// per transaction here against 1.00 halting), and the governor and switches found are
/// back after the run.
#[test]
fn halting_states_switched_off_under_menu_keep_cpus_polling() {
    let _alone = crate::alone();
    let base = Path::new("/sys/devices/system/cpu/cpu0/cpuidle");
    let name = |s: u32| std::fs::read_to_string(base.join(format!("state{s}/name")));
    if !common::has_governor("menu") || name(0).ok().as_deref().map(str::trim) != Some("POLL") {
        virtperf_testkit::skip("cpuidle", "no menu governor, or state 0 is not POLL");
        return;
    }
    if !virtperf_testkit::need_root("switching the governor needs root") {
        return;
    }
    // Every state but POLL: what halts differs by machine (C1 in a guest, C1E… on metal).
    let halting: Vec<String> = (1..10)
        .take_while(|s| name(*s).is_ok())
        .map(|s| s.to_string())
        .collect();
    if halting.is_empty() {
        virtperf_testkit::skip("cpuidle", "no cpuidle state besides POLL");
        return;
    }
    let found: Vec<Option<String>> = (1..=halting.len())
        .map(|s| std::fs::read_to_string(base.join(format!("state{s}/disable"))).ok())
        .chain([std::fs::read_to_string(common::GOVERNOR).ok()])
        .collect();
    let d = common::TempDir::new("knob-no-halt-menu");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"s\"\nduration = \"500ms\"\nrepetitions = 1\n[[workload]]\nkind = \"rr\"\ncpus = \"0,1\"\n\
             [[config]]\nname = \"no-halt\"\ncpuidle_governor = \"menu\"\ncpuidle_disable = [{}]\n",
            halting.join(", ")
        ),
    )
    .unwrap();
    let db = d.path("r.db");
    let out = vp()
        .args(["run", spec.to_str().unwrap(), "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let after: Vec<Option<String>> = (1..=halting.len())
        .map(|s| std::fs::read_to_string(base.join(format!("state{s}/disable"))).ok())
        .chain([std::fs::read_to_string(common::GOVERNOR).ok()])
        .collect();
    assert_eq!(after, found, "the switches and governor found are not back");
    common::assert_ok(&out);
    let shown = vp()
        .args(["show", "last", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    common::assert_ok(&shown);
    let v: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let ipis = v["points"][0]["configs"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "client_ipis_per_tr")
        .map(|m| common::f(m, "/summary/mean"))
        .unwrap_or_else(|| panic!("no IPI count: {v}"));
    assert!(
        ipis < 0.1,
        "{ipis} IPIs per transaction with every halting state off: the CPUs halted"
    );
}

/// SIGKILL while a config's governor switch is in force, the killed run not yet reaped by
/// its parent (a zombie, as under a script that has not waited): `cleanup` puts the
/// governor found back at once. It used to take the zombie for a running process and say
/// "nothing to clean up" while the switch stayed.
#[test]
fn a_killed_unreaped_runs_governor_switch_is_restored_by_cleanup() {
    let _alone = crate::alone();
    if !virtperf_testkit::need_root("switching the governor needs root") {
        return;
    }
    let found = std::fs::read_to_string(common::GOVERNOR).unwrap_or_default();
    let avail = virtperf_measure::env::available_governors().unwrap_or_default();
    let Some(other) = avail.iter().find(|g| **g != found.trim()).cloned() else {
        virtperf_testkit::skip("cpuidle", "no second cpuidle governor to switch to");
        return;
    };
    // Whatever fails below, the governor found is written back.
    let Some(_restore) = common::SysfsAt::set(
        common::GOVERNOR,
        found.trim(),
        ("cpuidle", "no cpuidle governor here"),
    ) else {
        return;
    };
    let d = common::TempDir::new("knob-kill-governor");
    let spec = d.path("s.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"s\"\nduration = \"5s\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n\
             [[config]]\nname = \"switched\"\ncpuidle_governor = \"{other}\"\n"
        ),
    )
    .unwrap();
    let state = d.path("state");
    // A failed assertion leaves the killed run's journal in the machine's directory, where
    // every later run would refuse to start: the guard runs `cleanup` on the way out.
    struct Cleanup(PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = vp()
                .env("VIRTPERF_STATE_DIR", &self.0)
                .arg("cleanup")
                .output();
        }
    }
    let _cleanup = Cleanup(state.clone());
    let mut child = vp()
        .env("VIRTPERF_STATE_DIR", &state)
        .args(["run", spec.to_str().unwrap(), "--db"])
        .arg(d.path("r.db"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let now = || std::fs::read_to_string(common::GOVERNOR).unwrap_or_default();
    let t0 = Instant::now();
    while now().trim() != other {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the run never switched the governor"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    // Not reaped: wait for the kernel to finish its exit, leaving a zombie.
    let stat = format!("/proc/{}/stat", child.id());
    while !std::fs::read_to_string(&stat).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    }) {
        assert!(
            t0.elapsed() < Duration::from_secs(40),
            "the killed run never exited"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(
        now().trim(),
        other,
        "nothing could restore it on the way out"
    );
    let out = vp()
        .env("VIRTPERF_STATE_DIR", &state)
        .arg("cleanup")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let back = now();
    child.wait().unwrap();
    common::assert_ok(&out);
    assert!(said.contains("restored cpuidle.governor"), "{said}");
    assert_eq!(back.trim(), found.trim(), "cleanup left the switch: {said}");
}
