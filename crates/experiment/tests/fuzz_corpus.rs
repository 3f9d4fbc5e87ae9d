//! The spec fuzzer's corpus and every input it ever crashed on (`fuzz/corpus/spec_parse`,
//! `fuzz/regressions/spec_parse`), replayed through the parser on every test run: each
//! parses to a spec with points and configs, or fails with a message.

use std::path::Path;

#[test]
fn every_corpus_and_regression_spec_parses_or_fails_with_a_message() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut seen = 0;
    for dir in ["corpus/spec_parse", "regressions/spec_parse"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for e in entries.flatten() {
            let bytes = std::fs::read(e.path()).expect("readable");
            seen += 1;
            let Ok(text) = std::str::from_utf8(&bytes) else {
                continue;
            };
            match virtperf_experiment::spec::parse(text) {
                Ok(s) => assert!(
                    !s.points.is_empty() && !s.configs.is_empty(),
                    "{}: a spec without points or configs",
                    e.path().display()
                ),
                Err(err) => assert!(
                    !err.message.is_empty(),
                    "{}: an error without a message",
                    e.path().display()
                ),
            }
        }
    }
    assert!(seen >= 4, "the corpus is gone: {seen} files");
}
