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

/// The most a profile file may hold: tuned's own are a few KiB.
pub const MAX_PROFILE_BYTES: u64 = 256 * 1024;
/// The most profile files one profile may read, includes and theirs counted (tuned's
/// deepest chains are three or four).
pub const MAX_PROFILE_FILES: usize = 32;

/// The file of profile `name` (or `name` itself, when it is a path to a `tuned.conf`): a
/// regular file under [`MAX_PROFILE_BYTES`], not a kernel pseudo-file (`/proc`, `/sys`,
/// `/dev`: `/proc/self/environ` reads as a regular file and holds secrets).
pub fn locate(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return checked_file(&p, name);
    }
    if name.is_empty() || name.contains("..") {
        return Err(format!("{name:?} is not a tuned profile name"));
    }
    let found = DIRS
        .iter()
        .map(|d| Path::new(d).join(name).join("tuned.conf"))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "tuned profile {name:?} is not installed (looked in {}): install tuned (apt install tuned), or give the file: --against tuned:/path/to/tuned.conf",
                DIRS.join(", ")
            )
        })?;
    checked_file(&found, name)
}

/// `p` when it is a regular file of a profile's size outside the kernel's pseudo-file
/// systems; else why not, naming `as_given`.
fn checked_file(p: &Path, as_given: &str) -> Result<PathBuf, String> {
    let real = p
        .canonicalize()
        .map_err(|e| format!("tuned profile file {as_given} cannot be opened ({e})"))?;
    if ["/proc", "/sys", "/dev"]
        .iter()
        .any(|d| real.starts_with(d))
    {
        return Err(format!(
            "tuned profile file {as_given} is a kernel pseudo-file ({}), not a profile",
            real.display()
        ));
    }
    let meta = std::fs::metadata(&real)
        .map_err(|e| format!("tuned profile file {as_given} cannot be opened ({e})"))?;
    if !meta.is_file() {
        return Err(format!(
            "tuned profile file {as_given} is not a regular file (a directory or a device): give a tuned.conf"
        ));
    }
    if meta.len() > MAX_PROFILE_BYTES {
        return Err(format!(
            "tuned profile file {as_given} is {} bytes: a profile is a few KiB (at most {MAX_PROFILE_BYTES})",
            meta.len()
        ));
    }
    Ok(real)
}

/// Reads profile `name` (a name or a path) with its includes.
pub fn load(name: &str) -> Result<Profile, String> {
    let path = locate(name)?;
    let mut p = Profile {
        name: profile_name(&path),
        path: path.clone(),
        ..Profile::default()
    };
    let mut read = Vec::new();
    read_into(&path, &mut p, 0, &mut read)?;
    Ok(p)
}

fn profile_name(path: &Path) -> String {
    path.parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Reads `path` into `p`: its includes first, so its own settings override theirs. Each
/// file is read once (`read` holds those already read: a diamond of includes, each
/// profile including the next thirty times, reads each once, not 30⁸ times), and at most
/// [`MAX_PROFILE_FILES`] in all.
fn read_into(
    path: &Path,
    p: &mut Profile,
    depth: u32,
    read: &mut Vec<PathBuf>,
) -> Result<(), String> {
    if depth > 8 {
        return Err(format!(
            "tuned profile {}: includes nest too deep (a loop?)",
            path.display()
        ));
    }
    if read.iter().any(|r| r == path) {
        return Ok(());
    }
    if read.len() >= MAX_PROFILE_FILES {
        return Err(format!(
            "tuned profile {}: more than {MAX_PROFILE_FILES} profile files included",
            p.path.display()
        ));
    }
    read.push(path.to_path_buf());
    let entries = parse(&read_capped(path)?).map_err(|line| {
        format!(
            "{} is not a tuned profile (line {line}: neither [section] nor key=value in a section)",
            path.display()
        )
    })?;
    for (section, key, value) in &entries {
        if section == "main" && key == "include" {
            for inc in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if inc.contains('/') || inc.contains("..") {
                    return Err(format!(
                        "tuned profile {}: include={inc} is not a profile name (tuned includes profiles by name)",
                        path.display()
                    ));
                }
                // A sibling profile first (where the including one was found), else tuned's
                // own directories.
                let sibling = path
                    .parent()
                    .and_then(Path::parent)
                    .map(|d| d.join(inc).join("tuned.conf"))
                    .filter(|f| f.is_file());
                let inc_path = match sibling {
                    Some(s) => checked_file(&s, inc)?,
                    None => locate(inc)?,
                };
                read_into(&inc_path, p, depth + 1, read)?;
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
                // Named only: a value of a section this search does not apply is not
                // echoed (it is nothing the answer needs, and could be anything).
                let entry = format!("{section}.{key}");
                p.other.retain(|o| *o != entry);
                p.other.push(entry);
            }
        }
    }
    Ok(())
}

/// The file's text, read no further than [`MAX_PROFILE_BYTES`] (a file that grew since
/// it was checked is refused, not read whole).
fn read_capped(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let f = std::fs::File::open(path)
        .map_err(|e| format!("cannot read tuned profile {}: {e}", path.display()))?;
    let mut buf = Vec::new();
    f.take(MAX_PROFILE_BYTES + 1)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read tuned profile {}: {e}", path.display()))?;
    if buf.len() as u64 > MAX_PROFILE_BYTES {
        return Err(format!(
            "tuned profile {} is over {MAX_PROFILE_BYTES} bytes: not a profile",
            path.display()
        ));
    }
    String::from_utf8(buf)
        .map_err(|_| format!("{} is not a tuned profile (not text)", path.display()))
}

/// `(section, key, value)` of every setting line; `Err(line number)` at the first line
/// that is neither a comment, a `[section]` nor `key=value` inside a section (a file that
/// is no profile: an environment block, a password file).
fn parse(text: &str) -> Result<Vec<(String, String, String)>, usize> {
    let mut section: Option<String> = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if l.contains('\0') {
            return Err(i + 1);
        }
        if let Some(s) = l.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
            section = Some(s.trim().to_string());
            continue;
        }
        match (&section, l.split_once('=')) {
            (Some(sec), Some((k, v))) if !k.trim().is_empty() => {
                out.push((sec.clone(), k.trim().to_string(), v.trim().to_string()));
            }
            _ => return Err(i + 1),
        }
    }
    Ok(out)
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

/// Whether `value` has the shape the kernel takes for a sysctl that reads `current` now:
/// where that is whitespace-separated integers, the same count of integers (a value the
/// kernel would refuse at the first trial is found here, at planning time); anything
/// else is left to the kernel.
pub fn value_fits(current: &str, value: &str) -> Result<(), String> {
    let ints = |s: &str| -> Option<usize> {
        let f: Vec<&str> = s.split_whitespace().collect();
        (!f.is_empty() && f.iter().all(|x| x.parse::<i64>().is_ok())).then_some(f.len())
    };
    match (ints(current), ints(value)) {
        (Some(n), Some(m)) if n == m => Ok(()),
        (Some(n), _) => Err(format!(
            "the kernel takes {n} integer{} here (now {:?}): {value:?} would be refused",
            if n == 1 { "" } else { "s" },
            current.trim()
        )),
        (None, _) => Ok(()),
    }
}

/// The profile as one configuration of what can be applied at run time here: sysctls that
/// `writable` accepts with their value (its error says why not) and `force_latency` as a
/// held `cpu_dma_latency`; the rest is listed with why it was left out.
pub fn candidate(
    p: &Profile,
    writable: &dyn Fn(&str, &str) -> Result<(), String>,
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
        match writable(k, v) {
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
        let writable = |k: &str, _: &str| {
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

    /// Issue 53: a diamond of includes (each profile including the next thirty times)
    /// reads each file once; an include by path, a kernel pseudo-file, a file that is no
    /// profile and one over the size cap are refused, and no value of a section this
    /// search does not apply is kept to be echoed.
    #[test]
    fn hostile_profiles_are_refused_or_read_once() {
        let dir = std::env::temp_dir().join(format!("virtperf-tuned-h-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        for i in 0..9 {
            let next = if i < 8 {
                format!("include={}\n", vec![format!("diam{}", i + 1); 30].join(","))
            } else {
                String::new()
            };
            std::fs::create_dir_all(dir.join(format!("diam{i}"))).unwrap();
            std::fs::write(
                dir.join(format!("diam{i}/tuned.conf")),
                format!(
                    "[main]\n{next}[sysctl]\nnet.core.busy_read={i}\n[secret]\ntoken=SUPERSECRET\n"
                ),
            )
            .unwrap();
        }
        let t0 = std::time::Instant::now();
        let p = load(dir.join("diam0/tuned.conf").to_str().unwrap()).expect("loads");
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(
            p.sysctl,
            [("net.core.busy_read".to_string(), "0".to_string())]
        );
        assert_eq!(p.other, ["secret.token"], "no value kept");
        let bad = |text: &str| {
            std::fs::create_dir_all(dir.join("bad")).unwrap();
            std::fs::write(dir.join("bad/tuned.conf"), text).unwrap();
            load(dir.join("bad/tuned.conf").to_str().unwrap()).expect_err(text)
        };
        assert!(bad("[main]\ninclude=/etc/shadow\n").contains("not a profile name"));
        assert!(bad("VIRTPERF_TOKEN=SUPERSECRET\0HOME=/root\n").contains("not a tuned profile"));
        assert!(bad("just words\n").contains("line 1"));
        for pseudo in ["/proc/self/environ", "/dev/null", "/etc"] {
            let e = load(pseudo).expect_err(pseudo);
            assert!(
                !e.contains("SUPERSECRET") && !e.contains("does not exist"),
                "{pseudo}: {e}"
            );
        }
        let big = std::fs::File::create(dir.join("bad/tuned.conf")).unwrap();
        big.set_len(2 << 30).unwrap();
        let e = load(dir.join("bad/tuned.conf").to_str().unwrap()).expect_err("2 GiB");
        assert!(e.contains("bytes"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A value the kernel would refuse is found before any trial.
    #[test]
    fn values_are_checked_against_the_kernels_shape() {
        assert!(value_fits("50", "0").is_ok());
        assert!(value_fits("4096 87380 6291456", "4096 131072 16777216").is_ok());
        assert!(value_fits("50", "abc")
            .unwrap_err()
            .contains("1 integer here"));
        assert!(value_fits("4096 87380 6291456", "1 2").is_err());
        assert!(value_fits("cubic", "bbr").is_ok());
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
