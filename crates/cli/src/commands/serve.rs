//! `streamsight serve`: flags over the environment over the config file, then
//! the collector until SIGTERM or Ctrl-C.

use crate::config::Config;

/// Flags override the environment, which overrides the config file.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Agent-compatible intake address (tracers' DD_TRACE_AGENT_URL).
    #[arg(long, env = "STREAMSIGHT_INTAKE_LISTEN")]
    pub intake_listen: Option<std::net::SocketAddr>,
    /// API and /metrics address.
    #[arg(long, env = "STREAMSIGHT_API_LISTEN")]
    pub api_listen: Option<std::net::SocketAddr>,
    /// OTLP/HTTP (`/v1/traces`, `/v1/logs`) and Fluent Bit (`/ingest/json_lines`) address.
    #[arg(long, env = "STREAMSIGHT_OTLP_LISTEN")]
    pub otlp_listen: Option<std::net::SocketAddr>,
    /// sqlite://PATH, kafka://HOST:PORT[,HOST:PORT]/TOPIC[?create=true&mode=sharded&…] or memory://
    #[arg(long, env = "STREAMSIGHT_STORAGE")]
    pub storage: Option<String>,
    /// On a sharded log: where the other nodes reach this node's API
    /// (http://HOST:PORT); by default the API's own address.
    #[arg(long, env = "STREAMSIGHT_ADVERTISE_API")]
    pub advertise_api: Option<String>,
    /// How long stored data is kept, e.g. 7d.
    #[arg(long, env = "STREAMSIGHT_RETENTION", value_parser = humantime::parse_duration)]
    pub retention: Option<std::time::Duration>,
    /// A Kafka cluster to poll, NAME=HOST:PORT[,HOST:PORT], with the defaults of
    /// `[[serve.clusters]]`; repeatable (`;` between them in the environment).
    #[arg(long = "cluster", env = "STREAMSIGHT_CLUSTERS", value_delimiter = ';', value_parser = parse_cluster)]
    pub clusters: Vec<streamsight_poller::ClusterConfig>,
    /// Serve a non-loopback address with no API keys (refused otherwise).
    #[arg(long)]
    pub insecure_no_auth: bool,
    /// The API keys file (`streamsight keys`).
    #[arg(long, env = "STREAMSIGHT_KEYS_FILE")]
    pub keys_file: Option<std::path::PathBuf>,
}

fn parse_cluster(spec: &str) -> Result<streamsight_poller::ClusterConfig, String> {
    let (name, bootstrap) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?} is not NAME=HOST:PORT[,HOST:PORT]"))?;
    let cluster = streamsight_poller::ClusterConfig::new(name.trim(), bootstrap);
    cluster.validate().map_err(|e| e.to_string())?;
    Ok(cluster)
}

/// The configuration with the flags applied.
fn configured(mut config: Config, args: Args) -> Config {
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
    config
}

pub fn run(config: Config, args: Args) -> anyhow::Result<()> {
    let config = configured(config, args);
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    // The OTLP listener serves the intake's certificate.
    let scheme = |tls: bool| if tls { "https" } else { "http" };
    let (intake, api) = (
        scheme(config.serve.intake_tls.is_some()),
        scheme(config.serve.api_tls.is_some()),
    );
    runtime.block_on(async move {
        let mut running = streamsight_collector::serve(config.serve, config.engine).await?;
        // Tests and scripts read the bound addresses from this line.
        println!(
            "streamsight serving intake={intake}://{} api={api}://{} otlp={intake}://{}",
            running.intake_addr, running.api_addr, running.otlp_addr
        );
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            ended = running.wait() => tracing::error!(how = %ended, "a collector task ended; shutting down"),
            _ = tokio::signal::ctrl_c() => tracing::info!("interrupted; shutting down"),
            _ = terminate.recv() => tracing::info!("terminated; shutting down"),
        }
        running.shutdown().await;
        anyhow::Ok(())
    })
}
