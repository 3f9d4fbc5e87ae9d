//! Fuzzes the control-protocol decoder: any byte string must decode to a message, ask for
//! more bytes, or fail with an error — never panic, hang, or allocate beyond the frame cap.
#![no_main]

use libfuzzer_sys::fuzz_target;
use virtperf_wire::{decode_frame, encode, read_message};

fuzz_target!(|data: &[u8]| {
    // The buffer decoder: consume frames until it stops.
    let mut rest = data;
    while let Ok(Some((msg, used))) = decode_frame(rest) {
        // Anything decoded must re-encode and decode to the same message.
        let again = encode(&msg);
        let (back, n) = decode_frame(&again).expect("re-decode").expect("whole frame");
        assert_eq!(back, msg);
        assert_eq!(n, again.len());
        rest = &rest[used..];
    }
    // The streaming reader over the same bytes.
    let mut r = data;
    while read_message(&mut r).is_ok() {}
});
