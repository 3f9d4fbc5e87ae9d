//! Which ends of a test run in guests, as users write it after `guest:`.

use anyhow::{anyhow, Result};

/// Which ends of a test run in guests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client on the host, agent in the guest (seed 1's "guest" row, host as sender).
    HostGuest,
    /// The guest drives the test against an agent on the host.
    GuestHost,
    /// Guest 0 drives the test against guest 1 over the bridge.
    GuestGuest,
    /// Both ends inside one guest, over its loopback (seed 4's TCP_RR across vCPUs: the
    /// wake-ups are the guest's IPIs and halts, no device involved).
    Loopback,
}

impl Direction {
    /// The name users write after `guest:`.
    pub fn name(self) -> &'static str {
        match self {
            Direction::HostGuest => "host-guest",
            Direction::GuestHost => "guest-host",
            Direction::GuestGuest => "guest-guest",
            Direction::Loopback => "loopback",
        }
    }

    /// Parses what follows `guest` in a placement: nothing, `:host-guest`, `:guest-host`,
    /// `:guest-guest` or `:loopback`.
    pub fn parse_placement(s: &str) -> Option<Result<Direction>> {
        let rest = s.strip_prefix("guest")?;
        Some(match rest {
            "" | ":host-guest" => Ok(Direction::HostGuest),
            ":guest-host" => Ok(Direction::GuestHost),
            ":guest-guest" => Ok(Direction::GuestGuest),
            ":loopback" => Ok(Direction::Loopback),
            _ => Err(anyhow!(
                "unknown guest placement {s:?} (guest, guest:host-guest, guest:guest-host, guest:guest-guest, guest:loopback)"
            )),
        })
    }
}
