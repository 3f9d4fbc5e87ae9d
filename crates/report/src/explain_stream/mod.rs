//! `virtperf explain --workload stream`'s model: what bounds a stream, where each side's CPU
//! goes per byte, and what raises the rate, from the trials of one stored run (so `show`
//! recomputes the same answer). The second instance of explain's shape (a battery stored as
//! trials → arithmetic on them → a verdict), beside the round trip's in [`crate::explain`].
//!
//! - **Cost per MB**, each side: the busy share of the CPU that side's data thread is
//!   pinned to, by kind (user, sys, softirq, irq, steal), times the window, per MB received;
//!   the data threads' own CPU per MB beside it; system calls per MB each side (`send` and
//!   `recv`, counted by the engines' loops); data segments per MB (TCP's count: what
//!   GSO/TSO/GRO and corking made of the calls); retransmits; in a traced trial of its own
//!   (root), IPIs and idle entries per MB.
//! - **The bound**: the sender's TCP_INFO says it waited on the receive window
//!   (`rwnd_limited`) or on its send buffer (`sndbuf_limited`) for at least half of its busy
//!   time, or [`FLOW_SHARE_WITH_EVIDENCE`] of it where 4 MiB socket buffers raised the rate
//!   beyond their interval (the counterfactual, measured): flow control. Else a side's CPU at least [`CPU_BOUND_PCT`] busy over its tries' whole 95%
//!   interval (one that straddles it, or one try at it, leaves the bound undecided): that CPU, named
//!   by side and by its largest kind of work (other work on it included: a busy neighbour is
//!   part of the answer) — but "undecided" for a sender at its limit that also waited on
//!   flow control that share of its time while the buffers' tries cannot tell (its small
//!   segments may be what keeps it busy). Else "no single bound", or "undecided" where the sender waited on
//!   flow control at least that share of its time and the buffers' tries cannot tell
//!   whether the window set the rate.
//! - **The model**, checked against trials it was not built from: the stream paced to half
//!   its as-is rate ([`PACED`]) measures each side's CPU µs per MB where that side is not the
//!   limit; one whole CPU at that cost predicts the rate of the bound side (or, with no
//!   single bound, of the busier side). The residual, measured ÷ predicted − 1, is published
//!   as it comes out.
//! - **Remedies**: each measured in the same tries as as-is, interleaved, as a ratio of
//!   means with Fieller's 95% interval, and the bound side's CPU per MB under it: "raises"
//!   or "lowers" where the interval excludes 1, "no measurable effect" only where it lies
//!   within [`NO_EFFECT_BAND`] of 1, "undecided" otherwise.

mod compare;
mod labels;
mod predict;
mod remedy;
mod trials;
#[cfg(test)]
use predict::goal_note;
use predict::{mean, model};
use remedy::remedies;
use trials::*;
mod model;
mod text;

use serde::Serialize;
use virtperf_store::TrialRow;
use virtperf_wire::{Outcome, TestResult, Workload};

use crate::decide::Interval;

pub use compare::{side_by_side, side_by_side_text, SideBySide, Term};
pub use labels::*;
pub use model::*;
/// A remedy's name as people read it (the trial label without the workload, its send size).
pub(crate) use text::name as remedy_name;
pub use text::text;

/// A stream moving at least this share of its link's stated rate (as payload) is bound by
/// the link: the token bucket counts every packet's headers (66 bytes a segment on a veth),
/// so a full MTU-1500 link carries at most about 96% of its rate as payload.
pub const LINK_SHARE: f64 = 0.85;
/// A side's CPU at least this busy (percent) bounds the stream.
pub const CPU_BOUND_PCT: f64 = 90.0;
/// The sender waited on flow control at least this share of its busy time: flow-bound.
pub const FLOW_LIMITED_SHARE: f64 = 0.5;
/// A smaller share is flow-bound too where larger buffers measurably raise the rate (the
/// counterfactual, measured): small windows also cost CPU per byte (small segments), so
/// the sender's CPU can be busy while the window still sets the rate (`--window 4K` on
/// loopback here: the sender waited 15–19% of its time at 81–90% busy, and the buffers
/// raised the rate ×15–×22). The share only has to show the window in play: waits of share
/// `w`, removed, raise the rate at most ×1/(1 − w) by themselves, which stays inside
/// [`NO_EFFECT_BAND`] below this share (≈ 9.1%); where the sender waited at least this
/// long and the buffers' tries cannot tell, the bound is undecided.
pub const FLOW_SHARE_WITH_EVIDENCE: f64 = NO_EFFECT_BAND / (1.0 + NO_EFFECT_BAND);
pub use predict::{NO_EFFECT_BAND, RESIDUAL_GOAL_PCT};
const CONFIDENCE: f64 = 0.95;

/// An explanation of either kind, chosen once from the run (`show` and the commands that
/// read explain runs back go through it).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Explained {
    /// The round trip's ([`crate::explain`]).
    Rr(Box<crate::explain::Explanation>),
    /// A stream's.
    Stream(Box<StreamExplanation>),
}

impl Explained {
    /// The explanation a stored run's trials give; None when the run is no explain run.
    pub fn of(
        row: &virtperf_store::RunRow,
        trials: &[TrialRow],
    ) -> Option<Result<Explained, String>> {
        match row.name.as_str() {
            crate::explain::RUN_NAME => Some(
                crate::explain::explain(row.id, &row.env, trials)
                    .map(|e| Explained::Rr(Box::new(e))),
            ),
            RUN_NAME => Some(explain(row.id, trials).map(|e| Explained::Stream(Box::new(e)))),
            _ => None,
        }
    }

    /// As printed.
    pub fn text(&self) -> String {
        match self {
            Explained::Rr(e) => crate::explain::text(e),
            Explained::Stream(e) => text(e),
        }
    }
}

fn side_cost(
    ts: &[Trial],
    paced: &[Trial],
    traced: &[Trial],
    side: (&'static str, &'static str, u32),
) -> SideCost {
    let (role, end, cpu) = side;
    let threads: Vec<f64> = ts
        .iter()
        .filter_map(|t| {
            let c = side_cpu(t.r, end)?;
            Some((c.process_user_s + c.process_system_s) * 1e6 / t.mb)
        })
        .collect();
    let traced = |name: &str| {
        mean(
            &traced
                .iter()
                .filter_map(|t| t.r.trace.as_ref())
                .filter(|tr| tr.unit == "MB")
                .filter_map(|tr| tr.per_side.get(end)?.get(name).copied())
                .collect::<Vec<_>>(),
        )
    };
    SideCost {
        role,
        end,
        cpu,
        busy_pct: Estimate::of(
            &ts.iter()
                .filter_map(|t| shares(t.r, end, cpu))
                .map(|s| busy(&s))
                .collect::<Vec<_>>(),
        )
        .unwrap_or(Estimate {
            mean: f64::NAN,
            n: 0,
            interval: Interval::None {
                why: format!("CPU {cpu}'s split was not sampled"),
            },
        }),
        us_per_mb: split(ts, end, cpu).unwrap_or(PerMb {
            total: f64::NAN,
            user: f64::NAN,
            sys: f64::NAN,
            softirq: f64::NAN,
            irq: f64::NAN,
            steal: f64::NAN,
            unsampled: f64::NAN,
        }),
        total_us_per_mb_tries: side_totals(ts, end, cpu),
        threads_us_per_mb: mean(&threads),
        paced_us_per_mb: Estimate::of(&side_totals(paced, end, cpu)),
        paced_us_per_mb_tries: side_totals(paced, end, cpu),
        paced_split: split(paced, end, cpu),
        paced_calls_per_mb: flow_count_per_mb(paced, calls(role)),
        paced_segments_per_mb: flow_count_per_mb(paced, segments(role)),
        calls_per_mb: flow_count_per_mb(ts, calls(role)),
        retransmits_per_mb: (role == "sender")
            .then(|| flow_count_per_mb(ts, |f| f.tcp.map(|t| t.retransmits_interval)))
            .flatten(),
        spurious_retransmits_per_mb: (role == "sender")
            .then(|| flow_count_per_mb(ts, |f| f.tcp.and_then(|t| t.dsack_dups_interval)))
            .flatten(),
        segments_per_mb: flow_count_per_mb(ts, segments(role)),
        ipis_per_mb: traced("ipis_received"),
        idle_entries_per_mb: traced("idle_entries"),
        icr_writes_per_mb: traced("msr_write_icr"),
        tsc_deadline_writes_per_mb: traced("msr_write_tsc_deadline"),
    }
}

/// Computes the explanation from a stream explain run's trials; fails (one line) when the
/// as-is stream has no usable trial.
pub fn explain(run_id: i64, trials: &[TrialRow]) -> Result<StreamExplanation, String> {
    let ts = stream_trials(trials, AS_IS);
    let first = ts
        .first()
        .ok_or_else(|| format!("not measured: {}", why_missing(trials, AS_IS)))?;
    let Workload::Stream(p) = &first.r.workload else {
        return Err("the as-is trials are not a stream".into());
    };
    let sides = sides_of(first.r, p.reverse)
        .ok_or("the as-is stream was not pinned to two CPUs: no side's CPU to read")?;
    let paced = stream_trials(trials, PACED);
    let traced = stream_trials(trials, TRACED);
    let costs: Vec<SideCost> = sides
        .iter()
        .map(|s| side_cost(&ts, &paced, &traced, *s))
        .collect();
    let mbps_each: Vec<f64> = ts.iter().map(|t| t.mbps).collect();
    let mbps = Estimate::of(&mbps_each).ok_or("no as-is rate")?;
    let buffers = effect_of(trials, &ts, BIG_BUFFERS);
    let host_view = host_view(&ts);
    let mut bound = bound(&ts, &costs, buffers.as_ref());
    on_the_host(&mut bound, &costs, host_view.as_ref());
    let model = model(&bound, &costs, &mbps_each);
    let remedies = remedies(trials, &ts, &bound, &costs);
    let verdict = text::verdict((p.send_size, p.flows), &mbps, &bound, &costs)
        + &text::what_raises(&remedies);
    Ok(StreamExplanation {
        run_id,
        send_size: p.send_size,
        flows: p.flows,
        reverse: p.reverse,
        mbps,
        bound,
        busy_cpus: remedy::busy_cpus_each(&ts).and_then(|v| mean(&v)),
        host_view,
        sides: costs,
        model,
        remedies,
        not_tried: not_tried(first.r),
        verdict,
    })
}

/// The guest end's threads on this host, from the as-is trials' host view (guest
/// placements carry one).
fn host_view(ts: &[Trial]) -> Option<HostView> {
    let first = ts.first()?;
    let guest_end = match first.r.placement.as_deref() {
        Some(p) if p.ends_with("guest-host") => "client",
        Some(p) if p.starts_with("guest") => "server",
        // `--host … --vm`: the battery ran on the VM's own loopback, both ends inside it.
        _ if first.r.host_vm.is_some() => "both",
        _ => return None,
    };
    let views: Vec<(&Trial, &virtperf_wire::HostVm)> = ts
        .iter()
        .filter_map(|t| t.r.host_vm.as_ref().map(|h| (t, h)))
        .collect();
    let (_, h0) = views.first()?;
    let classes = h0
        .classes
        .iter()
        .map(|c0| {
            let tries = |f: &dyn Fn(&Trial, f64, f64) -> f64| -> Vec<f64> {
                views
                    .iter()
                    .filter_map(|(t, h)| {
                        let c = h.classes.iter().find(|c| c.class == c0.class)?;
                        Some(f(t, c.cpu_s, h.window_s?))
                    })
                    .collect()
            };
            let busy = tries(&|_, cpu, w| 100.0 * cpu / w);
            HostClass {
                class: c0.class.clone(),
                threads: c0.threads,
                busy_pct: mean(&busy).unwrap_or(f64::NAN),
                busy_pct_tries: busy,
                us_per_mb: mean(&tries(&|t, cpu, _| cpu * 1e6 / t.mb)).unwrap_or(f64::NAN),
            }
        })
        .collect();
    let exits = exits_per_mb(&views);
    Some(HostView {
        guest_end,
        accel: h0.accel.clone(),
        classes,
        exits_why: exits.as_ref().err().cloned(),
        exits_per_mb: exits.ok(),
    })
}

/// KVM's exit counters (those named `*exits` and the injections) summed over the as-is
/// trials' windows, per MB; Err: why not (TCG makes none; a trial without them).
fn exits_per_mb(
    views: &[(&Trial, &virtperf_wire::HostVm)],
) -> Result<std::collections::BTreeMap<String, f64>, String> {
    let mut sums = std::collections::BTreeMap::<String, u64>::new();
    let mut mb = 0.0;
    for (t, h) in views {
        let Some(k) = &h.kvm else {
            return Err(match h.accel.as_deref() {
                Some("tcg") => {
                    "the guest runs under TCG (QEMU emulates its CPU): no VM exits".into()
                }
                _ => h
                    .missing
                    .get("kvm")
                    .cloned()
                    .unwrap_or_else(|| "KVM's counters were not read".into()),
            });
        };
        for (name, n) in k
            .counts
            .iter()
            .filter(|(n, _)| n.ends_with("exits") || n.ends_with("injections"))
        {
            *sums.entry(name.clone()).or_default() += n;
        }
        mb += t.mb;
    }
    if views.is_empty() || mb <= 0.0 {
        return Err("no as-is trial carries the host's view".into());
    }
    Ok(sums
        .into_iter()
        .map(|(name, n)| (name, n as f64 / mb))
        .collect())
}

/// Names the bound on the host too where the guest end is the bound one (its vCPU
/// threads' CPU), or where the guest's own accounting shows no CPU at its limit but its
/// vCPU threads on the host are busy nearly all of the window in every try (judged as a
/// side's CPU is: an interval straddling the limit leaves the bound undecided).
fn on_the_host(b: &mut Bound, costs: &[SideCost], host: Option<&HostView>) {
    let Some(h) = host else { return };
    let Some(vcpu) = h.classes.iter().find(|c| c.class == "vcpu") else {
        return;
    };
    let guest = match h.guest_end {
        "both" => costs.iter().find(|c| Some(c.role) == b.side),
        end => costs.iter().find(|c| c.end == end),
    };
    let Some(guest) = guest else {
        return;
    };
    let on_host = format!(
        "on the host its {} vCPU thread{} used {:.0}% of a CPU",
        vcpu.threads,
        if vcpu.threads > 1 { "s" } else { "" },
        vcpu.busy_pct
    );
    match b.kind {
        "cpu" if b.side == Some(guest.role) => b.on_host = Some(on_host),
        // One vCPU thread per end only: with both ends inside, their threads' sum is no
        // one end's CPU.
        // Judged by its tries' interval, as a side's own CPU is.
        "none" if h.guest_end != "both" && vcpu_at_limit(vcpu) == Some(true) => {
            b.kind = "cpu";
            b.side = Some(guest.role);
            b.dominant = None;
            b.figure = "the guest's own accounting shows no CPU at its limit".into();
            b.on_host = Some(on_host);
        }
        "none" if h.guest_end != "both" && vcpu_at_limit(vcpu).is_none() => {
            b.kind = "undecided";
            b.figure = format!(
                "{}; {on_host} (tries: {}), at one CPU's limit ({CPU_BOUND_PCT:.0}%) or not (more --tries)",
                b.figure,
                vcpu.busy_pct_tries
                    .iter()
                    .map(|x| format!("{x:.0}%"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        _ => {}
    }
}

/// Whether the vCPU threads are at one CPU's limit by their tries, as [`at_limit`] judges a
/// side's CPU (an interval reaching under [`CPU_BOUND_PCT`] is not shown to be).
fn vcpu_at_limit(vcpu: &HostClass) -> Option<bool> {
    // No try carried the figure: nothing to judge by, nothing claimed.
    Estimate::of(&vcpu.busy_pct_tries).map_or(Some(false), |e| past(&e, CPU_BOUND_PCT))
}

/// Share (percent) of the senders' busy time spent limited by `f`, over every flow of `ts`.
fn limited_pct(ts: &[Trial], f: fn(&virtperf_wire::TcpInfo) -> Option<u64>) -> Option<f64> {
    let (mut lim, mut busy) = (0u64, 0u64);
    for t in ts {
        let Outcome::Stream(o) = &t.r.outcome else {
            continue;
        };
        for tcp in o.flows.iter().filter_map(|f| f.tcp.as_ref()) {
            if let (Some(l), Some(b)) = (f(tcp), tcp.busy_us) {
                lim += l;
                busy += b;
            }
        }
    }
    (busy > 0).then(|| 100.0 * lim as f64 / busy as f64)
}

/// The share of the senders' data segments lost, percent: retransmitted and not reported
/// by the receiver as had already (D-SACK), over the segments sent, all flows of the
/// trials; None where a flow lacks a count (its kernel reports no D-SACKs or segments).
fn lost_pct(ts: &[Trial]) -> Option<f64> {
    let (mut lost, mut sent) = (0u64, 0u64);
    for t in ts {
        let Outcome::Stream(o) = &t.r.outcome else {
            return None;
        };
        for f in &o.flows {
            let tcp = f.tcp.as_ref()?;
            lost += tcp
                .retransmits_interval
                .saturating_sub(tcp.dsack_dups_interval?);
            sent += tcp.data_segs_out?;
        }
    }
    (sent > 0).then(|| 100.0 * lost as f64 / sent as f64)
}

fn dominant(m: &PerMb) -> &'static str {
    [
        ("user", m.user),
        ("sys", m.sys),
        ("softirq", m.softirq),
        ("irq", m.irq),
        ("steal", m.steal),
    ]
    .into_iter()
    .fold(("sys", f64::MIN), |a, b| if b.1 > a.1 { b } else { a })
    .0
}

const RWND: &str = "the receive window";

/// What the sender waited on longest (the receive window or its send buffer) and for what
/// share of its busy time (percent), where that share is at least `at_least_pct`.
fn waited(b: &Bound, at_least_pct: f64) -> Option<(&'static str, f64)> {
    [
        (RWND, b.rwnd_limited_pct),
        ("the send buffer", b.sndbuf_limited_pct),
    ]
    .into_iter()
    .filter_map(|(w, p)| p.filter(|p| *p >= at_least_pct).map(|p| (w, p)))
    .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// A receive window left full by a receiver whose CPU is at its limit (at least
/// [`CPU_BOUND_PCT`] busy): the sender waits on it because the receiver drains it no
/// faster, so the receiver's CPU is the bound and the window its symptom, unless larger
/// buffers measurably raised the rate (`raised`: then the window's size was binding).
/// Returns the receiver and the note printed with its bound, which says what the buffers'
/// tries decided (no gain, or undecided: then the note is all the answer has).
fn full_window<'a>(
    limit: Option<(&str, f64)>,
    raised: bool,
    costs: &'a [SideCost],
    buffers: Option<&Effect>,
) -> Option<(&'a SideCost, String)> {
    let pct = limit.filter(|(what, _)| *what == RWND && !raised)?.1;
    // At its limit, or perhaps (the caller makes that undecided).
    let receiver = costs
        .iter()
        .find(|c| c.role == "receiver" && at_limit(c) != Some(false))?;
    let larger = match buffers {
        Some(e) => format!("4 MiB socket buffers: {}", e.words()),
        None => "larger buffers not measured".into(),
    };
    Some((
        receiver,
        format!("the sender waited on the receive window {pct:.0}% of its busy time, left full by the busy receiver ({larger})"),
    ))
}

fn bound(ts: &[Trial], costs: &[SideCost], buffers: Option<&Effect>) -> Bound {
    let rwnd = limited_pct(ts, |t| t.rwnd_limited_us);
    let sndbuf = limited_pct(ts, |t| t.sndbuf_limited_us);
    let link_mbps = ts
        .first()
        .and_then(|t| t.r.link_rate_bps)
        .map(|b| b as f64 / 1e6);
    let rate = mean(&ts.iter().map(|t| t.mbps).collect::<Vec<_>>());
    // Larger buffers raised the rate beyond noise: a lower share suffices.
    let raised = buffers.filter(|e| e.effect == "raises");
    let flow = match raised {
        Some(_) => FLOW_SHARE_WITH_EVIDENCE,
        None => FLOW_LIMITED_SHARE,
    } * 100.0;
    let mut b = Bound {
        kind: "none",
        side: None,
        dominant: None,
        figure: String::new(),
        on_host: None,
        full_window: None,
        rwnd_limited_pct: rwnd,
        sndbuf_limited_pct: sndbuf,
        link_mbps,
        lost_pct: lost_pct(ts),
    };
    // The link first: a sender held back by a full qdisc also shows as flow control. Judged
    // by the rate's interval over the tries, as a CPU's busy share is.
    if let (Some(link), Some(rate)) = (link_mbps, rate) {
        let tries = Estimate::of(&ts.iter().map(|t| t.mbps).collect::<Vec<_>>());
        let at = LINK_SHARE * link;
        match tries.as_ref().map(|e| (e, past(e, at))) {
            Some((_, Some(true))) => {
                b.kind = "link";
                b.figure = format!(
                    "{:.0}% of the link's stated {link:.0} Mbit/s (--link-rate, a token bucket counting headers too)",
                    100.0 * rate / link
                );
                return b;
            }
            // Straddling LINK_SHARE of the link, or one try at it: whether the link holds
            // the stream is open.
            Some((e, None)) => {
                b.kind = "undecided";
                b.figure = format!(
                    "{:.0}% of the link's stated {link:.0} Mbit/s ({}), at the link's limit ({:.0}% of it as payload) or not (more --tries)",
                    100.0 * rate / link,
                    match &e.interval {
                        Interval::Bounded { low, high } => format!(
                            "[{:.0}%, {:.0}%] over {} tries",
                            100.0 * low / link,
                            100.0 * high / link,
                            e.n
                        ),
                        Interval::None { why } => why.clone(),
                    },
                    LINK_SHARE * 100.0
                );
                return b;
            }
            _ => {}
        }
    }
    let limit = waited(&b, flow);
    let drained = full_window(limit, raised.is_some(), costs, buffers);
    if let (Some((what, pct)), None) = (limit, &drained) {
        b.kind = "flow_control";
        b.figure = format!("the sender waited on {what} {pct:.0}% of its busy time (TCP_INFO)");
        if let Some(x) = raised.and_then(|e| e.ratio) {
            b.figure += &format!(
                ", and 4 MiB socket buffers raise the rate ×{x:.2} (CPUs busy: {})",
                busy_shares(costs)
            );
        }
        return b;
    }
    let busiest = match drained {
        Some((receiver, _)) if at_limit(receiver).is_none() => {
            b.kind = "undecided";
            b.figure = format!(
                "the sender waited on the receive window {:.0}% of its busy time (TCP_INFO), and the receiver's {}: a window left full by a receiver at its limit, or the window itself (more --tries)",
                limit.map_or(0.0, |l| l.1),
                busy_words(receiver)
            );
            return b;
        }
        Some((receiver, note)) => {
            b.full_window = Some(note);
            Some(receiver)
        }
        None => busiest_at_limit(costs),
    };
    match busiest {
        Some(c) => {
            // A sender at its limit that also waited on the window: its small segments may
            // be what keeps it busy, which only the buffers' tries can tell.
            let doubt = (c.role == "sender").then(|| window_in_doubt(&b, buffers));
            if let Some(Some((what, pct, larger))) = doubt {
                b.kind = "undecided";
                b.figure = format!(
                    "the sender's CPU {} {:.0}% busy, and it waited on {what} {pct:.0}% of its busy time (TCP_INFO): its CPU, or flow control if larger buffers raise the rate (a small window's small segments cost CPU per byte), and 4 MiB socket buffers {larger}",
                    c.cpu, c.busy_pct.mean
                );
                return b;
            }
            let d = dominant(&c.us_per_mb);
            b.kind = "cpu";
            b.side = Some(c.role);
            b.dominant = Some(d);
            b.figure = format!("CPU {} {:.0}% busy", c.cpu, c.busy_pct.mean);
        }
        None => unbound(&mut b, costs, buffers),
    }
    b
}

/// Whether a side's CPU is at its limit by its tries: true where its busy share's 95%
/// interval lies at [`CPU_BOUND_PCT`] or above, false where below (or unsampled), None
/// where it straddles the bound or rests on one try (a mean alone decided it: 89% over
/// three tries reaching 96% was "no CPU at 90% busy").
fn at_limit(c: &SideCost) -> Option<bool> {
    if c.busy_pct.mean.is_nan() {
        return Some(false);
    }
    past(&c.busy_pct, CPU_BOUND_PCT)
}

/// An estimate against a limit `at`: its interval wholly at or above it, wholly under it,
/// or neither (straddling it). One try, no interval, is under it by its mean but never
/// shown at it (as `tune` judges one try against a goal).
fn past(e: &Estimate, at: f64) -> Option<bool> {
    match e.interval {
        Interval::Bounded { low, .. } if low >= at => Some(true),
        Interval::Bounded { high, .. } if high < at => Some(false),
        Interval::Bounded { .. } => None,
        Interval::None { .. } => (e.mean < at).then_some(false),
    }
}

/// The busiest side whose CPU is shown at its limit.
fn busiest_at_limit(costs: &[SideCost]) -> Option<&SideCost> {
    costs
        .iter()
        .filter(|c| at_limit(c) == Some(true))
        .max_by(|a, b| a.busy_pct.mean.total_cmp(&b.busy_pct.mean))
}

/// "CPU 0 91% busy [86%, 96%] over 3 tries" ("(t-interval)" where it reaches past 100%
/// or under 0, as no share can), or "… (1 try: no interval)".
fn busy_words(c: &SideCost) -> String {
    let e = &c.busy_pct;
    match &e.interval {
        Interval::Bounded { low, high } => format!(
            "CPU {} {:.0}% busy [{low:.0}%, {high:.0}%]{} over {} tries",
            c.cpu,
            e.mean,
            if *low < 0.0 || *high > 100.0 {
                " (t-interval)"
            } else {
                ""
            },
            e.n
        ),
        Interval::None { why } => format!("CPU {} {:.0}% busy ({why})", c.cpu, e.mean),
    }
}

/// Flow control neither shown nor ruled out: the sender waited on it at least
/// [`FLOW_SHARE_WITH_EVIDENCE`] of its busy time, and larger buffers were not measured to
/// raise the rate nor to leave it (their tries cannot tell, or there were none). What it
/// waited on, for what share (percent), and what the buffers measured, in words.
fn window_in_doubt(b: &Bound, buffers: Option<&Effect>) -> Option<(&'static str, f64, String)> {
    let told = buffers.is_some_and(|e| matches!(e.effect, "no measurable effect" | "lowers"));
    let (what, pct) = waited(b, FLOW_SHARE_WITH_EVIDENCE * 100.0).filter(|_| !told)?;
    let larger = buffers.map_or("were not measured".into(), |e| {
        format!("measured {} (more --tries)", e.words())
    });
    Some((what, pct, larger))
}

/// A lost share of the sender's segments, percent, from which "no single bound" names the
/// loss: below it, a stream on this project's loopback, where 96% of the retransmissions
/// were D-SACKed (bench/RESULTS.md), loses a few segments in a million.
const LOST_PCT_NAMED: f64 = 0.1;

/// No CPU at its limit and no flow control shown: "no single bound" where the sender
/// waited on flow control under [`FLOW_SHARE_WITH_EVIDENCE`] of its time or larger buffers
/// were measured not to raise the rate; "undecided" where it waited longer and the
/// buffers' tries (or their absence) cannot tell whether the window set the rate.
fn unbound(b: &mut Bound, costs: &[SideCost], buffers: Option<&Effect>) {
    // No CPU shown at its limit, but one may be: whether it bounds the stream is open.
    let cpus = match costs
        .iter()
        .filter(|c| at_limit(c).is_none())
        .max_by(|a, b| a.busy_pct.mean.total_cmp(&b.busy_pct.mean))
    {
        Some(c) => {
            b.kind = "undecided";
            format!(
                "the {}'s {}, at its limit ({CPU_BOUND_PCT:.0}%) or not",
                c.role,
                busy_words(c)
            )
        }
        None => format!(
            "no CPU at {CPU_BOUND_PCT:.0}% busy ({})",
            busy_shares(costs)
        ),
    };
    let waited = waited(b, FLOW_SHARE_WITH_EVIDENCE * 100.0);
    match window_in_doubt(b, buffers) {
        Some((what, pct, larger)) => {
            b.kind = "undecided";
            b.figure = format!(
                "{cpus}; the sender waited on {what} {pct:.0}% of its busy time (TCP_INFO), flow control if larger buffers raise the rate, and 4 MiB socket buffers {larger}"
            );
        }
        None if b.kind == "undecided" => b.figure = format!("{cpus} (more --tries)"),
        None => {
            b.figure = format!(
                "{cpus}, flow control under {:.0}% of the sender's time{}",
                match waited {
                    Some(_) => FLOW_LIMITED_SHARE,
                    None => FLOW_SHARE_WITH_EVIDENCE,
                } * 100.0,
                match (waited, buffers) {
                    (Some(_), Some(e)) => format!(" and 4 MiB socket buffers {}", e.words()),
                    _ => String::new(),
                }
            );
        }
    }
    // Nothing above holds it back, and segments were lost: TCP's loss recovery is what is
    // left to suspect, said with the count that points there (its cost is not measured).
    if let Some(lost) = b.lost_pct.filter(|l| *l >= LOST_PCT_NAMED) {
        b.figure += &format!(
            "; the sender lost {lost:.2}% of its data segments (retransmitted, not D-SACKed by the receiver): TCP's loss recovery is left to suspect (its cost is not measured apart)"
        );
    }
}

/// Each side's busy share, "sender 84%, receiver 30%": rounded down, so that a share under
/// [`CPU_BOUND_PCT`] never reads as at it beside "no CPU at 90% busy".
fn busy_shares(costs: &[SideCost]) -> String {
    costs
        .iter()
        .map(|c| format!("{} {:.0}%", c.role, c.busy_pct.mean.floor()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The remedies the issue names that this placement has no place for, with why.
fn not_tried(r: &TestResult) -> Vec<NotTried> {
    let guest = r
        .placement
        .as_deref()
        .is_some_and(|p| p.starts_with("guest"));
    let loopback = !guest && (r.target.starts_with("127.") || r.target.starts_with("[::1]"));
    let mut out = Vec::new();
    let mut no = |remedy: &str, why: &str| {
        out.push(NotTried {
            remedy: remedy.into(),
            why: why.into(),
        })
    };
    if loopback {
        no(
            "GRO/TSO toggles",
            "loopback has no veth or tap device to toggle them on",
        );
    }

    if guest {
        no(
            "RPS in the guest",
            "the guest's NIC steering is not set by virtperf's guest yet (the battery tries RPS on this host's loopback)",
        );
        no(
            "guest NIC rx ring, multiqueue, vhost-net",
            "each needs a guest booted with it; the battery boots one guest (`vm compare --rx-queue-size …` measures one setting against another)",
        );
    } else {
        no(
            "guest NIC rx ring, multiqueue, vhost-net",
            "no guest here: give --placement guest to explain a stream into one",
        );
    }
    out
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_remedies;
