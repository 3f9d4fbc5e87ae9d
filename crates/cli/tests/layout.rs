//! The integration tests' own layout: the files of `crates/cli/tests` are modules of the
//! `together` or `alone` binary (Cargo.toml turns off one binary per file), so a file
//! nobody declares would never be compiled or run, and a test in `alone` that takes no turn
//! would run beside the tests that must run alone. Both are checked here, on the real files
//! and on written examples that break them.

use std::collections::BTreeSet;
use std::path::Path;

/// The files that are crate roots of a test binary (Cargo.toml's `[[test]]` paths).
const ROOTS: [&str; 3] = ["together.rs", "alone.rs", "reaping.rs"];

/// The `mod NAME;` declarations of a crate root's source.
fn declared(root: &str) -> BTreeSet<String> {
    root.lines()
        .filter_map(|l| l.trim().strip_prefix("mod "))
        .filter_map(|l| l.strip_suffix(';'))
        .map(str::to_string)
        .collect()
}

/// What is wrong with the layout: files in `files` (names without `.rs`, roots excluded)
/// declared by neither root or by both, and declarations without a file. Empty when sound.
fn layout_faults(files: &BTreeSet<String>, together: &str, alone: &str) -> Vec<String> {
    let (t, a) = (declared(together), declared(alone));
    let mut faults = Vec::new();
    for f in files {
        match (t.contains(f), a.contains(f)) {
            (false, false) => faults.push(format!("{f}.rs is in no test binary")),
            (true, true) => faults.push(format!("{f}.rs is in both test binaries")),
            _ => {}
        }
    }
    for m in t.union(&a) {
        if m != "common" && m != "pgserver" && !files.contains(m) {
            faults.push(format!("mod {m} has no file {m}.rs"));
        }
    }
    faults
}

/// The tests of `src` (a module of `alone`) whose first statement takes no turn.
fn untaken_turns(src: &str) -> Vec<String> {
    let lines: Vec<&str> = src.lines().collect();
    let mut bad = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if l.trim() != "#[test]" {
            continue;
        }
        let Some(sig) = lines[i + 1..].iter().position(|l| l.starts_with("fn ")) else {
            bad.push(format!("a #[test] on line {} has no fn", i + 1));
            continue;
        };
        let first = lines.get(i + 1 + sig + 1).map(|l| l.trim()).unwrap_or("");
        let takes =
            first == "let _alone = crate::alone();" || first == "let _beside = crate::beside();";
        if !takes {
            bad.push(lines[i + 1 + sig].trim().to_string());
        }
    }
    bad
}

fn tests_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests"))
}

#[test]
fn every_test_file_is_a_module_of_one_binary() {
    let dir = tests_dir();
    let files: BTreeSet<String> = std::fs::read_dir(dir)
        .expect("tests dir")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".rs") && !ROOTS.contains(&n.as_str()))
        .map(|n| n.trim_end_matches(".rs").to_string())
        .collect();
    assert!(files.len() > 30, "found only {files:?}");
    let read = |n: &str| std::fs::read_to_string(dir.join(n)).expect("root");
    let faults = layout_faults(&files, &read("together.rs"), &read("alone.rs"));
    assert!(faults.is_empty(), "{faults:#?}");
    // And the check finds each fault it names.
    let files: BTreeSet<String> = ["a", "b", "c"].map(String::from).into();
    let faults = layout_faults(&files, "mod common;\nmod a;\nmod b;\n", "mod b;\nmod d;\n");
    assert_eq!(
        faults,
        [
            "b.rs is in both test binaries",
            "c.rs is in no test binary",
            "mod d has no file d.rs"
        ]
    );
}

#[test]
fn every_test_of_alone_takes_its_turn_first() {
    let alone = std::fs::read_to_string(tests_dir().join("alone.rs")).expect("alone.rs");
    let mods = declared(&alone);
    assert!(mods.len() > 5, "alone.rs declares {mods:?}");
    for m in mods.iter().filter(|m| *m != "common") {
        let src = std::fs::read_to_string(tests_dir().join(format!("{m}.rs"))).expect("module");
        let bad = untaken_turns(&src);
        assert!(bad.is_empty(), "{m}.rs: tests without a turn: {bad:?}");
    }
    let src = "#[test]\nfn a() {\n    let _alone = crate::alone();\n}\n\n#[test]\n\
               fn b() {\n    let x = 1;\n}\n#[test]\n#[ignore]\nfn c() {\n    let _beside = crate::beside();\n}\n";
    assert_eq!(untaken_turns(src), ["fn b() {"]);
}
