//! What the agent refuses and whom it lets in (docs/security.md): no client can lock
//! others out of the control port or a data port, `--allow-drive` needs a token, errors
//! never relay another service's bytes, tokens stay off command lines, and the operator
//! can bound test length. Real agent processes, real sockets on loopback.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::{Duration, Instant};
use virtperf_wire::HttpParams;

use common::{assert_one_line_error, run_json, run_with_timeout, vp, Agent};
use virtperf_wire::{read_message, write_message, Message, Workload, PROTOCOL_VERSION};

/// A child process we started, killed (by its PID) when dropped, also when a test fails.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn hello(s: &mut TcpStream, token: Option<&str>) {
    write_message(
        s,
        &Message::Hello {
            version: PROTOCOL_VERSION,
            token: token.map(str::to_string),
            lock: None,
        },
    )
    .expect("send hello");
    match read_message(s) {
        Ok(Message::Welcome { .. }) => {}
        other => panic!("expected welcome, got {other:?}"),
    }
}

fn control(a: &Agent, token: Option<&str>) -> TcpStream {
    let mut s = TcpStream::connect(a.addr).expect("connect to agent");
    s.set_read_timeout(Some(Duration::from_secs(15)))
        .expect("timeout");
    hello(&mut s, token);
    s
}

/// Threads of a process we started, from /proc/PID/task.
fn threads(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("read /proc/PID/task")
        .count()
}

/// A TCP connection to `to` from 127.0.0.2: another address on this machine's loopback,
/// i.e. a stranger to a test whose client is at 127.0.0.1.
fn connect_from_stranger(to: SocketAddr) -> TcpStream {
    let s =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    s.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
        .expect("bind 127.0.0.2");
    s.connect_timeout(&to.into(), Duration::from_secs(5))
        .expect("connect");
    s.into()
}

/// True when the peer has closed `s` (EOF or reset) within `limit`.
fn closed_within(s: &mut TcpStream, limit: Duration) -> bool {
    s.set_read_timeout(Some(limit)).expect("timeout");
    let mut buf = [0u8; 64];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

#[test]
fn trickling_connections_neither_lock_out_a_real_client_nor_stay_open() {
    let a = Agent::start(&["--token", "sesame"]);
    // More connections than --max-clients (32), each sending its hello one byte a second:
    // a per-read timeout never fires, and counting them as clients fills every slot.
    let opened = Instant::now();
    let mut conns: Vec<TcpStream> = (0..40)
        .map(|_| TcpStream::connect(a.addr).expect("connect"))
        .collect();
    let writers: Vec<TcpStream> = conns
        .iter()
        .map(|c| c.try_clone().expect("clone"))
        .collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let trickler = std::thread::spawn(move || {
        // A frame announcing 256 bytes, then its body, one byte per connection per second.
        let mut frame = vec![0u8, 0, 1, 0];
        frame.extend(std::iter::repeat_n(b' ', 256));
        for byte in frame {
            for mut w in &writers {
                let _ = w.write_all(&[byte]);
            }
            for _ in 0..10 {
                if stop2.load(std::sync::atomic::Ordering::SeqCst) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));

    let t0 = Instant::now();
    let out = run_with_timeout(
        vp().args([
            "rr",
            "--host",
            "127.0.0.1",
            "--port",
            &a.port(),
            "--token",
            "sesame",
            "-l",
            "0.5",
            "--json",
        ]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "a real client was locked out: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "the real client waited {:?}",
        t0.elapsed()
    );

    // Each trickler is closed once the handshake deadline (5 s from connecting) passes,
    // however steadily it sends.
    for (i, c) in conns.iter_mut().enumerate() {
        let left = Duration::from_secs(9).saturating_sub(opened.elapsed());
        assert!(
            closed_within(c, left.max(Duration::from_millis(1))),
            "trickling connection {i} still open {:?} after connecting",
            opened.elapsed()
        );
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = trickler.join();
}

#[test]
fn strangers_on_a_data_port_are_closed_at_once_and_threads_stay_bounded() {
    let a = Agent::start(&["--token", "sesame"]);
    let pid = a.child.id();
    let before = threads(pid);

    // HTTP: the server must not start a thread per connection, and must serve only the
    // client whose control connection asked for the test.
    let mut ctl = control(&a, Some("sesame"));
    write_message(
        &mut ctl,
        &Message::Prepare {
            workload: Workload::Http(HttpParams { bytes: 1000 }),
            duration_ms: 0,
            server_cpu: None,
            sock: Default::default(),
            omit_ms: None,
        },
    )
    .expect("prepare");
    let port = match read_message(&mut ctl) {
        Ok(Message::Ready { data_port, .. }) => data_port,
        other => panic!("expected ready, got {other:?}"),
    };
    let data = SocketAddr::from(([127, 0, 0, 1], port));
    write_message(&mut ctl, &Message::Start).expect("start");
    assert!(matches!(read_message(&mut ctl), Ok(Message::Started)));
    let mut strangers: Vec<TcpStream> = (0..200).map(|_| connect_from_stranger(data)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let during = threads(pid);
    assert!(
        during <= before + 4,
        "{during} threads with 200 strangers connected (was {before})"
    );
    for (i, s) in strangers.iter_mut().enumerate() {
        assert!(
            closed_within(s, Duration::from_secs(3)),
            "stranger {i} was not closed"
        );
    }
    // The real client still downloads.
    let mut d = TcpStream::connect(data).expect("connect data");
    d.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("request");
    d.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut resp = Vec::new();
    d.read_to_end(&mut resp).expect("response");
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("Content-Length: 1000\r\n"), "{text}");
    let body = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| resp.len() - p - 4);
    assert_eq!(body, Some(1000));
    write_message(&mut ctl, &Message::Stop).expect("stop");
    match read_message(&mut ctl) {
        Ok(Message::Report { side }) => assert_eq!(side.transactions, 1),
        other => panic!("expected report, got {other:?}"),
    }

    // rr: strangers are closed, the client's connection is the one served, and once it
    // arrived the port takes nobody else.
    write_message(
        &mut ctl,
        &Message::Prepare {
            workload: Workload::rr(1, 1),
            duration_ms: 2000,
            server_cpu: None,
            sock: Default::default(),
            omit_ms: None,
        },
    )
    .expect("prepare");
    let (port, key) = match read_message(&mut ctl) {
        Ok(Message::Ready { data_port, key }) => (data_port, key),
        other => panic!("expected ready, got {other:?}"),
    };
    let key: Vec<u8> = (0..key.len() / 2)
        .map(|i| u8::from_str_radix(&key[2 * i..2 * i + 2], 16).expect("hex key"))
        .collect();
    assert_eq!(key.len(), virtperf_wire::DATA_KEY_LEN);
    let data = SocketAddr::from(([127, 0, 0, 1], port));
    for i in 0..5 {
        let mut s = connect_from_stranger(data);
        assert!(
            closed_within(&mut s, Duration::from_secs(3)),
            "rr stranger {i} was not closed"
        );
    }
    // From the client's own address, first to the port, but without the test's key (a
    // wrong one, or none at all): closed, and the test's one flow is still free.
    for wrong in [&[0u8; 16][..], &[]] {
        let mut h = TcpStream::connect(data).expect("connect as a hijacker");
        let _ = h.write_all(wrong);
        assert!(
            closed_within(&mut h, Duration::from_secs(5)),
            "a connection without the key was kept"
        );
    }
    let mut d = TcpStream::connect(data).expect("connect data");
    d.write_all(&key).expect("present the key");
    d.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write_message(&mut ctl, &Message::Start).expect("start");
    assert!(matches!(read_message(&mut ctl), Ok(Message::Started)));
    let mut b = [0u8; 1];
    for _ in 0..10 {
        d.write_all(b"x").expect("request");
        d.read_exact(&mut b).expect("response");
    }
    assert!(
        TcpStream::connect_timeout(&data, Duration::from_secs(2)).is_err(),
        "the rr data port accepted a connection beyond the test's one"
    );
    drop(d); // as a client does: its end of the data connection closes first
    write_message(&mut ctl, &Message::Stop).expect("stop");
    match read_message(&mut ctl) {
        Ok(Message::Report { side }) => assert_eq!(side.transactions, 10),
        other => panic!("expected report, got {other:?}"),
    }

    // crr: a connection per transaction, so the port stays open for the test's length;
    // a stranger's connection is closed unanswered and adds no transaction.
    write_message(
        &mut ctl,
        &Message::Prepare {
            workload: Workload::crr(1, 1),
            duration_ms: 2000,
            server_cpu: None,
            sock: Default::default(),
            omit_ms: None,
        },
    )
    .expect("prepare");
    let port = match read_message(&mut ctl) {
        Ok(Message::Ready { data_port, .. }) => data_port,
        other => panic!("expected ready, got {other:?}"),
    };
    let data = SocketAddr::from(([127, 0, 0, 1], port));
    write_message(&mut ctl, &Message::Start).expect("start");
    assert!(matches!(read_message(&mut ctl), Ok(Message::Started)));
    for i in 0..5 {
        let mut s = connect_from_stranger(data);
        let _ = s.write_all(b"x");
        assert!(
            closed_within(&mut s, Duration::from_secs(3)),
            "crr stranger {i} was not closed"
        );
    }
    for _ in 0..3 {
        let mut d = TcpStream::connect(data).expect("connect data");
        d.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        d.write_all(b"x").expect("request");
        d.read_exact(&mut b).expect("response");
    }
    write_message(&mut ctl, &Message::Stop).expect("stop");
    match read_message(&mut ctl) {
        Ok(Message::Report { side }) => assert_eq!(side.transactions, 3),
        other => panic!("expected report, got {other:?}"),
    }
}

#[test]
fn allow_drive_needs_a_token() {
    let out = run_with_timeout(
        vp().args(["serve", "--port", "0", "--allow-drive"])
            .env_remove("VIRTPERF_TOKEN"),
        Duration::from_secs(10),
    );
    assert_eq!(out.status.code(), Some(2));
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "token");
    // With one (here from the environment), it starts.
    let mut child = Kill(
        vp().args(["serve", "--port", "0", "--announce", "--allow-drive"])
            .env("VIRTPERF_TOKEN", "t0ken")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    drop(child);
    assert!(line.starts_with("listening on "), "{line:?}");
}

#[test]
fn an_error_after_driving_against_a_foreign_service_holds_none_of_its_bytes() {
    // Two "services" that send a banner on connect: an SSH-like one (its first four bytes
    // read as a frame length) and one whose bytes parse as a frame holding a secret.
    let mut json_banner = vec![0u8, 0, 0, 32];
    json_banner.extend_from_slice(br#"{"type":"hunter2-secret-banner"}"#);
    assert_eq!(json_banner.len(), 36);
    let banners: Vec<Vec<u8>> = vec![
        b"SSH-2.0-OpenSSH_9.6 hunter2-secret-banner\r\n".to_vec(),
        json_banner,
    ];
    let driver = Agent::start(&["--token", "d", "--allow-drive"]);
    for banner in banners {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let b = banner.clone();
        let svc = std::thread::spawn(move || {
            if let Ok((mut s, _)) = l.accept() {
                let _ = s.write_all(&b);
                std::thread::sleep(Duration::from_millis(500));
            }
        });
        let mut s = control(&driver, Some("d"));
        write_message(
            &mut s,
            &Message::Drive {
                to: virtperf_wire::DriveTarget {
                    host: "127.0.0.1".into(),
                    port,
                    token: None,
                    lock: None,
                },
                plan: virtperf_wire::DrivePlan::new(Workload::rr(1, 1), 300),
            },
        )
        .expect("drive");
        let message = match read_message(&mut s) {
            Ok(Message::Error { message }) => message,
            other => panic!("expected an error, got {other:?}"),
        };
        let _ = svc.join();
        let length = u32::from_be_bytes([banner[0], banner[1], banner[2], banner[3]]);
        // The address the agent names is ours to print; its port's digits (32999) must not
        // read as the banner's length (32).
        let scrubbed: String = message
            .split_whitespace()
            .filter(|w| !w.contains("127.0.0.1:"))
            .collect::<Vec<_>>()
            .join(" ");
        for leak in ["SSH", "OpenSSH", "hunter2", "secret", &length.to_string()] {
            assert!(
                !scrubbed.contains(leak),
                "error {message:?} relays the service's bytes ({leak:?})"
            );
        }
        assert!(
            message.contains("does not speak the virtperf protocol"),
            "{message}"
        );
    }
}

#[test]
fn tokens_come_from_the_environment_or_a_file() {
    let dir = std::env::temp_dir().join(format!("vp-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("token");
    std::fs::write(&file, "from-a-file\n").expect("write");
    let file = file.to_string_lossy().into_owned();

    // Agent token from $VIRTPERF_TOKEN; clients with it in the environment, a file, a flag.
    let mut child = Kill(
        vp().args(["serve", "--port", "0", "--announce", "--quiet"])
            .env("VIRTPERF_TOKEN", "from-a-file")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let port = line.trim().rsplit(':').next().expect("port").to_string();
    let env = |extra: &[&str], token_env: Option<&str>| {
        let mut c = vp();
        c.args(["env", "--host", "127.0.0.1", "--port", &port, "--json"])
            .args(extra)
            .env_remove("VIRTPERF_TOKEN");
        if let Some(t) = token_env {
            c.env("VIRTPERF_TOKEN", t);
        }
        run_with_timeout(&mut c, Duration::from_secs(30))
    };
    assert!(env(&[], Some("from-a-file")).status.success());
    assert!(env(&["--token-file", &file], None).status.success());
    let out = env(&[], None);
    assert!(!out.status.success());
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "token");
    drop(child);

    // Agent token from a file, and from standard input's first line (what ssh: uses).
    let a = Agent::start(&["--token-file", &file]);
    let v = run_json(&[
        "env",
        "--host",
        "127.0.0.1",
        "--port",
        &a.port(),
        "--token",
        "from-a-file",
    ]);
    assert!(v["cpus"].as_u64().is_some());
    let mut child = Kill(
        vp().args([
            "serve",
            "--port",
            "0",
            "--announce",
            "--quiet",
            "--exit-on-eof",
            "--token-file",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn"),
    );
    let mut stdin = child.0.stdin.take().expect("stdin");
    stdin.write_all(b"via-stdin\n").expect("write token");
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("read");
    let port = line.trim().rsplit(':').next().expect("port").to_string();
    let ok = run_with_timeout(
        vp().args([
            "env",
            "--host",
            "127.0.0.1",
            "--port",
            &port,
            "--token",
            "via-stdin",
            "--json",
        ]),
        Duration::from_secs(30),
    );
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    drop(stdin); // --exit-on-eof: the agent ends with its stdin
    let t0 = Instant::now();
    while child.0.try_wait().expect("wait").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "agent outlived its stdin"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// PIDs of the children of `parent` (from /proc/*/stat).
fn children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid …": comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

#[test]
fn the_private_agents_token_is_not_on_its_command_line() {
    let client = Kill(
        vp().args(["rr", "-l", "3s", "--json"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn"),
    );
    let t0 = Instant::now();
    let agent = loop {
        let serving = children(client.0.id()).into_iter().find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == b"serve"))
        });
        if let Some(p) = serving {
            break p;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "no private agent appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let cmdline = std::fs::read(format!("/proc/{agent}/cmdline")).expect("cmdline");
    let environ = std::fs::read(format!("/proc/{agent}/environ")).expect("environ");
    drop(client);
    let token = environ
        .split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(b"VIRTPERF_TOKEN=".as_slice()))
        .map(|t| String::from_utf8_lossy(t).into_owned())
        .expect("the agent got its token in the environment");
    assert_eq!(token.len(), 32, "a 128-bit hex token: {token}");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        !cmdline.contains(&token),
        "token on the command line: {cmdline}"
    );
    assert!(!cmdline.contains("--token"), "{cmdline}");
}

#[test]
fn the_operator_bounds_test_length() {
    let a = Agent::start(&["--max-duration", "2s"]);
    let out = run_with_timeout(
        vp().args(["rr", "--host", "127.0.0.1", "--port", &a.port(), "-l", "5s"]),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_one_line_error(&String::from_utf8_lossy(&out.stderr), "limit of 2s");
    let v = run_json(&[
        "rr",
        "--host",
        "127.0.0.1",
        "--port",
        &a.port(),
        "-l",
        "0.5",
    ]);
    assert!(v["outcome"]["transactions"].as_u64().unwrap_or(0) > 0);
    // A limit above the protocol's own (24 h) or of zero is a usage error.
    for bad in ["25h", "0s"] {
        let out = run_with_timeout(
            vp().args(["serve", "--port", "0", "--max-duration", bad]),
            Duration::from_secs(10),
        );
        assert_eq!(out.status.code(), Some(2), "--max-duration {bad}");
    }
}

#[test]
fn the_ssh_agents_token_is_on_no_command_line() {
    // A stand-in for ssh that runs the remote command here and records every command line
    // it was given: what a real ssh shows in `ps` locally, and what becomes the command
    // line of the shell and the agent on the remote host.
    let dir = std::env::temp_dir().join(format!("vp-fakessh-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let log = dir.join("argv.log");
    let script = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nfor a; do last=$a; done\n\
         SSH_CONNECTION='127.0.0.1 50000 127.0.0.1 22' exec sh -c \"$last\"\n",
        log.display()
    );
    let ssh = dir.join("ssh");
    std::fs::write(&ssh, script).expect("write fake ssh");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = run_with_timeout(
        vp().args([
            "rr",
            "--placement",
            "ssh:me@localhost",
            "-l",
            "0.5",
            "--json",
        ])
        .env("PATH", &path),
        Duration::from_secs(60),
    );
    let argv = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "ssh placement through the stand-in failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON result");
    assert!(v["outcome"]["transactions"].as_u64().unwrap_or(0) > 0);
    assert!(argv.contains("serve --bind-ssh"), "{argv}");
    // No word of any command line is a 128-bit hex token.
    for word in argv.split_whitespace() {
        assert!(
            !(word.len() == 32 && word.bytes().all(|b| b.is_ascii_hexdigit())),
            "a token on the ssh command line: {argv}"
        );
    }
}

#[test]
fn past_64_waiting_connections_the_oldest_is_closed_first() {
    let a = Agent::start(&["--token", "sesame"]);
    let mut conns: Vec<TcpStream> = (0..70)
        .map(|_| TcpStream::connect(a.addr).expect("connect"))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    // The six oldest made room for the newest, long before the 5 s handshake deadline.
    for (i, c) in conns.iter_mut().take(6).enumerate() {
        assert!(
            closed_within(c, Duration::from_secs(2)),
            "silent connection {i} was not closed to make room"
        );
    }
    // The newest are still waiting (they have seconds left), and a real client gets in.
    assert!(!closed_within(&mut conns[69], Duration::from_millis(200)));
    let mut s = control(&a, Some("sesame"));
    write_message(&mut s, &Message::Fingerprint).expect("fingerprint");
    assert!(matches!(read_message(&mut s), Ok(Message::Env { .. })));
}
