//! When the record at a lagging group's committed offset was written, read from
//! the broker: one small Fetch per leader, of which only the record batch
//! headers are read (their first and largest timestamps, KIP-32's CreateTime or
//! LogAppendTime). Polls alone only bracket a record's produce time between two
//! polls, so a group behind by X seconds read X plus up to a poll interval
//! (klag-exporter reads the same record for the same reason).

use super::*;
use crate::snapshot::BatchTime;
use kafka_protocol::messages::FetchRequest;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};

/// Distinct (partition, offset) read per poll cycle: what it costs is bounded,
/// whatever the number of lagging groups; the rest wait for the next cycles
/// (offsets read once are cached).
pub(super) const MAX_PER_CYCLE: usize = 2_000;
/// Bytes asked for per partition: a batch header is 61, the broker sends at most
/// this much of the batch, truncated or not.
const PARTITION_BYTES: i32 = 1024;
/// Batches remembered per partition, so that an offset read once is not read again.
const CACHED_PER_PARTITION: usize = 8;
/// Partitions remembered; past this the cache starts over.
const CACHED_PARTITIONS: usize = 200_000;
/// Fetch v13+ names topics by id; the poller names them. v12 is the first
/// flexible version, whose answers tansu 0.6.0 sends with a tagged field
/// kafka-protocol refuses at v12 ("Tag 0 is not valid for version 12"): v11
/// carries everything read here (the batch headers) without tagged fields.
pub(super) const FETCH_MAX_VERSION: i16 = 11;

/// Record batches already read, by partition: (base offset, last offset).
pub(super) type BatchCache = HashMap<(String, i32), Vec<(i64, i64)>>;

impl ClusterClient {
    /// Reads the batches holding the committed offsets of lagging groups (those
    /// below the end offset and at or above the log start), at most
    /// [`MAX_PER_CYCLE`] of them, into `snap.batches`.
    pub(super) async fn record_times(&mut self, snap: &mut Snapshot) {
        let mut partitions: HashMap<(&str, i32), (i32, i64, i64)> = HashMap::new();
        for t in &snap.topics {
            for p in &t.partitions {
                if let (Some(end), Some(start)) = (p.end, p.log_start) {
                    partitions.insert((t.name.as_str(), p.partition), (p.leader, start, end));
                }
            }
        }
        let mut wanted: BTreeSet<(String, i32, i64)> = BTreeSet::new();
        'groups: for g in &snap.groups {
            for o in &g.offsets {
                let Some(&(_, start, end)) = partitions.get(&(o.topic.as_str(), o.partition)) else {
                    continue;
                };
                let cached = self
                    .batches
                    .get(&(o.topic.clone(), o.partition))
                    .is_some_and(|b| b.iter().any(|&(base, last)| (base..=last).contains(&o.offset)));
                if o.offset >= start && o.offset < end && !cached {
                    wanted.insert((o.topic.clone(), o.partition, o.offset));
                }
                if wanted.len() >= MAX_PER_CYCLE {
                    break 'groups;
                }
            }
        }
        // Per leader, in rounds: one Fetch may name a partition once.
        let mut rounds: BTreeMap<i32, Vec<Round>> = BTreeMap::new();
        for (topic, partition, offset) in wanted {
            let Some(&(leader, ..)) = partitions.get(&(topic.as_str(), partition)) else {
                continue;
            };
            place(rounds.entry(leader).or_default(), (topic, partition), offset);
        }
        let (batches, errors) = self.read_batches(rounds).await;
        for b in &batches {
            remember(&mut self.batches, &b.topic, b.partition, b);
        }
        snap.batches.extend(batches);
        // A broker that cannot serve it costs the exact seconds, not the poll.
        snap.errors
            .extend(errors.into_iter().map(|e| format!("reading record times: {e}")));
    }

    /// Reads the first record batch at each round's offsets, every leader at
    /// once; a broker that cannot serve Fetch is skipped, one that fails is
    /// named in the errors.
    pub(super) async fn read_batches(
        &mut self,
        rounds: BTreeMap<i32, Vec<Round>>,
    ) -> (Vec<BatchTime>, Vec<KafkaError>) {
        let mut work = Vec::new();
        for (leader, leader_rounds) in rounds {
            let Some(addr) = self.brokers.get(&leader).cloned() else {
                continue;
            };
            if !self.speaks::<FetchRequest>(&addr).await {
                continue;
            }
            let requests = leader_rounds.iter().map(fetch).collect();
            work.push((addr, requests));
        }
        let (mut batches, mut errors) = (Vec::new(), Vec::new());
        for (_, result) in self.fan_out(work).await {
            match result {
                Ok(answers) => {
                    for t in answers.iter().flat_map(|a| &a.responses) {
                        for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                            let Some(records) = &p.records else { continue };
                            if let Some(b) = first_batch(records) {
                                batches.push(BatchTime {
                                    topic: t.topic.0.to_string(),
                                    partition: p.partition_index,
                                    ..b
                                });
                            }
                        }
                    }
                }
                Err(e) => errors.push(e),
            }
        }
        (batches, errors)
    }
}

/// Puts `key` read at `offset` in the first round that does not name it yet.
pub(super) fn place(rounds: &mut Vec<Round>, key: (String, i32), offset: i64) {
    match rounds.iter_mut().find(|r| !r.contains_key(&key)) {
        Some(round) => {
            round.insert(key, offset);
        }
        None => rounds.push(BTreeMap::from([(key, offset)])),
    }
}

/// One Fetch's partitions and the offset each is read at.
pub(super) type Round = BTreeMap<(String, i32), i64>;

fn fetch(round: &Round) -> FetchRequest {
    let mut topics: BTreeMap<&str, Vec<FetchPartition>> = BTreeMap::new();
    for ((topic, partition), &offset) in round {
        topics.entry(topic).or_default().push(
            FetchPartition::default()
                .with_partition(*partition)
                .with_fetch_offset(offset)
                .with_partition_max_bytes(PARTITION_BYTES),
        );
    }
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(PARTITION_BYTES.saturating_mul(round.len() as i32).max(PARTITION_BYTES))
        .with_topics(
            topics
                .into_iter()
                .map(|(t, partitions)| {
                    FetchTopic::default()
                        .with_topic(TopicName(StrBytes::from_string(t.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}

fn remember(cache: &mut BatchCache, topic: &str, partition: i32, b: &BatchTime) {
    if cache.len() >= CACHED_PARTITIONS {
        cache.clear();
    }
    let entry = cache.entry((topic.to_owned(), partition)).or_default();
    if entry.len() >= CACHED_PER_PARTITION {
        entry.remove(0);
    }
    entry.push((b.base_offset, b.last_offset));
}

/// The first record batch's offsets and times from the bytes a Fetch returned
/// (magic 2 only: older formats have no batch header, and a partial batch is
/// enough, the header being its first 61 bytes); `None` for anything else.
pub(crate) fn first_batch(records: &[u8]) -> Option<BatchTime> {
    let mut b = records;
    if b.len() < 61 {
        return None;
    }
    let base_offset = b.get_i64();
    let _length = b.get_i32();
    let _leader_epoch = b.get_i32();
    let magic = b.get_i8();
    let _crc = b.get_u32();
    let attributes = b.get_i16();
    let last_delta = b.get_i32();
    let base_timestamp = b.get_i64();
    let max_timestamp = b.get_i64();
    if magic != 2 || base_offset < 0 || last_delta < 0 {
        return None;
    }
    let log_append_time = attributes & 0b1000 != 0;
    // Bit 5: a control batch (a transaction marker).
    let control = attributes & 0b10_0000 != 0;
    Some(BatchTime {
        topic: String::new(),
        partition: 0,
        base_offset,
        last_offset: base_offset.checked_add(i64::from(last_delta))?,
        // LogAppendTime: every record's time is the broker's, in maxTimestamp.
        first_timestamp: if log_append_time { max_timestamp } else { base_timestamp },
        last_timestamp: max_timestamp,
        log_append_time,
        control,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(base: i64, delta: i32, attributes: i16, first: i64, max: i64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&base.to_be_bytes());
        v.extend_from_slice(&100i32.to_be_bytes());
        v.extend_from_slice(&0i32.to_be_bytes());
        v.push(2);
        v.extend_from_slice(&0u32.to_be_bytes());
        v.extend_from_slice(&attributes.to_be_bytes());
        v.extend_from_slice(&delta.to_be_bytes());
        v.extend_from_slice(&first.to_be_bytes());
        v.extend_from_slice(&max.to_be_bytes());
        // producer id, epoch, base sequence, record count
        v.extend_from_slice(&[0; 18]);
        v
    }

    #[test]
    fn batch_headers_give_both_times_and_garbage_gives_none() {
        let b = first_batch(&header(40, 9, 0, 1_000, 1_250)).unwrap();
        assert_eq!(
            (b.base_offset, b.last_offset, b.first_timestamp, b.last_timestamp),
            (40, 49, 1_000, 1_250)
        );
        assert!(!b.log_append_time);
        // LogAppendTime (attribute bit 3): the broker's time for every record.
        let b = first_batch(&header(40, 9, 0b1000, 1_000, 1_250)).unwrap();
        assert_eq!(
            (b.first_timestamp, b.last_timestamp, b.log_append_time),
            (1_250, 1_250, true)
        );
        assert!(!b.control);
        // A transaction's marker: a control batch (bit 5, transactional bit 4) of one record.
        let marker = first_batch(&header(35, 0, 0b11_0000, 1_300, 1_300)).unwrap();
        assert!(marker.control && marker.base_offset == marker.last_offset);
        assert_eq!(first_batch(&header(40, 9, 0, 1, 2)[..60]), None);
        let mut old = header(40, 9, 0, 1, 2);
        old[16] = 1;
        assert_eq!(first_batch(&old), None, "magic 1 has no batch header");
        assert_eq!(first_batch(&header(40, -1, 0, 1, 2)), None);
        assert_eq!(first_batch(&header(i64::MAX, 9, 0, 1, 2)), None, "offsets past i64");
    }
}
