//! Report: statistics, comparison and renderers for virtperf results.
//!
//! This crate only computes and presents numbers: `stats` works on plain slices; `summary`,
//! `compare` and the renderers read the store's rows. It never touches a socket or a knob.

pub mod compare;
pub mod cost;
pub mod decide;
mod escape;
pub mod explain;
pub mod explain_stream;
pub mod export;
pub mod fleet;
pub mod host_vm;
pub mod html;
pub mod render;
pub mod stats;
pub mod summary;
pub mod tax;
pub mod timeline;
pub mod trend;
pub mod trial_notes;
