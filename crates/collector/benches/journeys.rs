//! Journeys at scale. Span intake over real HTTP into the durable store
//! (SQLite, synchronous=FULL) and into memory://, same run: spans per second,
//! spans per collector CPU-second, bytes stored per span. Then a journey index
//! holding 10 M spans: lookup latency by trace id and by offset (p50/p99), and
//! memory per span.
//! Goals (issue 15): ≥ 200k spans/s per core into the durable store; lookup
//! < 10 ms p99 with 10 M stored spans.
//!
//! `cargo bench -p streamsight-collector --bench journeys`

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

mod support;

use support::collector_cpu_seconds;

use prost::Message as _;
use std::time::{Duration, Instant};
use streamsight_collector::ServeConfig;
use streamsight_core::EngineConfig;
use streamsight_core::Millis;
use streamsight_core::journey::{JourneyLimits, Journeys, Messaging, Operation, Source, Span, TraceId};
use streamsight_wire::traces::otlp::{
    AnyValue, ExportTraceServiceRequest, KeyValue, PbLink, PbSpan, Resource, ResourceSpans, Scalar, ScopeSpans,
};

/// The allocator the `streamsight` binary uses.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SPANS_PER_REQUEST: usize = 1_000;
const REQUESTS: usize = 1_200;
const IN_FLIGHT: usize = 8;

fn kv(key: &str, v: Scalar) -> KeyValue {
    KeyValue {
        key: key.into(),
        value: Some(AnyValue { value: Some(v) }),
    }
}

/// 500 messages: each a producer's send span and a consumer's process span
/// linked to it, as opentelemetry-instrumentation-confluent-kafka makes them.
fn request(seq: usize) -> Vec<u8> {
    let mut spans = Vec::with_capacity(SPANS_PER_REQUEST);
    let t0 = 1_800_000_000_000_000_000u64 + seq as u64 * 1_000_000;
    for i in 0..SPANS_PER_REQUEST / 2 {
        let n = (seq * SPANS_PER_REQUEST + i) as u128 + 1;
        let trace = (n * 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835).to_be_bytes().to_vec();
        let consumer = (n * 0xD1B5_4A32_D192_ED03_2545_F491_4F6C_DD1D).to_be_bytes().to_vec();
        let offset = (seq * SPANS_PER_REQUEST / 2 + i) as i64;
        spans.push(PbSpan {
            trace_id: trace.clone(),
            span_id: 1u64.to_be_bytes().to_vec(),
            name: "orders send".into(),
            kind: 4,
            start_time_unix_nano: t0,
            end_time_unix_nano: t0 + 500_000,
            attributes: vec![
                kv("messaging.system", Scalar::String("kafka".into())),
                kv("messaging.destination.name", Scalar::String("orders".into())),
                kv("messaging.operation.type", Scalar::String("publish".into())),
            ],
            ..PbSpan::default()
        });
        spans.push(PbSpan {
            trace_id: consumer,
            span_id: 2u64.to_be_bytes().to_vec(),
            name: "orders process".into(),
            kind: 5,
            start_time_unix_nano: t0 + 2_000_000,
            end_time_unix_nano: t0 + 3_000_000,
            attributes: vec![
                kv("messaging.system", Scalar::String("kafka".into())),
                kv("messaging.destination.name", Scalar::String("orders".into())),
                kv("messaging.destination.partition.id", Scalar::String("3".into())),
                kv("messaging.kafka.offset", Scalar::Int(offset)),
                kv("messaging.consumer.group.name", Scalar::String("billing".into())),
                kv("messaging.operation.type", Scalar::String("process".into())),
            ],
            links: vec![PbLink {
                trace_id: trace,
                span_id: 1u64.to_be_bytes().to_vec(),
            }],
            ..PbSpan::default()
        });
    }
    ExportTraceServiceRequest {
        resource_spans: vec![ResourceSpans {
            resource: Some(Resource {
                attributes: vec![kv("service.name", Scalar::String("shop".into()))],
            }),
            scope_spans: vec![ScopeSpans { spans }],
        }],
    }
    .encode_to_vec()
}

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn intake() {
    let (server_rt, rt) = support::runtimes();
    let dir = std::env::temp_dir().join(format!("streamsight-bench-journeys-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bodies: Vec<Vec<u8>> = (0..REQUESTS).map(request).collect();
    let bytes: usize = bodies.iter().map(Vec::len).sum();
    println!(
        "{REQUESTS} OTLP requests of {SPANS_PER_REQUEST} spans ({} bytes each), {IN_FLIGHT} in flight\n",
        bytes / REQUESTS
    );
    println!("| store | spans/s | spans per collector CPU-second | bytes stored per span |");
    println!("|---|---|---|---|");
    for (name, storage) in [
        ("memory://", "memory://".to_owned()),
        (
            "sqlite (synchronous=FULL)",
            format!("sqlite://{}/spans.db", dir.display()),
        ),
    ] {
        let mut config = ServeConfig {
            storage,
            keys_file: dir.join("no-keys.json"),
            ..ServeConfig::ephemeral()
        };
        config.limits.max_queued_records = 10_000_000;
        config.journeys.max_spans = 10_000_000;
        config.journeys.max_traces = 10_000_000;
        let running = server_rt
            .block_on(server_rt.spawn(streamsight_collector::serve(config, EngineConfig::default())))
            .unwrap()
            .unwrap();
        let url = format!("http://{}/v1/traces", running.otlp_addr);
        let client = reqwest::Client::new();
        let (cpu, wall) = (collector_cpu_seconds(), Instant::now());
        rt.block_on(async {
            for wave in bodies.chunks(IN_FLIGHT) {
                let calls: Vec<_> = wave
                    .iter()
                    .map(|body| {
                        let request = client
                            .post(&url)
                            .header("Content-Type", "application/x-protobuf")
                            .body(body.clone());
                        tokio::spawn(async move { request.send().await.unwrap().status() })
                    })
                    .collect();
                for call in calls {
                    assert_eq!(call.await.unwrap().as_u16(), 200);
                }
            }
        });
        let (cpu, wall) = (collector_cpu_seconds() - cpu, wall.elapsed().as_secs_f64());
        let spans = (REQUESTS * SPANS_PER_REQUEST) as f64;
        let stored = std::fs::metadata(dir.join("spans.db")).map_or(0, |m| m.len())
            + std::fs::metadata(dir.join("spans.db-wal")).map_or(0, |m| m.len());
        let per_span = if name.starts_with("sqlite") {
            format!("{:.0}", stored as f64 / spans)
        } else {
            "-".into()
        };
        println!("| {name} | {:.0} | {:.0} | {per_span} |", spans / wall, spans / cpu);
        drop(running);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn span(trace: u128, id: u64, op: Operation, offset: i64) -> Span {
    Span {
        trace_id: TraceId(trace),
        span_id: id,
        parent_id: 0,
        name: if op == Operation::Send {
            "orders send"
        } else {
            "orders process"
        }
        .into(),
        service: "shop".into(),
        start_ns: 1_800_000_000_000_000_000 + offset,
        duration_ns: 1_000_000,
        error: None,
        messaging: Some(Messaging {
            topic: "orders".into(),
            partition: Some((offset % 64) as i32),
            offset: (op == Operation::Process).then_some(offset / 64),
            group: (op == Operation::Process).then(|| "billing".into()),
            operation: Some(op),
            ..Messaging::default()
        }),
        links: Vec::new(),
        source: Source::Otlp,
    }
}

fn lookups() {
    const MESSAGES: u64 = 5_000_000;
    let limits = JourneyLimits {
        max_traces: 20_000_000,
        max_spans: 20_000_000,
        ..JourneyLimits::default()
    };
    let before = rss_bytes();
    let started = Instant::now();
    let mut index = Journeys::new(limits);
    for m in 0..MESSAGES {
        let producer = u128::from(m + 1) * 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835;
        let consumer = u128::from(m + 1) * 0xD1B5_4A32_D192_ED03_2545_F491_4F6C_DD1D;
        index.add_span(span(producer, 1, Operation::Send, m as i64), Millis(0));
        let mut process = span(consumer, 2, Operation::Process, m as i64);
        process.links = vec![(TraceId(producer), 1)];
        index.add_span(process, Millis(0));
    }
    let built = started.elapsed();
    let stats = index.stats();
    let per_span = (rss_bytes().saturating_sub(before)) as f64 / stats.spans as f64;
    let mut by_trace = Vec::new();
    let mut by_offset = Vec::new();
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let m = x % MESSAGES;
        let producer = u128::from(m + 1) * 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835;
        let t = Instant::now();
        let j = index.journey(TraceId(producer)).unwrap();
        by_trace.push(t.elapsed());
        assert_eq!(j.spans.len(), 2);
        let t = Instant::now();
        let ids = index.at_offset(None, "orders", (m % 64) as i32, (m / 64) as i64);
        let j = index.journey(ids[0]).unwrap();
        by_offset.push(t.elapsed());
        assert_eq!(j.trace_id, TraceId(producer));
    }
    let q = |v: &mut Vec<Duration>, p: f64| {
        v.sort_unstable();
        v[((v.len() - 1) as f64 * p) as usize].as_secs_f64() * 1e6
    };
    println!(
        "\nindex of {} spans in {} traces built in {:.1} s; {:.0} bytes of memory per span\n",
        stats.spans,
        stats.traces,
        built.as_secs_f64(),
        per_span
    );
    println!("| lookup | p50 | p99 |");
    println!("|---|---|---|");
    println!(
        "| by trace id | {:.1} µs | {:.1} µs |",
        q(&mut by_trace, 0.5),
        q(&mut by_trace, 0.99)
    );
    println!(
        "| by topic, partition, offset | {:.1} µs | {:.1} µs |",
        q(&mut by_offset, 0.5),
        q(&mut by_offset, 0.99)
    );
}

fn main() {
    intake();
    lookups();
}
