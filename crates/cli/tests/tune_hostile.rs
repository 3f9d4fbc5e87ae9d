//! Issue 53, tune's share: files written only where asked and only as asked, emitted
//! specs that `run` takes, tuned profiles that cannot leak or hang, and a search that
//! measured nothing saying so with its own exit code.

use crate::common;

use std::time::{Duration, Instant};

use common::{assert_one_line_error, run_with_timeout, vp, TempDir};

/// virtperf with `dir`'s database and state.
fn in_dir(dir: &TempDir) -> std::process::Command {
    let mut c = vp();
    c.env("VIRTPERF_DB", dir.path("r.db"));
    c.env("VIRTPERF_STATE_DIR", dir.path("state"));
    c
}

/// A symlink planted at `--out` (to a file standing in for /etc/passwd) is refused before
/// any search runs (it exists: exit 2), and the file it points to is untouched; a
/// directory that does not exist is found before the search too.
#[test]
fn emit_out_never_writes_through_a_symlink_and_is_checked_first() {
    let dir = TempDir::new("tune-out");
    let victim = dir.path("passwd");
    std::fs::write(&victim, "root:x:0:0::/root:/bin/sh\n").unwrap();
    let link = dir.path("link.conf");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for (out, says) in [
        (link.clone(), "exists: give --force"),
        (dir.path("no/such/dir/x.conf"), "does not exist"),
    ] {
        let t0 = Instant::now();
        let o = run_with_timeout(
            in_dir(&dir)
                .args(["tune", "--goal", "p50<=5us", "--emit", "sysctl.d", "--out"])
                .arg(&out),
            Duration::from_secs(60),
        );
        assert_eq!(
            o.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_one_line_error(&String::from_utf8_lossy(&o.stderr), says);
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the search ran first"
        );
    }
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "root:x:0:0::/root:/bin/sh\n"
    );
}

/// A goal the machine as it is meets: the pick is the baseline, and `--emit spec` writes
/// a spec `virtperf run` takes (it was refused: the baseline defined twice).
#[test]
fn an_emitted_spec_of_a_baseline_pick_runs() {
    let dir = TempDir::new("tune-spec");
    let spec = dir.path("pick.toml");
    let o = run_with_timeout(
        in_dir(&dir)
            .args([
                "tune", "--goal", "p50<=1s", "--only", "spin", "-l", "300ms", "--runs", "2",
                "--budget", "1m", "--emit", "spec", "--out",
            ])
            .arg(&spec),
        Duration::from_secs(120),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let text = std::fs::read_to_string(&spec).expect("written");
    assert!(text.contains("name = \"baseline\""), "{text}");
    let run = run_with_timeout(
        in_dir(&dir)
            .args(["run", "--runs", "1", "--db"])
            .arg(dir.path("again.db"))
            .arg(&spec),
        Duration::from_secs(120),
    );
    assert!(
        run.status.success(),
        "{}\n{text}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// `--against tuned:FILE` reads only what is a profile: the environment (with a token in
/// it) through /proc is refused and never echoed, as are a directory and a device; the
/// answer says what each is, not "does not exist".
#[test]
fn against_a_file_that_is_no_profile_echoes_nothing() {
    let dir = TempDir::new("tune-tuned");
    for (path, says) in [
        ("/proc/self/environ", "kernel pseudo-file"),
        ("/dev/null", "kernel pseudo-file"),
        ("/etc", "not a regular file"),
    ] {
        let o = run_with_timeout(
            in_dir(&dir)
                .args(["tune", "--goal", "p50<=5us", "--against"])
                .arg(format!("tuned:{path}"))
                .env("VIRTPERF_TOKEN", "SUPERSECRET123"),
            Duration::from_secs(60),
        );
        let (out, err) = (
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr),
        );
        assert_eq!(o.status.code(), Some(2), "{path}: {err}");
        assert_one_line_error(&err, says);
        assert!(
            !out.contains("SUPERSECRET") && !err.contains("SUPERSECRET"),
            "{path}"
        );
    }
}

/// Every trial refused (no agent at the placement): not "goal not met" (3) but "not
/// measured" (4), each configuration said so, no "closest" at a figure that is none.
#[test]
fn a_search_that_measured_nothing_exits_4_saying_so() {
    let dir = TempDir::new("tune-nothing");
    let port = common::closed_port();
    let emitted = dir.path("pick.conf");
    let o = run_with_timeout(
        in_dir(&dir).args([
            "tune",
            "--emit",
            "sysctl.d",
            "--out",
            emitted.to_str().unwrap(),
            "--goal",
            "p50<=5us",
            "--placement",
            &format!("remote:127.0.0.1:{port}"),
            "--only",
            "spin",
            "-l",
            "300ms",
            "--runs",
            "2",
        ]),
        Duration::from_secs(120),
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(4), "{err}");
    // The progress lines come first on standard error; the error is the last line, and
    // it sends nobody to a --host they never gave.
    let last = err.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("virtperf: error: no configuration was measured"),
        "{err}"
    );
    assert!(!err.contains("omit --host"), "{err}");
    assert!(out.contains("round 1 measured nothing"), "{out}");
    assert!(
        !out.contains("closest") && !err.contains("closest"),
        "{out}{err}"
    );
    assert!(out.contains("not measured"), "{out}");
    // The file asked for is not there, and that is said.
    assert!(!emitted.exists());
    assert!(
        err.contains("virtperf: --emit not written: no configuration was picked"),
        "{err}"
    );
    assert!(!out.contains("Nothing was kept"), "{out}");
}

/// Runs `tune ARGS` and sends it SIGINT once trial `after` has finished (its progress line
/// is on standard error): returns the exit code, standard output and standard error.
fn tune_signalled_after(
    dir: &TempDir,
    args: &[&str],
    after: usize,
) -> (Option<i32>, String, String) {
    use std::io::{BufRead, Read};
    let mut child = in_dir(dir)
        .arg("tune")
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    let mut line = String::new();
    let mark = format!("[{after}/");
    while err.read_line(&mut line).unwrap_or(0) > 0 {
        said.push_str(&line);
        if line.starts_with(&mark) {
            // SAFETY: kill(2) on the PID of a child we spawned and have not reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        }
        line.clear();
    }
    let status = child.wait().unwrap();
    (status.code(), reader.join().unwrap(), said)
}

/// A signal in a search's first tries: a configuration it never reached is named as cut
/// by the signal — it was "skipped: not runnable here", a fact about the machine that
/// was not one — and the answer says it is made without it. A signal after a pick was
/// shown writes no `--emit` file: a pick made short of the plan is not left to be applied.
#[test]
fn a_signalled_search_names_what_it_cut_and_emits_nothing() {
    let dir = TempDir::new("tune-cut");
    let common = [
        "--goal", "p50<=1s", "-l", "300ms", "--runs", "2", "--budget", "1m",
    ];
    // Trials: baseline, spin, poll-50us, then their second tries. SIGINT after the first:
    // poll-50us is never tried (spin neither, unless its try had begun).
    let mut args = common.to_vec();
    args.extend(["--only", "spin,poll-50us"]);
    let (code, out, err) = tune_signalled_after(&dir, &args, 1);
    assert_eq!(code, Some(128 + libc::SIGINT), "{err}");
    assert!(!out.contains("not runnable here"), "{out}");
    assert!(
        out.contains("not run: the search was stopped by a signal before its first try"),
        "{out}"
    );
    assert!(
        out.contains("Not tried: ")
            && out.contains("poll-50us — a signal stopped the search first"),
        "{out}"
    );
    // Both tries of the baseline and of spin: the baseline is shown to meet the goal
    // (the pick) before the signal, which ends spin's second try.
    let emitted = dir.path("pick.conf");
    let mut args = common.to_vec();
    args.extend(["--only", "spin", "--emit", "sysctl.d", "--out"]);
    args.push(emitted.to_str().unwrap());
    let (code, out, err) = tune_signalled_after(&dir, &args, 3);
    assert_eq!(code, Some(128 + libc::SIGINT), "{err}");
    assert!(out.contains("Answer: baseline meets p50"), "{out}");
    assert!(
        err.contains("--emit not written: SIGINT stopped the search before it was done"),
        "{err}"
    );
    assert!(!emitted.exists(), "{out}{err}");
}
