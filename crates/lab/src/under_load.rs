//! What `rr --under-load` and a spec config's `load` ask for: an rr measured while bulk
//! streams run through the same path (flent's RRUL idea, for a VM's queue), and the plan
//! of those streams. The interleaving and the report are the command's (`cli`); a spec's
//! loaded config runs each of its trials this way (`experiment`).

use std::time::Duration;

use anyhow::{bail, Result};
use virtperf_wire::Workload;

use crate::plan::Plan;

/// How long the streams run before the rr starts (and, by as much, after it ends): the rr
/// is loaded from its first transaction to its last.
pub const LEAD: Duration = Duration::from_millis(500);

/// Says in `r` (a test run beside `streams` bulk streams) that its machine-wide figures
/// include the streams' work.
pub fn note_beside(r: &mut virtperf_wire::TestResult, streams: u32) {
    r.warnings.push(format!(
        "ran beside {streams} bulk stream(s): machine-wide figures (busy %, events per transaction, system service demand) include their work"
    ));
}

/// What `--under-load` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnderLoad {
    /// Bulk streams beside the rr.
    pub streams: u32,
    /// They run server → client.
    pub reverse: bool,
    /// Pairs of (alone, loaded) trials.
    pub pairs: u32,
}

/// Parses `streams=4[,reverse][,pairs=3]`.
pub fn parse(s: &str) -> Result<UnderLoad, String> {
    let mut u = UnderLoad {
        streams: 0,
        reverse: false,
        pairs: 3,
    };
    for part in s.split(',').map(str::trim) {
        let num = |v: &str, max: u32| {
            v.parse::<u32>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| format!("{part:?}: a number from 1 to {max}"))
        };
        match part.split_once('=') {
            Some(("streams", v)) => u.streams = num(v, 64)?,
            Some(("pairs", v)) => u.pairs = num(v, 100)?,
            None if part == "reverse" => u.reverse = true,
            _ => {
                return Err(format!(
                    "unknown load part {part:?}: streams=N[,reverse][,pairs=K]"
                ))
            }
        }
    }
    if u.streams == 0 {
        return Err("a load needs streams=N (e.g. streams=4)".into());
    }
    Ok(u)
}

/// The streams of a loaded trial: 128 KiB sends on `load.streams` flows, for the rr's
/// duration and a second more (they start half a second before it).
pub fn stream_plan(rr: &Plan, load: UnderLoad) -> Result<Plan> {
    if !matches!(rr.workload, Workload::Rr(_)) || !rr.workload.protocol().is_tcp() {
        bail!("--under-load measures a TCP rr");
    }
    // 128 KiB sends, every other option at its default.
    let w = Workload::Stream(virtperf_wire::StreamParams {
        flows: load.streams,
        reverse: load.reverse,
        ..virtperf_wire::StreamParams::new(128 << 10)
    });
    let stream = Plan {
        sock: rr.sock,
        family: rr.family,
        ..Plan::new(w, rr.duration + 2 * LEAD)
    };
    stream.validate()?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_parses_and_refuses() {
        assert_eq!(
            parse("streams=4,reverse,pairs=5"),
            Ok(UnderLoad {
                streams: 4,
                reverse: true,
                pairs: 5
            })
        );
        assert_eq!(parse("streams=2").map(|u| u.pairs), Ok(3));
        for bad in [
            "",
            "reverse",
            "streams=0",
            "streams=1e30",
            "streams=4,bogus",
            "pairs=3",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
