//! What a run holds on this machine and must give back: the machine-wide [`lock`] (one
//! measurement at a time), the [`state`] directory (who is running, what they left), and
//! kernel [`knob`]s applied through a journal so that a crashed run's changes are restored
//! by the next one.
//!
//! Below the test protocol (`lab`), the placements and the experiment runner, which all
//! take the lock or apply knobs; it knows none of them.

pub mod children;
pub mod journal;
pub mod knob;
pub mod lock;
pub mod qos;
pub mod state;

/// Whether this process runs as root (namespace and guest placements, knobs, and the
/// machine-wide lock under /run, need it).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// This process's command line as it may be shown to others (the machine lock, a stored
/// run, the knob journal): see [`redact_args`].
pub fn command_line() -> String {
    redact_args(std::env::args())
}

/// `args` joined by spaces with their secrets replaced by `***`: a token given on the
/// command line (`--token X`, `--token=X`) and a URL's password
/// (`postgres://perf:***@db/vp`, in any argument). `--token-file` is a path and stays.
pub fn redact_args(args: impl IntoIterator<Item = String>) -> String {
    let mut out = Vec::new();
    let mut secret_next = false;
    for a in args {
        let shown = if secret_next {
            "***".to_string()
        } else if a.starts_with("--token=") {
            "--token=***".to_string()
        } else {
            redact_urls(&a)
        };
        secret_next = a == "--token";
        out.push(shown);
    }
    out.join(" ")
}

/// Every `scheme://user:password@` in `s` with the password replaced (an argument may hold
/// a URL after `--db=`).
fn redact_urls(s: &str) -> String {
    match s.find("://") {
        Some(i) => {
            let start = s[..i]
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || "+-.".contains(c)))
                .map_or(0, |j| j + 1);
            format!("{}{}", &s[..start], virtperf_wire::redact_url(&s[start..]))
        }
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    /// Issue 40 §1–2: passwords and tokens never reach the lock or a stored run.
    #[test]
    fn command_lines_lose_their_secrets() {
        let shown = redact_args(args(&[
            "virtperf",
            "rr",
            "--db",
            "postgres://perf:S3cretPW@db.example:5432/vp",
            "--token",
            "T0kenT0ken",
            "--token=Other7",
            "--db=postgresql://u:pw2@h/x",
            "--token-file",
            "/etc/vp/token",
        ]));
        for secret in ["S3cretPW", "T0kenT0ken", "Other7", "pw2"] {
            assert!(!shown.contains(secret), "{shown}");
        }
        assert!(
            shown.contains("postgres://perf:***@db.example:5432/vp"),
            "{shown}"
        );
        assert!(
            shown.contains("--token *** --token=*** --db=postgresql://u:***@h/x"),
            "{shown}"
        );
        assert!(shown.contains("--token-file /etc/vp/token"), "{shown}");
        assert_eq!(
            redact_args(args(&["virtperf", "rr", "-l", "1s"])),
            "virtperf rr -l 1s"
        );
    }
}
