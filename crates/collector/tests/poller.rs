//! `serve` polling a Kafka cluster (librdkafka's mock) with nobody instrumented:
//! lag over the JSON API and Burrow's API, poller metrics, a stopped broker, and
//! an instrumented producer's points merging with the broker's answers.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde_json::Value;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use streamsight_collector::{ServeConfig, serve};
use streamsight_core::EngineConfig;
use streamsight_poller::ClusterConfig;
use streamsight_wire::dsm::payload::{Backlog, Bucket, Payload, encode};

type Mock = MockCluster<'static, DefaultProducerContext>;

async fn produce(cluster: &Mock, topic: &str, n: usize) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .create()
        .unwrap();
    for _ in 0..n {
        let record = FutureRecord::<(), _>::to(topic).partition(0).payload("x");
        producer.send(record, Duration::from_secs(5)).await.unwrap();
    }
}

fn commit(cluster: &Mock, group: &str, topic: &str, offset: i64) {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", cluster.bootstrap_servers())
        .set("group.id", group)
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Offset(offset)).unwrap();
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

use streamsight_testkit::http::get;

async fn wait_for(client: &reqwest::Client, url: &str, done: impl Fn(&Value) -> bool) -> Value {
    streamsight_testkit::http::wait_for_json(client, url, 30, "the poller's answer", done).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn uninstrumented_groups_get_lag_over_both_apis() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    produce(&cluster, "orders", 10).await;
    commit(&cluster, "billing", "orders", 4);

    let mut polled = ClusterConfig::new("mock", &cluster.bootstrap_servers());
    polled.poll_interval = Duration::from_millis(200);
    polled.request_timeout = Duration::from_secs(1);
    polled.groups = vec!["billing".into()];
    let config = ServeConfig {
        clusters: vec![polled],
        ..support::loopback("memory://")
    };
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();

    let lag = wait_for(&client, &format!("{api}/api/v1/lag?group=billing"), |b| {
        b["rows"].as_array().is_some_and(|r| r.len() == 1)
    })
    .await;
    let row = &lag["rows"][0];
    assert_eq!(
        (row["cluster"].as_str(), row["lag_messages"].as_i64()),
        (Some("mock"), Some(6)),
        "{row:#}"
    );

    // Burrow's API, Burrow's shapes.
    let (code, list) = get(&client, &format!("{api}/v3/kafka")).await;
    assert_eq!((code, list["error"].as_bool()), (200, Some(false)));
    assert_eq!(list["clusters"], serde_json::json!(["mock"]));
    assert_eq!(list["message"], "cluster list returned");
    assert!(list["request"]["url"].is_string());
    let (_, detail) = get(&client, &format!("{api}/v3/kafka/mock")).await;
    assert_eq!(detail["module"]["class-name"], "kafka");
    let (_, consumers) = get(&client, &format!("{api}/v3/kafka/mock/consumer")).await;
    assert_eq!(consumers["consumers"], serde_json::json!(["billing"]));
    let (_, lag) = get(&client, &format!("{api}/v3/kafka/mock/consumer/billing/lag")).await;
    let status = &lag["status"];
    assert_eq!(
        (status["cluster"].as_str(), status["group"].as_str()),
        (Some("mock"), Some("billing"))
    );
    assert_eq!(
        (status["totallag"].as_i64(), status["partition_count"].as_i64()),
        (Some(6), Some(1))
    );
    let p = &status["partitions"][0];
    assert_eq!(
        (p["topic"].as_str(), p["partition"].as_i64(), p["current_lag"].as_i64()),
        (Some("orders"), Some(0), Some(6))
    );
    assert_eq!(p["end"]["offset"].as_i64(), Some(4));
    for key in ["owner", "client_id", "status", "start", "complete"] {
        assert!(p.get(key).is_some(), "partition has no {key}: {p:#}");
    }
    assert_eq!(status["maxlag"]["current_lag"].as_i64(), Some(6));
    assert!(p["streamsight"]["lag_seconds"].is_number() || p["streamsight"]["lag_seconds"].is_null());
    let (_, topics) = get(&client, &format!("{api}/v3/kafka/mock/topic")).await;
    assert_eq!(topics["topics"], serde_json::json!(["orders"]));
    let (_, offsets) = get(&client, &format!("{api}/v3/kafka/mock/topic/orders")).await;
    assert_eq!(offsets["offsets"], serde_json::json!([10]));
    let (code, missing) = get(&client, &format!("{api}/v3/kafka/mock/consumer/nobody/status")).await;
    assert_eq!((code, missing["error"].as_bool()), (404, Some(true)));
    assert_eq!(missing["message"], "cluster or consumer not found");
    let (code, _) = get(&client, &format!("{api}/v3/kafka/elsewhere/topic")).await;
    assert_eq!(code, 404);

    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    assert!(
        metrics.contains("streamsight_poller_polls_total{cluster_name=\"mock\"}"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "kafka_consumergroup_group_lag{cluster_name=\"mock\",group=\"billing\",topic=\"orders\",partition=\"0\"} 6"
    ));

    // An instrumented producer reports into the same cluster. Its ack of offset
    // 11 is beyond what the broker answered (10 records): it is held, and never
    // raises lag above broker truth, until the broker's end reaches it.
    let ns = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
    let payload = Payload {
        env: "prod".into(),
        service: "checkout".into(),
        lang: "rust".into(),
        tracer_version: "1".into(),
        stats: vec![Bucket {
            start: ns - ns % 10_000_000_000,
            duration: 10_000_000_000,
            stats: vec![],
            backlogs: vec![Backlog {
                tags: [
                    "type:kafka_produce",
                    "topic:orders",
                    "partition:0",
                    "kafka_cluster_id:mock",
                ]
                .map(String::from)
                .to_vec(),
                value: 11,
            }],
        }],
        ..Payload::default()
    };
    let intake = format!("http://{}/v0.1/pipeline_stats", running.intake_addr);
    let resp = client
        .post(&intake)
        .header("Content-Type", "application/msgpack")
        .body(encode(&payload))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 202);
    // 202 means applied: the held ack shows nowhere.
    let (_, lag) = get(&client, &format!("{api}/api/v1/lag?group=billing")).await;
    assert_eq!(
        (
            lag["rows"][0]["end_offset"].as_i64(),
            lag["rows"][0]["lag_messages"].as_i64()
        ),
        (Some(10), Some(6)),
        "{lag:#}"
    );
    produce(&cluster, "orders", 2).await;
    let lag = wait_for(&client, &format!("{api}/api/v1/lag?group=billing"), |b| {
        b["rows"][0]["end_offset"] == 12
    })
    .await;
    assert_eq!(
        lag["rows"][0]["lag_messages"].as_i64(),
        Some(8),
        "acked offset 11 means 12 records"
    );

    // The broker stops answering: never ok, never a fresh 0.
    cluster.broker_down(1).unwrap();
    let lag = wait_for(&client, &format!("{api}/api/v1/lag?group=billing"), |b| {
        b["rows"][0]["broker_unreachable"] == true
    })
    .await;
    assert_eq!(lag["rows"][0]["status"], "stale");
    let (_, burrow) = get(&client, &format!("{api}/v3/kafka/mock/consumer/billing/status")).await;
    assert_eq!(burrow["status"]["status"], "WARN");
    // Said as the typed failure, logged and counted in one place.
    streamsight_testkit::eventually(30, "the cluster-unreachable failure counted", async || {
        let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
        let counted =
            streamsight_testkit::http::sample(&metrics, r#"streamsight_failures_total{failure="cluster_unreachable"}"#);
        counted.filter(|&n| n > 0.0)
    })
    .await;
    let (_, down) = get(&client, &format!("{api}/api/v1/lag?group=billing")).await;
    assert_ne!(
        down["rows"][0]["lag_messages"].as_i64(),
        Some(0),
        "down is not caught up: {down:#}"
    );

    // Back: the same poller recovers by itself, with no restart.
    cluster.broker_up(1).unwrap();
    produce(&cluster, "orders", 1).await;
    let lag = wait_for(&client, &format!("{api}/api/v1/lag?group=billing"), |b| {
        b["rows"][0]["broker_unreachable"] == false && b["rows"][0]["end_offset"] == 13
    })
    .await;
    assert_ne!(lag["rows"][0]["status"], "stale", "{lag:#}");
    assert_eq!(lag["rows"][0]["lag_messages"].as_i64(), Some(9), "{lag:#}");
}

/// Between polls an hour apart, the partitions where a group lags are asked
/// again every 200 ms: its commits and the end offset move in the lag API
/// without a poll, and the refreshes are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_group_is_refreshed_between_polls() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    cluster.create_topic("audit", 1, 1).unwrap();
    produce(&cluster, "orders", 10).await;
    produce(&cluster, "audit", 5).await;
    commit(&cluster, "billing", "orders", 2);
    commit(&cluster, "caught-up", "audit", 5);

    let mut polled = ClusterConfig::new("mock", &cluster.bootstrap_servers());
    polled.poll_interval = Duration::from_secs(3600);
    polled.lagging_refresh = Duration::from_millis(200);
    polled.request_timeout = Duration::from_secs(1);
    polled.groups = vec!["billing".into(), "caught-up".into()];
    let config = ServeConfig {
        clusters: vec![polled],
        ..support::loopback("memory://")
    };
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();
    let lag = format!("{api}/api/v1/lag?group=billing");
    wait_for(&client, &lag, |b| b["rows"][0]["lag_messages"] == 8).await;

    commit(&cluster, "billing", "orders", 6);
    let moved = wait_for(&client, &lag, |b| b["rows"][0]["lag_messages"] == 4).await;
    assert_eq!(moved["rows"][0]["committed_offset"].as_i64(), Some(6), "{moved:#}");
    produce(&cluster, "orders", 3).await;
    produce(&cluster, "audit", 2).await;
    let grown = wait_for(&client, &lag, |b| b["rows"][0]["end_offset"] == 13).await;
    assert_eq!(grown["rows"][0]["lag_messages"].as_i64(), Some(7), "{grown:#}");

    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    let sample = |name: &str| streamsight_testkit::http::sample(&metrics, &format!("{name}{{cluster_name=\"mock\"}}"));
    assert_eq!(
        sample("streamsight_poller_polls_total"),
        Some(1.0),
        "one poll, the first"
    );
    assert!(
        sample("streamsight_poller_refreshes_total").is_some_and(|n| n >= 2.0),
        "{metrics}"
    );
    // The group at the end did not lag: its partition is not asked for
    // between polls, and reads as the poll left it.
    let (_, caught_up) = get(&client, &format!("{api}/api/v1/lag?group=caught-up")).await;
    assert_eq!(caught_up["rows"][0]["end_offset"].as_i64(), Some(5), "{caught_up:#}");
}

/// An open transaction (on testkit's broker on kafka-protocol's encodings: no
/// broker here holds the last stable offset) over every surface: the lag API's
/// fields and reason, `/metrics`, and the default `transaction_open` alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_is_in_the_lag_api_metrics_and_the_default_alert() {
    use std::collections::BTreeMap;
    use streamsight_testkit::kafka::{WireBroker, WireCluster, WireGroup, WirePartition};
    let broker = WireBroker::start(WireCluster {
        topics: BTreeMap::from([(
            "payments".to_owned(),
            vec![WirePartition {
                log_start: 0,
                high_watermark: 120,
                last_stable: 100,
            }],
        )]),
        groups: BTreeMap::from([(
            "ledger".to_owned(),
            WireGroup {
                state: "Stable".into(),
                group_type: "classic".into(),
                offsets: BTreeMap::from([(("payments".to_owned(), 0), 100)]),
                ..WireGroup::default()
            },
        )]),
        ..WireCluster::default()
    })
    .await;
    let mut polled = ClusterConfig::new("wire", &broker.addr);
    polled.poll_interval = Duration::from_millis(200);
    polled.request_timeout = Duration::from_secs(1);
    let config = ServeConfig {
        clusters: vec![polled],
        history_interval: Duration::from_millis(200),
        ..support::loopback("memory://")
    };
    let engine = EngineConfig {
        open_transaction_after: Duration::from_secs(1),
        ..EngineConfig::default()
    };
    let running = serve(config, engine).await.unwrap();
    let api = format!("http://{}", running.api_addr);
    let client = reqwest::Client::new();

    let lag = wait_for(&client, &format!("{api}/api/v1/lag?group=ledger"), |b| {
        b["rows"][0]["status"] == "blocked"
    })
    .await;
    let row = &lag["rows"][0];
    assert_eq!(row["last_stable_offset"], 100, "{row:#}");
    assert!(row["open_transaction_since_ms"].as_i64().is_some(), "{row:#}");
    assert_eq!(row["lag_messages"], 20, "{row:#}");
    let alerts = wait_for(&client, &format!("{api}/api/v1/alerts"), |b| {
        b["alerts"].as_array().is_some_and(|a| {
            a.iter()
                .any(|a| a["rule"] == "transaction_open" && a["state"] == "firing")
        })
    })
    .await;
    let alert = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["rule"] == "transaction_open")
        .unwrap();
    assert_eq!(alert["labels"]["partition"], "0", "{alert:#}");
    let metrics = streamsight_testkit::http::get_text(&client, &format!("{api}/metrics")).await;
    let series = "cluster_name=\"wire\",topic=\"payments\",partition=\"0\"";
    assert_eq!(
        streamsight_testkit::http::sample(&metrics, &format!("kafka_partition_last_stable_offset{{{series}}}")),
        Some(100.0),
        "{metrics}"
    );
    // The read model's labels, sorted by name.
    let held = streamsight_testkit::http::sample(
        &metrics,
        "streamsight_open_transaction_seconds{cluster_name=\"wire\",partition=\"0\",topic=\"payments\"}",
    );
    assert!(
        held.is_some_and(|s| s >= 1.0),
        "{held:?}: {}",
        metrics
            .lines()
            .filter(|l| l.contains("transaction"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // The transaction commits: the LSO reaches the end, the group reads on.
    broker.update(|c| {
        c.topics.get_mut("payments").unwrap()[0].last_stable = 120;
        c.groups
            .get_mut("ledger")
            .unwrap()
            .offsets
            .insert(("payments".to_owned(), 0), 120);
    });
    wait_for(&client, &format!("{api}/api/v1/lag?group=ledger"), |b| {
        b["rows"][0]["status"] == "ok" && b["rows"][0]["open_transaction_since_ms"].is_null()
    })
    .await;
    running.shutdown().await;
}
