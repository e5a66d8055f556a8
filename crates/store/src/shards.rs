//! A sharded log (`mode=sharded`): each node holds only the log partitions
//! (shards) Kafka's group protocol assigns it. Every node joins one consumer
//! group over the log topic (`TOPIC-shards`, cooperative-sticky, so a rebalance
//! moves only what must move); a shard it gains is read from its start, since
//! the group never commits, and one it loses is forgotten by rebuilding from
//! the shards it keeps. The global topic (alerts, audit) is read whole by every
//! node. A node applies what it reads here, its own appends included, and
//! nothing else: what it appends to a shard it does not hold is another's.

use crate::kafka::{KafkaUrl, decode, kafka, lock};
use crate::{Follow, Followed, StoreError};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
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

/// A shard held: where its replay ends (the end offset when it was gained).
#[derive(Debug)]
struct Held {
    end: i64,
    caught_up: bool,
}

/// Shards read again from their start after a loss, up to where the group's
/// consumer had read them.
struct Rebuild {
    consumer: BaseConsumer,
    ends: BTreeMap<i32, i64>,
}

/// Follows a sharded log: the global topic, and the shards assigned to this node.
pub struct ShardFollow {
    url: KafkaUrl,
    global: BaseConsumer,
    group: BaseConsumer<ShardContext>,
    changes: Arc<Changes>,
    held: BTreeMap<i32, Held>,
    rebuild: Option<Rebuild>,
    pending: VecDeque<Followed>,
    since: Millis,
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
    pub fn join(url: &KafkaUrl, global: BaseConsumer, since: Millis) -> Result<Self, StoreError> {
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
        Ok(Self {
            url: url.clone(),
            global,
            group,
            changes,
            held: BTreeMap::new(),
            rebuild: None,
            pending: VecDeque::new(),
            since,
        })
    }

    /// Turns what the rebalance callbacks said into events; whether shards were lost.
    fn rebalanced(&mut self) -> Result<bool, StoreError> {
        let mut lost_any = false;
        let changes = std::mem::take(&mut *lock(&self.changes.0));
        for (assigned, partitions) in changes {
            if assigned {
                let mut gained = Vec::new();
                for p in partitions {
                    // Where the shard's replay ends; unknown (the brokers did not
                    // say in time), it ends at the shard's EOF instead.
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
                            caught_up: high <= low,
                        },
                    );
                    gained.push(p as u32);
                }
                tracing::info!(shards = ?gained, pid = std::process::id(), "shards gained");
                self.pending.push_back(Followed::Gained(gained.clone()));
                for p in gained {
                    if self.held[&(p as i32)].caught_up {
                        self.pending.push_back(Followed::CaughtUp(p));
                    }
                }
            } else {
                for p in &partitions {
                    self.held.remove(p);
                }
                tracing::info!(shards = ?partitions, kept = self.held.len(), pid = std::process::id(), "shards lost: rebuilding from the others");
                self.pending.push_back(Followed::Reset {
                    lost: partitions.iter().map(|p| *p as u32).collect(),
                });
                self.start_rebuild()?;
                lost_any = true;
            }
        }
        Ok(lost_any)
    }

    /// Reads the shards still held from their start up to where the group's
    /// consumer is, on a consumer of its own.
    fn start_rebuild(&mut self) -> Result<(), StoreError> {
        self.rebuild = None;
        let mut positions = TopicPartitionList::new();
        for p in self.held.keys() {
            positions.add_partition(&self.url.topic, *p);
        }
        let positions = self.group.position().unwrap_or(positions);
        let mut ends = BTreeMap::new();
        let mut assignment = TopicPartitionList::new();
        for e in positions.elements_for_topic(&self.url.topic) {
            if let (true, Offset::Offset(end)) = (self.held.contains_key(&e.partition()), e.offset())
                && end > 0
            {
                ends.insert(e.partition(), end);
                assignment
                    .add_partition_offset(&self.url.topic, e.partition(), Offset::Beginning)
                    .map_err(kafka)?;
            }
        }
        if ends.is_empty() {
            self.rebuilt();
            return Ok(());
        }
        let consumer: BaseConsumer = self
            .url
            .client()
            .set("group.id", "streamsight-replay")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .create()
            .map_err(kafka)?;
        consumer.assign(&assignment).map_err(kafka)?;
        self.rebuild = Some(Rebuild { consumer, ends });
        Ok(())
    }

    /// Once the shards kept are rebuilt, those that were caught up are again.
    fn rebuilt(&mut self) {
        let caught_up = self.held.iter().filter(|(_, h)| h.caught_up);
        let events: Vec<Followed> = caught_up.map(|(p, _)| Followed::CaughtUp(*p as u32)).collect();
        self.pending.extend(events);
    }

    /// The next records of a rebuild, if one is under way.
    fn next_rebuilt(&mut self, wait: Duration) -> Result<Option<Followed>, StoreError> {
        let Some(rebuild) = &mut self.rebuild else {
            return Ok(None);
        };
        let deadline = Instant::now() + self.url.timeout;
        loop {
            if rebuild.ends.is_empty() {
                self.rebuild = None;
                self.rebuilt();
                return Ok(self.pending.pop_front());
            }
            match rebuild.consumer.poll(wait.max(Duration::from_millis(10))) {
                None if Instant::now() > deadline => {
                    return Err(StoreError::Kafka(format!(
                        "rebuilding shards {:?}: no progress for {:?}",
                        rebuild.ends.keys().collect::<Vec<_>>(),
                        self.url.timeout
                    )));
                }
                None => {}
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    rebuild.ends.remove(&p);
                }
                Some(Err(e)) => return Err(kafka(e)),
                Some(Ok(m)) => {
                    let p = m.partition();
                    match rebuild.ends.get(&p) {
                        Some(end) if m.offset() < *end => {
                            if m.offset() + 1 >= *end {
                                rebuild.ends.remove(&p);
                            }
                            return Ok(Some(Followed::Records(fresh(&m, self.since))));
                        }
                        _ => {
                            rebuild.ends.remove(&p);
                        }
                    }
                }
            }
        }
    }
}

impl Follow for ShardFollow {
    fn next(&mut self, wait: Duration) -> Result<Option<Followed>, StoreError> {
        if let Some(event) = self.pending.pop_front() {
            return Ok(Some(event));
        }
        if self.rebuild.is_some() {
            return self.next_rebuilt(wait);
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
        // A message polled with a loss is either of a lost shard or counted in
        // the rebuild's range (the consumer's position is past it).
        if self.rebalanced()? {
            return Ok(self.pending.pop_front());
        }
        match polled {
            None => {}
            Some((p, None)) => {
                if let Some(held) = self.held.get_mut(&p)
                    && !held.caught_up
                {
                    held.caught_up = true;
                    self.pending.push_back(Followed::CaughtUp(p as u32));
                }
            }
            Some((p, Some((offset, records)))) => {
                // A message of a shard not held (lost in an earlier poll) is another's.
                if let Some(held) = self.held.get_mut(&p) {
                    let caught_up = !held.caught_up && offset + 1 >= held.end;
                    held.caught_up |= caught_up;
                    self.pending.push_back(Followed::Records(records));
                    if caught_up {
                        self.pending.push_back(Followed::CaughtUp(p as u32));
                    }
                }
            }
        }
        Ok(self.pending.pop_front())
    }

    fn includes_own(&self) -> bool {
        true
    }
}
