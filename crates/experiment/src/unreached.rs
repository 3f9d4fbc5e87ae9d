//! A config whose agent cannot be reached: every trial of it would fail alike, each after
//! a timeout (a stopped agent process, a paused machine: 10 s of no welcome per trial),
//! so after [`IN_A_ROW`] such trials in a row the run skips the rest of that config.

use std::collections::HashMap;

/// How many trials of a config in a row must find its agent unreached before its other
/// trials are skipped: one could be a blip (an agent restarting).
pub const IN_A_ROW: u32 = 2;

/// Per config, the trials in a row that found its agent unreached.
#[derive(Default)]
pub struct Streaks(HashMap<String, u32>);

impl Streaks {
    /// Counts a trial of `config` that ended with `result`; the reason to skip its other
    /// trials once [`IN_A_ROW`] in a row found the agent unreached.
    pub fn after<T>(&mut self, config: &str, result: &anyhow::Result<T>) -> Option<String> {
        let unreached = result
            .as_ref()
            .err()
            .and_then(|e| e.downcast_ref::<virtperf_lab::Unreached>());
        let n = self.0.entry(config.to_string()).or_default();
        let Some(u) = unreached else {
            *n = 0;
            return None;
        };
        *n += 1;
        (*n == IN_A_ROW).then(|| {
            format!("its agent was unreached in {IN_A_ROW} trials in a row ({u}): its other trials are skipped")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unreached() -> anyhow::Result<()> {
        Err(anyhow::Error::new(virtperf_lab::Unreached(
            "the agent at 10.0.0.2:7150 sent no welcome within 10s".into(),
        ))
        .context("trial 3"))
    }

    /// Two in a row, through an added context, give the reason once; a success or another
    /// failure between them starts the count again; configs count apart.
    #[test]
    fn two_unreached_in_a_row_skip_the_config() {
        let mut s = Streaks::default();
        assert_eq!(s.after("a", &unreached()), None);
        assert_eq!(s.after("b", &unreached()), None);
        assert_eq!(s.after("a", &Ok(())), None);
        assert_eq!(s.after("a", &unreached()), None);
        let other: anyhow::Result<()> = Err(anyhow::anyhow!("agent at x: refused"));
        assert_eq!(s.after("a", &other), None);
        assert_eq!(s.after("a", &unreached()), None);
        let why = s.after("a", &unreached()).expect("a reason");
        assert!(why.contains("sent no welcome within 10s"), "{why}");
        assert!(why.contains("2 trials in a row"), "{why}");
        assert_eq!(s.after("a", &unreached()), None, "said once");
        assert!(s.after("b", &unreached()).is_some());
    }
}
