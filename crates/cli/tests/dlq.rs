//! `streamsight dlq tail` straight from the cluster and `streamsight dlq list`
//! from a collector watching the DLQs, on librdkafka's mock cluster.
#![allow(clippy::unwrap_used)]

mod support;

use rdkafka::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::time::{Duration, Instant};
use streamsight_wire::dlq::{Conventions, Provenance};

#[test]
fn tail_and_list() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("orders.dlq", 1, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    for offset in 0..3 {
        let p = Provenance {
            source_topic: Some("orders".into()),
            source_partition: Some(0),
            source_offset: Some(offset),
            stage: Some("validation".into()),
            error_class: Some("schema_violation".into()),
            error_message: Some("amount is required".into()),
            ..Provenance::default()
        };
        let mut headers = OwnedHeaders::new();
        for (key, value) in p.headers(Conventions::default()) {
            headers = headers.insert(Header {
                key,
                value: Some(&value),
            });
        }
        producer
            .send(
                BaseRecord::<(), _>::to("orders.dlq")
                    .payload("{\"id\":1}")
                    .headers(headers),
            )
            .unwrap();
    }
    producer.flush(Duration::from_secs(5)).unwrap();

    let (ok, out, err) = support::run(&[
        "dlq",
        "tail",
        "orders.dlq",
        "--bootstrap-server",
        &bootstrap,
        "--limit",
        "2",
    ]);
    assert!(ok, "{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "the last two: {out}");
    assert!(lines[0].starts_with("0/1  from orders[0]@1"), "{out}");
    assert!(lines[1].contains("schema_violation: amount is required"), "{out}");

    let (ok, _, err) = support::run(&["dlq", "tail", "nope", "--bootstrap-server", &bootstrap]);
    assert!(!ok && err.contains("nope"), "{err}");

    let toml = format!("[[serve.dlq]]\nname = \"mock\"\nbootstrap = \"{bootstrap}\"\nrefresh = \"200ms\"\n");
    let (_guard, api) = support::serve_with_config("dlq", &toml);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ok, out, err) = support::run(&["dlq", "list", "--collector", &api]);
        assert!(ok, "{err}");
        if out.contains("validation/schema_violation x3") {
            assert!(out.contains("orders.dlq") && out.contains("orders"), "{out}");
            break;
        }
        assert!(Instant::now() < deadline, "never listed: {out}");
        std::thread::sleep(Duration::from_millis(100));
    }
}
