//! `virtperf tune`'s search as measured, for its output: the rounds, what the answer is
//! made among (round 2 apart where its baseline moved), and the figures in words.

use std::time::Duration;

use virtperf_tune::candidate::{NotHere, Target};
use virtperf_tune::goal::Goal;
use virtperf_tune::search::Measured;

/// One round: what ran and what it measured.
pub(crate) struct Round {
    pub run_id: i64,
    pub measured: Vec<Measured>,
    pub trials: usize,
    pub took: Duration,
}

/// The whole search, for printing.
pub(crate) struct Search {
    pub target: Target,
    pub goals: Vec<Goal>,
    pub max_cpu: Option<f64>,
    pub rounds: Vec<Round>,
    pub not_here: Vec<NotHere>,
    pub stopped: String,
    pub against: Option<String>,
    pub restored: Result<String, String>,
    pub took: Duration,
}

impl Search {
    /// Every measured configuration: round 2's baseline is the drift check, so the
    /// table keeps round 1's.
    pub fn all(&self) -> Vec<Measured> {
        let mut out = Vec::new();
        for (i, r) in self.rounds.iter().enumerate() {
            out.extend(
                r.measured
                    .iter()
                    .filter(|m| i == 0 || !m.config.parts.is_empty())
                    .cloned(),
            );
        }
        out
    }

    /// What the pick is made among: every configuration, unless round 2's baseline moved
    /// from round 1's ([`drift`]): then round 1's alone (round 2 is ranked within itself).
    pub fn comparable(&self) -> Vec<Measured> {
        if drift(self).is_none() {
            return self.all();
        }
        self.rounds
            .first()
            .map(|r| r.measured.clone())
            .unwrap_or_default()
    }
}

/// `500ms`, `2.5s`, `90s`, `2m30s`.
pub(crate) fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{}ms", d.as_millis())
    } else if s < 10.0 {
        format!("{s:.1}s")
    } else if s < 120.0 {
        format!("{s:.0}s")
    } else {
        format!("{}m{:02.0}s", (s / 60.0).floor(), (s % 60.0).floor())
    }
}

/// A figure as `28.1 [27.5, 28.7]`.
pub(crate) fn figure(m: &Measured, i: usize) -> String {
    match m.figures.get(i) {
        Some(f) => virtperf_report::decide::mean_interval(&f.summary, num),
        None => "not measured".into(),
    }
}

pub(crate) fn num(v: f64) -> String {
    virtperf_report::render::num(v)
}

/// Busy CPUs for the table: `1.17 (VM 1.05)` with a watched VM's host threads' share.
pub(crate) fn cpus(m: &Measured) -> String {
    match (m.cpus_busy, m.vm_cpus) {
        (Some(c), Some(v)) => format!("{c:.2} (VM {v:.2})"),
        (Some(c), None) => format!("{c:.2}"),
        (None, _) => "not measured".into(),
    }
}

/// Busy CPUs in a sentence: `1.17 busy CPUs (1.05 of them the VM's host threads)`.
pub(crate) fn cpus_words(m: &Measured) -> String {
    match (m.cpus_busy, m.vm_cpus) {
        (Some(c), Some(v)) => format!("{c:.2} busy CPUs ({v:.2} of them the VM's host threads)"),
        (Some(c), None) => format!("{c:.2} busy CPUs"),
        (None, _) => "busy CPUs not measured".into(),
    }
}

/// Round 2's baseline against round 1's, goal by goal: None where they agree (their 95%
/// intervals overlap) or there is no round 2; else the line that says the rounds cannot
/// be compared.
pub(crate) fn drift(s: &Search) -> Option<String> {
    let base = |r: &Round| {
        r.measured
            .iter()
            .find(|m| m.config.parts.is_empty())
            .cloned()
    };
    let (one, two) = (base(s.rounds.first()?)?, base(s.rounds.get(1)?)?);
    let moved: Vec<String> = one
        .figures
        .iter()
        .zip(&two.figures)
        .filter(|(a, b)| !virtperf_report::decide::overlap(&a.summary, &b.summary))
        .map(|(a, b)| {
            format!(
                "{} {} in round 1, {} in round 2",
                a.metric,
                virtperf_report::decide::mean_interval(&a.summary, num),
                virtperf_report::decide::mean_interval(&b.summary, num)
            )
        })
        .collect();
    (!moved.is_empty()).then(|| {
        format!(
            "The baseline moved between the rounds ({}): the machine changed under the search, so round 2's combinations are ranked among themselves, not against round 1's",
            moved.join("; ")
        )
    })
}
