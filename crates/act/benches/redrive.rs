//! Dead-letter redrive's throughput (issue 31) against the broker's own
//! produce rate for the same records, in one run, against tansu started here
//! (its memory engine: its sqlite engine's fetches slow down as the database
//! grows, which would measure tansu): 10,000 dead letters of 1 KiB with
//! provenance headers, written one a batch (the memory engine's high watermark
//! is a batch's base + 1, and a redrive reads to it).
//!
//! - `produce`: the records produced by an idempotent producer (acks=all),
//!   all in flight at once: what the broker takes.
//! - `dry_run`: the plan, one read of the DLQ: what the broker's fetches cost.
//! - `redrive`: a whole run (the in-flight check, one read of the DLQ, each
//!   batch claimed in and recorded to the log, here a node on `memory://`) at
//!   the highest rate it may be asked.
//!
//! `cargo bench -p streamsight-act --bench redrive` (needs tansu:
//! scripts/test installs it at .tools/tansu, or set STREAMSIGHT_TANSU).
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rdkafka::ClientConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::sync::Arc;
use std::time::{Duration, Instant};
use streamsight_act::redrive::{self, MAX_RATE, Selection};
use streamsight_core::redrive::DlqTopic;
use streamsight_core::{EngineConfig, Millis};
use streamsight_node::{ServeConfig, Shared, Writer};
use streamsight_poller::ClusterConfig;
use streamsight_testkit::Tansu;
use streamsight_wire::dlq::{Conventions, Provenance};

const LETTERS: usize = 10_000;
const VALUE_BYTES: usize = 1_024;

fn headers(i: usize) -> OwnedHeaders {
    let provenance = Provenance {
        source_topic: Some("orders".into()),
        source_partition: Some((i % 4) as i32),
        source_offset: Some(i as i64),
        consumer_group: Some("billing".into()),
        stage: Some("processing".into()),
        error_class: Some("ValueError".into()),
        error_message: Some("card declined".into()),
        ..Provenance::default()
    };
    let mut h = OwnedHeaders::new().insert(Header {
        key: "traceparent",
        value: Some(b"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".as_slice()),
    });
    for (k, v) in provenance.headers(Conventions::default()) {
        h = h.insert(Header {
            key: k,
            value: Some(v.as_slice()),
        });
    }
    h
}

/// Sends every record at once and waits for them all: (seconds).
async fn produce(producer: &FutureProducer, topic: &str) -> f64 {
    let value = vec![b'x'; VALUE_BYTES];
    let started = Instant::now();
    let sends = (0..LETTERS).map(|i| {
        let (producer, value) = (producer.clone(), value.clone());
        let topic = topic.to_owned();
        async move {
            let key = format!("order-{i}");
            let record = FutureRecord::to(&topic).key(&key).payload(&value).headers(headers(i));
            producer.send(record, Duration::from_secs(60)).await.unwrap();
        }
    });
    futures_util::future::join_all(sends).await;
    started.elapsed().as_secs_f64()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let broker = Tansu::start();
    let b = broker.bootstrap.clone();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("enable.idempotence", "true")
        .set("acks", "all")
        .create()
        .unwrap();
    runtime.block_on(async {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &b).create().unwrap();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
        let topics = [("orders.dlq", 1), ("orders", 4), ("baseline", 4)]
            .map(|(t, n)| NewTopic::new(t, n, TopicReplication::Fixed(1)));
        for r in admin.create_topics(&topics, &opts).await.unwrap() {
            r.unwrap();
        }
        let one_a_batch: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &b)
            .set("linger.ms", "0")
            .create()
            .unwrap();
        let value = vec![b'x'; VALUE_BYTES];
        for i in 0..LETTERS {
            let key = format!("order-{i}");
            let record = FutureRecord::to("orders.dlq")
                .key(&key)
                .payload(&value)
                .headers(headers(i));
            one_a_batch.send(record, Duration::from_secs(60)).await.unwrap();
        }
    });
    let cluster = ClusterConfig::new("tansu", &b);
    let selection = Selection {
        rate: Some(MAX_RATE),
        ..Selection::default()
    };
    let mut group = c.benchmark_group("redrive");
    group.throughput(Throughput::Elements(LETTERS as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    let planner = Shared::new(ServeConfig::ephemeral(), EngineConfig::default()).unwrap();
    group.bench_function("dry_run/10000", |bench| {
        bench.iter(|| {
            let plan = redrive::plan(&planner, &cluster, "orders.dlq", &selection).unwrap();
            assert_eq!(plan.to_send, LETTERS as u64);
        });
    });
    group.bench_function("redrive/10000", |bench| {
        bench.iter_custom(|n| {
            let mut total = Duration::ZERO;
            for _ in 0..n {
                // A node of its own each time: its ledger has sent nothing yet.
                let shared = Arc::new(Shared::new(ServeConfig::ephemeral(), EngineConfig::default()).unwrap());
                let writer =
                    Writer::start(streamsight_store::open("memory://").unwrap(), shared.clone(), Millis(0)).unwrap();
                shared.set_writer(writer.clone());
                let handle = runtime.handle().clone();
                let run = redrive::Run {
                    shared: &shared,
                    runtime: &handle,
                    cluster: &cluster,
                    of: DlqTopic {
                        cluster: "tansu".into(),
                        dlq: "orders.dlq".into(),
                    },
                    id: "bench".into(),
                    key: String::new(),
                };
                let status = std::sync::Mutex::new(redrive::Status::default());
                let started = Instant::now();
                redrive::run::execute(&run, &selection, &status).unwrap();
                total += started.elapsed();
                assert_eq!(status.lock().unwrap().counts.sent, LETTERS as u64);
                shared.release_writer();
                drop(writer);
            }
            total
        });
    });
    group.bench_function("produce/10000", |bench| {
        bench.iter_custom(|n| {
            let mut total = 0.0;
            for _ in 0..n {
                total += runtime.block_on(produce(&producer, "baseline"));
            }
            Duration::from_secs_f64(total)
        });
    });
    group.finish();
    drop(broker);
}

criterion_group!(benches, bench);
criterion_main!(benches);
