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
    #[serde(rename = "Stats", deserialize_with = "buckets")]
    pub stats: Vec<Bucket>,
    #[serde(rename = "ProcessTags", deserialize_with = "tags")]
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
    #[serde(rename = "StreamsightFailedSends", deserialize_with = "failed_sends")]
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
    #[serde(rename = "Stats", deserialize_with = "stats_points")]
    pub stats: Vec<StatsPoint>,
    #[serde(rename = "Backlogs", deserialize_with = "backlogs")]
    pub backlogs: Vec<Backlog>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatsPoint {
    #[serde(rename = "EdgeTags", deserialize_with = "tags")]
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
    #[serde(rename = "Tags", deserialize_with = "tags")]
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
    #[serde(rename = "TraceIds", deserialize_with = "trace_ids")]
    pub trace_ids: Vec<String>,
}

/// What an SDK counted for drop accounting in one flush period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Delivery {
    #[serde(rename = "KafkaClusterId", deserialize_with = "nullable")]
    pub cluster: String,
    #[serde(rename = "Produced", deserialize_with = "delivery_facts")]
    pub produced: Vec<ProducedCount>,
    #[serde(rename = "Consumed", deserialize_with = "delivery_facts")]
    pub consumed: Vec<ConsumedCount>,
    #[serde(rename = "Skipped", deserialize_with = "delivery_facts")]
    pub skipped: Vec<SkippedRange>,
    #[serde(rename = "Started", deserialize_with = "delivery_facts")]
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
    #[serde(rename = "TraceIds", deserialize_with = "trace_ids")]
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
        let out = gunzip(body, limits.max_decompressed_bytes)?;
        if out.len() > limits.max_decompressed_bytes {
            return Err(PayloadError::TooLarge {
                limit: limits.max_decompressed_bytes,
            });
        }
        decode_msgpack(&out, limits)
    } else {
        if body.len() > limits.max_decompressed_bytes {
            return Err(PayloadError::TooLarge {
                limit: limits.max_decompressed_bytes,
            });
        }
        decode_msgpack(body, limits)
    }
}

/// Decompresses at most `limit + 1` bytes. The buffer grows by at most doubling
/// and never past `limit + 1`: a bomb costs the limit, not twice it.
pub(crate) fn gunzip(body: &[u8], limit: usize) -> Result<Vec<u8>, PayloadError> {
    let cap = limit.saturating_add(1);
    let mut out: Vec<u8> = Vec::with_capacity(body.len().saturating_mul(4).max(64 << 10).min(cap));
    let mut gz = flate2::read::GzDecoder::new(body);
    while out.len() < cap {
        if out.len() == out.capacity() {
            out.reserve_exact(out.len().min(cap - out.len()));
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
pub fn decode_msgpack(bytes: &[u8], limits: Limits) -> Result<Payload, PayloadError> {
    BUDGET.with(|b| b.set(Some(Budget::new(limits))));
    let decoded = rmp_serde::from_slice::<Payload>(bytes);
    let budget = BUDGET.with(|b| b.take());
    match (decoded, budget.and_then(|b| b.exceeded)) {
        (_, Some(what)) => Err(PayloadError::OverLimit {
            what,
            limit: limits.of(what),
        }),
        (Ok(payload), None) => Ok(payload),
        (Err(e), None) => Err(PayloadError::Msgpack(e.to_string())),
    }
}

/// What is left of a decode's limits. Serde's derive gives a field's
/// deserializer no context, so the decode in progress on this thread keeps it.
#[derive(Copy, Clone, Debug)]
struct Budget {
    left: [usize; Counted::ALL.len()],
    exceeded: Option<Counted>,
}

impl Budget {
    fn new(limits: Limits) -> Self {
        Self {
            left: Counted::ALL.map(|c| limits.of(c)),
            exceeded: None,
        }
    }
}

thread_local! {
    static BUDGET: std::cell::Cell<Option<Budget>> = const { std::cell::Cell::new(None) };
}

/// Takes `n` from the budget of `what`; false (and the budget marked exceeded)
/// when not that many are left. Without a decode in progress, nothing is counted.
fn charge(what: Counted, n: usize) -> bool {
    BUDGET.with(|cell| {
        let Some(mut b) = cell.get() else {
            return true;
        };
        let left = &mut b.left[what as usize];
        let ok = *left >= n;
        if ok {
            *left -= n;
        } else {
            b.exceeded = b.exceeded.or(Some(what));
        }
        cell.set(Some(b));
        ok
    })
}

/// A nullable list whose length is charged to `what`: a declared length over
/// what is left fails before any element is read.
fn bounded<'de, D, T>(d: D, what: Counted) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Seq<T>(Counted, std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> Visitor<'de> for Seq<T> {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list")
        }
        fn visit_unit<E: de::Error>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_none<E: de::Error>(self) -> Result<Vec<T>, E> {
            Ok(Vec::new())
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let over = || de::Error::custom(format_args!("too many {}", self.0.as_str()));
            let declared = seq.size_hint().unwrap_or(0);
            if !charge(self.0, declared) {
                return Err(over());
            }
            let mut out = Vec::with_capacity(declared.min(1024));
            while let Some(x) = seq.next_element()? {
                // A declared length is charged already; only elements past it count here.
                if out.len() >= declared && !charge(self.0, 1) {
                    return Err(over());
                }
                out.push(x);
            }
            Ok(out)
        }
    }
    d.deserialize_any(Seq(what, std::marker::PhantomData))
}

macro_rules! bounded_fields {
    ($($name:ident => $what:ident),* $(,)?) => {$(
        fn $name<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
            bounded(d, Counted::$what)
        }
    )*};
}

bounded_fields! {
    buckets => Buckets,
    backlogs => Backlogs,
    stats_points => StatsPoints,
    failed_sends => FailedSends,
    delivery_facts => DeliveryFacts,
    tags => Tags,
    trace_ids => TraceIds,
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
