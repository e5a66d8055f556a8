//! The log in a Kafka topic: `kafka://HOST:PORT[,HOST:PORT]/TOPIC`.
//!
//! A writer batch becomes one message per shard it touches (more when large):
//! records are split by [`Record::shard`], i.e. by the Kafka topic they are
//! about, so that one log partition holds everything about a topic and a node
//! that owns the partition can rebuild that topic's state from it alone.
//! Appends go through an idempotent producer with `acks=all` and return once every
//! message is acknowledged, so a 2xx still means stored. Retention is the topic's:
//! `delete_before` deletes nothing.
//!
//! Query parameters: `partitions` (when the topic is created; 12 by default),
//! `replication` (1), `timeout_ms` (10,000: how long an append or a scan may wait
//! for the brokers before failing), `mode` (`replicated`, `sharded`), on a
//! sharded log `snapshot_ms` (60,000; 0: no snapshots) and `max_snapshot_bytes`
//! (1 GiB); any other `key=value` is a librdkafka property (security
//! settings, for one).

use crate::backend::{Follow, Scanned, Store, StoreError};
use crate::client::{KafkaUrl, decode, ensure_topic, kafka, lock, node_name};
use crate::codec;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use streamsight_core::{Millis, Record, Route};

/// A message's encoded records stay under this: brokers refuse messages over
/// `message.max.bytes` (1 MB by default).
const MAX_MESSAGE_BYTES: usize = 512 << 10;
/// Acknowledgements of the messages of the append in progress, reported on
/// the producer's own polling thread and waited for by the writer.
#[derive(Default)]
struct Acks {
    state: Mutex<AckState>,
    reported: Condvar,
}

#[derive(Default)]
struct AckState {
    done: usize,
    failed: Vec<String>,
}

impl ClientContext for Acks {}

impl ProducerContext for Acks {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let mut state = lock(&self.state);
        if let Err((e, _)) = result {
            state.failed.push(e.to_string());
        }
        state.done += 1;
        self.reported.notify_all();
    }
}

/// The header naming the process that appended a message: a node applies its
/// own appends when it makes them, and what others append as it follows the log.
const NODE_HEADER: &str = "streamsight-node";

pub struct KafkaStore {
    url: KafkaUrl,
    /// This store's name in [`NODE_HEADER`]: unique per process and opening.
    node: String,
    /// Where following starts once a scan has read the log to its end.
    tail: Option<Box<dyn Follow>>,
    producer: ThreadedProducer<Acks>,
    /// The log topic's partition count, as the brokers report it.
    partitions: u32,
    buffer: Vec<u8>,
}

impl std::fmt::Debug for KafkaStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The log's producer ([`KafkaUrl::log_producer`]), sending at once.
fn producer(url: &KafkaUrl) -> Result<ThreadedProducer<Acks>, StoreError> {
    url.log_producer(2 * MAX_MESSAGE_BYTES)
        .set("linger.ms", "0")
        .create_with_context(Acks::default())
        .map_err(kafka)
}

/// Why a log topic of `found` partitions is not the one `url` names: its
/// `partitions=` says another count (a node would shard by the topic's count
/// while its URL says otherwise).
fn partitions_disagree(url: &KafkaUrl, found: u32) -> Option<String> {
    (url.partitions_given && found != url.partitions).then(|| {
        format!(
            "disagrees with the log topic {}, which has {found} partitions: give partitions={found}, or leave it out",
            url.topic
        )
    })
}

impl KafkaStore {
    /// Connects; creates the log topic when it is missing only if the URL
    /// says `create=true`.
    pub fn open(url: KafkaUrl) -> Result<Self, StoreError> {
        // One lookup: the log topic's count, made only with create=true.
        let partitions = match crate::client::topic_partitions(&url, &url.topic)? {
            Some(n) => n,
            None if url.create => ensure_topic(&url, &url.topic, url.partitions)?,
            None => {
                return Err(StoreError::BadUrlPart {
                    url: format!("kafka://{}/{}", url.bootstrap, url.topic),
                    part: format!("the log topic {:?}", url.topic),
                    why: format!(
                        "does not exist on {}: check its name (every node of one log names the same topic), or add \
                         create=true to the URL to make it",
                        url.bootstrap
                    ),
                });
            }
        };
        let store = KafkaStore {
            producer: producer(&url)?,
            url,
            node: node_name(),
            tail: None,
            partitions,
            buffer: Vec::new(),
        };
        if let Some(why) = partitions_disagree(&store.url, store.partitions) {
            return Err(StoreError::BadUrlPart {
                url: format!("kafka://{}/{}", store.url.bootstrap, store.url.topic),
                part: format!("partitions={}", store.url.partitions),
                why,
            });
        }
        if store.url.sharded {
            ensure_topic(&store.url, &store.url.global_topic(), 1)?;
        }
        Ok(store)
    }

    /// The log's partition count: what the shards are.
    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// Encodes `records` into messages of at most [`MAX_MESSAGE_BYTES`] and
    /// queues them for `partition`.
    fn queue(
        &mut self,
        topic: &str,
        partition: u32,
        records: &[&Record],
        queued: &mut usize,
    ) -> Result<(), StoreError> {
        self.buffer.clear();
        codec::encode(records.iter().copied(), &mut self.buffer);
        if self.buffer.len() > MAX_MESSAGE_BYTES && records.len() > 1 {
            let (a, b) = records.split_at(records.len() / 2);
            self.queue(topic, partition, a, queued)?;
            return self.queue(topic, partition, b, queued);
        }
        let deadline = Instant::now() + self.url.timeout;
        loop {
            // No key (a message may hold several topics of one shard) and the
            // producer's clock as its time: the topic's retention counts from
            // the append, and a broker never refuses a record's own date.
            let message = BaseRecord::<(), _>::to(topic)
                .partition(partition as i32)
                .headers(OwnedHeaders::new().insert(Header {
                    key: NODE_HEADER,
                    value: Some(self.node.as_str()),
                }))
                .payload(&self.buffer);
            match self.producer.send(message) {
                Ok(()) => {
                    *queued += 1;
                    return Ok(());
                }
                Err((KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), _))
                    if Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(kafka(e)),
            }
        }
    }
}

impl Store for KafkaStore {
    fn append(&mut self, records: &[Record]) -> Result<(), StoreError> {
        if records.is_empty() {
            return Ok(());
        }
        let result = self.append_once(records);
        if result.is_err() {
            // An idempotent producer whose messages timed out may be left fenced,
            // waiting on a broker that is gone, or with an epoch the broker
            // never handed out (KafkaUrl::log_producer): the next append
            // starts afresh.
            if let Ok(fresh) = producer(&self.url) {
                self.producer = fresh;
            }
        }
        result
    }

    /// On a sharded log, only the global records: a node's shards are replayed
    /// as Kafka assigns them, by [`Store::follow`].
    fn scan(&mut self, since: Millis, each: &mut dyn FnMut(Vec<Record>)) -> Result<Scanned, StoreError> {
        let (topic, partitions) = if self.url.sharded {
            (self.url.global_topic(), vec![0])
        } else {
            (self.url.topic.clone(), (0..self.partitions).collect())
        };
        let (scanned, consumer) = scan_partitions(&self.url, &topic, &partitions, since, each)?;
        // Joined here, where failing to is an error the caller sees.
        self.tail = Some(if self.url.sharded {
            Box::new(crate::shards::ShardFollow::join(
                &self.url,
                consumer,
                since,
                self.partitions,
            )?)
        } else {
            Box::new(KafkaFollow {
                consumer,
                node: self.node.clone(),
            })
        });
        Ok(scanned)
    }

    fn follow(&mut self) -> Option<Box<dyn Follow>> {
        self.tail.take()
    }

    fn delete_before(&mut self, _before: Millis) -> Result<u64, StoreError> {
        Ok(0)
    }
}

impl KafkaStore {
    fn append_once(&mut self, records: &[Record]) -> Result<(), StoreError> {
        // (global, partition) → its records: on a sharded log, what every node
        // needs whole goes to the global topic and a group's deletion to every shard.
        let mut messages: BTreeMap<(bool, u32), Vec<&Record>> = BTreeMap::new();
        for r in records {
            match r.route(self.partitions) {
                _ if !self.url.sharded => messages.entry((false, r.shard(self.partitions))).or_default().push(r),
                Route::Shard(p) => messages.entry((false, p)).or_default().push(r),
                Route::AllShards => (0..self.partitions).for_each(|p| messages.entry((false, p)).or_default().push(r)),
                Route::Global => messages.entry((true, 0)).or_default().push(r),
            }
        }
        let (log, global) = (self.url.topic.clone(), self.url.global_topic());
        {
            let mut state = lock(&self.producer.context().state);
            state.done = 0;
            state.failed.clear();
        }
        let mut queued = 0;
        for ((to_global, partition), records) in &messages {
            let topic = if *to_global { &global } else { &log };
            self.queue(topic, *partition, records, &mut queued)?;
        }
        // Every message gets a report within message.timeout.ms; the margin is
        // for a producer thread that never reports at all.
        let acks = self.producer.context();
        let deadline = Instant::now() + self.url.timeout + Duration::from_secs(5);
        let mut state = lock(&acks.state);
        while state.done < queued {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(StoreError::Kafka(format!(
                    "{} of {queued} messages not reported on",
                    queued - state.done
                )));
            }
            state = acks
                .reported
                .wait_timeout(state, left)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        let failed = std::mem::take(&mut state.failed);
        match failed.first() {
            None => Ok(()),
            Some(first) => Err(StoreError::Kafka(format!(
                "{} of {queued} messages not acknowledged: {first}",
                failed.len()
            ))),
        }
    }
}

/// Reads `partitions` of the log from their start to their end, handing each
/// message's records at or after `since` to `each`, and returns the consumer,
/// positioned there, to follow the log with. The end is the partition's EOF
/// event or the watermark it had when the scan began, whichever comes first.
pub fn scan_partitions(
    url: &KafkaUrl,
    topic: &str,
    partitions: &[u32],
    since: Millis,
    each: &mut dyn FnMut(Vec<Record>),
) -> Result<(Scanned, BaseConsumer), StoreError> {
    let consumer: BaseConsumer = url
        .client()
        .set("group.id", "streamsight-replay")
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .create()
        .map_err(kafka)?;
    // Where each partition ended when the scan began: a partition is read once
    // its EOF is seen or that offset is reached, whichever comes first (others
    // may append all along; what they append later is followed).
    let mut ends = BTreeMap::new();
    for &p in partitions {
        let (low, high) = consumer.fetch_watermarks(topic, p as i32, url.timeout).map_err(kafka)?;
        if high > low {
            ends.insert(p as i32, high);
        }
    }
    let mut unread: std::collections::BTreeSet<i32> = ends.keys().copied().collect();
    let mut assignment = TopicPartitionList::new();
    for &p in partitions {
        assignment
            .add_partition_offset(topic, p as i32, Offset::Beginning)
            .map_err(kafka)?;
    }
    consumer.assign(&assignment).map_err(kafka)?;
    let mut corrupt = 0;
    let mut last_progress = Instant::now();
    while !unread.is_empty() {
        match consumer.poll(Duration::from_millis(100)) {
            None if last_progress.elapsed() > url.timeout => {
                return Err(StoreError::Kafka(format!(
                    "replaying {}: no progress for {:?} with {} partitions unread",
                    topic,
                    url.timeout,
                    unread.len()
                )));
            }
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => {
                unread.remove(&p);
            }
            Some(Err(e)) => return Err(kafka(e)),
            Some(Ok(m)) => {
                last_progress = Instant::now();
                if ends.get(&m.partition()).is_some_and(|end| m.offset() + 1 >= *end) {
                    unread.remove(&m.partition());
                }
                match codec::decode(m.payload().unwrap_or_default()) {
                    Ok(mut records) => {
                        records.retain(|r| r.at() >= since);
                        if !records.is_empty() {
                            each(records);
                        }
                    }
                    Err(why) => {
                        tracing::warn!(partition = m.partition(), offset = m.offset(), %why, "skipped a corrupt log message");
                        corrupt += 1;
                    }
                }
            }
        }
    }
    Ok((Scanned { corrupt }, consumer))
}

/// Follows the log from where a scan ended: every message another node appends.
pub struct KafkaFollow {
    consumer: BaseConsumer,
    node: String,
}

impl std::fmt::Debug for KafkaFollow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaFollow")
            .field("node", &self.node)
            .finish_non_exhaustive()
    }
}

impl Follow for KafkaFollow {
    fn next(&mut self, wait: Duration) -> Result<Option<crate::backend::Followed>, StoreError> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.consumer.poll(left) {
                None => return Ok(None),
                Some(Err(KafkaError::PartitionEOF(_))) => {}
                Some(Err(e)) => return Err(kafka(e)),
                Some(Ok(m)) => {
                    let own = m.headers().is_some_and(|h| {
                        h.iter()
                            .any(|h| h.key == NODE_HEADER && h.value == Some(self.node.as_bytes()))
                    });
                    if own {
                        continue;
                    }
                    return Ok(Some(crate::backend::Followed::Records(decode(&m))));
                }
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_count_the_log_does_not_have_is_said_never_used() {
        let given = KafkaUrl::parse("kafka://a:9092/log?partitions=4").unwrap();
        let why = partitions_disagree(&given, 12).unwrap();
        assert!(why.contains("12 partitions") && why.contains("partitions=12"), "{why}");
        assert_eq!(partitions_disagree(&given, 4), None);
        // Left out: the log's own count, whatever it is.
        let default = KafkaUrl::parse("kafka://a:9092/log").unwrap();
        assert_eq!(partitions_disagree(&default, 3), None);
    }
}
