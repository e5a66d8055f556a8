//! What the engine keeps per topic, partition, group and group-partition.

use super::*;

/// Bytes a partition costs besides its history points: its state, and its entries
/// in the partition table and its topic's list, counted twice for the slack a hash
/// table and a growing list keep, and a share of the name table.
pub const PARTITION_FIXED_BYTES: usize = std::mem::size_of::<PartitionState>()
    + 2 * (std::mem::size_of::<((TopicId, i32), PartitionId)>() + 1)
    + 2 * std::mem::size_of::<PartitionId>()
    + 64;

#[derive(Debug)]
pub(super) struct TopicState {
    pub(super) cluster: NameId,
    pub(super) name: NameId,
    pub(super) partitions: Vec<PartitionId>,
    /// Last failed send that had no partition assigned: counts for every partition.
    pub(super) unassigned_failure_at: Option<Millis>,
    /// Time retention in ms as the topic's settings say (-1: none); None unknown.
    pub(super) retention_ms: Option<i64>,
}

/// A lower broker answer waiting for confirmation before it is believed.
#[derive(Copy, Clone, Debug, serde::Serialize, serde::Deserialize)]
pub(super) struct PendingReset {
    pub(super) seen: u32,
}

#[derive(Debug)]
pub(super) struct PartitionState {
    pub(super) topic: TopicId,
    pub(super) partition: i32,
    pub(super) history: OffsetHistory,
    pub(super) end_seen_at: Option<Millis>,
    /// The broker's own highest end offset since the last reset.
    pub(super) broker_end_max: Option<i64>,
    /// The broker's last answer, for the control-marker inference.
    pub(super) broker_end: Option<i64>,
    /// Highest end offset produce acks prove (acked offset + 1).
    pub(super) acked_end: Option<i64>,
    /// On a partition the broker is asked about: the lowest produce ack beyond
    /// the broker's last answer, held until an answer reaches it.
    pub(super) unconfirmed: Option<(i64, Millis)>,
    pub(super) log_start: Option<i64>,
    /// Offsets that hold nothing a reader is handed (markers, aborted
    /// records), as last read at a commit.
    pub(super) unreadable: Unreadable,
    /// The last stable offset and since when it has stood there below the end.
    pub(super) stable: StableOffset,
    pub(super) pending_end_reset: Option<PendingReset>,
    pub(super) pending_log_start_reset: Option<PendingReset>,
    pub(super) last_failure_at: Option<Millis>,
    pub(super) last_success_at: Option<Millis>,
    /// The leader did not answer since this time; cleared by the broker's next answer.
    pub(super) unreachable_since: Option<Millis>,
    /// Forgotten (its topic was deleted): kept as a tombstone so ids stay valid.
    pub(super) deleted: bool,
    /// The groups that committed on this partition. Scanned rather than hashed:
    /// partitions have few groups, and a table entry would cost more than this.
    pub(super) groups: Vec<(GroupId, GroupPartitionId)>,
}

#[derive(Debug)]
pub(super) struct GroupState {
    pub(super) cluster: NameId,
    pub(super) name: NameId,
    pub(super) partitions: Vec<GroupPartitionId>,
    /// Forgotten: kept as a tombstone so ids stay valid.
    pub(super) deleted: bool,
    /// Since when its coordinator describes it with no live member.
    pub(super) no_members_since: Option<Millis>,
}

#[derive(Debug)]
pub(super) struct GroupPartitionState {
    pub(super) group: GroupId,
    pub(super) partition: PartitionId,
    pub(super) window: CommitWindow,
}

/// Records a group lost to retention on one partition. Rare, so kept aside.
#[derive(Copy, Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct Loss {
    /// Offsets below this have been counted already.
    pub(super) counted_upto: i64,
    pub(super) messages: i64,
}

/// Live things per cluster, against the cardinality limits.
#[derive(Debug, Default)]
pub(super) struct ClusterUsage {
    pub(super) topics: usize,
    pub(super) groups: usize,
}

#[derive(Debug, Default)]
pub(super) struct Usage {
    pub(super) clusters: Map<NameId, ClusterUsage>,
    pub(super) partitions: usize,
    pub(super) group_partitions: usize,
}

/// Offsets `from..to` hold no record a `read_committed` reader is handed.
/// Two plain words (no offset is negative) for what an option of a pair would
/// double, as [`StableOffset`].
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Unreadable {
    from: i64,
    to: i64,
}

impl Default for Unreadable {
    fn default() -> Self {
        Self::NONE
    }
}

impl Unreadable {
    pub(super) const NONE: Self = Self { from: -1, to: -1 };

    pub(super) fn new(from: i64, to: i64) -> Self {
        if 0 <= from && from < to {
            Self { from, to }
        } else {
            Self::NONE
        }
    }

    /// Where what a reader at `offset` waits for starts, when `offset` is in
    /// the run.
    pub(super) fn readable_after(self, offset: i64) -> Option<i64> {
        (self.from <= offset && offset < self.to).then_some(self.to)
    }

    /// The run as (from, to), if any.
    pub(super) fn range(self) -> Option<(i64, i64)> {
        (self.from >= 0).then_some((self.from, self.to))
    }
}

/// A partition's last stable offset as the poller last read it. Two plain words
/// (offsets are never negative; no time is `i64::MIN`) rather than two options,
/// which would double what every partition pays for it out of its history budget.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct StableOffset {
    offset: i64,
    held_since: i64,
}

impl Default for StableOffset {
    fn default() -> Self {
        Self::NONE
    }
}

impl StableOffset {
    pub(super) const NONE: Self = Self {
        offset: -1,
        held_since: i64::MIN,
    };

    /// The broker answered `offset` at `at`, with the end offset `end`: a stable
    /// offset below the end keeps the time it was first seen there.
    pub(super) fn observe(self, offset: i64, end: Option<i64>, at: Millis) -> Self {
        let below_end = end.is_some_and(|end| offset < end);
        let held_since = match self.held_since() {
            Some(since) if self.offset == offset && below_end => since,
            _ if below_end => at,
            _ => Millis(i64::MIN),
        };
        Self {
            offset,
            held_since: held_since.0,
        }
    }

    pub(super) fn offset(self) -> Option<i64> {
        (self.offset >= 0).then_some(self.offset)
    }

    /// Since when the offset has stood below the end offset.
    pub(super) fn held_since(self) -> Option<Millis> {
        (self.held_since != i64::MIN).then_some(Millis(self.held_since))
    }
}
