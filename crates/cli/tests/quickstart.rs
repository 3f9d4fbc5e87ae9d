//! The built-in experiment (`virtperf run` without a spec, README's first command) ends
//! with its answer: the headline ratio, what this machine is, and the next two commands.

mod common;

use std::time::Duration;

use common::{run_with_timeout, vp};

/// One try of each point: the headline names both round trips and says no interval is
/// claimed from one try; the machine is called a VM exactly when `virtperf env` reports a
/// hypervisor; `explain` and `vm compare` are named.
#[test]
fn the_built_in_run_ends_with_its_headline_and_the_next_commands() {
    let dir = common::TempDir::new("quickstart");
    let out = run_with_timeout(
        vp().args(["run", "--runs", "1", "--db"])
            .arg(dir.path("r.db")),
        Duration::from_secs(180),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() || out.status.code() == Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tail: Vec<&str> = text.lines().rev().take(8).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    assert!(
        tail.contains("Headline: a 1-byte round trip between two CPUs takes")
            && tail.contains("one try each: no interval"),
        "{tail}"
    );
    assert!(
        tail.contains("`virtperf explain`") && tail.contains("`virtperf vm compare`"),
        "{tail}"
    );
    // And what to change: tune with a goal between the two round trips it measured.
    let goal: f64 = tail
        .split("`virtperf tune --goal 'p50<=")
        .nth(1)
        .and_then(|r| r.split("us'").next())
        .and_then(|g| g.parse().ok())
        .unwrap_or_else(|| panic!("no tune goal in {tail}"));
    assert!(goal >= 1.0, "{tail}");
    let env = run_with_timeout(vp().args(["env", "--json"]), Duration::from_secs(60));
    let env: serde_json::Value = serde_json::from_slice(&env.stdout).expect("env JSON");
    let vm = tail.contains("This machine is itself a virtual machine");
    assert_eq!(
        vm,
        !env["hypervisor"].is_null(),
        "{tail}\nenv hypervisor: {}",
        env["hypervisor"]
    );
}

/// The recipes are built in: `run --list` names each (with its description), and a spec
/// that is neither a file nor a recipe is one line pointing at both (exit 2).
#[test]
fn recipes_are_listed_and_a_missing_spec_points_at_them() {
    let out = run_with_timeout(vp().args(["run", "--list"]), Duration::from_secs(30));
    assert!(out.status.success());
    let list = String::from_utf8_lossy(&out.stdout);
    for name in ["quickstart", "halt-polling", "seed3-netperf-sweep"] {
        assert!(list.lines().any(|l| l.starts_with(name)), "{list}");
    }
    let (code, err) = common::run_fail(&["run", "nosuch.toml"]);
    assert_eq!(code, 2, "{err}");
    common::assert_one_line_error(&err, "`virtperf run --list`");
    assert!(
        err.contains("nosuch.toml") && err.contains("recipes/"),
        "{err}"
    );
}
