//! virtperf's own state on this machine: a per-user directory holding what must outlive a
//! process that dies without cleaning up (SIGKILL, a power cut of the terminal, an OOM kill).
//!
//! Two kinds of records live there, each one small JSON file written durably (temporary
//! file, fsync, rename, fsync of the directory) *before* the thing it describes exists:
//! - `knobs/`: the original values of kernel knobs a run is about to change (the journal,
//!   see [`crate::knob::Journal`]);
//! - `owned/`: namespaces and guest run directories a run is about to create, so that
//!   `virtperf cleanup` removes only what virtperf made (see [`Owned`]).
//!
//! Each record names its owner by PID *and* the process's start time (field 22 of
//! `/proc/PID/stat`), so a recycled PID is not mistaken for the owner, and by the boot id,
//! so records from before a reboot (whose knobs and namespaces the reboot already reset)
//! are recognised as stale.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Result};
use serde::{Deserialize, Serialize};

/// Environment variable that overrides the state directory (tests use a private one).
pub const STATE_DIR_ENV: &str = "VIRTPERF_STATE_DIR";

/// The state directory: `$VIRTPERF_STATE_DIR`, else `$XDG_STATE_HOME/virtperf`, else
/// `~/.local/state/virtperf` (the XDG default), else `/tmp/virtperf-state-<uid>`.
pub fn dir() -> PathBuf {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(d) = var(STATE_DIR_ENV) {
        return d;
    }
    if let Some(d) = var("XDG_STATE_HOME").filter(|d| d.is_absolute()) {
        return d.join("virtperf");
    }
    if let Some(h) = var("HOME") {
        return h.join(".local/state/virtperf");
    }
    let uid = rustix::process::getuid().as_raw();
    std::env::temp_dir().join(format!("virtperf-state-{uid}"))
}

/// Where root's knob journal lives: one per machine, beside the machine lock (a tmpfs the
/// boot clears, as the boot resets the knobs), so every run of root's sees a dead run's
/// changed knobs whatever its `$HOME` (`sudo` with or without `-H`) or state directory.
pub const MACHINE_DIR: &str = "/run/virtperf";

/// The directory whose `knobs/` this process journals knob originals in: [`MACHINE_DIR`]
/// for root (only root changes machine knobs), this user's state directory otherwise.
pub fn journal_base() -> PathBuf {
    if crate::is_root() {
        PathBuf::from(MACHINE_DIR)
    } else {
        dir()
    }
}

/// The directories whose journals a check or a cleanup reads for `base`: the machine's and
/// this user's state directory (journals written there before the journal became the
/// machine's, or under an explicit `$VIRTPERF_STATE_DIR`) when `base` is the machine's;
/// `base` alone otherwise (a private one, as unit tests use).
pub fn journal_bases(base: &Path) -> Vec<PathBuf> {
    let mut v = vec![base.to_path_buf()];
    if base == journal_base() {
        let own = dir();
        if own != base {
            v.push(own);
        }
    }
    v
}

/// A process, identified so that PID reuse cannot fool us.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (`/proc/PID/stat` field 22).
    pub start: u64,
    /// `/proc/sys/kernel/random/boot_id` when the record was made.
    pub boot_id: String,
}

/// Whether a record's owner still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The owning process is running.
    Alive,
    /// It died in this boot: what it left is still there.
    Dead,
    /// It ran before the last reboot: the kernel state it changed was reset by the boot.
    Stale,
}

fn boot_id() -> String {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// Start time of a process, or None when it does not exist.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces or ')': the
    // fields we want follow the last ')'. Field 3 (state) is the first after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether a process has exited and only waits for its parent to reap it (state `Z`,
/// zombie, or `X`): it will never put back what it changed, though /proc still lists it
/// with its start time. A run killed by SIGKILL stays so for as long as its parent does
/// not wait for it (a script, a supervisor that reaps late), and `cleanup` must not call
/// it running meanwhile.
fn exited(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    matches!(state, Some("Z" | "X" | "x"))
}

impl Owner {
    /// This process.
    pub fn me() -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            start: start_time(pid).unwrap_or(0),
            boot_id: boot_id(),
        }
    }

    /// Is the owner still running?
    pub fn liveness(&self) -> Liveness {
        if !self.boot_id.is_empty() && self.boot_id != boot_id() {
            return Liveness::Stale;
        }
        match start_time(self.pid) {
            Some(s) if s == self.start && !exited(self.pid) => Liveness::Alive,
            _ => Liveness::Dead,
        }
    }
}

/// Writes `value` as JSON to `path` so that after a crash at any point the file holds
/// either its old content or the whole new one.
pub fn write_durably<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    let parent = path
        .parent()
        .ok_or_else(|| io::Error::other(format!("{} has no parent", path.display())))?;
    fs::create_dir_all(parent)?;
    let tmp = parent.join(format!(
        ".{}.tmp",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("record")
    ));
    let text = serde_json::to_vec_pretty(value).map_err(io::Error::other)?;
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&text)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    // The rename is durable only once the directory entry is.
    fs::File::open(parent)?.sync_all()
}

/// Reads every `*.json` record of one kind (`knobs`, `owned`), skipping files that do not
/// parse (reported as `Err` with the path, so a damaged record is named, never hidden).
pub fn read_all<T: for<'de> Deserialize<'de>>(kind: &str) -> Vec<Result<(PathBuf, T)>> {
    read_all_in(&dir(), kind)
}

/// [`read_all`] in the state directory `base`.
pub fn read_all_in<T: for<'de> Deserialize<'de>>(
    base: &Path,
    kind: &str,
) -> Vec<Result<(PathBuf, T)>> {
    let Ok(entries) = fs::read_dir(base.join(kind)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let parsed = fs::read(&p)
                .map_err(|e| e.to_string())
                .and_then(|b| serde_json::from_slice::<T>(&b).map_err(|e| e.to_string()));
            match parsed {
                Ok(v) => Ok((p, v)),
                Err(e) => Err(anyhow!("unreadable state record {}: {e}", p.display())),
            }
        })
        .collect()
}

/// Something a run creates on the machine that must not outlive it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Resource {
    /// A network namespace (its veths and taps go with it).
    Netns {
        /// Namespace name.
        name: String,
    },
    /// A guest run directory (initramfs, console logs).
    Dir {
        /// Absolute path.
        path: PathBuf,
    },
}

impl Resource {
    fn file_name(&self) -> String {
        let raw = match self {
            Resource::Netns { name } => format!("netns-{name}"),
            Resource::Dir { path } => format!("dir-{}", path.display()),
        };
        let safe: String = raw
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{safe}.json")
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resource::Netns { name } => write!(f, "network namespace {name}"),
            Resource::Dir { path } => write!(f, "guest run directory {}", path.display()),
        }
    }
}

/// The marker that says virtperf (this process) made a [`Resource`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Owned {
    /// Who made it.
    pub owner: Owner,
    /// What it is.
    pub resource: Resource,
}

/// Records, before creating it, that this process is about to make `r`.
pub fn mark(r: &Resource) -> io::Result<()> {
    let rec = Owned {
        owner: Owner::me(),
        resource: r.clone(),
    };
    write_durably(&dir().join("owned").join(r.file_name()), &rec)
}

/// Forgets `r` once it is gone.
pub fn unmark(r: &Resource) {
    let _ = fs::remove_file(dir().join("owned").join(r.file_name()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_recycled_pid_is_not() {
        let me = Owner::me();
        assert!(me.start > 0, "start time read from /proc/self/stat");
        assert_eq!(me.liveness(), Liveness::Alive);
        let other_start = Owner {
            start: me.start + 1,
            ..me.clone()
        };
        assert_eq!(other_start.liveness(), Liveness::Dead);
        let gone = Owner {
            pid: u32::MAX - 1,
            ..me.clone()
        };
        assert_eq!(gone.liveness(), Liveness::Dead);
        let old_boot = Owner {
            boot_id: "not-this-boot".into(),
            ..me
        };
        assert_eq!(old_boot.liveness(), Liveness::Stale);
    }

    /// A killed process its parent has not reaped yet (a zombie) keeps its /proc entry and
    /// start time, but it is dead: what it changed is for `cleanup` to put back.
    #[test]
    fn an_unreaped_killed_process_is_dead() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep runs");
        let owner = Owner {
            pid: child.id(),
            start: start_time(child.id()).expect("its start time"),
            boot_id: boot_id(),
        };
        assert_eq!(owner.liveness(), Liveness::Alive);
        child.kill().expect("killed");
        // Not waited for: it stays a zombie until `wait` below, once the kernel has
        // finished its exit (a few milliseconds).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !exited(owner.pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            start_time(owner.pid),
            Some(owner.start),
            "still listed in /proc"
        );
        assert_eq!(owner.liveness(), Liveness::Dead);
        child.wait().expect("reaped");
        assert_eq!(owner.liveness(), Liveness::Dead);
    }

    #[test]
    fn file_names_cannot_escape_the_directory() {
        let r = Resource::Dir {
            path: PathBuf::from("/tmp/../etc/x y"),
        };
        let n = r.file_name();
        assert!(!n.contains('/') && !n.contains(' '), "{n}");
    }
}
