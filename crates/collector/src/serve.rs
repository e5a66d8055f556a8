//! `serve`: bind every listener first, so that a port in use is said before
//! anything starts; then replay each tenant's store and spawn the servers,
//! pollers, probes, DLQ monitors and housekeeping, stopped together.

use crate::{features, housekeeping, polling, routes};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use streamsight_core::{EngineConfig, Millis};
use streamsight_http::server::{self, stopped};
use streamsight_http::{auth, reload, tls};
use streamsight_node::clock::{self, time_ms};
use streamsight_node::config::{self, ServeConfig};
use streamsight_node::sync::lock;
use streamsight_node::telemetry::Failure;
use streamsight_node::{Shared, Writer, WriterError};

/// How often TLS and key files are compared with what is served (SIGHUP
/// reloads at once).
const RELOAD_CHECK_EVERY: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("engine configuration: {0}")]
    Engine(#[from] streamsight_core::ConfigError),
    #[error("storage: {0}")]
    Store(#[from] streamsight_store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("writer: {0}")]
    Writer(#[from] WriterError),
    #[error("startup task failed: {0}")]
    Startup(#[from] tokio::task::JoinError),
    #[error("poller: {0}")]
    Cluster(#[from] streamsight_poller::ClusterConfigError),
    #[error("{0}")]
    Probe(#[from] streamsight_probe::ProbeError),
    #[error("{0}")]
    Dlq(#[from] streamsight_dlq::DlqError),
    #[error("TLS: {0}")]
    Tls(#[from] tls::TlsError),
    #[error("{0}")]
    Auth(#[from] auth::AuthError),
    #[error(
        "refusing to serve {addr} without API keys: anyone who can reach it could read and write. \
         Create a key (`streamsight keys create`), bind to loopback, or pass --insecure-no-auth"
    )]
    Unauthenticated { addr: SocketAddr },
    /// A tenant's configuration, or a probe's or DLQ monitor's cluster; the
    /// message names which.
    #[error("{0}")]
    Tenants(String),
    #[error("{0}")]
    Alerts(String),
    #[error("[serve.limits]: {0}")]
    Limits(String),
    #[error("[serve]: {0}")]
    Serve(String),
    #[error("[serve.records]: {0}")]
    Records(String),
    #[error("cannot listen on unix socket {path}: {source}")]
    BindUnix { path: String, source: std::io::Error },
    #[error("sharded log: {0}")]
    Sharding(String),
}

/// A running collector: its servers, pollers and housekeeping in one task set,
/// stopped together by [`Running::shutdown`].
#[derive(Debug)]
pub struct Running {
    pub intake_addr: SocketAddr,
    pub api_addr: SocketAddr,
    /// The OTLP/HTTP and Fluent Bit listener (`[serve.journeys] otlp_listen`).
    pub otlp_addr: SocketAddr,
    /// The `default` tenant's services.
    pub shared: Arc<Shared>,
    /// Every tenant's services, `default` included.
    pub tenants: std::collections::BTreeMap<String, Arc<Shared>>,
    /// Where each of `intake_listeners` listens (`HOST:PORT` or `unix:PATH`), in order.
    pub bound_intakes: Vec<String>,
    tasks: tokio::task::JoinSet<()>,
    stop: tokio::sync::watch::Sender<bool>,
    writers: Vec<Writer>,
}

impl Running {
    /// Waits until a task ends (none does, unless it fails or the collector is
    /// shut down), and says how it ended: a panic's message, or that it
    /// returned.
    pub async fn wait(&mut self) -> String {
        match self.tasks.join_next().await {
            None => std::future::pending().await,
            Some(Ok(())) => "a task returned".to_owned(),
            Some(Err(e)) if e.is_panic() => {
                let payload = e.into_panic();
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".to_owned());
                format!("a task panicked: {message}")
            }
            Some(Err(e)) => format!("a task was cancelled: {e}"),
        }
    }

    /// Stops taking requests (those under way are answered), stops pollers,
    /// probes, DLQ monitors and housekeeping, and returns once the writer has
    /// stored and applied everything it was handed.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        while self.tasks.join_next().await.is_some() {}
        for shared in self.tenants.values() {
            shared.probes.stop();
            shared.dlq.stop();
            lock(&streamsight_alerts::of(shared).writer).take();
            shared.release_writer();
        }
        for writer in std::mem::take(&mut self.writers) {
            let _ = tokio::task::spawn_blocking(move || writer.finish()).await;
        }
        tracing::info!("streamsight stopped");
    }
}

impl Drop for Running {
    /// A collector dropped without `shutdown` still leaves the jobs it held
    /// on a shared log to the other nodes: its services may outlive it.
    fn drop(&mut self) {
        for shared in self.tenants.values() {
            if let Some(leases) = shared.leases.get() {
                leases.leave();
            }
        }
    }
}

/// Binds every listener and opens every store (a port in use or a bad keys
/// file is said before anything runs), then replays each tenant's store and
/// serves until the process ends. Port 0 in the config picks a free port: see
/// [`Running`].
pub async fn serve(config: ServeConfig, engine: EngineConfig) -> Result<Running, ServeError> {
    bind(config, engine).await?.spawn().await
}

type Tenants = std::collections::BTreeMap<String, Arc<Shared>>;
type Writers = std::collections::BTreeMap<String, Writer>;

/// Everything `serve` holds before a task runs: listeners bound, stores
/// opened, keys and certificates read, each tenant's node built.
struct Bound {
    config: ServeConfig,
    stores: Vec<(String, Box<dyn streamsight_store::Store>)>,
    intake: (tokio::net::TcpListener, SocketAddr),
    api: (tokio::net::TcpListener, SocketAddr),
    otlp: (tokio::net::TcpListener, SocketAddr),
    /// `[[serve.intake_listeners]]`: each listener, where it is, its tenant.
    bound_intakes: Vec<(server::Listener, String, String)>,
    keys: Arc<auth::ReloadingKeys>,
    intake_tls: Option<Arc<tls::Reloading>>,
    api_tls: Option<Arc<tls::Reloading>>,
    tenants: Tenants,
}

async fn bind(config: ServeConfig, engine: EngineConfig) -> Result<Bound, ServeError> {
    config.alerts.validate().map_err(ServeError::Alerts)?;
    config.limits.validate().map_err(ServeError::Limits)?;
    if !(1..=100_000).contains(&config.history_samples) {
        return Err(ServeError::Serve(format!(
            "history_samples is {}: it must be 1 to 100,000 (samples kept per group)",
            config.history_samples
        )));
    }
    config.records.check().map_err(ServeError::Records)?;
    let per_tenant = config.per_tenant().map_err(ServeError::Tenants)?;
    let mut stores = Vec::new();
    for (name, c) in &per_tenant {
        streamsight_poller::config::validate_all(&c.clusters)?;
        stores.push((name.clone(), streamsight_store::open(&c.storage)?));
    }
    let intake = bound_at(config.intake_listen).await?;
    let api = bound_at(config.api_listen).await?;
    let otlp = bound_at(config.journeys.otlp_listen).await?;
    let mut bound_intakes = Vec::new();
    for b in &config.intake_listeners {
        if !per_tenant.iter().any(|(name, _)| *name == b.tenant) {
            return Err(ServeError::Tenants(format!(
                "intake listener {} is bound to tenant {:?}, which is not configured",
                b.listen, b.tenant
            )));
        }
        let (listener, at) = bind_any(&b.listen).await?;
        bound_intakes.push((listener, at, b.tenant.clone()));
    }
    let keys = Arc::new(auth::ReloadingKeys::new(
        config.keys_file.clone(),
        config.insecure_no_auth,
    )?);
    let bound = config
        .intake_listeners
        .iter()
        .filter_map(|b| b.listen.parse::<SocketAddr>().ok());
    if let Some(addr) = [intake.1, api.1, otlp.1]
        .into_iter()
        .chain(bound)
        .find(|addr| !addr.ip().is_loopback())
    {
        if keys.keys().is_empty() && !config.insecure_no_auth {
            return Err(ServeError::Unauthenticated { addr });
        }
        // Beyond loopback, keys stay required while serving: the last key
        // revoked locks everyone out, never lets everyone in.
        keys.require();
    }
    let reloading_tls = |listeners: &[&'static str], settings: &Option<tls::ListenerTls>| {
        settings
            .clone()
            .map(|s| tls::Reloading::new(listeners, s))
            .transpose()
            .map(|t| t.map(Arc::new))
    };
    // The OTLP listener serves the intake's certificate (docs/collector.md).
    let (intake_tls, api_tls) = (
        reloading_tls(&["intake", "otlp"], &config.intake_tls)?,
        reloading_tls(&["api"], &config.api_tls)?,
    );
    let mut tenants = Tenants::new();
    // One pool of decode memory for the process, whatever the tenant.
    let decode_memory = streamsight_node::memory::DecodeMemory::new(config.limits.decode_memory_bytes);
    for (name, c) in per_tenant {
        let mut shared = features::node(c, engine.clone())?;
        shared.share_decode_memory(decode_memory.clone());
        let shared = Arc::new(shared);
        let alerts = streamsight_alerts::of(&shared);
        alerts.start_notifiers(&shared.config.alerts);
        let _ = alerts.base_url.set(format!("http://{}", api.1));
        tenants.insert(name, shared);
    }
    Ok(Bound {
        config,
        stores,
        intake,
        api,
        otlp,
        bound_intakes,
        keys,
        intake_tls,
        api_tls,
        tenants,
    })
}

impl Bound {
    /// Serves the API at once (it answers `/readyz` 503 while stores replay),
    /// replays each store, then serves the intakes and starts each tenant's
    /// probes, DLQ monitors, pollers and housekeeping.
    async fn spawn(self) -> Result<Running, ServeError> {
        let (stop, stop_rx) = tokio::sync::watch::channel(false);
        let mut tasks = tokio::task::JoinSet::new();
        let Bound {
            config,
            stores,
            intake,
            api,
            otlp,
            bound_intakes,
            keys,
            intake_tls,
            api_tls,
            tenants,
        } = self;
        let default = tenants[config::DEFAULT_TENANT].clone();
        let api_guard = server::Guard::new("api", default.clone())
            .public_paths(streamsight_dashboard::is_public)
            .loopback_hosts(api.1)
            .tls(api_tls.clone())
            .auth(keys.clone(), auth::Scope::Read, None)
            .peers(
                tenants
                    .iter()
                    .map(|(name, shared)| (name.clone(), shared.clone()))
                    .collect(),
            )
            .tenants(&tenants);
        let api_routes = tenants
            .iter()
            .map(|(name, shared)| (name.clone(), routes::api(shared.clone())))
            .collect();
        tasks.spawn(server::serve(
            server::Listener::Tcp(api.0),
            Arc::new(api_routes),
            api_guard,
            stop_rx.clone(),
        ));
        let retention_ms = time_ms(config.retention);
        let since = Millis(clock::now().0.saturating_sub(retention_ms));
        let writers = replay(stores, &tenants, since, api.1, api_tls.is_some()).await?;
        tracing::info!(intake_addr = %intake.1, api_addr = %api.1, otlp_addr = %otlp.1, tenants = tenants.len(), "streamsight serving");
        let routes_of = |router: fn(Arc<Shared>, Writer) -> axum::Router| -> server::Routes {
            Arc::new(
                tenants
                    .iter()
                    .map(|(name, shared)| (name.clone(), router(shared.clone(), writers[name].clone())))
                    .collect(),
            )
        };
        tasks.spawn(server::serve(
            server::Listener::Tcp(intake.0),
            routes_of(streamsight_intake::router),
            server::Guard::new("intake", default.clone())
                .tls(intake_tls.clone())
                .auth(keys.clone(), auth::Scope::Ingest, config.intake_tenant.clone())
                .tenants(&tenants),
            stop_rx.clone(),
        ));
        // OTLP clients and Fluent Bit send like tracers: ingest keys, the same tenants.
        tasks.spawn(server::serve(
            server::Listener::Tcp(otlp.0),
            routes_of(streamsight_intake::spans::router),
            server::Guard::new("otlp", default.clone())
                .tls(intake_tls.clone())
                .auth(keys.clone(), auth::Scope::Ingest, config.intake_tenant.clone())
                .tenants(&tenants),
            stop_rx.clone(),
        ));
        let mut bound_at = Vec::new();
        for (listener, at, tenant) in bound_intakes {
            let shared = &tenants[&tenant];
            let router = streamsight_intake::router(shared.clone(), writers[&tenant].clone());
            let routes = Arc::new(std::collections::HashMap::from([(tenant.clone(), router)]));
            let guard = server::Guard::new("intake", shared.clone())
                .auth(keys.clone(), auth::Scope::Ingest, None)
                .bound_to(tenant.clone())
                .tenants([(&tenant, shared)]);
            tasks.spawn(server::serve(listener, routes, guard, stop_rx.clone()));
            bound_at.push(at);
        }
        let audit = audit_sink(writers.clone(), tenants.clone());
        keys.audit_to(audit.clone());
        if let Some(t) = &intake_tls {
            t.audit_to("intake", audit.clone());
        }
        if let Some(t) = &api_tls {
            t.audit_to("api", audit.clone());
        }
        let mut reloading: Vec<Arc<dyn reload::Reload>> = vec![keys];
        reloading.extend(
            [intake_tls, api_tls]
                .into_iter()
                .flatten()
                .map(|t| t as Arc<dyn reload::Reload>),
        );
        tasks.spawn(until_stopped(
            reload::watch(reloading, RELOAD_CHECK_EVERY),
            stop_rx.clone(),
        ));
        for (name, shared) in &tenants {
            start_jobs(shared, &writers[name], retention_ms, &mut tasks, &stop_rx)?;
        }
        Ok(Running {
            intake_addr: intake.1,
            api_addr: api.1,
            otlp_addr: otlp.1,
            shared: default,
            tenants,
            bound_intakes: bound_at,
            tasks,
            stop,
            writers: writers.into_values().collect(),
        })
    }
}

/// Each tenant's store replayed into its node, and the writer that goes on
/// from there; on a sharded log, the node announced in the directory first.
async fn replay(
    stores: Vec<(String, Box<dyn streamsight_store::Store>)>,
    tenants: &Tenants,
    since: Millis,
    api_addr: SocketAddr,
    api_tls: bool,
) -> Result<Writers, ServeError> {
    let mut writers = Writers::new();
    for (name, store) in stores {
        let shared = tenants[&name].clone();
        if shared.config.log_is_sharded() {
            // No key (no randomness to make one): nothing announced, nothing taken.
            let peer_key = if shared.peer_key.is_empty() {
                String::new()
            } else {
                auth::digest(&shared.peer_key)
            };
            let directory = join_directory(&shared.config, api_addr, api_tls, peer_key).await?;
            let _ = shared.directory.set(Arc::new(directory));
        } else if shared.config.log_is_shared() {
            let presence = join_directory(&shared.config, api_addr, api_tls, String::new()).await?;
            let _ = shared.presence.set(Arc::new(presence));
        }
        let writer = tokio::task::spawn_blocking(move || Writer::start(store, shared, since)).await??;
        tenants[&name].ready.store(true, Ordering::Release);
        *lock(&streamsight_alerts::of(&tenants[&name]).writer) = Some(writer.clone());
        tenants[&name].set_writer(writer.clone());
        writers.insert(name, writer);
    }
    Ok(writers)
}

/// Administrative changes go to the log of the tenant they concern.
fn audit_sink(writers: Writers, tenants: Tenants) -> reload::AuditSink {
    let runtime = tokio::runtime::Handle::current();
    // Keys and certificates are the listeners' (every tenant's): counted on `default`.
    let default = tenants[config::DEFAULT_TENANT].clone();
    let failed = {
        let default = default.clone();
        move |failure: Failure, why: &str| default.telemetry.failed(failure, &why)
    };
    let certificate = move |listener: &'static str, not_after_s: i64| {
        default.telemetry.tls_certificate(listener, not_after_s);
    };
    reload::AuditSink::new(
        move |tenant: &str, event| {
            let tenant = if writers.contains_key(tenant) {
                tenant
            } else {
                config::DEFAULT_TENANT
            };
            if let (Some(writer), Some(shared)) = (writers.get(tenant), tenants.get(tenant)) {
                tracing::info!(tenant, ?event, "audit");
                let record = streamsight_core::Record::Audit {
                    at: clock::now(),
                    event,
                };
                // Called from a reload's blocking thread.
                if let Err(e) = runtime.block_on(writer.append(vec![record])) {
                    shared.telemetry.failed(Failure::AuditNotStored, &e);
                }
            }
        },
        failed,
        certificate,
    )
}

/// A tenant's probes, DLQ monitors, pollers and housekeeping.
fn start_jobs(
    shared: &Arc<Shared>,
    writer: &Writer,
    retention_ms: i64,
    tasks: &mut tokio::task::JoinSet<()>,
    stop_rx: &tokio::sync::watch::Receiver<bool>,
) -> Result<(), ServeError> {
    // Probes and DLQ monitors run their own threads and tasks; shutdown stops them.
    for probe in &shared.config.probes {
        let running = streamsight_probe::Probe::start(probe.clone())?;
        shared.probes.add(running);
    }
    for dlq in &shared.config.dlq {
        let running = streamsight_dlq::DlqMonitor::start(dlq.clone())?;
        shared.dlq.add(running);
    }
    // On a shared log, one node at a time polls each cluster and
    // evaluates the alert rules.
    if shared.config.log_is_shared() {
        let leases = streamsight_store::leases::Leases::join(&shared.config.storage)?;
        let _ = shared.leases.set(Arc::new(leases));
    }
    for cluster in shared.config.clusters.clone() {
        let poller = polling::poll_forever(shared.clone(), writer.clone(), cluster);
        tasks.spawn(until_stopped(poller, stop_rx.clone()));
    }
    let housekeeping = housekeeping::housekeeping(shared.clone(), writer.clone(), retention_ms);
    tasks.spawn(until_stopped(housekeeping, stop_rx.clone()));
    Ok(())
}

/// Says, on a shared log's directory, where this node's API answers (a
/// replicated node: that it is one, its address if known).
async fn join_directory(
    config: &ServeConfig,
    api_addr: SocketAddr,
    tls: bool,
    peer_key_sha256: String,
) -> Result<streamsight_store::directory::Directory, ServeError> {
    let api = match &config.advertise_api {
        Some(url) => url.clone(),
        None if api_addr.ip().is_unspecified() && !config.log_is_sharded() => String::new(),
        None if api_addr.ip().is_unspecified() => {
            return Err(ServeError::Sharding(format!(
                "the API listens on {api_addr}: set advertise_api to where other nodes reach it"
            )));
        }
        None => format!("{}://{api_addr}", if tls { "https" } else { "http" }),
    };
    let url = streamsight_store::KafkaUrl::parse(&config.storage)?;
    let join = move || streamsight_store::directory::Directory::join(&url, api, peer_key_sha256);
    Ok(tokio::task::spawn_blocking(join).await??)
}

/// `HOST:PORT` or `unix:PATH`; the address it ended up at (a port 0 resolved).
async fn bind_any(listen: &str) -> Result<(server::Listener, String), ServeError> {
    if let Some(path) = listen.strip_prefix("unix:") {
        // A socket left by an earlier run would refuse the bind.
        let _ = std::fs::remove_file(path);
        let listener = tokio::net::UnixListener::bind(path).map_err(|source| ServeError::BindUnix {
            path: path.to_owned(),
            source,
        })?;
        return Ok((server::Listener::Unix(listener), listen.to_owned()));
    }
    let addr: SocketAddr = listen
        .parse()
        .map_err(|e| ServeError::Tenants(format!("intake listener {listen:?} is not HOST:PORT or unix:PATH: {e}")))?;
    let (listener, at) = bound_at(addr).await?;
    Ok((server::Listener::Tcp(listener), at.to_string()))
}

/// A listener on `addr`, and where it ended up (a port 0 resolved).
async fn bound_at(addr: SocketAddr) -> Result<(tokio::net::TcpListener, SocketAddr), ServeError> {
    let listener = bind_tcp(addr).await?;
    let at = local_addr(&listener, addr)?;
    Ok((listener, at))
}

async fn bind_tcp(addr: SocketAddr) -> Result<tokio::net::TcpListener, ServeError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Bind { addr, source })
}

fn local_addr(l: &tokio::net::TcpListener, addr: SocketAddr) -> Result<SocketAddr, ServeError> {
    l.local_addr().map_err(|source| ServeError::Bind { addr, source })
}

/// Runs `task` until the collector is told to stop. Tasks that store do so
/// through the writer, which finishes what it was handed on its own.
async fn until_stopped(task: impl std::future::Future<Output = ()>, stop: tokio::sync::watch::Receiver<bool>) {
    tokio::select! {
        () = task => {}
        () = stopped(stop) => {}
    }
}
