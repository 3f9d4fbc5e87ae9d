//! The knob journal: the durable record of the originals of the knobs one process is
//! changing, written before the first write, so that a run killed by SIGKILL leaves enough
//! behind for `virtperf cleanup` ([`restore_leftovers`]) to put them back, and for the next
//! run to refuse to start on a leaked value ([`check_leftovers`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use crate::knob::{Knob, KnobKind};
use crate::state::{self, Liveness, Owner};

/// One knob in a journal: enough to rebuild it and put its value back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalKnob {
    /// Name as written in specs.
    pub name: String,
    /// Sysctl, module parameter or cpuidle switch.
    pub kind: KnobKind,
    /// The value before virtperf changed it.
    pub original: String,
}

/// What a journal file holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct JournalRecord {
    /// The process changing the knobs.
    pub owner: Owner,
    /// Its command line, to name it in messages.
    pub command: String,
    /// When it recorded them.
    pub recorded_at: String,
    /// The originals.
    pub knobs: Vec<JournalKnob>,
}

/// The durable record of the originals of the knobs one process is changing.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    /// What is on disk now (empty: no file).
    recorded: Vec<JournalKnob>,
}

fn journal_dir(base: &Path) -> PathBuf {
    base.join("knobs")
}

impl Journal {
    /// The journal of this process in the state directory `base` (usually [`state::dir`]).
    /// Nothing is written until a knob is about to change.
    pub fn for_this_process(base: &Path) -> Journal {
        let me = Owner::me();
        Journal {
            path: journal_dir(base).join(format!("{}-{}.json", me.pid, me.start)),
            recorded: Vec::new(),
        }
    }

    /// Makes sure every knob in `saved` is on disk with its original.
    pub(crate) fn record(&mut self, saved: &[(Knob, String)]) -> Result<()> {
        let knobs: Vec<JournalKnob> = saved
            .iter()
            .map(|(k, orig)| JournalKnob {
                name: k.name.clone(),
                kind: k.kind,
                original: orig.clone(),
            })
            .collect();
        if knobs.iter().all(|k| self.recorded.contains(k)) {
            return Ok(());
        }
        let rec = JournalRecord {
            owner: Owner::me(),
            command: crate::command_line(),
            recorded_at: virtperf_wire::time::now_rfc3339(),
            knobs: knobs.clone(),
        };
        state::write_durably(&self.path, &rec).map_err(|e| {
            anyhow!(
                "cannot record knob originals in {} ({e}): not changing any knob; set ${} to a writable directory",
                self.path.display(),
                state::STATE_DIR_ENV
            )
        })?;
        self.recorded = knobs;
        Ok(())
    }

    /// After a restore: removes the file, or keeps only the knobs still changed.
    pub(crate) fn settle(&mut self, still_changed: &[(Knob, String)]) -> Result<()> {
        if self.recorded.is_empty() {
            return Ok(());
        }
        if still_changed.is_empty() {
            self.recorded.clear();
            return match fs::remove_file(&self.path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(anyhow!(
                    "knobs restored, but their journal {} could not be removed: {e}",
                    self.path.display()
                )),
            };
        }
        self.recorded.clear();
        self.record(still_changed)
    }
}

/// A journal left by another process.
#[derive(Debug, Clone)]
pub struct Leftover {
    /// Its file.
    pub path: PathBuf,
    /// What it says.
    pub record: JournalRecord,
    /// Whether its process still runs.
    pub liveness: Liveness,
}

impl Leftover {
    fn describe(&self) -> String {
        let knobs: Vec<String> = self
            .record
            .knobs
            .iter()
            .map(|k| format!("{} (was {:?})", k.name, k.original))
            .collect();
        format!(
            "pid {} (`{}`, {}) changed {}",
            self.record.owner.pid,
            self.record.command,
            self.record.recorded_at,
            knobs.join(", ")
        )
    }
}

/// Every journal in `base` but this process's own; unreadable files are returned as errors.
pub fn leftovers(base: &Path) -> Vec<Result<Leftover>> {
    let me = Owner::me();
    state::journal_bases(base)
        .iter()
        .flat_map(|b| state::read_all_in::<JournalRecord>(b, "knobs"))
        .filter_map(|rec| match rec {
            Ok((_, r)) if r.owner == me => None,
            Ok((path, record)) => Some(Ok(Leftover {
                liveness: record.owner.liveness(),
                path,
                record,
            })),
            Err(e) => Some(Err(e)),
        })
        .collect()
}

/// Refuses to let a run touch knobs while a dead run's journal says some are still
/// changed, or while a live run is changing one of `knobs`. Stale journals (from before
/// the last reboot, which reset every knob) are removed on the way.
pub fn check_leftovers(base: &Path, knobs: &[&Knob]) -> Result<()> {
    let mut dead = Vec::new();
    for l in leftovers(base) {
        let l = l.map_err(|e| anyhow!("{e}: inspect or delete it, then run again"))?;
        match l.liveness {
            Liveness::Stale => {
                let _ = fs::remove_file(&l.path);
            }
            Liveness::Dead => dead.push(l.describe()),
            Liveness::Alive => {
                if let Some(k) = l
                    .record
                    .knobs
                    .iter()
                    .find(|jk| knobs.iter().any(|k| k.name == jk.name))
                {
                    bail!(
                        "knob {} is being changed by another virtperf run ({}): wait for it to finish",
                        k.name,
                        l.describe()
                    );
                }
            }
        }
    }
    if !dead.is_empty() {
        bail!(
            "a virtperf run died with knobs still changed: {}; run `virtperf cleanup` to restore them first",
            dead.join("; ")
        );
    }
    Ok(())
}

/// The journals of dead runs whose knobs are still changed, one line each: what a
/// measurement taken now would measure with, unawares. Unreadable journals are named too;
/// stale ones (before the last reboot) are not.
pub fn leaked(base: &Path) -> Vec<String> {
    leftovers(base)
        .into_iter()
        .filter_map(|l| match l {
            Ok(l) if l.liveness == Liveness::Dead => Some(l.describe()),
            Ok(_) => None,
            Err(e) => Some(format!("{e}")),
        })
        .collect()
}

/// What [`restore_leftovers`] did.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// One line per knob put back.
    pub restored: Vec<String>,
    /// One line per knob or journal that could not be dealt with.
    pub failed: Vec<String>,
    /// Journals dropped because they predate the last boot.
    pub stale: Vec<String>,
}

/// Restores every knob that dead runs left changed (their journals in `base`), removing each
/// journal once all its knobs are back. Goes on past failures and lists them.
pub fn restore_leftovers(base: &Path) -> RestoreReport {
    let mut rep = RestoreReport::default();
    for l in leftovers(base) {
        let l = match l {
            Ok(l) => l,
            Err(e) => {
                rep.failed.push(e.to_string());
                continue;
            }
        };
        match l.liveness {
            Liveness::Alive => continue,
            Liveness::Stale => {
                let _ = fs::remove_file(&l.path);
                rep.stale.push(l.describe());
                continue;
            }
            Liveness::Dead => {}
        }
        let mut left = Vec::new();
        for jk in &l.record.knobs {
            let knob = Knob::from_name(jk.kind, &jk.name);
            // A knob someone already put back is said so, not claimed as restored here.
            let already = knob
                .as_ref()
                .ok()
                .and_then(|k| k.read().ok())
                .is_some_and(|v| v.trim() == jk.original.trim());
            let res = knob.and_then(|k| {
                k.write(&jk.original)
                    .map_err(|e| anyhow!("could not restore {} to {:?}: {e}", jk.name, jk.original))
            });
            match res {
                Ok(()) if already => rep.restored.push(format!(
                    "{} was already back at {:?} (journaled by pid {}, which died)",
                    jk.name, jk.original, l.record.owner.pid
                )),
                Ok(()) => rep.restored.push(format!(
                    "restored {} to {:?} (left changed by pid {})",
                    jk.name, jk.original, l.record.owner.pid
                )),
                Err(e) => {
                    rep.failed.push(e.to_string());
                    left.push(jk.clone());
                }
            }
        }
        if left.is_empty() {
            if let Err(e) = fs::remove_file(&l.path) {
                rep.failed.push(format!(
                    "could not remove journal {}: {e}",
                    l.path.display()
                ));
            }
        } else {
            let rec = JournalRecord {
                knobs: left,
                ..l.record.clone()
            };
            if let Err(e) = state::write_durably(&l.path, &rec) {
                rep.failed.push(format!(
                    "could not update journal {}: {e}",
                    l.path.display()
                ));
            }
        }
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::knob::KnobGuard;

    fn temp_base(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("vp-journal-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    /// The journal is on disk before the first write and gone once everything is restored.
    #[test]
    fn journal_exists_exactly_while_a_knob_is_changed() {
        let base = temp_base("life");
        let file = base.join("knob-file");
        fs::write(&file, "1\n").unwrap();
        let k = Knob {
            name: "net.core.stand_in".into(),
            kind: KnobKind::Sysctl,
            path: file,
        };
        let journal_files = || {
            fs::read_dir(base.join("knobs"))
                .map(|d| {
                    d.flatten()
                        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                        .count()
                })
                .unwrap_or(0)
        };
        {
            let mut g = KnobGuard::journaled(Journal::for_this_process(&base));
            g.remember(&k, k.probe().unwrap());
            g.activate(&[]).unwrap();
            assert_eq!(journal_files(), 0, "nothing changed, nothing journaled");
            g.activate(&[(k.clone(), "9".into())]).unwrap();
            assert_eq!(k.read().unwrap(), "9");
            assert_eq!(journal_files(), 1);
            let text = fs::read_to_string(
                fs::read_dir(base.join("knobs"))
                    .unwrap()
                    .flatten()
                    .next()
                    .unwrap()
                    .path(),
            )
            .unwrap();
            let rec: JournalRecord = serde_json::from_str(&text).unwrap();
            assert_eq!(rec.knobs[0].name, "net.core.stand_in");
            assert_eq!(rec.knobs[0].original, "1");
            assert_eq!(rec.owner, Owner::me());
            // Our own journal is not a leftover.
            assert!(leftovers(&base).is_empty());
        }
        assert_eq!(k.read().unwrap(), "1");
        assert_eq!(journal_files(), 0, "journal removed after the restore");
        fs::remove_dir_all(&base).unwrap();
    }

    fn write_journal(base: &Path, owner: Owner, knob: &str) -> PathBuf {
        let path = journal_dir(base).join(format!("{}-{}.json", owner.pid, owner.start));
        state::write_durably(
            &path,
            &JournalRecord {
                owner,
                command: "virtperf run x.toml".into(),
                recorded_at: "2026-11-22T00:00:00Z".into(),
                knobs: vec![JournalKnob {
                    name: knob.into(),
                    kind: KnobKind::Sysctl,
                    original: "0".into(),
                }],
            },
        )
        .unwrap();
        path
    }

    #[test]
    fn leftovers_of_dead_live_and_previous_boot_runs() {
        let base = temp_base("left");
        let me = Owner::me();
        let busy = Knob::sysctl("net.core.busy_poll").unwrap();
        let other = Knob::sysctl("net.core.busy_read").unwrap();

        // From before the last reboot: removed quietly, nothing refused.
        let stale = write_journal(
            &base,
            Owner {
                boot_id: "another-boot".into(),
                start: me.start + 7,
                ..me.clone()
            },
            "net.core.busy_poll",
        );
        check_leftovers(&base, &[&busy]).unwrap();
        assert!(!stale.exists());

        // Alive (a stand-in: this process under another start time is dead, so use our
        // parent, which is running): refused only if it touches one of our knobs.
        let parent = std::os::unix::process::parent_id();
        let live = Owner {
            pid: parent,
            start: state::start_time(parent).unwrap(),
            ..Owner::me()
        };
        assert_eq!(live.liveness(), Liveness::Alive);
        let live_path = write_journal(&base, live, "net.core.busy_poll");
        check_leftovers(&base, &[&other]).unwrap();
        let e = check_leftovers(&base, &[&busy]).unwrap_err().to_string();
        assert!(e.contains("being changed by another virtperf run"), "{e}");
        fs::remove_file(live_path).unwrap();

        // Dead in this boot: refused whatever the knobs, naming them and the way out.
        write_journal(
            &base,
            Owner {
                start: me.start + 1,
                ..me
            },
            "net.core.busy_poll",
        );
        let e = check_leftovers(&base, &[&other]).unwrap_err().to_string();
        assert!(e.contains("net.core.busy_poll (was \"0\")"), "{e}");
        assert!(e.contains("virtperf cleanup"), "{e}");

        // A damaged journal is named, not ignored.
        fs::write(journal_dir(&base).join("junk.json"), "{half").unwrap();
        assert!(leftovers(&base).iter().any(|l| l
            .as_ref()
            .is_err_and(|e| e.to_string().contains("junk.json"))));
        fs::remove_dir_all(&base).unwrap();
    }
}
