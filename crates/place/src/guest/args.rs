//! Checks of what a user asks of the guests' kernel: its command line and module
//! parameters.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

/// Refuses kernel arguments that would break the placement; the rest go to the kernel.
pub fn check_cmdline(cmdline: Option<&str>) -> Result<()> {
    let Some(c) = cmdline else { return Ok(()) };
    if c.len() > 1024 {
        bail!(
            "--guest-cmdline is {} bytes; the kernel takes about 2 KiB in all, keep it under 1024",
            c.len()
        );
    }
    if let Some(ch) = c.chars().find(|ch| !ch.is_ascii_graphic() && *ch != ' ') {
        bail!("--guest-cmdline: {ch:?} is not allowed (printable ASCII words separated by spaces)");
    }
    for w in c.split_whitespace() {
        let key = w.split('=').next().unwrap_or(w);
        let why = match key {
            k if k.starts_with("virtperf.") => "virtperf's own settings",
            "init" | "rdinit" => "virtperf is the guest's init",
            "console" => "virtperf reads the guest's console on ttyS0",
            "panic" => "a panicking guest must power off at once (panic=-1)",
            _ => continue,
        };
        bail!("--guest-cmdline {w}: not allowed ({why})");
    }
    Ok(())
}

/// The module-parameter file for the guest's init: `MODULE.PARAM=VALUE` lines, each name
/// and value checked so nothing but that one write happens.
pub fn module_params(modules: &BTreeMap<String, String>) -> Result<String> {
    let mut out = String::new();
    for (name, value) in modules {
        let ok_name = name.split_once('.').is_some_and(|(m, p)| {
            let word = |s: &str| {
                !s.is_empty()
                    && s.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            };
            word(m) && word(p)
        });
        if !ok_name {
            bail!("guest module parameter {name:?}: expected MODULE.PARAMETER (e.g. haltpoll.guest_halt_poll_ns)");
        }
        if value.is_empty() || value.len() > 256 || !value.chars().all(|c| c.is_ascii_graphic()) {
            bail!("guest module parameter {name}={value:?}: the value must be 1..256 printable characters without spaces");
        }
        out.push_str(&format!("{name}={value}\n"));
    }
    Ok(out)
}
