//! `streamsight replay`.

use crate::output::Format;
use crate::replay::{self, ReplayOptions};
use anyhow::{Context, bail};
use std::io::{BufReader, Write};
use std::path::PathBuf;
use streamsight_core::{Engine, EngineConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario; `-` reads standard input.
    pub file: PathBuf,
    /// Also print the state every this many seconds of scenario time.
    #[arg(long, value_name = "SECONDS")]
    pub sample_every: Option<f64>,
    /// Each sample as JSON lines, or as a table of its rows.
    #[arg(long, value_enum, default_value = "json")]
    pub format: Format,
    /// Also print events (topic resets, data loss) when they are detected.
    #[arg(long)]
    pub events: bool,
}

pub fn run(args: Args, engine: EngineConfig) -> anyhow::Result<()> {
    let sample_every_ms = match args.sample_every {
        None => None,
        Some(s) if s.is_finite() && s >= 0.001 => Some((s * 1000.0).round() as i64),
        Some(s) => bail!("--sample-every must be at least 0.001 seconds, got {s}"),
    };
    let options = ReplayOptions {
        sample_every_ms,
        format: args.format,
        events: args.events,
    };
    let file = &args.file;
    let mut engine = Engine::new(engine)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let summary = if file.as_os_str() == "-" {
        replay::run(&mut engine, std::io::stdin().lock(), &mut out, &options)
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("cannot open scenario {}", file.display()))?;
        replay::run(&mut engine, BufReader::new(f), &mut out, &options)
    }
    .with_context(|| format!("replay of {} failed", file.display()))?;
    out.flush()?;
    let rejected: Vec<String> = summary
        .stats
        .rejected
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{}={n}", r.as_str()))
        .collect();
    eprintln!(
        "replayed {} lines, {} samples; accepted {}, redundant {}, rejected {} [{}], resets {}",
        summary.lines,
        summary.samples,
        summary.stats.accepted,
        summary.stats.redundant,
        summary.stats.rejected.total(),
        rejected.join(" "),
        summary.stats.resets,
    );
    Ok(())
}
