//! What the engine answers: counters, reports and the names that go with them.

use super::*;

/// Counters of what the engine was given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    pub accepted: u64,
    /// Valid points that told nothing new (behind the known end, older commits).
    pub redundant: u64,
    pub rejected: RejectCounts,
    /// Refusals by the cardinality limit that made them.
    pub limited: crate::model::LimitCounts,
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
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PartitionReport {
    pub end_offset: Option<i64>,
    /// Offset of the last record producers reported acknowledged.
    pub produce_offset: Option<i64>,
    pub log_start_offset: Option<i64>,
    pub producer_failing: bool,
    #[serde(rename = "end_offset_at_ms")]
    pub end_offset_at: Option<Millis>,
    pub last_stable_offset: Option<i64>,
    #[serde(rename = "open_transaction_since_ms")]
    pub open_transaction_since: Option<Millis>,
    /// Who holds the last stable offset, as the broker names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_transaction: Option<std::sync::Arc<crate::model::OpenTransaction>>,
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
            consumer: None,
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
    /// The oldest unread record's age over the partitions whose it is known, and
    /// whether that one is a lower bound.
    pub max_lag_seconds: Option<f64>,
    pub lag_seconds_lower_bound: bool,
    /// Some partition's producers are failing.
    pub producer_failing: bool,
    /// The partition the status is about: the worst status, then the oldest
    /// unread record (unknown counts as oldest), with its report.
    pub worst: Option<(GroupPartitionId, LagReport)>,
}

/// A group's health folded from its partitions' reports, one at a time: what
/// the engine answers for a group it holds ([`GroupReport`]), and what a node
/// answers for a group whose partitions other nodes hold, from their rows. `K`
/// names a partition.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupFold<K> {
    pub status: Status,
    pub partitions: usize,
    pub total_lag: i64,
    pub complete: bool,
    pub max_lag: Option<(K, i64)>,
    pub max_lag_seconds: Option<f64>,
    pub lag_seconds_lower_bound: bool,
    pub producer_failing: bool,
    pub worst: Option<(K, LagReport)>,
}

impl<K> Default for GroupFold<K> {
    fn default() -> Self {
        Self {
            status: Status::Ok,
            partitions: 0,
            total_lag: 0,
            complete: true,
            max_lag: None,
            max_lag_seconds: None,
            lag_seconds_lower_bound: false,
            producer_failing: false,
            worst: None,
        }
    }
}

impl<K: Clone> GroupFold<K> {
    /// Adds one partition's report.
    pub fn add(&mut self, partition: K, r: LagReport) {
        let key = |r: &LagReport| (r.status, r.lag_seconds.unwrap_or(f64::INFINITY));
        self.partitions += 1;
        self.status = self.status.max(r.status);
        match r.lag_messages {
            Some(lag) => {
                self.total_lag = self.total_lag.saturating_add(lag);
                if self.max_lag.as_ref().is_none_or(|(_, max)| lag > *max) {
                    self.max_lag = Some((partition.clone(), lag));
                }
            }
            None => self.complete = false,
        }
        if let Some(secs) = r.lag_seconds
            && self.max_lag_seconds.is_none_or(|max| secs > max)
        {
            self.max_lag_seconds = Some(secs);
            self.lag_seconds_lower_bound = r.lag_seconds_lower_bound;
        }
        self.producer_failing |= r.producer_failing;
        if self.worst.as_ref().is_none_or(|(_, w)| key(&r) > key(w)) {
            self.worst = Some((partition, r));
        }
    }

    /// The fold once every partition is in: a group with none is stale.
    pub fn finish(mut self) -> Self {
        if self.partitions == 0 {
            self.status = Status::Stale;
        }
        self
    }
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
