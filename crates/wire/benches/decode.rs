//! What counting before allocating costs a decode (issue 28): an honest OTLP
//! export of 1,000 spans (the journeys bench's request, 248 KB) decoded with
//! and without a meter, and the census alone as a share of the whole; the same
//! request as OTLP JSON; a Datadog `/v0.4` body of 1,000 spans.
//!
//! `cargo bench -p streamsight-wire --bench decode`

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use prost::Message as _;
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use streamsight_wire::budget::{Meter, Pool, metered};
use streamsight_wire::traces::otlp::{
    AnyValue, ExportTraceServiceRequest, KeyValue, PbSpan, Resource, ResourceSpans, Scalar, ScopeSpans,
};
use streamsight_wire::traces::{Limits, datadog, otlp};

const SPANS: usize = 1_000;

/// A pool as the collector's: one atomic, shared.
#[derive(Debug)]
struct Shared(AtomicUsize);

impl Pool for Shared {
    fn take(&self, bytes: usize) -> bool {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |left| left.checked_sub(bytes))
            .is_ok()
    }
    fn give(&self, bytes: usize) {
        self.0.fetch_add(bytes, Ordering::AcqRel);
    }
}

fn kv(key: &str, v: Scalar) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

fn request() -> ExportTraceServiceRequest {
    let spans = (0..SPANS)
        .map(|i| PbSpan {
            trace_id: ((i as u128 + 1) * 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)
                .to_be_bytes()
                .to_vec(),
            span_id: (i as u64 + 1).to_be_bytes().to_vec(),
            name: "orders process".into(),
            kind: 5,
            start_time_unix_nano: 1_800_000_000_000_000_000,
            end_time_unix_nano: 1_800_000_000_001_000_000,
            attributes: vec![
                kv("messaging.system", Scalar::String("kafka".into())),
                kv("messaging.destination.name", Scalar::String("orders".into())),
                kv("messaging.destination.partition.id", Scalar::String("3".into())),
                kv("messaging.kafka.offset", Scalar::Int(i as i64)),
                kv("messaging.consumer.group.name", Scalar::String("billing".into())),
                kv("messaging.operation.type", Scalar::String("process".into())),
            ],
            ..PbSpan::default()
        })
        .collect();
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Scalar::String("billing".into()))],
            }),
            scope_spans: vec![ScopeSpans { spans }],
        }],
    }
}

fn json(req: &ExportTraceServiceRequest) -> Vec<u8> {
    let spans: Vec<serde_json::Value> = req.resource_spans[0].scope_spans[0]
        .spans
        .iter()
        .map(|s| {
            let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
            serde_json::json!({
                "traceId": hex(&s.trace_id), "spanId": hex(&s.span_id), "name": s.name, "kind": s.kind,
                "startTimeUnixNano": s.start_time_unix_nano.to_string(),
                "endTimeUnixNano": s.end_time_unix_nano.to_string(),
                "attributes": [
                    {"key": "messaging.system", "value": {"stringValue": "kafka"}},
                    {"key": "messaging.destination.name", "value": {"stringValue": "orders"}},
                    {"key": "messaging.destination.partition.id", "value": {"stringValue": "3"}},
                    {"key": "messaging.consumer.group.name", "value": {"stringValue": "billing"}},
                    {"key": "messaging.operation.type", "value": {"stringValue": "process"}},
                ],
            })
        })
        .collect();
    serde_json::to_vec(&serde_json::json!({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "billing"}}]},
        "scopeSpans": [{"spans": spans}],
    }]}))
    .unwrap()
}

fn v04() -> Vec<u8> {
    let mut raw = Vec::new();
    rmp::encode::write_array_len(&mut raw, 1).unwrap();
    rmp::encode::write_array_len(&mut raw, SPANS as u32).unwrap();
    for i in 0..SPANS {
        rmp::encode::write_map_len(&mut raw, 6).unwrap();
        for (k, v) in [
            ("service", "billing"),
            ("name", "kafka.consume"),
            ("resource", "orders"),
        ] {
            rmp::encode::write_str(&mut raw, k).unwrap();
            rmp::encode::write_str(&mut raw, v).unwrap();
        }
        rmp::encode::write_str(&mut raw, "trace_id").unwrap();
        rmp::encode::write_uint(&mut raw, i as u64 + 1).unwrap();
        rmp::encode::write_str(&mut raw, "span_id").unwrap();
        rmp::encode::write_uint(&mut raw, 7).unwrap();
        rmp::encode::write_str(&mut raw, "meta").unwrap();
        rmp::encode::write_map_len(&mut raw, 3).unwrap();
        for (k, v) in [
            ("kafka.topic", "orders"),
            ("kafka.group_id", "billing"),
            ("span.kind", "consumer"),
        ] {
            rmp::encode::write_str(&mut raw, k).unwrap();
            rmp::encode::write_str(&mut raw, v).unwrap();
        }
    }
    raw
}

fn bench(c: &mut Criterion) {
    let pool: Arc<dyn Pool> = Arc::new(Shared(AtomicUsize::new(192 << 20)));
    let meter = || Meter::new(48 << 20, Some(pool.clone()));
    let limits = Limits::default();
    let pb = request().encode_to_vec();
    let js = json(&request());
    let dd = v04();

    let mut g = c.benchmark_group("otlp_protobuf");
    g.throughput(Throughput::Elements(SPANS as u64));
    g.bench_function("census_only", |b| {
        b.iter(|| otlp::census(black_box(&pb), false, 100_000).unwrap())
    });
    g.bench_function("decode_unmetered", |b| {
        b.iter(|| otlp::decode_traces(black_box(&pb), false, limits).unwrap())
    });
    g.bench_function("decode_metered", |b| {
        b.iter(|| {
            let mut m = meter();
            metered(&mut m, || otlp::decode_traces(black_box(&pb), false, limits).unwrap())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("otlp_json");
    g.throughput(Throughput::Elements(SPANS as u64));
    g.bench_function("decode_unmetered", |b| {
        b.iter(|| otlp::decode_traces(black_box(&js), true, limits).unwrap())
    });
    g.bench_function("decode_metered", |b| {
        b.iter(|| {
            let mut m = meter();
            metered(&mut m, || otlp::decode_traces(black_box(&js), true, limits).unwrap())
        })
    });
    g.finish();

    let mut g = c.benchmark_group("datadog_v04");
    g.throughput(Throughput::Elements(SPANS as u64));
    g.bench_function("decode_unmetered", |b| {
        b.iter(|| datadog::decode_v04(black_box(&dd), limits).unwrap())
    });
    g.bench_function("decode_metered", |b| {
        b.iter(|| {
            let mut m = meter();
            metered(&mut m, || datadog::decode_v04(black_box(&dd), limits).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
