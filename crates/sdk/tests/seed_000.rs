//! Mirrors dd-trace-java's KafkaProducerFailureDataStreamsForkedTest (seed 000)
//! against a real Kafka-protocol broker, librdkafka's mock cluster: one good record
//! to `ok.topic`, one the broker rejects and one the client rejects. The only
//! produce offset reported is ok.topic partition 0 offset 0; both failures are
//! counted; the caller sees every result.

#![allow(clippy::unwrap_used)] // a test that cannot set up should fail loudly

use rdkafka::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{BaseRecord, DeliveryResult, FutureRecord, NoCustomPartitioner, ProducerContext};
use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use streamsight_sdk::{Sdk, SdkConfig, Telemetry};
use streamsight_wire::dsm::payload::Payload;

fn cluster() -> MockCluster<'static, rdkafka::producer::DefaultProducerContext> {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("ok.topic", 1, 1).unwrap();
    cluster.create_topic("rejecting.topic", 1, 1).unwrap();
    cluster
}

fn client_config(cluster: &MockCluster<'static, rdkafka::producer::DefaultProducerContext>) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", cluster.bootstrap_servers())
        .set("message.send.max.retries", "0")
        .set("message.max.bytes", "10000")
        .set("linger.ms", "0");
    c
}

/// (tags, value) of a produce backlog.
type Produced = (Vec<String>, i64);
/// (topic, partition, error, count) of failed sends.
type Failed = (String, i32, String, u64);

fn report(p: &Payload) -> (Vec<Produced>, Vec<Failed>) {
    let produce = p
        .stats
        .iter()
        .flat_map(|b| &b.backlogs)
        .filter(|b| b.tags.iter().any(|t| t == "type:kafka_produce"))
        .map(|b| (b.tags.clone(), b.value))
        .collect();
    let mut failed: Vec<_> = p
        .failed_sends
        .iter()
        .map(|f| (f.topic.clone(), f.partition, f.error.clone(), f.count))
        .collect();
    failed.sort();
    (produce, failed)
}

fn expected_produce() -> Vec<Produced> {
    let tags = ["type:kafka_produce", "topic:ok.topic", "partition:0"];
    vec![(tags.iter().map(|t| (*t).to_owned()).collect(), 0)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn future_producer_reports_only_real_successes() {
    let cluster = cluster();
    let telemetry = Telemetry::unshipped(SdkConfig::new("checkout"));
    let producer = Sdk::with_telemetry(telemetry.clone())
        .future_producer(&client_config(&cluster))
        .unwrap();
    let timeout = Duration::from_secs(10);

    let ok = producer
        .send(FutureRecord::to("ok.topic").key("k").payload("good"), timeout, None)
        .await;
    let delivery = ok.unwrap();
    assert_eq!((delivery.partition, delivery.offset), (0, 0));

    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    let broker = producer
        .send(FutureRecord::to("rejecting.topic").key("k").payload("x"), timeout, None)
        .await;
    let (e, msg) = broker.unwrap_err();
    assert_eq!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageSizeTooLarge),
        "{e}"
    );
    assert!(rdkafka::Message::offset(&msg) < 0);

    let big = vec![7u8; 20_000];
    let client = producer
        .send(
            FutureRecord::to("rejecting.topic").key("k").payload(&big),
            timeout,
            None,
        )
        .await;
    let (e, _) = client.unwrap_err();
    assert_eq!(
        e.rdkafka_error_code(),
        Some(RDKafkaErrorCode::MessageSizeTooLarge),
        "{e}"
    );

    let payload = telemetry.take_payload().unwrap();
    let (produce, failed) = report(&payload);
    assert_eq!(produce, expected_produce());
    assert_eq!(
        failed,
        [
            ("rejecting.topic".to_owned(), -1, "MessageSizeTooLarge".to_owned(), 1),
            ("rejecting.topic".to_owned(), 0, "MessageSizeTooLarge".to_owned(), 1),
        ]
    );
}

/// The application's own delivery callback, which must still see every result.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Delivered>>>);

/// (partition, offset) or the error, as the application's callback saw it.
type Delivered = Result<(i32, i64), String>;

impl rdkafka::ClientContext for Recorder {}

impl ProducerContext<NoCustomPartitioner> for Recorder {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        use rdkafka::Message;
        let r = match result {
            Ok(m) => Ok((m.partition(), m.offset())),
            Err((e, _)) => Err(e.to_string()),
        };
        self.0.lock().unwrap().push(r);
    }
}

#[test]
fn base_producer_reports_only_real_successes_and_keeps_the_callers_callback() {
    let cluster = cluster();
    let telemetry = Telemetry::unshipped(SdkConfig::new("checkout"));
    let recorder = Recorder::default();
    let producer = Sdk::with_telemetry(telemetry.clone())
        .base_producer(&client_config(&cluster), recorder.clone())
        .unwrap();
    let wait_for = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while recorder.0.lock().unwrap().len() < n {
            assert!(Instant::now() < deadline, "no delivery report");
            producer.poll(Duration::from_millis(50));
        }
    };

    producer
        .send(BaseRecord::to("ok.topic").key("k").payload("good"), None)
        .unwrap();
    wait_for(1);
    cluster.request_errors(
        RDKafkaApiKey::Produce,
        &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE],
    );
    producer
        .send(BaseRecord::to("rejecting.topic").key("k").payload("x"), None)
        .unwrap();
    wait_for(2);
    let big = vec![7u8; 20_000];
    let refused = producer.send(BaseRecord::to("rejecting.topic").key("k").payload(&big), None);
    let (e, _) = refused.map_err(|(e, r)| (e, r.topic)).unwrap_err();
    assert!(
        matches!(e, KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge)),
        "{e}"
    );

    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], Ok((0, 0)));
    assert!(seen[1].is_err());

    let (produce, failed) = report(&telemetry.take_payload().unwrap());
    assert_eq!(produce, expected_produce());
    assert_eq!(failed.len(), 2, "{failed:?}");
    assert_eq!(failed.iter().map(|f| f.3).sum::<u64>(), 2);
}
