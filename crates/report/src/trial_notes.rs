//! Warnings of stored trials that the tables would otherwise hide: a trial that lost
//! packets to its machine's network input backlog, completed nothing in its window, or was
//! ended early by a signal shows only as a figure in a table of means; trials measured beside other work, under
//! a load, or in an emulated guest read as ordinary ones. `show` and `run` name such trials
//! under their tables, so the number says what produced it.

use virtperf_store::TrialRow;

/// At most this many trials are named; the rest are counted.
const MAX_NAMED: usize = 5;

/// Whether a trial's warning says it lost packets, stalled, or was cut short by a signal
/// (a single workload's and a run's trial alike).
fn lost_or_stalled(w: &str) -> bool {
    w.contains("from its network input backlog")
        || w.contains("no transaction completed")
        || w.starts_with("interrupted by")
}

/// `warning: POINT · CONFIG · try N: WARNING` for each trial whose result warned of lost
/// packets, a stall or a signal's early end, at most five of them and a count of the rest;
/// empty when there are none.
pub fn lost_packets_note(trials: &[TrialRow]) -> String {
    note_of(trials.iter().filter_map(|t| {
        let r = t.result.as_ref()?;
        Some((
            t.point_label.as_str(),
            t.config.as_str(),
            t.repetition,
            r.warnings.as_slice(),
        ))
    }))
}

/// [`lost_packets_note`] over each trial's point, config, repetition and warnings.
fn note_of<'a>(trials: impl Iterator<Item = (&'a str, &'a str, u32, &'a [String])>) -> String {
    let lines: Vec<String> = trials
        .flat_map(|(point, config, rep, warnings)| {
            warnings
                .iter()
                .filter(|w| lost_or_stalled(w))
                .map(move |w| format!("warning: {point} · {config} · try {rep}: {w}"))
        })
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    let mut s = String::from("\n");
    for l in lines.iter().take(MAX_NAMED) {
        s.push_str(l);
        s.push('\n');
    }
    if lines.len() > MAX_NAMED {
        s.push_str(&format!(
            "… and {} more such warning(s) in this run's trials\n",
            lines.len() - MAX_NAMED
        ));
    }
    s
}

/// A note on trials measured while other work used more than `threshold_pct` of a CPU on
/// a machine of the test, or without the machine lock; empty when there are none.
pub fn other_load_note(trials: &[TrialRow], threshold_pct: f64) -> String {
    let mut busy = 0usize;
    let mut worst = 0.0f64;
    let mut concurrent = 0usize;
    for r in trials.iter().filter_map(|t| t.result.as_ref()) {
        let other = std::iter::once(&r.cpu.client)
            .chain(r.cpu.server.as_ref())
            .map(|c| c.other_cpu_pct)
            .fold(0.0f64, f64::max);
        if other > threshold_pct {
            busy += 1;
            worst = worst.max(other);
        }
        concurrent += usize::from(r.allow_concurrent);
    }
    let mut s = String::new();
    if busy > 0 {
        s.push_str(&format!(
            "\nwarning: {busy} trial(s) ran while other work used more than {threshold_pct:.0}% of a CPU (at most {worst:.0}%): their numbers may be noisy.\n"
        ));
    }
    if concurrent > 0 {
        s.push_str(&format!(
            "\nnote: {concurrent} trial(s) were measured with --allow-concurrent: another measurement may have run beside them.\n"
        ));
    }
    s
}

/// A note where the tables' `busy%` holds CPU time no tick charged to a kind (the client
/// side's `unsampled_pct`), so their user, sys and soft columns add up to less; empty
/// where no trial had any.
pub fn unsampled_note(trials: &[TrialRow]) -> String {
    let shares: Vec<f64> = trials
        .iter()
        .filter_map(|t| Some(t.result.as_ref()?.cpu.client.system.unsampled_pct))
        .collect();
    unsampled_of(&shares)
}

/// [`unsampled_note`] over each measured trial's share.
fn unsampled_of(shares: &[f64]) -> String {
    let with = shares.iter().filter(|u| **u >= 0.5).count();
    if with == 0 {
        return String::new();
    }
    let worst = shares.iter().copied().fold(0.0f64, f64::max);
    format!(
        "\nnote: busy% includes CPU time no tick charged to a kind in {with} of {} trial(s) (at most {worst:.0}% of the CPUs' time): the kernel times idle exactly but samples busy time at its tick, so user, sys and soft add up to less.\n",
        shares.len()
    )
}

/// A note per config whose trials ran beside bulk streams (a spec config's `load`): how
/// many, which way, and their median throughput, so a loaded row is never read as an
/// unloaded one; empty when there are none.
pub fn load_note(trials: &[TrialRow]) -> String {
    let mut by_config: Vec<(&str, &virtperf_wire::BesideLoad, Vec<f64>)> = Vec::new();
    for t in trials {
        let Some(l) = t.result.as_ref().and_then(|r| r.load.as_ref()) else {
            continue;
        };
        let i = match by_config.iter().position(|(c, ..)| *c == t.config) {
            Some(i) => i,
            None => {
                by_config.push((&t.config, l, Vec::new()));
                by_config.len() - 1
            }
        };
        by_config[i].2.extend(l.mbps);
    }
    let mut s = String::new();
    for (config, l, mut mbps) in by_config {
        mbps.sort_by(f64::total_cmp);
        let median = mbps
            .get(mbps.len() / 2)
            .map_or("not measured (their tests failed)".into(), |m| {
                format!("{:.1} Gbit/s median", m / 1000.0)
            });
        s.push_str(&format!(
            "\nnote: {config} ran each trial beside {} bulk stream(s) {}: {median}.\n",
            l.streams,
            if l.reverse {
                "server→client"
            } else {
                "client→server"
            }
        ));
    }
    s
}

/// A warning line naming the configs whose guests ran under emulation (TCG), so a table of
/// guest numbers never passes for a virtualization tax; empty when there are none.
pub fn emulation_note(trials: &[TrialRow]) -> String {
    let mut configs: Vec<&str> = Vec::new();
    for t in trials {
        let emulated = t
            .result
            .as_ref()
            .and_then(|r| r.guest.as_ref())
            .is_some_and(|g| g.emulated);
        if emulated && !configs.contains(&t.config.as_str()) {
            configs.push(&t.config);
        }
    }
    if configs.is_empty() {
        return String::new();
    }
    format!(
        "\nWARNING: {} ran in QEMU guests under TCG emulation: those numbers measure instruction emulation, not a virtualization tax.\n",
        configs.join(", ")
    )
}

/// A line for each compared run that is not complete: its figures rest on what it stored
/// (a trial stopped by a signal covers the part that ran; a failed one is missing), which
/// a comparison of it, or its explanation shown, must say (they said nothing).
pub fn status_notes(runs: &[virtperf_store::RunRow]) -> Vec<String> {
    runs.iter()
        .filter_map(|r| {
            let st = r.effective_status();
            (st != virtperf_store::RunStatus::Complete).then(|| {
                format!(
                    "run {} is {st}: {} of its {} planned trials stored, {} failed; its figures rest on those (a trial stopped by a signal covers only the part that ran)",
                    r.id, r.trials_ok, r.planned_trials, r.trials_failed
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lost packets, stalls and a signal's early end are named by trial, other warnings
    /// are not (other notes say them), and past five the rest are counted.
    #[test]
    fn trials_that_lost_packets_stalled_or_were_cut_are_named() {
        let drop = "the client's machine dropped 3 packet(s) from its network input backlog during the test".to_string();
        let stall = "no transaction completed in the measured window".to_string();
        let other = "other work used 40% of a CPU".to_string();
        let (w1, w2, w3) = (vec![other], vec![drop.clone()], vec![stall]);
        let trials = [
            ("rr", "a", 1, w1.as_slice()),
            ("rr", "a", 2, w2.as_slice()),
            ("rr", "a", 3, w3.as_slice()),
        ];
        let note = note_of(trials.iter().copied());
        assert!(
            note.contains(&format!("warning: rr · a · try 2: {drop}")),
            "{note}"
        );
        assert!(note.contains("try 3: no transaction completed"), "{note}");
        assert!(!note.contains("other work"), "{note}");
        let cut = vec!["interrupted by SIGINT: the test was stopped early".to_string()];
        let note = note_of([("rr", "b", 1, cut.as_slice())].into_iter());
        assert!(
            note.contains("rr · b · try 1: interrupted by SIGINT"),
            "{note}"
        );
        assert!(note_of(trials[..1].iter().copied()).is_empty());
        let many: Vec<(&str, &str, u32, &[String])> =
            (1..=7).map(|r| ("rr", "a", r, w2.as_slice())).collect();
        let note = note_of(many.into_iter());
        assert_eq!(note.matches("warning: ").count(), 5, "{note}");
        assert!(note.contains("… and 2 more"), "{note}");
    }

    /// Trials whose busy time held time no tick charged are counted with the largest
    /// share; shares under half a percent (rounding) and no trials say nothing.
    #[test]
    fn busy_time_no_tick_charged_is_noted() {
        let note = unsampled_of(&[0.0, 17.5, 0.4, 21.2]);
        assert!(note.contains("in 2 of 4 trial(s) (at most 21%"), "{note}");
        assert_eq!(unsampled_of(&[0.0, 0.4]), "");
        assert_eq!(unsampled_of(&[]), "");
    }
}
