//! One poll cycle over 20,000 partitions and 1,000 groups (issue 5's size):
//! requests sent, time, memory. Against tansu (an outside broker that lists
//! groups and fetches all of a group's offsets in one go), started here. Every
//! group lags by one record on every partition, so the first cycles also read
//! the record times at the committed offsets (2,000 a cycle, cached after):
//! such a cycle is measured beside a steady one.
//!
//! `cargo bench -p streamsight-poller --bench poll` (needs tansu: scripts/test
//! installs it at .tools/tansu, or set STREAMSIGHT_TANSU).
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use std::alloc::System;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use streamsight_core::{Engine, EngineConfig, Millis};
use streamsight_poller::{ClusterClient, ClusterConfig, Tracker};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const TOPICS: usize = 200;
const PARTITIONS: i32 = 100;
const GROUPS: usize = 1_000;

fn populate(rt: &tokio::runtime::Runtime, bootstrap: &str) {
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .unwrap();
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("topic-{i:03}")).collect();
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| NewTopic::new(t, PARTITIONS, TopicReplication::Fixed(1)))
        .collect();
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
    for r in rt.block_on(admin.create_topics(&new, &opts)).unwrap() {
        r.unwrap();
    }
    // Two records on every partition, one batch each (tansu's memory engine
    // answers a high watermark of the last batch's base offset + 1): the groups'
    // commits at 1 lag by one, at a record whose time a poll reads.
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "0")
        .set("batch.num.messages", "1")
        .set("queue.buffering.max.messages", "100000")
        .create()
        .unwrap();
    for _ in 0..2 {
        let sends = topics.iter().flat_map(|t| {
            let producer = &producer;
            (0..PARTITIONS).map(move |p| async move {
                let record = FutureRecord::<(), _>::to(t).partition(p).payload("record");
                producer.send(record, Duration::from_secs(60)).await.unwrap();
            })
        });
        rt.block_on(futures_util::future::join_all(sends));
    }
    // Each group commits on every partition of one topic: 100,000 group-partitions.
    std::thread::scope(|s| {
        for worker in 0..8 {
            let topics = &topics;
            s.spawn(move || {
                for g in (worker..GROUPS).step_by(8) {
                    let consumer: BaseConsumer = ClientConfig::new()
                        .set("bootstrap.servers", bootstrap)
                        .set("group.id", format!("group-{g:04}"))
                        .create()
                        .unwrap();
                    let mut tpl = TopicPartitionList::new();
                    for p in 0..PARTITIONS {
                        tpl.add_partition_offset(&topics[g % TOPICS], p, Offset::Offset(1))
                            .unwrap();
                    }
                    consumer.commit(&tpl, CommitMode::Sync).unwrap();
                }
            });
        }
    });
}

/// One poll cycle that read record times: what it cost.
struct Cycle {
    took: Duration,
    requests: u64,
    allocated: usize,
    batches: usize,
}

fn poll_cycle(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let broker = streamsight_testkit::Tansu::start();
    let bootstrap = broker.bootstrap.clone();
    populate(&rt, &bootstrap);
    let none = BTreeSet::new();
    let mut client = ClusterClient::new(ClusterConfig::new("bench", &bootstrap));

    // The first poll connects and finds coordinators; the next ones read the
    // record times at the lagging commits (2,000 a cycle) until every one is
    // cached; then the steady state.
    let first = rt.block_on(client.poll(Millis(0), &none));
    let mut reading: Vec<Cycle> = Vec::new();
    let mut at = 1_000;
    loop {
        let region = Region::new(GLOBAL);
        let started = Instant::now();
        let snap = rt.block_on(client.poll(Millis(at), &none));
        let took = started.elapsed();
        let allocated = region.change().bytes_allocated;
        at += 1_000;
        if snap.batches.is_empty() {
            break;
        }
        reading.push(Cycle {
            took,
            requests: snap.requests,
            allocated,
            batches: snap.batches.len(),
        });
    }
    assert!(
        reading.len() >= 9,
        "20,000 offsets, 2,000 a cycle: {} cycles",
        reading.len()
    );
    let n = reading.len() as f64;
    let mean = |f: &dyn Fn(&Cycle) -> f64| reading.iter().map(f).sum::<f64>() / n;
    println!(
        "record-time cycles: {} of them, {:.0} batches read a cycle, {:.1} requests, {:.0} ms, {:.1} MB allocated (mean)",
        reading.len(),
        mean(&|r| r.batches as f64),
        mean(&|r| r.requests as f64),
        mean(&|r| r.took.as_secs_f64() * 1000.0),
        mean(&|r| r.allocated as f64 / 1e6),
    );
    let region = Region::new(GLOBAL);
    let started = Instant::now();
    let snap = rt.block_on(client.poll(Millis(at), &none));
    let took = started.elapsed();
    let stats = region.change();
    let offsets: usize = snap.groups.iter().map(|g| g.offsets.len()).sum();
    assert_eq!(
        snap.partition_count(),
        TOPICS * PARTITIONS as usize,
        "{:?}",
        snap.errors
    );
    assert_eq!(snap.groups.len(), GROUPS, "{:?}", snap.errors);
    assert_eq!(offsets, GROUPS * PARTITIONS as usize);
    let mut tracker = Tracker::new("bench", Duration::from_secs(600));
    let mut engine = Engine::new(EngineConfig::default()).unwrap();
    let update = tracker.update(&snap);
    for r in update.durable.iter().chain(&update.transient) {
        r.apply(&mut engine);
    }
    let memory = engine.memory();
    println!(
        "poll cycle: {} partitions, {} groups, {} committed offsets; first poll {} requests, steady poll {} requests \
         in {:.0} ms; allocated during the poll {:.1} MB, held after it {:.1} MB (snapshot and connections); \
         engine afterwards {:.1} MB",
        snap.partition_count(),
        snap.groups.len(),
        offsets,
        first.requests,
        snap.requests,
        took.as_secs_f64() * 1000.0,
        stats.bytes_allocated as f64 / 1e6,
        (stats.bytes_allocated as f64 - stats.bytes_deallocated as f64) / 1e6,
        (memory.partition_bytes + memory.group_partition_bytes) as f64 / 1e6,
    );

    // This process's CPU for a poll, apart from the broker's (tansu shares the machine).
    let cpu_before = cpu_seconds();
    let rounds = 10;
    for i in 0..rounds {
        rt.block_on(client.poll(Millis(at + 5_000 + i), &none));
    }
    println!(
        "poller CPU per cycle: {:.0} ms (user+system of this process, /proc/self/stat, {rounds} cycles)",
        (cpu_seconds() - cpu_before) * 1000.0 / rounds as f64
    );

    let mut group = c.benchmark_group("poll");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(20));
    let mut at = at + 20_000;
    group.bench_function("cycle_20k_partitions_1k_groups", |b| {
        b.iter(|| {
            at += 10_000;
            rt.block_on(client.poll(Millis(at), &none))
        });
    });
    // The tracker's and the engine's share of a cycle, on the same snapshot.
    group.bench_function("track_and_apply_20k_partitions_1k_groups", |b| {
        b.iter(|| {
            at += 10_000;
            let mut s = snap.clone();
            s.at = Millis(at);
            let update = tracker.update(&s);
            for r in update.durable.iter().chain(&update.transient) {
                r.apply(&mut engine);
            }
            update.transient.len()
        });
    });
    group.finish();
}

/// User and system CPU time of this process, from /proc/self/stat (clock ticks).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are 14 and 15.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

criterion_group!(benches, poll_cycle);
criterion_main!(benches);
