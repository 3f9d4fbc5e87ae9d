//! What clap generates for people: help headings, shell completions, the man page.

use crate::common;

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

fn stdout_of(args: &[&str]) -> String {
    let out = vp().args(args).output().expect("spawn");
    assert_ok(&out);
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Completion scripts come from the clap definitions, for each shell, and bash accepts its
/// script: sourcing it registers a completion for `virtperf`.
#[test]
fn completions_are_generated_for_each_shell() {
    let bash = stdout_of(&["completions", "bash"]);
    assert!(bash.contains("virtperf") && bash.contains("--fail-on-regression"));
    assert!(stdout_of(&["completions", "zsh"]).starts_with("#compdef virtperf"));
    assert!(stdout_of(&["completions", "fish"]).contains("complete -c virtperf"));

    let dir = std::env::temp_dir().join(format!("vp-compl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("virtperf.bash");
    std::fs::write(&script, &bash).unwrap();
    let registered = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source '{}' && complete -p virtperf",
            script.display()
        ))
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    match registered {
        Ok(o) => {
            assert_ok(&o);
            assert!(String::from_utf8_lossy(&o.stdout).contains("virtperf"));
        }
        Err(e) => {
            virtperf_testkit::skip("bash", &format!("sourcing the script: no bash ({e})"));
        }
    }

    let (code, err) = common::run_fail(&["completions", "tcsh"]);
    assert_eq!(code, 2, "{err}");
}

/// The man page is roff from the same definitions: a `.TH` title, the name, every command.
#[test]
fn man_prints_a_roff_page() {
    let man = stdout_of(&["man"]);
    // clap_mangen opens with two lines that define a quote string; the title follows.
    let title = man.lines().position(|l| l.starts_with(".TH virtperf 1"));
    let name = man.lines().position(|l| l == ".SH NAME");
    assert!(
        matches!((title, name), (Some(t), Some(n)) if t < n && t <= 2),
        "{man}"
    );
    for sub in ["rr", "stream", "compare", "completions", "man"] {
        assert!(
            man.contains(&format!("virtperf\\-{sub}(1)")),
            "{sub} missing"
        );
    }
}

/// `man --dir` writes the pages the main page refers to: every `virtperf-…(1)` it names
/// exists as a file, each a roff page with its own title.
#[test]
fn man_dir_writes_every_page_the_main_page_names() {
    let dir = std::env::temp_dir().join(format!("vp-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = common::vp()
        .args(["man", "--dir"])
        .arg(&dir)
        .output()
        .unwrap();
    common::assert_ok(&out);
    let main = std::fs::read_to_string(dir.join("virtperf.1")).unwrap();
    let mut named = 0;
    for part in main.split("virtperf\\-").skip(1) {
        let Some(end) = part.find("(1)") else {
            continue;
        };
        let page = format!("virtperf-{}.1", part[..end].replace("\\-", "-"));
        let text = std::fs::read_to_string(dir.join(&page))
            .unwrap_or_else(|e| panic!("{page} is named but not written: {e}"));
        assert!(text.contains(".TH virtperf-"), "{page}: {text}");
        named += 1;
    }
    assert!(named >= 15, "only {named} pages named");
    assert!(dir.join("virtperf-vm-compare.1").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
