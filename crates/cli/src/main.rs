use clap::{Parser, Subcommand};
use std::path::PathBuf;
use streamsight::commands;
use streamsight::config::Config;

/// The collector allocates per point; the intake benchmark runs faster with
/// mimalloc than with the system allocator (BENCHMARKS.md).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
    /// Run the collector: the Datadog-compatible Data Streams intake, the engine,
    /// durable storage, the HTTP API and Prometheus metrics.
    Serve(commands::serve::Args),
    /// Try streamsight: the mock cluster, the collector with its dashboard, and a
    /// pipeline written with the SDK (a producer whose sends fail every few
    /// minutes, a healthy group, a slow one, a stuck one, a DLQ filling up).
    Demo(commands::demo::Args),
    /// Start an in-process Kafka-protocol broker (librdkafka's mock cluster) on
    /// loopback for trying streamsight out; prints its bootstrap address.
    DevKafka(commands::dev_kafka::Args),
    /// Lag and health per group and partition, like `kafka-consumer-groups
    /// --describe` with lag seconds: from a running collector, or straight from a
    /// cluster with --bootstrap-server.
    Lag(commands::lag::Args),
    /// Run the end-to-end probe alone: sequenced records to every partition of a
    /// probe topic, read back by the probe's own group; prints round-trip and
    /// produce latency, losses, duplicates and errors per partition.
    Probe(commands::probe::Args),
    /// Dead-letter queues: list them with velocity and top reasons (from a
    /// collector), or tail one with its provenance decoded (from the cluster).
    #[command(subcommand)]
    Dlq(commands::dlq::Command),
    /// Feed a scenario (JSON Lines of timed events) through the engine on a
    /// simulated clock and print lag and health at sample times.
    Replay(commands::replay::Args),
    /// Write a generated scenario for `replay` to standard output.
    #[command(subcommand)]
    Scenario(commands::scenario::Command),
    /// The collector's store, readable.
    #[command(subcommand)]
    Store(commands::store::Command),
    /// API keys: create (printed once), list, revoke. A running collector reads
    /// the keys file again within seconds (or at once on SIGHUP).
    #[command(subcommand)]
    Keys(commands::keys::Command),
    /// A message's journey: its spans, log lines and dead letters in time order,
    /// then where it stopped for each group reading it.
    Journey(commands::journey::Args),
    /// A collector's alerts (firing, no data, pending, resolved), worst first;
    /// its rules and silences. Changes need an admin key (STREAMSIGHT_API_KEY).
    Alerts(commands::alerts::Args),
}

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // The reader went away (`| head`): what it wanted it has.
        Err(e) if streamsight::output::broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {}", streamsight::output::causes(&e));
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STREAMSIGHT_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = Config::load(cli.config.as_deref())?;
    match cli.command {
        Command::Serve(args) => commands::serve::run(config, args),
        Command::Demo(args) => commands::demo::run(args),
        Command::DevKafka(args) => commands::dev_kafka::run(args),
        Command::Lag(args) => commands::lag::run(args),
        Command::Probe(args) => commands::probe::run(args),
        Command::Dlq(command) => commands::dlq::run(command),
        Command::Replay(args) => commands::replay::run(args, config.engine),
        Command::Scenario(command) => commands::scenario::run(command),
        Command::Store(command) => commands::store::run(command, &config.serve.storage),
        Command::Keys(command) => commands::keys::run(command, &config.serve),
        Command::Journey(args) => commands::journey::run(args),
        Command::Alerts(args) => commands::alerts::run(args),
    }
}
