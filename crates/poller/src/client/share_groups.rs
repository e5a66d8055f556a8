//! Share groups (KIP-932): DescribeShareGroupOffsets (API 90) gives each
//! share-partition's start offset and, from v1 (KIP-1226, Kafka 4.2+), the
//! broker's own share-group lag: records past the start offset not yet
//! acknowledged. v1 is encoded in `streamsight_wire::kafka_admin` (kafka-protocol
//! 0.18 speaks v0 only); a broker without it gets v0, and the snapshot's lag is
//! then an upper bound ([`Snapshot::share_lag`]).

use super::unencoded::ShareGroupOffsetsV1;
use super::*;
use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;

/// Which of a coordinator's `names` are share groups.
fn share_groups(names: &[String], groups: &BTreeMap<String, GroupSnapshot>) -> Vec<String> {
    names
        .iter()
        .filter(|n| groups.get(*n).is_some_and(GroupSnapshot::is_share))
        .cloned()
        .collect()
}

impl ClusterClient {
    /// The start offsets of every share group's partitions (all topics it
    /// reads), per coordinator; a coordinator without API 90 leaves its groups
    /// without them, said in the group's error.
    pub(super) async fn describe_share_offsets(
        &mut self,
        by_coordinator: &BTreeMap<String, Vec<String>>,
        groups: &mut BTreeMap<String, GroupSnapshot>,
        snap: &mut Snapshot,
    ) {
        let (mut work, mut exact) = (Vec::new(), Vec::new());
        for (addr, names) in by_coordinator {
            let share = share_groups(names, groups);
            if share.is_empty() {
                continue;
            }
            if !self.speaks::<DescribeShareGroupOffsetsRequest>(addr).await {
                for n in &share {
                    if let Some(g) = groups.get_mut(n) {
                        g.error = Some(format!(
                            "broker {addr} cannot describe share group offsets (DescribeShareGroupOffsets): no share-group lag"
                        ));
                    }
                }
                continue;
            }
            if self.speaks::<ShareGroupOffsetsV1>(addr).await {
                exact.push((
                    addr.clone(),
                    share
                        .chunks(GROUPS_PER_REQUEST)
                        .map(|chunk| ShareGroupOffsetsV1(chunk.to_vec()))
                        .collect(),
                ));
                continue;
            }
            let requests = share
                .chunks(GROUPS_PER_REQUEST)
                .map(|chunk| {
                    DescribeShareGroupOffsetsRequest::default().with_groups(
                        chunk
                            .iter()
                            .map(|g| {
                                DescribeShareGroupOffsetsRequestGroup::default()
                                    .with_group_id(GroupId(StrBytes::from_string(g.clone())))
                                    .with_topics(None)
                            })
                            .collect(),
                    )
                })
                .collect();
            work.push((addr.clone(), requests));
        }
        for (_, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    snap.errors.push(e.to_string());
                    continue;
                }
            };
            for described in answers.into_iter().flat_map(|a| a.groups) {
                let Some(g) = groups.get_mut(described.group_id.0.as_str()) else {
                    continue;
                };
                if described.error_code != 0 {
                    self.forget_coordinator_on(described.error_code, &g.name);
                    g.error = Some(format!("DescribeShareGroupOffsets error code {}", described.error_code));
                    continue;
                }
                for t in &described.topics {
                    if !self.config.keeps_topic(&t.topic_name.0) {
                        continue;
                    }
                    for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                        g.share_starts.push(CommittedOffset {
                            topic: t.topic_name.0.to_string(),
                            partition: p.partition_index,
                            offset: p.start_offset,
                        });
                    }
                }
            }
        }
        for (_, result) in self.fan_out(exact).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
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
                        "DescribeShareGroupOffsets error code {}{}",
                        described.error_code,
                        described.error_message.map(|m| format!(": {m}")).unwrap_or_default()
                    ));
                    continue;
                }
                for t in &described.topics {
                    if !self.config.keeps_topic(&t.topic_name) {
                        continue;
                    }
                    for p in t.partitions.iter().filter(|p| p.error_code == 0) {
                        g.share_starts.push(CommittedOffset {
                            topic: t.topic_name.clone(),
                            partition: p.partition_index,
                            offset: p.start_offset,
                        });
                        // -1: the broker cannot say (nothing read yet).
                        if p.lag >= 0 {
                            g.share_lags.push(CommittedOffset {
                                topic: t.topic_name.clone(),
                                partition: p.partition_index,
                                offset: p.lag,
                            });
                        }
                    }
                }
            }
        }
    }
}

impl ClusterClient {
    /// Describes each coordinator's share groups with ShareGroupDescribe (API
    /// 77, KIP-932): state, group epoch, members with their epochs, client
    /// ids, hosts and assignments. A coordinator without it leaves its share
    /// groups undescribed: their membership unknown, never "no members".
    pub(super) async fn describe_share_groups(
        &mut self,
        by_coordinator: &BTreeMap<String, Vec<String>>,
        groups: &mut BTreeMap<String, GroupSnapshot>,
        snap: &mut Snapshot,
    ) {
        use kafka_protocol::messages::ShareGroupDescribeRequest;
        let mut work = Vec::new();
        for (addr, names) in by_coordinator {
            let share = share_groups(names, groups);
            if share.is_empty() || !self.speaks::<ShareGroupDescribeRequest>(addr).await {
                continue;
            }
            let requests =
                super::groups::in_batches(&share, |ids| ShareGroupDescribeRequest::default().with_group_ids(ids));
            work.push((addr.clone(), requests));
        }
        for (addr, result) in self.fan_out(work).await {
            let answers = match result {
                Ok(a) => a,
                Err(e) => {
                    let asked = share_groups(&by_coordinator[&addr], groups);
                    super::groups::undescribed(groups, &asked, &format!("ShareGroupDescribe failed: {e}"));
                    snap.errors.push(e.to_string());
                    continue;
                }
            };
            for described in answers.into_iter().flat_map(|a| a.groups) {
                let Some(g) = groups.get_mut(described.group_id.0.as_str()) else {
                    continue;
                };
                if described.error_code != 0 {
                    self.forget_coordinator_on(described.error_code, &g.name);
                    g.error = Some(format!("ShareGroupDescribe error code {}", described.error_code));
                    continue;
                }
                g.state = Some(described.group_state.to_string());
                g.group_epoch = Some(described.group_epoch);
                g.described = true;
                g.members = described
                    .members
                    .iter()
                    .map(|m| MemberSnapshot {
                        member_id: m.member_id.to_string(),
                        client_id: m.client_id.to_string(),
                        host: m.client_host.to_string(),
                        assignment: m
                            .assignment
                            .topic_partitions
                            .iter()
                            .map(|tp| (tp.topic_name.0.to_string(), tp.partitions.clone()))
                            .collect(),
                        member_epoch: Some(m.member_epoch),
                        instance_id: None,
                        tasks: None,
                    })
                    .collect();
            }
        }
    }
}
