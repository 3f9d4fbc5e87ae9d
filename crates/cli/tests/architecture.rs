//! docs/architecture.md drawn from the code (issue 29): every dependency between this
//! workspace's crates in a `Cargo.toml` is in the document's crate table, and every edge
//! the table names exists. Read with `cargo metadata`, not by hand.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

#[path = "architecture/modules.rs"]
mod modules;

use modules::Edges;

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

/// The strongly connected groups of more than one module (Tarjan's algorithm): import
/// circles.
fn circles(edges: &Edges) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut group = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                group.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            if group.len() > 1 {
                t.out.push(group);
            }
        }
    }
    let mut t = T {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut found = Vec::new();
    let mut dirs: Vec<_> = std::fs::read_dir(root.join("crates"))
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let edges = modules::edges(&modules::sources(&dir.join("src")));
        assert!(
            !edges.is_empty() || name.is_empty(),
            "{name}: no modules read"
        );
        for c in circles(&edges) {
            found.push(format!("{name}: {c:?}"));
        }
    }
    assert!(found.is_empty(), "import circles: {found:#?}");
}

/// The detector finds a circle that is there and none where there is none.
#[test]
fn the_circle_detector_sees_a_circle() {
    let e = |pairs: &[(&str, &str)]| {
        let mut m = Edges::new();
        for (a, b) in pairs {
            m.entry((*a).into()).or_default().insert((*b).into());
            m.entry((*b).into()).or_default();
        }
        m
    };
    let c = circles(&e(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")]));
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].len(), 3);
    assert!(circles(&e(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

/// A circle that runs through a re-export is a circle: `a` re-exports `a::inner`'s name and
/// names `b`; `b` names the re-export. Following the name to `a::inner` alone would miss it.
#[test]
fn a_circle_through_a_reexport_is_found() {
    let dir = std::env::temp_dir().join(format!("vp-arch-re-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("a")).expect("temp dir");
    let files = [
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a/mod.rs",
            "mod inner;\npub use inner::Thing;\nfn f() { crate::b::g(); }\n",
        ),
        ("a/inner.rs", "pub struct Thing;\n"),
        ("b.rs", "use crate::a::Thing;\npub fn g() {}\n"),
    ];
    for (p, t) in files {
        std::fs::write(dir.join(p), t).expect("write");
    }
    let e = modules::edges(&modules::sources(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    let found = circles(&e);
    assert_eq!(found.len(), 1, "{e:#?}");
    assert!(
        found[0].contains("a") && found[0].contains("b"),
        "{found:?}"
    );
    assert!(
        e["b"].contains("a::inner"),
        "the name is still followed to where it lives"
    );
}

/// The file graph reads `super::`, child-module and brace paths, follows a re-export to the
/// file that defines the name, and leaves out the unit-test module and other crates.
#[test]
fn the_file_graph_follows_super_paths_and_reexports() {
    let dir = std::env::temp_dir().join(format!("vp-arch-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("r")).expect("temp dir");
    let files = [
        ("lib.rs", "mod a;\nmod r;\npub use a::Thing;\n"),
        (
            "a.rs",
            "pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::r::x;\n}\n",
        ),
        (
            "r/mod.rs",
            "mod x;\nmod y;\nuse x::f;\nuse crate::{\n    Thing,\n};\n",
        ),
        (
            "r/x.rs",
            "use super::y::g;\nuse std::io::Read;\nuse crate::a::*;\n",
        ),
        ("r/y.rs", "// use super::x;\npub fn g() {}\n"),
    ];
    for (p, t) in files {
        std::fs::write(dir.join(p), t).expect("write");
    }
    let e = modules::edges(&modules::sources(&dir));
    let _ = std::fs::remove_dir_all(&dir);
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(e[""], set(&[]), "declaring and re-exporting are not uses");
    assert_eq!(e["a"], set(&[]), "the test module is left out");
    assert_eq!(
        e["r"],
        set(&["r::x", "a"]),
        "child path and Thing followed to a"
    );
    assert_eq!(e["r::x"], set(&["r::y", "a"]), "a glob names its module");
    assert_eq!(e["r::y"], set(&[]), "comments are left out");
}
