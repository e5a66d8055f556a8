//! Reading one record of a polled cluster: key, headers, timestamp and value,
//! decoded where it can be (JSON, text, Confluent's schema-registry framing
//! named with its schema id), masked by the configured field paths, and
//! bounded in size; anything else a hex preview.

use crate::ActError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde::Serialize;
use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_dlq::stats::preview_of;
use streamsight_node::config::records::RecordsConfig;
use streamsight_node::secrets::hex;
use streamsight_poller::ClusterConfig;

/// Headers shown of one record; the rest are counted.
const MAX_HEADERS: usize = 64;
/// What a masked field reads.
pub const REDACTED: &str = "***redacted***";
/// The largest batch fetched: a record in a larger one is refused, said so.
const FETCH_BYTES: usize = 2 << 20;

/// One record as shown.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ReadRecord {
    pub cluster: String,
    pub topic: String,
    pub partition: i32,
    /// The offset read: the one asked for, or the next record's when that
    /// offset holds none (compaction, a transaction marker; see `note`).
    pub offset: i64,
    pub timestamp_ms: Option<i64>,
    /// `create_time` (the producer's) or `log_append_time` (the broker's).
    pub timestamp_type: Option<&'static str>,
    pub key: Shown,
    pub value: Shown,
    pub headers: Vec<(String, Shown)>,
    /// Headers past [`MAX_HEADERS`], not shown.
    pub headers_not_shown: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A key, value or header value, as far as it was decoded.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "encoding", rename_all = "snake_case")]
pub enum Shown {
    Null,
    Json {
        bytes: usize,
        json: Value,
    },
    Text {
        bytes: usize,
        text: String,
    },
    /// Confluent's framing (magic byte 0, schema id): decoded as Avro when
    /// `[serve.records] avro_schemas` names the id, as JSON when the payload
    /// is JSON (the JSON Schema serializer), else a hex preview.
    Confluent {
        bytes: usize,
        schema_id: u32,
        /// `avro` or `json`: how `json` was decoded.
        #[serde(skip_serializing_if = "Option::is_none")]
        format: Option<&'static str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        json: Option<Value>,
        #[serde(skip_serializing_if = "Option::is_none")]
        hex_preview: Option<String>,
        /// Why an Avro schema named for the id did not decode it.
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    },
    /// Not decoded (binary, or larger than `max_value_bytes`): its first
    /// `preview_bytes`, as text when they are text.
    Preview {
        bytes: usize,
        preview: String,
        hex: bool,
        truncated: bool,
    },
}

/// Decodes `bytes` as far as `limits` allow, masking `limits.redact`.
pub fn show(bytes: Option<&[u8]>, limits: &RecordsConfig) -> Shown {
    let Some(b) = bytes else { return Shown::Null };
    let n = b.len();
    let preview = |b: &[u8]| {
        let (preview, hex) = preview_of(b, limits.preview_bytes);
        Shown::Preview {
            bytes: n,
            preview,
            hex,
            truncated: b.len() > limits.preview_bytes,
        }
    };
    if n > limits.max_value_bytes {
        return preview(b);
    }
    if n >= 5 && b[0] == 0 {
        let schema_id = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
        let (mut format, mut note) = (None, None);
        let mut decoded = None;
        let named = limits
            .avro_schema(schema_id)
            .map(|p| (p, "avro"))
            .or_else(|| limits.protobuf_schema(schema_id).map(|p| (p, "protobuf")));
        if let Some((path, kind)) = named {
            let result = match kind {
                "avro" => avro(path, &b[5..], limits),
                _ => protobuf(path, &b[5..], limits),
            };
            match result {
                Ok(v) => {
                    decoded = Some(v);
                    format = Some(kind);
                }
                Err(why) => note = Some(format!("schema {schema_id} ({}): {why}", path.display())),
            }
        }
        if decoded.is_none() {
            decoded = json(&b[5..], limits);
            format = decoded.as_ref().map(|_| "json");
        }
        let hex_preview = decoded
            .is_none()
            .then(|| hex(&b[5..b.len().min(5 + limits.preview_bytes)]));
        return Shown::Confluent {
            bytes: n,
            schema_id,
            format,
            json: decoded,
            hex_preview,
            note,
        };
    }
    if let Some(json) = json(b, limits) {
        return Shown::Json { bytes: n, json };
    }
    match std::str::from_utf8(b) {
        Ok(text) if !text.is_empty() && text.chars().all(|c| !c.is_control() || c.is_whitespace()) => Shown::Text {
            bytes: n,
            text: text.to_owned(),
        },
        _ => preview(b),
    }
}

/// An Avro datum of the schema in `path`, as JSON with its masked fields;
/// every byte must be the datum's (left-overs: written with another schema).
fn avro(path: &std::path::Path, mut datum: &[u8], limits: &RecordsConfig) -> Result<Value, String> {
    // A length read from hostile bytes never allocates more than a value
    // could hold (the library's own bound is 512 MiB).
    apache_avro::util::max_allocation_bytes(limits.max_value_bytes.max(4 << 20));
    let text = std::fs::read_to_string(path).map_err(|e| format!("the schema file cannot be read: {e}"))?;
    let schema = apache_avro::Schema::parse_str(&text).map_err(|e| format!("the schema does not parse: {e}"))?;
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(&schema)
        .build()
        .map_err(|e| e.to_string())?;
    let value = reader
        .read_value(&mut datum)
        .map_err(|e| format!("not a datum of the schema: {e}"))?;
    if !datum.is_empty() {
        return Err(format!(
            "{} bytes left after the datum: written with another schema",
            datum.len()
        ));
    }
    let mut v = Value::try_from(value).map_err(|e| format!("not shown as JSON: {e}"))?;
    mask(&mut v, limits);
    Ok(v)
}

/// Message indexes an id's framing may name, at most (nesting depth).
const MAX_MESSAGE_INDEXES: u64 = 100;

/// A Protobuf message of the `.proto` file in `path`, as JSON with its masked
/// fields. Confluent's framing names the message by indexes after the schema
/// id (zigzag varints: a count, then the index of a top-level message and of
/// each nested one; a count of 0 is the file's first message).
fn protobuf(path: &std::path::Path, payload: &[u8], limits: &RecordsConfig) -> Result<Value, String> {
    let mut rest = payload;
    let mut varint = || -> Result<i64, String> {
        let mut n: u64 = 0;
        for shift in (0..64).step_by(7) {
            let (&byte, tail) = rest.split_first().ok_or("the message indexes end early")?;
            rest = tail;
            n |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                // Zigzag, as Confluent's serializer writes them.
                return Ok((n >> 1) as i64 ^ -((n & 1) as i64));
            }
        }
        Err("a message index is longer than 10 bytes".into())
    };
    let count = varint()?;
    if !(0..=MAX_MESSAGE_INDEXES as i64).contains(&count) {
        return Err(format!("{count} message indexes: not Confluent's framing"));
    }
    let indexes: Vec<i64> = if count == 0 {
        vec![0]
    } else {
        (0..count).map(|_| varint()).collect::<Result<_, _>>()?
    };
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    let name = path.file_name().ok_or("the schema file has no name")?;
    let files = protox::compile([name], [dir]).map_err(|e| format!("the schema does not compile: {e}"))?;
    let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(files).map_err(|e| e.to_string())?;
    let file = pool
        .get_file_by_name(&name.to_string_lossy())
        .ok_or("the schema file is not in what it compiled to")?;
    let index = |i: i64| usize::try_from(i).map_err(|_| format!("message index {i}"));
    let mut message = file
        .messages()
        .nth(index(indexes[0])?)
        .ok_or_else(|| format!("the file has no message {}", indexes[0]))?;
    for &i in &indexes[1..] {
        let child = message.child_messages().nth(index(i)?);
        message = child.ok_or_else(|| format!("{} has no nested message {i}", message.full_name()))?;
    }
    let full = message.full_name().to_owned();
    let decoded = prost_reflect::DynamicMessage::decode(message, rest).map_err(|e| format!("not a {full}: {e}"))?;
    let mut v = serde_json::to_value(&decoded).map_err(|e| format!("not shown as JSON: {e}"))?;
    mask(&mut v, limits);
    Ok(v)
}

/// Masks `limits.redact` in `v`.
fn mask(v: &mut Value, limits: &RecordsConfig) {
    for path in &limits.redact {
        let parts: Vec<&str> = path.split('.').filter(|p| !p.is_empty()).collect();
        if !parts.is_empty() {
            redact(v, &parts);
        }
    }
}

/// JSON with its masked fields, if `b` is a JSON object or array (a bare
/// number or string is shown as text).
fn json(b: &[u8], limits: &RecordsConfig) -> Option<Value> {
    let first = b.iter().find(|c| !c.is_ascii_whitespace())?;
    if !matches!(first, b'{' | b'[') {
        return None;
    }
    // serde_json refuses nesting past 128 levels: a hostile value is not a stack overflow.
    let mut v: Value = serde_json::from_slice(b).ok()?;
    mask(&mut v, limits);
    Some(v)
}

/// Masks every field at `path` below `v`.
pub fn redact(v: &mut Value, path: &[&str]) {
    match v {
        Value::Array(items) => items.iter_mut().for_each(|i| redact(i, path)),
        Value::Object(map) => {
            let (head, rest) = (path[0], &path[1..]);
            for (k, child) in map.iter_mut() {
                if head == "*" || head == k {
                    if rest.is_empty() {
                        *child = Value::String(REDACTED.into());
                    } else {
                        redact(child, rest);
                    }
                }
            }
        }
        _ => {}
    }
}

/// librdkafka's settings for reaching `cluster` as the poller reaches it:
/// what every client an action makes shares (readers, the redrive's producer).
pub(crate) fn cluster_config(cluster: &ClusterConfig) -> Result<ClientConfig, ActError> {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", cluster.bootstrap.join(","))
        .set("client.id", &cluster.client_id)
        .set("socket.timeout.ms", cluster.request_timeout.as_millis().to_string())
        .set("log_level", "3");
    for (k, v) in cluster.librdkafka_security().map_err(ActError::Refused)? {
        c.set(k, v);
    }
    Ok(c)
}

/// A reader of `cluster`: assigned, never subscribed, so no group is joined
/// and nothing committed; batches up to [`FETCH_BYTES`].
pub(crate) fn reader_config(cluster: &ClusterConfig, group: &str) -> Result<ClientConfig, ActError> {
    let mut c = cluster_config(cluster)?;
    c.set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("fetch.max.bytes", FETCH_BYTES.to_string())
        .set("max.partition.fetch.bytes", FETCH_BYTES.to_string())
        .set("receive.message.max.bytes", (2 * FETCH_BYTES).to_string());
    Ok(c)
}

/// Reads the record at `offset` (blocking: run it off the async workers).
pub fn read(
    cluster: &ClusterConfig,
    topic: &str,
    partition: i32,
    offset: i64,
    limits: &RecordsConfig,
) -> Result<ReadRecord, ActError> {
    if topic.is_empty() || topic.len() > crate::reset::MAX_NAME_BYTES {
        return Err(ActError::BadRequest(format!(
            "topic {topic:?}: a topic name is 1 to {} bytes",
            crate::reset::MAX_NAME_BYTES
        )));
    }
    if partition < 0 {
        return Err(ActError::BadRequest(format!(
            "partition {partition}: partitions are 0 or more"
        )));
    }
    if offset < 0 {
        return Err(ActError::BadRequest(format!("offset {offset}: offsets are 0 or more")));
    }
    let consumer: BaseConsumer = reader_config(cluster, "streamsight-record-reader")?
        .create()
        .map_err(|e| ActError::Broker(format!("cluster {}: {e}", cluster.name)))?;
    let timeout = cluster.request_timeout;
    // What the cluster has, asked first: a topic or partition that is not
    // there is the user's 404, never the broker's failure.
    let metadata = consumer
        .fetch_metadata(Some(topic), timeout)
        .map_err(|e| ActError::Broker(format!("cluster {}: {e}", cluster.name)))?;
    let partitions = metadata
        .topics()
        .iter()
        .find(|t| t.name() == topic && t.error().is_none())
        .map(|t| t.partitions().len());
    match partitions {
        None | Some(0) => {
            return Err(ActError::UnknownTopic(format!(
                "cluster {} has no topic {topic}",
                cluster.name
            )));
        }
        Some(n) if usize::try_from(partition).is_ok_and(|p| p >= n) => {
            return Err(ActError::UnknownTopic(format!(
                "topic {topic} of cluster {} has partitions 0 to {}: no partition {partition}",
                cluster.name,
                n - 1
            )));
        }
        Some(_) => {}
    }
    let (low, high) =
        consumer
            .fetch_watermarks(topic, partition, timeout)
            .map_err(|e| match e.rdkafka_error_code() {
                Some(
                    rdkafka::types::RDKafkaErrorCode::UnknownTopicOrPartition
                    | rdkafka::types::RDKafkaErrorCode::UnknownPartition
                    | rdkafka::types::RDKafkaErrorCode::UnknownTopic,
                ) => ActError::UnknownTopic(format!(
                    "cluster {} has no partition {partition} of {topic}",
                    cluster.name
                )),
                _ => ActError::Broker(format!("cluster {}: {e}", cluster.name)),
            })?;
    if high <= low {
        return Err(ActError::NotFound(format!(
            "offset {offset} is not in {topic}/{partition}: it holds no record (its next offset is {high})"
        )));
    }
    if offset < low || offset >= high {
        return Err(ActError::NotFound(format!(
            "offset {offset} is not in {topic}/{partition}: it holds {low} to {} (retention deletes from the start)",
            high - 1
        )));
    }
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, partition, Offset::Offset(offset))
        .map_err(|e| ActError::Broker(e.to_string()))?;
    consumer
        .assign(&tpl)
        .map_err(|e| ActError::Broker(format!("cluster {}: {e}", cluster.name)))?;
    let deadline = Instant::now() + timeout.max(Duration::from_secs(1));
    while Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            None => continue,
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => {
                return Err(ActError::NotFound(format!(
                    "no record at or after offset {offset} in {topic}/{partition} (transaction markers up to the end)"
                )));
            }
            Some(Err(e)) => return Err(ActError::Broker(format!("cluster {}: {e}", cluster.name))),
            Some(Ok(m)) => {
                let mut headers = Vec::new();
                let mut headers_not_shown = 0;
                if let Some(h) = m.headers() {
                    for header in h.iter() {
                        if headers.len() < MAX_HEADERS {
                            headers.push((header.key.to_owned(), show(header.value, limits)));
                        } else {
                            headers_not_shown += 1;
                        }
                    }
                }
                let (timestamp_ms, timestamp_type) = match m.timestamp() {
                    rdkafka::Timestamp::CreateTime(t) => (Some(t), Some("create_time")),
                    rdkafka::Timestamp::LogAppendTime(t) => (Some(t), Some("log_append_time")),
                    rdkafka::Timestamp::NotAvailable => (None, None),
                };
                let note = (m.offset() != offset).then(|| {
                    format!(
                        "offset {offset} holds no record (compacted away, or a transaction marker): this is the next, at {}",
                        m.offset()
                    )
                });
                return Ok(ReadRecord {
                    cluster: cluster.name.clone(),
                    topic: topic.to_owned(),
                    partition,
                    offset: m.offset(),
                    timestamp_ms,
                    timestamp_type,
                    key: show(m.key(), limits),
                    value: show(m.payload(), limits),
                    headers,
                    headers_not_shown,
                    note,
                });
            }
        }
    }
    Err(ActError::Broker(format!(
        "cluster {} did not hand over {topic}/{partition} at {offset} within {} s",
        cluster.name,
        timeout.as_secs()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn limits(redact: &[&str]) -> RecordsConfig {
        RecordsConfig {
            redact: redact.iter().map(|s| (*s).to_owned()).collect(),
            max_value_bytes: 64,
            preview_bytes: 8,
            ..RecordsConfig::default()
        }
    }

    #[test]
    fn json_is_decoded_with_its_masked_fields_and_arrays_passed_through() {
        let v = br#"{"card":{"number":"4111","exp":"12/29"},"items":[{"email":"a@b"},{"email":"c@d"}]}"#;
        let Shown::Json { json, .. } = show(
            Some(v),
            &RecordsConfig {
                max_value_bytes: 1024,
                ..limits(&["card.number", "items.email", "nope.x"])
            },
        ) else {
            panic!()
        };
        assert_eq!(
            json,
            json!({"card":{"number":REDACTED,"exp":"12/29"},"items":[{"email":REDACTED},{"email":REDACTED}]})
        );
        let Shown::Json { json, .. } = show(Some(br#"{"a":{"secret":1},"b":{"secret":2}}"#), &limits(&["*.secret"]))
        else {
            panic!()
        };
        assert_eq!(json, json!({"a":{"secret":REDACTED},"b":{"secret":REDACTED}}));
    }

    #[test]
    fn text_binary_large_and_framed_values_are_shown_bounded() {
        let l = limits(&[]);
        assert_eq!(show(None, &l), Shown::Null);
        assert!(matches!(show(Some(b"hello world"), &l), Shown::Text { bytes: 11, .. }));
        let Shown::Preview {
            preview,
            hex,
            truncated,
            ..
        } = show(Some(&[0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8]), &l)
        else {
            panic!()
        };
        assert_eq!((preview.as_str(), hex, truncated), ("fffe010203040506", true, true));
        // Larger than max_value_bytes: a preview of the first bytes, not parsed.
        let big = format!("{{\"a\":\"{}\"}}", "x".repeat(100));
        let Shown::Preview {
            bytes,
            preview,
            hex,
            truncated,
        } = show(Some(big.as_bytes()), &l)
        else {
            panic!()
        };
        assert_eq!((bytes, preview.len(), hex, truncated), (big.len(), 8, false, true));
        // Confluent framing: the schema id, and a JSON Schema payload decoded.
        let mut framed = vec![0, 0, 0, 1, 44];
        framed.extend_from_slice(br#"{"k":1}"#);
        assert_eq!(
            show(Some(&framed), &l),
            Shown::Confluent {
                bytes: framed.len(),
                schema_id: 300,
                format: Some("json"),
                json: Some(json!({"k":1})),
                hex_preview: None,
                note: None,
            }
        );
        // Nesting past serde_json's limit is shown, never a stack overflow.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(
            show(
                Some(deep.as_bytes()),
                &RecordsConfig {
                    max_value_bytes: 1 << 20,
                    ..l
                }
            ),
            Shown::Text { .. } | Shown::Preview { .. }
        ));
    }

    #[test]
    fn avro_framed_with_a_named_schema_id_is_decoded_and_masked() {
        const SCHEMA: &str = r#"{"type":"record","name":"Payment","fields":[
            {"name":"id","type":"string"},{"name":"card","type":{"type":"record","name":"Card","fields":[{"name":"number","type":"string"}]}},
            {"name":"amount","type":"long"}]}"#;
        let dir = std::env::temp_dir().join(format!("streamsight-avro-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("payment.avsc");
        std::fs::write(&path, SCHEMA).unwrap();
        let schema = apache_avro::Schema::parse_str(SCHEMA).unwrap();
        let card = apache_avro::types::Value::Record(vec![("number".into(), "4111".into())]);
        let datum = apache_avro::types::Value::Record(vec![
            ("id".into(), "p-1".into()),
            ("card".into(), card),
            ("amount".into(), apache_avro::types::Value::Long(42)),
        ]);
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
            .build()
            .unwrap();
        let mut framed = vec![0, 0, 0, 0, 7];
        framed.extend(writer.write_value_to_vec(datum).unwrap());
        let limits = RecordsConfig {
            redact: vec!["card.number".into()],
            avro_schemas: [("7".to_owned(), path.clone())].into(),
            ..RecordsConfig::default()
        };
        let Shown::Confluent {
            schema_id,
            format,
            json,
            note,
            ..
        } = show(Some(&framed), &limits)
        else {
            panic!()
        };
        assert_eq!((schema_id, format, note), (7, Some("avro"), None));
        assert_eq!(json, Some(json!({"id":"p-1","card":{"number":REDACTED},"amount":42})));
        // Bytes left over: written with another schema, said, and shown as hex.
        framed.extend_from_slice(&[1, 2, 3]);
        let Shown::Confluent {
            format,
            note,
            hex_preview,
            ..
        } = show(Some(&framed), &limits)
        else {
            panic!()
        };
        assert!(format.is_none() && hex_preview.is_some(), "{hex_preview:?}");
        assert!(note.unwrap().contains("3 bytes left after the datum"));
        // A hostile length (a string of 2^40 bytes) is refused, not allocated.
        let hostile = [0, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
        let Shown::Confluent { note, .. } = show(Some(&hostile), &limits) else {
            panic!()
        };
        assert!(note.unwrap().contains("not a datum of the schema"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn protobuf_framed_with_a_named_schema_id_is_decoded_by_its_message_indexes() {
        const PROTO: &str = "syntax = \"proto3\";\npackage shop;\n\
            message Meta { string origin = 1; }\n\
            message Payment { string id = 1; Card card = 2; int64 amount = 3;\n\
              message Card { string number = 1; } }\n";
        let dir = std::env::temp_dir().join(format!("streamsight-proto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("payment.proto");
        std::fs::write(&path, PROTO).unwrap();
        let files = protox::compile(["payment.proto"], [&dir]).unwrap();
        let pool = prost_reflect::DescriptorPool::from_file_descriptor_set(files).unwrap();
        let payment = pool.get_message_by_name("shop.Payment").unwrap();
        let mut de = serde_json::Deserializer::from_str(r#"{"id":"p-1","card":{"number":"4111"},"amount":"42"}"#);
        let message = prost_reflect::DynamicMessage::deserialize(payment, &mut de).unwrap();
        // Schema id 8; one message index (zigzag 1 = 2), the second message (zigzag 1 = 2).
        let mut framed = vec![0, 0, 0, 0, 8, 2, 2];
        framed.extend(prost::Message::encode_to_vec(&message));
        let limits = RecordsConfig {
            redact: vec!["card.number".into()],
            protobuf_schemas: [("8".to_owned(), path.clone())].into(),
            ..RecordsConfig::default()
        };
        let Shown::Confluent { format, json, note, .. } = show(Some(&framed), &limits) else {
            panic!()
        };
        assert_eq!((format, note), (Some("protobuf"), None));
        assert_eq!(json, Some(json!({"id":"p-1","card":{"number":REDACTED},"amount":"42"})));
        // Indexes naming no message, and bytes that are not the message: said.
        let mut wrong = vec![0, 0, 0, 0, 8, 2, 20];
        wrong.extend(prost::Message::encode_to_vec(&message));
        let Shown::Confluent { note, hex_preview, .. } = show(Some(&wrong), &limits) else {
            panic!()
        };
        assert!(note.unwrap().contains("has no message 10") && hex_preview.is_some());
        let garbage = [0, 0, 0, 0, 8, 0, 0xff, 0xff, 0xff];
        let Shown::Confluent { note, .. } = show(Some(&garbage), &limits) else {
            panic!()
        };
        assert!(note.unwrap().contains("not a shop.Meta"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
