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

/// dd-java-agent 1.67.1's Data Streams payloads from the same incident: before
/// the failure its producer's last offset (999) and its consumer's commit
/// (500); during it, the seed's bug in the flesh: each failed send a produce
/// backlog of offset -1, on the partition the record was assigned (0, the
/// record too large) or on partition -1 (the deleted and never-made topics'
/// metadata timeouts). Every placeholder reads as what it is, a failure,
/// never progress.
#[test]
fn the_buggy_java_agents_failed_sends_are_placeholders_never_progress() {
    use streamsight_core::model::Observation;
    use streamsight_wire::dsm::{backlog, payload};
    let backlogs = |name: &str| -> Vec<(String, i32, i64, bool)> {
        let path = format!(
            "{}/tests/fixtures/tracers/{name}.msgpack.gz",
            env!("CARGO_MANIFEST_DIR")
        );
        let body = std::fs::read(&path).unwrap();
        let p = payload::decode(&body, true, payload::Limits::default()).unwrap();
        let mut seen: Vec<_> = p
            .stats
            .iter()
            .flat_map(|b| &b.backlogs)
            .filter_map(|b| match backlog::parse(&b.tags, b.value, "c").unwrap() {
                o @ Observation::Produced { partition, offset } => Some((
                    partition.topic.to_owned(),
                    partition.partition,
                    offset,
                    o.check().is_err_and(|r| r.is_failure_placeholder()),
                )),
                _ => None,
            })
            .collect();
        seen.sort();
        seen.dedup();
        seen
    };
    let healthy = backlogs("dd-java-agent-1.67.1.pipeline-stats");
    assert!(healthy.contains(&("orders".to_owned(), 0, 999, false)), "{healthy:?}");
    assert_eq!(
        backlogs("dd-java-agent-1.67.1.failing.pipeline-stats"),
        [
            ("gone".to_owned(), -1, -1, true),
            ("nowhere".to_owned(), -1, -1, true),
            ("orders".to_owned(), 0, -1, true)
        ]
    );
}
