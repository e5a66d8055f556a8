//! Traces as the real tracers send them, recorded from the seed's incident
//! (`crates/cli/tests/seed_tracers.rs`' services, their sends failing on
//! Apache Kafka 4.4, each tracer pointed at a recording agent): dd-java-agent
//! 1.68.1 (kafka-clients 4.4), dd-trace-go 2.7.1 (confluent-kafka-go) and
//! dd-trace 5.132.0 for Node.js (kafkajs). Each failed send is a
//! `kafka.produce` span with an error; what the decoder reads of it is what
//! the intake turns into a failed send.

use streamsight_core::journey::{Operation, Source};
use streamsight_wire::traces::{Limits, datadog};

/// (file, topic, cluster id the span names, partition, error type) of each
/// recording's failed sends.
const RECORDED: [(&str, &str, &str, Option<i32>, &str); 3] = [
    (
        "dd-java-agent-1.68.1",
        "orders",
        "49f9ac60c119428fa280c7",
        None,
        "org.apache.kafka.common.errors.RecordTooLargeException",
    ),
    ("dd-trace-go-2.7.1", "gorders", "", Some(0), "kafka.Error"),
    (
        "dd-trace-js-5.132.0",
        "jorders",
        "49f9ac60c119428fa280c7",
        None,
        "KafkaJSProtocolError",
    ),
];

#[test]
fn each_tracers_failed_sends_decode_with_topic_cluster_partition_and_error() {
    for (name, topic, cluster, partition, error) in RECORDED {
        let path = format!(
            "{}/tests/fixtures/tracers/{name}.traces-v0.4.msgpack",
            env!("CARGO_MANIFEST_DIR")
        );
        let body = std::fs::read(&path).unwrap();
        let decoded = datadog::decode_v04(&body, Limits::default()).unwrap();
        let failed: Vec<_> = decoded
            .spans
            .iter()
            .filter(|s| s.error.is_some() && s.name.starts_with("kafka.produce"))
            .collect();
        assert!(!failed.is_empty(), "{name}: no failed produce span");
        let on_topic: Vec<_> = failed
            .iter()
            .filter(|s| s.messaging.as_ref().is_some_and(|m| m.topic == topic))
            .collect();
        assert!(!on_topic.is_empty(), "{name}: no failed send on {topic}");
        for s in on_topic {
            let m = s.messaging.as_ref().unwrap();
            assert_eq!(
                (
                    m.cluster.as_str(),
                    m.partition,
                    m.operation,
                    s.error.as_deref(),
                    s.source
                ),
                (cluster, partition, Some(Operation::Send), Some(error), Source::Datadog),
                "{name}: {s:?}"
            );
        }
    }
}

/// Data Streams payloads as dd-trace-go and dd-trace for Node.js sent them in
/// the same runs (gzip, msgpack): every backlog reads into the observation
/// the tracer meant. What they show, and what streamsight makes of it:
/// dd-trace-go reports the consumer's high watermark (`kafka_high_watermark`,
/// the seed's note on Go consumers) beside its commits and its producer's last
/// offset; dd-trace for Node.js reports a kafkajs batch's *first* offset as
/// the produce offset (900 for the batch 900-999), so lag from that tracer
/// alone reads up to a batch too low; where the broker is polled its end
/// offset is the truth (the seed test reads lag 500 for every tracer).
#[test]
fn each_tracers_data_streams_backlogs_read_as_what_they_mean() {
    use streamsight_core::model::Observation;
    use streamsight_wire::dsm::{backlog, payload};
    let read = |name: &str| -> Vec<String> {
        let path = format!(
            "{}/tests/fixtures/tracers/{name}.pipeline-stats.msgpack.gz",
            env!("CARGO_MANIFEST_DIR")
        );
        let body = std::fs::read(&path).unwrap();
        let p = payload::decode(&body, true, payload::Limits::default()).unwrap();
        let mut seen: Vec<String> = p
            .stats
            .iter()
            .flat_map(|b| &b.backlogs)
            .map(|b| match backlog::parse(&b.tags, b.value, "c").unwrap() {
                Observation::Produced { partition, offset } => {
                    format!("produced {}[{}] {offset}", partition.topic, partition.partition)
                }
                Observation::Committed {
                    group,
                    partition,
                    offset,
                } => {
                    format!(
                        "committed {group} {}[{}] {offset}",
                        partition.topic, partition.partition
                    )
                }
                Observation::EndOffset { partition, offset, .. } => {
                    format!("end {}[{}] {offset}", partition.topic, partition.partition)
                }
                other => format!("{other:?}"),
            })
            .collect();
        seen.sort();
        seen.dedup();
        seen
    };
    assert_eq!(
        read("dd-trace-go-2.7.1"),
        [
            "committed gbilling gorders[0] 500",
            "end gorders[0] 1000",
            "produced gorders[0] 999"
        ]
    );
    assert_eq!(
        read("dd-trace-js-5.132.0"),
        ["committed jbilling jorders[0] 500", "produced jorders[0] 900"]
    );
}
