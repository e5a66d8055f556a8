//! The body tracers POST to `/v0.1/pipeline_stats`: msgpack, usually gzipped.
//!
//! Every field of reference.md §3 from the Java, Python, Go and .NET tracers is
//! read. Integers are accepted signed or unsigned (Go sends uint64 where Java sends
//! int64, and Java's hashes are negative longs); lists may be absent or nil;
//! unknown keys are ignored.

mod msgpack;

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::io::Read;

/// Limits on what one request may hold. Counts are checked while decoding, so a
/// small body that declares a million points stops at the limit instead of
/// becoming a million records.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Bytes after decompression: a gzip bomb stops here.
    pub max_decompressed_bytes: usize,
    /// Stats buckets.
    pub max_buckets: usize,
    /// Backlogs (offsets), over all buckets.
    pub max_backlogs: usize,
    /// Stats points (pathway records), over all buckets.
    pub max_stats_points: usize,
    /// Failed-send counts.
    pub max_failed_sends: usize,
    /// Delivery facts: produced, consumed, skipped and started counts together.
    pub max_delivery_facts: usize,
    /// Tags of backlogs and edge tags of points, together.
    pub max_tags: usize,
    /// Trace ids attached to counts, together.
    pub max_trace_ids: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_decompressed_bytes: 64 << 20,
            max_buckets: 1_000,
            max_backlogs: 20_000,
            max_stats_points: 20_000,
            max_failed_sends: 10_000,
            max_delivery_facts: 50_000,
            max_tags: 200_000,
            max_trace_ids: 50_000,
        }
    }
}

impl Limits {
    /// No limit on counts: for payloads this process made itself.
    pub fn unbounded_counts(max_decompressed_bytes: usize) -> Self {
        Self {
            max_decompressed_bytes,
            max_buckets: usize::MAX,
            max_backlogs: usize::MAX,
            max_stats_points: usize::MAX,
            max_failed_sends: usize::MAX,
            max_delivery_facts: usize::MAX,
            max_tags: usize::MAX,
            max_trace_ids: usize::MAX,
        }
    }

    fn of(&self, what: Counted) -> usize {
        match what {
            Counted::Buckets => self.max_buckets,
            Counted::Backlogs => self.max_backlogs,
            Counted::StatsPoints => self.max_stats_points,
            Counted::FailedSends => self.max_failed_sends,
            Counted::DeliveryFacts => self.max_delivery_facts,
            Counted::Tags => self.max_tags,
            Counted::TraceIds => self.max_trace_ids,
        }
    }
}

/// What a payload's lists hold, each with its own limit.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Counted {
    Buckets,
    Backlogs,
    StatsPoints,
    FailedSends,
    DeliveryFacts,
    Tags,
    TraceIds,
}

impl Counted {
    const ALL: [Counted; 7] = [
        Counted::Buckets,
        Counted::Backlogs,
        Counted::StatsPoints,
        Counted::FailedSends,
        Counted::DeliveryFacts,
        Counted::Tags,
        Counted::TraceIds,
    ];

    /// The name used in errors and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Counted::Buckets => "buckets",
            Counted::Backlogs => "backlogs",
            Counted::StatsPoints => "stats_points",
            Counted::FailedSends => "failed_sends",
            Counted::DeliveryFacts => "delivery_facts",
            Counted::Tags => "tags",
            Counted::TraceIds => "trace_ids",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("gzip body is invalid or truncated: {0}")]
    Gzip(std::io::Error),
    #[error("body is larger than {limit} bytes once decompressed")]
    TooLarge { limit: usize },
    #[error("body is not a valid pipeline stats payload: {0}")]
    Msgpack(String),
    #[error("payload holds more than {limit} {}", what.as_str())]
    OverLimit { what: Counted, limit: usize },
    #[error("{0}")]
    Memory(crate::budget::Spent),
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Payload<S = String> {
    #[serde(rename = "Env")]
    pub env: S,
    #[serde(rename = "Service")]
    pub service: S,
    #[serde(rename = "Lang")]
    pub lang: S,
    #[serde(rename = "TracerVersion")]
    pub tracer_version: S,
    #[serde(rename = "Version")]
    pub version: S,
    #[serde(rename = "Stats")]
    pub stats: Vec<Bucket<S>>,
    #[serde(rename = "ProcessTags")]
    pub process_tags: Vec<S>,
    #[serde(rename = "ProductMask")]
    pub product_mask: u64,
    /// Java only: part of the node hash.
    #[serde(rename = "PrimaryTag")]
    pub primary_tag: S,
    /// Python only.
    #[serde(rename = "Hostname")]
    pub hostname: S,
    /// streamsight's SDK: failed sends, which tracers do not report.
    #[serde(rename = "StreamsightFailedSends")]
    pub failed_sends: Vec<FailedSends<S>>,
    /// streamsight's SDK: message counts for drop accounting.
    #[serde(rename = "StreamsightDelivery")]
    pub delivery: Delivery<S>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Bucket<S = String> {
    /// Unix nanoseconds.
    #[serde(rename = "Start")]
    pub start: u64,
    /// Nanoseconds, 10 s by default.
    #[serde(rename = "Duration")]
    pub duration: u64,
    #[serde(rename = "Stats")]
    pub stats: Vec<StatsPoint<S>>,
    #[serde(rename = "Backlogs")]
    pub backlogs: Vec<Backlog<S>>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StatsPoint<S = String> {
    #[serde(rename = "EdgeTags")]
    pub edge_tags: Vec<S>,
    #[serde(rename = "Hash")]
    pub hash: u64,
    #[serde(rename = "ParentHash")]
    pub parent_hash: u64,
    /// DDSketch protobuf, seconds.
    #[serde(rename = "PathwayLatency", serialize_with = "serde_bytes::serialize")]
    pub pathway_latency: Vec<u8>,
    /// DDSketch protobuf, seconds.
    #[serde(rename = "EdgeLatency", serialize_with = "serde_bytes::serialize")]
    pub edge_latency: Vec<u8>,
    /// DDSketch protobuf, bytes.
    #[serde(rename = "PayloadSize", serialize_with = "serde_bytes::serialize")]
    pub payload_size: Vec<u8>,
    /// "current" or "origin".
    #[serde(rename = "TimestampType")]
    pub timestamp_type: S,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Backlog<S = String> {
    #[serde(rename = "Tags")]
    pub tags: Vec<S>,
    #[serde(rename = "Value")]
    pub value: i64,
}

/// Failed sends per (topic, partition or -1, error) in one bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct FailedSends<S = String> {
    #[serde(rename = "Topic")]
    pub topic: S,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "Error")]
    pub error: S,
    #[serde(rename = "Count")]
    pub count: u64,
    #[serde(rename = "KafkaClusterId")]
    pub cluster: S,
    /// The one-minute window of the records' timestamps (unix ms); 0 when a
    /// sender does not say, and the bucket's time is used.
    #[serde(rename = "WindowMs")]
    pub window_ms: i64,
    /// A few trace ids of the failed records, to follow them.
    #[serde(rename = "TraceIds")]
    pub trace_ids: Vec<S>,
    /// A send to the same partition (any partition of the topic, for
    /// partition -1) succeeded after the last of these failures, in the
    /// sender's own order: one aggregate holds both, and only the sender
    /// knows which came last. Absent: false.
    #[serde(rename = "Recovered")]
    pub recovered: bool,
}

/// What an SDK counted for drop accounting in one flush period.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Delivery<S = String> {
    #[serde(rename = "KafkaClusterId")]
    pub cluster: S,
    #[serde(rename = "Produced")]
    pub produced: Vec<ProducedCount<S>>,
    #[serde(rename = "Consumed")]
    pub consumed: Vec<ConsumedCount<S>>,
    #[serde(rename = "Skipped")]
    pub skipped: Vec<SkippedRange<S>>,
    #[serde(rename = "Started")]
    pub started: Vec<ConsumeStart<S>>,
}

impl<S> Delivery<S> {
    pub fn is_empty(&self) -> bool {
        self.produced.is_empty() && self.consumed.is_empty() && self.skipped.is_empty() && self.started.is_empty()
    }
}

/// Records the broker acknowledged, per (topic, partition, one-minute window of
/// their timestamps).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProducedCount<S = String> {
    #[serde(rename = "Topic")]
    pub topic: S,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "WindowMs")]
    pub window_ms: i64,
    #[serde(rename = "Count")]
    pub count: u64,
    #[serde(rename = "FirstOffset")]
    pub first_offset: i64,
    #[serde(rename = "LastOffset")]
    pub last_offset: i64,
}

/// What a group's consumer did with records, per (topic, partition, window).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConsumedCount<S = String> {
    #[serde(rename = "Group")]
    pub group: S,
    #[serde(rename = "Topic")]
    pub topic: S,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "WindowMs")]
    pub window_ms: i64,
    #[serde(rename = "Received")]
    pub received: u64,
    #[serde(rename = "Failed")]
    pub failed: u64,
    #[serde(rename = "DeadLettered")]
    pub dead_lettered: u64,
    #[serde(rename = "TraceIds")]
    pub trace_ids: Vec<S>,
}

/// Offsets a consumer jumped over: the next record it got was past them.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SkippedRange<S = String> {
    #[serde(rename = "Group")]
    pub group: S,
    #[serde(rename = "Topic")]
    pub topic: S,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "FirstOffset")]
    pub first_offset: i64,
    #[serde(rename = "LastOffset")]
    pub last_offset: i64,
    #[serde(rename = "AtMs")]
    pub at_ms: i64,
}

/// The first record a consumer got from a partition after starting or being
/// assigned it: compared with the group's committed offset by the collector.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConsumeStart<S = String> {
    #[serde(rename = "Group")]
    pub group: S,
    #[serde(rename = "Topic")]
    pub topic: S,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "FirstOffset")]
    pub first_offset: i64,
    #[serde(rename = "AtMs")]
    pub at_ms: i64,
}

/// Decodes a request body; `gzipped` from `Content-Encoding`, or sniffed.
pub fn decode(body: &[u8], gzipped: bool, limits: Limits) -> Result<Payload, PayloadError> {
    decode_msgpack(&inflate(body, gzipped, limits)?, limits)
}

/// A request body as msgpack: decompressed when gzipped (from `Content-Encoding`,
/// or sniffed), never past `max_decompressed_bytes`.
pub fn inflate(body: &[u8], gzipped: bool, limits: Limits) -> Result<Cow<'_, [u8]>, PayloadError> {
    let gzipped = gzipped || body.starts_with(&[0x1f, 0x8b]);
    let raw = if gzipped {
        Cow::Owned(gunzip(body, limits.max_decompressed_bytes)?)
    } else {
        Cow::Borrowed(body)
    };
    if raw.len() > limits.max_decompressed_bytes {
        return Err(PayloadError::TooLarge {
            limit: limits.max_decompressed_bytes,
        });
    }
    Ok(raw)
}

/// Decompresses at most `limit + 1` bytes, charging this thread's
/// [`crate::budget`] meter before each allocation.
///
/// The buffer starts at the size the gzip trailer states (ISIZE, the input's
/// length mod 2³², within the limit): an honest body is decompressed into one
/// allocation of exactly its size. A trailer that lies only costs growth: the
/// buffer at most doubles, never past `limit + 1`, and while it moves the old
/// buffer is charged too, so what is charged is what is held at the peak.
pub(crate) fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, PayloadError> {
    let cap = limit.saturating_add(1);
    let stated = body
        .len()
        .checked_sub(4)
        .map(|at| u32::from_le_bytes([body[at], body[at + 1], body[at + 2], body[at + 3]]) as usize);
    // One more than stated, so that the end is seen without a growth.
    let first = stated.map_or(64 << 10, |n| n.saturating_add(1)).clamp(1, cap);
    crate::budget::charge(first).map_err(PayloadError::Memory)?;
    let mut out: Vec<u8> = Vec::with_capacity(first);
    let mut gz = flate2::read::GzDecoder::new(body);
    while out.len() < cap {
        if out.len() == out.capacity() {
            let old = out.capacity();
            let more = old.min(cap - old).max(1);
            // The new buffer's growth is kept; the old one is held until the move ends.
            crate::budget::charge(more + old).map_err(PayloadError::Memory)?;
            out.reserve_exact(more);
            crate::budget::release(old);
        }
        // Reads into the spare capacity only (no zeroing, no growth of its own).
        let spare = (out.capacity() - out.len()) as u64;
        match (&mut gz).take(spare).read_to_end(&mut out) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(PayloadError::Gzip(e)),
        }
    }
    Ok(out)
}

/// Encodes a payload as tracers do (msgpack map with string keys, gzipped).
pub fn encode(payload: &Payload) -> Vec<u8> {
    use std::io::Write;
    let raw = rmp_serde::to_vec_named(payload).unwrap_or_default();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing to a Vec cannot fail.
    let _ = gz.write_all(&raw);
    gz.finish().unwrap_or_default()
}

/// Decodes msgpack, counting list elements against `limits` as they are read.
/// With `S = &str` the payload's strings borrow from `bytes`: what the collector
/// reads on every request, without an allocation per tag.
pub fn decode_msgpack<'a, S: Text<'a>>(bytes: &'a [u8], limits: Limits) -> Result<Payload<S>, PayloadError> {
    msgpack::decode(bytes, limits)
}

/// A payload's string type: owned, or borrowed from the decoded bytes.
pub trait Text<'a>: Sized + Default {
    fn from_wire(s: &'a str) -> Self;
}

impl<'a> Text<'a> for &'a str {
    fn from_wire(s: &'a str) -> Self {
        s
    }
}

impl<'a> Text<'a> for String {
    fn from_wire(s: &'a str) -> Self {
        s.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A payload shaped like dd-trace-java's: signed hashes, int64 values.
    fn java_like() -> Vec<u8> {
        let mut b = Vec::new();
        rmp::encode::write_map_len(&mut b, 7).unwrap();
        for (k, v) in [
            ("Env", "prod"),
            ("Service", "billing"),
            ("Lang", "java"),
            ("TracerVersion", "1.60.0"),
        ] {
            rmp::encode::write_str(&mut b, k).unwrap();
            rmp::encode::write_str(&mut b, v).unwrap();
        }
        rmp::encode::write_str(&mut b, "PrimaryTag").unwrap();
        rmp::encode::write_str(&mut b, "").unwrap();
        rmp::encode::write_str(&mut b, "Unknown").unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        rmp::encode::write_bool(&mut b, true).unwrap();
        rmp::encode::write_str(&mut b, "Stats").unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        // bucket
        rmp::encode::write_map_len(&mut b, 4).unwrap();
        rmp::encode::write_str(&mut b, "Start").unwrap();
        rmp::encode::write_sint(&mut b, 1_700_000_000_000_000_000).unwrap();
        rmp::encode::write_str(&mut b, "Duration").unwrap();
        rmp::encode::write_uint(&mut b, 10_000_000_000).unwrap();
        rmp::encode::write_str(&mut b, "Stats").unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        rmp::encode::write_map_len(&mut b, 5).unwrap();
        rmp::encode::write_str(&mut b, "EdgeTags").unwrap();
        rmp::encode::write_array_len(&mut b, 3).unwrap();
        for t in ["direction:out", "topic:orders", "type:kafka"] {
            rmp::encode::write_str(&mut b, t).unwrap();
        }
        rmp::encode::write_str(&mut b, "Hash").unwrap();
        rmp::encode::write_sint(&mut b, -42).unwrap();
        rmp::encode::write_str(&mut b, "ParentHash").unwrap();
        rmp::encode::write_uint(&mut b, 7).unwrap();
        rmp::encode::write_str(&mut b, "PathwayLatency").unwrap();
        rmp::encode::write_bin(&mut b, &super::super::sketch::Mapping::default().encode(&[0.5])).unwrap();
        rmp::encode::write_str(&mut b, "EdgeLatency").unwrap();
        rmp::encode::write_nil(&mut b).unwrap();
        rmp::encode::write_str(&mut b, "Backlogs").unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        rmp::encode::write_map_len(&mut b, 2).unwrap();
        rmp::encode::write_str(&mut b, "Tags").unwrap();
        rmp::encode::write_array_len(&mut b, 3).unwrap();
        for t in ["type:kafka_produce", "topic:orders", "partition:0"] {
            rmp::encode::write_str(&mut b, t).unwrap();
        }
        rmp::encode::write_str(&mut b, "Value").unwrap();
        rmp::encode::write_uint(&mut b, u64::MAX).unwrap();
        b
    }

    #[test]
    fn decodes_a_java_like_payload() {
        let p = decode(&java_like(), false, Limits::default()).unwrap();
        assert_eq!(
            (p.env.as_str(), p.service.as_str(), p.lang.as_str()),
            ("prod", "billing", "java")
        );
        let bucket = &p.stats[0];
        assert_eq!(bucket.duration, 10_000_000_000);
        let point = &bucket.stats[0];
        assert_eq!(point.hash, (-42i64) as u64);
        assert_eq!(point.parent_hash, 7);
        assert!(point.edge_latency.is_empty());
        assert!(!point.pathway_latency.is_empty());
        assert_eq!(bucket.backlogs[0].value, i64::MAX, "a uint64 beyond i64 saturates");
    }

    #[test]
    fn gzip_is_sniffed_and_bounded() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&java_like()).unwrap();
        let body = gz.finish().unwrap();
        assert!(decode(&body, false, Limits::default()).is_ok());
        let small = Limits {
            max_decompressed_bytes: 16,
            ..Limits::default()
        };
        assert!(matches!(
            decode(&body, true, small),
            Err(PayloadError::TooLarge { limit: 16 })
        ));
        assert!(matches!(
            decode(&body[..body.len() / 2], true, Limits::default()),
            Err(PayloadError::Gzip(_))
        ));
    }

    #[test]
    fn a_gzip_bomb_stops_at_the_limit() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        let zeros = vec![0u8; 1 << 20];
        for _ in 0..64 {
            gz.write_all(&zeros).unwrap();
        }
        let bomb = gz.finish().unwrap();
        assert!(bomb.len() < 200_000);
        let limits = Limits {
            max_decompressed_bytes: 4 << 20,
            ..Limits::default()
        };
        assert!(matches!(
            decode(&bomb, true, limits),
            Err(PayloadError::TooLarge { .. })
        ));
    }

    /// `{"Stats":[{"Stats":[{} × n]}]}`, as raw msgpack.
    fn empty_points(n: u32) -> Vec<u8> {
        let mut b = Vec::new();
        rmp::encode::write_map_len(&mut b, 1).unwrap();
        rmp::encode::write_str(&mut b, "Stats").unwrap();
        rmp::encode::write_array_len(&mut b, 1).unwrap();
        rmp::encode::write_map_len(&mut b, 1).unwrap();
        rmp::encode::write_str(&mut b, "Stats").unwrap();
        rmp::encode::write_array_len(&mut b, n).unwrap();
        for _ in 0..n {
            rmp::encode::write_map_len(&mut b, 0).unwrap();
        }
        b
    }

    #[test]
    fn counts_are_limited_while_decoding() {
        let limits = Limits {
            max_stats_points: 100,
            ..Limits::default()
        };
        assert_eq!(
            decode(&empty_points(100), false, limits).unwrap().stats[0].stats.len(),
            100
        );
        let err = decode(&empty_points(1_000_000), false, limits).unwrap_err();
        assert!(
            matches!(
                err,
                PayloadError::OverLimit {
                    what: Counted::StatsPoints,
                    limit: 100
                }
            ),
            "{err}"
        );
        // A declared length is not trusted either: a header claiming a million
        // elements with few behind it fails at the header.
        let mut lying = empty_points(0);
        lying.truncate(lying.len() - 1);
        rmp::encode::write_array_len(&mut lying, 1_000_000).unwrap();
        assert!(matches!(
            decode(&lying, false, limits),
            Err(PayloadError::OverLimit { .. })
        ));
        // Limits are per decode: the next one starts afresh.
        assert!(decode(&empty_points(100), false, limits).is_ok());
    }

    #[test]
    fn limits_add_up_over_buckets() {
        let bucket = Bucket {
            backlogs: vec![Backlog::default(); 3],
            ..Bucket::default()
        };
        let p = Payload {
            stats: vec![bucket.clone(), bucket],
            ..Payload::default()
        };
        let limits = Limits {
            max_backlogs: 5,
            ..Limits::default()
        };
        assert!(matches!(
            decode(&encode(&p), true, limits),
            Err(PayloadError::OverLimit {
                what: Counted::Backlogs,
                ..
            })
        ));
    }

    #[test]
    fn encode_round_trips() {
        let p = Payload {
            service: "svc".into(),
            stats: vec![Bucket {
                start: 1,
                duration: 2,
                stats: vec![StatsPoint {
                    hash: u64::MAX,
                    edge_latency: vec![1, 2, 3],
                    ..Default::default()
                }],
                backlogs: vec![Backlog {
                    tags: vec!["type:kafka_produce".into()],
                    value: -1,
                }],
            }],
            failed_sends: vec![FailedSends {
                topic: "t".into(),
                partition: -1,
                error: "e".into(),
                count: 3,
                cluster: String::new(),
                window_ms: 60_000,
                trace_ids: vec!["0af7651916cd43dd8448eb211c80319c".into()],
                recovered: true,
            }],
            delivery: Delivery {
                cluster: "c".into(),
                produced: vec![ProducedCount {
                    topic: "t".into(),
                    partition: 0,
                    window_ms: 60_000,
                    count: 5,
                    first_offset: 10,
                    last_offset: 14,
                }],
                consumed: vec![ConsumedCount {
                    group: "g".into(),
                    received: 4,
                    failed: 1,
                    ..Default::default()
                }],
                skipped: vec![SkippedRange {
                    first_offset: 3,
                    last_offset: 5,
                    ..Default::default()
                }],
                started: vec![ConsumeStart::default()],
            },
            ..Default::default()
        };
        assert_eq!(decode(&encode(&p), true, Limits::default()).unwrap(), p);
    }

    #[test]
    fn wrong_types_say_so() {
        let mut b = Vec::new();
        rmp::encode::write_map_len(&mut b, 1).unwrap();
        rmp::encode::write_str(&mut b, "Stats").unwrap();
        rmp::encode::write_str(&mut b, "not a list").unwrap();
        let err = decode(&b, false, Limits::default()).unwrap_err();
        assert!(err.to_string().contains("invalid type"), "{err}");
        assert!(decode(&[0xc1], false, Limits::default()).is_err());
        assert!(decode(&[], false, Limits::default()).is_err());
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// The fuzz target's property, in the ordinary test run.
        #[test]
        fn any_bytes_decode_or_fail_cleanly(bytes in prop::collection::vec(any::<u8>(), 0..512), gzipped: bool) {
            let _ = decode(&bytes, gzipped, Limits { max_decompressed_bytes: 1 << 16, ..Limits::default() });
        }

        /// Valid payloads with bytes flipped: deeper into the decoder than noise goes.
        #[test]
        fn corrupted_payloads_fail_cleanly(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
            let mut raw = rmp_serde::to_vec_named(&Payload::<String> {
                service: "s".into(),
                stats: vec![Bucket {
                    start: 1,
                    duration: 2,
                    stats: vec![StatsPoint { edge_tags: vec!["a:b".into()], ..Default::default() }],
                    backlogs: vec![Backlog { tags: vec!["type:kafka_produce".into()], value: 3 }],
                }],
                ..Default::default()
            }).unwrap();
            for (i, b) in flips {
                let at = i.index(raw.len());
                raw[at] = b;
            }
            let _ = decode(&raw, false, Limits::default());
        }
    }

    #[test]
    fn gunzip_takes_one_allocation_of_the_stated_size_and_charges_a_lying_trailer_as_it_grows() {
        use crate::budget::{Meter, metered};
        use std::io::Write as _;
        let raw = vec![7u8; 3 << 20];
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let honest = gz.finish().unwrap();
        let mut meter = Meter::unbounded();
        let out = metered(&mut meter, || gunzip(&honest, 64 << 20)).unwrap();
        assert_eq!(out, raw);
        assert_eq!((out.capacity(), meter.charged()), (raw.len() + 1, raw.len() + 1));

        // A trailer that states 1 byte: the buffer grows by doubling, each
        // growth charged with the old buffer it moves out of, and given back.
        let mut lying = honest.clone();
        let at = lying.len() - 4;
        lying[at..].copy_from_slice(&1u32.to_le_bytes());
        let mut meter = Meter::unbounded();
        let out = metered(&mut meter, || gunzip(&lying, 64 << 20));
        // flate2 checks the stated size at the end: a lie is an error.
        assert!(out.is_err());
        assert!(meter.charged() <= 2 * raw.len(), "{}", meter.charged());
        let mut small = Meter::new(4 << 20, None);
        assert!(matches!(
            metered(&mut small, || gunzip(&lying, 64 << 20)),
            Err(PayloadError::Memory(_))
        ));
    }
}
