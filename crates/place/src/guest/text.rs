//! Text helpers for what the guest's console, QEMU and passt print.

/// The last `n` non-empty lines of `text`, trimmed and joined for a one-line error.
pub(super) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let from = lines.len().saturating_sub(n);
    if lines.is_empty() {
        "(nothing)".into()
    } else {
        lines[from..].join(" | ")
    }
}
