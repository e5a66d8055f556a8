//! Failed sends in tracers' spans. A tracer that no longer reports a failed
//! send to Data Streams Monitoring (dd-java-agent 1.68 and later skip the
//! produce backlog the seed's bug came from; dd-trace-go and dd-trace for
//! Node.js never sent one) still traces the send: a `kafka.produce` span with
//! an error. Without these, a producer whose sends all fail would look idle
//! to streamsight: no ack, no failure. Each such span becomes a
//! `ProduceFailed` observation, as the SDK's failed-send reports do.
//!
//! Tags as the tracers send them (recorded in
//! `crates/wire/tests/fixtures/tracers/`): the cluster id as
//! `messaging.kafka.cluster.id` (Java) or `kafka.cluster_id` (Node.js), or none
//! (Go); the partition as `messaging.kafka.partition` (Go) or none (-1: the
//! topic's).

use std::collections::HashMap;
use streamsight_core::journey::{Operation, Source, Span};
use streamsight_core::model::{Observation, PartitionRef, SharedNames};
use streamsight_core::{Millis, Record};

/// Where a span's cluster is found.
#[allow(missing_debug_implementations)] // holds a closure
pub struct Clusters<'a> {
    /// A polled cluster's configured name by the id its brokers give.
    pub by_id: &'a HashMap<String, String>,
    /// The one named cluster that holds a topic, where exactly one does.
    pub by_topic: &'a dyn Fn(&str) -> Option<String>,
    /// Where a failure whose cluster nothing names is kept.
    pub default: &'a str,
}

/// Names each span's cluster as this collector does: a polled cluster's id
/// becomes its configured name; an id nothing polls is dropped from a
/// Datadog span (its offsets then match on topic and partition alone, as
/// before the tracers' ids were read), kept on an OTLP one. Returns a
/// `ProduceFailed` record for each failed producer span, dated at the span's
/// end (never after `received`).
pub fn failed_sends(spans: &mut [Span], clusters: &Clusters<'_>, received: Millis) -> Vec<Record> {
    let mut names = SharedNames::default();
    let mut out = Vec::new();
    for s in spans.iter_mut() {
        let Some(m) = s.messaging.as_mut() else {
            continue;
        };
        if !m.cluster.is_empty() {
            match clusters.by_id.get(&m.cluster) {
                Some(name) => m.cluster.clone_from(name),
                None if s.source == Source::Datadog => m.cluster.clear(),
                None => {}
            }
        }
        let (Some(error), Some(Operation::Send)) = (&s.error, m.operation) else {
            continue;
        };
        let resolved;
        let cluster = if m.cluster.is_empty() {
            resolved = (clusters.by_topic)(&m.topic);
            resolved.as_deref().unwrap_or(clusters.default)
        } else {
            m.cluster.as_str()
        };
        let end = s.start_ns.saturating_add(s.duration_ns.max(0)).div_euclid(1_000_000);
        let failed = Observation::ProduceFailed {
            partition: PartitionRef {
                cluster,
                topic: &m.topic,
                partition: m.partition.filter(|p| *p >= 0).unwrap_or(-1),
            },
            error: error.as_str(),
        };
        out.push(Record::Observation {
            at: Millis(end.min(received.0)),
            observation: failed.to_owned_in(&mut names),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use streamsight_core::journey::{Messaging, TraceId};

    fn span(error: Option<&str>, operation: Operation, cluster: &str, partition: Option<i32>) -> Span {
        Span {
            trace_id: TraceId(1),
            span_id: 2,
            parent_id: 0,
            name: "kafka.produce".into(),
            service: "checkout".into(),
            start_ns: 5_000_000_000,
            duration_ns: 1_000_000,
            error: error.map(str::to_owned),
            messaging: Some(Messaging {
                cluster: cluster.into(),
                topic: "orders".into(),
                partition,
                operation: Some(operation),
                ..Messaging::default()
            }),
            links: Vec::new(),
            source: Source::Datadog,
        }
    }

    #[test]
    fn a_failed_produce_span_is_a_failed_send_on_the_polled_cluster() {
        let by_id = HashMap::from([("abc123".to_owned(), "prod".to_owned())]);
        let clusters = Clusters {
            by_id: &by_id,
            by_topic: &|_| Some("elsewhere".to_owned()),
            default: "unknown",
        };
        let mut spans = vec![
            span(Some("RecordTooLargeException"), Operation::Send, "abc123", None),
            span(Some("kafka.Error"), Operation::Send, "", Some(0)),
            span(None, Operation::Send, "abc123", Some(0)),
            span(Some("boom"), Operation::Process, "abc123", Some(0)),
            span(Some("timeout"), Operation::Send, "not-polled", None),
        ];
        let records = failed_sends(&mut spans, &clusters, Millis(10_000));
        let seen: Vec<String> = records
            .iter()
            .map(|r| match r {
                Record::Observation {
                    at,
                    observation: streamsight_core::model::ObservationOf::ProduceFailed { partition, error },
                } => format!(
                    "{} {}/{}[{}] {error}",
                    at.0, partition.cluster, partition.topic, partition.partition
                ),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            seen,
            [
                "5001 prod/orders[-1] RecordTooLargeException",
                "5001 elsewhere/orders[0] kafka.Error",
                "5001 elsewhere/orders[-1] timeout",
            ]
        );
        // Ids become names; an id nothing polls is dropped from a Datadog span.
        let clusters_after: Vec<&str> = spans
            .iter()
            .map(|s| s.messaging.as_ref().unwrap().cluster.as_str())
            .collect();
        assert_eq!(clusters_after, ["prod", "", "prod", "prod", ""]);
    }
}
