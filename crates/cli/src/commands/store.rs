//! `streamsight store`.

use anyhow::Context;
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Prints every stored record as a JSON line, oldest batch first (run it on a
    /// copy, or while the collector is stopped, for a consistent view).
    Dump {
        /// sqlite://PATH (default: the config's storage).
        #[arg(long, env = "STREAMSIGHT_STORAGE")]
        storage: Option<String>,
        /// Only records at or after this time (ms since the epoch).
        #[arg(long, default_value_t = 0)]
        since_ms: i64,
    },
}

pub fn run(command: Command, configured: &str) -> anyhow::Result<()> {
    let Command::Dump { storage, since_ms } = command;
    let url = storage.unwrap_or_else(|| configured.to_owned());
    let mut store = streamsight_store::open(&url).with_context(|| format!("cannot open {url}"))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = None;
    store.scan(streamsight_core::Millis(since_ms), &mut |batch| {
        for record in batch {
            if failed.is_none()
                && let Err(e) = serde_json::to_writer(&mut out, &record)
                    .map_err(std::io::Error::from)
                    .and_then(|()| writeln!(out))
            {
                failed = Some(e);
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e).context("writing the dump");
    }
    out.flush().context("writing the dump")
}
