//! The collector's hot paths: tracer payloads through the HTTP handler (memory and
//! durable SQLite storage), and `/metrics` for 100,000 group-partitions.
//!
//! `cargo bench -p streamsight-collector --bench intake`; figures in BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

use axum::body::Body;
use axum::http::Request;
mod support;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::sync::Arc;
use std::time::{Duration, Instant};
use streamsight_collector::auth::Scope;
use streamsight_collector::writer::Writer;
use streamsight_collector::{ServeConfig, intake, metrics};
use streamsight_core::{EngineConfig, Millis, Observation, PartitionRef};
use streamsight_wire::dsm::payload::{Backlog, Bucket, Payload, StatsPoint, encode};
use streamsight_wire::dsm::sketch::Mapping;
use support::collector_cpu_seconds;
use tower::ServiceExt;

/// The allocator the `streamsight` binary uses.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const PARTITIONS: usize = 100;
/// Backlogs per payload: one bucket, a produce and a commit for each partition.
const POINTS: usize = 2 * PARTITIONS;

use streamsight_testkit::now_ns;

/// A payload like a busy service's: produce and commit backlogs for 100
/// partitions and two pathway points, gzipped as tracers send it.
/// Payloads are 100 ms apart from six days ago: inside the default retention
/// (older buckets are refused) for millions of payloads.
const STEP_NS: u64 = 100_000_000;

fn base_ns() -> u64 {
    now_ns() - 6 * 86_400 * 1_000_000_000
}

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
            start: base_ns + seq * STEP_NS,
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
        ..ServeConfig::ephemeral()
    };
    let shared = Arc::new(streamsight_collector::node(config, EngineConfig::default()).unwrap());
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
    let base = base_ns();
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

/// Over real HTTP: `serve` on loopback with each store, 16 requests in flight from
/// a reqwest client in the same process (2 cores share server and client).
fn http_bench(c: &mut Criterion) {
    // Server and load generator on runtimes of their own, so that their threads'
    // CPU time can be told apart.
    let (server_rt, rt) = support::runtimes();
    let dir = std::env::temp_dir().join(format!("streamsight-bench-http-{}", std::process::id()));
    let mut group = c.benchmark_group("http");
    group.throughput(Throughput::Elements(POINTS as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(15));
    // An ingest key among a thousand others: what checking it costs.
    let keys_file = dir.join("keys.json");
    let mut keys = streamsight_collector::auth::KeyFile::default();
    for _ in 0..999 {
        keys.keys.push(
            streamsight_collector::auth::generate("default", Scope::Read, 0)
                .unwrap()
                .stored,
        );
    }
    let ingest = streamsight_collector::auth::generate("default", Scope::Ingest, 0).unwrap();
    keys.keys.push(ingest.stored.clone());
    keys.save(&keys_file).unwrap();
    for (name, storage, limited, key) in [
        ("memory_store", "memory://".to_owned(), true, None),
        (
            "sqlite_fsync",
            format!("sqlite://{}/http.db", dir.display()),
            true,
            None,
        ),
        // The same without the hardening's limits: what the checks cost.
        (
            "sqlite_fsync_unlimited",
            format!("sqlite://{}/http-unlimited.db", dir.display()),
            false,
            None,
        ),
        // The log in a Kafka topic (tansu on loopback, its SQLite engine), when
        // tansu is installed: what kafka:// costs a node against sqlite://.
        ("kafka", "kafka://".to_owned(), true, None),
        // The same log sharded: appends are not applied by the node that
        // makes them (its follower applies its own shards' records).
        ("kafka_sharded", "kafka://?mode=sharded".to_owned(), true, None),
        // The same with API keys: every request carries one.
        (
            "sqlite_fsync_authenticated",
            format!("sqlite://{}/http-authenticated.db", dir.display()),
            true,
            Some(ingest.token.clone()),
        ),
    ] {
        // `BENCH_STORES=memory_store,sqlite_fsync` runs only those, fixed run included.
        if std::env::var("BENCH_STORES").is_ok_and(|only| !only.split(',').any(|s| s == name)) {
            continue;
        }
        let mut _broker = None;
        let storage = if let Some(query) = storage.strip_prefix("kafka://") {
            if streamsight_testkit::tansu_installed().is_none() {
                eprintln!("http/kafka: skipped, tansu is not installed (scripts/test installs it)");
                continue;
            }
            std::fs::create_dir_all(&dir).unwrap();
            // `BENCH_TANSU_STORAGE=memory://tansu/` takes the broker's disk out.
            let engine = std::env::var("BENCH_TANSU_STORAGE").unwrap_or_else(|_| "sqlite://tansu.db".into());
            let broker = streamsight_testkit::Tansu::start_on(streamsight_testkit::free_port(), &engine, &dir, &[]);
            let query = query.strip_prefix('?').map_or(String::new(), |q| format!("&{q}"));
            // A log of its own: another configuration's records are not replayed here.
            let url = format!(
                "kafka://{}/log-{name}?partitions=12&create=true{query}",
                broker.bootstrap
            );
            _broker = Some(broker);
            url
        } else {
            storage
        };
        let mut config = ServeConfig {
            storage,
            intake_listen: "127.0.0.1:0".parse().unwrap(),
            api_listen: "127.0.0.1:0".parse().unwrap(),
            ..ServeConfig::ephemeral()
        };
        let mut engine = EngineConfig::default();
        if !limited {
            unlimited(&mut config, &mut engine);
        }
        config.keys_file = if key.is_some() {
            keys_file.clone()
        } else {
            dir.join("no-keys.json")
        };
        let running = server_rt
            .block_on(server_rt.spawn(streamsight_collector::serve(config, engine)))
            .unwrap()
            .unwrap();
        let url = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
        let client = reqwest::Client::new();
        let mut seq = 0u64;
        let base = base_ns();
        let mut send = |iters: u64| {
            let bodies: Vec<Vec<u8>> = (0..iters)
                .map(|_| {
                    seq += 1;
                    payload(seq, base)
                })
                .collect();
            rt.block_on(async {
                let start = Instant::now();
                let mut bodies = bodies.into_iter();
                loop {
                    let wave: Vec<_> = bodies.by_ref().take(16).collect();
                    if wave.is_empty() {
                        break;
                    }
                    let calls = wave.into_iter().map(|body| {
                        let mut request = client
                            .post(&url)
                            .header("Content-Type", "application/msgpack")
                            .header("Content-Encoding", "gzip")
                            .body(body);
                        if let Some(key) = &key {
                            request = request.bearer_auth(key);
                        }
                        tokio::spawn(async move { request.send().await.unwrap().status() })
                    });
                    for call in calls.collect::<Vec<_>>() {
                        assert_eq!(call.await.unwrap().as_u16(), 202);
                    }
                }
                start.elapsed()
            })
        };
        group.bench_function(BenchmarkId::new(name, "16_in_flight"), |b| b.iter_custom(&mut send));
        // CPU time of the collector's threads (its runtime and the writer) alone.
        let (cpu, wall) = (collector_cpu_seconds(), Instant::now());
        send(5_000);
        let (cpu, wall) = (collector_cpu_seconds() - cpu, wall.elapsed().as_secs_f64());
        eprintln!(
            "http/{name}: {:.0} points/s, {:.0} points per collector CPU-second",
            5_000.0 * POINTS as f64 / wall,
            5_000.0 * POINTS as f64 / cpu
        );
        drop(running);
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every limit as far out as it goes.
fn unlimited(config: &mut ServeConfig, engine: &mut EngineConfig) {
    let l = &mut config.limits;
    l.payload = streamsight_wire::dsm::payload::Limits::unbounded_counts(l.payload.max_decompressed_bytes);
    l.max_connections = 1 << 20;
    l.max_in_flight = 1 << 20;
    l.max_queued_records = usize::MAX;
    l.max_pathway_bytes = usize::MAX;
    l.max_services = usize::MAX;
    let c = &mut engine.cardinality;
    c.max_clusters = usize::MAX;
    c.max_topics_per_cluster = usize::MAX;
    c.max_partitions_per_topic = usize::MAX;
    c.max_groups_per_cluster = usize::MAX;
    c.max_partitions = usize::MAX;
    c.max_group_partitions = usize::MAX;
    c.max_name_bytes = usize::MAX;
}

/// A restart: the store's records read back and applied to a fresh collector.
fn replay_bench(c: &mut Criterion) {
    const BATCHES: u64 = 2_000;
    let dir = std::env::temp_dir().join(format!("streamsight-bench-replay-{}", std::process::id()));
    let path = dir.join("replay.db");
    let url = format!("sqlite://{}", path.display());
    let shared = streamsight_collector::node(ServeConfig::default(), EngineConfig::default()).unwrap();
    let mut records_total = 0usize;
    {
        let mut store = streamsight_store::open(&url).unwrap();
        let base = base_ns();
        for seq in 1..=BATCHES {
            let decoded =
                streamsight_wire::dsm::payload::decode(&payload(seq, base), true, Default::default()).unwrap();
            let t = intake::translate(
                &decoded,
                intake::Dates::any(Millis(i64::MAX)),
                &intake::Clusters::none("default"),
            );
            records_total += t.records.len();
            store.append(&t.records).unwrap();
        }
    }
    let bytes =
        std::fs::metadata(&path).unwrap().len() + std::fs::metadata(dir.join("replay.db-wal")).map_or(0, |m| m.len());
    eprintln!(
        "replay: {records_total} records in {BATCHES} batches, {bytes} bytes on disk, {:.1} bytes per record",
        bytes as f64 / records_total as f64
    );
    drop(shared);
    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Elements(records_total as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function(BenchmarkId::new("sqlite", records_total), |b| {
        b.iter(|| {
            let shared =
                Arc::new(streamsight_collector::node(ServeConfig::default(), EngineConfig::default()).unwrap());
            let store = streamsight_store::open(&url).unwrap();
            Writer::start(store, shared, Millis(0)).unwrap()
        })
    });
    group.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

fn metrics_bench(c: &mut Criterion) {
    // 10,000 partitions x 10 groups = 100,000 group-partitions, all with known lag.
    let shared = streamsight_collector::node(ServeConfig::default(), EngineConfig::default()).unwrap();
    let mut records = Vec::new();
    for p in 0..10_000 {
        let topic = format!("topic-{}", p / 10);
        let part = PartitionRef {
            cluster: "bench",
            topic: &topic,
            partition: p % 10,
        };
        let record = |at: i64, o: Observation<'_>| streamsight_core::Record::Observation {
            at: Millis(at),
            observation: o.to_owned(),
        };
        records.push(record(
            0,
            Observation::Produced {
                partition: part,
                offset: 1_000,
            },
        ));
        for g in 0..10 {
            let group = format!("group-{g}");
            let commit = Observation::Committed {
                group: &group,
                partition: part,
                offset: 500,
            };
            records.push(record(1_000, commit));
        }
    }
    shared.apply(&records);
    let now = Millis(2_000);
    use streamsight_node::config::Granularity;
    for (name, g) in [
        ("partition", Granularity::Partition),
        ("topic", Granularity::Topic),
        ("group", Granularity::Group),
    ] {
        let size = metrics::render(&shared, now, g).len();
        eprintln!("/metrics for 100,000 group-partitions at {name} granularity: {size} bytes");
    }
    let mut group = c.benchmark_group("metrics");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(15));
    group.bench_function("render_100k_group_partitions", |b| {
        b.iter(|| metrics::render(&shared, now, Granularity::Partition).len())
    });
    group.bench_function("render_100k_group_partitions_by_group", |b| {
        b.iter(|| metrics::render(&shared, now, Granularity::Group).len())
    });
    group.finish();
}

/// The stages of one payload on the request's thread, apart: what each costs.
fn stages_bench(c: &mut Criterion) {
    let body = payload(1, base_ns());
    let limits = streamsight_wire::dsm::payload::Limits::default();
    let decoded = streamsight_wire::dsm::payload::decode(&body, true, limits).unwrap();
    let mut group = c.benchmark_group("stages");
    group.throughput(Throughput::Elements(POINTS as u64));
    // As intake reads it: strings borrowed from the decompressed body.
    group.bench_function("decode_gzip_msgpack", |b| {
        b.iter(|| {
            let raw = streamsight_wire::dsm::payload::inflate(&body, true, limits).unwrap();
            streamsight_wire::dsm::payload::decode_msgpack::<&str>(&raw, limits)
                .unwrap()
                .stats
                .len()
        })
    });
    let raw = {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&body[..]).read_to_end(&mut out).unwrap();
        out
    };
    group.bench_function("decode_msgpack", |b| {
        b.iter(|| streamsight_wire::dsm::payload::decode_msgpack::<&str>(&raw, limits).unwrap())
    });
    group.bench_function("translate", |b| {
        b.iter(|| {
            intake::translate(
                &decoded,
                intake::Dates::any(Millis(i64::MAX)),
                &intake::Clusters::none("default"),
            )
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    stages_bench,
    intake_bench,
    http_bench,
    replay_bench,
    metrics_bench
);
criterion_main!(benches);
