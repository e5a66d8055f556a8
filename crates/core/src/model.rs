//! Domain types: what the engine is told, what it rejects and what it answers.

use crate::time::Millis;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// A partition as named by whoever reports on it. `partition` may be anything a
/// client sent, -1 included: the engine decides what is valid. Generic over how
/// names are held: borrowed on the hot path ([`PartitionRef`]), owned in the log.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Partition<S> {
    pub cluster: S,
    pub topic: S,
    pub partition: i32,
}

/// A partition named by borrowed strings.
pub type PartitionRef<'a> = Partition<&'a str>;

/// Who said what the end offset is. Only the broker's own answer can prove a reset.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndOffsetSource {
    /// The broker's latest offset (ListOffsets), asked by a poller.
    Broker,
    /// A high watermark a client saw in a fetch response (DSM `kafka_high_watermark`).
    ClientHighWatermark,
}

/// One fact about the pipeline, at the time it is handed to the engine with.
///
/// Generic over how names are held: [`Observation`] borrows them (intake and
/// poller hand the engine what they decoded without copying), [`OwnedObservation`]
/// owns them (the log). The serialized shape is the log's: `kind` and flat names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ObservationOf<S> {
    /// A produce the broker acknowledged: `offset` is the acked record's offset.
    Produced {
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// A send that failed; `partition` is -1 when none had been assigned.
    ProduceFailed {
        #[serde(flatten)]
        partition: Partition<S>,
        error: S,
    },
    /// A group committed `offset`, the next offset it will read.
    Committed {
        group: S,
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// The partition's end offset (high watermark).
    EndOffset {
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
        source: EndOffsetSource,
    },
    /// The partition's log start offset (earliest offset still readable).
    LogStart {
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// The partition's last stable offset (ListOffsets with `read_committed`):
    /// `read_committed` consumers read no further while a transaction is open.
    StableOffset {
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// The broker's record at `offset` carries the observation's time as its
    /// timestamp (a poller read the record batch at a group's committed offset):
    /// when that record was written, exactly, whatever the polls bracketed.
    RecordWritten {
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// `offset` holds a transaction control marker, not a data record.
    ControlMarker {
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// Offsets `from` to `to` (exclusive) hold nothing a `read_committed`
    /// consumer is handed: transaction markers (control batches) and the
    /// records of aborted transactions, as the poller read them at a commit.
    /// A group committed in the run has read all of it: what it waits for
    /// starts at `to`.
    Unreadable {
        #[serde(flatten)]
        partition: Partition<S>,
        from: i64,
        to: i64,
    },
    /// An operator moved the group's offset to `offset` (a reset streamsight
    /// executed): the group's own doing, so its commit history starts afresh
    /// there; neither a rewind nor data loss.
    OffsetsReset {
        group: S,
        #[serde(flatten)]
        partition: Partition<S>,
        offset: i64,
    },
    /// The broker reports the topic deleted and created again (a new topic id).
    TopicRecreated { cluster: S, topic: S },
    /// The partition's leader could not be asked: what is known of it is no
    /// longer confirmed, until the broker answers again.
    Unreachable {
        #[serde(flatten)]
        partition: Partition<S>,
    },
    /// The group is gone (deleted, or absent longer than the expiry): forget it.
    GroupDeleted { cluster: S, group: S },
    /// The group's coordinator described it with `members` live members. With
    /// none, nothing reads for the group, whatever its commits say (an
    /// administrator's commit moves offsets of a group nobody is in). Only a
    /// describe's answer is this: an unknown membership is no observation.
    GroupMembers { cluster: S, group: S, members: u32 },
    /// A live member of the group is assigned the partition, and the group
    /// has committed no offset on it (a member stuck before its first commit,
    /// or new to it): the group's lag there is unknown, a row that says so,
    /// never left out (Kafka's own `--describe` shows it with lag `-`).
    Assigned {
        group: S,
        #[serde(flatten)]
        partition: Partition<S>,
    },
    /// The broker names the producer whose open transaction holds the
    /// partition's last stable offset (the last [`Self::StableOffset`]):
    /// DescribeProducers on the partition's leader gives the producer whose
    /// transaction starts there, the transaction coordinator
    /// (ListTransactions, DescribeTransactions) its transactional id and
    /// timeout, where it answered. Kept small: every record pays for the
    /// largest observation.
    TransactionHolder {
        #[serde(flatten)]
        partition: Partition<S>,
        producer_id: i64,
        producer_epoch: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        transactional_id: Option<S>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<i32>,
    },
    /// The topic's time retention as its settings say (`retention.ms` when
    /// its cleanup policy deletes; -1 when nothing is deleted by time): with
    /// the age of a group's oldest unread record, when retention deletes it.
    TopicRetention { cluster: S, topic: S, retention_ms: i64 },
    /// The topic is gone: forget its partitions and every group's lag on them.
    TopicDeleted { cluster: S, topic: S },
}

/// An observation borrowing its names: what the engine is handed.
pub type Observation<'a> = ObservationOf<&'a str>;

/// An observation owning its names: what the log keeps. Names are shared: the
/// records of one payload or one stored batch point at one copy of each.
pub type OwnedObservation = ObservationOf<Arc<str>>;

impl<S> Partition<S> {
    pub fn map<'a, T>(&'a self, f: &mut impl FnMut(&'a S) -> T) -> Partition<T> {
        Partition {
            cluster: f(&self.cluster),
            topic: f(&self.topic),
            partition: self.partition,
        }
    }
}

/// Offsets Kafka clients use as "no offset" markers rather than positions.
const OFFSET_SENTINELS: [i64; 4] = [-1, -2, -1000, -1001];

/// An offset the engine takes as a position.
pub(crate) fn check_offset(offset: i64) -> Result<(), RejectReason> {
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

impl<S> ObservationOf<S> {
    /// Why the engine will reject this point whatever it holds (a negative
    /// partition, an offset that is no position, a failed send), checked as
    /// the engine checks it: an intake can say so in its answer. Only the
    /// cardinality limits, which depend on what is held, are left to the engine.
    pub fn check(&self) -> Result<(), RejectReason> {
        use ObservationOf as O;
        let partition = |p: &Partition<S>| {
            if p.partition < 0 {
                Err(RejectReason::NegativePartition)
            } else {
                Ok(())
            }
        };
        match self {
            O::Produced { partition: p, offset } => partition(p).and_then(|()| check_offset(*offset)),
            O::ProduceFailed { .. } => Err(RejectReason::FailedSend),
            O::Committed {
                partition: p, offset, ..
            }
            | O::OffsetsReset {
                partition: p, offset, ..
            }
            | O::EndOffset {
                partition: p, offset, ..
            }
            | O::LogStart { partition: p, offset }
            | O::StableOffset { partition: p, offset }
            | O::RecordWritten { partition: p, offset }
            | O::ControlMarker { partition: p, offset } => check_offset(*offset).and_then(|()| partition(p)),
            O::Unreadable { partition: p, from, to } => {
                check_offset(*from)?;
                check_offset(*to)?;
                if to <= from {
                    return Err(RejectReason::OffsetOutOfRange);
                }
                partition(p)
            }
            O::TransactionHolder { partition: p, .. } => partition(p),
            O::Unreachable { partition: p } | O::Assigned { partition: p, .. } => partition(p),
            O::TopicRecreated { .. }
            | O::GroupDeleted { .. }
            | O::TopicDeleted { .. }
            | O::GroupMembers { .. }
            | O::TopicRetention { .. } => Ok(()),
        }
    }

    /// The same observation with every name passed through `f`.
    pub fn map<'a, T>(&'a self, mut f: impl FnMut(&'a S) -> T) -> ObservationOf<T> {
        use ObservationOf as O;
        match self {
            O::Produced { partition, offset } => O::Produced {
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::ProduceFailed { partition, error } => O::ProduceFailed {
                partition: partition.map(&mut f),
                error: f(error),
            },
            O::Committed {
                group,
                partition,
                offset,
            } => O::Committed {
                group: f(group),
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::EndOffset {
                partition,
                offset,
                source,
            } => O::EndOffset {
                partition: partition.map(&mut f),
                offset: *offset,
                source: *source,
            },
            O::OffsetsReset {
                group,
                partition,
                offset,
            } => O::OffsetsReset {
                group: f(group),
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::LogStart { partition, offset } => O::LogStart {
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::ControlMarker { partition, offset } => O::ControlMarker {
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::StableOffset { partition, offset } => O::StableOffset {
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::Unreadable { partition, from, to } => O::Unreadable {
                partition: partition.map(&mut f),
                from: *from,
                to: *to,
            },
            O::RecordWritten { partition, offset } => O::RecordWritten {
                partition: partition.map(&mut f),
                offset: *offset,
            },
            O::TopicRecreated { cluster, topic } => O::TopicRecreated {
                cluster: f(cluster),
                topic: f(topic),
            },
            O::Unreachable { partition } => O::Unreachable {
                partition: partition.map(&mut f),
            },
            O::GroupDeleted { cluster, group } => O::GroupDeleted {
                cluster: f(cluster),
                group: f(group),
            },
            O::GroupMembers {
                cluster,
                group,
                members,
            } => O::GroupMembers {
                cluster: f(cluster),
                group: f(group),
                members: *members,
            },
            O::TopicDeleted { cluster, topic } => O::TopicDeleted {
                cluster: f(cluster),
                topic: f(topic),
            },
            O::Assigned { group, partition } => O::Assigned {
                group: f(group),
                partition: partition.map(&mut f),
            },
            O::TransactionHolder {
                partition,
                producer_id,
                producer_epoch,
                transactional_id,
                timeout_ms,
            } => O::TransactionHolder {
                partition: partition.map(&mut f),
                producer_id: *producer_id,
                producer_epoch: *producer_epoch,
                transactional_id: transactional_id.as_ref().map(&mut f),
                timeout_ms: *timeout_ms,
            },
            O::TopicRetention {
                cluster,
                topic,
                retention_ms,
            } => O::TopicRetention {
                cluster: f(cluster),
                topic: f(topic),
                retention_ms: *retention_ms,
            },
        }
    }
}

impl<S: AsRef<str>> ObservationOf<S> {
    /// A borrowed view, for the engine.
    pub fn borrowed(&self) -> Observation<'_> {
        self.map(|s| s.as_ref())
    }
}

impl Observation<'_> {
    /// An owned copy, for the log.
    pub fn to_owned(&self) -> OwnedObservation {
        self.map(|s| Arc::from(*s))
    }

    /// An owned copy whose names come from `names`, which can hand out one copy
    /// of each name for many records.
    pub fn to_owned_in(&self, names: &mut SharedNames) -> OwnedObservation {
        self.map(|s| names.get(s))
    }
}

/// One shared copy of each name, for the records of one payload or batch.
#[derive(Debug, Default)]
pub struct SharedNames(std::collections::HashMap<Arc<str>, (), foldhash::fast::RandomState>);

impl SharedNames {
    pub fn get(&mut self, name: &str) -> Arc<str> {
        if let Some((known, ())) = self.0.get_key_value(name) {
            return known.clone();
        }
        let name: Arc<str> = Arc::from(name);
        self.0.insert(name.clone(), ());
        name
    }
}

/// Why a point was not let near the offset history. Counted per reason.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, thiserror::Error)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    #[error("partition is negative (no partition was assigned)")]
    NegativePartition,
    #[error("offset is a kafka sentinel (-1, -2, -1000 or -1001), not a position")]
    InvalidOffsetSentinel,
    #[error("offset is negative")]
    NegativeOffset,
    #[error("offset is too large to be an end offset")]
    OffsetOutOfRange,
    #[error("the send failed: a failure is not produce progress")]
    FailedSend,
    #[error("backlog type is not one the engine knows")]
    UnknownBacklogType,
    #[error("a required tag is missing")]
    MissingTag,
    #[error("a tag is malformed")]
    MalformedTag,
    #[error("a new name over a cardinality limit")]
    Limited,
}

impl RejectReason {
    pub const ALL: [RejectReason; 9] = [
        RejectReason::NegativePartition,
        RejectReason::InvalidOffsetSentinel,
        RejectReason::NegativeOffset,
        RejectReason::OffsetOutOfRange,
        RejectReason::FailedSend,
        RejectReason::UnknownBacklogType,
        RejectReason::MissingTag,
        RejectReason::MalformedTag,
        RejectReason::Limited,
    ];

    /// The label used in metrics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::NegativePartition => "negative_partition",
            RejectReason::InvalidOffsetSentinel => "invalid_offset_sentinel",
            RejectReason::NegativeOffset => "negative_offset",
            RejectReason::OffsetOutOfRange => "offset_out_of_range",
            RejectReason::FailedSend => "failed_send",
            RejectReason::UnknownBacklogType => "unknown_backlog_type",
            RejectReason::MissingTag => "missing_tag",
            RejectReason::MalformedTag => "malformed_tag",
            RejectReason::Limited => "limited",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    /// What a tracer hands over for a failed send (partition or offset -1):
    /// a failure report, where other rejections are just bad points.
    pub fn is_failure_placeholder(self) -> bool {
        matches!(
            self,
            RejectReason::NegativePartition | RejectReason::InvalidOffsetSentinel | RejectReason::NegativeOffset
        )
    }
}

/// Rejected points by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RejectCounts([u64; RejectReason::ALL.len()]);

impl RejectCounts {
    pub fn add(&mut self, reason: RejectReason) {
        self.0[reason.index()] += 1;
    }

    pub fn get(&self, reason: RejectReason) -> u64 {
        self.0[reason.index()]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn iter(&self) -> impl Iterator<Item = (RejectReason, u64)> + '_ {
        RejectReason::ALL.iter().map(|&r| (r, self.get(r)))
    }
}

/// A bound on what input may create: over it, the new thing is refused and
/// counted (`streamsight_limited_total{what}`), and nothing known is evicted.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    Clusters,
    Topics,
    Partitions,
    PartitionId,
    Groups,
    GroupPartitions,
    NameBytes,
    Pathways,
    Services,
    DeliverySeries,
    Connections,
    InFlight,
    QueuedRecords,
    IngestRate,
}

impl Limit {
    pub const ALL: [Limit; 14] = [
        Limit::Clusters,
        Limit::Topics,
        Limit::Partitions,
        Limit::PartitionId,
        Limit::Groups,
        Limit::GroupPartitions,
        Limit::NameBytes,
        Limit::Pathways,
        Limit::Services,
        Limit::DeliverySeries,
        Limit::Connections,
        Limit::InFlight,
        Limit::QueuedRecords,
        Limit::IngestRate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Limit::Clusters => "clusters",
            Limit::Topics => "topics",
            Limit::Partitions => "partitions",
            Limit::PartitionId => "partition_id",
            Limit::Groups => "groups",
            Limit::GroupPartitions => "group_partitions",
            Limit::NameBytes => "name_bytes",
            Limit::Pathways => "pathways",
            Limit::Services => "services",
            Limit::DeliverySeries => "delivery_series",
            Limit::Connections => "connections",
            Limit::InFlight => "in_flight",
            Limit::QueuedRecords => "queued_records",
            Limit::IngestRate => "ingest_rate",
        }
    }
}

/// Refusals by limit.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LimitCounts([u64; Limit::ALL.len()]);

impl LimitCounts {
    pub fn add(&mut self, limit: Limit) {
        self.0[limit as usize] += 1;
    }

    pub fn get(&self, limit: Limit) -> u64 {
        self.0[limit as usize]
    }

    pub fn iter(&self) -> impl Iterator<Item = (Limit, u64)> + '_ {
        Limit::ALL.iter().map(|&l| (l, self.get(l)))
    }

    pub fn add_all(&mut self, other: &LimitCounts) {
        for (a, b) in self.0.iter_mut().zip(other.0) {
            *a = a.saturating_add(b);
        }
    }

    pub fn add_n(&mut self, limit: Limit, n: u64) {
        self.0[limit as usize] = self.0[limit as usize].saturating_add(n);
    }
}

/// Health of a group on a partition, from best to worst: a group's status is the
/// worst of its partitions'.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Caught up, or consuming with lag that shrinks.
    Ok,
    /// Not enough fresh data to tell: lag unknown or unconfirmed. Never ok.
    Stale,
    /// Waiting at the last stable offset, held by an open transaction: the group
    /// reads `read_committed` and cannot pass it. Not the group's fault.
    Blocked,
    /// Lagging and the lag never decreased over the window.
    Warn,
    /// The group's committed offset went backwards.
    Rewind,
    /// Committing the same offset while lagging.
    Stall,
    /// Not committing while lagging.
    Stop,
    /// The committed offset is below the log start: retention deleted unread records.
    DataLoss,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Stale => "stale",
            Status::Blocked => "blocked",
            Status::Warn => "warn",
            Status::Rewind => "rewind",
            Status::Stall => "stall",
            Status::Stop => "stop",
            Status::DataLoss => "data_loss",
        }
    }
}

/// The open transaction holding a partition's last stable offset, as the
/// broker names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenTransaction {
    pub producer_id: i64,
    pub producer_epoch: i32,
    /// Where the transaction's first record on the partition is: the last
    /// stable offset while it is open.
    pub first_offset: i64,
    /// Where the transaction coordinator answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactional_id: Option<Arc<str>>,
    /// The transaction's timeout: its coordinator aborts it once it has been
    /// open this long.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<i32>,
}

impl OpenTransaction {
    /// Who holds it, in words: `transactional id "tx" (producer 7, epoch 0)`.
    pub fn holder(&self) -> String {
        match &self.transactional_id {
            Some(id) => format!(
                "transactional id {id:?} (producer {}, epoch {})",
                self.producer_id, self.producer_epoch
            ),
            None => format!("producer {} (epoch {})", self.producer_id, self.producer_epoch),
        }
    }
}

/// Lag and health of one group on one partition at one moment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LagReport {
    /// Next offset the group will read, as last committed.
    pub committed_offset: Option<i64>,
    /// The partition's end offset: the max of what producers and brokers reported.
    pub end_offset: Option<i64>,
    pub log_start_offset: Option<i64>,
    /// `None` when unknown, which is never the same as 0.
    pub lag_messages: Option<i64>,
    /// Age of the oldest unread record; `None` when unknown.
    pub lag_seconds: Option<f64>,
    /// The oldest unread record predates the history: `lag_seconds` is at least this.
    pub lag_seconds_lower_bound: bool,
    pub status: Status,
    /// Failed sends are being reported for this partition (or its topic).
    pub producer_failing: bool,
    /// Records deleted by retention before this group read them, in total.
    pub data_loss_messages: i64,
    /// The only record left is a transaction control marker: not lag.
    pub at_control_marker: bool,
    /// The partition's leader did not answer the last poll: nothing is confirmed.
    pub broker_unreachable: bool,
    #[serde(rename = "last_commit_at_ms")]
    pub last_commit_at: Option<Millis>,
    /// When any source last confirmed the end offset.
    #[serde(rename = "end_offset_at_ms")]
    pub end_offset_at: Option<Millis>,
    /// The partition's last stable offset, where a poller asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stable_offset: Option<i64>,
    /// Since when an open transaction has held the last stable offset below the
    /// end offset, once it has for `open_transaction_after`.
    #[serde(
        default,
        rename = "open_transaction_since_ms",
        skip_serializing_if = "Option::is_none"
    )]
    pub open_transaction_since: Option<Millis>,
    /// The open transaction holding the last stable offset, as the broker
    /// names it, once it has held it for `open_transaction_after`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_transaction: Option<Arc<OpenTransaction>>,
    /// Since when the group's coordinator has described it with no live
    /// member: nothing reads what it is behind.
    #[serde(default, rename = "no_members_since_ms", skip_serializing_if = "Option::is_none")]
    pub no_members_since: Option<Millis>,
}

/// A group-partition's report with its names: the one row `/api/v1/lag`, Burrow's
/// API, `streamsight lag` and replay speak.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LagRow {
    pub cluster: String,
    pub group: String,
    pub topic: String,
    pub partition: i32,
    #[serde(flatten)]
    pub report: LagReport,
    /// The member that owns the partition, where a poller described the group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consumer: Option<Consumer>,
}

/// A group's member that owns a partition, as the poller last saw the group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Consumer {
    pub group_state: Option<String>,
    /// `classic`, `consumer` (KIP-848), `share`, where the broker says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_type: Option<String>,
    pub member_id: Option<String>,
    pub client_id: Option<String>,
    pub host: Option<String>,
}

/// The evidence a topic reset was accepted on.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetEvidence {
    /// The broker's end offset went backwards and stayed there.
    EndOffsetDecreased,
    /// The broker's log start offset went backwards and stayed there.
    LogStartDecreased,
    /// The topic was deleted and created again.
    TopicRecreated,
}

/// Something users should see happened, in the order it was detected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EngineEvent {
    TopicReset {
        at: Millis,
        cluster: String,
        topic: String,
        partition: i32,
        previous_end: Option<i64>,
        new_end: Option<i64>,
        evidence: ResetEvidence,
    },
    DataLoss {
        at: Millis,
        cluster: String,
        group: String,
        topic: String,
        partition: i32,
        /// Records newly known to be lost.
        messages: i64,
        committed_offset: i64,
        log_start_offset: i64,
    },
}

impl EngineEvent {
    pub fn at(&self) -> Millis {
        match self {
            EngineEvent::TopicReset { at, .. } | EngineEvent::DataLoss { at, .. } => *at,
        }
    }

    /// The topic it happened to: what shard it is of.
    pub fn topic(&self) -> &str {
        match self {
            EngineEvent::TopicReset { topic, .. } | EngineEvent::DataLoss { topic, .. } => topic,
        }
    }
}
