//! `serve` watching dead-letter queues on librdkafka's mock cluster: DLQ topics
//! found by name, records dead-lettered with streamsight's, Spring's and
//! Connect's provenance headers (written here, as those producers write them),
//! reason counts exact, velocity from the brokers' offsets, recent records for
//! browsing, metrics.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::Value;
use std::time::{Duration, Instant};
use streamsight_collector::{ServeConfig, serve};
use streamsight_core::EngineConfig;
use streamsight_dlq::DlqConfig;
use streamsight_wire::dlq::{Conventions, Provenance};

fn provenance(class: &str, offset: i64) -> Provenance {
    Provenance {
        source_topic: Some("orders".into()),
        source_partition: Some(0),
        source_offset: Some(offset),
        consumer_group: Some("billing".into()),
        stage: Some("validation".into()),
        error_class: Some(class.into()),
        error_message: Some("\"amount\" is a required property".into()),
        schema_id: Some("7".into()),
        trace_id: Some("0af7651916cd43dd8448eb211c80319c".into()),
        ..Provenance::default()
    }
}

async fn send(producer: &FutureProducer, topic: &str, headers: Vec<(&'static str, Vec<u8>)>) {
    let mut h = OwnedHeaders::new();
    for (key, value) in &headers {
        h = h.insert(Header {
            key,
            value: Some(value),
        });
    }
    let record = FutureRecord::<(), _>::to(topic)
        .payload("{\"id\":\"c\",\"total\":3}")
        .headers(h);
    producer.send(record, Duration::from_secs(5)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dlq_velocity_reasons_and_recent_records() {
    let cluster = MockCluster::new(1).unwrap();
    for t in ["orders", "orders.dlq", "payments-dlt", "sink.DLT", "billing-failures"] {
        cluster.create_topic(t, 1, 1).unwrap();
    }
    let bootstrap = cluster.bootstrap_servers();
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    // streamsight's SDK: 3 schema violations, 1 deserialization failure.
    for (i, class) in [
        "schema_violation",
        "schema_violation",
        "schema_violation",
        "deserialization",
    ]
    .iter()
    .enumerate()
    {
        send(
            &producer,
            "orders.dlq",
            provenance(class, i as i64).headers(Conventions::default()),
        )
        .await;
    }
    // A Spring listener's DLT: binary numbers, exception class names.
    let spring = Provenance {
        source_topic: Some("payments".into()),
        error_class: Some("org.springframework.kafka.listener.ListenerExecutionFailedException".into()),
        ..provenance("", 9)
    };
    let only =
        |h: Vec<(&'static str, Vec<u8>)>, prefix: &str| h.into_iter().filter(|(k, _)| k.starts_with(prefix)).collect();
    for _ in 0..2 {
        send(
            &producer,
            "payments-dlt",
            only(
                spring.headers(Conventions {
                    spring: true,
                    connect: false,
                }),
                "kafka_dlt-",
            ),
        )
        .await;
    }
    // A Kafka Connect sink's DLQ.
    let connect = Provenance {
        source_topic: Some("sink-input".into()),
        stage: Some("VALUE_CONVERTER".into()),
        error_class: Some("org.apache.kafka.connect.errors.DataException".into()),
        ..provenance("", 4)
    };
    send(
        &producer,
        "sink.DLT",
        only(
            connect.headers(Conventions {
                spring: false,
                connect: true,
            }),
            "__connect.errors.",
        ),
    )
    .await;

    // A DLQ by any other name: found by the provenance its records carry.
    send(
        &producer,
        "billing-failures",
        provenance("schema_violation", 11).headers(Conventions::default()),
    )
    .await;
    // An ordinary topic with an ordinary record stays out.
    send(&producer, "orders", Vec::new()).await;
    let mut dlq = DlqConfig::new("mock", &bootstrap);
    dlq.refresh = Duration::from_millis(200);
    let alerts = toml::from_str(
        r#"
        default_rules = false
        [[rules]]
        name = "schema_drift"
        signal = "schema_violations"
        above = 0
        scope = { topic = "orders" }
        [[rules]]
        name = "connect_failing"
        signal = "dead_letters"
        above = 0
        scope = { stage = "VALUE_CONVERTER" }
        "#,
    )
    .unwrap();
    let config = ServeConfig {
        dlq: vec![dlq],
        trace_url: "https://traces.example/trace/{trace_id}".into(),
        history_interval: Duration::from_millis(200),
        alerts,
        ..support::loopback("memory://")
    };
    let running = serve(config, EngineConfig::default()).await.unwrap();
    let api = format!("http://{}", running.api_addr);

    let deadline = Instant::now() + Duration::from_secs(30);
    let topics = loop {
        let body: Value = reqwest::get(format!("{api}/api/v1/dlq"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let topics = body["clusters"][0]["topics"].as_array().cloned().unwrap_or_default();
        let read: u64 = topics.iter().map(|t| t["read"].as_u64().unwrap_or(0)).sum();
        if read == 8 && topics.iter().all(|t| !t["velocity"].is_null()) {
            break topics;
        }
        assert!(Instant::now() < deadline, "the monitor never read the DLQs: {body:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let topic = |name: &str| topics.iter().find(|t| t["dlq_topic"] == name).unwrap().clone();
    assert_eq!(topics.len(), 4, "found by name or provenance, orders itself left out");
    assert_eq!(topic("billing-failures")["source_topic"], "orders");

    let orders = topic("orders.dlq");
    assert_eq!(
        (orders["records"].as_i64(), orders["source_topic"].as_str()),
        (Some(4), Some("orders"))
    );
    let reasons = orders["reasons"].as_array().unwrap();
    assert_eq!(reasons[0][0]["error_class"], "schema_violation");
    assert_eq!((reasons[0][1].as_u64(), reasons[1][1].as_u64()), (Some(3), Some(1)));
    let recent = &orders["recent"][0];
    assert_eq!(recent["provenance"]["source_offset"], 0);
    assert_eq!(recent["provenance"]["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(
        recent["trace_url"],
        "https://traces.example/trace/0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(recent["preview"], "{\"id\":\"c\",\"total\":3}");

    let payments = topic("payments-dlt");
    let r = &payments["reasons"][0];
    assert_eq!(
        (
            r[0]["source_topic"].as_str(),
            r[0]["convention"].as_str(),
            r[1].as_u64()
        ),
        (Some("payments"), Some("spring"), Some(2))
    );
    assert_eq!(
        payments["recent"][0]["provenance"]["source_offset"], 9,
        "binary offset decoded"
    );

    let sink = topic("sink.DLT");
    let r = &sink["reasons"][0];
    assert_eq!(
        (r[0]["stage"].as_str(), r[0]["convention"].as_str()),
        (Some("VALUE_CONVERTER"), Some("connect"))
    );
    assert_eq!(r[0]["error_class"], "org.apache.kafka.connect.errors.DataException");

    let metrics = reqwest::get(format!("{api}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("streamsight_dlq_records{cluster_name=\"mock\",dlq_topic=\"orders.dlq\"} 4"),
        "{metrics}"
    );
    assert!(metrics.contains(
        "streamsight_schema_violations_total{cluster_name=\"mock\",topic=\"orders\",schema=\"7\",class=\"schema_violation\"} 3"
    ));
    assert!(
        metrics.contains("streamsight_dlq_velocity_records_per_second{cluster_name=\"mock\",dlq_topic=\"orders.dlq\"}")
    );

    // Alerts on dead letters are rates: more schema violations arrive and the
    // rule fires with the schema and class; the Connect rule does too.
    let deadline = Instant::now() + Duration::from_secs(30);
    let firing = loop {
        send(
            &producer,
            "orders.dlq",
            provenance("schema_violation", 20).headers(Conventions::default()),
        )
        .await;
        send(
            &producer,
            "sink.DLT",
            only(
                connect.headers(Conventions {
                    spring: false,
                    connect: true,
                }),
                "__connect.errors.",
            ),
        )
        .await;
        let body: Value = reqwest::get(format!("{api}/api/v1/alerts"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let firing: Vec<Value> = body["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["state"] == "firing")
            .cloned()
            .collect();
        if firing.len() == 2 {
            break firing;
        }
        assert!(Instant::now() < deadline, "the dead-letter rules never fired: {body:#}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let drift = firing.iter().find(|a| a["rule"] == "schema_drift").unwrap();
    assert_eq!(drift["labels"]["schema"], "7", "{drift}");
    assert_eq!(drift["labels"]["error_class"], "schema_violation", "{drift}");
    assert!(drift["value"].as_f64().unwrap() > 0.0, "per minute: {drift}");
    let connect_alert = firing.iter().find(|a| a["rule"] == "connect_failing").unwrap();
    assert_eq!(connect_alert["labels"]["topic"], "sink.DLT", "{connect_alert}");
    assert_eq!(connect_alert["labels"]["source_topic"], "sink-input", "{connect_alert}");
}
