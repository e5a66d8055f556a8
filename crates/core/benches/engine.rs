//! Engine throughput: ingest of offset points and evaluation of lag and health.
//!
//! `cargo bench -p streamsight-core --bench engine`; figures in BENCHMARKS.md.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use criterion::{BenchmarkId, Criterion, Throughput, black_box, criterion_group, criterion_main};
use std::time::Duration;
use streamsight_core::history::Compaction;
use streamsight_core::{
    EndOffsetSource, Engine, EngineConfig, GroupPartitionId, Millis, Observation, PartitionId, PartitionRef,
};

const PARTITIONS: usize = 1_000;
const BATCH: usize = 1_000_000;

fn partitions(engine: &mut Engine, n: usize) -> (Vec<PartitionId>, Vec<String>) {
    let topics: Vec<String> = (0..n / 10).map(|t| format!("topic-{t}")).collect();
    let ids = (0..n)
        .map(|i| {
            engine
                .partition_id(PartitionRef {
                    cluster: "c",
                    topic: &topics[i / 10],
                    partition: (i % 10) as i32,
                })
                .unwrap()
        })
        .collect();
    (ids, topics)
}

fn ingest(c: &mut Criterion) {
    let mut group = c.benchmark_group("ingest");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));

    // Produce acks by partition id: the path the collector takes after resolving
    // a payload's partitions once. Offsets and time advance every point, so the
    // histories fill and compact as they would in production. Both compactions in
    // the same run, on steady and on bursty producers.
    for compaction in [Compaction::ByError, Compaction::ByAge] {
        let name = match compaction {
            Compaction::ByError => "by_error",
            Compaction::ByAge => "by_age",
        };
        let config = EngineConfig {
            history_compaction: compaction,
            ..EngineConfig::default()
        };
        group.bench_function(BenchmarkId::new(format!("produced_by_id/{name}"), PARTITIONS), |b| {
            let mut engine = Engine::new(config.clone()).unwrap();
            let (ids, _) = partitions(&mut engine, PARTITIONS);
            let mut n: i64 = 0;
            b.iter(|| {
                for i in 0..BATCH {
                    let offset = n / PARTITIONS as i64;
                    engine.produced(ids[i % PARTITIONS], offset, Millis(n)).unwrap();
                    n += 1;
                }
            });
        });
        // Every partition acks once a second, each with its own rate that changes
        // every few minutes (0 to 1,000 records a second), with noise on every ack:
        // no two segments are collinear, so compaction does real work.
        group.bench_function(BenchmarkId::new(format!("produced_bursty/{name}"), PARTITIONS), |b| {
            let mut engine = Engine::new(config.clone()).unwrap();
            let (ids, _) = partitions(&mut engine, PARTITIONS);
            let mut ends = vec![0i64; PARTITIONS];
            let mut rates = vec![0i64; PARTITIONS];
            let mut x: u64 = 7;
            let mut n: i64 = 0;
            b.iter(|| {
                for i in 0..BATCH {
                    let p = i % PARTITIONS;
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    if (x >> 33) % 240 == 0 {
                        rates[p] = [0, 1, 20, 300, 1_000][(x >> 50) as usize % 5];
                    }
                    ends[p] += rates[p] + (x >> 59) as i64 * rates[p] / 16;
                    engine.produced(ids[p], ends[p], Millis(n)).unwrap();
                    n += 1;
                }
            });
        });
    }

    group.bench_function(BenchmarkId::new("broker_end_by_id", PARTITIONS), |b| {
        let mut engine = Engine::new(EngineConfig::default()).unwrap();
        let (ids, _) = partitions(&mut engine, PARTITIONS);
        let mut n: i64 = 0;
        b.iter(|| {
            for i in 0..BATCH {
                let end = n / PARTITIONS as i64;
                engine
                    .end_offset(ids[i % PARTITIONS], end, EndOffsetSource::Broker, Millis(n))
                    .unwrap();
                n += 1;
            }
        });
    });

    // The same acks through `observe`, names resolved on every point.
    group.bench_function(BenchmarkId::new("observe_by_name", PARTITIONS), |b| {
        let mut engine = Engine::new(EngineConfig::default()).unwrap();
        let (_, topics) = partitions(&mut engine, PARTITIONS);
        let mut n: i64 = 0;
        b.iter(|| {
            for i in 0..BATCH {
                let p = i % PARTITIONS;
                let observation = Observation::Produced {
                    partition: PartitionRef {
                        cluster: "c",
                        topic: &topics[p / 10],
                        partition: (p % 10) as i32,
                    },
                    offset: n / PARTITIONS as i64,
                };
                engine.observe(Millis(n), &observation).unwrap();
                n += 1;
            }
        });
    });
    group.finish();
}

/// 100,000 partitions, 10 groups on each: one million group-partitions, each with
/// a full commit window and a partition history of 60 points.
fn big_engine() -> (Engine, Vec<GroupPartitionId>, Millis) {
    const P: usize = 100_000;
    const G: usize = 10;
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let (ids, _) = partitions(&mut engine, P);
    for step in 0..60i64 {
        for &pid in &ids {
            // Off any line, so that every point stays in the history.
            engine
                .produced(pid, step * 100 + (step * step) % 7 * 10, Millis(step * 10_000))
                .unwrap();
        }
    }
    let groups: Vec<_> = (0..G)
        .map(|g| engine.group_id("c", &format!("group-{g}")).unwrap())
        .collect();
    let mut gps = Vec::with_capacity(P * G);
    for (g, &gid) in groups.iter().enumerate() {
        for &pid in &ids {
            for k in 0..10i64 {
                // A mix of caught-up, slow and stuck groups.
                let offset = match g % 3 {
                    0 => 5_000 + k * 90,
                    1 => 2_000 + k * 10,
                    _ => 1_000,
                };
                engine
                    .committed(gid, pid, offset, Millis(500_000 + k * 10_000))
                    .unwrap();
            }
            gps.push(engine.group_partition_id(gid, pid).unwrap());
        }
    }
    (engine, gps, Millis(600_000))
}

fn evaluate(c: &mut Criterion) {
    let (mut engine, gps, now) = big_engine();
    let first = engine
        .partition_id(PartitionRef {
            cluster: "c",
            topic: "topic-0",
            partition: 0,
        })
        .unwrap();
    let engine = engine;
    let memory = engine.memory();
    let points = engine.evaluate_partition(first, now).history_points;
    eprintln!("history points per partition: {points}");
    eprintln!(
        "memory: {} partitions, {} bytes each; {} group-partitions, {} bytes each",
        memory.partitions,
        memory.partition_bytes / memory.partitions,
        memory.group_partitions,
        memory.group_partition_bytes / memory.group_partitions,
    );
    let mut group = c.benchmark_group("evaluate");
    group.throughput(Throughput::Elements(gps.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    group.bench_function(BenchmarkId::new("lag_and_health", gps.len()), |b| {
        b.iter(|| {
            let mut total = 0i64;
            for &id in &gps {
                let r = engine.evaluate(id, now);
                total += r.lag_messages.unwrap_or(0) + r.status as i64;
            }
            black_box(total)
        });
    });
    group.finish();
}

criterion_group!(benches, ingest, evaluate);
criterion_main!(benches);
