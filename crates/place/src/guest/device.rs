//! The guest's virtio-net device options (`--virtio KEY=VALUE`, `guest = { virtio = … }`):
//! seed 2's ring sizes and receive-buffer schemes, the offloads, multiqueue, vhost.
//!
//! Checked against the QEMU that will run them, before anything boots: the key must be one
//! of the installed QEMU's `virtio-net-pci` properties (`-device virtio-net-pci,help`), the
//! value must fit the property's type, and then QEMU itself realizes the device once with
//! the options (`-S`, no guest code, a few tens of milliseconds) so ranges only QEMU knows
//! (`rx_queue_size` a power of two in 256..1024) are refused with QEMU's own words.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{anyhow, bail, Result};

/// The QEMU binary we run.
pub const QEMU: &str = "qemu-system-x86_64";

/// Keys virtperf sets itself or that would break the placement; refused with the reason.
const RESERVED: &[(&str, &str)] = &[
    ("netdev", "virtperf connects the device to its own tap"),
    ("mac", "virtperf gives each guest its own address"),
    ("romfile", "virtperf boots the kernel directly"),
    ("addr", "the PCI slot is QEMU's choice"),
    ("bootindex", "virtperf boots the kernel directly"),
    ("multifunction", "one device per slot"),
    ("failover", "failover needs a second device"),
    ("failover_pair_id", "failover needs a second device"),
    ("virtio-backend", "not a user option"),
    ("vectors", "set from queues = N"),
];

/// Keys virtperf adds to QEMU's: they configure the backend (`-netdev tap,…`).
const OURS: &[(&str, &str)] = &[
    ("vhost", "on/off: virtio-net through vhost-net"),
    (
        "queues",
        "1..16: queue pairs (tap multi_queue, mq=on, vectors=2N+2)",
    ),
];

/// Device options, validated, values normalized (`true` → `on`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VirtioOpts {
    /// `KEY=VALUE` for `-device virtio-net-pci`, in key order.
    pub device: BTreeMap<String, String>,
    /// `vhost=on|off` when given.
    pub vhost: Option<bool>,
    /// Queue pairs when given (`queues = N`).
    pub queues: Option<u32>,
}

impl VirtioOpts {
    /// Everything as the user would write it (`rx_queue_size=1024`, …), for results.
    pub fn as_map(&self) -> BTreeMap<String, String> {
        let mut m = self.device.clone();
        if let Some(v) = self.vhost {
            m.insert("vhost".into(), if v { "on" } else { "off" }.into());
        }
        if let Some(q) = self.queues {
            m.insert("queues".into(), q.to_string());
        }
        m
    }

    /// The `-device` option string after `virtio-net-pci,netdev=…,mac=…`.
    pub fn device_suffix(&self) -> String {
        let mut parts: Vec<String> = self
            .device
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        if let Some(q) = self.queues.filter(|q| *q > 1) {
            if !self.device.contains_key("mq") {
                parts.push("mq=on".into());
            }
            // One vector per queue each way, plus config and control (QEMU's docs).
            parts.push(format!("vectors={}", 2 * q + 2));
        }
        parts.join(",")
    }
}

/// A property of QEMU's `virtio-net-pci` and its type as `help` prints it (`bool`,
/// `uint16`, `str`, `OnOffAuto`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Property {
    /// Name (`rx_queue_size`).
    pub name: String,
    /// Type (`uint16`).
    pub ty: String,
}

/// Parses `qemu-system-x86_64 -device virtio-net-pci,help`: lines `  name=<type>  - …`.
pub fn parse_help(text: &str) -> Vec<Property> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let (name, rest) = l.split_once("=<")?;
            let ty = rest.split_once('>')?.0;
            Some(Property {
                name: name.trim().to_string(),
                ty: ty.to_string(),
            })
        })
        .collect()
}

fn qemu_properties() -> Result<Vec<Property>> {
    let out = Command::new(QEMU)
        .args(["-device", "virtio-net-pci,help"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| {
            anyhow!("cannot run {QEMU}: {e} (guest placements need QEMU: apt-get install qemu-system-x86)")
        })?;
    let props = parse_help(&String::from_utf8_lossy(&out.stdout));
    if props.is_empty() {
        bail!("{QEMU} -device virtio-net-pci,help listed no options: is this QEMU built with virtio-net?");
    }
    Ok(props)
}

/// Checks `KEY=VALUE` pairs against `props` (QEMU's list) and normalizes them; one error
/// line names the key and what it accepts.
pub fn check(pairs: &BTreeMap<String, String>, props: &[Property]) -> Result<VirtioOpts> {
    let mut o = VirtioOpts::default();
    for (k, v) in pairs {
        let v = v.trim();
        let key = k.trim();
        if let Some((_, why)) = RESERVED.iter().find(|(r, _)| *r == key) {
            bail!("virtio-net option {key}: virtperf sets this itself ({why})");
        }
        match key {
            "vhost" => {
                o.vhost = Some(on_off(key, v)? == "on");
                continue;
            }
            "queues" => {
                let q: u32 = v
                    .parse()
                    .ok()
                    .filter(|q| (1..=16).contains(q))
                    .ok_or_else(|| {
                        anyhow!("virtio-net option queues={v}: must be 1..16 (queue pairs)")
                    })?;
                o.queues = Some(q);
                continue;
            }
            _ => {}
        }
        let Some(p) = props.iter().find(|p| p.name == key) else {
            let mut names: Vec<&str> = props
                .iter()
                .map(|p| p.name.as_str())
                .filter(|n| !n.starts_with("x-") && !RESERVED.iter().any(|(r, _)| r == n))
                .chain(OURS.iter().map(|(n, _)| *n))
                .collect();
            names.sort_unstable();
            bail!(
                "virtio-net option {key}: not an option of this QEMU's virtio-net-pci (it takes: {})",
                names.join(", ")
            );
        };
        let value = match p.ty.as_str() {
            "bool" => on_off(key, v)?.to_string(),
            "OnOffAuto" => match v {
                "on" | "off" | "auto" => v.to_string(),
                _ => bail!("virtio-net option {key}={v}: expected on, off or auto"),
            },
            t if t.starts_with("uint") || t.starts_with("int") => {
                let bits: u32 = t
                    .trim_start_matches("uint")
                    .trim_start_matches("int")
                    .parse()
                    .unwrap_or(64);
                let n: i128 = v.parse().map_err(|_| {
                    anyhow!("virtio-net option {key}={v}: expected a whole number ({t})")
                })?;
                let (lo, hi) = if t.starts_with('u') {
                    (0, (1i128 << bits) - 1)
                } else {
                    (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
                };
                if n < lo || n > hi {
                    bail!("virtio-net option {key}={v}: out of range for {t} ({lo}..{hi})");
                }
                n.to_string()
            }
            _ => {
                // Free text goes into QEMU's comma-separated option string.
                if v.is_empty() || v.contains([',', '=']) || v.chars().any(char::is_control) {
                    bail!("virtio-net option {key}={v:?}: text values may not be empty or contain ',' or '='");
                }
                v.to_string()
            }
        };
        o.device.insert(key.to_string(), value);
    }
    if let (Some(q), Some(mq)) = (o.queues, o.device.get("mq")) {
        if q > 1 && mq == "off" {
            bail!("virtio-net option queues={q} needs mq=on (or leave mq out: queues sets it)");
        }
    }
    Ok(o)
}

fn on_off(key: &str, v: &str) -> Result<&'static str> {
    match v {
        "on" | "true" | "yes" | "1" => Ok("on"),
        "off" | "false" | "no" | "0" => Ok("off"),
        _ => bail!("virtio-net option {key}={v}: expected on or off"),
    }
}

/// Realizes the device once in a paused QEMU with no guest (`-S`), so a value QEMU would
/// refuse at boot is refused now, in QEMU's own words.
fn realize(o: &VirtioOpts) -> Result<()> {
    let suffix = o.device_suffix();
    let device = if suffix.is_empty() {
        "virtio-net-pci".to_string()
    } else {
        format!("virtio-net-pci,{suffix}")
    };
    let mut child = Command::new(QEMU)
        .args([
            "-machine",
            "pc",
            "-accel",
            "tcg",
            "-m",
            "32",
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-S",
            "-monitor",
            "stdio",
            "-device",
            &device,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| anyhow!("cannot run {QEMU}: {e} (apt-get install qemu-system-x86)"))?;
    // A QEMU that realized the device waits on its monitor: tell it to quit. One that
    // refused it has exited already (the write then fails, harmlessly).
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(b"quit\n");
    }
    let out = child.wait_with_output()?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    // "qemu-system-x86_64: -device virtio-net-pci,…: Invalid rx_queue_size (= 1000), …"
    let why = err
        .lines()
        .find(|l| l.contains("-device"))
        .or_else(|| err.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("(no message)");
    let why = why.rsplit(": ").next().unwrap_or(why).trim();
    let asked: Vec<String> = o.as_map().iter().map(|(k, v)| format!("{k}={v}")).collect();
    bail!(
        "virtio-net option {}: QEMU refuses it: {why}",
        asked.join(",")
    )
}

/// Validates user options against the installed QEMU and returns them normalized. Runs
/// QEMU twice (its option list, then one paused realize), without root and without booting.
pub fn validate(pairs: &BTreeMap<String, String>) -> Result<VirtioOpts> {
    if pairs.is_empty() {
        return Ok(VirtioOpts::default());
    }
    let o = check(pairs, &qemu_properties()?)?;
    if !o.device.is_empty() || o.queues.is_some_and(|q| q > 1) {
        realize(&o)?;
    }
    Ok(o)
}

/// Parses `KEY=VALUE` (one `--virtio` flag).
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE (e.g. rx_queue_size=1024), got {s:?}"))?;
    if k.trim().is_empty() {
        return Err(format!("empty key in {s:?}"));
    }
    Ok((k.trim().to_string(), v.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HELP: &str = "virtio-net-pci options:
  csum=<bool>            - on/off (default: true)
  disable-legacy=<OnOffAuto> - on/off/auto (default: \"auto\")
  mq=<bool>              - on/off (default: false)
  mrg_rxbuf=<bool>       - on/off (default: true)
  netdev=<str>           - ID of a netdev to use as a backend
  rx_queue_size=<uint16> -  (default: 256)
  speed=<int32>          -  (default: -1)
  duplex=<str>
  x-txburst=<int32>      -  (default: 256)
";

    fn pairs(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn help_lists_names_and_types() {
        let p = parse_help(HELP);
        assert_eq!(p.len(), 9);
        assert_eq!(
            p[5],
            Property {
                name: "rx_queue_size".into(),
                ty: "uint16".into()
            }
        );
    }

    #[test]
    fn values_are_checked_by_type_and_normalized() {
        let p = parse_help(HELP);
        let o = check(
            &pairs(&[
                ("rx_queue_size", "1024"),
                ("mrg_rxbuf", "false"),
                ("vhost", "on"),
                ("queues", "2"),
                ("duplex", "full"),
            ]),
            &p,
        )
        .expect("valid");
        assert_eq!(o.device["mrg_rxbuf"], "off");
        assert_eq!(o.vhost, Some(true));
        assert_eq!(
            o.device_suffix(),
            "duplex=full,mrg_rxbuf=off,rx_queue_size=1024,mq=on,vectors=6"
        );
        assert_eq!(o.as_map()["queues"], "2");
        for (bad, says) in [
            (("rx_queue_size", "70000"), "out of range"),
            (("rx_queue_size", "1e3"), "whole number"),
            (("mrg_rxbuf", "maybe"), "on or off"),
            (("ring", "1024"), "not an option"),
            (("netdev", "x"), "sets this itself"),
            (("duplex", "full,mq=on"), "','"),
            (("queues", "0"), "1..16"),
            (("disable-legacy", "yes"), "on, off or auto"),
        ] {
            let e = check(&pairs(&[bad]), &p).expect_err(bad.0).to_string();
            assert!(e.contains(says), "{bad:?}: {e}");
            assert!(e.contains(bad.0), "the key is named: {e}");
            assert!(!e.contains('\n'), "one line: {e}");
        }
        let e = check(&pairs(&[("queues", "4"), ("mq", "off")]), &p).unwrap_err();
        assert!(e.to_string().contains("mq=on"), "{e}");
    }

    /// The installed QEMU decides what it accepts: a ring size that is not a power of two
    /// is refused before any guest boots, in one line with QEMU's reason.
    #[test]
    fn the_installed_qemu_refuses_what_it_would_refuse_at_boot() {
        if Command::new(QEMU).arg("--version").output().is_err() {
            virtperf_testkit::skip("qemu", &format!("{QEMU} is not installed"));
            return;
        }
        let ok = validate(&pairs(&[("rx_queue_size", "1024"), ("mrg_rxbuf", "off")]))
            .expect("QEMU takes a 1024 ring");
        assert_eq!(ok.device["rx_queue_size"], "1024");
        let e = validate(&pairs(&[("rx_queue_size", "1000")]))
            .expect_err("1000 is not a power of two")
            .to_string();
        assert!(e.contains("rx_queue_size=1000"), "{e}");
        assert!(e.contains("power of 2"), "QEMU's own reason: {e}");
        assert!(!e.contains('\n'), "{e}");
        let e = validate(&pairs(&[("rx_queue_siz", "1024")]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("rx_queue_size"),
            "the valid keys are listed: {e}"
        );
    }
}
