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

/// Whether `e` is a write to a reader that has gone (`| head`).
pub fn broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || cause
                .downcast_ref::<serde_json::Error>()
                .and_then(|j| j.io_error_kind())
                .is_some_and(|k| k == std::io::ErrorKind::BrokenPipe)
    })
}

/// `e` and its causes on one line, each said once: a cause whose words the
/// message before it already holds is not repeated.
pub fn causes(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_is_said_once() {
        let inner = std::io::Error::other("connection refused");
        let e = anyhow::Error::new(inner).context("collector at http://x: connection refused");
        assert_eq!(causes(&e), "collector at http://x: connection refused");
        let e = anyhow::Error::new(std::io::Error::other("disk full")).context("writing the dump");
        assert_eq!(causes(&e), "writing the dump: disk full");
    }

    #[test]
    fn a_gone_reader_is_a_broken_pipe_however_wrapped() {
        let io = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(broken_pipe(&anyhow::Error::new(io).context("writing")));
        let json = serde_json::Error::io(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(broken_pipe(&anyhow::Error::new(json)));
        assert!(!broken_pipe(&anyhow::anyhow!("other")));
    }
}
