//! `virtperf export`: stored trials as a tidy CSV or JSON table (one row per trial and
//! metric, every sweep parameter a column), for pandas, R or a spreadsheet.

use anyhow::Result;
use clap::{Args, ValueEnum};
use virtperf_report::export;

use crate::experiment::{resolve, DbArg};

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Comma-separated values with a header line
    Csv,
    /// A list of objects, one per row
    Json,
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Runs to export (ids or `last`)
    #[arg(required = true)]
    pub runs: Vec<String>,
    /// Output format
    #[arg(long, value_enum, default_value = "csv")]
    pub format: ExportFormat,
    #[command(flatten)]
    pub db: DbArg,
}

/// `virtperf export`
pub fn export(a: ExportArgs) -> Result<()> {
    let store = a.db.open()?;
    let mut loaded = Vec::new();
    for id in &a.runs {
        let row = resolve(&store, id)?;
        // The same run named twice (`3 last`) is exported once.
        if loaded
            .iter()
            .any(|(r, _): &(virtperf_store::RunRow, _)| r.id == row.id)
        {
            continue;
        }
        let trials = store.trials(row.id)?;
        loaded.push((row, trials));
    }
    let runs: Vec<_> = loaded.iter().map(|(r, t)| (r, t.as_slice())).collect();
    let table = export::tidy(&runs);
    match a.format {
        ExportFormat::Csv => print!("{}", table.csv()),
        ExportFormat::Json => println!("{}", table.json()),
    }
    Ok(())
}
