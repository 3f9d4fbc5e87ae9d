//! `virtperf`: how much slower is networking and message passing inside a virtual machine
//! than on the host, and why.
//!
//! This crate is the command line only: argument parsing, progress, and rendering. The work
//! happens in `virtperf-lab` (orchestration), `virtperf-load` (engines), `virtperf-measure`
//! (samplers) and `virtperf-wire` (protocol and types).

mod args;
mod commands;
mod progress;
mod render;

use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;

use args::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // `{:#}` joins the context chain on one line: "what failed: why".
            eprintln!("virtperf: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(a) => commands::serve(a),
        Command::Env(a) => commands::env(a),
        Command::Rr(a) => commands::rr(a),
        Command::Crr(a) => commands::crr(a),
        Command::Stream(a) => commands::stream(a),
        Command::Bulk(a) => commands::bulk(a),
        Command::Http(a) => commands::http(a),
    }
}
