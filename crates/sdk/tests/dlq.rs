//! Schema validation at ingest and dead-lettering on librdkafka's mock cluster:
//! a producer starts sending records that drift from the schema (a field
//! renamed, a type changed, not JSON at all); they land in `orders.dlq` with the
//! original key, value and headers (trace context included) and correct
//! provenance in all three header namings, valid records flow on, and a DLQ that
//! cannot be written is a counted failure, never silence.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use rdkafka::{ClientConfig, Message, Offset, TopicPartitionList};
use std::time::{Duration, Instant};
use streamsight_sdk::dlq::{DeadLetterQueue, Failure};
use streamsight_sdk::validate::Validator;
use streamsight_sdk::{Sdk, SdkConfig, Telemetry, TraceContext};
use streamsight_wire::dlq::{Conventions, Provenance};

const SCHEMA: &str = r#"{"type":"object","required":["id","amount"],
    "properties":{"id":{"type":"string"},"amount":{"type":"number"}}}"#;

const RECORDS: [&str; 6] = [
    r#"{"id":"a","amount":1}"#,
    r#"{"id":"b","amount":2.5}"#,
    r#"{"id":"c","total":3}"#,    // renamed field
    r#"{"id":"d","amount":"4"}"#, // type changed
    "<order id=e/>",              // not JSON
    r#"{"id":"f","amount":6}"#,
];

fn assignment(topic: &str) -> TopicPartitionList {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning).unwrap();
    tpl
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifting_records_are_dead_lettered_with_their_provenance() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders", 1, 1).unwrap();
    cluster.create_topic("orders.dlq", 1, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let mut base = ClientConfig::new();
    base.set("bootstrap.servers", &bootstrap);

    let trace = TraceContext::new_root();
    let producer: FutureProducer = base.create().unwrap();
    for (i, r) in RECORDS.iter().enumerate() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "traceparent",
                value: Some(&trace.to_traceparent()),
            })
            .insert(Header {
                key: "app",
                value: Some("kept"),
            });
        let key = format!("k{i}");
        let record = FutureRecord::to("orders")
            .partition(0)
            .key(&key)
            .payload(*r)
            .headers(headers);
        producer.send(record, Duration::from_secs(5)).await.unwrap();
    }

    let schema = std::env::temp_dir().join(format!("streamsight-dlq-{}.json", std::process::id()));
    std::fs::write(&schema, SCHEMA).unwrap();
    let validator = Validator::new().json_schema("orders", &schema).unwrap();
    let sdk = Sdk::with_telemetry(Telemetry::unshipped(SdkConfig::new("billing")));
    let consumer = sdk
        .base_consumer(
            base.clone()
                .set("group.id", "billing")
                .set("enable.auto.commit", "false"),
        )
        .unwrap();
    consumer.assign(&assignment("orders")).unwrap();
    let dlq = DeadLetterQueue::new(&base, sdk.telemetry().clone())
        .unwrap()
        .conventions(Conventions {
            spring: true,
            connect: true,
        });

    let mut valid = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = 0;
    while seen < RECORDS.len() {
        assert!(Instant::now() < deadline, "read only {seen} records");
        let Some(Ok((msg, _ctx))) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        seen += 1;
        match validator.validate(msg.topic(), msg.payload()) {
            Ok(()) => valid.push(msg.offset()),
            Err(v) => dlq
                .route(consumer.context(), &msg, &Failure::validation(&v))
                .await
                .unwrap(),
        }
    }
    assert_eq!(valid, vec![0, 1, 5], "valid records flow on");
    assert_eq!(sdk.telemetry().counters().dead_lettered, 3);
    assert_eq!(sdk.telemetry().counters().schema_violations, 3);
    // Dead-lettered records are counted as such for drop accounting.
    let payload = sdk.telemetry().take_payload().unwrap();
    let consumed = &payload.delivery.consumed[0];
    assert_eq!((consumed.received, consumed.dead_lettered, consumed.failed), (6, 3, 0));

    // What landed in the DLQ.
    let reader: BaseConsumer = base.clone().set("group.id", "dlq-reader").create().unwrap();
    reader.assign(&assignment("orders.dlq")).unwrap();
    let mut dead = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while dead.len() < 3 {
        assert!(Instant::now() < deadline, "only {} records in the DLQ", dead.len());
        if let Some(Ok(m)) = reader.poll(Duration::from_millis(100)) {
            dead.push(m.detach());
        }
    }
    let expected = [(2, "schema_violation"), (3, "schema_violation"), (4, "deserialization")];
    for (m, (offset, class)) in dead.iter().zip(expected) {
        assert_eq!(m.key(), Some(format!("k{offset}").as_bytes()), "key unchanged");
        assert_eq!(
            m.payload(),
            Some(RECORDS[offset as usize].as_bytes()),
            "value unchanged"
        );
        let headers: Vec<(&str, Option<&[u8]>)> = m.headers().unwrap().iter().map(|h| (h.key, h.value)).collect();
        assert_eq!(
            headers[0],
            ("traceparent", Some(trace.to_traceparent().as_bytes())),
            "trace context survives"
        );
        assert_eq!(headers[1], ("app", Some(&b"kept"[..])));
        let p = Provenance::parse(headers.iter().copied()).unwrap();
        assert_eq!(p.convention, Some("streamsight"));
        assert_eq!(
            (p.source_topic.as_deref(), p.source_partition, p.source_offset),
            (Some("orders"), Some(0), Some(offset))
        );
        assert_eq!(
            (p.consumer_group.as_deref(), p.stage.as_deref()),
            (Some("billing"), Some("validation"))
        );
        assert_eq!(p.error_class.as_deref(), Some(class));
        assert_eq!(p.schema_id.as_deref(), Some(schema.display().to_string().as_str()));
        assert_eq!(p.trace_id, Some(format!("{:032x}", trace.trace_id)));
        // Spring's and Connect's namings alone say the same where they can.
        for prefix in ["kafka_dlt-", "__connect.errors."] {
            let only = headers.iter().copied().filter(|(k, _)| k.starts_with(prefix));
            let q = Provenance::parse(only).unwrap();
            assert_eq!(
                (q.source_topic.as_deref(), q.source_offset),
                (Some("orders"), Some(offset)),
                "{prefix}"
            );
            assert_eq!(q.error_class.as_deref(), Some(class), "{prefix}");
        }
    }

    // The collector's DLQ monitor sees exactly these three, by reason.
    let mut monitor = streamsight_dlq::DlqConfig::new("mock", &bootstrap);
    monitor.refresh = Duration::from_millis(200);
    let collector = streamsight_collector::serve(
        streamsight_collector::ServeConfig {
            intake_listen: "127.0.0.1:0".parse().unwrap(),
            api_listen: "127.0.0.1:0".parse().unwrap(),
            storage: "memory://".into(),
            dlq: vec![monitor],
            ..streamsight_collector::ServeConfig::ephemeral()
        },
        streamsight_core::EngineConfig::default(),
    )
    .await
    .unwrap();
    let url = format!("http://{}/api/v1/dlq", collector.api_addr);
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let body: serde_json::Value = reqwest::get(&url).await.unwrap().json().await.unwrap();
        let t = body["clusters"][0]["topics"][0].clone();
        if t["read"] == 3 && !t["velocity"].is_null() {
            break t;
        }
        assert!(Instant::now() < deadline, "the collector never read the DLQ: {body:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        (seen["dlq_topic"].as_str(), seen["records"].as_i64()),
        (Some("orders.dlq"), Some(3))
    );
    let reasons: Vec<(String, u64)> = seen["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r[0]["error_class"].as_str().unwrap().to_owned(), r[1].as_u64().unwrap()))
        .collect();
    assert_eq!(
        reasons,
        vec![("schema_violation".to_owned(), 2), ("deserialization".to_owned(), 1)]
    );
    // The records' trace id finds their journey: dead-lettered by billing at
    // validation, each with its provenance.
    let journey: serde_json::Value = reqwest::get(format!(
        "http://{}/api/v1/journeys/{}",
        collector.api_addr,
        format_args!("{:032x}", trace.trace_id)
    ))
    .await
    .unwrap()
    .json()
    .await
    .unwrap();
    let letters: Vec<&serde_json::Value> = journey["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["kind"] == "dead_letter")
        .collect();
    assert_eq!(letters.len(), 3, "{journey:#}");
    assert!(
        letters
            .iter()
            .all(|l| l["stage"] == "validation" && l["dlq_topic"] == "orders.dlq")
    );
    assert_eq!(journey["message"]["topic"], "orders", "{journey:#}");
    let billing = journey["verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["group"] == "billing")
        .unwrap_or_else(|| panic!("{journey:#}"));
    assert_eq!(billing["verdict"], "dead_lettered", "{journey:#}");

    // A DLQ that cannot be written: retried, then a counted failure and an error.
    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE; 2],
    );
    let dlq = dlq.retries(2, Duration::from_millis(10));
    let msg = reader.poll(Duration::from_millis(10));
    assert!(msg.is_none(), "nothing left to read");
    let producer2: FutureProducer = base.create().unwrap();
    cluster.clear_request_errors(RDKafkaApiKey::Produce);
    producer2
        .send(
            FutureRecord::<(), _>::to("orders").partition(0).payload("<bad/>"),
            Duration::from_secs(5),
        )
        .await
        .unwrap();
    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE; 2],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "the last record never came");
        let Some(Ok((msg, _))) = consumer.poll(Duration::from_millis(100)) else {
            continue;
        };
        let v = validator.validate(msg.topic(), msg.payload()).unwrap_err();
        let err = dlq.route(consumer.context(), &msg, &Failure::validation(&v)).await;
        assert!(err.is_err(), "the DLQ send failed and said so");
        break;
    }
    assert_eq!(sdk.telemetry().counters().dead_letter_failures, 1);
    let payload = sdk.telemetry().take_payload().unwrap();
    assert_eq!(payload.delivery.consumed[0].failed, 1, "counted as a drop");
}
