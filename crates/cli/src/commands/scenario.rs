//! `streamsight scenario`.

use anyhow::{Context, bail};
use std::io::Write;

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// A bursty producer (idle, trickling, steady and bursting stretches of 1 to 15
    /// minutes) on every partition of `orders`, and groups 5 minutes to 6 hours
    /// behind it committing every 3 to 7 s.
    Bursty {
        /// The same seed writes the same scenario.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How much scenario time to write.
        #[arg(long, default_value_t = 8.0)]
        hours: f64,
        /// Partitions of `orders`.
        #[arg(long, default_value_t = 4)]
        partitions: u32,
        /// Each second's rate varies by up to this share of the stretch's rate.
        #[arg(long, default_value_t = 0.0)]
        jitter: f64,
        /// Seconds between two readings of the broker's end offset.
        #[arg(long, default_value_t = 10)]
        poll_every: u32,
    },
}

pub fn run(command: Command) -> anyhow::Result<()> {
    let Command::Bursty {
        seed,
        hours,
        partitions,
        jitter,
        poll_every,
    } = command;
    if !(hours.is_finite() && hours > 0.0) {
        bail!("--hours must be above 0, got {hours}");
    }
    if !(jitter.is_finite() && (0.0..=1.0).contains(&jitter)) {
        bail!("--jitter must be between 0 and 1, got {jitter}");
    }
    // The generator keeps every second's acknowledgements to place commits.
    if partitions == 0 || f64::from(partitions) * hours > 2_000.0 {
        bail!("--partitions times --hours must be at most 2000, got {partitions} x {hours}");
    }
    let options = crate::scenario::BurstyOptions {
        seed,
        hours,
        partitions,
        jitter,
        poll_every,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    crate::scenario::bursty_to(&options, &mut out).context("writing the scenario")?;
    out.flush().context("writing the scenario")
}
