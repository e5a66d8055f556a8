//! The collector's state, one service per concern. Each owns its lock: handlers
//! get read-only views or answers from its methods, and only the writer (which
//! applies what the store accepted) and the service's own task change it. Where one
//! concern reads another, it is said here, and nothing takes them the other way
//! round: deliveries read the lag engine under their own lock; Burrow's handlers
//! look up owners in the polling view while reading the engine.

use crate::deliveries::Deliveries;
use crate::pathways::{Graph, Pathways};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Deref;
use std::sync::{Arc, Mutex, MutexGuard};
use streamsight_core::{Engine, EngineEvent, GroupId, Millis, PartitionId, Record, Status};

/// Engine events kept for the API.
const EVENTS_KEPT: usize = 1_000;

/// Locks a mutex; a panic elsewhere while holding it does not take the collector down.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A look at a service's state: it can be read, never changed, and is let go
/// when dropped.
#[derive(Debug)]
pub struct View<'a, T>(MutexGuard<'a, T>);

impl<T> Deref for View<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

/// The engine, read-only, held by the caller (intake waits meanwhile).
#[derive(Debug)]
pub struct EngineView<'a>(parking_lot::MutexGuard<'a, Engine>);

impl Deref for EngineView<'_> {
    type Target = Engine;

    fn deref(&self) -> &Engine {
        &self.0
    }
}

/// One group's health at one housekeeping tick.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct GroupSample {
    pub at_ms: i64,
    pub status: Status,
    pub total_lag: i64,
    pub complete: bool,
    pub max_lag_seconds: Option<f64>,
    pub lag_seconds_lower_bound: bool,
    /// Some partition's producers were failing: lag may read low.
    pub producer_failing: bool,
}

/// One group's health now, with its worst partition and why, in words.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct GroupSummary {
    /// The engine's id, where this node's engine holds the group whole.
    #[serde(skip)]
    pub id: Option<GroupId>,
    pub cluster: String,
    pub group: String,
    pub status: Status,
    pub reason: String,
    pub partitions: usize,
    /// Sum of the known lags; `complete` says whether every partition's was known.
    pub total_lag: i64,
    pub complete: bool,
    pub max_lag_seconds: Option<f64>,
    pub lag_seconds_lower_bound: bool,
    pub producer_failing: bool,
    /// The partition the status and reason are about.
    pub worst_topic: Option<String>,
    pub worst_partition: Option<i32>,
}

/// Every group's summary at one time, shared by every reader until it is too
/// old or what the engine holds changes (see [`LagService::invalidate`]).
#[derive(Debug, Default)]
pub struct Summaries {
    pub at: Millis,
    pub groups: Vec<GroupSummary>,
    generation: u64,
}

fn summarize(engine: &Engine, gid: GroupId, now: Millis) -> GroupSummary {
    let mut fold = streamsight_core::GroupFold::default();
    for &gp in engine.group_members(gid) {
        fold.add(gp, engine.evaluate(gp, now));
    }
    summary_of(engine, gid, fold.finish(), now)
}

/// The summary of the group's partitions whose topic `keep` keeps; None when
/// it keeps none.
fn summarize_where(engine: &Engine, gid: GroupId, now: Millis, keep: &dyn Fn(&str) -> bool) -> Option<GroupSummary> {
    let mut fold = streamsight_core::GroupFold::default();
    for &gp in engine.group_members(gid) {
        if keep(engine.names(gp).topic) {
            fold.add(gp, engine.evaluate(gp, now));
        }
    }
    (fold.partitions > 0).then(|| GroupSummary {
        id: None,
        ..summary_of(engine, gid, fold.finish(), now)
    })
}

fn summary_of(
    engine: &Engine,
    gid: GroupId,
    g: streamsight_core::GroupFold<streamsight_core::GroupPartitionId>,
    now: Millis,
) -> GroupSummary {
    let (cluster, group) = engine.group_name(gid);
    let worst = g
        .worst
        .as_ref()
        .map(|(gp, r)| (engine.names(*gp), engine.reason(*gp, r, now)));
    GroupSummary {
        id: Some(gid),
        cluster: cluster.to_owned(),
        group: group.to_owned(),
        status: g.status,
        reason: worst.as_ref().map_or_else(
            || "no partition of this group is known".to_owned(),
            |(_, reason)| reason.clone(),
        ),
        partitions: g.partitions,
        total_lag: g.total_lag,
        complete: g.complete,
        max_lag_seconds: g.max_lag_seconds,
        lag_seconds_lower_bound: g.lag_seconds_lower_bound,
        producer_failing: g.producer_failing,
        worst_topic: worst.as_ref().map(|(n, _)| n.topic.to_owned()),
        worst_partition: worst.map(|(n, _)| n.partition),
    }
}

impl GroupSummary {
    /// One group's summary from the summaries of its parts (each node's of
    /// its shards): sums, the worst, and the worst part's reason.
    pub fn merge(parts: Vec<GroupSummary>) -> Option<GroupSummary> {
        let key = |g: &GroupSummary| (g.status, g.max_lag_seconds.unwrap_or(f64::INFINITY));
        let mut parts = parts.into_iter();
        let mut merged = parts.next()?;
        merged.id = None;
        for p in parts {
            let worse = key(&p) > key(&merged);
            merged.partitions += p.partitions;
            merged.total_lag = merged.total_lag.saturating_add(p.total_lag);
            merged.complete &= p.complete;
            merged.producer_failing |= p.producer_failing;
            if p.max_lag_seconds > merged.max_lag_seconds {
                merged.max_lag_seconds = p.max_lag_seconds;
                merged.lag_seconds_lower_bound = p.lag_seconds_lower_bound;
            }
            if worse {
                merged.status = p.status;
                merged.reason = p.reason;
                merged.worst_topic = p.worst_topic;
                merged.worst_partition = p.worst_partition;
            }
        }
        Some(merged)
    }
}

/// Records applied per hold of the engine's lock.
const APPLY_CHUNK: usize = 1_024;

/// Groups per hold of the engine in a walk over all of them (~6,400
/// group-partitions at 100 partitions a group: a few milliseconds).
const GROUP_PIECE: u32 = 64;
/// Partitions per hold in a walk over all of them.
const PARTITION_PIECE: u32 = 4_096;

/// Lag and health: the engine, the events it raised, each group's recent samples.
#[derive(Debug)]
pub struct LagService {
    /// Fair (eventually, and at once in a walk's pauses): intake is never
    /// starved by a reader that walks the estate in pieces.
    engine: parking_lot::Mutex<Engine>,
    events: Mutex<VecDeque<EngineEvent>>,
    history: Mutex<HashMap<GroupId, VecDeque<GroupSample>>>,
    samples_kept: usize,
    summaries: Mutex<Arc<Summaries>>,
    /// Held while summarizing, so that readers arriving together share one pass.
    summarizing: Mutex<()>,
    /// Bumped when the engine holds other shards: summaries made before are
    /// not reused, however young.
    generation: std::sync::atomic::AtomicU64,
}

impl LagService {
    pub(crate) fn new(engine: Engine, samples_kept: usize) -> Self {
        Self {
            engine: parking_lot::Mutex::new(engine),
            events: Mutex::new(VecDeque::new()),
            history: Mutex::new(HashMap::new()),
            samples_kept: samples_kept.max(1),
            summaries: Mutex::new(Arc::default()),
            summarizing: Mutex::new(()),
            generation: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Summaries made until now are not reused: a shard was caught up with
    /// or forgotten, and a summary of what was held before would read as
    /// complete.
    pub(crate) fn invalidate(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    pub fn engine(&self) -> EngineView<'_> {
        EngineView(self.engine.lock())
    }

    /// The recent engine events, oldest first.
    pub fn events(&self) -> Vec<EngineEvent> {
        lock(&self.events).iter().cloned().collect()
    }

    /// A group's recent samples, oldest first.
    pub fn group_history(&self, group: GroupId) -> Vec<GroupSample> {
        lock(&self.history)
            .get(&group)
            .map(|ring| ring.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Applies the engine's part of `records`; returns the events they raised,
    /// which are also kept for the API.
    pub(crate) fn apply(&self, records: &[Record]) -> Vec<EngineEvent> {
        // A chunk at a time: readers (API handlers, the poller) wait for one
        // chunk, never for a whole large batch.
        let mut new_events = Vec::new();
        for chunk in records.chunks(APPLY_CHUNK) {
            let mut engine = self.engine.lock();
            for r in chunk {
                r.apply(&mut engine);
            }
            new_events.extend(engine.drain_events());
            parking_lot::MutexGuard::unlock_fair(engine);
        }
        if !new_events.is_empty() {
            let mut events = lock(&self.events);
            for e in &new_events {
                tracing::info!(event = ?e, "engine event");
                if events.len() == EVENTS_KEPT {
                    events.pop_front();
                }
                events.push_back(e.clone());
            }
        }
        new_events
    }

    /// Every group's summary, computed at most once per `max_age_ms` however
    /// many readers ask: a dashboard's refresh costs one pass over the estate
    /// per interval, not one per viewer.
    pub fn summaries(&self, now: Millis, max_age_ms: i64) -> Arc<Summaries> {
        let generation = self.generation.load(std::sync::atomic::Ordering::Acquire);
        let fresh = |s: &Arc<Summaries>| {
            s.at.0 > 0 && now.since(s.at) < max_age_ms && s.at <= now && s.generation == generation
        };
        let cached = lock(&self.summaries).clone();
        if fresh(&cached) {
            return cached;
        }
        let _one = lock(&self.summarizing);
        let cached = lock(&self.summaries).clone();
        if fresh(&cached) {
            return cached;
        }
        self.summarize(now)
    }

    /// `f` of every group, taking the engine for [`GROUP_PIECE`] groups at a
    /// time: intake waits for one piece (milliseconds), never for a pass over
    /// the estate. Groups made during the walk may be seen; none is seen twice.
    pub(crate) fn each_group<T>(&self, mut f: impl FnMut(&Engine, GroupId) -> T) -> Vec<T> {
        let mut out = Vec::new();
        let mut from = 0;
        loop {
            let engine = self.engine.lock();
            if from >= engine.group_slots() {
                return out;
            }
            out.extend(engine.groups_between(from, GROUP_PIECE).map(|g| f(&engine, g)));
            from += GROUP_PIECE;
            // Handed to a waiting thread, if any: else the next piece would
            // take it again before a woken thread could.
            parking_lot::MutexGuard::unlock_fair(engine);
        }
    }

    /// The same over partitions, [`PARTITION_PIECE`] at a time.
    pub(crate) fn each_partition(&self, mut f: impl FnMut(&Engine, PartitionId)) {
        let mut from = 0;
        loop {
            let engine = self.engine.lock();
            if from >= engine.partition_slots() {
                return;
            }
            for pid in engine.partitions_between(from, PARTITION_PIECE) {
                f(&engine, pid);
            }
            from += PARTITION_PIECE;
            parking_lot::MutexGuard::unlock_fair(engine);
        }
    }

    /// Every group's summary of its partitions in `keep`'s topics, computed
    /// now (a node answering for some of the shards it holds).
    pub fn summaries_where(&self, now: Millis, keep: &dyn Fn(&str) -> bool) -> Vec<GroupSummary> {
        self.each_group(|engine, gid| summarize_where(engine, gid, now, keep))
            .into_iter()
            .flatten()
            .collect()
    }

    fn summarize(&self, now: Millis) -> Arc<Summaries> {
        // Read first: a change during the walk leaves this summary stale.
        let generation = self.generation.load(std::sync::atomic::Ordering::Acquire);
        let groups: Vec<GroupSummary> = self.each_group(|engine, gid| summarize(engine, gid, now));
        let s = Arc::new(Summaries {
            at: now,
            groups,
            generation,
        });
        *lock(&self.summaries) = s.clone();
        s
    }

    /// Forgets the topics of shards no longer held; the groups' history
    /// follows them to their new ids.
    pub(crate) fn retain(&self, shards: &streamsight_core::shard::Shards) {
        let mut engine = self.engine.lock();
        let mut history = lock(&self.history);
        let named: Vec<((String, String), VecDeque<GroupSample>)> = history
            .drain()
            .map(|(gid, samples)| {
                let (cluster, group) = engine.group_name(gid);
                ((cluster.to_owned(), group.to_owned()), samples)
            })
            .collect();
        engine.retain(&|topic| shards.keeps_topic(topic));
        for ((cluster, group), samples) in named {
            if let Some(gid) = engine.find_group(&cluster, &group) {
                history.insert(gid, samples);
            }
        }
        self.invalidate();
    }

    /// Takes in a shard's engine state (this node holds it now).
    pub(crate) fn import(&self, shard: streamsight_core::engine::EngineShard) {
        self.engine.lock().import(shard);
        self.invalidate();
    }

    /// Records each group's lag now, for its recent history.
    pub(crate) fn sample_groups(&self, now: Millis) {
        let summaries = {
            let _one = lock(&self.summarizing);
            self.summarize(now)
        };
        let mut history = lock(&self.history);
        for g in &summaries.groups {
            let Some(id) = g.id else { continue };
            let ring = history.entry(id).or_default();
            if ring.len() >= self.samples_kept {
                ring.pop_front();
            }
            ring.push_back(GroupSample {
                at_ms: now.0,
                status: g.status,
                total_lag: g.total_lag,
                complete: g.complete,
                max_lag_seconds: g.max_lag_seconds,
                lag_seconds_lower_bound: g.lag_seconds_lower_bound,
                producer_failing: g.producer_failing,
            });
        }
    }
}

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

    pub(crate) fn apply(&self, records: &[Record]) {
        let mut pathways = lock(&self.pathways);
        for r in records {
            if let Record::Pathway { point, .. } = r {
                pathways.add((**point).clone());
            }
        }
    }

    pub(crate) fn prune(&self, before_ms: i64) {
        lock(&self.pathways).prune(before_ms);
    }

    /// The points held of the shards, as records.
    pub(crate) fn export(&self, shards: &streamsight_core::shard::Shards) -> Vec<Record> {
        lock(&self.pathways).export(&|topic| shards.keeps(topic))
    }

    /// Forgets the points of shards no longer held.
    pub(crate) fn retain(&self, shards: &streamsight_core::shard::Shards) {
        let mut pathways = lock(&self.pathways);
        let kept = pathways.export(&|topic| shards.keeps(topic));
        *pathways = Pathways::new(pathways.limits());
        for r in kept {
            if let Record::Pathway { point, .. } = r {
                pathways.add(*point);
            }
        }
    }

    pub(crate) fn new(limits: crate::pathways::PathwayLimits) -> Self {
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

impl DeliveryService {
    pub(crate) fn new() -> Self {
        Self {
            deliveries: Mutex::new(Deliveries::new()),
        }
    }

    pub fn view(&self) -> View<'_, Deliveries> {
        View(lock(&self.deliveries))
    }

    /// Applies the delivery facts of `records` and the engine's new data-loss
    /// events. A consumer's start is compared with the commit the engine holds.
    pub(crate) fn apply(&self, records: &[Record], events: &[EngineEvent], lag: &LagService) {
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

    pub(crate) fn reset(&self) {
        *lock(&self.deliveries) = Deliveries::new();
    }

    /// The ledger, failures and problem windows of the shards' topics.
    pub(crate) fn export(&self, shards: &streamsight_core::shard::Shards) -> streamsight_core::shard::DeliveryShard {
        let d = lock(&self.deliveries);
        let keep = |topic: &str| shards.keeps_topic(topic);
        streamsight_core::shard::DeliveryShard {
            ledger: d.ledger.export(&keep),
            failures: d.failures.export(&keep),
            events: d.events.iter().filter(|e| keep(&e.topic)).cloned().collect(),
        }
    }

    /// Takes in what [`DeliveryService::export`] handed over.
    pub(crate) fn import(&self, shard: streamsight_core::shard::DeliveryShard) {
        let mut d = lock(&self.deliveries);
        d.ledger.import(shard.ledger);
        d.failures.import(shard.failures);
        d.events.extend(shard.events);
        d.trim_events();
    }

    /// Forgets the shards no longer held.
    pub(crate) fn retain(&self, shards: &streamsight_core::shard::Shards) {
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
    pub requests: u64,
    pub last_poll_ms: Option<f64>,
    #[serde(skip)]
    pub last: Option<Arc<streamsight_poller::Snapshot>>,
}

/// What the pollers last saw of each configured cluster.
#[derive(Debug, Default)]
pub struct PollingService {
    clusters: Mutex<BTreeMap<String, ClusterView>>,
}

impl PollingService {
    pub(crate) fn new(clusters: BTreeMap<String, ClusterView>) -> Self {
        Self {
            clusters: Mutex::new(clusters),
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

    pub(crate) fn polled(&self, cluster: &str, snap: streamsight_poller::Snapshot, elapsed_ms: f64) {
        let mut clusters = lock(&self.clusters);
        let view = clusters.entry(cluster.to_owned()).or_default();
        view.polls += 1;
        view.failed_polls += u64::from(!snap.metadata_ok);
        view.requests += snap.requests;
        view.last_poll_ms = Some(elapsed_ms);
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

    pub(crate) fn add(&self, item: T) {
        lock(&self.items).push(item);
    }

    /// Stops them all.
    pub(crate) fn stop(&self) {
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

impl AuditService {
    pub(crate) fn apply(&self, records: &[Record]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn part(status: Status, partitions: usize, lag: i64, seconds: Option<f64>, topic: &str) -> GroupSummary {
        GroupSummary {
            id: None,
            cluster: "c".into(),
            group: "g".into(),
            status,
            reason: format!("{topic} is why"),
            partitions,
            total_lag: lag,
            complete: true,
            max_lag_seconds: seconds,
            lag_seconds_lower_bound: false,
            producer_failing: false,
            worst_topic: Some(topic.into()),
            worst_partition: Some(0),
        }
    }

    #[test]
    fn a_group_held_in_parts_sums_and_takes_the_worst_part_reason() {
        let merged = GroupSummary::merge(vec![
            part(Status::Ok, 2, 10, Some(5.0), "a"),
            part(Status::Warn, 3, 100, Some(50.0), "b"),
            GroupSummary {
                complete: false,
                ..part(Status::Ok, 1, 0, None, "c")
            },
        ])
        .unwrap();
        assert_eq!((merged.partitions, merged.total_lag), (6, 110));
        assert_eq!((merged.status, merged.reason.as_str()), (Status::Warn, "b is why"));
        assert_eq!(merged.max_lag_seconds, Some(50.0));
        assert!(!merged.complete, "a part with unknown lag leaves the sum incomplete");
        assert!(GroupSummary::merge(Vec::new()).is_none());
    }
}
