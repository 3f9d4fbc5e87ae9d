//! Experiments: a spec file (`spec`: parsing, the matrix of workloads × sweeps × configs,
//! validation) and the `runner` that probes and applies each config's knobs, schedules the
//! trials interleaved, runs each at its config's site and stores it as it finishes.
//! Built on `lab` (plans, placements, knobs, the machine lock and state directory).

pub mod runner;
pub mod spec;
mod unreached;
