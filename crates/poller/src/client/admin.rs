//! What acting on a cluster asks beyond a poll: offsets for a time, the record
//! batches at given offsets, and committing a group's offsets as an
//! administrator (no member, generation -1: Kafka accepts it only while the
//! group has no members, as `kafka-consumer-groups --reset-offsets` relies on).
//! Each is batched per leader or coordinator, like the poll.

use super::*;
use crate::snapshot::BatchTime;
use kafka_protocol::messages::OffsetCommitRequest;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};

/// OffsetCommit v10+ names topics by id; this client names them.
pub(super) const OFFSET_COMMIT_MAX_VERSION: i16 = 9;

/// A partition and where it is asked about.
pub type PartitionOffset = (String, i32, i64);

impl ClusterClient {
    /// The first offset of each partition whose record was written at or after
    /// `at` (ListOffsets by timestamp, one request per leader of `snap`), `None`
    /// where no record is that recent. Partitions whose leader failed are missing.
    pub async fn offsets_for_time(
        &mut self,
        snap: &Snapshot,
        partitions: &[(String, i32)],
        at: Millis,
    ) -> Result<HashMap<(String, i32), Option<i64>>, KafkaError> {
        let leaders = leaders(snap);
        let mut by_leader: BTreeMap<i32, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        for (topic, partition) in partitions {
            let leader = *leaders
                .get(&(topic.as_str(), *partition))
                .ok_or_else(|| KafkaError::Protocol {
                    broker: self.config.name.clone(),
                    reason: format!("{topic}/{partition} has no known leader"),
                })?;
            by_leader
                .entry(leader)
                .or_default()
                .entry(topic)
                .or_default()
                .push(*partition);
        }
        let mut work = Vec::new();
        for (leader, topics) in &by_leader {
            let addr = self.leader_addr(*leader)?;
            let request = list_offsets(topics, at.0);
            work.push((addr, vec![request]));
        }
        let mut out = HashMap::new();
        for (addr, result) in self.fan_out(work).await {
            for answer in result? {
                for t in answer.topics {
                    for p in t.partitions {
                        if p.error_code != 0 {
                            return Err(KafkaError::Protocol {
                                broker: addr,
                                reason: format!(
                                    "ListOffsets by time for {}/{} answered error code {}",
                                    t.name.0.as_str(),
                                    p.partition_index,
                                    p.error_code
                                ),
                            });
                        }
                        // No record at or after the time: Kafka answers offset
                        // -1; tansu 0.6.0 offset 0, both with timestamp -1. A
                        // record found comes with its own timestamp.
                        let found = p.offset >= 0 && p.timestamp >= 0;
                        out.insert((t.name.0.to_string(), p.partition_index), found.then_some(p.offset));
                    }
                }
            }
        }
        Ok(out)
    }

    /// The record batch holding each offset (its header: offsets and times),
    /// read with as few Fetch requests as the leaders allow. Offsets past the
    /// end or already deleted are missing from the answer.
    pub async fn batch_times(&mut self, snap: &Snapshot, wanted: &[PartitionOffset]) -> Vec<BatchTime> {
        let leaders = leaders(snap);
        let mut rounds: BTreeMap<i32, Vec<record_times::Round>> = BTreeMap::new();
        for (topic, partition, offset) in wanted {
            let Some(&leader) = leaders.get(&(topic.as_str(), *partition)) else {
                continue;
            };
            record_times::place(rounds.entry(leader).or_default(), (topic.clone(), *partition), *offset);
        }
        self.read_batches(rounds).await.0
    }

    /// Commits `offsets` for `group` as an administrator. The answer is each
    /// partition's error code (0: committed); a group with live members answers
    /// them all with an error, which is the broker's refusal, not ours.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        offsets: &[PartitionOffset],
    ) -> Result<Vec<((String, i32), i16)>, KafkaError> {
        let mut snap = Snapshot::new(&self.config.name, Millis(0));
        if !self.coordinators.contains_key(group) {
            if self.brokers.is_empty() {
                self.metadata(&mut snap).await?;
            }
            self.find_coordinators(std::iter::once(&group.to_owned()), &mut snap)
                .await;
        }
        let addr = self
            .coordinators
            .get(group)
            .and_then(|id| self.brokers.get(id))
            .cloned()
            .ok_or_else(|| KafkaError::Protocol {
                broker: self.config.name.clone(),
                reason: format!("no coordinator found for group {group}: {}", snap.errors.join("; ")),
            })?;
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for (topic, partition, offset) in offsets {
            topics.entry(topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(group.to_owned())))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::from_static_str(""))
            .with_retention_time_ms(-1)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.to_owned())))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let mut answers = match self.fan_out(vec![(addr, vec![request])]).await.pop() {
            Some((_, result)) => result?,
            None => Vec::new(),
        };
        let Some(answer) = answers.pop() else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for t in answer.topics {
            for p in t.partitions {
                self.forget_coordinator_on(p.error_code, group);
                out.push(((t.name.0.to_string(), p.partition_index), p.error_code));
            }
        }
        Ok(out)
    }

    fn leader_addr(&self, leader: i32) -> Result<String, KafkaError> {
        self.brokers.get(&leader).cloned().ok_or_else(|| KafkaError::Protocol {
            broker: self.config.name.clone(),
            reason: format!("leader {leader} is not a known broker"),
        })
    }
}

/// Each partition's leader, where it has one.
fn leaders(snap: &Snapshot) -> HashMap<(&str, i32), i32> {
    snap.topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .filter(|p| p.leader >= 0)
                .map(move |p| ((t.name.as_str(), p.partition), p.leader))
        })
        .collect()
}
