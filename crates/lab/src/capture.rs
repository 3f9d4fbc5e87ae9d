//! `--capture FILE`: record a test's own traffic with tcpdump while it runs, so
//! `virtperf pcap FILE` can analyze it afterwards.
//!
//! tcpdump (libpcap) does the capturing because it is the reference tool and needs no
//! privileges beyond what the user already has for capturing; we start it by PID, limit it
//! to the test's data port, wait until it is listening, and stop it with SIGINT so it
//! flushes and closes the file.

use std::io::{BufRead, BufReader};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use rustix::process::{kill_process, Pid, Signal};
use virtperf_machine::children::Tracked;

/// A running tcpdump; stopped (SIGINT, then wait) when dropped.
pub struct Capture {
    child: Tracked,
    /// File being written.
    pub path: PathBuf,
}

impl Capture {
    /// Starts capturing TCP traffic to or from `port` on the interface that reaches `ip`
    /// (`lo` for loopback, otherwise any interface).
    pub fn start(path: &Path, ip: IpAddr, port: u16) -> Result<Capture> {
        let iface = if ip.is_loopback() { "lo" } else { "any" };
        let mut cmd = Command::new("tcpdump");
        cmd
            // --immediate-mode: deliver packets as they arrive instead of in ring-buffer
            // blocks, so a short test's packets are not still in the kernel when we stop.
            .args([
                "-i",
                iface,
                "-n",
                "-s",
                "128",
                "-U",
                "--immediate-mode",
                "-w",
            ])
            .arg(path)
            .arg(format!("tcp port {port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = Tracked::spawn(&mut cmd, "tcpdump").map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                anyhow!("--capture needs tcpdump, which is not installed (apt-get install tcpdump)")
            }
            _ => anyhow!("cannot start tcpdump: {e}"),
        })?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow!("tcpdump has no stderr"))?;
        // tcpdump says "listening on …" once the capture is live; traffic before that would
        // be missed, so wait for it (bounded).
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stderr).lines();
            let mut first = true;
            for line in lines.by_ref().map_while(Result::ok) {
                if first {
                    let _ = tx.send(line);
                    first = false;
                }
            }
        });
        let mut cap = Capture {
            child,
            path: path.to_path_buf(),
        };
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if line.contains("listening on") => Ok(cap),
            Ok(line) => {
                let _ = cap.child.wait();
                Err(anyhow!("tcpdump failed: {line}"))
            }
            Err(_) => Err(anyhow!("tcpdump did not start capturing within 10 s"))
                .with_context(|| format!("capturing to {}", path.display())),
        }
    }

    /// tcpdump's process ID, while it runs.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the capture and waits for tcpdump to close the file.
    pub fn stop(mut self) -> Result<()> {
        self.interrupt()
    }

    fn interrupt(&mut self) -> Result<()> {
        // A moment for the last packets (the FIN exchange) to reach tcpdump.
        std::thread::sleep(Duration::from_millis(100));
        // The PID is a child we started and have not yet reaped, so it is still ours.
        if let Some(pid) = Pid::from_raw(self.child.id() as i32) {
            let _ = kill_process(pid, Signal::INT);
        }
        for _ in 0..100 {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        Err(anyhow!("tcpdump did not stop on SIGINT; killed it"))
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.interrupt();
        }
    }
}
