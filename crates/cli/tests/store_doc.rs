//! docs/store.md's pandas example, run with python3 against a database a real `virtperf
//! run` makes, checked against the same trials as `virtperf export` gives them.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::vp;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/store_example.py");
const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/store.md");

const SPEC: &str = r#"
name = "store-doc"
duration = "300ms"
repetitions = 2
[[workload]]
kind = "rr"
[[config]]
name = "alpha"
[[config]]
name = "beta"
socket = { nodelay = false }
"#;

/// Why the example cannot run here, if it cannot.
/// What the example needs and this machine lacks: the capability and why.
fn missing_python() -> Option<(&'static str, String)> {
    match Command::new("python3")
        .args(["-c", "import pandas"])
        .output()
    {
        Err(e) => Some(("python3", format!("no python3 ({e})"))),
        Ok(o) if !o.status.success() => Some((
            "pandas",
            format!(
                "python3 has no pandas ({})",
                String::from_utf8_lossy(&o.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
            ),
        )),
        Ok(_) => None,
    }
}

#[test]
fn the_doc_shows_the_example_verbatim() {
    let doc = std::fs::read_to_string(DOC).unwrap();
    let example = std::fs::read_to_string(EXAMPLE).unwrap();
    assert!(
        doc.contains(&format!("```python\n{example}```")),
        "docs/store.md must include docs/store_example.py verbatim"
    );
}

#[test]
fn the_pandas_example_reads_a_real_store() {
    if let Some((need, why)) = missing_python() {
        virtperf_testkit::skip(need, &why);
        return;
    }
    let dir = std::env::temp_dir().join(format!("vp-store-doc-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _cleanup = Cleanup(dir.clone());
    let spec = dir.join("spec.toml");
    std::fs::write(&spec, SPEC).unwrap();
    let db = dir.join("results.db");
    let run = vp()
        .args(["run", spec.to_str().unwrap(), "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let out = Command::new("python3")
        .arg(EXAMPLE)
        .arg(&db)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the example failed: {}{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.starts_with("run 1: p50 latency"), "{text}");

    // Each config's line (`alpha  2  15.71  14.96  16.46`) agrees with the stored p50s.
    let p50s = stored_p50s(&db);
    for config in ["alpha", "beta"] {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(config))
            .unwrap_or_else(|| panic!("no line for {config}: {text}"));
        let cols: Vec<f64> = line
            .split_whitespace()
            .skip(1)
            .map(|v| v.parse().unwrap())
            .collect();
        let mine: Vec<f64> = p50s
            .iter()
            .filter(|(c, _)| c == config)
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(cols[0], 2.0, "two tries: {line}");
        let (lo, hi) = (
            mine.iter().copied().fold(f64::INFINITY, f64::min),
            mine.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        );
        assert!((cols[2] - lo).abs() < 0.006, "min {lo} vs {line}");
        assert!((cols[3] - hi).abs() < 0.006, "max {hi} vs {line}");
    }
}

/// (config, p50_us) of every trial, from `virtperf export`.
fn stored_p50s(db: &Path) -> Vec<(String, f64)> {
    let out = vp()
        .args(["export", "last", "--format", "json", "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert!(out.status.success());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metric"] == "p50_us")
        .map(|r| {
            (
                r["config"].as_str().unwrap().to_string(),
                r["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
