//! RFC 3339 timestamps from `std::time::SystemTime`, without a date-time dependency.
//!
//! The store only ever needs "now, in UTC, as text that sorts chronologically", so a
//! few lines of calendar arithmetic replace a whole date-time crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// The current time as an RFC 3339 UTC string with millisecond precision, for example
/// `2024-02-29T13:05:09.042Z`.
///
/// Every timestamp the store writes has this fixed-width form, so comparing the strings
/// compares the instants (for years 0000–9999), which lets SQL `ORDER BY` sort by time.
pub fn now_rfc3339() -> String {
    rfc3339(SystemTime::now())
}

/// Formats `t` as `YYYY-MM-DDTHH:MM:SS.mmmZ` in UTC.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    // Times before the epoch come back as an error holding the distance backwards; a clock
    // set before 1970 is odd but must not panic.
    let ms: i64 = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |m| -m),
    };
    let secs = ms.div_euclid(1000);
    let milli = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{milli:03}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

/// Converts a count of days since 1970-01-01 into a proleptic Gregorian (year, month, day).
///
/// This is Howard Hinnant's `civil_from_days`
/// (<https://howardhinnant.github.io/date_algorithms.html#civil_from_days>). It shifts the
/// year to start on 1 March so the leap day falls at the end of a year, then splits the day
/// count into 400-year eras (146 097 days each, the Gregorian cycle), the year of the era,
/// the day of that year, and finally a month from a linear formula that fits the
/// March-based month lengths (31, 30, 31, 30, 31, 31, 30, 31, 30, 31, 31, 28/29).
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of March-based year, [0, 365]
    let mp = (5 * doy + 2) / 153; // March-based month, [0, 11]
                                  // Both values are small and non-negative by construction, so the conversions cannot
                                  // fail; the fallbacks only keep this free of panics.
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1); // [1, 31]
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1); // [1, 12]
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        assert_eq!(at(-86_400), "1969-12-31T00:00:00.000Z");
        assert_eq!(at(4_102_444_800), "2100-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(UNIX_EPOCH + Duration::from_millis(1_042)),
            "1970-01-01T00:00:01.042Z"
        );
    }

    #[test]
    fn every_day_follows_the_previous() {
        // Walk 1900..2100 day by day: dates must advance by exactly one calendar day.
        let mut prev = civil_from_days(-25_567); // 1900-01-01
        assert_eq!(prev, (1900, 1, 1));
        for days in -25_566..47_482 {
            let cur = civil_from_days(days);
            let next_day = (prev.0, prev.1, prev.2 + 1);
            let next_month = (prev.0, prev.1 + 1, 1);
            let next_year = (prev.0 + 1, 1, 1);
            assert!(
                cur == next_day || cur == next_month || cur == next_year,
                "{prev:?} -> {cur:?}"
            );
            prev = cur;
        }
        assert_eq!(prev, (2099, 12, 31));
    }

    #[test]
    fn now_has_the_fixed_shape() {
        let s = now_rfc3339();
        assert_eq!(s.len(), 24, "{s}");
        assert!(s.ends_with('Z') && s.as_bytes()[10] == b'T', "{s}");
    }
}
