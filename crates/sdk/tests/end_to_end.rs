//! Instrumented producer -> mock cluster -> instrumented consumer -> a running
//! collector: the API shows the group's lag and the pathway, and the consumer's
//! trace continues the producer's.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use rdkafka::consumer::CommitMode;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::FutureRecord;
use rdkafka::{ClientConfig, Message};
use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_collector::{ServeConfig, serve};
use streamsight_core::EngineConfig;
use streamsight_sdk::{Sdk, SdkConfig, TraceContext};
use streamsight_testkit::eventually;

const PRODUCED: i64 = 20;
const CONSUMED: i64 = 8;

async fn start_collector() -> streamsight_collector::Running {
    let config = ServeConfig {
        intake_listen: "127.0.0.1:0".parse().unwrap(),
        api_listen: "127.0.0.1:0".parse().unwrap(),
        storage: "memory://".into(),
        ..ServeConfig::ephemeral()
    };
    serve(config, EngineConfig::default()).await.unwrap()
}

fn sdk_config(service: &str, intake: &str) -> SdkConfig {
    SdkConfig {
        collector_url: intake.to_owned(),
        flush_interval: Duration::from_millis(500),
        env: "test".into(),
        ..SdkConfig::new(service)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producer_to_consumer_to_collector() {
    let collector = start_collector().await;
    let intake = format!("http://{}", collector.intake_addr);
    let api = format!("http://{}", collector.api_addr);

    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();

    // The application's own trace, which the producer must continue.
    let app_trace = TraceContext::new_root();
    let producing = Sdk::start(sdk_config("checkout", &intake));
    let producer = producing
        .future_producer(ClientConfig::new().set("bootstrap.servers", &bootstrap))
        .unwrap();
    for i in 0..PRODUCED {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "app",
                value: Some("kept"),
            })
            .insert(Header {
                key: "traceparent",
                value: Some(&app_trace.to_traceparent()),
            });
        let payload = format!("order-{i}");
        let record = FutureRecord::to("orders").key("k").payload(&payload).headers(headers);
        producer.send(record, Duration::from_secs(10), None).await.unwrap();
    }

    let consuming = Sdk::start(sdk_config("billing", &intake));
    let consumer = consuming
        .stream_consumer(
            ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "billing")
                .set("auto.offset.reset", "earliest")
                .set("enable.auto.commit", "false"),
        )
        .unwrap();
    consumer.subscribe(&["orders"]).unwrap();
    for _ in 0..CONSUMED {
        let (msg, ctx) = tokio::time::timeout(Duration::from_secs(30), consumer.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            ctx.trace.trace_id, app_trace.trace_id,
            "the consumer continues the producer's trace"
        );
        let app_header = rdkafka::message::Headers::iter(msg.headers().unwrap()).find(|h| h.key == "app");
        assert_eq!(
            app_header.and_then(|h| h.value),
            Some(&b"kept"[..]),
            "caller headers are kept"
        );
        consumer.commit_message(&msg, CommitMode::Sync).unwrap();
    }
    assert_eq!(consuming.telemetry().counters().commits_tracked, CONSUMED as u64);
    producing.shutdown();
    consuming.shutdown();
    assert_eq!(producing.telemetry().last_error(), None);
    assert_eq!(consuming.telemetry().last_error(), None);

    let client = reqwest::Client::new();
    let get = async |url: String| -> Value { client.get(url).send().await.unwrap().json().await.unwrap() };
    let row = eventually(30, "the group's lag", async || {
        let lag = get(format!("{api}/api/v1/lag?group=billing")).await;
        let row = lag["rows"].as_array()?.first()?.clone();
        (row["committed_offset"] == CONSUMED && row["end_offset"] == PRODUCED).then_some(row)
    })
    .await;
    assert_eq!(row["lag_messages"], PRODUCED - CONSUMED, "{row}");
    assert_eq!(row["topic"], "orders");

    let graph = get(format!("{api}/api/v1/pathways?window_seconds=600")).await;
    let edges: Vec<(&str, &str)> = graph["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from"].as_str().unwrap(), e["to"].as_str().unwrap()))
        .collect();
    assert!(edges.contains(&("service:checkout", "topic:orders")), "{graph}");
    assert!(edges.contains(&("topic:orders", "service:billing")), "{graph}");
    let consume = graph["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["to"] == "service:billing")
        .unwrap();
    assert_eq!(consume["count"], CONSUMED as f64, "{consume}");
}

#[test]
fn auto_commit_is_tracked_from_the_commit_callback() {
    use streamsight_sdk::Telemetry;
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("events", 1, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let producer: rdkafka::producer::BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    for _ in 0..5 {
        producer
            .send(rdkafka::producer::BaseRecord::to("events").key("k").payload("e"))
            .unwrap();
    }
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(10)).unwrap();

    let telemetry = Telemetry::unshipped(SdkConfig::new("auditor"));
    let consumer = Sdk::with_telemetry(telemetry.clone())
        .base_consumer(
            ClientConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("group.id", "audit")
                .set("auto.offset.reset", "earliest")
                .set("enable.auto.commit", "true")
                .set("auto.commit.interval.ms", "100"),
        )
        .unwrap();
    consumer.subscribe(&["events"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = 0;
    while seen < 5 || telemetry.counters().commits_tracked == 0 {
        assert!(Instant::now() < deadline, "no auto-commit tracked ({seen} consumed)");
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(100)) {
            seen += 1;
        }
    }
    let payload = telemetry.take_payload().unwrap();
    let commit = payload
        .stats
        .iter()
        .flat_map(|b| &b.backlogs)
        .find(|b| b.tags.iter().any(|t| t == "type:kafka_commit"))
        .unwrap();
    assert!(commit.tags.contains(&"consumer_group:audit".to_owned()), "{commit:?}");
    assert!(commit.value > 0 && commit.value <= 5, "{commit:?}");
}

/// Through an SDK reporting to `collector`, on a mock cluster: one send
/// that succeeds, one the broker rejects, then `then_ok` more that succeed,
/// and a shutdown (one last flush). The cluster, and a producer's config for it.
async fn a_failure_among_successes(
    collector: &streamsight_collector::Running,
    then_ok: usize,
) -> (
    MockCluster<'static, rdkafka::producer::DefaultProducerContext>,
    ClientConfig,
) {
    use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("payments", 1, 1).unwrap();
    let config = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("message.send.max.retries", "0")
        .clone();
    let sdk = Sdk::start(sdk_config("checkout", &format!("http://{}", collector.intake_addr)));
    let producer = sdk.future_producer(&config).unwrap();
    let send = async |p: &str| {
        producer
            .send(
                FutureRecord::to("payments").key("k").payload(p),
                Duration::from_secs(10),
                None,
            )
            .await
    };
    send("ok").await.unwrap();
    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    assert!(send("rejected").await.is_err());
    for _ in 0..then_ok {
        send("ok again").await.unwrap();
    }
    sdk.shutdown();
    assert_eq!(sdk.telemetry().last_error(), None);
    (cluster, config)
}

/// The collector's `payments` partition 0 once its produce offset is `offset`.
async fn payments_at(api: &str, offset: i64) -> Value {
    let client = reqwest::Client::new();
    eventually(30, "the partition's state", async || {
        let v = streamsight_testkit::http::get_json(&client, &format!("{api}/api/v1/partitions")).await;
        v["partitions"]
            .as_array()?
            .iter()
            .find(|p| p["topic"] == "payments" && p["produce_offset"] == offset)
            .cloned()
    })
    .await
}

/// Failed sends the collector was told of.
async fn failed_send_reports(api: &str) -> Value {
    let intake = streamsight_testkit::http::get_json(&reqwest::Client::new(), &format!("{api}/api/v1/intake")).await;
    intake["intake"]["failed_send_reports"].clone()
}

/// Seven sends that succeed after a failure, all in one flush: the SDK says
/// which came last, so the partition is not left `producer_failing` (which
/// holds only until a send succeeds), and the failure is still counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_that_succeed_after_a_failure_in_one_flush_clear_producer_failing() {
    let collector = start_collector().await;
    let _cluster = a_failure_among_successes(&collector, 7).await;
    let api = format!("http://{}", collector.api_addr);
    let partition = payments_at(&api, 7).await;
    assert_eq!(partition["producer_failing"], false, "{partition}");
    assert_eq!(failed_send_reports(&api).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_sends_reach_the_collector_and_a_dead_collector_costs_only_telemetry() {
    let collector = start_collector().await;
    let (_cluster, config) = a_failure_among_successes(&collector, 0).await;
    let api = format!("http://{}", collector.api_addr);
    let partition = payments_at(&api, 0).await;
    assert_eq!(partition["producer_failing"], true, "{partition}");
    assert_eq!(failed_send_reports(&api).await, 1);

    // Nothing listens on port 1: the application's sends go on, telemetry is lost and counted.
    let dead = Sdk::start(SdkConfig {
        collector_url: "http://127.0.0.1:1".into(),
        ..SdkConfig::new("checkout")
    });
    let producer = dead.future_producer(&config).unwrap();
    let delivered = producer
        .send(
            FutureRecord::to("payments").key("k").payload("still"),
            Duration::from_secs(10),
            None,
        )
        .await;
    assert!(delivered.is_ok());
    assert!(!dead.telemetry().flush());
    assert_eq!(dead.telemetry().counters().payloads_lost, 1);
    assert!(
        dead.telemetry()
            .last_error()
            .unwrap()
            .contains("cannot reach the collector")
    );
}
