//! `--emit`: the winning configuration as something a user installs on purpose — a
//! sysctl.d snippet, a virtperf spec that re-measures it, or a tuned profile. Nothing
//! persists unless asked; each file says how to undo it.

use std::str::FromStr;

use crate::candidate::{Machine, Setting, Target};
use crate::config::{self, Configuration};
use crate::goal::Goal;

/// What `--emit` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `/etc/sysctl.d` snippet (settings that are not sysctls as comments saying where
    /// they go).
    SysctlD,
    /// A virtperf spec: the baseline and the winner, to measure again (`virtperf run`).
    Spec,
    /// A tuned profile (`tuned.conf`).
    Tuned,
}

impl FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "sysctl.d" | "sysctl" => Ok(Format::SysctlD),
            "spec" => Ok(Format::Spec),
            "tuned" => Ok(Format::Tuned),
            _ => Err(format!("--emit takes sysctl.d, spec or tuned (got {s:?})")),
        }
    }
}

/// The file `f` for `winner`, which met `goals` for `target`; `m` is the machine as it
/// was before the search (for the values an undo puts back).
pub fn emit(
    f: Format,
    winner: &Configuration,
    target: &Target,
    goals: &[Goal],
    m: &Machine,
) -> String {
    let goals_text = goals.iter().map(Goal::words).collect::<Vec<_>>().join(", ");
    let head = format!(
        "virtperf tune: {} met {goals_text} for {} ({})",
        winner.name,
        target.kind,
        winner.what()
    );
    match f {
        Format::SysctlD => sysctl_d(&head, winner, m),
        Format::Tuned => tuned(&head, winner, m),
        Format::Spec => {
            let mut s = format!("# {head}\n# Measure it again: virtperf run THIS_FILE\n");
            s.push_str(&config::spec_text(
                &format!("tune's pick for {goals_text}"),
                target,
                "3s",
                5,
                // The baseline itself may be the pick: measured once, not named twice.
                &if winner.parts.is_empty() {
                    vec![Configuration::baseline()]
                } else {
                    vec![Configuration::baseline(), winner.clone()]
                },
            ));
            s
        }
    }
}

/// The value a knob had before the search, for undo lines.
fn was(m: &Machine, name: &str) -> String {
    match m.knobs.get(name) {
        Some(Ok(v)) => v.clone(),
        _ => "its previous value".into(),
    }
}

/// The file that switches the cpuidle governor.
const GOVERNOR_FILE: &str = "/sys/devices/system/cpu/cpuidle/current_governor";

/// The governor before the search, for undo lines.
fn governor_was(m: &Machine) -> String {
    m.cpuidle_governor
        .clone()
        .unwrap_or_else(|| "its previous value".into())
}

fn sysctl_d(head: &str, w: &Configuration, m: &Machine) -> String {
    let mut s = format!(
        "# {head}\n# Install: cp THIS_FILE /etc/sysctl.d/90-virtperf-tune.conf && sysctl --system\n# Undo: rm /etc/sysctl.d/90-virtperf-tune.conf, then set each value back (below) or reboot\n"
    );
    let mut notes = Vec::new();
    let mut needs = Vec::new();
    for st in w.settings() {
        match st {
            Setting::Sysctl { name, value } => {
                s.push_str(&format!("# was {}\n{name} = {value}\n", was(m, name)));
            }
            Setting::Module { name, value } => {
                let (module, param) = name.split_once('.').unwrap_or((name, ""));
                notes.push(format!(
                    "module parameter {name} = {value} (was {}): not a sysctl; at run time `echo {value} > /sys/module/{module}/parameters/{param}`, at boot `{name}={value}` on the kernel command line",
                    was(m, name)
                ));
                needs.extend(reader_note(name, w));
            }
            Setting::NetDev { name, value } => notes.push(format!(
                "/sys/class/net/{name} = {value} (was {}): not a sysctl; at run time `echo {value} > /sys/class/net/{name}`, at boot a udev rule or tuned's [sysfs]",
                was(m, name)
            )),
            Setting::Governor { name } => notes.push(format!(
                "cpuidle governor {name} (was {}): not a sysctl; at run time `echo {name} > {GOVERNOR_FILE}`, at boot `cpuidle.governor={name}` on the kernel command line",
                governor_was(m)
            )),
            Setting::DmaLatency { us } => notes.push(format!(
                "cpu_dma_latency {us} µs: held only while a process keeps /dev/cpu_dma_latency open (tuned's force_latency does)"
            )),
            Setting::Wait { mode } => notes.push(format!(
                "receivers wait {mode}: the application's own choice (busy-polling its sockets), not a system setting"
            )),
            Setting::Cpus { client, server } => notes.push(format!(
                "both ends on CPUs {client},{server}: pin the application's threads (taskset, cgroups)"
            )),
            Setting::SockBuf { bytes } => notes.push(format!(
                "SO_SNDBUF/SO_RCVBUF = {bytes} on the data sockets: the application's setsockopt (net.core.rmem_max/wmem_max must allow it; net.ipv4.tcp_rmem's maximum bounds autotuning instead)"
            )),
            Setting::GuestCmdline { .. } | Setting::GuestModule { .. } => notes.push(format!(
                "{}: inside the guest (its kernel command line or its own sysctl.d/modprobe.d)",
                st.text()
            )),
            Setting::GuestVirtio { name, value } => notes.push(format!(
                "the guest NIC's {name}={value}: in the VM's definition (QEMU `-device virtio-net-pci,{name}={value}`; libvirt's <driver> element of the interface)"
            )),
        }
    }
    for n in notes {
        s.push_str(&format!("# Not set by this file: {n}\n"));
    }
    for n in needs {
        s.push_str(&format!("# Needs: {n}\n"));
    }
    s
}

/// What a written setting needs besides itself on the machines it is copied to: the guest
/// halt-poll window acts only under the haltpoll cpuidle governor (under `menu` 200 µs of
/// it changed nothing measured; bench/RESULTS.md), which tune found in charge here.
/// A winner that switches to the governor itself carries its reader with it.
fn reader_note(name: &str, w: &Configuration) -> Option<String> {
    let sets_governor = w
        .settings()
        .any(|s| matches!(s, Setting::Governor { name } if name == "haltpoll"));
    (name == "haltpoll.guest_halt_poll_ns" && !sets_governor).then(|| {
        "haltpoll.guest_halt_poll_ns acts only where the cpuidle governor is haltpoll, as it was when measured: check /sys/devices/system/cpu/cpuidle/current_governor on each machine".to_string()
    })
}

fn tuned(head: &str, w: &Configuration, m: &Machine) -> String {
    let mut sysctl = Vec::new();
    let mut sysfs = Vec::new();
    let mut cpu = Vec::new();
    let mut notes = Vec::new();
    let mut needs = Vec::new();
    for st in w.settings() {
        match st {
            Setting::Sysctl { name, value } => {
                sysctl.push(format!("# was {}\n{name}={value}", was(m, name)))
            }
            Setting::Module { name, value } => {
                let (module, param) = name.split_once('.').unwrap_or((name, ""));
                sysfs.push(format!(
                    "# was {}\n/sys/module/{module}/parameters/{param}={value}",
                    was(m, name)
                ));
                needs.extend(reader_note(name, w));
            }
            Setting::NetDev { name, value } => sysfs.push(format!(
                "# was {}\n/sys/class/net/{name}={value}",
                was(m, name)
            )),
            Setting::DmaLatency { us } => cpu.push(format!("force_latency={us}")),
            Setting::Governor { name } => {
                sysfs.push(format!("# was {}\n{GOVERNOR_FILE}={name}", governor_was(m)))
            }
            Setting::Wait { .. }
            | Setting::Cpus { .. }
            | Setting::SockBuf { .. }
            | Setting::GuestCmdline { .. }
            | Setting::GuestModule { .. }
            | Setting::GuestVirtio { .. } => notes.push(st.text()),
        }
    }
    let mut s = format!(
        "# {head}\n# Install: mkdir -p /etc/tuned/virtperf-tune && cp THIS_FILE /etc/tuned/virtperf-tune/tuned.conf && tuned-adm profile virtperf-tune\n# Undo: tuned-adm profile PREVIOUS (`tuned-adm active` names it before you switch) and rm -r /etc/tuned/virtperf-tune\n"
    );
    for n in notes {
        s.push_str(&format!(
            "# Not set by this profile (the application's or the guest's): {n}\n"
        ));
    }
    for n in needs {
        s.push_str(&format!("# Needs: {n}\n"));
    }
    s.push_str(&format!("\n[main]\nsummary={}\n", w.what()));
    for (section, lines) in [("sysctl", sysctl), ("sysfs", sysfs), ("cpu", cpu)] {
        if !lines.is_empty() {
            s.push_str(&format!("\n[{section}]\n{}\n", lines.join("\n")));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::Candidate;
    use std::collections::BTreeMap;

    fn winner() -> Configuration {
        Configuration::of(vec![
            Candidate {
                name: "busy-poll-50us".into(),
                family: "busy_poll".into(),
                what: "busy polling".into(),
                settings: vec![Setting::Sysctl {
                    name: "net.core.busy_read".into(),
                    value: "50".into(),
                }],
            },
            Candidate {
                name: "halt-poll-200us".into(),
                family: "halt".into(),
                what: "halt polling".into(),
                settings: vec![
                    Setting::Module {
                        name: "haltpoll.guest_halt_poll_ns".into(),
                        value: "200000".into(),
                    },
                    Setting::DmaLatency { us: 0 },
                ],
            },
            Candidate {
                name: "rps-cpu1".into(),
                family: "rps".into(),
                what: "RPS".into(),
                settings: vec![Setting::NetDev {
                    name: "lo/queues/rx-0/rps_cpus".into(),
                    value: "2".into(),
                }],
            },
        ])
    }

    fn machine() -> Machine {
        let mut knobs = BTreeMap::new();
        knobs.insert("net.core.busy_read".to_string(), Ok("0".to_string()));
        Machine {
            knobs,
            dma_latency: Ok(2_000_000_000),
            cpuidle_driver: None,
            cpuidle_governor: None,
            governors: Ok(vec!["menu".into(), "haltpoll".into()]),
            online_cpus: vec![0, 1],
            vhost_net: Ok(()),
        }
    }

    use crate::candidate::tests::rr as target;

    #[test]
    fn each_format_carries_the_settings_and_how_to_undo_them() {
        let goals = vec![Goal::parse("p50<=40us").unwrap()];
        let s = emit(Format::SysctlD, &winner(), &target(), &goals, &machine());
        assert!(
            s.contains("net.core.busy_read = 50\n") && s.contains("# was 0"),
            "{s}"
        );
        assert!(
            s.contains("Undo:") && s.contains("guest_halt_poll_ns"),
            "{s}"
        );
        let t = emit(Format::Tuned, &winner(), &target(), &goals, &machine());
        assert!(
            t.contains("[sysctl]\n# was 0\nnet.core.busy_read=50"),
            "{t}"
        );
        assert!(
            t.contains("/sys/module/haltpoll/parameters/guest_halt_poll_ns=200000"),
            "{t}"
        );
        assert!(t.contains("[cpu]\nforce_latency=0"), "{t}");
        // The window needs its reader on the machines the file is copied to.
        for text in [&s, &t] {
            assert!(
                text.contains("# Needs: haltpoll.guest_halt_poll_ns acts only where the cpuidle governor is haltpoll"),
                "{text}"
            );
        }
        assert!(
            t.contains("/sys/class/net/lo/queues/rx-0/rps_cpus=2"),
            "{t}"
        );
        assert!(
            s.contains("echo 2 > /sys/class/net/lo/queues/rx-0/rps_cpus"),
            "{s}"
        );
        let sp = emit(Format::Spec, &winner(), &target(), &goals, &machine());
        assert!(
            sp.contains("name = \"busy-poll-50us+halt-poll-200us+rps-cpu1\""),
            "{sp}"
        );
        assert!(sp.contains("cpu_dma_latency = 0"), "{sp}");
        assert!(
            sp.contains("netdev = { \"lo/queues/rx-0/rps_cpus\" = \"2\" }"),
            "{sp}"
        );
        assert!("yaml".parse::<Format>().is_err());
    }

    /// A pick that switches the governor writes the switch (sysfs at run time, the kernel
    /// command line at boot, tuned's [sysfs]) with the governor it replaces, and needs no
    /// note that the window wants a governor it brings itself.
    #[test]
    fn a_governor_switch_is_written_with_its_undo() {
        let w = Configuration::of(vec![Candidate {
            name: "haltpoll-gov-200us".into(),
            family: "haltpoll.guest_halt_poll_ns".into(),
            what: "haltpoll governor".into(),
            settings: vec![
                Setting::Governor {
                    name: "haltpoll".into(),
                },
                Setting::Module {
                    name: "haltpoll.guest_halt_poll_ns".into(),
                    value: "200000".into(),
                },
            ],
        }]);
        let m = Machine {
            cpuidle_governor: Some("menu".into()),
            ..machine()
        };
        let goals = vec![Goal::parse("p50<=40us").unwrap()];
        let s = emit(Format::SysctlD, &w, &target(), &goals, &m);
        assert!(
            s.contains("cpuidle governor haltpoll (was menu)")
                && s.contains("cpuidle.governor=haltpoll"),
            "{s}"
        );
        let t = emit(Format::Tuned, &w, &target(), &goals, &m);
        assert!(
            t.contains("# was menu\n/sys/devices/system/cpu/cpuidle/current_governor=haltpoll"),
            "{t}"
        );
        for text in [&s, &t] {
            assert!(!text.contains("# Needs:"), "{text}");
        }
        let sp = emit(Format::Spec, &w, &target(), &goals, &m);
        assert!(sp.contains("cpuidle_governor = \"haltpoll\""), "{sp}");
    }
}
