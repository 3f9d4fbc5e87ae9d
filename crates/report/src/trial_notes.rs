//! Warnings of stored trials that the tables would otherwise hide: a trial that lost
//! packets to its machine's network input backlog, or completed nothing in its window,
//! shows only as a low figure in a table of means. `show` and `run` name such trials under
//! their tables, so the number says what produced it.

use virtperf_store::TrialRow;

/// At most this many trials are named; the rest are counted.
const MAX_NAMED: usize = 5;

/// Whether a trial's warning says it lost packets or stalled.
fn lost_or_stalled(w: &str) -> bool {
    w.contains("from its network input backlog") || w.contains("no transaction completed")
}

/// `warning: POINT · CONFIG · try N: WARNING` for each trial whose result warned of lost
/// packets or a stall, at most [`MAX_NAMED`] of them and a count of the rest; empty when
/// there are none.
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Lost packets and stalls are named by trial, other warnings are not (other notes
    /// say them), and past five the rest are counted.
    #[test]
    fn trials_that_lost_packets_or_stalled_are_named() {
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
        assert!(note_of(trials[..1].iter().copied()).is_empty());
        let many: Vec<(&str, &str, u32, &[String])> =
            (1..=7).map(|r| ("rr", "a", r, w2.as_slice())).collect();
        let note = note_of(many.into_iter());
        assert_eq!(note.matches("warning: ").count(), 5, "{note}");
        assert!(note.contains("… and 2 more"), "{note}");
    }
}
