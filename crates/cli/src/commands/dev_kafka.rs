//! `streamsight dev-kafka`.

use anyhow::Context;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Topics to create, as NAME or NAME:PARTITIONS.
    #[arg(long = "topic", value_name = "NAME[:PARTITIONS]")]
    pub topics: Vec<String>,
    /// Number of brokers in the mock cluster.
    #[arg(long, default_value_t = 1)]
    pub brokers: i32,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let cluster = rdkafka::mocking::MockCluster::new(args.brokers).context("cannot start the mock cluster")?;
    for spec in &args.topics {
        let (name, partitions) = match spec.split_once(':') {
            Some((name, n)) => (
                name,
                n.parse::<i32>()
                    .with_context(|| format!("bad partition count in {spec:?}"))?,
            ),
            None => (spec.as_str(), 1),
        };
        cluster
            .create_topic(name, partitions, 1)
            .with_context(|| format!("cannot create topic {name:?}"))?;
    }
    // Tests and scripts read the address from this line.
    println!("bootstrap={}", cluster.bootstrap_servers());
    let (tx, rx) = std::sync::mpsc::channel();
    super::on_interrupt(tx)?;
    let _ = rx.recv();
    Ok(())
}
