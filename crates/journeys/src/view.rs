//! How a journey reads: its steps, the message it carried, each group's
//! position against it, and the verdict.

use crate::service::of;
use serde::Serialize;
use streamsight_core::Millis;
use streamsight_core::journey::verdict::{self, DeadLetter, Gap, GroupPosition, GroupVerdict, Message};
use streamsight_core::journey::{Journey, LogLine, Operation, Span, TraceId};
use streamsight_node::Shared;

/// Marks the traces the collector knows went wrong (dead letters, failed
/// sends) before sampling decides, then decides and forgets.
pub fn housekeep(shared: &Shared, now: Millis) {
    let mut notable: Vec<TraceId> = traced_letters(shared).into_iter().map(|(t, _)| t).collect();
    {
        let d = shared.deliveries.view();
        for (_, f) in d.failures.since(Millis(i64::MIN)) {
            notable.extend(f.trace_ids.iter().filter_map(|t| TraceId::parse(t)));
        }
    }
    of(shared).decide(notable, now);
}

/// One step of a journey, in time order.
#[derive(Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Step {
    Span(Span),
    Log(LogLine),
    DeadLetter {
        /// When it was written: the send to the DLQ where a span shows it,
        /// else the letter's timestamp, never before its consumer took the
        /// message (a DLQ writer may copy the message's own timestamp).
        #[serde(rename = "at_ms")]
        at: Option<i64>,
        /// Who wrote it: the sending span's service, else its group's consumer's.
        service: Option<String>,
        #[serde(flatten)]
        letter: DeadLetter,
        error_message: Option<String>,
    },
    /// A redrive sent the dead letter back (`streamsight dlq redrive`): what
    /// follows on `to` is its second attempt.
    Redriven {
        at_ms: i64,
        run: String,
        dlq_topic: String,
        dlq_partition: i32,
        dlq_offset: i64,
        to: Message,
    },
}

/// A dead letter of the journey's trace, and the message its provenance names.
struct Letter {
    at: Option<i64>,
    letter: DeadLetter,
    error_message: Option<String>,
    source: Option<Message>,
    /// When a redrive sent it back, and which run.
    redrive: Option<(i64, String)>,
}

/// A failed send of the journey's trace, from the SDK's counts.
#[derive(Debug, Serialize)]
pub struct FailedSend {
    pub cluster: String,
    pub topic: String,
    pub errors: Vec<(String, u64)>,
}

/// What `/api/v1/journeys/{trace_id}` answers.
#[derive(Debug, Serialize)]
pub struct JourneyView {
    pub trace_id: TraceId,
    pub linked_traces: Vec<TraceId>,
    /// The message: its offset as a span or a dead letter names it; `None` when none does.
    pub message: Option<Message>,
    pub steps: Vec<Step>,
    pub failed_send: Option<FailedSend>,
    /// Per group reading the message's partition.
    pub verdicts: Vec<GroupVerdict>,
    /// Why some verdicts cannot be given.
    pub notes: Vec<String>,
}

/// The journey of `id` with everything the collector knows of its message.
pub fn view(shared: &Shared, id: TraceId) -> Option<JourneyView> {
    view_of(shared, id, None)
}

/// The same, from `gathered` (a sharded log's parts of the trace, merged)
/// instead of this node's spans when given.
pub fn view_of(shared: &Shared, id: TraceId, gathered: Option<Journey>) -> Option<JourneyView> {
    let journey = gathered.or_else(|| of(shared).journey(id));
    let root = journey.as_ref().map_or(id, |j| j.trace_id);
    let ids: Vec<TraceId> = std::iter::once(root)
        .chain(journey.iter().flat_map(|j| j.linked_traces.iter().copied()))
        .collect();
    let same = |t: TraceId| ids.iter().any(|i| i.low() == t.low() && (t.is_short() || *i == t));
    let letters: Vec<Letter> = traced_letters(shared)
        .into_iter()
        .filter(|(t, _)| same(*t))
        .map(|(_, l)| l)
        .collect();
    let failed_send = {
        let d = shared.deliveries.view();
        d.failures
            .since(Millis(i64::MIN))
            .find(|(_, f)| f.trace_ids.iter().any(|t| TraceId::parse(t).is_some_and(same)))
            .map(|((cluster, topic), f)| FailedSend {
                cluster: cluster.clone(),
                topic: topic.clone(),
                errors: f.by_error.iter().map(|(e, n)| (e.clone(), *n)).collect(),
            })
    };
    if journey.is_none() && letters.is_empty() && failed_send.is_none() {
        return None;
    }
    let journey = journey.unwrap_or(Journey {
        trace_id: root,
        ..Journey::default()
    });
    let mut notes = Vec::new();
    let message = message_of(shared, &journey.spans, &letters, &mut notes);
    let verdicts = match &message {
        Some(m) => {
            let (mut groups, gaps) = positions(shared, m);
            // A group a dead letter or a span names is a reader, known to the engine or not.
            let named = letters
                .iter()
                .filter_map(|l| l.letter.group.clone())
                .chain(journey.spans.iter().filter_map(|s| s.messaging.as_ref()?.group.clone()));
            for g in named {
                if !groups.iter().any(|x| x.group == g) {
                    groups.push(GroupPosition {
                        group: g,
                        committed: None,
                    });
                }
            }
            let dead: Vec<DeadLetter> = letters.iter().map(|l| l.letter.clone()).collect();
            if groups.is_empty() {
                notes.push(format!("no group is known to read {}[{}]", m.topic, m.partition));
            }
            verdict::judge(m, &journey.spans, &journey.logs, &dead, &groups, &gaps)
        }
        None => {
            if failed_send.is_none() {
                notes.push("no span or dead letter names the message's offset: no verdict per group".into());
            }
            Vec::new()
        }
    };
    let written: Vec<(Option<i64>, Option<String>)> = letters.iter().map(|l| written(&journey.spans, l)).collect();
    // In nanoseconds: steps within one millisecond keep their order, on the
    // page (which rounds) and in the CLI alike.
    let ns = |ms: i64| ms.saturating_mul(1_000_000);
    let mut steps: Vec<(i64, Step)> = journey
        .spans
        .into_iter()
        .map(|s| (s.start_ns, Step::Span(s)))
        .chain(journey.logs.into_iter().map(|l| (ns(l.at.0), Step::Log(l))))
        .chain(letters.into_iter().zip(written).flat_map(|(l, (at, service))| {
            let redrive = l.redrive.map(|(at_ms, run)| {
                let step = Step::Redriven {
                    at_ms,
                    run,
                    dlq_topic: l.letter.dlq_topic.clone(),
                    dlq_partition: l.letter.dlq_partition,
                    dlq_offset: l.letter.dlq_offset,
                    to: l.letter.redriven_to.clone().unwrap_or_else(|| Message {
                        cluster: String::new(),
                        topic: String::new(),
                        partition: -1,
                        offset: -1,
                    }),
                };
                (ns(at_ms), step)
            });
            let step = Step::DeadLetter {
                at,
                service,
                letter: l.letter,
                error_message: l.error_message,
            };
            std::iter::once((at.map_or(i64::MAX, ns), step)).chain(redrive)
        }))
        .collect();
    steps.sort_by_key(|(at, _)| *at);
    Some(JourneyView {
        trace_id: root,
        linked_traces: journey.linked_traces,
        message,
        steps: steps.into_iter().map(|(_, s)| s).collect(),
        failed_send,
        verdicts,
        notes,
    })
}

/// The traces of the dead letters whose provenance names this message: a
/// message known only from its dead letter is found by its offset too.
pub fn letters_at(shared: &Shared, cluster: Option<&str>, topic: &str, partition: i32, offset: i64) -> Vec<TraceId> {
    traced_letters(shared)
        .into_iter()
        .filter(|(_, l)| {
            l.source.as_ref().is_some_and(|m| {
                m.topic == topic
                    && m.partition == partition
                    && m.offset == offset
                    && cluster.is_none_or(|c| m.cluster == c)
            })
        })
        .map(|(t, _)| t)
        .collect()
}

/// When a dead letter was written, and by which service: the span that sent
/// it to its DLQ where one shows it; else its timestamp, but not before the
/// last of its group's consumer spans on the message began (a letter's
/// timestamp may be the message's own, copied), with that consumer's service.
fn written(spans: &[Span], l: &Letter) -> (Option<i64>, Option<String>) {
    let ms = |s: &Span| s.start_ns.div_euclid(1_000_000);
    if let Some(send) = spans.iter().find(|s| {
        s.messaging
            .as_ref()
            .is_some_and(|m| m.topic == l.letter.dlq_topic && m.operation == Some(Operation::Send))
    }) {
        return (Some(ms(send)), Some(send.service.clone()));
    }
    let consumer = spans
        .iter()
        .filter(|s| {
            s.messaging.as_ref().is_some_and(|m| {
                matches!(m.operation, Some(Operation::Process | Operation::Receive))
                    && l.source.as_ref().is_none_or(|src| m.topic == src.topic)
                    && (m.group.is_none() || m.group == l.letter.group)
            })
        })
        .max_by_key(|s| s.start_ns);
    let at = match (l.at, consumer) {
        (Some(at), Some(c)) => Some(at.max(ms(c))),
        (at, c) => at.or(c.map(ms)),
    };
    (at, consumer.map(|c| c.service.clone()))
}

/// The dead letters the DLQ monitors hold (their recent records) that name a
/// trace, with it.
fn traced_letters(shared: &Shared) -> Vec<(TraceId, Letter)> {
    let mut out = Vec::new();
    let ledger = shared.redrives.view();
    for m in shared.dlq.view().iter() {
        for t in m.report() {
            for r in &t.recent {
                let Some(p) = r.provenance.as_ref() else { continue };
                let Some(trace) = p.trace_id.as_deref().and_then(TraceId::parse) else {
                    continue;
                };
                let source = match (&p.source_topic, p.source_partition, p.source_offset) {
                    (Some(topic), Some(partition), Some(offset)) => Some(Message {
                        cluster: m.config.name.clone(),
                        topic: topic.clone(),
                        partition,
                        offset,
                    }),
                    _ => None,
                };
                // The DLQ monitor's name is the cluster's when they are
                // named alike; else the redrive of any cluster of that topic.
                let sent = ledger.sent(&m.config.name, &t.dlq_topic, r.partition, r.offset);
                let redriven_to = sent.map(|(cluster, to, _, _)| Message {
                    cluster: cluster.to_owned(),
                    topic: to.topic.clone(),
                    partition: to.partition,
                    offset: to.offset,
                });
                let letter = Letter {
                    at: r.timestamp_ms,
                    letter: DeadLetter {
                        dlq_topic: t.dlq_topic.clone(),
                        dlq_partition: r.partition,
                        dlq_offset: r.offset,
                        group: p.consumer_group.clone(),
                        stage: p.stage.clone(),
                        error_class: p.error_class.clone(),
                        redriven_to,
                    },
                    error_message: p.error_message.clone(),
                    source,
                    redrive: sent.map(|(_, _, at, run)| (at.0, run.to_owned())),
                };
                out.push((trace, letter));
            }
        }
    }
    out
}

/// The message's cluster, topic, partition and offset: a send span's, else any
/// messaging span's, else a dead letter's provenance. A span that names no
/// cluster takes the only one that has the topic.
/// The span that names the journey's message: a send's, else any with an offset.
pub fn message_span(spans: &[Span]) -> Option<&streamsight_core::journey::Messaging> {
    let with_offset = |op: Option<Operation>| {
        spans
            .iter()
            .filter_map(|s| s.messaging.as_ref())
            .find(|m| m.partition.is_some() && m.offset.is_some() && (op.is_none() || m.operation == op))
    };
    with_offset(Some(Operation::Send)).or_else(|| with_offset(None))
}

fn message_of(shared: &Shared, spans: &[Span], letters: &[Letter], notes: &mut Vec<String>) -> Option<Message> {
    if let Some(m) = message_span(spans) {
        let cluster = if m.cluster.is_empty() {
            let engine = shared.lag.engine();
            let mut clusters = engine.clusters_of(&m.topic);
            match (clusters.next(), clusters.next()) {
                (Some(only), None) => only.to_owned(),
                (None, _) => {
                    notes.push(format!("no cluster is known to have topic {}", m.topic));
                    String::new()
                }
                (Some(_), Some(_)) => {
                    notes.push(format!(
                        "topic {} is on several clusters and the spans do not say which",
                        m.topic
                    ));
                    String::new()
                }
            }
        } else {
            m.cluster.clone()
        };
        return Some(Message {
            cluster,
            topic: m.topic.clone(),
            partition: m.partition?,
            offset: m.offset?,
        });
    }
    letters.iter().find_map(|l| l.source.clone())
}

/// Each group reading the message's partition, with its committed offset, and
/// the offsets drop accounting found skipped or expired for it.
fn positions(shared: &Shared, m: &Message) -> (Vec<GroupPosition>, Vec<Gap>) {
    let groups: Vec<GroupPosition> = {
        let engine = shared.lag.engine();
        engine
            .readers(&m.cluster, &m.topic, m.partition)
            .into_iter()
            .map(|gp| GroupPosition {
                group: engine.names(gp).group.to_owned(),
                committed: engine.commits(gp).last().map(|c| c.offset),
            })
            .collect()
    };
    let d = shared.deliveries.view();
    let gaps = d
        .events
        .iter()
        .filter(|w| w.cluster == m.cluster && w.topic == m.topic && w.partition.is_none_or(|p| p == m.partition))
        .flat_map(|w| {
            let skipped = w.skipped_ranges.iter().map(move |r| (w, "skipped", *r));
            let expired = w.expired_ranges.iter().map(move |r| (w, "expired_by_retention", *r));
            skipped.chain(expired)
        })
        .map(|(w, cause, (first, last))| Gap {
            group: w.group.clone(),
            cause,
            first,
            last,
        })
        .collect();
    (groups, gaps)
}
