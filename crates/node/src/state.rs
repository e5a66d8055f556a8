//! What a node holds: the base services, and the features installed above
//! them, all changed only by the writer ([`crate::writer`]).

use crate::config::ServeConfig;
pub use crate::services::ClusterView;
use crate::services::{DeliveryService, DlqService, LagService, PathwayService, PollingService, ProbeService};
use crate::telemetry::IntakeTelemetry;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use streamsight_core::shard::{ShardState, Shards};
use streamsight_core::{Engine, EngineConfig, Millis, Record};

pub use crate::services::GroupSample;

/// The collector's services, each owning its own state (see [`crate::services`]).
#[derive(Debug)]
pub struct Shared {
    pub config: ServeConfig,
    pub lag: LagService,
    pub pathways: PathwayService,
    pub deliveries: DeliveryService,
    pub clusters: PollingService,
    pub probes: ProbeService,
    pub dlq: DlqService,
    pub audit: crate::services::AuditService,
    /// Dead-letter redrives' progress, from the log.
    pub redrives: crate::services::RedriveService,
    /// The per-group signals derived on each housekeeping round (see
    /// [`crate::signals`], the read model: every reader of a signal reads it there).
    pub signals: crate::services::DerivedSignals,
    /// What the features above the base keep (alerts, journeys): applied
    /// after the base services, in order; the last one takes the records.
    features: Vec<Arc<dyn Feature>>,
    pub telemetry: IntakeTelemetry,
    /// Where writes' time goes: by intake stage and by applying service.
    pub timings: crate::timings::Timings,
    /// What requests in flight may decode, shared by every tenant of the
    /// process ([`Shared::share_decode_memory`]).
    pub decode_memory: Arc<crate::memory::DecodeMemory>,
    pub ready: AtomicBool,
    /// The last append to storage failed: intake answers 503 until one
    /// succeeds, and `/readyz` says so (a log in Kafka out of reach, a full disk).
    pub storage_failing: AtomicBool,
    /// When the last failed append failed (unix ms): on a sharded log, an
    /// announcement of this node read back after it shows the log takes
    /// appends again even when no intake came since (a node out of its load
    /// balancer's rotation gets none, so it would wait for one for ever).
    pub storage_failed_at_ms: std::sync::atomic::AtomicI64,
    /// On a sharded log: which shards this node holds, who holds the others
    /// and where they answer (see `docs/scale-out.md`).
    pub directory: std::sync::OnceLock<Arc<streamsight_store::directory::Directory>>,
    /// On a replicated shared log: this node's announcement in the log's
    /// directory, kept only so that a node of the other mode is refused.
    pub presence: std::sync::OnceLock<Arc<streamsight_store::directory::Directory>>,
    /// Each group's series labels, made once and shared by every signal's
    /// series of it (see [`crate::signals::GroupLabels`]).
    pub group_labels: std::sync::Mutex<crate::signals::GroupLabels>,
    /// On a shared log: the jobs one node at a time does (a cluster's
    /// poller, the alert rules) that this node holds.
    pub leases: std::sync::OnceLock<Arc<streamsight_store::leases::Leases>>,
    /// On a sharded log: the key this node presents to the others when it
    /// asks them itself (see `auth::PEER_PREFIX`); only its hash is announced.
    pub peer_key: String,
    /// On a sharded log: what its shards' snapshots did.
    pub snapshots: std::sync::OnceLock<Arc<streamsight_store::snapshots::SnapshotCounts>>,
    /// The writer of this node's log while it runs: for the features that
    /// record what they did (an executed offset reset). Released at shutdown,
    /// so that the writer, its last handle gone, can finish.
    writer: std::sync::Mutex<Option<crate::Writer>>,
}

impl Shared {
    /// A node with the base services only.
    pub fn new(config: ServeConfig, engine: EngineConfig) -> Result<Self, streamsight_core::ConfigError> {
        Self::with_features(config, engine, Vec::new())
    }

    /// A node whose writer also applies records to `features`.
    pub fn with_features(
        config: ServeConfig,
        engine: EngineConfig,
        features: Vec<Arc<dyn Feature>>,
    ) -> Result<Self, streamsight_core::ConfigError> {
        let clusters = config
            .clusters
            .iter()
            .map(|c| {
                let view = ClusterView {
                    bootstrap: c.bootstrap.clone(),
                    poll_interval_ms: crate::clock::time_ms(c.poll_interval),
                    ..ClusterView::default()
                };
                (c.name.clone(), view)
            })
            .collect();
        Ok(Self {
            lag: LagService::new(Engine::new(engine)?, config.history_samples)
                .with_history_budget(config.limits.max_history_bytes),
            pathways: PathwayService::new(crate::pathways::PathwayLimits {
                max_bytes: config.limits.max_pathway_bytes,
                max_services: config.limits.max_services,
            }),
            deliveries: DeliveryService::new(),
            clusters: PollingService::new(clusters),
            probes: ProbeService::default(),
            dlq: DlqService::default(),
            audit: crate::services::AuditService::default(),
            redrives: crate::services::RedriveService::default(),
            signals: crate::services::DerivedSignals::new(config.alerts.max_series),
            timings: crate::timings::Timings::new(BASE_SERVICES.into_iter().chain(features.iter().map(|f| f.name()))),
            features,
            telemetry: IntakeTelemetry::default(),
            decode_memory: crate::memory::DecodeMemory::new(config.limits.decode_memory_bytes),
            ready: AtomicBool::new(false),
            storage_failing: AtomicBool::new(false),
            storage_failed_at_ms: std::sync::atomic::AtomicI64::new(0),
            directory: std::sync::OnceLock::new(),
            presence: std::sync::OnceLock::new(),
            snapshots: std::sync::OnceLock::new(),
            writer: std::sync::Mutex::new(None),
            leases: std::sync::OnceLock::new(),
            group_labels: std::sync::Mutex::default(),
            peer_key: crate::secrets::new_secret(),
            config,
        })
    }

    /// Hands the features this node's writer (`serve`, once it runs).
    pub fn set_writer(&self, writer: crate::Writer) {
        *self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(writer);
    }

    /// This node's writer, until [`Shared::release_writer`].
    pub fn writer(&self) -> Option<crate::Writer> {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Drops this node's handle on its writer (at shutdown).
    pub fn release_writer(&self) {
        self.writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
    }

    /// Draws decodes from `pool` (the process's), not a pool of this node's own.
    pub fn share_decode_memory(&mut self, pool: Arc<crate::memory::DecodeMemory>) {
        self.decode_memory = pool;
    }

    /// A meter for one request's read and decode.
    pub fn meter(&self) -> streamsight_wire::budget::Meter {
        self.decode_memory.meter(self.config.limits.request_memory_bytes)
    }

    /// The installed feature of type `T`, if any.
    pub fn feature<T: Feature>(&self) -> Option<&T> {
        self.features.iter().find_map(|f| f.as_any().downcast_ref::<T>())
    }

    /// Every installed feature, in the order records reach them.
    pub fn features(&self) -> &[Arc<dyn Feature>] {
        &self.features
    }

    /// Whether this node holds only some shards of a shared log.
    pub fn sharded(&self) -> bool {
        self.directory.get().is_some()
    }

    /// Everything refused by a limit, wherever it was counted.
    pub fn limited(&self) -> streamsight_core::LimitCounts {
        let mut counts = self.telemetry.limited();
        counts.add_all(&self.lag.engine().stats().limited);
        counts.add_all(&self.pathways.limited());
        let ledger = self.deliveries.view().ledger.limited();
        counts.add_n(streamsight_core::Limit::DeliverySeries, ledger);
        counts
    }

    /// Applies records already on disk (or being replayed from it) to every
    /// service whose concern they are.
    pub fn apply(&self, records: &[Record]) {
        self.apply_borrowed(records);
        for (i, f) in self.features.iter().enumerate() {
            self.timed(BASE_SERVICES.len() + i, || f.apply(records));
        }
    }

    /// The same, keeping the records' spans and lines without copying them.
    pub fn apply_owned(&self, records: Vec<Record>) {
        self.apply_borrowed(&records);
        self.take_features(records);
    }

    /// Every feature applies `records`; the last one keeps them.
    fn take_features(&self, records: Vec<Record>) {
        if let Some((last, others)) = self.features.split_last() {
            for (i, f) in others.iter().enumerate() {
                self.timed(BASE_SERVICES.len() + i, || f.apply(&records));
            }
            self.timed(BASE_SERVICES.len() + others.len(), || last.take(records));
        }
    }

    /// Runs the `i`th service's apply (see [`BASE_SERVICES`]), timed.
    fn timed<T>(&self, i: usize, apply: impl FnOnce() -> T) -> T {
        match self.timings.service(i) {
            Some(h) => h.time(apply),
            None => apply(),
        }
    }

    /// What this node built from `shards`: a snapshot of them.
    pub fn export_shards(&self, shards: &Shards) -> ShardState {
        let engine = self.lag.engine().export(&|topic| shards.keeps_topic(topic));
        let mut records = self.pathways.export(shards);
        for f in &self.features {
            records.extend(f.export(shards));
        }
        ShardState {
            engine,
            deliveries: self.deliveries.export(shards),
            records,
        }
    }

    /// Takes in a snapshot of shards this node holds from now on.
    pub fn import_shards(&self, state: ShardState) {
        self.lag.import(state.engine);
        self.deliveries.import(state.deliveries);
        self.pathways.apply(&state.records);
        self.take_features(state.records);
    }

    /// Forgets what was built from shards other than `shards` (another node
    /// holds them now); what was built from these stays as it is. Alerts and
    /// audit come from the global log and stay.
    pub fn retain_shards(&self, shards: &Shards) {
        self.lag.retain(shards);
        self.pathways.retain(shards);
        self.deliveries.retain(shards);
        for f in &self.features {
            f.retain(shards);
        }
    }

    fn apply_borrowed(&self, records: &[Record]) {
        let events = self.timed(0, || self.lag.apply(records));
        self.timed(1, || self.deliveries.apply(records, &events, &self.lag));
        self.timed(2, || self.pathways.apply(records));
        self.timed(3, || self.audit.apply(records));
        self.timed(4, || self.redrives.apply(records));
    }
}

/// The base services, in the order they apply a batch (their timings' names).
const BASE_SERVICES: [&str; 5] = ["lag", "deliveries", "pathways", "audit", "redrives"];

/// A feature's own state, built from the log like the base services': the
/// writer applies every stored record to it, on replay too, and a sharded
/// node exports, imports and forgets its part with the shards it holds. The
/// features install themselves when the collector builds a node; the base
/// knows none of them by name.
pub trait Feature: std::any::Any + Send + Sync + std::fmt::Debug {
    /// Its name where its work is counted (`/metrics`' apply timings).
    fn name(&self) -> &'static str;

    /// Applies records already on disk (or being replayed from it).
    fn apply(&self, records: &[Record]);

    /// The same, keeping the records (given to the last feature installed).
    fn take(&self, records: Vec<Record>) {
        self.apply(&records);
    }

    /// What this feature built from `shards`, as records a node taking them
    /// over applies.
    fn export(&self, _shards: &Shards) -> Vec<Record> {
        Vec::new()
    }

    /// Forgets what was built from shards other than `shards`.
    fn retain(&self, _shards: &Shards) {}

    /// Its part of `/metrics`, in Prometheus' text format.
    fn metrics(&self, _out: &mut String, _now: Millis) {}

    /// Itself, to be found by type ([`Shared::feature`]).
    fn as_any(&self) -> &dyn std::any::Any;
}
