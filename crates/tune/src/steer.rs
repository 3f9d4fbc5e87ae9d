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

use std::collections::BTreeMap;

/// The sysctl sizing RFS's global flow table (0: RFS off).
pub const FLOW_ENTRIES: &str = "net.core.rps_sock_flow_entries";
/// RFS's table size when it is tried (the kernel's documentation suggests 32768 for a
/// busy server; a benchmark's few flows need far fewer, and a small table costs nothing).
const FLOWS: u32 = 4096;

/// The device whose receive steering a placement's packets pass through on this host: `lo` for
/// this host's loopback and for an agent reached at a loopback address (a guest behind
/// QEMU's user networking, a forwarded port); None where the path is not on this host.
pub fn device(placement: Option<&str>) -> Option<&'static str> {
    let Some(p) = placement else {
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

/// One steering remedy: every receive queue of the device set alike, and RFS's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steering {
    /// Short name (`rps-cpu1`, `rfs`, `rps-off`).
    pub name: String,
    /// In words.
    pub what: String,
    /// `(knob name, value)`: each queue's `rps_cpus` and `rps_flow_cnt`, then
    /// [`FLOW_ENTRIES`].
    pub files: Vec<(String, String)>,
}

/// The steering remedies for device `dev` from what the machine read (`knobs`: the files'
/// values or why they cannot be written), or why there are none: RPS to the server's CPU
/// (`cpus`, pinned client and server) and RFS over `online` CPUs where steering is off, or
/// steering off where it is on.
pub fn options(
    knobs: &BTreeMap<String, Result<String, String>>,
    dev: &str,
    cpus: Option<(u32, u32)>,
    online: &[u32],
) -> Result<Vec<Steering>, String> {
    let queues: Vec<(String, &str)> = knobs
        .iter()
        .filter_map(|(k, v)| {
            let q = k
                .strip_prefix(&format!("{dev}/queues/"))?
                .strip_suffix("/rps_cpus")?;
            Some((q.to_string(), v.as_deref().ok()?))
        })
        .collect();
    if let Some(why) = knobs
        .iter()
        .filter(|(k, _)| k.starts_with(&format!("{dev}/")) || *k == FLOW_ENTRIES)
        .find_map(|(_, v)| v.as_ref().err())
    {
        return Err(why.clone());
    }
    if queues.is_empty() {
        return Err(format!(
            "{dev} has no receive queues to steer (a kernel without CONFIG_RPS)"
        ));
    }
    let steer = |name: String, what: String, mask: &str, flows: Option<u32>| {
        let mut files = Vec::new();
        for (q, _) in &queues {
            files.push((format!("{dev}/queues/{q}/rps_cpus"), mask.to_string()));
            let per_queue = flows.map_or(0, |f| f / queues.len() as u32);
            files.push((
                format!("{dev}/queues/{q}/rps_flow_cnt"),
                per_queue.to_string(),
            ));
        }
        files.push((FLOW_ENTRIES.to_string(), flows.unwrap_or(0).to_string()));
        Steering { name, what, files }
    };
    if queues.iter().any(|(_, v)| !is_empty_mask(v)) {
        return Ok(vec![steer(
            "rps-off".into(),
            format!("receive steering on {dev} off (RPS and RFS)"),
            "0",
            None,
        )]);
    }
    let mut out = Vec::new();
    if let Some((_, server)) = cpus {
        out.push(steer(
            format!("rps-cpu{server}"),
            format!("{dev}'s receive processing steered to CPU {server} (the server's) by RPS"),
            &cpu_mask(&[server]),
            None,
        ));
    }
    if !online.is_empty() {
        out.push(steer(
            "rfs".into(),
            format!(
                "RFS on {dev}: receive processing on the CPU where the receiving thread last ran"
            ),
            &cpu_mask(online),
            Some(FLOWS),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(device(None), Some("lo"));
        assert_eq!(device(Some("remote:127.0.0.1:7150")), Some("lo"));
        assert_eq!(device(Some("remote:[::1]:7150")), Some("lo"));
        assert_eq!(device(Some("remote:10.0.0.5:7150")), None);
        assert_eq!(device(Some("guest")), None);
        assert_eq!(device(Some("netns:veth")), None);
    }

    fn knobs(rps: Result<&str, &str>) -> BTreeMap<String, Result<String, String>> {
        let mut knobs = BTreeMap::new();
        let v = |s: Result<&str, &str>| s.map(str::to_string).map_err(str::to_string);
        knobs.insert("lo/queues/rx-0/rps_cpus".to_string(), v(rps));
        knobs.insert("lo/queues/rx-0/rps_flow_cnt".to_string(), v(Ok("0")));
        knobs.insert(FLOW_ENTRIES.to_string(), v(Ok("0")));
        knobs
    }

    /// RPS to the server's CPU and RFS when steering is off; steering off when it is on;
    /// a refused file says why instead.
    #[test]
    fn steering_options_follow_what_the_machine_has() {
        let o = options(&knobs(Ok("0")), "lo", Some((0, 1)), &[0, 1]).expect("options");
        let names: Vec<&str> = o.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["rps-cpu1", "rfs"]);
        assert!(o[0]
            .files
            .contains(&("lo/queues/rx-0/rps_cpus".to_string(), "2".to_string())));
        assert!(o[1]
            .files
            .contains(&(FLOW_ENTRIES.to_string(), "4096".to_string())));
        let o = options(&knobs(Ok("00000003")), "lo", Some((0, 1)), &[0, 1]).expect("options");
        assert_eq!(o.len(), 1);
        assert_eq!(o[0].name, "rps-off");
        let e = options(&knobs(Err("read-only here")), "lo", None, &[0, 1]).expect_err("refused");
        assert!(e.contains("read-only"), "{e}");
        let e = options(&BTreeMap::new(), "lo", None, &[0, 1]).expect_err("no queues");
        assert!(e.contains("no receive queues"), "{e}");
    }
}
