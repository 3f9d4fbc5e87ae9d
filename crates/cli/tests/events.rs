//! Events per transaction (context switches, idle entries, IPIs) on both sides, wait modes
//! and the open loop, through the real binary. The test runs alone ([`crate::alone`]): idle
//! entries are only seen on an otherwise idle machine.

use crate::common;

use common::{f, run_json};

/// A per-transaction count that must have been taken: an absent one fails the test rather
/// than reading as 0 (which would pass "spinning: fewer than 0.1 sleeps").
fn per(v: &serde_json::Value, side: &str, key: &str) -> f64 {
    v["events"][side]["per_unit"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("{side}: {key} was not counted: {}", v["events"][side]))
}

/// Whether this machine has cpuidle states to count idle entries with.
fn counts_idle(v: &serde_json::Value) -> bool {
    !v["events"]["client"]["missing"]
        .to_string()
        .contains("cpuidle")
}

#[test]
fn events_per_transaction_wait_modes_and_the_open_loop() {
    let _alone = crate::alone();
    let two_cpus = std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2);
    if two_cpus {
        // Blocking across CPUs: each side sleeps once per transaction, and its CPU goes idle.
        let v = run_json(&["rr", "--cpus", "0,1", "-l", "1s"]);
        assert_eq!(v["events"]["unit"], "transaction");
        for side in ["client", "server"] {
            let sw = per(&v, side, "thread_voluntary_switches");
            assert!(sw >= 0.9, "{side}: {sw} context switches per transaction");
            let e = &v["events"][side];
            // The side's threads' wait for a CPU, read where the kernel keeps schedstat
            // (this process's and the agent's kernel are one here).
            if std::fs::read_to_string("/proc/thread-self/schedstat").is_ok() {
                assert!(e["deltas"]["thread_run_delay_us"].is_u64(), "{side}: {e}");
            } else {
                virtperf_testkit::skip("schedstat", "the threads' run delay: no schedstat");
            }
            let missing = e["missing"].to_string();
            // The check holds on an otherwise idle machine: where other work kept the pinned
            // CPU busy (a benchmark beside the suite), it never idles, and that is no defect.
            let other = v["cpu"][side]["other_cpu_pct"].as_f64().unwrap_or(0.0);
            if missing.contains("cpuidle") {
                virtperf_testkit::skip("cpuidle", &format!("the idle-entry check: {missing}"));
            } else if other > 25.0 {
                virtperf_testkit::skip(
                    "quiet",
                    &format!("the idle-entry check: other work used {other:.0}% of a CPU"),
                );
            } else {
                let idle = e["pinned"]["per_unit"]["idle_entries"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{side}: idle entries not counted: {e}"));
                assert!(idle > 0.0, "{side}: no idle entries on its pinned CPU: {e}");
            }
        }
        // Spinning: no side sleeps, so no wake-up is on the critical path.
        let v = run_json(&["rr", "--cpus", "0,1", "-l", "1s", "--wait", "spin"]);
        assert_eq!(v["workload"]["client_wait"]["mode"], "spin");
        for side in ["client", "server"] {
            let sw = per(&v, side, "thread_voluntary_switches");
            assert!(
                sw < 0.1,
                "{side} spinning: {sw} context switches per transaction"
            );
        }
    } else {
        virtperf_testkit::skip("two-cpus", "the cross-CPU checks: one CPU here");
    }
    // Flows share an open loop's rate; the server answers every flow.
    let v = run_json(&["rr", "--flows", "4", "--rate", "2000", "-l", "2s"]);
    assert_eq!(v["workload"]["flows"], 4);
    let rate = f(&v, "/outcome/rate_per_s");
    assert!(
        (1960.0..=2040.0).contains(&rate),
        "4 flows sharing 2000/s: {rate:.1}/s"
    );
    common::served_and_in_flight(&v, 0, 4);

    // crr waits the same way for its response and request: spinning removes the sleep in
    // the wait for the response; connect and the wait for the server's close still block,
    // by design. So a spinning client sleeps at most once per transaction (0.7-0.95 seen).
    let cpus: &[&str] = if two_cpus { &["--cpus", "0,1"] } else { &[] };
    let spin = run_json(&[&["crr", "-l", "500ms", "--wait", "spin"], cpus].concat());
    assert_eq!(spin["workload"]["server_wait"]["mode"], "spin");
    assert!(f(&spin, "/outcome/transactions") > 0.0);
    let s = per(&spin, "client", "thread_voluntary_switches");
    assert!(
        s <= 1.05,
        "crr --wait spin: client sleeps {s:.2} per transaction: more than the one wait for the close"
    );
    // The difference spinning makes, where the response takes several segments to arrive:
    // a blocking client sleeps for them (1.34-1.73 a transaction seen), a spinning one
    // reads them as they come (0.004). With a 1-byte response one sleep often covered both
    // the response's wait and the close's (1.01 blocking against 0.81-0.91 spinning here),
    // which left nothing to tell apart.
    let big = |wait: &str| {
        let v = run_json(
            &[
                &["crr", "-l", "500ms", "-r", "1,256K", "--wait", wait],
                cpus,
            ]
            .concat(),
        );
        per(&v, "client", "thread_voluntary_switches")
    };
    // Where the blocking client slept at all for it (0.5 a transaction or more; 1.17 in
    // the CI run that skipped at the old bound of 1.25, spinning 0.01), spinning must
    // remove a quarter of a sleep or more.
    let (s, b) = (big("spin"), big("block"));
    if b >= 0.5 {
        assert!(
            s < b - 0.25,
            "crr -r 1,256K --wait spin: client sleeps {s:.2} per transaction, blocking {b:.2}"
        );
    } else {
        virtperf_testkit::skip("quiet", &format!("blocking crr's client slept only {b:.2} per 256 KiB response (spinning: {s:.2}): the response was there before it waited, so there is no spin-vs-block difference to check"));
    }

    // Stored, shown per config and compared like any metric; a gap list sweeps.
    let dir = std::env::temp_dir().join(format!("vp-events-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("s.toml"),
        "name = \"ev\"\nduration = \"300ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n\
         gap = [\"0\", \"100us\"]\n[[config]]\nname = \"a\"\n[[config]]\nname = \"b\"\n",
    )
    .unwrap();
    let db = dir.join("r.db");
    let run = common::vp()
        .arg("run")
        .arg(dir.join("s.toml"))
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    common::assert_ok(&run);
    let show = common::vp()
        .args(["show", "last", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let cmp = common::vp()
        .args(["compare", "last", "--json", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(
        text.contains("rr gap=100us · b per transaction: client sleeps"),
        "{text}"
    );
    let cmp = String::from_utf8_lossy(&cmp.stdout);
    let probe = run_json(&["rr", "-l", "100ms"]);
    let mut want = vec!["client_sleeps_per_tr", "client_timer_per_tr"];
    if counts_idle(&probe) {
        want.push("server_idle_per_tr");
    } else {
        virtperf_testkit::skip(
            "cpuidle",
            "the idle metric in compare: no cpuidle states on this machine",
        );
        assert!(
            !cmp.contains("server_idle_per_tr"),
            "an uncounted metric compared: {cmp}"
        );
    }
    for m in want {
        assert!(cmp.contains(m), "compare has no {m}: {cmp}");
    }

    // Open loop at 2000/s for 3 s: the schedule is kept and latency counts from it.
    let v = run_json(&["rr", "--rate", "2000", "-l", "3s"]);
    assert_eq!(v["workload"]["rate_per_s"], 2000);
    let rate = f(&v, "/outcome/rate_per_s");
    assert!(
        (1960.0..=2040.0).contains(&rate),
        "asked 2000/s, achieved {rate:.1}/s"
    );
    assert!(
        !v["warnings"].to_string().contains("target was missed"),
        "{}",
        v["warnings"]
    );
}

/// A config that leaves the network input backlog no room (`net.core.netdev_max_backlog =
/// 0`): the loopback stream's trial counts the packets dropped there (`backlog_drops`, from
/// /proc/net/softnet_stat) and warns that each is a lost segment, and the knob is back as
/// it was. Drops of the machine's backlog are what stalls a round trip for a
/// retransmission timeout; they were counted nowhere.
#[test]
fn backlog_drops_are_counted_and_warned_of() {
    let _alone = crate::alone();
    let knob = "/proc/sys/net/core/netdev_max_backlog";
    let Ok(before) = std::fs::read_to_string(knob) else {
        virtperf_testkit::skip("root", "no /proc/sys/net/core/netdev_max_backlog here");
        return;
    };
    if std::fs::write(knob, before.trim()).is_err() {
        virtperf_testkit::skip("root", "needs root to write net.core.netdev_max_backlog");
        return;
    }
    let d = common::TempDir::new("backlog");
    std::fs::write(
        d.path("s.toml"),
        "name = \"bl\"\nduration = \"500ms\"\nrepetitions = 1\n[[workload]]\nkind = \"stream\"\n\
         flows = 4\n[[config]]\nname = \"no-backlog\"\n\
         sysctl = { \"net.core.netdev_max_backlog\" = 0 }\n",
    )
    .unwrap();
    let db = d.path("r.db");
    let out = common::vp()
        .arg("run")
        .arg(d.path("s.toml"))
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    let after = std::fs::read_to_string(knob).unwrap_or_default();
    if after != before {
        let _ = std::fs::write(knob, before.trim());
    }
    common::assert_ok(&out);
    assert_eq!(after, before, "net.core.netdev_max_backlog not restored");
    let Ok(q) = std::process::Command::new("sqlite3")
        .arg(&db)
        .arg("SELECT result_json FROM trials")
        .output()
    else {
        virtperf_testkit::skip("sqlite3", "reading the stored trial needs sqlite3");
        return;
    };
    let v: serde_json::Value = serde_json::from_slice(&q.stdout).expect("the trial's JSON");
    let drops = v["events"]["client"]["deltas"]["backlog_drops"]
        .as_u64()
        .unwrap_or_else(|| panic!("backlog drops not counted: {}", v["events"]));
    assert!(drops > 0, "no drop with no backlog: {}", v["events"]);
    let warned = v["warnings"].as_array().is_some_and(|w| {
        w.iter().any(|w| {
            w.as_str().is_some_and(|w| {
                w.contains(&format!(
                    "dropped {drops} packet(s) from its network input backlog"
                ))
            })
        })
    });
    assert!(warned, "{}", v["warnings"]);
    // `show` names the trial under its tables (a table of means alone hides it).
    let shown = common::run_db_ok(&["show", "last"], &db);
    assert!(
        shown.contains(&format!(
            "warning: stream · no-backlog · try 1: the client's machine dropped {drops} packet(s)"
        )),
        "{shown}"
    );
}
