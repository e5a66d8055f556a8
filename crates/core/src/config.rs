//! Tunables of the engine, with the defaults documented in `docs/engine.md`.

use crate::history::Compaction;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// Memory budget of one partition's state, history included, in bytes.
    pub history_bytes: usize,
    /// Errors of lag seconds this small are always allowed when the history is
    /// compacted; a quarter of it is the tolerance of merging as sightings arrive.
    #[serde(with = "humantime_serde")]
    pub min_resolution: Duration,
    /// Relative error of lag seconds the downsampling starts from (0.01 = 1 %).
    pub history_precision: f32,
    /// Which points a full history drops: `by_error` (least change to produce
    /// times first) or `by_age` (older points thinner).
    pub history_compaction: Compaction,
    /// A commit closer than this to the previous one replaces it in the window.
    #[serde(with = "humantime_serde")]
    pub min_commit_distance: Duration,
    /// No confirmation of the end offset for this long and lag cannot be called 0.
    #[serde(with = "humantime_serde")]
    pub stale_after: Duration,
    /// A lagging group is stopped only after not committing for this long at least.
    #[serde(with = "humantime_serde")]
    pub stop_grace: Duration,
    /// Lag at or below this many messages counts as caught up for the health
    /// rules (Burrow's `allowed-lag`); lag itself is still reported as it is.
    pub allowed_lag: u32,
    /// A partition stays `producer_failing` this long after the last failure report.
    #[serde(with = "humantime_serde")]
    pub producer_failing_for: Duration,
    /// A last stable offset held below the end offset this long is an open
    /// transaction that `read_committed` consumers cannot pass.
    #[serde(with = "humantime_serde")]
    pub open_transaction_after: Duration,
    /// Consecutive broker answers below an earlier one that make a reset.
    pub reset_confirmations: u32,
    /// A produce rate counts the time since the end offset was last seen as
    /// time it stood still only once it is this old: until then its sources (a
    /// poll, a client's flush of a 10 s Data Streams bucket) may just not have
    /// reported yet.
    #[serde(with = "humantime_serde")]
    pub end_overdue_after: Duration,
    /// How many names input may create (`[engine.cardinality]`).
    pub cardinality: Cardinality,
}

/// Bounds on what observations may create. A new name over a bound is refused
/// (`RejectReason::Limited`) and counted by [`crate::Limit`]; what is already
/// known keeps working, so a flood of new names cannot push real series out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cardinality {
    pub max_clusters: usize,
    pub max_topics_per_cluster: usize,
    /// Partition ids at or above this are refused: Kafka topics have fewer.
    pub max_partitions_per_topic: usize,
    pub max_groups_per_cluster: usize,
    /// Partitions over all topics: each may cost up to `history_bytes`.
    pub max_partitions: usize,
    /// Group-partitions over all groups.
    pub max_group_partitions: usize,
    /// Longest cluster, topic or group name, in bytes (Kafka's topic limit is 249).
    pub max_name_bytes: usize,
}

impl Default for Cardinality {
    fn default() -> Self {
        Self {
            max_clusters: 1_000,
            max_topics_per_cluster: 20_000,
            max_partitions_per_topic: 10_000,
            max_groups_per_cluster: 20_000,
            max_partitions: 1_000_000,
            max_group_partitions: 2_000_000,
            max_name_bytes: 1_024,
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            history_bytes: 4096,
            min_resolution: Duration::from_secs(1),
            history_precision: 0.01,
            history_compaction: Compaction::ByError,
            min_commit_distance: Duration::from_secs(1),
            stale_after: Duration::from_secs(300),
            stop_grace: Duration::from_secs(60),
            allowed_lag: 0,
            producer_failing_for: Duration::from_secs(60),
            open_transaction_after: Duration::from_secs(60),
            reset_confirmations: 2,
            end_overdue_after: Duration::from_secs(30),
            cardinality: Cardinality::default(),
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("history_bytes {given} leaves room for {points} points; at least {min} are needed ({needed} bytes)")]
    HistoryTooSmall {
        given: usize,
        points: usize,
        min: usize,
        needed: usize,
    },
    #[error("history_precision must be a finite number above 0, got {0}")]
    BadPrecision(f32),
    #[error("reset_confirmations must be at least 1")]
    NoResetConfirmations,
}
