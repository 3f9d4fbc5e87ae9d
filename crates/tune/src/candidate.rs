//! Remedies: what `tune` may change, found on this machine (read first, never assumed),
//! each one a setting or a few that go together (busy polling's two sysctls).

use std::collections::BTreeMap;

use serde::Serialize;

/// One change a configuration makes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Setting {
    /// A sysctl (`net.core.busy_read`), applied through the knob journal.
    Sysctl {
        /// Dotted name.
        name: String,
        /// Value written.
        value: String,
    },
    /// A module parameter (`haltpoll.guest_halt_poll_ns`), applied through the journal.
    Module {
        /// `module.param`.
        name: String,
        /// Value written.
        value: String,
    },
    /// The cpuidle governor (`haltpoll`), through the journal: the guest halt-poll window
    /// acts under the haltpoll governor alone.
    Governor {
        /// Its name, as /sys/devices/system/cpu/cpuidle/available_governors lists it.
        name: String,
    },
    /// A CPU latency bound held through `/dev/cpu_dma_latency`, µs.
    DmaLatency {
        /// The bound.
        us: u32,
    },
    /// How both sides' receivers wait (`spin`, `poll:50us`): the application's choice.
    Wait {
        /// As `--wait` takes it.
        mode: String,
    },
    /// Words added to a booted guest's kernel command line (`idle=poll`).
    GuestCmdline {
        /// The words.
        words: String,
    },
    /// A module parameter inside a booted guest (`haltpoll.guest_halt_poll_ns`).
    GuestModule {
        /// `module.param`.
        name: String,
        /// Value set.
        value: String,
    },
    /// A virtio-net option of a booted guest's NIC (`rx_queue_size`, `vhost`): each
    /// configuration with one boots its own guest.
    GuestVirtio {
        /// The option, as `--virtio` takes it.
        name: String,
        /// Its value.
        value: String,
    },
    /// A network device's steering file (`lo/queues/rx-0/rps_cpus`), through the journal.
    NetDev {
        /// `DEV/…` under /sys/class/net.
        name: String,
        /// Value written.
        value: String,
    },
    /// SO_SNDBUF and SO_RCVBUF of the data sockets, bytes (a stream's remedy): the
    /// application's choice, as `wait` is.
    SockBuf {
        /// Both buffers.
        bytes: u32,
    },
    /// Both ends pinned here (client, server).
    Cpus {
        /// Client CPU.
        client: u32,
        /// Server CPU.
        server: u32,
    },
}

impl Setting {
    /// What it sets: two settings with one key cannot be in one configuration (a guest's
    /// command-line words add up, so each word is its own key).
    pub fn key(&self) -> String {
        match self {
            Setting::Sysctl { name, .. }
            | Setting::Module { name, .. }
            | Setting::NetDev { name, .. } => name.clone(),
            Setting::DmaLatency { .. } => "cpu_dma_latency".into(),
            Setting::Governor { .. } => virtperf_machine::knob::GOVERNOR_KNOB.into(),
            Setting::Wait { .. } => "wait".into(),
            Setting::Cpus { .. } => "cpus".into(),
            Setting::SockBuf { .. } => "socket buffers".into(),
            Setting::GuestCmdline { words } => format!("guest cmdline {words}"),
            Setting::GuestModule { name, .. } => format!("guest {name}"),
            Setting::GuestVirtio { name, .. } => format!("guest virtio {name}"),
        }
    }

    /// The setting as one reads it: `net.core.busy_read = 50`.
    pub fn text(&self) -> String {
        match self {
            Setting::Sysctl { name, value } | Setting::Module { name, value } => {
                format!("{name} = {value}")
            }
            Setting::NetDev { name, value } => format!("/sys/class/net/{name} = {value}"),
            Setting::DmaLatency { us } => format!("cpu_dma_latency held at {us} µs"),
            Setting::Governor { name } => format!("cpuidle governor {name}"),
            Setting::Wait { mode } => format!("receivers wait: {mode}"),
            Setting::Cpus { client, server } => format!("CPUs {client},{server}"),
            Setting::SockBuf { bytes } => {
                format!("SO_SNDBUF and SO_RCVBUF of the data sockets = {bytes}")
            }
            Setting::GuestCmdline { words } => format!("guest kernel command line: {words}"),
            Setting::GuestModule { name, value } => format!("in the guest: {name} = {value}"),
            Setting::GuestVirtio { name, value } => format!("guest NIC: {name}={value}"),
        }
    }
}

/// One remedy: a setting, or settings that only make sense together.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    /// Short name, used as (part of) a config name: `halt-poll-200us`.
    pub name: String,
    /// What it touches: two remedies of one family never combine (two halt-poll windows).
    pub family: String,
    /// In words, for the table.
    pub what: String,
    /// What it changes.
    pub settings: Vec<Setting>,
}

/// A remedy this machine cannot try, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotHere {
    /// The remedy.
    pub what: String,
    /// Why not.
    pub why: String,
}

/// What `tune` is tuning: one workload, pinned as given, at one placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Target {
    /// `rr`, `crr`, `udp-rr` or `stream`.
    pub kind: String,
    /// `REQUEST,RESPONSE` (rr kinds) or the send size (stream), as the spec takes it.
    pub size: Option<String>,
    /// Client and server CPUs.
    pub cpus: Option<(u32, u32)>,
    /// Where the ends run (a spec `placement`), None: this host's loopback.
    pub placement: Option<String>,
}

impl Target {
    /// Whether its receivers have a wait mode to choose.
    fn has_waits(&self) -> bool {
        matches!(self.kind.as_str(), "rr" | "crr" | "udp-rr")
    }
}

/// The knobs `tune` reads: the guest halt-poll window and the two busy-polling sysctls.
pub const KNOBS: &[&str] = &[
    "haltpoll.guest_halt_poll_ns",
    "kvm.halt_poll_ns",
    "net.core.busy_read",
    "net.core.busy_poll",
];

/// What this machine has, as `tune` read it before planning anything.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    /// Each of [`KNOBS`] and of the loopback device's steering files
    /// ([`crate::steer::knob_names`]): its value now, or why it cannot be written.
    pub knobs: BTreeMap<String, Result<String, String>>,
    /// The CPU latency bound in force now (µs), or why none can be held.
    pub dma_latency: Result<u64, String>,
    /// The cpuidle driver (`haltpoll` in a KVM guest that has it).
    pub cpuidle_driver: Option<String>,
    /// The cpuidle governor: `haltpoll` is the one that reads the guest halt-poll knob.
    pub cpuidle_governor: Option<String>,
    /// The cpuidle governors `current_governor` can be switched to here
    /// (`available_governors`, where the switch can be written), or why none.
    pub governors: Result<Vec<String>, String>,
    /// The online CPUs (for steering masks over all of them).
    pub online_cpus: Vec<u32>,
    /// Whether guests can have vhost-net (`/dev/vhost-net`), or why not.
    pub vhost_net: Result<(), String>,
}

/// The host knobs `settings` write (sysctls, module parameters, device steering files),
/// each read now: its value, or why it cannot be read. What a search reads before and
/// again after, so "every knob is back" covers exactly what it wrote.
pub fn read_written<'a>(
    settings: impl Iterator<Item = &'a Setting>,
) -> BTreeMap<String, Result<String, String>> {
    use virtperf_machine::knob::Knob;
    let mut out = BTreeMap::new();
    for s in settings {
        let knob = match s {
            Setting::Sysctl { name, .. } => Knob::sysctl(name),
            Setting::Module { name, .. } => Knob::module_param(name),
            Setting::NetDev { name, .. } => Knob::netdev(name),
            Setting::Governor { .. } => Ok(Knob::cpuidle_governor()),
            _ => continue,
        };
        let v = match knob {
            Ok(k) => k
                .read()
                .map(|v| v.trim().to_string())
                .map_err(|e| e.to_string()),
            Err(e) => Err(format!("{e:#}")),
        };
        out.insert(s.key(), v);
    }
    out
}

impl Machine {
    /// Reads this machine (probing each knob writes its own value back: root only).
    pub fn read() -> Machine {
        use virtperf_machine::knob::Knob;
        let mut knobs = BTreeMap::new();
        let names = KNOBS
            .iter()
            .map(|n| n.to_string())
            .chain(crate::steer::knob_names("lo"));
        for name in names {
            let knob = if name.contains('/') {
                Knob::netdev(&name)
            } else if name.starts_with("net.") {
                Knob::sysctl(&name)
            } else {
                Knob::module_param(&name)
            };
            let v = knob
                .and_then(|k| k.probe())
                .map(|v| v.trim().to_string())
                .map_err(|e| format!("{e:#}"));
            knobs.insert(name, v);
        }
        let dma_latency = virtperf_machine::qos::can_hold().and_then(|()| {
            virtperf_machine::qos::current_us()
                .ok_or_else(|| "its bound cannot be read back".to_string())
        });
        let cpuidle_driver = virtperf_measure::env::cpuidle_driver();
        let online_cpus =
            virtperf_measure::events::cpu_numbers(std::path::Path::new("/sys/devices/system/cpu"))
                .unwrap_or_default();
        let vhost_net = if std::path::Path::new("/dev/vhost-net").exists() {
            Ok(())
        } else {
            Err("/dev/vhost-net does not exist here (modprobe vhost_net)".to_string())
        };
        Machine {
            knobs,
            dma_latency,
            cpuidle_driver,
            cpuidle_governor: virtperf_measure::env::cpuidle_governor(),
            governors: governors(),
            online_cpus,
            vhost_net,
        }
    }

    /// Whether the governor can be switched to `g` here, or why not.
    fn can_switch_to(&self, g: &str) -> Result<(), String> {
        match &self.governors {
            Ok(a) if a.iter().any(|x| x == g) => Ok(()),
            Ok(a) => Err(format!(
                "this kernel has no {g} cpuidle governor (available: {})",
                a.join(" ")
            )),
            Err(e) => Err(e.clone()),
        }
    }

    fn knob(&self, name: &str) -> Result<&str, String> {
        match self.knobs.get(name) {
            Some(Ok(v)) => Ok(v),
            Some(Err(e)) => Err(e.clone()),
            None => Err(format!("{name} was not read")),
        }
    }
}

/// The governors this machine can be switched to: the kernel's, where the switch can be
/// written (read and written back unchanged), or why none.
fn governors() -> Result<Vec<String>, String> {
    let avail = virtperf_measure::env::available_governors()
        .ok_or_else(|| "this kernel has no cpuidle".to_string())?;
    virtperf_machine::knob::Knob::cpuidle_governor()
        .probe()
        .map(|_| avail)
        .map_err(|e| format!("{e:#}"))
}

/// The guest halt-poll windows tried, ns (0: polling off, a remedy for CPU when the goal
/// is already met).
const HALT_POLL_NS: &[u64] = &[0, 50_000, 200_000];
/// tuned's network-latency busy-polling budget, µs.
const BUSY_POLL_US: u32 = 50;

/// Every remedy this machine can try for `t`, and those it cannot with why.
pub fn discover(m: &Machine, t: &Target) -> (Vec<Candidate>, Vec<NotHere>) {
    let mut c = Vec::new();
    let mut not = Vec::new();
    halt_poll(m, &mut c, &mut not);
    if t.has_waits() {
        menu_governor(m, &mut c);
    }
    host_halt_poll(m, &mut c, &mut not);
    if t.placement
        .as_deref()
        .is_some_and(|p| p.starts_with("guest"))
    {
        guest(m, &mut c, &mut not);
    }
    busy_poll(m, &mut c, &mut not);
    match &m.dma_latency {
        Ok(now) if *now > 0 => c.push(Candidate {
            name: "dma-latency-0".into(),
            family: "cpu_dma_latency".into(),
            // The governor honours the bound; with no cpuidle driver no governor runs and
            // the idle loop halts without reading it (kernel/sched/idle.c,
            // cpuidle_idle_call), so there the measurement alone says what it does.
            what: match m.cpuidle_driver.as_deref() {
                None | Some("none") => "cpu_dma_latency held at 0 (no cpuidle driver here to honour it: the idle loop may halt anyway)",
                Some(_) => "cpu_dma_latency held at 0 (CPUs only poll when idle, never halt)",
            }
            .into(),
            settings: vec![Setting::DmaLatency { us: 0 }],
        }),
        Ok(_) => not.push(NotHere {
            what: "cpu_dma_latency".into(),
            why: "another process already holds it at 0".into(),
        }),
        Err(e) => not.push(NotHere {
            what: "cpu_dma_latency".into(),
            why: e.clone(),
        }),
    }
    if t.has_waits() {
        for (name, mode, what) in [
            (
                "spin",
                "spin",
                "both receivers spin (never sleep): a core each",
            ),
            (
                "poll-50us",
                "poll:50us",
                "both receivers spin 50 µs before blocking",
            ),
        ] {
            c.push(Candidate {
                name: name.into(),
                family: "wait".into(),
                what: what.into(),
                settings: vec![Setting::Wait { mode: mode.into() }],
            });
        }
    }
    if t.kind == "stream" {
        stream(&mut c, &mut not);
    }
    match t.cpus {
        Some((a, b)) if a != b => c.push(Candidate {
            name: "same-cpu".into(),
            family: "cpus".into(),
            what: format!("both ends on CPU {a} (no cross-CPU wake-up)"),
            settings: vec![Setting::Cpus {
                client: a,
                server: a,
            }],
        }),
        // Both on one CPU of this host: the other way round, each end on its own CPU.
        Some((a, _)) if t.placement.is_none() => match m.online_cpus.iter().find(|x| **x != a) {
            Some(&other) => c.push(Candidate {
                name: "cross-cpu".into(),
                family: "cpus".into(),
                what: format!(
                    "the ends on CPUs {a} and {other} (no CPU shared; a cross-CPU wake-up)"
                ),
                settings: vec![Setting::Cpus {
                    client: a,
                    server: other,
                }],
            }),
            None => not.push(NotHere {
                what: "the ends on two CPUs".into(),
                why: "this host has one CPU".into(),
            }),
        },
        _ => not.push(NotHere {
            what: "pinning both ends to one CPU".into(),
            why: "the workload is not pinned across two CPUs (give --cpus A,B)".into(),
        }),
    }
    steering(m, t, &mut c, &mut not);
    (c, not)
}

/// A stream's socket buffers, 4 MiB both ends (what `explain --workload stream` measures
/// as a remedy), and its remedies `tune` cannot make with why.
fn stream(c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    c.push(Candidate {
        name: "socket-buffers-4m".into(),
        family: "socket buffers".into(),
        what: "4 MiB SO_SNDBUF and SO_RCVBUF on the data sockets (the receive window's room)"
            .into(),
        settings: vec![Setting::SockBuf { bytes: 4 << 20 }],
    });
    not.push(NotHere {
        what: "larger sends, a second flow, MSG_ZEROCOPY".into(),
        why: "changes to the application's workload, not to the machine or its sockets: `virtperf explain --workload stream` measures each".into(),
    });
}

/// Receive steering (RPS, RFS) on the device `t`'s packets cross on this host
/// ([`crate::steer`]), and what cannot be steered with why.
fn steering(m: &Machine, t: &Target, c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    let Some(dev) = crate::steer::device(t.placement.as_deref()) else {
        not.push(NotHere {
            what: "RPS/RFS, XPS, IRQ affinity, napi_defer_hard_irqs".into(),
            why: format!(
                "the device placement {} crosses is not on this host before the run (a namespace's veth, a guest's virtio NIC, another machine's NIC)",
                t.placement.as_deref().unwrap_or("local")
            ),
        });
        return;
    };
    not.push(NotHere {
        what: "XPS, IRQ affinity, napi_defer_hard_irqs".into(),
        why: format!(
            "{dev} has one transmit queue, no interrupts and no NAPI: nothing to steer or defer"
        ),
    });
    match crate::steer::options(&m.knobs, dev, t.cpus, &m.online_cpus) {
        Ok(options) => c.extend(options.into_iter().map(|s| {
            Candidate {
                name: s.name,
                family: "rps".into(),
                what: s.what,
                settings: s
                    .files
                    .into_iter()
                    .map(|(name, value)| {
                        if name.contains('/') {
                            Setting::NetDev { name, value }
                        } else {
                            Setting::Sysctl { name, value }
                        }
                    })
                    .collect(),
            }
        })),
        Err(why) => not.push(NotHere {
            what: format!("RPS/RFS on {dev}"),
            why,
        }),
    }
}

fn halt_poll(m: &Machine, c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    let knob = "haltpoll.guest_halt_poll_ns";
    // A knob nothing reads would be measured as noise, and a noisy trial could be picked.
    let inert = virtperf_wire::model::halt_poll_knob_inert(
        m.cpuidle_driver.as_deref(),
        m.cpuidle_governor.as_deref(),
    );
    // Where the driver is there and only the governor is another, switching to haltpoll
    // makes the window act: that pair is the remedy (bench/RESULTS.md: under menu 200 µs
    // left 2.006 halts per round trip, under haltpoll 0.0007).
    let switchable =
        virtperf_wire::model::halt_poll_knob_inert(m.cpuidle_driver.as_deref(), Some("haltpoll"))
            .is_none();
    match (m.knob(knob), inert) {
        (Ok(_), Some(_)) if switchable && m.can_switch_to("haltpoll").is_ok() => {
            for ns in HALT_POLL_NS.iter().filter(|ns| **ns > 0) {
                c.push(Candidate {
                    name: format!("haltpoll-gov-{}us", ns / 1000),
                    family: knob.into(),
                    what: format!(
                        "haltpoll cpuidle governor, guest halt polling {} µs",
                        ns / 1000
                    ),
                    settings: vec![
                        Setting::Governor {
                            name: "haltpoll".into(),
                        },
                        Setting::Module {
                            name: knob.into(),
                            value: ns.to_string(),
                        },
                    ],
                });
            }
        }
        (Ok(_), Some(why)) => not.push(NotHere {
            what: "guest halt polling".into(),
            why: match (m.can_switch_to("haltpoll"), switchable) {
                (Err(g), true) => format!(
                    "{knob} can be written, but {why}; and switching to it cannot be tried: {g}"
                ),
                _ => format!("{knob} can be written, but {why}"),
            },
        }),
        (Ok(now), None) => {
            for ns in HALT_POLL_NS.iter().filter(|v| v.to_string() != now) {
                let (name, what) = if *ns == 0 {
                    (
                        "halt-poll-off".to_string(),
                        "guest halt polling off".to_string(),
                    )
                } else {
                    (
                        format!("halt-poll-{}us", ns / 1000),
                        format!("guest halt polling {} µs", ns / 1000),
                    )
                };
                c.push(Candidate {
                    name,
                    family: knob.into(),
                    what,
                    settings: vec![Setting::Module {
                        name: knob.into(),
                        value: ns.to_string(),
                    }],
                });
            }
        }
        (Err(e), inert) => not.push(NotHere {
            what: "guest halt polling".into(),
            why: inert.unwrap_or(e),
        }),
    }
}

/// The menu governor where haltpoll runs: the CPUs halt as before, but menu keeps the tick
/// through an idle period shorter than it, where haltpoll with no window stops and restarts
/// it on every idle entry (measured here: 3.74 TSC-deadline writes, each an exit, per round
/// trip under haltpoll against 0.05 under menu, p50 105 against 84 µs; bench/RESULTS.md).
/// Family of the window: under menu the window does nothing, so the two never combine.
fn menu_governor(m: &Machine, c: &mut Vec<Candidate>) {
    if m.cpuidle_governor.as_deref() != Some("haltpoll") || m.can_switch_to("menu").is_err() {
        return;
    }
    c.push(Candidate {
        name: "menu-governor".into(),
        family: "haltpoll.guest_halt_poll_ns".into(),
        what: "the menu cpuidle governor (CPUs halt as before; the tick is kept through short idle periods instead of stopped and restarted on each, and no halt-poll window acts)".into(),
        settings: vec![Setting::Governor {
            name: "menu".into(),
        }],
    });
}

/// A KVM host's own halt polling (`kvm.halt_poll_ns`): how long a halting vCPU's thread
/// polls before it sleeps, for the guests this machine runs.
fn host_halt_poll(m: &Machine, c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    let knob = "kvm.halt_poll_ns";
    match m.knob(knob) {
        Ok(now) => {
            for ns in [0u64, 200_000].iter().filter(|v| v.to_string() != now) {
                c.push(Candidate {
                    name: if *ns == 0 {
                        "host-halt-poll-off".into()
                    } else {
                        format!("host-halt-poll-{}us", ns / 1000)
                    },
                    family: knob.into(),
                    what: format!("KVM host halt polling {} µs (kvm.halt_poll_ns)", ns / 1000),
                    settings: vec![Setting::Module {
                        name: knob.into(),
                        value: ns.to_string(),
                    }],
                });
            }
        }
        Err(e) => not.push(NotHere {
            what: "KVM host halt polling (kvm.halt_poll_ns)".into(),
            why: e,
        }),
    }
}

/// Inside a guest virtperf boots: boot-time remedies (each boots its own guest), the
/// guest's halt-poll window, and its NIC's virtio options.
fn guest(m: &Machine, c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    for (name, words, what) in [
        (
            "guest-idle-poll",
            "idle=poll",
            "guest booted with idle=poll (its vCPUs never halt)",
        ),
        (
            "guest-nohz-off",
            "nohz=off",
            "guest booted with nohz=off (a periodic tick)",
        ),
    ] {
        c.push(Candidate {
            name: name.into(),
            family: "guest cmdline".into(),
            what: what.into(),
            settings: vec![Setting::GuestCmdline {
                words: words.into(),
            }],
        });
    }
    c.push(Candidate {
        name: "guest-halt-poll-200us".into(),
        family: "guest haltpoll".into(),
        what: "halt polling 200 µs inside the guest (cpuidle-haltpoll)".into(),
        settings: vec![Setting::GuestModule {
            name: "haltpoll.guest_halt_poll_ns".into(),
            value: "200000".into(),
        }],
    });
    let virtio = |name: &str, what: &str, key: &str, value: &str| Candidate {
        name: name.into(),
        family: format!("guest virtio {key}"),
        what: what.into(),
        settings: vec![Setting::GuestVirtio {
            name: key.into(),
            value: value.into(),
        }],
    };
    c.push(virtio(
        "guest-rx-ring-1024",
        "the guest NIC's receive ring at 1024 entries (QEMU's default 256)",
        "rx_queue_size",
        "1024",
    ));
    not.push(NotHere {
        what: "virtio-net queue pairs (multiqueue)".into(),
        why: "tune's guests have one vCPU, and multiqueue spreads queues over vCPUs: run a spec with guest = { vcpus = N, virtio = { queues = [1, N] } }".into(),
    });
    match &m.vhost_net {
        Ok(()) => c.push(virtio(
            "guest-vhost",
            "the guest NIC served by vhost-net in the host kernel (not QEMU's thread)",
            "vhost",
            "on",
        )),
        Err(why) => not.push(NotHere {
            what: "vhost-net for the guest's NIC".into(),
            why: why.clone(),
        }),
    }
}

fn busy_poll(m: &Machine, c: &mut Vec<Candidate>, not: &mut Vec<NotHere>) {
    let (read, poll) = (m.knob("net.core.busy_read"), m.knob("net.core.busy_poll"));
    match (read, poll) {
        (Ok(r), Ok(p)) => {
            let on = r != "0" || p != "0";
            let v = if on { 0 } else { BUSY_POLL_US };
            c.push(Candidate {
                name: if on {
                    "busy-poll-off".into()
                } else {
                    format!("busy-poll-{v}us")
                },
                family: "busy_poll".into(),
                what: if on {
                    "socket busy polling off".into()
                } else {
                    format!("socket busy polling {v} µs (net.core.busy_read = busy_poll = {v})")
                },
                settings: ["net.core.busy_read", "net.core.busy_poll"]
                    .iter()
                    .map(|n| Setting::Sysctl {
                        name: (*n).into(),
                        value: v.to_string(),
                    })
                    .collect(),
            });
        }
        (Err(e), _) | (_, Err(e)) => not.push(NotHere {
            what: "socket busy polling".into(),
            why: e,
        }),
    }
}

#[cfg(test)]
pub(crate) mod tests;
