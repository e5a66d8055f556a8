//! The engine: offset histories per partition, commit windows per group-partition,
//! and the lag and health computed from them at a time the caller chooses.

use crate::chunked::Chunked;
use crate::config::{ConfigError, EngineConfig};
use crate::health::{HealthInput, HealthParams, partition_status};
use crate::history::{HistoryParams, OffsetHistory, ProduceTime, Sighting};
use crate::model::{
    EndOffsetSource, EngineEvent, LagReport, Limit, Observation, OpenTransaction, PartitionRef, RejectCounts,
    RejectReason, ResetEvidence, Status,
};
use std::sync::Arc;

/// The longest transactional id kept (Kafka bounds it only by its string's
/// size): beyond it, cut at a character boundary.
pub const MAX_TRANSACTIONAL_ID: usize = 256;

fn truncated(s: &str, max: usize) -> &str {
    let mut cut = s.len().min(max);
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}
use crate::time::{Millis, duration_ms};
use crate::window::{Commit, CommitWindow};
use std::collections::HashMap;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

mod budget;
mod evaluate;
mod ids;
mod ingest;
mod registry;
mod report;
mod shard;
mod state;

pub use ids::{GroupId, GroupPartitionId, PartitionId};
use ids::{NameId, Names, TopicId, index_u32};
pub use report::{EngineStats, GroupFold, GroupPartitionNames, GroupReport, Idle, MemoryUsage, PartitionReport};
pub use shard::EngineShard;
pub use state::PARTITION_FIXED_BYTES;
use state::{
    ClusterUsage, GroupPartitionState, GroupState, Loss, PartitionState, PendingReset, StableOffset, TopicState,
    Unreadable, Usage,
};

#[derive(Debug)]
pub struct Engine {
    config: EngineConfig,
    history: HistoryParams,
    health: HealthParams,
    min_commit_distance_ms: i64,
    producer_failing_ms: i64,
    open_transaction_ms: i64,
    end_overdue_ms: i64,
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
    /// Who holds each partition's last stable offset, as the broker last
    /// named it, while it holds it there: beside the partitions rather than
    /// in them, where every partition would pay for what few have.
    open_transactions: Map<PartitionId, Arc<OpenTransaction>>,
    /// What counts against the cardinality limits.
    usage: Usage,
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
                allowed_lag: i64::from(config.allowed_lag),
            },
            min_commit_distance_ms: duration_ms(config.min_commit_distance),
            producer_failing_ms: duration_ms(config.producer_failing_for),
            open_transaction_ms: duration_ms(config.open_transaction_after),
            end_overdue_ms: duration_ms(config.end_overdue_after),
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
            open_transactions: Map::default(),
            usage: Usage::default(),
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
}

#[cfg(test)]
mod tests;
