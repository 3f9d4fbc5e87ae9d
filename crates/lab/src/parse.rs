//! Parsers for the values users type, shared by the command line and experiment specs, so
//! `--size 1,1` and `size = "1,1"` accept exactly the same things and fail with the same
//! words.

use std::time::Duration;

use anyhow::{anyhow, bail, Result};

use virtperf_wire::{MAX_IO_SIZE, MAX_TRANSFER};

/// The longest duration any flag or spec key takes (the agent's limit for one test).
pub const MAX_DURATION: Duration = Duration::from_millis(virtperf_wire::MAX_DURATION_MS);

/// Parses a duration: humantime syntax (`10s`, `500ms`, `1m30s`) or bare seconds, greater
/// than 0 and at most 24 h. Never panics, whatever the number (`1e30`, `NaN`, `inf`).
pub fn duration(s: &str) -> Result<Duration> {
    let d = duration_up_to(s, MAX_DURATION, "24h")?;
    if d.is_zero() {
        bail!("invalid duration {s:?}: must be greater than 0");
    }
    Ok(d)
}

/// A host as written by a user or printed by virtperf: an IPv6 literal may come in brackets
/// (`[::1]`, as `[::1]:17151` prints it); the brackets go, the rest is left as is.
pub fn host(s: &str) -> &str {
    s.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(s)
}

/// Splits `HOST[:PORT]`, where HOST may be a name, an IPv4 address, a bracketed IPv6
/// literal (`[::1]:7150`, `[::1]`) or a bare one (`::1`, whose colons are not a port).
pub fn host_port(s: &str) -> Result<(String, Option<u16>)> {
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|_| anyhow!("invalid port {p:?} in {s:?} (1 to 65535)"))
    };
    if let Some(rest) = s.strip_prefix('[') {
        let (h, tail) = rest
            .split_once(']')
            .ok_or_else(|| anyhow!("{s:?}: an IPv6 literal's '[' needs its ']'"))?;
        return match tail {
            "" => Ok((h.to_string(), None)),
            t => match t.strip_prefix(':') {
                Some(p) => Ok((h.to_string(), Some(port(p)?))),
                None => bail!("{s:?}: expected [ADDRESS]:PORT"),
            },
        };
    }
    match s.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => Ok((h.to_string(), Some(port(p)?))),
        _ => Ok((s.to_string(), None)),
    }
}

/// The shortest measured interval a test may ask for: below it the interval is shorter
/// than the stop's own granularity and a run of few or no transactions prints zeros that
/// look like measurements.
pub const MIN_TEST_DURATION: Duration = Duration::from_millis(10);

/// Parses a port range `FIRST-LAST` (or one port): 1 to 65535, first ≤ last.
pub fn port_range(s: &str) -> Result<(u16, u16)> {
    let t = s.trim();
    let (a, b) = t.split_once('-').unwrap_or((t, t));
    let port = |p: &str| -> Result<u16> {
        match p.trim().parse::<u16>() {
            Ok(0) | Err(_) => bail!(
                "invalid port range {s:?}: give ports 1-65535 as FIRST-LAST (e.g. 17151-17158)"
            ),
            Ok(n) => Ok(n),
        }
    };
    let (a, b) = (port(a)?, port(b)?);
    if a > b {
        bail!("invalid port range {s:?}: the first port is above the last");
    }
    Ok((a, b))
}

/// Parses a test's measured duration: 10 ms to 24 h ([`check_test_duration`]).
pub fn test_duration(s: &str) -> Result<Duration> {
    let d = duration(s)?;
    check_test_duration(d).map_err(|e| anyhow!("invalid duration {s:?}: {e}"))?;
    Ok(d)
}

/// The longest warm-up accepted (`--omit`).
pub const MAX_OMIT: Duration = Duration::from_secs(3600);

/// A warm-up (`--omit`, a spec's `omit`): 0 (none) to 1h, in the forms a duration takes.
pub fn omit(s: &str) -> Result<Duration> {
    duration_up_to(s, MAX_OMIT, "1h")
}

/// The one rule for a timed test's measured duration, wherever it came from (a flag, a
/// spec file, a plan a program built, a driven plan): at least [`MIN_TEST_DURATION`], at
/// most 24 h.
pub fn check_test_duration(d: Duration) -> std::result::Result<(), String> {
    if d < MIN_TEST_DURATION {
        return Err(format!(
            "a test measures at least {} ms (shorter intervals measure the stop, not the workload)",
            MIN_TEST_DURATION.as_millis()
        ));
    }
    if d.as_millis() > u128::from(virtperf_wire::MAX_DURATION_MS) {
        return Err("a test measures at most 24h".into());
    }
    Ok(())
}

/// Parses a duration that may be 0 (`0` = none) and is at most `max` (written `max_text` in
/// messages): poll windows, idle gaps.
pub fn duration_up_to(s: &str, max: Duration, max_text: &str) -> Result<Duration> {
    let t = s.trim();
    let too_long = || anyhow!("invalid duration {s:?}: at most {max_text}");
    let d = if let Ok(secs) = t.parse::<f64>() {
        // `1e400` overflows f64 to infinity: that is a number too large, not a typo.
        if secs == f64::INFINITY && !t.to_ascii_lowercase().contains("inf") {
            return Err(too_long());
        }
        if secs.is_nan() || secs.is_infinite() {
            bail!("invalid duration {s:?}: not a finite number (examples: 10s, 500ms, 2.5)");
        }
        if secs < 0.0 {
            bail!("invalid duration {s:?}: must not be negative");
        }
        // try_from: a value past Duration's range is an error here, not a panic.
        Duration::try_from_secs_f64(secs).map_err(|_| too_long())?
    } else {
        humantime::parse_duration(t)
            .map_err(|e| anyhow!("invalid duration {s:?}: {e} (examples: 10s, 500ms, 1m)"))?
    };
    if d > max {
        return Err(too_long());
    }
    Ok(d)
}

/// Parses a link rate as `tc` writes it (`1gbit`, `100mbit`, `500kbit`, `10mbps` = bytes/s)
/// and returns it normalized to whole bits per second (`1000000000bit`), between 8 kbit/s and
/// 1 tbit/s, so `tc` never sees a number it would overflow.
pub fn rate(s: &str) -> Result<String> {
    let t = s.trim().to_ascii_lowercase();
    let bad =
        || anyhow!("invalid rate {s:?}: expected a number and a unit like 1gbit, 100mbit, 500kbit");
    let split = t.find(|c: char| c.is_ascii_alphabetic()).ok_or_else(bad)?;
    let (num, unit) = t.split_at(split);
    let n: f64 = num.trim().parse().map_err(|_| bad())?;
    // Decimal prefixes as tc reads them; `bps` units are bytes per second.
    let mult: f64 = match unit {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "kibit" => 1024.0,
        "mibit" => 1024.0 * 1024.0,
        "gibit" => 1024.0 * 1024.0 * 1024.0,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => return Err(bad()),
    };
    let bits = n * mult;
    if !bits.is_finite() || !(8e3..=1e12).contains(&bits) {
        bail!("invalid rate {s:?}: must be between 8kbit and 1tbit");
    }
    Ok(format!("{}bit", bits.round() as u64))
}

/// Parses a UDP stream's target rate in bits per second: `0` for unpaced (iperf3 `-b 0`),
/// else a rate as `tc` writes it (`2gbit`, `500mbit`; see [`rate`]).
pub fn bit_rate(s: &str) -> Result<u64> {
    if s.trim() == "0" {
        return Ok(0);
    }
    let r = rate(s)?;
    r.trim_end_matches("bit")
        .parse()
        .map_err(|_| anyhow!("invalid rate {s:?}: expected 0 or a rate like 2gbit"))
}

/// Parses a one-way link delay for netem (`1ms`, `250us`): 1 µs to 10 s, returned as whole
/// microseconds in `tc`'s syntax (`1000us`).
pub fn delay(s: &str) -> Result<String> {
    let d = duration_up_to(s, Duration::from_secs(10), "10s")?;
    if d < Duration::from_micros(1) {
        bail!("invalid delay {s:?}: at least 1us");
    }
    Ok(format!("{}us", d.as_micros()))
}

/// Parses a byte count with an optional unit as netperf and iperf3 users write it: a bare
/// prefix is binary (`64K` = 65536, `1M` = 2^20), a prefix with `B` is decimal (`100MB` =
/// 10^8) and `KiB`/`MiB`/`GiB` are binary (`1GiB` = 2^30).
pub fn bytes(s: &str) -> Result<u64> {
    let t = s.trim();
    if t.starts_with('-') {
        bail!("invalid size {s:?}: must be positive");
    }
    // parse-size reads a bare `K` in one unit system for the whole string; netperf's `-m 64K`
    // means 65536 while `KB` keeps its SI meaning, so the system follows the trailing `B`
    // (a trailing `i`, as in `64Ki`, makes parse-size use binary either way).
    let config = if t.ends_with(['b', 'B']) {
        parse_size::Config::new().with_decimal()
    } else {
        parse_size::Config::new().with_binary()
    };
    let v = config.parse_size(t).map_err(|e| {
        anyhow!("invalid size {s:?}: {e} (examples: 1, 4096, 64K = 64KiB, 100MB = 10^8, 1GiB)")
    })?;
    if v == 0 {
        bail!("invalid size {s:?}: must be at least 1 byte");
    }
    if v > MAX_TRANSFER {
        bail!("invalid size {s:?}: at most 1 TiB");
    }
    Ok(v)
}

/// Parses a per-message size (at most 64 MiB).
pub fn size32(s: &str) -> Result<u32> {
    let v = bytes(s)?;
    if v > u64::from(MAX_IO_SIZE) {
        bail!("invalid size {s:?}: at most {MAX_IO_SIZE} bytes (64 MiB) per message");
    }
    Ok(v as u32)
}

/// Parses `REQ,RESP` or a single size for both.
pub fn size_pair(s: &str) -> Result<(u32, u32)> {
    match s.split_once(',') {
        Some((a, b)) => Ok((size32(a)?, size32(b)?)),
        None => {
            let v = size32(s)?;
            Ok((v, v))
        }
    }
}

/// Parses a positive count (flows, downloads).
pub fn count(s: &str) -> Result<u32> {
    let v: u32 = s
        .trim()
        .parse()
        .map_err(|_| anyhow!("invalid count {s:?}: expected a whole number like 1 or 4"))?;
    if v == 0 {
        bail!("invalid count {s:?}: must be at least 1");
    }
    Ok(v)
}

/// CPU pinning of client and server: either may be absent.
pub type Cpus = (Option<u32>, Option<u32>);

/// Parses netperf-style CPU pinning: `C,S`, `N` (both), `C,` (client only), `,S`.
pub fn cpus(s: &str) -> Result<Cpus> {
    let one = |p: &str| -> Result<Option<u32>> {
        let p = p.trim();
        if p.is_empty() {
            return Ok(None);
        }
        p.parse::<u32>().map(Some).map_err(|_| {
            anyhow!("invalid cpus {s:?}: expected CPU numbers like 0,1 (client,server)")
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
        bail!("invalid cpus {s:?}: name at least one CPU");
    }
    Ok(r)
}

/// Parses a confidence target `95,2%`: confidence level and relative CI half-width.
pub fn until_ci(s: &str) -> Result<(f64, f64)> {
    let bad = || anyhow!("invalid CI target {s:?}: expected LEVEL,WIDTH% like 95,2%");
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
        bail!("invalid CI target {s:?}: level must be in 50..100 and width in (0, 100) percent");
    }
    Ok((level / 100.0, width / 100.0))
}

/// Parses how rr's two sides wait: `block`, `spin`, `poll:50us` for both, or `CLIENT,SERVER`
/// (`block,spin`).
pub fn wait(s: &str) -> anyhow::Result<(virtperf_wire::Wait, virtperf_wire::Wait)> {
    use virtperf_wire::Wait;
    let one = |p: &str| -> anyhow::Result<Wait> {
        let p = p.trim();
        match p {
            "block" => Ok(Wait::Block),
            "spin" => Ok(Wait::Spin),
            _ => {
                let Some(w) = p.strip_prefix("poll:") else {
                    anyhow::bail!(
                        "invalid wait {s:?}: expected block, spin or poll:WINDOW (e.g. poll:50us), or CLIENT,SERVER"
                    );
                };
                let d = duration_up_to(w, Duration::from_secs(1), "1s")
                    .map_err(|e| anyhow::anyhow!("invalid wait {s:?}: {e}"))?;
                let us = d.as_micros() as u32;
                anyhow::ensure!(us >= 1, "invalid wait {s:?}: a poll window is at least 1us");
                Ok(Wait::Poll { window_us: us })
            }
        }
    };
    Ok(match s.split_once(',') {
        Some((c, v)) => (one(c)?, one(v)?),
        None => {
            let w = one(s)?;
            (w, w)
        }
    })
}

/// Parses an open-loop request rate per second (1 to 1,000,000).
pub fn rate_per_s(s: &str) -> anyhow::Result<u32> {
    let t = s.trim().trim_end_matches("/s");
    let v: u32 = t.parse().map_err(|_| {
        anyhow::anyhow!(
            "invalid rate {s:?}: expected a whole number of requests per second from 1 to {}, like 2000",
            virtperf_wire::MAX_RATE
        )
    })?;
    anyhow::ensure!(
        (1..=virtperf_wire::MAX_RATE).contains(&v),
        "invalid rate {s:?}: between 1 and {} per second",
        virtperf_wire::MAX_RATE
    );
    Ok(v)
}

/// Parses a congestion-control name and checks that this machine offers it
/// (`net.ipv4.tcp_available_congestion_control`), refusing it with the list otherwise. An
/// agent on another machine checks again when it sets it.
pub fn congestion(s: &str) -> Result<virtperf_wire::CcName> {
    let name = virtperf_wire::CcName::new(s.trim()).map_err(|e| anyhow!(e))?;
    let offered = virtperf_load::sock::available_congestion();
    if !offered.is_empty() && !offered.iter().any(|o| o == name.as_str()) {
        bail!(
            "unknown congestion control {s:?}: this machine offers {} (net.ipv4.tcp_available_congestion_control; modprobe tcp_NAME for more)",
            offered.join(", ")
        );
    }
    Ok(name)
}

/// Parses a TOS byte: 0 to 255, decimal or `0x` hex (iperf3 -S).
pub fn tos(s: &str) -> Result<u8> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u8::from_str_radix(h, 16),
        None => t.parse::<u8>(),
    };
    v.map_err(|_| anyhow!("invalid TOS {s:?}: a byte, 0 to 255 (decimal or 0x hex)"))
}

/// Parses a DSCP code point (0 to 63) into its TOS byte (DSCP << 2).
pub fn dscp(s: &str) -> Result<u8> {
    let v: u8 = s
        .trim()
        .parse()
        .ok()
        .filter(|v| *v <= 63)
        .ok_or_else(|| anyhow!("invalid DSCP {s:?}: 0 to 63 (46 is EF, 10 is AF11)"))?;
    Ok(v << 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_option_values() {
        assert_eq!(tos("0x10").unwrap(), 16);
        assert_eq!(tos("184").unwrap(), 184);
        assert!(tos("256").is_err() && tos("-1").is_err() && tos("1e30").is_err());
        assert_eq!(dscp("46").unwrap(), 184);
        assert!(dscp("64").is_err());
        assert!(congestion("no such cc").is_err());
        assert!(congestion("a_name_far_too_long").is_err());
        // Every machine's kernel has reno built in.
        assert_eq!(congestion("reno").unwrap().as_str(), "reno");
        let e = congestion("nosuchcc").unwrap_err().to_string();
        assert!(e.contains("reno"), "the refusal lists what there is: {e}");
    }

    #[test]
    fn bit_rates() {
        assert_eq!(bit_rate("0").unwrap(), 0);
        assert_eq!(bit_rate("2gbit").unwrap(), 2_000_000_000);
        assert_eq!(bit_rate("100mbit").unwrap(), 100_000_000);
        assert!(bit_rate("fast").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(duration("10s").unwrap(), Duration::from_secs(10));
        assert_eq!(duration("2").unwrap(), Duration::from_secs(2));
        assert_eq!(duration("500ms").unwrap(), Duration::from_millis(500));
        assert!(duration("0")
            .unwrap_err()
            .to_string()
            .contains("greater than 0"));
        assert!(duration("0s").is_err());
        assert!(duration("-1").unwrap_err().to_string().contains("negative"));
        assert!(duration("soon").is_err());
        assert_eq!(duration("24h").unwrap(), MAX_DURATION);
        for huge in ["1e20", "1e30", "1e400", "100000h", "24h1s", "86401"] {
            assert!(
                duration(huge)
                    .unwrap_err()
                    .to_string()
                    .contains("at most 24h"),
                "{huge}"
            );
        }
        for odd in ["NaN", "nan", "inf", "-inf", "infinity"] {
            assert!(
                duration(odd)
                    .unwrap_err()
                    .to_string()
                    .contains("not a finite number"),
                "{odd}"
            );
        }
        assert_eq!(
            duration_up_to("0", Duration::from_secs(1), "1s").unwrap(),
            Duration::ZERO
        );
        assert!(duration_up_to("2s", Duration::from_secs(1), "1s")
            .unwrap_err()
            .to_string()
            .contains("at most 1s"));
    }

    #[test]
    fn sizes() {
        assert_eq!(bytes("1GiB").unwrap(), 1 << 30);
        assert_eq!(bytes("100MB").unwrap(), 100_000_000);
        assert_eq!(size_pair("1,1").unwrap(), (1, 1));
        assert_eq!(size_pair("64").unwrap(), (64, 64));
        assert_eq!(size_pair("4K,1").unwrap(), (4096, 1));
        // A bare prefix is binary, as in netperf and iperf3; `B` makes it decimal.
        for (text, want) in [
            ("64K", 65_536),
            ("64k", 65_536),
            ("1M", 1 << 20),
            ("1G", 1 << 30),
            ("64 K", 65_536),
            ("64KB", 64_000),
            ("64kb", 64_000),
            ("1MB", 1_000_000),
            ("1GB", 1_000_000_000),
            ("64KiB", 65_536),
            ("64Ki", 65_536),
            ("1MiB", 1 << 20),
            ("4096", 4096),
            ("4096B", 4096),
        ] {
            assert_eq!(bytes(text).unwrap(), want, "{text}");
        }
        assert!(size_pair("-1")
            .unwrap_err()
            .to_string()
            .contains("positive"));
        assert!(size_pair("0,1")
            .unwrap_err()
            .to_string()
            .contains("at least 1"));
        assert!(size32("1GiB").unwrap_err().to_string().contains("64 MiB"));
        assert!(bytes("2TiB").unwrap_err().to_string().contains("1 TiB"));
        assert!(bytes("lots").is_err());
    }

    #[test]
    fn waits_and_request_rates() {
        use virtperf_wire::Wait;
        assert_eq!(wait("spin").unwrap(), (Wait::Spin, Wait::Spin));
        assert_eq!(wait("block,spin").unwrap(), (Wait::Block, Wait::Spin));
        assert_eq!(wait("poll:50us").unwrap().0, Wait::Poll { window_us: 50 });
        for bad in [
            "nap",
            "poll:",
            "poll:2s",
            "poll:1e30",
            "poll:NaN",
            "spin,nap",
            "poll:1ns",
        ] {
            assert!(wait(bad).is_err(), "{bad}");
        }
        assert_eq!(rate_per_s("2000").unwrap(), 2000);
        for bad in ["0", "-1", "1e30", "NaN", "2000000", "fast"] {
            assert!(rate_per_s(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates_and_delays() {
        assert_eq!(rate("1gbit").unwrap(), "1000000000bit");
        assert_eq!(rate("100Mbit").unwrap(), "100000000bit");
        assert_eq!(rate("10mbps").unwrap(), "80000000bit");
        assert_eq!(rate("1.5gbit").unwrap(), "1500000000bit");
        for bad in [
            "1e30gbit", "-1gbit", "NaNgbit", "infgbit", "1", "gbit", "1furlong", "1bit",
        ] {
            assert!(rate(bad).is_err(), "{bad}");
        }
        assert_eq!(delay("1ms").unwrap(), "1000us");
        assert_eq!(delay("0.5").unwrap(), "500000us");
        for bad in ["0", "1ns", "11s", "1e30", "NaN", "-1ms"] {
            assert!(delay(bad).is_err(), "{bad}");
        }
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
