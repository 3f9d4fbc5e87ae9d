//! Socket options of the data connections: what a test asks ([`SockOpts`], on the wire
//! and in spec files) and what the kernel applied ([`AppliedSockOpts`], read back).

use super::*;

/// Socket options for data connections (an experiment config's `socket = {…}`). Unset
/// fields keep the system default (and the workload's own default for `nodelay`: on for rr
/// and crr, off for streams).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SockOpts {
    /// TCP_NODELAY.
    #[serde(default)]
    pub nodelay: Option<bool>,
    /// SO_BUSY_POLL in microseconds: busy-wait on the device queue in blocking reads.
    #[serde(default)]
    pub busy_poll_us: Option<u32>,
    /// SO_SNDBUF in bytes (the kernel doubles it).
    #[serde(default)]
    pub sndbuf: Option<u32>,
    /// SO_RCVBUF in bytes (the kernel doubles it).
    #[serde(default)]
    pub rcvbuf: Option<u32>,
    /// TCP_CONGESTION: the congestion-control algorithm of the data connections. Absent
    /// from the wire when unset, so an agent that predates it still understands the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub congestion: Option<CcName>,
    /// TCP_MAXSEG in bytes, set before connecting (client) and on the listener (agent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    /// The IP_TOS / IPV6_TCLASS byte (DSCP << 2 | ECN bits) of the data connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tos: Option<u8>,
    /// Multipath TCP (`IPPROTO_MPTCP`) data connections, on both ends (rr, stream, bulk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<bool>,
}

/// The largest SO_SNDBUF / SO_RCVBUF accepted: the kernel doubles the value into an int.
pub const MAX_SOCK_BUF: u32 = 1 << 30;
/// The smallest TCP_MAXSEG Linux takes (TCP_MIN_MSS), and the largest an IPv4 packet holds.
pub const MSS_RANGE: (u32, u32) = (88, 65_495);
/// The longest SO_BUSY_POLL a test may ask for, µs.
pub const MAX_BUSY_POLL_US: u32 = 1_000_000;

impl SockOpts {
    /// True when no option is set.
    pub fn is_default(&self) -> bool {
        *self == SockOpts::default()
    }

    /// Each option within what the kernel takes (both ends check: the client before
    /// connecting, the agent on `Prepare`).
    pub fn validate(&self) -> Result<(), String> {
        for (what, v) in [("--sndbuf", self.sndbuf), ("--rcvbuf", self.rcvbuf)] {
            if let Some(b) = v {
                if b == 0 || b > MAX_SOCK_BUF {
                    return Err(format!(
                        "{what} must be between 1 byte and 1GiB, got {b} (the kernel doubles it, then clamps it to net.core.{}mem_max)",
                        if what == "--sndbuf" { "w" } else { "r" }
                    ));
                }
            }
        }
        if let Some(m) = self.mss {
            if !(MSS_RANGE.0..=MSS_RANGE.1).contains(&m) {
                return Err(format!(
                    "--mss must be between {} and {} bytes, got {m}",
                    MSS_RANGE.0, MSS_RANGE.1
                ));
            }
        }
        if self.busy_poll_us.is_some_and(|u| u > MAX_BUSY_POLL_US) {
            return Err("--busy-poll must be at most 1000000 µs (1 s)".into());
        }
        Ok(())
    }
}

/// A TCP congestion-control algorithm's name (`TCP_CONGESTION`): at most 15 bytes, as the
/// kernel's TCP_CA_NAME_MAX allows, of letters, digits, `_` and `-`. Fixed-size, so that
/// [`SockOpts`] stays `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CcName {
    len: u8,
    bytes: [u8; 15],
}

impl CcName {
    /// The name, checked.
    pub fn new(name: &str) -> Result<CcName, String> {
        let ok = !name.is_empty()
            && name.len() <= 15
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !ok {
            return Err(format!(
                "{name:?} is not a congestion-control name (1 to 15 letters, digits, _ or -)"
            ));
        }
        let mut bytes = [0u8; 15];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(CcName {
            len: name.len() as u8,
            bytes,
        })
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        // Only ASCII was ever stored (`new` checks it).
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl std::fmt::Debug for CcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl std::fmt::Display for CcName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for CcName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for CcName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CcName, D::Error> {
        let s = String::deserialize(d)?;
        CcName::new(&s).map_err(serde::de::Error::custom)
    }
}

/// The socket options the kernel applied to a side's data connection, read back with
/// `getsockopt` after they were set: a buffer the kernel doubled or clamped shows here.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppliedSockOpts {
    /// SO_SNDBUF as the kernel holds it (twice what was asked, up to net.core.wmem_max).
    pub sndbuf: u32,
    /// SO_RCVBUF as the kernel holds it.
    pub rcvbuf: u32,
    /// TCP_NODELAY (absent where the socket does not answer it, as an older MPTCP one).
    pub nodelay: Option<bool>,
    /// TCP_CONGESTION in effect (absent where the socket does not answer it).
    pub congestion: Option<String>,
    /// TCP_MAXSEG: the MSS the connection sends with (absent where not answered).
    pub mss: Option<u32>,
    /// IP_TOS (or IPV6_TCLASS) byte.
    pub tos: Option<u8>,
    /// SO_BUSY_POLL, µs.
    pub busy_poll_us: Option<u32>,
    /// Whether the connection is Multipath TCP (`SO_PROTOCOL` is `IPPROTO_MPTCP`).
    #[serde(default)]
    pub mptcp: bool,
}
