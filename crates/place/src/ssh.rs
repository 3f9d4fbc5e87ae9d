//! `--placement ssh:USER@HOST[:PORT]`: copy this very binary to a host over SSH (OpenSSH),
//! start the agent there, run the client here, and remove everything afterwards.
//!
//! The binary is streamed through `ssh … cat >` rather than scp so one tool does everything;
//! for a host with another libc use the static musl build. The agent binds the address the
//! SSH connection arrived on (from `$SSH_CONNECTION` on the remote side), not every address,
//! and requires a random token, which travels as the first line of the channel's standard
//! input (`--token-file -`), so neither the ssh command line here nor the agent's there
//! shows it in `ps`; it exits when the SSH channel closes.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use std::sync::mpsc;
use std::time::Duration;
use virtperf_machine::children::Tracked;

use anyhow::{anyhow, bail, Context, Result};
use virtperf_wire::TestResult;

use virtperf_lab::plan::{Plan, ProgressFn, Target};

/// Where to log in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// `user@host` as given to ssh.
    pub dest: String,
    /// SSH port, if not 22.
    pub port: Option<u16>,
    /// Identity file, if not the user's default.
    pub identity: Option<PathBuf>,
    /// Extra `-o KEY=VALUE` options for ssh.
    pub options: Vec<String>,
}

impl SshTarget {
    /// Parses `USER@HOST[:PORT]` (the text after `ssh:`).
    pub fn parse(s: &str, identity: Option<PathBuf>) -> Result<SshTarget> {
        let (dest, port) = match s.rsplit_once(':') {
            Some((d, p)) if !d.contains(']') || d.ends_with(']') => (
                d.to_string(),
                Some(
                    p.parse::<u16>()
                        .map_err(|_| anyhow!("invalid SSH port in {s:?}"))?,
                ),
            ),
            _ => (s.to_string(), None),
        };
        if dest.is_empty() || dest.starts_with('-') {
            bail!("invalid SSH destination {s:?}: expected USER@HOST[:PORT]");
        }
        Ok(SshTarget {
            dest,
            port,
            identity,
            options: Vec::new(),
        })
    }

    fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        // BatchMode: never prompt (a prompt would hang a benchmark); accept-new: first contact
        // with a host records its key instead of failing.
        c.args([
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=accept-new",
            "-o",
            "ConnectTimeout=10",
        ]);
        if let Some(p) = self.port {
            c.args(["-p", &p.to_string()]);
        }
        if let Some(i) = &self.identity {
            c.arg("-i").arg(i);
        }
        for o in &self.options {
            c.args(["-o", o]);
        }
        c.arg(&self.dest);
        c
    }

    fn run(&self, remote: &str) -> Result<()> {
        let out = self
            .ssh()
            .arg(remote)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| anyhow!("cannot run ssh (apt-get install openssh-client): {e}"))?;
        if !out.status.success() {
            bail!(
                "ssh {}: `{remote}` failed: {}",
                self.dest,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
                    .trim()
            );
        }
        Ok(())
    }
}

/// An agent running on a remote host over SSH; stopped and removed on drop.
pub struct RemoteAgent {
    target: SshTarget,
    child: Tracked,
    dir: String,
    /// The agent's control address as seen from here.
    pub addr: SocketAddr,
    /// Its token.
    pub token: String,
}

impl RemoteAgent {
    /// Copies this binary to `target` and starts the agent there with a random token.
    pub fn start(target: &SshTarget) -> Result<RemoteAgent> {
        let token = crate::local::random_token()?;
        let exe = std::env::current_exe().context("finding our own executable")?;
        let dir = format!("/tmp/virtperf-{}", std::process::id());
        let bin = std::fs::File::open(&exe).context("reading our own executable")?;
        let out = target
            .ssh()
            .arg(format!(
                "mkdir -p {dir} && cat > {dir}/virtperf && chmod 700 {dir}/virtperf"
            ))
            .stdin(Stdio::from(bin))
            .output()
            .map_err(|e| anyhow!("cannot run ssh (apt-get install openssh-client): {e}"))?;
        if !out.status.success() {
            bail!(
                "cannot copy virtperf to {}: {}",
                target.dest,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("ssh failed")
                    .trim()
            );
        }
        let mut cmd = target.ssh();
        cmd.arg(format!(
                "{dir}/virtperf serve --bind-ssh --port 0 --announce --exit-on-eof --quiet --token-file -"
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = Tracked::spawn(&mut cmd, "ssh to the agent")
            .map_err(|e| anyhow!("cannot run ssh: {e}"))?;
        // The token is the channel's first line; the rest of stdin stays open (the agent
        // exits when it closes).
        let sent = match child.stdin.as_mut() {
            Some(stdin) => stdin
                .write_all(format!("{token}\n").as_bytes())
                .and_then(|()| stdin.flush()),
            None => Err(std::io::ErrorKind::BrokenPipe.into()),
        };
        if let Err(e) = sent {
            let _ = child.kill();
            let _ = child.wait();
            bail!("cannot pass the token to the agent on {}: {e}", target.dest);
        }
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow!("ssh has no stdout"))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| anyhow!("ssh has no stderr"))?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut agent = RemoteAgent {
            target: target.clone(),
            child,
            dir,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            token,
        };
        let line = rx.recv_timeout(Duration::from_secs(20)).unwrap_or_default();
        match line
            .trim()
            .strip_prefix("listening on ")
            .and_then(|a| a.parse().ok())
        {
            Some(a) => agent.addr = a,
            None => {
                let _ = agent.child.kill();
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut err);
                bail!(
                    "the agent on {} did not start: {}",
                    target.dest,
                    err.lines().last().unwrap_or(line.trim()).trim()
                );
            }
        }
        Ok(agent)
    }
}

impl RemoteAgent {
    /// Where clients reach it, with its token.
    pub fn target(&self) -> Target {
        Target::at(self.addr, &self.token)
    }
}

use std::os::unix::process::CommandExt;

impl Drop for RemoteAgent {
    fn drop(&mut self) {
        // Closing the channel ends the agent (--exit-on-eof); then remove the copy.
        self.child.stop();
        let _ = self.target.run(&format!("rm -rf {}", self.dir));
    }
}

/// `--placement ssh:USER@HOST[:PORT]`: the agent started over SSH, the client half here.
pub struct SshSite {
    agent: RemoteAgent,
    label: String,
}

impl SshSite {
    /// Copies this binary to `target` and starts the agent there. Results carry `label`.
    pub fn open(target: &SshTarget, label: String) -> Result<SshSite> {
        Ok(SshSite {
            agent: RemoteAgent::start(target)?,
            label,
        })
    }
}

impl super::Site for SshSite {
    fn target(&self) -> Target {
        self.agent.target()
    }

    fn run(&self, plan: &Plan, progress: ProgressFn) -> Result<TestResult> {
        let mut r = virtperf_lab::client::run(&self.agent.target(), plan, progress)?;
        r.placement = Some(self.label.clone());
        Ok(r)
    }

    /// Its agent is an agent elsewhere once started: held for the pair, as a remote one.
    fn run_beside(
        &self,
        background: &Plan,
        foreground: &Plan,
        lead: std::time::Duration,
    ) -> Result<(TestResult, Result<TestResult>)> {
        super::remote::RemoteSite::new(self.agent.target(), Some(self.label.clone()))
            .run_beside(background, foreground, lead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let t = SshTarget::parse("root@10.0.0.2:2222", None).unwrap();
        assert_eq!((t.dest.as_str(), t.port), ("root@10.0.0.2", Some(2222)));
        let t = SshTarget::parse("me@host", None).unwrap();
        assert_eq!((t.dest.as_str(), t.port), ("me@host", None));
        assert!(SshTarget::parse("-oProxyCommand=x", None).is_err());
        assert!(SshTarget::parse("a@b:port", None).is_err());
    }
}
