//! `streamsight dlq`.

use crate::output::{self, Format};

#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// DLQ topics the collector watches, with velocity and top reasons.
    List {
        /// The collector's API (STREAMSIGHT_API_KEY is sent as its key when set).
        #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
        collector: String,
        /// A table of the DLQs, or the collector's answer as JSON.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// The last records of a DLQ topic with their provenance (nothing is committed).
    Tail {
        /// The dead-letter topic.
        topic: String,
        /// Its cluster (host:port[,host:port]).
        #[arg(long)]
        bootstrap_server: String,
        /// Records per partition.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        /// A table of the records, or the records as JSON.
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Send dead letters back to their source topic (or --to-topic), their
    /// provenance replaced by a streamsight-redrive header, at a bounded rate,
    /// each at most once: a dry run unless --execute (docs/act.md).
    Redrive(crate::commands::redrive::Args),
}

pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::List { collector, format } => {
            let body = output::runtime()?.block_on(crate::dlq::list(&collector))?;
            output::emit(format, &body, |mut out, body| crate::dlq::write_list(&mut out, body))?;
            let topics = body["clusters"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["topics"].as_array())
                .map(Vec::len)
                .sum::<usize>();
            if topics == 0 {
                eprintln!(
                    "the collector at {collector} watches no dead-letter topic: name them in [[serve.dlq]] \
                     (docs/dlq.md), or tail one from its cluster with `dlq tail TOPIC --bootstrap-server HOST:PORT`"
                );
            }
            Ok(())
        }
        Command::Redrive(args) => crate::commands::redrive::run(args),
        Command::Tail {
            topic,
            bootstrap_server,
            limit,
            format,
        } => {
            let records = crate::dlq::tail(&bootstrap_server, &topic, limit)?;
            output::emit(format, &records, |mut out, records| {
                crate::dlq::write_tail(&mut out, records)
            })
        }
    }
}
