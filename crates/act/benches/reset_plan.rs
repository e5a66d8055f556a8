//! A reset's dry run over a group of 10,000 partitions (issue 31): the poll of
//! the group, the offsets, and the record batches at both ends of every
//! partition's skip, against tansu started here.
//!
//! `cargo bench -p streamsight-act --bench reset_plan` (needs tansu:
//! scripts/test installs it at .tools/tansu, or set STREAMSIGHT_TANSU).
#![allow(clippy::unwrap_used)]

use criterion::{Criterion, criterion_group, criterion_main};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use std::time::Duration;
use streamsight_act::reset::{self, ResetRequest};
use streamsight_core::Millis;
use streamsight_core::reset::ResetTo;
use streamsight_poller::ClusterConfig;
use streamsight_testkit::Tansu;

const PARTITIONS: i32 = 10_000;

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let broker = Tansu::start();
    let b = broker.bootstrap.clone();
    runtime.block_on(async {
        let admin: AdminClient<DefaultClientContext> =
            ClientConfig::new().set("bootstrap.servers", &b).create().unwrap();
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(60)));
        for r in admin
            .create_topics(&[NewTopic::new("wide", PARTITIONS, TopicReplication::Fixed(1))], &opts)
            .await
            .unwrap()
        {
            r.unwrap();
        }
        // Two records a partition, one a batch: the group skips one of them.
        let producer: FutureProducer = ClientConfig::new()
            .set("bootstrap.servers", &b)
            .set("linger.ms", "0")
            .create()
            .unwrap();
        for round in 0..2 {
            let sends = (0..PARTITIONS).map(|p| {
                let producer = producer.clone();
                async move {
                    let value = format!("{round}");
                    let record = FutureRecord::<(), _>::to("wide").partition(p).payload(&value);
                    producer.send(record, Duration::from_secs(30)).await.unwrap();
                }
            });
            futures_util::future::join_all(sends).await;
        }
    });
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .set("group.id", "wide-readers")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset("wide", p, Offset::Offset(1)).unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
    drop(consumer);

    let config = ClusterConfig::new("tansu", &b);
    let request = ResetRequest {
        group: "wide-readers".into(),
        topics: Vec::new(),
        to: ResetTo::Latest,
    };
    let planned = runtime.block_on(reset::plan(&config, &request, Millis(1))).unwrap();
    let timed = planned
        .plan
        .partitions
        .iter()
        .filter(|p| p.first_time_ms.is_some())
        .count();
    println!(
        "dry run: {} partitions, {} offsets skipped, {timed} with record times",
        planned.plan.partitions.len(),
        planned.plan.skip
    );
    assert_eq!(planned.plan.partitions.len(), PARTITIONS as usize);
    let mut group = c.benchmark_group("reset");
    group.sample_size(10);
    group.bench_function("dry_run/10000_partitions", |bench| {
        bench.iter(|| runtime.block_on(reset::plan(&config, &request, Millis(1))).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
