//! What a node holds of some shards of a log kept in Kafka: enough to go on
//! from a point in those shards as if it had read them from their start.
//! Written as a snapshot so that a node taking a shard over reads the snapshot
//! and the records after it, not the whole retention; and kept in memory when
//! a node lets other shards go, so that what it keeps is not read again.

use crate::delivery::{LedgerShard, WindowReport};
use crate::engine::EngineShard;
use crate::failures::TopicFailures;
use crate::record::{Record, shard_about};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ShardState {
    pub engine: EngineShard,
    pub deliveries: DeliveryShard,
    /// Pathway points, spans and log lines: taken in as the records they are.
    pub records: Vec<Record>,
}

/// Drop accounting of some shards' topics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct DeliveryShard {
    pub ledger: LedgerShard,
    /// Failed sends per (cluster, topic).
    pub failures: Vec<((String, String), TopicFailures)>,
    /// Recent problem windows.
    pub events: Vec<WindowReport>,
}

/// Some shards of a log of `count` shards: what is about a topic belongs to
/// the topic's shard, what is about none to shard 0 (as [`Record::shard`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shards {
    pub count: u32,
    pub held: BTreeSet<u32>,
}

impl Shards {
    pub fn one(count: u32, shard: u32) -> Self {
        Self {
            count,
            held: BTreeSet::from([shard]),
        }
    }

    /// Whether what is about `topic` (or about none) is in these shards.
    pub fn keeps(&self, topic: Option<&str>) -> bool {
        self.held.contains(&shard_about(topic, self.count))
    }

    pub fn keeps_topic(&self, topic: &str) -> bool {
        self.keeps(Some(topic))
    }
}
