use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use std::io::{BufReader, Write};
use std::path::PathBuf;
use streamsight::config::Config;
use streamsight::lag;
use streamsight::replay::{self, Format, ReplayOptions};
use streamsight_core::Engine;

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
    Serve(ServeArgs),
    /// Try streamsight: the mock cluster, the collector with its dashboard, and a
    /// pipeline written with the SDK (a producer whose sends fail every few
    /// minutes, a healthy group, a slow one, a stuck one, a DLQ filling up).
    Demo {
        /// The dashboard and API.
        #[arg(long, default_value = "127.0.0.1:7411")]
        api_listen: std::net::SocketAddr,
        /// The first producer incident starts after this long.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
        first_incident_after: std::time::Duration,
        #[arg(long, value_parser = humantime::parse_duration, default_value = "3m")]
        incident_every: std::time::Duration,
        #[arg(long, value_parser = humantime::parse_duration, default_value = "60s")]
        incident_for: std::time::Duration,
        /// Stop after this long (default: until interrupted).
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Option<std::time::Duration>,
    },
    /// Start an in-process Kafka-protocol broker (librdkafka's mock cluster) on
    /// loopback for trying streamsight out; prints its bootstrap address.
    DevKafka {
        /// Topics to create, as NAME or NAME:PARTITIONS.
        #[arg(long = "topic", value_name = "NAME[:PARTITIONS]")]
        topics: Vec<String>,
        /// Number of brokers in the mock cluster.
        #[arg(long, default_value_t = 1)]
        brokers: i32,
    },
    /// Lag and health per group and partition, like `kafka-consumer-groups
    /// --describe` with lag seconds: from a running collector, or straight from a
    /// cluster with --bootstrap-server.
    Lag {
        /// The collector's API.
        #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
        collector: String,
        /// Ask this cluster directly (host:port[,host:port]) instead of a collector.
        #[arg(long, conflicts_with = "cluster")]
        bootstrap_server: Option<String>,
        /// Only this group. Directly against a cluster whose brokers cannot list
        /// groups, the group to ask for.
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        topic: Option<String>,
        /// Only this cluster (as the collector names it).
        #[arg(long)]
        cluster: Option<String>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Run the end-to-end probe alone: sequenced records to every partition of a
    /// probe topic, read back by the probe's own group; prints round-trip and
    /// produce latency, losses, duplicates and errors per partition.
    Probe {
        #[arg(long)]
        bootstrap_server: String,
        #[arg(long, default_value = "streamsight-probe")]
        topic: String,
        #[arg(long, default_value = "streamsight-probe")]
        group: String,
        #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
        interval: std::time::Duration,
        /// A record not back within this is lost.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "20s")]
        sla: std::time::Duration,
        /// Print a report this often.
        #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
        report_every: std::time::Duration,
        /// Stop after this long (default: until interrupted), printing a last report.
        #[arg(long, value_parser = humantime::parse_duration)]
        duration: Option<std::time::Duration>,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// Dead-letter queues: list them with velocity and top reasons (from a
    /// collector), or tail one with its provenance decoded (from the cluster).
    #[command(subcommand)]
    Dlq(DlqCommand),
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
    /// Write a generated scenario for `replay` to standard output.
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    /// The collector's store, readable.
    #[command(subcommand)]
    Store(StoreCommand),
    /// API keys: create (printed once), list, revoke. A running collector reads
    /// the keys file again within seconds (or at once on SIGHUP).
    #[command(subcommand)]
    Keys(KeysCommand),
    /// A message's journey: its spans, log lines and dead letters in time order,
    /// then where it stopped for each group reading it.
    Journey {
        /// A W3C trace id (32 hex digits) or a Datadog 64-bit id.
        trace_id: String,
        #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
        collector: String,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// A collector's alerts (firing, no data, pending, resolved), worst first;
    /// its rules and silences. Changes need an admin key (STREAMSIGHT_API_KEY).
    Alerts {
        #[command(subcommand)]
        action: Option<AlertsCommand>,
        #[arg(
            long,
            global = true,
            env = "STREAMSIGHT_API_URL",
            default_value = "http://127.0.0.1:7411"
        )]
        collector: String,
        #[arg(long, global = true, value_enum, default_value = "table")]
        format: Format,
    },
}

#[derive(Debug, Subcommand)]
enum AlertsCommand {
    /// Every rule, disabled ones included, and where it comes from.
    Rules,
    /// Makes or replaces a rule from a TOML file (the fields of
    /// `[[serve.alerts.rules]]`); over the configuration's of the same name.
    SetRule {
        name: String,
        #[arg(long)]
        file: PathBuf,
    },
    /// Removes a rule made with set-rule: its alerts resolve.
    RemoveRule { name: String },
    /// Silences matching alerts: `--match label=glob` (alertname is the rule).
    Silence {
        #[arg(long = "match", required = true)]
        matchers: Vec<String>,
        #[arg(long = "for", default_value = "2h")]
        duration: String,
        #[arg(long, default_value = "")]
        comment: String,
    },
    /// Ends a silence now.
    EndSilence { id: String },
}

#[derive(Debug, Subcommand)]
enum KeysCommand {
    /// Creates a key and prints it; only its hash is stored.
    Create {
        #[arg(long, default_value = "default")]
        tenant: String,
        /// ingest (send telemetry), read (API, /metrics) or admin (everything).
        #[arg(long)]
        scope: streamsight_collector::auth::Scope,
        /// Default: the config's `keys_file`.
        #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
        keys_file: Option<std::path::PathBuf>,
    },
    /// Lists keys: public id, tenant, scope, created, revoked. Never the key.
    List {
        #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
        keys_file: Option<std::path::PathBuf>,
    },
    /// Revokes a key by its public id.
    Revoke {
        id: String,
        #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
        keys_file: Option<std::path::PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
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

#[derive(Debug, Subcommand)]
enum ScenarioCommand {
    /// A bursty producer (idle, trickling, steady and bursting stretches of 1 to 15
    /// minutes) on every partition of `orders`, and groups 5 minutes to 6 hours
    /// behind it committing every 3 to 7 s.
    Bursty {
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, default_value_t = 8.0)]
        hours: f64,
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

#[derive(Debug, Subcommand)]
enum DlqCommand {
    /// DLQ topics the collector watches, with velocity and top reasons.
    List {
        #[arg(long, env = "STREAMSIGHT_API_URL", default_value = "http://127.0.0.1:7411")]
        collector: String,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
    /// The last records of a DLQ topic with their provenance (nothing is committed).
    Tail {
        topic: String,
        #[arg(long)]
        bootstrap_server: String,
        /// Records per partition.
        #[arg(long, default_value_t = 20)]
        limit: i64,
        #[arg(long, value_enum, default_value = "table")]
        format: Format,
    },
}

/// Flags override the environment, which overrides the config file.
#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// Agent-compatible intake address (tracers' DD_TRACE_AGENT_URL).
    #[arg(long, env = "STREAMSIGHT_INTAKE_LISTEN")]
    intake_listen: Option<std::net::SocketAddr>,
    /// API and /metrics address.
    #[arg(long, env = "STREAMSIGHT_API_LISTEN")]
    api_listen: Option<std::net::SocketAddr>,
    /// OTLP/HTTP (`/v1/traces`, `/v1/logs`) and Fluent Bit (`/ingest/json_lines`) address.
    #[arg(long, env = "STREAMSIGHT_OTLP_LISTEN")]
    otlp_listen: Option<std::net::SocketAddr>,
    /// sqlite://PATH, kafka://HOST:PORT[,HOST:PORT]/TOPIC[?mode=sharded&…] or memory://
    #[arg(long, env = "STREAMSIGHT_STORAGE")]
    storage: Option<String>,
    /// On a sharded log: where the other nodes reach this node's API
    /// (http://HOST:PORT); by default the API's own address.
    #[arg(long, env = "STREAMSIGHT_ADVERTISE_API")]
    advertise_api: Option<String>,
    /// How long stored data is kept, e.g. 7d.
    #[arg(long, env = "STREAMSIGHT_RETENTION", value_parser = humantime::parse_duration)]
    retention: Option<std::time::Duration>,
    /// A Kafka cluster to poll, NAME=HOST:PORT[,HOST:PORT], with the defaults of
    /// `[[serve.clusters]]`; repeatable (`;` between them in the environment).
    #[arg(long = "cluster", env = "STREAMSIGHT_CLUSTERS", value_delimiter = ';', value_parser = parse_cluster)]
    clusters: Vec<streamsight_poller::ClusterConfig>,
    /// Serve a non-loopback address with no API keys (refused otherwise).
    #[arg(long)]
    insecure_no_auth: bool,
    /// The API keys file (`streamsight keys`).
    #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
    keys_file: Option<std::path::PathBuf>,
}

fn parse_cluster(spec: &str) -> Result<streamsight_poller::ClusterConfig, String> {
    let (name, bootstrap) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?} is not NAME=HOST:PORT[,HOST:PORT]"))?;
    let cluster = streamsight_poller::ClusterConfig::new(name.trim(), bootstrap);
    cluster.validate().map_err(|e| e.to_string())?;
    Ok(cluster)
}

fn keys(command: KeysCommand, serve: &streamsight_collector::ServeConfig) -> anyhow::Result<()> {
    let configured = serve.keys_file.as_path();
    use streamsight_collector::auth::{KeyFile, generate};
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    let path_of = |p: Option<std::path::PathBuf>| p.unwrap_or_else(|| configured.to_owned());
    match command {
        KeysCommand::Create {
            tenant,
            scope,
            keys_file,
        } => {
            let known = std::iter::once(streamsight_collector::config::DEFAULT_TENANT)
                .chain(serve.tenants.iter().map(|t| t.name.as_str()))
                .any(|t| t == tenant);
            anyhow::ensure!(
                known,
                "no tenant {tenant:?} in the config ([[serve.tenants]]); a key for it would open nothing"
            );
            let path = path_of(keys_file);
            let mut file = KeyFile::load(&path)?;
            let key = generate(&tenant, scope, now_ms)?;
            file.keys.push(key.stored.clone());
            file.save(&path)?;
            println!("{}", key.token);
            eprintln!(
                "key {} ({} scope, tenant {tenant}) added to {}; it is shown only this once",
                key.stored.id,
                scope.as_str(),
                path.display()
            );
        }
        KeysCommand::List { keys_file } => {
            let file = KeyFile::load(&path_of(keys_file))?;
            println!(
                "{:<14} {:<16} {:<7} {:<15} REVOKED_MS",
                "ID", "TENANT", "SCOPE", "CREATED_MS"
            );
            for k in &file.keys {
                let revoked = k.revoked_ms.map_or("-".to_owned(), |t| t.to_string());
                println!(
                    "{:<14} {:<16} {:<7} {:<15} {revoked}",
                    k.id,
                    k.tenant,
                    k.scope.as_str(),
                    k.created_ms
                );
            }
        }
        KeysCommand::Revoke { id, keys_file } => {
            let path = path_of(keys_file);
            let mut file = KeyFile::load(&path)?;
            file.revoke(&id, now_ms)?;
            file.save(&path)?;
            eprintln!("key {id} revoked in {}", path.display());
        }
    }
    Ok(())
}

fn serve(mut config: Config, args: ServeArgs) -> anyhow::Result<()> {
    let s = &mut config.serve;
    s.intake_listen = args.intake_listen.unwrap_or(s.intake_listen);
    s.api_listen = args.api_listen.unwrap_or(s.api_listen);
    s.journeys.otlp_listen = args.otlp_listen.unwrap_or(s.journeys.otlp_listen);
    if let Some(storage) = args.storage {
        s.storage = storage;
    }
    if let Some(api) = args.advertise_api {
        s.advertise_api = Some(api);
    }
    s.retention = args.retention.unwrap_or(s.retention);
    s.clusters.extend(args.clusters);
    s.insecure_no_auth |= args.insecure_no_auth;
    if let Some(path) = args.keys_file {
        s.keys_file = path;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let mut running = streamsight_collector::serve(config.serve, config.engine).await?;
        // Tests and scripts read the bound addresses from this line.
        println!(
            "streamsight serving intake=http://{} api=http://{} otlp=http://{}",
            running.intake_addr, running.api_addr, running.otlp_addr
        );
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            () = running.wait() => tracing::error!("a collector task ended; shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
            _ = terminate.recv() => tracing::info!("terminated; shutting down"),
        }
        running.shutdown().await;
        anyhow::Ok(())
    })
}

fn run_probe(
    config: streamsight_probe::ProbeConfig,
    every: std::time::Duration,
    duration: Option<std::time::Duration>,
    format: Format,
) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let probe = streamsight_probe::Probe::start(config)?;
        let deadline = duration.map(|d| tokio::time::Instant::now() + d);
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            let last = tokio::select! {
                _ = tick.tick() => false,
                () = async { match deadline { Some(d) => tokio::time::sleep_until(d).await, None => std::future::pending().await } } => true,
                _ = tokio::signal::ctrl_c() => true,
            };
            let report = probe.report();
            let mut out = std::io::stdout().lock();
            match format {
                Format::Json => {
                    serde_json::to_writer(&mut out, &report)?;
                    writeln!(out)?;
                }
                Format::Table => {
                    writeln!(
                        out,
                        "{:<10} {:<9} {:>7} {:>9} {:>6} {:>11} {:>12} {:>12} {:>12}",
                        "PARTITION", "STATUS", "SENT", "RECEIVED", "LOST", "DUPLICATED", "PRODUCE-ERR", "RT-P50(s)", "RT-P99(s)"
                    )?;
                    for p in &report.partitions {
                        let q = |f: fn(&streamsight_core::probe::LatencySummary) -> f64| {
                            p.roundtrip_latency.as_ref().map_or("-".to_owned(), |s| format!("{:.3}", f(s)))
                        };
                        writeln!(
                            out,
                            "{:<10} {:<9} {:>7} {:>9} {:>6} {:>11} {:>12} {:>12} {:>12}",
                            p.partition,
                            p.status.to_uppercase(),
                            p.sent,
                            p.received,
                            p.lost,
                            p.duplicated,
                            p.produce_errors,
                            q(|s| s.p50_seconds),
                            q(|s| s.p99_seconds)
                        )?;
                    }
                    if let Some(e) = probe.last_error() {
                        writeln!(out, "error: {e}")?;
                    }
                }
            }
            out.flush()?;
            if last {
                return anyhow::Ok(());
            }
        }
    })
}

fn dev_kafka(topics: &[String], brokers: i32) -> anyhow::Result<()> {
    let cluster = rdkafka::mocking::MockCluster::new(brokers).context("cannot start the mock cluster")?;
    for spec in topics {
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
    ctrlc_on(tx)?;
    let _ = rx.recv();
    Ok(())
}

/// Sends on `tx` when the process is interrupted or terminated.
fn ctrlc_on(tx: std::sync::mpsc::Sender<()>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    std::thread::spawn(move || {
        runtime.block_on(async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let terminated = async {
                match term.as_mut() {
                    Some(t) => {
                        t.recv().await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                () = terminated => {}
            }
        });
        let _ = tx.send(());
    });
    Ok(())
}

fn main() -> anyhow::Result<()> {
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
        Command::Serve(args) => serve(config, args)?,
        Command::DevKafka { topics, brokers } => dev_kafka(&topics, brokers)?,
        Command::Demo {
            api_listen,
            first_incident_after,
            incident_every,
            incident_for,
            duration,
        } => streamsight::demo::run(streamsight::demo::DemoOptions {
            api_listen,
            first_incident_after,
            incident_every,
            incident_for,
            duration,
            ..Default::default()
        })?,
        Command::Journey {
            trace_id,
            collector,
            format,
        } => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let body = runtime
                .block_on(streamsight::journey::get(&collector, &trace_id))
                .map_err(anyhow::Error::msg)?;
            let mut out = std::io::stdout().lock();
            match format {
                Format::Json => writeln!(out, "{body}")?,
                Format::Table => streamsight::journey::write_timeline(&mut out, &body)?,
            }
        }
        Command::Alerts {
            action,
            collector,
            format,
        } => {
            use streamsight::alerts::Change;
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let mut out = std::io::stdout().lock();
            let change = match action {
                None => {
                    let body = runtime
                        .block_on(streamsight::alerts::list(&collector))
                        .map_err(anyhow::Error::msg)?;
                    match format {
                        Format::Json => writeln!(out, "{body}")?,
                        Format::Table => streamsight::alerts::write_table(&mut out, &body)?,
                    }
                    return Ok(());
                }
                Some(AlertsCommand::Rules) => {
                    let body = runtime
                        .block_on(streamsight::alerts::rules(&collector))
                        .map_err(anyhow::Error::msg)?;
                    match format {
                        Format::Json => writeln!(out, "{body}")?,
                        Format::Table => streamsight::alerts::write_rules(&mut out, &body)?,
                    }
                    return Ok(());
                }
                Some(AlertsCommand::SetRule { name, file }) => {
                    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
                    Change::SetRule { name, toml: text }
                }
                Some(AlertsCommand::RemoveRule { name }) => Change::RemoveRule { name },
                Some(AlertsCommand::Silence {
                    matchers,
                    duration,
                    comment,
                }) => Change::Silence {
                    matchers,
                    duration,
                    comment,
                },
                Some(AlertsCommand::EndSilence { id }) => Change::EndSilence { id },
            };
            let body = runtime
                .block_on(streamsight::alerts::change(&collector, change))
                .map_err(anyhow::Error::msg)?;
            writeln!(out, "{body}")?;
        }
        Command::Dlq(DlqCommand::List { collector, format }) => {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let body = runtime.block_on(streamsight::dlq::list(&collector))?;
            let mut out = std::io::stdout().lock();
            match format {
                Format::Json => writeln!(out, "{body}")?,
                Format::Table => streamsight::dlq::write_list(&mut out, &body)?,
            }
        }
        Command::Dlq(DlqCommand::Tail {
            topic,
            bootstrap_server,
            limit,
            format,
        }) => {
            let records = streamsight::dlq::tail(&bootstrap_server, &topic, limit)?;
            let mut out = std::io::stdout().lock();
            match format {
                Format::Json => writeln!(out, "{}", serde_json::to_string(&records)?)?,
                Format::Table => streamsight::dlq::write_tail(&mut out, &records)?,
            }
        }
        Command::Probe {
            bootstrap_server,
            topic,
            group,
            interval,
            sla,
            report_every,
            duration,
            format,
        } => {
            let config = streamsight_probe::ProbeConfig {
                topic,
                group,
                interval,
                sla,
                ..streamsight_probe::ProbeConfig::new("probe", &bootstrap_server)
            };
            run_probe(config, report_every, duration, format)?;
        }
        Command::Lag {
            collector,
            bootstrap_server,
            group,
            topic,
            cluster,
            format,
        } => {
            let filter = lag::Filter { group, topic };
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            let rows = runtime.block_on(async {
                match &bootstrap_server {
                    Some(b) => lag::from_cluster(b, filter.group.as_slice(), &filter).await,
                    None => lag::from_collector(&collector, cluster.as_deref(), &filter).await,
                }
            })?;
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match format {
                Format::Json => serde_json::to_writer_pretty(&mut out, &rows)?,
                Format::Table => lag::write_table(&mut out, &rows)?,
            }
            writeln!(out)?;
        }
        Command::Keys(command) => keys(command, &config.serve)?,
        Command::Store(StoreCommand::Dump { storage, since_ms }) => {
            let url = storage.unwrap_or(config.serve.storage);
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
            out.flush().context("writing the dump")?;
        }
        Command::Scenario(ScenarioCommand::Bursty {
            seed,
            hours,
            partitions,
            jitter,
            poll_every,
        }) => {
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
            let options = streamsight::scenario::BurstyOptions {
                seed,
                hours,
                partitions,
                jitter,
                poll_every,
            };
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            streamsight::scenario::bursty_to(&options, &mut out).context("writing the scenario")?;
            out.flush().context("writing the scenario")?;
        }
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
                let f =
                    std::fs::File::open(&file).with_context(|| format!("cannot open scenario {}", file.display()))?;
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
