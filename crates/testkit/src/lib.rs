//! How virtperf's tests skip (issue 39): a test that needs something this machine lacks
//! (root, a tool, /dev/kvm, a PostgreSQL server) calls [`skip`] and returns. The skip is
//! never silent and never hides a broken install:
//!
//! - it is printed where the test harness does not capture it (standard error's file
//!   descriptor, not `eprintln!`, which the harness hides for passing tests), and appended
//!   to the file `$VIRTPERF_SKIP_LOG` names, which `.ci/run` sums up at the end;
//! - when `$VIRTPERF_REQUIRE` (a comma-separated list) names the capability, or is `all`,
//!   it is a failure instead: CI requires what it installs or creates itself, so a package
//!   that failed to install turns CI red rather than into silent passes.
//!
//! Hardware a machine may lack (KVM, a writable halt-poll knob, a cpuidle driver) is named
//! too, and CI leaves it out of its list, so it stays a printed skip there.

use std::io::Write;

/// The variable that names the capabilities whose absence fails a test.
pub const REQUIRE_VAR: &str = "VIRTPERF_REQUIRE";
/// The variable that names the file every skip is appended to.
pub const LOG_VAR: &str = "VIRTPERF_SKIP_LOG";

/// Every capability a test may skip on: `(name, None)` for what CI installs or creates
/// itself, so `.ci/run`'s `VIRTPERF_REQUIRE` must name it (its absence there is a broken
/// install, a failure); `(name, Some(why))` for what a machine may lack whatever CI
/// installs (hardware, kernel features, this machine's noise), which stays a printed skip.
/// [`skip`] refuses a name not listed here, and `cli/tests/capabilities.rs` checks `.ci/run`
/// against it.
pub const CAPABILITIES: &[(&str, Option<&str>)] = &[
    ("root", None),
    ("netns", None),
    ("python3", None),
    ("pandas", None),
    ("chromium", None),
    ("tcpdump", None),
    ("tshark", None),
    ("nft", None),
    ("sqlite3", None),
    ("qemu", None),
    ("apt", None),
    ("ansible", None),
    ("sshd", None),
    ("postgresql", None),
    ("setpriv", None),
    ("prlimit", None),
    ("unshare", None),
    ("bash", None),
    ("iproute2", None),
    ("passt", None),
    ("perf", None),
    ("libvirt", None),
    ("kvm", Some("hardware: a usable /dev/kvm")),
    ("tun", Some("kernel: /dev/net/tun")),
    ("tracefs", Some("kernel: tracepoints readable")),
    ("ipv6", Some("kernel: IPv6 on loopback")),
    ("mptcp", Some("kernel: MPTCP enabled")),
    (
        "cpuidle",
        Some("hardware: a cpuidle driver with idle states"),
    ),
    (
        "haltpoll",
        Some("hardware: guest_halt_poll_ns, read by the haltpoll cpuidle governor"),
    ),
    ("busy-poll", Some("kernel: net.core.busy_poll writable")),
    ("virtio-net", Some("hardware: a virtio-net NIC")),
    ("two-cpus", Some("hardware: at least two CPUs")),
    ("nofile", Some("machine: the hard open-file limit")),
    ("pm-qos", Some("kernel: /dev/cpu_dma_latency")),
    (
        "schedstat",
        Some("kernel: per-thread schedstat (CONFIG_SCHED_INFO)"),
    ),
    (
        "sched-debug",
        Some("kernel: per-thread /proc/…/sched (CONFIG_SCHED_DEBUG)"),
    ),
    (
        "quiet",
        Some("machine: other load too noisy for a small effect"),
    ),
    (
        "round-2",
        Some("machine: single remedies that help enough to combine"),
    ),
    (
        "wmem",
        Some("kernel: net.core.wmem_max low enough to clamp a 1 GiB buffer"),
    ),
    (
        "kernel-cache",
        Some("machine: the default guest kernel fetched by an earlier test"),
    ),
    (
        "wake-gap",
        Some("machine: a blocking round trip measurably slower than a spinning one"),
    ),
    ("testkit-selftest", Some("testkit's own tests")),
    ("testkit-other", Some("testkit's own tests")),
];

/// Whether `$VIRTPERF_REQUIRE` names `need` (or is `all`).
pub fn required(need: &str) -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| names(&v, need))
}

fn names(list: &str, need: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|n| n == need || n == "all")
}

/// The line a skip prints and logs: `skipped [NEED] TEST: WHY`.
fn line(need: &str, why: &str) -> String {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    format!("skipped [{need}] {test}: {}", why.replace('\n', " "))
}

/// Skips (the rest of) the calling test, which needs `need` (`root`, `netns`, `tcpdump`,
/// `kvm`, …) and cannot have it here because `why`. The caller returns right after.
///
/// # Panics
/// When `$VIRTPERF_REQUIRE` names `need`: the machine was supposed to have it.
pub fn skip(need: &str, why: &str) {
    assert!(
        CAPABILITIES.iter().any(|(n, _)| *n == need),
        "skip on an unknown capability {need:?}: add it to virtperf_testkit::CAPABILITIES (and to .ci/run's VIRTPERF_REQUIRE if CI installs it)"
    );
    if required(need) {
        panic!("{REQUIRE_VAR} requires {need}, but: {why}");
    }
    let line = line(need, why);
    // Straight to the descriptor: the harness captures only its print macros.
    let _ = writeln!(std::io::stderr(), "{line}");
    if let Some(path) = std::env::var_os(LOG_VAR) {
        // One write of a whole line in append mode: concurrent tests never interleave.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    }
}

/// Whether this process runs as root (many tests need it for namespaces, sysctls, raw
/// sockets and tracepoints).
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
}

/// Skips for want of root unless this is root; true when the test may go on.
pub fn need_root(why: &str) -> bool {
    if is_root() {
        return true;
    }
    skip("root", why);
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_names_a_capability_exactly() {
        assert!(names("root, netns,tcpdump", "netns"));
        assert!(names("all", "kvm"));
        assert!(!names("root,netns", "net"));
        assert!(!names("", "root"));
    }

    #[test]
    fn a_skip_line_names_its_capability_and_test_on_one_line() {
        let l = line("tshark", "not installed\n(apt-get install tshark)");
        assert!(l.starts_with("skipped [tshark] "), "{l}");
        assert!(l.contains("a_skip_line_names"), "{l}");
        assert!(!l.contains('\n'), "{l}");
    }

    /// A required capability's skip is a failure, naming it and the reason.
    #[test]
    fn a_required_capability_fails_instead_of_skipping() {
        std::env::set_var(REQUIRE_VAR, "testkit-selftest");
        let r = std::panic::catch_unwind(|| skip("testkit-selftest", "it is not here"));
        let msg = r
            .expect_err("required: a failure")
            .downcast::<String>()
            .map(|s| *s)
            .unwrap_or_default();
        assert!(
            msg.contains("requires testkit-selftest") && msg.contains("it is not here"),
            "{msg}"
        );
        // Not named: a printed skip, no panic (kept out of CI's skip log: not a real skip).
        std::env::remove_var(LOG_VAR);
        skip("testkit-other", "printed, not failed");
    }
}
