//! The collector's hot paths: tracer payloads through the HTTP handler (memory and
//! durable SQLite storage), and `/metrics` for 100,000 group-partitions.
//!
//! `cargo bench -p streamsight-collector --bench intake`; figures in BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

use axum::body::Body;
use axum::http::Request;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use streamsight_collector::state::{Shared, Writer};
use streamsight_collector::{ServeConfig, intake, metrics};
use streamsight_core::{EngineConfig, Millis, Observation, PartitionRef};
use streamsight_wire::dsm::payload::{Backlog, Bucket, Payload, StatsPoint, encode};
use streamsight_wire::dsm::sketch::Mapping;
use tower::ServiceExt;

/// The allocator the `streamsight` binary uses.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PARTITIONS: usize = 100;
/// Backlogs per payload: one bucket, a produce and a commit for each partition.
const POINTS: usize = 2 * PARTITIONS;

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64
}

/// A payload like a busy service's: produce and commit backlogs for 100
/// partitions and two pathway points, gzipped as tracers send it.
fn payload(seq: u64, base_ns: u64) -> Vec<u8> {
    let m = Mapping::default();
    let mut backlogs = Vec::with_capacity(POINTS);
    for p in 0..PARTITIONS {
        let tags = |kind: &str| {
            let mut t = vec![
                format!("type:{kind}"),
                format!("topic:topic-{}", p / 10),
                format!("partition:{}", p % 10),
            ];
            if kind == "kafka_commit" {
                t.push("consumer_group:group-a".into());
            }
            t.push("kafka_cluster_id:bench".into());
            t
        };
        let offset = (seq * 1_000) as i64;
        backlogs.push(Backlog {
            tags: tags("kafka_produce"),
            value: offset,
        });
        backlogs.push(Backlog {
            tags: tags("kafka_commit"),
            value: offset - 500,
        });
    }
    let point = |hash, tags: &[&str]| StatsPoint {
        edge_tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        hash,
        parent_hash: 1,
        pathway_latency: m.encode(&[0.01, 0.02, 0.5]),
        edge_latency: m.encode(&[0.01, 0.02, 0.5]),
        payload_size: m.encode(&[100.0, 200.0]),
        timestamp_type: "current".into(),
    };
    encode(&Payload {
        env: "prod".into(),
        service: "bench".into(),
        lang: "java".into(),
        stats: vec![Bucket {
            start: base_ns + seq * 10_000_000_000,
            duration: 10_000_000_000,
            stats: vec![
                point(2, &["direction:out", "topic:topic-0", "type:kafka"]),
                point(3, &["direction:in", "group:group-a", "topic:topic-0", "type:kafka"]),
            ],
            backlogs,
        }],
        ..Default::default()
    })
}

fn router(storage: &str) -> (axum::Router, Writer) {
    let config = ServeConfig {
        storage: storage.to_owned(),
        ..ServeConfig::default()
    };
    let shared = Arc::new(Shared::new(config, EngineConfig::default()).unwrap());
    let store = streamsight_store::open(storage).unwrap();
    let writer = Writer::start(store, shared.clone(), Millis(0)).unwrap();
    (intake::router(shared, writer.clone()), writer)
}

fn request(body: Vec<u8>) -> Request<Body> {
    Request::post("/v0.1/pipeline_stats")
        .header("Content-Type", "application/msgpack")
        .header("Content-Encoding", "gzip")
        .body(Body::from(body))
        .unwrap()
}

/// Sends `iters` payloads with `in_flight` requests at a time; times only the
/// sending. With `forget` the store then drops what it holds, as retention does in
/// a running collector, so that the memory store measures a steady state rather
/// than the kernel handing it ever more fresh pages.
fn send(
    rt: &tokio::runtime::Runtime,
    (router, writer): &(axum::Router, Writer),
    iters: u64,
    in_flight: usize,
    seq: &mut u64,
    forget: bool,
) -> Duration {
    let base = now_ns() - 1_000_000 * 10_000_000_000;
    let bodies: Vec<Vec<u8>> = (0..iters)
        .map(|_| {
            *seq += 1;
            payload(*seq, base)
        })
        .collect();
    rt.block_on(async {
        let start = Instant::now();
        let mut bodies = bodies.into_iter();
        loop {
            let wave: Vec<_> = bodies.by_ref().take(in_flight).collect();
            if wave.is_empty() {
                break;
            }
            let calls = wave.into_iter().map(|b| {
                let r = router.clone();
                tokio::spawn(async move { r.oneshot(request(b)).await.unwrap().status() })
            });
            for c in calls.collect::<Vec<_>>() {
                assert_eq!(c.await.unwrap().as_u16(), 202);
            }
        }
        let elapsed = start.elapsed();
        if forget {
            writer.delete_before(Millis(i64::MAX));
        }
        elapsed
    })
}

fn intake_bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("intake");
    group.throughput(Throughput::Elements(POINTS as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));

    let memory = router("memory://");
    let mut seq = 0;
    group.bench_function(BenchmarkId::new("memory_store", "1_in_flight"), |b| {
        b.iter_custom(|iters| send(&rt, &memory, iters, 1, &mut seq, true));
    });

    let dir = std::env::temp_dir().join(format!("streamsight-bench-{}", std::process::id()));
    let sqlite = router(&format!("sqlite://{}/bench.db", dir.display()));
    for in_flight in [1usize, 16] {
        let mut seq = 0;
        group.bench_function(
            BenchmarkId::new("sqlite_fsync", format!("{in_flight}_in_flight")),
            |b| {
                b.iter_custom(|iters| send(&rt, &sqlite, iters, in_flight, &mut seq, false));
            },
        );
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn metrics_bench(c: &mut Criterion) {
    // 10,000 partitions x 10 groups = 100,000 group-partitions, all with known lag.
    let shared = Shared::new(ServeConfig::default(), EngineConfig::default()).unwrap();
    {
        let mut engine = shared.engine.lock().unwrap();
        for p in 0..10_000 {
            let topic = format!("topic-{}", p / 10);
            let part = PartitionRef {
                cluster: "bench",
                topic: &topic,
                partition: p % 10,
            };
            engine
                .observe(
                    Millis(0),
                    &Observation::Produced {
                        partition: part,
                        offset: 1_000,
                    },
                )
                .unwrap();
            for g in 0..10 {
                let group = format!("group-{g}");
                let commit = Observation::Committed {
                    group: &group,
                    partition: part,
                    offset: 500,
                };
                engine.observe(Millis(1_000), &commit).unwrap();
            }
        }
    }
    let now = Millis(2_000);
    let size = metrics::render(&shared, now).len();
    eprintln!("/metrics for 100,000 group-partitions: {size} bytes");
    let mut group = c.benchmark_group("metrics");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("render_100k_group_partitions", |b| {
        b.iter(|| metrics::render(&shared, now).len())
    });
    group.finish();
}

criterion_group!(benches, intake_bench, metrics_bench);
criterion_main!(benches);
