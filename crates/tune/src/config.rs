//! Configurations: the baseline (the machine as it is), one remedy, or remedies combined;
//! and the spec a round of them runs as (an ordinary virtperf spec, stored with its run).

use serde::Serialize;

use crate::candidate::{Candidate, Setting, Target};

/// The machine as it is: every remedy is measured against it.
pub const BASELINE: &str = "baseline";

/// One configuration `tune` measures.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Configuration {
    /// Its config name in the spec: `baseline`, `halt-poll-200us`, `busy-poll-50us+spin`.
    pub name: String,
    /// The remedies it combines (none: the baseline).
    pub parts: Vec<Candidate>,
}

impl Configuration {
    /// The machine as it is.
    pub fn baseline() -> Configuration {
        Configuration {
            name: BASELINE.into(),
            parts: Vec::new(),
        }
    }

    /// `parts` together, named after them.
    pub fn of(parts: Vec<Candidate>) -> Configuration {
        let name = parts
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join("+");
        Configuration { name, parts }
    }

    /// Every setting it makes.
    pub fn settings(&self) -> impl Iterator<Item = &Setting> {
        self.parts.iter().flat_map(|p| p.settings.iter())
    }

    /// In words.
    pub fn what(&self) -> String {
        if self.parts.is_empty() {
            return "this machine as it is".into();
        }
        self.parts
            .iter()
            .map(|p| p.what.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Its `[[config]]` table.
    pub fn toml(&self, placement: Option<&str>) -> String {
        let mut t = format!(
            "[[config]]\nname = {}\ndescription = {}\n",
            quote(&self.name),
            quote(&self.what())
        );
        let table = |pick: fn(&Setting) -> Option<(&str, &str)>| -> Option<String> {
            let kv: Vec<String> = self
                .settings()
                .filter_map(pick)
                .map(|(k, v)| format!("{} = {}", quote(k), quote(v)))
                .collect();
            (!kv.is_empty()).then(|| format!("{{ {} }}", kv.join(", ")))
        };
        if let Some(s) = table(|s| match s {
            Setting::Sysctl { name, value } => Some((name, value)),
            _ => None,
        }) {
            t.push_str(&format!("sysctl = {s}\n"));
        }
        if let Some(m) = table(|s| match s {
            Setting::Module { name, value } => Some((name, value)),
            _ => None,
        }) {
            t.push_str(&format!("module = {m}\n"));
        }
        if let Some(n) = table(|s| match s {
            Setting::NetDev { name, value } => Some((name, value)),
            _ => None,
        }) {
            t.push_str(&format!("netdev = {n}\n"));
        }
        let cmdline: Vec<&str> = self
            .settings()
            .filter_map(|s| match s {
                Setting::GuestCmdline { words } => Some(words.as_str()),
                _ => None,
            })
            .collect();
        let modules = table(|s| match s {
            Setting::GuestModule { name, value } => Some((name, value)),
            _ => None,
        });
        let virtio = table(|s| match s {
            Setting::GuestVirtio { name, value } => Some((name, value)),
            _ => None,
        });
        if !cmdline.is_empty() || modules.is_some() || virtio.is_some() {
            let mut g = Vec::new();
            if !cmdline.is_empty() {
                g.push(format!("cmdline = {}", quote(&cmdline.join(" "))));
            }
            if let Some(m) = modules {
                g.push(format!("modules = {m}"));
            }
            if let Some(v) = virtio {
                g.push(format!("virtio = {v}"));
            }
            t.push_str(&format!("guest = {{ {} }}\n", g.join(", ")));
        }
        for s in self.settings() {
            match s {
                Setting::DmaLatency { us } => t.push_str(&format!("cpu_dma_latency = {us}\n")),
                Setting::Governor { name } => {
                    t.push_str(&format!("cpuidle_governor = {}\n", quote(name)))
                }
                Setting::Wait { mode } => t.push_str(&format!("wait = {}\n", quote(mode))),
                Setting::Cpus { client, server } => {
                    t.push_str(&format!("cpus = \"{client},{server}\"\n"))
                }
                Setting::SockBuf { bytes } => t.push_str(&format!(
                    "socket = {{ sndbuf = {bytes}, rcvbuf = {bytes} }}\n"
                )),
                Setting::Sysctl { .. }
                | Setting::Module { .. }
                | Setting::NetDev { .. }
                | Setting::GuestCmdline { .. }
                | Setting::GuestModule { .. }
                | Setting::GuestVirtio { .. } => {}
            }
        }
        if let Some(p) = placement {
            t.push_str(&format!("placement = {}\n", quote(p)));
        }
        t
    }
}

/// A TOML basic string.
pub fn quote(s: &str) -> String {
    let mut q = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => q.push_str("\\\""),
            '\\' => q.push_str("\\\\"),
            c if c.is_control() => q.push_str(&format!("\\u{:04x}", c as u32)),
            c => q.push(c),
        }
    }
    q.push('"');
    q
}

/// The spec one round runs: `target`'s workload under every configuration, `reps` tries
/// of `duration` each, interleaved by the runner, compared against the baseline.
pub fn spec_text(
    title: &str,
    target: &Target,
    duration: &str,
    reps: u32,
    configs: &[Configuration],
) -> String {
    let mut s = format!(
        "# Written by `virtperf tune`: every configuration below is measured interleaved.\nname = \"tune\"\ndescription = {}\nduration = {}\nrepetitions = {reps}\n\n[[workload]]\n",
        quote(title),
        quote(duration)
    );
    match target.kind.as_str() {
        "udp-rr" => s.push_str("kind = \"rr\"\nprotocol = \"udp\"\n"),
        k => s.push_str(&format!("kind = {}\n", quote(k))),
    }
    if let Some(size) = &target.size {
        let key = if target.kind == "stream" {
            "send_size"
        } else {
            "size"
        };
        s.push_str(&format!("{key} = {}\n", quote(size)));
    }
    if let Some((a, b)) = target.cpus {
        s.push_str(&format!("cpus = \"{a},{b}\"\n"));
    }
    for c in configs {
        s.push('\n');
        s.push_str(&c.toml(target.placement.as_deref()));
    }
    s.push_str(&format!("\n[report]\nbaseline = {}\n", quote(BASELINE)));
    s
}
