//! `virtperf tune`: from "why" to "what should I change". Goals on a workload's metrics,
//! the remedies this machine can try (read from it, never assumed), configurations of
//! them written as an ordinary spec (so the runner applies and restores every knob through
//! its journal, interleaves the trials and stores them as a run), and the search over the
//! measured configurations: the cheapest whose confidence interval meets every goal.
//!
//! This crate plans and judges; it runs nothing itself (the command line hands its specs
//! to the experiment runner), so every decision here is tested on figures, not on a
//! machine's luck.

pub mod candidate;
pub mod config;
pub mod emit;
pub mod goal;
pub mod search;
pub mod steer;
pub mod tuned;
