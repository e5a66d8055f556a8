//! A sharded log (`mode=sharded`): each node holds only the log partitions
//! (shards) Kafka's group protocol assigns it. Every node joins one consumer
//! group over the log topic (`TOPIC-shards`, cooperative-sticky, so a rebalance
//! moves only what must move); a shard it gains is taken in from its last
//! snapshot (see `snapshots`) and read from there, or from its start when it
//! has none, since the group never commits; one it loses is forgotten, and
//! what it keeps stays as built. The holder of a shard snapshots it now and
//! then. The global topic (alerts, audit) is read whole by every node. A node
//! applies what it reads here, its own appends included, and nothing else:
//! what it appends to a shard it does not hold is another's.
//!
//! A node paused for longer than the group's session (see `pause`) lets go of
//! every shard it held once it runs again, forgetting what it built of them,
//! and rejoins the group: what it built is from before the pause, and the
//! shards may have moved meanwhile. Until the pause watch has woken after
//! the pause, it follows nothing.

use crate::backend::{Follow, Followed, StoreError};
use crate::client::{KafkaUrl, decode, kafka, lock};
use crate::pause::{PauseWatch, TICK};
use crate::snapshots::{SnapshotCounts, SnapshotReader, SnapshotWriter};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use streamsight_core::shard::{ShardState, Shards};
use streamsight_core::{Millis, Record};

/// How soon a dead node's shards are assigned to others.
const SESSION_TIMEOUT_MS: &str = "6000";

/// What the group's rebalance callbacks said, in order, for the follower's thread.
#[derive(Debug, Default)]
struct Changes(Mutex<Vec<(bool, Vec<i32>)>>);

struct ShardContext(Arc<Changes>);

impl ClientContext for ShardContext {}

impl ConsumerContext for ShardContext {
    fn post_rebalance(&self, _: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let partitions = |tpl: &TopicPartitionList| tpl.elements().iter().map(|e| e.partition()).collect();
        let change = match rebalance {
            Rebalance::Assign(tpl) => (true, partitions(tpl)),
            Rebalance::Revoke(tpl) => (false, partitions(tpl)),
            Rebalance::Error(e) => {
                tracing::warn!(error = %e, "shards rebalance failed");
                return;
            }
        };
        lock(&self.0.0).push(change);
    }
}

/// A shard held.
#[derive(Debug)]
struct Held {
    /// Where its catching up ends (the end offset when it was gained).
    end: i64,
    caught_up: bool,
    /// Where its records are read from (its snapshot's offset, else 0):
    /// earlier messages, fetched before the seek, are not its.
    from: i64,
    /// The offset after the last message handed over.
    handed: i64,
    /// The offset after the last message queued to be handed over: one
    /// fetched below it was applied already. librdkafka was seen (issue 28's
    /// checker, a node paused past its session) to fetch a held shard again
    /// from an earlier offset with no rebalance callback between; applying
    /// those messages again counted them twice.
    queued: i64,
    /// Messages below `queued` are being dropped (said once a run).
    refetched: bool,
    /// `handed` when its last snapshot was offered.
    saved: i64,
    /// The snapshot slot to write next: not the one its manifest names.
    slot: u8,
    /// Gained, its snapshot not looked up yet: its messages wait.
    restoring: bool,
    /// A message of it was fetched (and dropped) while restoring: it must
    /// be fetched again.
    refetch: bool,
}

impl Held {
    /// Whether an end of partition reached, with the consumer's position
    /// then (`None` unknown), means the shard is caught up. An EOF fetched
    /// before a gained shard's seek (to its snapshot, or back to its start)
    /// can be polled after it: it says nothing of the messages between the
    /// seek and the end, so the end must have been handed over or passed.
    fn eof_catches_up(&self, position: Option<i64>) -> bool {
        self.end == i64::MAX || self.handed >= self.end || position.is_some_and(|at| at >= self.end)
    }
}

/// How snapshots are written and read, when they are.
#[derive(Debug)]
struct Snapshotting {
    writer: SnapshotWriter,
    reader: SnapshotReader,
    every: Duration,
    last: Instant,
}

/// Follows a sharded log: the global topic, and the shards assigned to this node.
pub struct ShardFollow {
    url: KafkaUrl,
    global: BaseConsumer,
    group: BaseConsumer<ShardContext>,
    changes: Arc<Changes>,
    held: BTreeMap<i32, Held>,
    /// Events to hand over, with the shard position each one ends at.
    pending: VecDeque<(Followed, Option<(i32, i64)>)>,
    /// Shards gained whose snapshots are looked up once `Gained` is handed over.
    restoring: Vec<i32>,
    since: Millis,
    shards: u32,
    snapshots: Option<Snapshotting>,
    counts: Arc<SnapshotCounts>,
    /// The pauses of this process already acted on.
    pauses: u64,
}

impl std::fmt::Debug for ShardFollow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardFollow")
            .field("topic", &self.url.topic)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

/// The records of a log message at or after `since`.
fn fresh(m: &rdkafka::message::BorrowedMessage<'_>, since: Millis) -> Vec<Record> {
    let mut records = decode(m);
    records.retain(|r| r.at() >= since);
    records
}

impl ShardFollow {
    /// Joins the shards' group; `global` is the global topic's consumer where
    /// its replay ended, and records older than `since` are not handed over.
    pub fn join(url: &KafkaUrl, global: BaseConsumer, since: Millis, shards: u32) -> Result<Self, StoreError> {
        let changes = Arc::new(Changes::default());
        let group: BaseConsumer<ShardContext> = url
            .client()
            .set("group.id", url.shards_group())
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            .set("enable.partition.eof", "true")
            .set("partition.assignment.strategy", "cooperative-sticky")
            .set("session.timeout.ms", SESSION_TIMEOUT_MS)
            .set("heartbeat.interval.ms", "1000")
            .create_with_context(ShardContext(changes.clone()))
            .map_err(kafka)?;
        group.subscribe(&[&url.topic]).map_err(kafka)?;
        let counts = Arc::new(SnapshotCounts::default());
        let snapshots = match url.snapshot_every {
            Some(every) if crate::snapshots::ensure_topics(url, shards)? => Some(Snapshotting {
                writer: SnapshotWriter::start(url, counts.clone())?,
                reader: SnapshotReader::new(url, url.max_snapshot_bytes, counts.clone())?,
                every,
                last: Instant::now(),
            }),
            _ => None,
        };
        Ok(Self {
            url: url.clone(),
            global,
            group,
            changes,
            held: BTreeMap::new(),
            pending: VecDeque::new(),
            restoring: Vec::new(),
            since,
            shards,
            snapshots,
            counts,
            pauses: PauseWatch::get().pauses(),
        })
    }

    /// After a pause: every shard let go and what was built of them
    /// forgotten (`Lost` keeping none), what was waiting to be handed over
    /// dropped, and the group joined again.
    fn let_go(&mut self) {
        let lost: Vec<u32> = self.held.keys().map(|p| *p as u32).collect();
        tracing::warn!(shards = ?lost, pid = std::process::id(), "shards let go after a pause: rejoining the group");
        self.held.clear();
        self.pending.clear();
        self.restoring.clear();
        lock(&self.changes.0).clear();
        self.group.unsubscribe();
        if let Err(e) = self.group.subscribe(&[&self.url.topic]) {
            tracing::warn!(error = %e, "shards: rejoining the group failed");
        }
        self.push(Followed::Lost {
            lost,
            kept: Shards {
                count: self.shards,
                held: std::collections::BTreeSet::new(),
            },
        });
    }

    fn push(&mut self, event: Followed) {
        self.pending.push_back((event, None));
    }

    /// Takes gained shards in from their snapshots, those that have one;
    /// where each one's records are read from.
    fn restore(&mut self, gained: &[i32]) -> BTreeMap<i32, i64> {
        let Some(snapshots) = self.snapshots.as_ref().filter(|_| !gained.is_empty()) else {
            return BTreeMap::new();
        };
        let started = Instant::now();
        let shards: Vec<u32> = gained.iter().map(|p| *p as u32).collect();
        let found = match snapshots.reader.read(&shards) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(shards = ?shards, error = %e, "snapshots not read: the shards are read from their start");
                return BTreeMap::new();
            }
        };
        let mut from = BTreeMap::new();
        for (shard, (manifest, state)) in found {
            let p = shard as i32;
            let seek = self
                .group
                .seek(&self.url.topic, p, Offset::Offset(manifest.offset), self.url.timeout);
            if let Err(e) = seek {
                tracing::warn!(shard, error = %e, "cannot read on from the snapshot: the shard is read from its start");
                continue;
            }
            tracing::info!(shard, offset = manifest.offset, bytes = manifest.bytes, took = ?started.elapsed(), "shard taken in from its snapshot");
            self.push(Followed::Restored {
                shard,
                state: Box::new(state),
            });
            if let Some(held) = self.held.get_mut(&p) {
                held.slot = 1 - manifest.slot.min(1);
            }
            from.insert(p, manifest.offset);
        }
        from
    }

    /// The group consumer's position on shard `p`, where it knows one.
    fn position(&self, p: i32) -> Option<i64> {
        let positions = self.group.position().ok()?;
        let at = positions.find_partition(&self.url.topic, p)?.offset();
        match at {
            Offset::Offset(at) => Some(at),
            _ => None,
        }
    }

    /// Turns what the rebalance callbacks said into events.
    fn rebalanced(&mut self) {
        let changes = std::mem::take(&mut *lock(&self.changes.0));
        for (assigned, partitions) in changes {
            if assigned {
                for &p in &partitions {
                    // Where the shard's catching up ends; unknown (the brokers
                    // did not say in time), it ends at the shard's EOF instead.
                    let (low, high) = self
                        .group
                        .fetch_watermarks(&self.url.topic, p, self.url.timeout)
                        .unwrap_or_else(|e| {
                            tracing::warn!(shard = p, error = %e, "no end offset for a gained shard: caught up at its end");
                            (0, i64::MAX)
                        });
                    self.held.insert(
                        p,
                        Held {
                            end: high,
                            caught_up: false,
                            from: 0,
                            handed: low,
                            queued: low,
                            refetched: false,
                            saved: low,
                            slot: 0,
                            restoring: true,
                            refetch: false,
                        },
                    );
                }
                let gained: Vec<u32> = partitions.iter().map(|p| *p as u32).collect();
                tracing::info!(shards = ?gained, pid = std::process::id(), "shards gained");
                self.push(Followed::Gained(gained));
                self.restoring.extend(partitions);
            } else {
                for p in &partitions {
                    self.held.remove(p);
                }
                tracing::info!(shards = ?partitions, kept = self.held.len(), pid = std::process::id(), "shards lost");
                let kept = Shards {
                    count: self.shards,
                    held: self.held.keys().map(|p| *p as u32).collect(),
                };
                self.push(Followed::Lost {
                    lost: partitions.iter().map(|p| *p as u32).collect(),
                    kept,
                });
            }
        }
    }

    /// Takes the shards gained in from their snapshots; those without one
    /// are read from their start.
    fn finish_gains(&mut self) {
        let gained: Vec<i32> = std::mem::take(&mut self.restoring)
            .into_iter()
            .filter(|p| self.held.contains_key(p))
            .collect();
        let restored = self.restore(&gained);
        for p in gained {
            let Some(held) = self.held.get_mut(&p) else { continue };
            held.restoring = false;
            held.from = restored.get(&p).copied().unwrap_or(0);
            if held.refetch && !restored.contains_key(&p) {
                let seek = self.group.seek(&self.url.topic, p, Offset::Beginning, self.url.timeout);
                if let Err(e) = seek {
                    tracing::error!(shard = p, error = %e, "cannot read a gained shard from its start: its first messages are missing");
                }
            }
            held.handed = held.handed.max(held.from);
            held.queued = held.handed;
            held.saved = held.handed;
            held.caught_up = held.end <= held.handed;
            if held.caught_up {
                self.pending.push_back((Followed::CaughtUp(p as u32), None));
            }
        }
    }

    /// Whether the message at `offset` of held shard `p` was not queued
    /// before (then it is now); one fetched again is dropped, and said once
    /// a run.
    fn first_time(held: &mut Held, p: i32, offset: i64) -> bool {
        if offset < held.queued {
            if !held.refetched {
                tracing::warn!(
                    shard = p,
                    offset,
                    next = held.queued,
                    "messages of a held shard fetched again: dropped up to the next one, they were applied"
                );
            }
            held.refetched = true;
            return false;
        }
        held.refetched = false;
        held.queued = offset + 1;
        true
    }

    /// The next event, with the shard position it hands over.
    fn pop(&mut self) -> Option<Followed> {
        let (event, position) = self.pending.pop_front()?;
        if let Some((p, next)) = position
            && let Some(held) = self.held.get_mut(&p)
        {
            held.handed = held.handed.max(next);
        }
        Some(event)
    }
}

impl Follow for ShardFollow {
    fn next(&mut self, wait: Duration) -> Result<Option<Followed>, StoreError> {
        let watch = PauseWatch::get();
        if !watch.awake() {
            // Maybe just resumed: nothing handed over until the watch says.
            std::thread::sleep(wait.min(TICK));
            return Ok(None);
        }
        if watch.pauses() != self.pauses {
            self.pauses = watch.pauses();
            self.let_go();
        }
        if let Some(event) = self.pop() {
            return Ok(Some(event));
        }
        if !self.restoring.is_empty() {
            self.finish_gains();
            if let Some(event) = self.pop() {
                return Ok(Some(event));
            }
        }
        // Every node needs the global records; they are few.
        match self.global.poll(Duration::ZERO) {
            Some(Ok(m)) => return Ok(Some(Followed::Records(fresh(&m, self.since)))),
            Some(Err(KafkaError::PartitionEOF(_))) | None => {}
            Some(Err(e)) => return Err(kafka(e)),
        }
        let polled = match self.group.poll(wait) {
            None => None,
            Some(Err(KafkaError::PartitionEOF(p))) => Some((p, None)),
            Some(Err(e)) => return Err(kafka(e)),
            Some(Ok(m)) => Some((m.partition(), Some((m.offset(), fresh(&m, self.since))))),
        };
        // A message polled with a loss is of a lost shard, or one of a kept
        // shard that is applied after what was built is trimmed to the kept.
        self.rebalanced();
        match polled {
            None => {}
            Some((p, None)) => {
                let position = self.position(p);
                if let Some(held) = self.held.get_mut(&p)
                    && !held.caught_up
                    && !held.restoring
                    && held.eof_catches_up(position)
                {
                    held.caught_up = true;
                    self.pending.push_back((Followed::CaughtUp(p as u32), None));
                }
            }
            Some((p, Some((offset, records)))) => {
                // A message of a shard not held (lost in an earlier poll) is
                // another's; one before the snapshot was fetched before the seek.
                if let Some(held) = self.held.get_mut(&p)
                    && held.restoring
                {
                    held.refetch = true;
                } else if let Some(held) = self.held.get_mut(&p)
                    && offset >= held.from
                    && Self::first_time(held, p, offset)
                {
                    if !held.caught_up {
                        self.counts
                            .replayed_messages
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    let caught_up = !held.caught_up && offset + 1 >= held.end;
                    held.caught_up |= caught_up;
                    self.pending
                        .push_back((Followed::Records(records), Some((p, offset + 1))));
                    if caught_up {
                        self.pending.push_back((Followed::CaughtUp(p as u32), None));
                    }
                }
            }
        }
        Ok(self.pop())
    }

    fn includes_own(&self) -> bool {
        true
    }

    fn due(&mut self) -> Vec<Shards> {
        // Nothing snapshotted from before a pause not yet acted on.
        if !PauseWatch::get().trusts(self.pauses) {
            return Vec::new();
        }
        let Some(snapshots) = &mut self.snapshots else {
            return Vec::new();
        };
        if !self.pending.is_empty() || snapshots.last.elapsed() < snapshots.every {
            return Vec::new();
        }
        snapshots.last = Instant::now();
        let moved = self.held.iter().filter(|(_, h)| h.caught_up && h.handed > h.saved);
        moved.map(|(p, _)| Shards::one(self.shards, *p as u32)).collect()
    }

    fn save(&mut self, shard: &Shards, state: ShardState) {
        // Paused between `due` and here: the state may be from before it.
        if !PauseWatch::get().trusts(self.pauses) {
            return;
        }
        let (Some(snapshots), Some(&p)) = (&self.snapshots, shard.held.first()) else {
            return;
        };
        let Some(held) = self.held.get_mut(&(p as i32)) else {
            return;
        };
        if snapshots.writer.offer(p, held.handed, held.slot, state) {
            held.saved = held.handed;
            held.slot = 1 - held.slot;
        }
    }

    fn snapshot_counts(&self) -> Option<Arc<SnapshotCounts>> {
        self.snapshots.as_ref().map(|_| self.counts.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::{Held, ShardFollow};

    #[test]
    fn a_message_fetched_again_is_not_handed_over_twice() {
        let mut h = held(i64::MAX, 10);
        assert!(ShardFollow::first_time(&mut h, 1, 10));
        assert!(ShardFollow::first_time(&mut h, 1, 11));
        // The consumer fetched the shard again from an earlier offset.
        for offset in [5, 6, 10, 11] {
            assert!(!ShardFollow::first_time(&mut h, 1, offset), "{offset}");
        }
        assert!(h.refetched);
        // Then on past where it was.
        assert!(ShardFollow::first_time(&mut h, 1, 12));
        assert!(!h.refetched);
        assert_eq!(h.queued, 13);
    }

    fn held(end: i64, handed: i64) -> Held {
        Held {
            end,
            caught_up: false,
            from: 0,
            handed,
            queued: handed,
            refetched: false,
            saved: handed,
            slot: 0,
            restoring: false,
            refetch: false,
        }
    }

    #[test]
    fn an_eof_from_before_the_seek_does_not_catch_a_shard_up() {
        // Gained at end 50, taken in from a snapshot at 20: the consumer was
        // sought back to 20, and an EOF it fetched before says nothing.
        assert!(!held(50, 20).eof_catches_up(Some(20)));
        assert!(!held(50, 20).eof_catches_up(None));
        // Every message up to the end handed over, or read past.
        assert!(held(50, 50).eof_catches_up(None));
        assert!(held(50, 20).eof_catches_up(Some(50)));
        // An end never learned: the first EOF is the end.
        assert!(held(i64::MAX, 0).eof_catches_up(None));
    }
}
