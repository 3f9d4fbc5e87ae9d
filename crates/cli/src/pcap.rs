//! `virtperf pcap`: per-connection duration, bytes and response latency from captures.
//!
//! Every file given is analyzed and reported on its own: a broken one does not hide the others.
//! A file cut short (tcpdump killed, disk full) is reported up to the break, with one warning
//! line naming the file and the byte offset. The exit status is 1 only when some file yielded
//! nothing readable at all (not a capture, or cut before its first packet); that file gets an
//! error line and the others are still printed.

use std::fmt::Write;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use virtperf_pcap::{Column, Connection, Options, Summary};
use virtperf_store::{CaptureConn, NewCapture, Store};

#[derive(Debug, Args)]
pub struct PcapArgs {
    /// Capture files (pcap or pcapng). Each is reported on its own; a file cut short is
    /// reported up to the break with a warning. Exit status 1 when some file yielded nothing
    /// readable at all (the others are still reported)
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Keep only matching connections: `port N`, `host ADDR`, joined by `and`
    #[arg(long)]
    pub filter: Option<String>,
    /// Print every field as JSON
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print every field as CSV, one row per connection
    #[arg(long)]
    pub csv: bool,
    /// Compare the files: per-endpoint response latency side by side, % change vs the first
    #[arg(long)]
    pub compare: bool,
    /// Also store the analysis in this results database
    #[arg(long, value_name = "DB")]
    pub store: Option<PathBuf>,
    /// Start a new connection when a 4-tuple has been silent this long (e.g. 300s). Default:
    /// never; connections split only on a new SYN after FIN/RST or on a sequence jump
    #[arg(long, value_name = "DURATION", value_parser = virtperf_lab::parse::duration)]
    pub idle_split: Option<Duration>,
    /// Add columns to the per-connection lines: packets, retrans (segments with
    /// retransmitted bytes), handshake, p50, p99 (response latency), comma-separated
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = <Column as std::str::FromStr>::from_str, conflicts_with_all = ["json", "csv", "compare"])]
    pub columns: Vec<Column>,
}

struct Analyzed {
    path: PathBuf,
    conns: Vec<Connection>,
    summary: Summary,
}

/// Analyzes one file; the error text names the file. A progress bar shows on a terminal
/// once the analysis has taken 2 s (a capture of many GB takes seconds to minutes).
fn analyze(path: &std::path::Path, opts: &Options, json: bool) -> Result<Analyzed, String> {
    let progress = crate::progress::Progress::new(&path.display().to_string(), json);
    let mut shown = |read: u64, size: u64| {
        if size > 0 {
            progress.update(Some((read as f64 / size as f64).min(1.0)));
        }
    };
    let (conns, summary) = virtperf_pcap::analyze_file_progress(path, opts.clone(), &mut shown)
        .map_err(|e| match e {
            // Its words name the file already.
            virtperf_pcap::PcapError::Open { .. } => e.to_string(),
            _ => format!("{}: {e}", path.display()),
        })?;
    Ok(Analyzed {
        path: path.to_path_buf(),
        conns,
        summary,
    })
}

/// The warning for a file read only up to some byte, one line.
fn stopped_warning(x: &Analyzed) -> Option<String> {
    let st = x.summary.stopped.as_ref()?;
    Some(format!(
        "virtperf: warning: {}: {}; reported what came before byte {} ({} packets)",
        x.path.display(),
        st.error,
        st.offset,
        x.summary.packets
    ))
}

/// `virtperf pcap`
pub fn pcap(a: PcapArgs) -> Result<()> {
    if a.compare && a.files.len() < 2 {
        bail!("--compare needs at least two capture files");
    }
    let mut opts = Options::default();
    if let Some(f) = a.filter.as_deref() {
        opts.apply_filter(f).map_err(|e| anyhow!("{e}"))?;
    }
    opts.idle_timeout_s = a.idle_split.map(|d| d.as_secs_f64());
    // Every file is analyzed and its results kept, whatever became of the others.
    let mut all = Vec::new();
    let mut failed = Vec::new();
    for f in &a.files {
        match analyze(f, &opts, a.json || a.csv) {
            Ok(x) => all.push(x),
            Err(e) => failed.push(e),
        }
    }
    report(&a, &all)?;
    match failed.as_slice() {
        [] => Ok(()),
        [one] => bail!("{one}"),
        many => {
            for e in many {
                eprintln!("virtperf: error: {e}");
            }
            bail!(
                "nothing readable in {} of the {} capture files (above)",
                many.len(),
                a.files.len()
            )
        }
    }
}

/// Stores and prints the files that could be read, each file's warnings after its output.
fn report(a: &PcapArgs, all: &[Analyzed]) -> Result<()> {
    if let Some(db) = &a.store {
        let mut store = Store::open(db)?;
        for x in all {
            let id = store.add_capture(&NewCapture {
                path: x.path.display().to_string(),
                summary: serde_json::to_value(&x.summary)?,
                connections: x
                    .conns
                    .iter()
                    .map(|c| {
                        Ok(CaptureConn {
                            a: format!("{}:{}", c.a.ip, c.a.port),
                            b: format!("{}:{}", c.b.ip, c.b.port),
                            duration_s: c.duration_s,
                            bytes: c.bytes_transferred(),
                            detail: serde_json::to_value(c)?,
                        })
                    })
                    .collect::<Result<Vec<_>>>()?,
            })?;
            eprintln!(
                "virtperf: stored {} as capture {id} in {}",
                x.path.display(),
                db.display()
            );
        }
    }
    if a.compare {
        if a.json {
            let rows: Vec<_> = all.iter().map(roles).collect();
            println!("{}", serde_json::to_string_pretty(&rows)?);
        } else {
            print!("{}", compare_table(all));
        }
        for w in all.iter().filter_map(stopped_warning) {
            eprintln!("{w}");
        }
        return Ok(());
    }
    for x in all {
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({
                    "file": x.path.display().to_string(),
                    "summary": x.summary,
                    "connections": x.conns,
                }))?
            );
        } else if a.csv {
            print!("{}", virtperf_pcap::render_csv(&x.conns));
        } else {
            if all.len() > 1 {
                println!("== {}", x.path.display());
            }
            print!("{}", virtperf_pcap::render_seed0_with(&x.conns, &a.columns));
            // After this file's lines, not somewhere in them, when both go to one terminal.
            let _ = std::io::stdout().flush();
            for w in &x.summary.warnings {
                eprintln!("virtperf: warning: {}: {w}", x.path.display());
            }
        }
        // In every format: the numbers above cover only part of the capture.
        if let Some(w) = stopped_warning(x) {
            let _ = std::io::stdout().flush();
            eprintln!("{w}");
        }
    }
    Ok(())
}

/// Response latency of one role (the connections' openers, or their peers) over every
/// connection of a file: exact count-weighted mean, min and max.
#[derive(Debug, serde::Serialize)]
struct Role {
    samples: u64,
    avg_s: Option<f64>,
    min_s: Option<f64>,
    max_s: Option<f64>,
}

#[derive(Debug, serde::Serialize)]
struct Roles {
    file: String,
    connections: usize,
    duration_s: f64,
    bytes: u64,
    opener: Role,
    peer: Role,
}

fn role<'a>(stats: impl Iterator<Item = &'a virtperf_pcap::LatencyStats>) -> Role {
    let (mut n, mut sum) = (0u64, 0.0);
    let (mut min, mut max): (Option<f64>, Option<f64>) = (None, None);
    for s in stats {
        if let Some(avg) = s.avg_s {
            n += s.count;
            sum += avg * s.count as f64;
        }
        if let Some(m) = s.min_s {
            min = Some(min.map_or(m, |x| x.min(m)));
        }
        if let Some(m) = s.max_s {
            max = Some(max.map_or(m, |x| x.max(m)));
        }
    }
    // Rounded to the nanosecond, as the analyzer's own JSON is: no float noise.
    let r = virtperf_pcap::round_ns;
    Role {
        samples: n,
        avg_s: (n > 0).then(|| r(sum / n as f64)),
        min_s: min.map(r),
        max_s: max.map(r),
    }
}

fn roles(x: &Analyzed) -> Roles {
    Roles {
        file: x.path.display().to_string(),
        connections: x.conns.len(),
        duration_s: virtperf_pcap::round_ns(x.conns.iter().map(|c| c.duration_s).sum()),
        bytes: x.conns.iter().map(|c| c.bytes_transferred()).sum(),
        opener: role(x.conns.iter().map(|c| &c.from_a.response)),
        peer: role(x.conns.iter().map(|c| &c.from_b.response)),
    }
}

fn compare_table(all: &[Analyzed]) -> String {
    let rows: Vec<Roles> = all.iter().map(roles).collect();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "response latency per endpoint: opener = the side that opened each connection, peer = the other"
    );
    let _ = writeln!(
        s,
        "  {:<28} {:>5} {:>11} {:>13} │ {:>10} {:>10} {:>10} {:>8} │ {:>10} {:>10} {:>10} {:>8}",
        "file",
        "conns",
        "duration",
        "bytes",
        "opener avg",
        "min",
        "max",
        "Δavg",
        "peer avg",
        "min",
        "max",
        "Δavg"
    );
    let base = rows.first();
    let f = |v: Option<f64>| v.map_or_else(|| "-".into(), virtperf_pcap::duration);
    let pct = |v: Option<f64>, b: Option<f64>| match (v, b) {
        (Some(v), Some(b)) if b > 0.0 => format!("{:+.1}%", (v - b) / b * 100.0),
        _ => "-".into(),
    };
    for r in &rows {
        let _ = writeln!(
            s,
            "  {:<28} {:>5} {:>11} {:>13} │ {:>10} {:>10} {:>10} {:>8} │ {:>10} {:>10} {:>10} {:>8}",
            r.file,
            r.connections,
            virtperf_pcap::duration(r.duration_s),
            r.bytes,
            f(r.opener.avg_s),
            f(r.opener.min_s),
            f(r.opener.max_s),
            pct(r.opener.avg_s, base.and_then(|b| b.opener.avg_s)),
            f(r.peer.avg_s),
            f(r.peer.min_s),
            f(r.peer.max_s),
            pct(r.peer.avg_s, base.and_then(|b| b.peer.avg_s)),
        );
    }
    s
}
