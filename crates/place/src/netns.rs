//! Namespace placements: client and server in network namespaces virtperf creates, joined by
//! a veth pair, a Linux bridge, or a NAT router (seed 1's configurations on one machine).
//!
//! Everything is named `vp-<pid>-<n>-…` and removed when the [`Topology`] is dropped (on
//! success, error or Ctrl-C unwinding); `virtperf cleanup` removes leftovers of a killed
//! run. Addresses are private ones inside namespaces we own, so no traffic leaves them.

use crate::offload::{self, Offloads};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{anyhow, bail, Context, Result};

use virtperf_wire::TestResult;

use super::local::LocalAgent;
use virtperf_lab::plan::{Plan, ProgressFn, Target};
use virtperf_machine::state::{self, Resource};

/// How the two namespaces are joined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One veth pair between client and server.
    Veth,
    /// Each side's veth enslaved to a bridge in a third namespace.
    Bridge,
    /// The server behind a router namespace that masquerades (nftables).
    Nat,
}

impl std::str::FromStr for Kind {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "veth" => Ok(Kind::Veth),
            "bridge" => Ok(Kind::Bridge),
            "nat" => Ok(Kind::Nat),
            _ => Err(anyhow!(
                "unknown namespace placement {s:?} (veth, bridge, nat)"
            )),
        }
    }
}

/// Prefix of everything virtperf creates, so `cleanup` can find leftovers.
pub const PREFIX: &str = "vp-";

/// A created topology; torn down on drop.
pub struct Topology {
    /// Namespace the client runs in.
    pub client_ns: String,
    /// Namespace the agent runs in.
    pub server_ns: String,
    /// Address the client uses to reach the agent.
    pub server_ip: IpAddr,
    namespaces: Vec<String>,
    /// The veth ends the path crosses, each with its namespace: (namespace, device).
    pub devices: Vec<(String, String)>,
    /// Each device's offloads as made, read when first switched.
    made: std::sync::Mutex<Vec<(usize, Offloads)>>,
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| anyhow!("cannot run `ip` (apt-get install iproute2): {e}"))?;
    if !out.status.success() {
        bail!("`ip {}` failed: {}", args.join(" "), one_line(&out.stderr));
    }
    Ok(())
}

fn in_ns(ns: &str, cmd: &[&str]) -> Result<()> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns])
        .args(cmd)
        .output()
        .map_err(|e| anyhow!("cannot run `ip netns exec`: {e}"))?;
    if !out.status.success() {
        bail!(
            "`{}` in namespace {ns} failed: {}",
            cmd.join(" "),
            one_line(&out.stderr)
        );
    }
    Ok(())
}

/// A tool's stderr folded into one line, for our one-line errors.
fn one_line(stderr: &[u8]) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

static SERIAL: AtomicU32 = AtomicU32::new(0);

impl Topology {
    /// Creates the namespaces and links. Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN).
    pub fn create(kind: Kind) -> Result<Topology> {
        if !virtperf_machine::is_root() {
            bail!("namespace placements need root (they create network namespaces and veth pairs)");
        }
        let tag = new_tag();
        let client_ns = format!("{tag}-cli");
        let server_ns = format!("{tag}-srv");
        let mut t = Topology {
            client_ns: client_ns.clone(),
            server_ns: server_ns.clone(),
            server_ip: IpAddr::V4(Ipv4Addr::new(10, 99, 0, 2)),
            namespaces: Vec::new(),
            devices: Vec::new(),
            made: std::sync::Mutex::default(),
        };
        // Register each namespace as soon as it exists, so a failure half-way still
        // removes everything already made.
        for ns in [&client_ns, &server_ns] {
            create_marked(ns)?;
            t.namespaces.push(ns.clone());
            in_ns(ns, &["ip", "link", "set", "lo", "up"])?;
        }
        match kind {
            Kind::Veth => t.veth()?,
            Kind::Bridge => t.bridge(&tag)?,
            Kind::Nat => t.nat(&tag)?,
        }
        Ok(t)
    }

    /// The two namespaces joined by one veth pair.
    fn veth(&mut self) -> Result<()> {
        let (client_ns, server_ns) = (self.client_ns.clone(), self.server_ns.clone());
        ip(&[
            "link", "add", "vpc0", "netns", &client_ns, "type", "veth", "peer", "name", "vps0",
            "netns", &server_ns,
        ])?;
        in_ns(
            &client_ns,
            &["ip", "addr", "add", "10.99.0.1/24", "dev", "vpc0"],
        )?;
        in_ns(
            &server_ns,
            &["ip", "addr", "add", "10.99.0.2/24", "dev", "vps0"],
        )?;
        in_ns(&client_ns, &["ip", "link", "set", "vpc0", "up"])?;
        in_ns(&server_ns, &["ip", "link", "set", "vps0", "up"])?;
        self.devices = vec![(client_ns, "vpc0".into()), (server_ns, "vps0".into())];
        Ok(())
    }

    /// Each namespace's veth on a bridge in a third namespace.
    fn bridge(&mut self, tag: &str) -> Result<()> {
        let (client_ns, server_ns) = (self.client_ns.clone(), self.server_ns.clone());
        let br_ns = format!("{tag}-br");
        create_marked(&br_ns)?;
        self.namespaces.push(br_ns.clone());
        in_ns(&br_ns, &["ip", "link", "add", "vpbr0", "type", "bridge"])?;
        in_ns(&br_ns, &["ip", "link", "set", "vpbr0", "up"])?;
        for (ns, inner, outer, addr) in [
            (&client_ns, "vpc0", "vpbc0", "10.99.0.1/24"),
            (&server_ns, "vps0", "vpbs0", "10.99.0.2/24"),
        ] {
            ip(&[
                "link", "add", inner, "netns", ns, "type", "veth", "peer", "name", outer, "netns",
                &br_ns,
            ])?;
            in_ns(&br_ns, &["ip", "link", "set", outer, "master", "vpbr0"])?;
            in_ns(&br_ns, &["ip", "link", "set", outer, "up"])?;
            in_ns(ns, &["ip", "addr", "add", addr, "dev", inner])?;
            in_ns(ns, &["ip", "link", "set", inner, "up"])?;
            self.devices.push((ns.clone(), inner.into()));
            self.devices.push((br_ns.clone(), outer.into()));
        }
        Ok(())
    }

    /// A router namespace between the two, masquerading the client's traffic (the server sees the router's address).
    fn nat(&mut self, tag: &str) -> Result<()> {
        let (client_ns, server_ns) = (self.client_ns.clone(), self.server_ns.clone());
        let rt_ns = format!("{tag}-rt");
        create_marked(&rt_ns)?;
        self.namespaces.push(rt_ns.clone());
        in_ns(&rt_ns, &["ip", "link", "set", "lo", "up"])?;
        ip(&[
            "link", "add", "vpc0", "netns", &client_ns, "type", "veth", "peer", "name", "vprc0",
            "netns", &rt_ns,
        ])?;
        ip(&[
            "link", "add", "vps0", "netns", &server_ns, "type", "veth", "peer", "name", "vprs0",
            "netns", &rt_ns,
        ])?;
        in_ns(
            &client_ns,
            &["ip", "addr", "add", "10.99.1.2/24", "dev", "vpc0"],
        )?;
        in_ns(
            &rt_ns,
            &["ip", "addr", "add", "10.99.1.1/24", "dev", "vprc0"],
        )?;
        in_ns(
            &rt_ns,
            &["ip", "addr", "add", "10.99.2.1/24", "dev", "vprs0"],
        )?;
        in_ns(
            &server_ns,
            &["ip", "addr", "add", "10.99.2.2/24", "dev", "vps0"],
        )?;
        for (ns, dev) in [
            (&client_ns, "vpc0"),
            (&rt_ns, "vprc0"),
            (&rt_ns, "vprs0"),
            (&server_ns, "vps0"),
        ] {
            in_ns(ns, &["ip", "link", "set", dev, "up"])?;
            self.devices.push((ns.clone(), dev.into()));
        }
        in_ns(
            &client_ns,
            &["ip", "route", "add", "default", "via", "10.99.1.1"],
        )?;
        // Forwarding is per namespace: this touches only the router we created.
        in_ns(&rt_ns, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
        let nat = |args: &[&str]| {
            let mut v = vec!["nft"];
            v.extend_from_slice(args);
            in_ns(&rt_ns, &v).map_err(|e| {
                anyhow!("NAT placement needs nftables with masquerade support: {e} (apt-get install nftables)")
            })
        };
        nat(&["add", "table", "ip", "vpnat"])?;
        nat(&[
            "add",
            "chain",
            "ip",
            "vpnat",
            "post",
            "{ type nat hook postrouting priority 100 ; }",
        ])?;
        nat(&[
            "add",
            "rule",
            "ip",
            "vpnat",
            "post",
            "oifname",
            "vprs0",
            "masquerade",
        ])?;
        self.server_ip = IpAddr::V4(Ipv4Addr::new(10, 99, 2, 2));
        Ok(())
    }

    /// Adds `delay` to the client's egress with netem (the kernel's network emulator),
    /// optionally rate-limited too. Where the kernel lacks netem, `tc` answers "qdisc kind
    /// is unknown" and this says so in one line.
    pub fn delay(&self, delay: &str, rate: Option<&str>) -> Result<()> {
        let mut args = vec![
            "tc", "qdisc", "add", "dev", "vpc0", "root", "netem", "delay", delay,
        ];
        if let Some(r) = rate {
            args.extend(["rate", r]);
        }
        in_ns(&self.client_ns, &args).map_err(|e| {
            if e.to_string().contains("unknown") {
                anyhow!("netem (delay/loss emulation) is not available in this kernel: `tc` does not know the netem qdisc; use --link-rate alone")
            } else {
                e.context("adding netem delay")
            }
        })
    }

    /// Runs `f` on a new thread that has joined the client namespace; threads it starts
    /// inherit the namespace, so a whole client test runs there.
    pub fn run_in_client<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> Result<T> + Send + 'static,
    ) -> Result<T> {
        run_in(&self.client_ns, f)
    }

    /// The placement's name as users write it.
    pub fn name(kind: Kind) -> &'static str {
        match kind {
            Kind::Veth => "netns:veth",
            Kind::Bridge => "netns:bridge",
            Kind::Nat => "netns:nat",
        }
    }

    /// Shapes the client's egress with a token bucket (`tc qdisc … tbf rate RATE`).
    pub fn shape(&self, rate: &str) -> Result<()> {
        in_ns(
            &self.client_ns,
            &[
                "tc", "qdisc", "add", "dev", "vpc0", "root", "tbf", "rate", rate, "burst", "256kb",
                "latency", "50ms",
            ],
        )
        .context("shaping the client's link")
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Deleting a namespace removes its links (and the veth peers in other namespaces).
        for ns in self.namespaces.iter().rev() {
            let _ = delete_namespace(ns);
        }
    }
}

/// Runs `f` on a new thread that has joined namespace `ns` (threads and processes it starts
/// inherit the namespace); the calling thread stays where it is.
pub fn run_in<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::Builder::new()
        .name("netns-client".into())
        .spawn(move || -> Result<T> {
            let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
            // setns(2) changes only this thread's namespace.
            if let Err(e) = rustix::thread::move_into_link_name_space(
                std::os::fd::AsFd::as_fd(&file),
                Some(rustix::thread::LinkNameSpaceType::Network),
            ) {
                bail!("cannot enter {path}: {}", std::io::Error::from(e));
            }
            f()
        })
        .map_err(|e| anyhow!("cannot start a thread: {e}"))?
        .join()
        .map_err(|_| anyhow!("the client thread panicked"))?
}

/// Creates an empty namespace `ns` with `lo` up.
pub(crate) fn add_namespace(ns: &str) -> Result<()> {
    create_marked(ns)?;
    in_ns(ns, &["ip", "link", "set", "lo", "up"])
}

/// Creates namespace `ns`, first recording in the state directory that this process made
/// it, so that `virtperf cleanup` removes it if we die and never touches a namespace
/// someone else named alike.
fn create_marked(ns: &str) -> Result<()> {
    let r = Resource::Netns {
        name: ns.to_string(),
    };
    state::mark(&r).map_err(|e| {
        anyhow!(
            "cannot record namespace {ns} in {} ({e}): set ${} to a writable directory",
            state::dir().display(),
            state::STATE_DIR_ENV
        )
    })?;
    ip(&["netns", "add", ns]).inspect_err(|_| state::unmark(&r))
}

/// Runs `cmd` (a program and its arguments) inside namespace `ns`.
pub(crate) fn exec_in(ns: &str, cmd: &[&str]) -> Result<()> {
    in_ns(ns, cmd)
}

/// Deletes namespace `ns` (and the links in it) and its marker; says why when it could not.
pub(crate) fn delete_namespace(ns: &str) -> Result<()> {
    let exists = Path::new("/var/run/netns").join(ns).exists();
    if exists {
        ip(&["netns", "del", ns])?;
    }
    state::unmark(&Resource::Netns {
        name: ns.to_string(),
    });
    Ok(())
}

/// A fresh `vp-<pid>-<n>` tag for things a run creates.
pub(crate) fn new_tag() -> String {
    format!(
        "{PREFIX}{}-{}",
        std::process::id(),
        SERIAL.fetch_add(1, Ordering::SeqCst)
    )
}

/// Deletes every namespace this process created (its markers), for a signal handler that
/// must leave nothing behind while the objects owning them are still alive on other
/// threads. Returns their names.
pub fn cleanup_own() -> Vec<String> {
    let me = state::Owner::me();
    let mut removed = Vec::new();
    for (_, owned) in state::read_all::<state::Owned>("owned")
        .into_iter()
        .flatten()
    {
        if owned.owner != me {
            continue;
        }
        if let Resource::Netns { name } = &owned.resource {
            if delete_namespace(name).is_ok() {
                removed.push(name.clone());
            }
        }
    }
    removed
}

/// `--placement netns:…`: a topology, the agent in its server namespace, and each test's
/// client half on a thread that joined the client namespace (so both halves run exactly as
/// on loopback, in one process here).
pub struct NetnsSite {
    // Fields drop in order: the agent stops before its namespace goes.
    agent: LocalAgent,
    topo: Topology,
    label: String,
    /// The client's link's token-bucket rate, where shaped.
    link_rate_bps: Option<u64>,
}

impl NetnsSite {
    /// Creates the topology (namespaces marked before they exist), shapes the client's
    /// link, and starts the agent in the server namespace. Results carry `label`.
    pub fn open(kind: Kind, shaping: &super::Shaping, label: String) -> Result<NetnsSite> {
        let topo = Topology::create(kind)?;
        match (&shaping.delay, &shaping.rate) {
            (Some(d), rate) => topo.delay(d, rate.as_deref())?,
            (None, Some(rate)) => topo.shape(rate)?,
            (None, None) => {}
        }
        let agent = LocalAgent::start_at(Some(&topo.server_ns), topo.server_ip)?;
        // Normalized by `virtperf_lab::parse::rate` as whole bits (`1000000000bit`).
        let link_rate_bps = shaping
            .rate
            .as_deref()
            .and_then(|r| r.strip_suffix("bit")?.parse().ok());
        Ok(NetnsSite {
            agent,
            topo,
            label,
            link_rate_bps,
        })
    }
}

impl super::Site for NetnsSite {
    fn target(&self) -> Target {
        self.agent.target()
    }

    /// Progress is not reported: the client half runs on another thread.
    fn run(&self, plan: &Plan, _progress: ProgressFn) -> Result<TestResult> {
        let (target, plan) = (self.target(), plan.clone());
        let mut r = self
            .topo
            .run_in_client(move || virtperf_lab::client::run(&target, &plan, &|_| {}))?;
        r.placement = Some(self.label.clone());
        r.link_rate_bps = self.link_rate_bps;
        Ok(r)
    }

    fn set_offloads(&self, o: Offloads) -> Result<()> {
        self.topo.set_offloads(o)
    }
}

impl Topology {
    /// Switches every veth end of the path (in its own namespace); the default puts back
    /// what each had when first switched.
    pub fn set_offloads(&self, o: Offloads) -> Result<()> {
        let mut made = self
            .made
            .lock()
            .map_err(|_| anyhow!("the offload record was poisoned"))?;
        for (i, (ns, dev)) in self.devices.iter().enumerate() {
            let was = made.iter().find(|(j, _)| *j == i).map(|(_, w)| *w);
            let want = match (o == Offloads::default(), was) {
                (true, None) => continue,
                (true, Some(w)) => w,
                (false, _) => o,
            };
            let dev = dev.clone();
            let now = run_in(ns, move || {
                let now = offload::get(&dev)?;
                offload::set(&dev, want)?;
                Ok(now)
            })?;
            if was.is_none() {
                made.push((i, now));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_ns_offloads(ns: &str, dev: &str) -> Offloads {
        let dev = dev.to_string();
        run_in(ns, move || Ok(offload::get(&dev)?)).expect("read offloads")
    }

    /// A real veth pair between two namespaces: GRO off on every end reads back off, TSO
    /// is left alone, and the default puts back what each end was made with.
    #[test]
    fn a_veths_offloads_switch_and_come_back() {
        if !virtperf_machine::is_root() {
            virtperf_testkit::skip("root", "namespaces and veth pairs need root");
            return;
        }
        let t = Topology::create(Kind::Veth).expect("topology");
        assert_eq!(t.devices.len(), 2, "{:?}", t.devices);
        let made: Vec<Offloads> = t
            .devices
            .iter()
            .map(|(ns, d)| in_ns_offloads(ns, d))
            .collect();
        t.set_offloads(Offloads {
            gro: Some(false),
            tso: None,
        })
        .expect("GRO off");
        for ((ns, d), was) in t.devices.iter().zip(&made) {
            let now = in_ns_offloads(ns, d);
            assert_eq!(now.gro, Some(false), "{d}");
            assert_eq!(now.tso, was.tso, "{d}: TSO left as it was");
        }
        t.set_offloads(Offloads::default()).expect("back");
        for ((ns, d), was) in t.devices.iter().zip(&made) {
            assert_eq!(in_ns_offloads(ns, d), *was, "{d}");
        }
    }
}
