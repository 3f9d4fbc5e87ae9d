//! Parsers for the values users type, shared by the command line and experiment specs, so
//! `--size 1,1` and `size = "1,1"` accept exactly the same things and fail with the same
//! words.

use std::time::Duration;

use virtperf_wire::{MAX_MESSAGE_SIZE, MAX_TRANSFER};

/// Parses a duration: humantime syntax (`10s`, `500ms`, `1m30s`) or bare seconds.
pub fn duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let d = if let Ok(secs) = t.parse::<f64>() {
        if !secs.is_finite() || secs < 0.0 {
            return Err(format!("invalid duration {s:?}: must not be negative"));
        }
        Duration::from_secs_f64(secs)
    } else {
        humantime::parse_duration(t)
            .map_err(|e| format!("invalid duration {s:?}: {e} (examples: 10s, 500ms, 1m)"))?
    };
    if d.is_zero() {
        return Err(format!("invalid duration {s:?}: must be greater than 0"));
    }
    Ok(d)
}

/// Parses a byte count with an optional unit: `4096`, `64K`, `100MB` (10^6), `1GiB` (2^30).
pub fn bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("invalid size {s:?}: must be positive"));
    }
    let v = parse_size::parse_size(t)
        .map_err(|e| format!("invalid size {s:?}: {e} (examples: 1, 4096, 64KiB, 100MB, 1GiB)"))?;
    if v == 0 {
        return Err(format!("invalid size {s:?}: must be at least 1 byte"));
    }
    if v > MAX_TRANSFER {
        return Err(format!("invalid size {s:?}: at most 1 TiB"));
    }
    Ok(v)
}

/// Parses a per-message size (at most 64 MiB).
pub fn size32(s: &str) -> Result<u32, String> {
    let v = bytes(s)?;
    if v > u64::from(MAX_MESSAGE_SIZE) {
        return Err(format!(
            "invalid size {s:?}: at most {MAX_MESSAGE_SIZE} bytes (64 MiB) per message"
        ));
    }
    Ok(v as u32)
}

/// Parses `REQ,RESP` or a single size for both.
pub fn size_pair(s: &str) -> Result<(u32, u32), String> {
    match s.split_once(',') {
        Some((a, b)) => Ok((size32(a)?, size32(b)?)),
        None => {
            let v = size32(s)?;
            Ok((v, v))
        }
    }
}

/// Parses a positive count (flows, downloads).
pub fn count(s: &str) -> Result<u32, String> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| format!("invalid count {s:?}: expected a whole number like 1 or 4"))?;
    if v == 0 {
        return Err(format!("invalid count {s:?}: must be at least 1"));
    }
    Ok(v)
}

/// CPU pinning of client and server: either may be absent.
pub type Cpus = (Option<u32>, Option<u32>);

/// Parses netperf-style CPU pinning: `C,S`, `N` (both), `C,` (client only), `,S`.
pub fn cpus(s: &str) -> Result<Cpus, String> {
    let one = |p: &str| -> Result<Option<u32>, String> {
        let p = p.trim();
        if p.is_empty() {
            return Ok(None);
        }
        p.parse::<u32>().map(Some).map_err(|_| {
            format!("invalid cpus {s:?}: expected CPU numbers like 0,1 (client,server)")
        })
    };
    let r = match s.split_once(',') {
        Some((c, v)) => (one(c)?, one(v)?),
        None => {
            let v = one(s)?;
            (v, v)
        }
    };
    if r == (None, None) {
        return Err(format!("invalid cpus {s:?}: name at least one CPU"));
    }
    Ok(r)
}

/// Parses a confidence target `95,2%`: confidence level and relative CI half-width.
pub fn until_ci(s: &str) -> Result<(f64, f64), String> {
    let bad = || format!("invalid CI target {s:?}: expected LEVEL,WIDTH% like 95,2%");
    let (level, width) = s.split_once(',').ok_or_else(bad)?;
    let level: f64 = level
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| bad())?;
    let width: f64 = width
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| bad())?;
    if !(50.0..100.0).contains(&level) || !(0.0..100.0).contains(&width) || width == 0.0 {
        return Err(format!(
            "invalid CI target {s:?}: level must be in 50..100 and width in (0, 100) percent"
        ));
    }
    Ok((level / 100.0, width / 100.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(duration("0").unwrap_err().contains("greater than 0"));
        assert!(duration("0s").is_err());
        assert!(duration("-1").unwrap_err().contains("negative"));
        assert!(duration("soon").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(bytes("100MB").unwrap(), 100_000_000);
        assert_eq!(size_pair("1,1").unwrap(), (1, 1));
        assert_eq!(size_pair("64").unwrap(), (64, 64));
        assert_eq!(size_pair("4K,1").unwrap(), (4000, 1));
        assert!(size_pair("-1").unwrap_err().contains("positive"));
        assert!(size_pair("0,1").unwrap_err().contains("at least 1"));
        assert!(size32("1GiB").unwrap_err().contains("64 MiB"));
        assert!(bytes("2TiB").unwrap_err().contains("1 TiB"));
        assert!(bytes("lots").is_err());
    }

    #[test]
    fn cpu_pairs() {
        assert_eq!(cpus("0,1").unwrap(), (Some(0), Some(1)));
        assert_eq!(cpus("1").unwrap(), (Some(1), Some(1)));
        assert_eq!(cpus("0,").unwrap(), (Some(0), None));
        assert_eq!(cpus(",1").unwrap(), (None, Some(1)));
        assert!(cpus(",").is_err());
        assert!(cpus("a,b").is_err());
        assert!(cpus("-1").is_err());
    }

    #[test]
    fn counts_and_ci() {
        assert_eq!(count("4").unwrap(), 4);
        assert!(count("0").is_err());
        assert!(count("-2").is_err());
        assert_eq!(until_ci("95,2%").unwrap(), (0.95, 0.02));
        assert_eq!(until_ci("99, 5").unwrap(), (0.99, 0.05));
        assert!(until_ci("95").is_err());
        assert!(until_ci("150,2%").is_err());
        assert!(until_ci("95,0%").is_err());
    }
}
