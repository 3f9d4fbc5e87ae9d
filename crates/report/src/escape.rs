//! HTML escaping, one function for every page section (the report, the swimlane, the trend).

/// `s` safe inside HTML text and double-quoted attribute values.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
