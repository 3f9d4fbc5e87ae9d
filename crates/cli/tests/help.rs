//! What clap generates for people: help headings, shell completions, the man page.

mod common;

use std::collections::HashMap;

use common::{assert_ok, vp};

/// Runs `virtperf ARGS --help` and maps each long flag to the heading it is listed under.
fn headings(args: &[&str]) -> HashMap<String, String> {
    let out = vp().args(args).arg("--help").output().expect("spawn");
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut heading = String::new();
    let mut map = HashMap::new();
    for line in text.lines() {
        // A heading is an unindented line ending with ':' ("Options:", "Placement:").
        if !line.starts_with(' ') && line.ends_with(':') {
            heading = line.trim_end_matches(':').to_string();
            continue;
        }
        let t = line.trim_start();
        // A flag line: "-r, --size <SIZE>  …" or "--json  …"; continuation lines are prose.
        let flag = t
            .split_whitespace()
            .find(|w| w.starts_with("--"))
            .filter(|_| t.starts_with('-'));
        if let Some(f) = flag {
            map.insert(f.trim_end_matches(',').to_string(), heading.clone());
        }
    }
    assert!(map.len() > 5, "no flags parsed from: {text}");
    map
}

/// Each group of flags sits under its own heading: the guest flags' heading used to leak
/// onto every flag after them (`--link-rate`, `--ssh-key`, `--delay`; `--json` and `--db`
/// in `explain`).
#[test]
fn every_flag_sits_under_its_own_heading() {
    let rr = headings(&["rr"]);
    for (flag, want) in [
        ("--size", "Options"),
        ("--rate", "Options"),
        ("--flows", "Options"),
        ("--json", "Options"),
        ("--cpus", "Options"),
        ("--placement", "Placement"),
        ("--link-rate", "Placement"),
        ("--delay", "Placement"),
        ("--ssh-key", "Placement"),
        ("--ssh-opt", "Placement"),
        ("--kernel", "Guest placement"),
        ("--vcpus", "Guest placement"),
        ("--boot-timeout", "Guest placement"),
    ] {
        assert_eq!(rr.get(flag).map(String::as_str), Some(want), "rr {flag}");
    }
    let explain = headings(&["explain"]);
    for flag in ["--json", "--db", "--no-wait", "--output"] {
        assert_eq!(
            explain.get(flag).map(String::as_str),
            Some("Options"),
            "explain {flag}"
        );
    }
    assert_eq!(explain["--kernel"], "Guest placement");
    let vm = headings(&["vm", "compare"]);
    assert_eq!(vm["--json"], "Options");
    assert_eq!(vm["--mem"], "Guest placement");
}
