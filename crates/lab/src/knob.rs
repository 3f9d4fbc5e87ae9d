//! Knobs: kernel settings applied before a configuration's trials and restored afterwards.
//!
//! Originals are read before anything is written, and a [`KnobGuard`] writes them back when
//! it is dropped, so restoration happens on success, on error and on Ctrl-C (the runner
//! stops between trials and returns normally). Only a SIGKILL can leave a knob changed; the
//! originals are also recorded in the results store for that case.

use std::fs;
use std::io;
use std::path::PathBuf;

/// Where a knob lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KnobKind {
    /// /proc/sys/…
    Sysctl,
    /// /sys/module/MODULE/parameters/PARAM
    ModuleParam,
    /// /sys/devices/system/cpu/cpuN/cpuidle/stateM/disable
    CpuidleDisable,
}

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
fn check_name(name: &str, what: &str) -> Result<(), String> {
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
        Err(format!(
            "invalid {what} name {name:?}: use dotted names like net.core.busy_poll"
        ))
    }
}

impl Knob {
    /// A sysctl by dotted name.
    pub fn sysctl(name: &str) -> Result<Knob, String> {
        check_name(name, "sysctl")?;
        Ok(Knob {
            name: name.to_string(),
            kind: KnobKind::Sysctl,
            path: PathBuf::from("/proc/sys").join(name.replace('.', "/")),
        })
    }

    /// A module parameter as `module.param`.
    pub fn module_param(name: &str) -> Result<Knob, String> {
        check_name(name, "module parameter")?;
        let (module, param) = name.split_once('.').ok_or_else(|| {
            format!("invalid module parameter {name:?}: write it as module.param, e.g. haltpoll.guest_halt_poll_ns")
        })?;
        if param.contains('.') {
            return Err(format!(
                "invalid module parameter {name:?}: write it as module.param"
            ));
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

    /// One `disable` knob per online CPU for cpuidle state `state` (a config's
    /// `cpuidle_disable = [1]`), so the state is switched off machine-wide.
    pub fn cpuidle_disable_all(state: u32) -> Vec<Knob> {
        let cpus = fs::read_dir("/sys/devices/system/cpu")
            .map(|d| {
                let mut v: Vec<u32> = d
                    .flatten()
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()
                            .and_then(|n| n.strip_prefix("cpu"))
                            .and_then(|n| n.parse().ok())
                    })
                    .collect();
                v.sort_unstable();
                v
            })
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
    pub fn probe(&self) -> Result<String, String> {
        let what = match self.kind {
            KnobKind::Sysctl => "sysctl",
            KnobKind::ModuleParam => "module parameter",
            KnobKind::CpuidleDisable => "cpuidle switch",
        };
        let original = self.read().map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => {
                format!("{what} {} does not exist on this machine", self.name)
            }
            _ => format!("cannot read {what} {}: {e}", self.name),
        })?;
        self.write(&original).map_err(|e| match e.kind() {
            io::ErrorKind::PermissionDenied => format!(
                "{what} {} is read-only here ({}; run as root, or it is fixed at boot)",
                self.name, e
            ),
            _ => format!("cannot write {what} {}: {e}", self.name),
        })?;
        Ok(original)
    }
}

/// Knobs changed so far and their original values; restores them all when dropped.
#[derive(Debug, Default)]
pub struct KnobGuard {
    saved: Vec<(Knob, String)>,
    /// What we last wrote to each saved knob (to skip redundant writes).
    current: Vec<String>,
}

impl KnobGuard {
    /// Remembers a knob's original value without changing it.
    pub fn remember(&mut self, knob: &Knob, original: String) {
        if !self.saved.iter().any(|(k, _)| k == knob) {
            self.current.push(original.clone());
            self.saved.push((knob.clone(), original));
        }
    }

    /// Makes exactly `wanted` active: each listed knob gets its value, every other knob
    /// this guard knows goes back to its original. Knobs must have been remembered first.
    pub fn activate(&mut self, wanted: &[(Knob, String)]) -> Result<(), String> {
        for (i, (knob, original)) in self.saved.iter().enumerate() {
            let value = wanted
                .iter()
                .find(|(k, _)| k == knob)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| original.clone());
            if self.current[i] != value {
                knob.write(&value)
                    .map_err(|e| format!("cannot set {} to {value}: {e}", knob.name))?;
                self.current[i] = value;
            }
        }
        Ok(())
    }

    /// Writes every original back; returns the failures (one line each).
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

#[cfg(test)]
mod tests {
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
        assert!(k.probe().unwrap_err().contains("does not exist"));
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
}
