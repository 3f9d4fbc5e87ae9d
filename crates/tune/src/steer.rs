//! Receive steering on the network device the workload's packets cross on this host: RPS
//! (which CPU runs a received packet's protocol processing) and RFS (the CPU where the
//! receiving socket's thread last ran). On loopback every packet is "received" by `lo`, so
//! without steering the sender's CPU processes it and then wakes the receiver across CPUs;
//! with RPS the processing moves to the steered CPU (an IPI to get there). Which is faster
//! is a measurement, not a rule, so both are candidates.
//!
//! XPS, IRQ affinity and NAPI's interrupt deferral need a device with transmit queues and
//! interrupts of its own; `lo` has neither, and the devices other placements cross (a
//! namespace's veth, a guest's virtio NIC) do not exist on this host until the run makes
//! them, so those are listed with why.

use crate::candidate::{Candidate, Machine, NotHere, Setting, Target};

/// The sysctl sizing RFS's global flow table (0: RFS off).
pub const FLOW_ENTRIES: &str = "net.core.rps_sock_flow_entries";
/// RFS's table size when it is tried (the kernel's documentation suggests 32768 for a
/// busy server; a benchmark's few flows need far fewer, and a small table costs nothing).
const FLOWS: u32 = 4096;

/// The device whose receive steering `t`'s packets pass through on this host: `lo` for
/// this host's loopback and for an agent reached at a loopback address (a guest behind
/// QEMU's user networking, a forwarded port); None where the path is not on this host.
pub fn device(t: &Target) -> Option<&'static str> {
    let Some(p) = t.placement.as_deref() else {
        return Some("lo");
    };
    let host = p.strip_prefix("remote:")?;
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|a| a.is_loopback());
    loopback.then_some("lo")
}

/// The knob names of `dev`'s receive queues' steering files, for reading and restoring.
pub fn knob_names(dev: &str) -> Vec<String> {
    let mut names = vec![FLOW_ENTRIES.to_string()];
    for q in rx_queues(dev) {
        names.push(format!("{dev}/queues/{q}/rps_cpus"));
        names.push(format!("{dev}/queues/{q}/rps_flow_cnt"));
    }
    names
}

/// `dev`'s receive queues (`rx-0`, …), in order.
fn rx_queues(dev: &str) -> Vec<String> {
    let mut q: Vec<(u32, String)> = std::fs::read_dir(format!("/sys/class/net/{dev}/queues"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter_map(|n| Some((n.strip_prefix("rx-")?.parse().ok()?, n.clone())))
                .collect()
        })
        .unwrap_or_default();
    q.sort();
    q.into_iter().map(|(_, n)| n).collect()
}

/// A CPU set as the kernel's bitmap files take it: 32-bit hex groups, most significant
/// first, comma-separated (`2`, `3`, `1,00000000` for CPU 32).
pub fn cpu_mask(cpus: &[u32]) -> String {
    let groups = cpus.iter().map(|c| c / 32 + 1).max().unwrap_or(1) as usize;
    let mut words = vec![0u32; groups];
    for c in cpus {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let mut out: Vec<String> = words.iter().rev().map(|w| format!("{w:08x}")).collect();
    out[0] = format!("{:x}", words[groups - 1]);
    out.join(",")
}

/// Whether a bitmap file's value selects no CPU (`0`, `00000000,00000000`).
fn is_empty_mask(v: &str) -> bool {
    v.split(',').all(|w| w.trim().chars().all(|c| c == '0'))
}

/// RPS and RFS candidates on the device `t` crosses, and what cannot be tried with why.
pub fn candidates(m: &Machine, t: &Target, c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    let Some(dev) = device(t) else {
        not.push(NotHere {
            what: "RPS/RFS, XPS, IRQ affinity, napi_defer_hard_irqs".into(),
            why: format!(
                "the device placement {} crosses is not on this host before the run (a namespace's veth, a guest's virtio NIC, another machine's NIC)",
                t.placement.as_deref().unwrap_or("local")
            ),
        });
        return;
    };
    not.push(NotHere {
        what: "XPS, IRQ affinity, napi_defer_hard_irqs".into(),
        why: format!(
            "{dev} has one transmit queue, no interrupts and no NAPI: nothing to steer or defer"
        ),
    });
    let queues: Vec<(String, &str)> = m
        .knobs
        .iter()
        .filter_map(|(k, v)| {
            let q = k
                .strip_prefix(&format!("{dev}/queues/"))?
                .strip_suffix("/rps_cpus")?;
            Some((q.to_string(), v.as_deref().ok()?))
        })
        .collect();
    let refused = m
        .knobs
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{dev}/")) || *k == FLOW_ENTRIES)
        .find_map(|(_, v)| v.as_ref().err().cloned());
    let why_not = match (refused, queues.is_empty()) {
        (Some(why), _) => Some(why),
        (None, true) => Some(format!(
            "{dev} has no receive queues to steer (a kernel without CONFIG_RPS)"
        )),
        (None, false) => None,
    };
    if let Some(why) = why_not {
        not.push(NotHere {
            what: format!("RPS/RFS on {dev}"),
            why,
        });
        return;
    }
    let on = queues.iter().any(|(_, v)| !is_empty_mask(v));
    let rps = |name: String, what: String, mask: &str, flows: Option<u32>| {
        let mut settings: Vec<Setting> = Vec::new();
        for (q, _) in &queues {
            settings.push(Setting::NetDev {
                name: format!("{dev}/queues/{q}/rps_cpus"),
                value: mask.to_string(),
            });
            settings.push(Setting::NetDev {
                name: format!("{dev}/queues/{q}/rps_flow_cnt"),
                value: flows.map_or(0, |f| f / queues.len() as u32).to_string(),
            });
        }
        settings.push(Setting::Sysctl {
            name: FLOW_ENTRIES.into(),
            value: flows.unwrap_or(0).to_string(),
        });
        Candidate {
            name,
            family: "rps".into(),
            what,
            settings,
        }
    };
    if on {
        c.push(rps(
            "rps-off".into(),
            format!("receive steering on {dev} off (RPS and RFS)"),
            "0",
            None,
        ));
    }
    if let Some((_, server)) = t.cpus.filter(|_| !on) {
        c.push(rps(
            format!("rps-cpu{server}"),
            format!("{dev}'s receive processing steered to CPU {server} (the server's) by RPS"),
            &cpu_mask(&[server]),
            None,
        ));
    }
    if !on && !m.online_cpus.is_empty() {
        c.push(rps(
            "rfs".into(),
            format!(
                "RFS on {dev}: receive processing on the CPU where the receiving thread last ran"
            ),
            &cpu_mask(&m.online_cpus),
            Some(FLOWS),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(placement: Option<&str>) -> Target {
        Target {
            kind: "rr".into(),
            size: None,
            cpus: Some((0, 1)),
            placement: placement.map(str::to_string),
        }
    }

    /// Bitmaps as the kernel prints and takes them.
    #[test]
    fn masks_are_the_kernels_bitmap_format() {
        assert_eq!(cpu_mask(&[1]), "2");
        assert_eq!(cpu_mask(&[0, 1]), "3");
        assert_eq!(cpu_mask(&[32]), "1,00000000");
        assert_eq!(cpu_mask(&[0, 33]), "2,00000001");
        assert!(is_empty_mask("00000000,00000000") && is_empty_mask("0"));
        assert!(!is_empty_mask("00000000,00000002"));
    }

    /// Loopback paths steer on `lo`; paths off this host are not searched.
    #[test]
    fn the_device_is_lo_for_loopback_paths_only() {
        assert_eq!(device(&target(None)), Some("lo"));
        assert_eq!(device(&target(Some("remote:127.0.0.1:7150"))), Some("lo"));
        assert_eq!(device(&target(Some("remote:[::1]:7150"))), Some("lo"));
        assert_eq!(device(&target(Some("remote:10.0.0.5:7150"))), None);
        assert_eq!(device(&target(Some("guest"))), None);
        assert_eq!(device(&target(Some("netns:veth"))), None);
    }

    fn machine(rps: Result<&str, &str>) -> Machine {
        let mut knobs = std::collections::BTreeMap::new();
        let v = |s: Result<&str, &str>| s.map(str::to_string).map_err(str::to_string);
        knobs.insert("lo/queues/rx-0/rps_cpus".to_string(), v(rps));
        knobs.insert("lo/queues/rx-0/rps_flow_cnt".to_string(), v(Ok("0")));
        knobs.insert(FLOW_ENTRIES.to_string(), v(Ok("0")));
        Machine {
            knobs,
            dma_latency: Ok(0),
            cpuidle_driver: None,
            online_cpus: vec![0, 1],
            vhost_net: Ok(()),
        }
    }

    /// RPS to the server's CPU and RFS when steering is off; RPS off when it is on; a
    /// refused file says why instead.
    #[test]
    fn steering_candidates_follow_what_the_machine_has() {
        let (mut c, mut not) = (Vec::new(), Vec::new());
        candidates(&machine(Ok("0")), &target(None), &mut c, &mut not);
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["rps-cpu1", "rfs"]);
        assert!(c[0].settings.contains(&Setting::NetDev {
            name: "lo/queues/rx-0/rps_cpus".into(),
            value: "2".into()
        }));
        assert!(c[1].settings.contains(&Setting::Sysctl {
            name: FLOW_ENTRIES.into(),
            value: "4096".into()
        }));
        assert!(not.iter().any(|n| n.what.contains("XPS")));
        let (mut c, mut not) = (Vec::new(), Vec::new());
        candidates(&machine(Ok("00000003")), &target(None), &mut c, &mut not);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].name, "rps-off");
        let (mut c, mut not) = (Vec::new(), Vec::new());
        candidates(
            &machine(Err(
                "network device file lo/queues/rx-0/rps_cpus is read-only here",
            )),
            &target(None),
            &mut c,
            &mut not,
        );
        assert!(c.is_empty());
        assert!(not.iter().any(|n| n.why.contains("read-only")), "{not:?}");
        let (mut c, mut not) = (Vec::new(), Vec::new());
        candidates(&machine(Ok("0")), &target(Some("guest")), &mut c, &mut not);
        assert!(c.is_empty());
        assert!(not.iter().any(|n| n.why.contains("not on this host")));
    }
}
