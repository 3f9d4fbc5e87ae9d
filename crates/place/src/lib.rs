//! Where the two ends of a test run: one [`Placement`] (what users write, on the command line
//! and in spec files alike) and one [`Site`] per placement (a place opened once, then handed
//! plans, the way hyperfine picks its executor once).
//!
//! - [`local`]: a private agent on loopback, a child process (two address spaces, as
//!   netperf/netserver);
//! - [`netns`]: two namespaces joined by a veth pair, a bridge or a NAT router; the agent in
//!   the server namespace, the client half on a thread that joined the client namespace;
//! - [`ssh`]: this binary copied over SSH, the agent started there, the client here;
//! - [`remote`]: an agent someone else started;
//! - [`guest`]: QEMU guests whose init is virtperf.
//!
//! A site is torn down when dropped (namespaces deleted, agents and guests stopped), on
//! every exit path. What must survive a SIGKILL is marked in the state directory before it
//! exists (`virtperf_machine::state::mark`), so `virtperf cleanup` can remove it.

pub mod cleanup;
pub mod guest;
pub mod local;
pub mod netns;
pub mod offload;
pub mod remote;
mod site;
pub mod ssh;

pub use site::{Shaping, Site};

use std::fmt;
use std::str::FromStr;

use anyhow::{bail, Result};

use virtperf_lab::plan::{Plan, Target};

/// Where a workload's two ends run, with the settings that place needs. Parsed from one
/// grammar (`local`, `netns:veth|bridge|nat`, `ssh:USER@HOST[:PORT]`, `remote:HOST[:PORT]`,
/// `guest[:host-guest|guest-host|guest-guest|loopback]`); settings the text cannot hold (guest
/// sizes, SSH key, token, link shaping) start at their defaults and are filled in by the
/// caller from its flags or config table.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// This host's loopback, against a private agent.
    Local,
    /// Two network namespaces virtperf creates, joined this way; the client's link shaped.
    Netns(netns::Kind, Shaping),
    /// An agent virtperf starts over SSH.
    Ssh(Box<ssh::SshTarget>),
    /// An agent someone started.
    Remote {
        /// Host name or address.
        host: String,
        /// Control port; `None`: the default (or `--port`).
        port: Option<u16>,
        /// Token the agent requires.
        token: Option<String>,
    },
    /// QEMU guests virtperf boots, and which ends run in them.
    Guest(guest::Direction, Box<guest::GuestOpts>),
}

/// Why a placement text is not one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlacementError(pub String);

impl fmt::Display for PlacementError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlacementError {}

impl FromStr for Placement {
    type Err = PlacementError;

    fn from_str(s: &str) -> Result<Placement, PlacementError> {
        let e = PlacementError;
        // The parts' own parsers say what is wrong; their words are the placement's.
        let part = |x: anyhow::Error| PlacementError(x.to_string());
        if s == "local" {
            return Ok(Placement::Local);
        }
        if let Some(k) = s.strip_prefix("netns:") {
            return Ok(Placement::Netns(
                k.parse().map_err(part)?,
                Shaping::default(),
            ));
        }
        if let Some(d) = guest::Direction::parse_placement(s) {
            return Ok(Placement::Guest(d.map_err(part)?, Box::default()));
        }
        if let Some(d) = s.strip_prefix("ssh:") {
            return Ok(Placement::Ssh(Box::new(
                ssh::SshTarget::parse(d, None).map_err(part)?,
            )));
        }
        if let Some(h) = s.strip_prefix("remote:") {
            let (host, port) =
                virtperf_lab::parse::host_port(h).map_err(|x| e(format!("{x:#}")))?;
            if host.is_empty() {
                return Err(e("remote: needs a host (remote:HOST[:PORT])".into()));
            }
            return Ok(Placement::Remote {
                host,
                port,
                token: None,
            });
        }
        Err(e(format!(
            "unknown placement {s:?} (local, netns:veth, netns:bridge, netns:nat, ssh:USER@HOST[:PORT], remote:HOST[:PORT], guest[:host-guest|guest-host|guest-guest|loopback])"
        )))
    }
}

impl fmt::Display for Placement {
    /// The placement as results carry it (`netns:veth rate 1gbit`, `guest:guest-host`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::Local => f.write_str("local"),
            Placement::Netns(k, shaping) => {
                f.write_str(netns::Topology::name(*k))?;
                if let Some(rate) = &shaping.rate {
                    write!(f, " rate {rate}")?;
                }
                if let Some(d) = &shaping.delay {
                    write!(f, " delay {d}")?;
                }
                Ok(())
            }
            Placement::Ssh(t) => match t.port {
                Some(p) => write!(f, "ssh:{}:{p}", t.dest),
                None => write!(f, "ssh:{}", t.dest),
            },
            // As it is typed back in: an IPv6 literal in brackets, and the port where one
            // was given (two agents on one host are two placements).
            Placement::Remote { host, port, .. } => {
                match host.contains(':') {
                    true => write!(f, "remote:[{host}]")?,
                    false => write!(f, "remote:{host}")?,
                }
                match port {
                    Some(p) => write!(f, ":{p}"),
                    None => Ok(()),
                }
            }
            Placement::Guest(d, _) => write!(f, "guest:{}", d.name()),
        }
    }
}

impl Placement {
    /// Whether opening it needs root (it creates namespaces or taps).
    pub fn needs_root(&self) -> bool {
        match self {
            Placement::Netns(..) => true,
            // User networking needs no namespace, bridge or tap: QEMU alone.
            Placement::Guest(_, o) => o.net == guest::GuestNet::Tap,
            _ => false,
        }
    }

    /// What can be refused before waiting for the machine lock or creating anything: root
    /// where it is needed, a guest's device options (against the installed QEMU), kernel
    /// arguments and module parameters, and a plan field a guest that drives the test
    /// cannot carry (`Plan::to_wire`). Opening the site checks them again.
    pub fn preflight(&self, plan: &Plan) -> Result<()> {
        if let Placement::Guest(d, o) = self {
            if *d != guest::Direction::HostGuest {
                plan.to_wire()
                    .map_err(|e| anyhow::anyhow!("{e} (placement {self})"))?;
            }
            guest::device::validate(&o.virtio)?;
            guest::check_cmdline(o.cmdline.as_deref())?;
            guest::module_params(&o.modules)?;
        }
        if self.needs_root() && !virtperf_machine::is_root() {
            match self {
                Placement::Guest(..) => bail!("guest placements with --guest-net tap need root (they create a network namespace and tap devices): run as root, or use --guest-net user"),
                _ => bail!("namespace placements need root (they create network namespaces and veth devices)"),
            }
        }
        Ok(())
    }
}

/// Opens the site `placement` names: starts its agent, builds its namespaces or boots its
/// guests.
pub fn open(placement: &Placement) -> Result<Box<dyn Site>> {
    Ok(match placement {
        Placement::Local => Box::new(local::LocalSite::open()?),
        Placement::Netns(kind, shaping) => Box::new(netns::NetnsSite::open(
            *kind,
            shaping,
            placement.to_string(),
        )?),
        Placement::Ssh(t) => Box::new(ssh::SshSite::open(t, placement.to_string())?),
        Placement::Remote { host, port, token } => Box::new(remote::RemoteSite::new(
            Target {
                host: host.clone(),
                port: port.unwrap_or(virtperf_wire::DEFAULT_PORT),
                // A spec need not carry the secret: without a `token` there, the one in
                // $VIRTPERF_TOKEN (as `serve` and the workloads read it; not seen in `ps`),
                // else the first line of the file $VIRTPERF_TOKEN_FILE names (a path in the
                // environment, where a fleet's tool would otherwise put the secret).
                token: token.clone().or_else(env_token),
                lock: None,
            },
            Some(placement.to_string()),
        )),
        Placement::Guest(direction, opts) => Box::new(guest::GuestLab::boot(*direction, opts)?),
    })
}

/// The token a `remote:` placement without one in its spec presents: `$VIRTPERF_TOKEN`, else
/// the first line of the file `$VIRTPERF_TOKEN_FILE` names.
fn env_token() -> Option<String> {
    let direct = std::env::var(local::TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    direct.or_else(|| {
        let path = std::env::var_os(TOKEN_FILE_ENV)?;
        let text = std::fs::read_to_string(path).ok()?;
        Some(text.lines().next()?.trim().to_string()).filter(|t| !t.is_empty())
    })
}

/// The environment variable that names a file holding the token (see [`env_token`]).
pub const TOKEN_FILE_ENV: &str = "VIRTPERF_TOKEN_FILE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_grammar_round_trips() {
        for s in [
            "local",
            "netns:veth",
            "netns:bridge",
            "netns:nat",
            "ssh:me@box",
            "ssh:me@box:2222",
            "remote:box",
            "remote:[::1]",
            "guest:host-guest",
            "guest:guest-host",
            "guest:guest-guest",
            "guest:loopback",
        ] {
            let p: Placement = s.parse().unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(p.to_string(), s);
        }
        assert_eq!(
            "guest".parse::<Placement>().map(|p| p.to_string()),
            Ok("guest:host-guest".to_string())
        );
        for (s, host, port) in [
            ("remote:[::1]:17151", "::1", Some(17151)),
            ("remote:[fe80::1]", "fe80::1", None),
            ("remote:::1", "::1", None),
        ] {
            assert_eq!(
                s.parse::<Placement>(),
                Ok(Placement::Remote {
                    host: host.into(),
                    port,
                    token: None
                }),
                "{s}"
            );
        }
        assert_eq!(
            "remote:box:7001".parse::<Placement>(),
            Ok(Placement::Remote {
                host: "box".into(),
                port: Some(7001),
                token: None
            })
        );
    }

    #[test]
    fn one_set_of_error_texts() {
        let err = |s: &str| s.parse::<Placement>().unwrap_err().0;
        assert!(err("moon").contains("unknown placement \"moon\""));
        assert!(err("netns:wifi").contains("veth, bridge, nat"));
        assert!(err("guest:sideways").contains("guest:guest-guest"));
        assert!(err("remote:box:http").contains("invalid port"));
        assert!(err("remote:").contains("needs a host"));
        assert!(err("remote:[::1").contains("needs its ']'"));
        assert!(err("remote:[::1]:x").contains("invalid port"));
        assert!(err("ssh:-oProxyCommand=x").contains("USER@HOST"));
    }

    #[test]
    fn results_name_the_shaping_of_a_namespace_link() {
        let p = Placement::Netns(
            netns::Kind::Veth,
            Shaping {
                rate: Some("1gbit".into()),
                delay: Some("1ms".into()),
            },
        );
        assert_eq!(p.to_string(), "netns:veth rate 1gbit delay 1ms");
    }
}
