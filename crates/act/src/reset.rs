//! An offset reset against a cluster: asked of the broker, planned by the core
//! ([`streamsight_core::reset`]), committed only when told, and recorded as the
//! group's own doing.

use crate::ActError;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use streamsight_core::delivery::Fact;
use streamsight_core::record::{AUDITED_PARTITIONS, ResetAudit};
use streamsight_core::reset::{PartitionState, ResetPlan, ResetTo};
use streamsight_core::{AuditEvent, Millis, ObservationOf, Partition, Record};
use streamsight_poller::{ClusterClient, ClusterConfig, Snapshot};

/// Topics one request may name.
pub const MAX_TOPICS: usize = 1_000;
/// Partitions one reset may move: a group of the largest estates fits.
pub const MAX_PARTITIONS: usize = 100_000;
/// Kafka's own bound on a topic name; group ids are held to it too.
pub const MAX_NAME_BYTES: usize = 249;

/// What to reset: a group, optionally only some topics or partitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetRequest {
    pub group: String,
    /// Empty: every partition of each topic the group has committed offsets on.
    #[serde(default)]
    pub topics: Vec<TopicSelection>,
    pub to: ResetTo,
}

/// A topic, and which of its partitions (none named: all of them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicSelection {
    pub topic: String,
    #[serde(default)]
    pub partitions: Vec<i32>,
}

impl std::str::FromStr for TopicSelection {
    type Err = String;

    /// `orders` or `orders:0,1,2`, as `kafka-consumer-groups --topic` takes it.
    fn from_str(s: &str) -> Result<Self, String> {
        let (topic, partitions) = match s.split_once(':') {
            None => (s, Vec::new()),
            Some((topic, list)) => {
                let partitions = list
                    .split(',')
                    .map(|p| {
                        p.trim()
                            .parse::<i32>()
                            .ok()
                            .filter(|p| *p >= 0)
                            .ok_or_else(|| format!("{p:?} is not a partition number (in {s:?})"))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                (topic, partitions)
            }
        };
        if topic.is_empty() {
            return Err(format!("{s:?} names no topic"));
        }
        Ok(TopicSelection {
            topic: topic.to_owned(),
            partitions,
        })
    }
}

impl ResetRequest {
    /// Bounds every name and count before anything is asked of a broker.
    pub fn check(&self) -> Result<(), ActError> {
        let bad = |why: String| Err(ActError::BadRequest(why));
        if self.group.is_empty() || self.group.len() > MAX_NAME_BYTES {
            return bad(format!("a group id is 1 to {MAX_NAME_BYTES} bytes"));
        }
        if self.topics.len() > MAX_TOPICS {
            return bad(format!("at most {MAX_TOPICS} topics in one reset"));
        }
        let mut partitions = 0usize;
        for t in &self.topics {
            if t.topic.is_empty() || t.topic.len() > MAX_NAME_BYTES {
                return bad(format!("a topic name is 1 to {MAX_NAME_BYTES} bytes"));
            }
            if t.partitions.iter().any(|p| *p < 0) {
                return bad(format!("{}: partitions are numbered from 0", t.topic));
            }
            partitions += t.partitions.len();
        }
        if partitions > MAX_PARTITIONS {
            return bad(format!("at most {MAX_PARTITIONS} partitions in one reset"));
        }
        if let ResetTo::Offset(o) = self.to
            && o < 0
        {
            return bad(format!("offset {o}: offsets are 0 or more"));
        }
        Ok(())
    }
}

/// A plan and the client that asked for it: what executing it needs.
#[derive(Debug)]
pub struct Planned {
    pub plan: ResetPlan,
    client: ClusterClient,
}

/// Asks the cluster about `request.group` and plans the reset. Changes nothing.
pub async fn plan(cluster: &ClusterConfig, request: &ResetRequest, now: Millis) -> Result<Planned, ActError> {
    request.check()?;
    let mut config = cluster.clone();
    // Only this group; every topic (a poll's topic filters are about what is
    // shown, not what a group may be reset on).
    config.groups_allow = vec![request.group.clone()];
    config.groups_deny.clear();
    config.topics_allow.clear();
    config.topics_deny.clear();
    config.groups.clear();
    let mut client = ClusterClient::new(config);
    let snap = client.poll(now, &BTreeSet::from([request.group.clone()])).await;
    if !snap.metadata_ok {
        return Err(ActError::Broker(format!(
            "cluster {} did not answer: {}",
            cluster.name,
            snap.errors.join("; ")
        )));
    }
    let mut states = partition_states(&snap, request)?;
    if let ResetTo::Time(at) = request.to {
        let parts: Vec<(String, i32)> = states.iter().map(|s| (s.topic.clone(), s.partition)).collect();
        let found = client
            .offsets_for_time(&snap, &parts, at)
            .await
            .map_err(|e| ActError::Broker(e.to_string()))?;
        for s in &mut states {
            s.offset_for_time = found.get(&(s.topic.clone(), s.partition)).copied().flatten();
        }
    }
    let group = snap.group(&request.group);
    let exists = group.is_some_and(streamsight_poller::snapshot::GroupSnapshot::exists);
    if !exists && request.topics.is_empty() {
        // Named, and not there: said, never an empty plan.
        return Err(ActError::NotFound(format!(
            "group {} does not exist on cluster {}: the brokers list no such group and it has no committed offsets \
             (`streamsight lag --bootstrap-server …` lists the groups there); to create it at chosen offsets, name them with --topic",
            request.group, cluster.name
        )));
    }
    let mut plan = ResetPlan::new(&cluster.name, &request.group, request.to, &states);
    plan.new_group = !exists;
    plan.state = group.and_then(|g| g.state.clone());
    // Only the broker's positive word that nobody is in the group lets a
    // reset through: a failed describe, ListGroups' "unknown", a type nothing
    // here describes are unknown membership, and refused.
    plan.describe_error = match group {
        Some(g) => g.not_known_empty(),
        None => Some("the coordinator did not describe the group".into()),
    };
    plan.members = group
        .map(|g| {
            g.members
                .iter()
                .map(|m| match (m.client_id.is_empty(), m.host.is_empty()) {
                    // Brokers that do not say (tansu) leave the member id, which
                    // librdkafka starts with the client id.
                    (true, true) => m.member_id.clone(),
                    _ => format!("{} on {} ({})", m.client_id, m.host, m.member_id),
                })
                .collect()
        })
        .unwrap_or_default();
    spans(&mut client, &snap, &mut plan).await;
    Ok(Planned { plan, client })
}

/// The partitions a reset touches, with what the broker says of each.
fn partition_states(snap: &Snapshot, request: &ResetRequest) -> Result<Vec<PartitionState>, ActError> {
    let committed: HashMap<(&str, i32), i64> = snap
        .group(&request.group)
        .into_iter()
        .flat_map(|g| &g.offsets)
        .filter(|o| o.offset >= 0)
        .map(|o| ((o.topic.as_str(), o.partition), o.offset))
        .collect();
    let topics: HashMap<&str, &streamsight_poller::snapshot::TopicSnapshot> =
        snap.topics.iter().map(|t| (t.name.as_str(), t)).collect();
    let state = |topic: &str, p: &streamsight_poller::snapshot::PartitionSnapshot| PartitionState {
        topic: topic.to_owned(),
        partition: p.partition,
        committed: committed.get(&(topic, p.partition)).copied(),
        log_start: p.log_start,
        end: p.end,
        offset_for_time: None,
    };
    let mut out = Vec::new();
    if request.topics.is_empty() {
        // Every partition of each topic the group committed on, as
        // `kafka-consumer-groups --all-topics` does: one it never committed on
        // starts at the target too.
        let committed_topics: BTreeSet<&str> = committed.keys().map(|(t, _)| *t).collect();
        for topic in committed_topics {
            // A committed topic since deleted has nothing to reset to.
            if let Some(t) = topics.get(topic) {
                out.extend(t.partitions.iter().map(|p| state(&t.name, p)));
            }
        }
    }
    for selection in &request.topics {
        let t = topics.get(selection.topic.as_str()).ok_or_else(|| {
            ActError::UnknownTopic(format!("cluster {} has no topic {}", snap.cluster, selection.topic))
        })?;
        if selection.partitions.is_empty() {
            out.extend(t.partitions.iter().map(|p| state(&t.name, p)));
            continue;
        }
        for wanted in &selection.partitions {
            let p = t.partitions.iter().find(|p| p.partition == *wanted).ok_or_else(|| {
                ActError::UnknownTopic(format!(
                    "topic {} has no partition {wanted} (it has {})",
                    t.name,
                    t.partitions.len()
                ))
            })?;
            out.push(state(&t.name, p));
        }
    }
    if out.len() > MAX_PARTITIONS {
        return Err(ActError::BadRequest(format!(
            "{} partitions: at most {MAX_PARTITIONS} in one reset",
            out.len()
        )));
    }
    Ok(out)
}

/// When the skipped or re-read records were written: the batches at both ends.
async fn spans(client: &mut ClusterClient, snap: &Snapshot, plan: &mut ResetPlan) {
    let mut wanted = Vec::new();
    for p in &plan.partitions {
        if let Some((first, last)) = p.span_offsets() {
            wanted.push((p.topic.clone(), p.partition, first));
            wanted.push((p.topic.clone(), p.partition, last));
        }
    }
    let batches = client.batch_times(snap, &wanted).await;
    let mut by_partition: HashMap<(&str, i32), Vec<&streamsight_poller::snapshot::BatchTime>> = HashMap::new();
    for b in &batches {
        by_partition.entry((b.topic.as_str(), b.partition)).or_default().push(b);
    }
    for p in &mut plan.partitions {
        let Some((first, last)) = p.span_offsets() else {
            continue;
        };
        let read = by_partition
            .get(&(p.topic.as_str(), p.partition))
            .map_or(&[][..], Vec::as_slice);
        p.first_time_ms = record_time(read, first, Edge::First);
        p.last_time_ms = record_time(read, last, Edge::Last);
    }
}

/// Which end of a span a record is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Edge {
    First,
    Last,
}

/// When the record at `offset` was written, from batch headers alone. The
/// batch that begins at it says exactly (its first timestamp); one that only
/// holds it says a bound: its first timestamp for the span's first record,
/// its largest for the last. Brokers that build a batch per Fetch from the
/// offset asked (tansu) answer one from the first offset that runs to the
/// log's newest record, so the last record's time is never read from the
/// batch read for the first (whose largest timestamp is the log's newest).
fn record_time(batches: &[&streamsight_poller::snapshot::BatchTime], offset: i64, edge: Edge) -> Option<i64> {
    let holding = batches
        .iter()
        .filter(|b| (b.base_offset..=b.last_offset).contains(&offset))
        // The tightest: the one that begins nearest the record.
        .max_by_key(|b| b.base_offset)?;
    Some(if holding.base_offset == offset || edge == Edge::First {
        holding.first_timestamp
    } else {
        holding.last_timestamp
    })
}

/// Kafka's answers to an admin commit that mean the group has members.
const GROUP_BUSY: [(i16, &str); 4] = [
    (22, "ILLEGAL_GENERATION"),
    (25, "UNKNOWN_MEMBER_ID"),
    (27, "REBALANCE_IN_PROGRESS"),
    (110, "STALE_MEMBER_EPOCH"),
];

/// Commits the plan's targets, unless the plan is refused. Every partition
/// the broker did not accept is named in the error.
pub async fn execute(planned: &mut Planned) -> Result<(), ActError> {
    if let Some(why) = planned.plan.refusal() {
        return Err(ActError::Refused(why));
    }
    let moves: Vec<(String, i32, i64)> = planned
        .plan
        .moves()
        .map(|p| (p.topic.clone(), p.partition, p.target))
        .collect();
    if moves.is_empty() {
        return Ok(());
    }
    let answers = planned
        .client
        .commit_offsets(&planned.plan.group, &moves)
        .await
        .map_err(|e| ActError::Broker(e.to_string()))?;
    let failed: Vec<String> = answers
        .iter()
        .filter(|(_, code)| *code != 0)
        .map(|((t, p), code)| match GROUP_BUSY.iter().find(|(c, _)| c == code) {
            Some((_, name)) => format!("{t}/{p}: {name} (the group has live members again)"),
            None => format!("{t}/{p}: error code {code}"),
        })
        .collect();
    if failed.is_empty() {
        Ok(())
    } else if answers.iter().any(|(_, c)| GROUP_BUSY.iter().any(|(b, _)| b == c)) {
        Err(ActError::Refused(format!(
            "the broker refused the commit: {}",
            failed.join("; ")
        )))
    } else {
        Err(ActError::Broker(format!(
            "the broker did not commit {} of {} partitions: {}",
            failed.len(),
            answers.len(),
            failed.join("; ")
        )))
    }
}

/// What an executed reset leaves in the collector's log: each partition's
/// new position as the group's own reset (for the engine), each forward jump
/// as skipped offsets (for drop accounting), and the audit record.
pub fn records(plan: &ResetPlan, key: &str, at: Millis) -> Vec<Record> {
    let cluster: Arc<str> = plan.cluster.as_str().into();
    let group: Arc<str> = plan.group.as_str().into();
    let mut out = Vec::new();
    for p in plan.moves() {
        out.push(Record::Observation {
            at,
            observation: ObservationOf::OffsetsReset {
                group: group.clone(),
                partition: Partition {
                    cluster: cluster.clone(),
                    topic: p.topic.as_str().into(),
                    partition: p.partition,
                },
                offset: p.target,
            },
        });
        if p.skip > 0
            && let Some((first, last)) = p.span_offsets()
        {
            out.push(Record::Delivery {
                at,
                fact: Box::new(Fact::Skipped {
                    cluster: plan.cluster.clone(),
                    group: plan.group.clone(),
                    topic: p.topic.clone(),
                    partition: p.partition,
                    first_offset: first,
                    last_offset: last,
                }),
            });
        }
    }
    out.push(Record::Audit {
        at,
        event: AuditEvent::OffsetsReset(Box::new(ResetAudit {
            cluster: plan.cluster.clone(),
            group: plan.group.clone(),
            key: key.to_owned(),
            to: plan.to,
            moved: plan
                .moves()
                .take(AUDITED_PARTITIONS)
                .map(|p| (p.topic.clone(), p.partition, p.committed, p.target))
                .collect(),
            partitions: plan.moves().count(),
            skipped: plan.skip,
            reread: plan.reread,
        })),
    });
    out
}

#[cfg(test)]
mod tests {
    use streamsight_poller::snapshot::BatchTime;

    fn batch(base: i64, last: i64, first_ts: i64, max_ts: i64) -> BatchTime {
        BatchTime {
            topic: "orders".into(),
            partition: 0,
            base_offset: base,
            last_offset: last,
            first_timestamp: first_ts,
            last_timestamp: max_ts,
            log_append_time: false,
            control: false,
            unreadable: None,
        }
    }

    #[test]
    fn a_span_is_dated_by_the_batches_that_begin_at_its_ends() {
        // tansu's answers: a batch from each offset asked to the log's end.
        let (t_skipped, t_newest) = (1_000, 9_000);
        let from_first = batch(90, 300, t_skipped, t_newest);
        let from_last = batch(94, 300, t_skipped, t_newest);
        let read = [&from_first, &from_last];
        assert_eq!(super::record_time(&read, 90, super::Edge::First), Some(t_skipped));
        assert_eq!(super::record_time(&read, 94, super::Edge::Last), Some(t_skipped));
        // Kafka's: the producer's batch holding both, written at once.
        let produced = batch(80, 99, 1_000, 1_003);
        assert_eq!(super::record_time(&[&produced], 90, super::Edge::First), Some(1_000));
        assert_eq!(super::record_time(&[&produced], 94, super::Edge::Last), Some(1_003));
        assert_eq!(super::record_time(&[&produced], 100, super::Edge::Last), None);
    }

    use super::*;

    #[test]
    fn topic_selections_parse_as_kafka_consumer_groups_takes_them() {
        let t: TopicSelection = "orders:0,2".parse().unwrap();
        assert_eq!((t.topic.as_str(), t.partitions), ("orders", vec![0, 2]));
        assert!("orders".parse::<TopicSelection>().unwrap().partitions.is_empty());
        assert!("orders:x".parse::<TopicSelection>().unwrap_err().contains("\"x\""));
        assert!("orders:-1".parse::<TopicSelection>().is_err());
        assert!(":1".parse::<TopicSelection>().is_err());
    }

    #[test]
    fn requests_are_bounded_before_a_broker_is_asked() {
        let ok = ResetRequest {
            group: "g".into(),
            topics: vec![],
            to: ResetTo::Latest,
        };
        assert!(ok.check().is_ok());
        let long = ResetRequest {
            group: "g".repeat(250),
            ..ok.clone()
        };
        assert!(matches!(long.check(), Err(ActError::BadRequest(_))));
        let many = ResetRequest {
            topics: vec![
                TopicSelection {
                    topic: "t".into(),
                    partitions: vec![0; MAX_PARTITIONS + 1]
                };
                1
            ],
            ..ok.clone()
        };
        assert!(many.check().is_err());
        let negative = ResetRequest {
            to: ResetTo::Offset(-2),
            ..ok
        };
        assert!(negative.check().unwrap_err().to_string().contains("-2"));
    }

    #[test]
    fn an_executed_reset_is_recorded_as_the_groups_own_with_what_it_skipped() {
        let states = [
            PartitionState {
                topic: "orders".into(),
                partition: 0,
                committed: Some(100),
                log_start: Some(0),
                end: Some(1_000),
                offset_for_time: None,
            },
            PartitionState {
                topic: "orders".into(),
                partition: 1,
                committed: Some(1_000),
                log_start: Some(0),
                end: Some(1_000),
                offset_for_time: None,
            },
        ];
        let plan = ResetPlan::new("c", "g", ResetTo::Latest, &states);
        let records = records(&plan, "k1", Millis(5));
        // Partition 1 does not move: only partition 0's position and skip.
        assert!(matches!(
            &records[0],
            Record::Observation {
                observation: ObservationOf::OffsetsReset { offset: 1_000, .. },
                ..
            }
        ));
        assert!(matches!(&records[1], Record::Delivery { fact, .. }
            if matches!(**fact, Fact::Skipped { first_offset: 100, last_offset: 999, .. })));
        let Record::Audit {
            event: AuditEvent::OffsetsReset(audit),
            ..
        } = &records[2]
        else {
            panic!("{records:?}");
        };
        assert_eq!((audit.moved.len(), audit.skipped, audit.key.as_str()), (1, 900, "k1"));
        assert_eq!(records.len(), 3);
    }
}
