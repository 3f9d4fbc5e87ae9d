//! RFC 3339 timestamps from `std::time::SystemTime`, formatted by humantime.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The current time as an RFC 3339 UTC string with millisecond precision, for example
/// `2024-02-29T13:05:09.042Z`.
///
/// Every timestamp the store writes has this fixed-width form, so comparing the strings
/// compares the instants, which lets SQL `ORDER BY` sort by time.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// The instant `ago` before now, as RFC 3339 UTC (for `virtperf runs --since 30d`).
pub fn rfc3339_ago(ago: Duration) -> String {
    rfc3339(SystemTime::now().checked_sub(ago).unwrap_or(UNIX_EPOCH))
}

/// The instant a stored timestamp names (what [`now_rfc3339`] wrote); None for text that
/// is not one.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

/// The last millisecond humantime can write (9999-12-31T23:59:59.999Z).
const LATEST: Duration = Duration::from_millis(253_402_300_799_999);

/// Formats `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC.
///
/// humantime panics on a time before 1970 and fails past year 9999; a clock set that far
/// off is clamped into that range, so writing a record never panics and every stored string
/// keeps the fixed width readers sort by.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let t = t.clamp(UNIX_EPOCH, UNIX_EPOCH + LATEST);
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> String {
        let t = if secs >= 0 {
            UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
        } else {
            UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
        };
        rfc3339(t)
    }

    #[test]
    fn known_instants() {
        // Reference values from `date -u -d @SECS +%FT%TZ`.
        assert_eq!(at(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400), "2000-02-29T00:00:00.000Z");
        assert_eq!(at(1_709_164_800), "2024-02-29T00:00:00.000Z");
        assert_eq!(at(1_709_251_199), "2024-02-29T23:59:59.000Z");
        assert_eq!(at(4_102_444_800), "2100-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_042)),
            "1970-01-01T00:00:01.042Z"
        );
        // Sub-millisecond parts are cut, not rounded up into the next millisecond.
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_micros(1_042_999)),
            "1970-01-01T00:00:01.042Z"
        );
    }

    #[test]
    fn clocks_out_of_range_are_clamped_not_panicked_on() {
        assert_eq!(at(-86_400), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(300_000_000_000), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn now_has_the_fixed_shape() {
        let s = now_rfc3339();
        assert_eq!(s.len(), 24, "{s}");
        assert!(s.ends_with('Z') && s.as_bytes()[10] == b'T', "{s}");
    }
}
