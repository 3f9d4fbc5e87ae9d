//! Experiment specs: a TOML file naming workloads with parameter sweeps, configurations
//! (named sets of knobs), repetitions and duration. Parsing keeps source positions so every
//! error names its line.
//!
//! ```toml
//! name = "tcp-stream-sweep"
//! duration = "5s"            # per trial
//! repetitions = 5            # or: until_ci = "95,2%" with max_repetitions = 20
//!
//! [[workload]]
//! kind = "stream"
//! send_size = [4, 8, 16, 4096]   # a list is a sweep
//! # recv_size = "64KiB"          # bytes per receive (netperf -M)
//! # recv_wait = "block"          # receiver sleeps in recv (netperf) instead of poll (iperf3)
//! # interval = "1s"              # keep a time series (stream, bulk, rr, crr)
//! # trace = true                 # count VM-exit tracepoints per unit (--trace; root)
//! # timeline = true              # rr: a sampled critical-path trial per trial (--timeline)
//!
//! [[config]]
//! name = "baseline"
//!
//! [[config]]
//! name = "busy-poll"
//! sysctl = { "net.core.busy_poll" = 50, "net.core.busy_read" = 50 }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;
use virtperf_wire::{RecvWait, SockOpts, Workload};

use crate::knob::Knob;
use crate::parse;
use crate::place::Placement;

/// A spec error with the line it refers to (1-based; 0 when the whole file is at fault).
#[derive(Debug, Clone, PartialEq)]
pub struct SpecError {
    /// Line in the spec file.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 0 {
            write!(f, "line {}: {}", self.line, self.message)
        } else {
            write!(f, "{}", self.message)
        }
    }
}

impl std::error::Error for SpecError {}

/// A scalar or a list of them: a list in a workload is a sweep.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

/// A size written as a number (`64`) or a string with a unit (`"16KiB"`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum SizeVal {
    Num(u64),
    Text(String),
}

impl SizeVal {
    fn text(&self) -> String {
        match self {
            SizeVal::Num(n) => n.to_string(),
            SizeVal::Text(s) => s.clone(),
        }
    }
}

/// A knob value: TOML numbers, booleans and strings are all written as text to the kernel.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum KnobVal {
    Int(i64),
    Bool(bool),
    Text(String),
}

impl KnobVal {
    fn text(&self) -> String {
        match self {
            KnobVal::Int(n) => n.to_string(),
            KnobVal::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            KnobVal::Text(s) => s.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    duration: Option<Spanned<String>>,
    #[serde(default)]
    repetitions: Option<Spanned<u32>>,
    #[serde(default)]
    until_ci: Option<Spanned<String>>,
    #[serde(default)]
    max_repetitions: Option<Spanned<u32>>,
    #[serde(default)]
    workload: Vec<Spanned<RawWorkload>>,
    #[serde(default)]
    config: Vec<Spanned<RawConfig>>,
    #[serde(default)]
    report: Option<RawReport>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    kind: Spanned<String>,
    #[serde(default)]
    label: Option<String>,
    #[serde(default)]
    size: Option<Spanned<OneOrMany<String>>>,
    #[serde(default)]
    send_size: Option<Spanned<OneOrMany<SizeVal>>>,
    #[serde(default)]
    recv_size: Option<Spanned<SizeVal>>,
    #[serde(default)]
    recv_wait: Option<Spanned<String>>,
    #[serde(default)]
    flows: Option<Spanned<OneOrMany<u32>>>,
    #[serde(default)]
    reverse: Option<Spanned<OneOrMany<bool>>>,
    #[serde(default)]
    bytes: Option<Spanned<SizeVal>>,
    #[serde(default)]
    count: Option<Spanned<u32>>,
    #[serde(default)]
    cpus: Option<Spanned<OneOrMany<String>>>,
    #[serde(default)]
    duration: Option<Spanned<String>>,
    /// rr: how each side waits (`block`, `spin`, `poll:50us`, or `CLIENT,SERVER`).
    #[serde(default)]
    wait: Option<Spanned<String>>,
    /// rr: idle time between a response and the next request; a list sweeps it.
    #[serde(default)]
    gap: Option<Spanned<OneOrMany<String>>>,
    /// rr: open-loop request rate per second; UDP stream: bits per second (`2gbit`, 0:
    /// unpaced).
    #[serde(default)]
    rate: Option<Spanned<SizeVal>>,
    /// rr, stream: `tcp` (the default) or `udp`; a list sweeps it.
    #[serde(default)]
    protocol: Option<Spanned<OneOrMany<String>>>,
    /// UDP rr: how long to wait for a response before counting it lost (`50ms`).
    #[serde(default)]
    loss_timeout: Option<Spanned<String>>,
    /// UDP stream: UDP_SEGMENT on the sender, UDP_GRO on the receiver.
    #[serde(default)]
    gso: Option<Spanned<bool>>,
    #[serde(default)]
    gro: Option<Spanned<bool>>,
    /// stream, bulk, rr, crr: record a time series with intervals this long.
    #[serde(default)]
    interval: Option<Spanned<String>>,
    /// rr, crr, stream: worker threads per side multiplexing the flows on epoll.
    #[serde(default)]
    threads: Option<Spanned<u32>>,
    /// Count tracepoints over each trial (`--trace`).
    #[serde(default)]
    trace: Option<Spanned<bool>>,
    /// rr: a sampled critical-path trial after each trial (`--timeline`).
    #[serde(default)]
    timeline: Option<Spanned<bool>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    sysctl: BTreeMap<String, Spanned<KnobVal>>,
    #[serde(default)]
    module: BTreeMap<String, Spanned<KnobVal>>,
    #[serde(default)]
    socket: Option<Spanned<RawSock>>,
    #[serde(default)]
    cpuidle_disable: Option<Spanned<Vec<u32>>>,
    #[serde(default)]
    placement: Option<Spanned<String>>,
    #[serde(default)]
    guest: Option<Spanned<RawGuest>>,
    #[serde(default)]
    ssh: Option<Spanned<RawSsh>>,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    cpus: Option<Spanned<String>>,
    #[serde(default)]
    setup: Option<String>,
    #[serde(default)]
    teardown: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSsh {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    options: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGuest {
    #[serde(default)]
    kernel: Option<String>,
    #[serde(default)]
    kernel_modules: Option<String>,
    #[serde(default)]
    binary: Option<String>,
    #[serde(default)]
    vcpus: Option<u32>,
    #[serde(default)]
    mem: Option<u32>,
    #[serde(default)]
    vcpu_cpus: Option<Vec<u32>>,
    #[serde(default)]
    vhost: Option<bool>,
    #[serde(default)]
    accel: Option<String>,
    #[serde(default)]
    boot_timeout: Option<String>,
    /// virtio-net device options; a list sweeps (one config per combination).
    #[serde(default)]
    virtio: BTreeMap<String, OneOrMany<KnobVal>>,
    /// Extra kernel arguments; a list sweeps.
    #[serde(default)]
    cmdline: Option<OneOrMany<String>>,
    /// Module parameters inside the guest; a list sweeps.
    #[serde(default)]
    modules: BTreeMap<String, OneOrMany<KnobVal>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSock {
    #[serde(default)]
    nodelay: Option<bool>,
    #[serde(default)]
    busy_poll_us: Option<u32>,
    #[serde(default)]
    sndbuf: Option<SizeVal>,
    #[serde(default)]
    rcvbuf: Option<SizeVal>,
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawReport {
    #[serde(default)]
    shape: Option<String>,
    #[serde(default)]
    baseline: Option<String>,
}

/// How repetitions are decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Repeat {
    /// Exactly this many trials per point and config.
    Fixed(u32),
    /// Repeat until the CI at `level` has half-width within `width` of the mean, between
    /// `min` and `max` trials (netperf's `-i max,min -I level,width`).
    UntilCi {
        /// Confidence level, e.g. 0.95.
        level: f64,
        /// Relative half-width, e.g. 0.02.
        width: f64,
        /// Trials always run.
        min: u32,
        /// Trials at most.
        max: u32,
    },
}

impl Repeat {
    /// Trials per point and config at most.
    pub fn max(&self) -> u32 {
        match self {
            Repeat::Fixed(n) => *n,
            Repeat::UntilCi { max, .. } => *max,
        }
    }
}

/// One point of a workload's sweep: everything needed to run a trial but the config.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Index of the `[[workload]]` it came from.
    pub workload_index: usize,
    /// The workload with this point's parameters.
    pub workload: Workload,
    /// CPU pinning from the sweep (a config's `cpus` overrides it).
    pub cpus: parse::Cpus,
    /// Trial duration (timed workloads).
    pub duration: Duration,
    /// Time-series interval (`interval = "1s"`), if any.
    pub interval: Option<Duration>,
    /// Tracepoints counted over each trial (`trace = true`).
    pub trace: bool,
    /// A sampled critical-path trial after each trial (`timeline = true`).
    pub timeline: bool,
    /// HTTP downloads per trial.
    pub count: u32,
    /// The swept parameters and their values, e.g. `{"send_size": 64}`.
    pub params: serde_json::Value,
    /// Human label: `stream send_size=64`.
    pub label: String,
}

/// A named configuration: knobs, socket options, pinning and hooks.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Name as written.
    pub name: String,
    /// What it is for.
    pub description: Option<String>,
    /// System knobs (sysctls, module parameters) to apply before its trials.
    pub knobs: Vec<(Knob, String)>,
    /// Socket options for data connections.
    pub sock: SockOpts,
    /// CPU pinning that overrides the workload's.
    pub cpus: Option<parse::Cpus>,
    /// Where the ends run (`placement = "netns:bridge"`, `"guest:guest-host"`); None is
    /// this host's loopback.
    pub placement: Option<Placement>,
    /// Shell command run before the config's first trial.
    pub setup: Option<String>,
    /// Shell command run after the config's last trial (also on failure).
    pub teardown: Option<String>,
}

/// A parsed, validated experiment.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Experiment name.
    pub name: String,
    /// Free text.
    pub description: Option<String>,
    /// Every sweep point of every workload, in spec order.
    pub points: Vec<Point>,
    /// Configurations in spec order (a single `default` one if the spec names none).
    pub configs: Vec<Config>,
    /// Repetition policy.
    pub repeat: Repeat,
    /// Output shape hint for `show` (`sweep`, `matrix`, `downloads`, …).
    pub shape: Option<String>,
    /// Config to compare the others against (default: the first).
    pub baseline: Option<String>,
    /// The spec text as given (stored with the run).
    pub text: String,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn err<T>(
    text: &str,
    span: std::ops::Range<usize>,
    msg: impl std::fmt::Display,
) -> Result<T, SpecError> {
    Err(SpecError {
        line: line_of(text, span.start),
        message: msg.to_string(),
    })
}

/// Parses and validates a spec.
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError {
        line: e.span().map(|s| line_of(text, s.start)).unwrap_or(0),
        message: e.message().trim().to_string(),
    })?;
    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty() {
        return err(text, raw.name.span(), "name must not be empty");
    }
    if name.chars().any(char::is_control) {
        return err(text, raw.name.span(), CONTROL_IN_NAME);
    }
    let default_duration = match &raw.duration {
        Some(d) => parse::test_duration(d.get_ref()).or_else(|m| err(text, d.span(), m))?,
        None => Duration::from_secs(10),
    };
    let repeat = match (&raw.repetitions, &raw.until_ci) {
        (Some(r), Some(_)) => {
            return err(
                text,
                r.span(),
                "give either repetitions or until_ci, not both",
            )
        }
        (Some(r), None) => {
            let n = *r.get_ref();
            if !(1..=1000).contains(&n) {
                return err(text, r.span(), "repetitions must be between 1 and 1000");
            }
            Repeat::Fixed(n)
        }
        (None, Some(c)) => {
            let (level, width) =
                parse::until_ci(c.get_ref()).or_else(|m| err(text, c.span(), m))?;
            let max = raw
                .max_repetitions
                .as_ref()
                .map(|m| *m.get_ref())
                .unwrap_or(20);
            if let Some(m) = &raw.max_repetitions {
                if !(3..=1000).contains(&max) {
                    return err(text, m.span(), "max_repetitions must be between 3 and 1000");
                }
            }
            Repeat::UntilCi {
                level,
                width,
                min: 3,
                max,
            }
        }
        (None, None) => Repeat::Fixed(5),
    };
    if raw.workload.is_empty() {
        return Err(SpecError {
            line: 0,
            message: "the spec has no [[workload]]: add at least one (kind = \"rr\", \"crr\", \"stream\", \"bulk\" or \"http\")".into(),
        });
    }
    let mut points = Vec::new();
    for (i, w) in raw.workload.iter().enumerate() {
        points.extend(expand(
            text,
            i,
            w,
            default_duration,
            MAX_POINTS - points.len(),
        )?);
    }
    let mut configs = Vec::new();
    for c in &raw.config {
        for cfg in config(text, c)? {
            if configs.iter().any(|x: &Config| x.name == cfg.name) {
                return err(
                    text,
                    c.get_ref().name.span(),
                    format!("config {:?} is defined twice", cfg.name),
                );
            }
            configs.push(cfg);
        }
    }
    if configs.is_empty() {
        configs.push(Config {
            name: "default".into(),
            description: None,
            knobs: Vec::new(),
            sock: SockOpts::default(),
            cpus: None,
            placement: None,
            setup: None,
            teardown: None,
        });
    }
    let trials = planned_trials(points.len(), configs.len(), &repeat);
    if trials > MAX_TRIALS {
        return Err(SpecError {
            line: 0,
            message: format!(
                "the spec plans {trials} trials ({} points × {} configs × {} repetitions), more than {MAX_TRIALS}: split it into several specs",
                points.len(),
                configs.len(),
                repeat.max()
            ),
        });
    }
    let report = raw.report.unwrap_or_default();
    if let Some(b) = &report.baseline {
        if !configs.iter().any(|c| &c.name == b) {
            return Err(SpecError {
                line: 0,
                message: format!(
                    "report.baseline names config {b:?}, which the spec does not define"
                ),
            });
        }
    }
    Ok(Spec {
        name,
        description: raw.description,
        points,
        configs,
        repeat,
        shape: report.shape,
        baseline: report.baseline,
        text: text.to_string(),
    })
}

/// The most points (workload × sweep values) one spec may expand to: a sweep this large
/// is a typo, and expanding it blindly would take gigabytes.
pub const MAX_POINTS: usize = 10_000;
/// The most trials one run may plan (points × configs × repetitions).
pub const MAX_TRIALS: usize = 100_000;

/// Trials a run plans at most.
pub fn planned_trials(points: usize, configs: usize, repeat: &Repeat) -> usize {
    points
        .saturating_mul(configs)
        .saturating_mul(repeat.max() as usize)
}

/// Parses one list-valued key of a `[[workload]]` into its values, or `default` when absent.
fn axis<T, V: Clone>(
    text: &str,
    key: &Option<Spanned<OneOrMany<V>>>,
    default: T,
    parse: impl Fn(&V) -> anyhow::Result<T>,
) -> Result<Vec<T>, SpecError> {
    match key {
        Some(s) if matches!(s.get_ref(), OneOrMany::Many(v) if v.is_empty()) => err(
            text,
            s.span(),
            "an empty list sweeps nothing: give at least one value, or leave the key out for its default",
        ),
        Some(s) => s
            .get_ref()
            .to_vec()
            .iter()
            .map(|v| parse(v).or_else(|m| err(text, s.span(), m)))
            .collect(),
        None => Ok(vec![default]),
    }
}

/// The sweep axes of one `[[workload]]`: each list-valued parameter is one axis, and the
/// points are their cartesian product.
struct Axes {
    cpus: Vec<parse::Cpus>,
    sizes: Vec<(u32, u32)>,
    send_sizes: Vec<u32>,
    flows: Vec<u32>,
    reverses: Vec<bool>,
    /// rr's idle gap between transactions, µs (None: back to back).
    gaps: Vec<Option<u64>>,
    /// rr and stream: TCP or UDP.
    protocols: Vec<virtperf_wire::Protocol>,
}

/// One point of the product.
#[derive(Clone, Copy)]
struct Combo {
    cpu: parse::Cpus,
    size: (u32, u32),
    send: u32,
    flows: u32,
    reverse: bool,
    gap: Option<u64>,
    protocol: virtperf_wire::Protocol,
}

impl Axes {
    fn parse(text: &str, r: &RawWorkload, kind: &str) -> Result<Axes, SpecError> {
        let default_send = if kind == "bulk" { 128 * 1024 } else { 16384 };
        Ok(Axes {
            cpus: axis(text, &r.cpus, (None, None), |v: &String| parse::cpus(v))?,
            sizes: axis(text, &r.size, (1, 1), |v: &String| parse::size_pair(v))?,
            send_sizes: axis(text, &r.send_size, default_send, |v: &SizeVal| {
                parse::size32(&v.text())
            })?,
            flows: axis(text, &r.flows, 1, |v: &u32| Ok(*v))?,
            reverses: axis(text, &r.reverse, false, |v: &bool| Ok(*v))?,
            gaps: axis(text, &r.gap, None, |v: &String| {
                parse::duration_up_to(v, Duration::from_secs(1), "1s")
                    .map(|d| Some(d.as_micros() as u64).filter(|g| *g > 0))
            })?,
            protocols: axis(text, &r.protocol, Default::default(), |v: &String| {
                virtperf_wire::Protocol::parse(v).map_err(anyhow::Error::msg)
            })?,
        })
    }

    /// How many points the product has, counted without building it (and without overflow).
    fn len(&self) -> usize {
        [
            self.cpus.len(),
            self.sizes.len(),
            self.send_sizes.len(),
            self.flows.len(),
            self.reverses.len(),
            self.gaps.len(),
            self.protocols.len(),
        ]
        .iter()
        .fold(1usize, |acc, &n| acc.saturating_mul(n))
    }

    /// The product, in the order points have always been numbered (cpus outermost).
    fn combos(&self) -> impl Iterator<Item = Combo> + '_ {
        self.cpus.iter().flat_map(move |&cpu| {
            self.sizes.iter().flat_map(move |&size| {
                self.send_sizes.iter().flat_map(move |&send| {
                    self.flows.iter().flat_map(move |&flows| {
                        self.reverses.iter().flat_map(move |&reverse| {
                            self.gaps.iter().flat_map(move |&gap| {
                                self.protocols.iter().map(move |&protocol| Combo {
                                    cpu,
                                    size,
                                    send,
                                    flows,
                                    reverse,
                                    gap,
                                    protocol,
                                })
                            })
                        })
                    })
                })
            })
        })
    }

    /// The axes with more than one value: they name the points (`send_size=64`).
    fn swept(&self) -> Vec<&'static str> {
        [
            ("size", self.sizes.len()),
            ("send_size", self.send_sizes.len()),
            ("flows", self.flows.len()),
            ("reverse", self.reverses.len()),
            ("cpus", self.cpus.len()),
            ("gap", self.gaps.len()),
            ("protocol", self.protocols.len()),
        ]
        .iter()
        .filter(|(_, n)| *n > 1)
        .map(|(k, _)| *k)
        .collect()
    }
}

/// A workload's parameters that are not swept.
struct Fixed {
    duration: Duration,
    interval: Option<Duration>,
    wait: (virtperf_wire::Wait, virtperf_wire::Wait),
    rate: Option<u32>,
    /// UDP rr's loss timeout, ms.
    loss_timeout_ms: Option<u32>,
    /// UDP stream pacing, bits/s (0: unpaced).
    rate_bps: Option<u64>,
    gso: bool,
    gro: bool,
    recv_size: Option<u32>,
    recv_wait: Option<RecvWait>,
    bytes: Option<u64>,
    count: u32,
    threads: Option<u32>,
    trace: bool,
    timeline: bool,
}

impl Fixed {
    fn parse(
        text: &str,
        w: &Spanned<RawWorkload>,
        kind: &str,
        default_duration: Duration,
    ) -> Result<Fixed, SpecError> {
        let r = w.get_ref();
        let duration = match &r.duration {
            Some(d) => parse::test_duration(d.get_ref()).or_else(|m| err(text, d.span(), m))?,
            None => default_duration,
        };
        let interval = match &r.interval {
            Some(v) => {
                let d = parse::duration(v.get_ref())
                    .map_err(|e| e.to_string())
                    .and_then(|d| crate::plan::check_interval(d).map(|()| d))
                    .or_else(|m| err(text, v.span(), m))?;
                if kind != "bulk" && d > duration {
                    return err(
                        text,
                        v.span(),
                        "interval is longer than the trial's duration: shorten it",
                    );
                }
                Some(d)
            }
            None => None,
        };
        let recv_size = match &r.recv_size {
            Some(v) if kind == "stream" => {
                Some(parse::size32(&v.get_ref().text()).or_else(|m| err(text, v.span(), m))?)
            }
            Some(v) => return err(text, v.span(), "recv_size applies to stream workloads only"),
            None => None,
        };
        let recv_wait = match &r.recv_wait {
            Some(v) if kind == "stream" => {
                Some(RecvWait::parse(v.get_ref()).or_else(|m| err(text, v.span(), m))?)
            }
            Some(v) => return err(text, v.span(), "recv_wait applies to stream workloads only"),
            None => None,
        };
        let bytes = match &r.bytes {
            Some(b) => Some(parse::bytes(&b.get_ref().text()).or_else(|m| err(text, b.span(), m))?),
            None => None,
        };
        if matches!(kind, "bulk" | "http") && bytes.is_none() {
            return err(
                text,
                w.span(),
                format!("{kind} workloads need bytes = …, e.g. bytes = \"100MB\""),
            );
        }
        let count = match &r.count {
            Some(c) if !(1..=10_000).contains(c.get_ref()) => {
                return err(text, c.span(), "count must be between 1 and 10000")
            }
            Some(c) => *c.get_ref(),
            None => 5,
        };
        let wait = match &r.wait {
            Some(w) => parse::wait(w.get_ref()).or_else(|m| err(text, w.span(), m))?,
            None => Default::default(),
        };
        let (rate, rate_bps) = match &r.rate {
            Some(v) if kind == "stream" => (
                None,
                Some(parse::bit_rate(&v.get_ref().text()).or_else(|m| err(text, v.span(), m))?),
            ),
            Some(v) => (
                Some(parse::rate_per_s(&v.get_ref().text()).or_else(|m| err(text, v.span(), m))?),
                None,
            ),
            None => (None, None),
        };
        if let (Some(_), Some(g)) = (&r.rate, &r.gap) {
            return err(
                text,
                g.span(),
                "give either rate (open loop) or gap (closed loop), not both",
            );
        }
        Ok(Fixed {
            duration,
            interval,
            wait,
            rate,
            rate_bps,
            loss_timeout_ms: match &r.loss_timeout {
                Some(v) => Some(
                    parse::duration_up_to(v.get_ref(), Duration::from_secs(60), "60s")
                        .map(|d| d.as_millis().max(1) as u32)
                        .or_else(|m| err(text, v.span(), m))?,
                ),
                None => None,
            },
            gso: r.gso.as_ref().is_some_and(|g| *g.get_ref()),
            gro: r.gro.as_ref().is_some_and(|g| *g.get_ref()),
            recv_size,
            recv_wait,
            bytes,
            count,
            threads: r.threads.as_ref().map(|t| *t.get_ref()),
            trace: r.trace.as_ref().is_some_and(|t| *t.get_ref()),
            timeline: r.timeline.as_ref().is_some_and(|t| *t.get_ref()),
        })
    }
}

/// Refuses an unknown kind, and keys the kind does not take, each at its line.
fn check_keys(text: &str, r: &RawWorkload, kind: &str) -> Result<(), SpecError> {
    let allowed: &[&str] = match kind {
        "rr" => &[
            "size",
            "cpus",
            "wait",
            "gap",
            "rate",
            "flows",
            "threads",
            "interval",
            "protocol",
            "loss_timeout",
            "trace",
            "timeline",
        ],
        "crr" => &[
            "size", "cpus", "wait", "flows", "threads", "interval", "trace",
        ],
        "stream" => &[
            "send_size",
            "flows",
            "threads",
            "reverse",
            "cpus",
            "interval",
            "protocol",
            "rate",
            "gso",
            "gro",
            "trace",
        ],
        "bulk" => &["bytes", "send_size", "reverse", "cpus", "interval", "trace"],
        "http" => &["bytes", "count", "cpus", "trace"],
        other => {
            return err(
                text,
                r.kind.span(),
                format!("unknown workload kind {other:?} (expected rr, crr, stream, bulk or http)"),
            )
        }
    };
    let present: [(&str, Option<std::ops::Range<usize>>); 18] = [
        ("trace", r.trace.as_ref().map(|s| s.span())),
        ("timeline", r.timeline.as_ref().map(|s| s.span())),
        ("threads", r.threads.as_ref().map(|s| s.span())),
        ("loss_timeout", r.loss_timeout.as_ref().map(|s| s.span())),
        ("protocol", r.protocol.as_ref().map(|s| s.span())),
        ("gso", r.gso.as_ref().map(|s| s.span())),
        ("gro", r.gro.as_ref().map(|s| s.span())),
        ("interval", r.interval.as_ref().map(|s| s.span())),
        ("wait", r.wait.as_ref().map(|s| s.span())),
        ("gap", r.gap.as_ref().map(|s| s.span())),
        ("rate", r.rate.as_ref().map(|s| s.span())),
        ("size", r.size.as_ref().map(|s| s.span())),
        ("send_size", r.send_size.as_ref().map(|s| s.span())),
        ("flows", r.flows.as_ref().map(|s| s.span())),
        ("reverse", r.reverse.as_ref().map(|s| s.span())),
        ("bytes", r.bytes.as_ref().map(|s| s.span())),
        ("count", r.count.as_ref().map(|s| s.span())),
        ("cpus", r.cpus.as_ref().map(|s| s.span())),
    ];
    for (key, span) in present {
        if let Some(span) = span.filter(|_| !allowed.contains(&key)) {
            return err(
                text,
                span,
                format!(
                    "{kind} workloads take no {key:?} (they take {})",
                    allowed.join(", ")
                ),
            );
        }
    }
    Ok(())
}

/// The workload of one point.
fn workload_of(kind: &str, c: Combo, f: &Fixed) -> Workload {
    let (request, response) = c.size;
    match kind {
        "rr" => Workload::Rr {
            request,
            response,
            client_wait: f.wait.0,
            server_wait: f.wait.1,
            gap_us: c.gap,
            rate_per_s: f.rate,
            flows: c.flows,
            threads: f.threads,
            protocol: c.protocol,
            // In a protocol sweep the loss timeout is the UDP points' (TCP has none).
            loss_timeout_ms: f.loss_timeout_ms.filter(|_| !c.protocol.is_tcp()),
        },
        "crr" => Workload::Crr {
            request,
            response,
            client_wait: f.wait.0,
            server_wait: f.wait.1,
            flows: c.flows,
            threads: f.threads,
        },
        "stream" => Workload::Stream {
            send_size: c.send,
            flows: c.flows,
            reverse: c.reverse,
            recv_size: f.recv_size,
            recv_wait: f.recv_wait,
            threads: f.threads,
            protocol: c.protocol,
            rate_bps: f.rate_bps,
            gso: f.gso,
            gro: f.gro,
        },
        "bulk" => Workload::Bulk {
            bytes: f.bytes.unwrap_or(1),
            send_size: c.send,
            reverse: c.reverse,
        },
        _ => Workload::Http {
            bytes: f.bytes.unwrap_or(1),
        },
    }
}

/// A point's label (`rr size=64,64`) and its swept parameters as JSON, for the store.
fn name_point(base: &str, c: Combo, swept: &[&str]) -> (String, serde_json::Value) {
    let mut params = serde_json::Map::new();
    let mut label = base.to_string();
    for key in swept {
        let v = match *key {
            "size" => serde_json::json!(format!("{},{}", c.size.0, c.size.1)),
            "send_size" => serde_json::json!(c.send),
            "flows" => serde_json::json!(c.flows),
            "reverse" => serde_json::json!(c.reverse),
            "gap" => serde_json::json!(c.gap.map_or("0".to_string(), |g| format!("{g}us"))),
            "protocol" => serde_json::json!(c.protocol.name()),
            _ => serde_json::json!(cpus_text(c.cpu)),
        };
        label.push_str(&format!(
            " {key}={}",
            v.as_str().map(str::to_string).unwrap_or(v.to_string())
        ));
        params.insert(key.to_string(), v);
    }
    (label, serde_json::Value::Object(params))
}

/// Expands one `[[workload]]` into its points; `room` is how many more points the spec may
/// still have.
fn expand(
    text: &str,
    index: usize,
    w: &Spanned<RawWorkload>,
    default_duration: Duration,
    room: usize,
) -> Result<Vec<Point>, SpecError> {
    let r = w.get_ref();
    let kind = r.kind.get_ref().as_str();
    check_keys(text, r, kind)?;
    let fixed = Fixed::parse(text, w, kind, default_duration)?;
    let axes = Axes::parse(text, r, kind)?;
    let n = axes.len();
    if n > room {
        return err(
            text,
            w.span(),
            format!(
                "this workload's sweep expands to {n} points; a spec may have at most {MAX_POINTS} in all: shorten its lists"
            ),
        );
    }
    let swept = axes.swept();
    let base = r.label.clone().unwrap_or_else(|| kind.to_string());
    axes.combos()
        .map(|c| {
            let workload = workload_of(kind, c, &fixed);
            workload.validate().or_else(|m| err(text, w.span(), m))?;
            let one_flow = matches!(workload, Workload::Rr { flows: 1, .. });
            if fixed.timeline
                && !(one_flow && matches!((c.cpu.0, c.cpu.1), (Some(a), Some(b)) if a != b))
            {
                let span = r.timeline.as_ref().map_or(w.span(), |t| t.span());
                return err(text, span, "timeline follows one rr flow between two pinned CPUs: give cpus = \"A,B\" (two different CPUs)");
            }
            let (label, params) = name_point(&base, c, &swept);
            Ok(Point {
                workload_index: index,
                workload,
                cpus: c.cpu,
                duration: fixed.duration,
                interval: fixed.interval,
                trace: fixed.trace,
                timeline: fixed.timeline,
                count: fixed.count,
                params,
                label,
            })
        })
        .collect()
}

/// Formats CPU pinning as the user writes it (`0,1`, `0,`, `,1`).
pub fn cpus_text(c: parse::Cpus) -> String {
    let f = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    format!("{},{}", f(c.0), f(c.1))
}

/// One `[[config]]`: one config, or one per combination of a guest table's lists
/// (`virtio = { rx_queue_size = [256, 1024] }`), named `NAME:KEY=VALUE,…`.
fn config(text: &str, c: &Spanned<RawConfig>) -> Result<Vec<Config>, SpecError> {
    let base = one_config(text, c)?;
    let Some(Placement::Guest(direction, opts)) = &base.placement else {
        return Ok(vec![base]);
    };
    let r = c.get_ref();
    let Some(g) = &r.guest else {
        return Ok(vec![base]);
    };
    let span = g.span();
    let g = g.get_ref();
    // Axes: (label, what it sets, its values).
    enum Sets {
        Virtio(String),
        Module(String),
        Cmdline,
    }
    let mut axes: Vec<(String, Sets, Vec<String>)> = Vec::new();
    for (k, v) in &g.virtio {
        let vals = v
            .to_vec()
            .iter()
            .map(|x| match x {
                KnobVal::Bool(b) => if *b { "on" } else { "off" }.to_string(),
                other => other.text(),
            })
            .collect();
        axes.push((k.clone(), Sets::Virtio(k.clone()), vals));
    }
    for (k, v) in &g.modules {
        axes.push((
            k.clone(),
            Sets::Module(k.clone()),
            v.to_vec().iter().map(KnobVal::text).collect(),
        ));
    }
    if let Some(c) = &g.cmdline {
        axes.push(("cmdline".into(), Sets::Cmdline, c.to_vec()));
    }
    if let Some((k, _, _)) = axes.iter().find(|(_, _, v)| v.is_empty()) {
        return err(
            text,
            span,
            format!("guest {k}: an empty list sweeps nothing"),
        );
    }
    let combos: usize = axes.iter().map(|(_, _, v)| v.len()).product();
    if combos > 64 {
        return err(
            text,
            span,
            format!("the guest table's lists make {combos} configs (at most 64: each boots its own guests)"),
        );
    }
    let mut out = Vec::new();
    for i in 0..combos {
        let mut o = (**opts).clone();
        let mut label = Vec::new();
        let mut rest = i;
        for (name, sets, vals) in &axes {
            let v = &vals[rest % vals.len()];
            rest /= vals.len();
            match sets {
                Sets::Virtio(k) => {
                    o.virtio.insert(k.clone(), v.clone());
                }
                Sets::Module(k) => {
                    o.modules.insert(k.clone(), v.clone());
                }
                Sets::Cmdline => o.cmdline = Some(v.clone()).filter(|c| !c.trim().is_empty()),
            }
            if vals.len() > 1 {
                label.push(format!("{name}={v}"));
            }
        }
        crate::place::guest::check_cmdline(o.cmdline.as_deref())
            .or_else(|e| err(text, span.clone(), format!("{e}")))?;
        crate::place::guest::module_params(&o.modules)
            .or_else(|e| err(text, span.clone(), format!("{e}")))?;
        let mut cfg = base.clone();
        if !label.is_empty() {
            cfg.name = format!("{}:{}", base.name, label.join(","));
        }
        cfg.placement = Some(Placement::Guest(*direction, Box::new(o)));
        out.push(cfg);
    }
    Ok(out)
}

/// Names are printed on terminals and in reports: a control character (an escape sequence
/// that recolours or retitles the terminal) has no place in one.
const CONTROL_IN_NAME: &str =
    "a name must not contain control characters (escape sequences, tabs, newlines)";

fn one_config(text: &str, c: &Spanned<RawConfig>) -> Result<Config, SpecError> {
    let r = c.get_ref();
    let name = r.name.get_ref().trim().to_string();
    if name.is_empty() {
        return err(text, r.name.span(), "config name must not be empty");
    }
    if name.chars().any(char::is_control) {
        return err(text, r.name.span(), CONTROL_IN_NAME);
    }
    let mut knobs = Vec::new();
    for (k, v) in &r.sysctl {
        let knob = Knob::sysctl(k).or_else(|m| err(text, v.span(), m))?;
        knobs.push((knob, v.get_ref().text()));
    }
    for (k, v) in &r.module {
        let knob = Knob::module_param(k).or_else(|m| err(text, v.span(), m))?;
        knobs.push((knob, v.get_ref().text()));
    }
    if let Some(states) = &r.cpuidle_disable {
        for &st in states.get_ref() {
            let ks = Knob::cpuidle_disable_all(st);
            if ks.is_empty() {
                return err(
                    text,
                    states.span(),
                    "no CPUs found under /sys/devices/system/cpu",
                );
            }
            knobs.extend(ks.into_iter().map(|k| (k, "1".to_string())));
        }
    }
    let sock = match &r.socket {
        Some(s) => {
            let raw = s.get_ref();
            let buf = |v: &Option<SizeVal>| -> Result<Option<u32>, SpecError> {
                match v {
                    Some(x) => parse::size32(&x.text())
                        .map(Some)
                        .or_else(|m| err(text, s.span(), m)),
                    None => Ok(None),
                }
            };
            SockOpts {
                nodelay: raw.nodelay,
                busy_poll_us: raw.busy_poll_us,
                sndbuf: buf(&raw.sndbuf)?,
                rcvbuf: buf(&raw.rcvbuf)?,
            }
        }
        None => SockOpts::default(),
    };
    let cpus = match &r.cpus {
        Some(s) => Some(parse::cpus(s.get_ref()).or_else(|m| err(text, s.span(), m))?),
        None => None,
    };
    let placement = match &r.placement {
        None => None,
        Some(p) => match p
            .get_ref()
            .parse()
            .or_else(|e| err(text, p.span(), format!("{e}")))?
        {
            Placement::Local => None,
            placed => Some(placement_settings(text, r, placed)?),
        },
    };
    if let (Some(g), false) = (&r.guest, matches!(placement, Some(Placement::Guest(..)))) {
        return err(
            text,
            g.span(),
            "a guest table needs placement = \"guest…\" in the same config".to_string(),
        );
    }
    if let (Some(s), false) = (&r.ssh, matches!(placement, Some(Placement::Ssh(..)))) {
        return err(
            text,
            s.span(),
            "an ssh table needs placement = \"ssh:USER@HOST\" in the same config".to_string(),
        );
    }
    Ok(Config {
        name,
        description: r.description.clone(),
        knobs,
        sock,
        cpus,
        placement,
        setup: r.setup.clone(),
        teardown: r.teardown.clone(),
    })
}

/// A placement with the settings its config gives it: the guest table, the ssh table, the
/// token; a remote agent without a port is on the default one.
fn placement_settings(
    text: &str,
    r: &RawConfig,
    mut placed: Placement,
) -> Result<Placement, SpecError> {
    match &mut placed {
        Placement::Guest(_, opts) => **opts = guest_opts(text, r)?,
        Placement::Ssh(t) => {
            if let Some(s) = &r.ssh {
                t.identity = s.get_ref().key.as_ref().map(Into::into);
                t.options = s.get_ref().options.clone();
            }
        }
        Placement::Remote { port, token, .. } => {
            port.get_or_insert(virtperf_wire::DEFAULT_PORT);
            token.clone_from(&r.token);
        }
        Placement::Local | Placement::Netns(..) => {}
    }
    Ok(placed)
}

/// The guest settings of a config (`guest = { vcpus = 2, … }`), defaults for the rest.
fn guest_opts(text: &str, r: &RawConfig) -> Result<crate::place::guest::GuestOpts, SpecError> {
    let mut o = crate::place::guest::GuestOpts::default();
    let Some(g) = &r.guest else {
        return Ok(o);
    };
    let span = g.span();
    let g = g.get_ref();
    o.kernel = g.kernel.as_ref().map(Into::into);
    o.kernel_modules = g.kernel_modules.as_ref().map(Into::into);
    o.binary = g.binary.as_ref().map(Into::into);
    if let Some(v) = g.vcpus {
        if v == 0 || v > 64 {
            return err(
                text,
                span.clone(),
                format!("guest vcpus must be 1..64 (got {v})"),
            );
        }
        o.vcpus = v;
    }
    if let Some(m) = g.mem {
        if m < 128 {
            return err(
                text,
                span.clone(),
                format!("guest mem must be at least 128 (MiB; got {m})"),
            );
        }
        o.mem_mib = m;
    }
    if let Some(c) = &g.vcpu_cpus {
        o.vcpu_cpus = c.clone();
    }
    if let Some(v) = g.vhost {
        o.vhost = v;
    }
    if let Some(a) = &g.accel {
        o.accel = a
            .parse()
            .or_else(|m: anyhow::Error| err(text, span.clone(), m))?;
    }
    if let Some(t) = &g.boot_timeout {
        o.boot_timeout = parse::duration(t).or_else(|m| err(text, span.clone(), m))?;
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sweep_expands_to_the_cartesian_product() {
        let s = parse(
            r#"
name = "x"
duration = "2s"
repetitions = 3
[[workload]]
kind = "stream"
send_size = [64, "1KiB", 4096]
reverse = [false, true]
[[config]]
name = "a"
[[config]]
name = "b"
sysctl = { "net.core.busy_poll" = 50 }
socket = { nodelay = true, busy_poll_us = 50 }
"#,
        )
        .unwrap();
        assert_eq!(s.points.len(), 6);
        assert_eq!(s.configs.len(), 2);
        assert_eq!(s.repeat, Repeat::Fixed(3));
        assert_eq!(s.points[1].label, "stream send_size=64 reverse=true");
        assert_eq!(
            s.points[2].workload,
            Workload::Stream {
                send_size: 1024,
                flows: 1,
                reverse: false,
                recv_size: None,
                recv_wait: None,
                threads: None,
                protocol: Default::default(),
                rate_bps: None,
                gso: false,
                gro: false,
            }
        );
        assert_eq!(s.points[0].duration, Duration::from_secs(2));
        assert_eq!(s.configs[1].knobs[0].1, "50");
        assert_eq!(s.configs[1].sock.busy_poll_us, Some(50));
    }

    #[test]
    fn defaults() {
        let s = parse("name = \"d\"\n[[workload]]\nkind = \"rr\"\n").unwrap();
        assert_eq!(s.repeat, Repeat::Fixed(5));
        assert_eq!(s.configs[0].name, "default");
        assert_eq!(s.points[0].workload, Workload::rr(1, 1));
        assert_eq!(s.points[0].duration, Duration::from_secs(10));
    }

    /// `protocol` sweeps like any list; a UDP stream takes its rate and offloads; a size
    /// no datagram holds is refused at its workload's line.
    #[test]
    fn protocol_sweeps_and_udp_streams_take_rate_and_offloads() {
        let s = parse(
            r#"
name = "u"
[[workload]]
kind = "rr"
protocol = ["tcp", "udp"]
loss_timeout = "20ms"
[[workload]]
kind = "stream"
protocol = "udp"
send_size = 1472
rate = "2gbit"
gso = true
"#,
        )
        .unwrap();
        assert_eq!(s.points.len(), 3);
        assert_eq!(s.points[1].label, "rr protocol=udp");
        assert_eq!(s.points[1].params["protocol"], "udp");
        assert_eq!(
            s.points[1].workload.protocol(),
            virtperf_wire::Protocol::Udp
        );
        assert!(matches!(
            s.points[1].workload,
            Workload::Rr {
                loss_timeout_ms: Some(20),
                ..
            }
        ));
        assert_eq!(s.points[0].workload, Workload::rr(1, 1));
        match &s.points[2].workload {
            Workload::Stream {
                protocol,
                rate_bps,
                gso,
                gro,
                ..
            } => {
                assert_eq!(*protocol, virtperf_wire::Protocol::Udp);
                assert_eq!(*rate_bps, Some(2_000_000_000));
                assert!(*gso && !*gro);
            }
            w => panic!("stream expected: {w:?}"),
        }
        let (line, m) = line_of_error(
            "name = \"u\"\n[[workload]]\nkind = \"stream\"\nprotocol = \"udp\"\nsend_size = 65508\n",
        );
        assert_eq!(line, 2, "{m}");
        assert!(m.contains("65507"), "{m}");
        let (_, m) =
            line_of_error("name = \"u\"\n[[workload]]\nkind = \"stream\"\nrate = \"1gbit\"\n");
        assert!(m.contains("--protocol udp"), "{m}");
    }

    fn line_of_error(text: &str) -> (usize, String) {
        let e = parse(text).unwrap_err();
        (e.line, e.message)
    }

    /// seed 2's matrix in one config: each list in the guest table is an axis, every
    /// combination its own config (its own guest), named after the values that vary.
    #[test]
    fn guest_tables_sweep_device_options_kernel_arguments_and_module_parameters() {
        let s = parse(
            "name = \"g\"\n[[workload]]\nkind = \"bulk\"\nbytes = \"1MiB\"\n\
             [[config]]\nname = \"virtio\"\nplacement = \"guest\"\n\
             guest = { virtio = { rx_queue_size = [256, 1024], mrg_rxbuf = [true, false], csum = \"on\" }, \
             cmdline = \"nohz=off\", modules = { \"haltpoll.guest_halt_poll_ns\" = 0 } }\n",
        )
        .expect("valid");
        let names: Vec<&str> = s.configs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "virtio:mrg_rxbuf=on,rx_queue_size=256",
                "virtio:mrg_rxbuf=off,rx_queue_size=256",
                "virtio:mrg_rxbuf=on,rx_queue_size=1024",
                "virtio:mrg_rxbuf=off,rx_queue_size=1024",
            ]
        );
        match &s.configs[3].placement {
            Some(Placement::Guest(_, o)) => {
                assert_eq!(o.virtio["rx_queue_size"], "1024");
                assert_eq!(o.virtio["mrg_rxbuf"], "off");
                assert_eq!(o.virtio["csum"], "on");
                assert_eq!(o.cmdline.as_deref(), Some("nohz=off"));
                assert_eq!(o.modules["haltpoll.guest_halt_poll_ns"], "0");
            }
            other => panic!("guest placement expected, got {other:?}"),
        }
        let head = "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"c\"\nplacement = \"guest\"\n";
        for (bad, says) in [
            (
                "guest = { cmdline = \"rdinit=/bin/sh\" }",
                "virtperf is the guest's init",
            ),
            (
                "guest = { cmdline = [\"nohz=off\", \"console=tty0\"] }",
                "console",
            ),
            (
                "guest = { modules = { \"guest_halt_poll_ns\" = 0 } }",
                "MODULE.PARAMETER",
            ),
            ("guest = { virtio = { rx_queue_size = [] } }", "empty list"),
        ] {
            let (line, m) = line_of_error(&format!("{head}{bad}\n"));
            assert_eq!(line, 7, "{bad}: {m}");
            assert!(m.contains(says), "{bad}: {m}");
        }
    }

    #[test]
    fn guest_placements_take_their_settings_from_the_config() {
        let s = parse(
            "name = \"g\"\n[[workload]]\nkind = \"rr\"\n\
             [[config]]\nname = \"native\"\n\
             [[config]]\nname = \"g2h\"\nplacement = \"guest:guest-host\"\n\
             guest = { vcpus = 2, mem = 256, accel = \"tcg\", vcpu_cpus = [1], boot_timeout = \"30s\" }\n\
             [[config]]\nname = \"h2g\"\nplacement = \"guest\"\n",
        )
        .expect("valid spec");
        match &s.configs[1].placement {
            Some(Placement::Guest(d, o)) => {
                assert_eq!(*d, crate::place::guest::Direction::GuestHost);
                assert_eq!((o.vcpus, o.mem_mib), (2, 256));
                assert_eq!(o.accel, crate::place::guest::Accel::Tcg);
                assert_eq!(o.vcpu_cpus, [1]);
                assert_eq!(o.boot_timeout, Duration::from_secs(30));
            }
            other => panic!("guest placement expected, got {other:?}"),
        }
        match &s.configs[2].placement {
            Some(Placement::Guest(d, o)) => {
                assert_eq!(*d, crate::place::guest::Direction::HostGuest);
                assert_eq!(**o, crate::place::guest::GuestOpts::default());
            }
            other => panic!("guest placement expected, got {other:?}"),
        }
        assert_eq!(
            s.configs[1]
                .placement
                .as_ref()
                .map(Placement::to_string)
                .as_deref(),
            Some("guest:guest-host")
        );

        let head = "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"x\"\n";
        let (l, m) = line_of_error(&format!("{head}placement = \"guest:sideways\"\n"));
        assert_eq!(l, 6, "{m}");
        assert!(m.contains("guest:guest-guest"), "{m}");
        let (l, m) = line_of_error(&format!("{head}guest = {{ vcpus = 2 }}\n"));
        assert_eq!(l, 6, "{m}");
        assert!(m.contains("needs placement"), "{m}");
        let (_, m) = line_of_error(&format!(
            "{head}placement = \"guest\"\nguest = {{ vcpus = 0 }}\n"
        ));
        assert!(m.contains("vcpus must be 1..64"), "{m}");
        let (_, m) = line_of_error(&format!(
            "{head}placement = \"guest\"\nguest = {{ accel = \"hvf\" }}\n"
        ));
        assert!(m.contains("unknown accelerator"), "{m}");
        let (_, m) = line_of_error(&format!(
            "{head}placement = \"guest\"\nguest = {{ cores = 2 }}\n"
        ));
        assert!(m.contains("cores"), "{m}");
    }

    #[test]
    fn ssh_and_remote_placements_in_configs() {
        let s = parse(
            "name = \"r\"\n[[workload]]\nkind = \"rr\"\n\
             [[config]]\nname = \"a\"\nplacement = \"ssh:me@box:2222\"\n\
             ssh = { key = \"/k\", options = [\"StrictHostKeyChecking=no\"] }\n\
             [[config]]\nname = \"b\"\nplacement = \"remote:box:7001\"\ntoken = \"t\"\n\
             [[config]]\nname = \"c\"\nplacement = \"remote:box\"\n",
        )
        .expect("valid spec");
        match &s.configs[0].placement {
            Some(Placement::Ssh(t)) => {
                assert_eq!(t.dest, "me@box");
                assert_eq!(t.port, Some(2222));
                assert_eq!(t.identity.as_deref(), Some(std::path::Path::new("/k")));
                assert_eq!(t.options, ["StrictHostKeyChecking=no"]);
            }
            other => panic!("ssh placement expected, got {other:?}"),
        }
        let remote = |i: usize| match &s.configs[i].placement {
            Some(Placement::Remote { host, port, token }) => (host.clone(), *port, token.clone()),
            other => panic!("remote placement expected, got {other:?}"),
        };
        assert_eq!(
            remote(1),
            ("box".to_string(), Some(7001), Some("t".to_string()))
        );
        assert_eq!(remote(2).1, Some(virtperf_wire::DEFAULT_PORT));

        let head = "name = \"g\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"x\"\n";
        let (l, m) = line_of_error(&format!("{head}ssh = {{ key = \"/k\" }}\n"));
        assert_eq!(l, 6, "{m}");
        assert!(m.contains("needs placement = \"ssh:"), "{m}");
        let (_, m) = line_of_error(&format!("{head}placement = \"remote:box:http\"\n"));
        assert!(m.contains("invalid port"), "{m}");
        let (_, m) = line_of_error(&format!("{head}placement = \"ssh:\"\n"));
        assert!(!m.is_empty());
    }

    #[test]
    fn stream_receive_size_in_specs() {
        let s = parse("name = \"r\"\n[[workload]]\nkind = \"stream\"\nrecv_size = \"64KiB\"\n")
            .expect("valid");
        assert!(matches!(
            s.points[0].workload,
            Workload::Stream {
                recv_size: Some(65536),
                ..
            }
        ));
        let (l, m) = line_of_error("name = \"r\"\n[[workload]]\nkind = \"rr\"\nrecv_size = 4096\n");
        assert_eq!(l, 4, "{m}");
        assert!(m.contains("stream workloads only"), "{m}");
        let s = parse("name = \"r\"\n[[workload]]\nkind = \"stream\"\nrecv_wait = \"block\"\n")
            .expect("valid");
        assert!(matches!(
            s.points[0].workload,
            Workload::Stream {
                recv_wait: Some(RecvWait::Block),
                ..
            }
        ));
        let (l, m) =
            line_of_error("name = \"r\"\n[[workload]]\nkind = \"stream\"\nrecv_wait = \"spin\"\n");
        assert_eq!(l, 4, "{m}");
        assert!(m.contains("`poll`") && m.contains("`spin`"), "{m}");
        let (l, m) =
            line_of_error("name = \"r\"\n[[workload]]\nkind = \"crr\"\nrecv_wait = \"poll\"\n");
        assert_eq!(l, 4, "{m}");
        assert!(m.contains("stream workloads only"), "{m}");
    }

    #[test]
    fn errors_name_their_line() {
        let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"udp\"\n");
        assert_eq!(l, 3, "{m}");
        assert!(m.contains("unknown workload kind"), "{m}");

        let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nsize = \"-1\"\n");
        assert_eq!(l, 4);
        assert!(m.contains("positive"), "{m}");

        let (l, m) = line_of_error("name = \"x\"\nduraton = \"5s\"\n[[workload]]\nkind = \"rr\"\n");
        assert_eq!(l, 2);
        assert!(m.contains("duraton"), "{m}");

        let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nsend_size = 64\n");
        assert_eq!(l, 4);
        assert!(m.contains("take no"), "{m}");

        let (l, _) = line_of_error(
            "name = \"x\"\nrepetitions = 3\nuntil_ci = \"95,2%\"\n[[workload]]\nkind=\"rr\"\n",
        );
        assert_eq!(l, 2);

        let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\n[[config]]\nname = \"a\"\nsysctl = { \"../etc/passwd\" = 1 }\n");
        assert_eq!(l, 6);
        assert!(m.contains("sysctl"), "{m}");

        let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"bulk\"\n");
        assert_eq!(l, 2, "{m}");
        assert!(m.contains("bytes"));

        let (l, m) = line_of_error("name = [\n");
        assert!(l >= 1, "{m}");
        let (l, m) = line_of_error("name = \"x\"\n");
        assert_eq!(l, 0);
        assert!(m.contains("no [[workload]]"));
    }

    #[test]
    fn out_of_range_values_fail_at_their_line_before_any_trial() {
        let (l, m) =
            line_of_error("name = \"x\"\nduration = \"100000h\"\n[[workload]]\nkind = \"rr\"\n");
        assert_eq!(l, 2, "{m}");
        assert!(m.contains("at most 24h"), "{m}");
        let (l, m) =
            line_of_error("name = \"x\"\n[[workload]]\nkind = \"rr\"\nduration = \"1e30\"\n");
        assert_eq!(l, 4, "{m}");
        assert!(m.contains("at most 24h"), "{m}");
        let (l, m) = line_of_error(
            "name = \"x\"\n[[workload]]\nkind = \"http\"\nbytes = \"1MB\"\ncount = 0\n",
        );
        assert_eq!(l, 5, "{m}");
        assert!(m.contains("count must be between"), "{m}");
    }

    /// A million sweep points are refused from the axes' lengths, before any is built.
    #[test]
    fn huge_sweeps_are_refused_with_their_size() {
        let list = |n: usize| {
            (1..=n)
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let text = format!(
            "name = \"x\"\n[[workload]]\nkind = \"stream\"\nsend_size = [{}]\nflows = [{}]\n",
            list(1000),
            list(1000)
        );
        let (l, m) = line_of_error(&text);
        assert_eq!(l, 2, "{m}");
        assert!(m.contains("1000000 points") && m.contains("10000"), "{m}");

        // Within the point cap but too many trials in all.
        let text = format!(
            "name = \"x\"\nrepetitions = 1000\n[[workload]]\nkind = \"stream\"\nsend_size = [{}]\n",
            list(200)
        );
        let (_, m) = line_of_error(&text);
        assert!(m.contains("plans 200000 trials"), "{m}");
    }

    #[test]
    fn rr_wait_modes_gaps_and_rates_in_specs() {
        let s = parse(
            "name = \"x\"\n[[workload]]\nkind = \"rr\"\nwait = \"block,spin\"\ngap = [\"0\", \"100us\"]\n",
        )
        .unwrap();
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[0].label, "rr gap=0");
        assert_eq!(s.points[1].label, "rr gap=100us");
        match &s.points[1].workload {
            Workload::Rr {
                client_wait,
                server_wait,
                gap_us,
                rate_per_s,
                ..
            } => {
                assert_eq!(*client_wait, virtperf_wire::Wait::Block);
                assert_eq!(*server_wait, virtperf_wire::Wait::Spin);
                assert_eq!(*gap_us, Some(100));
                assert_eq!(*rate_per_s, None);
            }
            other => panic!("{other:?}"),
        }
        let s = parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\nflows = [1, 4]\nrate = 1000\n")
            .unwrap();
        assert_eq!(s.points.len(), 2);
        assert_eq!(s.points[1].label, "rr flows=4");
        assert!(matches!(
            s.points[1].workload,
            Workload::Rr {
                flows: 4,
                rate_per_s: Some(1000),
                ..
            }
        ));
        let (l, m) = line_of_error("name = \"x\"\n[[workload]]\nkind = \"crr\"\ngap = \"1ms\"\n");
        assert_eq!(l, 4, "{m}");
        assert!(m.contains("take no \"gap\""), "{m}");
        let (l, m) = line_of_error(
            "name = \"x\"\n[[workload]]\nkind = \"rr\"\nrate = 1000\ngap = \"1ms\"\n",
        );
        assert_eq!(l, 5, "{m}");
        assert!(m.contains("not both"), "{m}");
    }

    /// `threads` reaches rr, crr and stream points, fixed while `flows` sweeps (a single
    /// flow then runs on one thread); other kinds refuse it at its line.
    #[test]
    fn threads_multiplex_a_flow_sweep() {
        let s = parse(
            "name = \"x\"\n[[workload]]\nkind = \"rr\"\nthreads = 2\nflows = [1, 100, 1000]\n",
        )
        .unwrap();
        let m: Vec<_> = s.points.iter().map(|p| p.workload.multiplexed()).collect();
        assert_eq!(m, [Some((1, 1)), Some((100, 2)), Some((1000, 2))]);
        assert!(s.points.iter().all(|p| p.workload.validate().is_ok()));
        for kind in ["crr", "stream"] {
            let s = parse(&format!(
                "name = \"x\"\n[[workload]]\nkind = \"{kind}\"\nthreads = 2\nflows = 10\n"
            ))
            .unwrap();
            assert_eq!(s.points[0].workload.multiplexed(), Some((10, 2)), "{kind}");
        }
        let s = parse(include_str!("../../../recipes/flows.toml")).unwrap();
        let m: Vec<_> = s.points.iter().map(|p| p.workload.multiplexed()).collect();
        assert_eq!(
            m,
            [
                Some((1, 1)),
                Some((100, 2)),
                Some((1000, 2)),
                Some((10000, 2))
            ]
        );
        let (l, m) = line_of_error(
            "name = \"x\"\n[[workload]]\nkind = \"bulk\"\nbytes = \"1MB\"\nthreads = 2\n",
        );
        assert_eq!(l, 5, "{m}");
        assert!(m.contains("take no \"threads\""), "{m}");
    }

    /// `trace` and `timeline` reach the plan; a timeline without two pinned CPUs, or on a
    /// workload other than rr, is refused at its line.
    #[test]
    fn trace_and_timeline_in_specs() {
        let s = parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\ncpus = \"0,1\"\ntrace = true\ntimeline = true\n").expect("parses");
        let plan = crate::runner::plan_for(&s.points[0], &s.configs[0]);
        assert!(plan.trace && plan.timeline);
        let e = parse("name = \"x\"\n[[workload]]\nkind = \"rr\"\ntimeline = true\n").unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.message.contains("cpus"), "{e}");
        let e = parse(
            "name = \"x\"\n[[workload]]\nkind = \"stream\"\ncpus = \"0,1\"\ntimeline = true\n",
        )
        .unwrap_err();
        assert!(e.message.contains("timeline"), "{e}");
        let s =
            parse("name = \"x\"\n[[workload]]\nkind = \"stream\"\ntrace = true\n").expect("parses");
        assert!(s.points[0].trace && !s.points[0].timeline);
    }

    /// `interval` reaches the point; a too-short one, one longer than the trial, and one
    /// on http are refused at their line.
    #[test]
    fn intervals_in_specs() {
        let s = parse(
            "name = \"x\"\nduration = \"2s\"\n[[workload]]\nkind = \"rr\"\ninterval = \"500ms\"\n",
        )
        .expect("parses");
        assert_eq!(s.points[0].interval, Some(Duration::from_millis(500)));
        let (l, m) =
            line_of_error("name = \"x\"\n[[workload]]\nkind = \"stream\"\ninterval = \"10ms\"\n");
        assert_eq!(l, 4);
        assert!(m.contains("at least 100ms"), "{m}");
        let (l, m) = line_of_error(
            "name = \"x\"\nduration = \"1s\"\n[[workload]]\nkind = \"crr\"\ninterval = \"2s\"\n",
        );
        assert_eq!(l, 5);
        assert!(m.contains("longer than the trial"), "{m}");
        let (_, m) = line_of_error(
            "name = \"x\"\n[[workload]]\nkind = \"http\"\nbytes = \"1MB\"\ninterval = \"1s\"\n",
        );
        assert!(m.contains("take no \"interval\""), "{m}");
    }

    #[test]
    fn until_ci_policy() {
        let s = parse(
            "name=\"x\"\nuntil_ci = \"95,2%\"\nmax_repetitions = 12\n[[workload]]\nkind=\"rr\"\n",
        )
        .unwrap();
        assert_eq!(
            s.repeat,
            Repeat::UntilCi {
                level: 0.95,
                width: 0.02,
                min: 3,
                max: 12
            }
        );
    }
}
