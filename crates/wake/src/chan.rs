//! The mechanisms: each gives a pair of ends that can signal the other and wait for it.

use std::net::{TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use rustix::thread::futex;
use serde::Serialize;

use crate::strategy::Strategy;

/// How the token travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mech {
    /// A shared word and futex(2) wait/wake.
    Futex,
    /// eventfd(2) counters, one per direction.
    Eventfd,
    /// Two pipes.
    Pipe,
    /// A mutex-protected counter and a condition variable per direction.
    Condvar,
    /// A UNIX stream socket pair.
    Unix,
    /// A loopback TCP connection (TCP_NODELAY).
    Tcp,
}

impl Mech {
    /// The name `--mech` takes (and JSON gives).
    pub fn name(self) -> &'static str {
        match self {
            Mech::Futex => "futex",
            Mech::Eventfd => "eventfd",
            Mech::Pipe => "pipe",
            Mech::Condvar => "condvar",
            Mech::Unix => "unix",
            Mech::Tcp => "tcp",
        }
    }
}

impl std::str::FromStr for Mech {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "futex" => Mech::Futex,
            "eventfd" => Mech::Eventfd,
            "pipe" => Mech::Pipe,
            "condvar" => Mech::Condvar,
            "unix" => Mech::Unix,
            "tcp" => Mech::Tcp,
            _ => {
                return Err(format!(
                    "unknown mechanism {s:?} (futex, eventfd, pipe, condvar, unix, tcp)"
                ))
            }
        })
    }
}

/// One direction of a futex channel: a sequence word and a "sleeper present" flag, so the
/// signaller only makes the wake system call when someone may be asleep (as real lock and
/// queue implementations do).
#[derive(Default)]
struct FutexWord {
    seq: AtomicU32,
    sleeping: AtomicBool,
}

/// A periodic re-check while sleeping, so a stop request is noticed even if its wake-up is
/// lost; long enough not to matter for latency.
const SLEEP_CHECK: rustix::time::Timespec = rustix::time::Timespec {
    tv_sec: 0,
    tv_nsec: 50_000_000,
};

/// Futex and condvar ends share state in memory.
struct Shared {
    words: [FutexWord; 2],
    cv: [(Mutex<u32>, Condvar); 2],
}

/// One end of a channel.
pub struct End {
    kind: Kind,
    /// Index of the direction we receive on (0 or 1); we send on the other.
    rx: usize,
    seen: u32,
}

enum Kind {
    Mem(Arc<Shared>, bool /* condvar */),
    Fd {
        rd: OwnedFd,
        wr: OwnedFd,
        eventfd: bool,
    },
}

/// Makes a connected pair of ends.
pub fn pair(mech: Mech) -> Result<(End, End), String> {
    let e = |what: &str, err: std::io::Error| format!("cannot create {what}: {err}");
    Ok(match mech {
        Mech::Futex | Mech::Condvar => {
            let sh = Arc::new(Shared {
                words: Default::default(),
                cv: Default::default(),
            });
            let cv = mech == Mech::Condvar;
            (
                End {
                    kind: Kind::Mem(sh.clone(), cv),
                    rx: 0,
                    seen: 0,
                },
                End {
                    kind: Kind::Mem(sh, cv),
                    rx: 1,
                    seen: 0,
                },
            )
        }
        Mech::Eventfd => {
            let a = eventfd().map_err(|x| e("an eventfd", x))?;
            let b = eventfd().map_err(|x| e("an eventfd", x))?;
            let a2 = a.try_clone().map_err(|x| e("an eventfd", x))?;
            let b2 = b.try_clone().map_err(|x| e("an eventfd", x))?;
            (
                End {
                    kind: Kind::Fd {
                        rd: a,
                        wr: b,
                        eventfd: true,
                    },
                    rx: 0,
                    seen: 0,
                },
                End {
                    kind: Kind::Fd {
                        rd: b2,
                        wr: a2,
                        eventfd: true,
                    },
                    rx: 1,
                    seen: 0,
                },
            )
        }
        Mech::Pipe => {
            let (r1, w1) = pipe().map_err(|x| e("a pipe", x))?;
            let (r2, w2) = pipe().map_err(|x| e("a pipe", x))?;
            (
                End {
                    kind: Kind::Fd {
                        rd: r1,
                        wr: w2,
                        eventfd: false,
                    },
                    rx: 0,
                    seen: 0,
                },
                End {
                    kind: Kind::Fd {
                        rd: r2,
                        wr: w1,
                        eventfd: false,
                    },
                    rx: 1,
                    seen: 0,
                },
            )
        }
        Mech::Unix => {
            let (a, b) = UnixStream::pair().map_err(|x| e("a socket pair", x))?;
            fd_pair(OwnedFd::from(a), OwnedFd::from(b)).map_err(|x| e("a socket pair", x))?
        }
        Mech::Tcp => {
            // Loopback only: the listener is bound to 127.0.0.1 and accepts our own connect.
            let l = TcpListener::bind("127.0.0.1:0").map_err(|x| e("a loopback listener", x))?;
            let a = TcpStream::connect(l.local_addr().map_err(|x| e("a loopback listener", x))?)
                .map_err(|x| e("a loopback connection", x))?;
            let (b, _) = l.accept().map_err(|x| e("a loopback connection", x))?;
            a.set_nodelay(true).map_err(|x| e("TCP_NODELAY", x))?;
            b.set_nodelay(true).map_err(|x| e("TCP_NODELAY", x))?;
            fd_pair(OwnedFd::from(a), OwnedFd::from(b))
                .map_err(|x| e("a loopback connection", x))?
        }
    })
}

fn fd_pair(a: OwnedFd, b: OwnedFd) -> std::io::Result<(End, End)> {
    let a2 = a.try_clone()?;
    let b2 = b.try_clone()?;
    Ok((
        End {
            kind: Kind::Fd {
                rd: a,
                wr: a2,
                eventfd: false,
            },
            rx: 0,
            seen: 0,
        },
        End {
            kind: Kind::Fd {
                rd: b,
                wr: b2,
                eventfd: false,
            },
            rx: 1,
            seen: 0,
        },
    ))
}

fn eventfd() -> std::io::Result<OwnedFd> {
    rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC).map_err(Into::into)
}

fn pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(Into::into)
}

/// Failure leaves the mode unchanged (the waits below then just block or spin as they can).
fn set_nonblocking(fd: &OwnedFd, on: bool) {
    use rustix::fs::{fcntl_getfl, fcntl_setfl, OFlags};
    if let Ok(fl) = fcntl_getfl(fd) {
        let fl = if on {
            fl | OFlags::NONBLOCK
        } else {
            fl & !OFlags::NONBLOCK
        };
        let _ = fcntl_setfl(fd, fl);
    }
}

impl End {
    /// Sends one token to the peer.
    pub fn signal(&mut self) -> Result<(), String> {
        let tx = 1 - self.rx;
        match &self.kind {
            Kind::Mem(sh, false) => {
                let w = &sh.words[tx];
                w.seq.fetch_add(1, Ordering::SeqCst);
                if w.sleeping.load(Ordering::SeqCst) {
                    // A failed wake only delays the sleeper to its periodic re-check.
                    let _ = futex::wake(&w.seq, futex::Flags::PRIVATE, 1);
                }
                Ok(())
            }
            Kind::Mem(sh, true) => {
                let (m, cv) = &sh.cv[tx];
                let mut g = m.lock().map_err(|_| "poisoned lock".to_string())?;
                *g = g.wrapping_add(1);
                // Mirror into the word so poll-then-block can spin on it without the lock.
                sh.words[tx].seq.store(*g, Ordering::SeqCst);
                cv.notify_one();
                Ok(())
            }
            Kind::Fd { wr, eventfd, .. } => {
                let buf = 1u64.to_ne_bytes();
                let n = if *eventfd { 8 } else { 1 };
                // One write(2) per token, nothing else: the mechanism's own cost.
                match rustix::io::write(wr, &buf[..n]) {
                    Ok(w) if w == n => Ok(()),
                    Ok(w) => Err(format!("signal: wrote {w} of {n} bytes")),
                    Err(e) => Err(format!("signal: {}", std::io::Error::from(e))),
                }
            }
        }
    }

    /// Waits for the peer's token. Returns false when told to stop.
    pub fn wait(&mut self, strategy: Strategy, stop: &AtomicBool) -> Result<bool, String> {
        let spin_until = match strategy {
            Strategy::Block => None,
            Strategy::Spin => Some(None),
            Strategy::Poll(d) => Some(Some(Instant::now() + d)),
        };
        match &self.kind {
            Kind::Mem(sh, is_cv) => {
                let w = &sh.words[self.rx];
                let seen = self.seen;
                // Spin phase: watch the word without any system call.
                if let Some(until) = spin_until {
                    let mut i = 0u32;
                    loop {
                        if w.seq.load(Ordering::Acquire) != seen {
                            self.seen = w.seq.load(Ordering::Acquire);
                            return Ok(true);
                        }
                        std::hint::spin_loop();
                        i = i.wrapping_add(1);
                        if i.is_multiple_of(64) {
                            if stop.load(Ordering::Relaxed) {
                                return Ok(false);
                            }
                            if until.is_some_and(|u| Instant::now() >= u) {
                                break;
                            }
                        }
                    }
                }
                if *is_cv {
                    let (m, cv) = &sh.cv[self.rx];
                    let mut g = m.lock().map_err(|_| "poisoned lock".to_string())?;
                    while *g == seen {
                        if stop.load(Ordering::Relaxed) {
                            return Ok(false);
                        }
                        g = cv
                            .wait_timeout(g, std::time::Duration::from_millis(50))
                            .map_err(|_| "poisoned lock".to_string())?
                            .0;
                    }
                    self.seen = *g;
                    return Ok(true);
                }
                loop {
                    w.sleeping.store(true, Ordering::SeqCst);
                    if w.seq.load(Ordering::SeqCst) == seen {
                        // EAGAIN (the word moved), EINTR and the timeout all lead to the
                        // re-check below.
                        let _ =
                            futex::wait(&w.seq, futex::Flags::PRIVATE, seen, Some(&SLEEP_CHECK));
                    }
                    w.sleeping.store(false, Ordering::SeqCst);
                    let now = w.seq.load(Ordering::Acquire);
                    if now != seen {
                        self.seen = now;
                        return Ok(true);
                    }
                    if stop.load(Ordering::Relaxed) {
                        return Ok(false);
                    }
                }
            }
            Kind::Fd { rd, eventfd, .. } => {
                let n = if *eventfd { 8 } else { 1 };
                let mut buf = [0u8; 8];
                if let Some(until) = spin_until {
                    set_nonblocking(rd, true);
                    loop {
                        // EAGAIN while nothing is there: spin on.
                        match rustix::io::read(rd, &mut buf[..n]) {
                            Ok(0) => return Ok(false),
                            Ok(_) => {
                                set_nonblocking(rd, false);
                                return Ok(true);
                            }
                            Err(_) => {}
                        }
                        if stop.load(Ordering::Relaxed) {
                            return Ok(false);
                        }
                        if until.is_some_and(|u| Instant::now() >= u) {
                            break;
                        }
                    }
                    set_nonblocking(rd, false);
                }
                loop {
                    match rustix::io::read(rd, &mut buf[..n]) {
                        Ok(0) => return Ok(false),
                        Ok(_) => return Ok(true),
                        Err(_) if stop.load(Ordering::Relaxed) => return Ok(false),
                        Err(rustix::io::Errno::INTR) => {}
                        Err(e) => return Err(format!("wait: {}", std::io::Error::from(e))),
                    }
                }
            }
        }
    }

    /// Wakes the peer out of any wait, for shutdown.
    pub fn close(&mut self) -> Result<(), String> {
        match &self.kind {
            Kind::Fd { wr, rd, .. } => {
                // Errors other than "not a socket" are irrelevant at teardown.
                use rustix::net::{shutdown, Shutdown};
                let socket = shutdown(wr, Shutdown::Both).is_ok();
                let _ = shutdown(rd, Shutdown::Both);
                if socket {
                    // The peer's receive now returns 0. Writing to the shut-down socket
                    // would raise SIGPIPE, which kills the process (`virtperf` restores the
                    // default disposition so `| head` ends quietly).
                    return Ok(());
                }
                // Pipes and eventfds cannot be shut down: send one more token instead.
                self.signal()
            }
            Kind::Mem(..) => self.signal(),
        }
    }
}
