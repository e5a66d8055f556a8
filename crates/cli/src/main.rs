use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use std::io::{BufReader, Write};
use std::path::PathBuf;
use streamsight::config::Config;
use streamsight::replay::{self, Format, ReplayOptions};
use streamsight_core::Engine;

/// Kafka lag that tells the truth: lag in messages and seconds, health, drops.
#[derive(Debug, Parser)]
#[command(name = "streamsight", version)]
struct Cli {
    /// TOML configuration file; embedded defaults when absent.
    #[arg(long, global = true, env = "STREAMSIGHT_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Feed a scenario (JSON Lines of timed events) through the engine on a
    /// simulated clock and print lag and health at sample times.
    Replay {
        /// The scenario; `-` reads standard input.
        file: PathBuf,
        /// Also print the state every this many seconds of scenario time.
        #[arg(long, value_name = "SECONDS")]
        sample_every: Option<f64>,
        #[arg(long, value_enum, default_value = "json")]
        format: Format,
        /// Also print events (topic resets, data loss) when they are detected.
        #[arg(long)]
        events: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Replay {
            file,
            sample_every,
            format,
            events,
        } => {
            let sample_every_ms = match sample_every {
                None => None,
                Some(s) if s.is_finite() && s >= 0.001 => Some((s * 1000.0).round() as i64),
                Some(s) => bail!("--sample-every must be at least 0.001 seconds, got {s}"),
            };
            let options = ReplayOptions {
                sample_every_ms,
                format,
                events,
            };
            let mut engine = Engine::new(config.engine)?;
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            let summary = if file.as_os_str() == "-" {
                replay::run(&mut engine, std::io::stdin().lock(), &mut out, &options)
            } else {
                let f = std::fs::File::open(&file)
                    .with_context(|| format!("cannot open scenario {}", file.display()))?;
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
        }
    }
    Ok(())
}
