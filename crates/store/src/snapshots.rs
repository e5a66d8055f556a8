//! Snapshots of a sharded log's shards, so that a node taking a shard over
//! reads a snapshot and the records after it instead of the whole retention.
//!
//! Two compacted topics beside the log, one partition per shard:
//! `TOPIC-snapshot-chunks` holds a snapshot's bytes in chunks keyed by slot and
//! index, the two slots written in turn so that a snapshot being written never
//! overwrites the one a manifest names; `TOPIC-snapshots` holds one small
//! manifest per shard naming the last complete snapshot: its id, slot, chunk
//! count, where its chunks start and the log offset it goes on from. The
//! manifest is written only once every chunk is acknowledged, and a reader
//! takes only chunks carrying the manifest's id: a snapshot cut short, or one
//! overwritten by a node that took the shard since, is not used (the shard is
//! then read from its start, as without snapshots).

use crate::backend::StoreError;
use crate::client::{KafkaUrl, ensure_topic_with, kafka};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::{ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};
use streamsight_core::shard::ShardState;

/// A chunk stays well under the brokers' `message.max.bytes` (1 MB by default).
const CHUNK_BYTES: usize = 512 << 10;
/// Bytes of a chunk's header: the snapshot's id and the chunk's index.
const HEADER: usize = 12;

/// What a shard's manifest says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub id: u64,
    pub slot: u8,
    pub chunks: u32,
    /// The offset of the first chunk in the chunks topic.
    pub first: i64,
    pub bytes: u64,
    /// The log offset the snapshot goes on from: it holds everything before.
    pub offset: i64,
}

pub use crate::backend::SnapshotCounts;

fn count(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

fn chunks_topic(url: &KafkaUrl) -> String {
    format!("{}-snapshot-chunks", url.topic)
}

fn manifests_topic(url: &KafkaUrl) -> String {
    format!("{}-snapshots", url.topic)
}

/// Creates both topics when missing; false (snapshots off) when they exist
/// with another partition count than the log's shards.
pub fn ensure_topics(url: &KafkaUrl, shards: u32) -> Result<bool, StoreError> {
    let compact = [("cleanup.policy", "compact")];
    let chunks = ensure_topic_with(url, &chunks_topic(url), shards, &compact)?;
    let manifests = ensure_topic_with(url, &manifests_topic(url), shards, &compact)?;
    let fits = chunks == shards && manifests == shards;
    if !fits {
        tracing::warn!(
            shards,
            chunks,
            manifests,
            "snapshot topics do not have one partition per shard: snapshots off"
        );
    }
    Ok(fits)
}

/// One encoding of a snapshot, for the chunks and for the benches: named
/// MessagePack (a field added later reads as its default), deflated (the
/// names and the histories' close numbers shrink to about a fifth).
pub fn encode(state: &ShardState) -> Result<Vec<u8>, StoreError> {
    use std::io::Write;
    let bad = |e: &dyn std::fmt::Display| StoreError::Kafka(format!("encoding a snapshot: {e}"));
    let plain = rmp_serde::to_vec_named(state).map_err(|e| bad(&e))?;
    let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
    deflated.write_all(&plain).map_err(|e| bad(&e))?;
    deflated.finish().map_err(|e| bad(&e))
}

/// Decodes a snapshot of at most `max_bytes` once inflated: a small snapshot
/// that inflates without end is refused, not followed.
pub fn decode(bytes: &[u8], max_bytes: u64) -> Result<ShardState, String> {
    use std::io::Read;
    let mut plain = Vec::new();
    let mut inflated = flate2::read::DeflateDecoder::new(bytes).take(max_bytes.saturating_add(1));
    inflated.read_to_end(&mut plain).map_err(|e| e.to_string())?;
    if plain.len() as u64 > max_bytes {
        return Err(format!("more than {max_bytes} bytes once inflated"));
    }
    rmp_serde::from_slice(&plain).map_err(|e| e.to_string())
}

/// Reads snapshots: one consumer for the node's life (a connection costs a
/// second on some brokers), every shard gained at once read together.
pub struct SnapshotReader {
    url: KafkaUrl,
    consumer: BaseConsumer,
    max_bytes: u64,
    counts: Arc<SnapshotCounts>,
}

impl std::fmt::Debug for SnapshotReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotReader").finish_non_exhaustive()
    }
}

/// Keeps `manifest` for `shard` unless one going on from a later log offset
/// is kept: the newest snapshot wins, whatever order the manifests were
/// written in. A node that lost a shard while paused may still finish a
/// snapshot of it after the shard's new holder wrote a newer one; taken as
/// the last word, the shard's next holder would start from the older state
/// (and read more of the log, or miss what retention deleted since).
fn keep_newest(latest: &mut BTreeMap<u32, Manifest>, shard: u32, manifest: Manifest) {
    if latest.get(&shard).is_none_or(|kept| manifest.offset >= kept.offset) {
        latest.insert(shard, manifest);
    }
}

/// A snapshot being read: its manifest and the chunks found so far.
struct Reading {
    manifest: Manifest,
    chunks: Vec<Option<Vec<u8>>>,
    missing: usize,
    held: u64,
    /// Its partition said EOF, or it was found unusable.
    done: bool,
    unusable: Option<String>,
}

impl SnapshotReader {
    pub fn new(url: &KafkaUrl, max_bytes: u64, counts: Arc<SnapshotCounts>) -> Result<Self, StoreError> {
        let consumer: BaseConsumer = url
            .client()
            .set("group.id", "streamsight-snapshots")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("fetch.wait.max.ms", "20")
            .create()
            .map_err(kafka)?;
        Ok(Self {
            url: url.clone(),
            consumer,
            max_bytes,
            counts,
        })
    }

    fn assign(&self, topic: &str, from: &[(u32, Offset)]) -> Result<(), StoreError> {
        let mut tpl = TopicPartitionList::new();
        for (shard, offset) in from {
            tpl.add_partition_offset(topic, *shard as i32, *offset).map_err(kafka)?;
        }
        self.consumer.assign(&tpl).map_err(kafka)
    }

    /// The newest manifest of each of `shards` that has one (see [`keep_newest`]).
    fn manifests(&self, shards: &[u32]) -> Result<BTreeMap<u32, Manifest>, StoreError> {
        let topic = manifests_topic(&self.url);
        // Read up to each partition's end as it is now: waiting for an EOF
        // costs a broker's whole fetch wait on some brokers.
        let mut open = BTreeMap::new();
        for &shard in shards {
            let (low, high) = self
                .consumer
                .fetch_watermarks(&topic, shard as i32, self.url.timeout)
                .map_err(kafka)?;
            if high > low {
                open.insert(shard, high);
            }
        }
        let from: Vec<(u32, Offset)> = open.keys().map(|s| (*s, Offset::Beginning)).collect();
        let mut latest = BTreeMap::new();
        if from.is_empty() {
            return Ok(latest);
        }
        self.assign(&topic, &from)?;
        let deadline = Instant::now() + self.url.timeout;
        while !open.is_empty() {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    open.remove(&(p as u32));
                }
                Some(Err(e)) => return Err(kafka(e)),
                Some(Ok(m)) => {
                    let shard = m.partition() as u32;
                    match m.payload().and_then(|p| serde_json::from_slice::<Manifest>(p).ok()) {
                        Some(manifest) => keep_newest(&mut latest, shard, manifest),
                        None => tracing::warn!(shard, offset = m.offset(), "ignored a malformed snapshot manifest"),
                    }
                    if open.get(&shard).is_some_and(|end| m.offset() + 1 >= *end) {
                        open.remove(&shard);
                    }
                }
                None if Instant::now() > deadline => {
                    return Err(StoreError::Kafka(format!(
                        "reading the manifests of shards {open:?}: no end in time"
                    )));
                }
                None => {}
            }
        }
        Ok(latest)
    }

    /// The last complete snapshot of each of `shards` that has one no larger
    /// than the limit. A manifest whose snapshot cannot be read whole is said
    /// so and counted, and taken for none.
    pub fn read(&self, shards: &[u32]) -> Result<BTreeMap<u32, (Manifest, ShardState)>, StoreError> {
        let mut reading: BTreeMap<u32, Reading> = BTreeMap::new();
        for (shard, manifest) in self.manifests(shards)? {
            let fits = u64::from(manifest.chunks).saturating_mul(CHUNK_BYTES as u64) >= manifest.bytes;
            let unusable = (manifest.bytes > self.max_bytes || !fits || manifest.first < 0)
                .then(|| format!("{} bytes in {} chunks", manifest.bytes, manifest.chunks));
            let chunks = if unusable.is_some() {
                0
            } else {
                manifest.chunks as usize
            };
            reading.insert(
                shard,
                Reading {
                    chunks: vec![None; chunks],
                    missing: chunks,
                    held: 0,
                    done: unusable.is_some(),
                    unusable,
                    manifest,
                },
            );
        }
        let from: Vec<(u32, Offset)> = reading
            .iter()
            .filter(|(_, r)| !r.done)
            .map(|(s, r)| (*s, Offset::Offset(r.manifest.first)))
            .collect();
        if !from.is_empty() {
            self.assign(&chunks_topic(&self.url), &from)?;
        }
        let deadline = Instant::now() + self.url.timeout;
        while reading.values().any(|r| !r.done) {
            match self.consumer.poll(Duration::from_millis(100)) {
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    if let Some(r) = reading.get_mut(&(p as u32)) {
                        r.done = true;
                    }
                }
                Some(Err(e)) => return Err(kafka(e)),
                Some(Ok(m)) => {
                    if let Some(r) = reading.get_mut(&(m.partition() as u32)) {
                        take_chunk(r, m.payload().unwrap_or_default());
                    }
                }
                None if Instant::now() > deadline => {
                    for r in reading.values_mut().filter(|r| !r.done) {
                        r.done = true;
                        r.unusable = Some("chunks not read in time".into());
                    }
                }
                None => {}
            }
        }
        let _ = self.consumer.unassign();
        let mut found = BTreeMap::new();
        for (shard, r) in reading {
            let why = match (r.unusable, r.missing) {
                (Some(why), _) => why,
                (None, 0) => {
                    let bytes: Vec<u8> = r.chunks.into_iter().flatten().flatten().collect();
                    match decode(&bytes, self.max_bytes) {
                        Ok(state) => {
                            count(&self.counts.restored, 1);
                            found.insert(shard, (r.manifest, state));
                            continue;
                        }
                        Err(e) => format!("undecodable: {e}"),
                    }
                }
                (None, missing) => format!("{missing} of {} chunks gone", r.chunks.len()),
            };
            tracing::warn!(
                shard,
                id = r.manifest.id,
                why,
                "snapshot not used: the shard is read from its start"
            );
            count(&self.counts.restore_failures, 1);
        }
        Ok(found)
    }
}

/// Takes a chunk of the snapshot being read, if it is one of its own.
fn take_chunk(r: &mut Reading, payload: &[u8]) {
    if r.done || payload.len() < HEADER {
        return;
    }
    let id = u64::from_le_bytes(payload[..8].try_into().unwrap_or_default());
    let index = u32::from_le_bytes(payload[8..HEADER].try_into().unwrap_or_default()) as usize;
    let body = &payload[HEADER..];
    if id != r.manifest.id || index >= r.chunks.len() || r.chunks[index].is_some() {
        return;
    }
    r.held += body.len() as u64;
    if r.held > r.manifest.bytes {
        r.done = true;
        r.unusable = Some("chunks larger than the manifest says".into());
        return;
    }
    r.chunks[index] = Some(body.to_vec());
    r.missing -= 1;
    r.done = r.missing == 0;
}

/// Which chunk of the current snapshot each delivery report is about.
#[derive(Default)]
struct Delivered(Mutex<Vec<Result<i64, String>>>);

struct WriterContext(Arc<Delivered>);

impl ClientContext for WriterContext {}

impl ProducerContext for WriterContext {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let outcome = match result {
            Ok(m) => Ok(m.offset()),
            Err((e, _)) => Err(e.to_string()),
        };
        crate::client::lock(&self.0.0).push(outcome);
    }
}

/// A snapshot to write: a shard's state as of `offset`, into `slot`.
struct Job {
    shard: u32,
    offset: i64,
    slot: u8,
    state: ShardState,
}

/// Writes snapshots on a thread of its own, one at a time: the follower only
/// hands the state over (a snapshot due while one is being written waits for
/// the next turn).
pub struct SnapshotWriter {
    jobs: Option<mpsc::SyncSender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for SnapshotWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWriter").finish_non_exhaustive()
    }
}

impl SnapshotWriter {
    pub fn start(url: &KafkaUrl, counts: Arc<SnapshotCounts>) -> Result<Self, StoreError> {
        let delivered = Arc::new(Delivered::default());
        let mut producer = snapshot_producer(url, &delivered)?;
        let (jobs, rx) = mpsc::sync_channel::<Job>(1);
        let url = url.clone();
        let thread = std::thread::Builder::new()
            .name("streamsight-snapshots".into())
            .spawn(move || {
                let mut seed = 0u64;
                for job in rx {
                    seed += 1;
                    match write(&url, &producer, &delivered, &job, seed) {
                        Ok(bytes) => {
                            count(&counts.written, 1);
                            count(&counts.written_bytes, bytes);
                            tracing::debug!(shard = job.shard, offset = job.offset, bytes, "snapshot written");
                        }
                        Err(e) => {
                            count(&counts.write_failures, 1);
                            tracing::warn!(shard = job.shard, error = %e, "snapshot not written");
                            // Afresh, as the log's appends do after a failure
                            // (KafkaUrl::log_producer says why); a fresh
                            // producer also leaves the late reports of the
                            // failed write behind.
                            if let Ok(fresh) = snapshot_producer(&url, &delivered) {
                                producer = fresh;
                            }
                        }
                    }
                }
            })
            .map_err(|e| StoreError::Kafka(format!("starting the snapshot writer: {e}")))?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    /// Hands `shard`'s state as of log offset `offset` over; false when the
    /// writer is busy with another.
    pub fn offer(&self, shard: u32, offset: i64, slot: u8, state: ShardState) -> bool {
        let job = Job {
            shard,
            offset,
            slot,
            state,
        };
        self.jobs.as_ref().is_some_and(|jobs| jobs.try_send(job).is_ok())
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The log's producer ([`KafkaUrl::log_producer`]) for snapshot chunks.
fn snapshot_producer(url: &KafkaUrl, delivered: &Arc<Delivered>) -> Result<BaseProducer<WriterContext>, StoreError> {
    url.log_producer(2 * CHUNK_BYTES)
        .create_with_context(WriterContext(delivered.clone()))
        .map_err(kafka)
}

/// Sends `messages` (key, payload) to `topic`'s partition `shard` and waits
/// for every acknowledgement; the offsets they landed at.
fn send_all(
    url: &KafkaUrl,
    producer: &BaseProducer<WriterContext>,
    delivered: &Delivered,
    topic: &str,
    shard: u32,
    messages: &[(String, Vec<u8>)],
) -> Result<Vec<i64>, StoreError> {
    crate::client::lock(&delivered.0).clear();
    for (key, payload) in messages {
        let record = BaseRecord::to(topic).partition(shard as i32).key(key).payload(payload);
        let mut record = record;
        // A full queue empties as the brokers acknowledge.
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((e, _)) => return Err(kafka(e)),
            }
        }
    }
    producer.flush(url.timeout).map_err(kafka)?;
    let outcomes = std::mem::take(&mut *crate::client::lock(&delivered.0));
    if outcomes.len() != messages.len() {
        return Err(StoreError::Kafka(format!(
            "{} of {} acknowledged",
            outcomes.len(),
            messages.len()
        )));
    }
    outcomes.into_iter().map(|o| o.map_err(StoreError::Kafka)).collect()
}

/// Writes one snapshot, chunks first and then its manifest; its size.
fn write(
    url: &KafkaUrl,
    producer: &BaseProducer<WriterContext>,
    delivered: &Delivered,
    job: &Job,
    seed: u64,
) -> Result<u64, StoreError> {
    let bytes = encode(&job.state)?;
    // Unlike any other node's: the node's random name, the shard and a count.
    let id = {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write(crate::client::node_name().as_bytes());
        h.write_u64(seed);
        h.write_u32(job.shard);
        h.finish()
    };
    let chunks: Vec<(String, Vec<u8>)> = bytes
        .chunks(CHUNK_BYTES)
        .chain(bytes.is_empty().then_some(&[][..]))
        .enumerate()
        .map(|(i, body)| {
            let mut payload = Vec::with_capacity(HEADER + body.len());
            payload.extend_from_slice(&id.to_le_bytes());
            payload.extend_from_slice(&(i as u32).to_le_bytes());
            payload.extend_from_slice(body);
            (format!("{}/{i}", job.slot), payload)
        })
        .collect();
    let offsets = send_all(url, producer, delivered, &chunks_topic(url), job.shard, &chunks)?;
    let manifest = Manifest {
        id,
        slot: job.slot,
        chunks: chunks.len() as u32,
        first: offsets.iter().copied().min().unwrap_or(0),
        bytes: bytes.len() as u64,
        offset: job.offset,
    };
    let encoded = serde_json::to_vec(&manifest).map_err(|e| StoreError::Kafka(e.to_string()))?;
    send_all(
        url,
        producer,
        delivered,
        &manifests_topic(url),
        job.shard,
        &[(job.shard.to_string(), encoded)],
    )?;
    Ok(bytes.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_newest_manifest_wins_whatever_order_they_were_written_in() {
        let manifest = |id, offset| Manifest {
            id,
            slot: 0,
            chunks: 1,
            first: 0,
            bytes: 1,
            offset,
        };
        let mut latest = BTreeMap::new();
        keep_newest(&mut latest, 3, manifest(1, 500));
        // A paused node's older snapshot, finished after the newer one.
        keep_newest(&mut latest, 3, manifest(2, 300));
        assert_eq!(latest[&3].id, 1);
        keep_newest(&mut latest, 3, manifest(3, 900));
        assert_eq!(latest[&3].id, 3);
        // The same offset: the one written last (the state is the same).
        keep_newest(&mut latest, 3, manifest(4, 900));
        assert_eq!(latest[&3].id, 4);
    }

    proptest! {
        /// Whatever the log holds where a snapshot should be, reading it is
        /// an answer or a refusal, never a panic, and never more memory than
        /// the bound.
        #[test]
        fn any_bytes_decode_to_a_snapshot_or_a_refusal(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
            let _ = decode(&bytes, 1 << 20);
            let mut deflated = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::fast());
            std::io::Write::write_all(&mut deflated, &bytes).unwrap();
            let _ = decode(&deflated.finish().unwrap(), 1 << 20);
        }

        #[test]
        fn any_chunk_is_taken_or_left(payload in proptest::collection::vec(any::<u8>(), 0..64), chunks in 0u32..4) {
            let mut r = Reading {
                manifest: Manifest { id: 7, slot: 0, chunks, first: 0, bytes: 32, offset: 0 },
                chunks: vec![None; chunks as usize],
                missing: chunks as usize,
                held: 0,
                done: false,
                unusable: None,
            };
            take_chunk(&mut r, &payload);
            prop_assert!(r.held <= 32 || r.unusable.is_some());
        }
    }
}
