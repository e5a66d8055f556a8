//! The engine: offset histories per partition, commit windows per group-partition,
//! and the lag and health computed from them at a time the caller chooses.

use crate::chunked::Chunked;
use crate::config::{ConfigError, EngineConfig};
use crate::health::{HealthInput, HealthParams, partition_status};
use crate::history::{HistoryParams, OffsetHistory, ProduceTime, Sighting};
use crate::model::{
    EndOffsetSource, EngineEvent, LagReport, Observation, PartitionRef, RejectCounts, RejectReason, ResetEvidence,
    Status,
};
use crate::time::{Millis, duration_ms};
use crate::window::{Commit, CommitWindow};
use std::collections::HashMap;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Offsets Kafka clients use as "no offset" markers rather than positions.
const OFFSET_SENTINELS: [i64; 4] = [-1, -2, -1000, -1001];

/// Bytes a partition costs besides its history points: its state, and its entries
/// in the partition table and its topic's list, counted twice for the slack a hash
/// table and a growing list keep, and a share of the name table.
pub const PARTITION_FIXED_BYTES: usize = std::mem::size_of::<PartitionState>()
    + 2 * (std::mem::size_of::<((TopicId, i32), PartitionId)>() + 1)
    + 2 * std::mem::size_of::<PartitionId>()
    + 64;

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PartitionId(u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupPartitionId(u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct TopicId(u32);
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct NameId(u32);

/// Strings stored once: clusters, topics and groups are referred to by number.
#[derive(Debug, Default)]
struct Names {
    ids: Map<Box<str>, NameId>,
    names: Vec<Box<str>>,
}

impl Names {
    fn intern(&mut self, name: &str) -> NameId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = NameId(index_u32(self.names.len()));
        self.names.push(name.into());
        self.ids.insert(name.into(), id);
        id
    }

    fn get(&self, name: &str) -> Option<NameId> {
        self.ids.get(name).copied()
    }

    fn name(&self, id: NameId) -> &str {
        &self.names[id.0 as usize]
    }
}

fn index_u32(len: usize) -> u32 {
    u32::try_from(len).expect("more than 4 billion entries")
}

#[derive(Debug)]
struct TopicState {
    cluster: NameId,
    name: NameId,
    partitions: Vec<PartitionId>,
    /// Last failed send that had no partition assigned: counts for every partition.
    unassigned_failure_at: Option<Millis>,
}

/// A lower broker answer waiting for confirmation before it is believed.
#[derive(Copy, Clone, Debug)]
struct PendingReset {
    seen: u32,
}

#[derive(Debug)]
struct PartitionState {
    topic: TopicId,
    partition: i32,
    history: OffsetHistory,
    end_seen_at: Option<Millis>,
    /// The broker's own highest end offset since the last reset.
    broker_end_max: Option<i64>,
    /// The broker's last answer, for the control-marker inference.
    broker_end: Option<i64>,
    /// Highest end offset produce acks prove (acked offset + 1).
    acked_end: Option<i64>,
    log_start: Option<i64>,
    control_marker: Option<i64>,
    pending_end_reset: Option<PendingReset>,
    pending_log_start_reset: Option<PendingReset>,
    last_failure_at: Option<Millis>,
    last_success_at: Option<Millis>,
    /// The leader did not answer since this time; cleared by the broker's next answer.
    unreachable_since: Option<Millis>,
    /// Forgotten (its topic was deleted): kept as a tombstone so ids stay valid.
    deleted: bool,
    /// The groups that committed on this partition. Scanned rather than hashed:
    /// partitions have few groups, and a table entry would cost more than this.
    groups: Vec<(GroupId, GroupPartitionId)>,
}

#[derive(Debug)]
struct GroupState {
    cluster: NameId,
    name: NameId,
    partitions: Vec<GroupPartitionId>,
    /// Forgotten: kept as a tombstone so ids stay valid.
    deleted: bool,
}

#[derive(Debug)]
struct GroupPartitionState {
    group: GroupId,
    partition: PartitionId,
    window: CommitWindow,
}

/// Records a group lost to retention on one partition. Rare, so kept aside.
#[derive(Copy, Clone, Debug, Default)]
struct Loss {
    /// Offsets below this have been counted already.
    counted_upto: i64,
    messages: i64,
}

/// Counters of what the engine was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub accepted: u64,
    /// Valid points that told nothing new (behind the known end, older commits).
    pub redundant: u64,
    pub rejected: RejectCounts,
    pub resets: u64,
}

/// Names of a group-partition, for output; ordered by cluster, group, topic, partition.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GroupPartitionNames<'a> {
    pub cluster: &'a str,
    pub group: &'a str,
    pub topic: &'a str,
    pub partition: i32,
}

/// What is known of one partition, whoever consumes it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct PartitionReport {
    pub end_offset: Option<i64>,
    /// Offset of the last record producers reported acknowledged.
    pub produce_offset: Option<i64>,
    pub log_start_offset: Option<i64>,
    pub producer_failing: bool,
    #[serde(rename = "end_offset_at_ms")]
    pub end_offset_at: Option<Millis>,
    pub history_points: usize,
    /// The history's current error bound on lag seconds (see docs/engine.md).
    pub history_precision: f32,
}

impl GroupPartitionNames<'_> {
    /// The report with these names, owned.
    pub fn row(&self, report: LagReport) -> crate::model::LagRow {
        crate::model::LagRow {
            cluster: self.cluster.to_owned(),
            group: self.group.to_owned(),
            topic: self.topic.to_owned(),
            partition: self.partition,
            report,
        }
    }
}

/// A group's health: the worst of its partitions.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupReport {
    pub group: GroupId,
    pub status: Status,
    pub partitions: usize,
    /// Sum of the known lags; `complete` says whether every partition's was known.
    pub total_lag: i64,
    pub complete: bool,
    pub max_lag: Option<(GroupPartitionId, i64)>,
}

/// What [`Engine::idle`] found: (cluster, group) and (cluster, topic) pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Idle<'a> {
    pub groups: Vec<(&'a str, &'a str)>,
    pub topics: Vec<(&'a str, &'a str)>,
}

/// Memory held by the engine's state, as counted by [`Engine::memory`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemoryUsage {
    pub partitions: usize,
    pub partition_bytes: usize,
    pub group_partitions: usize,
    pub group_partition_bytes: usize,
}

#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    history: HistoryParams,
    health: HealthParams,
    min_commit_distance_ms: i64,
    producer_failing_ms: i64,
    names: Names,
    topic_ids: Map<(NameId, NameId), TopicId>,
    topics: Vec<TopicState>,
    /// The clusters each topic name is known in.
    topic_clusters: Map<NameId, Vec<NameId>>,
    partition_ids: Map<(TopicId, i32), PartitionId>,
    partitions: Chunked<PartitionState, 256>,
    group_ids: Map<(NameId, NameId), GroupId>,
    groups: Vec<GroupState>,
    group_partitions: Chunked<GroupPartitionState, 1024>,
    losses: Map<GroupPartitionId, Loss>,
    stats: EngineStats,
    events: Vec<EngineEvent>,
}

impl Engine {
    pub fn new(config: EngineConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            history: config.history_params(),
            health: HealthParams {
                stale_after_ms: duration_ms(config.stale_after),
                stop_grace_ms: duration_ms(config.stop_grace),
            },
            min_commit_distance_ms: duration_ms(config.min_commit_distance),
            producer_failing_ms: duration_ms(config.producer_failing_for),
            config,
            names: Names::default(),
            topic_ids: Map::default(),
            topics: Vec::new(),
            topic_clusters: Map::default(),
            partition_ids: Map::default(),
            partitions: Chunked::default(),
            group_ids: Map::default(),
            groups: Vec::new(),
            group_partitions: Chunked::default(),
            losses: Map::default(),
            stats: EngineStats::default(),
            events: Vec::new(),
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Events detected since the last call, oldest first.
    pub fn drain_events(&mut self) -> Vec<EngineEvent> {
        std::mem::take(&mut self.events)
    }

    /// Counts a point an adapter refused before it reached the engine (a malformed
    /// tag, say), so that every rejection is counted in one place.
    pub fn reject(&mut self, reason: RejectReason) {
        self.stats.rejected.add(reason);
    }

    /// Applies one observation made at `at`. Rejected points are counted and
    /// returned as the error; they never change lag.
    pub fn observe(&mut self, at: Millis, observation: &Observation<'_>) -> Result<(), RejectReason> {
        let result = self.apply(at, observation);
        match result {
            Ok(()) => self.stats.accepted += 1,
            Err(reason) => self.stats.rejected.add(reason),
        }
        result
    }

    fn apply(&mut self, at: Millis, observation: &Observation<'_>) -> Result<(), RejectReason> {
        match *observation {
            Observation::Produced { partition, offset } => {
                match self
                    .partition_id(partition)
                    .and_then(|pid| check_offset(offset).map(|()| pid))
                {
                    Ok(pid) => self.produced(pid, offset, at),
                    // A tracer's placeholder for a failed send: a failure, never progress.
                    Err(reason) if reason != RejectReason::OffsetOutOfRange => {
                        self.record_failure(partition, at);
                        Err(reason)
                    }
                    Err(reason) => Err(reason),
                }
            }
            Observation::ProduceFailed { partition, .. } => {
                self.record_failure(partition, at);
                Err(RejectReason::FailedSend)
            }
            Observation::Committed {
                group,
                partition,
                offset,
            } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                let gid = self.group_id(partition.cluster, group);
                self.committed(gid, pid, offset, at)
            }
            Observation::EndOffset {
                partition,
                offset,
                source,
            } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                self.end_offset(pid, offset, source, at)
            }
            Observation::LogStart { partition, offset } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                self.log_start(pid, offset, at);
                Ok(())
            }
            Observation::ControlMarker { partition, offset } => {
                check_offset(offset)?;
                let pid = self.partition_id(partition)?;
                self.partitions[pid.0 as usize].control_marker = Some(offset);
                Ok(())
            }
            Observation::TopicRecreated { cluster, topic } => {
                let tid = self.topic_id(cluster, topic);
                for pid in self.topics[tid.0 as usize].partitions.clone() {
                    self.reset(pid, None, at, ResetEvidence::TopicRecreated);
                }
                Ok(())
            }
            Observation::Unreachable { partition } => {
                let pid = self.partition_id(partition)?;
                let p = &mut self.partitions[pid.0 as usize];
                p.unreachable_since = p.unreachable_since.or(Some(at));
                Ok(())
            }
            Observation::GroupDeleted { cluster, group } => {
                if let Some(gid) = self.find_group(cluster, group) {
                    self.delete_group(gid);
                }
                Ok(())
            }
            Observation::TopicDeleted { cluster, topic } => {
                self.delete_topic(cluster, topic);
                Ok(())
            }
        }
    }

    /// Forgets a group. Its slot stays as a tombstone: ids handed out stay valid,
    /// and a group of the same name seen later starts afresh.
    fn delete_group(&mut self, gid: GroupId) {
        let g = &mut self.groups[gid.0 as usize];
        g.deleted = true;
        let key = (g.cluster, g.name);
        for gpid in std::mem::take(&mut g.partitions) {
            let pid = self.group_partitions[gpid.0 as usize].partition;
            self.partitions[pid.0 as usize].groups.retain(|&(_, id)| id != gpid);
            self.group_partitions[gpid.0 as usize].window.clear();
            self.losses.remove(&gpid);
        }
        self.group_ids.remove(&key);
    }

    /// Forgets a topic, its partitions' histories and every group's place on them.
    fn delete_topic(&mut self, cluster: &str, topic: &str) {
        let (Some(c), Some(t)) = (self.names.get(cluster), self.names.get(topic)) else {
            return;
        };
        let Some(tid) = self.topic_ids.remove(&(c, t)) else {
            return;
        };
        if let Some(clusters) = self.topic_clusters.get_mut(&t) {
            clusters.retain(|&x| x != c);
        }
        for pid in std::mem::take(&mut self.topics[tid.0 as usize].partitions) {
            let p = &mut self.partitions[pid.0 as usize];
            self.partition_ids.remove(&(tid, p.partition));
            p.deleted = true;
            p.history = OffsetHistory::new(&self.history);
            for (gid, gpid) in std::mem::take(&mut p.groups) {
                self.groups[gid.0 as usize].partitions.retain(|&id| id != gpid);
                self.group_partitions[gpid.0 as usize].window.clear();
                self.losses.remove(&gpid);
            }
        }
    }

    /// Groups whose newest commit is older than `idle` at `now`, and topics no
    /// source has said anything about for that long: what an adapter expires when
    /// no broker can tell whether they still exist.
    pub fn idle(&self, now: Millis, idle: std::time::Duration) -> Idle<'_> {
        let idle_ms = duration_ms(idle);
        let old = |t: Option<Millis>| t.is_none_or(|t| now.since(t) > idle_ms);
        let groups = self
            .groups()
            .filter(|&gid| {
                let g = &self.groups[gid.0 as usize];
                g.partitions
                    .iter()
                    .all(|gp| old(self.group_partitions[gp.0 as usize].window.last().map(|c| c.at)))
            })
            .map(|gid| self.group_name(gid))
            .collect();
        let topics = self
            .topics
            .iter()
            .filter(|t| !t.partitions.is_empty() && old(t.unassigned_failure_at))
            .filter(|t| {
                t.partitions.iter().all(|pid| {
                    let p = &self.partitions[pid.0 as usize];
                    old(p.end_seen_at.max(p.last_success_at).max(p.last_failure_at)) && p.groups.is_empty()
                })
            })
            .map(|t| (self.names.name(t.cluster), self.names.name(t.name)))
            .collect();
        Idle { groups, topics }
    }

    /// The id of a valid partition, created on first sight. Hot paths look it up
    /// once and call the id-taking methods.
    pub fn partition_id(&mut self, p: PartitionRef<'_>) -> Result<PartitionId, RejectReason> {
        if p.partition < 0 {
            return Err(RejectReason::NegativePartition);
        }
        let tid = self.topic_id(p.cluster, p.topic);
        if let Some(&pid) = self.partition_ids.get(&(tid, p.partition)) {
            return Ok(pid);
        }
        let pid = PartitionId(index_u32(self.partitions.len()));
        self.partitions.push(PartitionState {
            topic: tid,
            partition: p.partition,
            history: OffsetHistory::new(&self.history),
            end_seen_at: None,
            broker_end_max: None,
            broker_end: None,
            acked_end: None,
            log_start: None,
            control_marker: None,
            pending_end_reset: None,
            pending_log_start_reset: None,
            last_failure_at: None,
            last_success_at: None,
            unreachable_since: None,
            deleted: false,
            groups: Vec::new(),
        });
        self.partition_ids.insert((tid, p.partition), pid);
        self.topics[tid.0 as usize].partitions.push(pid);
        Ok(pid)
    }

    fn topic_id(&mut self, cluster: &str, topic: &str) -> TopicId {
        let key = (self.names.intern(cluster), self.names.intern(topic));
        if let Some(&tid) = self.topic_ids.get(&key) {
            return tid;
        }
        let tid = TopicId(index_u32(self.topics.len()));
        self.topics.push(TopicState {
            cluster: key.0,
            name: key.1,
            partitions: Vec::new(),
            unassigned_failure_at: None,
        });
        self.topic_ids.insert(key, tid);
        self.topic_clusters.entry(key.1).or_default().push(key.0);
        tid
    }

    /// The clusters a topic is known in. Tracers name the cluster on produce
    /// points but not always on commits: adapters use this to place the latter.
    pub fn clusters_of<'a>(&'a self, topic: &str) -> impl Iterator<Item = &'a str> + 'a {
        let clusters = self.names.get(topic).and_then(|t| self.topic_clusters.get(&t));
        clusters.into_iter().flatten().map(|&c| self.names.name(c))
    }

    pub fn group_id(&mut self, cluster: &str, group: &str) -> GroupId {
        let key = (self.names.intern(cluster), self.names.intern(group));
        if let Some(&gid) = self.group_ids.get(&key) {
            return gid;
        }
        let gid = GroupId(index_u32(self.groups.len()));
        self.groups.push(GroupState {
            cluster: key.0,
            name: key.1,
            partitions: Vec::new(),
            deleted: false,
        });
        self.group_ids.insert(key, gid);
        gid
    }

    fn record_failure(&mut self, p: PartitionRef<'_>, at: Millis) {
        if p.partition < 0 {
            let tid = self.topic_id(p.cluster, p.topic);
            let t = &mut self.topics[tid.0 as usize];
            t.unassigned_failure_at = t.unassigned_failure_at.max(Some(at));
        } else if let Ok(pid) = self.partition_id(p) {
            let s = &mut self.partitions[pid.0 as usize];
            s.last_failure_at = s.last_failure_at.max(Some(at));
        }
    }

    /// An acknowledged produce of the record at `offset`.
    pub fn produced(&mut self, pid: PartitionId, offset: i64, at: Millis) -> Result<(), RejectReason> {
        check_offset(offset)?;
        let end = offset.checked_add(1).ok_or(RejectReason::OffsetOutOfRange)?;
        let p = &mut self.partitions[pid.0 as usize];
        p.last_success_at = p.last_success_at.max(Some(at));
        p.acked_end = p.acked_end.max(Some(end));
        if p.history.insert(end, at, Sighting::AtLeast, &self.history) {
            p.end_seen_at = p.end_seen_at.max(Some(at));
        } else {
            self.stats.redundant += 1;
        }
        Ok(())
    }

    /// The partition's end offset as the broker or a client reported it.
    pub fn end_offset(
        &mut self,
        pid: PartitionId,
        end: i64,
        source: EndOffsetSource,
        at: Millis,
    ) -> Result<(), RejectReason> {
        check_offset(end)?;
        let confirmations = self.config.reset_confirmations;
        let p = &mut self.partitions[pid.0 as usize];
        if source == EndOffsetSource::Broker {
            p.unreachable_since = None;
            p.broker_end = Some(end);
            match p.broker_end_max {
                Some(max) if end < max => {
                    if confirm(&mut p.pending_end_reset, confirmations) {
                        self.reset(pid, Some(end), at, ResetEvidence::EndOffsetDecreased);
                    }
                    return Ok(());
                }
                _ => {
                    p.pending_end_reset = None;
                    p.broker_end_max = p.broker_end_max.max(Some(end));
                }
            }
        }
        if !p.history.insert(end, at, Sighting::Exact, &self.history) {
            self.stats.redundant += 1;
        }
        // An unchanged answer still confirms the end offset is current.
        if p.history.end() == Some(end) || source == EndOffsetSource::Broker {
            p.end_seen_at = p.end_seen_at.max(Some(at));
        }
        Ok(())
    }

    fn log_start(&mut self, pid: PartitionId, offset: i64, at: Millis) {
        let confirmations = self.config.reset_confirmations;
        let p = &mut self.partitions[pid.0 as usize];
        if let Some(prev) = p.log_start
            && offset < prev
        {
            if confirm(&mut p.pending_log_start_reset, confirmations) {
                // The new log's end is unknown until the broker is asked again.
                self.reset(pid, None, at, ResetEvidence::LogStartDecreased);
                self.partitions[pid.0 as usize].log_start = Some(offset);
            }
            return;
        }
        p.pending_log_start_reset = None;
        p.log_start = Some(offset);
        for (_, gpid) in p.groups.clone() {
            self.account_loss(gpid, at);
        }
    }

    /// A group committed `offset` (the next offset it will read).
    pub fn committed(&mut self, gid: GroupId, pid: PartitionId, offset: i64, at: Millis) -> Result<(), RejectReason> {
        check_offset(offset)?;
        let gpid = self.group_partition_id(gid, pid);
        let p = &self.partitions[pid.0 as usize];
        let lag = match p.history.end_at(at).or(p.history.end()) {
            Some(end) => {
                let from = offset.max(p.log_start.unwrap_or(offset));
                u32::try_from(end.saturating_sub(from).max(0)).unwrap_or(u32::MAX)
            }
            // Unknown counts as lagging: it must not make a window look healthy.
            None => u32::MAX,
        };
        let gp = &mut self.group_partitions[gpid.0 as usize];
        let recorded = gp
            .window
            .record(Commit { offset, at, lag }, self.min_commit_distance_ms);
        if recorded == crate::window::Recorded::OutOfOrder {
            self.stats.redundant += 1;
        } else {
            self.account_loss(gpid, at);
        }
        Ok(())
    }

    pub fn group_partition_id(&mut self, gid: GroupId, pid: PartitionId) -> GroupPartitionId {
        if let Some(id) = self.existing_group_partition(gid, pid) {
            return id;
        }
        let id = GroupPartitionId(index_u32(self.group_partitions.len()));
        self.group_partitions.push(GroupPartitionState {
            group: gid,
            partition: pid,
            window: CommitWindow::default(),
        });
        self.groups[gid.0 as usize].partitions.push(id);
        self.partitions[pid.0 as usize].groups.push((gid, id));
        id
    }

    fn existing_group_partition(&self, gid: GroupId, pid: PartitionId) -> Option<GroupPartitionId> {
        let groups = &self.partitions[pid.0 as usize].groups;
        groups.iter().find(|(g, _)| *g == gid).map(|&(_, id)| id)
    }

    /// Counts records the group can no longer read because retention removed them.
    fn account_loss(&mut self, gpid: GroupPartitionId, at: Millis) {
        let gp = &self.group_partitions[gpid.0 as usize];
        let p = &self.partitions[gp.partition.0 as usize];
        let (Some(log_start), Some(last)) = (p.log_start, gp.window.last()) else {
            return;
        };
        if last.offset >= log_start {
            return;
        }
        let loss = self.losses.entry(gpid).or_default();
        let from = last.offset.max(loss.counted_upto);
        if from >= log_start {
            return;
        }
        let messages = log_start - from;
        loss.counted_upto = log_start;
        loss.messages = loss.messages.saturating_add(messages);
        let (group, partition) = (gp.group, gp.partition);
        let event = EngineEvent::DataLoss {
            at,
            cluster: self.names.name(self.groups[group.0 as usize].cluster).to_owned(),
            group: self.names.name(self.groups[group.0 as usize].name).to_owned(),
            topic: self.topic_name(partition).to_owned(),
            partition: p.partition,
            messages,
            committed_offset: last.offset,
            log_start_offset: log_start,
        };
        self.events.push(event);
    }

    /// Forgets a partition's history on broker evidence, and tells users.
    fn reset(&mut self, pid: PartitionId, new_end: Option<i64>, at: Millis, evidence: ResetEvidence) {
        let p = &mut self.partitions[pid.0 as usize];
        let previous_end = p.history.end();
        match new_end {
            Some(end) => p.history.reset(end, at, &self.history),
            None => p.history = OffsetHistory::new(&self.history),
        }
        p.end_seen_at = new_end.map(|_| at);
        p.broker_end_max = new_end;
        p.broker_end = new_end;
        p.acked_end = None;
        p.log_start = None;
        p.control_marker = None;
        p.pending_end_reset = None;
        p.pending_log_start_reset = None;
        let partition = p.partition;
        // Commits against the old log say nothing about the new one.
        for &(_, gpid) in &p.groups {
            self.group_partitions[gpid.0 as usize].window.clear();
            if let Some(loss) = self.losses.get_mut(&gpid) {
                loss.counted_upto = 0;
            }
        }
        self.stats.resets += 1;
        let (cluster, topic) = self.cluster_and_topic(pid);
        self.events.push(EngineEvent::TopicReset {
            at,
            cluster: cluster.to_owned(),
            topic: topic.to_owned(),
            partition,
            previous_end,
            new_end,
            evidence,
        });
    }

    fn topic_name(&self, pid: PartitionId) -> &str {
        self.cluster_and_topic(pid).1
    }

    fn cluster_and_topic(&self, pid: PartitionId) -> (&str, &str) {
        let t = &self.topics[self.partitions[pid.0 as usize].topic.0 as usize];
        (self.names.name(t.cluster), self.names.name(t.name))
    }

    /// Every group-partition, in the order they were first seen.
    /// Every live group-partition, in the order they were first seen.
    pub fn group_partitions(&self) -> impl Iterator<Item = GroupPartitionId> + '_ {
        (0..self.group_partitions.len())
            .map(|i| GroupPartitionId(i as u32))
            .filter(|id| self.is_live(*id))
    }

    fn is_live(&self, id: GroupPartitionId) -> bool {
        let gp = &self.group_partitions[id.0 as usize];
        !self.groups[gp.group.0 as usize].deleted && !self.partitions[gp.partition.0 as usize].deleted
    }

    /// Every live group, in the order they were first seen.
    pub fn groups(&self) -> impl Iterator<Item = GroupId> + '_ {
        (0..self.groups.len())
            .map(|i| GroupId(i as u32))
            .filter(|id| !self.groups[id.0 as usize].deleted)
    }

    pub fn names(&self, id: GroupPartitionId) -> GroupPartitionNames<'_> {
        let gp = &self.group_partitions[id.0 as usize];
        let g = &self.groups[gp.group.0 as usize];
        let p = &self.partitions[gp.partition.0 as usize];
        GroupPartitionNames {
            cluster: self.names.name(g.cluster),
            group: self.names.name(g.name),
            topic: self.topic_name(gp.partition),
            partition: p.partition,
        }
    }

    pub fn group_name(&self, id: GroupId) -> (&str, &str) {
        let g = &self.groups[id.0 as usize];
        (self.names.name(g.cluster), self.names.name(g.name))
    }

    /// Finds a group-partition by name without creating it.
    pub fn find(&self, cluster: &str, group: &str, topic: &str, partition: i32) -> Option<GroupPartitionId> {
        let (c, g, t) = (self.names.get(cluster)?, self.names.get(group)?, self.names.get(topic)?);
        let gid = *self.group_ids.get(&(c, g))?;
        let tid = *self.topic_ids.get(&(c, t))?;
        let pid = *self.partition_ids.get(&(tid, partition))?;
        self.existing_group_partition(gid, pid)
    }

    /// Every live partition, in the order they were first seen.
    pub fn partitions(&self) -> impl Iterator<Item = PartitionId> + '_ {
        (0..self.partitions.len())
            .map(|i| PartitionId(i as u32))
            .filter(|id| !self.partitions[id.0 as usize].deleted)
    }

    /// Cluster, topic and partition number of a partition.
    pub fn partition_names(&self, pid: PartitionId) -> (&str, &str, i32) {
        let (cluster, topic) = self.cluster_and_topic(pid);
        (cluster, topic, self.partitions[pid.0 as usize].partition)
    }

    pub fn evaluate_partition(&self, pid: PartitionId, now: Millis) -> PartitionReport {
        let p = &self.partitions[pid.0 as usize];
        PartitionReport {
            end_offset: p.history.end(),
            produce_offset: p.acked_end.map(|e| e - 1),
            log_start_offset: p.log_start,
            producer_failing: self.producer_failing(p, now),
            end_offset_at: p.end_seen_at,
            history_points: p.history.len(),
            history_precision: p.history.precision(),
        }
    }

    /// The recent commits the health rules read, oldest first.
    pub fn commits(&self, id: GroupPartitionId) -> impl Iterator<Item = crate::window::Commit> + '_ {
        self.group_partitions[id.0 as usize].window.iter()
    }

    /// The group-partitions of one group.
    pub fn group_members(&self, id: GroupId) -> &[GroupPartitionId] {
        &self.groups[id.0 as usize].partitions
    }

    pub fn find_group(&self, cluster: &str, group: &str) -> Option<GroupId> {
        let (c, g) = (self.names.get(cluster)?, self.names.get(group)?);
        self.group_ids.get(&(c, g)).copied()
    }

    /// The reports at `now` of the group-partitions whose names `keep` accepts,
    /// with their names, sorted by name.
    pub fn reports(
        &self,
        now: Millis,
        keep: impl Fn(&GroupPartitionNames<'_>) -> bool,
    ) -> Vec<(GroupPartitionNames<'_>, LagReport)> {
        let mut rows: Vec<_> = self
            .group_partitions()
            .map(|id| (id, self.names(id)))
            .filter(|(_, names)| keep(names))
            .map(|(id, names)| (names, self.evaluate(id, now)))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }

    /// Lag and health of one group on one partition at `now`.
    pub fn evaluate(&self, id: GroupPartitionId, now: Millis) -> LagReport {
        let gp = &self.group_partitions[id.0 as usize];
        let p = &self.partitions[gp.partition.0 as usize];
        let last = gp.window.last();
        let committed = last.map(|c| c.offset);
        let below_log_start = matches!((committed, p.log_start), (Some(c), Some(s)) if c < s);
        let mut report = LagReport {
            committed_offset: committed,
            end_offset: p.history.end().map(|e| e.max(committed.unwrap_or(e))),
            log_start_offset: p.log_start,
            lag_messages: None,
            lag_seconds: None,
            lag_seconds_lower_bound: false,
            status: Status::Stale,
            producer_failing: self.producer_failing(p, now),
            data_loss_messages: self.losses.get(&id).map_or(0, |l| l.messages),
            at_control_marker: false,
            broker_unreachable: p.unreachable_since.is_some(),
            last_commit_at: last.map(|c| c.at),
            end_offset_at: p.end_seen_at,
        };
        if let (Some(c), Some(end)) = (committed, report.end_offset) {
            // Records below the log start are gone: loss, reported apart, not lag.
            let from = c.max(p.log_start.unwrap_or(c));
            let mut lag = end.saturating_sub(from).max(0);
            if lag == 1 && self.is_control_marker(p, from) {
                lag = 0;
                report.at_control_marker = true;
            }
            report.lag_messages = Some(lag);
            report.lag_seconds = if lag == 0 {
                Some(0.0)
            } else {
                match p.history.produce_time(from) {
                    Some(ProduceTime::Interpolated(t)) => Some(((now.0 as f64 - t) / 1000.0).max(0.0)),
                    Some(ProduceTime::NotAfter(t)) => {
                        report.lag_seconds_lower_bound = true;
                        Some(now.since(t) as f64 / 1000.0)
                    }
                    None => None,
                }
            };
        }
        report.status = partition_status(
            &HealthInput {
                window: &gp.window,
                now,
                lag_messages: report.lag_messages,
                lag_seconds: report.lag_seconds,
                below_log_start,
                end_age_ms: p.end_seen_at.map(|t| now.since(t)),
            },
            &self.health,
        );
        // Nothing confirms the last answer: never call it healthy.
        if report.broker_unreachable && report.status == Status::Ok {
            report.status = Status::Stale;
        }
        report
    }

    fn is_control_marker(&self, p: &PartitionState, offset: i64) -> bool {
        p.control_marker == Some(offset) || (p.acked_end == Some(offset) && p.broker_end == offset.checked_add(1))
    }

    fn producer_failing(&self, p: &PartitionState, now: Millis) -> bool {
        let topic_failure = self.topics[p.topic.0 as usize].unassigned_failure_at;
        let Some(failure) = p.last_failure_at.max(topic_failure) else {
            return false;
        };
        now.since(failure) <= self.producer_failing_ms && p.last_success_at.is_none_or(|s| s < failure)
    }

    /// A group's health: the worst status of its partitions.
    pub fn evaluate_group(&self, id: GroupId, now: Millis) -> GroupReport {
        let g = &self.groups[id.0 as usize];
        let mut report = GroupReport {
            group: id,
            status: Status::Ok,
            partitions: g.partitions.len(),
            total_lag: 0,
            complete: true,
            max_lag: None,
        };
        for &gpid in &g.partitions {
            let r = self.evaluate(gpid, now);
            report.status = report.status.max(r.status);
            match r.lag_messages {
                Some(lag) => {
                    report.total_lag = report.total_lag.saturating_add(lag);
                    if report.max_lag.is_none_or(|(_, max)| lag > max) {
                        report.max_lag = Some((gpid, lag));
                    }
                }
                None => report.complete = false,
            }
        }
        if g.partitions.is_empty() {
            report.status = Status::Stale;
        }
        report
    }

    /// Bytes held per partition and per group-partition, index entries included.
    pub fn memory(&self) -> MemoryUsage {
        let partition_bytes = self
            .partitions
            .iter()
            // The partition's list of groups is paid for per group-partition below.
            .map(|p| PARTITION_FIXED_BYTES + p.history.heap_bytes())
            .sum();
        // Its state, and its entries in the group's and the partition's lists.
        let group_partition_bytes = self.group_partitions.len() * std::mem::size_of::<GroupPartitionState>()
            + self.partitions.iter().map(|p| p.groups.capacity()).sum::<usize>()
                * std::mem::size_of::<(GroupId, GroupPartitionId)>()
            + self.groups.iter().map(|g| g.partitions.capacity()).sum::<usize>()
                * std::mem::size_of::<GroupPartitionId>()
            + self.losses.capacity() * (std::mem::size_of::<(GroupPartitionId, Loss)>() + 1);
        MemoryUsage {
            partitions: self.partitions.len(),
            partition_bytes,
            group_partitions: self.group_partitions.len(),
            group_partition_bytes,
        }
    }
}

fn check_offset(offset: i64) -> Result<(), RejectReason> {
    if offset >= 0 {
        if offset == i64::MAX {
            return Err(RejectReason::OffsetOutOfRange);
        }
        Ok(())
    } else if OFFSET_SENTINELS.contains(&offset) {
        Err(RejectReason::InvalidOffsetSentinel)
    } else {
        Err(RejectReason::NegativeOffset)
    }
}

/// Counts one more lower answer; true once there have been enough in a row.
fn confirm(pending: &mut Option<PendingReset>, needed: u32) -> bool {
    let p = pending.get_or_insert(PendingReset { seen: 0 });
    p.seen += 1;
    if p.seen >= needed {
        *pending = None;
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "orders";

    fn engine() -> Engine {
        Engine::new(EngineConfig::default()).unwrap()
    }

    fn part(partition: i32) -> PartitionRef<'static> {
        PartitionRef {
            cluster: "c",
            topic: T,
            partition,
        }
    }

    fn secs(s: i64) -> Millis {
        Millis(s * 1000)
    }

    fn produce(e: &mut Engine, at: i64, offset: i64) -> Result<(), RejectReason> {
        e.observe(
            secs(at),
            &Observation::Produced {
                partition: part(0),
                offset,
            },
        )
    }

    fn commit(e: &mut Engine, at: i64, offset: i64) -> Result<(), RejectReason> {
        e.observe(
            secs(at),
            &Observation::Committed {
                group: "g",
                partition: part(0),
                offset,
            },
        )
    }

    fn broker_end(e: &mut Engine, at: i64, offset: i64) {
        e.observe(
            secs(at),
            &Observation::EndOffset {
                partition: part(0),
                offset,
                source: EndOffsetSource::Broker,
            },
        )
        .unwrap();
    }

    fn log_start(e: &mut Engine, at: i64, offset: i64) {
        e.observe(
            secs(at),
            &Observation::LogStart {
                partition: part(0),
                offset,
            },
        )
        .unwrap();
    }

    fn report(e: &Engine, at: i64) -> LagReport {
        let id = e.find("c", "g", T, 0).expect("group-partition exists");
        e.evaluate(id, secs(at))
    }

    #[test]
    fn lag_in_messages_and_seconds() {
        let mut e = engine();
        for o in 0..100 {
            produce(&mut e, o, o).unwrap();
        }
        commit(&mut e, 100, 40).unwrap();
        let r = report(&e, 130);
        assert_eq!(r.lag_messages, Some(60));
        assert_eq!(r.lag_seconds, Some(90.0));
        assert!(!r.lag_seconds_lower_bound);
    }

    #[test]
    fn lag_is_unknown_without_an_end_offset() {
        let mut e = engine();
        commit(&mut e, 0, 40).unwrap();
        let r = report(&e, 1);
        assert_eq!((r.lag_messages, r.lag_seconds, r.status), (None, None, Status::Stale));
    }

    #[test]
    fn records_older_than_the_history_give_a_lower_bound() {
        let mut e = engine();
        broker_end(&mut e, 100, 1_000);
        commit(&mut e, 100, 10).unwrap();
        let r = report(&e, 160);
        assert_eq!(r.lag_seconds, Some(60.0));
        assert!(r.lag_seconds_lower_bound);
    }

    #[test]
    fn failed_send_placeholders_are_rejected_and_mark_the_producer_failing() {
        let mut e = engine();
        produce(&mut e, 0, 99).unwrap();
        commit(&mut e, 1, 50).unwrap();
        assert_eq!(produce(&mut e, 70, -1), Err(RejectReason::InvalidOffsetSentinel));
        let unassigned = Observation::Produced {
            partition: part(-1),
            offset: -1,
        };
        assert_eq!(e.observe(secs(71), &unassigned), Err(RejectReason::NegativePartition));
        let r = report(&e, 72);
        assert_eq!(r.lag_messages, Some(50));
        assert_eq!(r.end_offset, Some(100));
        assert!(r.producer_failing);
        assert_eq!(e.stats().rejected.total(), 2);
        assert!(e.drain_events().is_empty(), "no reset");
        // One success ends it; a minute without failures ends it too.
        produce(&mut e, 73, 100).unwrap();
        assert!(!report(&e, 74).producer_failing);
    }

    #[test]
    fn producer_failing_expires_without_new_failures() {
        let mut e = engine();
        produce(&mut e, 0, 1).unwrap();
        commit(&mut e, 0, 0).unwrap();
        e.observe(
            secs(10),
            &Observation::ProduceFailed {
                partition: part(-1),
                error: "TIMED_OUT",
            },
        )
        .unwrap_err();
        assert!(report(&e, 70).producer_failing);
        assert!(!report(&e, 71).producer_failing);
    }

    #[test]
    fn a_lower_produce_offset_is_never_a_reset() {
        let mut e = engine();
        produce(&mut e, 0, 1_000).unwrap();
        for t in 1..200 {
            produce(&mut e, t, 3).unwrap();
        }
        commit(&mut e, 200, 500).unwrap();
        let r = report(&e, 200);
        assert_eq!(r.end_offset, Some(1_001));
        assert_eq!(r.lag_messages, Some(501));
        assert_eq!(e.stats().resets, 0);
    }

    #[test]
    fn a_reset_needs_the_broker_to_stay_lower() {
        let mut e = engine();
        broker_end(&mut e, 0, 1_000);
        commit(&mut e, 0, 900).unwrap();
        broker_end(&mut e, 10, 20);
        broker_end(&mut e, 20, 1_000); // a blip, not a reset
        assert_eq!(e.stats().resets, 0);
        broker_end(&mut e, 30, 20);
        broker_end(&mut e, 40, 25);
        assert_eq!(e.stats().resets, 1);
        let events = e.drain_events();
        assert!(
            matches!(
                events.as_slice(),
                [EngineEvent::TopicReset {
                    previous_end: Some(1_000),
                    new_end: Some(25),
                    evidence: ResetEvidence::EndOffsetDecreased,
                    ..
                }]
            ),
            "{events:?}"
        );
        // The old commit belonged to the old log.
        assert_eq!(report(&e, 41).status, Status::Stale);
        commit(&mut e, 42, 20).unwrap();
        assert_eq!(report(&e, 42).lag_messages, Some(5));
    }

    #[test]
    fn a_client_high_watermark_never_proves_a_reset() {
        let mut e = engine();
        broker_end(&mut e, 0, 1_000);
        for t in 1..10 {
            let low = Observation::EndOffset {
                partition: part(0),
                offset: 5,
                source: EndOffsetSource::ClientHighWatermark,
            };
            e.observe(secs(t), &low).unwrap();
        }
        assert_eq!(e.stats().resets, 0);
    }

    #[test]
    fn topic_recreated_resets_every_partition() {
        let mut e = engine();
        produce(&mut e, 0, 10).unwrap();
        commit(&mut e, 0, 5).unwrap();
        e.observe(secs(5), &Observation::TopicRecreated { cluster: "c", topic: T })
            .unwrap();
        assert!(matches!(
            e.drain_events().as_slice(),
            [EngineEvent::TopicReset {
                evidence: ResetEvidence::TopicRecreated,
                new_end: None,
                ..
            }]
        ));
        assert_eq!(report(&e, 6).lag_messages, None);
    }

    #[test]
    fn retention_below_the_commit_is_data_loss_not_lag() {
        let mut e = engine();
        broker_end(&mut e, 0, 1_000);
        commit(&mut e, 0, 100).unwrap();
        log_start(&mut e, 10, 300);
        let r = report(&e, 10);
        assert_eq!(r.status, Status::DataLoss);
        assert_eq!(r.data_loss_messages, 200);
        assert_eq!(r.lag_messages, Some(700));
        assert!(matches!(
            e.drain_events().as_slice(),
            [EngineEvent::DataLoss {
                messages: 200,
                committed_offset: 100,
                log_start_offset: 300,
                ..
            }]
        ));
        // Retention moves on: only the newly deleted records are new loss.
        log_start(&mut e, 20, 350);
        assert_eq!(report(&e, 20).data_loss_messages, 250);
        // The group jumps to the log start: no longer losing, the loss stays counted.
        commit(&mut e, 30, 350).unwrap();
        let r = report(&e, 30);
        assert_ne!(r.status, Status::DataLoss);
        assert_eq!(r.data_loss_messages, 250);
    }

    #[test]
    fn a_lag_of_one_on_a_control_marker_is_not_lag() {
        let mut e = engine();
        produce(&mut e, 0, 9).unwrap(); // data records 0..=9
        broker_end(&mut e, 1, 11); // offset 10 is the commit marker
        commit(&mut e, 2, 10).unwrap();
        let r = report(&e, 3);
        assert_eq!(
            (r.lag_messages, r.lag_seconds, r.status),
            (Some(0), Some(0.0), Status::Ok)
        );
        assert!(r.at_control_marker);

        let mut e = engine();
        broker_end(&mut e, 0, 11);
        commit(&mut e, 1, 10).unwrap();
        assert_eq!(report(&e, 2).lag_messages, Some(1), "without evidence it is lag");
        e.observe(
            secs(2),
            &Observation::ControlMarker {
                partition: part(0),
                offset: 10,
            },
        )
        .unwrap();
        assert_eq!(report(&e, 3).lag_messages, Some(0));
    }

    #[test]
    fn an_idle_caught_up_group_stays_ok_while_the_broker_confirms() {
        let mut e = engine();
        broker_end(&mut e, 0, 100);
        commit(&mut e, 0, 100).unwrap();
        for t in (10..3_600).step_by(10) {
            broker_end(&mut e, t, 100);
        }
        assert_eq!(report(&e, 3_600).status, Status::Ok);
        // Nobody confirms the end offset any more: zero lag is no longer known.
        assert_eq!(report(&e, 3_600 + 301).status, Status::Stale);
    }

    #[test]
    fn a_topic_knows_its_clusters() {
        let mut e = engine();
        assert_eq!(e.clusters_of(T).count(), 0);
        produce(&mut e, 0, 1).unwrap();
        assert_eq!(e.clusters_of(T).collect::<Vec<_>>(), ["c"]);
        let other = Observation::Produced {
            partition: PartitionRef {
                cluster: "d",
                topic: T,
                partition: 0,
            },
            offset: 1,
        };
        e.observe(secs(0), &other).unwrap();
        assert_eq!(e.clusters_of(T).collect::<Vec<_>>(), ["c", "d"]);
    }

    #[test]
    fn invalid_commits_are_rejected() {
        let mut e = engine();
        assert_eq!(commit(&mut e, 0, -1001), Err(RejectReason::InvalidOffsetSentinel));
        assert_eq!(commit(&mut e, 0, -7), Err(RejectReason::NegativeOffset));
        assert_eq!(commit(&mut e, 0, i64::MAX), Err(RejectReason::OffsetOutOfRange));
        assert_eq!(e.group_partitions().count(), 0);
    }

    #[test]
    fn group_status_is_the_worst_partition() {
        let mut e = engine();
        for p in 0..2 {
            let end = Observation::EndOffset {
                partition: part(p),
                offset: 100,
                source: EndOffsetSource::Broker,
            };
            e.observe(secs(0), &end).unwrap();
        }
        let c0 = Observation::Committed {
            group: "g",
            partition: part(0),
            offset: 100,
        };
        e.observe(secs(0), &c0).unwrap();
        for t in 0..5 {
            let c1 = Observation::Committed {
                group: "g",
                partition: part(1),
                offset: 40,
            };
            e.observe(secs(t * 5), &c1).unwrap();
        }
        let gid = e.groups().next().unwrap();
        let g = e.evaluate_group(gid, secs(21));
        assert_eq!(g.status, Status::Stall);
        assert_eq!((g.partitions, g.total_lag, g.complete), (2, 60, true));
    }

    #[test]
    fn memory_stays_within_budget() {
        let mut e = engine();
        for o in 0..100_000 {
            produce(&mut e, o, o).unwrap();
        }
        commit(&mut e, 100_000, 5).unwrap();
        let m = e.memory();
        assert_eq!((m.partitions, m.group_partitions), (1, 1));
        assert!(m.partition_bytes <= 4096, "{} bytes per partition", m.partition_bytes);
        // Bytes per group-partition are measured at scale in tests/memory.rs.
    }

    #[test]
    fn an_unreachable_leader_is_never_ok_until_the_broker_answers() {
        let mut e = engine();
        broker_end(&mut e, 0, 100);
        commit(&mut e, 0, 100).unwrap();
        assert_eq!(report(&e, 1).status, Status::Ok);
        e.observe(secs(2), &Observation::Unreachable { partition: part(0) })
            .unwrap();
        let r = report(&e, 3);
        assert_eq!((r.status, r.broker_unreachable), (Status::Stale, true));
        broker_end(&mut e, 4, 100);
        assert_eq!(report(&e, 5).status, Status::Ok);
    }

    #[test]
    fn a_deleted_group_disappears_and_comes_back_fresh() {
        let mut e = engine();
        broker_end(&mut e, 0, 100);
        commit(&mut e, 0, 10).unwrap();
        let deleted = Observation::GroupDeleted {
            cluster: "c",
            group: "g",
        };
        e.observe(secs(1), &deleted).unwrap();
        assert!(e.find("c", "g", T, 0).is_none());
        assert_eq!((e.groups().count(), e.group_partitions().count()), (0, 0));
        commit(&mut e, 2, 90).unwrap();
        assert_eq!(report(&e, 2).lag_messages, Some(10));
        assert_eq!(e.commits(e.find("c", "g", T, 0).unwrap()).count(), 1, "no old commits");
    }

    #[test]
    fn a_deleted_topic_takes_its_partitions_and_group_rows_along() {
        let mut e = engine();
        broker_end(&mut e, 0, 100);
        commit(&mut e, 0, 10).unwrap();
        let deleted = Observation::TopicDeleted { cluster: "c", topic: T };
        e.observe(secs(1), &deleted).unwrap();
        assert_eq!(e.partitions().count(), 0);
        assert_eq!(e.group_partitions().count(), 0);
        let gid = e.find_group("c", "g").unwrap();
        assert_eq!(
            e.evaluate_group(gid, secs(1)).status,
            Status::Stale,
            "a group with nothing known"
        );
        assert_eq!(e.clusters_of(T).count(), 0);
        // Created again: a new partition with no history of the old one.
        broker_end(&mut e, 2, 5);
        assert_eq!(e.partitions().count(), 1);
        assert_eq!(
            e.evaluate_partition(e.partitions().next().unwrap(), secs(2)).end_offset,
            Some(5)
        );
    }

    #[test]
    fn idle_lists_groups_and_topics_nothing_was_heard_of() {
        let mut e = engine();
        broker_end(&mut e, 0, 100);
        commit(&mut e, 0, 10).unwrap();
        let other = PartitionRef {
            cluster: "c",
            topic: "quiet",
            partition: 0,
        };
        e.observe(
            secs(0),
            &Observation::Produced {
                partition: other,
                offset: 3,
            },
        )
        .unwrap();
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(e.idle(secs(3000), hour), Idle::default());
        let idle = e.idle(secs(3601), hour);
        assert_eq!(idle.groups, vec![("c", "g")]);
        // `orders` still has a group on it: it goes when the group does.
        assert_eq!(idle.topics, vec![("c", "quiet")]);
    }
}
