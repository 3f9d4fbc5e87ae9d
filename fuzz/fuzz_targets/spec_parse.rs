//! Fuzzes the experiment-spec parser: any text must parse to a spec or fail with an error
//! that names a line — never panic, hang, or expand into an unbounded matrix.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match virtperf_experiment::spec::parse(text) {
        Ok(s) => assert!(!s.points.is_empty() && !s.configs.is_empty()),
        Err(e) => assert!(!e.message.is_empty()),
    }
});
