//! `--against tuned:PROFILE`: a tuned profile's run-time settings as one more
//! configuration, so the answer says whether `tune`'s pick meets the goal for less CPU
//! than the profile people apply wholesale. Read from the profile's own file (and the
//! profiles it includes); what cannot be applied at run time here is listed, not faked.
//!
//! tuned's INI files are read by hand: a few lines of `[section]` and `key=value`, where a
//! general INI crate would still leave tuned's own rules (includes, `force_latency`'s
//! `cstate.…` forms) to us.

use std::path::{Path, PathBuf};

use crate::candidate::{Candidate, NotHere, Setting};

/// Where tuned keeps profiles, users' first.
const DIRS: &[&str] = &["/etc/tuned", "/usr/lib/tuned", "/usr/lib/tuned/profiles"];

/// A profile's settings, includes resolved (the including profile's win).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profile {
    /// Its name (`network-latency`).
    pub name: String,
    /// The file it was read from.
    pub path: PathBuf,
    /// `[sysctl]`, in file order.
    pub sysctl: Vec<(String, String)>,
    /// `[cpu] force_latency`, as written.
    pub force_latency: Option<String>,
    /// Everything else, as `section.key = value`: applied by tuned, not by this search.
    pub other: Vec<String>,
}

/// The file of profile `name` (or `name` itself, when it is a path to a `tuned.conf`).
pub fn locate(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("tuned profile file {name} does not exist"))
        };
    }
    if name.is_empty() || name.contains("..") {
        return Err(format!("{name:?} is not a tuned profile name"));
    }
    DIRS.iter()
        .map(|d| Path::new(d).join(name).join("tuned.conf"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "tuned profile {name:?} is not installed (looked in {}): install tuned (apt install tuned), or give the file: --against tuned:/path/to/tuned.conf",
                DIRS.join(", ")
            )
        })
}

/// Reads profile `name` (a name or a path) with its includes.
pub fn load(name: &str) -> Result<Profile, String> {
    let path = locate(name)?;
    let mut p = Profile {
        name: profile_name(&path),
        path: path.clone(),
        ..Profile::default()
    };
    read_into(&path, &mut p, 0)?;
    Ok(p)
}

fn profile_name(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Reads `path` into `p`: its includes first, so its own settings override theirs.
fn read_into(path: &Path, p: &mut Profile, depth: u32) -> Result<(), String> {
    if depth > 8 {
        return Err(format!(
            "tuned profile {}: includes nest too deep (a loop?)",
            path.display()
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read tuned profile {}: {e}", path.display()))?;
    let entries = parse(&text);
    for (section, key, value) in &entries {
        if section == "main" && key == "include" {
            for inc in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                // A sibling profile first (where the including one was found), else tuned's
                // own directories.
                let sibling = path
                    .parent()
                    .and_then(Path::parent)
                    .map(|d| d.join(inc).join("tuned.conf"))
                    .filter(|f| f.is_file());
                let inc_path = match sibling {
                    Some(s) => s,
                    None => locate(inc)?,
                };
                read_into(&inc_path, p, depth + 1)?;
            }
        }
    }
    for (section, key, value) in entries {
        match (section.as_str(), key.as_str()) {
            ("main", _) => {}
            ("sysctl", _) => {
                p.sysctl.retain(|(k, _)| *k != key);
                p.sysctl.push((key, value));
            }
            ("cpu", "force_latency") => p.force_latency = Some(value),
            _ => {
                let entry = format!("{section}.{key} = {value}");
                p.other
                    .retain(|o| !o.starts_with(&format!("{section}.{key} =")));
                p.other.push(entry);
            }
        }
    }
    Ok(())
}

/// `(section, key, value)` of every setting line.
fn parse(text: &str) -> Vec<(String, String, String)> {
    let mut section = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(s) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = s.trim().to_string();
            continue;
        }
        if let Some((k, v)) = l.split_once('=') {
            out.push((section.clone(), k.trim().to_string(), v.trim().to_string()));
        }
    }
    out
}

/// `force_latency`'s value in µs on this machine: a number, or the first of its
/// `|`-separated forms that resolves (`cstate.id:N`, `cstate.name:NAME`, their `_no_zero`
/// variants skipping a state whose exit latency is 0) against `states`, the cpuidle states
/// as (name, exit latency µs) in index order.
pub fn force_latency_us(value: &str, states: &[(String, u64)]) -> Option<u32> {
    for form in value.split('|').map(str::trim) {
        if let Ok(n) = form.parse::<u32>() {
            return Some(n);
        }
        let (lat, no_zero) = if let Some(id) = form.strip_prefix("cstate.id_no_zero:") {
            (
                id.parse::<usize>()
                    .ok()
                    .and_then(|i| states.get(i))
                    .map(|s| s.1),
                true,
            )
        } else if let Some(id) = form.strip_prefix("cstate.id:") {
            (
                id.parse::<usize>()
                    .ok()
                    .and_then(|i| states.get(i))
                    .map(|s| s.1),
                false,
            )
        } else if let Some(n) = form.strip_prefix("cstate.name_no_zero:") {
            (states.iter().find(|s| s.0 == n).map(|s| s.1), true)
        } else if let Some(n) = form.strip_prefix("cstate.name:") {
            (states.iter().find(|s| s.0 == n).map(|s| s.1), false)
        } else {
            (None, false)
        };
        match lat {
            Some(0) if no_zero => continue,
            Some(l) => return u32::try_from(l).ok(),
            None => continue,
        }
    }
    None
}

/// This machine's cpuidle states (CPU 0's), as (name, exit latency µs).
pub fn cpuidle_states() -> Vec<(String, u64)> {
    let mut out = Vec::new();
    for i in 0.. {
        let d = PathBuf::from(format!("/sys/devices/system/cpu/cpu0/cpuidle/state{i}"));
        let (Ok(name), Ok(lat)) = (
            std::fs::read_to_string(d.join("name")),
            std::fs::read_to_string(d.join("latency")),
        ) else {
            break;
        };
        // An unreadable latency is not 0 (that would resolve `cstate.id:N` to a bound that
        // keeps every CPU polling): the states from here on are unknown.
        let Ok(lat) = lat.trim().parse() else { break };
        out.push((name.trim().to_string(), lat));
    }
    out
}

/// The profile as one configuration of what can be applied at run time here: sysctls that
/// `writable` accepts (its error says why not) and `force_latency` as a held
/// `cpu_dma_latency`; the rest is listed with why it was left out.
pub fn candidate(
    p: &Profile,
    writable: &dyn Fn(&str) -> Result<(), String>,
    states: &[(String, u64)],
    can_hold_latency: Result<(), String>,
) -> (Candidate, Vec<NotHere>) {
    let mut settings = Vec::new();
    let mut left = Vec::new();
    for (k, v) in &p.sysctl {
        if v.contains("${") {
            left.push(NotHere {
                what: format!("sysctl {k} = {v}"),
                why: "a tuned variable, resolved only by tuned".into(),
            });
            continue;
        }
        match writable(k) {
            Ok(()) => settings.push(Setting::Sysctl {
                name: k.clone(),
                value: v.clone(),
            }),
            Err(why) => left.push(NotHere {
                what: format!("sysctl {k} = {v}"),
                why,
            }),
        }
    }
    if let Some(f) = &p.force_latency {
        match (force_latency_us(f, states), &can_hold_latency) {
            (Some(us), Ok(())) => settings.push(Setting::DmaLatency { us }),
            (None, _) => left.push(NotHere {
                what: format!("cpu.force_latency = {f}"),
                why: "none of its forms resolves on this machine's cpuidle states".into(),
            }),
            (Some(_), Err(e)) => left.push(NotHere {
                what: format!("cpu.force_latency = {f}"),
                why: e.clone(),
            }),
        }
    }
    for o in &p.other {
        let why = if o.starts_with("bootloader.") {
            "boot-time: applies only after a reboot"
        } else {
            "not a setting this search applies (tuned's own plugin)"
        };
        left.push(NotHere {
            what: o.clone(),
            why: why.into(),
        });
    }
    let applied: Vec<String> = settings.iter().map(Setting::text).collect();
    let c = Candidate {
        name: format!("tuned-{}", p.name),
        family: crate::search::TUNED_FAMILY.into(),
        what: format!("tuned profile {}: {}", p.name, applied.join(", ")),
        settings,
    };
    (c, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A profile and the one it includes, written as tuned ships them: the including
    /// profile's values win, `force_latency`'s cstate form resolves on given states, and
    /// what is not applied is listed.
    #[test]
    fn a_profile_with_its_include_becomes_one_configuration() {
        let dir = std::env::temp_dir().join(format!("virtperf-tuned-{}", std::process::id()));
        for (name, text) in [
            (
                "latency-performance",
                "[main]\nsummary=x\n[cpu]\nforce_latency=cstate.id_no_zero:1|3\ngovernor=performance\n[sysctl]\nvm.swappiness=10\nnet.core.busy_read=5\n",
            ),
            (
                "network-latency",
                "[main]\ninclude=latency-performance\n[vm]\ntransparent_hugepages=never\n[sysctl]\nnet.core.busy_read=50\nkernel.numa_balancing=0\n[bootloader]\ncmdline_network_latency=skew_tick=1\n",
            ),
        ] {
            std::fs::create_dir_all(dir.join(name)).unwrap();
            std::fs::write(dir.join(name).join("tuned.conf"), text).unwrap();
        }
        let path = dir.join("network-latency/tuned.conf");
        let p = load(path.to_str().unwrap()).unwrap();
        assert_eq!(p.name, "network-latency");
        assert_eq!(
            p.sysctl,
            [
                ("vm.swappiness".to_string(), "10".to_string()),
                ("net.core.busy_read".to_string(), "50".to_string()),
                ("kernel.numa_balancing".to_string(), "0".to_string()),
            ]
        );
        let states = vec![("POLL".to_string(), 0), ("C1".to_string(), 2)];
        let writable = |k: &str| {
            if k == "kernel.numa_balancing" {
                Err("sysctl kernel.numa_balancing does not exist on this machine".to_string())
            } else {
                Ok(())
            }
        };
        let (c, left) = candidate(&p, &writable, &states, Ok(()));
        assert_eq!(c.settings.len(), 3, "{:?}", c.settings);
        assert!(c.settings.contains(&Setting::DmaLatency { us: 2 }));
        let what: Vec<&str> = left.iter().map(|l| l.what.as_str()).collect();
        assert!(
            what.iter().any(|w| w.contains("numa_balancing")),
            "{what:?}"
        );
        assert!(
            what.iter().any(|w| w.starts_with("bootloader.")),
            "{what:?}"
        );
        assert!(
            what.iter()
                .any(|w| w.starts_with("vm.transparent_hugepages")),
            "{what:?}"
        );
        assert!(
            what.iter().any(|w| w.starts_with("cpu.governor")),
            "{what:?}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(load("no-such-profile-here")
            .unwrap_err()
            .contains("not installed"));
    }

    #[test]
    fn force_latency_forms() {
        let states = vec![("POLL".to_string(), 0), ("haltpoll idle".to_string(), 1)];
        assert_eq!(force_latency_us("1", &states), Some(1));
        assert_eq!(force_latency_us("cstate.id_no_zero:0|3", &states), Some(3));
        assert_eq!(force_latency_us("cstate.id:0|3", &states), Some(0));
        assert_eq!(force_latency_us("cstate.id_no_zero:1|3", &states), Some(1));
        assert_eq!(
            force_latency_us("cstate.name:haltpoll idle", &states),
            Some(1)
        );
        assert_eq!(force_latency_us("cstate.id:9", &states), None);
    }
}
