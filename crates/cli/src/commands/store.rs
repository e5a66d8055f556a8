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
    // Dumping reads: a store that is not there is not made.
    if let Some(path) = url.strip_prefix("sqlite://") {
        anyhow::ensure!(
            std::path::Path::new(path).exists(),
            "no store at {path}: nothing was stored there (the collector stores where its --storage, \
             STREAMSIGHT_STORAGE or [serve] storage says)"
        );
    }
    anyhow::ensure!(
        url != "memory://",
        "memory:// keeps nothing once its collector stops: there is nothing to dump (give --storage sqlite://PATH)"
    );
    let mut store = streamsight_store::open(&url).with_context(|| format!("cannot open {url}"))?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = None;
    let mut records = 0usize;
    store.scan(streamsight_core::Millis(since_ms), &mut |batch| {
        records += batch.len();
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
    out.flush().context("writing the dump")?;
    if records == 0 {
        eprintln!("{url} holds no records at or after {since_ms} ms");
    }
    Ok(())
}
