//! `virtperf explain` end to end: the real battery (loopback rr, futex wake-ups, /dev/kvm
//! where it opens, the guest halt-poll knob where it can be written) into a real SQLite
//! file, the model's arithmetic checked against what was stored, components that vanish
//! with their reason when a capability is really taken away (an unprivileged user), and the
//! knob restored when the battery is stopped half-way.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{vp, TempDir};

const KNOB: &str = "/sys/module/haltpoll/parameters/guest_halt_poll_ns";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn knob() -> Option<String> {
    std::fs::read_to_string(KNOB)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A short battery: one try, 300 ms rr trials.
fn explain(cmd: &mut Command, d: &TempDir, extra: &[&str]) -> (serde_json::Value, String) {
    let out = common::run_with_timeout(
        cmd.args(["explain", "--tries", "1", "-l", "300ms", "--json", "--db"])
            .arg(d.path("r.db"))
            .args(extra)
            .env("VIRTPERF_STATE_DIR", d.path("state")),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "explain failed: {err}");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (v, err)
}

fn names(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

fn missing_reason(v: &serde_json::Value, name: &str) -> Option<String> {
    v["missing"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .map(|m| m["reason"].as_str().unwrap().to_string())
}

#[test]
fn explain_decomposes_a_round_trip_and_says_where_each_part_came_from() {
    let _alone = crate::alone();
    let d = TempDir::new("explain-full");
    let before = knob();
    let html = d.path("explain.html");
    let (v, _) = explain(&mut vp(), &d, &["-o", html.to_str().unwrap()]);
    assert_eq!(knob(), before, "the halt-poll knob was not restored");

    let measured = v["measured_us"].as_f64().unwrap();
    let predicted = v["predicted_us"].as_f64().unwrap();
    let residual = v["residual_us"].as_f64().unwrap();
    assert!(measured > 0.0 && predicted > 0.0, "{v}");
    // The residual is what the model leaves over, whatever its sign: never forced to zero.
    assert!((measured - predicted - residual).abs() < 1e-6 * measured.max(1.0));
    let comps = v["components"].as_array().unwrap();
    let top: f64 = comps
        .iter()
        .filter(|c| c.get("part_of").is_none())
        .map(|c| c["us"].as_f64().unwrap())
        .sum();
    assert!((top - predicted).abs() < 1e-6 * predicted.max(1.0));
    // The verdict comes first and says what the numbers below say: the round trip, the
    // largest top-level share, the residual.
    let verdict = v["verdict"].as_str().expect("a verdict");
    assert!(
        verdict.starts_with(&format!(
            "Verdict: a cross-CPU round trip here takes {measured:.1} µs"
        )),
        "{verdict}"
    );
    let largest = comps
        .iter()
        .filter(|c| c.get("part_of").is_none())
        .filter_map(|c| c["us"].as_f64())
        .fold(0.0, f64::max);
    assert!(
        verdict.contains(&format!("{:.0}% of it is", 100.0 * largest / measured)),
        "{verdict}"
    );
    let residual_pct = v["residual_pct"].as_f64().expect("residual_pct").abs();
    assert!(
        verdict.ends_with(&format!("leaves {residual_pct:.0}% of it unexplained.")),
        "{verdict}"
    );
    for c in comps.iter().chain(v["cross_checks"].as_array().unwrap()) {
        let src = c["source"].as_str().unwrap();
        assert!(src.len() > 20, "component without a source: {c}");
    }
    let have = names(&v, "components");
    assert!(
        have.contains(&"path".into()) && have.contains(&"wake_up".into()),
        "{have:?}"
    );
    // The spinning path cannot be slower than the round trip it is part of by much.
    let path = comps.iter().find(|c| c["name"] == "path").unwrap()["us"]
        .as_f64()
        .unwrap();
    assert!(path < measured, "path {path} µs ≥ measured {measured} µs");

    // Each capability either gave its component or is listed as missing with the reason.
    let writable = is_root() && before.is_some();
    // The knob acts where the run's fingerprint says the haltpoll governor runs it.
    let haltpoll = virtperf_wire::model::halt_poll_knob_inert(
        v["environment"]["cpuidle_driver"].as_str(),
        v["environment"]["cpuidle_governor"].as_str(),
    )
    .is_none();
    let idle = comps.iter().find(|c| c["name"] == "idle_exit");
    if !haltpoll {
        // The knob reaches no idle loop here: the idle exit comes from keeping both CPUs
        // awake, or is missing where that was no faster (spinners taking the CPUs the
        // round trip needs); never from the knob, whose difference (if it ran) is a
        // cross-check or missing under its own name.
        match idle {
            Some(idle) => {
                let src = idle["source"].as_str().unwrap();
                assert!(src.contains("SCHED_IDLE"), "{src}");
                assert!(idle["us"].as_f64().unwrap() != 0.0, "{src}");
            }
            None => {
                let why = missing_reason(&v, "idle_exit (CPUs kept awake)")
                    .unwrap_or_else(|| panic!("idle_exit neither measured nor missing: {v}"));
                assert!(why.contains("is no faster than as-is"), "{why}");
            }
        }
        if writable {
            assert!(
                names(&v, "cross_checks").contains(&"idle_exit_knob".into())
                    || missing_reason(&v, "idle_exit_knob").is_some(),
                "{v}"
            );
        }
    } else if writable {
        // Polling off minus polling on, both measured: two different configs, one of them
        // with the knob at 0 — never as-is against itself (which printed 0.0).
        let idle = comps
            .iter()
            .find(|c| c["name"] == "idle_exit")
            .unwrap_or_else(|| panic!("idle_exit not measured although the knob is writable: {v}"));
        let src = idle["source"].as_str().unwrap();
        assert!(src.contains("haltpoll.guest_halt_poll_ns = 0 ("), "{src}");
        let configs: Vec<&str> = src
            .split(['(', ')'])
            .filter(|p| *p == "as-is" || p.starts_with("guest-poll-"))
            .collect();
        assert_eq!(configs.len(), 2, "{src}");
        assert_ne!(
            configs[0], configs[1],
            "compared a config with itself: {src}"
        );
        // Beside a kept-awake check, what keeping the CPUs awake does not buy back: the IPIs
        // its wake-ups still send (a woken thread preempts a spinner through one), priced,
        // or why not.
        if names(&v, "cross_checks").contains(&"idle_exit_awake".into()) {
            let checks = v["cross_checks"].as_array().unwrap();
            match checks.iter().find(|c| c["name"] == "awake_ipis") {
                Some(c) => {
                    let src = c["source"].as_str().unwrap();
                    assert!(c["us"].as_f64().unwrap() > 0.0, "{c}");
                    assert!(
                        src.contains("IPIs per transaction were still sent")
                            && src.contains("(residual "),
                        "{c}"
                    );
                }
                None => assert!(missing_reason(&v, "awake_ipis").is_some(), "{v}"),
            }
        }
    } else {
        let why = match idle {
            Some(i) => i["source"].as_str().unwrap().to_string(),
            None => {
                missing_reason(&v, "idle_exit").expect("idle_exit neither measured nor missing")
            }
        };
        virtperf_testkit::skip("haltpoll", &format!("idle_exit: {why}"));
    }
    let kvm = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let checks = names(&v, "cross_checks");
    if kvm {
        assert!(checks.contains(&"kvm_halt_exit".into()), "{v}");
    } else {
        assert!(missing_reason(&v, "kvm_halt_exit").is_some(), "{v}");
        virtperf_testkit::skip("kvm", "/dev/kvm does not open here");
    }

    // Every remedy is a measurement against the as-is round trip.
    let remedies = v["remedies"].as_array().unwrap();
    assert!(remedies.len() >= 2, "{v}");
    // Under the haltpoll governor (root, a kernel with menu), switching to menu is one.
    let governor = std::fs::read_to_string(common::GOVERNOR).unwrap_or_default();
    if governor.trim() == "haltpoll" && common::has_governor("menu") && is_root() {
        assert!(
            remedies.iter().any(|r| r["what"]
                .as_str()
                .is_some_and(|w| w.starts_with("the menu cpuidle governor"))),
            "{v}"
        );
        assert_eq!(
            std::fs::read_to_string(common::GOVERNOR)
                .ok()
                .as_deref()
                .map(str::trim),
            Some("haltpoll"),
            "the governor found is not back"
        );
    }
    for r in remedies {
        assert!(r["p50_change_pct"].as_f64().unwrap().is_finite(), "{r}");
        assert!(r["cpus_busy"].as_f64().unwrap() > 0.0, "{r}");
        // The tries' p50 ratio holds the merged p50's change, or says why it has none.
        let i = &r["p50_ratio_interval"];
        match (i["bounded"]["low"].as_f64(), i["bounded"]["high"].as_f64()) {
            (Some(lo), Some(hi)) => assert!(lo <= hi && lo.is_finite(), "{r}"),
            _ => assert!(i["none"]["why"].is_string(), "{r}"),
        }
        // Its cost over the tries: each try's busy CPUs, and what it adds with an interval
        // holding the difference of the means (or why there is none).
        let tries = r["cpus_busy_tries"].as_array().expect("busy CPUs per try");
        assert!(
            !tries.is_empty() && tries.iter().all(|t| t.as_f64().unwrap() > 0.0),
            "{r}"
        );
        let added = r["cpus_busy"].as_f64().unwrap() - r["cpus_busy_before"].as_f64().unwrap();
        let i = &r["added_cpus_interval"];
        match (i["bounded"]["low"].as_f64(), i["bounded"]["high"].as_f64()) {
            (Some(lo), Some(hi)) => assert!(lo <= hi && lo.is_finite(), "{r}"),
            _ => assert!(i["none"]["why"].is_string(), "{r}"),
        }
        assert!(added.is_finite(), "{r}");
    }
    // A remedy the verdict names as the cheapest (or the one) has its whole interval at or
    // below ×0.80.
    let verdict = v["verdict"].as_str().expect("a verdict");
    let named = verdict
        .split("the cheapest measured remedy is ")
        .nth(1)
        .or_else(|| {
            verdict
                .split("the one measured remedy that cuts it by 20% or more is ")
                .nth(1)
        });
    if let Some(named) = named {
        let r = remedies
            .iter()
            .find(|r| {
                r["what"]
                    .as_str()
                    .is_some_and(|w| named.starts_with(w.split(" (").next().unwrap_or(w)))
            })
            .expect("the named remedy is listed");
        let hi = r["p50_ratio_interval"]["bounded"]["high"].as_f64();
        assert!(hi.is_some_and(|h| h <= 0.8), "{r}: {verdict}");
    }
    // The same-CPU round trip has its events too: one CPU, so no cross-CPU IPI per message.
    let same = &v["events_per_transaction_same_cpu"];
    assert!(same["thread_voluntary_switches"].as_f64().is_some(), "{v}");
    let per_tr = &v["events_per_transaction"];
    assert!(
        per_tr["thread_voluntary_switches"].as_f64().unwrap() >= 0.9,
        "a blocking rr sleeps about once per transaction per side: {per_tr}"
    );

    // The stored run reads back as the same explanation.
    let run_id = v["run_id"].as_i64().unwrap().to_string();
    let out = vp()
        .args(["show", &run_id, "--format", "json", "--db"])
        .arg(d.path("r.db"))
        .output()
        .unwrap();
    common::assert_ok(&out);
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(again["measured_us"], v["measured_us"]);
    assert_eq!(again["residual_us"], v["residual_us"]);
    let text = vp()
        .args(["show", &run_id, "--db"])
        .arg(d.path("r.db"))
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&text.stdout).contains("residual"));

    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("class=\"plot waterfall\""), "no waterfall");
    // The page answers first too: the verdict above the waterfall.
    let said = page.find("<p class=\"verdict\"><b>Verdict: a cross-CPU round trip here takes");
    assert!(
        said.is_some_and(|at| page
            .find("class=\"plot waterfall\"")
            .is_some_and(|w| at < w)),
        "no verdict above the waterfall"
    );
    common::chromium_renders(&html, &d.0, 1);
}

/// With no /dev/kvm and a read-only knob (an unprivileged user: the capabilities really are
/// gone), the battery still runs; the components that needed them are listed as missing,
/// each with the reason, and the rest of the model stands.
#[test]
fn components_disappear_with_the_reason_when_a_capability_is_missing() {
    let _alone = crate::alone();
    if !is_root() {
        virtperf_testkit::skip(
            "root",
            "needs root to run the battery as an unprivileged user",
        );
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        virtperf_testkit::skip("setpriv", "setpriv (util-linux) is not installed");
        return;
    }
    let d = TempDir::new("explain-nobody");
    // The unprivileged user writes its database and state here.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&d.0, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_virtperf"))
        .env_remove("VIRTPERF_LOCK_NONCE")
        .env("HOME", &d.0);
    let (v, stderr) = explain(&mut cmd, &d, &[]);
    // The skipped measurements it stores as trials are planned too: the run's planned
    // count is its trials' (the progress printed [14/13] where busy polling was skipped).
    let db = rusqlite::Connection::open(d.path("r.db")).expect("the database");
    let (planned, stored): (i64, i64) = db
        .query_row(
            "SELECT planned_trials, (SELECT count(*) FROM trials WHERE run_id = runs.id) \
             FROM runs ORDER BY id DESC LIMIT 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .expect("the run");
    let skipped: i64 = db
        .query_row(
            "SELECT count(*) FROM trials WHERE status = 'skipped'",
            [],
            |r| r.get(0),
        )
        .expect("skipped trials");
    assert!(skipped > 0, "nobody's battery skipped nothing");
    assert_eq!(planned, stored, "planned vs stored trials");
    // The knob cannot be written by nobody: why is said under idle_exit, or under
    // idle_exit_knob where keeping the CPUs awake gave the term instead.
    let idle = missing_reason(&v, "idle_exit")
        .or_else(|| missing_reason(&v, "idle_exit_knob"))
        .expect("the knob's absence should be named");
    assert!(
        idle.contains("read-only")
            || idle.contains("does not exist")
            || idle.contains("no guest halt-polling knob"),
        "{idle}"
    );
    if knob().is_some() {
        assert!(
            idle.contains("polling off was not measured")
                || idle.contains("polling on was not measured"),
            "{idle}"
        );
    }
    let halt = missing_reason(&v, "kvm_halt_exit").expect("kvm_halt_exit should be missing");
    assert!(halt.contains("/dev/kvm"), "{halt}");
    let exits = missing_reason(&v, "exit_pressure").expect("exit_pressure should be missing");
    // Without cpuidle the idle entries are not counted, and that is said first; with them,
    // the missing exit cost (/dev/kvm) is the reason.
    let idle_counted = v["events_per_transaction"]["idle_entries"].is_number();
    if idle_counted {
        assert!(
            exits.contains("IPIs") && exits.contains("/dev/kvm"),
            "{exits}"
        );
    } else {
        assert!(exits.contains("idle_entries"), "{exits}");
    }
    // The reasons were also printed as the battery skipped them.
    assert!(stderr.contains("skipped"), "{stderr}");
    let have = names(&v, "components");
    assert!(have.contains(&"path".into()) && have.contains(&"wake_up".into()));
    // Without the knob, the idle exit comes only from keeping the CPUs awake (SCHED_IDLE
    // needs no privilege), never from the knob.
    if let Some(i) = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "idle_exit")
    {
        assert!(i["source"].as_str().unwrap().contains("SCHED_IDLE"), "{i}");
    }
    // Counting tracepoints needs privilege: exits by cause and in situ say why not.
    for n in ["exits_by_cause", "in_situ"] {
        assert!(
            missing_reason(&v, n).is_some(),
            "{n} neither given nor missing: {v}"
        );
    }
}

/// Under a governor that does not read it, the battery neither sets the halt-poll knob nor
/// measures it as a remedy (its two configurations would time one idle path twice: under
/// `menu` they once gave a 13.3 µs "cross-check" and a listed remedy); the knob's term is
/// missing with that reason and the idle exit comes from the CPUs kept awake or is missing.
/// What it measures instead, where the kernel has the haltpoll governor: switching to it
/// with a window, a remedy of its own (the governor found is back afterwards).
#[test]
fn a_halt_poll_knob_no_governor_reads_is_not_measured() {
    let _alone = crate::alone();
    let Some(before) = knob() else {
        virtperf_testkit::skip("haltpoll", &format!("no {KNOB} here"));
        return;
    };
    let Some(gov) = common::governor_other_than_haltpoll() else {
        return;
    };
    let other = std::fs::read_to_string(common::GOVERNOR).ok();
    let d = TempDir::new("explain-inert-knob");
    let (v, err) = explain(&mut vp(), &d, &[]);
    let after = std::fs::read_to_string(common::GOVERNOR).ok();
    drop(gov);
    assert_eq!(after, other, "the governor found is not back");
    assert!(err.contains("nothing reads the knob"), "{err}");
    let why = missing_reason(&v, "idle_exit_knob").unwrap_or_else(|| panic!("{v}"));
    assert!(why.contains("nothing reads the knob"), "{why}");
    assert!(
        !names(&v, "cross_checks").contains(&"idle_exit_knob".into()),
        "{v}"
    );
    let whats: Vec<String> = v["remedies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["what"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        !whats.iter().any(|w| w.starts_with("guest halt polling")),
        "{whats:?}"
    );
    let switch = whats
        .iter()
        .find(|w| w.starts_with("the haltpoll cpuidle governor with guest halt polling"));
    assert_eq!(
        switch.is_some(),
        common::has_governor("haltpoll"),
        "{whats:?}"
    );
    assert_eq!(knob(), Some(before), "the knob is not as found");
}

/// Stopped while the halt-poll knob is changed, the battery restores it, keeps what it
/// measured and exits as a stopped command does.
#[test]
fn a_stopped_battery_restores_the_halt_poll_knob() {
    let _alone = crate::alone();
    let Some(orig) = knob() else {
        virtperf_testkit::skip(
            "haltpoll",
            &format!("no {KNOB} here (not a KVM guest with cpuidle-haltpoll)"),
        );
        return;
    };
    if !is_root() {
        virtperf_testkit::skip("root", &format!("writing {KNOB} needs root"));
        return;
    }
    let d = TempDir::new("explain-stop");
    let mut child = vp()
        .args(["explain", "--tries", "3", "-l", "300ms", "--db"])
        .arg(d.path("r.db"))
        .env("VIRTPERF_STATE_DIR", d.path("state"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while knob().as_deref() == Some(orig.as_str()) {
        assert!(
            // The as-is config comes first, nine measurements long (60-90 s of a debug
            // build with 1 s trials on this busy 2-CPU machine): short trials, and room.
            t0.elapsed() < Duration::from_secs(150),
            "the battery never changed the knob"
        );
        if let Some(s) = child.try_wait().unwrap() {
            panic!("explain ended ({s}) before changing the knob");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let out = common::wait_output(child, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(128 + libc::SIGTERM), "{out:?}");
    assert_eq!(knob().as_deref(), Some(orig.as_str()), "knob not restored");
    let runs: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["runs", "--json"], &d.path("r.db"))).unwrap();
    assert_eq!(runs[0]["status"], "incomplete", "{runs}");
    assert!(!journal_left(&d.path("state")), "knob journal left behind");
}

/// Killed (SIGKILL: no chance to restore) while its busy-polling config has
/// `net.core.busy_poll` and `busy_read` changed, the battery leaves them journaled, and
/// `virtperf cleanup` puts both back.
#[test]
fn a_killed_battery_leaves_busy_polling_to_cleanup() {
    let _alone = crate::alone();
    let read = |k: &str| std::fs::read_to_string(format!("/proc/sys/net/core/{k}")).ok();
    let (Some(poll), Some(rd)) = (read("busy_poll"), read("busy_read")) else {
        virtperf_testkit::skip("busy-poll", "no net.core.busy_poll here");
        return;
    };
    if !is_root() {
        virtperf_testkit::skip("root", "writing net.core.busy_poll needs root");
        return;
    }
    // Whatever fails below, the machine gets its values back.
    struct Restore(Vec<(&'static str, String)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            for (k, v) in &self.0 {
                let _ = std::fs::write(format!("/proc/sys/net/core/{k}"), v);
            }
        }
    }
    let _restore = Restore(vec![("busy_poll", poll.clone()), ("busy_read", rd.clone())]);
    let d = TempDir::new("explain-busy");
    let mut child = vp()
        .args(["explain", "--tries", "3", "-l", "300ms", "--db"])
        .arg(d.path("r.db"))
        .env("VIRTPERF_STATE_DIR", d.path("state"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while read("busy_poll").as_deref() == Some(poll.as_str()) {
        if t0.elapsed() > Duration::from_secs(150) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the battery never set net.core.busy_poll");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        journal_left(&d.path("state")),
        "killed with a knob changed, nothing journaled"
    );
    let out = vp()
        .arg("cleanup")
        .env("VIRTPERF_STATE_DIR", d.path("state"))
        .output()
        .unwrap();
    common::assert_ok(&out);
    assert_eq!(read("busy_poll"), Some(poll), "busy_poll not restored");
    assert_eq!(read("busy_read"), Some(rd), "busy_read not restored");
    assert!(
        !journal_left(&d.path("state")),
        "journal left after cleanup"
    );
}

/// Whether a journal of busy polling is left: in the machine's (root's journal, issue
/// 53) or in `state`.
fn journal_left(state: &Path) -> bool {
    [
        Path::new("/run/virtperf/knobs").to_path_buf(),
        state.join("knobs"),
    ]
    .iter()
    .flat_map(|d| std::fs::read_dir(d).into_iter().flatten().flatten())
    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
    .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains("net.core.busy_poll")))
}

/// `explain --host`: an agent started with `--allow-drive` runs the battery on its machine
/// and the client stores it; an agent without it refuses, in one line.
#[test]
fn an_agent_runs_the_battery_for_its_client_only_when_allowed() {
    let _alone = crate::alone();
    let d = TempDir::new("explain-agent");
    let agent = common::Agent::start(&["--allow-drive", "--token", "s3cret"]);
    let port = agent.port();
    let (v, _) = explain(
        &mut vp(),
        &d,
        &["--host", "127.0.0.1", "--port", &port, "--token", "s3cret"],
    );
    assert!(v["measured_us"].as_f64().unwrap() > 0.0, "{v}");
    assert!(v["components"].as_array().unwrap().len() >= 2, "{v}");
    let runs: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["runs", "--json"], &d.path("r.db"))).unwrap();
    assert_eq!(
        runs.as_array().unwrap().len(),
        1,
        "only the agent's battery: {runs}"
    );
    assert_eq!(runs[0]["name"], "explain");
    drop(agent);

    let plain = common::Agent::start(&[]);
    let port = plain.port();
    let (code, err) = common::run_fail(&[
        "explain",
        "--tries",
        "1",
        "-l",
        "300ms",
        "--host",
        "127.0.0.1",
        "--port",
        &port,
        "--db",
        d.path("r.db").to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    common::assert_one_line_error(&err, "--allow-drive");
}

#[test]
fn explain_refuses_placements_it_cannot_measure() {
    let _beside = crate::beside();
    let (code, err) = common::run_fail(&["explain", "--placement", "netns:veth"]);
    assert_eq!(code, 2);
    common::assert_one_line_error(&err, "share this machine's kernel");
    // This machine's CPUs are the command line's to get right: usage errors (exit 2).
    let (code, err) = common::run_fail(&["explain", "--cpus", "1,1"]);
    assert_eq!(code, 2, "{err}");
    common::assert_one_line_error(&err, "two different cpus");
    let (code, err) = common::run_fail(&["explain", "--quick", "--cpus", "0,4095"]);
    assert_eq!(code, 2, "{err}");
    common::assert_one_line_error(&err, "CPU 4095 does not exist here");
}

/// `explain --native P --placement Q` (what `vm compare --explain --native P --guest Q`
/// runs): both batteries run at their placements (here two agents on this machine), stored
/// as two runs, side by side under their placements' names.
#[test]
fn two_placements_are_explained_side_by_side() {
    let _alone = crate::alone();
    let d = TempDir::new("explain-two");
    let left = common::Agent::start(&["--allow-drive", "--token", "s3cret"]);
    let right = common::Agent::start(&["--allow-drive", "--token", "s3cret"]);
    let (l, r) = (
        format!("remote:127.0.0.1:{}", left.port()),
        format!("remote:127.0.0.1:{}", right.port()),
    );
    let (v, _) = explain(
        &mut vp(),
        &d,
        &["--native", &l, "--placement", &r, "--token", "s3cret"],
    );
    assert_eq!(v["native_placement"], l.as_str(), "{v}");
    assert_eq!(v["placement"], r.as_str(), "{v}");
    for side in ["native", "elsewhere"] {
        assert!(
            v[side]["measured_us"].as_f64().unwrap_or(0.0) > 0.0,
            "{side}: {}",
            v[side]
        );
    }
    let runs: serde_json::Value =
        serde_json::from_str(&common::run_db_ok(&["runs", "--json"], &d.path("r.db"))).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(2), "{runs}");
    // --native needs something to stand beside.
    let (code, err) = common::run_fail(&["explain", "--native", &l]);
    assert_eq!(code, 2, "{err}");
}

/// `--vm` watches the VM an agent runs in from its host: without that agent (`--host`) it
/// is refused in one line before anything runs.
#[test]
fn vm_without_the_agent_in_it_is_a_usage_error() {
    let _beside = crate::beside();
    let out = vp()
        .args(["explain", "--quick", "--vm", "pid:1"])
        .output()
        .expect("spawn");
    assert_eq!(out.status.code(), Some(2));
    common::assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "--host ADDR");
}
