//! Progress display for long runs: only on a terminal, only when not printing JSON, and only
//! once a run has lasted two seconds, so short runs and pipelines stay quiet.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// Lazily created progress bar on stderr.
pub struct Progress {
    enabled: bool,
    started: Instant,
    bar: std::cell::RefCell<Option<ProgressBar>>,
    label: String,
}

const SHOW_AFTER: Duration = Duration::from_secs(2);

impl Progress {
    /// A progress display for `label`; silent when `json` or stderr is not a terminal.
    pub fn new(label: &str, json: bool) -> Progress {
        Progress {
            enabled: !json && std::io::stderr().is_terminal(),
            started: Instant::now(),
            bar: Default::default(),
            label: label.to_string(),
        }
    }

    /// Reports progress: a fraction in 0..=1 when known, else a spinner.
    pub fn update(&self, frac: Option<f64>) {
        if !self.enabled || self.started.elapsed() < SHOW_AFTER {
            return;
        }
        let mut slot = self.bar.borrow_mut();
        let bar = slot.get_or_insert_with(|| {
            let b = match frac {
                Some(_) => {
                    let b = ProgressBar::new(1000);
                    if let Ok(st) = ProgressStyle::with_template(
                        "{prefix} [{bar:30}] {percent:>3}% {elapsed_precise} (ETA {eta})",
                    ) {
                        b.set_style(st.progress_chars("=> "));
                    }
                    b
                }
                None => {
                    let b = ProgressBar::new_spinner();
                    if let Ok(st) =
                        ProgressStyle::with_template("{prefix} {spinner} {elapsed_precise}")
                    {
                        b.set_style(st);
                    }
                    b
                }
            };
            b.set_prefix(self.label.clone());
            b
        });
        match frac {
            Some(f) => bar.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64),
            None => bar.tick(),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(b) = self.bar.borrow_mut().take() {
            b.finish_and_clear();
        }
    }
}
