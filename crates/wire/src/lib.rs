//! The vocabulary virtperf speaks: control-protocol messages, their framing, and the data
//! types that travel in them (workload parameters, per-side measurements, environment
//! fingerprints, final results).
//!
//! Every other crate depends on this one and this one on nothing of ours: it holds no sockets
//! and no kernel knowledge, only types and a codec over any `Read`/`Write`, so the store and
//! the report can use the same types without touching the network.
//!
//! # Framing
//! A frame is a big-endian `u32` payload length followed by that many bytes of JSON encoding
//! one [`Message`]. The reader refuses lengths above a cap before allocating, so a hostile
//! peer cannot make the agent allocate more than [`MAX_CONTROL_FRAME`] bytes.

pub mod counter;
pub mod critical_path;
pub mod frame;
pub mod message;
pub mod model;
pub mod time;

pub use critical_path::{exit_remedies, InSitu, Mark, Pct, Stage, Timeline, EXIT_CAUSES};
pub use frame::{
    decode_frame, encode, read_message, read_message_max, read_message_within, report_limit,
    write_message, write_message_max, WireError, MAX_CONTROL_FRAME,
};
pub use message::{DrivePlan, DriveTarget, Family, Message, DATA_KEY_LEN, PROTOCOL_VERSION};
pub use model::*;

/// The URL with its password (if any) replaced by `***`: what a stored run, the machine
/// lock and every message may show of a database URL or a command line that holds one.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, tail) = match rest.find('@') {
        Some(i) if !rest[..i].contains('/') => (&rest[..i], &rest[i..]),
        _ => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{tail}"),
        None => url.to_string(),
    }
}

/// TCP port the agent listens on by default for control connections.
pub const DEFAULT_PORT: u16 = 7150;

/// `s` made safe to print on a terminal: control characters other than newline and tab
/// (ESC starts the sequences that recolour, move the cursor or retitle a terminal) are
/// written as `\u{1b}`. Text that comes from a file, a store or a peer goes through this
/// before it is printed for people; JSON output escapes them itself.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    std::borrow::Cow::Owned(
        s.chars()
            .map(|c| {
                if bad(c) {
                    c.escape_unicode().to_string()
                } else {
                    c.to_string()
                }
            })
            .collect(),
    )
}

#[cfg(test)]
mod printable_tests {
    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(super::printable("a\u{1b}[31mRED"), "a\\u{1b}[31mRED");
        assert_eq!(super::printable("x\u{9b}2J"), "x\\u{9b}2J");
        assert_eq!(super::printable("two\nlines\tand µs"), "two\nlines\tand µs");
    }
}
