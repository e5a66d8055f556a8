//! A sharded log in Kafka (tansu on loopback, its SQLite engine): how long a
//! node takes to take a shard over as a function of the shard's records, and
//! what a query costs when it fans out to three nodes against one node that
//! holds everything.
//!
//! `cargo bench -p streamsight-collector --bench scaleout`; figures in
//! BENCHMARKS.md. Skipped when tansu is not installed (`scripts/test` installs it).

#![allow(clippy::unwrap_used)] // a bench that cannot set up should fail loudly

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use std::time::{Duration, Instant};
use streamsight_collector::ServeConfig;
use streamsight_collector::state::Shared;
use streamsight_core::{EngineConfig, Millis, Observation, PartitionRef, Record};
use streamsight_store::{Followed, KafkaStore, KafkaUrl, Store};
use streamsight_testkit::{Tansu, free_port};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

use streamsight_testkit::now_ms;

fn broker(name: &str) -> Option<(Tansu, std::path::PathBuf)> {
    if streamsight_testkit::tansu_installed().is_none() {
        eprintln!("{name}: skipped, tansu is not installed (scripts/test installs it)");
        return None;
    }
    let dir = std::env::temp_dir().join(format!("streamsight-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Some((Tansu::start_on(free_port(), "sqlite://tansu.db", &dir, &[]), dir))
}

/// `n` records of one shard's traffic: end offsets and commits of 100
/// partitions of one topic, 10 groups, a commit per group-partition at a time.
fn traffic(n: usize, at: i64) -> Vec<Record> {
    (0..n)
        .map(|i| {
            let partition = PartitionRef {
                cluster: "bench",
                topic: "orders",
                partition: (i % 100) as i32,
            };
            let step = (i / 100) as i64;
            let observation = if i % 11 == 0 {
                Observation::EndOffset {
                    partition,
                    offset: 1_000 + step * 10,
                    source: streamsight_core::EndOffsetSource::Broker,
                }
            } else {
                Observation::Committed {
                    group: ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9"][i % 10],
                    partition,
                    offset: 500 + step * 10,
                }
            };
            Record::Observation {
                at: Millis(at + step),
                observation: observation.to_owned(),
            }
        })
        .collect()
}

/// Joins the shards' group as a new node and applies the shard from its
/// start: (time from joining to the shard being assigned, time from then to
/// caught up, records applied).
fn take_over(url: &KafkaUrl) -> (Duration, Duration, usize) {
    let shared = streamsight_collector::node(ServeConfig::ephemeral(), EngineConfig::default()).unwrap();
    let mut store = KafkaStore::open(url.clone()).unwrap();
    store.scan(Millis(i64::MIN), &mut |_| {}).unwrap();
    let joined = Instant::now();
    let mut follow = store.follow().unwrap();
    let mut gained = None;
    let mut applied = 0;
    loop {
        match follow.next(Duration::from_millis(100)).unwrap() {
            Some(Followed::Gained(shards)) if !shards.is_empty() => gained = Some(Instant::now()),
            Some(Followed::Records(records)) => {
                applied += records.len();
                shared.apply_owned(records);
            }
            Some(Followed::Restored { state, .. }) => shared.import_shards(*state),
            Some(Followed::CaughtUp(_)) => {
                let gained = gained.unwrap();
                return (gained - joined, gained.elapsed(), applied);
            }
            _ => assert!(joined.elapsed() < Duration::from_secs(120), "no takeover"),
        }
    }
}

/// Takes the shard over as a node would, then snapshots it; the snapshot's size.
fn snapshot(url: &KafkaUrl) -> u64 {
    let shared = streamsight_collector::node(ServeConfig::ephemeral(), EngineConfig::default()).unwrap();
    let mut store = KafkaStore::open(url.clone()).unwrap();
    store.scan(Millis(i64::MIN), &mut |_| {}).unwrap();
    let mut follow = store.follow().unwrap();
    let counts = follow.snapshot_counts().unwrap();
    let started = Instant::now();
    loop {
        match follow.next(Duration::from_millis(10)).unwrap() {
            Some(Followed::Records(records)) => shared.apply_owned(records),
            Some(Followed::Restored { state, .. }) => shared.import_shards(*state),
            _ => {}
        }
        for shard in follow.due() {
            follow.save(&shard, shared.export_shards(&shard));
        }
        let written = counts.written.load(std::sync::atomic::Ordering::Relaxed);
        if written > 0 {
            return counts.written_bytes.load(std::sync::atomic::Ordering::Relaxed);
        }
        assert!(started.elapsed() < Duration::from_secs(120), "no snapshot");
    }
}

fn takeover(c: &mut Criterion) {
    let Some((_broker, dir)) = broker("takeover") else {
        return;
    };
    let mut group = c.benchmark_group("takeover");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(1));
    group.measurement_time(Duration::from_secs(1));
    for n in [10_000, 100_000, 1_000_000] {
        let log = format!(
            "kafka://{}/takeover-{n}?partitions=1&create=true&mode=sharded&timeout_ms=30000",
            _broker.bootstrap
        );
        let replayed = KafkaUrl::parse(&format!("{log}&snapshot_ms=0")).unwrap();
        let mut store = KafkaStore::open(replayed.clone()).unwrap();
        let records = traffic(n, now_ms() - 3_600_000);
        for batch in records.chunks(5_000) {
            store.append(batch).unwrap();
        }
        drop(store);
        group.throughput(criterion::Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("records", n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (join, replay, applied) = take_over(&replayed);
                    assert_eq!(applied, n);
                    eprintln!("takeover/{n}: assigned {join:?} after joining, caught up {replay:?} later");
                    total += replay;
                }
                total
            });
        });
        // The same shard with a snapshot of all of it: read, taken in, nothing replayed.
        let snapshotted = KafkaUrl::parse(&format!("{log}&snapshot_ms=1")).unwrap();
        let bytes = snapshot(&snapshotted);
        eprintln!("takeover/{n}: snapshot of {bytes} bytes");
        group.bench_function(BenchmarkId::new("from_snapshot", n), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let (join, restore, applied) = take_over(&snapshotted);
                    assert_eq!(applied, 0, "records replayed after the snapshot");
                    eprintln!(
                        "takeover/{n}/from_snapshot: assigned {join:?} after joining, caught up {restore:?} later"
                    );
                    total += restore;
                }
                total
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(dir);
}

struct Node {
    running: streamsight_collector::Running,
}

async fn node(storage: &str) -> Node {
    let config = ServeConfig {
        storage: storage.to_owned(),
        intake_listen: "127.0.0.1:0".parse().unwrap(),
        api_listen: "127.0.0.1:0".parse().unwrap(),
        ..ServeConfig::ephemeral()
    };
    Node {
        running: streamsight_collector::serve(config, EngineConfig::default())
            .await
            .unwrap(),
    }
}

/// 2,000 group-partitions: 20 topics of 10 partitions, 10 groups each.
fn estate(at: i64) -> Vec<Record> {
    let mut out = Vec::new();
    for t in 0..20 {
        let topic = format!("topic-{t}");
        for p in 0..10 {
            let partition = PartitionRef {
                cluster: "bench",
                topic: &topic,
                partition: p,
            };
            out.push(Record::Observation {
                at: Millis(at),
                observation: Observation::EndOffset {
                    partition,
                    offset: 1_000,
                    source: streamsight_core::EndOffsetSource::Broker,
                }
                .to_owned(),
            });
            for g in 0..10 {
                let group = format!("group-{g}");
                out.push(Record::Observation {
                    at: Millis(at),
                    observation: Observation::Committed {
                        group: &group,
                        partition,
                        offset: 900,
                    }
                    .to_owned(),
                });
            }
        }
    }
    out
}

fn fanout(c: &mut Criterion) {
    let Some((_broker, dir)) = broker("fanout") else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let log = format!(
        "kafka://{}/fanout-log?partitions=12&create=true&mode=sharded&timeout_ms=10000",
        _broker.bootstrap
    );
    let (sharded, single) = runtime.block_on(async {
        let nodes = [node(&log).await, node(&log).await, node(&log).await];
        let single = node("memory://").await;
        (nodes, single)
    });
    // The same records in the log (read by the three) and in one node.
    let records = estate(now_ms() - 60_000);
    let mut store = KafkaStore::open(KafkaUrl::parse(&log).unwrap()).unwrap();
    store.append(&records).unwrap();
    single.running.shared.apply(&records);
    let client = reqwest::Client::new();
    let get = |api: std::net::SocketAddr, path: &'static str| {
        let client = client.clone();
        async move {
            let body: serde_json::Value = client
                .get(format!("http://{api}{path}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            body
        }
    };
    // Until every shard is held and every row is in.
    runtime.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let lag = get(sharded[0].running.api_addr, "/api/v1/lag").await;
            let complete = lag["shards"]["missing"].as_array().is_some_and(Vec::is_empty);
            if complete && lag["rows"].as_array().map_or(0, Vec::len) == 2_000 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the three nodes never answered in full: {}",
                lag["shards"]
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    });
    let mut group = c.benchmark_group("fanout");
    group.sample_size(20);
    for path in ["/api/v1/lag", "/api/v1/groups", "/api/v1/overview"] {
        for (name, api) in [
            ("three_nodes", sharded[0].running.api_addr),
            ("one_node", single.running.api_addr),
        ] {
            group.bench_function(BenchmarkId::new(name, path), |b| {
                b.iter(|| runtime.block_on(get(api, path)));
            });
        }
    }
    group.finish();
    runtime.block_on(async {
        for node in sharded {
            node.running.shutdown().await;
        }
        single.running.shutdown().await;
    });
    let _ = std::fs::remove_dir_all(dir);
}

/// A shard's state at its largest: `n` partitions whose histories are full
/// (a rate change every sighting), three groups committing on each.
fn full_shard(n: usize) -> Shared {
    let shared = streamsight_collector::node(ServeConfig::ephemeral(), EngineConfig::default()).unwrap();
    let start = now_ms() - 86_400_000;
    for step in 0..300i64 {
        let records: Vec<Record> = (0..n)
            .flat_map(|p| {
                let partition = PartitionRef {
                    cluster: "bench",
                    topic: "orders",
                    partition: p as i32,
                };
                // Rates that keep changing: no point of the history is redundant.
                let end = step * step * 7 + step * (p as i64 % 13);
                let at = Millis(start + step * 60_000);
                let mut out = vec![Record::Observation {
                    at,
                    observation: Observation::EndOffset {
                        partition,
                        offset: end,
                        source: streamsight_core::EndOffsetSource::Broker,
                    }
                    .to_owned(),
                }];
                if step % 10 == 0 {
                    out.extend(["g0", "g1", "g2"].iter().map(|g| {
                        Record::Observation {
                            at,
                            observation: Observation::Committed {
                                group: g,
                                partition,
                                offset: end / 2,
                            }
                            .to_owned(),
                        }
                    }));
                }
                out
            })
            .collect();
        shared.apply_owned(records);
    }
    shared
}

/// What a snapshot costs by the state it holds: taking it (export and
/// encoding, on the holder) and taking it in (decoding and import, on the
/// node taking the shard over), without the log's reads and writes.
fn snapshot_cost(c: &mut Criterion) {
    let mut group = c.benchmark_group("snapshot");
    group.sample_size(10);
    for n in [1_000, 10_000] {
        let shared = full_shard(n);
        let shard = streamsight_core::shard::Shards::one(1, 0);
        let bytes = streamsight_store::snapshots::encode(&shared.export_shards(&shard)).unwrap();
        eprintln!(
            "snapshot/{n}: {} bytes, {} bytes a partition",
            bytes.len(),
            bytes.len() / n
        );
        group.throughput(criterion::Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("take", n), |b| {
            b.iter(|| {
                streamsight_store::snapshots::encode(&shared.export_shards(&shard))
                    .unwrap()
                    .len()
            })
        });
        group.bench_function(BenchmarkId::new("take_in", n), |b| {
            b.iter(|| {
                let fresh = streamsight_collector::node(ServeConfig::ephemeral(), EngineConfig::default()).unwrap();
                fresh.import_shards(streamsight_store::snapshots::decode(&bytes, u64::MAX).unwrap());
                fresh
            })
        });
    }
    group.finish();
}

criterion_group!(benches, takeover, fanout, snapshot_cost);
criterion_main!(benches);
