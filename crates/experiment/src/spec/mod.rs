//! Experiment specs: a TOML file naming workloads with parameter sweeps, configurations
//! (named sets of knobs), repetitions and duration. Parsing keeps source positions so every
//! error names its line.
//!
//! ```toml
//! name = "tcp-stream-sweep"
//! duration = "5s"            # per trial
//! # omit = "2s"               # run each timed trial 2 s first, unmeasured (--omit)
//! repetitions = 5            # or: until_ci = "95,2%" with max_repetitions = 20
//!
//! [[workload]]
//! kind = "stream"
//! send_size = [4, 8, 16, 4096]   # a list is a sweep
//! # recv_size = "64KiB"          # bytes per receive (netperf -M)
//! # recv_wait = "poll"           # receiver polls (iperf3) instead of sleeping in recv (netperf)
//! # buf_offset = 16              # buffers start 16 bytes into a page (netperf -o/-O)
//! # seqpacket = true             # unix-rr over SOCK_SEQPACKET (--seqpacket)
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
use virtperf_wire::RrParams;

use serde::Deserialize;
use toml::Spanned;
use virtperf_wire::{RecvWait, SockOpts, Workload};

use virtperf_lab::parse;
use virtperf_machine::knob::Knob;
use virtperf_place::Placement;

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
    /// The warm-up before each trial's measured interval (`omit = "2s"`), if any.
    pub omit: Option<Duration>,
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

/// What the spec's top level gives every workload that does not say otherwise.
struct Defaults {
    duration: Duration,
    omit: Option<Duration>,
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
    /// Bulk streams each of its (TCP rr) trials runs beside (`load = "streams=4"`): the
    /// rr's latency under load, compared with a config without one.
    pub load: Option<virtperf_lab::under_load::UnderLoad>,
    /// The data connections' address family (`family = "ipv4"` or `"ipv6"`, the
    /// workloads' `-4`/`-6`); None: whatever the agent's address is.
    pub family: Option<virtperf_lab::plan::Family>,
    /// How both sides wait for messages, overriding the workloads' (`wait = "spin"`): a
    /// remedy `tune` compares with knobs.
    pub wait: Option<(virtperf_wire::Wait, virtperf_wire::Wait)>,
    /// A CPU latency bound (µs) held through `/dev/cpu_dma_latency` while the config's
    /// trials run (`cpu_dma_latency = 0`: tuned's `force_latency`); released when the
    /// config ends, or by the kernel when the process dies, so nothing is left to restore.
    pub cpu_dma_latency: Option<u32>,
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
    /// `[compare] max_tax`: `run` exits 3 naming each candidate's row whose tax against
    /// the baseline is above it.
    pub max_tax: Option<virtperf_report::tax::MaxTax>,
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

/// The TOML reader's message, except where one of the spec's untagged values did not
/// match (their `expecting` texts begin "takes "): then the key and the value as written
/// (the innermost key, inside an inline table) and what such a key takes.
fn toml_message(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().trim();
    let takes = match message.strip_prefix("takes ") {
        Some(t) => Some(t.to_string()),
        None => serde_expected(message),
    };
    let Some((takes, span)) = takes.zip(e.span()) else {
        // "expected struct RawGuest": the reader's type names are no words for a user.
        return match message.find("expected struct Raw") {
            Some(i) => format!("{}expected a table (KEY = {{…}} or [KEY])", &message[..i]),
            None => message.to_string(),
        };
    };
    let value = text.get(span.clone()).unwrap_or("").trim();
    // `get`, not indexing: a span off a character boundary must not panic the parser.
    let before = text.get(..span.start).unwrap_or("");
    let line = &before[before.rfind('\n').map_or(0, |i| i + 1)..];
    let key = line.trim_end().trim_end_matches('=');
    let key = key[key.rfind(['{', ',']).map_or(0, |i| i + 1)..].trim();
    format!("{key} = {value}: not a value {key} takes ({takes})")
}

/// What a plain typed key takes, in words, from serde's "invalid type: floating point
/// `1e30`, expected u32" or "invalid value: integer `-1`, expected u32" (Rust's type names
/// are no words for a user); None for any other message.
fn serde_expected(message: &str) -> Option<String> {
    if !(message.starts_with("invalid type: ") || message.starts_with("invalid value: ")) {
        return None;
    }
    let expected = message.rsplit_once(", expected ")?.1.trim();
    Some(
        match expected {
            "u8" | "u16" | "u32" | "u64" | "usize" => "a whole number, 0 or more",
            "i8" | "i16" | "i32" | "i64" | "isize" => "a whole number",
            "f32" | "f64" => "a number",
            "a boolean" => "true or false",
            "a sequence" => "a list [ … ]",
            other if other.starts_with("struct Raw") => return None,
            other => other,
        }
        .to_string(),
    )
}

/// Parses and validates a spec.
pub fn parse(text: &str) -> Result<Spec, SpecError> {
    let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError {
        line: e.span().map(|s| line_of(text, s.start)).unwrap_or(0),
        message: toml_message(text, &e),
    })?;
    let name = raw.name.get_ref().trim().to_string();
    if name.is_empty() {
        return err(text, raw.name.span(), "name must not be empty");
    }
    if name.chars().any(char::is_control) {
        return err(text, raw.name.span(), CONTROL_IN_NAME);
    }
    let defaults = Defaults {
        duration: match &raw.duration {
            Some(d) => parse::test_duration(d.get_ref()).or_else(|m| err(text, d.span(), m))?,
            None => Duration::from_secs(10),
        },
        omit: match &raw.omit {
            Some(o) => Some(parse::omit(o.get_ref()).or_else(|m| err(text, o.span(), m))?),
            None => None,
        },
    };
    let repeat = repeat_of(text, &raw)?;
    if raw.workload.is_empty() {
        return Err(SpecError {
            line: 0,
            message: "the spec has no [[workload]]: add at least one (kind = \"rr\", \"crr\", \"stream\", \"bulk\" or \"http\")".into(),
        });
    }
    let mut points = Vec::new();
    for (i, w) in raw.workload.iter().enumerate() {
        points.extend(expand(text, i, w, &defaults, MAX_POINTS - points.len())?);
    }
    let configs = configs_of(text, &raw)?;
    check_loads(&configs, &points)?;
    check_waits(&configs, &points)?;
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
    let max_tax = max_tax_of(&raw.compare, report.baseline.as_deref(), &points)?;
    Ok(Spec {
        max_tax,
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

/// `[compare] max_tax`, its workloads checked against the points' labels; it needs a
/// baseline to measure the tax against.
fn max_tax_of(
    compare: &Option<RawCompare>,
    baseline: Option<&str>,
    points: &[Point],
) -> Result<Option<virtperf_report::tax::MaxTax>, SpecError> {
    let Some(text) = compare.as_ref().and_then(|c| c.max_tax.as_deref()) else {
        return Ok(None);
    };
    let fail = |message: String| SpecError { line: 0, message };
    if baseline.is_none() {
        return Err(fail(
            "[compare] max_tax needs [report] baseline = \"CONFIG\": the tax is each other config's against it".into(),
        ));
    }
    let labels: Vec<&str> = points.iter().map(|p| p.label.as_str()).collect();
    virtperf_report::tax::MaxTax::parse(text, Some(&labels))
        .map(Some)
        .map_err(|e| fail(format!("[compare] max_tax: {e}")))
}

/// How many times each trial runs: `repetitions`, or `until_ci` (at most
/// `max_repetitions`), or 5.
fn repeat_of(text: &str, raw: &RawSpec) -> Result<Repeat, SpecError> {
    Ok(match (&raw.repetitions, &raw.until_ci) {
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
    })
}

/// The spec's configs (each `[[config]]` may expand to several), or one "default".
fn configs_of(text: &str, raw: &RawSpec) -> Result<Vec<Config>, SpecError> {
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
            load: None,
            family: None,
            wait: None,
            cpu_dma_latency: None,
        });
    }
    Ok(configs)
}

/// A config's `load` measures a TCP rr beside streams: refused when the spec has any
/// other point (the config runs every point).
fn check_loads(configs: &[Config], points: &[Point]) -> Result<(), SpecError> {
    let Some(c) = configs.iter().find(|c| c.load.is_some()) else {
        return Ok(());
    };
    match points
        .iter()
        .find(|p| !matches!(p.workload, Workload::Rr(RrParams { .. })) || !p.workload.protocol().is_tcp())
    {
        Some(p) => Err(SpecError {
            line: 0,
            message: format!(
                "config {:?} has a load, which measures a TCP rr beside streams, but the spec also has {}: put other workloads in a spec of their own",
                c.name, p.label
            ),
        }),
        None => Ok(()),
    }
}

/// A config's `wait` must fit every workload it runs (rr, crr and unix-rr have wait modes).
fn check_waits(configs: &[Config], points: &[Point]) -> Result<(), SpecError> {
    for c in configs {
        let Some((cw, sw)) = c.wait else { continue };
        for p in points {
            if let Err(m) = p.workload.with_waits(cw, sw) {
                return Err(SpecError {
                    line: 0,
                    message: format!("config {:?}: wait: {} ({m})", c.name, p.label),
                });
            }
        }
    }
    Ok(())
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

/// Formats CPU pinning as the user writes it (`0,1`, `0,`, `,1`).
pub fn cpus_text(c: parse::Cpus) -> String {
    let f = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_default();
    format!("{},{}", f(c.0), f(c.1))
}

mod configs;
mod matrix;
mod raw;
#[cfg(test)]
mod tests;
use configs::*;
pub use matrix::plan_for;
use matrix::*;
use raw::*;
