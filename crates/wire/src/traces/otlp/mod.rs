//! OTLP/HTTP: `ExportTraceServiceRequest` and `ExportLogsServiceRequest` as
//! protobuf or JSON (opentelemetry-proto 1.x; only the fields journeys use —
//! the rest are skipped by the decoder). Messaging attributes follow the OTel
//! conventions, current and older names (`messaging.destination.name` and
//! `messaging.destination`, `messaging.kafka.offset` or a `messaging.message.id`
//! of `topic.partition.offset`, as opentelemetry-instrumentation-confluent-kafka
//! writes it).

mod census;
mod json;
mod protobuf;

pub use protobuf::*;

use super::{DecodeError, Decoded, Limits};
use crate::budget;
use json::*;
use streamsight_core::Millis;
use streamsight_core::journey::{
    LogLine, MAX_BODY, MAX_LINKS, MAX_TEXT, Messaging, Operation, Source, Span, TraceId, cut,
};

// ---------- one shape for both ----------

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Double(f64),
}

impl Value {
    fn text(&self) -> String {
        match self {
            Value::Str(s) => s.clone(),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Double(d) => d.to_string(),
        }
    }

    fn int(&self) -> Option<i64> {
        match self {
            Value::Int(i) => Some(*i),
            Value::Str(s) => s.parse().ok(),
            Value::Double(d) if d.fract() == 0.0 => Some(*d as i64),
            _ => None,
        }
    }
}

fn pb_value(v: Option<&AnyValue>) -> Option<Value> {
    Some(match v?.value.as_ref()? {
        Scalar::String(s) => Value::Str(s.clone()),
        Scalar::Bool(b) => Value::Bool(*b),
        Scalar::Int(i) => Value::Int(*i),
        Scalar::Double(d) => Value::Double(*d),
    })
}

fn json_value(v: &JsonAnyValue) -> Option<Value> {
    if let Some(s) = &v.string_value {
        return Some(Value::Str(s.clone()));
    }
    if let Some(i) = v.int_value {
        return Some(Value::Int(i.0 as i64));
    }
    if let Some(b) = v.bool_value {
        return Some(Value::Bool(b));
    }
    v.double_value.map(Value::Double)
}

type Attrs = Vec<(String, Value)>;

fn pb_attrs(kv: &[KeyValue]) -> Attrs {
    kv.iter()
        .filter_map(|k| pb_value(k.value.as_ref()).map(|v| (k.key.clone(), v)))
        .collect()
}

fn json_attrs(kv: &[JsonKeyValue]) -> Attrs {
    kv.iter()
        .filter_map(|k| json_value(&k.value).map(|v| (k.key.clone(), v)))
        .collect()
}

fn get<'a>(attrs: &'a Attrs, keys: &[&str]) -> Option<&'a Value> {
    keys.iter()
        .find_map(|k| attrs.iter().find(|(key, _)| key == k).map(|(_, v)| v))
}

struct RawSpan {
    trace_id: Option<TraceId>,
    span_id: u64,
    parent_id: u64,
    name: String,
    kind: i32,
    start: u64,
    end: u64,
    attrs: Attrs,
    /// (name, attributes) of its events: an `exception` event names the error.
    events: Vec<(String, Attrs)>,
    links: Vec<(TraceId, u64)>,
    status: (i32, String),
}

fn id_from_bytes(b: &[u8]) -> Option<TraceId> {
    let arr: [u8; 16] = b.try_into().ok()?;
    let id = u128::from_be_bytes(arr);
    (id != 0).then_some(TraceId(id))
}

fn span_id_from_bytes(b: &[u8]) -> u64 {
    <[u8; 8]>::try_from(b).map_or(0, u64::from_be_bytes)
}

fn id_from_hex(s: &str) -> Option<TraceId> {
    (s.len() == 32).then(|| TraceId::parse(s)).flatten()
}

fn span_id_from_hex(s: &str) -> u64 {
    if s.len() == 16 {
        u64::from_str_radix(s, 16).unwrap_or(0)
    } else {
        0
    }
}

/// The topic in a messaging span's name, `{destination} {operation}` or
/// `{operation} {destination}` (OpenTelemetry's conventions, older and newer).
fn topic_from_name(name: &str) -> Option<String> {
    const OPERATIONS: [&str; 7] = ["send", "publish", "create", "process", "receive", "deliver", "settle"];
    let mut words = name.split_whitespace();
    let (a, b) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let topic = match (OPERATIONS.contains(&a), OPERATIONS.contains(&b)) {
        (false, true) => a,
        (true, false) => b,
        _ => return None,
    };
    (topic != "unknown").then(|| topic.to_owned())
}

const KIND_PRODUCER: i32 = 4;
const KIND_CONSUMER: i32 = 5;
const STATUS_ERROR: i32 = 2;

fn to_span(raw: RawSpan, service: &str) -> Option<Span> {
    let trace_id = raw.trace_id?;
    let attrs = &raw.attrs;
    let system = get(attrs, &["messaging.system"]).map(Value::text);
    // Some instrumentations (OpenTelemetry's confluent-kafka, 0.48b0, on a
    // send) record the destination as "unknown" and the topic only in the
    // span's name ("orders send"): the name then says it.
    let topic = match get(attrs, &["messaging.destination.name", "messaging.destination"]).map(Value::text) {
        Some(t) if !t.is_empty() && t != "unknown" => Some(t),
        said if said.is_some() || system.is_some() => topic_from_name(&raw.name),
        _ => None,
    };
    let messaging = match (topic, system) {
        (Some(topic), _) => {
            let mut m = Messaging {
                topic: cut(&topic, MAX_TEXT),
                partition: get(
                    attrs,
                    &[
                        "messaging.destination.partition.id",
                        "messaging.kafka.destination.partition",
                        "messaging.kafka.partition",
                    ],
                )
                .and_then(Value::int)
                .and_then(|p| i32::try_from(p).ok()),
                offset: get(attrs, &["messaging.kafka.offset", "messaging.kafka.message.offset"]).and_then(Value::int),
                group: get(
                    attrs,
                    &["messaging.consumer.group.name", "messaging.kafka.consumer.group"],
                )
                .map(|v| cut(&v.text(), MAX_TEXT)),
                ..Messaging::default()
            };
            // `topic.partition.offset`: the only place some clients put the offset.
            if m.offset.is_none()
                && let Some(id) = get(attrs, &["messaging.message.id"]).map(Value::text)
                && let Some(rest) = id.strip_prefix(&format!("{}.", m.topic))
                && let Some((p, o)) = rest.split_once('.')
                && let (Ok(p), Ok(o)) = (p.parse::<i32>(), o.parse::<i64>())
            {
                m.partition = m.partition.or(Some(p));
                m.offset = Some(o);
            }
            let op = get(
                attrs,
                &[
                    "messaging.operation.type",
                    "messaging.operation",
                    "messaging.operation.name",
                ],
            )
            .map(Value::text)
            .unwrap_or_default();
            m.operation = match (raw.kind, op.as_str()) {
                (KIND_PRODUCER, _) | (_, "publish" | "send" | "create") => Some(Operation::Send),
                (_, "process" | "deliver") => Some(Operation::Process),
                (_, "receive") => Some(Operation::Receive),
                (KIND_CONSUMER, _) => Some(Operation::Receive),
                _ => None,
            };
            Some(m)
        }
        (None, _) => None,
    };
    let exception = raw
        .events
        .iter()
        .find(|(n, _)| n == "exception")
        .and_then(|(_, a)| get(a, &["exception.type", "exception.message"]).map(Value::text));
    let error = (raw.status.0 == STATUS_ERROR).then(|| {
        get(attrs, &["error.type"])
            .map(Value::text)
            .or(exception)
            .or_else(|| (!raw.status.1.is_empty()).then(|| raw.status.1.clone()))
            .unwrap_or_else(|| "error".into())
    });
    let start = i64::try_from(raw.start).unwrap_or(i64::MAX);
    Some(Span {
        trace_id,
        span_id: raw.span_id,
        parent_id: raw.parent_id,
        name: cut(&raw.name, MAX_TEXT),
        service: cut(service, MAX_TEXT),
        start_ns: start,
        duration_ns: i64::try_from(raw.end.saturating_sub(raw.start)).unwrap_or(i64::MAX),
        error: error.map(|e| cut(&e, MAX_TEXT)),
        messaging,
        links: raw.links.into_iter().take(MAX_LINKS).collect(),
        source: Source::Otlp,
    })
}

fn push_span(out: &mut Decoded, raw: RawSpan, service: &str, limits: Limits) -> Result<(), DecodeError> {
    out.admit(limits)?;
    match to_span(raw, service) {
        Some(s) => out.spans.push(s),
        None => out.skip(|| "a span without a valid 16-byte trace id".into()),
    }
    Ok(())
}

/// What an OTLP JSON body's strings take once built, charged before they are:
/// their bytes (at most the body's), and a heap block for each (at most one a
/// value, 32 bytes however short). The lists are charged as they are read
/// ([`budget::vec`]).
fn charge_json(body: &[u8]) -> Result<(), DecodeError> {
    budget::charge(body.len()).map_err(DecodeError::Memory)?;
    match budget::charge_json(body, budget::block(1)) {
        Ok(_) => Ok(()),
        Err(budget::JsonCharge::Json(e)) => Err(DecodeError::Json(e.to_string())),
        Err(budget::JsonCharge::Memory(spent)) => Err(DecodeError::Memory(spent)),
    }
}

/// The spans (or log records, with `logs`) of a protobuf export counted, and
/// what decoding would build charged, without building it: what
/// [`decode_traces`] and [`decode_logs`] check first (public for the bench
/// that measures its share of a decode).
pub fn census(body: &[u8], logs: bool, max_items: usize) -> Result<usize, DecodeError> {
    census::count(body, if logs { &census::LOGS } else { &census::TRACES }, max_items)
}

/// `/v1/traces`.
pub fn decode_traces(body: &[u8], json: bool, limits: Limits) -> Result<Decoded, DecodeError> {
    let mut out = Decoded::default();
    if json {
        charge_json(body)?;
        let req: JsonTraces =
            serde_json::from_slice(body).map_err(|e| DecodeError::Json(e.to_string()).or_refused())?;
        for rs in req.resource_spans {
            let resource = json_attrs(&rs.resource.unwrap_or_default().attributes);
            let service = get(&resource, &["service.name"]).map(Value::text).unwrap_or_default();
            for s in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                let raw = RawSpan {
                    trace_id: id_from_hex(&s.trace_id),
                    span_id: span_id_from_hex(&s.span_id),
                    parent_id: span_id_from_hex(&s.parent_span_id),
                    name: s.name,
                    kind: s.kind,
                    start: s.start_time_unix_nano.0,
                    end: s.end_time_unix_nano.0,
                    attrs: json_attrs(&s.attributes),
                    events: s
                        .events
                        .iter()
                        .map(|e| (e.name.clone(), json_attrs(&e.attributes)))
                        .collect(),
                    links: s
                        .links
                        .iter()
                        .filter_map(|l| Some((id_from_hex(&l.trace_id)?, span_id_from_hex(&l.span_id))))
                        .collect(),
                    status: s.status.map_or((0, String::new()), |st| (st.code, st.message)),
                };
                push_span(&mut out, raw, &service, limits)?;
            }
        }
    } else {
        census::count(body, &census::TRACES, limits.max_items)?;
        let req = <ExportTraceServiceRequest as prost::Message>::decode(body)
            .map_err(|e| DecodeError::Protobuf(e.to_string()))?;
        for rs in req.resource_spans {
            let resource = pb_attrs(&rs.resource.unwrap_or_default().attributes);
            let service = get(&resource, &["service.name"]).map(Value::text).unwrap_or_default();
            for s in rs.scope_spans.into_iter().flat_map(|s| s.spans) {
                let raw = RawSpan {
                    trace_id: id_from_bytes(&s.trace_id),
                    span_id: span_id_from_bytes(&s.span_id),
                    parent_id: span_id_from_bytes(&s.parent_span_id),
                    name: s.name,
                    kind: s.kind,
                    start: s.start_time_unix_nano,
                    end: s.end_time_unix_nano,
                    attrs: pb_attrs(&s.attributes),
                    events: s
                        .events
                        .iter()
                        .map(|e| (e.name.clone(), pb_attrs(&e.attributes)))
                        .collect(),
                    links: s
                        .links
                        .iter()
                        .filter_map(|l| Some((id_from_bytes(&l.trace_id)?, span_id_from_bytes(&l.span_id))))
                        .collect(),
                    status: s.status.map_or((0, String::new()), |st| (st.code, st.message)),
                };
                push_span(&mut out, raw, &service, limits)?;
            }
        }
    }
    Ok(out)
}

struct RawLog {
    trace_id: Option<TraceId>,
    span_id: u64,
    time: u64,
    severity: String,
    body: Option<Value>,
}

fn push_log(out: &mut Decoded, raw: RawLog, service: &str, limits: Limits) -> Result<(), DecodeError> {
    out.admit(limits)?;
    let Some(trace_id) = raw.trace_id else {
        // A line that names no trace is not part of any journey.
        out.skip(|| "a log record without a trace id".into());
        return Ok(());
    };
    out.logs.push(LogLine {
        trace_id,
        span_id: (raw.span_id != 0).then_some(raw.span_id),
        at: Millis(i64::try_from(raw.time / 1_000_000).unwrap_or(i64::MAX)),
        severity: cut(&raw.severity, 32),
        body: cut(&raw.body.map(|b| b.text()).unwrap_or_default(), MAX_BODY),
        service: cut(service, MAX_TEXT),
        source: Source::Otlp,
    });
    Ok(())
}

/// `/v1/logs`: the records that carry a trace id.
pub fn decode_logs(body: &[u8], json: bool, limits: Limits) -> Result<Decoded, DecodeError> {
    let mut out = Decoded::default();
    if json {
        charge_json(body)?;
        let req: JsonLogs = serde_json::from_slice(body).map_err(|e| DecodeError::Json(e.to_string()).or_refused())?;
        for rl in req.resource_logs {
            let resource = json_attrs(&rl.resource.unwrap_or_default().attributes);
            let service = get(&resource, &["service.name"]).map(Value::text).unwrap_or_default();
            for r in rl.scope_logs.into_iter().flat_map(|s| s.log_records) {
                let time = if r.time_unix_nano.0 > 0 {
                    r.time_unix_nano.0
                } else {
                    r.observed_time_unix_nano.0
                };
                let raw = RawLog {
                    trace_id: id_from_hex(&r.trace_id),
                    span_id: span_id_from_hex(&r.span_id),
                    time,
                    severity: r.severity_text,
                    body: r.body.as_ref().and_then(json_value),
                };
                push_log(&mut out, raw, &service, limits)?;
            }
        }
    } else {
        census::count(body, &census::LOGS, limits.max_items)?;
        let req = <ExportLogsServiceRequest as prost::Message>::decode(body)
            .map_err(|e| DecodeError::Protobuf(e.to_string()))?;
        for rl in req.resource_logs {
            let resource = pb_attrs(&rl.resource.unwrap_or_default().attributes);
            let service = get(&resource, &["service.name"]).map(Value::text).unwrap_or_default();
            for r in rl.scope_logs.into_iter().flat_map(|s| s.log_records) {
                let time = if r.time_unix_nano > 0 {
                    r.time_unix_nano
                } else {
                    r.observed_time_unix_nano
                };
                let raw = RawLog {
                    trace_id: id_from_bytes(&r.trace_id),
                    span_id: span_id_from_bytes(&r.span_id),
                    time,
                    severity: r.severity_text,
                    body: pb_value(r.body.as_ref()),
                };
                push_log(&mut out, raw, &service, limits)?;
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod name_tests {
    use super::topic_from_name;

    #[test]
    fn a_span_name_says_the_topic_when_the_attribute_does_not() {
        assert_eq!(topic_from_name("checkout send").as_deref(), Some("checkout"));
        assert_eq!(topic_from_name("process orders.v2").as_deref(), Some("orders.v2"));
        assert_eq!(topic_from_name("unknown send"), None);
        assert_eq!(topic_from_name("send"), None);
        assert_eq!(topic_from_name("send process"), None);
        assert_eq!(topic_from_name("my topic send"), None);
        assert_eq!(topic_from_name("GET /orders"), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn kv(key: &str, v: Scalar) -> KeyValue {
        KeyValue {
            key: key.into(),
            value: Some(AnyValue { value: Some(v) }),
        }
    }

    #[test]
    fn a_confluent_kafka_process_span_in_protobuf_and_json() {
        let trace = [0x0a_u8; 16];
        let req = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(Resource {
                    attributes: vec![kv("service.name", Scalar::String("billing".into()))],
                }),
                scope_spans: vec![ScopeSpans {
                    spans: vec![PbSpan {
                        trace_id: trace.to_vec(),
                        span_id: vec![0, 0, 0, 0, 0, 0, 0, 9],
                        name: "orders process".into(),
                        kind: KIND_CONSUMER,
                        start_time_unix_nano: 1_700_000_000_000_000_000,
                        end_time_unix_nano: 1_700_000_000_001_000_000,
                        attributes: vec![
                            kv("messaging.system", Scalar::String("kafka".into())),
                            kv("messaging.destination", Scalar::String("orders".into())),
                            kv("messaging.kafka.partition", Scalar::Int(2)),
                            kv("messaging.operation", Scalar::String("process".into())),
                            kv("messaging.message.id", Scalar::String("orders.2.41".into())),
                        ],
                        links: vec![PbLink {
                            trace_id: [0x0b_u8; 16].to_vec(),
                            span_id: vec![0, 0, 0, 0, 0, 0, 0, 1],
                        }],
                        status: Some(PbStatus {
                            message: "boom".into(),
                            code: STATUS_ERROR,
                        }),
                        ..PbSpan::default()
                    }],
                }],
            }],
        };
        let pb = decode_traces(&req.encode_to_vec(), false, Limits::default()).unwrap();
        let s = &pb.spans[0];
        let m = s.messaging.as_ref().unwrap();
        assert_eq!((m.topic.as_str(), m.partition, m.offset), ("orders", Some(2), Some(41)));
        assert_eq!(m.operation, Some(Operation::Process));
        assert_eq!(s.error.as_deref(), Some("boom"));
        assert_eq!(s.service, "billing");
        assert_eq!(s.links, [(TraceId(u128::from_be_bytes([0x0b; 16])), 1)]);
        let json = format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"billing"}}}}]}},
            "scopeSpans":[{{"spans":[{{"traceId":"{}","spanId":"0000000000000009","name":"orders process","kind":5,
            "startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000001000000",
            "attributes":[{{"key":"messaging.destination.name","value":{{"stringValue":"orders"}}}},
              {{"key":"messaging.destination.partition.id","value":{{"stringValue":"2"}}}},
              {{"key":"messaging.kafka.offset","value":{{"intValue":"41"}}}},
              {{"key":"messaging.operation.type","value":{{"stringValue":"process"}}}}],
            "links":[{{"traceId":"{}","spanId":"0000000000000001"}}],
            "status":{{"code":2,"message":"boom"}}}}]}}]}}]}}"#,
            "0a".repeat(16),
            "0b".repeat(16)
        );
        let js = decode_traces(json.as_bytes(), true, Limits::default()).unwrap();
        assert_eq!(js.spans, pb.spans);
    }

    /// opentelemetry-instrumentation-confluent-kafka 0.48b0 names the topic of
    /// a send given positionally in the span's name only, and "unknown" as its
    /// destination (0.66b1, the suite's, names it in both).
    #[test]
    fn a_send_whose_destination_reads_unknown_takes_its_topic_from_its_name() {
        let json = format!(
            r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"checkout"}}}}]}},
            "scopeSpans":[{{"spans":[{{"traceId":"{}","spanId":"0000000000000009","name":"checkout send","kind":4,
            "startTimeUnixNano":"1700000000000000000","endTimeUnixNano":"1700000000001000000",
            "attributes":[{{"key":"messaging.system","value":{{"stringValue":"kafka"}}}},
              {{"key":"messaging.destination.name","value":{{"stringValue":"unknown"}}}},
              {{"key":"messaging.operation","value":{{"stringValue":"publish"}}}}]}}]}}]}}]}}"#,
            "0a".repeat(16)
        );
        let js = decode_traces(json.as_bytes(), true, Limits::default()).unwrap();
        let m = js.spans[0].messaging.as_ref().unwrap();
        assert_eq!((m.topic.as_str(), m.operation), ("checkout", Some(Operation::Send)));
    }

    #[test]
    fn hostile_bodies_are_errors_not_panics() {
        for body in [&b"\xff\xff\xff"[..], b"{", b"", &[0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]] {
            let _ = decode_traces(body, false, Limits::default());
            let _ = decode_traces(body, true, Limits::default());
            let _ = decode_logs(body, false, Limits::default());
            let _ = decode_logs(body, true, Limits::default());
        }
        let many = ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: None,
                scope_spans: vec![ScopeSpans {
                    spans: vec![
                        PbSpan {
                            trace_id: vec![1; 16],
                            ..PbSpan::default()
                        };
                        11
                    ],
                }],
            }],
        };
        let limits = Limits {
            max_items: 10,
            ..Limits::default()
        };
        assert!(matches!(
            decode_traces(&many.encode_to_vec(), false, limits),
            Err(DecodeError::TooMany(10))
        ));
    }

    #[test]
    fn log_records_with_a_trace_id() {
        let json = format!(
            r#"{{"resourceLogs":[{{"scopeLogs":[{{"logRecords":[
              {{"timeUnixNano":"1700000000000000000","severityText":"ERROR","body":{{"stringValue":"charge failed"}},"traceId":"{}","spanId":"0000000000000009"}},
              {{"timeUnixNano":"1700000000000000000","body":{{"stringValue":"no trace"}}}}]}}]}}]}}"#,
            "0a".repeat(16)
        );
        let d = decode_logs(json.as_bytes(), true, Limits::default()).unwrap();
        assert_eq!(d.logs.len(), 1);
        assert_eq!(d.skipped, 1);
        assert_eq!(d.logs[0].body, "charge failed");
        assert_eq!(d.logs[0].at, Millis(1_700_000_000_000));
    }
}
