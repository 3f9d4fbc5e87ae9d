//! A workload table expanded into its sweep points: axes, their combinations, the fixed
//! parameters, and the keys each kind takes.

use super::*;
use virtperf_wire::RrParams;

/// Parses one list-valued key of a `[[workload]]` into its values, or `default` when absent.
pub(super) fn axis<T, V: Clone>(
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
pub(super) struct Axes {
    pub(super) cpus: Vec<parse::Cpus>,
    pub(super) sizes: Vec<(u32, u32)>,
    pub(super) send_sizes: Vec<u32>,
    pub(super) flows: Vec<u32>,
    pub(super) reverses: Vec<bool>,
    /// rr's idle gap between transactions, µs (None: back to back).
    pub(super) gaps: Vec<Option<u64>>,
    /// rr and stream: TCP or UDP.
    pub(super) protocols: Vec<virtperf_wire::Protocol>,
}

/// One point of the product.
#[derive(Clone, Copy)]
pub(super) struct Combo {
    pub(super) cpu: parse::Cpus,
    pub(super) size: (u32, u32),
    pub(super) send: u32,
    pub(super) flows: u32,
    pub(super) reverse: bool,
    pub(super) gap: Option<u64>,
    pub(super) protocol: virtperf_wire::Protocol,
}

impl Axes {
    pub(super) fn parse(text: &str, r: &RawWorkload, kind: &str) -> Result<Axes, SpecError> {
        let default_send = if kind == "bulk" { 128 * 1024 } else { 16384 };
        Ok(Axes {
            cpus: axis(text, &r.cpus, (None, None), |v: &String| parse::cpus(v))?,
            sizes: axis(text, &r.size, (1, 1), |v: &SizeVal| {
                parse::size_pair(&v.text())
            })?,
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
    pub(super) fn len(&self) -> usize {
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
    pub(super) fn combos(&self) -> impl Iterator<Item = Combo> + '_ {
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
    pub(super) fn swept(&self) -> Vec<&'static str> {
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
pub(super) struct Fixed {
    pub(super) duration: Duration,
    pub(super) omit: Option<Duration>,
    pub(super) interval: Option<Duration>,
    pub(super) wait: (virtperf_wire::Wait, virtperf_wire::Wait),
    pub(super) rate: Option<u32>,
    /// UDP rr's loss timeout, ms.
    pub(super) loss_timeout_ms: Option<u32>,
    /// UDP stream pacing, bits/s (0: unpaced).
    pub(super) rate_bps: Option<u64>,
    pub(super) gso: bool,
    pub(super) gro: bool,
    pub(super) bidir: bool,
    pub(super) zerocopy: Option<virtperf_wire::ZeroCopy>,
    pub(super) recv_size: Option<u32>,
    pub(super) recv_wait: Option<RecvWait>,
    pub(super) buf_offset: Option<u32>,
    pub(super) seqpacket: bool,
    pub(super) bytes: Option<u64>,
    pub(super) count: u32,
    pub(super) threads: Option<u32>,
    pub(super) trace: bool,
    pub(super) timeline: bool,
}

impl Fixed {
    pub(super) fn parse(
        text: &str,
        w: &Spanned<RawWorkload>,
        kind: &str,
        defaults: &super::Defaults,
    ) -> Result<Fixed, SpecError> {
        let r = w.get_ref();
        let duration = match &r.duration {
            Some(d) => parse::test_duration(d.get_ref()).or_else(|m| err(text, d.span(), m))?,
            None => defaults.duration,
        };
        let omit = match &r.omit {
            Some(o) if matches!(kind, "bulk" | "http") => {
                return err(text, o.span(), format!("omit applies to timed workloads; {kind} moves a fixed amount and has no time to leave out"))
            }
            Some(o) => Some(parse::omit(o.get_ref()).or_else(|m| err(text, o.span(), m))?),
            // The spec's default applies to the timed workloads only.
            None => defaults.omit.filter(|_| !matches!(kind, "bulk" | "http")),
        }
        .filter(|o| !o.is_zero());
        let interval = interval_of(text, r, kind, duration)?;
        let (recv_size, recv_wait) = stream_receive(text, r, kind)?;
        let buf_offset = buf_offset_of(text, r, kind)?;
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
            omit,
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
            bidir: r.bidir.as_ref().is_some_and(|g| *g.get_ref()),
            zerocopy: match &r.zerocopy {
                Some(z) => Some(
                    virtperf_wire::ZeroCopy::parse(z.get_ref())
                        .or_else(|m| err(text, z.span(), m))?,
                ),
                None => None,
            },
            recv_size,
            recv_wait,
            buf_offset,
            seqpacket: r.seqpacket.as_ref().is_some_and(|s| *s.get_ref()),
            bytes,
            count,
            threads: r.threads.as_ref().map(|t| *t.get_ref()),
            trace: r.trace.as_ref().is_some_and(|t| *t.get_ref()),
            timeline: r.timeline.as_ref().is_some_and(|t| *t.get_ref()),
        })
    }
}

/// `interval`: a valid `-i` period, no longer than the trial (bulk runs by bytes, so any).
fn interval_of(
    text: &str,
    r: &RawWorkload,
    kind: &str,
    duration: Duration,
) -> Result<Option<Duration>, SpecError> {
    Ok(match &r.interval {
        Some(v) => {
            let d = parse::duration(v.get_ref())
                .map_err(|e| e.to_string())
                .and_then(|d| virtperf_lab::plan::check_interval(d).map(|()| d))
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
    })
}

/// `recv_size` and `recv_wait`: a stream receiver's, refused on other kinds.
fn stream_receive(
    text: &str,
    r: &RawWorkload,
    kind: &str,
) -> Result<(Option<u32>, Option<RecvWait>), SpecError> {
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
    Ok((recv_size, recv_wait))
}

/// `buf_offset`: where a stream's buffers start within their page, 0–4095 bytes.
fn buf_offset_of(text: &str, r: &RawWorkload, kind: &str) -> Result<Option<u32>, SpecError> {
    match &r.buf_offset {
        Some(v) if kind != "stream" => err(
            text,
            v.span(),
            "buf_offset applies to stream workloads only",
        ),
        Some(v) => match u32::try_from(*v.get_ref()) {
            Ok(o) if o < virtperf_wire::PAGE_BYTES => Ok(Some(o)),
            _ => err(
                text,
                v.span(),
                format!(
                    "buf_offset is where a buffer starts within its page: 0 to {} bytes",
                    virtperf_wire::PAGE_BYTES - 1
                ),
            ),
        },
        None => Ok(None),
    }
}

/// Refuses an unknown kind, and keys the kind does not take, each at its line.
pub(super) fn check_keys(text: &str, r: &RawWorkload, kind: &str) -> Result<(), SpecError> {
    let Some(allowed) = virtperf_lab::roles::spec_kind(kind).map(|k| k.keys) else {
        return err(
            text,
            r.kind.span(),
            format!(
                "unknown workload kind {kind:?} (expected {})",
                virtperf_lab::roles::names().join(", ")
            ),
        );
    };
    let present: [(&str, Option<std::ops::Range<usize>>); 21] = [
        ("trace", r.trace.as_ref().map(|s| s.span())),
        ("seqpacket", r.seqpacket.as_ref().map(|s| s.span())),
        ("timeline", r.timeline.as_ref().map(|s| s.span())),
        ("threads", r.threads.as_ref().map(|s| s.span())),
        ("loss_timeout", r.loss_timeout.as_ref().map(|s| s.span())),
        ("protocol", r.protocol.as_ref().map(|s| s.span())),
        ("gso", r.gso.as_ref().map(|s| s.span())),
        ("gro", r.gro.as_ref().map(|s| s.span())),
        ("bidir", r.bidir.as_ref().map(|s| s.span())),
        ("zerocopy", r.zerocopy.as_ref().map(|s| s.span())),
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

/// The workload of one point (its role builds it from the point's parameters).
pub(super) fn workload_of(kind: &str, c: Combo, f: &Fixed) -> Option<Workload> {
    let p = virtperf_lab::roles::Params {
        size: c.size,
        send: c.send,
        flows: c.flows,
        reverse: c.reverse,
        gap_us: c.gap,
        protocol: c.protocol,
        wait: f.wait,
        rate_per_s: f.rate,
        // In a protocol sweep the loss timeout is the UDP points' (TCP has none).
        loss_timeout_ms: f.loss_timeout_ms.filter(|_| !c.protocol.is_tcp()),
        rate_bps: f.rate_bps,
        gso: f.gso,
        gro: f.gro,
        bidir: f.bidir,
        zerocopy: f.zerocopy,
        recv_size: f.recv_size,
        recv_wait: f.recv_wait,
        bytes: f.bytes,
        threads: f.threads,
        buf_offset: f.buf_offset,
        seqpacket: f.seqpacket,
    };
    virtperf_lab::roles::spec_kind(kind).map(|k| (k.build)(&p))
}

/// A point's label (`rr size=64,64`) and its swept parameters as JSON, for the store.
pub(super) fn name_point(base: &str, c: Combo, swept: &[&str]) -> (String, serde_json::Value) {
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
pub(super) fn expand(
    text: &str,
    index: usize,
    w: &Spanned<RawWorkload>,
    defaults: &super::Defaults,
    room: usize,
) -> Result<Vec<Point>, SpecError> {
    let r = w.get_ref();
    let kind = r.kind.get_ref().as_str();
    check_keys(text, r, kind)?;
    let fixed = Fixed::parse(text, w, kind, defaults)?;
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
            let Some(workload) = workload_of(kind, c, &fixed) else {
                // check_keys refused unknown kinds already.
                return err(text, w.span(), format!("unknown workload kind {kind:?}"));
            };
            workload.validate().or_else(|m| err(text, w.span(), m))?;
            let one_flow = matches!(workload, Workload::Rr(RrParams { flows: 1, .. }));
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
                omit: fixed.omit,
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

/// The client plan for one trial: the point's workload under the config's settings.
pub fn plan_for(point: &Point, cfg: &Config) -> virtperf_lab::plan::Plan {
    let (client_cpu, server_cpu) = cfg.cpus.unwrap_or(point.cpus);
    // Checked when the spec was parsed (`check_waits`): a wait that does not fit leaves
    // the workload as it is.
    let workload = match cfg.wait {
        Some((c, s)) => point
            .workload
            .with_waits(c, s)
            .unwrap_or_else(|_| point.workload.clone()),
        None => point.workload.clone(),
    };
    virtperf_lab::plan::Plan {
        client_cpu,
        server_cpu,
        count: point.count,
        sock: cfg.sock,
        family: cfg.family,
        trace: point.trace,
        timeline: point.timeline,
        interval: point.interval,
        omit: point.omit,
        ..virtperf_lab::plan::Plan::new(workload, point.duration)
    }
}
