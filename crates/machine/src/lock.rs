//! One measurement at a time per machine.
//!
//! Two measurements on one machine spoil each other: one's knobs become the other's
//! environment, one's CPU load the other's noise. Every command that measures or changes
//! knobs holds [`MachineLock`] while it does. It is an `flock(2)` on a file
//! (`/run/virtperf/lock` for root, who alone changes the machine's knobs; a user's own state
//! directory for anyone else), so the kernel releases it when its holder dies, however it
//! dies: a SIGKILLed holder never blocks the next command. The file's content says who
//! holds it (command, pid, run id, since when) for the message a waiter prints, and the
//! holding's nonce; it is readable by its owner only (0600), so another user can neither
//! read the nonce (and present it to get round a hold) nor open the file to `flock` it and
//! make every measurement wait.
//!
//! Processes a holder starts for the same measurement (the client half re-run inside a
//! namespace) inherit the lock through [`INHERIT_ENV`] and do not take it again.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use rustix::fs::FlockOperation;
use serde::{Deserialize, Serialize};

use crate::state;

/// Set by a lock holder for the processes it starts: the holder's `nonce`.
pub const INHERIT_ENV: &str = "VIRTPERF_LOCK_NONCE";

/// Who holds the lock.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// Its command line.
    pub command: String,
    /// When it took the lock (RFC 3339).
    pub since: String,
    /// The run it is storing, once known.
    pub run_id: Option<i64>,
    /// A random id of this holding, handed to the holder's children and to agents it tests
    /// against so they know the lock is held for them.
    pub nonce: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` (pid {}", self.command, self.pid)?;
        if let Some(r) = self.run_id {
            write!(f, ", run {r}")?;
        }
        write!(f, ", since {})", self.since)
    }
}

/// How to take the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Wait for it, saying once who holds it.
    Wait,
    /// Fail at once, naming the holder.
    NoWait,
    /// Do not take it (`--allow-concurrent`); results record that.
    Skip,
}

/// The lock file this user's measuring commands share: root's under /run, another user's
/// in their own state directory (a user who is not root cannot hold root's machine: they
/// change no knobs, and must not be able to make root's measurements wait).
pub fn path() -> PathBuf {
    if crate::is_root() {
        PathBuf::from("/run/virtperf/lock")
    } else {
        state::dir().join("lock")
    }
}

/// The machine-wide lock, held until dropped (or until the process dies).
#[derive(Debug)]
pub struct MachineLock {
    file: Option<File>,
    holder: Holder,
}

/// Why the lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// `Mode::NoWait` and someone holds it.
    Busy(Option<Holder>),
    /// The lock file could not be opened or locked.
    Io(String),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy(Some(h)) => write!(
                f,
                "another measurement is running on this machine: {h}; wait for it (drop --no-wait) or pass --allow-concurrent"
            ),
            LockError::Busy(None) => write!(
                f,
                "another measurement is running on this machine (holder unknown); wait for it (drop --no-wait) or pass --allow-concurrent"
            ),
            LockError::Io(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for LockError {}

fn flock(file: &File, op: FlockOperation) -> io::Result<()> {
    loop {
        // A blocking flock ends early with EINTR when a signal arrives: take it again.
        match rustix::fs::flock(file, op) {
            Err(rustix::io::Errno::INTR) => continue,
            r => return r.map_err(io::Error::from),
        }
    }
}

fn random_nonce() -> String {
    let mut b = [0u8; 12];
    if File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        b[..8].copy_from_slice(&(t as u64 ^ u64::from(std::process::id())).to_le_bytes());
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Whether someone holds the lock at `p` now (a shared lock cannot be had).
fn is_held(p: &std::path::Path) -> bool {
    let Ok(file) = File::open(p) else {
        return false;
    };
    match flock(&file, FlockOperation::NonBlockingLockShared) {
        // Dropping the file releases the shared lock we just took.
        Ok(()) => false,
        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
    }
}

/// Reads who holds the lock (best effort: the content may be half-written or unreadable).
pub fn holder() -> Option<Holder> {
    let text = std::fs::read(path()).ok()?;
    serde_json::from_slice(&text).ok()
}

impl MachineLock {
    /// Takes the lock for `command`. With [`Mode::Wait`], `waiting` is called once with the
    /// holder's description when the lock is busy, then the call blocks until it is free.
    /// A process started by a holder (see [`INHERIT_ENV`]) gets a lock that holds nothing.
    pub fn acquire(
        mode: Mode,
        command: &str,
        waiting: &mut dyn FnMut(&str),
    ) -> Result<MachineLock, LockError> {
        let holder = Holder {
            pid: std::process::id(),
            command: command.to_string(),
            since: virtperf_wire::time::now_rfc3339(),
            run_id: None,
            nonce: random_nonce(),
        };
        if mode == Mode::Skip {
            return Ok(MachineLock { file: None, holder });
        }
        if let Ok(n) = std::env::var(INHERIT_ENV) {
            // Our starter holds the lock when the holder file names its nonce, or when the
            // file names nobody but the lock is held: a user who is not root holds a
            // root-made lock file read-only and cannot write its name into it (waiting
            // for our own parent would then never end).
            let ours = !n.is_empty()
                && match self::holder() {
                    Some(h) => h.nonce == n,
                    None => is_held(&path()),
                };
            if ours {
                return Ok(MachineLock {
                    file: None,
                    holder: Holder { nonce: n, ..holder },
                });
            }
        }
        let p = path();
        let io_err = |e: io::Error| {
            LockError::Io(format!(
                "cannot use the machine lock {} ({e}); pass --allow-concurrent to measure without it",
                p.display()
            ))
        };
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir).map_err(io_err)?;
        }
        // Read-write when we may (to say who we are), read-only otherwise (flock works on
        // either). Its owner's alone: a file made before (0644) is made so too.
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&p)
            .or_else(|_| File::open(&p))
            .map_err(io_err)?;
        let _ = file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600));
        if let Err(e) = flock(&file, FlockOperation::NonBlockingLockExclusive) {
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(io_err(e));
            }
            let current = self::holder();
            if mode == Mode::NoWait {
                return Err(LockError::Busy(current));
            }
            waiting(&match &current {
                Some(h) => {
                    format!("waiting for another measurement on this machine to finish: {h}")
                }
                None => "waiting for another measurement on this machine to finish".to_string(),
            });
            flock(&file, FlockOperation::LockExclusive).map_err(io_err)?;
        }
        let mut lock = MachineLock {
            file: Some(file),
            holder,
        };
        lock.publish();
        Ok(lock)
    }

    /// Records the run id in the holder description.
    pub fn set_run(&mut self, run_id: i64) {
        self.holder.run_id = Some(run_id);
        self.publish();
    }

    /// This holding's nonce, for children and agents (see [`INHERIT_ENV`]).
    pub fn nonce(&self) -> &str {
        &self.holder.nonce
    }

    /// True when this process holds the lock itself (not inherited, not skipped).
    pub fn held(&self) -> bool {
        self.file.is_some()
    }

    fn publish(&mut self) {
        let Some(f) = &mut self.file else {
            return;
        };
        if let Ok(text) = serde_json::to_vec(&self.holder) {
            let _ = f.set_len(0);
            let _ = f.rewind();
            let _ = f.write_all(&text);
        }
    }
}

impl Drop for MachineLock {
    fn drop(&mut self) {
        if let Some(f) = &mut self.file {
            let _ = f.set_len(0);
            // Closing the file releases the lock; say so explicitly all the same.
            let _ = flock(f, FlockOperation::Unlock);
        }
    }
}
