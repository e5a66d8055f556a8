//! Drop accounting end to end, one test per cause, each with an exact count:
//! instrumented producer -> librdkafka's mock cluster -> instrumented consumer ->
//! a running collector, whose `/api/v1/deliveries` says where every missing
//! message went.
//!
//! Records carry timestamps two minutes old: their one-minute window has closed
//! and settled, so it is reconciled as soon as the group has caught up past it,
//! and the five-minute grace period is far: nothing waits on the clock.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureRecord};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_collector::{Running, ServeConfig, serve};
use streamsight_core::{EndOffsetSource, EngineConfig, Millis};
use streamsight_core::{Observation, PartitionRef, Record};
use streamsight_sdk::{Outcome, Sdk, SdkConfig, TracedBaseConsumer, TracedFutureProducer};

const TOPIC: &str = "orders";

struct Pipeline {
    collector: Running,
    cluster: MockCluster<'static, DefaultProducerContext>,
    producing: Sdk,
    consuming: Sdk,
    producer: TracedFutureProducer,
    consumer: TracedBaseConsumer,
    /// The records' timestamp: two minutes ago, one window for all.
    timestamp: i64,
}

use streamsight_testkit::now_ms;

async fn pipeline() -> Pipeline {
    let config = ServeConfig {
        intake_listen: "127.0.0.1:0".parse().unwrap(),
        api_listen: "127.0.0.1:0".parse().unwrap(),
        storage: "memory://".into(),
        history_interval: Duration::from_millis(100),
        ..ServeConfig::ephemeral()
    };
    let collector = serve(config, EngineConfig::default()).await.unwrap();
    let intake = format!("http://{}", collector.intake_addr);
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic(TOPIC, 1, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let sdk = |service: &str| {
        Sdk::start(SdkConfig {
            collector_url: intake.clone(),
            // Flushed by hand, so that the test decides what the collector has seen.
            flush_interval: Duration::from_secs(3600),
            kafka_cluster_id: Some("mock".into()),
            ..SdkConfig::new(service)
        })
    };
    let (producing, consuming) = (sdk("checkout"), sdk("billing"));
    let producer = producing
        .future_producer(
            ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("message.max.bytes", "100000"),
        )
        .unwrap();
    let consumer = consuming
        .base_consumer(
            ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "billing")
                .set("enable.auto.commit", "false"),
        )
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(TOPIC, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let t = now_ms() - 120_000;
    let timestamp = t - t.rem_euclid(60_000) + 1_000;
    Pipeline {
        collector,
        cluster,
        producing,
        consuming,
        producer,
        consumer,
        timestamp,
    }
}

impl Pipeline {
    /// Sends `n` records; returns how many the broker acknowledged.
    async fn produce(&self, n: usize) -> usize {
        let mut acked = 0;
        for i in 0..n {
            let payload = format!("order-{i}");
            let record = FutureRecord::<(), _>::to(TOPIC)
                .partition(0)
                .payload(&payload)
                .timestamp(self.timestamp);
            acked += usize::from(self.producer.send(record, Duration::from_secs(5), None).await.is_ok());
        }
        acked
    }

    /// Reads records until offset `until` (inclusive), marking each with `outcome`.
    fn consume_until(&self, until: i64, outcome: impl Fn(i64) -> Outcome) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "never read offset {until}");
            let Some(Ok((msg, _ctx))) = self.consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            self.consumer.mark(&msg, outcome(msg.offset()));
            if msg.offset() == until {
                return;
            }
        }
    }

    fn seek(&self, offset: i64) {
        self.consumer
            .untracked()
            .seek(TOPIC, 0, Offset::Offset(offset), Duration::from_secs(5))
            .unwrap();
    }

    fn commit(&self, next: i64) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(TOPIC, 0, Offset::Offset(next)).unwrap();
        self.consumer.commit(&tpl, CommitMode::Sync).unwrap();
    }

    fn flush(&self) {
        assert!(
            self.producing.telemetry().flush(),
            "{:?}",
            self.producing.telemetry().last_error()
        );
        assert!(
            self.consuming.telemetry().flush(),
            "{:?}",
            self.consuming.telemetry().last_error()
        );
    }

    /// The reconciled window of group billing, once there is one.
    async fn window(&self) -> Value {
        let api = format!("http://{}/api/v1/deliveries?group=billing", self.collector.api_addr);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let body: Value = reqwest::get(&api).await.unwrap().json().await.unwrap();
            if let Some(w) = body["windows"].as_array().and_then(|w| w.first()) {
                return w.clone();
            }
            assert!(Instant::now() < deadline, "no window reconciled: {body:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn causes(w: &Value) -> [u64; 6] {
    [
        "never_reached_kafka",
        "expired_by_retention",
        "skipped",
        "failed_in_processing",
        "dead_lettered",
        "unexplained",
    ]
    .map(|c| w["missing"][c].as_u64().unwrap())
}

fn counts(w: &Value) -> [u64; 5] {
    ["sent", "acked", "received", "delivered", "duplicates"].map(|c| w[c].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sends_never_reached_kafka() {
    let p = pipeline().await;
    assert_eq!(p.produce(10).await, 10);
    p.cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE; 3],
    );
    assert_eq!(p.produce(3).await, 0);
    p.consume_until(9, |_| Outcome::Processed);
    p.commit(10);
    p.flush();
    let w = p.window().await;
    assert_eq!(counts(&w), [13, 10, 10, 10, 0], "{w:#}");
    assert_eq!(causes(&w), [3, 0, 0, 0, 0, 0], "{w:#}");
    assert_eq!(
        w["trace_ids"].as_array().unwrap().len(),
        3,
        "the failed records can be followed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_offset_jump_is_skipped_messages() {
    let p = pipeline().await;
    p.produce(10).await;
    p.consume_until(2, |_| Outcome::Processed);
    // An offset reset forward (a seek, or auto.offset.reset=latest) jumps 3..=6.
    p.seek(7);
    p.consume_until(9, |_| Outcome::Processed);
    p.commit(10);
    p.flush();
    let w = p.window().await;
    assert_eq!(counts(&w), [10, 10, 6, 6, 0], "{w:#}");
    assert_eq!(causes(&w), [0, 0, 4, 0, 0, 0], "{w:#}");
    assert_eq!(w["skipped_ranges"], serde_json::json!([[3, 6]]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processing_failures_and_dead_letters_are_not_deliveries() {
    let p = pipeline().await;
    p.produce(10).await;
    p.consume_until(9, |o| match o {
        2 | 5 => Outcome::Failed,
        7..=9 => Outcome::DeadLettered,
        _ => Outcome::Processed,
    });
    p.commit(10);
    p.flush();
    let w = p.window().await;
    assert_eq!(counts(&w), [10, 10, 10, 5, 0], "{w:#}");
    assert_eq!(causes(&w), [0, 0, 0, 2, 3, 0], "{w:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_passing_the_group_is_expiry_not_a_skip() {
    let p = pipeline().await;
    p.produce(10).await;
    p.consume_until(3, |_| Outcome::Processed);
    p.commit(4);
    p.flush();
    // The broker's evidence: the log now starts at 8 (the mock cannot delete
    // records; this is what a poller would report).
    let shared = &p.collector.shared;
    let deadline = Instant::now() + Duration::from_secs(30);
    while streamsight_collector::deliveries::committed(&shared.lag.engine(), "mock", "billing", TOPIC, 0) != Some(4) {
        assert!(Instant::now() < deadline, "commit 4 never reached the collector");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let evidence = |kind: Observation<'_>| Record::Observation {
        at: Millis(now_ms()),
        observation: kind.to_owned(),
    };
    let partition = PartitionRef {
        cluster: "mock",
        topic: TOPIC,
        partition: 0,
    };
    shared.apply(&[
        evidence(Observation::EndOffset {
            partition,
            offset: 10,
            source: EndOffsetSource::Broker,
        }),
        evidence(Observation::LogStart { partition, offset: 8 }),
    ]);
    // The consumer's reset after OFFSET_OUT_OF_RANGE lands on the new log start.
    p.seek(8);
    p.consume_until(9, |_| Outcome::Processed);
    p.commit(10);
    p.flush();
    let w = p.window().await;
    assert_eq!(counts(&w), [10, 10, 6, 6, 0], "{w:#}");
    assert_eq!(causes(&w), [0, 4, 0, 0, 0, 0], "{w:#}");
    assert_eq!(w["expired_ranges"], serde_json::json!([[4, 7]]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_rewinds_reads_duplicates() {
    let p = pipeline().await;
    p.produce(10).await;
    p.consume_until(9, |_| Outcome::Processed);
    p.seek(5);
    p.consume_until(9, |_| Outcome::Processed);
    p.commit(10);
    p.flush();
    let w = p.window().await;
    assert_eq!(counts(&w), [10, 10, 15, 15, 5], "{w:#}");
    assert_eq!(causes(&w), [0, 0, 0, 0, 0, 0], "{w:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_window_and_the_metrics_by_cause() {
    let p = pipeline().await;
    p.produce(10).await;
    p.consume_until(9, |_| Outcome::Processed);
    p.commit(10);
    // Nothing is missing, but the metric families are there with every cause.
    p.flush();
    let w = p.window().await;
    assert_eq!(causes(&w), [0; 6]);
    let metrics = reqwest::get(format!("http://{}/metrics", p.collector.api_addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let labels = "cluster_name=\"mock\",group=\"billing\",topic=\"orders\"";
    assert!(
        metrics.contains(&format!("streamsight_messages_sent_total{{{labels}}} 10")),
        "{metrics}"
    );
    assert!(metrics.contains(&format!("streamsight_messages_delivered_total{{{labels}}} 10")));
    assert!(metrics.contains(&format!(
        "streamsight_messages_missing_total{{{labels},cause=\"unexplained\"}} 0"
    )));
}

/// Retention deleting what a group had not read, on Apache Kafka: the SDK's
/// reports carry the broker's own cluster id, which the collector joins to
/// the cluster it polls (named `kafka` here), and the log start the poller
/// reads after a real DeleteRecords makes the unread records
/// `expired_by_retention`, exactly, never skipped nor unexplained.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_on_apache_kafka_is_expiry_counted_exactly() {
    use streamsight_testkit::ApacheKafka;
    use streamsight_testkit::apache_kafka::unique;
    let kafka = ApacheKafka::shared();
    let bootstrap = kafka.bootstrap.clone();
    let (topic, group) = (unique("orders"), unique("billing"));
    let admin: rdkafka::admin::AdminClient<rdkafka::client::DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let opts = rdkafka::admin::AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let new = rdkafka::admin::NewTopic::new(&topic, 1, rdkafka::admin::TopicReplication::Fixed(1));
    for r in admin.create_topics([&new], &opts).await.unwrap() {
        r.unwrap();
    }
    let mut cluster = streamsight_poller::ClusterConfig::new("kafka", &bootstrap);
    cluster.poll_interval = Duration::from_millis(300);
    let config = ServeConfig {
        intake_listen: "127.0.0.1:0".parse().unwrap(),
        api_listen: "127.0.0.1:0".parse().unwrap(),
        storage: "memory://".into(),
        history_interval: Duration::from_millis(100),
        clusters: vec![cluster],
        ..ServeConfig::ephemeral()
    };
    let collector = serve(config, EngineConfig::default()).await.unwrap();
    let api = format!("http://{}", collector.api_addr);
    // The broker's cluster id, as the poller read it: what a tracer sends.
    let deadline = Instant::now() + Duration::from_secs(60);
    let cluster_id = loop {
        let body: Value = reqwest::get(format!("{api}/api/v1/clusters"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if let Some(id) = body["clusters"]["kafka"]["poller"]["cluster_id"].as_str() {
            break id.to_owned();
        }
        assert!(Instant::now() < deadline, "no cluster id polled: {body:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let sdk = |service: &str| {
        Sdk::start(SdkConfig {
            collector_url: format!("http://{}", collector.intake_addr),
            flush_interval: Duration::from_secs(3600),
            kafka_cluster_id: Some(cluster_id.clone()),
            ..SdkConfig::new(service)
        })
    };
    let (producing, consuming) = (sdk("checkout"), sdk("billing"));
    let producer = producing
        .future_producer(ClientConfig::new().set("bootstrap.servers", &bootstrap))
        .unwrap();
    let consumer = consuming
        .base_consumer(
            ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", &group)
                .set("enable.auto.commit", "false")
                .set("auto.offset.reset", "earliest"),
        )
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(&topic, 0, Offset::Beginning).unwrap();
    consumer.assign(&tpl).unwrap();
    let t = now_ms() - 120_000;
    let timestamp = t - t.rem_euclid(60_000) + 1_000;
    for i in 0..10 {
        let payload = format!("order-{i}");
        let record = FutureRecord::<(), _>::to(&topic)
            .partition(0)
            .payload(&payload)
            .timestamp(timestamp);
        producer.send(record, Duration::from_secs(5), None).await.unwrap();
    }
    let consume_until = |until: i64| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            assert!(Instant::now() < deadline, "never read offset {until}");
            let Some(Ok((msg, _ctx))) = consumer.poll(Duration::from_millis(100)) else {
                continue;
            };
            consumer.mark(&msg, Outcome::Processed);
            if msg.offset() == until {
                return;
            }
        }
    };
    let commit = |next: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&topic, 0, Offset::Offset(next)).unwrap();
        consumer.commit(&tpl, CommitMode::Sync).unwrap();
    };
    let flush = || {
        assert!(
            producing.telemetry().flush(),
            "{:?}",
            producing.telemetry().last_error()
        );
        assert!(
            consuming.telemetry().flush(),
            "{:?}",
            consuming.telemetry().last_error()
        );
    };
    consume_until(3);
    commit(4);
    flush();
    // The group's commit at 4 polled, then records 4 to 7 deleted unread.
    let lag_url = format!("{api}/api/v1/groups/kafka/{group}");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Value = reqwest::get(&lag_url).await.unwrap().json().await.unwrap();
        if v["partitions"][0]["lag"]["committed_offset"] == 4 {
            break;
        }
        assert!(Instant::now() < deadline, "commit 4 never polled: {v:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut cut = TopicPartitionList::new();
    cut.add_partition_offset(&topic, 0, Offset::Offset(8)).unwrap();
    admin.delete_records(&cut, &opts).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v: Value = reqwest::get(&lag_url).await.unwrap().json().await.unwrap();
        if v["partitions"][0]["lag"]["log_start_offset"] == 8 {
            break;
        }
        assert!(Instant::now() < deadline, "log start 8 never polled: {v:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The consumer's position is gone: it resets to the new log start.
    consumer
        .untracked()
        .seek(&topic, 0, Offset::Offset(8), Duration::from_secs(5))
        .unwrap();
    consume_until(9);
    commit(10);
    flush();
    let url = format!("{api}/api/v1/deliveries?group={group}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let w = loop {
        let body: Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        if let Some(w) = body["windows"].as_array().and_then(|w| w.first())
            && w["missing"]["expired_by_retention"] == 4
        {
            break w.clone();
        }
        assert!(Instant::now() < deadline, "no window with the expiry: {body:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(counts(&w), [10, 10, 6, 6, 0], "{w:#}");
    assert_eq!(causes(&w), [0, 4, 0, 0, 0, 0], "{w:#}");
    assert_eq!(w["expired_ranges"], serde_json::json!([[4, 7]]), "{w:#}");
    assert_eq!(
        w["cluster"], "kafka",
        "the tracer's cluster id joined to the polled cluster's name: {w:#}"
    );
}
