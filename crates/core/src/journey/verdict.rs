//! Where a message stopped, per consumer group that reads its topic: from the
//! spans of its journey, its dead letters, the group's committed offset and the
//! offsets drop accounting found skipped or expired. Pure: the caller gathers.

use super::{LogLine, Operation, Span, TraceId};
use serde::Serialize;
use std::collections::BTreeSet;

/// The message a journey is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Message {
    pub cluster: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

/// A group that reads the message's partition, as the engine knows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupPosition {
    pub group: String,
    /// The next offset the group will read; `None` when unknown.
    pub committed: Option<i64>,
}

/// A dead letter of the message, from its provenance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeadLetter {
    pub dlq_topic: String,
    pub dlq_partition: i32,
    pub dlq_offset: i64,
    pub group: Option<String>,
    pub stage: Option<String>,
    pub error_class: Option<String>,
    /// Where a redrive sent it back (`streamsight dlq redrive`): its second
    /// attempt is judged there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redriven_to: Option<Message>,
}

/// Offsets drop accounting found missing for a group, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gap {
    pub group: String,
    /// `skipped` or `expired_by_retention`.
    pub cause: &'static str,
    pub first: i64,
    pub last: i64,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    /// A processing span of the group (or of the topic's only group) ended well.
    Processed,
    /// Its processing span failed and no dead letter says where it went.
    FailedProcessing { error: String },
    DeadLettered {
        stage: Option<String>,
        dlq_topic: String,
        dlq_offset: i64,
    },
    /// Dead-lettered, then redriven to `topic`; its second attempt is not
    /// (yet) seen processed.
    Redriven { topic: String, partition: i32, offset: i64 },
    /// Dead-lettered, redriven, and processed on its second attempt there.
    ProcessedOnRedrive { topic: String, partition: i32, offset: i64 },
    /// The group's committed offset is not past it yet.
    NotYetConsumed { committed: i64, behind: i64 },
    /// The group's offsets jumped over it.
    Skipped,
    /// Retention deleted it before the group read it.
    Expired,
    /// The group committed past it, but no span says it was processed.
    ConsumedNoProcessingSpan,
    /// Nothing says: the group's position is unknown.
    Unknown { why: String },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupVerdict {
    pub group: String,
    #[serde(flatten)]
    pub verdict: Verdict,
}

/// Whether a log line's severity says something failed.
fn is_error(severity: &str) -> bool {
    let s = severity.trim().to_ascii_uppercase();
    ["ERROR", "FATAL", "CRITICAL", "EMERG", "ALERT"]
        .iter()
        .any(|e| s.starts_with(e))
}

/// The (trace, span) ids of `roots` and of every span under them (bounded by
/// the journey's own span limit: a pass per level, at most that many).
fn under(spans: &[Span], roots: &[&Span]) -> BTreeSet<(TraceId, u64)> {
    let mut found: BTreeSet<(TraceId, u64)> = roots.iter().map(|s| (s.trace_id, s.span_id)).collect();
    for _ in 0..spans.len() {
        let before = found.len();
        for s in spans {
            if s.parent_id != 0 && found.contains(&(s.trace_id, s.parent_id)) {
                found.insert((s.trace_id, s.span_id));
            }
        }
        if found.len() == before {
            break;
        }
    }
    found
}

/// What failed while the group's consumer handled the message: an ERROR span
/// under its consumer spans (the instrumentation's own process span may end
/// well around a failed step of the application's), or an ERROR log line of
/// one of them, or of their trace when the line names no span.
fn failed_within(spans: &[Span], logs: &[LogLine], consumer: &[&Span]) -> Option<String> {
    if consumer.is_empty() {
        return None;
    }
    let inside = under(spans, consumer);
    let traces: BTreeSet<TraceId> = consumer.iter().map(|s| s.trace_id).collect();
    spans
        .iter()
        .filter(|s| inside.contains(&(s.trace_id, s.span_id)))
        .find_map(|s| s.error.clone())
        .or_else(|| {
            logs.iter()
                .filter(|l| is_error(&l.severity))
                .find(|l| match l.span_id {
                    Some(id) => inside.contains(&(l.trace_id, id)),
                    None => traces.contains(&l.trace_id),
                })
                .map(|l| super::cut(&l.body, super::MAX_TEXT))
        })
}

/// The verdict for each group reading the message. A span that names no group
/// counts for a group only when that group is the only one reading the topic.
/// Processing that failed anywhere under the group's consumer spans (an ERROR
/// span or log line) is `failed_processing`, never `processed`.
pub fn judge(
    message: &Message,
    spans: &[Span],
    logs: &[LogLine],
    dead: &[DeadLetter],
    groups: &[GroupPosition],
    gaps: &[Gap],
) -> Vec<GroupVerdict> {
    let sole = groups.len() == 1;
    let of_group = |group: &str, named: Option<&str>| named.map_or(sole, |g| g == group);
    let on_message = |s: &&Span| {
        s.messaging.as_ref().is_some_and(|m| {
            m.topic == message.topic
                && m.partition.is_none_or(|p| p == message.partition)
                && m.offset.is_none_or(|o| o == message.offset)
                && matches!(m.operation, Some(Operation::Process | Operation::Receive))
        })
    };
    groups
        .iter()
        .map(|g| {
            let name = g.group.as_str();
            let consumer_spans: Vec<&Span> = spans
                .iter()
                .filter(on_message)
                .filter(|s| of_group(name, s.messaging.as_ref().and_then(|m| m.group.as_deref())))
                .collect();
            let processing = consumer_spans
                .iter()
                .filter(|s| s.messaging.as_ref().and_then(|m| m.operation) == Some(Operation::Process));
            let within = failed_within(spans, logs, &consumer_spans);
            let failed = processing.clone().find_map(|s| s.error.clone()).or(within.clone());
            let processed = processing.clone().any(|s| s.error.is_none()) && within.is_none();
            // A letter not redriven is where the message is now (a redriven
            // copy that failed again is dead-lettered again).
            let letter = dead
                .iter()
                .filter(|d| of_group(name, d.group.as_deref()))
                .min_by_key(|d| d.redriven_to.is_some());
            let gap = gaps
                .iter()
                .find(|x| x.group == name && (x.first..=x.last).contains(&message.offset));
            let verdict = if let Some(to) = letter.and_then(|d| d.redriven_to.as_ref()) {
                let again: Vec<&Span> = spans
                    .iter()
                    .filter(|s| {
                        s.messaging.as_ref().is_some_and(|m| {
                            m.topic == to.topic
                                && m.partition == Some(to.partition)
                                && m.offset == Some(to.offset)
                                && m.operation == Some(Operation::Process)
                                && of_group(name, m.group.as_deref())
                        })
                    })
                    .collect();
                let (topic, partition, offset) = (to.topic.clone(), to.partition, to.offset);
                if again.iter().any(|s| s.error.is_none()) {
                    Verdict::ProcessedOnRedrive {
                        topic,
                        partition,
                        offset,
                    }
                } else if let Some(error) = again.iter().find_map(|s| s.error.clone()) {
                    Verdict::FailedProcessing { error }
                } else {
                    Verdict::Redriven {
                        topic,
                        partition,
                        offset,
                    }
                }
            } else if let Some(d) = letter {
                Verdict::DeadLettered {
                    stage: d.stage.clone(),
                    dlq_topic: d.dlq_topic.clone(),
                    dlq_offset: d.dlq_offset,
                }
            } else if let Some(error) = failed.filter(|_| !processed) {
                Verdict::FailedProcessing { error }
            } else if processed {
                Verdict::Processed
            } else if let Some(gap) = gap {
                if gap.cause == "skipped" {
                    Verdict::Skipped
                } else {
                    Verdict::Expired
                }
            } else {
                match g.committed {
                    Some(c) if c <= message.offset => Verdict::NotYetConsumed {
                        committed: c,
                        behind: message.offset - c + 1,
                    },
                    Some(_) => Verdict::ConsumedNoProcessingSpan,
                    None => Verdict::Unknown {
                        why: "the group's committed offset is unknown".into(),
                    },
                }
            };
            GroupVerdict {
                group: g.group.clone(),
                verdict,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{Messaging, Source, TraceId};
    use super::*;

    fn process(group: Option<&str>, error: Option<&str>) -> Span {
        Span {
            trace_id: TraceId(1),
            span_id: 2,
            parent_id: 0,
            name: "orders process".into(),
            service: "billing".into(),
            start_ns: 0,
            duration_ns: 1,
            error: error.map(str::to_owned),
            messaging: Some(Messaging {
                topic: "orders".into(),
                partition: Some(0),
                offset: Some(41),
                group: group.map(str::to_owned),
                operation: Some(Operation::Process),
                ..Messaging::default()
            }),
            links: Vec::new(),
            source: Source::Otlp,
        }
    }

    fn message() -> Message {
        Message {
            cluster: "prod".into(),
            topic: "orders".into(),
            partition: 0,
            offset: 41,
        }
    }

    fn at(group: &str, committed: Option<i64>) -> GroupPosition {
        GroupPosition {
            group: group.into(),
            committed,
        }
    }

    #[test]
    fn each_group_gets_its_own_verdict() {
        let mut fraud = process(Some("fraud"), Some("ValueError"));
        fraud.span_id = 5;
        let spans = [process(Some("billing"), None), fraud];
        let dead = [DeadLetter {
            dlq_topic: "orders.dlq".into(),
            dlq_partition: 0,
            dlq_offset: 3,
            group: Some("fraud".into()),
            stage: Some("validation".into()),
            error_class: Some("schema_violation".into()),
            redriven_to: None,
        }];
        let gaps = [Gap {
            group: "audit".into(),
            cause: "skipped",
            first: 40,
            last: 45,
        }];
        let groups = [
            at("billing", Some(42)),
            at("fraud", Some(42)),
            at("shipping", Some(30)),
            at("audit", Some(50)),
            at("reports", Some(99)),
            at("new", None),
        ];
        let v: Vec<(String, Verdict)> = judge(&message(), &spans, &[], &dead, &groups, &gaps)
            .into_iter()
            .map(|g| (g.group, g.verdict))
            .collect();
        assert_eq!(v[0].1, Verdict::Processed);
        assert!(matches!(&v[1].1, Verdict::DeadLettered { stage: Some(s), .. } if s == "validation"));
        assert_eq!(
            v[2].1,
            Verdict::NotYetConsumed {
                committed: 30,
                behind: 12
            }
        );
        assert_eq!(v[3].1, Verdict::Skipped);
        assert_eq!(v[4].1, Verdict::ConsumedNoProcessingSpan);
        assert!(matches!(v[5].1, Verdict::Unknown { .. }));
    }

    #[test]
    fn a_span_without_a_group_counts_only_for_the_only_group() {
        let spans = [process(None, Some("KeyError"))];
        let one = judge(&message(), &spans, &[], &[], &[at("billing", Some(42))], &[]);
        assert_eq!(
            one[0].verdict,
            Verdict::FailedProcessing {
                error: "KeyError".into()
            }
        );
        let two = judge(
            &message(),
            &spans,
            &[],
            &[],
            &[at("billing", Some(42)), at("fraud", Some(42))],
            &[],
        );
        assert!(two.iter().all(|g| g.verdict == Verdict::ConsumedNoProcessingSpan));
    }

    #[test]
    fn a_redriven_letter_is_judged_by_its_second_attempt() {
        let failed = process(Some("fraud"), Some("ValueError"));
        let letter = |redriven_to: Option<Message>| DeadLetter {
            dlq_topic: "orders.dlq".into(),
            dlq_partition: 0,
            dlq_offset: 3,
            group: Some("fraud".into()),
            stage: Some("processing".into()),
            error_class: Some("ValueError".into()),
            redriven_to,
        };
        let copy = Message {
            offset: 90,
            ..message()
        };
        let groups = [at("fraud", Some(42))];
        let judge_with =
            |spans: &[Span], dead: &[DeadLetter]| judge(&message(), spans, &[], dead, &groups, &[])[0].verdict.clone();
        let redriven = Verdict::Redriven {
            topic: "orders".into(),
            partition: 0,
            offset: 90,
        };
        assert_eq!(
            judge_with(std::slice::from_ref(&failed), &[letter(Some(copy.clone()))]),
            redriven
        );
        let mut again = process(Some("fraud"), None);
        again.messaging.as_mut().unwrap().offset = Some(90);
        assert_eq!(
            judge_with(&[failed.clone(), again.clone()], &[letter(Some(copy.clone()))]),
            Verdict::ProcessedOnRedrive {
                topic: "orders".into(),
                partition: 0,
                offset: 90,
            }
        );
        // Failed again and dead-lettered again: the new letter is where it is.
        let mut second = letter(None);
        second.dlq_offset = 7;
        again.error = Some("ValueError".into());
        let v = judge_with(&[failed, again], &[letter(Some(copy)), second]);
        assert!(matches!(v, Verdict::DeadLettered { dlq_offset: 7, .. }), "{v:?}");
    }

    #[test]
    fn a_failed_step_under_a_process_span_that_ended_well_is_failed_processing() {
        let groups = [GroupPosition {
            group: "refunds".into(),
            committed: Some(42),
        }];
        let ok = process(Some("refunds"), None);
        let mut child = process(None, Some("ValueError"));
        child.messaging = None;
        child.span_id = 3;
        child.parent_id = ok.span_id;
        child.name = "process_order".into();
        let judged =
            |spans: &[Span], logs: &[LogLine]| judge(&message(), spans, logs, &[], &groups, &[])[0].verdict.clone();
        assert_eq!(judged(std::slice::from_ref(&ok), &[]), Verdict::Processed);
        assert_eq!(
            judged(&[ok.clone(), child.clone()], &[]),
            Verdict::FailedProcessing {
                error: "ValueError".into()
            }
        );
        // An ERROR log line of the consumer's span, or of its trace.
        let line = |span_id: Option<u64>, severity: &str, trace: u128| LogLine {
            trace_id: TraceId(trace),
            span_id,
            at: crate::time::Millis(0),
            severity: severity.into(),
            body: "refund failed: card expired".into(),
            service: "refund-svc".into(),
            source: super::super::Source::Otlp,
        };
        let failed = Verdict::FailedProcessing {
            error: "refund failed: card expired".into(),
        };
        assert_eq!(judged(std::slice::from_ref(&ok), &[line(Some(2), "ERROR", 1)]), failed);
        assert_eq!(judged(std::slice::from_ref(&ok), &[line(None, "error", 1)]), failed);
        assert_eq!(
            judged(std::slice::from_ref(&ok), &[line(Some(2), "INFO", 1)]),
            Verdict::Processed
        );
        // Another trace's error is not this consumer's.
        assert_eq!(judged(&[ok], &[line(None, "ERROR", 9)]), Verdict::Processed);
    }
}
