//! virtio-net's own counters: what a guest can count of its network device's
//! virtualization costs. Each **kick** (the driver notifying the device of new buffers) is a
//! VM exit, each device **interrupt** an injection; packets per interrupt shows how much NAPI
//! batched. Read around a side's measured interval, for the interface its traffic crossed.
//!
//! Sources: the driver's ethtool statistics (`ETHTOOL_GSTATS`: kicks and drops per queue),
//! the interface statistics in sysfs (packets, bytes) and the device's lines of
//! `/proc/interrupts` (`virtioN-input.Q`, `virtioN-output.Q`). The fingerprint part reads the
//! feature bits the driver negotiated (`/sys/bus/virtio/devices/virtioN/features`) and the
//! ring sizes and queue count the guest sees (`ETHTOOL_GRINGPARAM`, `ETHTOOL_GCHANNELS`).
//!
//! The ethtool ioctls are written by hand: no well-kept synchronous crate exposes them (the
//! `ethtool` crate speaks generic netlink through tokio, and nix has no ethtool requests).

use std::collections::BTreeMap;
use std::fs;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::Path;

use virtperf_wire::VirtioNet;

/// The network interface that holds `ip` (the local address of a side's connection), from
/// getifaddrs. None when no interface has it.
pub fn interface_of(ip: IpAddr) -> Option<String> {
    let addrs = nix::ifaddrs::getifaddrs().ok()?;
    for a in addrs {
        let Some(sa) = a.address else { continue };
        let has = match ip {
            IpAddr::V4(v4) => sa.as_sockaddr_in().is_some_and(|s| s.ip() == v4),
            IpAddr::V6(v6) => sa.as_sockaddr_in6().is_some_and(|s| s.ip() == v6),
        };
        if has {
            return Some(a.interface_name);
        }
    }
    None
}

/// The kernel driver of interface `ifname` (`virtio_net`, `e1000`, …); None for virtual
/// devices (loopback, bridges, veth) that have no `device/driver` link.
pub fn driver_of(ifname: &str) -> Option<String> {
    let link = fs::read_link(format!("/sys/class/net/{ifname}/device/driver")).ok()?;
    link.file_name().map(|n| n.to_string_lossy().into_owned())
}

/// The virtio device (`virtio2`) behind a virtio-net interface.
pub fn virtio_device_of(ifname: &str) -> Option<String> {
    let dev = fs::canonicalize(format!("/sys/class/net/{ifname}/device")).ok()?;
    dev.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|n| n.starts_with("virtio"))
}

/// One reading of a virtio-net interface's counters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NicSnapshot {
    /// Interface name (`eth0`).
    pub interface: String,
    /// Its virtio device (`virtio2`), whose lines of `/proc/interrupts` are its interrupts.
    pub device: String,
    /// `rx_packets`, `tx_packets`, `rx_bytes`, `tx_bytes`, `rx_dropped`, `tx_dropped` from
    /// sysfs and `rx_kicks`, `tx_kicks`, `rx_drops` from the driver (totals over queues).
    pub counters: BTreeMap<String, u64>,
    /// Counters that could not be read, with the reason: their keys are absent from
    /// `counters`, never 0.
    pub missing: Vec<String>,
}

/// Reads `ifname`'s counters when it is a virtio-net interface; None otherwise (its traffic
/// costs no virtio notifications here).
pub fn snapshot(ifname: &str) -> Option<NicSnapshot> {
    if driver_of(ifname).as_deref() != Some("virtio_net") {
        return None;
    }
    let device = virtio_device_of(ifname)?;
    let mut counters = BTreeMap::new();
    let mut missing = Vec::new();
    for f in [
        virtperf_wire::counter::RX_PACKETS,
        virtperf_wire::counter::TX_PACKETS,
        "rx_bytes",
        "tx_bytes",
        "rx_dropped",
        "tx_dropped",
    ] {
        let path = format!("/sys/class/net/{ifname}/statistics/{f}");
        match fs::read_to_string(&path).map(|s| s.trim().parse()) {
            Ok(Ok(v)) => {
                counters.insert(f.to_string(), v);
            }
            Ok(Err(e)) => missing.push(format!("{path}: {e}")),
            Err(e) => missing.push(format!("{path}: {e}")),
        }
    }
    match ethtool_stats(ifname) {
        Ok(stats) => {
            let totals = driver_totals(&stats);
            for k in [
                virtperf_wire::counter::RX_KICKS,
                virtperf_wire::counter::TX_KICKS,
            ] {
                if !totals.contains_key(k) {
                    missing.push(format!(
                        "{ifname}: the driver's ethtool statistics have no {k}: kicks not counted"
                    ));
                }
            }
            counters.extend(totals);
        }
        Err(e) => missing.push(format!(
            "{ifname}: ethtool statistics unreadable ({e}): kicks not counted"
        )),
    }
    Some(NicSnapshot {
        interface: ifname.to_string(),
        device,
        counters,
        missing,
    })
}

/// Totals over queues of the driver statistics we report: `rx_kicks`, `tx_kicks`,
/// `rx_drops`. Kernels name them three ways: a total (`rx_kicks`, 6.x), per queue as
/// `rx0_kicks` (6.x) or `rx_queue_0_kicks` (before); a total wins over summing queues.
pub fn driver_totals(stats: &[(String, u64)]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for dir in ["rx", "tx"] {
        for what in ["kicks", "drops"] {
            let total = format!("{dir}_{what}");
            if let Some((_, v)) = stats.iter().find(|(k, _)| *k == total) {
                out.insert(total, *v);
                continue;
            }
            let per_queue: Vec<u64> = stats
                .iter()
                .filter(|(k, _)| {
                    let Some(q) = k
                        .strip_prefix(dir)
                        .and_then(|r| r.strip_suffix(&format!("_{what}")))
                    else {
                        return false;
                    };
                    let q = q.strip_prefix("_queue_").unwrap_or(q);
                    !q.is_empty() && q.chars().all(|c| c.is_ascii_digit())
                })
                .map(|(_, v)| *v)
                .collect();
            if !per_queue.is_empty() {
                out.insert(total, per_queue.iter().sum());
            }
        }
    }
    out
}

/// The device's interrupts in a `/proc/interrupts` delta (names as
/// [`crate::events::parse_per_cpu`] keys them), summed over CPUs: `rx_irqs` (its
/// `-input.Q` vectors), `tx_irqs` (`-output.Q`) and `shared_irqs` (one vector for all
/// queues, `-virtqueues`, or a legacy INTx line named after the device). Empty when the
/// table has no line of the device (or was not read): the caller names that as missing.
pub fn irq_totals(device: &str, interrupts: &BTreeMap<String, Vec<u64>>) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (name, counts) in interrupts {
        let Some(rest) = name.strip_prefix(device) else {
            continue;
        };
        let key = if rest.starts_with("-input") {
            "rx_irqs"
        } else if rest.starts_with("-output") {
            "tx_irqs"
        } else if rest.is_empty() || rest == "-virtqueues" {
            "shared_irqs"
        } else {
            continue; // -config: link changes, not traffic
        };
        *out.entry(key.to_string()).or_insert(0) += counts.iter().sum::<u64>();
    }
    out
}

// ---- ethtool ioctls ------------------------------------------------------------------

const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETHTOOL_GRINGPARAM: u32 = 0x10;
const ETHTOOL_GCHANNELS: u32 = 0x3c;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;

/// Sends one `SIOCETHTOOL` request whose buffer starts with the command word.
fn ethtool(ifname: &str, buf: &mut [u8]) -> std::io::Result<()> {
    let sock =
        std::net::UdpSocket::bind("0.0.0.0:0").or_else(|_| std::net::UdpSocket::bind("[::]:0"))?;
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if ifname.len() >= ifr.ifr_name.len() {
        return Err(std::io::Error::other("interface name too long"));
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = buf.as_mut_ptr().cast();
    // The request parameter is c_ulong in glibc and c_int in musl (the guest build).
    #[allow(clippy::unnecessary_cast)]
    let req = libc::SIOCETHTOOL as libc::Ioctl;
    // SAFETY: ifr names the interface and points at `buf`, which the caller sized for the
    // command in its first word (the kernel writes at most that command's structure, whose
    // variable part the caller sized from ETHTOOL_GSSET_INFO).
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), req, &mut ifr as *mut libc::ifreq) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn word(buf: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&buf[at..at + 4]);
    u32::from_ne_bytes(w)
}

/// How many statistics the driver reports (`ETHTOOL_GSSET_INFO` for `ETH_SS_STATS`).
fn stats_count(ifname: &str) -> std::io::Result<usize> {
    // struct ethtool_sset_info { u32 cmd; u32 reserved; u64 sset_mask; u32 data[]; }
    let mut buf = [0u8; 16 + 4];
    buf[0..4].copy_from_slice(&ETHTOOL_GSSET_INFO.to_ne_bytes());
    buf[8..16].copy_from_slice(&(1u64 << ETH_SS_STATS).to_ne_bytes());
    ethtool(ifname, &mut buf)?;
    let mask = u64::from_ne_bytes(buf[8..16].try_into().unwrap_or([0; 8]));
    if mask & (1 << ETH_SS_STATS) == 0 {
        return Ok(0);
    }
    Ok(word(&buf, 16) as usize)
}

/// The driver's statistics by name (what `ethtool -S` prints).
pub fn ethtool_stats(ifname: &str) -> std::io::Result<Vec<(String, u64)>> {
    let n = stats_count(ifname)?;
    if n == 0 || n > 100_000 {
        return Ok(Vec::new());
    }
    // struct ethtool_gstrings { u32 cmd; u32 string_set; u32 len; u8 data[]; }
    let mut names = vec![0u8; 12 + n * ETH_GSTRING_LEN];
    names[0..4].copy_from_slice(&ETHTOOL_GSTRINGS.to_ne_bytes());
    names[4..8].copy_from_slice(&ETH_SS_STATS.to_ne_bytes());
    names[8..12].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool(ifname, &mut names)?;
    // struct ethtool_stats { u32 cmd; u32 n_stats; u64 data[]; }
    let mut values = vec![0u8; 8 + n * 8];
    values[0..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
    values[4..8].copy_from_slice(&(n as u32).to_ne_bytes());
    ethtool(ifname, &mut values)?;
    let got = (word(&values, 4) as usize).min(n);
    Ok((0..got)
        .map(|i| {
            let raw = &names[12 + i * ETH_GSTRING_LEN..12 + (i + 1) * ETH_GSTRING_LEN];
            let end = raw.iter().position(|b| *b == 0).unwrap_or(raw.len());
            let name = String::from_utf8_lossy(&raw[..end]).into_owned();
            let at = 8 + i * 8;
            let v = u64::from_ne_bytes(values[at..at + 8].try_into().unwrap_or([0; 8]));
            (name, v)
        })
        .collect())
}

/// Current receive and transmit ring sizes (`ethtool -g`): for virtio-net, the virtqueue
/// sizes the device offered (QEMU's `rx_queue_size`, `tx_queue_size`).
pub fn ring_sizes(ifname: &str) -> std::io::Result<(u32, u32)> {
    // struct ethtool_ringparam { u32 cmd; u32 rx_max_pending; u32 rx_mini_max_pending;
    //   u32 rx_jumbo_max_pending; u32 tx_max_pending; u32 rx_pending;
    //   u32 rx_mini_pending; u32 rx_jumbo_pending; u32 tx_pending; }
    let mut buf = [0u8; 36];
    buf[0..4].copy_from_slice(&ETHTOOL_GRINGPARAM.to_ne_bytes());
    ethtool(ifname, &mut buf)?;
    Ok((word(&buf, 20), word(&buf, 32)))
}

/// Queue pairs in use (`ethtool -l`'s current combined count).
pub fn combined_queues(ifname: &str) -> std::io::Result<u32> {
    // struct ethtool_channels { u32 cmd; u32 max_rx; u32 max_tx; u32 max_other;
    //   u32 max_combined; u32 rx_count; u32 tx_count; u32 other_count; u32 combined_count; }
    let mut buf = [0u8; 36];
    buf[0..4].copy_from_slice(&ETHTOOL_GCHANNELS.to_ne_bytes());
    ethtool(ifname, &mut buf)?;
    Ok(word(&buf, 32))
}

/// virtio-net feature bits by number (the virtio 1.2 spec, 5.1.3, and the device-independent
/// bits of 6), for naming what a driver negotiated.
const FEATURES: &[(usize, &str)] = &[
    (0, "csum"),
    (1, "guest_csum"),
    (2, "ctrl_guest_offloads"),
    (3, "mtu"),
    (5, "mac"),
    (6, "gso"),
    (7, "guest_tso4"),
    (8, "guest_tso6"),
    (9, "guest_ecn"),
    (10, "guest_ufo"),
    (11, "host_tso4"),
    (12, "host_tso6"),
    (13, "host_ecn"),
    (14, "host_ufo"),
    (15, "mrg_rxbuf"),
    (16, "status"),
    (17, "ctrl_vq"),
    (18, "ctrl_rx"),
    (19, "ctrl_vlan"),
    (20, "ctrl_rx_extra"),
    (21, "guest_announce"),
    (22, "mq"),
    (23, "ctrl_mac_addr"),
    (24, "notify_on_empty"),
    (27, "any_layout"),
    (28, "indirect_desc"),
    (29, "event_idx"),
    (32, "version_1"),
    (33, "access_platform"),
    (34, "packed"),
    (35, "in_order"),
    (36, "order_platform"),
    (37, "sr_iov"),
    (38, "notification_data"),
    (40, "queue_reset"),
    (54, "guest_uso4"),
    (55, "guest_uso6"),
    (56, "host_uso"),
    (57, "hash_report"),
    (59, "guest_hdrlen"),
    (60, "rss"),
    (61, "rsc_ext"),
    (62, "standby"),
    (63, "speed_duplex"),
];

/// Names of the bits set in a sysfs `features` string (one `0`/`1` character per bit, bit
/// 0 first); unknown bits as `bit<N>`.
pub fn feature_names(bits: &str) -> Vec<String> {
    bits.trim()
        .chars()
        .enumerate()
        .filter(|(_, c)| *c == '1')
        .map(|(i, _)| {
            FEATURES
                .iter()
                .find(|(b, _)| *b == i)
                .map_or_else(|| format!("bit{i}"), |(_, n)| (*n).to_string())
        })
        .collect()
}

/// Every virtio-net interface of this machine, for the fingerprint: its feature bits as
/// negotiated, their names, and the ring sizes and queue pairs the driver uses.
pub fn virtio_nets() -> Vec<VirtioNet> {
    let mut out = Vec::new();
    let Ok(devs) = fs::read_dir("/sys/bus/virtio/devices") else {
        return out;
    };
    let mut devs: Vec<_> = devs.flatten().map(|d| d.path()).collect();
    devs.sort();
    for dev in devs {
        let Some(ifname) = fs::read_dir(dev.join("net"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
        else {
            continue;
        };
        let features = fs::read_to_string(dev.join("features")).unwrap_or_default();
        let rings = ring_sizes(&ifname).ok();
        out.push(VirtioNet {
            device: file_name(&dev),
            interface: ifname.clone(),
            features: features.trim().trim_end_matches('0').to_string(),
            feature_names: feature_names(&features),
            rx_ring: rings.map(|r| r.0),
            tx_ring: rings.map(|r| r.1),
            queue_pairs: combined_queues(&ifname).ok(),
        });
    }
    out
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn driver_totals_read_all_three_namings() {
        // 6.x: a total and per-queue copies; the total is taken, not doubled.
        let new = s(&[
            ("rx_kicks", 7),
            ("rx0_kicks", 7),
            ("tx_kicks", 9),
            ("tx0_kicks", 9),
        ]);
        let t = driver_totals(&new);
        assert_eq!(t.get("rx_kicks"), Some(&7));
        assert_eq!(t.get("tx_kicks"), Some(&9));
        // 6.x without totals: rxN_ summed.
        let t = driver_totals(&s(&[("rx0_kicks", 3), ("rx1_kicks", 4), ("rx0_drops", 1)]));
        assert_eq!(t.get("rx_kicks"), Some(&7));
        assert_eq!(t.get("rx_drops"), Some(&1));
        // Before: rx_queue_N_.
        let t = driver_totals(&s(&[
            ("rx_queue_0_kicks", 2),
            ("rx_queue_1_kicks", 5),
            ("tx_queue_0_kicks", 11),
            ("tx_queue_0_xdp_tx", 99),
        ]));
        assert_eq!(t.get("rx_kicks"), Some(&7));
        assert_eq!(t.get("tx_kicks"), Some(&11));
        assert_eq!(t.get("tx_drops"), None);
    }

    #[test]
    fn irq_totals_take_only_this_devices_queue_lines() {
        let mut irqs = BTreeMap::new();
        irqs.insert("virtio2-input.0".to_string(), vec![3, 4]);
        irqs.insert("virtio2-input.1".to_string(), vec![1, 0]);
        irqs.insert("virtio2-output.0".to_string(), vec![5, 0]);
        irqs.insert("virtio2-config".to_string(), vec![9, 9]);
        irqs.insert("virtio4-input".to_string(), vec![100, 0]); // another device
        irqs.insert("virtio21-input.0".to_string(), vec![100, 0]); // not virtio2
        let t = irq_totals("virtio2", &irqs);
        assert_eq!(t.get("rx_irqs"), Some(&8));
        assert_eq!(t.get("tx_irqs"), Some(&5));
        assert_eq!(t.get("shared_irqs"), None);
    }

    #[test]
    fn feature_names_follow_the_spec_numbers() {
        let n = feature_names("1100000000000001000000000000010010000000\n");
        assert_eq!(
            n,
            ["csum", "guest_csum", "mrg_rxbuf", "event_idx", "version_1"]
        );
        assert_eq!(
            feature_names(&format!("{}1", "0".repeat(27))),
            ["any_layout"]
        );
        assert_eq!(feature_names("00001"), ["bit4"]);
    }

    #[test]
    fn reads_this_machines_virtio_net_interfaces_where_it_has_one() {
        let nets = virtio_nets();
        let Some(n) = nets.first() else {
            virtperf_testkit::skip("virtio-net", "no virtio-net interface on this machine");
            return;
        };
        // The driver always negotiates VERSION_1 with a modern device, and a ring is
        // never empty.
        assert!(!n.features.is_empty(), "{n:?}");
        assert!(n.rx_ring.is_some_and(|r| r > 0), "{n:?}");
        let snap = snapshot(&n.interface).expect("a virtio_net interface snapshots");
        assert!(snap.counters.contains_key("rx_packets"), "{snap:?}");
        assert!(snap.counters.contains_key("tx_kicks"), "{snap:?}");
        // Loopback is not virtio: no counters for it.
        assert!(snapshot("lo").is_none());
    }

    #[test]
    fn finds_the_interface_of_an_address() {
        assert_eq!(
            interface_of(IpAddr::from([127, 0, 0, 1])).as_deref(),
            Some("lo")
        );
        assert_eq!(interface_of(IpAddr::from([192, 0, 2, 77])), None);
    }
}
