//! Lag and health: the engine behind its lock, the events it raised, each
//! group's recent samples and every group's summary.

use crate::sync::lock;
use crate::timings::{EngineHolder, EngineWaits};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use std::ops::Deref;
use std::sync::{Arc, Mutex};
use streamsight_core::{Engine, EngineEvent, GroupId, Millis, PartitionId, Record, Status};

/// Engine events kept for the API.
const EVENTS_KEPT: usize = 1_000;

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
    /// Sum of the lags when every partition's was known; unknown (null)
    /// otherwise, never the sum of what was known read as the whole.
    pub total_lag: Option<i64>,
    /// Sum of the known lags: a lower bound when `complete` is false.
    pub known_lag: i64,
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
    /// Sum of the lags when every partition's was known (`complete`);
    /// unknown (null) otherwise: a stale group's lag never reads 0.
    pub total_lag: Option<i64>,
    /// Sum of the known lags: a lower bound when `complete` is false.
    pub known_lag: i64,
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
        total_lag: g.complete.then_some(g.total_lag),
        known_lag: g.total_lag,
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
            merged.known_lag = merged.known_lag.saturating_add(p.known_lag);
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
        merged.total_lag = merged.complete.then_some(merged.known_lag);
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

/// Samples a group keeps however many groups there are (two minutes at the
/// default 10 s), unless `history_samples` says fewer.
pub(crate) const MIN_SAMPLES_KEPT: usize = 12;

/// One group's recent samples, with its names: an id the engine frees when a
/// group is deleted can be given to another group, which must not inherit
/// them.
#[derive(Debug)]
struct GroupHistory {
    cluster: String,
    group: String,
    samples: VecDeque<GroupSample>,
}

/// Lag and health: the engine, the events it raised, each group's recent samples.
#[derive(Debug)]
pub struct LagService {
    /// Fair (eventually, and at once in a walk's pauses): intake is never
    /// starved by a reader that walks the estate in pieces.
    engine: parking_lot::Mutex<Engine>,
    events: Mutex<VecDeque<EngineEvent>>,
    history: Mutex<HashMap<GroupId, GroupHistory>>,
    samples_kept: usize,
    /// Bytes every group's samples may take together.
    history_budget: usize,
    summaries: Mutex<Arc<Summaries>>,
    /// Held while summarizing, so that readers arriving together share one pass.
    summarizing: Mutex<()>,
    /// Bumped when the engine holds other shards: summaries made before are
    /// not reused, however young.
    generation: std::sync::atomic::AtomicU64,
    /// How long writers and readers waited for the engine.
    waits: EngineWaits,
}

impl LagService {
    pub fn new(engine: Engine, samples_kept: usize) -> Self {
        Self {
            engine: parking_lot::Mutex::new(engine),
            events: Mutex::new(VecDeque::new()),
            history: Mutex::new(HashMap::new()),
            samples_kept: samples_kept.max(1),
            history_budget: usize::MAX,
            summaries: Mutex::new(Arc::default()),
            summarizing: Mutex::new(()),
            generation: std::sync::atomic::AtomicU64::new(0),
            waits: EngineWaits::default(),
        }
    }

    /// The engine, once `by`'s wait for it is counted.
    fn lock_as(&self, by: EngineHolder) -> parking_lot::MutexGuard<'_, Engine> {
        let began = std::time::Instant::now();
        let engine = self.engine.lock();
        self.waits.waited(by, began.elapsed());
        engine
    }

    /// How long writers and readers waited for the engine.
    pub fn engine_waits(&self) -> &EngineWaits {
        &self.waits
    }

    /// The groups' histories hold at most `bytes` of samples together (see
    /// [`Self::samples_per_group`]).
    pub fn with_history_budget(mut self, bytes: usize) -> Self {
        self.history_budget = bytes;
        self
    }

    /// Samples each of `groups` keeps: `history_samples`, fewer when that
    /// many over every group would pass the budget, and at least
    /// [`MIN_SAMPLES_KEPT`] (when `history_samples` allows as many).
    pub fn samples_per_group(&self, groups: usize) -> usize {
        let fit = self.history_budget / (groups.max(1) * std::mem::size_of::<GroupSample>());
        fit.max(MIN_SAMPLES_KEPT).min(self.samples_kept)
    }

    /// Summaries made until now are not reused: a shard was caught up with
    /// or forgotten, and a summary of what was held before would read as
    /// complete.
    pub fn invalidate(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    pub fn engine(&self) -> EngineView<'_> {
        EngineView(self.lock_as(EngineHolder::Read))
    }

    /// The recent engine events, oldest first.
    pub fn events(&self) -> Vec<EngineEvent> {
        lock(&self.events).iter().cloned().collect()
    }

    /// A group's recent samples, oldest first.
    pub fn group_history(&self, group: GroupId) -> Vec<GroupSample> {
        lock(&self.history)
            .get(&group)
            .map(|h| h.samples.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Bytes the groups' histories hold: [`Self::samples_per_group`] a
    /// group, each ring made whole when the group is first sampled.
    pub fn history_bytes(&self) -> usize {
        let history = lock(&self.history);
        let per_entry = std::mem::size_of::<(GroupId, GroupHistory)>() + 1;
        history
            .values()
            .map(|h| {
                per_entry
                    + h.cluster.capacity()
                    + h.group.capacity()
                    + h.samples.capacity() * std::mem::size_of::<GroupSample>()
            })
            .sum()
    }

    /// Applies the engine's part of `records`; returns the events they raised,
    /// which are also kept for the API.
    pub fn apply(&self, records: &[Record]) -> Vec<EngineEvent> {
        // A chunk at a time: readers (API handlers, the poller) wait for one
        // chunk, never for a whole large batch.
        let mut new_events = Vec::new();
        for chunk in records.chunks(APPLY_CHUNK) {
            let mut engine = self.lock_as(EngineHolder::Apply);
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
    pub fn each_group<T>(&self, mut f: impl FnMut(&Engine, GroupId) -> T) -> Vec<T> {
        let mut out = Vec::new();
        let mut from = 0;
        loop {
            // Room for the piece made before the engine is taken: growing a
            // vector of 100,000 summaries (tens of MB moved, fresh pages
            // touched) under the lock kept intake waiting 24-32 ms.
            out.reserve(GROUP_PIECE as usize);
            let engine = self.lock_as(EngineHolder::Read);
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
    pub fn each_partition(&self, mut f: impl FnMut(&Engine, PartitionId)) {
        let mut from = 0;
        loop {
            let engine = self.lock_as(EngineHolder::Read);
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
        let mut groups: Vec<GroupSummary> = self.each_group(|engine, gid| summarize(engine, gid, now));
        // By cluster and group, once per summary: the engine walks groups in
        // the order they came, and every reader that wants them sorted (each
        // alert signal, compared label by label) sorted them again per read:
        // at 100,000 groups named in no order that was most of an alert round.
        groups.sort_unstable_by(|a, b| (&a.cluster, &a.group).cmp(&(&b.cluster, &b.group)));
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
    pub fn retain(&self, shards: &streamsight_core::shard::Shards) {
        let mut engine = self.engine.lock();
        let mut history = lock(&self.history);
        let named: Vec<GroupHistory> = history.drain().map(|(_, h)| h).collect();
        engine.retain(&|topic| shards.keeps_topic(topic));
        for h in named {
            if let Some(gid) = engine.find_group(&h.cluster, &h.group) {
                history.insert(gid, h);
            }
        }
        self.invalidate();
    }

    /// Takes in a shard's engine state (this node holds it now).
    pub fn import(&self, shard: streamsight_core::engine::EngineShard) {
        self.engine.lock().import(shard);
        self.invalidate();
    }

    /// Records each group's lag now, for its recent history.
    pub fn sample_groups(&self, now: Millis) {
        let summaries = {
            let _one = lock(&self.summarizing);
            self.summarize(now)
        };
        let mut history = lock(&self.history);
        // Groups the engine no longer holds (expired, deleted) are forgotten
        // with their histories: kept, they grew with every group ever seen.
        let held: std::collections::HashSet<GroupId> = summaries.groups.iter().filter_map(|g| g.id).collect();
        history.retain(|id, _| held.contains(id));
        let kept = self.samples_per_group(held.len());
        for g in &summaries.groups {
            let Some(id) = g.id else { continue };
            let fresh = || GroupHistory {
                cluster: g.cluster.clone(),
                group: g.group.clone(),
                samples: VecDeque::new(),
            };
            let h = history.entry(id).or_insert_with(fresh);
            if h.cluster != g.cluster || h.group != g.group {
                // The id of a deleted group, given to this one.
                *h = fresh();
            }
            let ring = &mut h.samples;
            while ring.len() >= kept {
                ring.pop_front();
            }
            if ring.capacity() < kept {
                // Made whole at once: growing by doubling left up to 42 % of
                // it unused (512 places for 360) and moved it at each step.
                ring.reserve_exact(kept - ring.len());
            } else if ring.capacity() > 2 * kept {
                // The estate grew and each group keeps fewer.
                ring.shrink_to(kept);
            }
            ring.push_back(GroupSample {
                at_ms: now.0,
                status: g.status,
                total_lag: g.total_lag,
                known_lag: g.known_lag,
                complete: g.complete,
                max_lag_seconds: g.max_lag_seconds,
                lag_seconds_lower_bound: g.lag_seconds_lower_bound,
                producer_failing: g.producer_failing,
            });
        }
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
            total_lag: Some(lag),
            known_lag: lag,
            complete: true,
            max_lag_seconds: seconds,
            lag_seconds_lower_bound: false,
            producer_failing: false,
            worst_topic: Some(topic.into()),
            worst_partition: Some(0),
        }
    }

    fn commit(service: &LagService, group: &str, at: i64) {
        use streamsight_core::{Observation, Partition};
        let partition = Partition {
            cluster: "c",
            topic: "t",
            partition: 0,
        };
        let records = [
            Record::Observation {
                at: Millis(at),
                observation: Observation::Produced { partition, offset: 10 }.to_owned(),
            },
            Record::Observation {
                at: Millis(at),
                observation: Observation::Committed {
                    group,
                    partition,
                    offset: 5,
                }
                .to_owned(),
            },
        ];
        service.apply(&records);
    }

    #[test]
    fn group_histories_stay_within_their_budget_and_leave_with_their_group() {
        let size = std::mem::size_of::<GroupSample>();
        // Room for 2 groups × 40 samples: 2 groups keep 30 (history_samples),
        // 4 groups keep 20 each.
        let service = LagService::new(Engine::new(streamsight_core::EngineConfig::default()).unwrap(), 30)
            .with_history_budget(80 * size);
        assert_eq!(service.samples_per_group(2), 30);
        assert_eq!(service.samples_per_group(4), 20);
        assert_eq!(
            service.samples_per_group(1_000_000),
            MIN_SAMPLES_KEPT,
            "a floor however many"
        );
        for g in ["a", "b"] {
            commit(&service, g, 1_000);
        }
        let id = |g: &str| service.engine().find_group("c", g).unwrap();
        for i in 0..100 {
            service.sample_groups(Millis(2_000 + i * 10_000));
        }
        assert_eq!(service.group_history(id("a")).len(), 30);
        let two = service.history_bytes();
        assert!(two >= 2 * 30 * size && two < 2 * 30 * size + 1_024, "{two}");
        for g in ["c", "d"] {
            commit(&service, g, 1_000_000);
        }
        service.sample_groups(Millis(1_000_001));
        assert_eq!(
            service.group_history(id("a")).len(),
            20,
            "fewer each as the estate grows"
        );
        assert!(
            service.history_bytes() <= 80 * size + 4 * 1_024,
            "{}",
            service.history_bytes()
        );
        // A group the engine forgets takes its history with it.
        let b = id("b");
        service.apply(&[Record::Observation {
            at: Millis(1_005_000),
            observation: streamsight_core::Observation::GroupDeleted {
                cluster: "c",
                group: "b",
            }
            .to_owned(),
        }]);
        service.sample_groups(Millis(1_010_000));
        assert!(service.group_history(b).is_empty());
        assert!(lock(&service.history).len() == 3);
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
        assert_eq!((merged.partitions, merged.known_lag), (6, 110));
        assert_eq!(merged.total_lag, None, "a sum with a part unknown is not the total");
        assert_eq!((merged.status, merged.reason.as_str()), (Status::Warn, "b is why"));
        assert_eq!(merged.max_lag_seconds, Some(50.0));
        assert!(!merged.complete, "a part with unknown lag leaves the sum incomplete");
        assert!(GroupSummary::merge(Vec::new()).is_none());
    }
}
