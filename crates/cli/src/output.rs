//! How every subcommand prints what it found: JSON for programs, a table for
//! people, through one helper, to standard output.

use serde::Serialize;
use std::io::Write;

/// `--format`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// JSON, for programs.
    Json,
    /// A table, for people.
    Table,
}

/// Writes `value` as one line of JSON, or as `table` writes it, to standard
/// output, flushed.
pub fn emit<T: Serialize + ?Sized>(
    format: Format,
    value: &T,
    table: impl FnOnce(&mut dyn Write, &T) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match format {
        Format::Json => {
            serde_json::to_writer(&mut out, value)?;
            writeln!(out)?;
        }
        Format::Table => table(&mut out, value)?,
    }
    out.flush()?;
    Ok(())
}

/// A runtime for one command's requests.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread().enable_all().build()?)
}
