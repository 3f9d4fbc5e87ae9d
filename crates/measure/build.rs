//! Records the git commit the binary is built from, so every result can name it.
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=../../.git/HEAD");
    println!("cargo:rerun-if-changed=../../.git/refs/heads");
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if let Some(c) = commit.filter(|c| !c.is_empty()) {
        println!("cargo:rustc-env=VIRTPERF_GIT_COMMIT={c}");
    }
}
