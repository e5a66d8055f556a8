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
                let key = (o.topic.clone(), o.partition);
                // Read already, unless it began a run of markers and aborted
                // records whose end the read did not show, and the log grew.
                let grown = self.open_runs.get(&key).is_some_and(|&to| o.offset < to && end > to);
                let cached = !grown
                    && self
                        .batches
                        .get(&key)
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
        let (mut work, mut asked) = (Vec::new(), Vec::new());
        for (leader, leader_rounds) in rounds {
            let Some(addr) = self.brokers.get(&leader).cloned() else {
                continue;
            };
            if !self.speaks::<FetchRequest>(&addr).await {
                continue;
            }
            let requests = leader_rounds.iter().map(fetch).collect();
            work.push((addr, requests));
            asked.push(leader_rounds);
        }
        let (mut batches, mut errors) = (Vec::new(), Vec::new());
        for ((_, result), rounds) in self.fan_out(work).await.into_iter().zip(asked) {
            match result {
                Ok(answers) => {
                    // Answers come in the order of the rounds asked.
                    for (answer, round) in answers.iter().zip(&rounds) {
                        for t in &answer.responses {
                            for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                                let Some(records) = &p.records else { continue };
                                let read = read_batches_of(records);
                                let Some(first) = read.first() else { continue };
                                let topic = t.topic.0.to_string();
                                let at = round.get(&(topic.clone(), p.partition_index)).copied();
                                let run = at.map(|at| (at, readable_from(&read, at)));
                                // A run the bytes saw no end of may grow as
                                // the log does: read again once it has.
                                let key = (topic.clone(), p.partition_index);
                                if self.open_runs.len() >= CACHED_PARTITIONS {
                                    self.open_runs.clear();
                                }
                                match run {
                                    Some((_, (to, false))) => self.open_runs.insert(key, to),
                                    _ => self.open_runs.remove(&key),
                                };
                                let unreadable = run.map(|(at, (to, _))| (at, to)).filter(|(at, to)| to > at);
                                batches.push(BatchTime {
                                    topic,
                                    partition: p.partition_index,
                                    unreadable,
                                    ..first.time.clone()
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

/// A record batch's header as a Fetch returned it (magic 2 only: older
/// formats have no batch header; a batch cut short by the bytes asked for is
/// read as far as its header).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Batch {
    pub(crate) time: BatchTime,
    /// Part of a transaction (attribute bit 4), by this producer.
    pub(crate) transactional: bool,
    pub(crate) producer_id: i64,
    /// A control batch's type, from its record's key: 0 abort, 1 commit;
    /// `None` when the bytes stop before it.
    pub(crate) control_type: Option<i16>,
}

/// Each record batch's header in the bytes a Fetch returned, in order, until
/// the bytes end or stop being batches.
pub(crate) fn read_batches_of(records: &[u8]) -> Vec<Batch> {
    let mut out = Vec::new();
    let mut rest = records;
    while let Some(batch) = batch_header(rest) {
        // The next batch starts after this one's length (which follows the
        // base offset); a batch cut short ends the walk.
        let length = i32::from_be_bytes([rest[8], rest[9], rest[10], rest[11]]);
        let size = usize::try_from(length).ok().and_then(|l| l.checked_add(12));
        out.push(batch);
        match size {
            Some(size) if size <= rest.len() && size >= 61 => rest = &rest[size..],
            _ => break,
        }
    }
    out
}

fn batch_header(records: &[u8]) -> Option<Batch> {
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
    let producer_id = b.get_i64();
    let _producer_epoch = b.get_i16();
    let _base_sequence = b.get_i32();
    let _count = b.get_i32();
    if magic != 2 || base_offset < 0 || last_delta < 0 {
        return None;
    }
    let log_append_time = attributes & 0b1000 != 0;
    // Bit 5: a control batch (a transaction marker).
    let control = attributes & 0b10_0000 != 0;
    Some(Batch {
        time: BatchTime {
            topic: String::new(),
            partition: 0,
            base_offset,
            last_offset: base_offset.checked_add(i64::from(last_delta))?,
            // LogAppendTime: every record's time is the broker's, in maxTimestamp.
            first_timestamp: if log_append_time { max_timestamp } else { base_timestamp },
            last_timestamp: max_timestamp,
            log_append_time,
            control,
            unreadable: None,
        },
        transactional: attributes & 0b1_0000 != 0,
        producer_id,
        control_type: if control { control_type(b) } else { None },
    })
}

/// A control record's type from its key (version, then type, each i16),
/// after the record's length, attributes, timestamp and offset deltas and
/// the key's length (varints).
fn control_type(mut record: &[u8]) -> Option<i16> {
    varint(&mut record)?; // the record's length
    if record.is_empty() {
        return None;
    }
    record.advance(1); // attributes
    varint(&mut record)?; // timestamp delta
    varint(&mut record)?; // offset delta
    let key_length = varint(&mut record)?;
    if key_length < 4 || record.len() < 4 {
        return None;
    }
    let _version = record.get_i16();
    Some(record.get_i16())
}

/// A zigzag varint (at most 10 bytes), advancing past it.
fn varint(b: &mut &[u8]) -> Option<i64> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let byte = *b.first()?;
        b.advance(1);
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Some(((value >> 1) as i64) ^ -((value & 1) as i64));
        }
    }
    None
}

/// The first offset at or after `at` a `read_committed` reader is handed, as
/// far as `batches` tell: markers are skipped, and a transaction's records
/// when the batches show its producer's abort marker after them. Where the
/// bytes end first, the end of what they showed, and `false`: what follows
/// is not known yet.
pub(crate) fn readable_from(batches: &[Batch], at: i64) -> (i64, bool) {
    let mut position = at;
    for (i, b) in batches.iter().enumerate() {
        if b.time.last_offset < position {
            continue;
        }
        // The marker ending a transactional batch's transaction, if shown.
        let ended = || {
            batches[i + 1..]
                .iter()
                .find(|later| later.time.control && later.producer_id == b.producer_id)
                .map(|marker| marker.control_type)
        };
        let outcome = if b.transactional { ended() } else { Some(Some(1)) };
        match outcome {
            _ if b.time.control => position = b.time.last_offset + 1,
            Some(Some(0)) => position = b.time.last_offset + 1,
            // Readable from the batch's first record (or where a
            // compaction's gap puts the next one).
            Some(Some(_)) => return (position.max(b.time.base_offset), true),
            // A transaction whose end is not shown (still open, or past the
            // bytes read) may commit: not known to be skipped, not yet read.
            _ => return (position.max(b.time.base_offset), false),
        }
    }
    (position, false)
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

    fn batch_time(records: &[u8]) -> Option<BatchTime> {
        batch_header(records).map(|b| b.time)
    }

    /// A batch of `records` records (offsets `base..`) by `producer`, its
    /// length field true; a control batch carries its marker record.
    fn batch(base: i64, records: i32, producer: i64, attributes: i16, marker: Option<i16>) -> Vec<u8> {
        let mut body = Vec::new();
        body.extend_from_slice(&0i32.to_be_bytes()); // leader epoch
        body.push(2);
        body.extend_from_slice(&0u32.to_be_bytes());
        body.extend_from_slice(&attributes.to_be_bytes());
        body.extend_from_slice(&(records - 1).to_be_bytes());
        body.extend_from_slice(&1_000i64.to_be_bytes());
        body.extend_from_slice(&1_000i64.to_be_bytes());
        body.extend_from_slice(&producer.to_be_bytes());
        body.extend_from_slice(&0i16.to_be_bytes());
        body.extend_from_slice(&0i32.to_be_bytes());
        body.extend_from_slice(&records.to_be_bytes());
        match marker {
            // length, attributes, timestamp delta, offset delta, key length 4
            // (zigzag: 8), key (version 0, type), value length 0, no headers.
            Some(kind) => body.extend_from_slice(&[20, 0, 0, 0, 8, 0, 0, 0, kind as u8, 0, 0]),
            None => body.extend_from_slice(&vec![0; 10 * records as usize]),
        }
        let mut out = base.to_be_bytes().to_vec();
        out.extend_from_slice(&(body.len() as i32).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    #[test]
    fn markers_and_aborted_records_after_an_offset_are_skipped_as_a_reader_skips_them() {
        const TXN: i16 = 0b1_0000;
        const MARKER: i16 = 0b11_0000;
        // 10..15 a transaction of producer 7, 15 its commit marker; 16 an
        // aborted record of producer 8, 17 its abort marker; 18.. plain.
        let log = [
            batch(10, 5, 7, TXN, None),
            batch(15, 1, 7, MARKER, Some(1)),
            batch(16, 1, 8, TXN, None),
            batch(17, 1, 8, MARKER, Some(0)),
            batch(18, 3, -1, 0, None),
        ]
        .concat();
        let read = read_batches_of(&log);
        assert_eq!(read.len(), 5);
        assert_eq!(
            read.iter().map(|b| b.control_type).collect::<Vec<_>>(),
            [None, Some(1), None, Some(0), None]
        );
        // Committed data is read; from the marker on, 18 is the next record handed.
        assert_eq!(readable_from(&read, 12), (12, true));
        assert_eq!(readable_from(&read, 15), (18, true));
        assert_eq!(readable_from(&read, 17), (18, true));
        // Only the markers and the aborted batch, as a tail: all unreadable.
        let tail = read_batches_of(&log[..log.len() - batch(18, 3, -1, 0, None).len()]);
        assert_eq!(readable_from(&tail, 15), (18, false), "what follows is unknown");
        // A transaction whose end the bytes do not show may commit: the
        // run stops before it, and is not known to be over.
        let open = read_batches_of(&[batch(15, 1, 7, MARKER, Some(1)), batch(16, 1, 8, TXN, None)].concat());
        assert_eq!(readable_from(&open, 15), (16, false));
        // Bytes cut in the middle of a batch: the batches before it only.
        let cut = &log[..log.len() - 5];
        assert_eq!(read_batches_of(cut).len(), 5, "the last header is whole");
        assert_eq!(read_batches_of(&log[..70]).len(), 1);
        assert!(read_batches_of(&[0; 40]).is_empty());
    }

    #[test]
    fn batch_headers_give_both_times_and_garbage_gives_none() {
        let b = batch_time(&header(40, 9, 0, 1_000, 1_250)).unwrap();
        assert_eq!(
            (b.base_offset, b.last_offset, b.first_timestamp, b.last_timestamp),
            (40, 49, 1_000, 1_250)
        );
        assert!(!b.log_append_time);
        // LogAppendTime (attribute bit 3): the broker's time for every record.
        let b = batch_time(&header(40, 9, 0b1000, 1_000, 1_250)).unwrap();
        assert_eq!(
            (b.first_timestamp, b.last_timestamp, b.log_append_time),
            (1_250, 1_250, true)
        );
        assert!(!b.control);
        // A transaction's marker: a control batch (bit 5, transactional bit 4) of one record.
        let marker = batch_time(&header(35, 0, 0b11_0000, 1_300, 1_300)).unwrap();
        assert!(marker.control && marker.base_offset == marker.last_offset);
        assert_eq!(batch_time(&header(40, 9, 0, 1, 2)[..60]), None);
        let mut old = header(40, 9, 0, 1, 2);
        old[16] = 1;
        assert_eq!(batch_time(&old), None, "magic 1 has no batch header");
        assert_eq!(batch_time(&header(40, -1, 0, 1, 2)), None);
        assert_eq!(batch_time(&header(i64::MAX, 9, 0, 1, 2)), None, "offsets past i64");
    }
}
