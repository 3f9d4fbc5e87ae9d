//! unix-rr: request/response over one AF_UNIX socket (stream, or seqpacket), both ends on
//! one machine and in one network namespace: message passing without the TCP/IP stack, on
//! the rr loops (`load::rr`). The agent listens on an abstract socket named after the test's
//! key (abstract names belong to a network namespace: nothing elsewhere can reach it) and
//! the client presents the key first, as on a TCP data connection.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use socket2::{Domain, SockAddr, Socket, Type};
use virtperf_load::interval::Meter;
use virtperf_load::{rr, Exchange, Sink};
use virtperf_wire::{Outcome, SideReport, UnixRrParams, Workload, DATA_KEY_LEN};

use super::role::Role;
use crate::assemble::outcome::{rr_outcome, Collected};
use crate::half::{ClientHalf, Handles, ServerHalf};
use crate::side::{spawn_conn_worker, DataKey};
use crate::{DATA_TIMEOUT, SETUP_TIMEOUT};

/// How long the client retries a refused connect: the agent announces the test before it
/// binds its socket (microseconds later); a refusal past this means another machine.
const BIND_WAIT: Duration = Duration::from_secs(2);

impl Role for UnixRrParams {
    fn client(&self, c: &ClientHalf, meter: &mut dyn FnMut() -> Arc<Meter>) -> Result<Handles> {
        if !c.sock.is_default() {
            bail!("unix-rr's socket is AF_UNIX: drop the TCP/IP socket options (--nodelay, --sndbuf, --congestion, …)");
        }
        let mut s = connect(self.seqpacket, &c.key)?;
        c.key
            .present(&mut s)
            .context("presenting the test's key on the local socket")?;
        let x = Exchange::new(self.request, self.response, self.client_wait);
        let m = meter();
        Ok(vec![spawn_conn_worker(
            "unix-rr-client",
            c.side,
            s,
            move |c, hist, s| {
                let out = Sink {
                    stop: &c.stop,
                    hist,
                    meter: &m,
                };
                rr::client_paced(s, x, rr::Pace::BackToBack, out)
            },
        )?])
    }

    fn server(&self, s: ServerHalf) -> Result<Handles> {
        // The TCP data listener goes unused (and closes here): the data path is local.
        let ServerHalf { side, key, .. } = s;
        let l = socket(self.seqpacket)?;
        l.bind(&address(&key)?)
            .context("binding unix-rr's local socket")?;
        l.listen(8)?;
        let conn = accept_keyed(&l, &key)?;
        let x = Exchange::new(self.request, self.response, self.server_wait);
        Ok(vec![spawn_conn_worker(
            "unix-rr-server",
            side,
            conn,
            move |c, _, s| rr::server_waiting(s, x.request, x.response, x.wait, &c.stop),
        )?])
    }

    fn outcome(&self, c: &Collected, server: &SideReport, warnings: &mut Vec<String>) -> Outcome {
        Outcome::Rr(rr_outcome(c, server, warnings))
    }
}

/// The test's abstract socket name (`@virtperf-unix-rr-<key>`).
fn address(key: &DataKey) -> Result<SockAddr> {
    Ok(SockAddr::unix(format!("\0virtperf-unix-rr-{}", key.hex()))?)
}

fn socket(seqpacket: bool) -> Result<Socket> {
    let ty = if seqpacket {
        Type::SEQPACKET
    } else {
        Type::STREAM
    };
    Socket::new(Domain::UNIX, ty, None).context("creating an AF_UNIX socket")
}

/// Connects to the agent's socket, retrying a refusal for [`BIND_WAIT`].
fn connect(seqpacket: bool, key: &DataKey) -> Result<UnixStream> {
    let addr = address(key)?;
    let start = Instant::now();
    loop {
        let s = socket(seqpacket)?;
        match s.connect(&addr) {
            Ok(()) => {
                let s = UnixStream::from(OwnedFd::from(s));
                s.set_read_timeout(Some(DATA_TIMEOUT))?;
                s.set_write_timeout(Some(DATA_TIMEOUT))?;
                return Ok(s);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::ConnectionRefused
                    && start.elapsed() < BIND_WAIT =>
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => bail!(
                "cannot reach the agent's local socket ({e}): unix-rr needs both ends on one machine and in one network namespace (placement local, or guest:loopback)"
            ),
        }
    }
}

/// Accepts the one connection that presents `key` within the set-up time; any other is
/// closed and takes no place.
fn accept_keyed(l: &Socket, key: &DataKey) -> Result<UnixStream> {
    let start = Instant::now();
    loop {
        let left = SETUP_TIMEOUT.saturating_sub(start.elapsed());
        if left.is_zero() {
            bail!("no unix-rr client presented the test's key within {SETUP_TIMEOUT:?}");
        }
        // accept(2) honours the receive timeout: the wait is bounded.
        l.set_read_timeout(Some(left))?;
        let (s, _) = match l.accept() {
            Ok(a) => a,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("waiting for the unix-rr client"),
        };
        let mut s = UnixStream::from(OwnedFd::from(s));
        s.set_read_timeout(Some(Duration::from_secs(2)))?;
        let mut got = [0u8; DATA_KEY_LEN];
        if s.read_exact(&mut got).is_ok() && key.is(&got) {
            s.set_read_timeout(Some(DATA_TIMEOUT))?;
            s.set_write_timeout(Some(DATA_TIMEOUT))?;
            return Ok(s);
        }
    }
}

/// The keys unix-rr's `[[workload]]` table in a spec file takes (besides `kind`, `label`,
/// `duration`, `omit`).
pub(super) const KEYS: &[&str] = &["size", "cpus", "wait", "interval", "trace", "seqpacket"];

/// unix-rr's `Workload` from a spec point's (or the command line's) parameters.
pub fn from_params(p: &super::role::Params) -> Workload {
    Workload::UnixRr(UnixRrParams {
        request: p.size.0,
        response: p.size.1,
        client_wait: p.wait.0,
        server_wait: p.wait.1,
        seqpacket: p.seqpacket,
    })
}
