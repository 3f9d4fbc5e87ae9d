//! How a stored run and the decisions made on it end the process, the same in every
//! command (README's exit-code table): a signal 128 + N; a gate not met 3; a run with failed
//! trials, or a gated workload without its results, 4; a gate the intervals cannot decide
//! 5; a run that stored nothing 1; otherwise 0. The decisions themselves are made in
//! `virtperf_report::decide`; this only maps them to a line and a code.

use anyhow::{bail, Result};
use virtperf_report::decide::{Decision, Outcome};
use virtperf_report::summary::PointSummary;
use virtperf_store::RunRow;

use crate::signals::{self, code, exit, Exit};
use virtperf_experiment::spec::Spec;

/// How a stored run ends the process: a signal gives 128 + its number, a run with no
/// successful trial 1, a run with holes 4, a complete run 0.
pub fn run_exit(row: &RunRow, ok: usize, interrupted: bool) -> Result<()> {
    if interrupted {
        let sig = signals::received();
        return Err(exit(
            signals::code_for(sig),
            format!(
                "stopped by {}: run {} kept {ok} trial(s) and is marked incomplete",
                signals::name(sig),
                row.id
            ),
        ));
    }
    if ok == 0 {
        bail!(
            "run {} stored no result: every trial failed (see `virtperf show {}`)",
            row.id,
            row.id
        );
    }
    let ran = row.trials_ok + row.trials_failed;
    // A config given up on (its agent unreached) leaves its other trials unrun: "2 of 6
    // failed" said nothing of the 2 of 8 planned that did not run.
    let unrun = match row.trials_not_run() {
        0 => String::new(),
        n => format!(", {n} of {} planned not run", row.planned_trials),
    };
    match row.status {
        virtperf_store::RunStatus::Complete => Ok(()),
        status => Err(exit(
            code::INCOMPLETE,
            format!(
                "run {} is {status}: {} of {ran} trials failed{unrun} (see `virtperf show {}`)",
                row.id, row.trials_failed, row.id
            ),
        )),
    }
}

/// The run's own exit ([`run_exit`]) and its gate's (`what`: `--max-tax`), in one line:
/// a gate not met exits 3 whatever else happened; otherwise a run with failed trials exits
/// as [`run_exit`] says (never 0), and a gate not measured or undecided exits 4 or 5.
pub fn finish(
    row: &RunRow,
    ok: usize,
    interrupted: bool,
    what: &str,
    gate: &[Decision],
) -> Result<()> {
    if interrupted {
        return run_exit(row, ok, true);
    }
    let gate = virtperf_report::tax::gate_message(what, gate);
    let run = run_exit(row, ok, false);
    let (outcome, line) = match (gate, run) {
        (None, run) => return run,
        (Some(g), Ok(())) => g,
        (Some((o, g)), Err(e)) => {
            let run_code = e.downcast_ref::<Exit>().map_or(1, |x| x.code);
            let code = if o == Outcome::NotMet {
                o.exit_code()
            } else {
                run_code
            };
            return Err(exit(code, format!("{g} · {e}")));
        }
    };
    Err(exit(outcome.exit_code(), line))
}

/// A spec's `[compare] max_tax` decided for every config against `[report] baseline`,
/// each decision named with its config.
pub fn spec_gate(spec: &Spec, points: &[PointSummary]) -> Vec<Decision> {
    let (Some(max), Some(base)) = (&spec.max_tax, spec.baseline.as_deref()) else {
        return Vec::new();
    };
    let rows = virtperf_report::compare::by_config(points, Some(base));
    let mut labels: Vec<String> = Vec::new();
    for p in &spec.points {
        if !labels.contains(&p.label) {
            labels.push(p.label.clone());
        }
    }
    let mut out = Vec::new();
    for c in spec.configs.iter().filter(|c| c.name != base) {
        let mine: Vec<_> = rows
            .iter()
            .filter(|r| r.candidate == c.name)
            .cloned()
            .collect();
        let tax = virtperf_report::tax::rows(&mine, &c.name);
        out.extend(max.decide(&labels, &tax).into_iter().map(|mut d| {
            d.why = format!("{}: {}", c.name, d.why);
            d
        }));
    }
    out
}
