//! `--placement ssh:` for real: sshd runs in a network namespace this test creates, with a
//! host key and an authorized key the test generates; virtperf runs in a second namespace,
//! copies itself over SSH, starts the agent there, measures, and removes its copy.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};

fn sh(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .status()
        .is_ok_and(|s| s.success())
}

/// What the SSH test builds: sshd, its namespaces, its key directory. Dropping it tears all
/// of it down, so a failing assertion leaves nothing behind either.
struct Lab {
    sshd: Option<std::process::Child>,
    namespaces: Vec<String>,
    dir: std::path::PathBuf,
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(child) = &mut self.sshd {
            let _ = child.kill();
            let _ = child.wait();
        }
        for ns in &self.namespaces {
            sh(&["ip", "netns", "del", ns]);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn ssh_placement_copies_itself_runs_the_agent_and_cleans_up() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        virtperf_testkit::skip("root", "needs root to create namespaces and run sshd");
        return;
    }
    if !Path::new("/usr/sbin/sshd").exists() {
        virtperf_testkit::skip(
            "sshd",
            "sshd not installed (apt-get install openssh-server)",
        );
        return;
    }
    let pid = std::process::id();
    let dir = std::env::temp_dir().join(format!("vp-ssh-{pid}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    for key in ["hostkey", "userkey"] {
        assert!(sh(&[
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-f",
            &p(key)
        ]));
    }
    std::fs::copy(p("userkey.pub"), p("authorized_keys")).unwrap();
    let _ = std::fs::create_dir_all("/run/sshd"); // sshd's privilege-separation directory
    let (c, s) = (format!("vp-{pid}-9-cli"), format!("vp-{pid}-9-srv"));
    // Torn down on every exit path, a panicking assertion included.
    let mut lab = Lab {
        sshd: None,
        namespaces: Vec::new(),
        dir: dir.clone(),
    };
    for ns in [&c, &s] {
        assert!(
            sh(&["ip", "netns", "add", ns]),
            "cannot create namespace {ns}"
        );
        lab.namespaces.push(ns.clone());
    }
    let ok = sh(&["ip", "-n", &c, "link", "set", "lo", "up"])
        && sh(&["ip", "-n", &s, "link", "set", "lo", "up"])
        && sh(&[
            "ip", "link", "add", "vpc0", "netns", &c, "type", "veth", "peer", "name", "vps0",
            "netns", &s,
        ])
        && sh(&["ip", "-n", &c, "addr", "add", "10.99.0.1/24", "dev", "vpc0"])
        && sh(&["ip", "-n", &s, "addr", "add", "10.99.0.2/24", "dev", "vps0"])
        && sh(&["ip", "-n", &c, "link", "set", "vpc0", "up"])
        && sh(&["ip", "-n", &s, "link", "set", "vps0", "up"]);
    assert!(ok, "could not build the test namespaces");
    // The server "host" has a machine lock of its own (a private /run/virtperf), as a
    // machine across a network would: its agent runs one test at a time under it.
    let sshd = Command::new("ip")
        .args(["netns", "exec", &s])
        .args(common::OWN_LOCK)
        .args(["/usr/sbin/sshd", "-D", "-e", "-f", "/dev/null"])
        .args(["-o", &format!("HostKey={}", p("hostkey"))])
        .args([
            "-o",
            &format!("AuthorizedKeysFile={}", p("authorized_keys")),
        ])
        .args([
            "-o",
            "ListenAddress=10.99.0.2",
            "-o",
            "PermitRootLogin=prohibit-password",
        ])
        .args(["-o", "StrictModes=no", "-o", "PidFile=none"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    lab.sshd = Some(sshd);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let exe = env!("CARGO_BIN_EXE_virtperf");
    let out = Command::new("ip")
        .args(["netns", "exec", &c, exe, "rr", "-l", "0.5", "--json"])
        .args([
            "--placement",
            "ssh:root@10.99.0.2",
            "--ssh-key",
            &p("userkey"),
        ])
        // The test's own known_hosts: nothing is written to the user's ~/.ssh.
        .args([
            "--ssh-opt",
            &format!("UserKnownHostsFile={}", p("known_hosts")),
        ])
        .output()
        .unwrap();
    // rr under load over ssh: the site holds the agent's machine for each loaded trial,
    // so the rr does not queue behind the streams.
    let loaded = Command::new("ip")
        .args([
            "netns",
            "exec",
            &c,
            exe,
            "rr",
            "--under-load",
            "streams=1,pairs=1",
        ])
        .args(["-l", "500ms", "--json", "--placement", "ssh:root@10.99.0.2"])
        .args(["--ssh-key", &p("userkey")])
        .args([
            "--ssh-opt",
            &format!("UserKnownHostsFile={}", p("known_hosts")),
        ])
        .output()
        .unwrap();
    // The same placement as a config of an experiment spec, with its ssh table.
    let spec = dir.join("s.toml");
    std::fs::write(
        &spec,
        format!(
            "name = \"over-ssh\"\nduration = \"300ms\"\nrepetitions = 2\n[[workload]]\nkind = \"rr\"\n\
             [[config]]\nname = \"there\"\nplacement = \"ssh:root@10.99.0.2\"\n\
             ssh = {{ key = {:?}, options = [{:?}] }}\n",
            p("userkey"),
            format!("UserKnownHostsFile={}", p("known_hosts"))
        ),
    )
    .unwrap();
    let db = p("r.db");
    let run = Command::new("ip")
        .args(["netns", "exec", &c, exe, "run", &p("s.toml"), "--db", &db])
        .output()
        .unwrap();
    let show = Command::new(exe)
        .args(["show", "1", "--format", "json", "--db", &db])
        .output()
        .unwrap();
    drop(lab);
    let run_err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(run.status.success(), "{run_err}");
    let shown: serde_json::Value = serde_json::from_slice(&show.stdout).unwrap();
    let text = shown.to_string();
    assert!(text.contains("\"there\""), "{text}");
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("(complete)"),
        "{}",
        String::from_utf8_lossy(&run.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["placement"], "ssh:root@10.99.0.2");
    let loaded_err = String::from_utf8_lossy(&loaded.stderr).into_owned();
    assert!(loaded.status.success(), "{loaded_err}");
    assert!(
        !loaded_err.contains("waiting for another measurement"),
        "the rr queued behind the streams: {loaded_err}"
    );
    let l: serde_json::Value = serde_json::from_slice(&loaded.stdout).unwrap();
    assert_eq!(l["loaded"][0]["placement"], "ssh:root@10.99.0.2", "{l}");
    assert!(
        l["stream_mbps"][0].as_f64() > Some(0.0),
        "{}",
        l["stream_mbps"]
    );
    assert!(v["target"].as_str().unwrap().starts_with("10.99.0.2:"));
    assert!(v["outcome"]["transactions"].as_u64().unwrap() > 10);
    // The copy lived in /tmp/virtperf-<pid of the client>; the namespaces share our /tmp.
    let leftovers: Vec<_> = std::fs::read_dir("/tmp")
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_prefix("virtperf-")
                .is_some_and(|r| r.chars().all(|c| c.is_ascii_digit()))
                && e.path().join("virtperf").exists()
        })
        .collect();
    assert!(
        leftovers.is_empty(),
        "remote copy left behind: {leftovers:?}"
    );
}

#[test]
fn bad_ssh_destinations_are_refused() {
    let (code, err) = common::run_fail(&["rr", "--placement", "ssh:-oProxyCommand=x"]);
    assert_eq!(code, 2);
    common::assert_one_line_error(&err, "ssh destination");
}
