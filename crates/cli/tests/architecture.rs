//! docs/architecture.md drawn from the code (issue 29): every dependency between this
//! workspace's crates in a `Cargo.toml` is in the document's crate table, and every edge
//! the table names exists. Read with `cargo metadata`, not by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

type Edges = BTreeMap<String, BTreeSet<String>>;

/// The crate directory's name (`crates/lab` → `lab`) for a manifest path.
fn dir_of(manifest: &str) -> String {
    Path::new(manifest)
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Workspace crate → the workspace crates it depends on (normal dependencies).
fn from_cargo(root: &Path) -> Edges {
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata is JSON");
    let pkgs = v["packages"].as_array().expect("packages");
    let name_to_dir: BTreeMap<String, String> = pkgs
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap_or_default().to_string(),
                dir_of(p["manifest_path"].as_str().unwrap_or_default()),
            )
        })
        .collect();
    let mut edges = Edges::new();
    for p in pkgs {
        let me = dir_of(p["manifest_path"].as_str().unwrap_or_default());
        // Only the crates the document describes (not the fuzz harness).
        if !p["manifest_path"]
            .as_str()
            .unwrap_or_default()
            .contains("/crates/")
        {
            continue;
        }
        let deps = edges.entry(me).or_default();
        for d in p["dependencies"].as_array().into_iter().flatten() {
            let normal = d["kind"].is_null();
            if let (true, Some(dir)) = (normal, name_to_dir.get(d["name"].as_str().unwrap_or(""))) {
                deps.insert(dir.clone());
            }
        }
    }
    edges
}

/// The crate table of docs/architecture.md: an entry starts with a crate's name in the
/// first column; its edges follow its last `→`, comma-separated; "(no virtperf deps)" or no arrow
/// means none.
fn from_doc(text: &str) -> Edges {
    let start = text.find("## Crates").expect("a `## Crates` section");
    let block = text[start..].split("```").nth(1).expect("its code block");
    let mut edges = Edges::new();
    let mut current: Option<String> = None;
    let mut entry = String::new();
    let flush = |name: &Option<String>, entry: &str, edges: &mut Edges| {
        if let Some(n) = name {
            let deps = entry
                .rsplit_once('→')
                .map(|(_, after)| {
                    after
                        .split(',')
                        .map(|d| d.trim().trim_end_matches('.').to_string())
                        .filter(|d| !d.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            edges.insert(n.clone(), deps);
        }
    };
    for line in block.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if !line.starts_with(' ') && !first.is_empty() {
            flush(&current, &entry, &mut edges);
            current = Some(first.to_string());
            entry = line[first.len()..].to_string();
        } else {
            entry.push(' ');
            entry.push_str(line);
        }
    }
    flush(&current, &entry, &mut edges);
    edges
}

#[test]
fn the_documented_crate_graph_is_the_real_one() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).expect("the document");
    let documented = from_doc(&doc);
    let real = from_cargo(&root);
    let crates: BTreeSet<&String> = real.keys().chain(documented.keys()).collect();
    let mut wrong = Vec::new();
    for c in crates {
        let (r, d) = (real.get(c), documented.get(c));
        match (r, d) {
            (Some(_), None) => wrong.push(format!("crate {c} is not in the document")),
            (None, Some(_)) => wrong.push(format!(
                "the document names a crate {c} that does not exist"
            )),
            (Some(r), Some(d)) => {
                for e in r.difference(d) {
                    wrong.push(format!("{c} → {e} is in Cargo.toml, not in the document"));
                }
                for e in d.difference(r) {
                    wrong.push(format!(
                        "the document says {c} → {e}; Cargo.toml has no such dependency"
                    ));
                }
            }
            (None, None) => {}
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md is out of date:\n{}",
        wrong.join("\n")
    );
}

/// The parser reads what the document writes, arrows at a line's end included.
#[test]
fn the_table_parser_reads_both_arrow_placements() {
    let e = from_doc(
        "## Crates\n```\na        first line\n         → b, c\nb        job → c\nc        (no virtperf deps)\n```\n",
    );
    assert_eq!(e["a"], ["b", "c"].iter().map(|s| s.to_string()).collect());
    assert_eq!(e["b"], ["c".to_string()].into_iter().collect());
    assert!(e["c"].is_empty());
}
