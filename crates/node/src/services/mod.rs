//! The collector's state, one service per concern. Each owns its lock: handlers
//! get read-only views or answers from its methods, and only the writer (which
//! applies what the store accepted) and the service's own task change it. Where one
//! concern reads another, it is said here, and nothing takes them the other way
//! round: deliveries read the lag engine under their own lock; Burrow's handlers
//! look up owners in the polling view while reading the engine.

pub mod derived;
mod lag;

pub use derived::{DerivedSignals, GroupSignals};
pub use lag::{EngineView, GroupSample, GroupSummary, LagService, Summaries};

use crate::deliveries::Deliveries;
use crate::pathways::{Graph, Pathways};
use crate::sync::{View, lock};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use streamsight_core::{EngineEvent, Millis, Record};

/// Pathway statistics and the graph they draw.
#[derive(Debug)]
pub struct PathwayService {
    pathways: Mutex<Pathways>,
}

impl PathwayService {
    /// The graph of services and topics over `[from_ms, to_ms)`.
    pub fn graph(&self, from_ms: i64, to_ms: i64) -> Graph {
        lock(&self.pathways).graph(from_ms, to_ms)
    }

    pub fn apply(&self, records: &[Record]) {
        let mut pathways = lock(&self.pathways);
        for r in records {
            if let Record::Pathway { point, .. } = r {
                pathways.add((**point).clone());
            }
        }
    }

    pub fn prune(&self, before_ms: i64) {
        lock(&self.pathways).prune(before_ms);
    }

    /// The points held of the shards, as records.
    pub fn export(&self, shards: &streamsight_core::shard::Shards) -> Vec<Record> {
        lock(&self.pathways).export(&|topic| shards.keeps(topic))
    }

    /// Forgets the points of shards no longer held.
    pub fn retain(&self, shards: &streamsight_core::shard::Shards) {
        let mut pathways = lock(&self.pathways);
        let kept = pathways.export(&|topic| shards.keeps(topic));
        *pathways = Pathways::new(pathways.limits());
        for r in kept {
            if let Record::Pathway { point, .. } = r {
                pathways.add(*point);
            }
        }
    }

    pub fn new(limits: crate::pathways::PathwayLimits) -> Self {
        Self {
            pathways: Mutex::new(Pathways::new(limits)),
        }
    }

    /// Points refused by the limits, by limit.
    pub fn limited(&self) -> streamsight_core::LimitCounts {
        lock(&self.pathways).limited().clone()
    }
}

/// Drop accounting: the ledger and its problem windows.
#[derive(Debug)]
pub struct DeliveryService {
    deliveries: Mutex<Deliveries>,
}

impl Default for DeliveryService {
    fn default() -> Self {
        Self::new()
    }
}

impl DeliveryService {
    pub fn new() -> Self {
        Self {
            deliveries: Mutex::new(Deliveries::new()),
        }
    }

    pub fn view(&self) -> View<'_, Deliveries> {
        View(lock(&self.deliveries))
    }

    /// Applies the delivery facts of `records` and the engine's new data-loss
    /// events. A consumer's start is compared with the commit the engine holds.
    pub fn apply(&self, records: &[Record], events: &[EngineEvent], lag: &LagService) {
        let mut deliveries = lock(&self.deliveries);
        let engine = lag.engine();
        for r in records {
            if let Record::Delivery { fact, at } = r {
                deliveries.apply(fact, *at, &engine);
            }
        }
        for e in events {
            deliveries.engine_event(e);
        }
    }

    pub fn reset(&self) {
        *lock(&self.deliveries) = Deliveries::new();
    }

    /// The ledger, failures and problem windows of the shards' topics.
    pub fn export(&self, shards: &streamsight_core::shard::Shards) -> streamsight_core::shard::DeliveryShard {
        let d = lock(&self.deliveries);
        let keep = |topic: &str| shards.keeps_topic(topic);
        streamsight_core::shard::DeliveryShard {
            ledger: d.ledger.export(&keep),
            failures: d.failures.export(&keep),
            events: d.events.iter().filter(|e| keep(&e.topic)).cloned().collect(),
        }
    }

    /// Takes in what [`DeliveryService::export`] handed over.
    pub fn import(&self, shard: streamsight_core::shard::DeliveryShard) {
        let mut d = lock(&self.deliveries);
        d.ledger.import(shard.ledger);
        d.failures.import(shard.failures);
        d.events.extend(shard.events);
        d.trim_events();
    }

    /// Forgets the shards no longer held.
    pub fn retain(&self, shards: &streamsight_core::shard::Shards) {
        let kept = self.export(shards);
        self.reset();
        self.import(kept);
    }

    /// Reconciles the windows that are due.
    pub fn reconcile(&self, now: Millis, lag: &LagService) {
        let mut deliveries = lock(&self.deliveries);
        deliveries.reconcile(now, &lag.engine());
    }
}

/// A polled cluster: its last snapshot and the poller's own counters.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterView {
    pub bootstrap: Vec<String>,
    pub poll_interval_ms: i64,
    pub polls: u64,
    pub failed_polls: u64,
    /// Refreshes of lagging groups between polls.
    pub refreshes: u64,
    pub requests: u64,
    pub last_poll_ms: Option<f64>,
    /// The id its brokers last gave (kept while they cannot be reached).
    pub cluster_id: Option<String>,
    #[serde(skip)]
    pub last: Option<Arc<streamsight_poller::Snapshot>>,
}

/// What the pollers last saw of each configured cluster.
#[derive(Debug, Default)]
pub struct PollingService {
    clusters: Mutex<BTreeMap<String, ClusterView>>,
    /// Each cluster's groups' rebalances, from its successive polls.
    membership: Mutex<BTreeMap<String, streamsight_poller::Membership>>,
}

impl PollingService {
    pub fn new(clusters: BTreeMap<String, ClusterView>) -> Self {
        Self {
            clusters: Mutex::new(clusters),
            membership: Mutex::default(),
        }
    }

    pub fn view(&self) -> View<'_, BTreeMap<String, ClusterView>> {
        View(lock(&self.clusters))
    }

    /// The last snapshot of `cluster`, if it was polled.
    pub fn snapshot(&self, cluster: &str) -> Option<Arc<streamsight_poller::Snapshot>> {
        lock(&self.clusters).get(cluster).and_then(|v| v.last.clone())
    }

    /// The last snapshot of every polled cluster.
    pub fn snapshots(&self) -> HashMap<String, Arc<streamsight_poller::Snapshot>> {
        lock(&self.clusters)
            .iter()
            .filter_map(|(name, v)| Some((name.clone(), v.last.clone()?)))
            .collect()
    }

    /// Each polled cluster's name by the id its brokers gave (Metadata's
    /// `cluster_id`): a tracer's `kafka_cluster_id` names the cluster so.
    pub fn names_by_id(&self) -> HashMap<String, String> {
        lock(&self.clusters)
            .iter()
            .filter_map(|(name, v)| Some((v.cluster_id.clone()?, name.clone())))
            .collect()
    }

    /// A group's rebalances at `now`, where its cluster is polled.
    pub fn rebalances(&self, cluster: &str, group: &str, now: Millis) -> Option<streamsight_poller::Rebalances> {
        lock(&self.membership).get(cluster)?.group(group).map(|g| g.at(now))
    }

    /// Every polled group's rebalances at `now`: (cluster, group, rebalances).
    pub fn all_rebalances(&self, now: Millis) -> Vec<(String, String, streamsight_poller::Rebalances)> {
        lock(&self.membership)
            .iter()
            .flat_map(|(c, m)| m.groups().map(move |(g, r)| (c.clone(), g.to_owned(), r.at(now))))
            .collect()
    }

    /// A refresh of lagging groups between polls sent `requests`.
    pub fn refreshed(&self, cluster: &str, requests: u64) {
        let mut clusters = lock(&self.clusters);
        let view = clusters.entry(cluster.to_owned()).or_default();
        view.refreshes += 1;
        view.requests += requests;
    }

    pub fn polled(&self, cluster: &str, mut snap: streamsight_poller::Snapshot, elapsed_ms: f64) {
        // Lag rows and scrapes look groups up by name in it.
        snap.sort_groups();
        lock(&self.membership)
            .entry(cluster.to_owned())
            .or_default()
            .observe(&snap);
        let mut clusters = lock(&self.clusters);
        let view = clusters.entry(cluster.to_owned()).or_default();
        view.polls += 1;
        view.failed_polls += u64::from(!snap.metadata_ok);
        view.requests += snap.requests;
        view.last_poll_ms = Some(elapsed_ms);
        if snap.cluster_id.is_some() {
            view.cluster_id.clone_from(&snap.cluster_id);
        }
        view.last = Some(Arc::new(snap));
    }
}

/// Components that run on their own threads or tasks (probes, DLQ monitors):
/// kept here while they run, stopped by being dropped.
#[derive(Debug)]
pub struct Running<T> {
    items: Mutex<Vec<T>>,
}

impl<T> Default for Running<T> {
    fn default() -> Self {
        Self {
            items: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Running<T> {
    pub fn view(&self) -> View<'_, Vec<T>> {
        View(lock(&self.items))
    }

    pub fn add(&self, item: T) {
        lock(&self.items).push(item);
    }

    /// Stops them all.
    pub fn stop(&self) {
        lock(&self.items).clear();
    }
}

/// Running end-to-end probes.
pub type ProbeService = Running<streamsight_probe::Probe>;

/// Running dead-letter queue monitors.
pub type DlqService = Running<streamsight_dlq::DlqMonitor>;

/// Administrative actions, newest last: the last [`AUDIT_KEPT`] in memory (all
/// of them in the store, within retention).
#[derive(Debug, Default)]
pub struct AuditService {
    events: Mutex<std::collections::VecDeque<(Millis, streamsight_core::AuditEvent)>>,
}

pub const AUDIT_KEPT: usize = 1_000;

/// Dead-letter redrives' ledger (see [`streamsight_core::redrive`]): what
/// the redrive (crates/act) consults before it sends and journeys show.
#[derive(Debug, Default)]
pub struct RedriveService {
    ledger: Mutex<streamsight_core::redrive::Ledger>,
}

impl RedriveService {
    pub fn apply(&self, records: &[Record]) {
        let mut ledger = None;
        for r in records {
            if let Record::Redrive { at, event } = r {
                ledger.get_or_insert_with(|| lock(&self.ledger)).apply(*at, event);
            }
        }
    }

    pub fn view(&self) -> View<'_, streamsight_core::redrive::Ledger> {
        View(lock(&self.ledger))
    }
}

impl AuditService {
    pub fn apply(&self, records: &[Record]) {
        let mut events = lock(&self.events);
        for r in records {
            if let Record::Audit { at, event } = r {
                if events.len() == AUDIT_KEPT {
                    events.pop_front();
                }
                events.push_back((*at, event.clone()));
            }
        }
    }

    pub fn events(&self) -> Vec<(Millis, streamsight_core::AuditEvent)> {
        lock(&self.events).iter().cloned().collect()
    }
}
