//! The body tracers POST to `/v0.1/pipeline_stats`: msgpack, usually gzipped.
//!
//! Every field of reference.md §3 from the Java, Python, Go and .NET tracers is
//! read. Integers are accepted signed or unsigned (Go sends uint64 where Java sends
//! int64, and Java's hashes are negative longs); lists may be absent or nil;
//! unknown keys are ignored.

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::io::Read;

/// Limits on what one request may hold.
#[derive(Copy, Clone, Debug)]
pub struct Limits {
    /// Bytes after decompression: a gzip bomb stops here.
    pub max_decompressed_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_decompressed_bytes: 64 << 20,
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
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Payload {
    #[serde(rename = "Env", deserialize_with = "nullable")]
    pub env: String,
    #[serde(rename = "Service", deserialize_with = "nullable")]
    pub service: String,
    #[serde(rename = "Lang", deserialize_with = "nullable")]
    pub lang: String,
    #[serde(rename = "TracerVersion", deserialize_with = "nullable")]
    pub tracer_version: String,
    #[serde(rename = "Version", deserialize_with = "nullable")]
    pub version: String,
    #[serde(rename = "Stats", deserialize_with = "nullable")]
    pub stats: Vec<Bucket>,
    #[serde(rename = "ProcessTags", deserialize_with = "nullable")]
    pub process_tags: Vec<String>,
    #[serde(rename = "ProductMask", deserialize_with = "flexible_u64")]
    pub product_mask: u64,
    /// Java only: part of the node hash.
    #[serde(rename = "PrimaryTag", deserialize_with = "nullable")]
    pub primary_tag: String,
    /// Python only.
    #[serde(rename = "Hostname", deserialize_with = "nullable")]
    pub hostname: String,
    /// streamsight's SDK: failed sends, which tracers do not report.
    #[serde(rename = "StreamsightFailedSends", deserialize_with = "nullable")]
    pub failed_sends: Vec<FailedSends>,
    /// streamsight's SDK: message counts for drop accounting.
    #[serde(rename = "StreamsightDelivery", deserialize_with = "nullable")]
    pub delivery: Delivery,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bucket {
    /// Unix nanoseconds.
    #[serde(rename = "Start", deserialize_with = "flexible_u64")]
    pub start: u64,
    /// Nanoseconds, 10 s by default.
    #[serde(rename = "Duration", deserialize_with = "flexible_u64")]
    pub duration: u64,
    #[serde(rename = "Stats", deserialize_with = "nullable")]
    pub stats: Vec<StatsPoint>,
    #[serde(rename = "Backlogs", deserialize_with = "nullable")]
    pub backlogs: Vec<Backlog>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsPoint {
    #[serde(rename = "EdgeTags", deserialize_with = "nullable")]
    pub edge_tags: Vec<String>,
    #[serde(rename = "Hash", deserialize_with = "flexible_u64")]
    pub hash: u64,
    #[serde(rename = "ParentHash", deserialize_with = "flexible_u64")]
    pub parent_hash: u64,
    /// DDSketch protobuf, seconds.
    #[serde(
        rename = "PathwayLatency",
        deserialize_with = "nullable_bytes",
        serialize_with = "serde_bytes::serialize"
    )]
    pub pathway_latency: Vec<u8>,
    /// DDSketch protobuf, seconds.
    #[serde(
        rename = "EdgeLatency",
        deserialize_with = "nullable_bytes",
        serialize_with = "serde_bytes::serialize"
    )]
    pub edge_latency: Vec<u8>,
    /// DDSketch protobuf, bytes.
    #[serde(
        rename = "PayloadSize",
        deserialize_with = "nullable_bytes",
        serialize_with = "serde_bytes::serialize"
    )]
    pub payload_size: Vec<u8>,
    /// "current" or "origin".
    #[serde(rename = "TimestampType", deserialize_with = "nullable")]
    pub timestamp_type: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Backlog {
    #[serde(rename = "Tags", deserialize_with = "nullable")]
    pub tags: Vec<String>,
    #[serde(rename = "Value", deserialize_with = "flexible_i64")]
    pub value: i64,
}

/// Failed sends per (topic, partition or -1, error) in one bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FailedSends {
    #[serde(rename = "Topic", deserialize_with = "nullable")]
    pub topic: String,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "Error", deserialize_with = "nullable")]
    pub error: String,
    #[serde(rename = "Count", deserialize_with = "flexible_u64")]
    pub count: u64,
    #[serde(rename = "KafkaClusterId", deserialize_with = "nullable")]
    pub cluster: String,
    /// The one-minute window of the records' timestamps (unix ms); 0 when a
    /// sender does not say, and the bucket's time is used.
    #[serde(rename = "WindowMs", deserialize_with = "flexible_i64")]
    pub window_ms: i64,
    /// A few trace ids of the failed records, to follow them.
    #[serde(rename = "TraceIds", deserialize_with = "nullable")]
    pub trace_ids: Vec<String>,
}

/// What an SDK counted for drop accounting in one flush period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delivery {
    #[serde(rename = "KafkaClusterId", deserialize_with = "nullable")]
    pub cluster: String,
    #[serde(rename = "Produced", deserialize_with = "nullable")]
    pub produced: Vec<ProducedCount>,
    #[serde(rename = "Consumed", deserialize_with = "nullable")]
    pub consumed: Vec<ConsumedCount>,
    #[serde(rename = "Skipped", deserialize_with = "nullable")]
    pub skipped: Vec<SkippedRange>,
    #[serde(rename = "Started", deserialize_with = "nullable")]
    pub started: Vec<ConsumeStart>,
}

impl Delivery {
    pub fn is_empty(&self) -> bool {
        self.produced.is_empty() && self.consumed.is_empty() && self.skipped.is_empty() && self.started.is_empty()
    }
}

/// Records the broker acknowledged, per (topic, partition, one-minute window of
/// their timestamps).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProducedCount {
    #[serde(rename = "Topic", deserialize_with = "nullable")]
    pub topic: String,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "WindowMs", deserialize_with = "flexible_i64")]
    pub window_ms: i64,
    #[serde(rename = "Count", deserialize_with = "flexible_u64")]
    pub count: u64,
    #[serde(rename = "FirstOffset", deserialize_with = "flexible_i64")]
    pub first_offset: i64,
    #[serde(rename = "LastOffset", deserialize_with = "flexible_i64")]
    pub last_offset: i64,
}

/// What a group's consumer did with records, per (topic, partition, window).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumedCount {
    #[serde(rename = "Group", deserialize_with = "nullable")]
    pub group: String,
    #[serde(rename = "Topic", deserialize_with = "nullable")]
    pub topic: String,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "WindowMs", deserialize_with = "flexible_i64")]
    pub window_ms: i64,
    #[serde(rename = "Received", deserialize_with = "flexible_u64")]
    pub received: u64,
    #[serde(rename = "Failed", deserialize_with = "flexible_u64")]
    pub failed: u64,
    #[serde(rename = "DeadLettered", deserialize_with = "flexible_u64")]
    pub dead_lettered: u64,
    #[serde(rename = "TraceIds", deserialize_with = "nullable")]
    pub trace_ids: Vec<String>,
}

/// Offsets a consumer jumped over: the next record it got was past them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkippedRange {
    #[serde(rename = "Group", deserialize_with = "nullable")]
    pub group: String,
    #[serde(rename = "Topic", deserialize_with = "nullable")]
    pub topic: String,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "FirstOffset", deserialize_with = "flexible_i64")]
    pub first_offset: i64,
    #[serde(rename = "LastOffset", deserialize_with = "flexible_i64")]
    pub last_offset: i64,
    #[serde(rename = "AtMs", deserialize_with = "flexible_i64")]
    pub at_ms: i64,
}

/// The first record a consumer got from a partition after starting or being
/// assigned it: compared with the group's committed offset by the collector.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConsumeStart {
    #[serde(rename = "Group", deserialize_with = "nullable")]
    pub group: String,
    #[serde(rename = "Topic", deserialize_with = "nullable")]
    pub topic: String,
    #[serde(rename = "Partition")]
    pub partition: i32,
    #[serde(rename = "FirstOffset", deserialize_with = "flexible_i64")]
    pub first_offset: i64,
    #[serde(rename = "AtMs", deserialize_with = "flexible_i64")]
    pub at_ms: i64,
}

/// Decodes a request body; `gzipped` from `Content-Encoding`, or sniffed.
pub fn decode(body: &[u8], gzipped: bool, limits: Limits) -> Result<Payload, PayloadError> {
    let gzipped = gzipped || body.starts_with(&[0x1f, 0x8b]);
    if gzipped {
        let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(limits.max_decompressed_bytes));
        flate2::read::GzDecoder::new(body)
            .take(limits.max_decompressed_bytes as u64 + 1)
            .read_to_end(&mut out)
            .map_err(PayloadError::Gzip)?;
        if out.len() > limits.max_decompressed_bytes {
            return Err(PayloadError::TooLarge {
                limit: limits.max_decompressed_bytes,
            });
        }
        decode_msgpack(&out)
    } else {
        if body.len() > limits.max_decompressed_bytes {
            return Err(PayloadError::TooLarge {
                limit: limits.max_decompressed_bytes,
            });
        }
        decode_msgpack(body)
    }
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

pub fn decode_msgpack(bytes: &[u8]) -> Result<Payload, PayloadError> {
    let payload: Payload = rmp_serde::from_slice(bytes).map_err(|e| PayloadError::Msgpack(e.to_string()))?;
    Ok(payload)
}

fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

fn nullable_bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
    Ok(Option::<serde_bytes::ByteBuf>::deserialize(d)?
        .map(|b| b.into_vec())
        .unwrap_or_default())
}

/// Any msgpack integer as u64; negative ones keep their bits (Java's signed hashes).
fn flexible_u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = u64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an integer")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
            Ok(v)
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
            Ok(v as u64)
        }
        fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
            Ok(0)
        }
    }
    d.deserialize_any(V)
}

/// Any msgpack integer as i64; a uint64 beyond i64 saturates (and the engine then
/// rejects it as out of range rather than it wrapping negative).
fn flexible_i64<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct V;
    impl Visitor<'_> for V {
        type Value = i64;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("an integer")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            Ok(i64::try_from(v).unwrap_or(i64::MAX))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            Ok(v)
        }
    }
    d.deserialize_any(V)
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
        };
        assert!(matches!(
            decode(&bomb, true, limits),
            Err(PayloadError::TooLarge { .. })
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
            let _ = decode(&bytes, gzipped, Limits { max_decompressed_bytes: 1 << 16 });
        }

        /// Valid payloads with bytes flipped: deeper into the decoder than noise goes.
        #[test]
        fn corrupted_payloads_fail_cleanly(flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)) {
            let mut raw = rmp_serde::to_vec_named(&Payload {
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
}
