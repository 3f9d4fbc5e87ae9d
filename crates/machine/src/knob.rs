//! Knobs: kernel settings applied before a configuration's trials and restored afterwards.
//!
//! Originals are read before anything is written, and a [`KnobGuard`] writes them back when
//! it is dropped, so restoration happens on success, on error and on SIGINT, SIGTERM or
//! SIGHUP (the runner stops between trials and returns normally). A SIGKILL cannot be
//! caught, so before a guard first writes a knob it records every original in a
//! [`Journal`] file in the state directory ([`crate::state`]); the journal is removed once
//! everything is restored. A journal whose process died is a *leftover*: `virtperf cleanup`
//! restores its knobs ([`restore_leftovers`]) and `virtperf run` refuses to start while one
//! is outstanding ([`check_leftovers`]), because it would otherwise read the leaked value as
//! the "original" and make the change permanent.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

pub use crate::journal::{
    check_leftovers, leaked, leftovers, restore_leftovers, Journal, JournalKnob, JournalRecord,
    Leftover, RestoreReport,
};

/// Where a knob lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KnobKind {
    /// /proc/sys/…
    Sysctl,
    /// /sys/module/MODULE/parameters/PARAM
    ModuleParam,
    /// /sys/devices/system/cpu/cpuN/cpuidle/stateM/disable
    CpuidleDisable,
    /// A network device's steering file under /sys/class/net/DEV/ (RPS, RFS, XPS, NAPI
    /// deferral), named `DEV/queues/rx-0/rps_cpus`.
    NetDev,
    /// The cpuidle governor in charge of every CPU
    /// (/sys/devices/system/cpu/cpuidle/current_governor), named `cpuidle.governor`: the
    /// guest halt-poll window is read by the haltpoll governor alone, so switching to it is
    /// what makes that window act where another governor runs.
    CpuidleGovernor,
}

/// The name of the [`KnobKind::CpuidleGovernor`] knob, as specs and the journal write it.
pub const GOVERNOR_KNOB: &str = "cpuidle.governor";

/// The files under /sys/class/net/DEV/ a [`KnobKind::NetDev`] knob may name: receive and
/// transmit steering per queue, and NAPI's interrupt deferral per device.
const NETDEV_QUEUE_FILES: &[(&str, &str)] = &[
    ("rx-", "rps_cpus"),
    ("rx-", "rps_flow_cnt"),
    ("tx-", "xps_cpus"),
];
const NETDEV_FILES: &[&str] = &["napi_defer_hard_irqs", "gro_flush_timeout"];

/// One kernel setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// Name as the user writes it: `net.core.busy_poll`, `haltpoll.guest_halt_poll_ns`.
    pub name: String,
    /// Sysctl or module parameter.
    pub kind: KnobKind,
    /// The file behind it.
    pub path: PathBuf,
}

// Names become paths: allow only what sysctl and module names contain, so a spec can never
// point a knob outside /proc/sys or /sys/module.
fn check_name(name: &str, what: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && !name.starts_with('.')
        && !name.ends_with('.')
        && !name.contains("..");
    if ok {
        Ok(())
    } else {
        Err(anyhow!(
            "invalid {what} name {name:?}: use dotted names like net.core.busy_poll"
        ))
    }
}

impl Knob {
    /// A sysctl by dotted name.
    pub fn sysctl(name: &str) -> Result<Knob> {
        check_name(name, "sysctl")?;
        Ok(Knob {
            name: name.to_string(),
            kind: KnobKind::Sysctl,
            path: PathBuf::from("/proc/sys").join(name.replace('.', "/")),
        })
    }

    /// A module parameter as `module.param`.
    pub fn module_param(name: &str) -> Result<Knob> {
        check_name(name, "module parameter")?;
        let (module, param) = name.split_once('.').ok_or_else(|| {
            anyhow!("invalid module parameter {name:?}: write it as module.param, e.g. haltpoll.guest_halt_poll_ns")
        })?;
        if param.contains('.') {
            bail!("invalid module parameter {name:?}: write it as module.param");
        }
        Ok(Knob {
            name: name.to_string(),
            kind: KnobKind::ModuleParam,
            path: PathBuf::from("/sys/module")
                .join(module)
                .join("parameters")
                .join(param),
        })
    }

    /// The `disable` switch of one cpuidle state on one CPU (`1` keeps the CPU out of that
    /// state). Named `cpuidle.cpuN.stateM.disable`.
    pub fn cpuidle_disable(cpu: u32, state: u32) -> Knob {
        Knob {
            name: format!("cpuidle.cpu{cpu}.state{state}.disable"),
            kind: KnobKind::CpuidleDisable,
            path: PathBuf::from(format!(
                "/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}/disable"
            )),
        }
    }

    /// A steering file of network device `dev`, as `DEV/queues/rx-N/rps_cpus`,
    /// `DEV/queues/rx-N/rps_flow_cnt`, `DEV/queues/tx-N/xps_cpus`,
    /// `DEV/napi_defer_hard_irqs` or `DEV/gro_flush_timeout`; nothing else, so a spec or a
    /// journal cannot name any other file under /sys.
    pub fn netdev(name: &str) -> Result<Knob> {
        let bad = || {
            anyhow!(
                "invalid network device file {name:?}: write DEV/queues/rx-N/rps_cpus, DEV/queues/rx-N/rps_flow_cnt, DEV/queues/tx-N/xps_cpus, DEV/napi_defer_hard_irqs or DEV/gro_flush_timeout"
            )
        };
        let (dev, rest) = name.split_once('/').ok_or_else(bad)?;
        // The kernel's own rule for interface names (dev_valid_name): 1-15 bytes, not "."
        // or "..", no '/', ':' or whitespace.
        let dev_ok = (1..16).contains(&dev.len())
            && dev != "."
            && dev != ".."
            && !dev
                .chars()
                .any(|c| c == ':' || c.is_whitespace() || c.is_control());
        let file_ok = NETDEV_FILES.contains(&rest)
            || rest
                .strip_prefix("queues/")
                .and_then(|q| q.split_once('/'))
                .is_some_and(|(queue, file)| {
                    NETDEV_QUEUE_FILES.iter().any(|(pre, f)| {
                        *f == file
                            && queue.strip_prefix(pre).is_some_and(|n| {
                                !n.is_empty()
                                    && n.len() < 6
                                    && n.bytes().all(|b| b.is_ascii_digit())
                            })
                    })
                });
        if !dev_ok || !file_ok {
            return Err(bad());
        }
        Ok(Knob {
            name: name.to_string(),
            kind: KnobKind::NetDev,
            path: PathBuf::from("/sys/class/net").join(dev).join(rest),
        })
    }

    /// Rebuilds a knob from its kind and name (what the journal stores), through the same
    /// checks as a spec's names, so a damaged or hostile journal cannot name any other file.
    pub fn from_name(kind: KnobKind, name: &str) -> Result<Knob> {
        match kind {
            KnobKind::Sysctl => Knob::sysctl(name),
            KnobKind::ModuleParam => Knob::module_param(name),
            KnobKind::NetDev => Knob::netdev(name),
            KnobKind::CpuidleGovernor if name == GOVERNOR_KNOB => Ok(Knob::cpuidle_governor()),
            KnobKind::CpuidleGovernor => {
                Err(anyhow!("invalid cpuidle governor switch name {name:?}"))
            }
            KnobKind::CpuidleDisable => {
                let bad = || anyhow!("invalid cpuidle switch name {name:?}");
                let rest = name.strip_prefix("cpuidle.cpu").ok_or_else(bad)?;
                let (cpu, rest) = rest.split_once(".state").ok_or_else(bad)?;
                let state = rest.strip_suffix(".disable").ok_or_else(bad)?;
                Ok(Knob::cpuidle_disable(
                    cpu.parse().map_err(|_| bad())?,
                    state.parse().map_err(|_| bad())?,
                ))
            }
        }
    }

    /// The cpuidle governor switch (`cpuidle.governor`); see [`KnobKind::CpuidleGovernor`].
    pub fn cpuidle_governor() -> Knob {
        Knob {
            name: GOVERNOR_KNOB.to_string(),
            kind: KnobKind::CpuidleGovernor,
            path: PathBuf::from("/sys/devices/system/cpu/cpuidle/current_governor"),
        }
    }

    /// One `disable` knob per online CPU for cpuidle state `state` (a config's
    /// `cpuidle_disable = [1]`), so the state is switched off machine-wide.
    pub fn cpuidle_disable_all(state: u32) -> Vec<Knob> {
        let cpus = virtperf_measure::events::cpu_numbers(Path::new("/sys/devices/system/cpu"))
            .unwrap_or_default();
        cpus.into_iter()
            .map(|c| Knob::cpuidle_disable(c, state))
            .collect()
    }

    /// Current value, whitespace-normalized (tabs in `tcp_rmem` become single spaces).
    pub fn read(&self) -> io::Result<String> {
        let v = fs::read_to_string(&self.path)?;
        Ok(v.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    /// Writes a value.
    pub fn write(&self, value: &str) -> io::Result<()> {
        fs::write(&self.path, value)
    }

    /// Checks the knob exists and can be written, by reading it and writing the same value
    /// back. Returns the original value, or a one-line reason.
    pub fn probe(&self) -> Result<String> {
        let what = match self.kind {
            KnobKind::Sysctl => "sysctl",
            KnobKind::ModuleParam => "module parameter",
            KnobKind::CpuidleDisable => "cpuidle switch",
            KnobKind::NetDev => "network device file",
            KnobKind::CpuidleGovernor => "cpuidle governor switch",
        };
        let original = self.read().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => anyhow!(
                "{what} {} {}",
                self.name,
                absent_where(&self.name, in_child_netns())
            ),
            _ => anyhow!("cannot read {what} {}: {e}", self.name),
        })?;
        self.write(&original).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => anyhow!(
                "{what} {} is read-only here ({}; run as root, or it is fixed at boot)",
                self.name,
                e
            ),
            _ => anyhow!("cannot write {what} {}: {e}", self.name),
        })?;
        Ok(original)
    }
}

/// Checks a governor's name as a spec gives it: the kernel's names are short words
/// (`menu`, `teo`, `ladder`, `haltpoll`; at most 15 bytes, CPUIDLE_NAME_LEN), and anything
/// else would only come back as EINVAL at the config's first trial.
pub fn check_governor(name: &str) -> Result<()> {
    let ok = (1..16).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(anyhow!(
            "invalid cpuidle governor {name:?}: write one of the names in /sys/devices/system/cpu/cpuidle/available_governors (menu, teo, ladder, haltpoll)"
        ))
    }
}

/// Knobs changed so far and their original values; restores them all when dropped.
#[derive(Debug, Default)]
pub struct KnobGuard {
    saved: Vec<(Knob, String)>,
    /// What we last wrote to each saved knob (to skip redundant writes).
    current: Vec<String>,
    /// Where the originals are recorded before the first write (None: not journaled, for
    /// callers that change nothing outside a test's own files).
    journal: Option<Journal>,
}

impl KnobGuard {
    /// A guard that records originals in `journal` before it changes anything.
    pub fn journaled(journal: Journal) -> KnobGuard {
        KnobGuard {
            saved: Vec::new(),
            current: Vec::new(),
            journal: Some(journal),
        }
    }

    /// Remembers a knob's original value without changing it.
    pub fn remember(&mut self, knob: &Knob, original: String) {
        if !self.saved.iter().any(|(k, _)| k == knob) {
            self.current.push(original.clone());
            self.saved.push((knob.clone(), original));
        }
    }

    /// Makes exactly `wanted` active: each listed knob gets its value, every other knob
    /// this guard knows goes back to its original. Knobs must have been remembered first.
    pub fn activate(&mut self, wanted: &[(Knob, String)]) -> Result<()> {
        for i in 0..self.saved.len() {
            let (knob, original) = &self.saved[i];
            let value = wanted
                .iter()
                .find(|(k, _)| k == knob)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| original.clone());
            if self.current[i] != value {
                if let Some(j) = &mut self.journal {
                    // Every original is on disk before the first knob changes; a journal
                    // that cannot be written stops the run rather than risk a leak.
                    j.record(&self.saved)?;
                }
                let knob = &self.saved[i].0;
                knob.write(&value)
                    .map_err(|e| anyhow!("cannot set {} to {value}: {e}", knob.name))?;
                self.current[i] = value;
            }
        }
        Ok(())
    }

    /// Writes every original back; returns the failures (one line each). The journal is
    /// removed when nothing is left changed, and keeps only what is when something is.
    pub fn restore_all(&mut self) -> Vec<String> {
        let mut errors = Vec::new();
        for (i, (knob, original)) in self.saved.iter().enumerate().rev() {
            if self.current[i] != *original {
                match knob.write(original) {
                    Ok(()) => self.current[i] = original.clone(),
                    Err(e) => errors.push(format!(
                        "could not restore {} to {original}: {e}",
                        knob.name
                    )),
                }
            }
        }
        if let Some(j) = &mut self.journal {
            let left: Vec<(Knob, String)> = self
                .saved
                .iter()
                .zip(&self.current)
                .filter(|((_, orig), cur)| orig != *cur)
                .map(|(kv, _)| kv.clone())
                .collect();
            if let Err(e) = j.settle(&left) {
                errors.push(e.to_string());
            }
        }
        errors
    }

    /// Knobs and originals, for the record.
    pub fn originals(&self) -> &[(Knob, String)] {
        &self.saved
    }
}

impl Drop for KnobGuard {
    fn drop(&mut self) {
        for e in self.restore_all() {
            eprintln!("virtperf: warning: {e}");
        }
    }
}

/// The initial network namespace's inode, fixed by the kernel since 3.8
/// (`PROC_NET_INIT_INO` in include/linux/proc_ns.h). Compared with instead of PID 1's
/// link, which a process in another namespace may not read (EACCES here even as root).
const INIT_NET_INO: u64 = 0xEFFF_FFF9;

/// Whether this process is in another network namespace than the initial one; None
/// where its own link cannot be read.
fn in_child_netns() -> Option<bool> {
    let own = fs::read_link("/proc/self/ns/net").ok()?;
    let ino: u64 = own
        .to_str()?
        .strip_prefix("net:[")?
        .strip_suffix(']')?
        .parse()
        .ok()?;
    Some(ino != INIT_NET_INO)
}

/// Where a missing knob is missing, in words: a `net.` sysctl in a child network
/// namespace may exist in the initial one only (`net.core.busy_poll` does), so "on this
/// machine" would be wrong there.
fn absent_where(name: &str, child_netns: Option<bool>) -> String {
    match child_netns {
        Some(true) if name.starts_with("net.") => "does not exist in this network namespace (the kernel may keep it in the initial namespace only: run outside the namespace to change it)".into(),
        _ => "does not exist on this machine".into(),
    }
}

#[cfg(test)]
mod tests {
    /// A `net.` sysctl missing in a child namespace is said to be missing there, not on
    /// the machine; anything else, or where the namespace is unknown, on the machine (the
    /// namespace itself is tested for real by the command line's experiment tests).
    #[test]
    fn a_missing_net_sysctl_in_a_namespace_says_where() {
        assert!(super::absent_where("net.core.busy_poll", Some(true)).contains("network namespace"));
        for (name, child) in [
            ("net.core.busy_poll", Some(false)),
            ("net.core.busy_poll", None),
            ("kernel.numa_balancing", Some(true)),
        ] {
            assert_eq!(
                super::absent_where(name, child),
                "does not exist on this machine",
                "{name} {child:?}"
            );
        }
    }

    use super::*;

    #[test]
    fn names_map_to_paths_and_cannot_escape() {
        assert_eq!(
            Knob::sysctl("net.core.busy_poll").unwrap().path,
            PathBuf::from("/proc/sys/net/core/busy_poll")
        );
        assert_eq!(
            Knob::module_param("haltpoll.guest_halt_poll_ns")
                .unwrap()
                .path,
            PathBuf::from("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
        );
        for bad in ["../etc", "a/b", "", ".x", "x.", "a..b", "net core"] {
            assert!(Knob::sysctl(bad).is_err(), "{bad}");
        }
        assert!(Knob::module_param("nodot").is_err());
        assert!(Knob::module_param("a.b.c").is_err());
    }

    #[test]
    fn missing_knob_is_reported() {
        let k = Knob::sysctl("net.core.no_such_knob_here").unwrap();
        assert!(k
            .probe()
            .unwrap_err()
            .to_string()
            .contains("does not exist"));
    }

    /// Uses a real file standing in for a knob (the guard only cares about the path).
    #[test]
    fn guard_applies_switches_and_restores_on_drop() {
        let dir = std::env::temp_dir().join(format!("vp-knob-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let mk = |n: &str, v: &str| {
            let p = dir.join(n);
            fs::write(&p, v).unwrap();
            Knob {
                name: n.into(),
                kind: KnobKind::Sysctl,
                path: p,
            }
        };
        let a = mk("a", "1\n");
        let b = mk("b", "x y\tz\n");
        {
            let mut g = KnobGuard::default();
            g.remember(&a, a.probe().unwrap());
            g.remember(&b, b.probe().unwrap());
            assert_eq!(g.originals()[1].1, "x y z");
            g.activate(&[(a.clone(), "5".into())]).unwrap();
            assert_eq!(a.read().unwrap(), "5");
            g.activate(&[(b.clone(), "7".into())]).unwrap();
            assert_eq!(
                a.read().unwrap(),
                "1",
                "a back to original when config B is active"
            );
            assert_eq!(b.read().unwrap(), "7");
        }
        assert_eq!(a.read().unwrap(), "1");
        assert_eq!(b.read().unwrap(), "x y z");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn journal_names_rebuild_only_knob_paths() {
        let k = Knob::from_name(KnobKind::CpuidleDisable, "cpuidle.cpu3.state1.disable").unwrap();
        assert_eq!(k, Knob::cpuidle_disable(3, 1));
        assert!(Knob::from_name(KnobKind::CpuidleDisable, "cpuidle.cpu3/../x").is_err());
        let g = Knob::from_name(KnobKind::CpuidleGovernor, GOVERNOR_KNOB).unwrap();
        assert_eq!(g, Knob::cpuidle_governor());
        assert!(Knob::from_name(KnobKind::CpuidleGovernor, "cpuidle.cpu0.governor").is_err());
        let k = Knob::from_name(KnobKind::NetDev, "lo/queues/rx-0/rps_cpus").unwrap();
        assert_eq!(
            k.path,
            PathBuf::from("/sys/class/net/lo/queues/rx-0/rps_cpus")
        );
        assert!(Knob::netdev("eth0.100/gro_flush_timeout").is_ok());
        for bad in [
            "lo/../../../etc/passwd",
            "../queues/rx-0/rps_cpus",
            "lo/queues/rx-0/../../mtu",
            "lo/queues/tx-0/rps_cpus",
            "lo/queues/rx-/rps_cpus",
            "lo/mtu",
            "lo",
            "a-name-over-15-chars/gro_flush_timeout",
            "/gro_flush_timeout",
        ] {
            assert!(Knob::from_name(KnobKind::NetDev, bad).is_err(), "{bad}");
        }
        assert!(Knob::from_name(KnobKind::Sysctl, "../../etc/passwd").is_err());
    }

    /// A governor's name is a short lowercase word; a path, a space or an empty value is
    /// refused before it could reach the sysfs file.
    #[test]
    fn governor_names_are_words() {
        for good in ["menu", "teo", "ladder", "haltpoll"] {
            assert!(check_governor(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Menu",
            "menu\n",
            "../menu",
            "halt poll",
            "a-governor-name-too-long",
        ] {
            assert!(check_governor(bad).is_err(), "{bad:?}");
        }
    }
}
