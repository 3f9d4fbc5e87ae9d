//! Escaping for what report writes: HTML (one function for every page section: the report,
//! the swimlane, the trend) and CSV cells (the table export and the tidy export).

/// `s` safe inside HTML text and double-quoted attribute values.
pub(crate) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One CSV cell: quoted when it holds a separator, a quote or a line break (RFC 4180), and
/// never a formula. A cell a spreadsheet would evaluate (starting with `=`, `+`, `-`, `@`, a
/// tab or a carriage return: a tag or config named `=cmd|' /C calc'!A0`) gets a leading `'`,
/// as OWASP's CSV-injection advice has it, unless the whole cell is a number (`-1.5` stays
/// a number).
pub(crate) fn csv_field(v: &str) -> String {
    let formula =
        v.starts_with(['=', '+', '-', '@', '\t', '\r']) && v.trim().parse::<f64>().is_err();
    let v = if formula {
        format!("'{v}")
    } else {
        v.to_string()
    };
    if formula || v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::csv_field;

    /// Formulas are neutralized (OWASP), numbers and plain text are left alone, and RFC
    /// 4180 quoting still holds.
    #[test]
    fn csv_cells_are_never_formulas() {
        assert_eq!(csv_field("=cmd|' /C calc'!A0"), "\"'=cmd|' /C calc'!A0\"");
        for f in ["+1+1", "-2+3", "@SUM(A1)", "\tx", "\r=1"] {
            let c = csv_field(f);
            assert!(c.starts_with("\"'"), "{f:?} → {c}");
        }
        assert_eq!(csv_field("-1.5"), "-1.5");
        assert_eq!(csv_field("1e30"), "1e30");
        assert_eq!(csv_field("baseline"), "baseline");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
