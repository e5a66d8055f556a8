//! Streams groups (KIP-1071, Kafka 4.2+): Kafka Streams applications with
//! `group.protocol=streams`, whose assignment the broker computes. Classic
//! DescribeGroups does not know them; StreamsGroupDescribe (API 89, encoded in
//! `streamsight_wire::kafka_admin`: kafka-protocol 0.18 lacks it) gives their
//! state, epochs, topology and members with their tasks. Their committed
//! offsets are fetched as any group's (OffsetFetch).

use super::unencoded::StreamsGroupDescribeV0;
use super::*;
use crate::snapshot::{StreamsSnapshot, StreamsTasks, Subtopology};
use streamsight_wire::kafka_admin;

/// Which of a coordinator's `names` are streams groups.
fn streams_groups(names: &[String], groups: &BTreeMap<String, GroupSnapshot>) -> Vec<String> {
    names
        .iter()
        .filter(|n| {
            groups
                .get(*n)
                .is_some_and(|g| g.group_type.as_deref() == Some("streams"))
        })
        .cloned()
        .collect()
}

/// A member's assignment as topic partitions: a task `(s, p)` reads
/// partition `p` of each of sub-topology `s`'s inputs.
fn task_partitions(streams: &StreamsSnapshot, tasks: &[(String, Vec<i32>)]) -> Vec<(String, Vec<i32>)> {
    let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (subtopology, partitions) in tasks {
        for topic in streams.inputs_of(subtopology) {
            by_topic.entry(topic.to_owned()).or_default().extend(partitions);
        }
    }
    by_topic
        .into_iter()
        .map(|(t, mut ps)| {
            ps.sort_unstable();
            ps.dedup();
            (t, ps)
        })
        .collect()
}

fn snapshot_of(described: &kafka_admin::StreamsGroup) -> StreamsSnapshot {
    let names = |ts: &[kafka_admin::TopicInfo]| ts.iter().map(|t| t.name.clone()).collect();
    StreamsSnapshot {
        assignment_epoch: described.assignment_epoch,
        topology_epoch: described.topology.as_ref().map(|t| t.epoch),
        subtopologies: described
            .topology
            .iter()
            .flat_map(|t| t.subtopologies.iter().flatten())
            .map(|s| Subtopology {
                id: s.subtopology_id.clone(),
                source_topics: s.source_topics.clone(),
                repartition_source_topics: names(&s.repartition_source_topics),
                repartition_sink_topics: s.repartition_sink_topics.clone(),
                changelog_topics: names(&s.state_changelog_topics),
            })
            .collect(),
    }
}

impl ClusterClient {
    /// Describes each coordinator's streams groups with StreamsGroupDescribe.
    /// A coordinator without it leaves them to classic DescribeGroups, which
    /// says it does not know them: membership unknown, never "no members".
    pub(super) async fn describe_streams_groups(
        &mut self,
        by_coordinator: &BTreeMap<String, Vec<String>>,
        groups: &mut BTreeMap<String, GroupSnapshot>,
        snap: &mut Snapshot,
    ) {
        let mut work = Vec::new();
        for (addr, names) in by_coordinator {
            let streams = streams_groups(names, groups);
            if streams.is_empty() || !self.speaks::<StreamsGroupDescribeV0>(addr).await {
                continue;
            }
            let requests = streams
                .chunks(GROUPS_PER_REQUEST)
                .map(|chunk| StreamsGroupDescribeV0(chunk.to_vec()))
                .collect();
            work.push((addr.clone(), requests));
        }
        for (addr, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    let asked = streams_groups(&by_coordinator[&addr], groups);
                    super::groups::undescribed(groups, &asked, &format!("StreamsGroupDescribe failed: {e}"));
                    snap.errors.push(e.to_string());
                    continue;
                }
            };
            for described in answers.into_iter().flat_map(|a| a.0.groups) {
                let Some(g) = groups.get_mut(described.group_id.as_str()) else {
                    continue;
                };
                if described.error_code != 0 {
                    self.forget_coordinator_on(described.error_code, &g.name);
                    g.error = Some(format!(
                        "StreamsGroupDescribe error code {}{}",
                        described.error_code,
                        described
                            .error_message
                            .as_ref()
                            .map(|m| format!(": {m}"))
                            .unwrap_or_default()
                    ));
                    continue;
                }
                let streams = snapshot_of(&described);
                g.state = Some(described.group_state.clone());
                g.group_epoch = Some(described.group_epoch);
                g.described = true;
                g.members = described
                    .members
                    .iter()
                    .map(|m| MemberSnapshot {
                        member_id: m.member_id.clone(),
                        client_id: m.client_id.clone(),
                        host: m.client_host.clone(),
                        assignment: task_partitions(&streams, &m.assignment.active_tasks),
                        member_epoch: Some(m.member_epoch),
                        instance_id: m.instance_id.clone(),
                        tasks: Some(StreamsTasks {
                            process_id: m.process_id.clone(),
                            member_epoch: m.member_epoch,
                            active: m.assignment.active_tasks.clone(),
                            standby: m.assignment.standby_tasks.clone(),
                            warmup: m.assignment.warmup_tasks.clone(),
                        }),
                    })
                    .collect();
                g.streams = Some(streams);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_reads_its_partition_of_every_input_of_its_subtopology() {
        let streams = StreamsSnapshot {
            assignment_epoch: 3,
            topology_epoch: Some(0),
            subtopologies: vec![
                Subtopology {
                    id: "0".into(),
                    source_topics: vec!["words".into()],
                    repartition_sink_topics: vec!["app-by-value-repartition".into()],
                    ..Subtopology::default()
                },
                Subtopology {
                    id: "1".into(),
                    repartition_source_topics: vec!["app-by-value-repartition".into()],
                    changelog_topics: vec!["app-count-changelog".into()],
                    ..Subtopology::default()
                },
            ],
        };
        let tasks = vec![("0".to_owned(), vec![1, 0]), ("1".to_owned(), vec![0])];
        assert_eq!(
            task_partitions(&streams, &tasks),
            vec![
                ("app-by-value-repartition".to_owned(), vec![0]),
                ("words".to_owned(), vec![0, 1])
            ]
        );
        assert_eq!(streams.role_of("words"), Some("source"));
        assert_eq!(streams.role_of("app-by-value-repartition"), Some("repartition"));
        assert_eq!(streams.role_of("app-count-changelog"), Some("changelog"));
        assert_eq!(streams.role_of("elsewhere"), None);
    }
}
