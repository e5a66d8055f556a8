//! `streamsight lag`.

use crate::lag;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The collector's API (STREAMSIGHT_API_KEY is sent as its key when set).
    #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
    pub collector: String,
    /// Ask this cluster directly (host:port[,host:port]) instead of a collector.
    #[arg(long, conflicts_with = "cluster")]
    pub bootstrap_server: Option<String>,
    /// Only this group. Directly against a cluster whose brokers cannot list
    /// groups, the group to ask for.
    #[arg(long)]
    pub group: Option<String>,
    /// Only this topic.
    #[arg(long)]
    pub topic: Option<String>,
    /// Only this cluster (as the collector names it).
    #[arg(long)]
    pub cluster: Option<String>,
    /// A table of the rows, or the rows as JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let filter = lag::Filter {
        group: args.group,
        topic: args.topic,
    };
    let found = output::runtime()?.block_on(async {
        match &args.bootstrap_server {
            Some(b) => lag::from_cluster(b, filter.group.as_slice(), &filter).await,
            None => lag::from_collector(&args.collector, args.cluster.as_deref(), &filter).await,
        }
    })?;
    output::emit(args.format, &found.rows, |mut out, rows| {
        lag::write_table(&mut out, rows)?;
        writeln!(out)
    })?;
    for why in &found.unreachable {
        eprintln!("{why}");
    }
    if found.bootstrap_look && found.rows.iter().any(|r| r.report.lag_messages != Some(0)) {
        eprintln!(
            "one look at the cluster: lag in messages only; a group behind reads STALE, since whether it keeps up \
             needs a history (run `streamsight serve --cluster NAME=HOST:PORT` and ask it)"
        );
    }
    // Nothing is said so, on stderr; an error when something was asked for,
    // or when a cluster that did not answer is why there is nothing.
    let asked = filter.group.is_some() || filter.topic.is_some() || args.cluster.is_some();
    let asked = asked || !found.unreachable.is_empty();
    match found.why_none {
        Some(why) if asked => Err(anyhow::anyhow!(why)),
        Some(why) => {
            eprintln!("{why}");
            Ok(())
        }
        None => Ok(()),
    }
}
