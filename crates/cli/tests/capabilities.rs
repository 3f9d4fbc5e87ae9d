//! Issue 52 §4: every capability a test can skip on is listed once
//! (`virtperf_testkit::CAPABILITIES`), and `.ci/run` requires each one CI installs or
//! creates itself, so a skip there is a failure rather than a silent pass; what it leaves
//! out (hardware, kernel features) is listed with why. A skip name a test uses that is not
//! listed is caught here, before a run reaches it.

use std::path::{Path, PathBuf};

use virtperf_testkit::CAPABILITIES;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `VIRTPERF_REQUIRE`'s list as `.ci/run` exports it.
fn ci_requires() -> Vec<String> {
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let line = ci
        .lines()
        .find_map(|l| l.trim().strip_prefix("export VIRTPERF_REQUIRE="))
        .expect(".ci/run exports VIRTPERF_REQUIRE");
    line.split(',').map(|s| s.trim().to_string()).collect()
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "target") {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The string literal starting at the first `"` after `at` in `text` (whitespace only
/// between), if any.
fn literal_after(text: &str, at: usize) -> Option<&str> {
    let rest = text[at..].trim_start();
    let rest = rest.strip_prefix('"')?;
    rest.split('"').next()
}

#[test]
fn ci_requires_every_capability_it_installs_and_none_it_cannot() {
    let required = ci_requires();
    for (name, hardware) in CAPABILITIES {
        match hardware {
            None => assert!(
                required.iter().any(|r| r == name),
                ".ci/run installs or creates {name:?} but VIRTPERF_REQUIRE does not name it: its skip would pass silently"
            ),
            Some(why) => assert!(
                !required.iter().any(|r| r == name),
                "{name:?} is required by .ci/run but listed as what a machine may lack ({why})"
            ),
        }
    }
    for r in &required {
        assert!(
            CAPABILITIES.iter().any(|(n, _)| n == r),
            "VIRTPERF_REQUIRE names {r:?}, which no test skips on (not in CAPABILITIES)"
        );
    }
}

/// Every literal capability in a `skip("…"` call, or returned as `Some(("…"` by a test's
/// "what is missing" helper, is a listed one.
#[test]
fn every_skip_names_a_listed_capability() {
    let mut files = Vec::new();
    sources(&root().join("crates"), &mut files);
    let mut seen = 0;
    let mut unknown = Vec::new();
    for f in files {
        if f.ends_with("tests/capabilities.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap_or_default();
        let in_tests = f.components().any(|c| c.as_os_str() == "tests");
        for pat in ["testkit::skip(", "Some(("] {
            if pat == "Some((" && !in_tests {
                continue;
            }
            for (at, _) in text.match_indices(pat) {
                let Some(name) = literal_after(&text, at + pat.len()) else {
                    continue;
                };
                // A tuple of other kinds (`Some(("rr", …))` in a table) is not a skip.
                if pat == "Some((" && !text[at..].contains("skip") {
                    continue;
                }
                seen += 1;
                if !CAPABILITIES.iter().any(|(n, _)| *n == name) {
                    unknown.push(format!("{}: {name:?}", f.display()));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "skips on capabilities not in virtperf_testkit::CAPABILITIES: {unknown:#?}"
    );
    assert!(seen > 50, "only {seen} skips found: the scan is broken");
}
