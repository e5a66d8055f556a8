//! Datadog tracers' traces: `/v0.4/traces` (an array of traces, each an array
//! of span maps) and `/v0.5/traces` (a string table, then spans as 12-element
//! arrays of its indexes), msgpack. Read span by span, so that the count is
//! checked before anything beyond it is decoded. Kafka spans carry
//! `kafka.topic`, `kafka.partition`, `kafka.message_offset` and
//! `kafka.group_id` (dd-trace-py's names); a 128-bit trace id's upper half is
//! `_dd.p.tid`.

use super::{DecodeError, Decoded, Limits};
use crate::budget;
use serde::Deserialize;
use std::collections::HashMap;
use streamsight_core::journey::{MAX_TEXT, Messaging, Operation, Source, Span, TraceId, cut};

#[derive(Deserialize)]
struct V04Span {
    #[serde(default)]
    service: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    resource: String,
    #[serde(default)]
    trace_id: u64,
    #[serde(default)]
    span_id: u64,
    #[serde(default)]
    parent_id: u64,
    #[serde(default)]
    start: i64,
    #[serde(default)]
    duration: i64,
    #[serde(default)]
    error: i32,
    #[serde(default, deserialize_with = "crate::budget::map")]
    meta: HashMap<String, String>,
    #[serde(default, deserialize_with = "crate::budget::map")]
    metrics: HashMap<String, f64>,
}

/// A v0.5 span: a 12-element array of string indexes and numbers (the last,
/// its type, is read to keep the array's shape and not used).
#[derive(Deserialize)]
#[allow(dead_code)]
struct V05Span(
    u32,
    u32,
    u32,
    u64,
    u64,
    u64,
    i64,
    i64,
    i32,
    #[serde(deserialize_with = "crate::budget::map")] HashMap<u32, u32>,
    #[serde(deserialize_with = "crate::budget::map")] HashMap<u32, f64>,
    u32,
);

fn msgpack<E: std::fmt::Display>(e: E) -> DecodeError {
    DecodeError::Msgpack(e.to_string())
}

fn array_len(r: &mut &[u8]) -> Result<usize, DecodeError> {
    rmp::decode::read_array_len(r).map(|n| n as usize).map_err(msgpack)
}

fn convert(s: V04Span) -> Option<Span> {
    let high = s
        .meta
        .get("_dd.p.tid")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0);
    let id = (u128::from(high) << 64) | u128::from(s.trace_id);
    if id == 0 {
        return None;
    }
    let meta = |k: &str| s.meta.get(k).map(String::as_str);
    let number = |k: &str| {
        s.metrics
            .get(k)
            .map(|v| *v as i64)
            .or_else(|| meta(k).and_then(|v| v.parse().ok()))
    };
    let topic = meta("kafka.topic").or(meta("messaging.destination.name"));
    // Tags as the tracers send them (recorded in tests/fixtures/tracers):
    // dd-java-agent `messaging.kafka.cluster.id`, dd-trace-js `kafka.cluster_id`,
    // dd-trace-go the partition as the metric `messaging.kafka.partition`.
    let cluster = meta("messaging.kafka.cluster.id").or(meta("kafka.cluster_id"));
    let messaging = topic.map(|topic| Messaging {
        cluster: cluster.map(|c| cut(c, MAX_TEXT)).unwrap_or_default(),
        topic: cut(topic, MAX_TEXT),
        partition: number("kafka.partition")
            .or_else(|| number("messaging.kafka.partition"))
            .and_then(|p| i32::try_from(p).ok()),
        offset: number("kafka.message_offset"),
        group: meta("kafka.group_id").map(|g| cut(g, MAX_TEXT)),
        // A consume span lasts while the application handles the message.
        operation: match (s.name.as_str(), meta("span.kind")) {
            ("kafka.produce", _) | (_, Some("producer")) => Some(Operation::Send),
            ("kafka.consume", _) | (_, Some("consumer")) => Some(Operation::Process),
            _ => None,
        },
    });
    let error = (s.error != 0).then(|| {
        meta("error.type")
            .or(meta("error.message"))
            .or(meta("error.msg"))
            .unwrap_or("error")
            .to_owned()
    });
    let name = if s.resource.is_empty() || s.resource == s.name {
        s.name.clone()
    } else {
        format!("{} {}", s.name, s.resource)
    };
    Some(Span {
        trace_id: TraceId(id),
        span_id: s.span_id,
        parent_id: s.parent_id,
        name: cut(&name, MAX_TEXT),
        service: cut(&s.service, MAX_TEXT),
        start_ns: s.start,
        duration_ns: s.duration,
        error: error.map(|e| cut(&e, MAX_TEXT)),
        messaging,
        links: Vec::new(),
        source: Source::Datadog,
    })
}

/// Converts `span` and keeps it; what reading it charged since `mark` is given
/// back (it is dropped here), the kept span charged instead.
fn push(out: &mut Decoded, span: V04Span, limits: Limits, mark: usize) -> Result<(), DecodeError> {
    let converted = convert(span);
    budget::release_to(mark);
    out.admit(limits)?;
    match converted {
        Some(s) => out.spans.push(s),
        None => out.skip(|| "a span with trace id 0".into()),
    }
    Ok(())
}

/// `/v0.4/traces`.
pub fn decode_v04(body: &[u8], limits: Limits) -> Result<Decoded, DecodeError> {
    let mut r = body;
    let mut out = Decoded::default();
    for _ in 0..array_len(&mut r)? {
        for _ in 0..array_len(&mut r)? {
            if out.spans.len() >= limits.max_items {
                return Err(DecodeError::TooMany(limits.max_items));
            }
            let mark = budget::charged();
            let span =
                V04Span::deserialize(&mut rmp_serde::Deserializer::new(&mut r)).map_err(|e| msgpack(e).or_refused())?;
            push(&mut out, span, limits, mark)?;
        }
    }
    Ok(out)
}

/// `/v0.5/traces`.
pub fn decode_v05(body: &[u8], limits: Limits) -> Result<Decoded, DecodeError> {
    let mut r = body;
    if array_len(&mut r)? != 2 {
        return Err(DecodeError::Msgpack("a v0.5 payload is [strings, traces]".into()));
    }
    let n = array_len(&mut r)?;
    // Each string takes at least one byte of the body: the count cannot pass it.
    if n > r.len() {
        return Err(DecodeError::Msgpack("more strings than bytes".into()));
    }
    // Charged before the table is built: a byte of body per string, 24 of
    // memory; each string's heap block once it is read.
    budget::charge(n.saturating_mul(std::mem::size_of::<String>())).map_err(DecodeError::Memory)?;
    let mut strings = Vec::with_capacity(n);
    for _ in 0..n {
        let s = String::deserialize(&mut rmp_serde::Deserializer::new(&mut r)).map_err(msgpack)?;
        budget::charge(budget::Heap::heap(&s)).map_err(DecodeError::Memory)?;
        strings.push(s);
    }
    // Spans name strings by index, so one long string can be named a million
    // times: each copy is cut to what a span keeps of any name (`MAX_TEXT`),
    // so it costs neither memory nor the time to copy the whole, and charged
    // before it is made.
    let text = |i: u32| -> Result<String, DecodeError> {
        let s = cut(strings.get(i as usize).map_or("", String::as_str), MAX_TEXT);
        budget::charge(budget::Heap::heap(&s)).map_err(DecodeError::Memory)?;
        Ok(s)
    };
    let mut out = Decoded::default();
    for _ in 0..array_len(&mut r)? {
        for _ in 0..array_len(&mut r)? {
            if out.spans.len() >= limits.max_items {
                return Err(DecodeError::TooMany(limits.max_items));
            }
            let mark = budget::charged();
            let s =
                V05Span::deserialize(&mut rmp_serde::Deserializer::new(&mut r)).map_err(|e| msgpack(e).or_refused())?;
            let mut meta = HashMap::with_capacity(s.9.len());
            for (k, v) in s.9 {
                meta.insert(text(k)?, text(v)?);
            }
            let mut metrics = HashMap::with_capacity(s.10.len());
            for (k, v) in s.10 {
                metrics.insert(text(k)?, v);
            }
            let span = V04Span {
                service: text(s.0)?,
                name: text(s.1)?,
                resource: text(s.2)?,
                trace_id: s.3,
                span_id: s.4,
                parent_id: s.5,
                start: s.6,
                duration: s.7,
                error: s.8,
                meta,
                metrics,
            };
            push(&mut out, span, limits, mark)?;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    #[derive(Serialize)]
    struct Out<'a> {
        service: &'a str,
        name: &'a str,
        resource: &'a str,
        trace_id: u64,
        span_id: u64,
        parent_id: u64,
        start: i64,
        duration: i64,
        error: i32,
        meta: HashMap<&'a str, &'a str>,
        metrics: HashMap<&'a str, f64>,
    }

    fn consume() -> Out<'static> {
        Out {
            service: "billing",
            name: "kafka.consume",
            resource: "kafka.consume",
            trace_id: 0x8448_eb21_1c80_319c,
            span_id: 5,
            parent_id: 4,
            start: 1_700_000_000_000_000_000,
            duration: 1_000,
            error: 1,
            meta: [
                ("kafka.topic", "orders"),
                ("kafka.group_id", "billing"),
                ("_dd.p.tid", "0af7651916cd43dd"),
                ("error.type", "ValueError"),
            ]
            .into(),
            metrics: [("kafka.partition", 2.0), ("kafka.message_offset", 41.0)].into(),
        }
    }

    #[test]
    fn v04_and_v05_give_the_same_span() {
        let v04 = rmp_serde::to_vec_named(&vec![vec![consume()]]).unwrap();
        let a = decode_v04(&v04, Limits::default()).unwrap();
        let s = &a.spans[0];
        assert_eq!(s.trace_id.hex(), "0af7651916cd43dd8448eb211c80319c");
        let m = s.messaging.as_ref().unwrap();
        assert_eq!(
            (m.topic.as_str(), m.partition, m.offset, m.group.as_deref()),
            ("orders", Some(2), Some(41), Some("billing"))
        );
        assert_eq!(s.error.as_deref(), Some("ValueError"));
        let strings = vec![
            "billing",
            "kafka.consume",
            "kafka.topic",
            "orders",
            "kafka.group_id",
            "_dd.p.tid",
            "0af7651916cd43dd",
            "error.type",
            "ValueError",
            "kafka.partition",
            "kafka.message_offset",
            "",
        ];
        #[allow(clippy::type_complexity)]
        let span: (
            u32,
            u32,
            u32,
            u64,
            u64,
            u64,
            i64,
            i64,
            i32,
            HashMap<u32, u32>,
            HashMap<u32, f64>,
            u32,
        ) = (
            0,
            1,
            1,
            0x8448_eb21_1c80_319c,
            5,
            4,
            1_700_000_000_000_000_000,
            1_000,
            1,
            [(2, 3), (4, 0), (5, 6), (7, 8)].into(),
            [(9, 2.0), (10, 41.0)].into(),
            11,
        );
        let v05 = rmp_serde::to_vec(&(strings, vec![vec![span]])).unwrap();
        let b = decode_v05(&v05, Limits::default()).unwrap();
        assert_eq!(a.spans, b.spans);
    }

    #[test]
    fn hostile_payloads_are_errors_and_counts_are_bounded() {
        for body in [
            &b""[..],
            b"\x91",
            b"\xdd\xff\xff\xff\xff",
            b"\x92\xdd\xff\xff\xff\xff",
            b"\xc1",
        ] {
            assert!(decode_v04(body, Limits::default()).is_err() || body.is_empty());
            assert!(decode_v05(body, Limits::default()).is_err());
        }
        let many = rmp_serde::to_vec_named(&vec![(0..11).map(|_| consume()).collect::<Vec<_>>()]).unwrap();
        let limits = Limits {
            max_items: 10,
            ..Limits::default()
        };
        assert!(matches!(decode_v04(&many, limits), Err(DecodeError::TooMany(10))));
    }

    #[test]
    fn a_long_string_named_many_times_is_copied_only_as_far_as_a_span_keeps() {
        use crate::budget::{Meter, metered};
        let long = "a".repeat(1 << 20);
        let strings = vec!["", long.as_str()];
        // 2,000 spans naming the 1 MiB string as service, name and resource:
        // 6 GiB of copies if each were whole.
        let span = (
            1u32,
            1u32,
            1u32,
            7u64,
            1u64,
            0u64,
            0i64,
            0i64,
            0i32,
            HashMap::<u32, u32>::new(),
            HashMap::<u32, f64>::new(),
            1u32,
        );
        let body = rmp_serde::to_vec(&(strings, vec![vec![span; 2_000]])).unwrap();
        let mut meter = Meter::new(48 << 20, None);
        let started = std::time::Instant::now();
        let d = metered(&mut meter, || decode_v05(&body, Limits::default())).unwrap();
        assert_eq!(d.spans.len(), 2_000);
        assert_eq!(d.spans[0].service.len(), MAX_TEXT);
        // Each span keeps its cut names; nothing near a copy per name.
        assert!(meter.charged() < 8 << 20, "{}", meter.charged());
        assert!(started.elapsed() < std::time::Duration::from_secs(30));
    }

    #[test]
    fn meta_keys_are_charged_with_their_heap_before_the_span_is_kept() {
        use crate::budget::{Meter, Spent, metered};
        let mut span = consume();
        let keys: Vec<String> = (0..100_000).map(|i| format!("key-{i}")).collect();
        span.meta = keys.iter().map(|k| (k.as_str(), "")).collect();
        let body = rmp_serde::to_vec_named(&vec![vec![span]]).unwrap();
        let mut meter = Meter::new(4 << 20, None);
        let refused = metered(&mut meter, || decode_v04(&body, Limits::default()));
        assert!(matches!(refused, Err(DecodeError::Memory(Spent::Request { .. }))));
        assert!(meter.charged() <= 4 << 20);
    }
}
