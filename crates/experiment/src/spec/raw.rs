//! The spec file as serde reads it, with source spans: what the user wrote, before checks.

use super::*;

/// A scalar or a list of them: a list in a workload is a sweep. The `expecting` texts of
/// the spec's untagged values begin with "takes ": what a key of theirs takes, said with
/// the key by the spec's error (serde alone says "did not match any variant").
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "takes one value of its type, or a list of them to sweep; the specs in recipes/ show each key's form"
)]
pub(super) enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    pub(super) fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A size written as a number (`64`) or a string with a unit (`"16KiB"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "takes a number of bytes, or a string with a unit such as \"16K\""
)]
pub(super) enum SizeVal {
    Num(u64),
    Text(String),
}

impl SizeVal {
    pub(super) fn text(&self) -> String {
        match self {
            SizeVal::Num(n) => n.to_string(),
            SizeVal::Text(s) => s.clone(),
        }
    }
}

/// A knob value: TOML numbers, booleans and strings are all written as text to the kernel.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged, expecting = "takes a number, true/false or a string")]
pub(super) enum KnobVal {
    Int(i64),
    Bool(bool),
    Text(String),
}

impl KnobVal {
    pub(super) fn text(&self) -> String {
        match self {
            KnobVal::Int(n) => n.to_string(),
            KnobVal::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            KnobVal::Text(s) => s.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) duration: Option<Spanned<String>>,
    /// Every timed workload's warm-up, run and not measured (`--omit`).
    #[serde(default)]
    pub(super) omit: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) repetitions: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) until_ci: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) max_repetitions: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) workload: Vec<Spanned<RawWorkload>>,
    #[serde(default)]
    pub(super) config: Vec<Spanned<RawConfig>>,
    #[serde(default)]
    pub(super) report: Option<RawReport>,
    #[serde(default)]
    pub(super) compare: Option<RawCompare>,
}

/// `[compare]`: a gate on the candidates' tax against `[report] baseline`.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCompare {
    /// `"20%"` or `"rr=30%,stream=10%"` (workload labels), as `vm compare --max-tax`.
    #[serde(default)]
    pub(super) max_tax: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorkload {
    pub(super) kind: Spanned<String>,
    #[serde(default)]
    pub(super) label: Option<String>,
    #[serde(default)]
    pub(super) size: Option<Spanned<OneOrMany<SizeVal>>>,
    #[serde(default)]
    pub(super) send_size: Option<Spanned<OneOrMany<SizeVal>>>,
    #[serde(default)]
    pub(super) recv_size: Option<Spanned<SizeVal>>,
    #[serde(default)]
    pub(super) recv_wait: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) buf_offset: Option<Spanned<i64>>,
    /// unix-rr over `SOCK_SEQPACKET` instead of a stream socket (`--seqpacket`).
    #[serde(default)]
    pub(super) seqpacket: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) flows: Option<Spanned<OneOrMany<u32>>>,
    #[serde(default)]
    pub(super) reverse: Option<Spanned<OneOrMany<bool>>>,
    #[serde(default)]
    pub(super) bytes: Option<Spanned<SizeVal>>,
    #[serde(default)]
    pub(super) count: Option<Spanned<u32>>,
    #[serde(default)]
    pub(super) cpus: Option<Spanned<OneOrMany<String>>>,
    #[serde(default)]
    pub(super) duration: Option<Spanned<String>>,
    /// The warm-up before each trial's measured interval (`--omit`); timed workloads.
    #[serde(default)]
    pub(super) omit: Option<Spanned<String>>,
    /// rr: how each side waits (`block`, `spin`, `poll:50us`, or `CLIENT,SERVER`).
    #[serde(default)]
    pub(super) wait: Option<Spanned<String>>,
    /// rr: idle time between a response and the next request; a list sweeps it.
    #[serde(default)]
    pub(super) gap: Option<Spanned<OneOrMany<String>>>,
    /// rr: open-loop request rate per second; UDP stream: bits per second (`2gbit`, 0:
    /// unpaced).
    #[serde(default)]
    pub(super) rate: Option<Spanned<SizeVal>>,
    /// rr, stream: `tcp` (the default) or `udp`; a list sweeps it.
    #[serde(default)]
    pub(super) protocol: Option<Spanned<OneOrMany<String>>>,
    /// UDP rr: how long to wait for a response before counting it lost (`50ms`).
    #[serde(default)]
    pub(super) loss_timeout: Option<Spanned<String>>,
    /// UDP stream: UDP_SEGMENT on the sender, UDP_GRO on the receiver.
    #[serde(default)]
    pub(super) gso: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) gro: Option<Spanned<bool>>,
    /// stream: both directions at once.
    #[serde(default)]
    pub(super) bidir: Option<Spanned<bool>>,
    /// stream: zero-copy senders, "sendfile" or "msg".
    #[serde(default)]
    pub(super) zerocopy: Option<Spanned<String>>,
    /// stream, bulk, rr, crr: record a time series with intervals this long.
    #[serde(default)]
    pub(super) interval: Option<Spanned<String>>,
    /// rr, crr, stream: worker threads per side multiplexing the flows on epoll.
    #[serde(default)]
    pub(super) threads: Option<Spanned<u32>>,
    /// Count tracepoints over each trial (`--trace`).
    #[serde(default)]
    pub(super) trace: Option<Spanned<bool>>,
    /// rr: a sampled critical-path trial after each trial (`--timeline`).
    #[serde(default)]
    pub(super) timeline: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) sysctl: BTreeMap<String, Spanned<KnobVal>>,
    #[serde(default)]
    pub(super) module: BTreeMap<String, Spanned<KnobVal>>,
    /// Network device steering files (`"lo/queues/rx-0/rps_cpus" = "2"`).
    #[serde(default)]
    pub(super) netdev: BTreeMap<String, Spanned<KnobVal>>,
    #[serde(default)]
    pub(super) socket: Option<Spanned<RawSock>>,
    #[serde(default)]
    pub(super) cpuidle_disable: Option<Spanned<Vec<u32>>>,
    /// The cpuidle governor the config runs under (`"haltpoll"`, `"menu"`).
    #[serde(default)]
    pub(super) cpuidle_governor: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) placement: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) guest: Option<Spanned<RawGuest>>,
    #[serde(default)]
    pub(super) ssh: Option<Spanned<RawSsh>>,
    #[serde(default)]
    pub(super) token: Option<String>,
    #[serde(default)]
    pub(super) cpus: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) setup: Option<String>,
    #[serde(default)]
    pub(super) teardown: Option<String>,
    #[serde(default)]
    pub(super) load: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) family: Option<Spanned<String>>,
    /// How both sides' receivers wait, overriding the workloads' (`"spin"`,
    /// `"poll:50us"`, `"CLIENT,SERVER"`).
    #[serde(default)]
    pub(super) wait: Option<Spanned<String>>,
    /// A PM QoS CPU latency bound in µs held open (`/dev/cpu_dma_latency`) while the
    /// config's trials run.
    #[serde(default)]
    pub(super) cpu_dma_latency: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSsh {
    #[serde(default)]
    pub(super) key: Option<String>,
    #[serde(default)]
    pub(super) options: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGuest {
    #[serde(default)]
    pub(super) kernel: Option<String>,
    #[serde(default)]
    pub(super) kernel_modules: Option<String>,
    #[serde(default)]
    pub(super) binary: Option<String>,
    #[serde(default)]
    pub(super) vcpus: Option<u32>,
    #[serde(default)]
    pub(super) mem: Option<u32>,
    #[serde(default)]
    pub(super) vcpu_cpus: Option<Vec<u32>>,
    #[serde(default)]
    pub(super) vhost: Option<bool>,
    #[serde(default)]
    pub(super) accel: Option<String>,
    #[serde(default)]
    pub(super) boot_timeout: Option<String>,
    /// The NIC's backend: `tap` or `user`.
    #[serde(default)]
    pub(super) net: Option<String>,
    /// virtio-net device options; a list sweeps (one config per combination).
    #[serde(default)]
    pub(super) virtio: BTreeMap<String, OneOrMany<KnobVal>>,
    /// Extra kernel arguments; a list sweeps.
    #[serde(default)]
    pub(super) cmdline: Option<OneOrMany<String>>,
    /// Module parameters inside the guest; a list sweeps.
    #[serde(default)]
    pub(super) modules: BTreeMap<String, OneOrMany<KnobVal>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSock {
    #[serde(default)]
    pub(super) nodelay: Option<bool>,
    #[serde(default)]
    pub(super) busy_poll_us: Option<u32>,
    #[serde(default)]
    pub(super) sndbuf: Option<SizeVal>,
    #[serde(default)]
    pub(super) rcvbuf: Option<SizeVal>,
    #[serde(default)]
    pub(super) congestion: Option<String>,
    #[serde(default)]
    pub(super) mss: Option<u32>,
    #[serde(default)]
    pub(super) tos: Option<u8>,
    #[serde(default)]
    pub(super) mptcp: Option<bool>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawReport {
    #[serde(default)]
    pub(super) shape: Option<String>,
    #[serde(default)]
    pub(super) baseline: Option<String>,
}
